"""Radix sort: ``rec.sort(keys, values=None)`` and ``rec.argsort(keys, axis=-1)``.

A stable LSD radix sort over 4-bit digits (8 passes for 32-bit keys), each
pass three steps over tiles of ``TILE`` keys, one workgroup per tile:

1. ``radix_hist``: count the tile's digits (a counter column per thread in
   shared memory, then a tree sum: no atomics, whose Device scope some
   memory-model configurations reject) and store them digit-major,
   ``hist[digit * tiles + tile]``;
2. an exclusive scan of ``hist`` (:mod:`.scan`) turns each count into the
   first output slot of that digit in that tile: all smaller digits come
   first, then the same digit from earlier tiles;
3. ``radix_scatter``: rank every key inside its tile stably (per-thread
   digit counters in shared memory, laid out digit-major and scanned, so a
   thread's keys land after those of lower threads), stage the tile in
   digit order in shared memory, then write it out: each digit's keys form
   one contiguous run, so the writes coalesce.

4-bit digits keep the ranking counters (16 digits x 128 threads) well inside
the 16 KiB of shared memory every Vulkan 1.0 device has. Passes ping-pong
between two scratch tensors; the first reads the caller's view and the last
writes the caller's output, so any strided 1-D views work, in place too.

Keys are moved as raw 32-bit words and only *ranked* through an
order-preserving map, which also sorts int32 (flip the sign bit) and
float32 in numpy's order: -inf < ... < -0.0 == +0.0 < ... < +inf < NaN.
Both zeros rank the same and every NaN (either sign, any payload) ranks
last, so, the sort being stable, zeros and NaNs keep their input order
among themselves, exactly as ``np.sort``/``np.argsort(kind="stable")``.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype, int32, uint32
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import Tensor
from .base import Dispatch, OpResult, check_out, check_tensor, op, overlaps
from .elementwise import map_variants, plan_map
from .scan import ROW_RANK, WG_INDEX, Operand, blelloch, plan_scan

WG = 128
ITEMS = 8
TILE = WG * ITEMS
BITS = 4
RADIX = 1 << BITS
KEY_DTYPES = ("uint32", "int32", "float32")
VALUE_DTYPES = ("uint32", "int32", "float32")
PAYLOADS = ("none", "values", "iota")
assert RADIX * WG >= 2 * TILE, "the scatter stages a tile's keys and slots in its counter array"

# GLSL: the order-preserving map of raw key bits to unsigned integers (the
# keys themselves move unchanged). Floats rank as numpy sorts them: -0.0 and
# +0.0 are equal (a stable sort keeps their input order) and every NaN,
# whatever its sign or payload, ranks after +inf, in input order.
_SORTABLE = {
    "uint32": "uint sortable(uint k) { return k; }",
    "int32": "uint sortable(uint k) { return k ^ 0x80000000u; }",
    "float32": """uint sortable(uint k) {
  if ((k & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;   // any NaN: above +inf (0xff800000)
  if (k == 0x80000000u) k = 0u;                               // -0.0 ranks as +0.0
  return k ^ ((k >> 31) != 0u ? 0xffffffffu : 0x80000000u);   // IEEE bits to unsigned order
}""",
}


def _digit_fn(key: str) -> str:
    return f"{_SORTABLE[key]}\nuint digit(uint k) {{ return (sortable(k) >> pc.shift) & {RADIX - 1}u; }}"


@family("radix_hist")
def _render_hist(spec: KernelSpec) -> str:
    wg, items = spec.workgroup[0], spec.param("items")
    return f"""{_digit_fn(spec.param("key"))}
shared uint counts[{RADIX * wg}];   // digit-major, one counter column per thread
void main() {{
  uint tile = {WG_INDEX};
  if (tile >= pc.tiles) return;
  uint t = gl_LocalInvocationID.x;
  for (uint d = 0u; d < {RADIX}u; ++d) counts[d * {wg}u + t] = 0u;
  uint start = tile * {wg * items}u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint i = start + t + j * {wg}u;
    if (i < pc.n) counts[digit(keys[int(pc.src_off) + int(i) * pc.src_step]) * {wg}u + t] += 1u;
  }}
  for (uint s = {wg // 2}u; s > 0u; s >>= 1) {{
    barrier();
    if (t < s) for (uint d = 0u; d < {RADIX}u; ++d) counts[d * {wg}u + t] += counts[d * {wg}u + t + s];
  }}
  barrier();
  if (t < {RADIX}u) hist[t * pc.tiles + tile] = counts[t * {wg}u];
}}"""


@family("radix_scatter")
def _render_scatter(spec: KernelSpec) -> str:
    wg, items = spec.workgroup[0], spec.param("items")
    tile = wg * items
    payload = spec.param("payload")
    if payload == "values":
        move = ("vals_out[int(pc.vdst_off) + int(dest) * pc.vdst_step] = "
                f"vals_in[int(pc.vsrc_off) + int(start + stage[{tile}u + s]) * pc.vsrc_step];")
    elif payload == "iota":
        move = f"vals_out[int(pc.vdst_off) + int(dest) * pc.vdst_step] = start + stage[{tile}u + s];"
    else:
        move = ""
    return f"""{_digit_fn(spec.param("key"))}
