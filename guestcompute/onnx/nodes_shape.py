"""Shape ONNX nodes. Reshape, Flatten, Squeeze, Unsqueeze and Identity are
views (nothing recorded); Transpose, Concat, Gather, Slice and Split record
the matching guestcompute op, Expand and Tile a broadcast (a fill and an add). Shape,
Constant, ConstantOfShape and Range always fold: shapes are fixed at bind
time, so shape subgraphs become constants."""
from __future__ import annotations

import math

import numpy as np

from .table import (Const, Plan, Sym, all_const, attr, const_input, dtype_of, norm_axis, rule,
                    unsupported)


def _as_view(x, shape):
    """A Plan whose output is ``x`` reshaped (or the folded constant)."""
    shape = tuple(int(s) for s in shape)
    if isinstance(x, Const):
        return [Const(x.value.reshape(shape))]
    return Plan([Sym(shape, x.dtype)], view=lambda ins: [ins[0].reshape(shape)], uses=(0,))


@rule("Reshape")
def reshape(node, args, opset):
    x = args[0]
    target = [int(s) for s in (attr(node, "shape") if opset < 5 else const_input(node, args, 1, "shape"))]
    if not attr(node, "allowzero", 0):      # 0 copies the input's dim (unless allowzero)
        target = [x.shape[k] if s == 0 else s for k, s in enumerate(target)]
    if target.count(-1) > 1:
        raise unsupported(node, f"shape {target} has more than one -1")
    if -1 in target:
        known = math.prod(s for s in target if s != -1)
        target[target.index(-1)] = math.prod(x.shape) // known if known else 0
    if math.prod(target) != math.prod(x.shape):
        raise unsupported(node, f"cannot reshape {x.shape} into {tuple(target)}")
    return _as_view(x, target)


@rule("Flatten")
def flatten(node, args, opset):
    x = args[0]
    axis = attr(node, "axis", 1)
    axis = axis + len(x.shape) if axis < 0 else axis
    return _as_view(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


def _axes(node, args, opset, first_opset: int):
    """The ``axes`` of Squeeze/Unsqueeze: an attribute before ``first_opset``, an input from it."""
    axes = attr(node, "axes") if opset < first_opset else const_input(node, args, 1, "axes")
    return None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]


@rule("Squeeze")
def squeeze(node, args, opset):
    x = args[0]
    axes = _axes(node, args, opset, 13)
    rank = len(x.shape)
    axes = [k for k in range(rank) if x.shape[k] == 1] if axes is None else \
        [norm_axis(node, a, rank) for a in axes]
    if any(x.shape[a] != 1 for a in axes):
        raise unsupported(node, f"cannot squeeze axes {axes} of shape {x.shape}")
    return _as_view(x, [s for k, s in enumerate(x.shape) if k not in axes])


@rule("Unsqueeze")
def unsqueeze(node, args, opset):
    x = args[0]
    axes = _axes(node, args, opset, 13)
    rank = len(x.shape) + len(axes)
    axes = sorted(norm_axis(node, a, rank) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return _as_view(x, shape)


@rule("Transpose")
def transpose(node, args, opset):
    x = args[0]
    perm = [int(p) for p in attr(node, "perm", list(reversed(range(len(x.shape)))))]
    if isinstance(x, Const):
        return [Const(np.transpose(x.value, perm))]
    shape = tuple(x.shape[p] for p in perm)

    def record(rec, t):
        rec.permute(t.ins[0], perm, out=t.outs[0])
    return Plan([Sym(shape, x.dtype)], record)


@rule("Concat")
def concat(node, args, opset):
    parts = [a for a in args if a is not None]
    rank = len(parts[0].shape)
    axis = norm_axis(node, int(attr(node, "axis", 0)), rank)
    if all_const(parts):
        return [Const(np.concatenate([p.value for p in parts], axis))]
    dtypes = {dtype_of(node, p) for p in parts}
    if len(dtypes) > 1:
        raise unsupported(node, f"mixed input dtypes {sorted(dtypes)}")
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    # concat takes no empty inputs: leave those out (they add nothing).
    keep = tuple(k for k, a in enumerate(args) if a is not None and a.shape[axis] > 0)

    def record(rec, t):
        rec.concat([t.ins[k] for k in keep], axis, out=t.outs[0])
    return Plan([Sym(tuple(shape), dtypes.pop())], record, uses=keep)


def _check_indices(node, idx, n: int) -> None:
    """Gather's and GatherElements' indices into an axis of ``n``: constants
    within [-n, n), a guest tensor of int32 or uint32."""
    if isinstance(idx, Const) and idx.value.size and (idx.value.min() < -n or idx.value.max() >= n):
        raise unsupported(node, f"indices outside [-{n}, {n})")
    if dtype_of(node, idx) not in ("int32", "uint32"):
        raise unsupported(node, f"indices of dtype {dtype_of(node, idx)}")


@rule("Gather")
def gather(node, args, opset):
    x, idx = args
    axis = norm_axis(node, int(attr(node, "axis", 0)), len(x.shape))
    if all_const(args):
        return [Const(np.take(x.value, idx.value, axis=axis))]
    _check_indices(node, idx, x.shape[axis])
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]

    def record(rec, t):
        rec.index_select(t.ins[0], t.ins[1], axis, out=t.outs[0])
    return Plan([Sym(shape, dtype_of(node, x))], record)


