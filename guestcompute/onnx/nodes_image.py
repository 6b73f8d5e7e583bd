"""Image ONNX nodes over (N, C, spatial...) tensors: Conv, MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool and Resize.

guestcompute's ``conv2d`` and ``resize`` are image filters (one small
kernel per channel, clamped borders; sampler-based image resampling), not
the channel-mixing, zero-padded, strided operators ONNX means. So these
nodes are built from general ops instead: the windows are gathered with
one ``index_select`` (windows.py) and then reduced with ``matmul`` (Conv,
with groups, strides, dilations, pads), ``max`` or ``sum`` (the pools);
Resize multiplies by interpolation matrices built on the CPU (nearest and
linear, per axis)."""
from __future__ import annotations

import numpy as np

from .table import FLOATS, Const, Plan, Sym, attr, only_attrs, require_dtype, rule, unsupported
from .windows import windows


def _image_input(node, x, kernel_rank=None):
    if isinstance(x, Const):
        raise unsupported(node, "a constant image input (fold it before export)")
    if len(x.shape) < 3:
        raise unsupported(node, f"an input of shape {x.shape} (takes N, C and spatial dims)")
    if kernel_rank is not None and kernel_rank != len(x.shape) - 2:
        raise unsupported(node, f"a kernel of {kernel_rank} dims for {len(x.shape) - 2} spatial dims")
    return require_dtype(node, x, FLOATS)


def _gather_windows(rec, x, index, cols):
    """Every window of ``x`` (N, C, spatial...) into ``cols`` (N, C, K, O)."""
    n, c = x.shape[:2]
    rec.index_select(x.reshape(n, c, -1), index, 2, out=cols)


@rule("Conv")
def conv(node, args, opset):
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else None
    d = _image_input(node, x, len(w.shape) - 2)
    if require_dtype(node, w, FLOATS, "weight") != d:
        raise unsupported(node, "weight and input dtypes differ")
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    groups = int(attr(node, "group", 1))
    if c != cg * groups or m % groups:
        raise unsupported(node, f"{c} input channels, weight {w.shape} and group={groups} do not match")
    kernel = tuple(attr(node, "kernel_shape", w.shape[2:]))
    if kernel != tuple(w.shape[2:]):
        raise unsupported(node, f"kernel_shape {kernel} differs from the weight's {w.shape[2:]}")
    win = windows(node, x.shape[2:], kernel)
    k, o = win.index.shape
    uploads = [win.index]
    if isinstance(w, Const):          # (G, M/G, C/G * K): one matmul per group, batched
        uploads.append(w.value.reshape(groups, m // groups, cg * k).astype(np.dtype(d)))
    if isinstance(b, Const):
        uploads.append(b.value.reshape((m,) + (1,) * len(win.out)).astype(np.dtype(d)))
    const_w, const_b = isinstance(w, Const), isinstance(b, Const)
    uses = (0,) + ((1,) if not const_w else ()) + ((2,) if b is not None and not const_b else ())

    def record(rec, t):
        cols = t.scratch[0]
        _gather_windows(rec, t.ins[0], t.consts[0], cols)
        weight = t.consts[1] if const_w else t.ins[1].reshape(groups, m // groups, cg * k)
        y = t.outs[0]
        rec.matmul(weight, cols.reshape(n, groups, cg * k, o), out=y.reshape(n, groups, m // groups, o))
        if b is not None:
            bias = t.consts[-1] if const_b else t.ins[2].reshape((m,) + (1,) * len(win.out))
            rec.add(y, bias, out=y)
    return Plan([Sym((n, m) + win.out, d)], record, uses=uses, uploads=uploads,
                scratch=[((n, c, k, o), d)])


def _pool_windows(node, x):
    kernel = tuple(attr(node, "kernel_shape", ()))
    if not kernel:
        raise unsupported(node, "no kernel_shape")
    d = _image_input(node, x, len(kernel))
    return d, windows(node, x.shape[2:], kernel, bool(attr(node, "ceil_mode", 0)))


@rule("MaxPool")
def max_pool(node, args, opset):
    x = args[0]
    if len(node.outputs) > 1 and node.outputs[1]:
        raise unsupported(node, "the Indices output is not supported")
    only_attrs(node, {"storage_order": lambda v: v == 0})
    d, win = _pool_windows(node, x)
    n, c = x.shape[:2]
    k, o = win.index.shape
    uploads = [win.index]
    masked = not win.inside.all()
    if masked:      # positions in the padding must lose every max: -inf there
        uploads.append(np.where(win.inside, 0, -np.inf).astype(np.dtype(d)))

    def record(rec, t):
        cols = t.scratch[0]
        _gather_windows(rec, t.ins[0], t.consts[0], cols)
        if masked:
            rec.add(cols, t.consts[1], out=cols)
        rec.max(cols, axis=2, out=t.outs[0].reshape(n, c, o))
    return Plan([Sym((n, c) + win.out, d)], record, uses=(0,), uploads=uploads,
                scratch=[((n, c, k, o), d)])


@rule("AveragePool")
def average_pool(node, args, opset):
    x = args[0]
    d, win = _pool_windows(node, x)
    n, c = x.shape[:2]
    k, o = win.index.shape
    counted = win.padded if attr(node, "count_include_pad", 0) else win.inside
    uploads = [win.index, (1.0 / np.maximum(counted.sum(axis=0), 1)).astype(np.dtype(d))]

    def record(rec, t):
        cols = t.scratch[0]
        _gather_windows(rec, t.ins[0], t.consts[0], cols)
        y = t.outs[0].reshape(n, c, o)
        rec.sum(cols, axis=2, out=y)
        rec.mul(y, t.consts[1], out=y)
    return Plan([Sym((n, c) + win.out, d)], record, uses=(0,), uploads=uploads,
                scratch=[((n, c, k, o), d)])


@rule("GlobalAveragePool", "GlobalMaxPool")
def global_pool(node, args, opset):
    x = args[0]
    d = _image_input(node, x)
    axes = tuple(range(2, len(x.shape)))
    method = "mean" if node.op_type == "GlobalAveragePool" else "max"

    def record(rec, t):
        getattr(rec, method)(t.ins[0], axis=axes, keepdims=True, out=t.outs[0])
    return Plan([Sym(x.shape[:2] + (1,) * len(axes), d)], record)

