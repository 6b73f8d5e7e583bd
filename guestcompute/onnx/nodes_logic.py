"""Comparison and logic ONNX nodes: Equal, Less, Greater, LessOrEqual,
GreaterOrEqual, And, Or, Xor, Not, IsNaN, IsInf and Where. ONNX's bool
tensors are uint8 masks on the guest (the predicates' results: 1 true, 0
false). Each folds on the CPU when every input is a constant."""
from __future__ import annotations

import numpy as np

from .nodes_math import broadcast_binary
from .table import (NUMBERS, Const, Plan, Sym, all_const, attr, broadcast_shape, require_dtype, rule,
                    unsupported)

BOOL = "uint8"                 # the guest dtype of an ONNX bool tensor
COMPARED = NUMBERS + (BOOL,)

# op type -> (rec method, numpy function)
COMPARE = {"Equal": ("equal", np.equal), "Less": ("less", np.less), "Greater": ("greater", np.greater),
           "LessOrEqual": ("less_equal", np.less_equal), "GreaterOrEqual": ("greater_equal", np.greater_equal)}
LOGIC = {"And": ("logical_and", np.logical_and), "Or": ("logical_or", np.logical_or),
         "Xor": ("logical_xor", np.logical_xor)}


@rule(*COMPARE, *LOGIC)
def binary_predicate(node, args, opset):
    method, fn = {**COMPARE, **LOGIC}[node.op_type]
    allowed = COMPARED if node.op_type in COMPARE else (BOOL,)
    return broadcast_binary(node, args, method, fn, allowed, result=BOOL)


def _is_inf_np(x, node):
    neg, pos = attr(node, "detect_negative", 1), attr(node, "detect_positive", 1)
    return (np.isneginf(x) & bool(neg)) | (np.isposinf(x) & bool(pos))


UNARY = {"Not": ("logical_not", lambda x, node: np.logical_not(x), (BOOL,)),
         "IsNaN": ("isnan", lambda x, node: np.isnan(x), ("float32", "float16")),
         "IsInf": ("isinf", _is_inf_np, ("float32", "float16"))}


@rule(*UNARY)
def unary_predicate(node, args, opset):
    method, fn, allowed = UNARY[node.op_type]
    x = args[0]
    if isinstance(x, Const):
        return [Const(np.asarray(fn(x.value, node)))]
    require_dtype(node, x, allowed)
    if node.op_type == "IsInf":
        return _is_inf(node, x)

    def record(rec, t):
        getattr(rec, method)(t.ins[0], out=t.outs[0])
    return Plan([Sym(x.shape, BOOL)], record)


def _is_inf(node, x):
    """isinf, and with one sign: isinf(x) and x > 0 (or x < 0)."""
    neg, pos = bool(attr(node, "detect_negative", 1)), bool(attr(node, "detect_positive", 1))
    if not (neg or pos):
        return [Const(np.zeros(x.shape, bool))]
    if neg and pos:
        return Plan([Sym(x.shape, BOOL)], lambda rec, t: rec.isinf(t.ins[0], out=t.outs[0]))

    def record(rec, t):
        rec.isinf(t.ins[0], out=t.scratch[0])
        (rec.greater if pos else rec.less)(t.ins[0], 0.0, out=t.outs[0])
        rec.logical_and(t.scratch[0], t.outs[0], out=t.outs[0])
    return Plan([Sym(x.shape, BOOL)], record, scratch=[(x.shape, BOOL)])


@rule("Where")
def where(node, args, opset):
    if len(args) != 3 or any(a is None for a in args):
        raise unsupported(node, f"{len(args)} inputs (three are supported)")
    cond, x, y = args
    if all_const(args):
        return [Const(np.where(cond.value, x.value, y.value))]
    require_dtype(node, cond, (BOOL,), "condition")
    dx, dy = require_dtype(node, x, NUMBERS), require_dtype(node, y, NUMBERS)
    if dx != dy:
        raise unsupported(node, f"mixed value dtypes {dx} and {dy}")
    shape = broadcast_shape(node, cond, x, y)

    def record(rec, t):
        rec.where(t.ins[0], t.ins[1], t.ins[2], out=t.outs[0])
    return Plan([Sym(shape, dx)], record)
