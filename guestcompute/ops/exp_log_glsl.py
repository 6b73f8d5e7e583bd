"""The library's float32 e**x, log and pow as GLSL text, for the helpers of
ops/math.py that call them (exp, log, pow; tanh, sigmoid, silu and gelu
through exp): Cody-Waite reduction and Cephes' expf/logf minimax
polynomials, not the driver's builtins (GLSL leaves their precision loose
and NVIDIA's are approximate), and pow as e**(b log a) carried in two
floats. ``EXP_CORE`` is ``gc_exp_parts``/``gc_exp_core``; ``LOG_REDUCE``
the exact reduction ``gc_log_reduce`` and ``gc_log1p_tail``; ``POW_CORE``
everything ``gc_pow`` calls, these included; ``DIV_BODY`` is ``gc_div``, a
division that survives drivers dividing by a reciprocal. Subnormal inputs
are decoded from their bits (ops/math.py's notes say why).
"""

NAN = "uintBitsToFloat(0x7fc00000u)"
INF = "uintBitsToFloat(0x7f800000u)"
NEG_ZERO = "uintBitsToFloat(0x80000000u)"
# Subnormal float32 inputs (0 < |x| < 2**-126) are |bits| * 2**-149. Built-in
# log/log2/pow/sqrt may flush them to zero or treat their exponent field as
# if it were normal (lavapipe's log gives -88 for 1e-45 instead of -103.28),
# so the ops whose result is a normal number decode them from their bits.
SUBNORMAL_LIMIT = "0x00800000u"          # the bits of 2**-126, the smallest normal

DIV_BODY_TEXT = """\
  // Drivers may divide as a * (1 / b), and 1 / b underflows to 0 (or to a
  // subnormal that is flushed) for |b| >= 2**126: 1e38 / 1e38 would be 0.
  // Scaling both operands by 1/4 there is exact and keeps the quotient.
  float scale = (floatBitsToUint(b) & 0x7f800000u) >= 0x7e800000u ? 0.25 : 1.0;
  return (a * scale) / (b * scale);"""
DIV_BODY = f"float gc_div(float a, float b) {{\n{DIV_BODY_TEXT}\n}}\n"

EXP_CORE = """\
float gc_exp_parts(float a, float tail) {
  // e**(a + tail), |tail| <= ulp(a). Cody-Waite: a = k ln2 + r, |r| <= ln2 / 2,
  // with ln2 in two parts; the first has 9 bits, so k * 0.693359375 is exact.
  float x = min(max(a, -104.0), 89.0);    // beyond, the result is 0 or inf: the scaling gives them
  float k = roundEven(x * 1.44269504088896341);
  float r = ((x - k * 0.693359375) + k * 2.12194440e-4) + tail;
  float p = (((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
             + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1) * (r * r) + r + 1.0;
  int n = int(k);
  // p * 2**n in two exact steps (2**128 alone is not a float); below 2**-125
  // the subnormal result is built from its bits, as a device may flush
  // subnormal results of multiplication.
  int half_n = n >> 1;
  float normal = p * uintBitsToFloat(uint(half_n + 127) << 23) * uintBitsToFloat(uint(n - half_n + 127) << 23);
  uint subnormal = uint(roundEven(p * uintBitsToFloat(uint(max(n + 149, -126) + 127) << 23)));
  return n >= -125 ? normal : uintBitsToFloat(subnormal);
}

float gc_exp_core(float a) { return gc_exp_parts(a, 0.0); }
"""
LOG_REDUCE = f"""\
float gc_log_reduce(uint bits, out int e) {{
  // bits: a finite float > 0, as m 2**e with m in [sqrt(1/2), sqrt(2));
  // returns m - 1, exact. A subnormal is bits * 2**-149, and float(bits) is
  // exact and normal.
  e = 0;
  if (bits < {SUBNORMAL_LIMIT}) {{ bits = floatBitsToUint(float(bits)); e = -149; }}
  e += int(bits >> 23) - 126;
  float m = uintBitsToFloat((bits & 0x007fffffu) | 0x3f000000u);    // [1/2, 1)
  if (m < 0.70710678118654752) {{ e -= 1; m = m + m; }}
  return m - 1.0;
}}

float gc_log1p_tail(float f) {{
  // log(1 + f) - f + f**2 / 2 for |f| <= sqrt(2) - 1 (Cephes' logf fit)
  return ((((((((7.0376836292e-2 * f - 1.1514610310e-1) * f + 1.1676998740e-1) * f
          - 1.2420140846e-1) * f + 1.4249322787e-1) * f - 1.6668057665e-1) * f
          + 2.0000714765e-1) * f - 2.4999993993e-1) * f + 3.3333331174e-1) * f * (f * f);
}}
"""

