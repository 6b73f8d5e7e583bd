"""Stream compaction without waiting: count, scan, scatter (the compaction
counterpart of ops/scan_vector.py).

1. ``compact_vector_count``: the true elements of each tile of ``TILE``
   mask elements are counted into ``sums[tile]`` with 16-byte loads (a
   workgroup counts four tiles of a uint8 mask);
2. ops/scan_vector.py's one-workgroup scan of the tile counts: where each
   tile's kept elements start;
3. ``compact_vector_scatter``: each subgroup takes its part of a tile in
   rounds of one element per lane, ranks each round's kept elements by a
   ballot and writes them at the tile's start plus their rank: a round's
   kept elements are one contiguous run, so every store instruction is
   coalesced without staging (on an H200, 2^25 elements, half kept: 76 µs;
   the 16-byte vector layout of ops/scan_vector.py with each chunk's kept
   elements staged through shared memory took 82 µs in the same run,
   writing each from its own thread longer still); the last tile writes
   the total.

The mask is read twice (a byte per element for uint8 masks, read four at
a time), the values and the result once, and no workgroup waits for
another: unlike ops/compact.py's single pass, nothing here needs
``forward_progress``. Only kept values are loaded, so sparse masks
(culling) read little of ``x``.

Used where ``x`` (compact) has 4-byte elements or is absent (nonzero),
both operands are contiguous and start on 16-byte boundaries (a uint8
mask's buffer also covering the mask rounded up to four bytes), and the
device has subgroup arithmetic and ballots; other cases take
ops/compact.py's kernels.
"""
from __future__ import annotations

from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch
from .scan_chained import counted_length
from .scan_tiles import SUBGROUP_EXTENSIONS, use_subgroups
from .scan_vector import TILE, V, WG, plan_offsets, segment_sums, segments, tile_sums, workgroup_segment_scan

MASKS = ("uint8", "word", "float32")      # ops/compact.py's kinds
ROUNDS = 4 * V                            # elements a scatter thread takes, one per round
assert 16 * WG == TILE, "a count-pass thread reads one 16-byte vector of a uint8 mask tile"
# Bits of a 4-byte mask element that make it true (float32: -0.0 is false).
_TRUE_BITS = {"word": "0xFFFFFFFFu", "float32": "0x7FFFFFFFu"}


def _flags(mask: str) -> str:
    """GLSL ``flags4(k, n)``: bit c set where element ``k + c`` (``k`` a
    multiple of 4) is before ``n`` and its mask element is true; for uint8
    masks also ``count16(k, n)``, the true elements of ``k .. k + 15``
    (``k`` a multiple of 16) through one 16-byte load."""
    if mask == "uint8":
        # Four mask bytes in one word: bit 0 of each byte becomes whether
        # any of its bits is set.
        read = """  uint w = truth(mask[(pc.mask_off + k) >> 2]);
  uint f = (w & 1u) | ((w >> 7) & 2u) | ((w >> 14) & 4u) | ((w >> 21) & 8u);"""
        return f"""{_truth()}
{_flags_of(read)}
uint count16(uint k, uint n) {{
  if (k + 16u > n) return bitCount(flags4(k, n)) + bitCount(flags4(k + 4u, n)) + bitCount(flags4(k + 8u, n))
                          + bitCount(flags4(k + 12u, n));
  uvec4 w = mask4[(pc.mask_off + k) >> 4];
  return bitCount(truth(w.x)) + bitCount(truth(w.y)) + bitCount(truth(w.z)) + bitCount(truth(w.w));
}}"""
    else:
        bits = _TRUE_BITS[mask]
        read = f"""  uvec4 m;
  if (k + 4u <= n) m = mask4[(pc.mask_off + k) >> 2];
  else for (uint c = 0u; c < 4u; ++c) m[c] = k + c < n ? mask[pc.mask_off + k + c] : 0u;
  m &= {bits};
  uint f = uint(m.x != 0u) | (uint(m.y != 0u) << 1) | (uint(m.z != 0u) << 2) | (uint(m.w != 0u) << 3);"""
    return _flags_of(read)


def _truth() -> str:
    """GLSL ``truth(w)``: bit 0 of each byte of ``w`` set where that byte
    (a uint8 mask element) is nonzero, the other bits clear."""
    return """uint truth(uint w) {
  w |= w >> 4; w |= w >> 2; w |= w >> 1;
  return w & 0x01010101u;
}"""


def _flags_of(read: str) -> str:
    return f"""uint flags4(uint k, uint n) {{
  if (k >= n) return 0u;
{read}
  return k + 4u <= n ? f : f & ((1u << (n - k)) - 1u);
}}"""


def _head(spec: KernelSpec, tiles: str) -> str:
    """GLSL: the workgroup ``wg`` (the grid covers the capacity: tiles past
    the count keep nothing; ``tiles``: how many tiles it has), ``t``, ``n``
    and ``full``."""
    return f"""  uint wg = {WG_INDEX};
  if (wg >= {tiles}) return;
  uint t = gl_LocalInvocationID.x, n = {counted_length(spec)};
  bool full = gl_NumSubgroups * gl_SubgroupSize == {WG}u;"""


