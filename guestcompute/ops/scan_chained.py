"""Single-pass prefix sums: a chained scan with decoupled look-back.

One dispatch reads every element once and writes it once. Each workgroup
takes a *ticket* from an atomic counter (tickets, not ``gl_WorkGroupID``,
give tiles in the order workgroups started), scans its tile in shared
memory like ``scan_block`` (ops/scan.py), publishes the tile's total as an
*aggregate*, then walks back over its predecessors' published values:
aggregates are added and the walk goes on; the first *inclusive prefix*
(a predecessor's total including everything before it) ends it. The tile
then publishes its own inclusive prefix and writes its elements with the
offset added. Tile 0 of a row publishes its inclusive prefix at once.

Publishing a 32-bit value with its status atomically, without 64-bit
atomics: the value is split into two 16-bit halves stored in two words,
each carrying the status (1 aggregate, 2 inclusive) in its high 16 bits.
Every word only ever goes 0 -> 1 -> 2, each step written whole, so a
reader that sees the same non-zero status in both words holds both halves
of one publication; otherwise it reads again. No other data flows between
workgroups, so no ordering between the two words is needed.

The walk looks at ``LOOKBACK`` predecessors per round (one thread each,
shared-memory minimums find the nearest inclusive prefix and the nearest
tile not yet published). Waiting relies on ``limits.forward_progress``: a
started workgroup keeps running, and tickets make every awaited tile one
that started earlier. Where a driver stops long loops
(``limits.loop_iteration_cap``), a workgroup that has waited
``spin_budget`` rounds in all reduces the awaited tile's input itself and
walks on ("fallback"; so does every later wait of that walk), so it never
reaches the cap; that reads the input, so in place it is off and such
drivers take the multi-pass scan instead.

The ticket counter and the status words live in a scratch tensor the plan
zeroes first (``chained_setup``, which also sizes the grid of a GPU-side
count; the recorder puts the barrier between them). Rows that are
contiguous and start on 16-byte boundaries move through vec4 views of the
same buffers.

The pieces (``take_ticket``, ``publication``, ``look_back``,
``plan_setup``) also serve compaction (ops/compact.py) and the segmented
scan (ops/segmented.py).
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch, overlaps
from .scan_tiles import ROW_RANK, SUBGROUP_EXTENSIONS, VEC4, row_base, tile_scan, tile_store, use_subgroups

DTYPES = ("float32", "int32", "uint32")

WG = 256                  # threads per workgroup (devices with forward progress allow 1024)
ITEMS = 8                 # elements per thread
TILE = WG * ITEMS
LOOKBACK = 32             # predecessors examined per look-back round

_BITS = {"float": ("floatBitsToUint(v)", "uintBitsToFloat(b)"), "int": ("uint(v)", "int(b)"),
         "uint": ("v", "b")}


def publication(T: str) -> str:
    """GLSL functions ``publish`` and ``peek`` over the ``state`` binding."""
    to_bits, from_bits = _BITS[T]
    return f"""
