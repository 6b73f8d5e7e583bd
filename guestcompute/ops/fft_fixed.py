"""The fixed-length FFT kernel: one compiled pipeline per power-of-two
length, its whole plan unrolled at compile time, the row held in registers.

The generic ``fft_rows`` kernel (ops/fft_kernels.py) reads its plan from
push constants, so every stage walks shared memory with run-time indices
and divisions. For the lengths renderers use most (powers of two up to
4,096) this kernel is generated per length instead:

* each invocation holds ``E`` elements of its row in registers, positions
  ``j + T*e`` (``T = n / E`` invocations a row): the first stage reads them
  straight from memory and the last stage's Stockham outputs land on the
  same positions, so they are written straight back; both accesses are
  consecutive across invocations;
* between stages the row goes once through shared memory (padded so that
  the butterflies' strided writes spread over the banks; a column
  workgroup's rows interleaved; real parts then imaginary parts where a
  workgroup's rows pass 8 KB, so that more workgroups fit at once);
* each butterfly is a small DFT split into radix-2 steps with exact
  quarter turns; the twiddle factors between stages are computed in the
  kernel (``_TWIDDLE``: an exact reduction to an eighth of a turn, then
  polynomials; not the driver's sin / cos), two a butterfly, the other
  powers multiplied from them, all before the first stage, while the row
  itself is read. (They were first read from a table of roots as in
  ``fft_rows``: the reads took ~40 % of a 4,096-point row's time on an
  H200 until a butterfly read two; computing them took the 512-point rows
  of one 512 x 512 transform on an H100 from 4.40 to 4.21 us.)
* a row whole and consecutive in memory (the common case) is read
  without bounds checks, under a branch uniform across the dispatch;
* a workgroup transforms ``R`` rows; where neighbouring rows are
  neighbours in memory (the columns of a row-major array) the invocations
  run across the rows first, so each access covers whole memory sectors.

Real rows along memory (a real input's forward transform, a Hermitian
input's inverse to real values) go through a complex transform of half
their length and one more step (ops/fft_halves.py).

The row's length, stages and thread layout are compiled in; the views,
batch, crop / zero-padding, direction and scale are push constants, so
any batch or view still reuses the pipeline.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, Binding, KernelSpec, Push, family
from . import fft_halves
from .pixels import is_image_layout
from .fft_kernels import CMUL, KINDS, STORED, load_glsl, row_bindings, row_loads, row_push, row_storage, texel_source

LENGTHS = tuple(1 << k for k in range(1, 13))      # 2 .. 4096
SHARED_BUDGET = 32 * 1024                           # bytes a workgroup's exchange buffer may take
SPLIT_ABOVE = 8 * 1024                              # bytes of rows a workgroup exchanges whole
NARROW_LENGTHS = (512,)                             # column lengths with a layout for few columns
NARROW_ROWS = 1024                                  # the most columns a pass gives that layout
ALIGNED_LENGTHS = (1024,)                           # column lengths with a layout for sector-aligned columns
SECTOR_VALUES = 4                                   # complex64 values in a 32-byte memory sector
WIDE_LENGTHS = (256,)                               # lengths of complex rows along memory laid out eight a workgroup
WIDE_ROWS = 8


def layout(n: int, columns: bool, form: str = "") -> tuple:
    """(elements an invocation holds, rows a workgroup transforms, stage
    radices) for a power-of-two length ``n``; ``form``: a pass's layout
    of :func:`pass_form` ("" for the usual one). Rows laid along
    memory take few rows a workgroup (the less shared memory a workgroup
    holds, the more run at once; but see the wide form); columns take at
    least two, and eight or more up to 1,024 points, so that each access
    of neighbouring rows covers whole 32-byte sectors, and where a row's
    start is not aligned (an odd width, as rfft2's n/2 + 1) only one
    sector in three is wasted, not one in two.
    (Chosen by measuring the alternatives on an H200, then the rows of
    columns of 1,024 points on an H100: eight rows took 143 us where four
    took 190 for 32 x 1,024 x 513, and 225 where four took 233 at 1,024
    wide.)"""
    if columns and form == "narrow":
        per, rows = 8, 4
    elif columns and form == "aligned":
        per, rows = 16, SECTOR_VALUES
    elif form == "wide":
        per, rows = 8, WIDE_ROWS
    elif columns:
        per = min(n, 16 if n >= 256 else 8)
        threads = n // per
        rows = min(max(8, 128 // threads), 8192 // n) if n <= 1024 else 2
    else:
        per = min(n, 8 if n <= 512 else 16)
        threads = n // per
        rows = max(1, min(128 // threads, 1024 // n)) if n <= 512 else 2 if n <= 2048 else 1
    return per, rows, stage_radices(n, per)


def stage_radices(n: int, per: int) -> list:
    """The stages of ``n`` points with ``per`` an invocation: radix ``per``
    while it divides what is left, then the rest in one last stage."""
    radices, rest = [], n
    while rest % per == 0 and rest > 1:
        radices.append(per)
        rest //= per
    if rest > 1:
        radices.append(rest)
    return radices


def pass_form(n: int, columns: bool, rows: int, load: str, store: str, on_sectors: bool) -> str:
    """The layout a pass of ``rows`` rows of length ``n`` (``columns``:
    neighbouring rows neighbours in memory) takes, where the usual one ("")
    is not the best.

    "wide": complex rows along memory eight a workgroup rather than four
    (256 invocations, the exchange one part at a time). On an H200, 2^17
    rows of 256 points took 138 us that way against 151 (a float32 copy
    of the same bytes: 128); sixteen points an invocation, four rows a
    workgroup, took 149. (4,096-point rows eight points an invocation, 512
    invocations a workgroup, were slower: 187 against 174 us.) Real rows,
    whose half-length transforms also run 256 points (ops/fft_halves.py),
    keep the usual layout: they were not measured. A device that runs
    fewer than 256 invocations a workgroup takes the usual one (ops/fft.py).

    "narrow": eight points an invocation, four columns a workgroup, twice
    the workgroups of the usual one. Where a pass has few columns (one 512
    x 512 plane: 64 workgroups for 132 SMs) that is what bounds it: one
    512 x 512 transform took 9.4 us that way against 10.0 on an H100, and
    9.19 against 9.94 on an H200; but six planes of 257 columns (an ocean
    cascade's c2r) took 17.5 against 15.9 on the H100, their rows not
    aligned to 32-byte sectors, so many columns keep the usual layout.

    "aligned": complex columns four a workgroup, so that each of its reads
    and writes of a row is one whole 32-byte sector; only ``on_sectors``,
    where the views keep every workgroup's columns on sector boundaries
    (ops/fft.py). On an H100, 32 transforms of 1,024^2 took 423 us that
    way against 437 with eight columns a workgroup (in place, after the
    rows pass); the 513 columns of rfft2's spectra, whose rows are not
    aligned, took 268 us against 244 for the irfft2, so they keep the
    usual layout."""
    if not columns:
        return "wide" if n in WIDE_LENGTHS and load == store == "complex" else ""
    if n in NARROW_LENGTHS and rows <= NARROW_ROWS:
        return "narrow"
    if n in ALIGNED_LENGTHS and load == store == "complex" and on_sectors:
        return "aligned"
    return ""


def pad_shift(n: int, rows: int, form: str = "") -> int:
    """One padding element every 16 (0: none where it would pass the budget)."""
    return 4 if rows * (n + n // 16) * word_bytes(n, rows, form) <= SHARED_BUDGET else 0


def word_bytes(n: int, rows: int, form: str = "") -> int:
    """Bytes of a shared-memory element: a float where parts go one at a time."""
    return 4 if split_exchange(n, rows, form) else 8


def split_exchange(n: int, rows: int, form: str = "") -> bool:
    """Whether rows go through shared memory one part at a time (real, then
    imaginary): where a workgroup's rows take more than SPLIT_ABOVE bytes,
    halving its shared memory lets more workgroups run at once. Not in the
    narrow layout: its few workgroups all run at once anyway, and the
    split's extra barriers cost it (on an H100, the 512-point columns of one
    512 x 512 plane: 5.02 us split, 4.89 whole)."""
    return form != "narrow" and rows * n * 8 > SPLIT_ABOVE


def shared_elements(n: int, rows: int, form: str = "") -> int:
    """Elements of the exchange buffer, padding included."""
    shift = pad_shift(n, rows, form)
    return rows * (n + (n >> shift if shift else 0))


def slot(p: str, shift: int, columns: bool) -> str:
    """GLSL: the shared-memory index of row position ``p`` of this
    invocation's row ``c``. Rows lie one after another, positions padded;
    for columns the rows interleave (position-major), so invocations of
    neighbouring rows touch neighbouring words."""
    q = p if shift == 0 else f"({p} + (({p}) >> {shift}u))"
    return f"({q}) * R + c" if columns else f"c * NP + {q}"


def fits(ctx, n: int, columns: bool, form: str = "") -> bool:
    """Whether this device runs the fixed kernel of length ``n``."""
    if n not in LENGTHS:
        return False
    per, rows, _ = layout(n, columns, form)
    lim = ctx.limits
    return (word_bytes(n, rows, form) * shared_elements(n, rows, form) <= lim.max_shared_memory
            and rows * (n // per) <= lim.max_workgroup_invocations)


# -- small DFTs in registers ---------------------------------------------------------

class _Code:
    """GLSL statements and fresh temporaries."""
    def __init__(self):
        self.lines, self.count = [], 0

    def let(self, expr: str) -> str:
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"vec2 {name} = {expr};")
        return name


def _rotate(u: str, num: int, den: int) -> str:
    """``u`` times exp(sg * 2*pi*i * num / den): quarter turns exactly,
    others by float32-rounded constants."""
    num %= den
    if (4 * num) % den == 0:
        return (u, f"vec2(-sg * {u}.y, sg * {u}.x)", f"-{u}", f"vec2(sg * {u}.y, -sg * {u}.x)")[4 * num // den]
    angle = 2.0 * math.pi * num / den
    c, s = float(np.float32(math.cos(angle))), float(np.float32(math.sin(angle)))
    return f"cmul({u}, vec2({c!r}, sg * {s!r}))"


def _dft(code: _Code, xs: list) -> list:
    """Names holding sum_s xs[s] * exp(sg * 2*pi*i * s*t / r), t < r: a
    decimation-in-time split on the smallest prime factor."""
    r = len(xs)
    if r == 1:
        return list(xs)
    p = next(q for q in range(2, r + 1) if r % q == 0)
    if p == r:
        return [code.let(" + ".join(_rotate(xs[s], s * t, r) for s in range(r))) for t in range(r)]
    m = r // p
    subs = [_dft(code, xs[q::p]) for q in range(p)]
    out = [None] * r
    for k in range(m):
        turned = [subs[q][k] if (q * k) % r == 0 else code.let(_rotate(subs[q][k], q * k, r)) for q in range(p)]
        for t, name in enumerate(_dft(code, turned)):
            out[k + m * t] = name
    return out


def _powers_of_w(code: _Code, k: str, step: int, radix: int) -> dict:
    """{power of two p < radix: the name of w^p}, w the n-th root of index
    ``k * step``: w and w^4 computed by ``twiddle()``, w^2 and w^8 their
    squares. Two roots a butterfly, not log2(radix): when they were table
    reads, what the reads cost a 4,096-point row (0.90x to 0.94x of a
    copy's speed on an H100) outweighed the rounding of one squaring
    (relative RMS error 1.4e-7 to 1.6e-7 at 4,096 points)."""
    out = {}
    for p in (1 << b for b in range(radix.bit_length() - 1)):
        if p in (1, 4):
            out[p] = code.let(f"twiddle({k} * {p * step}u)")
        else:
            out[p] = code.let(f"cmul({out[p // 2]}, {out[p // 2]})")
    return out


def _twiddles(code: _Code, reads: dict, radix: int) -> list:
    """Names of w^s for s < radix (index 0 unused): the powers of two from
    :func:`_powers_of_w`, the others each the product of the one without
    its lowest bit and that bit's power (a product is cheaper than a root)."""
    turns = [None] * radix
    for s in range(1, radix):
        low = s & -s
        turns[s] = reads[s] if low == s else code.let(f"cmul({turns[s - low]}, {turns[low]})")
    return turns


# -- GLSL ----------------------------------------------------------------------------

_LOAD, _HERMITIAN = row_loads("p", "N", "q")


def _stage(code: _Code, regs: list, radix: int, ls: int, threads: int, where, last: bool, split: bool,
           reads: list) -> list:
    """One Stockham stage on the invocation's registers; returns the names
    holding positions ``j + T*e`` of the next stage's input. ``reads``:
    each butterfly's (index k, powers of w) from :func:`_stage_reads`, or
    None for the first stage (no twiddles)."""
    per = len(regs)
    group = per // radix                       # butterflies an invocation does
    out, writes = [None] * per, []
    for q in range(group):
        ins = [regs[q + s * group] for s in range(radix)]
        if reads is not None:
            k, powers = reads[q]
            code.lines.append(f"base{q} = (j + {q * threads}u - {k}) * {radix}u + {k};")
            turns = _twiddles(code, powers, radix)
            ins = [ins[0]] + [code.let(f"cmul({ins[s]}, {turns[s]})") for s in range(1, radix)]
        else:
            code.lines.append(f"base{q} = (j + {q * threads}u) * {radix}u;")
        outs = _dft(code, ins)
        for t in range(radix):
            if last:
                out[q + t * group] = outs[t]
            else:
                writes.append((where(f"base{q} + {t * ls}u"), outs[t]))
    if last:
        return out
    reads = [where(f"j + {e * threads}u") for e in range(per)]
    if not split:
        code.lines += [f"sh[{at}] = {name};" for at, name in writes] + ["barrier();"]
        fresh = [code.let(f"sh[{at}]") for at in reads]
        code.lines.append("barrier();")
        return fresh
    # Real parts, then imaginary parts: half the shared memory, twice the barriers.
    parts = []
    for part in "xy":
        code.lines += [f"sh[{at}] = {name}.{part};" for at, name in writes] + ["barrier();"]
        parts.append([f"sh[{at}]" for at in reads])
        names = [f"f{code.count}_{e}" for e in range(per)]
        code.count += 1
        code.lines += [f"float {nm} = {expr};" for nm, expr in zip(names, parts[-1])] + ["barrier();"]
        parts[-1] = names
    return [code.let(f"vec2({x}, {y})") for x, y in zip(*parts)]


def _stage_reads(code: _Code, radix: int, ls: int, n: int, threads: int, group: int) -> list:
    """For each butterfly ``q`` of a stage after the first: (the name of its
    index k within the stage, its twiddles' powers of w). Emitted before
    the first stage, so that they are computed while the row itself is
    read: they depend on the invocation's index only, and a compiler does
    not move work across the stages' barriers."""
    out = []
    for q in range(group):
        k = f"k{code.count}"
        code.count += 1
        code.lines.append(f"uint {k} = (j + {q * threads}u) % {ls}u;")
        out.append((k, _powers_of_w(code, k, n // (radix * ls), radix)))
    return out


def _stages(code: _Code, regs: list, radices: list, n: int, threads: int, where, split: bool) -> list:
    per, ls, plans = len(regs), 1, []
    for radix in radices:
        plans.append(None if ls == 1 else _stage_reads(code, radix, ls, n, threads, per // radix))
        ls *= radix
    ls = 1
    for i, radix in enumerate(radices):
        regs = _stage(code, regs, radix, ls, threads, where, i == len(radices) - 1, split, plans[i])
        ls *= radix
    return regs


# exp(sg * 2*pi*i * i / N) for i < N, computed rather than read from a table
# (the reads had cost a 512-point row pass 0.2 us of its 4.4 on an H100)
# and without the driver's sin / cos, whose error Vulkan bounds only by
# 2^-11. The angle is reduced exactly, in integers, to a quarter turn q plus
# at most an eighth theta; on [0, pi/4] the Taylor polynomials of degree 9
# (sin) and 10 (cos) are within 2e-9 of their functions, below float32's
# rounding, so the error is that of the float32 arithmetic: a few units in
# the last place.
_TWIDDLE = """vec2 twiddle(uint i) {
  uint q = 4u * i / N, r = 4u * i - q * N;
  bool low = 2u * r <= N;
  float t = float(low ? r : N - r) * (1.5707963267948966 / float(N)), z = t * t;
  float s = t * (1.0 + z * (-1.0 / 6.0 + z * (1.0 / 120.0 + z * (-1.0 / 5040.0 + z * (1.0 / 362880.0)))));
  float c = 1.0 + z * (-0.5 + z * (1.0 / 24.0 + z * (-1.0 / 720.0 + z * (1.0 / 40320.0 + z * (-1.0 / 3628800.0)))));
  vec2 w = low ? vec2(c, s) : vec2(s, c);
  w = (q & 1u) == 1u ? vec2(-w.y, w.x) : w;
  w = q >= 2u ? -w : w;
  return vec2(w.x, sg * w.y);
}"""

# The row's batch index; without divisions where the batch is one axis
# (batch axes are merged wherever the views allow: ops/fft.py).
_BATCH_INDEX = """uint i2 = row, i1 = 0u, i0 = 0u;
  if (pc.b2 < pc.rows) { i2 = row % pc.b2; uint rest = row / pc.b2; i1 = rest % pc.b1; i0 = rest / pc.b1; }"""
_DENSE = {"complex": "src[ib + int(p){step}]", "real": "vec2(src[ib + int(p){step}], 0.0)",
          "half": "vec2(float(src[ib + int(p){step}]), 0.0)", "hermitian": "hermitian_dense(p, ib)"}
_HERMITIAN_DENSE = """vec2 hermitian_dense(uint p, int ib) {
  bool low = p <= N / 2u;
  vec2 v = src[ib + int(low ? p : N - p)];
  return low ? v : vec2(v.x, -v.y);
}"""


def _dense_source(load: str, strided: bool) -> str:
    """GLSL of ``load_dense()``: ``load()`` for a whole row, one element a
    step or, where ``strided``, any step ("" for an image's pixels, which
    have no such path)."""
    if is_image_layout(load):
        return ""
    helper = _HERMITIAN_DENSE + "\n" if load == "hermitian" else ""
    step = " * pc.in_step" if strided else ""
    return helper + f"vec2 load_dense(uint p, int ib) {{ return {_DENSE[load].format(step=step)}; }}"


def _read_rows(code: _Code, halves: str, per: int, threads: int, n: int, load: str) -> list:
    """Names of the values the invocation's first stage starts from, read
    from its row. Rows of buffers are read twice over in the GLSL, under a
    branch on ``dense`` that is uniform across a dispatch: where the row is
    whole and consecutive in memory, without bounds checks and with
    addresses a constant apart; else through ``load()``. (With the
    division-free batch index, on an H100: batched 4,096-point rows 0.87x
    -> 0.90x of a copy's speed, irfft2 of 32 x 1,024^2 295 -> 250 us.)"""
    def emit(c, load_fn):
        if halves == "r2c":
            return fft_halves.r2c_loads(c, per, threads, load_fn)
        if halves == "c2r":
            return fft_halves.c2r_loads(c, per, threads, n, load_fn)
        return [c.let(f"live ? {load_fn}(j + {e * threads}u, ib) : vec2(0.0)") for e in range(per)]
    if is_image_layout(load):
        return emit(code, "load")
    general, dense = _Code(), _Code()
    general.count = dense.count = code.count
    regs = emit(general, "load")
    emit(dense, "load_dense")     # the same statements and names
    code.count = general.count
    names = [line.split()[1] for line in general.lines if line.startswith("vec2 ")]
    assign = lambda line: line.removeprefix("vec2 ")      # noqa: E731
    code.lines.append("vec2 " + ", ".join(names) + ";")
    code.lines.append("if (dense) {")
    code.lines += [assign(line) for line in dense.lines]
    code.lines.append("} else {")
    code.lines += [assign(line) for line in general.lines]
    code.lines.append("}")
    return regs


def shape(spec: KernelSpec) -> tuple:
    """(points transformed, elements an invocation holds, rows a
    workgroup transforms, stage radices) of a fixed kernel's spec: half
    its length for real rows (ops/fft_halves.py)."""
    return _shape(spec.param("n"), spec.param("columns"), spec.param("halves"), spec.param("form", ""))


def _shape(n: int, columns: bool, halves, form: str = "") -> tuple:
    points = n // 2 if halves else n
    return (points,) + layout(points, columns, form)


@family("fft_fixed")
def _render(spec: KernelSpec) -> str:
    n, load, store = spec.param("n"), spec.param("load"), spec.param("store")
    columns, halves = spec.param("columns"), spec.param("halves")
    points, per, rows, radices = shape(spec)
    form = spec.param("form", "")
    narrow = form == "narrow"
    threads, shift = points // per, pad_shift(points, rows, form)
    words, split = shared_elements(points, rows, form), split_exchange(points, rows, form)
    # Whole rows at any step take the bounds-free paths in the narrow layout (see _row_stores);
    # a Hermitian row is mirrored, so it keeps the consecutive test.
    strided = narrow and load != "hermitian"
    where = lambda p: slot(p, shift, columns)          # noqa: E731
    code = _Code()
    regs = _read_rows(code, halves, per, threads, n, load)
    code.lines.append("uint " + ", ".join(f"base{q} = 0u" for q in range(per)) + ";")
    if len(radices) == 1 and load == "hermitian":
        code.lines.append("barrier();")      # a row read across invocations before any writes it in place
    # The twiddles' steps count in n-th roots (twiddle()'s N), also for a half-length transform.
    regs = _stages(code, regs, radices, n, threads, where, split)
    if spec.param("convolve"):
        # The row's spectrum times the kernel's, then the inverse transform.
        regs = [code.let(f"live ? cmul({r}, spectrum[kb + int(j + {e * threads}u) * pc.k_step]) : vec2(0.0)")
                for e, r in enumerate(regs)]
        code.lines.append("sg = -sg;")
        regs = _stages(code, regs, radices, n, threads, where, split)
    if halves == "r2c":
        stores = fft_halves.r2c_stores(fft_halves.r2c_spectrum(code, regs, threads, where, split, n),
                                       regs[0], threads, n)
    elif halves == "c2r":
        stores = fft_halves.c2r_stores(regs, threads, STORED[store])
    else:
        stores = _row_stores(regs, threads, STORED[store], narrow)
    body = "\n  ".join(code.lines)
    return f"""const uint N = {n}u, T = {threads}u, R = {rows}u, NP = {words // rows}u;
shared {"float" if split else "vec2"} sh[{words}];
{CMUL}
float sg;
{_TWIDDLE}
{_HERMITIAN if load == "hermitian" else texel_source(load)}
vec2 load(uint p, int ib) {{ return {load_glsl(_LOAD, load)}; }}
{_dense_source(load, strided)}
void main() {{
  sg = pc.sign;
  uint tid = gl_LocalInvocationID.x;
  uint c = {"tid % R" if columns else "tid / T"}, j = {"tid / R" if columns else "tid % T"};
  uint row = {WG_INDEX} * R + c;
  bool live = row < pc.rows;
  {_BATCH_INDEX}
  bool dense = {"" if strided else "pc.in_step == 1 && "}pc.len_in >= {n // 2 + 1 if load == "hermitian" else n}u;
  int ib = int(pc.in_off) + int(i0) * pc.is0 + int(i1) * pc.is1 + int(i2) * pc.is2;
  int ob = int(pc.out_off) + int(i0) * pc.os0 + int(i1) * pc.os1 + int(i2) * pc.os2;
  {"int kb = int(pc.k_off) + int(i0) * pc.ks0 + int(i1) * pc.ks1 + int(i2) * pc.ks2;" if spec.param("convolve") else ""}
  {body}
  if (live) {{
    {stores}
  }}
}}"""


def _row_stores(regs: list, threads: int, stored, strided: bool) -> str:
    """GLSL storing a row's transformed values (``stored``: the GLSL of a
    value as the output holds it, STORED), twice over under a branch that
    is uniform across a dispatch, as the reads are (_read_rows): where the
    output row is whole and consecutive in memory (or, if ``strided``,
    whole at any step), without bounds tests and with addresses a constant
    apart; else element by element through the pushed length and step.
    ``strided`` is for the narrow layout, whose columns are never
    consecutive: one 512 x 512 transform's columns took 4.90 us that way on
    an H100, 5.02 through the bounds tests; with every layout taking it,
    32 transforms of 1,024^2 took 446 us against 443."""
    step = " * pc.out_step" if strided else ""
    dense = "\n      ".join(f"dst[ob + int(j + {e * threads}u){step}] = {stored(f'({r} * pc.scale)')};"
                            for e, r in enumerate(regs))
    general = "\n      ".join(
        f"{{ uint p = j + {e * threads}u; if (p < pc.out_len) {{ vec2 v = {r} * pc.scale; "
        f"dst[ob + int(p) * pc.out_step] = {stored('v')}; }} }}" for e, r in enumerate(regs))
    whole = "pc.out_len >= N" if strided else "pc.out_step == 1 && pc.out_len >= N"
    return (f"if ({whole}) {{\n      {dense}\n    }} else {{\n"
            f"      {general}\n    }}")


_PUSH = tuple(Push(name, "uint") for name in ("len_in", "out_len", "in_off", "out_off", "rows", "b1", "b2")) + \
    tuple(Push(name, "int") for name in ("in_step", "out_step", "is0", "is1", "is2", "os0", "os1", "os2")) + \
    (Push("sign", "float"), Push("scale", "float"))
_CONVOLVE_PUSH = (Push("k_off", "uint"),) + tuple(Push(name, "int") for name in ("k_step", "ks0", "ks1", "ks2"))


def fixed_spec(n: int, load: str, store: str, columns: bool, convolve: bool = False,
               form: str = "") -> KernelSpec:
    """The length-``n`` kernel reading ``load`` rows and writing ``store``
    ones (fft_kernels.LOADS / STORES; or an image's pixels read through a
    pixel layout, "tex" / "img:<fmt>", ops/fft_images.py), laid out for
    rows along memory or for ``columns`` (neighbouring rows neighbours in
    memory); ``convolve``: forward transform, product with the
    ``spectrum`` binding's row, inverse transform (complex rows);
    ``form``: a layout of :func:`pass_form`."""
    bindings = row_bindings(load, store)
    push = row_push(_PUSH, load)
    if convolve:
        bindings += (Binding("spectrum", "vec2", READ),)
        push += _CONVOLVE_PUSH
    params = (("n", n), ("load", load), ("store", store), ("columns", columns), ("convolve", convolve))
    halves = fft_halves.halves(n, load, store, columns, convolve)
    if halves:
        params += (("halves", halves),)
    if form:
        params += (("form", form),)
    points, per, rows, _ = _shape(n, columns, halves, form)
    return KernelSpec("fft_fixed", bindings, push, params, (rows * (points // per), 1, 1), **row_storage(load, store))


@variants("fft_fixed")
def _variants():
    for n in LENGTHS:
        for load, store in KINDS:
            for columns in (False, True):
                yield fixed_spec(n, load, store, columns)
        for columns in (False, True):
            yield fixed_spec(n, "complex", "complex", columns, convolve=True)
    for n in NARROW_LENGTHS:
        for load, store in KINDS:
            yield fixed_spec(n, load, store, True, form="narrow")
    for n in ALIGNED_LENGTHS:
        yield fixed_spec(n, "complex", "complex", True, form="aligned")
    for n in WIDE_LENGTHS:
        yield fixed_spec(n, "complex", "complex", False, form="wide")
