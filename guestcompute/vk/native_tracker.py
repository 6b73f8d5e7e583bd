"""The C walker's hazard tracker (gc_tracker in native/command_interpreter.c),
with the Python interface of sync.HazardTracker, which the Python walker
runs: a recording's BarrierState may hold either.

The walker updates it while it records a stream; Python reads and changes
it between walks (after a flush). The C struct is freed when this object
is collected.
"""
from __future__ import annotations

from vulkan import ffi

from .sync import COMPUTE, GUEST_ACCESS, GUEST_STAGES, SHADER_WRITE

# The part of gc_tracker Python reads and writes, in order, every field a
# 64-bit integer (the loader checks the library's gc_tracker_fields).
TRACKER_FIELDS = ("stages", "access", "dst_stages", "dst_access", "dispatch_stages", "dispatch_access",
                  "barriers", "hazard_barriers", "covered_stages", "covered_access")
_STAGES, _ACCESS = TRACKER_FIELDS.index("stages"), TRACKER_FIELDS.index("access")


def tracker_offsets() -> tuple:
    """TRACKER_FIELDS in the shape of NativeLibrary.layout("tracker")."""
    return tuple((name, i * 8, 8) for i, name in enumerate(TRACKER_FIELDS)), len(TRACKER_FIELDS) * 8


class NativeTracker:
    """See the module notes. ``pointer``: the gc_tracker the walker gets;
    ``dispatch_stages`` / ``dispatch_access``: what a tracked dispatch adds
    (sync.COMPUTE and SHADER_WRITE, given to the C side here)."""
    __slots__ = ("pointer", "_lib", "_state")

    def __init__(self, lib, dst_stages: int = GUEST_STAGES, dst_access: int = GUEST_ACCESS):
        self._lib = lib
        pointer = lib.tracker_new(dst_stages, dst_access, COMPUTE, SHADER_WRITE)
        if pointer == ffi.NULL:
            raise MemoryError("no memory for a hazard tracker")
        self.pointer = ffi.gc(pointer, lib.tracker_free)
        self._state = ffi.cast("uint64_t *", pointer)      # TRACKER_FIELDS, in order

    def needs_barrier(self, reads, writes) -> bool:
        reads, writes = list(reads), list(writes)
        return bool(self._lib.tracker_needs_barrier(self.pointer, reads, len(reads), writes, len(writes)))

    def hazard_sources(self) -> tuple:
        return self.dispatch_stages | self.stages, self.dispatch_access | self.access

    def covering(self, src_stage: int, src_access: int) -> tuple:
        if src_stage:
            src_stage |= self._state[_STAGES]
            src_access |= self._state[_ACCESS]
        return src_stage, src_access

    def barrier_recorded(self, src_stage: int, src_access: int) -> None:
        self.barriers += 1
        self.covered_stages |= src_stage
        self.covered_access |= src_access
        self._lib.tracker_after_barrier(self.pointer)

    def after_barrier(self) -> None:
        self._lib.tracker_after_barrier(self.pointer)

    def touch(self, reads, writes, stages: int = COMPUTE, access: int = SHADER_WRITE) -> None:
        reads, writes = list(reads), list(writes)
        if not self._lib.tracker_touch(self.pointer, reads, len(reads), writes, len(writes), stages, access):
            raise MemoryError("no memory for the hazard tracker's keys")

    def written_keys(self) -> frozenset:
        return self._keys_of(1)

    def read_keys(self) -> frozenset:
        return self._keys_of(0)

    def _keys_of(self, written: int) -> frozenset:
        n = self._lib.tracker_keys(self.pointer, written, ffi.NULL, 0)
        out = ffi.new("uint64_t[]", max(n, 1))
        self._lib.tracker_keys(self.pointer, written, out, n)
        return frozenset(out[0:n])


def _state_property(index: int, name: str):
    def get(self):
        return self._state[index]

    def set(self, value):
        self._state[index] = value
    return property(get, set, doc=f"gc_tracker.{name}")


for _index, _name in enumerate(TRACKER_FIELDS):
    setattr(NativeTracker, _name, _state_property(_index, _name))