void publish(uint tile, uint status, {T} v) {{
  uint b = {to_bits};
  state[1u + 2u * tile] = (status << 16) | (b & 0xFFFFu);
  state[2u + 2u * tile] = (status << 16) | (b >> 16);
}}
// Status of tile p's publication (0: none yet, or halves of two different
// publications) and its value.
uint peek(uint p, out {T} v) {{
  uint lo = state[1u + 2u * p], hi = state[2u + 2u * p];
  uint b = (lo & 0xFFFFu) | (hi << 16);
  v = {from_bits};
  return (lo >> 16) == (hi >> 16) ? lo >> 16 : 0u;
}}"""


def look_back(T: str, wg: int, first: str, tile_sum: str) -> str:
    """GLSL: the walk from ``tile - 1`` down to tile ``first`` (the row's
    first tile); leaves the tile's exclusive offset in ``s_carry``.
    ``tile_sum``: statements setting this thread's part ``sum`` of the total
    of tile ``fblock`` (counted from ``first``) from the input, for the
    fallback; they may set ``ends`` (alike in every thread) where that total
    is an inclusive prefix (a segmented scan's tile holding a segment
    start). Workgroup-uniform control flow (it has barriers)."""
    return f"""
  {T} carry = {T}(0);
  int p0 = int(tile) - 1, first = int({first});
  uint idle = 0u;
  while (true) {{
    if (t == 0u) {{ s_stop = {LOOKBACK}u; s_wait = {LOOKBACK}u; }}
    barrier();
    if (t < {LOOKBACK}u) {{
      int p = p0 - int(t);
      {T} v = {T}(0);
      uint s = p < first ? 2u : peek(uint(p), v);   // before the row: an inclusive zero
      s_win[t] = s == 0u ? {T}(0) : v;
      if (s == 2u) atomicMin(s_stop, t);
      if (s == 0u) atomicMin(s_wait, t);
    }}
    barrier();
    uint stop = s_stop, wait = s_wait;
    uint take = stop < wait ? stop + 1u : wait;
    if (t == 0u) for (uint i = 0u; i < take; ++i) carry += s_win[i];
    if (stop < wait) break;
    p0 -= int(take);
    // Idle rounds count over the whole walk, so the walk's loop iterations
    // stay bounded (a driver's loop cap) however many tiles are late.
    idle += take == 0u ? 1u : 0u;
    if (pc.spin_budget != 0u && idle > pc.spin_budget && take == 0u) {{
      // Fallback: reduce the awaited tile from the input.
      uint fblock = uint(p0 - first);
      {T} sum = {T}(0);
      bool ends = false;
{tile_sum}
      part[t] = sum;
      for (uint d = {wg // 2}u; d > 0u; d >>= 1) {{
        barrier();
        if (t < d) part[t] += part[t + d];
      }}
      barrier();
      if (t == 0u) carry += part[0];
      p0 -= 1;
      if (ends) break;
    }}
    barrier();
  }}
  if (t == 0u) s_carry = carry;"""


def chained_shared(T: str) -> str:
    """GLSL: the shared variables of :func:`look_back` and the ticket."""
    return f"""shared uint s_ticket, s_stop, s_wait;
shared {T} s_win[{LOOKBACK}];
shared {T} s_total, s_carry;"""


def take_ticket() -> str:
    """GLSL: ``tile``, this workgroup's ticket (the order workgroups started)."""
    return """  if (t == 0u) s_ticket = atomicAdd(state[0], 1u);
  barrier();
  uint tile = s_ticket;"""


def count_read(spec: KernelSpec) -> str:
    """GLSL expression: the count tensor's value (int32 below 0 reads 0)."""
    return "cnt[pc.count_off]" if spec.param("count") == "uint32" else "uint(max(cnt[pc.count_off], 0))"


def counted_length(spec: KernelSpec) -> str:
    """GLSL expression: ``pc.n``, bounded by the count tensor where the
    spec has one (param ``count``)."""
    return f"min(pc.n, {count_read(spec)})" if spec.param("count") else "pc.n"


def _tile_sum(wg: int, items: int) -> str:
    return f"""      for (uint j = 0u; j < {items}u; ++j) {{
        uint k = fblock * {items * wg}u + t + j * {wg}u;
        if (k < n) sum += src[srcb + int(k) * pc.src_step];
      }}"""


@family("scan_chained")
def _render_scan_chained(spec: KernelSpec) -> str:
    T = as_dtype(spec.param("dtype")).glsl
    wg, items = spec.workgroup[0], spec.param("items")
    vector = spec.param("vector")
    decls, body = tile_scan(T, wg, items, spec.param("exclusive"), spec.param("subgroup"), vector)
    if spec.param("counted"):
        sizes = f"uint n = min(pc.n, {count_read(spec)});\n  uint nblocks = (n + {items * wg - 1}u) / {items * wg}u;"
    else:
        sizes = "uint n = pc.n;\n  uint nblocks = pc.nblocks;"
    return f"""{decls}
{chained_shared(T)}
{publication(T)}
void main() {{
  uint t = gl_LocalInvocationID.x;
{take_ticket()}
  {sizes}
  if (tile >= pc.rows * nblocks) return;
  uint row = tile / nblocks, block = tile % nblocks;
{row_base(("src", "dst"))}
  uint start = block * {items * wg}u;
{body}
  if (q == {wg - 1}u) s_total = prefix + acc;
  barrier();
  if (block == 0u) {{
    if (t == 0u) {{ publish(tile, 2u, s_total); s_carry = {T}(0); }}
  }} else {{
    if (t == 0u) publish(tile, 1u, s_total);
{look_back(T, wg, "row * nblocks", _tile_sum(wg, items))}
    if (t == 0u) publish(tile, 2u, carry + s_total);
  }}
  barrier();
  {T} offset = s_carry;
{tile_store(wg, items, "offset", T if vector else "")}
}}"""


