"""Segmented prefix sums: ``rec.segmented_cumsum(x, starts, exclusive=False)``.

``starts`` flags the first element of each segment (nonzero: a segment
starts here); each segment is scanned on its own, as numpy's ``np.cumsum``
of each segment. The scan is one of (flag, value) pairs with the operator
``(fa, va) + (fb, vb) = (fa | fb, fb ? vb : va + vb)``: a total that holds a
segment start does not depend on what came before it.

A tile of ``wg * ITEMS`` elements: each thread scans ``ITEMS`` consecutive
elements, restarting at segment starts; the threads' (flag, total) pairs are
scanned in shared memory; an element gets the carry from before its thread
only if no start lies between, and the carry from before its tile only if no
start lies before it in the tile. The carry into each tile comes

- in one pass where the device keeps started workgroups running: the
  chained look-back of ops/scan_chained.py, where a tile holding a start
  publishes its total as an inclusive prefix at once (nothing before it
  matters), so walks stop there;
- otherwise from a multi-level scan: ``segscan`` writes each block's
  (flag, total), the block pairs are scanned the same way (inclusive),
  ``segscan_add`` adds block b - 1's inclusive value to block b's elements
  before its first start.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch, OpResult, check_out, check_tensor, op, overlaps
from .elementwise import storage_extensions, storage_features
from .scan_chained import (WG as CHAINED_WG, chained_shared, look_back, plan_setup, publication, spin_budget,
                           take_ticket, use_chained)
from ..kernels.glsl_lib import WG_INDEX

ITEMS = 8
PORTABLE_WG = 128
DTYPES = ("float32", "int32", "uint32")
START_DTYPES = ("uint8", "uint32", "int32")


def _start(spec: KernelSpec, k: str) -> str:
    """GLSL: whether element ``k`` starts a segment."""
    read = f"starts[pc.hd_off + int({k}) * pc.hd_step]"
    return f"(uint({read}) != 0u)" if spec.param("starts") == "uint8" else f"({read} != 0u)"


def _tile_pairs(spec: KernelSpec, T: str, wg: int, items: int) -> str:
    """GLSL: load the tile, scan each thread's elements, scan the threads'
    pairs; leaves ``vals``, ``after`` (bit j: a start at or before item j in
    this thread), ``cf``/``cv`` (the pair of the threads before) and the
    tile's pair in ``s_flag``/``s_total``."""
    keep = "before" if spec.param("exclusive") else "acc"
    return f"""  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t + j * {wg}u;
    data[P(t + j * {wg}u)] = k < n ? src[pc.src_off + int(k) * pc.src_step] : {T}(0);
  }}
  barrier();
  {T} vals[{items}];
  {T} acc = {T}(0);
  uint after = 0u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t * {items}u + j;
    {T} before = acc;
    if (k < n && {_start(spec, "k")}) {{ before = {T}(0); acc = {T}(0); after |= 0xFFFFFFFFu << j; }}
    acc += data[P(t * {items}u + j)];
    vals[j] = {keep};
  }}
  // Inclusive scan of the threads' pairs (Hillis-Steele).
  pflag[t] = after != 0u ? 1u : 0u;
  part[t] = acc;
  for (uint d = 1u; d < {wg}u; d <<= 1) {{
    barrier();
    uint f2 = t >= d ? pflag[t - d] : 0u;
    {T} v2 = t >= d ? part[t - d] : {T}(0);
    barrier();
    if (t >= d) {{
      if (pflag[t] == 0u) part[t] += v2;
      pflag[t] |= f2;
    }}
  }}
  barrier();
  uint cf = t > 0u ? pflag[t - 1u] : 0u;
  {T} cv = t > 0u ? part[t - 1u] : {T}(0);
  if (t == {wg - 1}u) {{ s_flag = pflag[t]; s_total = part[t]; }}
  barrier();"""


