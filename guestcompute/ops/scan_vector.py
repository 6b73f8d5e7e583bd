"""Prefix sums of contiguous rows at memory speed: reduce, then scan.

1. ``scan_vector_sums``: each workgroup adds up one tile of ``TILE``
   elements of one row (16-byte loads) into a ``(rows, tiles)`` scratch
   tensor;
2. ``scan_vector_offsets``: one workgroup a row scans the row's tile sums
   exclusively, a tile of them at a time (the register scan of step 3,
   carrying each tile's total): one small dispatch, where a multi-level
   scan of them took three (on an H200, 17 µs of a 126 µs scan of 2^25);
3. ``scan_vector_tiles``: each workgroup scans its tile in registers and
   adds the tile's offset.

That reads the input twice and writes it once (3n words, against the 2n
of a single-pass chained scan), but no workgroup ever waits for another:
measured on an H200, the tile pass alone ran at the speed of a copy, while
a chained scan of the same tiles waiting on its predecessors' published
sums ran at a quarter to a third of it. Nothing here needs ``forward_progress``.

Tile layout: each subgroup owns ``4 * V * subgroup size`` consecutive
elements, in ``V`` chunks of one 16-byte vector per lane, so every load
and store of a subgroup is one contiguous run. A chunk is scanned by
``subgroupExclusiveAdd`` of the lanes' vector totals. Where a device runs
the workgroup in subgroups that are not all full, the whole workgroup is
one segment and each chunk is scanned through shared memory instead
(slower, same answers).

Used for rows that are contiguous in both operands and start on 16-byte
boundaries, on devices with subgroup arithmetic; others take ops/scan.py's
or ops/scan_chained.py's scans. Float sums are tree-shaped like theirs.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch
from .scan_tiles import (ROW_RANK, SUBGROUP_EXTENSIONS, VEC4, Operand, blelloch, operand_push,
                         row_base, use_subgroups)

DTYPES = ("float32", "int32", "uint32")
WG = 256                  # threads per workgroup
V = 4                     # 16-byte vectors per thread
TILE = WG * V * 4         # elements per workgroup and per tile sum


def _load(T: str) -> str:
    """GLSL ``load4``: four elements from element ``k`` of a row at base
    ``b`` (a multiple of 4), through the vec4 view where all four lie
    before ``n``, one by one at the row's end (zeros past it)."""
    T4 = VEC4[T]
    return f"""{T4} load4(int b, uint k, uint n) {{
  if (k + 4u <= n) return src4[(uint(b) + k) >> 2];
  {T4} v = {T4}(0);
  for (uint c = 0u; c < 4u; ++c) if (k + c < n) v[c] = src[b + int(k + c)];
  return v;
}}"""


def _store(T: str) -> str:
    """GLSL ``store4``: the counterpart of :func:`_load`, writing only
    elements before ``n``."""
    return f"""void store4(int b, uint k, uint n, {VEC4[T]} v) {{
  if (k + 4u <= n) dst4[(uint(b) + k) >> 2] = v;
  else for (uint c = 0u; c < 4u; ++c) if (k + c < n) dst[b + int(k + c)] = v[c];
}}"""


def _tile_head() -> str:
    return f"""  uint wg = {WG_INDEX};
  if (wg >= pc.rows * pc.nblocks) return;
  uint row = wg / pc.nblocks, block = wg % pc.nblocks;
  uint t = gl_LocalInvocationID.x, n = pc.n;
  bool full = gl_NumSubgroups * gl_SubgroupSize == {WG}u;"""