_PUSH = ((Push("n", "uint"), Push("nblocks", "uint"), Push("rows", "uint"), Push("row_shape", "uint", ROW_RANK))
         + tuple(p for name in ("src", "dst") for p in (Push(f"{name}_off", "uint"), Push(f"{name}_step", "int"),
                                                       Push(f"{name}_rs", "int", ROW_RANK)))
         + (Push("spin_budget", "uint"), Push("count_off", "uint")))


def chained_spec(dtype: str, exclusive: bool, subgroup: bool, count: str = None,
                 vector: bool = False) -> KernelSpec:
    """``count``: None, or the dtype of a 1-element count tensor bounding n;
    ``vector``: 16-byte loads and stores through vec4 views of ``src`` and
    ``dst`` (rows contiguous and starting on 16-byte boundaries)."""
    T = as_dtype(dtype).glsl
    bindings = (Binding("src", T, READ), Binding("dst", T, WRITE),
                Binding("state", "uint", READWRITE, qualifier="volatile"))
    if vector:
        T4 = VEC4[T]
        bindings += (Binding("src4", T4, READ), Binding("dst4", T4, WRITE))
    if count:
        bindings += (Binding("cnt", "uint" if count == "uint32" else "int", READ),)
    return KernelSpec("scan_chained", bindings, _PUSH,
                      (("dtype", dtype), ("exclusive", exclusive), ("subgroup", subgroup), ("items", ITEMS),
                       ("counted", bool(count)), ("count", count or ""), ("vector", vector)),
                      (WG, 1, 1), SUBGROUP_EXTENSIONS if subgroup else (), ("subgroup",) if subgroup else ())


@family("chained_setup")
def _render_setup(spec: KernelSpec) -> str:
    grid = ""
    if spec.param("count"):
        # At least one workgroup runs, so a kernel that reports a total
        # (compaction) writes it for a count of 0 too.
        grid = f"""
  if (i == 0u) {{
    uint c = {counted_length(spec)};
    uint g = max(c / pc.per_group + uint(c % pc.per_group != 0u), 1u);
    uint x = min(g, pc.max_x);
    grid[pc.grid_off] = x;
    grid[pc.grid_off + 1u] = g / x + uint(g % x != 0u);
    grid[pc.grid_off + 2u] = 1u;
  }}"""
    return f"""void main() {{
  uint i = {WG_INDEX} * {SETUP_WG}u + gl_LocalInvocationID.x;
  if (i < pc.words) state[i] = 0u;{grid}
}}"""


SETUP_WG = 64


def setup_spec(count: str = None) -> KernelSpec:
    """Zeroes the ticket and status words; with ``count`` (its dtype) also
    writes the workgroup counts of a grid of max(1, ceil(min(count, n) /
    per_group)) workgroups for an indirect dispatch."""
    bindings = (Binding("state", "uint", WRITE),)
    if count:
        bindings += (Binding("grid", "uint", WRITE), Binding("cnt", "uint" if count == "uint32" else "int", READ))
    return KernelSpec("chained_setup", bindings,
                      (Push("words", "uint"), Push("n", "uint"), Push("per_group", "uint"), Push("max_x", "uint"),
                       Push("grid_off", "uint"), Push("count_off", "uint")),
                      (("count", count or ""),), (SETUP_WG, 1, 1))