# gc_pow_positive (x ** b for a finite x > 0) and all it calls, in two-float
# arithmetic (Dekker, Knuth); gc_pow in ops/math.py adds the special cases.
POW_CORE = f"""\
{DIV_BODY}{EXP_CORE}{LOG_REDUCE}
float gc_split(float v) {{ return uintBitsToFloat(floatBitsToUint(v) & 0xfffff000u); }}   // its top 12 bits

void gc_two_product(float v, float w, out float hi, out float lo) {{
  // v w == hi + lo exactly (Dekker; the 12-bit halves multiply exactly).
  precise float vh = gc_split(v), vl = v - vh, wh = gc_split(w), wl = w - wh;
  precise float pr = v * w;
  precise float err = (((vh * wh - pr) + vh * wl) + vl * wh) + vl * wl;
  hi = pr; lo = err;
}}

void gc_two_sum(float v, float w, out float hi, out float lo) {{
  // v + w == hi + lo exactly (Knuth).
  precise float sum = v + w;
  precise float bv = sum - v;
  precise float err = (v - (sum - bv)) + (w - bv);
  hi = sum; lo = err;
}}

void gc_fast_two_sum(float v, float w, out float hi, out float lo) {{
  // v + w == hi + lo exactly, for |v| >= |w| (Dekker).
  precise float sum = v + w;
  precise float err = w - (sum - v);
  hi = sum; lo = err;
}}

float gc_reciprocal(float a) {{
  // 1 / a as numpy's float32 division gives it (correctly rounded but for
  // near-ties): the device's quotient (Vulkan allows 2.5 ulp; the NVIDIA
  // driver's is 1 ulp off for 1 / 33), then one correction step from the
  // exact residual 1 - q a. Beyond 2**±100 the device's quotient stands:
  // the split halves of q or a would be subnormal there, which some devices
  // flush, and the correction would be wrong.
  float q = gc_div(1.0, a);
  uint qbits = floatBitsToUint(q) & 0x7fffffffu;
  if (qbits < 0x0d800000u || qbits > 0x71800000u) return q;
  float p, e;
  gc_two_product(q, a, p, e);
  return q + q * ((1.0 - p) - e);
}}

float gc_pow_integer(float x, float b) {{
  // x ** n for whole 2 < |n| <= 64 with a result well inside the normal
  // range: binary powering in two floats (about 44 bits), so the result is
  // correctly rounded but for near-ties, and exact when it is a float.
  uint n = uint(abs(b));
  float hi = 1.0, lo = 0.0, sh = x, sl = 0.0, p, e;
  for (;;) {{
    if ((n & 1u) != 0u) {{                          // (hi, lo) *= (sh, sl)
      gc_two_product(hi, sh, p, e);
      gc_fast_two_sum(p, e + (hi * sl + lo * sh), hi, lo);
    }}
    n >>= 1u;
    if (n == 0u) break;
    gc_two_product(sh, sh, p, e);                   // (sh, sl) squared
    gc_fast_two_sum(p, e + 2.0 * sh * sl, sh, sl);
  }}
  if (b > 0.0) return hi + lo;
  // 1 / (hi + lo): the device's quotient, then one correction step from the
  // exact residual 1 - q (hi + lo) (1 - p is exact: p is within an ulp or so of 1).
  float q = 1.0 / hi;
  gc_two_product(q, hi, p, e);
  return q + q * (((1.0 - p) - e) - q * lo);
}}

float gc_pow_positive(uint bits, float b) {{
  // bits: a finite base > 0. The exponents numpy computes exactly (x ** 1,
  // x * x, sqrt, 1 / x) are taken exactly; the rest go through log2 and
  // exp2, a subnormal base through its exact log2.
  float a = uintBitsToFloat(bits);
  if (b == 1.0) return a;
  if (b == 2.0) return a * a;
  if (b == -1.0) return gc_reciprocal(a);
  if (b == 0.5) return bits < {SUBNORMAL_LIMIT} ? sqrt(2.0 * float(bits)) * exp2(-75.0) : sqrt(a);
  // e**(b log a), with b log a in two floats: log a = e ln2 + f - f**2 / 2 + tail
  // has exact parts but the small tail, and each product with b is split.
  int e;
  float f = gc_log_reduce(bits, e);
  float fe = float(e);
  // Far beyond float32's range the result is inf or 0 (and the exact
  // products below could overflow into inf - inf).
  float rough = b * (0.69314718 * fe + f);
  if (abs(rough) > 200.0) return rough > 0.0 ? {INF} : 0.0;
  if (abs(rough) < 69.0 && abs(b) <= 64.0 && floor(b) == b) return gc_pow_integer(a, b);
  float hi, lo, p, q, r;
  gc_two_product(b, 0.693359375 * fe, hi, lo);       // 0.693359375 fe is exact
  gc_two_product(b, f, p, q);
  gc_two_sum(hi, p, hi, p);
  lo += p + q;
  gc_two_product(f, f, p, q);                        // -f**2 / 2 == -(p + q) / 2
  gc_two_product(b, -0.5 * p, p, r);
  gc_two_sum(hi, p, hi, p);
  lo += p + r + b * (gc_log1p_tail(f) - 0.5 * q - 2.12194440e-4 * fe);
  gc_two_sum(hi, lo, hi, lo);
  return gc_exp_parts(hi, lo);
}}
"""
