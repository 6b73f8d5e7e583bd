"""Ops on tensors that one storage-buffer binding cannot reach.

A kernel binding reaches at most ``maxStorageBufferRange`` bytes of a
buffer (128 MiB on lavapipe and several desktop drivers). Tensors may be
larger — renderers have big vertex and particle buffers, ML big
activations — so an op that meets one (``check_tensor`` raises
:class:`~guestcompute.errors.PastBindingRangeError`, or the op made itself
an output that large) is planned again here, in pieces: each piece binds
*windows* (:class:`~guestcompute.tensor.BufferWindow`: at most one range of
bytes, bound at an aligned offset) and runs the op's own planner on views
that fit them. The pieces' dispatches are recorded in order; the hazard
tracker puts barriers between them where one reads what another wrote.

What runs in pieces, and how:

- **point-wise ops** (arithmetic, math functions, ``cast``, ``copy``,
  ``where``, ``clamp``, ``fill``...): the output is cut along its leading
  axis into row ranges that fit, each operand sliced alike (or whole, where
  it broadcasts); a row too long for one binding is cut again along the
  next axis.
- **ops independent along the leading axis** (reductions, ``argmax`` and
  ``argmin``, ``softmax``, ``log_softmax``, ``cumsum``, ``layer_norm``,
  ``rms_norm``, ``index_select`` when their axis is not axis 0): row ranges
  of input and output alike.
- **reductions over axis 0 or everything** (``sum``, ``max``, ``min``,
  ``mean``): each row range reduces into a slot of a small partial tensor,
  which is then reduced (``mean`` sums, then scales by 1/n).
- **concat**: one windowed copy per input into its slice of the output.
- **index_select along axis 0**: the indices are cut into ranges, each
  selecting into its rows of the output (the source itself must fit one
  binding).
- **matmul** (2-D): the rows of ``a`` and ``out`` are cut into ranges; a
  ``b`` larger than one binding is cut along K and the partial products
  added.

Each op says which of these it is where it is registered: ``@op(name,
windows=...)`` with one of the traits below (:data:`POINTWISE`,
:func:`rowwise`, :data:`CONCAT`, :data:`INDEX_SELECT`, :data:`MATMUL`), or
``windows=None``. A trait is the planner of the op in pieces,
``trait(ctx, name, planner, arguments) -> OpResult``; it raises
PastBindingRangeError where these arguments cannot run so. Such calls, and
every call of an op declared ``windows=None``, refuse with UnsupportedError
before recording, naming the op (see docs/integration.md, "One binding's
reach").
"""
from __future__ import annotations

import inspect
import math

from ..errors import PastBindingRangeError, ShapeError, UnsupportedError
from ..tensor import BufferWindow, Tensor
from .base import (OpResult, PlanContext, broadcast_shapes, byte_span, check_ours, check_out, normalize_axis,
                   op_windows, registered_ops)

# -- windows ---------------------------------------------------------------------

def _alignment(ctx: PlanContext) -> int:
    # Window offsets are multiples of minStorageBufferOffsetAlignment and of
    # every element size, so each view's offset stays a whole element count.
    return math.lcm(ctx.limits.min_storage_offset_alignment, 16)


