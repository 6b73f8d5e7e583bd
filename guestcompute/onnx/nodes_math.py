"""Elementwise ONNX nodes: numpy-broadcast binary arithmetic, the variadic
Max, Min, Sum and Mean, activations, Clip, Cast and CastLike. Each folds on
the CPU when every input is a constant."""
from __future__ import annotations

import numpy as np

from .graph import require_onnx
from .nodes_shape import broadcast_into
from .table import (FLOATS, GUEST_DTYPES, NUMBERS, Const, Plan, Sym, all_const, attr, broadcast_shape,
                    const_input, dtype_of, guest_dtype, require_dtype, rule, unsupported)


def _trunc_div(a, b):
    # ONNX's integer Div truncates toward zero (C's), numpy's // floors.
    if np.issubdtype(np.result_type(a, b), np.integer):
        q = np.abs(a) // np.abs(b)
        return (q * np.sign(a) * np.sign(b)).astype(np.result_type(a, b))
    return np.divide(a, b)


# op type -> (rec method, numpy function, dtypes the GPU path takes)
BINARY = {
    "Add": ("add", np.add, NUMBERS), "Sub": ("sub", np.subtract, NUMBERS),
    "Mul": ("mul", np.multiply, NUMBERS), "Div": ("div", _trunc_div, FLOATS),
}


@rule(*BINARY)
def binary(node, args, opset):
    method, fn, allowed = BINARY[node.op_type]
    return broadcast_binary(node, args, method, fn, allowed)


def broadcast_binary(node, args, method: str, fn, allowed, result: str = None):
    """Two inputs of one dtype among ``allowed``, broadcast as numpy does:
    folded with ``fn`` when both are constants, else recorded as
    ``rec.<method>(a, b, out=)``; the result has dtype ``result`` (None:
    the inputs')."""
    if len(args) != 2 or any(a is None for a in args):
        raise unsupported(node, f"{len(args)} inputs (two are supported)")
    a, b = args
    if all_const(args):
        return [Const(np.asarray(fn(a.value, b.value)))]
    da, db = require_dtype(node, a, allowed), require_dtype(node, b, allowed)
    if da != db:
        raise unsupported(node, f"mixed input dtypes {da} and {db}")
    shape = broadcast_shape(node, a, b)

    def record(rec, t):
        getattr(rec, method)(t.ins[0], t.ins[1], out=t.outs[0])
    return Plan([Sym(shape, result or da)], record)


POW_BASES = ("float32", "float16", "int32")


@rule("Pow")
def pow_(node, args, opset):
    """``a ** b`` in a's dtype. An exponent of another dtype is cast to
    a's; an integer base with a float exponent is raised in float32 and
    the result truncated back (numpy's ``astype``, as ONNX's reference)."""
    a, b = args
    if all_const(args):
        with np.errstate(all="ignore"):
            return [Const(np.power(a.value, b.value).astype(a.value.dtype))]
    da, db = require_dtype(node, a, POW_BASES, "base"), require_dtype(node, b, NUMBERS, "exponent")
    shape = broadcast_shape(node, a, b)
    via_float = da == "int32" and db in FLOATS
    work = "float32" if via_float else da
    scratch = [(tuple(a.shape), work)] if via_float else []
    scratch += [(tuple(b.shape), work)] if db != work else []
    scratch += [(shape, work)] if via_float else []

    def record(rec, t):
        base, exponent, k = t.ins[0], t.ins[1], 0
        if via_float:
            rec.cast(base, work, out=t.scratch[0])
            base, k = t.scratch[0], 1
        if db != work:
            rec.cast(exponent, work, out=t.scratch[k])
            exponent, k = t.scratch[k], k + 1
        if via_float:
            rec.pow(base, exponent, out=t.scratch[k])
            rec.cast(t.scratch[k], da, out=t.outs[0])
        else:
            rec.pow(base, exponent, out=t.outs[0])
    return Plan([Sym(shape, da)], record, scratch=scratch)


# Variadic nodes: op type -> (rec method folding the inputs pairwise, numpy's)
VARIADIC = {"Max": ("maximum", np.maximum), "Min": ("minimum", np.minimum), "Sum": ("add", np.add),
            "Mean": ("add", np.add)}


@rule(*VARIADIC)
def variadic(node, args, opset):
    """The inputs broadcast together and folded pairwise into the output
    (Mean: their sum, scaled by 1/n)."""
    method, fn = VARIADIC[node.op_type]
    parts = [a for a in args if a is not None]
    if not parts:
        raise unsupported(node, "no inputs")
    if all_const(parts):
        value = parts[0].value
        for p in parts[1:]:
            value = fn(value, p.value)
        if node.op_type == "Mean":
            value = value / len(parts)
        return [Const(np.asarray(value).astype(parts[0].value.dtype))]
    dtypes = {require_dtype(node, p, FLOATS if node.op_type == "Mean" else NUMBERS) for p in parts}
    if len(dtypes) > 1:
        raise unsupported(node, f"mixed input dtypes {sorted(dtypes)}")
    shape = broadcast_shape(node, *parts)
    keep = tuple(k for k, a in enumerate(args) if a is not None)

    def record(rec, t):
        ins, out = [t.ins[k] for k in keep], t.outs[0]
        if not out.size:
            return
        if ins[0].shape == shape:
            rec.copy(ins[0], out=out)
        else:
            broadcast_into(rec, ins[0], out)
        for x in ins[1:]:
            getattr(rec, method)(out, x, out=out)
        if node.op_type == "Mean":
            rec.scale(out, 1 / len(ins), out=out)
    return Plan([Sym(shape, dtypes.pop())], record, uses=keep)


