"""Stream compaction: ``rec.compact(x, mask)`` (numpy's ``x[mask]``) and
``rec.nonzero(mask)`` (``np.flatnonzero(mask)``), each also writing the
number of elements kept into a 1-element uint32 GPU tensor.

Inputs on 16-byte boundaries with 4-byte values (or none: nonzero) take
ops/compact_vector.py's count-scan-scatter where the device has subgroup
arithmetic and ballots (measured faster on an H200 than the single pass
below, whose tiles wait on each other). The rest take these kernels.

Each workgroup owns a tile of ``wg * ITEMS`` elements; every thread tests
``ITEMS`` consecutive elements (bits of a uint), the workgroup scans the
threads' counts, and each thread writes its kept elements at the tile's
offset plus its exclusive count: a stable scatter, so the result keeps the
input order. The tile offsets come

- in one pass, where the device keeps started workgroups running
  (``limits.forward_progress``): tiles take tickets and find their offset
  by decoupled look-back over the tile counts (ops/scan_chained.py);
- otherwise in three: ``count`` writes each tile's count, the scan
  (ops/scan.py) turns them into inclusive sums, ``scatter`` writes.

The tile that holds the last element (tile 0 for an empty input) writes
the total. With ``count=`` (a 1-element tensor written earlier on the GPU)
only the first ``min(count, size)`` elements take part: the single-pass
grid is sized from it by an indirect dispatch, the multi-pass kernels
cover the capacity and read the count themselves.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch, OpResult, check_out, check_tensor, op, registered_ops
from .compact_vector import plan_vector_compact, use_vector_compact
from .elementwise import storage_extensions, storage_features
from .indirect import check_count
from .scan import plan_scan
from .scan_chained import (WG as CHAINED_WG, chained_shared, counted_length, look_back, plan_setup, publication,
                           spin_budget, take_ticket, use_chained)
from .scan_tiles import SUBGROUP_EXTENSIONS, Operand, group_scan, thread_rank, use_subgroups

ITEMS = 8                       # elements per thread (bits of one flags word)
PORTABLE_WG = 128               # Vulkan 1.0's guaranteed workgroup size
VALUE_DTYPES = ("float32", "int32", "uint32", "uint8", "float16")
MASK_DTYPES = ("uint8", "uint32", "int32", "float32")
# A mask element is true when nonzero; float32 masks are read as bits, so
# -0.0 is false and NaN is true (numpy's truthiness).
_TRUTH = {"uint8": "uint(mask[pc.mask_off + k]) != 0u", "word": "mask[pc.mask_off + k] != 0u",
          "float32": "(mask[pc.mask_off + k] & 0x7FFFFFFFu) != 0u"}
_GLSL = {"uint8": "uint8_t", "float16": "float16_t"}        # 4-byte dtypes: moved as 32-bit words
_STORAGE = {"uint8": "uint8", "float16": "float16", "float32": "float32", "word": "uint32"}


def kind(dtype: str) -> str:
    """How a kernel treats a dtype: "uint8", "float16", "float32" (a mask's
    truth differs) or "word" (other 4-byte dtypes)."""
    return dtype if dtype in ("uint8", "float16", "float32") else "word"


def _glsl(kind_: str) -> str:
    return _GLSL.get(kind_, "uint")


def _staged(kind_: str) -> bool:
    """4-byte operands move through shared memory: coalesced global access."""
    return kind_ in ("word", "float32")


def _stage_in(read: str, wg: int, items: int) -> str:
    """GLSL: the tile's elements ``read`` (of ``k``) into ``sdata`` with
    coalesced loads, for threads to read their ``items`` consecutive ones."""
    return f"""  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = tbase + t + j * {wg}u;
    sdata[P(t + j * {wg}u)] = k < n ? {read} : 0u;
  }}
  barrier();"""


def _flags(spec: KernelSpec, wg: int, items: int) -> str:
    """GLSL: this thread's ``flags`` (bit j: element start + j kept) and ``acc``."""
    mask = spec.param("mask")
    if not _staged(mask):
        test = _TRUTH[mask]
        load = ""
    else:
        test = "(sdata[P(q * %du + j)] & %s) != 0u" % (items, "0x7FFFFFFFu" if mask == "float32" else "0xFFFFFFFFu")
        load = _stage_in("mask[pc.mask_off + k]", wg, items) + "\n"
    return f"""{load}  uint flags = 0u, acc = 0u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + j;
    if (k < n && {test}) {{ flags |= 1u << j; ++acc; }}
  }}"""


