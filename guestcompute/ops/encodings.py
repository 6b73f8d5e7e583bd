"""``rec.frequency_encoding``: the positional (frequency) encoding that
neural-graphics networks (NeRF and its kin) put in front of an MLP.

Layout (NeRF's): for ``x`` of shape (..., d) and n frequencies the output is
(..., d * (include_input + 2 n)), made of blocks of d values along the last
axis: ``x`` itself (when ``include_input``), then for k = 0 .. n-1 the block
``sin(2**k pi x)`` followed by the block ``cos(2**k pi x)``. In numpy::

    def frequency_encoding(x, n, include_input=True):
        x = x.astype(np.float64)
        blocks = [x] if include_input else []
        for k in range(n):
            blocks += [np.sin(2.0**k * np.pi * x), np.cos(2.0**k * np.pi * x)]
        return np.concatenate(blocks, axis=-1)

Accuracy: the argument is reduced exactly in half-turns (``2**k x`` is
exact, its remainder modulo 2 too), so the result is that of the exact
value ``2**k x`` however large k or x is; only the product of the reduced
argument (|r| <= 1/4) with pi rounds. The sine and cosine on [-pi/4, pi/4]
are the library's own polynomials (ops/trig_glsl.py). float32 results are
within 3 ulp of ``sin(pi * (2**k x mod 2))`` computed in float64 and
rounded to float32 (zeros of the exact result are exact); float16 results
within one float16 ulp. Inputs of 2**24 and above are even integers: sine
±0, cosine 1. NaN and ±inf give NaN (their block of ``x`` keeps them).
Subnormal inputs are the device's business (ops/math.py's notes).

Kernel: a workgroup owns a tile of whole output rows (a row wider than the
tile: a chunk of its coordinates, in every block). Each (row, k,
coordinate) is reduced once and both polynomials run, sine and cosine
picked by selects, into shared memory in the output's order; then the tile
is written with consecutive invocations on consecutive elements; where
the output is contiguous and the tile holds whole rows, as one run with no
index arithmetic per element (on an H100, 1920 x 1080 points with 10
frequencies: 378 us before that, 285 after, a copy of the output 176).
One invocation per output element had reduced every argument twice, and a
warp whose quadrants differed ran both polynomials one after the other.
"""
from __future__ import annotations

import operator

import numpy as np

from ..dtypes import float16, float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch, OpResult, check_out, check_tensor, coalesce, op
from .elementwise import storage_extensions, storage_features
from .trig_glsl import TRIG_POLYS

WORKGROUP = 128
TILE = 2048                   # floats of shared memory a workgroup fills (8 KB; Vulkan guarantees 16)
assert TILE % (2 * WORKGROUP) == 0        # the kernel's sine items per invocation: TILE / (2 WORKGROUP)
MAX_FREQUENCIES = 64          # 2**63 is a float32; every larger k gives the same as k = 24
MAX_INVOCATIONS = 1 << 31     # indices and element offsets are GLSL ints


def batch_layout(x, out, width: int, what: str) -> tuple:
    """``x`` (..., d) and ``out`` (..., width) as rows: (rows, x row
    stride, out row stride). The batch dims of both must merge into one
    strided dim (any contiguous layout, a slice of the last axis, ...)."""
    batch = x.shape[:-1]
    shape, (xs, os) = coalesce(batch, [list(x.strides[:-1]), list(out.strides[:-1])])
    if len(shape) > 1:
        raise ShapeError(f"{what}: the batch dims of the input or of out do not merge into one strided dim; "
                         "pass rec.contiguous(x) (and a contiguous out)")
    rows = 1
    for n in batch:
        rows *= n
    if rows * max(width, x.shape[-1]) >= MAX_INVOCATIONS:
        raise UnsupportedError(f"{what}: {rows} rows of {width} outputs are past the 2**31 elements one "
                               "dispatch indexes; encode the batch in slices")
    return rows, xs[0], os[0]


def check_points(ctx, x, what: str, dtypes=(float32, float16)):
    """``x`` checked: a tensor of this context with a last axis (the point's coordinates)."""
    x = check_tensor(ctx, x, f"{what} x")
    if x.dtype not in dtypes:
        raise DTypeError(f"{what} x must be {' or '.join(map(str, dtypes))}, got {x.dtype}")
    if x.ndim < 1:
        raise ShapeError(f"{what} x must have a last axis of coordinates, shape (..., d); got a 0-d tensor")
    return x