@family("scan_vector_sums")
def _render_sums(spec: KernelSpec) -> str:
    T = as_dtype(spec.param("dtype")).glsl
    return f"""shared {T} s_part[{WG}];
{_load(T)}
void main() {{
{_tile_head()}
{row_base(("src",))}
  {T} acc = {T}(0);
  for (uint j = 0u; j < {V}u; ++j) {{
    {VEC4[T]} v = load4(srcb, block * {TILE}u + 4u * (j * {WG}u + t), n);
    acc += (v.x + v.y) + (v.z + v.w);
  }}
  if (full) {{
    {T} s = subgroupAdd(acc);
    if (gl_SubgroupInvocationID == 0u) s_part[gl_SubgroupID] = s;
  }} else {{
    s_part[t] = acc;
  }}
  barrier();
  if (t == 0u) {{
    {T} s = {T}(0);
    for (uint i = 0u; i < (full ? gl_NumSubgroups : {WG}u); ++i) s += s_part[i];
    sums[row * pc.tile_rs + block] = s;
  }}
}}"""


def segments(tile: str) -> str:
    """GLSL: where this thread's chunks lie in tile ``tile``: a segment is a
    subgroup's consecutive run of ``V`` chunks (the whole workgroup where
    subgroups are not full); chunk ``j`` of the thread is the 16-byte
    vector at element ``first + 4 * (j * seg + lane)``."""
    return f"""  // A segment: a subgroup's consecutive run of chunks (the whole workgroup
  // where subgroups are not full).
  uint seg = full ? gl_SubgroupSize : {WG}u, sid = full ? gl_SubgroupID : 0u;
  uint lane = full ? gl_SubgroupInvocationID : t;
  uint first = {tile} * {TILE}u + sid * {4 * V}u * seg;"""


def chunk_scan(T: str) -> str:
    """GLSL: ``ex`` (the exclusive sum of ``w`` over the segment's lanes
    before this one) and ``tot`` (the segment's sum): subgroup arithmetic
    where subgroups are full, else :func:`workgroup_segment_scan`."""
    return f"""    {T} ex, tot;
    if (full) {{
      ex = subgroupExclusiveAdd(w);
      tot = subgroupAdd(w);
    }} else {{
{workgroup_segment_scan(T, "w")}
    }}"""


def workgroup_segment_scan(T: str, w: str) -> str:
    """GLSL statements: ``ex`` and ``tot`` of ``w`` where the whole
    workgroup is one segment (subgroups not full), through ``s_seg`` and
    ``s_tot`` (``full`` is alike in every thread, so every thread reaches
    the barriers)."""
    return f"""      s_seg[t] = {w};{blelloch("s_seg", WG, T)}
      ex = s_seg[t];
      if (t == {WG - 1}u) s_tot = ex + {w};
      barrier();
      tot = s_tot;
      barrier();"""


def segment_sums(T: str, reuse: bool) -> str:
    """GLSL: ``before``, the sum of ``run`` (each segment's sum) over the
    tile's segments before this thread's, and ``total``, over all of them.
    ``reuse``: ``s_seg`` may still be read by :func:`chunk_scan`'s
    shared-memory path or an earlier tile, so wait first."""
    wait = "    barrier();\n" if reuse else ""
    return f"""  {T} before = {T}(0), total = run;
  if (full) {{
{wait}    if (gl_SubgroupInvocationID == 0u) s_seg[gl_SubgroupID] = run;
    barrier();
    total = {T}(0);
    for (uint s = 0u; s < gl_NumSubgroups; ++s) {{
      if (s == gl_SubgroupID) before = total;
      total += s_seg[s];
    }}
  }}"""


def _scan_chunks(T: str, exclusive: bool) -> str:
    """GLSL: ``out4[j]``, chunk ``j`` of the thread scanned within its
    segment (see :func:`segments`; loads through ``load4`` from ``srcb``),
    and ``run``, the segment's sum."""
    T4 = VEC4[T]
    keep = f"{T4}(0, i.x, i.y, i.z)" if exclusive else "i"
    return f"""  {T4} out4[{V}];
  {T} run = {T}(0);                   // the segment's sum before chunk j
  for (uint j = 0u; j < {V}u; ++j) {{
    {T4} x = load4(srcb, first + 4u * (j * seg + lane), n);
    {T4} i = {T4}(x.x, x.x + x.y, x.x + x.y + x.z, x.x + x.y + x.z + x.w);
    {T} w = i.w;
{chunk_scan(T)}
    out4[j] = {keep} + (run + ex);
    run += tot;
  }}"""


