"""Image ONNX nodes over (N, C, spatial...) tensors: Conv, ConvTranspose,
MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool and Resize.

guestcompute's ``conv2d`` and ``resize`` are image filters (one small
kernel per channel, clamped borders; sampler-based image resampling), not
the channel-mixing, zero-padded, strided operators ONNX means. So these
nodes are built from general ops instead: the windows are gathered with
one ``index_select`` (windows.py) and then reduced with ``matmul`` (Conv
and ConvTranspose, with groups, strides, dilations, pads), ``max`` or
``sum`` (the pools);
Resize multiplies by interpolation matrices built on the CPU (nearest,
linear and cubic, per axis; resize.py)."""
from __future__ import annotations

import numpy as np

from .table import FLOATS, Const, Plan, Sym, attr, only_attrs, require_dtype, rule, unsupported
from .windows import transposed_windows, windows


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


def _conv_plan(node, args, win, weight_matrix):
    """Conv and ConvTranspose from their windows: the (N, C, K, O) columns
    times a (G, M/G, C/G * K) weight matrix, one batched matmul; the bias
    added per output channel. ``weight_matrix(w)`` rearranges the node's
    weight (numpy or a guest tensor's shape-compatible view)."""
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else None
    d = require_dtype(node, x, FLOATS)
    n, c = x.shape[:2]
    groups = int(attr(node, "group", 1))
    m = weight_matrix.channels
    k, o = win.index.shape
    uploads = [win.index]
    const_w, const_b = isinstance(w, Const), isinstance(b, Const)
    if const_w:
        uploads.append(weight_matrix(w.value).astype(np.dtype(d)))
    elif not weight_matrix.is_view:
        raise unsupported(node, "a weight computed on the GPU (it must be a constant)")
    if const_b:
        uploads.append(b.value.reshape((m,) + (1,) * len(win.out)).astype(np.dtype(d)))
    uses = (0,) + ((1,) if not const_w else ()) + ((2,) if b is not None and not const_b else ())

    def record(rec, t):
        cols = t.scratch[0]
        _gather_windows(rec, t.ins[0], t.consts[0], cols)
        weight = t.consts[1] if const_w else weight_matrix(t.ins[1])
        y = t.outs[0]
        rec.matmul(weight, cols.reshape(n, groups, c // groups * k, o), out=y.reshape(n, groups, m // groups, o))
        if b is not None:
            bias = t.consts[-1] if const_b else t.ins[2].reshape((m,) + (1,) * len(win.out))
            rec.add(y, bias, out=y)
    return Plan([Sym((n, m) + win.out, d)], record, uses=uses, uploads=uploads,
                scratch=[((n, c, k, o), d)])


class _WeightMatrix:
    """A Conv/ConvTranspose weight as (G, M/G, C/G * K): ``channels`` M;
    ``is_view``: a guest tensor's reshape gives it (no transposition)."""

    def __init__(self, fn, channels: int, is_view: bool):
        self.fn, self.channels, self.is_view = fn, channels, is_view

    def __call__(self, w):
        return self.fn(w)


@rule("Conv", "ConvTranspose")
def conv(node, args, opset):
    x, w = args[0], args[1]
    d = _image_input(node, x, len(w.shape) - 2)
    if require_dtype(node, w, FLOATS, "weight") != d:
        raise unsupported(node, "weight and input dtypes differ")
    c, groups = x.shape[1], int(attr(node, "group", 1))
    kernel = tuple(attr(node, "kernel_shape", w.shape[2:]))
    if kernel != tuple(w.shape[2:]):
        raise unsupported(node, f"kernel_shape {kernel} differs from the weight's {w.shape[2:]}")
    k = int(np.prod(kernel))
    if node.op_type == "Conv":
        m, cg = w.shape[:2]
        if c != cg * groups or m % groups:
            raise unsupported(node, f"{c} input channels, weight {w.shape} and group={groups} do not match")
        win = windows(node, x.shape[2:], kernel)
        matrix = _WeightMatrix(lambda v: v.reshape(groups, m // groups, cg * k), m, True)
    else:
        # The weight is (C, M/G, K...): per group, M/G rows of (C/G, K) after a transposition.
        mg = w.shape[1]
        if w.shape[0] != c or c % groups:
            raise unsupported(node, f"{c} input channels, weight {w.shape} and group={groups} do not match")
        win = transposed_windows(node, x.shape[2:], kernel)
        matrix = _WeightMatrix(lambda v: v.reshape(groups, c // groups, mg, k).transpose(0, 2, 1, 3)
                               .reshape(groups, mg, c // groups * k), mg * groups, False)
    return _conv_plan(node, args, win, matrix)


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

