"""Single-pass radix sort passes (Onesweep): 8-bit digits, one dispatch per
digit, each reading and writing the keys once.

Where :func:`usable` holds, a sort of 32-bit keys is five dispatches:

1. ``radix_clear``: zero the scratch ``state`` (global histograms, tile
   tickets, look-back tables) and store the element count ``n`` there (from
   the push constants, or copied from a GPU count tensor);
2. ``onesweep_hist``: one read of every key counts the digits of all four
   passes at once (shared-memory atomics, then one global atomic per digit
   and workgroup);
3. ``onesweep_pass`` once per digit: every workgroup takes the next tile
   ticket from an atomic counter, ranks its tile's keys stably (subgroup
   ballots find the lanes holding the same digit, a per-subgroup histogram
   orders the subgroups), publishes its per-digit counts, looks back over
   earlier tiles' published counts for its digits' prefixes (decoupled
   look-back), and writes every key straight to its place: the digit's
   start (the scanned global histogram) + the digit's count in earlier
   tiles + its rank in the tile. Keys are staged in digit order in shared
   memory first, so each digit's run is written contiguously; a payload
   is staged after them in the same place and follows them out. The stage
   reuses the region that held the per-subgroup counts while ranking.

Tickets, not ``gl_WorkGroupID``, order the tiles: a workgroup only ever
waits on tiles whose workgroups have already started. Devices whose started
workgroups keep running (``limits.forward_progress``) then always finish;
the kernel is chosen only there, by that device fact. A variant with
*fallback* (for lavapipe, whose loops stop after a fixed number of
iterations, and for tests) stops waiting after ``PATIENCE`` polls and
counts the digit in the late tile itself, which needs no progress guarantee
at all (Smith, Levien and Owens' decoupled fallback).

A look-back word holds a 2-bit status and a 30-bit count, so one 32-bit
store publishes both; counts stay below 2**30 (``MAX_N``).

Polling reads the words through a ``volatile`` buffer, and the value a poll
returns is used after the loop. That matters: with NVIDIA's driver
580.159.04 a bare spin whose result is unused (``while (w[0] != x) {}``)
did not wait at all (two workgroups bouncing a counter through one word
ended with the wrong count), while the same spin on atomic loads did. The
loops here are checked exact on that GPU; a new waiting loop should be too.
"""
from __future__ import annotations

from ..dtypes import uint32
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch
from .indirect import plan_groups
from .radix_keys import KEY_DTYPES, PAYLOADS, SORTABLE, key_mask, payload_io, plan_clear, radix_passes

BITS = 8
RADIX = 1 << BITS
SUBGROUPS = 8                  # subgroups per workgroup of a pass
SUBGROUP_SIZES = (8, 16, 32)   # the variants built in
# Keys per thread. Shared memory decides how many workgroups an SM holds,
# and a GPU may give compute shaders far less of it per SM than its
# hardware has (the H200's Vulkan driver measured ~48 KB: two workgroups
# of 20 KB, one of 28 KB). At 8 keys the tile and the histograms share
# 8 KB and four workgroups fit: pairs sorted 4-17 % faster than with 15
# keys (two workgroups) or 16 or 32 subgroups per workgroup, keys as fast.
ITEMS = {"none": 8, "values": 8, "iota": 8}
HIST_WG = 256
HIST_ITEMS = 16
MAX_N = 1 << 30
PATIENCE = 64                  # polls before the fallback variant counts a late tile itself
STATE_N = 4 * RADIX + 4        # the state word holding n; tickets sit just before it
BALLOT_EXTENSIONS = ("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_ballot",
                     "GL_KHR_shader_subgroup_shuffle", "GL_KHR_shader_subgroup_arithmetic")
AGGREGATE, INCLUSIVE = "0x40000000u", "0x80000000u"


def workgroup(sg: int) -> int:
    return SUBGROUPS * sg


def tile_size(sg: int, payload: str) -> int:
    return workgroup(sg) * ITEMS[payload]


