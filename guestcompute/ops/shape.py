"""Shape operations that move data: contiguous, transpose, permute, slice,
concat, index_select and gather.

Views (``t.T``, ``t.permute``, ``t[...]``, ``t.reshape``) never copy; the ops
here *materialise* a view into a fresh contiguous tensor (or ``out=``).

- ``contiguous``/``transpose``/``permute``/``slice`` are the strided copy of
  the elementwise ``map`` family, so they share its pipelines.
- ``concat`` takes a variable number of inputs, so its metadata is dynamic:
  one ``concat`` dispatch handles up to :data:`CONCAT_GROUP` inputs, bound
  to their own bindings, with a push-constant table of their offsets,
  strides and start positions along the axis (the table's length is part of
  the spec). More inputs take more dispatches, each writing its slab of the
  output. Every tensor is addressed as (outer, axis, inner) with a stride
  each, so views are read in place; one whose outer or inner dims cannot
  be merged is first copied to a contiguous scratch tensor.
- ``index_select`` (``numpy.take``) and ``gather``
  (``numpy.take_along_axis``) read int32 or uint32 index tensors. Indices
  in ``[-n, n)`` pick elements as numpy does, negative ones counting from
  the end. A GPU kernel cannot raise, so what an index outside that range
  does is a ``mode``, never a silently picked real element unless asked
  for: ``mode="zero"`` (default) gives 0 for it; ``"wrap"`` and ``"clip"``
  are numpy's modes of the same names (``"wrap"`` takes the index modulo
  n; ``"clip"`` clamps to ``[0, n-1]``, so, as in numpy, a negative index
  becomes 0 and does not count from the end).
  ``indices`` may also be host data (a list or an integer ndarray, at most
  :data:`MAX_HOST_INDICES` of them): those are checked before anything is
  recorded, so with ``mode="zero"`` an index outside ``[-n, n)`` raises
  :class:`IndexOutOfRangeError` (an ``IndexError``) as ``np.take`` does;
  they are resolved to positions on the host and written into a scratch
  index tensor by the recording itself (no upload, no submit).
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import as_dtype
from ..errors import DTypeError, IndexOutOfRangeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import F16_EXTENSIONS, LINEAR_INDEX, U8_EXTENSIONS
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import Tensor
from .base import (OpResult, Dispatch, check_dtype, check_out, check_tensor, coalesce, normalize_axes, normalize_axis,
                   op, same_dtype)
from .elementwise import elementwise, plan_map
from .filters import PUT_VALUES, plan_put
from .windows import CONCAT, INDEX_SELECT, POINTWISE

WORKGROUP = 128
CONCAT_GROUP = 4          # inputs per concat dispatch (push constants: 112 bytes)
INDEX_DTYPES = ("int32", "uint32")
MODES = ("zero", "wrap", "clip")
ALL_DTYPES = ("float32", "float16", "int32", "uint32", "uint8")
# Host-data indices travel in push constants (PUT_VALUES per dispatch); more
# than this belong in a tensor uploaded once.
MAX_HOST_INDICES = 100 * PUT_VALUES


def _exts(*dtypes) -> tuple:
    exts = []
    if "float16" in dtypes:
        exts += F16_EXTENSIONS
    if "uint8" in dtypes:
        exts += U8_EXTENSIONS
    return tuple(dict.fromkeys(exts))


def _feats(*dtypes) -> tuple:
    return tuple(sorted({as_dtype(d).feature for d in dtypes if as_dtype(d).feature}))


def _axis(axis, ndim: int, what: str) -> int:
    """One axis argument, checked like every op's (see base.normalize_axis)."""
    return normalize_axis(axis, ndim, what)


def _fresh_out(ctx, out, shape, dtype, inputs, what: str) -> Tensor:
    """Validate ``out=`` (must not overlap any input) or allocate it."""
    if out is None:
        return ctx.empty(shape, dtype)
    return check_out(ctx, out, shape, dtype, inputs, f"{what} out", in_place=False)


# -- materialising views ----------------------------------------------------------

