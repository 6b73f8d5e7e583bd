"""Reduction ONNX nodes: ReduceSum, ReduceMean, ReduceMax, ReduceMin and
the composite ones (ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum,
ReduceLogSumExp) on guestcompute's reductions; ArgMax, ArgMin and CumSum.

Axes are an attribute up to opset 17 (12 for ReduceSum) and a constant
input from then on. A reduction over an empty axis has no input values to
read: its output is folded at bind to what ONNX's reference gives there
(0 for the sums and norms, NaN for the mean, -inf for ReduceMax and the
log-reductions, +inf for ReduceMin)."""
from __future__ import annotations

import numpy as np

from .table import (FLOATS, NUMBERS, Const, Plan, Sym, attr, const_input, norm_axis, require_dtype,
                    rule, unsupported)

# op type -> (numpy reduction of host data, dtypes the GPU path takes, the
# value of an empty reduction)
REDUCTIONS = {
    "ReduceSum": (lambda v, ax: np.sum(v, ax), NUMBERS, 0.0),
    "ReduceMean": (lambda v, ax: np.mean(v, ax), FLOATS, np.nan),
    "ReduceMax": (lambda v, ax: np.max(v, ax), NUMBERS, -np.inf),
    "ReduceMin": (lambda v, ax: np.min(v, ax), NUMBERS, np.inf),
    "ReduceSumSquare": (lambda v, ax: np.sum(v * v, ax), FLOATS, 0.0),
    "ReduceL1": (lambda v, ax: np.sum(np.abs(v), ax), FLOATS, 0.0),
    "ReduceL2": (lambda v, ax: np.sqrt(np.sum(v * v, ax)), FLOATS, 0.0),
    "ReduceLogSum": (lambda v, ax: np.log(np.sum(v, ax)), FLOATS, -np.inf),
    "ReduceLogSumExp": (lambda v, ax: np.log(np.sum(np.exp(v), ax)), FLOATS, -np.inf),
}
# The opset from which ``axes`` is an input instead of an attribute.
AXES_INPUT_FROM = {"ReduceSum": 13}


def _axes(node, args, opset, rank: int):
    """The reduced axes (sorted, non-negative), or None where
    ``noop_with_empty_axes`` leaves the input as it is."""
    if opset >= AXES_INPUT_FROM.get(node.op_type, 18):
        axes = const_input(node, args, 1, "axes")
    else:
        axes = attr(node, "axes")
    axes = [] if axes is None else [int(a) for a in np.reshape(axes, -1)]
    if not axes:
        return None if attr(node, "noop_with_empty_axes", 0) else tuple(range(rank))
    axes = tuple(sorted({norm_axis(node, a, rank) for a in axes}))
    return axes


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)


@rule(*REDUCTIONS)
def reduce_(node, args, opset):
    fn, allowed, empty = REDUCTIONS[node.op_type]
    x = args[0]
    keepdims = bool(attr(node, "keepdims", 1))
    axes = _axes(node, args, opset, len(x.shape))
    if axes is None:                               # noop_with_empty_axes: the input unchanged
        if isinstance(x, Const):
            return [x]
        return Plan([Sym(x.shape, x.dtype)], view=lambda ins: [ins[0]], uses=(0,))
    shape = _reduced_shape(x.shape, axes, keepdims)
    if isinstance(x, Const):
        with np.errstate(all="ignore"):
            value = fn(x.value, axes) if x.value.size else np.full(shape, empty)
        return [Const(np.asarray(value, x.value.dtype).reshape(shape))]
    d = require_dtype(node, x, allowed)
    if any(x.shape[a] == 0 for a in axes):         # nothing to read: the identity, folded
        if np.isinf(empty) and d not in FLOATS:
            raise unsupported(node, f"an empty reduction of dtype {d} (its identity is {empty})")
        return [Const(np.full(shape, empty, np.dtype(d)))]
    record = _RECORDERS[node.op_type]
    scratch = [(x.shape, d)] if node.op_type in _ELEMENTWISE_FIRST else []
    if node.op_type == "ReduceLogSumExp":
        kept = _reduced_shape(x.shape, axes, True)
        scratch = [(x.shape, d), (kept, d), (kept, d)]
    return Plan([Sym(shape, d)], lambda rec, t: record(rec, t, axes, keepdims), uses=(0,), scratch=scratch)


def _plain(method: str):
    def record(rec, t, axes, keepdims):
        getattr(rec, method)(t.ins[0], axes, keepdims=keepdims, out=t.outs[0])
    return record


def _square_sum(rec, t, axes, keepdims):
    rec.mul(t.ins[0], t.ins[0], out=t.scratch[0])
    rec.sum(t.scratch[0], axes, keepdims=keepdims, out=t.outs[0])