def usable(ctx, n: int, payload: str) -> bool:
    """Whether the single-pass sort runs here: a device whose started
    workgroups keep running, subgroup ballots in a size it was built for,
    room for its shared memory and bindings, and fewer than 2**30 keys."""
    lim = ctx.limits
    sg = lim.subgroup_size
    bindings = 4 + (payload != "none") + (payload == "values")
    return (lim.forward_progress and lim.subgroup_ballot and sg in SUBGROUP_SIZES
            and ctx.caps.api_version >= (1, 1) and n < MAX_N
            and lim.max_storage_buffers >= bindings and lim.max_shared_memory >= _shared_bytes(sg, payload)
            and lim.max_workgroup_invocations >= workgroup(sg)
            and not (ctx.caps.feature("vulkanMemoryModel") and not ctx.caps.feature("vulkanMemoryModelDeviceScope")))


def _region_words(wg: int, items: int, subgroups: int) -> int:
    """Shared words holding the staged tile, then (or before) the
    per-subgroup digit counts."""
    return max(wg * items, subgroups * RADIX)


def _shared_bytes(sg: int, payload: str) -> int:
    return 4 * (_region_words(workgroup(sg), ITEMS[payload], SUBGROUPS) + 2 * RADIX + SUBGROUPS + 1)


def _digit_fn(key: str) -> str:
    return (f"{SORTABLE[key]}\n"
            f"uint digit(uint k) {{ return ((sortable(k) & pc.mask) >> pc.shift) & {RADIX - 1}u; }}")


@family("onesweep_hist")
def _render_hist(spec: KernelSpec) -> str:
    wg, items = spec.workgroup[0], spec.param("items")
    return f"""{SORTABLE[spec.param("key")]}
shared uint counts[{4 * RADIX}];
void main() {{
  uint t = gl_LocalInvocationID.x;
  for (uint i = t; i < {4 * RADIX}u; i += {wg}u) counts[i] = 0u;
  barrier();
  uint n = state[{STATE_N}u];
  uint start = {WG_INDEX} * {wg * items}u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint i = start + t + j * {wg}u;
    if (i < n) {{
      uint s = sortable(keys[int(pc.src_off) + int(i) * pc.src_step]) & pc.mask;
      for (uint p = 0u; p < pc.passes; ++p) atomicAdd(counts[p * {RADIX}u + ((s >> (p * {BITS}u)) & {RADIX - 1}u)], 1u);
    }}
  }}
  barrier();
  for (uint i = t; i < pc.passes * {RADIX}u; i += {wg}u) if (counts[i] != 0u) atomicAdd(state[i], counts[i]);
}}"""


def _scan_digits(values: str, out: str, dpt: int) -> str:
    """GLSL: exclusive scan over all RADIX digits of ``values[k]`` (thread t
    holds digits t*dpt + k), leaving each prefix in ``out[k]``. Subgroup
    scan of the thread sums, then the earlier subgroups' totals."""
    return f"""{{
    uint sum = 0u;
    for (uint k = 0u; k < {dpt}u; ++k) {{ {out}[k] = sum; sum += {values}[k]; }}
    uint before = subgroupExclusiveAdd(sum);
    if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) part[gl_SubgroupID] = before + sum;
    barrier();
    for (uint s = 0u; s < gl_SubgroupID; ++s) before += part[s];
    for (uint k = 0u; k < {dpt}u; ++k) {out}[k] += before;
    barrier();
  }}"""


def _look_back(fallback: bool, tile: int) -> str:
    """GLSL: the count of digit ``d`` in tiles before ``tile`` into ``prefix``,
    walking back over earlier tiles' published words (aggregates are added
    and passed, an inclusive count ends the walk, 0 means not yet published:
    poll again). The fallback variant counts a tile that is still silent
    after PATIENCE polls itself."""
    late = f"""
          if (++polls >= {PATIENCE}u) {{
            uint from = prev * {tile}u, to = min(from + {tile}u, n);
            for (uint i = from; i < to; ++i) prefix += uint(digit(keys_in[int(pc.src_off) + int(i) * pc.src_step]) == d);
            polls = 0u;
            if (prev == 0u) break;
            --prev;
          }}""" if fallback else ""
    return f"""
      uint prev = tile - 1u, polls = 0u;   // the nearest tile not yet added
      while (true) {{
        uint word = state[pc.look_off + prev * {RADIX}u + d];
        if (word == 0u) {{{late}
          continue;
        }}
        polls = 0u;
        prefix += word & 0x3fffffffu;
        if ((word & {INCLUSIVE}) != 0u) break;
        --prev;                            // tile 0 always publishes an inclusive count
      }}"""