@op("contiguous", windows=POINTWISE)
def contiguous(ctx, x, *, out=None):
    """A fresh contiguous copy of the view ``x`` (or into ``out``)."""
    x = check_tensor(ctx, x, "contiguous x")
    if out is not None:
        _fresh_out(ctx, out, x.shape, x.dtype, [x], "contiguous")
    return elementwise(ctx, "x0", [x], out, name="contiguous")


@op("transpose", windows=None)
def transpose(ctx, x, axis0: int = -2, axis1: int = -1, *, out=None):
    """``x`` with two axes swapped, materialised (``x.transpose`` is the view)."""
    x = check_tensor(ctx, x, "transpose x")
    if x.ndim < 2:
        raise ShapeError(f"transpose needs at least 2 dims, got shape {x.shape}")
    a0, a1 = _axis(axis0, x.ndim, "transpose"), _axis(axis1, x.ndim, "transpose")
    return contiguous(ctx, x.transpose(a0, a1), out=out)


@op("permute", windows=None)
def permute(ctx, x, axes, *, out=None):
    """``x`` with its axes reordered, materialised (``x.permute`` is the view)."""
    x = check_tensor(ctx, x, "permute x")
    if not isinstance(axes, (tuple, list)):
        raise InvalidArgumentError(f"permute: axes must be a tuple of ints, got {axes!r}")
    if len(axes) != x.ndim:
        raise ShapeError(f"permute: {len(axes)} axes for a {x.ndim}-d tensor; give each of its "
                         f"{x.ndim} axes once")
    order = normalize_axes(axes, x.ndim, "permute", allow_none=False)
    return contiguous(ctx, x.permute(list(order)), out=out)


@op("slice", windows=None)
def slice_(ctx, x, index, *, out=None):
    """``x[index]`` (basic indexing: ints, slices with steps, None,
    Ellipsis) materialised as a contiguous tensor."""
    x = check_tensor(ctx, x, "slice x")
    try:
        view = x[index]
    except (TypeError, IndexError) as e:
        raise InvalidArgumentError(f"slice: bad index {index!r} ({e})") from None
    return contiguous(ctx, view, out=out)


# -- concat ------------------------------------------------------------------------

def concat_spec(dtype: str, count: int) -> KernelSpec:
    t = as_dtype(dtype).glsl
    bindings = tuple(Binding(f"in{q}", t, READ) for q in range(count)) + (Binding("outv", t, WRITE),)
    push = [Push("n", "uint"), Push("inner", "uint"), Push("len", "uint"), Push("offo", "uint"),
            Push("soo", "int"), Push("soa", "int"), Push("soi", "int"),
            Push("bounds", "uint", count + 1)]
    for q in range(count):
        push += [Push(f"off{q}", "uint"), Push(f"so{q}", "int"), Push(f"sa{q}", "int"),
                 Push(f"si{q}", "int")]
    return KernelSpec("concat", bindings, tuple(push), (("dtype", dtype), ("count", count)),
                      (WORKGROUP, 1, 1), _exts(dtype), _feats(dtype))


@family("concat")
def _render_concat(spec: KernelSpec) -> str:
    count = spec.param("count")
    lines = ["void main() {",
             f"  uint i = {LINEAR_INDEX};",
             "  if (i >= pc.n) return;",
             "  uint in_ = i % pc.inner, r = i / pc.inner;",
             "  uint j = r % pc.len, o = r / pc.len;",
             "  int dst = int(pc.offo) + int(o) * pc.soo + int(j) * pc.soa + int(in_) * pc.soi;"]
    # Which input holds position j of this dispatch's slab: the bounds table.
    for q in range(count):
        cond = "if" if q == 0 else "else if"
        test = f"j < pc.bounds[{q + 1}]" if q < count - 1 else "true"
        src = (f"int(pc.off{q}) + int(o) * pc.so{q} + int(j - pc.bounds[{q}]) * pc.sa{q} "
               f"+ int(in_) * pc.si{q}")
        lines.append(f"  {cond} ({test}) outv[dst] = in{q}[{src}];")
    lines.append("}")
    return "\n".join(lines)


