"""Elementwise math as data over the ``map`` kernel: binary ops (div,
floordiv, pow, maximum, minimum), unary ops (neg abs exp log sqrt rsqrt sin
cos tanh sigmoid relu gelu silu), clamp and where (cast: ops/cast.py;
complex64: ops/complex_math.py).

Every op is a table from the compute kind of its dtype ("float" for float32
and float16 — float16 is loaded into fp32 and computed there —, "int",
"uint") to a GLSL expression or a :class:`Helper` function. A kind missing
from the table is a :class:`DTypeError` naming what to do instead.

Semantics, chosen to match numpy:

- ``div`` is true division; on int32/uint32 it gives float32 (numpy's
  int ``/`` gives float64, which guestcompute does not have), computed as
  ``float(a) / float(b)`` (exact operands up to 2**24), with ``x / 0``
  ±inf and ``0 / 0`` NaN as numpy. ``floordiv`` is numpy's ``//`` for int32/uint32:
  rounds toward minus infinity, and ``x // 0 == 0`` as numpy returns.
  ``floordiv`` on floats raises (numpy's float ``//`` has fmod-based rounding
  rules; use ``div`` and round yourself).
- ``pow`` on floats applies every C99 Annex F special case, as
  ``np.power`` does: ``x ** ±0 == 1`` and ``1 ** y == 1`` even for NaN,
  ``(-1) ** ±inf == 1``, ``|x| < 1`` or ``> 1`` to ±inf gives 0 or inf,
  ±0 and ±inf bases keep their sign for odd integer exponents
  (``(-0) ** -3 == -inf``, ``(-inf) ** 3.3 == inf``), a negative finite base
  to a fractional exponent is NaN. A scalar exponent behaves as the same
  value in a tensor (numpy's scalar ``x ** 0.5`` is ``sqrt`` and gives NaN
  for -inf and -0 for -0; here both are C99's inf and +0). On ints ``pow``
  wraps mod 2**32 like numpy. numpy raises for negative integer exponents;
  a negative *scalar* exponent raises here too, a negative exponent inside
  a tensor gives the truncated result (0 unless the base is ±1).
- NaN, ±inf and ±0 follow numpy in every op: ``maximum``/``minimum``,
  ``relu`` and ``clamp`` propagate NaN (GLSL's max/min/clamp leave it
  undefined; ``clamp`` with a NaN bound is NaN everywhere, as ``np.clip``),
  ``tanh(NaN)`` is NaN and ``tanh(±0)`` is ±0. ``log``/``sqrt``/``rsqrt`` of
  negatives are NaN, ``log(±0)`` is -inf, ``sqrt(-0)`` is -0 and
  ``rsqrt(±0)`` is ±inf. ``silu`` and ``gelu`` (which numpy lacks) give
  their limits at ±inf: inf and -0 (the formulas would give -inf * 0).
- Subnormal float32 (0 < |x| < 2**-126): where the result is a normal
  number — ``log``, ``sqrt``, ``rsqrt``, ``pow`` of a subnormal base or
  exponent, and ``tanh`` of tiny inputs (tanh(x) == x there) — the kernels
  decode the subnormal from its bits or use a polynomial, and ``abs``
  clears the sign bit, so the result matches numpy on every device,
  whatever its float controls (the NVIDIA driver flushes subnormal inputs
  of float compares, ``abs``, ``max`` and ``clamp``: ``pow``'s special
  cases therefore test zero, infinity and sign on the bits). Elsewhere subnormals are
  the device's business: the kernels request no denormal mode (the baked
  SPIR-V is the same for every device, and lavapipe supports neither
  ``shaderDenormPreserveFloat32`` nor ``shaderDenormFlushToZeroFloat32``),
  so a device may flush subnormal inputs and results of arithmetic, of
  ``relu``/``clamp`` and of ``sigmoid``/``pow`` to ±0 (lavapipe keeps them in ``add``/``mul``;
  ``exp`` builds its subnormal results from their bits). float16 subnormals
  are normal numbers once loaded into fp32, so they compute exactly; a
  result stored into float16's subnormal range is rounded by the device's
  conversion (lavapipe keeps it, as numpy).
- Accuracy (float32, in ulp of the correctly rounded result; numpy's own
  bound in brackets where it ships validation data, which
  tests/ops/test_numpy_accuracy.py runs in full; sweeps over every binade
  check the rest):

  ========  ==========  ====================================================
  op        ulp         notes
  ========  ==========  ====================================================
  exp       2  [3]      Cody-Waite reduction; subnormal results built from bits
  log       2  [4]      exact ``m - 1`` near 1 (log(1 - 2**-24) is right)
  sin, cos  2  [2]      Payne-Hanek reduction, exact for every float32
  tanh      2  [2]
  sigmoid   3           e**x / (1 + e**x) below 0: no overflow to 0
  silu      3
  pow       8           exact for ``b`` 1 and 2, ``sqrt`` for 0.5, the
                        correctly rounded reciprocal for -1, correctly rounded (but near-ties) for other
                        whole ``|b| <= 64`` with results within 2**±100;
                        results between float32's smallest normal and
                        largest value
  div       device      Vulkan requires 2.5 ulp (lavapipe: exact)
  sqrt      device      Vulkan: as 1 / inversesqrt (lavapipe: exact)
  rsqrt     device      Vulkan requires 2 ulp
  gelu      absolute    |error| < 1e-6 (erfc of Abramowitz & Stegun 7.1.26)
  ========  ==========  ====================================================

  exp, log, sin, cos, pow (and tanh, sigmoid, silu, gelu through exp) are
  the library's own reduction and short polynomials on every device, not the
  driver's builtins: GLSL lets those be loose (and NVIDIA's are
  approximate). ``div`` scales both operands by 1/4 when ``|b| >= 2**126``,
  as drivers that divide by multiplying with ``1 / b`` would underflow it.
- ``gelu`` defaults to the exact erf form, with erfc from Abramowitz &
  Stegun 7.1.26 (absolute error below 1.5e-7, computed without cancellation
  for negative inputs); ``approximate="tanh"`` is the tanh formula.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..dtypes import as_dtype
from ..errors import DTypeError, InvalidArgumentError
from ..kernels.catalogue import variants
from ..tensor import Tensor
from .base import OpResult, broadcast_shapes, check_dtype, check_tensor, op, same_dtype
from .elementwise import COMPUTE_TYPE, NUMERIC, elementwise, map_variants, output_tensor, plan_map, scalar_for
from .exp_log_glsl import (DIV_BODY, DIV_BODY_TEXT, EXP_CORE, INF, LOG_REDUCE, NAN, NEG_ZERO, POW_CORE,
                           SUBNORMAL_LIMIT)
from .trig_glsl import TRIG_CORE
from .windows import POINTWISE

_VEC = {"float": "vec", "int": "ivec", "uint": "uvec"}


@dataclass(frozen=True)
class Helper:
    """A scalar GLSL function that an expression calls. For vec2/vec4 kernels
    it gains a component-wise overload; arguments listed in ``uniform`` stay
    scalar there (a push-constant operand shared by all lanes)."""
    name: str
    ret: str          # scalar GLSL type
    args: tuple       # scalar GLSL types of a, b, c
    body: str
    prelude: str = ""  # GLSL functions the body calls, rendered once before it

    def call(self, *operands) -> str:
        return f"{self.name}({', '.join(operands)})"

    @functools.lru_cache(maxsize=None)
    def renderer(self, uniform=()):
        """``fn(width) -> GLSL text`` for :func:`plan_map`: one function
        object per (helper, uniform), so it can key the spec and plan caches."""
        names = "abc"[:len(self.args)]
        params = ", ".join(f"{t} {n}" for t, n in zip(self.args, names))
        scalar = f"{self.prelude}{self.ret} {self.name}({params}) {{\n{self.body}\n}}"

        def glsl(width: int) -> str:
            if width == 1:
                return scalar
            vec = lambda t: f"{_VEC[t]}{width}"  # noqa: E731
            params = ", ".join(f"{t if k in uniform else vec(t)} {n}"
                               for k, (t, n) in enumerate(zip(self.args, names)))
            lanes = ", ".join(
                self.call(*(n if k in uniform else f"{n}.{c}" for k, n in enumerate(names)))
                for c in "xyzw"[:width])
            return (f"{scalar}\n{vec(self.ret)} {self.name}({params}) "
                    f"{{ return {vec(self.ret)}({lanes}); }}")
        return glsl


def entry_expr(entry, operands, uniform=()):
    """(expression, helpers renderer) for a table entry applied to operands."""
    if isinstance(entry, Helper):
        return entry.call(*operands), entry.renderer(uniform)
    for k in range(len(operands)):       # via placeholders: "x1" -> "x2" must not be renamed twice
        entry = entry.replace(f"x{k}", f"\0{k}")
    for k, name in enumerate(operands):
        entry = entry.replace(f"\0{k}", name)
    return entry, None


def table_entry(table: dict, dtype, name: str, hint: str = ""):
    """The entry of ``table`` (keyed by compute type) for ``dtype``;
    DTypeError naming ``name`` (and ``hint``, what to do) when it has none."""
    entry = table.get(COMPUTE_TYPE[dtype.kind])
    if entry is None:
        raise DTypeError(f"{name} is not defined for {dtype}" + (f"; {hint}" if hint else ""))
    return entry


# -- binary ------------------------------------------------------------------

_FMAX = Helper("gc_maximum", "float", ("float", "float"),
               "  if (isnan(a)) return a;\n  if (isnan(b)) return b;\n  return max(a, b);")
_FMIN = Helper("gc_minimum", "float", ("float", "float"),
               "  if (isnan(a)) return a;\n  if (isnan(b)) return b;\n  return min(a, b);")
def _true_division(kind: str) -> Helper:
    """int32/uint32 ``a / b`` as float32 (numpy's is float64, which
    guestcompute does not have); x / 0 is ±inf or NaN, as numpy gives it."""
    zero = "0" if kind == "int" else "0u"
    return Helper("gc_true_div", "float", (kind, kind), f"""\
  if (b == {zero}) return a == {zero} ? {NAN} : (a > {zero} ? {INF} : -{INF});
  return gc_div(float(a), float(b));""", prelude=DIV_BODY)


_IFLOORDIV = Helper("gc_floordiv", "int", ("int", "int"), """\
  if (b == 0) return 0;         // numpy: x // 0 == 0
  if (b == -1) return -a;       // INT_MIN / -1 overflows in SPIR-V; numpy wraps to INT_MIN
  int q = a / b;                // truncates toward zero
  if (a - q * b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;""")
_UFLOORDIV = Helper("gc_floordiv", "uint", ("uint", "uint"), "  return b == 0u ? 0u : a / b;")
_FDIV = Helper("gc_div", "float", ("float", "float"), DIV_BODY_TEXT)
_FPOW = Helper("gc_pow", "float", ("float", "float"), f"""\
  // C99 Annex F pow special cases, as numpy's np.power applies them. They
  // come first: GLSL's pow is undefined for bases <= 0 and for inf/NaN.
  // Zero, infinity and sign tests read the bits: a device that flushes
  // subnormals in float compares would take a subnormal base or exponent
  // for zero (x ** 1e-45 would become x ** 0 == 1).
  uint abits = floatBitsToUint(a) & 0x7fffffffu;
  uint bbits = floatBitsToUint(b) & 0x7fffffffu;
  bool b_negative = (floatBitsToUint(b) >> 31) != 0u;
  if (bbits == 0u || a == 1.0) return 1.0;   // x ** ±0 == 1 and 1 ** y == 1, even for NaN
  if (isnan(a) || isnan(b)) return {NAN};
  if (bbits == 0x7f800000u) {{                // (-1) ** ±inf == 1; else |a| < 1 or > 1 decides
    if (abits == 0x3f800000u) return 1.0;
    return (abits < 0x3f800000u) == b_negative ? {INF} : 0.0;
  }}
  // A subnormal exponent is never an integer (floor would flush it to 0 on some devices).
  bool integral = bbits >= {SUBNORMAL_LIMIT} && floor(b) == b;
  bool a_negative = (floatBitsToUint(a) >> 31) != 0u;
  if (a_negative && !integral && abits != 0x7f800000u && abits != 0u) return {NAN};   // negative finite base, fractional exponent
  float r;
  if (abits == 0u) r = b_negative ? {INF} : 0.0;
  else if (abits == 0x7f800000u) r = b_negative ? 0.0 : {INF};
  else r = gc_pow_positive(abits, b);
  // Odd integer exponents keep the base's sign, ±0 and ±inf included.
  bool odd = integral && mod(b, 2.0) == 1.0;
  return odd && a_negative ? -r : r;""", prelude=POW_CORE)
_IPOW = Helper("gc_pow", "int", ("int", "int"), """\
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0);
  int r = 1;                    // square and multiply; wraps mod 2^32 like numpy
  while (b > 0) { if ((b & 1) != 0) r *= a; a *= a; b >>= 1; }
  return r;""")
_UPOW = Helper("gc_pow", "uint", ("uint", "uint"), """\
  uint r = 1u;
  while (b > 0u) { if ((b & 1u) != 0u) r *= a; a *= a; b >>= 1u; }
  return r;""")

BINARY_OPS = {
    "div": ({"float": _FDIV, "int": _true_division("int"), "uint": _true_division("uint")}, ""),
    "floordiv": ({"int": _IFLOORDIV, "uint": _UFLOORDIV},
                 "floordiv is for int32/uint32; for floats use div (and round as you need)"),
    "pow": ({"float": _FPOW, "int": _IPOW, "uint": _UPOW}, ""),
    "maximum": ({"float": _FMAX, "int": "max(x0, x1)", "uint": "max(x0, x1)"}, ""),
    "minimum": ({"float": _FMIN, "int": "min(x0, x1)", "uint": "min(x0, x1)"}, ""),
}
_BINARY_DOCS = {
    "div": "true division ``a / b`` (the device's division accuracy, Vulkan's 2.5 ulp at most, "
           "for every finite operand; int32/uint32 operands give float32, where numpy gives "
           "float64: ``float(a) / float(b)``, exact inputs up to 2**24)",
    "floordiv": "numpy's ``a // b`` for int32/uint32 (``x // 0 == 0``)",
    "pow": "``a ** b`` (numpy's rules for negative bases; ints wrap; float32 within 8 ulp, "
           "exact for b = 1, 2 and as sqrt / div for 0.5 / -1, correctly rounded for other whole "
           "|b| <= 64 with results within 2**±100)",
    "maximum": "elementwise maximum, NaN-propagating like numpy",
    "minimum": "elementwise minimum, NaN-propagating like numpy",
}


def _result_dtype(name: str, dtype):
    """True division of integers gives float32 (numpy: float64)."""
    return as_dtype("float32") if name == "div" and dtype.kind != "float" else dtype


def _binary(name: str, table: dict, hint: str):
    def binary_op(ctx, a, b, *, out=None):
        a = check_tensor(ctx, a, f"{name} a")
        if isinstance(b, Tensor):
            dtype = same_dtype([a, check_tensor(ctx, b, f"{name} b")], name)
        else:
            dtype = a.dtype
        check_dtype(ctx, dtype, NUMERIC, name)
        entry = table_entry(table, dtype, name, hint)
        if isinstance(b, Tensor):
            expr, helpers = entry_expr(entry, ("x0", "x1"))
            return elementwise(ctx, expr, [a, b], out, out_dtype=_result_dtype(name, dtype), allowed=NUMERIC,
                               name=name, helpers=helpers)
        if name == "pow" and dtype.kind != "float" and isinstance(b, (int, float)) and b < 0:
            raise InvalidArgumentError("integers to negative integer powers are not allowed "
                                       "(as in numpy); cast to float32 first")
        expr, helpers = entry_expr(entry, ("x0", "s"), uniform=(1,))
        return elementwise(ctx, expr, [a], out, out_dtype=_result_dtype(name, dtype), scalar=b, allowed=NUMERIC,
                           name=name, helpers=helpers)
    binary_op.__name__ = name
    binary_op.__doc__ = (f"{_BINARY_DOCS[name]}, with numpy broadcasting; ``b`` may be a Python "
                         "number. Allocates ``out`` when omitted.")
    return binary_op


# div, neg and abs also take complex64: ops/complex_math.py registers these
# (the one list of them) around their real-dtype planners.
COMPLEX_TAKERS = ("div", "neg", "abs")
REAL_PLANNERS = {}
for _name, (_table, _hint) in BINARY_OPS.items():
    REAL_PLANNERS[_name] = _binary(_name, _table, _hint)


# -- unary -------------------------------------------------------------------

# exp, log, sin and cos are the library's own (reduction + short polynomial),
# not the driver's: GLSL leaves their precision loose (exp/log to 3 + 2|x|
# ulp, sin/cos to an absolute error) and NVIDIA's builtins are approximate.
# The polynomials are Cephes' expf, logf, sinf and cosf minimax fits.
_EXP = Helper("gc_exp", "float", ("float",), "  return isnan(a) ? a : gc_exp_core(a);", prelude=EXP_CORE)
_LOG = Helper("gc_log", "float", ("float",), f"""\
  // Classified by bits: a flushing device compares a subnormal equal to 0.
  uint bits = floatBitsToUint(a), mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u || bits == 0x7f800000u) return a;   // NaN, log(inf) == inf
  if (mag == 0u) return -{INF};                    // log(±0) == -inf
  if ((bits >> 31) != 0u) return {NAN};            // below zero, -inf and negative subnormals included
  // f = m - 1 is exact, so log(1 + f) keeps its relative precision near 1;
  // e ln2 has ln2 in two parts (e * 0.693359375 is exact).
  int e;
  float f = gc_log_reduce(mag, e);
  float fe = float(e);
  float y = gc_log1p_tail(f) - 2.12194440e-4 * fe - 0.5 * (f * f);
  return (f + y) + 0.693359375 * fe;""", prelude=LOG_REDUCE)
_SIN = Helper("gc_sin", "float", ("float",), "  return gc_sin_cos(a, 0u);", prelude=TRIG_CORE)
_COS = Helper("gc_cos", "float", ("float",), "  return gc_sin_cos(a, 1u);", prelude=TRIG_CORE)
_SQRT = Helper("gc_sqrt", "float", ("float",), f"""\
  uint bits = floatBitsToUint(a), mag = bits & 0x7fffffffu;
  if (mag == 0u || mag > 0x7f800000u) return a;     // sqrt(±0) == ±0, NaN stays NaN
  if ((bits >> 31) != 0u) return {NAN};
  // mag * 2**-149 == (2 mag) * 2**-150: an even power of two, halved exactly.
  if (mag < {SUBNORMAL_LIMIT}) return sqrt(2.0 * float(mag)) * exp2(-75.0);
  return sqrt(a);""")
_RSQRT = Helper("gc_rsqrt", "float", ("float",), f"""\
  uint bits = floatBitsToUint(a), mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return a;
  if (mag == 0u) return uintBitsToFloat(bits | 0x7f800000u);   // 1 / sqrt(±0) == ±inf
  if ((bits >> 31) != 0u) return {NAN};
  if (mag < {SUBNORMAL_LIMIT}) return inversesqrt(2.0 * float(mag)) * exp2(75.0);
  return inversesqrt(a);""")
_TANH = Helper("gc_tanh", "float", ("float",), """\
  // Built-in tanh is (e^2x - 1) / (e^2x + 1) on some devices: NaN for NaN
  // inputs after clamping, and no relative precision near 0 (lavapipe gives
  // 3e-8 for 1e-40). Small |x| use the minimax odd polynomial of Cephes'
  // tanhf, the rest 1 - 2 / (e^2|x| + 1), which saturates to 1 without inf/inf
  // (with the library's exp: the driver's may be approximate).
  if (isnan(a) || a == 0.0) return a;    // NaN stays NaN, tanh(±0) == ±0
  float m = abs(a);
  if (m < 0.625) {
    float z = a * a;
    return a + a * z * ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
                          + 1.33314422036e-1) * z - 3.33332819422e-1);
  }
  float r = 1.0 - 2.0 / (gc_exp_core(2.0 * m) + 1.0);
  return a < 0.0 ? -r : r;""", prelude=EXP_CORE)
_SILU = Helper("gc_silu", "float", ("float",), f"""\
  // The limit at -inf is -0 (the formula would give -inf / inf).
  if (isnan(a)) return a;
  // gc_div: below -87.3 the divisor passes 2**126, where a driver's
  // a * (1 / b) would flush the tiny results to -0.
  return a == -{INF} ? {NEG_ZERO} : gc_div(a, 1.0 + gc_exp_core(-a));""", prelude=DIV_BODY + EXP_CORE)
_SIGMOID = Helper("gc_sigmoid", "float", ("float",), """\
  // e**-|x| never overflows: for x < 0, e**x / (1 + e**x) keeps the tiny
  // results (1 / (1 + e**-x) would be 1 / inf == 0 below -88.7).
  if (isnan(a)) return a;
  float e = gc_exp_core(-abs(a));
  return (a < 0.0 ? e : 1.0) / (1.0 + e);""", prelude=EXP_CORE)
_RELU = Helper("gc_relu", "float", ("float",), "  return isnan(a) ? a : max(a, 0.0);")
_GELU = Helper("gc_gelu", "float", ("float",), f"""\
  // x * Phi(x) with erfc(|x|/sqrt 2) from Abramowitz & Stegun 7.1.26; using the
  // tail directly avoids the cancellation of 1 + erf(x) for negative x.
  float y = abs(a) * 0.70710678118654752;
  float t = 1.0 / (1.0 + 0.3275911 * y);
  float erfc = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
             + t * (-1.453152027 + t * 1.061405429)))) * gc_exp_core(-y * y);
  if (a == -{INF}) return {NEG_ZERO};   // the limit (-inf * 0 would be NaN)
  return a * (a >= 0.0 ? 1.0 - 0.5 * erfc : 0.5 * erfc);""", prelude=EXP_CORE)
_GELU_TANH = Helper("gc_gelu_tanh", "float", ("float",), f"""\
  if (a == -{INF}) return {NEG_ZERO};   // the limit (-inf * 0 would be NaN)
  // tanh saturates to ±1 in fp32 long before |u| = 15; clamping keeps
  // implementations that build tanh from exp away from inf/inf (NaN inputs
  // stay NaN through the factor a).
  float u = clamp(0.7978845608028654 * (a + 0.044715 * a * a * a), -15.0, 15.0);
  return 0.5 * a * (1.0 + tanh(u));""")

_FLOAT_ONLY = "cast integers to float32 first"


def _rounding(name: str, glsl: str) -> Helper:
    """A float rounding whose result takes the operand's sign bit: IEEE's
    (floor(-0.5) == -1, ceil(-0.5) == -0.0) without trusting the driver's
    signed zeros, which Vulkan leaves loose."""
    return Helper(f"gc_{name}", "float", ("float",),
                  f"  return uintBitsToFloat(floatBitsToUint({glsl}(a)) | (floatBitsToUint(a) & 0x80000000u));")


_SIGN = Helper("gc_sign", "float", ("float",), """\
  // From the bits: a compiler free of signed zeros may make 0.0 here -0.0.
  uint bits = floatBitsToUint(a), mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return a;                                      // NaN stays NaN
  return uintBitsToFloat(mag == 0u ? 0u : (bits & 0x80000000u) | 0x3f800000u);   // ±1; ±0 gives +0.0""")