def _load_keys(tile: int, items: int, src: str) -> str:
    """GLSL: the subgroup's run of keys into ``keys[j]``; a full tile loads
    without conditions, so all its loads are in flight at once."""
    return f"""  if (start + {tile}u <= n) {{
    for (uint j = 0u; j < {items}u; ++j) {{
      uint i = base + j * gl_SubgroupSize + lane;
      keys[j] = keys_in[{src}];
    }}
  }} else {{
    for (uint j = 0u; j < {items}u; ++j) {{
      uint i = base + j * gl_SubgroupSize + lane;
      keys[j] = i < n ? keys_in[{src}] : 0u;
    }}
  }}"""


def _rank(items: int, match: str) -> str:
    """GLSL: each key's rank among the equal digits of its subgroup's run,
    into ``slot[j]``, counting per subgroup in ``sg_hist``."""
    if match == "partition":
        peers = "uvec4 peers = subgroupPartitionNV(d) & subgroupBallot(valid);"
    else:
        peers = f"""uvec4 peers = subgroupBallot(valid);
    for (uint b = 0u; b < {BITS}u; ++b) {{
      bool bit = ((d >> b) & 1u) != 0u;
      uvec4 vote = subgroupBallot(bit);
      peers &= bit ? vote : ~vote;
    }}"""
    return f"""  // Rank: lanes holding the same digit (peers) found by one ballot per bit
  // (or the hardware's match where the device has it);
  // the lowest peer adds their number to the subgroup's count for the digit
  // and shuffles the count before them to its peers. The shuffle waits for
  // that add, so the next item's adds come after it: ranks follow input order.
  for (uint j = 0u; j < {items}u; ++j) {{
    bool valid = base + j * gl_SubgroupSize + lane < n;
    uint d = digit(keys[j]);
    {peers}
    uvec4 below4 = uvec4(bitCount(peers & gl_SubgroupLtMask));
    uint below = below4.x + below4.y + below4.z + below4.w;
    uint leader = !valid ? lane : peers.x != 0u ? findLSB(peers.x) : peers.y != 0u ? 32u + findLSB(peers.y)
                : peers.z != 0u ? 64u + findLSB(peers.z) : 96u + findLSB(peers.w);
    uint before = 0u;
    if (valid && below == 0u) {{
      uvec4 all4 = uvec4(bitCount(peers));
      before = atomicAdd(sg_hist[sgi * {RADIX}u + d], all4.x + all4.y + all4.z + all4.w);
    }}
    slot[j] = subgroupShuffle(before, leader) + below;
  }}"""