def extent(ctx: PlanContext, t: Tensor) -> int:
    """Bytes one binding needs to reach all of ``t`` from an aligned start."""
    _, lo, hi = byte_span(t)
    return hi - (lo // _alignment(ctx)) * _alignment(ctx)


def fits(ctx: PlanContext, t: Tensor) -> bool:
    return extent(ctx, t) <= ctx.limits.max_storage_buffer_range


def window_view(ctx: PlanContext, t):
    """``t`` itself when one binding from its buffer's start reaches it;
    otherwise the same elements through a window of its buffer. Anything
    but a Tensor passes through."""
    if not isinstance(t, Tensor):
        return t
    max_range = ctx.limits.max_storage_buffer_range
    root, lo, hi = byte_span(t)
    if hi <= max_range and t.buffer is root:
        return t
    align = _alignment(ctx)
    start = (lo // align) * align
    if hi - start > max_range:
        raise PastBindingRangeError(f"a view of {hi - lo} bytes does not fit one binding")
    window = BufferWindow(root, start, min(root.size - start, max_range))
    isz = t.dtype.size
    offset = (t.offset * isz + t.buffer.window_offset - start) // isz
    return Tensor(window, t.shape, t.dtype, t.strides, offset, base=t.base if t.base is not None else t)


# -- cutting shapes into pieces that fit ------------------------------------------

class _Operand:
    """A tensor argument at ``key`` (("arg", i) or ("kw", name)), aligned
    to the output's leading axes: ``pad`` axes of the output it lacks."""
    __slots__ = ("key", "t", "pad")

    def __init__(self, key, t, pad):
        self.key, self.t, self.pad = key, t, pad

    def along(self, n: int) -> bool:
        """Does it vary along the output's leading axis (of length n)?"""
        return self.pad == 0 and self.t.shape[0] == n and n != 1

    def rows(self, n: int, r0: int, r1: int) -> "_Operand":
        return _Operand(self.key, self.t[r0:r1], self.pad) if self.along(n) else self

    def drop(self, i: int) -> "_Operand":
        """The operand for output index ``i`` of the leading axis, that axis gone."""
        if self.pad > 0:
            return _Operand(self.key, self.t, self.pad - 1)
        return _Operand(self.key, self.t[i if self.t.shape[0] != 1 else 0], 0)


def pieces(ctx: PlanContext, shape: tuple, operands: list):
    """Lists of operands covering output ``shape`` in pieces each of whose
    tensors one binding reaches: row ranges of the leading axis, and where
    one row is too long, each row cut the same way along the next axis."""
    if all(fits(ctx, o.t) for o in operands):
        yield operands
        return
    if not shape:
        raise PastBindingRangeError("a 0-d piece cannot be cut further")
    n = shape[0]
    varying = [o for o in operands if o.along(n)]
    rows = 0
    if varying and all(fits(ctx, o.t) for o in operands if not o.along(n)):
        try:
            rows = _rows_that_fit(ctx, [o.t for o in varying])
        except PastBindingRangeError:   # one row is too long: cut each row instead
            rows = 0
    if rows >= 1:
        for r0 in range(0, n, rows):
            part = [o.rows(n, r0, min(n, r0 + rows)) for o in operands]
            if all(fits(ctx, o.t) for o in part):
                yield part
            else:                       # unusual strides: one row at a time
                for i in range(r0, min(n, r0 + rows)):
                    yield from pieces(ctx, shape[1:], [o.drop(i) for o in operands])
        return
    for i in range(n):
        yield from pieces(ctx, shape[1:], [o.drop(i) for o in operands])


def _run(ctx: PlanContext, planner, arguments: dict, views: dict, dispatches: list):
    """Plan one piece, the tensors in ``views`` (by parameter name) bound
    through windows; returns its OpResult."""
    result = planner(ctx, **dict(arguments, **{k: window_view(ctx, t) for k, t in views.items()}))
    dispatches.extend(result.dispatches)
    return result


def _first_elements(t: Tensor) -> Tensor:
    return t[tuple(slice(0, 1) for _ in t.shape)]


def _check_out(ctx: PlanContext, name: str, out, shape: tuple, dtype, inputs, in_place: bool = True) -> Tensor:
    # Where out lies is for the pieces to check: it is bound in windows.
    return check_out(ctx, out, shape, dtype, inputs, f"rec.{name} out", in_place=in_place, reach=False)


# -- point-wise ---------------------------------------------------------------------

def POINTWISE(ctx: PlanContext, name, planner, arguments: dict) -> OpResult:
    """Trait of point-wise ops: row ranges of the output, operands sliced
    alike (or whole where they broadcast)."""
    out = arguments.get("out")
    inputs = {k: t for k, t in arguments.items() if k != "out" and isinstance(t, Tensor)}
    shape = broadcast_shapes(*(t.shape for t in inputs.values())) if inputs else out.shape
    # The op's own checks (dtypes, contexts, arguments) on one element of each.
    probe_views = {k: _first_elements(t) for k, t in inputs.items()}
    if out is not None:
        check_ours(ctx, out, f"rec.{name} out")
        probe_views["out"] = _first_elements(out)
    probe = _run(ctx, planner, arguments, probe_views, [])
    if name != "fill":
        dtype = probe.value.dtype
        if out is None:
            out = ctx.empty(shape, dtype)
        else:
            _check_out(ctx, name, out, shape, dtype, inputs.values())
    del probe
    operands = [_Operand(k, t, len(shape) - t.ndim) for k, t in inputs.items()] + [_Operand("out", out, 0)]
    dispatches = []
    for part in pieces(ctx, shape, operands):
        _run(ctx, planner, arguments, {o.key: o.t for o in part}, dispatches)
    return OpResult(out if name != "fill" else None, dispatches)


# -- independent along the leading axis ------------------------------------------------

def rowwise(axis: str = "axis", *, combine: bool = False):
    """Trait of ops whose rows along the leading axis depend only on the
    same rows of ``x`` when they work over other axes. ``axis`` names the
    op's axis parameter (its value None meaning every axis; its default
    comes from the op's signature), or is None for ops over the last axis
    only. ``combine``: over axis 0 or everything, each row range reduces
    into a partial tensor that is reduced again (sum, max, min, mean)."""
    leading = _combine if combine else None

    def plan_rows(ctx: PlanContext, name, planner, arguments: dict) -> OpResult:
        return _rowwise(ctx, name, planner, arguments, axis, leading)
    return plan_rows


def _axes(name: str, arguments: dict, ndim: int, param):
    """The op's axes, normalized: a set, or None for every axis."""
    if param is None:
        return {ndim - 1}
    axis = arguments.get(param)
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    return {normalize_axis(a, ndim, f"rec.{name}") for a in items}


def _rowwise(ctx: PlanContext, name, planner, arguments: dict, param, leading) -> OpResult:
    x = arguments["x"]
    if not isinstance(x, Tensor):
        raise PastBindingRangeError("x is not a tensor")
    axes = _axes(name, arguments, x.ndim, param)
    if axes is None or 0 in axes or x.ndim == 0:
        if leading is not None:
            return leading(ctx, name, planner, arguments, axes)
        raise PastBindingRangeError(f"rec.{name} over axis 0")
    # Row i of the result is the op on x[i] with every axis one lower.
    shifted = {}
    if param is not None and arguments.get(param) is not None:
        shifted[param] = tuple(a - 1 for a in sorted(axes)) if leading is _combine else min(axes) - 1
    n = x.shape[0]
    # The op's own checks on the first row, which also give the result's shape.
    if fits(ctx, x[0:1]):
        probe = _run(ctx, planner, dict(arguments, out=None), {"x": x[0:1]}, [])
        shape = (n,) + probe.value.shape[1:]
    else:
        probe = _plan(ctx, name, dict(arguments, x=x[0], out=None, **shifted), [])
        shape = (n,) + probe.value.shape
    out = arguments.get("out")
    if out is None:
        out = ctx.empty(shape, probe.value.dtype)
    else:
        _check_out(ctx, name, out, shape, probe.value.dtype, [x])
    del probe
    dispatches = []
    try:
        rows = _rows_that_fit(ctx, [x, out])
    except PastBindingRangeError:           # one row is too long: each row on its own
        for i in range(n):
            _plan(ctx, name, dict(arguments, x=x[i], out=out[i], **shifted), dispatches)
        return OpResult(out, dispatches)
    for r0 in range(0, n, rows):
        _run(ctx, planner, arguments, {"x": x[r0:r0 + rows], "out": out[r0:r0 + rows]}, dispatches)
    return OpResult(out, dispatches)


def _rows_that_fit(ctx: PlanContext, tensors) -> int:
    """Leading-axis rows per piece so that every tensor's piece fits one binding."""
    max_range = ctx.limits.max_storage_buffer_range - _alignment(ctx)
    rows = max(1, tensors[0].shape[0])
    for t in tensors:
        if t.ndim == 0 or t.shape[0] == 0:
            continue
        slab = extent(ctx, t[0:1])
        step = abs(t.strides[0]) * t.dtype.size
        if slab > max_range:
            raise PastBindingRangeError("one row is larger than one binding")
        if step:
            rows = min(rows, (max_range - slab) // step + 1)
    return max(1, rows)


def _combine(ctx: PlanContext, name, planner, arguments: dict, axes) -> OpResult:
    """sum / max / min / mean over axis 0 (or everything): each row range
    reduces into its slot of a partial tensor, which is reduced again."""
    x = arguments["x"]
    if axes is None and x.ndim != 1:
        # Everything at once: as one long row.
        if not x.is_contiguous:
            raise PastBindingRangeError(f"rec.{name} of a whole non-contiguous view")
        out = arguments.get("out")
        flat = dict(arguments, x=x.reshape(-1), keepdims=False,
                    out=out.reshape(()) if isinstance(out, Tensor) and out.size == 1 else out)
        result = _combine(ctx, name, planner, flat, None)
        if arguments.get("keepdims") and out is None:
            return OpResult(result.value.reshape((1,) * x.ndim), result.dispatches)
        return OpResult(out if out is not None else result.value, result.dispatches)
    if axes is None:
        axes = set(range(x.ndim))
    if name == "mean" and x.dtype.name not in ("float32", "float16"):
        raise PastBindingRangeError("mean of integers")
    part_op = registered_ops()["sum" if name == "mean" else name]
    axis = tuple(sorted(axes))
    # Each piece keeps its (reduced) leading axis, so the partials stack on it.
    piece = dict(arguments, axis=axis, keepdims=True, out=None)
    probe = _run(ctx, part_op, piece, {"x": x[0:1]}, [])
    rows = _rows_that_fit(ctx, [x])
    n = x.shape[0]
    if rows < 2 and n > 1:
        raise PastBindingRangeError(f"rec.{name} over axis 0 of rows each close to one binding")
    partial = ctx.empty((-(-n // rows),) + probe.value.shape[1:], probe.value.dtype)
    del probe
    dispatches = []
    for c, r0 in enumerate(range(0, n, rows)):
        _run(ctx, part_op, piece, {"x": x[r0:r0 + rows], "out": partial[c:c + 1]}, dispatches)
    final = dict(arguments, x=partial, axis=axis)
    if name != "mean":
        return OpResult(_plan(ctx, name, final, dispatches).value, dispatches)
    total = _plan(ctx, "sum", dict(final, out=None), dispatches)
    count = math.prod(x.shape[a] for a in axes)
    scaled = _plan(ctx, "scale", {"x": total.value, "factor": 1.0 / count, "out": arguments.get("out")}, dispatches)
    return OpResult(scaled.value, dispatches)


def _select_rows(ctx: PlanContext, name, planner, arguments: dict, axes) -> OpResult:
    """index_select along axis 0: index ranges select into their rows of out."""
    x, indices = arguments["x"], arguments["indices"]
    if not fits(ctx, x):
        raise PastBindingRangeError("the source is larger than one binding")
    n = len(indices)
    probe = _run(ctx, planner, dict(arguments, indices=indices[0:1], out=None), {"x": x}, [])
    shape = (n,) + probe.value.shape[1:]
    out = arguments.get("out")
    if out is None:
        out = ctx.empty(shape, probe.value.dtype)
    else:
        _check_out(ctx, name, out, shape, probe.value.dtype, [x, indices], in_place=False)
    del probe
    dispatches = []
    rows = _rows_that_fit(ctx, [out])
    for r0 in range(0, n, rows):
        _run(ctx, planner, dict(arguments, indices=indices[r0:r0 + rows]), {"x": x, "out": out[r0:r0 + rows]},
             dispatches)
    return OpResult(out, dispatches)


def INDEX_SELECT(ctx: PlanContext, name, planner, arguments: dict) -> OpResult:
    """Trait of index_select: along axis 0, index ranges each select into
    their rows of out (the source must fit one binding); along other axes,
    row ranges as :func:`rowwise`."""
    return _rowwise(ctx, name, planner, arguments, "axis", _select_rows)


# -- concat and matmul ---------------------------------------------------------------------

def CONCAT(ctx: PlanContext, name, planner, arguments: dict) -> OpResult:
    """Trait of concat: a windowed copy of each input into its slice of out."""
    tensors = list(arguments["tensors"]) if isinstance(arguments["tensors"], (list, tuple)) else None
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise PastBindingRangeError("concat takes a list of tensors")
    ndim = tensors[0].ndim
    axis = normalize_axis(arguments["axis"], ndim, "rec.concat")
    # Every check of the op itself, on the first element of each.
    probes = [window_view(ctx, _first_elements(t)) for t in tensors]
    probe = planner(ctx, **dict(arguments, tensors=probes, out=None))
    shape = list(tensors[0].shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    for t in tensors:
        if t.ndim != ndim or any(t.shape[d] != shape[d] for d in range(ndim) if d != axis):
            raise ShapeError("rec.concat: inputs must match in every axis but the concatenation axis")
    out = arguments.get("out")
    if out is None:
        out = ctx.empty(tuple(shape), probe.value.dtype)
    else:
        _check_out(ctx, name, out, shape, probe.value.dtype, tensors, in_place=False)
    del probe
    dispatches, at = [], 0
    for t in tensors:
        index = tuple(slice(at, at + t.shape[axis]) if d == axis else slice(None) for d in range(ndim))
        at += t.shape[axis]
        _plan(ctx, "copy", {"src": t, "out": out[index]}, dispatches)
    return OpResult(out, dispatches)


def MATMUL(ctx: PlanContext, name, planner, arguments: dict) -> OpResult:
    """Trait of matmul (2-D): row ranges of ``a`` and ``out``; a ``b``
    larger than one binding cut along K and the partial products added."""
    a, b = arguments["a"], arguments["b"]
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a.ndim == 2 and b.ndim == 2):
        raise PastBindingRangeError("matmul runs in pieces for 2-D operands only")
    probe = _run(ctx, planner, dict(arguments, out=None), {"a": a[0:1, 0:1], "b": b[0:1, 0:1]}, [])
    if a.shape[1] != b.shape[0]:
        raise ShapeError(f"rec.matmul: shapes {a.shape} and {b.shape} do not chain (K differs)")
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    out = arguments.get("out")
    if out is None:
        out = ctx.empty((m, n), probe.value.dtype)
    else:
        _check_out(ctx, name, out, (m, n), probe.value.dtype, [a, b], in_place=False)
    del probe
    dispatches = []
    # Row ranges of a and out; where b is larger than one binding, ranges
    # of K too: the first partial product goes to out, later ones add to it.
    ks = k if k == 0 or fits(ctx, b) else _rows_that_fit(ctx, [b])
    while ks > 1 and not fits(ctx, a[0:1, 0:ks]):      # one row of a is too long: cut K more
        ks = (ks + 1) // 2
    rows = _rows_that_fit(ctx, [a[:, 0:ks], out])
    for r0 in range(0, m, rows):
        o = out[r0:r0 + rows]
        for k0 in range(0, max(k, 1), max(ks, 1)):
            views = {"a": a[r0:r0 + rows, k0:k0 + ks], "b": b[k0:k0 + ks]}
            if k0 == 0:
                _run(ctx, planner, arguments, dict(views, out=o), dispatches)
            else:
                part = _run(ctx, planner, dict(arguments, out=None), views, dispatches)
                _plan(ctx, "add", {"a": o, "b": part.value, "out": o}, dispatches)
    return OpResult(out, dispatches)


# -- entry point ------------------------------------------------------------------------------

def _windowed(ctx: PlanContext, name: str, planner, arguments: dict) -> OpResult:
    """Op ``name`` in pieces; PastBindingRangeError when it cannot run so."""
    trait = op_windows(name)
    if trait is None:
        raise PastBindingRangeError(f"rec.{name} has no windowed form")
    return trait(ctx, name, planner, arguments)


def _plan(ctx: PlanContext, name: str, arguments: dict, dispatches: list) -> OpResult:
    """Plan op ``name`` whole when one binding reaches its tensors, else in
    pieces; its dispatches are appended to ``dispatches``."""
    planner = registered_ops()[name]
    args = {k: window_view(ctx, t) if isinstance(t, Tensor) and fits(ctx, t) else t for k, t in arguments.items()}
    try:
        result = planner(ctx, **args)
    except PastBindingRangeError:
        result = _windowed(ctx, name, planner, arguments)
    dispatches.extend(result.dispatches)
    return result


def plan_in_windows(ctx: PlanContext, name: str, planner, args: tuple, kwargs: dict) -> OpResult:
    """Plan op ``name`` in pieces whose tensors each fit one binding (see
    the module notes); UnsupportedError, before anything is recorded, for
    an op that cannot run so."""
    bound = inspect.signature(planner).bind(ctx, *args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    del arguments["ctx"]
    try:
        return _windowed(ctx, name, planner, arguments)
    except PastBindingRangeError as e:
        why = str(e)
    max_range = ctx.limits.max_storage_buffer_range
    raise UnsupportedError(
        f"rec.{name} on a tensor that reaches past the device's maxStorageBufferRange ({max_range} bytes, "
        f"what one kernel binding reaches): {why}; split the work into smaller tensors (slices along the "
        "first axis with out= views). docs/integration.md, \"One binding's reach\", lists the ops that run "
        "in windows")