shared uint keys_s[{tile}];         // the tile's keys, in input order
shared uint stage[{RADIX * wg}];    // per-thread digit counters; then keys + source slots in digit order
shared uint part[{wg}];
shared uint digit_start[{RADIX}];   // first tile slot of each digit
shared uint digit_base[{RADIX}];    // first output slot of each digit (scanned histogram)
void main() {{
  uint tile = {WG_INDEX};
  if (tile >= pc.tiles) return;
  uint t = gl_LocalInvocationID.x;
  uint start = tile * {tile}u;
  uint m = min(pc.n - start, {tile}u);
  for (uint j = 0u; j < {items}u; ++j) {{
    uint s = t + j * {wg}u;
    if (s < m) keys_s[s] = keys_in[int(pc.src_off) + int(start + s) * pc.src_step];
  }}
  for (uint d = 0u; d < {RADIX}u; ++d) stage[d * {wg}u + t] = 0u;
  barrier();
  // Thread t owns the ITEMS consecutive slots t*ITEMS.. and counter column t.
  for (uint j = 0u; j < {items}u; ++j) {{
    uint s = t * {items}u + j;
    if (s < m) stage[digit(keys_s[s]) * {wg}u + t] += 1u;
  }}
  barrier();
  // Exclusive scan of the digit-major counters: thread t scans RADIX consecutive ones.
  uint acc = 0u;
  for (uint i = 0u; i < {RADIX}u; ++i) {{
    uint c = stage[t * {RADIX}u + i];
    stage[t * {RADIX}u + i] = acc;
    acc += c;
  }}
  part[t] = acc;{blelloch("part", wg, "uint")}
  for (uint i = 0u; i < {RADIX}u; ++i) stage[t * {RADIX}u + i] += part[t];
  barrier();
  if (t < {RADIX}u) {{
    digit_start[t] = stage[t * {wg}u];
    digit_base[t] = scanned[t * pc.tiles + tile];
  }}
  barrier();
  uint pos[{items}];
  for (uint j = 0u; j < {items}u; ++j) {{
    uint s = t * {items}u + j;
    if (s < m) {{
      uint c = digit(keys_s[s]) * {wg}u + t;
      pos[j] = stage[c];
      stage[c] = pos[j] + 1u;
    }}
  }}
  barrier();
  for (uint j = 0u; j < {items}u; ++j) {{
    uint s = t * {items}u + j;
    if (s < m) {{ stage[pos[j]] = keys_s[s]; stage[{tile}u + pos[j]] = s; }}
  }}
  barrier();
  for (uint j = 0u; j < {items}u; ++j) {{
    uint s = t + j * {wg}u;
    if (s < m) {{
      uint k = stage[s];
      uint d = digit(k);
      uint dest = digit_base[d] + s - digit_start[d];
      keys_out[int(pc.dst_off) + int(dest) * pc.dst_step] = k;
      {move}
    }}
  }}
}}"""


_PASS_PUSH = (Push("n", "uint"), Push("tiles", "uint"), Push("shift", "uint"),
              Push("src_off", "uint"), Push("src_step", "int"))


def hist_spec(key: str) -> KernelSpec:
    return KernelSpec("radix_hist", (Binding("keys", "uint", READ), Binding("hist", "uint", WRITE)),
                      _PASS_PUSH, (("key", key), ("items", ITEMS)), (WG, 1, 1))


def scatter_spec(key: str, payload: str) -> KernelSpec:
    bindings = (Binding("keys_in", "uint", READ), Binding("scanned", "uint", READ),
                Binding("keys_out", "uint", WRITE))
    push = _PASS_PUSH + (Push("dst_off", "uint"), Push("dst_step", "int"))
    if payload == "values":
        bindings += (Binding("vals_in", "uint", READ),)
        push += (Push("vsrc_off", "uint"), Push("vsrc_step", "int"))
    if payload != "none":
        bindings += (Binding("vals_out", "uint", WRITE),)
        push += (Push("vdst_off", "uint"), Push("vdst_step", "int"))
    return KernelSpec("radix_scatter", bindings, push, (("key", key), ("payload", payload), ("items", ITEMS)),
                      (WG, 1, 1))


def _vector(ctx, t, what: str, allowed):
    t = check_tensor(ctx, t, what)
    if t.ndim != 1:
        raise ShapeError(f"{what} must be 1-D, got shape {t.shape}")
    if t.dtype.name not in allowed:
        raise DTypeError(f"{what}: dtype {t.dtype} not supported; use one of {list(allowed)}")
    return t


def _output(ctx, out, like_n, dtype, what, allowed=None):
    if out is None:
        return None
    # Overlaps are checked across both outputs (_check_outputs).
    return check_out(ctx, out, (like_n,), dtype if allowed is None else tuple(allowed), (), what)


def _same_view(a, b) -> bool:
    return a.buffer is b.buffer and a.offset == b.offset and a.strides == b.strides


def plan_sort(ctx, keys, values, out_keys, out_values, payload: str, key_bits: int) -> list:
    """Dispatches of every pass. ``out_keys``/``out_values`` are validated
    tensors (``out_values`` None without payload)."""
    n = keys.size
    key = keys.dtype.name
    passes = -(-key_bits // BITS)
    tiles = -(-n // TILE)
    groups = groups_for(tiles * WG, WG, ctx.limits.max_workgroup_count)
    # The counts of every pass live in the same two tensors, so the scan's
    # dispatches (and its scratch) are planned once and reused each pass.
    hist = ctx.empty((RADIX * tiles,), uint32)
    scanned = ctx.empty((RADIX * tiles,), uint32)
    scan = plan_scan(ctx, Operand.rows_of(hist, 1, hist.size), Operand.rows_of(scanned, 1, hist.size),
                     1, hist.size, (1,) * ROW_RANK, "uint32", True)
    scratch_k = [ctx.empty((n,), keys.dtype) for _ in range(min(passes - 1, 2))]
    scratch_v = [ctx.empty((n,), uint32) for _ in range(min(passes - 1, 2))] if payload != "none" else []
    # A single pass cannot read and write the same memory (tiles overlap other
    # tiles' outputs): sort into scratch, then copy.
    ins = [keys] + ([values] if payload == "values" else [])
    outs = [out_keys] + ([out_values] if payload != "none" else [])
    final_copy = passes == 1 and any(overlaps(o, i) for o in outs for i in ins)
    if final_copy:
        scratch_k = [ctx.empty((n,), keys.dtype)]
        scratch_v = [ctx.empty((n,), uint32)] if payload != "none" else []
    out = []
    src_k, src_v = keys, values
    hspec = hist_spec(key)
    sspec = scatter_spec(key, payload)
    for p in range(passes):
        last = p == passes - 1 and not final_copy
        dst_k = out_keys if last else scratch_k[p % 2]
        dst_v = (out_values if last else scratch_v[p % 2]) if payload != "none" else None
        values_ = {"n": n, "tiles": tiles, "shift": p * BITS, "src_off": src_k.offset,
                   "src_step": src_k.strides[0], "dst_off": dst_k.offset, "dst_step": dst_k.strides[0]}
        out.append(Dispatch(hspec, (src_k.buffer, hist.buffer), hspec.pack(values_), groups))
        out += scan
        buffers = [src_k.buffer, scanned.buffer, dst_k.buffer]
        if payload == "values":
            buffers.append(src_v.buffer)
            values_.update(vsrc_off=src_v.offset, vsrc_step=src_v.strides[0])
        if payload != "none":
            buffers.append(dst_v.buffer)
            values_.update(vdst_off=dst_v.offset, vdst_step=dst_v.strides[0])
        out.append(Dispatch(sspec, tuple(buffers), sspec.pack(values_), groups))
        src_k, src_v = dst_k, dst_v
        payload = "values" if payload == "iota" else payload   # later passes move the indices
        sspec = scatter_spec(key, payload)
    if final_copy:
        out.append(plan_map(ctx, "x0", [_bits(src_k)], _bits(out_keys), uint32))
        if payload != "none":
            out.append(plan_map(ctx, "x0", [_bits(src_v)], _bits(out_values), uint32))
    return out


def _bits(t: Tensor) -> Tensor:
    """The same view as raw 32-bit words: copies keep every bit (NaN
    payloads, denormals) whatever the dtype."""
    return Tensor(t.buffer, t.shape, uint32, t.strides, t.offset)


def _key_bits(keys, key_bits) -> int:
    if isinstance(key_bits, bool) or not isinstance(key_bits, (int, np.integer)) or not 1 <= key_bits <= 32:
        raise InvalidArgumentError(f"key_bits must be an int in 1..32, got {key_bits!r}")
    if key_bits != 32 and keys.dtype.name != "uint32":
        raise InvalidArgumentError(f"key_bits < 32 needs uint32 keys (got {keys.dtype})")
    return int(key_bits)


@op("sort", windows=None)
def sort(ctx, keys, values=None, out_keys=None, out_values=None, *, key_bits: int = 32):
    """Stable sort of 1-D ``keys`` (uint32, int32 or float32), carrying the
    optional 1-D payload ``values`` (any 4-byte dtype) along.

    Returns ``sorted_keys``, or ``(sorted_keys, permuted_values)`` with a
    payload; the payload order is numpy's ``values[np.argsort(keys,
    kind="stable")]``. ``key_bits`` < 32 sorts uint32 keys known to be
    below ``2**key_bits`` in fewer passes (higher bits are ignored).
    Outputs may be the inputs themselves (in place). Float keys sort as in
    numpy: -0.0 and +0.0 compare equal (input order kept) and every NaN
    comes last (see the module notes).
    """
    keys = _vector(ctx, keys, "sort keys", KEY_DTYPES)
    key_bits = _key_bits(keys, key_bits)
    n = keys.size
    if values is not None:
        values = _vector(ctx, values, "sort values", VALUE_DTYPES)
        if values.shape != keys.shape:
            raise ShapeError(f"sort: values has shape {values.shape}, keys {keys.shape}")
    elif out_values is not None:
        raise InvalidArgumentError("sort: out_values given without values")
    out_keys = _output(ctx, out_keys, n, keys.dtype, "sort out_keys")
    if values is not None:
        out_values = _output(ctx, out_values, n, values.dtype, "sort out_values")
    _check_outputs([out_keys, out_values], [keys, values])
    if out_keys is None:
        out_keys = ctx.empty((n,), keys.dtype)
    if values is not None and out_values is None:
        out_values = ctx.empty((n,), values.dtype)
    result = (out_keys, out_values) if values is not None else out_keys
    if n == 0:
        return OpResult(result, [])
    payload = "values" if values is not None else "none"
    return OpResult(result, plan_sort(ctx, keys, values, out_keys, out_values, payload, key_bits))


@op("argsort", windows=None)
def argsort(ctx, keys, out=None, *, axis: int = -1, key_bits: int = 32):
    """Indices that stably sort ``keys`` (uint32, int32 or float32) along
    ``axis``: numpy's ``np.argsort(keys, axis, kind="stable")`` as uint32
    (``out`` may be uint32 or int32). Over a tensor of two or more
    dimensions each line along ``axis`` is sorted on its own (one sort of all
    keys, then a stable sort of the result by line)."""
    checked = check_tensor(ctx, keys, "argsort keys")
    if checked.ndim >= 2:
        return _argsort_lines(ctx, checked, out, axis, key_bits)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis not in (0, -1):
        raise ShapeError(f"argsort: axis {axis!r} does not fit a 1-D tensor; use 0 or -1")
    keys = _vector(ctx, keys, "argsort keys", KEY_DTYPES)
    key_bits = _key_bits(keys, key_bits)
    n = keys.size
    if n >= 2 ** 31:
        raise InvalidArgumentError("argsort: more than 2**31 keys")
    out = _output(ctx, out, n, uint32, "argsort out", ("uint32", "int32"))
    _check_outputs([out], [keys])
    if out is None:
        out = ctx.empty((n,), uint32)
    if n == 0:
        return OpResult(out, [])
    sorted_keys = ctx.empty((n,), keys.dtype)   # ping-pong end point, not returned
    return OpResult(out, plan_sort(ctx, keys, None, sorted_keys, out, "iota", key_bits))


def _argsort_lines(ctx, keys, out, axis, key_bits) -> OpResult:
    """argsort along ``axis`` of an N-D tensor: the lines are moved last
    and copied contiguous, all keys sorted at once (stable, flat indices),
    then the indices sorted stably by their line (flat index // line
    length): each line's indices in key order, as flat index % line length."""
    if keys.dtype.name not in KEY_DTYPES:
        raise DTypeError(f"argsort keys: dtype {keys.dtype} not supported; use one of {list(KEY_DTYPES)}")
    key_bits = _key_bits(keys, key_bits)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -keys.ndim <= axis < keys.ndim:
        raise ShapeError(f"argsort: axis {axis!r} is out of range for a {keys.ndim}-d tensor; "
                         f"use {-keys.ndim}..{keys.ndim - 1}")
    if keys.size >= 2 ** 31:
        raise InvalidArgumentError("argsort: more than 2**31 keys")
    last = [a for a in range(keys.ndim) if a != int(axis) % keys.ndim] + [int(axis) % keys.ndim]
    if out is not None:
        out = check_out(ctx, out, keys.shape, (uint32, int32), [keys], "argsort out", in_place=False)
    else:
        out = ctx.empty(keys.shape, uint32)
    n, line = keys.size, keys.shape[int(axis) % keys.ndim]
    if n == 0:
        return OpResult(out, [])
    moved, moved_out = keys.permute(last), out.permute(last)
    flat = ctx.empty((n,), keys.dtype)
    steps = [plan_map(ctx, "x0", [_bits(moved)], _bits(flat.reshape(moved.shape)), uint32)]
    order, lines = ctx.empty((n,), uint32), ctx.empty((n,), uint32)
    steps += plan_sort(ctx, flat, None, ctx.empty((n,), keys.dtype), order, "iota", key_bits)
    steps.append(plan_map(ctx, "x0 / s", [order], lines, uint32, line, "uint"))
    by_line = ctx.empty((n,), uint32)
    line_bits = max(1, (n // line - 1).bit_length())
    steps += plan_sort(ctx, lines, order, ctx.empty((n,), uint32), by_line, "values", line_bits)
    steps.append(plan_map(ctx, "x0 % s", [by_line.reshape(moved.shape)], moved_out, out.dtype, line, "uint"))
    return OpResult(out, steps)


def _check_outputs(outs, ins):
    """Outputs may be exactly an input (in place), never partly overlap one,
    and never overlap each other."""
    outs = [o for o in outs if o is not None]
    ins = [i for i in ins if i is not None]
    for o in outs:
        for i in ins:
            if overlaps(o, i) and not _same_view(o, i):
                raise InvalidArgumentError("sort: an output overlaps an input without being the same view; "
                                           "pass the input itself (in place) or a separate tensor")
    if len(outs) == 2 and overlaps(outs[0], outs[1]):
        raise InvalidArgumentError("sort: out_keys and out_values overlap")


@variants("radix_hist")
def _hist_variants():
    for key in KEY_DTYPES:
        yield hist_spec(key)


@variants("radix_scatter")
def _scatter_variants():
    for key in KEY_DTYPES:
        for payload in PAYLOADS:
            yield scatter_spec(key, payload)


@variants("map")
def _argsort_lines_variants():
    # the line of each flat index, and its place in the line (into uint32 or int32 outputs)
    yield from map_variants("x0 / s", [uint32], uint32, "uint")
    for out in ("uint32", "int32"):
        yield from map_variants("x0 % s", [uint32], as_dtype(out), "uint")