def _count(value, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be an int in {lo}..{hi}, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{what} must be an int in {lo}..{hi}, got {value!r}") from None
    if not lo <= n <= hi:
        raise InvalidArgumentError(f"{what} must be an int in {lo}..{hi}, got {n}")
    return n


_SIN_COS_PI = """\
vec2 sin_cos_pi(float x, uint k) {
  // (sin, cos) of pi 2**k x from one reduction. From 2**24 on every
  // float32 is an even integer (so is 2**k x); below, 2**k x is exact and
  // so are a - n / 2 (|r| <= 1/4) and the quadrant n: only r pi rounds.
  // Both polynomials run and selects pick (no branch for a warp to split on).
  uint bits = floatBitsToUint(x), mag = bits & 0x7fffffffu;
  float a = mag >= 0x4b800000u ? 0.0 : uintBitsToFloat(mag) * uintBitsToFloat((k + 127u) << 23u);
  if (a >= 16777216.0) a = 0.0;
  float n = roundEven(a + a);
  float r = a - 0.5 * n;
  uint q = uint(n);
  float y = r * 3.14159265358979324;
  float sp = gc_sin_poly(y), cp = gc_cos_poly(y);
  bool odd = (q & 1u) != 0u;
  float s = odd ? cp : sp, c = odd ? sp : cp;
  // sine: quadrant q, odd in x; cosine: quadrant q + 1
  s = (((q & 2u) != 0u) != ((bits >> 31u) != 0u)) ? -s : s;
  c = (((q + 1u) & 2u) != 0u) ? -c : c;
  if (mag >= 0x7f800000u) { s = uintBitsToFloat(0x7fc00000u); c = s; }   // inf and NaN
  return vec2(s, c);
}

// A tile item t as digits (row, middle, column) of radices (-, m, l), and
// an item's digits advanced by a whole workgroup's (the host's pc.*_step):
// divisions only to start, none per item.
uvec3 digits(uint t, uint m, uint l) {
  uint q = t / l, row = q / m;
  return uvec3(row, q - row * m, t - q * l);
}

uvec3 advance(uvec3 at, uvec3 by, uint m, uint l) {
  at += by;
  if (at.z >= l) { at.z -= l; at.y += 1u; }
  if (at.y >= m) { at.y -= m; at.x += 1u; }
  return at;
}
"""


@family("frequency_encoding")
def _render_frequency(spec: KernelSpec) -> str:
    # A tile: pc.tile_rows rows, pc.cols of their d coordinates (all d
    # unless a row is too wide), laid out in shared memory as in the output
    # row: (row, block, coordinate). The module notes say why tiles.
    out_t = as_glsl(spec.param("output"))
    return f"""{TRIG_POLYS}{_SIN_COS_PI}
shared float tile[{spec.param("tile")}];
const uint ITEMS = {spec.param("tile") // (2 * WORKGROUP)}u, NONE = 0xffffffffu;

float load_x(uint row, uint c) {{
  return float(src[pc.x_off + int(row) * pc.x_row + int(c) * pc.x_col]);
}}

void main() {{
  uint g = {WG_INDEX};
  if (g >= pc.tiles) return;              // a folded grid's spare workgroups, all of them
  uint band = g / pc.chunks, c0 = (g - band * pc.chunks) * pc.cols, r0 = band * pc.tile_rows;
  uint rows = min(pc.tile_rows, pc.rows - r0), cols = pc.cols;
  uint blocks = pc.inc + 2u * pc.n, lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  // The last chunk of a row can reach past d: its items past d are skipped.
  uvec3 at = digits(lid, 1u, cols);
  for (uint t = lid; t < rows * pc.inc * cols; t += wg) {{
    if (c0 + at.z < pc.d) tile[at.x * blocks * cols + at.z] = load_x(r0 + at.x, c0 + at.z);
    at = advance(at, pc.copy_step.xyz, 1u, cols);
  }}
  // An invocation's (row, k, coordinate) items: at most ITEMS (each fills
  // two of the tile's floats). All their loads are issued before the first
  // is used, so that the invocation waits for memory once, not once an item.
  uint nk = max(pc.n, 1u), items = rows * pc.n * cols;
  at = digits(lid, nk, cols);
  float xs[ITEMS];
  uint slot[ITEMS], freq[ITEMS];
  [[unroll]] for (uint j = 0u; j < ITEMS; ++j) {{
    uint t = lid + j * wg;
    bool live = t < items && c0 + at.z < pc.d;
    xs[j] = live ? load_x(r0 + at.x, c0 + at.z) : 0.0;
    slot[j] = live ? (at.x * blocks + pc.inc + 2u * at.y) * cols + at.z : NONE;
    freq[j] = at.y;
    at = advance(at, pc.sin_step.xyz, nk, cols);
  }}
  [[unroll]] for (uint j = 0u; j < ITEMS; ++j) {{
    if (slot[j] == NONE) continue;
    vec2 sc = sin_cos_pi(xs[j], freq[j]);
    tile[slot[j]] = sc.x;
    tile[slot[j] + cols] = sc.y;
  }}
  memoryBarrierShared();
  barrier();
  if (cols == pc.d && pc.o_col == 1 && pc.o_row == int(blocks * pc.d)) {{
    // Whole rows of a contiguous output: the tile is one consecutive run.
    int base = pc.o_off + int(r0) * pc.o_row;
    for (uint t = lid; t < rows * blocks * cols; t += wg) dst[base + int(t)] = {out_t}(tile[t]);
    return;
  }}
  at = digits(lid, blocks, cols);
  for (uint t = lid; t < rows * blocks * cols; t += wg) {{
    uint c = c0 + at.z;
    if (c < pc.d) dst[pc.o_off + int(r0 + at.x) * pc.o_row + int(at.y * pc.d + c) * pc.o_col] = {out_t}(tile[t]);
    at = advance(at, pc.out_step.xyz, blocks, cols);
  }}
}}"""


def as_glsl(name: str) -> str:
    return {"float32": "float", "float16": "float16_t"}[name]


def frequency_spec(src, dst) -> KernelSpec:
    push = (Push("rows", "uint"), Push("d", "uint"), Push("n", "uint"), Push("inc", "uint"),
            Push("tile_rows", "uint"), Push("cols", "uint"), Push("chunks", "uint"), Push("tiles", "uint"),
            Push("x_off", "int"), Push("x_row", "int"), Push("x_col", "int"),
            Push("o_off", "int"), Push("o_row", "int"), Push("o_col", "int"),
            Push("copy_step", "uvec4"), Push("sin_step", "uvec4"), Push("out_step", "uvec4"))
    return KernelSpec("frequency_encoding",
                      bindings=(Binding("src", src.glsl, READ), Binding("dst", dst.glsl, WRITE)), push=push,
                      params=(("input", src.name), ("output", dst.name), ("tile", TILE)),
                      workgroup=(WORKGROUP, 1, 1),
                      glsl_extensions=storage_extensions((src, dst)) + ("GL_EXT_control_flow_attributes",),
                      features=storage_features((src, dst)))


def tile_shape(rows: int, d: int, blocks: int) -> tuple:
    """(rows, coordinates) of a tile of TILE values: as many whole rows as
    fit, or where one row of ``blocks`` blocks of d does not, one row's
    coordinates in chunks (blocks <= 2 MAX_FREQUENCIES + 1 < TILE)."""
    if blocks * d <= TILE:
        return max(1, min(rows, TILE // (blocks * d))), d
    return 1, TILE // blocks


def _step(m: int, cols: int) -> tuple:
    """WORKGROUP items as the kernel's digits (row, middle, column), a uvec4."""
    q, c = divmod(WORKGROUP, cols)
    r, k = divmod(q, m)
    return (r, k, c, 0)


@op("frequency_encoding", windows=None)
def frequency_encoding(ctx, x, n_frequencies, include_input=True, out=None):
    """NeRF's positional encoding of ``x`` (float32 or float16, shape
    (..., d)): (..., d * (include_input + 2 n_frequencies)) values, the
    blocks ``x``, then ``sin(2**k pi x)``, ``cos(2**k pi x)`` for k = 0 ..
    n_frequencies - 1 (0 .. 64), each block the d coordinates (module notes
    of ops/encodings.py: layout, numpy reference, accuracy). ``out``:
    float32 or float16 (default: x's dtype), not overlapping ``x``."""
    x = check_points(ctx, x, "frequency_encoding")
    n = _count(n_frequencies, "frequency_encoding n_frequencies", 0, MAX_FREQUENCIES)
    if not isinstance(include_input, (bool, int, np.bool_)) or include_input not in (0, 1):
        raise InvalidArgumentError(f"frequency_encoding include_input must be True or False, got {include_input!r}")
    inc = int(bool(include_input))
    d = x.shape[-1]
    width = d * (inc + 2 * n)
    shape = x.shape[:-1] + (width,)
    if out is not None:
        out = check_out(ctx, out, shape, (float32, float16), {"x": x}, "frequency_encoding out", in_place=False)
    else:
        out = ctx.empty(shape, x.dtype)
    rows, x_row, o_row = batch_layout(x, out, width, "frequency_encoding")
    if rows * width == 0:
        return OpResult(out, [])
    spec = frequency_spec(x.dtype, out.dtype)
    blocks = inc + 2 * n
    tile_rows, cols = tile_shape(rows, d, blocks)
    chunks = -(-d // cols)
    tiles = -(-rows // tile_rows) * chunks
    values = {"rows": rows, "d": d, "n": n, "inc": inc, "tile_rows": tile_rows, "cols": cols, "chunks": chunks,
              "tiles": tiles, "x_off": x.offset, "x_row": x_row, "x_col": x.strides[-1], "o_off": out.offset,
              "o_row": o_row, "o_col": out.strides[-1], "copy_step": _step(1, cols),
              "sin_step": _step(max(n, 1), cols), "out_step": _step(blocks, cols)}
    return OpResult(out, [Dispatch(spec, (x.buffer, out.buffer), spec.pack(values),
                                   groups_for(tiles * WORKGROUP, WORKGROUP, ctx.limits.max_workgroup_count))])


@variants("frequency_encoding")
def _frequency_variants():
    for src in (float32, float16):
        for dst in (float32, float16):
            yield frequency_spec(src, dst)
