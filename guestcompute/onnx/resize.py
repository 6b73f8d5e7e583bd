"""ONNX Resize as matrix products: resizing one axis from n to m samples is
multiplying by an (m, n) matrix whose rows hold the interpolation weights
(one 1 per row for nearest, two weights for linear), built on the CPU at
bind time from the node's coordinate transformation. Resizing the last two
axes is ``R_h @ x @ R_w.T``: one ``rec.matmul`` per resized axis."""
from __future__ import annotations

import math

import numpy as np

from .table import FLOATS, Plan, Sym, attr, const_input, require_dtype, rule, unsupported

_TRANSFORMS = {
    "half_pixel": lambda x, s, n, m: (x + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda x, s, n, m: (x + 0.5) / s - 0.5 if m > 1 else np.zeros_like(x),
    # the resized length is n * scale before rounding (as onnx's reference has it)
    "align_corners": lambda x, s, n, m: x * (n - 1) / (n * s - 1) if m > 1 and n * s != 1 else np.zeros_like(x),
    "asymmetric": lambda x, s, n, m: x / s,
}
_NEAREST = {
    "round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5),
    "floor": np.floor, "ceil": np.ceil,
}


def interpolation_matrix(n: int, m: int, scale: float, transform: str, mode: str, nearest: str):
    """The (m, n) float64 matrix resizing one axis of n samples to m."""
    src = _TRANSFORMS[transform](np.arange(m, dtype=np.float64), scale, n, m)
    r = np.zeros((m, n))
    rows = np.arange(m)
    if mode == "nearest":
        r[rows, np.clip(_NEAREST[nearest](src), 0, n - 1).astype(int)] = 1.0
        return r
    src = np.clip(src, 0, n - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    frac = src - lo
    np.add.at(r, (rows, lo), 1 - frac)
    np.add.at(r, (rows, hi), frac)
    return r


def _check_attrs(node, opset):
    mode = attr(node, "mode", "nearest")
    transform = attr(node, "coordinate_transformation_mode", "asymmetric" if opset < 11 else "half_pixel")
    nearest = attr(node, "nearest_mode", "floor" if opset < 11 else "round_prefer_floor")
    for name, value, known in (("mode", mode, ("nearest", "linear")),
                               ("coordinate_transformation_mode", transform, _TRANSFORMS),
                               ("nearest_mode", nearest, _NEAREST)):
        if value not in known:
            raise unsupported(node, f"attribute {name}={value!r} is not supported")
    if attr(node, "antialias", 0):
        raise unsupported(node, "attribute antialias=1 is not supported")
    if attr(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
        raise unsupported(node, f"attribute keep_aspect_ratio_policy="
                                f"{attr(node, 'keep_aspect_ratio_policy')!r} is not supported")
    return mode, transform, nearest


def _targets(node, args, opset, shape):
    """(out_shape, scales) for every axis."""
    rank = len(shape)
    scales = const_input(node, args, 1 if opset < 11 else 2, "scales")
    sizes = const_input(node, args, 3, "sizes") if opset >= 11 else None
    axes = [int(a) % rank for a in attr(node, "axes", range(rank))]
    full_scales, full_sizes = [1.0] * rank, list(shape)
    if sizes is not None and sizes.size:
        for a, s in zip(axes, sizes.reshape(-1)):
            full_sizes[a], full_scales[a] = int(s), int(s) / shape[a]
    elif scales is not None and scales.size:
        for a, s in zip(axes, scales.reshape(-1)):
            full_scales[a], full_sizes[a] = float(s), int(math.floor(shape[a] * float(s)))
    else:
        raise unsupported(node, "neither scales nor sizes given")
    return tuple(full_sizes), full_scales


@rule("Resize")
def resize_plan(node, args, opset):
    x = args[0]
    d = require_dtype(node, x, FLOATS)
    mode, transform, nearest = _check_attrs(node, opset)
    out_shape, scales = _targets(node, args, opset, x.shape)
    rank = len(x.shape)
    changed = [a for a in range(rank) if out_shape[a] != x.shape[a] or scales[a] != 1.0]
    if any(a < rank - 2 for a in changed):
        raise unsupported(node, f"resizing axes {changed} (only the last two axes are resized)")
    mats = {a: interpolation_matrix(x.shape[a], out_shape[a], scales[a], transform, mode, nearest)
            for a in changed}
    uploads = []
    if rank - 1 in mats:     # x @ R_w.T resizes the last axis
        uploads.append(np.ascontiguousarray(mats[rank - 1].T).astype(np.dtype(d)))
    if rank - 2 in mats:     # R_h @ x the one before
        uploads.append(mats[rank - 2].astype(np.dtype(d)))
    if not changed:
        return Plan([Sym(x.shape, d)], view=lambda ins: [ins[0]], uses=(0,))
    both = len(mats) == 2
    scratch = [(x.shape[:-1] + (out_shape[-1],), d)] if both else []

    def record(rec, t):
        src = t.ins[0]
        if rank - 1 in mats:
            dst = t.scratch[0] if both else t.outs[0]
            rec.matmul(src, t.consts[0], out=dst)
            src = dst
        if rank - 2 in mats:
            rec.matmul(t.consts[-1], src, out=t.outs[0])
    return Plan([Sym(out_shape, d)], record, uses=(0,), uploads=uploads, scratch=scratch)