def _fallback(spec: KernelSpec, wg: int, items: int) -> str:
    """GLSL for look_back: the total after the last start of tile ``fblock``
    (``ends`` where it holds one)."""
    return f"""      if (t == 0u) s_last = 0u;
      barrier();
      uint fbase = fblock * {items * wg}u;
      for (uint j = 0u; j < {items * wg}u; j += {wg}u) {{
        uint k = fbase + t + j;
        if (k < n && {_start(spec, "k")}) atomicMax(s_last, k + 1u);
      }}
      barrier();
      uint last = s_last;
      for (uint j = 0u; j < {items * wg}u; j += {wg}u) {{
        uint k = fbase + t + j;
        if (k < n && k + 1u >= last) sum += src[pc.src_off + int(k) * pc.src_step];
      }}
      ends = last != 0u;"""


@family("segscan")
def _render_segscan(spec: KernelSpec) -> str:
    T = as_dtype(spec.param("dtype")).glsl
    wg, items, mode = spec.workgroup[0], spec.param("items"), spec.param("mode")
    tile = wg * items
    if mode == "chained":
        head = f"{chained_shared(T)}\nshared uint s_flag, s_last;\n{publication(T)}"
        first = f"{take_ticket()}\n  if (tile >= pc.nblocks) return;\n  uint block = tile;"
        # A tile holding a start publishes its total as inclusive at once; it
        # still walks back for the carry of its elements before that start.
        carry = f"""  if (block == 0u) {{
    if (t == 0u) {{ publish(tile, 2u, s_total); s_carry = {T}(0); }}
  }} else {{
    if (t == 0u) publish(tile, s_flag != 0u ? 2u : 1u, s_total);
{look_back(T, wg, "0u", _fallback(spec, wg, items))}
    if (t == 0u && s_flag == 0u) publish(tile, 2u, carry + s_total);
  }}
  barrier();
  {T} tile_carry = s_carry;"""
    else:
        head = f"shared uint s_flag;\nshared {T} s_total;"
        first = f"  uint block = {WG_INDEX};\n  if (block >= pc.nblocks) return;"
        carry = f"  {T} tile_carry = {T}(0);"
        if spec.param("totals"):
            carry += "\n  if (t == 0u) { sums[block] = s_total; flags[block] = s_flag; }"
    return f"""#define P(i) ((i) + ((i) >> 5))
shared {T} data[{tile + tile // 32}];
shared {T} part[{wg}];
shared uint pflag[{wg}];
{head}
void main() {{
  uint t = gl_LocalInvocationID.x;
  uint n = pc.n;
{first}
  uint start = block * {tile}u;
{_tile_pairs(spec, T, wg, items)}
{carry}
  {T} base = cv + (cf != 0u ? {T}(0) : tile_carry);
  for (uint j = 0u; j < {items}u; ++j)
    data[P(t * {items}u + j)] = ((after >> j) & 1u) != 0u ? vals[j] : base + vals[j];
  barrier();
  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t + j * {wg}u;
    if (k < n) dst[pc.dst_off + int(k) * pc.dst_step] = data[P(t + j * {wg}u)];
  }}
}}"""


@family("segscan_add")
def _render_segscan_add(spec: KernelSpec) -> str:
    wg, items = spec.workgroup[0], spec.param("items")
    tile = wg * items
    return f"""shared uint s_first;
void main() {{
  uint block = {WG_INDEX};
  if (block == 0u || block >= pc.nblocks) return;   // block 0 has nothing before it
  uint t = gl_LocalInvocationID.x, n = pc.n;
  if (t == 0u) s_first = 0xFFFFFFFFu;
  barrier();
  for (uint j = 0u; j < {tile}u; j += {wg}u) {{
    uint k = block * {tile}u + t + j;
    if (k < n && {_start(spec, "k")}) atomicMin(s_first, k);
  }}
  barrier();
  uint stop = min(s_first, n);
  {as_dtype(spec.param("dtype")).glsl} add = incl[block - 1u];
  for (uint j = 0u; j < {tile}u; j += {wg}u) {{
    uint k = block * {tile}u + t + j;
    if (k < stop) dst[pc.dst_off + int(k) * pc.dst_step] += add;
  }}
}}"""


