"""Linear-algebra and normalization ONNX nodes: Gemm, MatMul, Softmax,
LogSoftmax, LayerNormalization, RMSNormalization, BatchNormalization.

A Gemm/MatMul followed by Add and an activation records as separate ops
here (matmul, then add, then the activation); fuse_mlp.py replaces chains
of them by one fused MLP op where they fit it."""
from __future__ import annotations

import math

import numpy as np

from .table import (FLOATS, Const, Plan, Sym, all_const, attr, const_input, dtype_of, norm_axis,
                    only_attrs, require_dtype, rule, unsupported)

MATMUL_DTYPES = ("float32", "float16", "int32")


def matmul_shape(node, a: tuple, b: tuple) -> tuple:
    """numpy.matmul's result shape (1-D operands promoted, batch dims broadcast)."""
    if not a or not b:
        raise unsupported(node, "a 0-d operand")
    a2, b2 = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise unsupported(node, f"inner dimensions differ: {a} @ {b}")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise unsupported(node, f"batch dimensions of {a} and {b} do not broadcast") from None
    return batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)


@rule("MatMul")
def matmul(node, args, opset):
    a, b = args
    if all_const(args):
        return [Const(np.matmul(a.value, b.value))]
    da, db = require_dtype(node, a, MATMUL_DTYPES), require_dtype(node, b, MATMUL_DTYPES)
    if da != db:
        raise unsupported(node, f"mixed input dtypes {da} and {db}")

    def record(rec, t):
        rec.matmul(t.ins[0], t.ins[1], out=t.outs[0])
    return Plan([Sym(matmul_shape(node, a.shape, b.shape), da)], record)


@rule("Gemm")
def gemm(node, args, opset):
    a, b = args[0], args[1]
    c = args[2] if len(args) > 2 else None
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    trans_a, trans_b = bool(attr(node, "transA", 0)), bool(attr(node, "transB", 0))
    d = require_dtype(node, a, FLOATS if (alpha, beta) != (1.0, 1.0) else MATMUL_DTYPES)
    if dtype_of(node, b) != d or (c is not None and dtype_of(node, c) != d):
        raise unsupported(node, "mixed input dtypes")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise unsupported(node, f"operands of shapes {a.shape} and {b.shape} (Gemm takes matrices)")
    m, k = a.shape[::-1] if trans_a else a.shape
    k2, n = b.shape[::-1] if trans_b else b.shape
    if k != k2:
        raise unsupported(node, f"inner dimensions differ: {a.shape} and {b.shape} (transA={trans_a}, "
                                f"transB={trans_b})")
    uploads, uses = [], [0, 1]
    if isinstance(b, Const) and alpha != 1.0:      # fold alpha into constant weights
        uploads.append((b.value * alpha).astype(b.value.dtype))
        alpha, uses = 1.0, [0]
    if c is not None and isinstance(c, Const):     # and beta into a constant bias
        uploads.append((c.value * beta).astype(c.value.dtype))
        beta = 1.0
    elif c is not None:
        uses.append(2)
    scratch = [(c.shape, d)] if c is not None and beta != 1.0 else []
    folded_b, const_c = 1 not in uses, c is not None and isinstance(c, Const)

    def record(rec, t):
        lhs = t.ins[0].T if trans_a else t.ins[0]
        rhs = t.consts[0] if folded_b else t.ins[1]
        y = t.outs[0]
        rec.matmul(lhs, rhs.T if trans_b else rhs, out=y)
        if alpha != 1.0:
            rec.scale(y, alpha, out=y)
        if const_c:
            rec.add(y, t.consts[-1], out=y)
        elif c is not None:
            bias = rec.scale(t.ins[2], beta, out=t.scratch[0]) if t.scratch else t.ins[2]
            rec.add(y, bias, out=y)
    return Plan([Sym((m, n), d)], record, uses=tuple(uses), uploads=uploads, scratch=scratch)


def _softmax_like(node, args, opset, method: str, fn):
    x = args[0]
    rank = len(x.shape)
    legacy = opset < 13       # before opset 13: softmax over the flattened trailing dims
    axis = norm_axis(node, int(attr(node, "axis", 1 if legacy else -1)), rank)
    if isinstance(x, Const):
        return [Const(fn(x.value, axis, legacy))]
    d = require_dtype(node, x, FLOATS)
    rows = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))

    def record(rec, t):
        if legacy:
            getattr(rec, method)(t.ins[0].reshape(rows), -1, out=t.outs[0].reshape(rows))
        else:
            getattr(rec, method)(t.ins[0], axis, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record)


def _np_softmax(x, axis, legacy, log=False):
    shape = x.shape
    if legacy:
        x, axis = x.reshape(math.prod(shape[:axis]), -1), 1
    z = x - x.max(axis=axis, keepdims=True)
    s = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return (z - s if log else np.exp(z - s)).reshape(shape).astype(x.dtype)


@rule("Softmax")
def softmax(node, args, opset):
    return _softmax_like(node, args, opset, "softmax", _np_softmax)


@rule("LogSoftmax")
def log_softmax(node, args, opset):
    return _softmax_like(node, args, opset, "log_softmax",
                         lambda x, a, legacy: _np_softmax(x, a, legacy, log=True))


