"""Indirect dispatch: workgroup counts read from a GPU buffer an earlier op
wrote (a compaction count, a particle count), via vkCmdDispatchIndirect.

- ``rec.groups_from_count(count, items_per_group)``: a one-thread kernel
  turning an element count (a 1-element uint32/int32 tensor) into the
  ``(x, y, z)`` workgroup counts of a dispatch covering that many items,
  folded into y / z past ``maxComputeWorkGroupCount[0]`` exactly like
  ``groups_for`` folds host-sized grids (kernels rebuild the linear index
  with ``LINEAR_INDEX``).
- ``rec.dispatch_indirect(groups, op, *args, **kw)``: plans ``op`` as usual
  and records its dispatches with their counts taken from ``groups``.
- ``rec.dispatch_count(count, op, *args, **kw)``: both at once, for ops
  whose kernels index items linearly (the elementwise ``map`` family).

The op's own bound (the size of its tensors) still applies: indirect counts
only shrink the grid. Whole workgroups run, so the items of the last group
past ``count`` are processed too (up to ``items_per_group - 1`` of them) —
size buffers for the full capacity, as compaction does anyway.

The recorder puts the barrier between the op that wrote the counts and the
indirect dispatch (indirect-command read in the draw-indirect stage).
"""
from __future__ import annotations

import dataclasses
import math

from ..dtypes import uint32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.catalogue import variants
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family
from ..tensor import Tensor
from .base import Dispatch, OpResult, check_out, check_tensor, op, registered_ops

COUNT_DTYPES = ("uint32", "int32")

# Kernel families whose dispatches cover items linearly, with the number of
# items one workgroup handles: what dispatch_count needs to size the grid.
_LINEAR = {"map": lambda spec: math.prod(spec.workgroup) * spec.param("width", 1)}


@family("indirect_groups")
def _render_groups(spec: KernelSpec) -> str:
    read = "cnt[pc.count_off]" if spec.param("count") == "uint32" else "uint(max(cnt[pc.count_off], 0))"
    return f"""void main() {{
  uint c = {read};
  uint g = c / pc.per_group + uint(c % pc.per_group != 0u);
  uvec3 n = uvec3(0u, 1u, 1u);
  if (g > 0u) {{
    n.x = min(g, pc.max_x);
    uint rest = g / n.x + uint(g % n.x != 0u);
    n.y = min(rest, pc.max_y);
    n.z = min(rest / n.y + uint(rest % n.y != 0u), pc.max_z);
  }}
  out0[pc.out_off] = n.x;
  out0[pc.out_off + 1u] = n.y;
  out0[pc.out_off + 2u] = n.z;
}}"""


def groups_spec(count_dtype: str) -> KernelSpec:
    glsl = "uint" if count_dtype == "uint32" else "int"
    return KernelSpec("indirect_groups", (Binding("cnt", glsl, READ), Binding("out0", "uint", WRITE)),
                      (Push("count_off", "uint"), Push("out_off", "uint"), Push("per_group", "uint"),
                       Push("max_x", "uint"), Push("max_y", "uint"), Push("max_z", "uint")),
                      (("count", count_dtype),), (1, 1, 1))


@variants("indirect_groups")
def _all_groups():
    for d in COUNT_DTYPES:
        yield groups_spec(d)


def check_count(ctx, count) -> Tensor:
    count = check_tensor(ctx, count, "count")
    if count.dtype.name not in COUNT_DTYPES:
        raise DTypeError(f"count must be uint32 or int32, got {count.dtype}")
    if count.size != 1:
        raise ShapeError(f"count must hold one element (e.g. shape (1,)), got shape {count.shape}")
    return count


def _check_groups(ctx, groups) -> Tensor:
    groups = check_tensor(ctx, groups, "groups")
    if groups.dtype.name != "uint32":
        raise DTypeError(f"groups must be uint32 (x, y, z workgroup counts), got {groups.dtype}")
    if groups.shape != (3,) or not groups.is_contiguous:
        raise ShapeError(f"groups must be a contiguous uint32 tensor of shape (3,), got {groups.shape}")
    return groups


