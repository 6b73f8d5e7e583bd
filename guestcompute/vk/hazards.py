"""Which guest commands need a barrier between them.

Tracks, per hazard key (``Buffer.hazard_keys``: a guest buffer, or a byte
range of a host VkBuffer), whether it was written or read since the last
barrier, and the pipeline stages (and write accesses) that did it. A
command that reads something written (RAW), writes something read (WAR) or
writes something written (WAW) since then needs one; the barrier is a
single global VkMemoryBarrier from the accumulated stages, which is as
cheap as buffer barriers on every driver we know and covers all buffers.

Every barrier the recorder emits makes its second scope cover all the
stages guest work itself uses — compute shaders, transfers (parameter
updates, staging copies) and indirect-argument reads — so after any
barrier the tracker may simply start over. Host hooks that run in other
stages are handled by the recorder (see ``Recorder.host``).
"""
from __future__ import annotations

import vulkan as vk

_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_SHADER_WRITE = vk.VK_ACCESS_SHADER_WRITE_BIT


class HazardTracker:
    __slots__ = ("written", "read", "stages", "access")

    def __init__(self):
        self.written: set = set()
        self.read: set = set()
        self.stages = 0      # stages that touched anything since the last barrier
        self.access = 0      # write accesses made since the last barrier

    def needs_barrier(self, reads, writes) -> bool:
        w = self.written
        return not (w.isdisjoint(reads) and w.isdisjoint(writes) and self.read.isdisjoint(writes))

    def after_barrier(self) -> None:
        self.written.clear()
        self.read.clear()
        self.stages = 0
        self.access = 0

    def touch(self, reads, writes, stages: int = _COMPUTE, access: int = _SHADER_WRITE) -> None:
        self.read.update(reads)
        self.written.update(writes)
        self.stages |= stages
        if writes:
            self.access |= access