def tiles_per_count(mask: str) -> int:
    """Tiles one workgroup of the count pass counts: four 4 KiB tiles of a
    uint8 mask, so that each workgroup reads 16 KiB like the others."""
    return 4 if mask == "uint8" else 1


def _count_tile(mask: str) -> str:
    """GLSL: ``acc[g]``, this thread's share of tile ``tile``'s count: 16
    mask bytes at once for uint8 masks, four 16-byte vectors otherwise."""
    if mask == "uint8":
        return f"    acc[g] = count16(tile * {TILE}u + 16u * t, n);"
    return f"""    acc[g] = 0u;
    for (uint j = 0u; j < {V}u; ++j) acc[g] += bitCount(flags4(tile * {TILE}u + 4u * (j * {WG}u + t), n));"""


@family("compact_vector_count")
def _render_count(spec: KernelSpec) -> str:
    per = tiles_per_count(spec.param("mask"))
    return f"""shared uint s_part[{per}][{WG}];
{_flags(spec.param("mask"))}
void main() {{
{_head(spec, f"(pc.nblocks + {per - 1}u) / {per}u")}
  uint acc[{per}];
  for (uint g = 0u; g < {per}u; ++g) {{
    uint tile = wg * {per}u + g;
{_count_tile(spec.param("mask"))}
  }}
  for (uint g = 0u; g < {per}u; ++g) {{
    if (full) {{
      uint s = subgroupAdd(acc[g]);
      if (gl_SubgroupInvocationID == 0u) s_part[g][gl_SubgroupID] = s;
    }} else {{
      s_part[g][t] = acc[g];
    }}
  }}
  barrier();
  uint tile = wg * {per}u + t;
  if (t < {per}u && tile < pc.nblocks) {{
    uint s = 0u;
    for (uint i = 0u; i < (full ? gl_NumSubgroups : {WG}u); ++i) s += s_part[t][i];
    sums[tile] = s;
  }}
}}"""


def _keep_at(mask: str) -> str:
    """GLSL ``keep_at(k, n)``: element ``k`` is before ``n`` and its mask
    element is true."""
    if mask == "uint8":
        test = "((truth(mask[(pc.mask_off + k) >> 2]) >> (8u * (k & 3u))) & 1u) != 0u"
    else:
        test = f"(mask[pc.mask_off + k] & {_TRUE_BITS[mask]}) != 0u"
    return f"""bool keep_at(uint k, uint n) {{
  return k < n && {test};
}}"""


def _round_rank() -> str:
    """GLSL: ``ex``, the kept elements of the round in lanes before this
    one, and ``tot``, in the whole round: a ballot where subgroups are
    full, else a scan of the workgroup through shared memory."""
    return f"""    uint ex, tot;
    if (full) {{
      uvec4 b = subgroupBallot(keep);
      ex = subgroupBallotExclusiveBitCount(b);
      tot = subgroupBallotBitCount(b);
    }} else {{
{workgroup_segment_scan("uint", "uint(keep)")}
    }}"""


def _unrolled(var: str, count: int, body: str) -> str:
    """GLSL: ``body`` once for each value of ``var`` below ``count``, each
    in its own block with ``var`` a constant, so that arrays indexed by it
    stay in registers (a loop the compiler keeps rolled would index them
    at run time, from memory)."""
    return "\n".join(f"  {{ const uint {var} = {i}u;\n{body}\n  }}" for i in range(count))


@family("compact_vector_scatter")
def _render_scatter(spec: KernelSpec) -> str:
    """A segment's elements are taken in rounds of one per lane (element
    ``first + r * seg + lane`` in round ``r``), so each round's kept
    elements are a contiguous run of the output, written by one store
    instruction of the subgroup."""
    mask = spec.param("mask")
    value = "src[pc.src_off + k]" if spec.param("values") else "k"
    rank = f"""    uint k = first + r * seg + lane;
    bool keep = keep_at(k, n);
    vals[r] = keep ? {value} : 0u;
{_round_rank()}
    pos[r] = run + ex;
    run += tot;
    flags |= uint(keep) << r;"""
    write = """    if ((flags & (1u << r)) != 0u) dst[int(pc.dst_off) + int(base + pos[r]) * pc.dst_step] = vals[r];"""
    return f"""shared uint s_seg[{WG}];
shared uint s_tot;
{_truth() if mask == "uint8" else ""}
{_keep_at(mask)}
void main() {{
{_head(spec, "pc.nblocks")}
  uint tile_base = offsets[wg];       // read first: its latency hides behind the tile's loads
{segments("wg")}
  uint vals[{ROUNDS}], pos[{ROUNDS}];
  uint flags = 0u, run = 0u;          // run: kept in the segment before round r
{_unrolled("r", ROUNDS, rank)}
{segment_sums("uint", True)}
  uint base = tile_base + before;
{_unrolled("r", ROUNDS, write)}
  uint last = max(n / {TILE}u + uint(n % {TILE}u != 0u), 1u) - 1u;
  if (wg == last && t == 0u) total_out[pc.total_off] = tile_base + total;
}}"""


