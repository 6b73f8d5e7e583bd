"""Op calls remembered by the identity of their arguments: the context's
call memo (``ctx.call_memo``), the one memo of op calls.

A renderer records the same ops on the same tensors every frame. A call's
plan (validation, broadcasting, kernel choice, push-constant bytes,
workgroup counts) depends only on its arguments — tensors' shapes, strides,
offsets, dtypes and buffers, images' formats and extents, the scalars — so
a call repeating an earlier one with the *same objects*, none reallocated
since, gets the same Dispatches back without running the planner. The
Dispatches also keep their resolved pipeline and descriptors (see
``recording/dispatch_plan.py``), so a repeated call records with no lookups.

Validation is not lost: a tensor's shape, strides, offset, dtype and context
never change except through ``resize()``, which swaps its Buffer, and an
image's VkImage and extent only through ``rebind()``; both count a swap of
their context (``ctx.swaps``), and an entry stored before the latest swap
is stale. Keys hold ids, never the objects: an entry is dropped by a weakref
callback the moment any of its tensors or images dies (so an id is never
reused while its entry exists, and a remembered call never keeps memory
alive past its arguments). The memo is bounded; the oldest entries go first.

Thread-safety: dict operations only; entries are immutable once stored.
"""
from __future__ import annotations

import struct
import threading
import weakref

import numpy as np

from ..image import Image, ImageLevel
from ..tensor import Tensor

LIMIT = 4096


def store_bounded(entries: dict, key, value, limit: int) -> None:
    """``entries[key] = value``, then drop the oldest entries past ``limit``
    (dicts keep insertion order). Safe against other threads doing the same."""
    entries[key] = value
    while len(entries) > limit:
        try:
            del entries[next(iter(entries))]
        except (KeyError, RuntimeError, StopIteration):   # another thread got there first
            break


def scalar_key(scalar):
    """A key part telling apart scalars that compare equal but validate or
    compute differently: ``1`` / ``1.0`` / ``True`` by their type, and
    floats by their bits (``0.0`` / ``-0.0``, NaN payloads; a NaN never
    equals itself, so keying by value would also miss every repeat)."""
    if scalar is None:
        return None
    if isinstance(scalar, tuple):
        return tuple(_one_scalar_key(v) for v in scalar)
    return _one_scalar_key(scalar)


_DOUBLE = struct.Struct("<d")


def _one_scalar_key(v):
    cls = type(v)
    if cls is float:
        return (cls, _DOUBLE.pack(v))
    if cls is complex:          # by the bits of both parts, as floats
        return (cls, _DOUBLE.pack(v.real), _DOUBLE.pack(v.imag))
    if isinstance(v, (float, np.floating)):
        return (cls, np.asarray(v).tobytes())
    return (cls, v)


class CallMemo:
    """Whole op calls remembered by the identity of their arguments: the
    recorder's first stop for ``rec.<op>(...)``, before the op's own planner.

    A key is the op's name and the ``id`` of every argument (keyword names
    included). That is safe because an entry keeps each argument alive or
    dies with it: tensors and images (or image levels) are held weakly and
    their death drops the entry (weakref callback), plain scalars (``int``,
    ``float``, ``complex``, ``bool``, ``str``, ``None``) are held strongly — so while an
    entry exists no other object can have one of its ids. Calls with any
    other kind of argument (lists, arrays) are not remembered. An entry also
    holds the value ``ctx.swaps`` had when it was stored; any ``resize()`` or
    ``rebind()`` in the context since makes every entry stale (the planner
    runs again and replaces it).

    Only results an op marked ``reusable`` (a plan that depends on nothing
    but its arguments, returning ``None`` or one of its arguments) are
    stored. ``get`` is the dict's own: one lookup, no Python call on the way.

    Thread-safety: dict operations only; entries are immutable once stored.
    """
    __slots__ = ("_entries", "get", "limit", "hits", "_lock")

    def __init__(self, limit: int = LIMIT):
        self._entries: dict = {}    # key -> (swaps, dispatches, where the value is, refs, scalars)
        self.get = self._entries.get
        self.limit = limit
        self.hits = 0               # added up by recorders when their block ends
        self._lock = threading.Lock()

    def count_hits(self, n: int) -> None:
        if n:
            with self._lock:
                self.hits += n

    def put(self, key, args: tuple, kwargs: dict, result, swaps: int) -> None:
        entries = self._entries

        def drop(_ref, key=key):
            entries.pop(key, None)
        refs, scalars = [], []
        for obj in (*args, *kwargs.values()):
            if isinstance(obj, _HELD_WEAKLY):
                refs.append(weakref.ref(obj, drop))
            elif obj is None or type(obj) in _SCALARS:
                scalars.append(obj)
            else:
                return
        value = result.value
        if value is None:
            where = None
        else:
            where = next((i for i, a in enumerate(args) if a is value), None)
            if where is None:
                where = next((k for k, a in kwargs.items() if a is value), None)
                if where is None:
                    return
        store_bounded(entries, key, (swaps, result.dispatches, where, tuple(refs), tuple(scalars)), self.limit)

    def __len__(self) -> int:
        return len(self._entries)


_SCALARS = (int, float, complex, bool, str)
_HELD_WEAKLY = (Tensor, Image, ImageLevel)
