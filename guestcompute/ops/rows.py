"""Row-wise kernels: a tensor seen as ``rows`` rows of ``row_len`` elements.

Reductions and normalizations split a tensor's dims into *kept* dims (which
row) and *reduced* dims (which element of the row), for any strided view
and any set of axes: no copy to make the reduced axes contiguous or last.
Both groups are coalesced (dims contiguous in every operand merge, size-1
dims drop), so the common cases are one or two dims each; their sizes and
per-operand strides travel as push constants, so new shapes never create a
pipeline. Kept dims are padded to :data:`KEPT_RANK`; reduced dims to 1 (a
single stride: the common case, no index decomposition per element) or
:data:`RED_RANK`.

This module holds that split, the push-constant fields it needs and the GLSL
that turns a row number and an element number into buffer indices, plus the
shared-memory tree reduction the row kernels use (plain ``barrier()`` and
``shared`` memory, so it runs on bare Vulkan 1.0 devices).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ShapeError
from ..kernels.spec import Push
from .base import coalesce

KEPT_RANK = 4
RED_RANK = 4

# Linear workgroup index for grids folded by spec.groups_for().
@dataclass(frozen=True)
class Rows:
    """A tensor's dims split into rows × row elements, coalesced and padded.
    ``kst[k]`` / ``rst[k]`` are operand k's strides over the kept / reduced
    dims (in elements)."""
    rows: int
    row_len: int
    kshape: tuple
    kst: tuple
    rshape: tuple
    rst: tuple

    @property
    def rrank(self) -> int:
        return len(self.rshape)

    def values(self, offsets, reduced: int) -> dict:
        """Push-constant values for :func:`rows_push` with these offsets."""
        v = {"rows": self.rows, "row_len": self.row_len, "kshape": self.kshape}
        if self.rrank > 1:
            v["rshape"] = self.rshape
        for k, off in enumerate(offsets):
            v[f"off{k}"] = off
            v[f"kst{k}"] = self.kst[k]
            if k < reduced:
                v[f"rst{k}"] = self.rst[k] if self.rrank > 1 else self.rst[k][0]
        return v


def split_rows(shape: tuple, axes: tuple, strides_list: list, what: str) -> Rows:
    """Split ``shape`` into kept dims and the reduced ``axes``; ``strides_list``
    holds every operand's strides aligned to ``shape`` (0 where an operand
    does not move along a dim)."""
    kept = [d for d in range(len(shape)) if d not in axes]
    kshape, kst = coalesce(tuple(shape[d] for d in kept), [[s[d] for d in kept] for s in strides_list])
    rshape, rst = coalesce(tuple(shape[d] for d in axes), [[s[d] for d in axes] for s in strides_list])
    if len(kshape) > KEPT_RANK or len(rshape) > RED_RANK:
        raise ShapeError(f"{what}: the view has too many non-mergeable strided dims (at most "
                         f"{KEPT_RANK} kept and {RED_RANK} reduced); make it contiguous first")
    kpad = KEPT_RANK - len(kshape)
    rrank = 1 if len(rshape) == 1 else RED_RANK
    rpad = rrank - len(rshape)
    return Rows(rows=math.prod(shape[d] for d in kept), row_len=math.prod(shape[d] for d in axes),
                kshape=(1,) * kpad + tuple(kshape), kst=tuple((0,) * kpad + tuple(s) for s in kst),
                rshape=(1,) * rpad + tuple(rshape), rst=tuple((0,) * rpad + tuple(s) for s in rst))


def rows_push(operands: int, reduced: int, rrank: int) -> list:
    """Push fields for a row kernel over ``operands`` buffers, the first
    ``reduced`` of which move along the row."""
    push = [Push("rows", "uint"), Push("row_len", "uint"), Push("kshape", "uint", KEPT_RANK)]
    if rrank > 1:
        push.append(Push("rshape", "uint", rrank))
    for k in range(operands):
        push += [Push(f"off{k}", "uint"), Push(f"kst{k}", "int", KEPT_RANK)]
        if k < reduced:
            push.append(Push(f"rst{k}", "int", rrank))
    return push


def glsl_row_bases(operands: int, row: str = "row") -> str:
    """GLSL statements declaring ``int base<k>``: operand k's index of the
    first element of row ``row``."""
    decl = ", ".join(f"base{k} = int(pc.off{k})" for k in range(operands))
    adds = " ".join(f"base{k} += int(c) * pc.kst{k}[d];" for k in range(operands))
    return (f"  int {decl};\n"
            f"  uint rem = {row};\n"
            f"  for (int d = {KEPT_RANK - 1}; d >= 0; --d) {{\n"
            f"    uint c = rem % pc.kshape[d]; rem /= pc.kshape[d];\n"
            f"    {adds}\n"
            f"  }}")


def glsl_element_offset(rrank: int, reduced: int) -> str:
    """GLSL functions ``int elem<k>(uint r)``: operand k's index offset of
    element ``r`` of a row (row-major over the reduced dims)."""
    out = []
    for k in range(reduced):
        if rrank == 1:
            out.append(f"int elem{k}(uint r) {{ return int(r) * pc.rst{k}; }}")
        else:
            out.append(f"int elem{k}(uint r) {{\n  int o = 0;\n"
                       f"  for (int d = {rrank - 1}; d >= 0; --d) {{\n"
                       f"    o += int(r % pc.rshape[d]) * pc.rst{k}[d]; r /= pc.rshape[d];\n  }}\n"
                       f"  return o;\n}}")
    return "\n".join(out)


def loop_budget(limits) -> int:
    """Loop iterations a row kernel lets one invocation run in its sweeps
    over the row, or 0 for no limit. Drivers that stop an invocation's loops
    after ``limits.loop_iteration_cap`` iterations in all (lavapipe) get
    half of it: the rest is ample for the fixed loops (row bases, trees)."""
    return limits.loop_iteration_cap // 2


def row_chunks(row_len: int, sweeps: int, budget: int, workgroup: int) -> tuple:
    """(chunks, chunk_len): the fewest pieces of a row, each a multiple of
    ``workgroup`` long, that one workgroup sweeps ``sweeps`` times within
    ``budget`` iterations per invocation (``budget`` 0: one piece)."""
    longest = max(1, budget // sweeps) * workgroup if budget else row_len
    chunks = max(1, -(-row_len // longest))
    chunk_len = -(-row_len // chunks)
    chunk_len = -(-chunk_len // workgroup) * workgroup
    return -(-row_len // chunk_len) if row_len else 1, max(chunk_len, 1)


def glsl_tree(step: str, loads: str, stores: str) -> str:
    """Shared-memory tree over the workgroup (size a power of two): each
    round, the lower half combines its partner's value into its own with
    ``step`` after ``loads`` (reading the partner at ``lid + s``), then
    ``stores`` its result for the next round. Ends with a barrier, so
    every invocation may read slot 0 afterwards."""
    return (f"  {stores}\n  barrier();\n"
            f"  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {{\n"
            f"    if (lid < s) {{ {loads} {step} {stores} }}\n"
            f"    barrier();\n  }}")