UNARY_OPS = {
    "neg": ({"float": "-x0", "int": "-x0", "uint": "-x0"}, "-x (uints wrap, as in numpy)"),
    # Clearing the sign bit keeps subnormals on devices whose abs() flushes them.
    "abs": ({"float": "uintBitsToFloat(floatBitsToUint(x0) & 0x7fffffffu)", "int": "abs(x0)", "uint": "x0"},
            "|x|"),
    "exp": ({"float": _EXP}, "e**x (within 2 ulp)"),
    "log": ({"float": _LOG}, "natural log (NaN below 0, -inf at 0; within 2 ulp)"),
    "sqrt": ({"float": _SQRT}, "square root (NaN below 0)"),
    "rsqrt": ({"float": _RSQRT}, "1 / sqrt(x) (NaN below 0, ±inf at ±0)"),
    "sin": ({"float": _SIN}, "sine (within 2 ulp for every float32)"),
    "cos": ({"float": _COS}, "cosine (within 2 ulp for every float32)"),
    "tanh": ({"float": _TANH}, "hyperbolic tangent (within 2 ulp)"),
    "sigmoid": ({"float": _SIGMOID}, "1 / (1 + e**-x) (within 3 ulp)"),
    "relu": ({"float": _RELU, "int": "max(x0, 0)"}, "max(x, 0) (NaN stays NaN)"),
    "silu": ({"float": _SILU}, "x * sigmoid(x) (within 3 ulp)"),
    # Integers are whole already: numpy 2 keeps their dtype for these three.
    "floor": ({"float": _rounding("floor", "floor"), "int": "x0", "uint": "x0"},
              "the largest whole number <= x (exact; integers as they are)"),
    "ceil": ({"float": _rounding("ceil", "ceil"), "int": "x0", "uint": "x0"},
             "the smallest whole number >= x (exact; integers as they are)"),
    "trunc": ({"float": _rounding("trunc", "trunc"), "int": "x0", "uint": "x0"},
              "x rounded toward zero (exact; integers as they are)"),
    "rint": ({"float": _rounding("rint", "roundEven")}, "x rounded to the nearest whole number, halves to even "
             "(exact)"),
    "sign": ({"float": _SIGN, "int": "sign(x0)", "uint": "min(x0, 1u)"},
             "-1, 0 or 1 by the sign of x (NaN stays NaN; -0.0 gives +0.0, as numpy)"),
}