def _vector_decls(T: str) -> str:
    return f"""shared {T} s_seg[{WG}];
shared {T} s_tot;
{_load(T)}
{_store(T)}"""


@family("scan_vector_tiles")
def _render_tiles(spec: KernelSpec) -> str:
    T = as_dtype(spec.param("dtype")).glsl
    offset = "offsets[row * pc.tile_rs + block]" if spec.param("offsets") else f"{T}(0)"
    return f"""{_vector_decls(T)}
void main() {{
{_tile_head()}
  {T} base = {offset};                // read first: its latency hides behind the tile's loads
{row_base(("src", "dst"))}
{segments("block")}
{_scan_chunks(T, spec.param("exclusive"))}
{segment_sums(T, False)}
  base += before;
  for (uint j = 0u; j < {V}u; ++j) store4(dstb, first + 4u * (j * seg + lane), n, out4[j] + base);
}}"""


@family("scan_vector_offsets")
def _render_offsets(spec: KernelSpec) -> str:
    """One workgroup a row: the exclusive scan of the row's tile sums, a
    tile of them at a time, carrying each tile's total to the next."""
    T = as_dtype(spec.param("dtype")).glsl
    return f"""{_vector_decls(T)}
void main() {{
  uint row = {WG_INDEX};
  if (row >= pc.rows) return;
  uint t = gl_LocalInvocationID.x, n = pc.n;
  bool full = gl_NumSubgroups * gl_SubgroupSize == {WG}u;
  int srcb = int(pc.src_off + row * pc.stride), dstb = int(pc.dst_off + row * pc.stride);
  {T} carry = {T}(0);
  for (uint block = 0u; block * {TILE}u < n; ++block) {{
{segments("block")}
{_scan_chunks(T, True)}
{segment_sums(T, True)}
    for (uint j = 0u; j < {V}u; ++j) store4(dstb, first + 4u * (j * seg + lane), n, out4[j] + (carry + before));
    carry += total;
  }}
}}"""


# tile_rs: the row stride of the (rows, tiles) tile sums and offsets,
# rounded up to four elements so that every row starts on 16 bytes.
_PUSH = (Push("n", "uint"), Push("nblocks", "uint"), Push("rows", "uint"), Push("row_shape", "uint", ROW_RANK),
         Push("tile_rs", "uint"))
_OFFSETS_PUSH = (Push("n", "uint"), Push("rows", "uint"), Push("src_off", "uint"), Push("dst_off", "uint"),
                 Push("stride", "uint"))


def _vec_bindings(T: str, names) -> tuple:
    access = {"src": READ, "dst": WRITE}
    return (tuple(Binding(name, T, access[name]) for name in names)
            + tuple(Binding(f"{name}4", VEC4[T], access[name]) for name in names))


def sums_spec(dtype: str) -> KernelSpec:
    T = as_dtype(dtype).glsl
    return KernelSpec("scan_vector_sums", _vec_bindings(T, ("src",)) + (Binding("sums", T, WRITE),),
                      _PUSH + operand_push("src"), (("dtype", dtype),), (WG, 1, 1),
                      SUBGROUP_EXTENSIONS, ("subgroup",))


def offsets_spec(dtype: str) -> KernelSpec:
    T = as_dtype(dtype).glsl
    return KernelSpec("scan_vector_offsets", _vec_bindings(T, ("src", "dst")), _OFFSETS_PUSH, (("dtype", dtype),),
                      (WG, 1, 1), SUBGROUP_EXTENSIONS, ("subgroup",))


def tiles_spec(dtype: str, exclusive: bool, offsets: bool) -> KernelSpec:
    """``offsets``: add each tile's exclusive offset from a scanned tile-sum
    tensor (rows longer than one tile)."""
    T = as_dtype(dtype).glsl
    bindings = _vec_bindings(T, ("src", "dst")) + ((Binding("offsets", T, READ),) if offsets else ())
    return KernelSpec("scan_vector_tiles", bindings, _PUSH + operand_push("src") + operand_push("dst"),
                      (("dtype", dtype), ("exclusive", exclusive), ("offsets", offsets)), (WG, 1, 1),
                      SUBGROUP_EXTENSIONS, ("subgroup",))


