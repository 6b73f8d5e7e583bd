"""Activation ONNX nodes composed of guestcompute's elementwise ops:
Reciprocal, Softsign, Softplus, Elu, Selu, Celu, ThresholdedRelu,
HardSigmoid, HardSwish, PRelu and Mish (float32/float16), and Dropout in
inference (the identity). Each folds on the CPU when its input is a
constant; the scalars a composition needs are uploaded once at bind.

Softplus is evaluated as relu(x) + log(1 + exp(-|x|)): the same function
as ONNX's log(exp(x) + 1), without its overflow to inf for x above 88."""
from __future__ import annotations

import numpy as np

from .table import FLOATS, Const, Plan, Sym, attr, const_input, require_dtype, rule, unsupported


def _softplus_np(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _exp_linear_np(x, a, g, c):
    return g * (np.maximum(x, 0) + a * (np.exp(np.minimum(x, 0) / c) - 1))


def _params(node) -> dict:
    """The node's attributes with ONNX's defaults."""
    op = node.op_type
    if op == "Selu":
        return {"a": float(attr(node, "alpha", 1.67326319217681884765625)),
                "g": float(attr(node, "gamma", 1.05070102214813232421875)), "c": 1.0}
    if op in ("Elu", "Celu"):
        alpha = float(attr(node, "alpha", 1.0))
        return {"a": alpha, "g": 1.0, "c": alpha if op == "Celu" else 1.0}
    if op == "ThresholdedRelu":
        return {"alpha": float(attr(node, "alpha", 1.0))}
    if op == "HardSigmoid":
        return {"alpha": float(attr(node, "alpha", 0.2)), "beta": float(attr(node, "beta", 0.5))}
    if op == "HardSwish":
        return {"alpha": 1 / 6, "beta": 0.5}
    return {}


# op type -> numpy function of (x, params) for folding constants
NUMPY = {
    "Reciprocal": lambda x, p: 1 / x,
    "Softsign": lambda x, p: x / (1 + np.abs(x)),
    "Softplus": lambda x, p: _softplus_np(x),
    "Elu": lambda x, p: _exp_linear_np(x, **p), "Selu": lambda x, p: _exp_linear_np(x, **p),
    "Celu": lambda x, p: _exp_linear_np(x, **p),
    "ThresholdedRelu": lambda x, p: np.where(x > p["alpha"], x, 0),
    "HardSigmoid": lambda x, p: np.clip(p["alpha"] * x + p["beta"], 0, 1),
    "HardSwish": lambda x, p: x * np.clip(p["alpha"] * x + p["beta"], 0, 1),
    "Mish": lambda x, p: x * np.tanh(_softplus_np(x)),
}


def _softplus(rec, x, s, one, out):
    """``out = softplus(x)``; ``s`` is scratch of x's shape (may not be ``out``)."""
    rec.abs(x, out=s)
    rec.neg(s, out=s)
    rec.exp(s, out=s)
    rec.add(s, one, out=s)
    rec.log(s, out=s)
    rec.relu(x, out=out)
    rec.add(out, s, out=out)


def _record(op: str, p: dict):
    """``record(rec, x, y, consts, scratch)`` of an activation; consts are
    the uploads :func:`_uploads` lists, in its order."""
    if op == "Reciprocal":
        return lambda rec, x, y, c, s: rec.div(c[0], x, out=y)
    if op == "Softsign":
        def softsign(rec, x, y, c, s):
            rec.abs(x, out=s[0])
            rec.add(s[0], c[0], out=s[0])
            rec.div(x, s[0], out=y)
        return softsign
    if op == "Softplus":
        return lambda rec, x, y, c, s: _softplus(rec, x, s[0], c[0], y)
    if op == "Mish":
        def mish(rec, x, y, c, s):
            _softplus(rec, x, s[0], c[0], s[1])
            rec.tanh(s[1], out=s[1])
            rec.mul(x, s[1], out=y)
        return mish
    if op in ("Elu", "Selu", "Celu"):
        def exp_linear(rec, x, y, c, s):      # g * (relu(x) + a * (exp(min(x, 0) / c) - 1))
            rec.minimum(x, c[0], out=s[0])
            if p["c"] != 1.0:
                rec.scale(s[0], 1 / p["c"], out=s[0])
            rec.exp(s[0], out=s[0])
            rec.sub(s[0], c[1], out=s[0])
            rec.scale(s[0], p["a"], out=s[0])
            rec.relu(x, out=y)
            rec.add(y, s[0], out=y)
            if p["g"] != 1.0:
                rec.scale(y, p["g"], out=y)
        return exp_linear
    if op == "ThresholdedRelu":
        def thresholded(rec, x, y, c, s):     # x where relu(x - alpha) is nonzero, i.e. x > alpha
            rec.sub(x, c[0], out=s[0])
            rec.relu(s[0], out=s[0])
            rec.where(s[0], x, 0.0, out=y)
        return thresholded

    def hard_sigmoid(rec, x, y, c, s):        # clamp(alpha x + beta, 0, 1), times x for HardSwish
        t = s[0] if op == "HardSwish" else y
        rec.scale(x, p["alpha"], out=t)
        rec.add(t, c[0], out=t)
        rec.clamp(t, 0.0, 1.0, out=t)
        if op == "HardSwish":
            rec.mul(x, t, out=y)
    return hard_sigmoid


def _uploads(op: str, p: dict) -> list:
    """The scalars the composition reads, in the order :func:`_record` uses them."""
    return {"Reciprocal": [1.0], "Softsign": [1.0], "Softplus": [1.0], "Mish": [1.0],
            "Elu": [0.0, 1.0], "Selu": [0.0, 1.0], "Celu": [0.0, 1.0],
            "ThresholdedRelu": [p.get("alpha")], "HardSigmoid": [p.get("beta")],
            "HardSwish": [p.get("beta")]}[op]


SCRATCH = {"Reciprocal": 0, "Mish": 2, "HardSigmoid": 0}


@rule(*NUMPY)
def activation(node, args, opset):
    x, p = args[0], _params(node)
    if isinstance(x, Const):
        with np.errstate(all="ignore"):
            return [Const(np.asarray(NUMPY[node.op_type](x.value, p)).astype(x.value.dtype))]
    d = require_dtype(node, x, FLOATS)
    record = _record(node.op_type, p)
    uploads = [np.array(v, np.dtype(d)) for v in _uploads(node.op_type, p)]
    scratch = [(x.shape, d)] * SCRATCH.get(node.op_type, 1)
    return Plan([Sym(x.shape, d)], lambda rec, t: record(rec, t.ins[0], t.outs[0], t.consts, t.scratch),
                uses=(0,), uploads=uploads, scratch=scratch)


@rule("PRelu")
def prelu(node, args, opset):
    x, slope = args
    if isinstance(x, Const) and isinstance(slope, Const):
        return [Const(np.where(x.value < 0, x.value * slope.value, x.value).astype(x.value.dtype))]
    d = require_dtype(node, x, FLOATS)
    if require_dtype(node, slope, FLOATS, "slope") != d:
        raise unsupported(node, "a slope of another dtype than the input")
    try:
        fits = np.broadcast_shapes(x.shape, slope.shape) == tuple(x.shape)
    except ValueError:
        fits = False
    if not fits:
        raise unsupported(node, f"a slope of shape {slope.shape} for an input of shape {x.shape}")

    def record(rec, t):                       # relu(x) + slope * min(x, 0)
        s = t.scratch[0]
        rec.minimum(t.ins[0], t.consts[0], out=s)
        rec.mul(s, t.ins[1], out=s)
        rec.relu(t.ins[0], out=t.outs[0])
        rec.add(t.outs[0], s, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0, 1), uploads=[np.array(0.0, np.dtype(d))],
                scratch=[(x.shape, d)])


@rule("Dropout")
def dropout(node, args, opset):
    x = args[0]
    training = const_input(node, args, 2, "training_mode") if opset >= 12 else None
    if (training is not None and bool(np.asarray(training))) or attr(node, "is_test", 1) == 0:
        raise unsupported(node, "training mode (only inference, where Dropout is the identity)")
    if len([o for o in node.outputs if o]) > 1:
        raise unsupported(node, "the mask output is not supported")
    if isinstance(x, Const):
        return [x]
    return Plan([Sym(x.shape, x.dtype)], view=lambda ins: [ins[0]], uses=(0,))