def _plan_groups(ctx, count: Tensor, items_per_group: int, out: Tensor) -> Dispatch:
    spec = groups_spec(count.dtype.name)
    mx, my, mz = ctx.limits.max_workgroup_count
    push = spec.pack({"count_off": count.offset, "out_off": out.offset, "per_group": items_per_group,
                      "max_x": mx, "max_y": my, "max_z": mz})
    return Dispatch(spec, (count.buffer, out.buffer), push, (1, 1, 1))


def _check_per_group(items_per_group) -> int:
    if isinstance(items_per_group, bool) or not isinstance(items_per_group, int) \
            or not 1 <= items_per_group < 2 ** 32:
        raise InvalidArgumentError(f"items_per_group must be a positive int, got {items_per_group!r}")
    return items_per_group


@op("groups_from_count", windows=None)
def groups_from_count(ctx, count, items_per_group, *, out=None):
    """Workgroup counts ``(x, y, z)`` (a uint32 tensor of shape (3,)) of a
    dispatch covering ``count[0]`` items at ``items_per_group`` items per
    workgroup, computed on the GPU; feed it to ``rec.dispatch_indirect``."""
    count = check_count(ctx, count)
    items_per_group = _check_per_group(items_per_group)
    if out is not None:
        out = check_out(ctx, out, (3,), uint32, [count], "groups_from_count out", in_place=False)
        if not out.is_contiguous:
            raise ShapeError("groups_from_count out must be a contiguous uint32 tensor of shape (3,)")
    else:
        out = ctx.empty((3,), "uint32")
    return OpResult(out, [_plan_groups(ctx, count, items_per_group, out)])


def _plan_op(ctx, fn, args, kwargs) -> OpResult:
    if isinstance(fn, str):
        found = registered_ops().get(fn)
        if found is None or fn in ("dispatch_indirect", "dispatch_count"):
            raise InvalidArgumentError(f"no operation {fn!r} to dispatch indirectly")
        fn = found
    if not callable(fn):
        raise InvalidArgumentError(f"op must be an op name or an op function, got {type(fn).__name__}")
    result = fn(ctx, *args, **kwargs)
    if not isinstance(result, OpResult):
        raise InvalidArgumentError("op must return an OpResult")
    return result


@op("dispatch_indirect", windows=None)
def dispatch_indirect(ctx, groups, fn, *args, **kwargs):
    """Record op ``fn`` (a name such as ``"add"`` or an op function) with
    ``*args, **kwargs``, taking every one of its dispatches' workgroup
    counts from ``groups`` (uint32 ``(x, y, z)``, e.g. from
    ``rec.groups_from_count``). Returns what the op returns."""
    groups = _check_groups(ctx, groups)
    result = _plan_op(ctx, fn, args, kwargs)
    where = (groups.buffer, groups.offset * 4)
    return OpResult(result.value, [dataclasses.replace(d, indirect=where) for d in result.dispatches])


@op("dispatch_count", windows=None)
def dispatch_count(ctx, count, fn, *args, **kwargs):
    """Record op ``fn`` over (about) the first ``count[0]`` items only, with a
    grid sized on the GPU from ``count`` (a 1-element uint32/int32 tensor an
    earlier op wrote): ``groups_from_count`` + ``dispatch_indirect`` with the
    op kernel's items per workgroup. For single-dispatch ops whose kernels
    index items linearly (elementwise ops)."""
    count = check_count(ctx, count)
    result = _plan_op(ctx, fn, args, kwargs)
    if not result.dispatches:
        return result
    if len(result.dispatches) != 1:
        raise UnsupportedError("dispatch_count takes ops that record one dispatch; use groups_from_count "
                               "and dispatch_indirect for others")
    d = result.dispatches[0]
    per_group = _LINEAR.get(d.spec.family)
    if per_group is None:
        raise UnsupportedError(f"kernel family {d.spec.family!r} does not index items linearly; size its "
                               "grid with groups_from_count and use dispatch_indirect")
    groups = ctx.empty((3,), "uint32")
    first = _plan_groups(ctx, count, per_group(d.spec), groups)
    return OpResult(result.value, [first, dataclasses.replace(d, indirect=(groups.buffer, 0))])