_PUSH = (Push("n", "uint"), Push("nblocks", "uint"), Push("mask_off", "uint"), Push("src_off", "uint"),
         Push("dst_off", "uint"), Push("dst_step", "int"), Push("total_off", "uint"), Push("count_off", "uint"))


def _mask_bindings(mask: str) -> tuple:
    """A 4-byte (four uint8 mask elements) and a 16-byte view of the mask."""
    return Binding("mask", "uint", READ), Binding("mask4", "uvec4", READ)


def _count_binding(count: str) -> tuple:
    return (Binding("cnt", "uint" if count == "uint32" else "int", READ),) if count else ()


def count_spec(mask: str, count: str = None) -> KernelSpec:
    """``mask``: ops/compact.py's kind of the mask; ``count``: None or the
    dtype of a GPU-side count."""
    bindings = _mask_bindings(mask) + (Binding("sums", "uint", WRITE),) + _count_binding(count)
    return KernelSpec("compact_vector_count", bindings, _PUSH, (("mask", mask), ("count", count or "")),
                      (WG, 1, 1), SUBGROUP_EXTENSIONS, ("subgroup",))


def scatter_spec(mask: str, values: bool, count: str = None) -> KernelSpec:
    """``values``: compact 4-byte values (else write indices: nonzero)."""
    src = (Binding("src", "uint", READ),) if values else ()
    out = (Binding("dst", "uint", WRITE), Binding("offsets", "uint", READ), Binding("total_out", "uint", WRITE))
    bindings = (Binding("mask", "uint", READ),) + src + out + _count_binding(count)
    return KernelSpec("compact_vector_scatter", bindings, _PUSH,
                      (("mask", mask), ("values", values), ("count", count or "")), (WG, 1, 1),
                      SUBGROUP_EXTENSIONS + ("GL_KHR_shader_subgroup_ballot",), ("subgroup",))


def use_vector_compact(ctx, mask, x, mask_kind: str, count) -> bool:
    """``mask`` and ``x`` (None for nonzero) flat and contiguous; see the
    module docstring for the rest."""
    lim = ctx.limits
    if mask_kind not in MASKS or (x is not None and x.dtype.size != 4):
        return False
    if mask_kind == "uint8":
        # Mask words are read whole: the buffer must hold the last one.
        aligned = mask.offset % 16 == 0 and mask.buffer.size >= -(-(mask.offset + mask.size) // 4) * 4
    else:
        aligned = mask.offset % 4 == 0
    bindings = len(scatter_spec(mask_kind, x is not None, count.dtype.name if count is not None else None).bindings)
    return (use_subgroups(ctx) and lim.subgroup_ballot and aligned and (x is None or x.offset % 4 == 0)
            and bindings <= lim.max_storage_buffers
            and lim.max_workgroup_invocations >= WG and lim.max_workgroup_size[0] >= WG)


def plan_vector_compact(ctx, mask, x, dst, total, count, mask_kind: str) -> list:
    """Dispatches compacting the flat ``mask`` (and ``x``, or indices) into
    ``dst`` with the number kept written to ``total`` (see
    :func:`use_vector_compact`)."""
    n = mask.size
    nblocks = -(-n // TILE)
    groups = groups_for(nblocks * WG, WG, ctx.limits.max_workgroup_count)
    cdt = count.dtype.name if count is not None else None
    counted = (count.buffer,) if count is not None else ()
    values = {"n": n, "nblocks": nblocks, "mask_off": mask.offset, "src_off": x.offset if x is not None else 0,
              "dst_off": dst.offset, "dst_step": dst.strides[0], "total_off": total.offset,
              "count_off": count.offset if count is not None else 0}
    masks = (mask.buffer, mask.buffer)
    sums, stride = tile_sums(ctx, 1, nblocks, "uint32")
    offsets = ctx.empty(sums.shape, "uint32")
    counter = count_spec(mask_kind, cdt)
    per = tiles_per_count(mask_kind)
    out = [Dispatch(counter, masks + (sums.buffer,) + counted, counter.pack(values),
                    groups_for(-(-nblocks // per) * WG, WG, ctx.limits.max_workgroup_count))]
    out += plan_offsets(ctx, sums, offsets, 1, nblocks, stride, "uint32")
    scatter = scatter_spec(mask_kind, x is not None, cdt)
    src = (x.buffer,) if x is not None else ()
    return out + [Dispatch(scatter, (mask.buffer,) + src + (dst.buffer, offsets.buffer, total.buffer) + counted,
                           scatter.pack(values), groups)]


@variants("compact_vector_count")
def _count_variants():
    for mask in MASKS:
        for count in (None, "uint32", "int32"):
            yield count_spec(mask, count)


@variants("compact_vector_scatter")
def _scatter_variants():
    for mask in MASKS:
        for values in (False, True):
            for count in (None, "uint32", "int32"):
                yield scatter_spec(mask, values, count)
