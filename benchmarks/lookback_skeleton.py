"""The library's decoupled look-back, reduced to a skeleton scan, in GLSL;
its CUDA twin is ``skeleton_scan`` in ``baselines/cub_sort.cu``.

Why it is here: the single-pass kernels (the onesweep sort pass, the chained
scan and compaction) spend most of their time waiting on earlier tiles. Run
beside the same skeleton compiled by nvcc, on the same GPU in the same run,
it says how much of that waiting belongs to the algorithm and how much to
the Vulkan compiler and driver. Both versions: tiles of 256 invocations x 4
uvec4, a ticket per tile, the tile scanned in registers by subgroup scans;
thread 0 publishes one status word (2-bit flag: 1 aggregate, 2 inclusive;
30-bit value) and subgroup 0 reads 32 predecessors' words a round, waiting
while any of them is unpublished. The words are polled as the library polls
(a ``volatile`` buffer). Values are below 16, so sums of fewer than 2**26
stay within the 30-bit field.
"""
from __future__ import annotations

import numpy as np

VECTORS = 4
TILE = 256 * VECTORS * 4          # elements a tile scans
MAX_N = 1 << 26

_SOURCE = """#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(std430, binding = 2) volatile buffer State { uint state[]; };   // [0]: tickets; [1 + tile]: status
shared uint s_tile, s_carry, s_sums[64];

uint carry_before(uint tile, uint total) {
  if (gl_LocalInvocationID.x == 0u) state[1u + tile] = (tile == 0u ? 2u : 1u) | (total << 2);
  if (gl_SubgroupID == 0u && tile > 0u) {
    uint lane = gl_SubgroupInvocationID, carry = 0u;
    int p = int(tile) - 1;
    while (true) {
      int q = p - int(lane);
      uint word = q >= 0 ? state[1u + uint(q)] : 2u;
      if (!subgroupAll((word & 3u) != 0u)) continue;      // a predecessor has not published yet
      uvec4 inclusive = subgroupBallot((word & 3u) == 2u);
      if (subgroupBallotBitCount(inclusive) > 0u) {
        uint first = subgroupBallotFindLSB(inclusive);
        carry += subgroupAdd(lane <= first ? word >> 2 : 0u);
        break;
      }
      carry += subgroupAdd(word >> 2);
      p -= int(gl_SubgroupSize);
    }
    if (lane == 0u) { state[1u + tile] = 2u | ((carry + total) << 2); s_carry = carry; }
  }
  barrier();
  return s_carry;
}

void main() {
  uint t = gl_LocalInvocationID.x, lane = gl_SubgroupInvocationID;
  if (t == 0u) { s_tile = atomicAdd(state[0], 1u); s_carry = 0u; }
  barrier();
  uint tile = s_tile;
  uint base = tile * (256u * VECTORS) + gl_SubgroupID * gl_SubgroupSize * VECTORS + lane;
  uvec4 v[VECTORS];
  for (uint j = 0u; j < VECTORS; ++j) v[j] = src[base + j * gl_SubgroupSize];
  uint acc = 0u;
  for (uint j = 0u; j < VECTORS; ++j) {
    v[j].y += v[j].x; v[j].z += v[j].y; v[j].w += v[j].z;
    uint before = subgroupExclusiveAdd(v[j].w);
    v[j] += uvec4(acc + before);
    acc += subgroupShuffle(before + v[j].w - acc - before, gl_SubgroupSize - 1u);
  }
  if (lane == 0u) s_sums[gl_SubgroupID] = acc;
  barrier();
  uint below = 0u, total = 0u;
  for (uint s = 0u; s < gl_NumSubgroups; ++s) { uint x = s_sums[s]; if (s < gl_SubgroupID) below += x; total += x; }
  uint off = below + (LOOK != 0u ? carry_before(tile, total) : 0u);
  for (uint j = 0u; j < VECTORS; ++j) dst[base + j * gl_SubgroupSize] = v[j] + uvec4(off);
}
"""


def kernel(ctx, look_back: bool):
    """The skeleton as a user kernel (``look_back`` False: tiles scanned
    without their offsets, the time of the tile work alone)."""
    return ctx.kernel(_SOURCE.replace("VECTORS", f"{VECTORS}u").replace("LOOK", "1u" if look_back else "0u"))


def values(n: int) -> np.ndarray:
    """Input below 16 everywhere (``n``: a multiple of TILE below MAX_N)."""
    if n % TILE or not 0 < n < MAX_N:
        raise ValueError(f"the skeleton scans a multiple of {TILE} elements below 2**26, not {n}")
    return (np.random.default_rng(26).integers(0, 16, n)).astype(np.uint32)


def expected(x: np.ndarray, look_back: bool) -> np.ndarray:
    """What the skeleton writes: the inclusive scan, or each tile's own."""
    if look_back:
        return np.cumsum(x, dtype=np.uint32)
    return np.cumsum(x.reshape(-1, TILE), axis=1, dtype=np.uint32).reshape(-1)


def measure(ctx, timer, n: int) -> dict:
    """GPU seconds of the skeleton with and without its look-back
    (``{"tile_scan": s, "lookback_scan": s}``; each includes clearing the
    ticket and status words, as the CUDA twin's timing does), each checked
    exact first. Needs 32-wide subgroups as the CUDA twin has (ValueError
    otherwise) and workgroups that keep running once started."""
    if ctx.limits.subgroup_size != 32:
        raise ValueError(f"the CUDA twin runs 32-wide warps; this device's subgroups are {ctx.limits.subgroup_size}")
    x = values(n)
    src, dst = ctx.tensor(x), ctx.empty((n,), "uint32")
    state = ctx.empty((n // TILE + 1,), "uint32")
    out = {}
    for name, look_back in (("tile_scan", False), ("lookback_scan", True)):
        k = kernel(ctx, look_back)

        def body(rec, k=k):
            rec.fill(state, 0)
            rec.run_kernel(k, [src, dst, state], groups=(n // TILE, 1, 1))
        ctx.run(body)
        if not np.array_equal(dst.numpy(), expected(x, look_back)):
            raise AssertionError(f"the GLSL skeleton's {name} differs from numpy")
        out[name] = timer.gpu_seconds(body)
    return out