def _norm_operands(node, args, x, axis: int, d: str, names: tuple):
    """(uploads, uses, operand(t, name)) for a normalization's per-element
    inputs (scale, bias) over the normalized axes ``x.shape[axis:]``,
    flattened to one row: constants broadcast and uploaded once, GPU values
    of the normalized size read as they are."""
    size = math.prod(x.shape[axis:])
    uploads, uses, where = [], [0], {}
    for k, what in enumerate(names, start=1):
        arg = args[k] if k < len(args) else None
        if arg is None:
            continue
        if isinstance(arg, Const):
            value = np.broadcast_to(arg.value, x.shape[axis:]).reshape(-1).astype(np.dtype(d))
            where[what] = ("const", len(uploads))
            uploads.append(value)
        elif math.prod(arg.shape) == size:
            where[what] = ("in", k)
            uses.append(k)
        else:
            raise unsupported(node, f"a {what} of shape {arg.shape} computed on the GPU (it must have "
                                    f"the normalized shape {x.shape[axis:]})")

    def operand(t, what):
        if what not in where:
            return None
        kind, k = where[what]
        return t.consts[k] if kind == "const" else t.ins[k].reshape(size)
    return uploads, tuple(uses), operand


@rule("LayerNormalization", "RMSNormalization")
def layer_norm(node, args, opset):
    x = args[0]
    rms = node.op_type == "RMSNormalization"
    stats = len(node.outputs) > 1 and any(node.outputs[1:])
    if stats and rms:
        raise unsupported(node, "outputs beyond Y are not supported")
    only_attrs(node, {"stash_type": lambda v: v == 1})
    d = require_dtype(node, x, FLOATS)
    axis = norm_axis(node, int(attr(node, "axis", -1)), len(x.shape))
    eps = float(attr(node, "epsilon", 1e-5))
    rows = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    uploads, uses, operand = _norm_operands(node, args, x, axis, d, ("scale",) if rms else ("scale", "bias"))

    def record(rec, t):
        x2, y2 = t.ins[0].reshape(rows), t.outs[0].reshape(rows)
        if rms:
            rec.rms_norm(x2, operand(t, "scale"), eps=eps, out=y2)
        else:
            rec.layer_norm(x2, operand(t, "scale"), operand(t, "bias"), eps=eps, out=y2)
        if stats:
            _mean_and_inv_std(rec, x2, t.outs[1].reshape(rows[0], 1), t.outs[2].reshape(rows[0], 1),
                              t.scratch, t.consts[-1])
    outputs = [Sym(x.shape, d)]
    scratch = []
    if stats:
        # Mean and InvStdDev: float32 (the stash type), the normalized axes kept as 1s.
        kept = x.shape[:axis] + (1,) * (len(x.shape) - axis)
        outputs += [Sym(kept, "float32"), Sym(kept, "float32")]
        scratch = [(rows, "float32")] + ([(rows, "float32")] if d != "float32" else [])
        uploads = uploads + [np.array(eps, np.float32)]          # last: t.consts[-1]
    return Plan(outputs, record, uses=uses, uploads=uploads, scratch=scratch)


def _mean_and_inv_std(rec, x2, mean, inv_std, scratch, eps):
    """LayerNormalization's Mean and InvStdDev of the rows of ``x2``
    (1 / sqrt(biased variance + eps); ``eps`` a float32 guest scalar),
    computed in float32."""
    centred = scratch[0]
    if len(scratch) > 1:
        rec.cast(x2, "float32", out=scratch[1])
        x2 = scratch[1]
    rec.mean(x2, -1, keepdims=True, out=mean)
    rec.sub(x2, mean, out=centred)
    rec.mul(centred, centred, out=centred)
    rec.mean(centred, -1, keepdims=True, out=inv_std)
    rec.add(inv_std, eps, out=inv_std)
    rec.rsqrt(inv_std, out=inv_std)


@rule("BatchNormalization")
def batch_norm(node, args, opset):
    """Inference: ``scale * (x - mean) / sqrt(var + eps) + bias`` per channel
    (axis 1), folded at bind into one multiply and one add."""
    x = args[0]
    if bool(attr(node, "training_mode", 0)) or any(o for o in node.outputs[1:]):
        raise unsupported(node, "training mode (the running statistics outputs are not supported)")
    only_attrs(node, {"spatial": lambda v: v == 1})
    d = require_dtype(node, x, FLOATS)
    if len(x.shape) < 2:
        raise unsupported(node, f"an input of shape {x.shape} (it takes (N, C, ...))")
    scale, bias, mean, var = (np.asarray(const_input(node, args, k, what), np.float64)
                              for k, what in enumerate(("scale", "B", "mean", "var"), start=1))
    eps = float(attr(node, "epsilon", 1e-5))
    factor = scale / np.sqrt(var + eps)
    channel = (x.shape[1],) + (1,) * (len(x.shape) - 2)
    uploads = [factor.reshape(channel).astype(np.dtype(d)),
               (bias - mean * factor).reshape(channel).astype(np.dtype(d))]

    def record(rec, t):
        rec.mul(t.ins[0], t.consts[0], out=t.outs[0])
        rec.add(t.outs[0], t.consts[1], out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0,), uploads=uploads)
