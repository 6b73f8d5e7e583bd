"""ONNX Resize as matrix products: resizing one axis from n to m samples is
multiplying by an (m, n) matrix whose rows hold the interpolation weights
(one 1 per row for nearest, two weights for linear, four for cubic, more
for an antialiased downsampling), built on the CPU at bind time from the
node's coordinate transformation. Resizing the last two axes is
``R_h @ x @ R_w.T``: one ``rec.matmul`` per resized axis.

A row's weights are ONNX's: the source position x of the output sample, its
fraction r in (0, 1] past floor(x) (1 where x is whole), the mode's
coefficients of r, placed on the nearest source samples (ties to the
smaller index), samples past either end reading the edge one — or, with
``exclude_outside``, weighing nothing, the rest renormalized."""
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
    # half_pixel about the centre of the unrounded output (they differ where n * s is not whole)
    "half_pixel_symmetric": lambda x, s, n, m: n / 2 * (1 - m / (n * s)) + (x + 0.5) / s - 0.5,
}
_NEAREST = {
    "round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5),
    "floor": np.floor, "ceil": np.ceil,
}


def _keys(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel (coefficient ``a``) at distances ``d``."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _coefficients(mode: str, scale: float, antialias: bool, a: float):
    """``coeffs(r)``: a row's weights, in source order, for fraction ``r``.
    Antialiasing (downsampling only) widens the kernel by 1 / scale."""
    s = min(scale, 1.0) if antialias else 1.0
    reach = 1 if mode == "linear" else 2                  # the kernel's half-width in samples
    first = int(np.floor(-reach / s) + 1)
    offsets = np.arange(first, 2 - first)                # source samples from floor(x) + first

    def coeffs(r: float) -> np.ndarray:
        d = (offsets - r) * s
        w = np.clip(1 - np.abs(d), 0, 1) if mode == "linear" else _keys(d, a)
        return w / w.sum() if antialias else w
    return coeffs


def _nearest_samples(x: float, k: int, n: int) -> np.ndarray:
    """The ``k`` integer positions nearest ``x`` (ties to the smaller), in
    order, among those an edge padding of ceil(k / 2) samples reaches."""
    pad = -(-k // 2)
    base = int(np.floor(x))
    cand = range(max(-pad, base - k), min(n - 1 + pad, base + k) + 1)
    return np.array(sorted(sorted(cand, key=lambda i: (abs(x - i), i))[:k]))


def interpolation_matrix(n: int, m: int, scale: float, transform: str, mode: str, nearest: str,
                         antialias: bool = False, cubic_a: float = -0.75, exclude_outside: bool = False):
    """The (m, n) float64 matrix resizing one axis of n samples to m."""
    src = _TRANSFORMS[transform](np.arange(m, dtype=np.float64), scale, n, m)
    r = np.zeros((m, n))
    rows = np.arange(m)
    if mode == "nearest":
        r[rows, np.clip(_NEAREST[nearest](src), 0, n - 1).astype(int)] = 1.0
        return r
    coeffs = _coefficients(mode, scale, antialias, cubic_a)
    for row, x in enumerate(src):
        frac = x - np.floor(x)
        w = coeffs(frac if frac else 1.0)
        at = _nearest_samples(x, len(w), n)
        if exclude_outside:
            w = np.where((at >= 0) & (at < n), w, 0.0)
            w = w / w.sum()
        np.add.at(r[row], np.clip(at, 0, n - 1), w)
    return r


def _check_attrs(node, opset):
    mode = attr(node, "mode", "nearest")
    transform = attr(node, "coordinate_transformation_mode", "asymmetric" if opset < 11 else "half_pixel")
    nearest = attr(node, "nearest_mode", "floor" if opset < 11 else "round_prefer_floor")
    for name, value, known in (("mode", mode, ("nearest", "linear", "cubic")),
                               ("coordinate_transformation_mode", transform, _TRANSFORMS),
                               ("nearest_mode", nearest, _NEAREST),
                               ("keep_aspect_ratio_policy", attr(node, "keep_aspect_ratio_policy", "stretch"),
                                ("stretch", "not_larger", "not_smaller"))):
        if value not in known:
            raise unsupported(node, f"attribute {name}={value!r} is not supported")
    antialias = bool(attr(node, "antialias", 0))
    if antialias and mode == "nearest":
        raise unsupported(node, "attribute antialias=1 with mode='nearest' (ONNX defines it for linear and cubic)")
    return mode, transform, nearest, {"antialias": antialias, "cubic_a": float(attr(node, "cubic_coeff_a", -0.75)),
                                      "exclude_outside": bool(attr(node, "exclude_outside", 0))}


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
        policy = attr(node, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":         # one scale for every axis, the sizes rounded half up
            scale = (min if policy == "not_larger" else max)(full_scales[a] for a in axes)
            for a in axes:
                full_scales[a], full_sizes[a] = scale, int(scale * shape[a] + 0.5)
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
    mode, transform, nearest, options = _check_attrs(node, opset)
    out_shape, scales = _targets(node, args, opset, x.shape)
    rank = len(x.shape)
    changed = [a for a in range(rank) if out_shape[a] != x.shape[a] or scales[a] != 1.0]
    if any(a < rank - 2 for a in changed):
        raise unsupported(node, f"resizing axes {changed} (only the last two axes are resized)")
    mats = {a: interpolation_matrix(x.shape[a], out_shape[a], scales[a], transform, mode, nearest, **options)
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