_PUSH = (Push("n", "uint"), Push("nblocks", "uint"), Push("src_off", "uint"), Push("src_step", "int"),
         Push("hd_off", "uint"), Push("hd_step", "int"), Push("dst_off", "uint"), Push("dst_step", "int"),
         Push("spin_budget", "uint"))


def _starts_binding(starts: str) -> tuple:
    dtypes = [as_dtype(starts)]
    glsl = "uint8_t" if starts == "uint8" else "uint"
    return Binding("starts", glsl, READ), storage_extensions(dtypes), tuple(storage_features(dtypes))


def segscan_spec(dtype: str, starts: str, exclusive: bool, mode: str, totals: bool = False) -> KernelSpec:
    """``mode``: "block" (one level of the multi-level scan; ``totals``:
    it writes the blocks' pairs) or "chained" (the single pass)."""
    T = as_dtype(dtype).glsl
    sb, exts, feats = _starts_binding(starts)
    bindings = (Binding("src", T, READ), sb, Binding("dst", T, WRITE))
    if mode == "chained":
        bindings += (Binding("state", "uint", READWRITE, qualifier="volatile"),)
    elif totals:
        bindings += (Binding("sums", T, WRITE), Binding("flags", "uint", WRITE))
    wg = CHAINED_WG if mode == "chained" else PORTABLE_WG
    return KernelSpec("segscan", bindings, _PUSH,
                      (("dtype", dtype), ("starts", "uint8" if starts == "uint8" else "uint32"),
                       ("exclusive", exclusive), ("mode", mode), ("totals", totals), ("items", ITEMS)),
                      (wg, 1, 1), exts, feats)


def add_spec(dtype: str, starts: str) -> KernelSpec:
    T = as_dtype(dtype).glsl
    sb, exts, feats = _starts_binding(starts)
    return KernelSpec("segscan_add", (sb, Binding("dst", T, READWRITE), Binding("incl", T, READ)), _PUSH,
                      (("dtype", dtype), ("starts", "uint8" if starts == "uint8" else "uint32"), ("items", ITEMS)),
                      (PORTABLE_WG, 1, 1), exts, feats)


def _push(spec, n, nblocks, src, starts, dst, budget=0) -> bytes:
    return spec.pack({"n": n, "nblocks": nblocks, "src_off": src.offset, "src_step": src.strides[0],
                      "hd_off": starts.offset, "hd_step": starts.strides[0], "dst_off": dst.offset,
                      "dst_step": dst.strides[0], "spin_budget": budget})


