"""Radix sort: ``rec.sort(keys, values=None)`` and ``rec.argsort(keys, axis=-1)``.

A stable LSD radix sort, by one of two kernel sets chosen from device
facts (never by trying):

- :mod:`.radix_onesweep`, single pass per 8-bit digit (decoupled look-back,
  subgroup ranking): four passes for 32-bit keys, each reading and writing
  the keys once. Chosen where started workgroups are known to keep running
  (``limits.forward_progress``: NVIDIA and AMD desktop GPUs) and the
  subgroup facts it was built for hold;
- :mod:`.radix_portable`, reduce-then-scan over 4-bit digits: eight passes
  of histogram, scan and scatter, no atomics and no waiting between
  workgroups, so it runs on any Vulkan device (lavapipe included).

Both are stable and move the keys as raw 32-bit words, ranking them
through the order-preserving map in :mod:`.radix_keys` (int32, and float32
in numpy's order with NaN last and -0.0 tied with +0.0). Passes ping-pong
between scratch tensors; the first reads the caller's view and the last
writes the caller's output, so any strided 1-D views work, in place too.
A GPU ``count`` sorts only a prefix, with no read-back: the single-pass
kernels size their grid from it (indirect dispatch), the portable ones read
it and skip the tiles past it.

float16 keys are ranked through a float32 copy, uint64 keys through their
two 32-bit words (:func:`_plan_wide_order`); both then gather the keys and
the payload in the order found.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype, float32, int32, uint32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.catalogue import variants
from ..tensor import Tensor
from .base import OpResult, check_out, check_tensor, op, overlaps
from .elementwise import map_variants, plan_map
from .indirect import check_count
from .radix_keys import KEY_DTYPES, VALUE_DTYPES, plan_clear
from . import radix_onesweep as onesweep, radix_portable as portable
from .shape import index_select

HALF = ("float16",)     # keys ranked through a float32 copy (see _plan_half_sort)
WIDE = ("uint64",)      # keys ranked through their 32-bit words (see _plan_wide_order)


def plan_sort(ctx, keys, values, out_keys, out_values, payload: str, key_bits: int, count=None) -> list:
    """Dispatches sorting ``keys`` (with ``payload``: "none", "values" or
    "iota") into the validated outputs, by the single-pass kernels where the
    device allows them and the portable ones elsewhere; ``count``: only the
    first ``count[0]`` keys (a GPU tensor), the outputs past them untouched."""
    single = onesweep.usable(ctx, keys.size, payload)
    steps = []
    passes = -(-key_bits // (onesweep.BITS if single else portable.BITS))
    ins = [keys] + ([values] if payload == "values" else [])
    outs = [out_keys] + ([out_values] if payload != "none" else [])
    if passes == 1 and any(overlaps(o, i) for o in outs for i in ins):
        # One pass cannot read and write the same memory (tiles land in
        # other tiles' places): sort a copy of the input.
        copies = [ctx.empty(i.shape, i.dtype) for i in ins]
        steps += [plan_map(ctx, "x0", [_bits(i)], _bits(c), uint32) for i, c in zip(ins, copies)]
        keys, values = copies[0], copies[1] if payload == "values" else values
    if single:
        return steps + onesweep.plan_onesweep(ctx, keys, values, out_keys, out_values, payload, key_bits, count)
    nword = None
    if count is not None:
        word = ctx.empty((1,), uint32)
        steps.append(plan_clear(ctx, word, 0, 0, keys.size, count))
        nword = (word, 0)
    return steps + portable.plan_portable(ctx, keys, values, out_keys, out_values, payload, key_bits, nword)


def _vector(ctx, t, what: str, allowed):
    t = check_tensor(ctx, t, what)
    if t.ndim != 1:
        raise ShapeError(f"{what} must be 1-D, got shape {t.shape}")
    if t.dtype.name not in allowed:
        raise DTypeError(f"{what}: dtype {t.dtype} not supported; use one of {list(allowed)}")
    return t


def _output(ctx, out, like_n, dtype, what, allowed=None):
    if out is None:
        return None
    # Overlaps are checked across both outputs (_check_outputs).
    return check_out(ctx, out, (like_n,), dtype if allowed is None else tuple(allowed), (), what)


def _same_view(a, b) -> bool:
    return a.buffer is b.buffer and a.offset == b.offset and a.strides == b.strides


def _bits(t: Tensor) -> Tensor:
    """The same view as raw 32-bit words: copies keep every bit (NaN
    payloads, denormals) whatever the dtype."""
    return Tensor(t.buffer, t.shape, uint32, t.strides, t.offset)


def _key_bits(keys, key_bits) -> int:
    """``key_bits`` checked against the keys' width (None: all of it);
    fewer bits only for unsigned integer keys."""
    width = 8 * keys.dtype.size if keys.dtype.name in WIDE else 32
    if key_bits is None:
        return width
    if isinstance(key_bits, bool) or not isinstance(key_bits, (int, np.integer)) or not 1 <= key_bits <= width:
        raise InvalidArgumentError(f"key_bits must be an int in 1..{width}, got {key_bits!r}")
    if key_bits != width and keys.dtype.name not in ("uint32",) + WIDE:
        raise InvalidArgumentError(f"key_bits < {width} needs unsigned integer keys (got {keys.dtype})")
    return int(key_bits)


@op("sort", windows=None)
def sort(ctx, keys, values=None, out_keys=None, out_values=None, *, key_bits: int = None, count=None):
    """Stable sort of 1-D ``keys`` (uint32, int32, float32, float16 or uint64),
    carrying the optional 1-D payload ``values`` (any 4-byte dtype) along.

    Returns ``sorted_keys``, or ``(sorted_keys, permuted_values)`` with a
    payload; the payload order is numpy's ``values[np.argsort(keys,
    kind="stable")]``. ``key_bits`` (default: the keys' width) below it
    sorts uint32 or uint64 keys known to be below ``2**key_bits`` in fewer
    passes (higher bits are ignored).
    Outputs may be the inputs themselves (in place). Float keys sort as in
    numpy: -0.0 and +0.0 compare equal (input order kept) and every NaN
    comes last (see the module notes).

    ``count``: a 1-element uint32/int32 GPU tensor written earlier in the
    recording (by ``rec.compact``, a user kernel): only the first
    ``count[0]`` keys (clamped to 0..size) are sorted, with no read-back;
    the outputs past them are left as they were.
    """
    keys = _vector(ctx, keys, "sort keys", KEY_DTYPES + HALF + WIDE)
    count = check_count(ctx, count) if count is not None else None
    if count is not None and keys.dtype.name in HALF:
        raise UnsupportedError("sort: count= with float16 keys is not supported; sort the indices "
                               "(rec.argsort(keys, count=n)) and gather with them")
    if count is not None and keys.dtype.name in WIDE:
        raise UnsupportedError("sort: count= with uint64 keys is not supported; sort the indices "
                               "(rec.argsort(keys, count=n)) and gather with them")
    key_bits = _key_bits(keys, key_bits)
    n = keys.size
    if values is not None:
        values = _vector(ctx, values, "sort values", VALUE_DTYPES)
        if values.shape != keys.shape:
            raise ShapeError(f"sort: values has shape {values.shape}, keys {keys.shape}")
    elif out_values is not None:
        raise InvalidArgumentError("sort: out_values given without values")
    out_keys = _output(ctx, out_keys, n, keys.dtype, "sort out_keys")
    if values is not None:
        out_values = _output(ctx, out_values, n, values.dtype, "sort out_values")
    _check_outputs([out_keys, out_values], [keys, values])
    if out_keys is None:
        out_keys = ctx.empty((n,), keys.dtype)
    if values is not None and out_values is None:
        out_values = ctx.empty((n,), values.dtype)
    result = (out_keys, out_values) if values is not None else out_keys
    if n == 0:
        return OpResult(result, [])
    if keys.dtype.name in HALF:
        return OpResult(result, _plan_half_sort(ctx, keys, values, out_keys, out_values))
    if keys.dtype.name in WIDE:
        order = ctx.empty((n,), uint32)
        moves = ((_words(keys), _words(out_keys)), (values, out_values))
        return OpResult(result, _plan_wide_order(ctx, keys, order, key_bits) + _gather_in_order(ctx, order, moves))
    payload = "values" if values is not None else "none"
    return OpResult(result, plan_sort(ctx, keys, values, out_keys, out_values, payload, key_bits, count))


@op("argsort", windows=None)
def argsort(ctx, keys, out=None, *, axis: int = -1, key_bits: int = None, count=None):
    """Indices that stably sort ``keys`` (uint32, int32, float32, float16; uint64 1-D) along
    ``axis``: numpy's ``np.argsort(keys, axis, kind="stable")`` as uint32
    (``out`` may be uint32 or int32). Over a tensor of two or more
    dimensions each line along ``axis`` is sorted on its own (one sort of all
    keys, then a stable sort of the result by line). ``count`` (1-D keys
    only): as for ``sort``, the indices of the first ``count[0]`` keys."""
    checked = check_tensor(ctx, keys, "argsort keys")
    count = check_count(ctx, count) if count is not None else None
    if checked.dtype.name in HALF:
        wide = ctx.empty(checked.shape, float32)
        widen = plan_map(ctx, "x0", [checked], wide, float32)
        result = argsort(ctx, wide, out, axis=axis, key_bits=key_bits, count=count)
        return OpResult(result.value, [widen] + list(result.dispatches))
    if checked.ndim >= 2 and count is not None:
        raise ShapeError("argsort: count= sorts 1-D keys only")
    if checked.dtype.name in WIDE and checked.ndim >= 2:
        raise UnsupportedError("argsort: uint64 keys sort as one 1-D tensor")
    if checked.ndim >= 2:
        return _argsort_lines(ctx, checked, out, axis, key_bits)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis not in (0, -1):
        raise ShapeError(f"argsort: axis {axis!r} does not fit a 1-D tensor; use 0 or -1")
    keys = _vector(ctx, keys, "argsort keys", KEY_DTYPES + WIDE)
    key_bits = _key_bits(keys, key_bits)
    n = keys.size
    if n >= 2 ** 31:
        raise InvalidArgumentError("argsort: more than 2**31 keys")
    out = _output(ctx, out, n, uint32, "argsort out", ("uint32", "int32"))
    _check_outputs([out], [keys])
    if out is None:
        out = ctx.empty((n,), uint32)
    if n == 0:
        return OpResult(out, [])
    if keys.dtype.name in WIDE:
        return OpResult(out, _plan_wide_order(ctx, keys, out, key_bits, count))
    sorted_keys = ctx.empty((n,), keys.dtype)   # ping-pong end point, not returned
    return OpResult(out, plan_sort(ctx, keys, None, sorted_keys, out, "iota", key_bits, count))


def _plan_half_sort(ctx, keys, values, out_keys, out_values) -> list:
    """float16 keys: the indices sorted by a float32 copy of the keys (exact:
    every half is a float32, NaN stays NaN, -0.0 stays -0.0, so the order is
    numpy's), then the keys and the payload gathered in that order."""
    n = keys.size
    wide, order = ctx.empty((n,), float32), ctx.empty((n,), uint32)
    steps = [plan_map(ctx, "x0", [keys], wide, float32)]
    steps += plan_sort(ctx, wide, None, ctx.empty((n,), float32), order, "iota", 32)
    return steps + _gather_in_order(ctx, order, ((keys, out_keys), (values, out_values)))


def _plan_wide_order(ctx, keys, order, key_bits: int, count=None) -> list:
    """uint64 keys: into ``order`` (uint32 or int32), the indices that
    stably sort them. An LSD sort of the whole key is a stable sort by its
    low word, then one by its high word carrying the first sort's order as
    payload; both are the 32-bit sorts, so no shader does 64-bit
    arithmetic. Up to 32 ``key_bits`` rank by the low word alone. With a
    GPU ``count`` both sorts take only the first ``count[0]``; the gather
    between them reads every index (those past the count, never written,
    read 0 where they point outside the keys) and only the counted
    ones matter."""
    n = keys.size
    words = _words(keys)
    low, high = words[:, 0], words[:, 1]
    if key_bits <= 32:
        return plan_sort(ctx, low, None, ctx.empty((n,), uint32), order, "iota", key_bits, count)
    first, high_first = ctx.empty((n,), uint32), ctx.empty((n,), uint32)
    steps = plan_sort(ctx, low, None, ctx.empty((n,), uint32), first, "iota", 32, count)
    steps += index_select(ctx, high, first, out=high_first).dispatches
    return steps + plan_sort(ctx, high_first, first, ctx.empty((n,), uint32), order, "values", key_bits - 32,
                             count)


def _gather_in_order(ctx, order, moves) -> list:
    """Dispatches writing ``src[order]`` (along axis 0) into ``dst`` for
    each ``(src, dst)`` of ``moves`` (``src`` None: skipped), through
    scratch where ``dst`` overlaps ``src`` (in place)."""
    steps = []
    for src, dst in moves:
        if src is None:
            continue
        target = ctx.empty(dst.shape, src.dtype) if overlaps(dst, src) else dst
        steps += index_select(ctx, src, order, out=target).dispatches
        if target is not dst and dst.dtype.size == 4:
            steps.append(plan_map(ctx, "x0", [_bits(target)], _bits(dst), uint32))
        elif target is not dst:
            steps.append(plan_map(ctx, "x0", [target], dst, dst.dtype))
    return steps


def _words(t: Tensor) -> Tensor:
    """A 1-D uint64 view as (n, 2) uint32 words, low word first (the
    library assumes little-endian hosts throughout, as its push constants
    do)."""
    return Tensor(t.buffer, t.shape + (2,), uint32, tuple(2 * s for s in t.strides) + (1,), 2 * t.offset)


def _argsort_lines(ctx, keys, out, axis, key_bits) -> OpResult:
    """argsort along ``axis`` of an N-D tensor: the lines are moved last
    and copied contiguous, all keys sorted at once (stable, flat indices),
    then the indices sorted stably by their line (flat index // line
    length): each line's indices in key order, as flat index % line length."""
    if keys.dtype.name not in KEY_DTYPES:
        raise DTypeError(f"argsort keys: dtype {keys.dtype} not supported; use one of {list(KEY_DTYPES)}")
    key_bits = _key_bits(keys, key_bits)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -keys.ndim <= axis < keys.ndim:
        raise ShapeError(f"argsort: axis {axis!r} is out of range for a {keys.ndim}-d tensor; "
                         f"use {-keys.ndim}..{keys.ndim - 1}")
    if keys.size >= 2 ** 31:
        raise InvalidArgumentError("argsort: more than 2**31 keys")
    last = [a for a in range(keys.ndim) if a != int(axis) % keys.ndim] + [int(axis) % keys.ndim]
    if out is not None:
        out = check_out(ctx, out, keys.shape, (uint32, int32), [keys], "argsort out", in_place=False)
    else:
        out = ctx.empty(keys.shape, uint32)
    n, line = keys.size, keys.shape[int(axis) % keys.ndim]
    if n == 0:
        return OpResult(out, [])
    moved, moved_out = keys.permute(last), out.permute(last)
    flat = ctx.empty((n,), keys.dtype)
    steps = [plan_map(ctx, "x0", [_bits(moved)], _bits(flat.reshape(moved.shape)), uint32)]
    order, lines = ctx.empty((n,), uint32), ctx.empty((n,), uint32)
    steps += plan_sort(ctx, flat, None, ctx.empty((n,), keys.dtype), order, "iota", key_bits)
    steps.append(plan_map(ctx, "x0 / s", [order], lines, uint32, line, "uint"))
    by_line = ctx.empty((n,), uint32)
    line_bits = max(1, (n // line - 1).bit_length())
    steps += plan_sort(ctx, lines, order, ctx.empty((n,), uint32), by_line, "values", line_bits)
    steps.append(plan_map(ctx, "x0 % s", [by_line.reshape(moved.shape)], moved_out, out.dtype, line, "uint"))
    return OpResult(out, steps)


def _check_outputs(outs, ins):
    """Outputs may be exactly an input (in place), never partly overlap one,
    and never overlap each other."""
    outs = [o for o in outs if o is not None]
    ins = [i for i in ins if i is not None]
    for o in outs:
        for i in ins:
            if overlaps(o, i) and not _same_view(o, i):
                raise InvalidArgumentError("sort: an output overlaps an input without being the same view; "
                                           "pass the input itself (in place) or a separate tensor")
    if len(outs) == 2 and overlaps(outs[0], outs[1]):
        raise InvalidArgumentError("sort: out_keys and out_values overlap")


@variants("map")
def _argsort_lines_variants():
    # the line of each flat index, and its place in the line (into uint32 or int32 outputs)
    yield from map_variants("x0 / s", [uint32], uint32, "uint")
    for out in ("uint32", "int32"):
        yield from map_variants("x0 % s", [uint32], as_dtype(out), "uint")
