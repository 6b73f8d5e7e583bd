"""complex64 in the elementwise ops: add, sub, mul, div, neg and abs take
complex operands (this module registers them around the real-dtype
planners of ops/elementwise.py and ops/math.py), and conj and angle are new.
The GLSL and its accuracy are in ops/complex_exprs.py.

Promotion is numpy's for complex64: a complex64 tensor with a float32 or
float16 tensor, or with a Python int, float or complex scalar, gives
complex64; so does a float32 or float16 tensor with a Python complex scalar
(``rec.mul(x, 2j)``), and a complex64 tensor with a uint8 one (whose
values convert exactly). numpy gives complex128 for complex64 with an int32
or uint32 tensor, and for an integer tensor (uint8 too) with a complex
scalar: guestcompute has no complex128, and refuses those with a DTypeError
(cast the integers to float32 or complex64 first) rather than round them
silently. Broadcasting,
views and ``out=`` (in place too) are as for the real ops; a complex result
into a real ``out=`` is a DTypeError.
"""
from __future__ import annotations

from ..dtypes import as_dtype, complex64, float32, host_scalar
from ..errors import DTypeError, InvalidArgumentError
from ..kernels.catalogue import variants
from ..tensor import Tensor
from . import complex_exprs as cx
from .base import OpResult, broadcast_shapes, check_dtype, check_tensor, op
from .elementwise import COMPUTE_TYPE, NUMERIC, REAL_BINARY, elementwise, map_variants, output_tensor, plan_map
from .math import COMPLEX_TAKERS, REAL_PLANNERS
from .windows import POINTWISE

REAL_OPERANDS = ("float32", "float16", "uint8")      # real tensors that may meet a complex64 one
SCALAR_REALS = ("float32", "float16")       # real tensors that a Python complex scalar keeps complex64


def is_complex(value) -> bool:
    """A complex64 tensor or a Python complex number: the op computes in complex64."""
    return isinstance(value, complex) or (isinstance(value, Tensor) and value.dtype.kind == "complex")