def as_3d(t: Tensor, axis: int):
    """(outer, axis, inner) element strides of ``t``, or None when its outer
    or inner dims do not merge into one stride."""
    def merged(dims):
        dims = [(n, s) for n, s in dims if n != 1]
        for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
            if s0 != s1 * n1:
                return None
        return dims[-1][1] if dims else 0
    pairs = list(zip(t.shape, t.strides))
    so, si = merged(pairs[:axis]), merged(pairs[axis + 1:])
    if so is None or si is None:
        return None
    return (so, t.strides[axis] if t.shape[axis] != 1 else 0, si)


@op("concat", windows=CONCAT)
def concat(ctx, tensors, axis: int = 0, *, out=None):
    """Join tensors along ``axis`` (all other dims equal, one dtype).
    Views are read in place. ``out`` must not overlap an input."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise InvalidArgumentError("concat: tensors must be a non-empty list of tensors")
    tensors = [check_tensor(ctx, t, f"concat input {k}") for k, t in enumerate(tensors)]
    dtype = same_dtype(tensors, "concat")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("concat: zero-dimensional tensors cannot be concatenated")
    axis = _axis(axis, first.ndim, "concat")
    for k, t in enumerate(tensors):
        if t.ndim != first.ndim or t.shape[:axis] != first.shape[:axis] \
                or t.shape[axis + 1:] != first.shape[axis + 1:]:
            raise ShapeError(f"concat: input {k} has shape {t.shape}, incompatible with {first.shape} "
                             f"along axis {axis}")
    shape = first.shape[:axis] + (sum(t.shape[axis] for t in tensors),) + first.shape[axis + 1:]
    out = _fresh_out(ctx, out, shape, dtype, tensors, "concat")
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    if out.size == 0:
        return OpResult(out, [])
    dispatches = []
    # Views whose dims cannot be addressed as (outer, axis, inner) go
    # through contiguous scratch copies (before, and after for out).
    parts = []
    for t in tensors:
        if t.size == 0:
            continue
        if as_3d(t, axis) is None:
            scratch = ctx.empty(t.shape, dtype)
            dispatches.append(plan_map(ctx, "x0", [t], scratch, dtype))
            t = scratch
        parts.append(t)
    target = out if as_3d(out, axis) is not None else ctx.empty(shape, dtype)
    soo, soa, soi = as_3d(target, axis)
    start = 0
    for g in range(0, len(parts), CONCAT_GROUP):
        group = parts[g:g + CONCAT_GROUP]
        spec = concat_spec(dtype.name, len(group))
        bounds = [0]
        for t in group:
            bounds.append(bounds[-1] + t.shape[axis])
        length = bounds[-1]
        values = {"n": outer * length * inner, "inner": inner, "len": length,
                  "offo": target.offset + start * soa, "soo": soo, "soa": soa, "soi": soi,
                  "bounds": bounds}
        for q, t in enumerate(group):
            so, sa, si = as_3d(t, axis)
            values.update({f"off{q}": t.offset, f"so{q}": so, f"sa{q}": sa, f"si{q}": si})
        groups = groups_for(values["n"], WORKGROUP, ctx.limits.max_workgroup_count)
        dispatches.append(Dispatch(spec, tuple(t.buffer for t in group) + (target.buffer,),
                                   spec.pack(values), groups))
        start += length
    if target is not out:
        dispatches.append(plan_map(ctx, "x0", [target], out, dtype))
    return OpResult(out, dispatches)


# -- index_select and gather ----------------------------------------------------------

def gather_spec(dtype: str, index_dtype: str, mode: str, rank: int) -> KernelSpec:
    t = as_dtype(dtype).glsl
    bindings = (Binding("x", t, READ), Binding("idx", as_dtype(index_dtype).glsl, READ),
                Binding("outv", t, WRITE))
    push = (Push("n", "uint"), Push("offx", "uint"), Push("offi", "uint"), Push("offo", "uint"),
            Push("axis_n", "uint"), Push("axis_stride", "int"), Push("shape", "uint", rank),
            Push("xs", "int", rank), Push("is", "int", rank), Push("os", "int", rank))
    params = (("dtype", dtype), ("index", index_dtype), ("mode", mode), ("rank", rank))
    return KernelSpec("gather", bindings, push, params, (WORKGROUP, 1, 1), _exts(dtype), _feats(dtype))


@family("gather")
def _render_gather(spec: KernelSpec) -> str:
    rank, mode = spec.param("rank"), spec.param("mode")
    t = as_dtype(spec.param("dtype")).glsl
    signed = spec.param("index") == "int32"
    lines = ["void main() {",
             f"  uint i = {LINEAR_INDEX};",
             "  if (i >= pc.n) return;",
             "  uint rem = i;",
             "  int ox = int(pc.offx), oi = int(pc.offi), oo = int(pc.offo);",
             f"  for (int d = {rank - 1}; d >= 0; --d) {{",
             "    int c = int(rem % pc.shape[d]); rem /= pc.shape[d];",
             "    ox += c * pc.xs[d]; oi += c * pc.is[d]; oo += c * pc.os[d];",
             "  }"]
    lines += _index_position(signed, mode)
    if mode == "zero":
        # Load from a valid position either way (never out of bounds), then select.
        lines.append(f"  {t} v = x[ox + int(inside ? pos : 0u) * pc.axis_stride];")
        lines.append(f"  outv[oo] = inside ? v : {t}(0);")
    else:
        lines.append("  outv[oo] = x[ox + int(pos) * pc.axis_stride];")
    lines.append("}")
    return "\n".join(lines)


def _index_position(signed: bool, mode: str) -> list:
    """GLSL lines setting ``uint pos`` (the position along the axis that
    ``idx[oi]`` names, in ``[0, n)``) and, for mode "zero", ``bool inside``.
    A negative j is handled through ``-(j + 1)``, which cannot overflow
    (``-INT_MIN`` would), and all arithmetic is unsigned so GLSL's undefined
    ``%`` on negative operands never occurs."""
    n = "pc.axis_n"
    if not signed:
        return ["  uint j = idx[oi];",
                {"zero": f"  bool inside = j < {n}; uint pos = j;",
                 "wrap": f"  uint pos = j % {n};",
                 "clip": f"  uint pos = min(j, {n} - 1u);"}[mode]]
    lines = ["  int j = idx[oi];",
             "  uint back = uint(-(j + 1));        // for j < 0: how far before the last element"]
    lines.append({
        "zero": (f"  bool inside = j >= 0 ? uint(j) < {n} : back < {n};\n"
                 f"  uint pos = j >= 0 ? uint(j) : {n} - 1u - back;"),
        "wrap": f"  uint pos = j >= 0 ? uint(j) % {n} : {n} - 1u - back % {n};",
        "clip": f"  uint pos = j >= 0 ? min(uint(j), {n} - 1u) : 0u;",
    }[mode])
    return lines


def _plan_gather(ctx, x, idx, out, axis: int, dims_for, mode: str) -> list:
    """Dispatches for a gather whose output dims are ``dims_for(x, idx)``:
    [(size, x stride, index stride)] in the output's order. When the dims do
    not coalesce to 6 or fewer, x and the indices (and out) are staged
    through contiguous scratch copies, which always coalesce further."""
    if x.shape[axis] == 0:      # mode "zero" (wrap and clip were rejected): all zeros
        zero = 0.0 if x.dtype.kind == "float" else 0
        return [plan_map(ctx, "s", [], out, out.dtype, zero, x.dtype.kind)]

    def coalesced(x, idx, target):
        dims = dims_for(x, idx)
        shape = tuple(n for n, _, _ in dims)
        return coalesce(shape, [[d[1] for d in dims], [d[2] for d in dims], list(target.strides)])

    pre, post, target = [], [], out
    cshape, cstr = coalesced(x, idx, out)
    if len(cshape) > 6:
        staged = []
        for t in (x, idx):
            if not t.is_contiguous:
                scratch = ctx.empty(t.shape, t.dtype)
                pre.append(plan_map(ctx, "x0", [t], scratch, t.dtype))
                t = scratch
            staged.append(t)
        x, idx = staged
        if not out.is_contiguous:
            target = ctx.empty(out.shape, out.dtype)
            post.append(plan_map(ctx, "x0", [target], out, out.dtype))
        cshape, cstr = coalesced(x, idx, target)
        if len(cshape) > 6:
            raise ShapeError(f"gather over {len(cshape)} non-mergeable dims (at most 6)")
    rank = 4 if len(cshape) <= 4 else 6
    pad = rank - len(cshape)
    spec = gather_spec(x.dtype.name, idx.dtype.name, mode, rank)
    values = {"n": target.size, "offx": x.offset, "offi": idx.offset, "offo": target.offset,
              "axis_n": x.shape[axis], "axis_stride": x.strides[axis],
              "shape": (1,) * pad + tuple(cshape), "xs": (0,) * pad + tuple(cstr[0]),
              "is": (0,) * pad + tuple(cstr[1]), "os": (0,) * pad + tuple(cstr[2])}
    groups = groups_for(target.size, WORKGROUP, ctx.limits.max_workgroup_count)
    main = Dispatch(spec, (x.buffer, idx.buffer, target.buffer), spec.pack(values), groups)
    return pre + [main] + post


def _check_index_args(ctx, x, indices, mode, what):
    x = check_tensor(ctx, x, f"{what} x")
    if isinstance(indices, Tensor):
        indices = check_tensor(ctx, indices, f"{what} indices")
        check_dtype(ctx, indices.dtype, INDEX_DTYPES, f"{what} indices")
    if mode not in MODES:
        renamed = " ('clamp' is now 'clip', numpy's name)" if mode == "clamp" else ""
        raise InvalidArgumentError(f"{what}: mode must be one of {MODES}, got {mode!r}{renamed}")
    if x.ndim == 0:
        raise ShapeError(f"{what}: x must have at least one dimension")
    return x, indices


def _host_indices(indices, what: str) -> np.ndarray:
    """Host-data indices as an int64 or uint64 array (no bools, no floats)."""
    try:
        arr = np.asarray(indices)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what}: indices must be a tensor, a list or an ndarray of "
                                   f"integers ({e})") from None
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"{what}: indices must be integers, got {arr.dtype}; pass integer indices")
    if arr.size > MAX_HOST_INDICES:
        raise InvalidArgumentError(f"{what}: {arr.size} host indices (at most {MAX_HOST_INDICES}); "
                                   "upload them once with ctx.tensor(...) and pass the tensor")
    return arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64)


def _resolve_positions(arr: np.ndarray, n: int, axis: int, mode: str, what: str) -> np.ndarray:
    """Host indices as int32 positions in [0, n), by ``mode``; with mode
    "zero" an index outside [-n, n) raises (the host can, the GPU cannot)."""
    if arr.dtype == np.uint64:
        outside = arr >= np.uint64(n)
        signed = np.where(outside, 0, arr).astype(np.int64)
    else:
        outside = (arr < -n) | (arr >= n)
        signed = arr
    if mode == "zero":
        if outside.any():
            bad = arr[outside].flat[0]
            raise IndexOutOfRangeError(f"{what}: index {bad} is out of range for axis {axis} of size {n}; "
                                       f"use indices in [{-n}, {n}), or mode='wrap' or 'clip'")
        return np.where(signed < 0, signed + n, signed).astype(np.int32)
    if n == 0:              # nothing to pick: _empty_axis_check refuses it unless the result is empty
        return np.zeros(arr.shape, np.int32)
    if mode == "wrap":
        return (arr % (np.uint64(n) if arr.dtype == np.uint64 else n)).astype(np.int32)
    # clip: too large -> n - 1 (uint64 ones were zeroed in `signed` above), negative -> 0
    return np.clip(np.where(outside & (arr >= 0), n - 1, signed), 0, n - 1).astype(np.int32)


def _positions(indices, x, axis: int, mode: str, what: str):
    """``indices`` itself when it is a tensor, else the host data checked and
    resolved to an int32 ndarray of positions (see :func:`_resolve_positions`)."""
    if isinstance(indices, Tensor):
        return indices
    return _resolve_positions(_host_indices(indices, what), x.shape[axis], axis, mode, what)


def _index_tensor(ctx, indices):
    """(index tensor, dispatches that fill it) for what :func:`_positions`
    returned: resolved host positions go into a scratch int32 tensor."""
    if isinstance(indices, Tensor):
        return indices, []
    words, fill = plan_put(ctx, indices.view(np.float32))     # put moves 32-bit words as they are
    return Tensor(words.buffer, indices.shape, "int32"), fill


def _tensors(*operands) -> list:
    return [t for t in operands if isinstance(t, Tensor)]


def _empty_axis_check(x, axis, n_out, mode, what):
    if x.shape[axis] == 0 and n_out and mode != "zero":
        raise InvalidArgumentError(f"{what}: axis {axis} of x is empty, so mode={mode!r} has no "
                                   "element to pick; use mode='zero'")


@op("index_select", windows=INDEX_SELECT)
def index_select(ctx, x, indices, axis: int = 0, *, out=None, mode: str = "zero"):
    """``numpy.take(x, indices, axis)``: the result has shape
    ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``. ``indices`` is an
    int32 or uint32 tensor of any shape (or host data: a list or integer
    ndarray, checked here); negative indices count from the end. An index
    outside ``[-n, n)`` gives 0 (``mode="zero"``; host data raises
    :class:`IndexOutOfRangeError` instead), or follows numpy's
    ``mode="wrap"`` / ``mode="clip"``."""
    x, indices = _check_index_args(ctx, x, indices, mode, "index_select")
    axis = _axis(axis, x.ndim, "index_select")
    indices = _positions(indices, x, axis, mode, "index_select")
    shape = x.shape[:axis] + indices.shape + x.shape[axis + 1:]
    out = _fresh_out(ctx, out, shape, x.dtype, _tensors(x, indices), "index_select")
    _empty_axis_check(x, axis, out.size, mode, "index_select")
    if out.size == 0:
        return OpResult(out, [])
    indices, fill = _index_tensor(ctx, indices)
    def dims_for(x, idx):
        return ([(x.shape[d], x.strides[d], 0) for d in range(axis)]
                + [(n, 0, s) for n, s in zip(idx.shape, idx.strides)]
                + [(x.shape[d], x.strides[d], 0) for d in range(axis + 1, x.ndim)])
    return OpResult(out, fill + _plan_gather(ctx, x, indices, out, axis, dims_for, mode))


@op("gather", windows=None)
def gather(ctx, x, indices, axis: int = 0, *, out=None, mode: str = "zero"):
    """``numpy.take_along_axis(x, indices, axis)``: ``indices`` has x's
    number of dims; along ``axis`` it picks positions, the other dims
    broadcast against x's. Negative and out-of-range indices as in
    :func:`index_select`."""
    x, indices = _check_index_args(ctx, x, indices, mode, "gather")
    axis = _axis(axis, x.ndim, "gather")
    indices = _positions(indices, x, axis, mode, "gather")
    if indices.ndim != x.ndim:
        raise ShapeError(f"gather: indices must have {x.ndim} dims like x, got shape {indices.shape}")
    shape = []
    for d in range(x.ndim):
        if d == axis:
            shape.append(indices.shape[d])
        elif x.shape[d] == indices.shape[d] or 1 in (x.shape[d], indices.shape[d]):
            shape.append(indices.shape[d] if x.shape[d] == 1 else x.shape[d])
        else:
            raise ShapeError(f"gather: x {x.shape} and indices {indices.shape} do not broadcast "
                             f"along dim {d}")
    shape = tuple(shape)
    out = _fresh_out(ctx, out, shape, x.dtype, _tensors(x, indices), "gather")
    _empty_axis_check(x, axis, out.size, mode, "gather")
    if out.size == 0:
        return OpResult(out, [])
    indices, fill = _index_tensor(ctx, indices)
    def dims_for(x, idx):
        def st(t, d):
            return t.strides[d] if t.shape[d] != 1 else 0
        return [(shape[d], 0 if d == axis else st(x, d), st(idx, d)) for d in range(x.ndim)]
    return OpResult(out, fill + _plan_gather(ctx, x, indices, out, axis, dims_for, mode))


# -- every spec the ops can produce ------------------------------------------------------

@variants("concat")
def _concat_variants():
    for dtype in ALL_DTYPES:
        for count in range(1, CONCAT_GROUP + 1):
            yield concat_spec(dtype, count)


@variants("gather")
def _gather_variants():
    for dtype in ALL_DTYPES:
        for index_dtype in INDEX_DTYPES:
            for mode in MODES:
                for rank in (4, 6):
                    yield gather_spec(dtype, index_dtype, mode, rank)