UNARY = {
    "Relu": ("relu", lambda x: np.maximum(x, 0)), "Sigmoid": ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    "Tanh": ("tanh", np.tanh), "Neg": ("neg", np.negative), "Abs": ("abs", np.abs),
    "Exp": ("exp", np.exp), "Log": ("log", np.log), "Sqrt": ("sqrt", np.sqrt),
    "Sin": ("sin", np.sin), "Cos": ("cos", np.cos), "Floor": ("floor", np.floor), "Ceil": ("ceil", np.ceil),
    "Round": ("rint", np.rint), "Sign": ("sign", np.sign),      # Round: halves to even, as numpy's rint
}
_ANY_SIGN = ("Relu", "Neg", "Abs", "Sign")     # these also take int32


@rule(*UNARY)
def unary(node, args, opset):
    method, fn = UNARY[node.op_type]
    x = args[0]
    if isinstance(x, Const):
        with np.errstate(all="ignore"):
            return [Const(np.asarray(fn(x.value)).astype(x.value.dtype))]
    d = require_dtype(node, x, ("float32", "float16", "int32") if node.op_type in _ANY_SIGN else FLOATS)

    def record(rec, t):
        getattr(rec, method)(t.ins[0], out=t.outs[0])
    return Plan([Sym(x.shape, d)], record)


@rule("LeakyRelu")
def leaky_relu(node, args, opset):
    x, alpha = args[0], float(attr(node, "alpha", 0.01))
    if isinstance(x, Const):
        return [Const(np.where(x.value > 0, x.value, x.value * alpha).astype(x.value.dtype))]
    d = require_dtype(node, x, FLOATS)
    # max(x, alpha*x) for alpha <= 1 (min for alpha > 1): two dispatches, no compare op needed.
    pick = "maximum" if alpha <= 1 else "minimum"

    def record(rec, t):
        rec.scale(t.ins[0], alpha, out=t.outs[0])
        getattr(rec, pick)(t.ins[0], t.outs[0], out=t.outs[0])
    return Plan([Sym(x.shape, d)], record)


@rule("Gelu")
def gelu(node, args, opset):
    x, approximate = args[0], attr(node, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise unsupported(node, f"attribute approximate={approximate!r} is not supported")
    d = require_dtype(node, x, FLOATS)

    def record(rec, t):
        rec.gelu(t.ins[0], approximate=approximate, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record)


@rule("Clip")
def clip(node, args, opset):
    x = args[0]
    if opset < 11:
        lo, hi = attr(node, "min"), attr(node, "max")
    else:
        lo, hi = const_input(node, args, 1, "min"), const_input(node, args, 2, "max")
    lo = None if lo is None else np.asarray(lo).item()
    hi = None if hi is None else np.asarray(hi).item()
    if isinstance(x, Const):
        return [Const(np.clip(x.value, lo, hi).astype(x.value.dtype))]
    d = require_dtype(node, x, NUMBERS)
    if lo is None and hi is None:
        return Plan([Sym(x.shape, d)], view=lambda ins: [ins[0]], uses=(0,))

    def record(rec, t):
        rec.clamp(t.ins[0], lo, hi, out=t.outs[0])
    return Plan([Sym(x.shape, d)], record, uses=(0,))


@rule("Cast", "CastLike")
def cast(node, args, opset):
    x = args[0]
    if node.op_type == "CastLike":        # the dtype of input 1 (its values are not read)
        target = args[1].value.dtype.name if isinstance(args[1], Const) else args[1].dtype
    else:
        onnx = require_onnx()
        target = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attr(node, "to"))).name
    if isinstance(x, Const):
        return [Const(x.value.astype(target))]
    if "saturate" in node.attrs and target not in GUEST_DTYPES:
        raise unsupported(node, "attribute saturate (float8 targets) is not supported")
    to = guest_dtype(node, target)
    src = dtype_of(node, x)
    if src == to:
        return Plan([Sym(x.shape, to)], view=lambda ins: [ins[0]])

    def record(rec, t):
        rec.cast(t.ins[0], to, out=t.outs[0])
    return Plan([Sym(x.shape, to)], record)


@rule("Identity")
def identity(node, args, opset):
    x = args[0]
    if isinstance(x, Const):
        return [x]
    return Plan([Sym(x.shape, x.dtype)], view=lambda ins: [ins[0]])