@rule("GatherElements")
def gather_elements(node, args, opset):
    """numpy.take_along_axis: the output has the indices' shape."""
    x, idx = args
    axis = norm_axis(node, int(attr(node, "axis", 0)), len(x.shape))
    if len(idx.shape) != len(x.shape):
        raise unsupported(node, f"indices of rank {len(idx.shape)} for an input of rank {len(x.shape)}")
    if all_const(args):
        n = x.shape[axis]
        return [Const(np.take_along_axis(x.value, np.where(idx.value < 0, idx.value + n, idx.value), axis))]
    _check_indices(node, idx, x.shape[axis])

    def record(rec, t):
        rec.gather(t.ins[0], t.ins[1], axis, out=t.outs[0])
    return Plan([Sym(tuple(idx.shape), dtype_of(node, x))], record)


@rule("Trilu")
def trilu(node, args, opset):
    """The upper (or lower) triangle of the last two axes from diagonal k:
    the rest is zero (NaN and inf included), through a mask made at bind."""
    x = args[0]
    if len(x.shape) < 2:
        raise unsupported(node, f"an input of shape {x.shape} (takes matrices)")
    k = const_input(node, args, 1, "k")
    k = 0 if k is None else int(np.reshape(k, -1)[0])
    upper = bool(attr(node, "upper", 1))
    rows, cols = x.shape[-2:]
    keep = (np.triu if upper else np.tril)(np.ones((rows, cols), np.uint8), k)
    if isinstance(x, Const):
        return [Const(np.where(keep.astype(bool), x.value, np.zeros((), x.value.dtype)))]
    d = dtype_of(node, x)
    keep = keep.astype(np.dtype(d))        # the input's dtype: storage the host enabled for it

    def record(rec, t):
        rec.where(t.consts[0], t.ins[0], 0, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0,), uploads=[keep])


def _slice_of(start: int, end: int, step: int, n: int) -> slice:
    """ONNX Slice bounds (negative from the end, clamped) as a Python slice."""
    start, end = (start + n if start < 0 else start), (end + n if end < 0 else end)
    if step > 0:
        return slice(min(max(start, 0), n), min(max(end, 0), n), step)
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return slice(start, end if end >= 0 else None, step)


@rule("Slice")
def slice_(node, args, opset):
    x = args[0]
    rank = len(x.shape)
    if opset < 10:
        starts, ends = attr(node, "starts"), attr(node, "ends")
        axes, steps = attr(node, "axes"), None
    else:
        starts, ends = const_input(node, args, 1, "starts"), const_input(node, args, 2, "ends")
        axes, steps = const_input(node, args, 3, "axes"), const_input(node, args, 4, "steps")
    starts, ends = [int(v) for v in np.reshape(starts, -1)], [int(v) for v in np.reshape(ends, -1)]
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.reshape(axes, -1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.reshape(steps, -1)]
    index = [slice(None)] * rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise unsupported(node, "a step of 0")
        a = norm_axis(node, a, rank)
        index[a] = _slice_of(s, e, st, x.shape[a])
    index = tuple(index)
    if isinstance(x, Const):
        return [Const(np.ascontiguousarray(x.value[index]))]
    shape = np.empty(x.shape, np.bool_)[index].shape

    def record(rec, t):
        rec.slice(t.ins[0], index, out=t.outs[0])
    return Plan([Sym(shape, x.dtype)], record, uses=(0,))


@rule("Shape")
def shape_(node, args, opset):
    dims = np.array(args[0].shape, np.int64)
    start, end = attr(node, "start", 0), attr(node, "end", None)
    return [Const(dims[start:end])]


@rule("Size")
def size_(node, args, opset):
    return [Const(np.array(math.prod(args[0].shape), np.int64))]