def plan_setup(ctx, tiles: int, n: int, per_group: int, count=None) -> tuple:
    """(state tensor, grid tensor or None, dispatches): the scratch of a
    chained kernel of ``tiles`` tiles, zeroed; with ``count``, the indirect
    grid of that kernel."""
    state = ctx.empty((1 + 2 * tiles,), "uint32")
    spec = setup_spec(count.dtype.name if count is not None else None)
    grid = ctx.empty((3,), "uint32") if count is not None else None
    values = {"words": 1 + 2 * tiles, "n": n, "per_group": per_group, "max_x": ctx.limits.max_workgroup_count[0],
              "grid_off": grid.offset if grid is not None else 0, "count_off": count.offset if count is not None else 0}
    buffers = (state.buffer,) + ((grid.buffer, count.buffer) if count is not None else ())
    groups = groups_for(1 + 2 * tiles, SETUP_WG, ctx.limits.max_workgroup_count)
    return state, grid, [Dispatch(spec, buffers, spec.pack(values), groups)]


def use_chained(ctx, in_place: bool) -> bool:
    """The single-pass scan runs where started workgroups keep running
    (a device fact) and the workgroup fits; in place only where no loop
    cap makes the fallback necessary (see the module docstring)."""
    lim = ctx.limits
    if not lim.forward_progress or lim.max_workgroup_invocations < WG or lim.max_workgroup_size[0] < WG:
        return False
    return not (in_place and lim.loop_iteration_cap)


def spin_budget(ctx, in_place: bool) -> int:
    """Idle look-back rounds of one walk before its fallback (0: wait for as
    long as it takes). A quarter of a driver's loop cap leaves room for the
    other loops; elsewhere a stalled predecessor is rare and reducing its
    tile is cheap."""
    if in_place:
        return 0
    cap = ctx.limits.loop_iteration_cap
    return cap // 4 if cap else 1 << 14


def _vectorizable(ctx, src, dst, count) -> bool:
    """Rows contiguous in both operands, every row starting on a multiple of
    four elements (16 bytes: bindings start at aligned offsets), and two
    more bindings allowed."""
    bindings = 5 + (count is not None)
    return (src.step == 1 and dst.step == 1 and bindings <= ctx.limits.max_storage_buffers
            and all(v % 4 == 0 for v in (src.off, dst.off) + src.rs + dst.rs))


def plan_chained(ctx, src, dst, rows: int, n: int, row_shape: tuple, dtype: str, exclusive: bool,
                 count=None) -> list:
    """Dispatches of the single-pass scan of ``rows`` rows of ``n`` elements
    (``src``/``dst``: scan.Operand); ``count`` (a 1-element tensor, rows == 1)
    bounds n on the GPU and sizes the grid with an indirect dispatch."""
    nblocks = -(-n // TILE)
    tiles = rows * nblocks
    state, grid, out = plan_setup(ctx, tiles, n, TILE, count)
    in_place = overlaps(src.tensor, dst.tensor)
    vector = _vectorizable(ctx, src, dst, count)
    spec = chained_spec(dtype, exclusive, use_subgroups(ctx), count.dtype.name if count is not None else None,
                        vector)
    values = {"n": n, "nblocks": nblocks, "rows": rows, "row_shape": row_shape,
              **src.push("src"), **dst.push("dst"), "spin_budget": spin_budget(ctx, in_place),
              "count_off": count.offset if count is not None else 0}
    buffers = (src.tensor.buffer, dst.tensor.buffer, state.buffer)
    if vector:
        buffers += (src.tensor.buffer, dst.tensor.buffer)
    if count is None:
        # One workgroup per tile; the grid is linear only through tickets.
        groups = groups_for(tiles * WG, WG, ctx.limits.max_workgroup_count)
        return out + [Dispatch(spec, buffers, spec.pack(values), groups)]
    return out + [Dispatch(spec, buffers + (count.buffer,), spec.pack(values), (1, 1, 1),
                           indirect=(grid.buffer, grid.offset * 4))]


@variants("scan_chained")
def _chained_variants():
    for dtype in DTYPES:
        for exclusive in (False, True):
            for subgroup in (False, True):
                for count in (None, "uint32", "int32"):
                    for vector in (False, True):
                        yield chained_spec(dtype, exclusive, subgroup, count, vector)


@variants("chained_setup")
def _setup_variants():
    for count in (None, "uint32", "int32"):
        yield setup_spec(count)