def tile_sums(ctx, rows: int, nblocks: int, dtype: str):
    """Scratch for ``rows`` rows of ``nblocks`` tile sums: (tensor, row
    stride), rows starting on 16 bytes."""
    stride = -(-nblocks // 4) * 4
    return ctx.empty((rows, stride), dtype), stride


def plan_offsets(ctx, sums, offsets, rows: int, nblocks: int, stride: int, dtype: str) -> list:
    """One dispatch: each row's exclusive scan of its ``nblocks`` tile sums
    (tensors from :func:`tile_sums`), one workgroup a row."""
    spec = offsets_spec(dtype)
    values = {"n": nblocks, "rows": rows, "src_off": sums.offset, "dst_off": offsets.offset, "stride": stride}
    return [Dispatch(spec, (sums.buffer, offsets.buffer) * 2, spec.pack(values),
                     groups_for(rows * WG, WG, ctx.limits.max_workgroup_count))]


def use_vector_scan(ctx, src: Operand, dst: Operand) -> bool:
    """Rows contiguous in both operands and starting on 16-byte boundaries
    (every offset and row stride a multiple of four elements; bindings
    start at aligned offsets), subgroup arithmetic, a 256-wide workgroup
    and the five bindings of the tile pass."""
    lim = ctx.limits
    return (use_subgroups(ctx) and src.step == 1 and dst.step == 1 and lim.max_storage_buffers >= 5
            and lim.max_workgroup_invocations >= WG and lim.max_workgroup_size[0] >= WG
            and all(v % 4 == 0 for v in (src.off, dst.off) + src.rs + dst.rs))


def plan_vector_scan(ctx, src: Operand, dst: Operand, rows: int, n: int, row_shape: tuple, dtype: str,
                     exclusive: bool, count=None) -> list:
    """Dispatches scanning ``rows`` contiguous rows of ``n`` elements (see
    :func:`use_vector_scan`; ``count`` must be None)."""
    assert count is None, "GPU-side counts take the other scans"
    nblocks = -(-n // TILE)
    tiles = rows * nblocks
    groups = groups_for(tiles * WG, WG, ctx.limits.max_workgroup_count)
    sums, stride = tile_sums(ctx, rows, nblocks, dtype) if nblocks > 1 else (None, 0)
    common = {"n": n, "nblocks": nblocks, "rows": rows, "row_shape": row_shape, "tile_rs": stride}
    scan = tiles_spec(dtype, exclusive, nblocks > 1)
    io = (src.tensor.buffer, dst.tensor.buffer, src.tensor.buffer, dst.tensor.buffer)
    values = scan.pack(dict(common, **src.push("src"), **dst.push("dst")))
    if nblocks == 1:
        return [Dispatch(scan, io, values, groups)]
    offsets = ctx.empty(sums.shape, dtype)
    reduce = sums_spec(dtype)
    out = [Dispatch(reduce, (src.tensor.buffer, src.tensor.buffer, sums.buffer),
                    reduce.pack(dict(common, **src.push("src"))), groups)]
    out += plan_offsets(ctx, sums, offsets, rows, nblocks, stride, dtype)
    return out + [Dispatch(scan, io + (offsets.buffer,), values, groups)]


@variants("scan_vector_sums")
def _sums_variants():
    for dtype in DTYPES:
        yield sums_spec(dtype)


@variants("scan_vector_offsets")
def _offsets_variants():
    for dtype in DTYPES:
        yield offsets_spec(dtype)


@variants("scan_vector_tiles")
def _tiles_variants():
    for dtype in DTYPES:
        for exclusive in (False, True):
            for offsets in (False, True):
                yield tiles_spec(dtype, exclusive, offsets)