def plan_levels(ctx, src, starts, dst, dtype: str, exclusive: bool) -> list:
    """The multi-level segmented scan of 1-D ``src`` with ``starts`` into ``dst``."""
    n = src.size
    tile = PORTABLE_WG * ITEMS
    nblocks = -(-n // tile)
    groups = groups_for(nblocks * PORTABLE_WG, PORTABLE_WG, ctx.limits.max_workgroup_count)
    kind = "uint8" if starts.dtype.name == "uint8" else "uint32"
    spec = segscan_spec(dtype, kind, exclusive, "block", nblocks > 1)
    if nblocks == 1:
        return [Dispatch(spec, (src.buffer, starts.buffer, dst.buffer), _push(spec, n, 1, src, starts, dst), groups)]
    sums, flags = ctx.empty((nblocks,), dtype), ctx.empty((nblocks,), "uint32")
    incl = ctx.empty((nblocks,), dtype)
    out = [Dispatch(spec, (src.buffer, starts.buffer, dst.buffer, sums.buffer, flags.buffer),
                    _push(spec, n, nblocks, src, starts, dst), groups)]
    out += plan_levels(ctx, sums, flags, incl, dtype, False)
    aspec = add_spec(dtype, kind)
    return out + [Dispatch(aspec, (starts.buffer, dst.buffer, incl.buffer),
                           _push(aspec, n, nblocks, src, starts, dst), groups)]


def plan_chained(ctx, src, starts, dst, dtype: str, exclusive: bool) -> list:
    n = src.size
    tiles = -(-n // (CHAINED_WG * ITEMS))
    state, _, out = plan_setup(ctx, tiles, n, CHAINED_WG * ITEMS)
    kind = "uint8" if starts.dtype.name == "uint8" else "uint32"
    spec = segscan_spec(dtype, kind, exclusive, "chained")
    push = _push(spec, n, tiles, src, starts, dst, spin_budget(ctx, overlaps(src, dst)))
    groups = groups_for(tiles * CHAINED_WG, CHAINED_WG, ctx.limits.max_workgroup_count)
    return out + [Dispatch(spec, (src.buffer, starts.buffer, dst.buffer, state.buffer), push, groups)]


@op("segmented_cumsum", windows=None)
def segmented_cumsum(ctx, x, starts, *, exclusive=False, out=None):
    """Prefix sums of each segment of 1-D ``x`` (float32, int32, uint32):
    ``starts`` (uint8, uint32 or int32, the shape of ``x``) is nonzero at
    the first element of each segment; element 0 always starts one. Each
    segment's result is numpy's ``np.cumsum`` of it (integers wrap in their
    dtype); ``exclusive=True`` puts the sum of the segment's *preceding*
    elements at each position (0 at each start). ``out`` may be ``x``
    itself but must not partially overlap it."""
    x = check_tensor(ctx, x, "segmented_cumsum x")
    starts = check_tensor(ctx, starts, "segmented_cumsum starts")
    if x.dtype.name not in DTYPES:
        raise DTypeError(f"segmented_cumsum: dtype {x.dtype} not supported; use one of {list(DTYPES)}")
    if starts.dtype.name not in START_DTYPES:
        raise DTypeError(f"segmented_cumsum: starts dtype {starts.dtype} not supported; use one of "
                         f"{list(START_DTYPES)} (nonzero starts a segment)")
    if x.ndim != 1 or starts.shape != x.shape:
        raise ShapeError(f"segmented_cumsum needs a 1-D x and starts of its shape, got {x.shape} and "
                         f"{starts.shape}")
    if not isinstance(exclusive, (bool, np.bool_)):
        raise InvalidArgumentError(f"segmented_cumsum: exclusive must be a bool, got {exclusive!r}")
    if x.size >= 2 ** 31:
        raise InvalidArgumentError("segmented_cumsum: more than 2**31 elements")
    if out is not None:
        out = check_out(ctx, out, x.shape, x.dtype, {"x": x}, "segmented_cumsum out")
        if overlaps(out, starts):
            raise InvalidArgumentError("segmented_cumsum out overlaps starts; use a separate output tensor")
    else:
        out = ctx.empty(x.shape, x.dtype)
    if x.size == 0:
        return OpResult(out, [])
    single = x.size > PORTABLE_WG * ITEMS and use_chained(ctx, overlaps(x, out))
    plan = plan_chained if single else plan_levels
    return OpResult(out, plan(ctx, x, starts, out, x.dtype.name, bool(exclusive)))


@variants("segscan")
def _segscan_variants():
    for dtype in DTYPES:
        for starts in ("uint8", "uint32"):
            for exclusive in (False, True):
                yield segscan_spec(dtype, starts, exclusive, "chained")
                for totals in (False, True):
                    yield segscan_spec(dtype, starts, exclusive, "block", totals)


@variants("segscan_add")
def _segscan_add_variants():
    for dtype in DTYPES:
        for starts in ("uint8", "uint32"):
            yield add_spec(dtype, starts)