def complex_scalar(value, what: str) -> complex:
    """A Python int, float or complex as the complex64 it stands for (each
    part rounded to float32, by the host-data rules of dtypes.host_scalar)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, complex)):
        raise InvalidArgumentError(f"{what} must be a Python number (int, float or complex), "
                                   f"got {type(value).__name__}")
    value = complex(value)
    return complex(host_scalar(value.real, float32, f"{what} (real part)"),
                   host_scalar(value.imag, float32, f"{what} (imaginary part)"))


_NO_COMPLEX128 = "guestcompute does not have; cast the integers to float32 or complex64 first (rec.cast)"


def _operand_dtype(ctx, t: Tensor, name: str):
    if t.dtype.name in ("int32", "uint32"):
        raise DTypeError(f"{name}: complex64 with an {t.dtype} tensor would be complex128 in numpy, which "
                         + _NO_COMPLEX128)
    return check_dtype(ctx, t.dtype, ("complex64",) + REAL_OPERANDS, name)


def _plan(ctx, name, expr, helpers, inputs, out, out_dtype, scalar=None) -> OpResult:
    """Allocate or check ``out`` and plan the map (operands of mixed dtypes)."""
    shape = broadcast_shapes(*(t.shape for t in inputs))
    reusable = out is not None
    out = output_tensor(ctx, out, shape, out_dtype, inputs)
    if out.size == 0:
        return OpResult(out, [], reusable=reusable)
    scalar_type = None if scalar is None else "vec2"
    return OpResult(out, [plan_map(ctx, expr, inputs, out, out_dtype, scalar, scalar_type, helpers)],
                    reusable=reusable)


def complex_binary(ctx, name: str, a, b, out) -> OpResult:
    """``a <name> b`` in complex64 (one of them complex: see the module notes)."""
    a = check_tensor(ctx, a, f"{name} a")
    da = _operand_dtype(ctx, a, name)
    if isinstance(b, Tensor):
        b = check_tensor(ctx, b, f"{name} b")
        expr, helpers = cx.binary_expr(name, da, _operand_dtype(ctx, b, name))
        return _plan(ctx, name, expr, helpers, [a, b], out, complex64)
    scalar = complex_scalar(b, f"{name} scalar")
    if da.name not in ("complex64",) + SCALAR_REALS:
        raise DTypeError(f"{name}: a {da} tensor with a Python complex scalar would be complex128 in numpy, "
                         "which " + _NO_COMPLEX128)
    expr, helpers = cx.binary_expr(name, da)
    return _plan(ctx, name, expr, helpers, [a], out, complex64, scalar)


def complex_unary(ctx, name: str, x, out) -> OpResult:
    """neg, conj, abs or angle of a complex64 tensor (abs and angle: float32)."""
    x = check_tensor(ctx, x, f"{name} x")
    expr, helpers = cx.UNARY[name]
    out_dtype = float32 if name in ("abs", "angle") else complex64
    return _plan(ctx, name, expr, helpers, [x], out, out_dtype)


_NOTES = {"binary": " complex64: either operand (or a Python complex ``b``) makes the result complex64 "
                    "(numpy's promotion, uint8 tensors included; int32/uint32 tensors with complex, and uint8 ones with "
                    "a complex scalar, raise DTypeError), see ops/complex_math.py.",
          "neg": " complex64: both parts negated.",
          "abs": " complex64: the modulus as float32 (a scaled hypot, within 1 ulp)."}


def _with_complex_binary(name: str, real):
    def binary_op(ctx, a, b, *, out=None):
        if is_complex(a) or is_complex(b):
            return complex_binary(ctx, name, a, b, out)
        return real(ctx, a, b, out=out)
    binary_op.__name__ = name
    binary_op.__doc__ = real.__doc__ + _NOTES["binary"]
    return binary_op


def _with_complex_unary(name: str, real):
    def unary_op(ctx, x, *, out=None):
        if is_complex(x):
            return complex_unary(ctx, name, x, out)
        return real(ctx, x, out=out)
    unary_op.__name__ = name
    unary_op.__doc__ = real.__doc__ + _NOTES[name]
    return unary_op


# The real planners that ops/elementwise.py and ops/math.py leave for this
# module to register: add, sub, mul, and math's COMPLEX_TAKERS (div, neg, abs).
_REAL = {**REAL_BINARY, **{name: REAL_PLANNERS[name] for name in COMPLEX_TAKERS}}
for _name, _real in _REAL.items():
    _wrap = _with_complex_binary if _name in cx.BINARY else _with_complex_unary
    op(_name, windows=POINTWISE)(_wrap(_name, _real))

CONJ_REAL = NUMERIC + ("uint8",)


@op("conj", windows=POINTWISE)
def conj(ctx, x, *, out=None):
    """Complex conjugate, numpy's ``np.conj``: the imaginary parts negated
    (NaN's sign bit too); on a real dtype a copy. Allocates ``out`` when omitted."""
    if is_complex(x):
        return complex_unary(ctx, "conj", x, out)
    return elementwise(ctx, "x0", [x], out, allowed=CONJ_REAL, name="conj")


def _angle_dtype(d):
    """numpy's np.angle dtype, float32 where numpy's is float64 (int inputs)."""
    return d if d.name == "float16" else float32


@op("angle", windows=POINTWISE)
def angle(ctx, x, *, out=None):
    """numpy's ``np.angle`` in radians: ``atan2(imag, real)`` of a complex64
    tensor as float32, within 6 ulp, with C99's signed zeros and infinities.
    On a real tensor ``atan2(+0, x)``: pi where the sign bit is set (-0.0
    too), 0 elsewhere, NaN for NaN; float16 gives float16, int32/uint32
    float32 (numpy: float64). Allocates ``out`` when omitted."""
    if is_complex(x):
        return complex_unary(ctx, "angle", x, out)
    x = check_tensor(ctx, x, "angle x")
    d = check_dtype(ctx, x.dtype, NUMERIC, "angle")
    expr, helpers = cx.REAL_ANGLE[COMPUTE_TYPE[d.kind]]
    return elementwise(ctx, expr, [x], out, out_dtype=_angle_dtype(d), allowed=NUMERIC, name="angle",
                       helpers=helpers)


# -- the bake catalogue --------------------------------------------------------

@variants("map")
def _complex_variants():
    c = complex64
    reals = [as_dtype(n) for n in REAL_OPERANDS]
    operands = [(c, c)] + [(c, r) for r in reals] + [(r, c) for r in reals]
    for name in cx.BINARY:
        for da, db in operands:
            expr, helpers = cx.binary_expr(name, da, db)
            yield from map_variants(expr, [da, db], c, helpers=helpers)
        for da in [c] + [as_dtype(n) for n in SCALAR_REALS]:
            expr, helpers = cx.binary_expr(name, da)
            yield from map_variants(expr, [da], c, "vec2", helpers=helpers)
    for name, (expr, helpers) in cx.UNARY.items():
        yield from map_variants(expr, [c], float32 if name in ("abs", "angle") else c, helpers=helpers)
    for name in NUMERIC:
        d = as_dtype(name)
        expr, helpers = cx.REAL_ANGLE[COMPUTE_TYPE[d.kind]]
        yield from map_variants(expr, [d], _angle_dtype(d), helpers=helpers)
