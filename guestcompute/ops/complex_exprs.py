"""complex64 arithmetic as GLSL: the expressions and helper functions the
``map`` kernel renders for add, sub, mul, div, neg, conj, abs and angle on
complex64 (ops/complex_math.py plans them), and what they promise.

A complex64 element is a ``vec2`` (real, imaginary) in the kernel. Real
operands (a float32 or float16 tensor, a Python int or float) become
``vec2(x, 0.0)`` first, as numpy converts them to complex64 before its
complex loop, so signed zeros come out as numpy's (``(1 - 0j) + 2.0`` has
imaginary part +0). Python scalars reach the kernel as a ``vec2`` push
constant, each part rounded to float32.

Accuracy (finite operands whose parts and results are normal float32
numbers; ``|z|`` is the modulus, ``q`` the exact quotient):

========  ===============================  ==================================
op        bound                            worst measured (lavapipe)
========  ===============================  ==================================
mul       each part within 2**-22 |a||b|   2**-23.0 |a||b|
div       each part within 2**-20 |q|      2**-22.4 |q|
abs       1 ulp                            0.50 ulp
angle     6 ulp                            2.17 ulp
add, sub  correctly rounded parts (one float32 addition each)
========  ===============================  ==================================

measured against complex128 over 2**21 random operands per op, half with
parts spread over 2**±60 and half over 2**±3, random signs.
tests/ops/test_complex_math.py checks every bound over 2**15 such operands
per op (2**14 of each spread), on random shapes and views, and on special
and huge values; it also checks that this table's bounds are the ones in
docs/integration.md and the ones it tests.

- ``mul`` is ``(ac - bd, ad + bc)`` with every product rounded on its own
  (GLSL ``precise``: no fused multiply-add), so each part errs by at most
  half an ulp of each product and of the sum: 2**-23 |a||b| before the
  last rounding.
- ``div`` is Smith's algorithm (the ratio of the divisor's smaller part to
  its larger) on operands first scaled by powers of two so that the larger
  part of each lies in [2, 4): no intermediate overflows or underflows, for
  parts from float32's smallest normal to its largest, and the quotient is
  scaled back in two exact steps (it overflows to inf only where it is
  beyond float32). numpy's own complex64 loop is Smith's algorithm without
  the scaling: it gives inf or 0 where ``c**2 + d**2`` leaves float32's range
  (``(1e-30 + 0j) / 1e-39`` is inf there, 1e9 here; ``1 / (3e38 + 3e38j)``
  is 0 there, 1.7e-39 - 1.7e-39j here).
- ``abs`` is a scaled hypot: both parts scaled by a power of two that puts
  the larger in [2, 4), ``x*x + y*y`` kept exactly as a sum of two floats
  (Dekker's two-products), its square root, scaled back. The device's
  ``sqrt`` (Vulkan asks only for the precision of ``1 / inversesqrt``) is
  corrected by one Newton step on the exactly computed residual, so the
  result is correctly rounded but for near-ties on every device, whatever
  its ``sqrt`` (``abs(3 + 4j) == 5``). ``hypot(x, ±0) == |x|`` exactly.
- ``angle`` is ``atan2(imag, real)`` by the library's own atan (a degree-11
  odd polynomial on [0, tan(pi/8)], the range above it reduced through
  ``atan(t) = pi/4 + atan((t - 1) / (t + 1))``, and the octants by
  ``pi/2 - atan`` and ``pi - atan`` with pi in two parts), not the driver's
  (GLSL leaves ``atan`` loose). On a real tensor it is numpy's
  ``np.angle``: ``atan2(+0, x)``, so pi where the sign bit of ``x`` is set
  (``-0.0`` included) and 0 elsewhere, NaN for NaN.

Special values (NaN, ±inf, ±0) are numpy's complex64 results: ``abs`` and
``angle`` follow C99's ``hypot`` and ``atan2`` (Annex F: ``hypot(±inf, NaN)
== inf``, ``atan2(±0, -0) == ±pi``, ``atan2(±inf, -inf) == ±3pi/4``, ...), as
numpy's do; ``mul`` and ``div`` are numpy's formulas (its loop's, not C99
Annex G's recovery of infinities: ``(1 + inf j) * 2`` is ``nan + inf j``
in both), ``div`` taking numpy's unscaled formula verbatim whenever a part
of either operand is inf or NaN or the divisor is 0 (``x / 0`` is ±inf or
NaN per part; a divisor part of 2**126 or more has its reciprocal taken
scaled, as a driver's ``1 / y`` is 0 there: ``(inf + 1j) / (3e38 + 1j)``
is numpy's ``inf - inf j``). The exceptions, where numpy's own answer
depends on its machine:

- ``mul`` where a part's two products are infinities of opposite signs, one
  of them a float32 overflow (``(3e38 + 3e38j) ** 2``, ``(2.5 + inf j) *
  (inf - 3e38j)``): here ``inf - inf`` is NaN; numpy's loop uses fused
  multiply-adds where the CPU has them (one product unrounded) and gives
  ±inf. Its finite parts with a rounded product may differ from numpy's
  there in the last bit too, for the same reason.
- ``div`` of finite operands where numpy's unscaled Smith overflows or
  underflows (above): here the quotient.
- Subnormal parts are the device's business, as for the real ops: a device
  may flush them to zero on input or output (lavapipe keeps them), and
  quotients whose parts are subnormal may be rounded twice when scaled back.
"""
from __future__ import annotations

