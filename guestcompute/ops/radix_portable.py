"""The portable radix sort passes: 4-bit digits, reduce-then-scan, no
atomics and no inter-workgroup waiting, so they run on any Vulkan 1.0
device (lavapipe included). Each pass is three steps over tiles of
``TILE`` keys, one workgroup per tile:

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
the 16 KiB of shared memory every Vulkan 1.0 device has. With a GPU count
the passes still cover the tensors' full size: tiles past the count find
no keys (their histogram columns are zero) and write nothing.
"""
from __future__ import annotations

from ..dtypes import uint32
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch
from .radix_keys import KEY_DTYPES, PAYLOADS, SORTABLE, key_mask, payload_io, radix_passes
from .scan import ROW_RANK, Operand, blelloch, plan_scan

WG = 128
ITEMS = 8
TILE = WG * ITEMS
BITS = 4
RADIX = 1 << BITS
assert RADIX * WG >= 2 * TILE, "the scatter stages a tile's keys and slots in its counter array"


def _digit_fn(key: str) -> str:
    return (f"{SORTABLE[key]}\n"
            f"uint digit(uint k) {{ return ((sortable(k) & pc.mask) >> pc.shift) & {RADIX - 1}u; }}")


def _n(spec: KernelSpec) -> str:
    """GLSL: the number of keys, from the push constants or a GPU word."""
    return "nword[pc.n_at]" if spec.param("counted") else "pc.n"


@family("radix_hist")
def _render_hist(spec: KernelSpec) -> str:
    wg, items = spec.workgroup[0], spec.param("items")
    return f"""{_digit_fn(spec.param("key"))}
shared uint counts[{RADIX * wg}];   // digit-major, one counter column per thread
void main() {{
  uint tile = {WG_INDEX};
  if (tile >= pc.tiles) return;
  uint t = gl_LocalInvocationID.x, n = {_n(spec)};
  for (uint d = 0u; d < {RADIX}u; ++d) counts[d * {wg}u + t] = 0u;
  uint start = tile * {wg * items}u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint i = start + t + j * {wg}u;
    if (i < n) counts[digit(keys[int(pc.src_off) + int(i) * pc.src_step]) * {wg}u + t] += 1u;
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
  uint n = {_n(spec)};
  if (start >= n) return;             // past a GPU count: nothing to move
  uint m = min(n - start, {tile}u);
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


_PASS_PUSH = (Push("n", "uint"), Push("tiles", "uint"), Push("shift", "uint"), Push("mask", "uint"),
              Push("n_at", "uint"), Push("src_off", "uint"), Push("src_step", "int"))
_NWORD = Binding("nword", "uint", READ, qualifier="")


def hist_spec(key: str, counted: bool = False) -> KernelSpec:
    bindings = (Binding("keys", "uint", READ), Binding("hist", "uint", WRITE)) + ((_NWORD,) if counted else ())
    return KernelSpec("radix_hist", bindings, _PASS_PUSH, (("key", key), ("items", ITEMS), ("counted", counted)),
                      (WG, 1, 1))


def scatter_spec(key: str, payload: str, counted: bool = False) -> KernelSpec:
    bindings = (Binding("keys_in", "uint", READ), Binding("scanned", "uint", READ),
                Binding("keys_out", "uint", WRITE))
    moved = payload_io(payload)
    bindings += moved[0]
    push = _PASS_PUSH + (Push("dst_off", "uint"), Push("dst_step", "int")) + moved[1]
    if counted:
        bindings += (_NWORD,)
    return KernelSpec("radix_scatter", bindings, push,
                      (("key", key), ("payload", payload), ("items", ITEMS), ("counted", counted)), (WG, 1, 1))


def plan_portable(ctx, keys, values, out_keys, out_values, payload: str, key_bits: int,
                  nword=None) -> list:
    """Dispatches of every pass. ``out_keys``/``out_values`` are validated
    tensors (``out_values`` None without payload); ``nword``: (tensor,
    index) of a uint32 word holding the number of keys to sort (a GPU
    count, clamped to the size). A single pass must not write over its
    input (the caller copies it first)."""
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
    counted = nword is not None
    extra = (nword[0].buffer,) if counted else ()
    fields = {"n": n, "tiles": tiles, "mask": key_mask(key_bits),
              "n_at": nword[0].offset + nword[1] if counted else 0}
    out = []
    hspec = hist_spec(key, counted)
    for step in radix_passes(ctx, keys, values, out_keys, out_values, payload, passes):
        push = dict(step.push, shift=step.index * BITS, **fields)
        out.append(Dispatch(hspec, (step.src.buffer, hist.buffer) + extra, hspec.pack(push), groups))
        out += scan
        sspec = scatter_spec(key, step.payload, counted)
        buffers = (step.src.buffer, scanned.buffer, step.dst.buffer) + step.payload_buffers + extra
        out.append(Dispatch(sspec, buffers, sspec.pack(push), groups))
    return out


@variants("radix_hist")
def _hist_variants():
    for key in KEY_DTYPES:
        for counted in (False, True):
            yield hist_spec(key, counted)


@variants("radix_scatter")
def _scatter_variants():
    for key in KEY_DTYPES:
        for payload in PAYLOADS:
            for counted in (False, True):
                yield scatter_spec(key, payload, counted)
