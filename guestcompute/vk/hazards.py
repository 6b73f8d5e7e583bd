"""Which guest dispatches need a barrier between them.

Tracks, per buffer uid, whether it was written or read since the last
barrier. A dispatch that reads something written (RAW), writes something
read (WAR) or writes something written (WAW) since then needs one; the
barrier is a single global VkMemoryBarrier (compute → compute), which is as
cheap as buffer barriers on every driver we know and covers all buffers,
so the tracker simply starts over after it.
"""
from __future__ import annotations


class HazardTracker:
    __slots__ = ("written", "read")

    def __init__(self):
        self.written: set = set()
        self.read: set = set()

    def needs_barrier(self, reads, writes) -> bool:
        w, r = self.written, self.read
        for uid in reads:
            if uid in w:
                return True
        for uid in writes:
            if uid in w or uid in r:
                return True
        return False

    def after_barrier(self) -> None:
        self.written.clear()
        self.read.clear()

    def touch(self, reads, writes) -> None:
        self.read.update(reads)
        self.written.update(writes)
