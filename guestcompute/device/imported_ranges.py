"""Hazard keys for imports of a host's VkBuffers.

Two imports of overlapping byte ranges of one VkBuffer are the same memory,
so the hazard tracker must see them as such; imports of disjoint ranges
(one vertex buffer shared out in pieces) are not, and need no barrier
between them. An import of a guest tensor's own VkBuffer is that tensor's
memory: it lists the guest buffer's key too.
"""
from __future__ import annotations

import threading


from ..vk.memory import next_uid
from ..vk.sync import buffer_hazard_key, handle_value, range_hazard_key


class ImportedRanges:
    """Every imported byte range per VkBuffer handle value, with its key."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ranges: dict = {}    # VkBuffer handle value -> [(start, end, hazard key)]

    def hazard_keys(self, handle, start: int, end: int, guest: bool = False) -> tuple:
        """Hazard keys of an import of bytes [start, end) of VkBuffer ``handle``:
        the key of that range (the same for every import of exactly that
        range), then the keys of earlier imports whose ranges overlap it,
        then (``guest``: the VkBuffer is a guest tensor's) the guest buffer's.

        Only the later of two overlapping imports lists the other, and its
        ops both check and mark those keys: whichever of the two is written
        first, the other's access then meets a key the tracker saw, so the
        barrier is never missed. Keys are never reused, so a range stays
        known for the context's life; a handle value the host reuses for a
        new buffer can only add barriers."""
        handle_key = handle_value(handle)
        with self._lock:
            ranges = self._ranges.setdefault(handle_key, [])
            own, overlapping = None, []
            for lo, hi, key in ranges:
                if (lo, hi) == (start, end):
                    own = key
                elif lo < end and start < hi:
                    overlapping.append(key)
            if own is None:
                own = range_hazard_key(next_uid())
                ranges.append((start, end, own))
            if guest:
                overlapping.append(buffer_hazard_key(handle_key))
            return (own, *overlapping)