from .math import Helper

NAN = "uintBitsToFloat(0x7fc00000u)"
INF = "uintBitsToFloat(0x7f800000u)"

# Powers of two from bits, and a scaling by 2**n in two exact steps (2**n
# alone is no float32 for n beyond [-126, 127]; GLSL's ldexp is undefined
# where the result overflows).
_SCALE = """\
int gc_exponent(uint mag) { return max(int(mag >> 23u), 1) - 127; }   // floor(log2) of a normal |x|; -126 below
float gc_pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23u); }   // e in [-126, 127]
vec2 gc_ldexp(vec2 v, int n) {
  n = clamp(n, -252, 254);     // past either end the result is 0 or inf anyway
  int h = n / 2;
  return v * gc_pow2(h) * gc_pow2(n - h);
}
"""

CMUL = Helper("gc_cmul", "vec2", ("vec2", "vec2"), """\
  // Each product rounds on its own (no fused multiply-add), so each part
  // errs by at most 2**-23 |a||b| before its last rounding.
  precise float re = a.x * b.x - a.y * b.y;
  precise float im = a.x * b.y + a.y * b.x;
  return vec2(re, im);""")

CDIV = Helper("gc_cdiv", "vec2", ("vec2", "vec2"), """\
  uvec4 mags = uvec4(floatBitsToUint(a), floatBitsToUint(b)) & 0x7fffffffu;
  if (any(greaterThanEqual(mags, uvec4(0x7f800000u))) || (mags.z | mags.w) == 0u) return gc_cdiv_numpy(a, b);
  // Scaled so that each operand's larger part lies in [2, 4): Smith's
  // ratio, divisor and numerators are then far from overflow and underflow.
  int ea = gc_exponent(max(mags.x, mags.y)), eb = gc_exponent(max(mags.z, mags.w));
  vec2 x = a * gc_pow2(1 - ea), y = b * gc_pow2(1 - eb);
  precise float re, im;
  if (abs(y.x) >= abs(y.y)) {
    precise float r = y.y / y.x;
    precise float d = y.x + y.y * r;
    re = (x.x + x.y * r) / d;
    im = (x.y - x.x * r) / d;
  } else {
    precise float r = y.x / y.y;
    precise float d = y.y + y.x * r;
    re = (x.x * r + x.y) / d;
    im = (x.y * r - x.x) / d;
  }
  return gc_ldexp(vec2(re, im), ea - eb);""", prelude=f"""\
{_SCALE}
float gc_ratio(float n, float d) {{
  // n / d for |n| <= |d|, never flushed to zero when it is not zero: numpy's
  // ratio may be subnormal, and inf * it is inf where a flushed 0 gives NaN
  // ((inf + infj) / (1 + 3e38j) is numpy's inf + nanj). A driver may flush
  // subnormal results, so such a ratio becomes the smallest normal float of
  // its sign; in this formula it only ever multiplies an infinite or NaN
  // part or is added to one, so its size does not show.
  precise float r = n / d;
  if (r == 0.0 && n != 0.0 && !isinf(d)) r = (sign(n) * sign(d)) * 1.17549435e-38;
  return r;
}}

vec2 gc_cdiv_numpy(vec2 a, vec2 b) {{
  // numpy's complex64 loop, verbatim: its special values (x / 0 is ±inf or
  // NaN per part, a NaN or inf part goes through Smith's formula unscaled).
  // A driver may divide as x * (1 / y), and 1 / y is 0 for |y| >= 2**126
  // ((inf + 1j) / (3e38 + 1j) would be NaN, not numpy's inf - infj): there
  // the ratio's operands are scaled by 1/4, and 1 / d is taken as
  // 1/4 * (1 / (d / 4)) with the 1/4 applied last (d, numpy's, may be inf).
  uvec2 mb = floatBitsToUint(b) & 0x7fffffffu;
  float k = max(mb.x, mb.y) >= 0x7e800000u ? 0.25 : 1.0;
  precise float re, im;
  if (abs(b.x) >= abs(b.y)) {{
    if (b.x == 0.0 && b.y == 0.0) return vec2(a.x / abs(b.x), a.y / abs(b.x));
    precise float r = gc_ratio(b.y * k, b.x * k);
    precise float s = 1.0 / ((b.x + b.y * r) * k);
    re = ((a.x + a.y * r) * s) * k;
    im = ((a.y - a.x * r) * s) * k;
  }} else {{
    precise float r = gc_ratio(b.x * k, b.y * k);
    precise float s = 1.0 / ((b.y + b.x * r) * k);
    re = ((a.x * r + a.y) * s) * k;
    im = ((a.y * r - a.x) * s) * k;
  }}
  return vec2(re, im);
}}
""")