@rule("Constant")
def constant(node, args, opset):
    for name, conv in (("value", np.asarray), ("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if name in node.attrs:
            return [Const(np.array(node.attrs[name], dtype=None if name == "value" else conv))]
    raise unsupported(node, f"attributes {sorted(node.attrs)} (sparse or string values)")


@rule("ConstantOfShape")
def constant_of_shape(node, args, opset):
    shape = [int(s) for s in const_input(node, args, 0, "shape")]
    value = attr(node, "value", np.zeros(1, np.float32))
    return [Const(np.full(shape, value.reshape(-1)[0], value.dtype))]


@rule("Split")
def split(node, args, opset):
    x = args[0]
    axis = norm_axis(node, int(attr(node, "axis", 0)), len(x.shape))
    n = x.shape[axis]
    sizes = attr(node, "split") if opset < 13 else const_input(node, args, 1, "split")
    if sizes is None:                         # equal parts; from opset 18 the last may be smaller
        count = int(attr(node, "num_outputs", len(node.outputs)))
        chunk = -(-n // count)
        sizes = [chunk] * (count - 1) + [n - chunk * (count - 1)]
    sizes = [int(s) for s in np.reshape(sizes, -1)]
    if sum(sizes) != n or min(sizes) < 0 or len(sizes) != len(node.outputs):
        raise unsupported(node, f"parts {sizes} of an axis of {n} into {len(node.outputs)} outputs")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    index = [tuple(slice(s, s + m) if k == axis else slice(None) for k in range(len(x.shape)))
             for s, m in zip(starts, sizes)]
    if isinstance(x, Const):
        return [Const(np.ascontiguousarray(x.value[i])) for i in index]

    def record(rec, t):
        for i, out in zip(index, t.outs):
            if out.size:
                rec.slice(t.ins[0], i, out=out)
    shapes = [np.empty(x.shape, np.bool_)[i].shape for i in index]
    return Plan([Sym(s, x.dtype) for s in shapes], record, uses=(0,))


def broadcast_into(rec, src, out):
    """``out[...] = src`` broadcast to out's shape: out is filled with the
    additive identity (-0.0, which keeps every float's sign) and ``src``
    added into it, as the elementwise ops broadcast their inputs only."""
    rec.fill(out, -0.0 if out.dtype.name in ("float32", "float16") else 0)
    rec.add(out, src, out=out)


@rule("Expand")
def expand(node, args, opset):
    x = args[0]
    target = [int(s) for s in np.reshape(const_input(node, args, 1, "shape"), -1)]
    try:
        shape = tuple(np.broadcast_shapes(x.shape, tuple(target)))
    except ValueError:
        raise unsupported(node, f"shape {x.shape} does not broadcast to {tuple(target)}") from None
    if isinstance(x, Const):
        return [Const(np.ascontiguousarray(np.broadcast_to(x.value, shape)))]

    def record(rec, t):
        broadcast_into(rec, t.ins[0], t.outs[0])
    return Plan([Sym(shape, x.dtype)], record, uses=(0,))


@rule("Tile")
def tile(node, args, opset):
    x = args[0]
    reps = [int(r) for r in np.reshape(const_input(node, args, 1, "repeats"), -1)]
    if len(reps) != len(x.shape) or min(reps, default=1) < 0:
        raise unsupported(node, f"repeats {reps} for an input of shape {x.shape}")
    if isinstance(x, Const):
        return [Const(np.tile(x.value, reps))]
    # One broadcast per repeated axis k: the tensor so far viewed as
    # (A, 1, B) (A: the axes before k) broadcast into the next as (A, r, B).
    steps, shape = [], list(x.shape)
    for k, r in enumerate(reps):
        if r != 1:
            a, b = math.prod(shape[:k]), math.prod(shape[k:])
            shape[k] *= r
            steps.append(((a, 1, b), (a, r, b), tuple(shape)))
    shape = tuple(shape)

    def record(rec, t):
        if not t.outs[0].size:
            return
        if not steps:
            rec.copy(t.ins[0], out=t.outs[0])
        src = t.ins[0]
        for k, (view, into, _) in enumerate(steps):
            dst = t.outs[0] if k == len(steps) - 1 else t.scratch[k]
            broadcast_into(rec, src.reshape(view), dst.reshape(into))
            src = dst
    return Plan([Sym(shape, x.dtype)], record, uses=(0,), scratch=[(s, x.dtype) for _, _, s in steps[:-1]])


@rule("Range")
def range_(node, args, opset):
    start, limit, delta = (const_input(node, args, k, what) for k, what in enumerate(("start", "limit", "delta")))
    return [Const(np.arange(start, limit, delta).astype(np.result_type(start, limit, delta)))]


@rule("DepthToSpace", "SpaceToDepth")
def depth_space(node, args, opset):
    """Pixel shuffles (sub-pixel upscaling and its inverse): a reshape to
    six axes, one permute, a reshape back, as ONNX defines them."""
    x, b = args[0], int(attr(node, "blocksize"))
    if len(x.shape) != 4:
        raise unsupported(node, f"an input of shape {x.shape} (takes N, C, H, W)")
    n, c, h, w = x.shape
    mode = attr(node, "mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("DCR", "CRD"):
        raise unsupported(node, f"attribute mode={mode!r} is not supported")
    if node.op_type == "DepthToSpace":
        if c % (b * b):
            raise unsupported(node, f"{c} channels for blocksize {b}")
        six, perm = ((n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)) if mode == "DCR" else \
            ((n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))
        shape = (n, c // (b * b), h * b, w * b)
    else:
        if h % b or w % b:
            raise unsupported(node, f"spatial {h}x{w} for blocksize {b}")
        six, perm = (n, c, h // b, b, w // b, b), ((0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
        shape = (n, c * b * b, h // b, w // b)
    if isinstance(x, Const):
        return [Const(np.ascontiguousarray(x.value.reshape(six).transpose(perm).reshape(shape)))]
    permuted = tuple(six[p] for p in perm)

    def record(rec, t):
        rec.permute(t.ins[0].reshape(six), perm, out=t.outs[0].reshape(permuted))
    return Plan([Sym(shape, x.dtype)], record, uses=(0,))