def _write(spec: KernelSpec, wg: int, items: int) -> str:
    """GLSL: the kept elements to ``dst[base ...]``. Indices and 4-byte
    values are packed in shared memory first, then stored coalesced."""
    value = spec.param("value")
    if value and not _staged(value):
        return f"""  uint pos = base + prefix;
  for (uint j = 0u; j < {items}u; ++j) {{
    if ((flags & (1u << j)) != 0u) {{
      dst[int(pc.dst_off) + int(pos) * pc.dst_step] = src[pc.src_off + start + j];
      ++pos;
    }}
  }}"""
    if value:
        load = f"""  barrier();
{_stage_in("src[pc.src_off + k]", wg, items)}
  uint vals[{items}];
  for (uint j = 0u; j < {items}u; ++j) vals[j] = sdata[P(q * {items}u + j)];"""
        kept = "vals[j]"
    else:
        load, kept = "", "start + j"
    return f"""{load}
  barrier();
  uint r = prefix;
  for (uint j = 0u; j < {items}u; ++j) {{
    if ((flags & (1u << j)) != 0u) {{ sdata[r] = {kept}; ++r; }}
  }}
  barrier();
  for (uint i = t; i < s_total; i += {wg}u) dst[int(pc.dst_off) + int(base + i) * pc.dst_step] = sdata[i];"""


def _fallback_count(spec: KernelSpec, wg: int, items: int) -> str:
    truth = _TRUTH[spec.param("mask")]
    return f"""      for (uint j = 0u; j < {items * wg}u; j += {wg}u) {{
        uint k = fblock * {items * wg}u + t + j;
        if (k < n && {truth}) sum += 1u;
      }}"""


def _offset(spec: KernelSpec, wg: int, items: int) -> str:
    """GLSL: ``base``, the number of elements kept before this tile."""
    mode = spec.param("mode")
    if mode == "scatter":
        return "  uint base = tile == 0u ? 0u : incl[tile - 1u];"
    return f"""  if (tile == 0u) {{
    if (t == 0u) {{ publish(0u, 2u, s_total); s_carry = 0u; }}
  }} else {{
    if (t == 0u) publish(tile, 1u, s_total);
{look_back("uint", wg, "0u", _fallback_count(spec, wg, items))}
    if (t == 0u) publish(tile, 2u, carry + s_total);
  }}
  barrier();
  uint base = s_carry;"""


@family("compact")
def _render_compact(spec: KernelSpec) -> str:
    wg, items, mode = spec.workgroup[0], spec.param("items"), spec.param("mode")
    tile = items * wg
    n = counted_length(spec)
    head = ["#define P(i) ((i) + ((i) >> 5))", f"shared uint sdata[{tile + tile // 32}];",
            f"shared uint part[{wg}];"]
    if mode == "chained":
        head += [chained_shared("uint"), publication("uint")]
        first = f"{take_ticket()}\n  if (tile > last) return;"
    else:
        head.append("shared uint s_total, s_carry;")
        first = f"  uint tile = {WG_INDEX};\n  if (tile >= pc.nblocks) return;   // the grid covers the capacity"
    if mode == "count":
        finish = f"  if (q == {wg - 1}u) sums[tile] = prefix + acc;"
    else:
        finish = f"""{_offset(spec, wg, items)}
{_write(spec, wg, items)}
  if (tile == last && q == {wg - 1}u) total[pc.total_off] = base + prefix + acc;"""
    return f"""{chr(10).join(head)}
void main() {{
  uint t = gl_LocalInvocationID.x;
  uint n = {n};
  uint nblocks = n / {tile}u + uint(n % {tile}u != 0u);
  uint last = max(nblocks, 1u) - 1u;   // the tile that reports the total
{first}
{thread_rank(wg, spec.param("subgroup"))}
  uint tbase = tile * {tile}u, start = tbase + q * {items}u;
{_flags(spec, wg, items)}
{group_scan("uint", wg, spec.param("subgroup"))}
  if (q == {wg - 1}u) s_total = prefix + acc;
  barrier();
{finish}
}}"""


_PUSH = (Push("n", "uint"), Push("nblocks", "uint"), Push("mask_off", "uint"), Push("src_off", "uint"),
         Push("dst_off", "uint"), Push("dst_step", "int"), Push("total_off", "uint"), Push("count_off", "uint"),
         Push("spin_budget", "uint"))


