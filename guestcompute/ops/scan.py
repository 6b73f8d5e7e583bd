"""Prefix sums: ``rec.cumsum(x, axis=-1, exclusive=False)``.

A work-efficient multi-level scan, every row of the axis at once:

1. ``scan_block``: each workgroup scans one block of ``BLOCK`` elements of
   one row in shared memory (coalesced load, a serial scan of ``ITEMS``
   consecutive elements per thread, a Blelloch scan of the thread totals,
   coalesced store) and writes the block's total to a ``(rows, blocks)``
   scratch tensor;
2. the block totals are scanned (exclusively) by the same planner, which
   recurses while a row still has more than one block;
3. ``scan_add`` adds each block's scanned offset back into its elements.

The Blelloch step needs only shared memory and barriers, so it runs on a
bare Vulkan 1.0 device. Where the host enabled Vulkan 1.1 and the device
supports subgroup arithmetic in compute shaders, a variant replaces it with
``subgroupExclusiveAdd``; that variant checks at run time that the
workgroup is made of full subgroups and otherwise takes the shared-memory
path, so a device free to split workgroups oddly still gets right answers.

Rows longer than one block that are contiguous and 16-byte aligned take
the reduce-then-scan over vectors of ops/scan_vector.py where the device
has subgroup arithmetic. Other long rows, where the device keeps started
workgroups running (``limits.forward_progress``), take the single-pass
chained scan of ops/scan_chained.py (in place only where no loop cap
forces its fallback); this multi-level scan is the portable variant. ``count=`` (1-D): the kernels read the length from a
GPU tensor.

Rows are addressed through push constants (offset, axis stride, up to four
coalesced row dims with their strides), so any strided view works and new
shapes never create pipelines. Integer sums wrap like C (numpy's
``np.cumsum(x, dtype=x.dtype)``).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import contiguous_strides
from .base import Dispatch, OpResult, check_out, check_tensor, coalesce, normalize_axis, op, overlaps
from .scan_tiles import (ROW_RANK, SUBGROUP_EXTENSIONS, Operand, blelloch,  # noqa: F401 (sort)
                         operand_push, row_base, tile_scan, tile_store, use_subgroups)
from .indirect import check_count
from .scan_chained import counted_length, plan_chained, use_chained
from .scan_vector import plan_vector_scan, use_vector_scan
from .windows import rowwise

WG = 128                  # threads per workgroup: Vulkan 1.0's guaranteed minimum
ITEMS = 8                 # elements per thread
BLOCK = WG * ITEMS        # elements per workgroup and per block total
DTYPES = ("float32", "int32", "uint32")


def _counted(bindings: tuple, push: tuple, count: str) -> tuple:
    """Bindings and push fields with those of a count tensor (``count``: its dtype) added."""
    if not count:
        return bindings, push
    return (bindings + (Binding("cnt", "uint" if count == "uint32" else "int", READ),),
            push + (Push("count_off", "uint"),))


@family("scan_block")
def _render_scan_block(spec: KernelSpec) -> str:
    T = as_dtype(spec.param("dtype")).glsl
    wg = spec.workgroup[0]
    items = spec.param("items")
    decls, body = tile_scan(T, wg, items, spec.param("exclusive"), spec.param("subgroup"))
    store_sum = ""
    if spec.param("sums"):
        store_sum = f"  if (q == {wg - 1}u) sums[wg] = prefix + acc;"
    return f"""{decls}
