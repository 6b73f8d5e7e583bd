"""Normalization ONNX nodes of image networks over (N, C, spatial...):
InstanceNormalization and GroupNormalization (each instance or group of
channels normalized with ``layer_norm`` as rows, then a per-channel scale
and bias), MeanVarianceNormalization (any axes, through reductions) and
LpNormalization (p = 1 or 2 along one axis)."""
from __future__ import annotations

import math

import numpy as np

from .table import FLOATS, Plan, Sym, attr, const_input, norm_axis, require_dtype, rule, unsupported


def _channel_affine(node, args, x, d, per: int = 1):
    """Uploads of the scale and bias (inputs 1 and 2), one value per
    ``per`` channels, as per-channel arrays (C, 1, ...) broadcasting over
    (N, C, spatial...)."""
    c = x.shape[1]
    shape = (c,) + (1,) * (len(x.shape) - 2)
    out = []
    for k, what in ((1, "scale"), (2, "bias")):
        v = const_input(node, args, k, what)
        if v is None:
            raise unsupported(node, f"no {what} input")
        v = np.asarray(v).reshape(-1)
        if v.size * per != c:
            raise unsupported(node, f"a {what} of {v.size} values for {c} channels")
        out.append(np.repeat(v, per).reshape(shape).astype(np.dtype(d)))
    return out


def _image(node, x):
    d = require_dtype(node, x, FLOATS)
    if len(x.shape) < 3:
        raise unsupported(node, f"an input of shape {x.shape} (takes N, C and spatial dims)")
    return d


@rule("InstanceNormalization", "GroupNormalization")
def instance_or_group_norm(node, args, opset):
    x = args[0]
    d = _image(node, x)
    n, c = x.shape[:2]
    eps = float(attr(node, "epsilon", 1e-5))
    groups = c if node.op_type == "InstanceNormalization" else int(attr(node, "num_groups"))
    if groups <= 0 or c % groups:
        raise unsupported(node, f"{c} channels in {groups} groups")
    only_stash = attr(node, "stash_type", 1)
    if only_stash != 1:
        raise unsupported(node, f"attribute stash_type={only_stash!r} is not supported")
    rows = (n * groups, (c // groups) * math.prod(x.shape[2:]))
    # GroupNormalization before opset 21 took one scale and bias per group.
    per_group = node.op_type == "GroupNormalization" and opset < 21
    uploads = _channel_affine(node, args, x, d, c // groups if per_group else 1)

    def record(rec, t):
        y = t.outs[0]
        rec.layer_norm(t.ins[0].reshape(rows), eps=eps, out=y.reshape(rows))
        rec.mul(y, t.consts[0], out=y)
        rec.add(y, t.consts[1], out=y)
    return Plan([Sym(x.shape, d)], record, uses=(0,), uploads=uploads)


@rule("MeanVarianceNormalization")
def mean_variance_norm(node, args, opset):
    """(x - mean) / sqrt(var + 1e-9) over ``axes`` (default 0, 2, 3), the
    variance biased, as ONNX's function body defines it."""
    x = args[0]
    d = require_dtype(node, x, FLOATS)
    axes = tuple(sorted({norm_axis(node, int(a), len(x.shape)) for a in attr(node, "axes", [0, 2, 3])}))
    kept = tuple(1 if k in axes else s for k, s in enumerate(x.shape))

    def record(rec, t):
        centred, mean, var = t.scratch
        rec.mean(t.ins[0], axes, keepdims=True, out=mean)
        rec.sub(t.ins[0], mean, out=centred)
        rec.mul(centred, centred, out=t.outs[0])
        rec.mean(t.outs[0], axes, keepdims=True, out=var)
        rec.add(var, t.consts[0], out=var)
        rec.rsqrt(var, out=var)
        rec.mul(centred, var, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0,), uploads=[np.array(1e-9, np.dtype(d))],
                scratch=[(x.shape, d), (kept, d), (kept, d)])


@rule("LpNormalization")
def lp_norm(node, args, opset):
    """x / ||x||_p along ``axis``; 0 where the norm is 0 (ONNX's reference)."""
    x = args[0]
    d = require_dtype(node, x, FLOATS)
    axis = norm_axis(node, int(attr(node, "axis", -1)), len(x.shape))
    p = int(attr(node, "p", 2))
    if p not in (1, 2):
        raise unsupported(node, f"attribute p={p} (1 and 2 are defined)")
    kept = tuple(1 if k == axis else s for k, s in enumerate(x.shape))

    def record(rec, t):
        part, norm = t.scratch
        if p == 1:
            rec.abs(t.ins[0], out=part)
        else:
            rec.mul(t.ins[0], t.ins[0], out=part)
        rec.sum(part, axis, keepdims=True, out=norm)
        if p == 2:
            rec.sqrt(norm, out=norm)
        rec.div(t.ins[0], norm, out=t.outs[0])
        rec.where(norm, t.outs[0], 0.0, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0,), scratch=[(x.shape, d), (kept, d)])