def compact_spec(mode: str, mask: str, value: str, subgroup: bool, count: str = None) -> KernelSpec:
    """``mode``: "count", "scatter" or "chained"; ``mask``: its :func:`kind`;
    ``value``: the :func:`kind` of ``x`` (compact) or "" (nonzero: indices);
    ``count``: None or the dtype of a GPU-side count."""
    bindings = [Binding("mask", _glsl(mask), READ)]
    dtypes = [as_dtype(_STORAGE[mask])]
    if mode == "count":
        bindings.append(Binding("sums", "uint", WRITE))
        value = ""
    else:
        if value:
            bindings.append(Binding("src", _glsl(value), READ))
            dtypes.append(as_dtype(_STORAGE[value]))
        bindings.append(Binding("dst", _glsl(value) if value else "uint", WRITE))
        bindings.append(Binding("incl", "uint", READ) if mode == "scatter"
                        else Binding("state", "uint", READWRITE, qualifier="volatile"))
        bindings.append(Binding("total", "uint", WRITE))
    if count:
        bindings.append(Binding("cnt", "uint" if count == "uint32" else "int", READ))
    wg = CHAINED_WG if mode == "chained" else PORTABLE_WG
    extensions = storage_extensions(dtypes) + (SUBGROUP_EXTENSIONS if subgroup else ())
    features = tuple(sorted(set(storage_features(dtypes)) | ({"subgroup"} if subgroup else set())))
    return KernelSpec("compact", tuple(bindings), _PUSH,
                      (("mode", mode), ("mask", mask), ("value", value), ("subgroup", subgroup),
                       ("items", ITEMS), ("count", count or "")), (wg, 1, 1), extensions, features)


# -- planning ------------------------------------------------------------------------

def _flat(ctx, t) -> tuple:
    """(a contiguous 1-D view of ``t`` in C order, the dispatches of the
    copy that makes one when ``t`` is not contiguous)."""
    if t.is_contiguous:
        return t.reshape(t.size), []
    copied = registered_ops()["copy"](ctx, t)
    return copied.value.reshape(t.size), copied.dispatches