void main() {{
  uint wg = {WG_INDEX};
  if (wg >= pc.rows * pc.nblocks) return;
  uint row = wg / pc.nblocks, block = wg % pc.nblocks;
  uint t = gl_LocalInvocationID.x;
  uint n = {counted_length(spec)};
{row_base(("src", "dst"))}
  uint start = block * {items * wg}u;
{body}
{store_sum}
{tile_store(wg, items)}
}}"""


@family("scan_add")
def _render_scan_add(spec: KernelSpec) -> str:
    wg = spec.workgroup[0]
    items = spec.param("items")
    return f"""void main() {{
  uint wg = {WG_INDEX};
  if (wg >= pc.rows * pc.nblocks) return;
  uint row = wg / pc.nblocks, block = wg % pc.nblocks;
  if (block == 0u) return;          // the first block's offset is zero
  uint t = gl_LocalInvocationID.x;
  uint n = {counted_length(spec)};
{row_base(("dst",))}
  {as_dtype(spec.param("dtype")).glsl} add = offsets[wg];
  uint start = block * {items * wg}u;
  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t + j * {wg}u;
    if (k < n) dst[dstb + int(k) * pc.dst_step] += add;
  }}
}}"""


_COMMON_PUSH = (Push("n", "uint"), Push("nblocks", "uint"), Push("rows", "uint"),
                Push("row_shape", "uint", ROW_RANK))


def block_spec(dtype: str, exclusive: bool, sums: bool, subgroup: bool, count: str = None) -> KernelSpec:
    """``count``: None, or the dtype of a 1-element tensor bounding the row length."""
    T = as_dtype(dtype).glsl
    bindings = (Binding("src", T, READ), Binding("dst", T, WRITE))
    if sums:
        bindings += (Binding("sums", T, WRITE),)
    bindings, push = _counted(bindings, _COMMON_PUSH + operand_push("src") + operand_push("dst"), count)
    params = (("dtype", dtype), ("exclusive", exclusive), ("sums", sums), ("subgroup", subgroup), ("items", ITEMS))
    return KernelSpec("scan_block", bindings, push, params + ((("count", count),) if count else ()),
                      (WG, 1, 1), SUBGROUP_EXTENSIONS if subgroup else (),
                      ("subgroup",) if subgroup else ())


def add_spec(dtype: str, count: str = None) -> KernelSpec:
    T = as_dtype(dtype).glsl
    bindings, push = _counted((Binding("dst", T, READWRITE), Binding("offsets", T, READ)),
                              _COMMON_PUSH + operand_push("dst"), count)
    params = (("dtype", dtype), ("items", ITEMS)) + ((("count", count),) if count else ())
    return KernelSpec("scan_add", bindings, push, params, (WG, 1, 1))


def plan_scan(ctx, src: Operand, dst: Operand, rows: int, n: int, row_shape: tuple, dtype: str,
              exclusive: bool, count=None) -> list:
    """Dispatches scanning ``rows`` rows of ``n`` elements from ``src`` into
    ``dst`` (which may be the same view). Allocates its scratch tensors.
    ``count`` (a 1-element tensor): the kernels scan only the first
    min(count, n) elements of each row (blocks past them total zero)."""
    subgroup = use_subgroups(ctx)
    nblocks = -(-n // BLOCK)
    total = rows * nblocks
    if total * WG >= 2 ** 32:
        raise InvalidArgumentError(f"scan of {rows} rows x {n} elements is too large for one dispatch grid")
    groups = groups_for(total * WG, WG, ctx.limits.max_workgroup_count)
    common = {"n": n, "nblocks": nblocks, "rows": rows, "row_shape": row_shape}
    cdt = count.dtype.name if count is not None else None
    counted = (count.buffer,) if count is not None else ()
    if count is not None:
        common["count_off"] = count.offset
    values = dict(common, **src.push("src"), **dst.push("dst"))
    spec = block_spec(dtype, exclusive, nblocks > 1, subgroup, cdt)
    if nblocks == 1:
        return [Dispatch(spec, (src.tensor.buffer, dst.tensor.buffer) + counted, spec.pack(values), groups)]
    sums = ctx.empty((rows, nblocks), dtype)
    offsets = ctx.empty((rows, nblocks), dtype)
    out = [Dispatch(spec, (src.tensor.buffer, dst.tensor.buffer, sums.buffer) + counted, spec.pack(values), groups)]
    # The block totals of every row are a (rows, nblocks) contiguous array.
    sums_row_shape = (1,) * (ROW_RANK - 1) + (rows,)
    out += plan_scan(ctx, Operand.rows_of(sums, rows, nblocks), Operand.rows_of(offsets, rows, nblocks),
                     rows, nblocks, sums_row_shape, dtype, True)
    aspec = add_spec(dtype, cdt)
    out.append(Dispatch(aspec, (dst.tensor.buffer, offsets.buffer) + counted,
                        aspec.pack(dict(common, **dst.push("dst"))), groups))
    return out


@op("cumsum", windows=rowwise())
def cumsum(ctx, x, axis: int = -1, exclusive: bool = False, out=None, *, count=None):
    """Prefix sum of ``x`` along ``axis`` (float32, int32, uint32; any view).

    Inclusive by default (numpy's ``np.cumsum``); ``exclusive=True`` puts
    the sum of the *preceding* elements at each position (0 first).
    Integers wrap on overflow and keep their dtype, as
    ``np.cumsum(x, dtype=x.dtype)``. ``out`` may be ``x`` itself (in place)
    but must not partially overlap it. Float sums are tree-shaped, so they
    differ from numpy's sequential ones by rounding only.

    ``count`` (1-D ``x`` only): a 1-element uint32/int32 tensor, written
    earlier on the GPU; only the first ``min(count, x.size)`` elements are
    scanned and written, the rest of ``out`` is left as it was.
    """
    x = check_tensor(ctx, x, "cumsum input")
    if x.dtype.name not in DTYPES:
        raise DTypeError(f"cumsum: dtype {x.dtype} not supported; use one of {list(DTYPES)}")
    if not isinstance(exclusive, (bool, np.bool_)):
        raise InvalidArgumentError(f"cumsum: exclusive must be a bool, got {exclusive!r}")
    if x.ndim == 0:
        raise ShapeError("cumsum needs a tensor with at least one dimension")
    axis = normalize_axis(axis, x.ndim, "cumsum")
    if count is not None:
        count = check_count(ctx, count)
        if x.ndim != 1:
            raise ShapeError(f"cumsum: count= needs a 1-D tensor, got shape {x.shape}")
    if out is not None:
        out = check_out(ctx, out, x.shape, x.dtype, {"x": x, "count": count}, "cumsum out")
    others = [d for d in range(x.ndim) if d != axis]
    shape_rows = tuple(x.shape[d] for d in others)
    out_strides = out.strides if out is not None else contiguous_strides(x.shape)
    row_shape, (xs, os) = coalesce(shape_rows, [[x.strides[d] for d in others],
                                                [out_strides[d] for d in others]])
    if len(row_shape) > ROW_RANK:
        raise ShapeError(f"cumsum over a view with {len(row_shape)} non-mergeable other dims "
                         f"(at most {ROW_RANK}); copy it to a contiguous tensor first")
    if out is None:
        out = ctx.empty(x.shape, x.dtype)
    n, rows = x.shape[axis], x.size // max(x.shape[axis], 1)
    if x.size == 0:
        return OpResult(out, [])
    pad = ROW_RANK - len(row_shape)
    row_shape = (1,) * pad + tuple(row_shape)
    src = Operand(x, x.offset, x.strides[axis], (0,) * pad + tuple(xs))
    dst = Operand(out, out.offset, out.strides[axis], (0,) * pad + tuple(os))
    # Past one block: contiguous rows take the reduce-then-scan over vectors
    # (no waiting, memory speed), others the chained scan's one pass where
    # the device allows it, instead of block scans, totals and adds.
    if n <= BLOCK:
        plan = plan_scan
    elif count is None and use_vector_scan(ctx, src, dst):
        plan = plan_vector_scan
    else:
        plan = plan_chained if use_chained(ctx, overlaps(x, out)) else plan_scan
    return OpResult(out, plan(ctx, src, dst, rows, n, row_shape, x.dtype.name, bool(exclusive), count))


@variants("scan_block")
def _block_variants():
    for dtype in DTYPES:
        for exclusive in (False, True):
            for sums in (False, True):
                for subgroup in (False, True):
                    for count in (None, "uint32", "int32"):
                        yield block_spec(dtype, exclusive, sums, subgroup, count)


@variants("scan_add")
def _add_variants():
    for dtype in DTYPES:
        for count in (None, "uint32", "int32"):
            yield add_spec(dtype, count)