def _unary(name: str, table: dict, doc: str):
    def unary_op(ctx, x, *, out=None):
        x = check_tensor(ctx, x, f"{name} x")
        check_dtype(ctx, x.dtype, NUMERIC, name)
        expr, helpers = entry_expr(table_entry(table, x.dtype, name, _FLOAT_ONLY), ("x0",))
        return elementwise(ctx, expr, [x], out, allowed=NUMERIC, name=name, helpers=helpers)
    unary_op.__name__ = name
    unary_op.__doc__ = f"Elementwise {doc}. Allocates ``out`` when omitted."
    return unary_op


for _name, (_table, _doc) in UNARY_OPS.items():
    REAL_PLANNERS[_name] = _unary(_name, _table, _doc)
for _name, _planner in REAL_PLANNERS.items():
    if _name not in COMPLEX_TAKERS:
        op(_name, windows=POINTWISE)(_planner)

GELU = {"none": {"float": _GELU}, "tanh": {"float": _GELU_TANH}}


@op("gelu", windows=POINTWISE)
def gelu(ctx, x, *, approximate: str = "none", out=None):
    """GELU, ``x * Phi(x)``. ``approximate="none"`` (default) is the erf form
    (|error| < 1e-6 against the exact value); ``"tanh"`` is
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    if approximate not in GELU:
        raise InvalidArgumentError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    x = check_tensor(ctx, x, "gelu x")
    check_dtype(ctx, x.dtype, NUMERIC, "gelu")
    expr, helpers = entry_expr(table_entry(GELU[approximate], x.dtype, "gelu", _FLOAT_ONLY), ("x0",))
    return elementwise(ctx, expr, [x], out, allowed=NUMERIC, name="gelu", helpers=helpers)


# -- clamp and where ----------------------------------------------------------

_LIMITS = {"float": (float("-inf"), float("inf")), "int": (-2 ** 31, 2 ** 31 - 1),
           "uint": (0, 2 ** 32 - 1)}


_FCLAMP = Helper("gc_clamp", "float", ("float", "float", "float"), """\
  // np.clip is minimum(maximum(x, lo), hi): a NaN anywhere gives NaN, which
  // GLSL's min/max/clamp do not promise.
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  if (isnan(c)) return c;
  return min(max(a, b), c);""")
CLAMP = {"float": _FCLAMP, "int": "min(max(x0, s), t)", "uint": "min(max(x0, s), t)"}


def _clamp_expr(kind: str):
    """(expression over x0, s, t; helpers) for clamp on ``kind``."""
    return entry_expr(CLAMP[kind], ("x0", "s", "t"), uniform=(1, 2))


@op("clamp", windows=POINTWISE)
def clamp(ctx, x, lo=None, hi=None, *, out=None):
    """``min(max(x, lo), hi)`` with Python-number bounds, like ``np.clip``
    (either bound may be None; when ``lo > hi`` every element becomes ``hi``;
    NaN in ``x`` or a NaN bound gives NaN)."""
    x = check_tensor(ctx, x, "clamp x")
    check_dtype(ctx, x.dtype, NUMERIC, "clamp")
    if lo is None and hi is None:
        raise InvalidArgumentError("clamp needs lo, hi or both")
    kind = COMPUTE_TYPE[x.dtype.kind]
    low, high = _LIMITS[kind]
    bounds = (low if lo is None else lo, high if hi is None else hi)
    expr, helpers = _clamp_expr(kind)
    return elementwise(ctx, expr, [x], out, scalar=bounds, allowed=NUMERIC, name="clamp",
                       helpers=helpers)


COND = ("float32", "float16", "int32", "uint32", "uint8")


def _select(cond_dtype, value_dtype) -> Helper:
    c, v = COMPUTE_TYPE[cond_dtype.kind], COMPUTE_TYPE[value_dtype.kind]
    return Helper("gc_where", v, (c, v, v), f"  return a != {c}(0) ? b : c;")


@op("where", windows=POINTWISE)
def where(ctx, cond, a, b, *, out=None):
    """``cond ? a : b`` elementwise with numpy broadcasting over all three.
    ``cond`` is any dtype (nonzero is true, NaN included); ``a`` and ``b``
    share a dtype and one of them may be a Python number."""
    cond = check_tensor(ctx, cond, "where cond")
    check_dtype(ctx, cond.dtype, COND, "where cond")
    values = [v for v in (a, b) if isinstance(v, Tensor)]
    if not values:
        raise InvalidArgumentError("where needs a or b to be a tensor (it gives the result dtype)")
    values = [check_tensor(ctx, v, "where value") for v in values]
    dtype = check_dtype(ctx, same_dtype(values, "where"), NUMERIC, "where")
    shape = broadcast_shapes(cond.shape, *(v.shape for v in values))
    scalar = scalar_type = None
    operands, uniform = ["x0"], ()
    if len(values) == 1:
        which = 1 if not isinstance(a, Tensor) else 2
        scalar, scalar_type = scalar_for(dtype, a if which == 1 else b, "where scalar")
        operands = ["x0", "s", "x1"] if which == 1 else ["x0", "x1", "s"]
        uniform = (which,)
    else:
        operands = ["x0", "x1", "x2"]
    inputs = [cond] + values
    out = output_tensor(ctx, out, shape, dtype, inputs)
    if out.size == 0:
        return OpResult(out, [])
    helper = _select(cond.dtype, dtype)
    return OpResult(out, [plan_map(ctx, helper.call(*operands), inputs, out, dtype, scalar, scalar_type,
                                   helper.renderer(uniform))])


# -- the bake catalogue --------------------------------------------------------

@variants("map")
def _math_variants():
    for name in NUMERIC:
        d = as_dtype(name)
        kind = COMPUTE_TYPE[d.kind]
        for op_name, (table, _) in BINARY_OPS.items():
            entry = table.get(kind)
            if entry is None:
                continue
            result = _result_dtype(op_name, d)
            expr, helpers = entry_expr(entry, ("x0", "x1"))
            yield from map_variants(expr, [d, d], result, helpers=helpers)
            expr, helpers = entry_expr(entry, ("x0", "s"), uniform=(1,))
            yield from map_variants(expr, [d], result, kind, helpers=helpers)
        for table in [t for t, _ in UNARY_OPS.values()] + list(GELU.values()):
            entry = table.get(kind)
            if entry is not None:
                expr, helpers = entry_expr(entry, ("x0",))
                yield from map_variants(expr, [d], d, helpers=helpers)
        expr, helpers = _clamp_expr(kind)
        yield from map_variants(expr, [d], d, kind, helpers=helpers, nscalars=2)
        for c in COND:
            cd = as_dtype(c)
            helper = _select(cd, d)
            yield from map_variants(helper.call("x0", "x1", "x2"), [cd, d, d], d,
                                    helpers=helper.renderer())
            yield from map_variants(helper.call("x0", "s", "x1"), [cd, d], d, kind,
                                    helpers=helper.renderer((1,)))
            yield from map_variants(helper.call("x0", "x1", "s"), [cd, d], d, kind,
                                    helpers=helper.renderer((2,)))