def _plan(ctx, mask, x, dst, total, count) -> list:
    """Dispatches compacting the flat ``mask`` (and ``x``, or indices) into
    ``dst``, with the number kept written to ``total``."""
    mkind = kind(mask.dtype.name)
    if use_vector_compact(ctx, mask, x, mkind, count):
        return plan_vector_compact(ctx, mask, x, dst, total, count, mkind)
    n = mask.size
    value = ("word" if kind(x.dtype.name) == "float32" else kind(x.dtype.name)) if x is not None else ""
    subgroup = use_subgroups(ctx)
    cdt = count.dtype.name if count is not None else None
    values = {"n": n, "mask_off": mask.offset, "src_off": x.offset if x is not None else 0,
              "dst_off": dst.offset, "dst_step": dst.strides[0], "total_off": total.offset,
              "count_off": count.offset if count is not None else 0, "spin_budget": spin_budget(ctx, False)}
    operands = (mask.buffer,) + ((x.buffer,) if x is not None else ()) + (dst.buffer,)
    counted = (count.buffer,) if count is not None else ()
    if use_chained(ctx, False):
        tile = CHAINED_WG * ITEMS
        state, grid, out = plan_setup(ctx, max(1, -(-n // tile)), n, tile, count)
        spec = compact_spec("chained", mkind, value, subgroup, cdt)
        d = Dispatch(spec, operands + (state.buffer, total.buffer) + counted, spec.pack(dict(values, nblocks=0)),
                     groups_for(max(1, -(-n // tile)) * CHAINED_WG, CHAINED_WG, ctx.limits.max_workgroup_count))
        if grid is not None:
            d.indirect = (grid.buffer, grid.offset * 4)
        return out + [d]
    tile = PORTABLE_WG * ITEMS
    nblocks = max(1, -(-n // tile))
    groups = groups_for(nblocks * PORTABLE_WG, PORTABLE_WG, ctx.limits.max_workgroup_count)
    values["nblocks"] = nblocks
    sums, incl = ctx.empty((nblocks,), "uint32"), ctx.empty((nblocks,), "uint32")
    cspec = compact_spec("count", mkind, "", subgroup, cdt)
    out = [Dispatch(cspec, (mask.buffer, sums.buffer) + counted, cspec.pack(values), groups)]
    row = (1, 1, 1, 1)
    out += plan_scan(ctx, Operand(sums, sums.offset, 1, (0,) * 4), Operand(incl, incl.offset, 1, (0,) * 4),
                     1, nblocks, row, "uint32", False)
    sspec = compact_spec("scatter", mkind, value, subgroup, cdt)
    return out + [Dispatch(sspec, operands + (incl.buffer, total.buffer) + counted, sspec.pack(values), groups)]


def _check_outputs(ctx, what, size, dtype, inputs, out, out_count, count):
    if out is not None:
        out = check_out(ctx, out, (size,), dtype, inputs, f"{what} out", in_place=False)
    if out_count is not None:
        out_count = check_out(ctx, out_count, None, "uint32", inputs + [out, count], f"{what} out_count",
                              in_place=False)
        if out_count.size != 1:
            raise ShapeError(f"{what} out_count must hold one element (e.g. shape (1,)), got {out_count.shape}")
    return out, out_count


def _check_mask(ctx, mask, what):
    mask = check_tensor(ctx, mask, f"{what} mask")
    if mask.dtype.name not in MASK_DTYPES:
        raise DTypeError(f"{what}: mask dtype {mask.dtype} not supported; use one of {list(MASK_DTYPES)} "
                         "(nonzero is true)")
    if mask.size >= 2 ** 31:
        raise InvalidArgumentError(f"{what}: more than 2**31 elements")
    return mask


def _result(ctx, what, x, mask, count, out, out_count, dtype, allowed) -> OpResult:
    """Checks the outputs, allocates the missing ones, plans."""
    if count is not None:
        count = check_count(ctx, count)
    out, out_count = _check_outputs(ctx, what, mask.size, allowed, [t for t in (x, mask) if t is not None],
                                    out, out_count, count)
    if out is None:
        out = ctx.empty((mask.size,), dtype)
    if out_count is None:
        out_count = ctx.empty((1,), "uint32")
    out_count = out_count.reshape((1,)) if out_count.ndim != 1 else out_count
    if mask.size == 0:
        return OpResult((out, out_count), registered_ops()["fill"](ctx, out_count, 0).dispatches)
    flat_mask, copies = _flat(ctx, mask)
    flat_x, x_copies = _flat(ctx, x) if x is not None else (None, [])
    dispatches = copies + x_copies
    return OpResult((out, out_count), dispatches + _plan(ctx, flat_mask, flat_x, out, out_count, count))


@op("compact", windows=None)
def compact(ctx, x, mask, *, count=None, out=None, out_count=None):
    """The elements of ``x`` where ``mask`` is nonzero, in order (numpy's
    ``x[mask]`` for ``x`` and ``mask`` of one shape, flattened in C order),
    and their number: returns ``(values, n)``. ``values`` has room for all
    of ``x`` (shape ``(x.size,)``, dtype of ``x``) and only its first ``n``
    elements are written; ``n`` is a 1-element uint32 tensor written on the
    GPU, ready to be the ``count=`` of a later op. ``x``: any 4-byte dtype,
    uint8 or float16; ``mask``: uint8, uint32, int32 or float32 (float NaN
    is true, -0.0 false). ``count`` (a 1-element uint32/int32 GPU tensor):
    only the first ``min(count, x.size)`` elements take part. ``out`` and
    ``out_count`` must not overlap the inputs."""
    x = check_tensor(ctx, x, "compact x")
    if x.dtype.name not in VALUE_DTYPES:
        raise DTypeError(f"compact: dtype {x.dtype} not supported; use one of {list(VALUE_DTYPES)}")
    mask = _check_mask(ctx, mask, "compact")
    if mask.shape != x.shape:
        raise ShapeError(f"compact: mask has shape {mask.shape}, x has shape {x.shape}; they must match")
    return _result(ctx, "compact", x, mask, count, out, out_count, x.dtype, x.dtype)


@op("nonzero", windows=None)
def nonzero(ctx, mask, *, count=None, out=None, out_count=None):
    """The flat (C-order) indices where ``mask`` is nonzero, in increasing
    order (numpy's ``np.flatnonzero(mask)``), as uint32 (``out`` may be
    uint32 or int32), and their number: returns ``(indices, n)`` like
    :func:`compact`, with the same ``count``, ``out_count`` and mask rules."""
    mask = _check_mask(ctx, mask, "nonzero")
    return _result(ctx, "nonzero", None, mask, count, out, out_count, "uint32", ("uint32", "int32"))


@variants("compact")
def _compact_variants():
    for subgroup in (False, True):
        for count in (None, "uint32", "int32"):
            for mask in ("uint8", "word", "float32"):
                yield compact_spec("count", mask, "", subgroup, count)
                for value in ("", "word", "uint8", "float16"):
                    for mode in ("scatter", "chained"):
                        yield compact_spec(mode, mask, value, subgroup, count)