@family("onesweep_pass")
def _render_pass(spec: KernelSpec) -> str:
    sg, payload, items = spec.param("sg"), spec.param("payload"), spec.param("items")
    wg = spec.workgroup[0]
    subgroups, tile = wg // sg, wg * items
    dpt = RADIX // wg if wg < RADIX else 1
    src = "int(pc.src_off) + int(i) * pc.src_step"
    owned = f"for (uint k = 0u; k < {dpt}u; ++k) if (t * {dpt}u + k < {RADIX}u)"
    return f"""{_digit_fn(spec.param("key"))}
// One region serves as the per-subgroup digit counts while ranking and then
// as the staged tile: shared memory bounds how many workgroups an SM holds.
shared uint region[{_region_words(wg, items, subgroups)}];
#define sg_hist region                 // per subgroup and digit: count, then first rank
#define stage region                   // the tile in digit order (keys, then their payload)
shared uint dig_off[{RADIX}];          // first tile slot of each digit
shared uint dig_dest[{RADIX}];         // output index of a digit's tile slot 0
shared uint part[{subgroups}];
shared uint ticket;
void main() {{
  uint t = gl_LocalInvocationID.x, sgi = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  if (t == 0u) ticket = atomicAdd(state[pc.ticket], 1u);
  for (uint i = t; i < {subgroups * RADIX}u; i += {wg}u) sg_hist[i] = 0u;
  barrier();
  uint tile = ticket, n = state[{STATE_N}u];
  uint start = tile * {tile}u;
  if (start >= n) return;                      // a folded grid's spare workgroup
  uint m = min(n - start, {tile}u);
  uint base = start + sgi * {items}u * gl_SubgroupSize;   // each subgroup ranks one run of the tile
  uint keys[{items}], slot[{items}];
{_load_keys(tile, items, src)}
{_rank(items, spec.param("match"))}
  barrier();
  uint cnt[{dpt}], off[{dpt}], glob[{dpt}], total[{dpt}];
  {owned} {{
    uint d = t * {dpt}u + k, acc = 0u;
    for (uint s = 0u; s < {subgroups}u; ++s) {{ uint c = sg_hist[s * {RADIX}u + d]; sg_hist[s * {RADIX}u + d] = acc; acc += c; }}
    cnt[k] = acc;
    state[pc.look_off + tile * {RADIX}u + d] = (tile == 0u ? {INCLUSIVE} : {AGGREGATE}) | acc;
    total[k] = state[pc.hist_off + d];
  }}
  {_scan_digits("cnt", "off", dpt)}
  {_scan_digits("total", "glob", dpt)}
  {owned} dig_off[t * {dpt}u + k] = off[k];
  barrier();
  for (uint j = 0u; j < {items}u; ++j) {{
    uint d = digit(keys[j]);
    slot[j] += dig_off[d] + sg_hist[sgi * {RADIX}u + d];
  }}
  barrier();                                   // the counts are read: the region becomes the stage
  for (uint j = 0u; j < {items}u; ++j) if (base + j * gl_SubgroupSize + lane < n) stage[slot[j]] = keys[j];
  {owned} {{
    uint d = t * {dpt}u + k, prefix = 0u;
    if (tile > 0u) {{{_look_back(spec.param("fallback"), tile)}
      state[pc.look_off + tile * {RADIX}u + d] = {INCLUSIVE} | (prefix + cnt[k]);
    }}
    dig_dest[d] = glob[k] + prefix - off[k];
  }}
  barrier();
  uint dest[{items}];
  for (uint q = 0u; q < {items}u; ++q) {{
    uint s = t + q * {wg}u;
    if (s < m) {{
      uint key = stage[s];
      dest[q] = dig_dest[digit(key)] + s;
      keys_out[int(pc.dst_off) + int(dest[q]) * pc.dst_step] = key;
    }}
  }}{_move_payload(payload, items, wg)}
}}"""


def _move_payload(payload: str, items: int, wg: int) -> str:
    """GLSL: stage the payload where its keys were staged and write it to
    the same places (``slot`` and ``dest`` from the keys)."""
    if payload == "none":
        return ""
    value = "vals_in[int(pc.vsrc_off) + int(i) * pc.vsrc_step]" if payload == "values" else "i"
    return f"""
  barrier();                                   // the keys are read: stage their payload
  for (uint j = 0u; j < {items}u; ++j) {{
    uint i = base + j * gl_SubgroupSize + lane;
    if (i < n) stage[slot[j]] = {value};
  }}
  barrier();
  for (uint q = 0u; q < {items}u; ++q) {{
    uint s = t + q * {wg}u;
    if (s < m) vals_out[int(pc.vdst_off) + int(dest[q]) * pc.vdst_step] = stage[s];
  }}"""


_STATE = Binding("state", "uint", READWRITE, qualifier="volatile")


def hist_spec(key: str) -> KernelSpec:
    return KernelSpec("onesweep_hist", (Binding("keys", "uint", READ), _STATE),
                      (Push("passes", "uint"), Push("mask", "uint"), Push("src_off", "uint"), Push("src_step", "int")),
                      (("key", key), ("items", HIST_ITEMS)), (HIST_WG, 1, 1))