# sqrt(hi + lo) for |lo| below half an ulp of hi: the device's sqrt (Vulkan
# requires only "1 / inversesqrt", a few ulp) corrected by one Newton step
# s + r / (2 s) on the residual r = hi + lo - s*s, computed exactly: s*s
# split by Dekker's two-product (12-bit halves, each product exact), all
# ``precise`` so that no step relies on a fused multiply-add (Vulkan's fma is
# only as exact as a multiply then an add). hi - s*s is exact (Sterbenz).
_SQRT = """\
float gc_half_split(float v) { return uintBitsToFloat(floatBitsToUint(v) & 0xfffff000u); }   // its top 12 bits

float gc_sqrt_corrected(float hi, float lo) {
  float s = sqrt(hi);
  uint bits = floatBitsToUint(s);
  if (bits == 0u || bits >= 0x7f800000u) return s;     // ±0, inf, NaN (negatives' too): as they are
  precise float sh = gc_half_split(s), sl = s - sh;
  precise float q = s * s;
  precise float e = ((sh * sh - q) + 2.0 * (sh * sl)) + sl * sl;    // s*s == q + e exactly
  precise float r = ((hi - q) - e) + lo;
  precise float t = s + r / (2.0 * s);
  return t;
}
"""

CABS = Helper("gc_cabs", "float", ("vec2",), f"""\
  // C99 hypot: inf if either part is ±inf (NaN or not), else NaN for a NaN.
  uint x = floatBitsToUint(a.x) & 0x7fffffffu, y = floatBitsToUint(a.y) & 0x7fffffffu;
  if (x == 0x7f800000u || y == 0x7f800000u) return {INF};
  if (x > 0x7f800000u || y > 0x7f800000u) return {NAN};
  uint big = max(x, y);
  if (min(x, y) == 0u) return uintBitsToFloat(big);      // hypot(x, ±0) == |x|, exactly
  // Scaled so the larger part lies in [2, 4): the squares cannot overflow,
  // and a smaller part whose square underflows is below the result's ulp.
  // The sum of squares is kept as hi + lo (each square by its two-product).
  int e = gc_exponent(big);
  float u = uintBitsToFloat(big) * gc_pow2(1 - e), v = uintBitsToFloat(min(x, y)) * gc_pow2(1 - e);
  precise float uh = gc_half_split(u), ul = u - uh, vh = gc_half_split(v), vl = v - vh;
  precise float pu = u * u, pv = v * v;
  precise float eu = ((uh * uh - pu) + 2.0 * (uh * ul)) + ul * ul;
  precise float ev = ((vh * vh - pv) + 2.0 * (vh * vl)) + vl * vl;
  precise float hi = pu + pv;
  precise float lo = (pv - (hi - pu)) + (eu + ev);       // pu >= pv: Dekker's fast two-sum
  return gc_ldexp(vec2(gc_sqrt_corrected(hi, lo), 0.0), e - 1).x;""", prelude=_SCALE + _SQRT)

