"""The C walker's hazard tracker (gc_tracker in native/command_interpreter.c),
with the Python interface of sync.HazardTracker, which the Python walker
runs: a recording's BarrierState may hold either.

The walker updates it while it records a stream; Python reads and changes
it between walks (after a flush). The C struct is freed when this object
is collected.
"""
from __future__ import annotations

from vulkan import ffi

from .sync import COMPUTE, DISPATCH_ACCESS, DISPATCH_STAGES, GUEST_ACCESS, GUEST_STAGES, SHADER_WRITE, TrackerRules

# The part of gc_tracker Python reads and writes, in order, every field a
# 64-bit integer (the loader checks the library's gc_tracker_fields).
TRACKER_FIELDS = ("stages", "access", "dst_stages", "dst_access", "dispatch_stages", "dispatch_access",
                  "barriers", "hazard_barriers", "covered_stages", "covered_access", "near_stages", "near_access",
                  "narrowed")
_STAGES, _ACCESS = TRACKER_FIELDS.index("stages"), TRACKER_FIELDS.index("access")
_DST_STAGES, _DST_ACCESS = TRACKER_FIELDS.index("dst_stages"), TRACKER_FIELDS.index("dst_access")
# A new tracker's fields: nothing tracked; a tracked dispatch adds COMPUTE /
# SHADER_WRITE; a hazard barrier before a direct one reaches compute shaders.
_START = [0] * len(TRACKER_FIELDS)
_START[TRACKER_FIELDS.index("dispatch_stages")] = COMPUTE
_START[TRACKER_FIELDS.index("dispatch_access")] = SHADER_WRITE
_START[TRACKER_FIELDS.index("near_stages")] = DISPATCH_STAGES
_START[TRACKER_FIELDS.index("near_access")] = DISPATCH_ACCESS


def tracker_offsets() -> tuple:
    """TRACKER_FIELDS in the shape of NativeLibrary.layout("tracker")."""
    return tuple((name, i * 8, 8) for i, name in enumerate(TRACKER_FIELDS)), len(TRACKER_FIELDS) * 8


class NativeTracker(TrackerRules):
    """See the module notes. ``pointer``: the gc_tracker the walker gets,
    made on first use (a recording that never needs one — a program replay
    with nothing tracked yet — pays nothing for it); ``dispatch_stages`` /
    ``dispatch_access``: what a tracked dispatch adds (sync.COMPUTE and
    SHADER_WRITE, given to the C side here)."""
    __slots__ = ("_pointer", "_lib", "_state", "_dst", "_early")

    def __init__(self, lib, dst_stages: int = GUEST_STAGES, dst_access: int = GUEST_ACCESS):
        self._lib = lib
        self._dst = (dst_stages, dst_access)
        self._pointer = None
        # Until the C struct exists: the key sets touched so far (a replay's
        # one touch, cleared by the exit barrier, never needs the struct)...
        self._early: list = []
        # ...and its fields as they would be.
        self._state = state = _START[:]
        state[_DST_STAGES], state[_DST_ACCESS] = dst_stages, dst_access

    @property
    def pointer(self):
        if self._pointer is None:
            lib = self._lib
            pointer = lib.tracker_new(*self._dst, COMPUTE, SHADER_WRITE)
            if pointer == ffi.NULL:
                raise MemoryError("no memory for a hazard tracker")
            state = ffi.cast("uint64_t *", pointer)      # TRACKER_FIELDS, in order
            for i, value in enumerate(self._state):       # what was set before it existed
                state[i] = value
            self._pointer = ffi.gc(pointer, lib.tracker_free)
            self._state = state
            for reads, writes in self._early:
                self._touch(reads, writes, 0, 0)      # their stages and access are in the fields already
            self._early.clear()
        return self._pointer

    def needs_barrier(self, reads, writes) -> bool:
        if self._pointer is None:
            if not self._early:            # nothing tracked yet
                return False
            return self.conflict(self._early_keys(1), self._early_keys(0), reads, writes)
        (reads, nr), (writes, nw) = key_array(reads), key_array(writes)
        return bool(self._lib.tracker_needs_barrier(self._pointer, reads, nr, writes, nw))

    def after_barrier(self) -> None:
        if self._pointer is None:
            self._early.clear()
            self._state[_STAGES] = self._state[_ACCESS] = 0
            return
        self._lib.tracker_after_barrier(self._pointer)

    def touch(self, reads, writes, stages: int = COMPUTE, access: int = SHADER_WRITE) -> None:
        if self._pointer is None:          # as gc_tracker_touch does, kept until the struct exists
            self._early.append((reads, writes))
            self._state[_STAGES] |= stages
            if writes:
                self._state[_ACCESS] |= access
            return
        self._touch(reads, writes, stages, access)

    def _touch(self, reads, writes, stages: int, access: int) -> None:
        (reads, nr), (writes, nw) = key_array(reads), key_array(writes)
        if not self._lib.tracker_touch(self._pointer, reads, nr, writes, nw, stages, access):
            raise MemoryError("no memory for the hazard tracker's keys")

    def written_keys(self) -> frozenset:
        return self._keys_of(1)

    def read_keys(self) -> frozenset:
        return self._keys_of(0)

    def _early_keys(self, written: int) -> frozenset:
        return frozenset(k for entry in self._early for k in entry[written])

    def _keys_of(self, written: int) -> frozenset:
        if self._pointer is None:
            return self._early_keys(written)
        n = self._lib.tracker_keys(self._pointer, written, ffi.NULL, 0)
        out = ffi.new("uint64_t[]", max(n, 1))
        self._lib.tracker_keys(self._pointer, written, out, n)
        return frozenset(out[0:n])


# Key sets a program passes at every replay (its reads and writes, the same
# frozensets each time), as C arrays made once: converting a few dozen keys
# costs about a microsecond per call. Bounded, oldest first; held by the
# frozenset itself, so an equal set made elsewhere shares the entry.
_ARRAYS: dict = {}
_ARRAYS_LIMIT = 256


def key_array(keys) -> tuple:
    """(uint64_t array or NULL, count) of hazard keys ``keys``."""
    if not keys:
        return ffi.NULL, 0
    if keys.__class__ is frozenset:
        found = _ARRAYS.get(keys)
        if found is None:
            found = _ARRAYS[keys] = (ffi.new("uint64_t[]", list(keys)), len(keys))
            if len(_ARRAYS) > _ARRAYS_LIMIT:
                try:
                    del _ARRAYS[next(iter(_ARRAYS))]
                except (KeyError, RuntimeError, StopIteration):     # another thread got there first
                    pass
        return found
    keys = list(keys)
    return keys, len(keys)


def _state_property(index: int, name: str):
    def get(self):
        return self._state[index]

    def set(self, value):
        self._state[index] = value
    return property(get, set, doc=f"gc_tracker.{name}")


for _index, _name in enumerate(TRACKER_FIELDS):
    setattr(NativeTracker, _name, _state_property(_index, _name))