def _abs_sum(rec, t, axes, keepdims):
    rec.abs(t.ins[0], out=t.scratch[0])
    rec.sum(t.scratch[0], axes, keepdims=keepdims, out=t.outs[0])


def _l2(rec, t, axes, keepdims):
    _square_sum(rec, t, axes, keepdims)
    rec.sqrt(t.outs[0], out=t.outs[0])


def _log_sum(rec, t, axes, keepdims):
    rec.sum(t.ins[0], axes, keepdims=keepdims, out=t.outs[0])
    rec.log(t.outs[0], out=t.outs[0])


def _log_sum_exp(rec, t, axes, keepdims):
    # m + log(sum(exp(x - m))) with m the max: no overflow for large inputs.
    # An infinite max shifts by 0 instead (inf - inf would be NaN): its
    # peak - peak is NaN, which where() takes as true.
    shifted, peak, infinite = t.scratch
    rec.max(t.ins[0], axes, keepdims=True, out=peak)
    rec.sub(peak, peak, out=infinite)
    rec.where(infinite, 0.0, peak, out=peak)
    rec.sub(t.ins[0], peak, out=shifted)
    rec.exp(shifted, out=shifted)
    rec.sum(shifted, axes, keepdims=keepdims, out=t.outs[0])
    rec.log(t.outs[0], out=t.outs[0])
    rec.add(t.outs[0], peak.reshape(t.outs[0].shape), out=t.outs[0])


_RECORDERS = {"ReduceSum": _plain("sum"), "ReduceMean": _plain("mean"), "ReduceMax": _plain("max"),
              "ReduceMin": _plain("min"), "ReduceSumSquare": _square_sum, "ReduceL1": _abs_sum,
              "ReduceL2": _l2, "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp}
_ELEMENTWISE_FIRST = ("ReduceSumSquare", "ReduceL1", "ReduceL2")


@rule("ArgMax", "ArgMin")
def arg_extreme(node, args, opset):
    x = args[0]
    axis = norm_axis(node, int(attr(node, "axis", 0)), len(x.shape))
    keepdims, last = bool(attr(node, "keepdims", 1)), bool(attr(node, "select_last_index", 0))
    shape = _reduced_shape(x.shape, (axis,), keepdims)
    n = x.shape[axis] if x.shape else 1
    flip = tuple(slice(None, None, -1) if k == axis else slice(None) for k in range(len(x.shape)))
    pick = np.argmax if node.op_type == "ArgMax" else np.argmin
    if n == 0:
        raise unsupported(node, f"an empty axis {axis} (it has no {node.op_type[3:].lower()})")
    if isinstance(x, Const):
        found = (n - 1 - pick(x.value[flip], axis)) if last else pick(x.value, axis)
        return [Const(np.asarray(found, np.int64).reshape(shape))]
    require_dtype(node, x, NUMBERS)
    method = node.op_type.lower()
    if not last:
        def record(rec, t):
            getattr(rec, method)(t.ins[0], axis, keepdims=keepdims, out=t.outs[0])
        return Plan([Sym(shape, "uint32")], record, uses=(0,))

    # The last of equal extremes: the first one along the reversed axis, counted from the end.
    def record_last(rec, t):
        getattr(rec, method)(t.ins[0][flip], axis, keepdims=keepdims, out=t.scratch[0])
        rec.sub(t.consts[0], t.scratch[0], out=t.outs[0])
    return Plan([Sym(shape, "uint32")], record_last, uses=(0,), uploads=[np.array(n - 1, np.uint32)],
                scratch=[(shape, "uint32")])


@rule("CumSum")
def cumsum(node, args, opset):
    x = args[0]
    axis = norm_axis(node, int(np.reshape(const_input(node, args, 1, "axis"), -1)[0]), len(x.shape))
    exclusive, reverse = bool(attr(node, "exclusive", 0)), bool(attr(node, "reverse", 0))
    # A reversed sum is the sum of the reversed axis, written back reversed (views: no copies).
    order = tuple(slice(None, None, -1 if reverse and k == axis else 1) for k in range(len(x.shape)))
    if isinstance(x, Const):
        v = x.value[order]
        total = np.cumsum(v, axis, dtype=v.dtype)
        if exclusive:
            total = total - v
        return [Const(np.ascontiguousarray(total[order]))]
    d = require_dtype(node, x, NUMBERS)

    def record(rec, t):
        rec.cumsum(t.ins[0][order], axis, exclusive=exclusive, out=t.outs[0][order])
    return Plan([Sym(x.shape, d)], record, uses=(0,))