def pass_spec(key: str, payload: str, sg: int, fallback: bool, match: str = "ballot") -> KernelSpec:
    """``match``: how lanes holding the same digit find each other, "ballot"
    (one ballot per digit bit) or "partition" (VK_NV_shader_subgroup_partitioned)."""
    bindings = (Binding("keys_in", "uint", READ), Binding("keys_out", "uint", WRITE), _STATE)
    push = (Push("shift", "uint"), Push("mask", "uint"), Push("ticket", "uint"), Push("look_off", "uint"),
            Push("hist_off", "uint"), Push("src_off", "uint"), Push("src_step", "int"),
            Push("dst_off", "uint"), Push("dst_step", "int"))
    moved = payload_io(payload)
    bindings, push = bindings + moved[0], push + moved[1]
    return KernelSpec("onesweep_pass", bindings, push,
                      (("key", key), ("payload", payload), ("sg", sg), ("fallback", fallback), ("match", match),
                       ("items", ITEMS[payload])),
                      (workgroup(sg), 1, 1),
                      BALLOT_EXTENSIONS + (("GL_NV_shader_subgroup_partitioned",) if match == "partition" else ()),
                      ("subgroup",))


def plan_onesweep(ctx, keys, values, out_keys, out_values, payload: str, key_bits: int,
                  count=None) -> list:
    """Dispatches sorting ``keys`` (carrying ``payload``) into ``out_keys``;
    ``count``: a GPU count tensor (only its first ``count`` keys, workgroup
    counts computed on the GPU). A single pass must not write over its
    input (the caller copies it first)."""
    n, key = keys.size, keys.dtype.name
    sg = ctx.limits.subgroup_size
    tile = tile_size(sg, payload)
    passes = -(-key_bits // BITS)
    tiles = -(-n // tile)
    mask = key_mask(key_bits)
    look = STATE_N + 1
    size = look + passes * tiles * RADIX
    state = ctx.empty((size,), uint32)
    fallback = ctx.limits.loop_iteration_cap > 0
    match = "partition" if ctx.limits.subgroup_partitioned else "ballot"
    steps = [plan_clear(ctx, state, size, STATE_N, n, count, _STATE.qualifier)]
    hgroups = groups_for(-(-n // HIST_ITEMS), HIST_WG, ctx.limits.max_workgroup_count)
    hspec = hist_spec(key)
    steps.append(Dispatch(hspec, (keys.buffer, state.buffer), hspec.pack(
        {"passes": passes, "mask": mask, "src_off": keys.offset, "src_step": keys.strides[0]}), hgroups))
    if count is not None:
        groups = ctx.empty((3,), uint32)
        steps.append(plan_groups(ctx, count, tile, groups))
        grid, indirect = (1, 1, 1), (groups.buffer, groups.offset * 4)
    else:
        grid, indirect = groups_for(tiles * workgroup(sg), workgroup(sg), ctx.limits.max_workgroup_count), None
    for step in radix_passes(ctx, keys, values, out_keys, out_values, payload, passes):
        p = step.index
        spec = pass_spec(key, step.payload, sg, fallback, match)
        push = dict(step.push, shift=p * BITS, mask=mask, ticket=4 * RADIX + p,
                    look_off=look + p * tiles * RADIX, hist_off=p * RADIX)
        buffers = (step.src.buffer, step.dst.buffer, state.buffer) + step.payload_buffers
        steps.append(Dispatch(spec, buffers, spec.pack(push), grid, indirect=indirect))
    return steps


@variants("onesweep_hist")
def _hist_variants():
    for key in KEY_DTYPES:
        yield hist_spec(key)


@variants("onesweep_pass")
def _pass_variants():
    for key in KEY_DTYPES:
        for payload in PAYLOADS:
            for sg in SUBGROUP_SIZES:
                for fallback in (False, True):
                    yield pass_spec(key, payload, sg, fallback)
                yield pass_spec(key, payload, sg, False, "partition")
