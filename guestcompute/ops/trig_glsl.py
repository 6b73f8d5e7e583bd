"""The library's float32 sine and cosine as GLSL text, for every kernel
that computes them (``rec.sin``/``rec.cos`` in ops/math.py, the frequency
encoding in ops/encodings.py): an exact argument reduction and Cephes'
sinf/cosf minimax polynomials, not the driver's builtins (GLSL leaves their
precision loose and NVIDIA's are approximate). ``TRIG_CORE`` is the whole
``gc_sin_cos``; ``TRIG_POLYS`` only the two polynomials on [-pi/4, pi/4],
for kernels that reduce their arguments themselves.
"""

_TRIG_REDUCE = """\
// Bits of 2/pi, most significant first, after two zero words: word w, bit s
// of this table is bit 32 w + s - 64 after the binary point of 2/pi. (A
// chain of selects, not a const array: some compilers copy an indexed
// array into every invocation's private memory.)
uint gc_two_over_pi_word(uint w) {
  return w < 5u ? (w < 3u ? (w < 2u ? 0u : 0xA2F9836Eu) : (w < 4u ? 0x4E441529u : 0xFC2757D1u))
                : (w < 7u ? (w < 6u ? 0xF534DDC0u : 0xDB629599u) : (w < 8u ? 0x3C439041u : 0xFE5163ABu));
}

uint gc_two_over_pi_bits(uint bit) {
  // The 32 bits of the table from bit ``bit`` on.
  uint w = bit >> 5u, s = bit & 31u;
  return (gc_two_over_pi_word(w) << s) | ((gc_two_over_pi_word(w + 1u) >> 1u) >> (31u - s));
}

float gc_trig_reduce(uint mag, out uint quadrant) {
  // Payne-Hanek: |a| = m 2**(e-23) (mag its bits, finite, > pi/4) is
  // reduced to r = |a| - quadrant pi/2, |r| <= pi/4, in integer arithmetic,
  // exactly enough for every float32 (its nearest approach to a multiple of
  // pi/2 is about 2**-30 |a|). The bits of 2/pi that would only add multiples
  // of 4 to |a| 2/pi are skipped; the next 96 multiply m.
  int e = int(mag >> 23u) - 127;
  uint m = (mag & 0x007fffffu) | 0x00800000u;
  uint start = uint(e + 39);              // bit e - 25 of 2/pi
  uint w0 = gc_two_over_pi_bits(start), w1 = gc_two_over_pi_bits(start + 32u),
       w2 = gc_two_over_pi_bits(start + 64u);
  // |a| 2/pi = (m * w0:w1:w2) 2**-94: bits 95 and 94 are the quadrant (mod 4),
  // the 64 below it the fraction (the words above only add multiples of 4).
  uint h2, l2, h1, l1, carry;
  umulExtended(m, w2, h2, l2);
  umulExtended(m, w1, h1, l1);
  uint p2 = uaddCarry(l1, h2, carry);
  uint p1 = m * w0 + h1 + carry;
  quadrant = p1 >> 30u;
  uint hi = (p1 << 2u) | (p2 >> 30u), lo = (p2 << 2u) | (l2 >> 30u);
  // A fraction of 1/2 or more rounds to the next quadrant: r is negative.
  bool negative = (hi >> 31u) != 0u;
  if (negative) { quadrant += 1u; lo = 0u - lo; hi = ~hi + uint(lo == 0u); }
  // Normalise the fraction, multiply by pi/2 (0xC90FDAA2 2**-31) and convert.
  uint shift = 0u;
  if (hi == 0u) { hi = lo; lo = 0u; shift = 32u; }
  uint lead = 31u - uint(findMSB(hi));
  hi = (hi << lead) | ((lo >> 1u) >> (31u - lead));
  uint ph, pl;
  umulExtended(hi, 0xC90FDAA2u, ph, pl);
  float r = float(ph | uint(pl != 0u))       // the low word only as a sticky bit for rounding
          * uintBitsToFloat((127u - 31u - lead - shift) << 23u);
  return negative ? -r : r;
}

float gc_trig_reduce_medium(float x, out uint quadrant) {
  // Cody-Waite for pi/4 < x < 6432 (quadrant < 2**12): pi/2 in five parts,
  // the first four of 12 bits, so each k * part is exact; the subtractions
  // are exact or their errors are carried (Knuth's two-sum), so r is right to
  // well below an ulp even at x's nearest approach to a multiple of pi/2
  // (about 2**-28 here).
  float k = roundEven(x * 0.636619772367581343);
  quadrant = uint(k);
  float t = (x - k * uintBitsToFloat(0x3fc90000u)) - k * uintBitsToFloat(0x39fda000u);   // exact
  precise float p3 = k * uintBitsToFloat(0x33a22000u);
  precise float t3 = t - p3;
  precise float b3 = t3 - t;
  precise float e3 = (t - (t3 - b3)) - (p3 + b3);
  precise float p4 = k * uintBitsToFloat(0x2c346000u);
  precise float t4 = t3 - p4;
  precise float b4 = t4 - t3;
  precise float e4 = (t3 - (t4 - b4)) - (p4 + b4);
  return t4 + ((e3 + e4) - k * uintBitsToFloat(0x248d3132u));
}

"""

TRIG_POLYS = """\
float gc_sin_poly(float r) {   // |r| <= pi/4
  float z = r * r;
  return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}

float gc_cos_poly(float r) {   // |r| <= pi/4
  float z = r * r;
  return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * (z * z)
         - 0.5 * z + 1.0;
}

"""

_TRIG_SIN_COS = """\
float gc_sin_cos(float a, uint offset) {
  // sin(a) for offset 0, cos(a) = sin(|a| + pi/2) for offset 1.
  uint bits = floatBitsToUint(a), mag = bits & 0x7fffffffu;
  if (mag >= 0x7f800000u) return uintBitsToFloat(0x7fc00000u);    // inf and NaN
  uint quadrant = 0u;
  float r = uintBitsToFloat(mag);
  if (mag > 0x3f490fdbu) {                                          // |a| > pi/4
    r = mag < 0x45c90000u ? gc_trig_reduce_medium(r, quadrant) : gc_trig_reduce(mag, quadrant);
  }
  quadrant += offset;
  float s = (quadrant & 1u) == 0u ? gc_sin_poly(r) : gc_cos_poly(r);
  // sin(x) == x for |x| < 2**-12 (subnormals too, kept by their bits)
  if (mag < 0x39800000u) s = offset == 0u ? r : 1.0;
  bool flip = ((quadrant & 2u) != 0u) != (offset == 0u && (bits >> 31u) != 0u);
  return flip ? -s : s;
}
"""

TRIG_CORE = _TRIG_REDUCE + TRIG_POLYS + _TRIG_SIN_COS