_ATAN = """\
float gc_atan_unit(float n, float m) {
  // atan(n / m) for 0 <= n <= m: above tan(pi/8), pi/4 + atan((n - m) / (n + m))
  // (no rounded ratio in between); below, t + t z p(z) with t = n / m,
  // z = t*t, p a degree-4 least-relative-error fit.
  float hi = 0.0, lo = 0.0, t;
  if (n > 0.414213562 * m) { hi = 7.853981853e-01; lo = -2.185569414e-08; t = (n - m) / (n + m); }
  else t = n / m;
  float z = t * t;
  float p = (((-6.078815088e-02 * z + 1.059403270e-01) * z - 1.424356103e-01) * z
             + 1.999847293e-01) * z - 3.333331645e-01;
  return hi + (lo + (t + t * z * p));
}

float gc_atan2(float y, float x) {
  // C99 atan2 (Annex F): the sign of y's sign bit on every result, pi for
  // x with its sign bit set (-0 too), ±pi/2 on the imaginary axis, the
  // eight infinite cases exact; NaN in, NaN out.
  uint yb = floatBitsToUint(y), xb = floatBitsToUint(x);
  uint ym = yb & 0x7fffffffu, xm = xb & 0x7fffffffu;
  if (xm > 0x7f800000u) return x;
  if (ym > 0x7f800000u) return y;
  bool left = (xb >> 31u) != 0u, swap = ym > xm;
  float a, r;
  if (xm == 0x7f800000u && ym == 0x7f800000u) {
    r = left ? 2.356194496e+00 : 7.853981853e-01;
  } else {
    if (ym == 0u || xm == 0x7f800000u || ym == 0x7f800000u || xm == 0u) {
      a = 0.0;                 // on an axis (or at an infinity): 0 or pi/2 exactly
    } else {
      // Scaled so the larger part lies in [2, 4): the ratio is one division
      // of moderate numbers (a device's quotient by a huge divisor may flush).
      int e = gc_exponent(max(xm, ym));
      vec2 v = vec2(uintBitsToFloat(xm), uintBitsToFloat(ym)) * gc_pow2(1 - e);
      a = swap ? gc_atan_unit(v.x, v.y) : gc_atan_unit(v.y, v.x);
    }
    // (hi + lo) + s a: 0 + a, pi/2 - a, pi/2 + a or pi - a.
    float hi = swap ? 1.570796371e+00 : (left ? 3.141592741e+00 : 0.0);
    float lo = swap ? -4.371138829e-08 : (left ? -8.742277657e-08 : 0.0);
    r = hi + (lo + ((swap != left) ? -a : a));
  }
  return (yb >> 31u) != 0u ? -r : r;
}
"""
CANGLE = Helper("gc_angle", "float", ("vec2",), "  return gc_atan2(a.y, a.x);", prelude=_SCALE + _ATAN)

def _real_angle(kind: str) -> Helper:
    """np.angle of a real: atan2(+0, x) (a Helper per kind: its vec2/vec4 overloads convert lanes)."""
    return Helper("gc_angle_real", "float", (kind,), "  return gc_atan2(0.0, float(a));", prelude=_SCALE + _ATAN)


# The imaginary part +0 of a promoted real operand. Not the literal 0.0: a
# driver that need not preserve signed zeros (lavapipe, without the float
# controls' SignedZeroInfNanPreserve) folds ``y + 0.0`` into ``y`` even in
# precise arithmetic, keeping a -0 where numpy's sum is +0. The element
# count's top bit is 0 (a binding holds fewer than 2**31 elements), but the
# compiler cannot know it.
OPAQUE_ZERO = "uintBitsToFloat(pc.n & 0x80000000u)"


def as_complex(operand: str, dtype) -> str:
    """GLSL for operand ``x0``/``x1``/``s`` of ``dtype`` as a vec2 (real ones get imaginary part +0)."""
    return operand if dtype is None or dtype.kind == "complex" else f"vec2({operand}, {OPAQUE_ZERO})"


CADD = Helper("gc_cadd", "vec2", ("vec2", "vec2"), "  precise vec2 r = a + b;\n  return r;")
CSUB = Helper("gc_csub", "vec2", ("vec2", "vec2"), "  precise vec2 r = a - b;\n  return r;")
# name -> Helper: the complex binary ops
BINARY = {"add": CADD, "sub": CSUB, "mul": CMUL, "div": CDIV}


def binary_expr(name: str, a_dtype, b_dtype=None) -> tuple:
    """(expression, helpers renderer) of complex op ``name`` on operands of
    these dtypes; ``b_dtype`` None: the second operand is the vec2 scalar ``s``."""
    x0 = as_complex("x0", a_dtype)
    x1 = as_complex("x1", b_dtype) if b_dtype is not None else "s"
    return BINARY[name].call(x0, x1), BINARY[name].renderer()


# name -> (expression over x0, helpers) of the unary ops on a complex64 operand
UNARY = {"neg": ("-x0", None), "conj": ("vec2(x0.x, -x0.y)", None),
         "abs": (CABS.call("x0"), CABS.renderer()), "angle": (CANGLE.call("x0"), CANGLE.renderer())}
REAL_ANGLE = {kind: (_real_angle(kind).call("x0"), _real_angle(kind).renderer()) for kind in ("float", "int", "uint")}
