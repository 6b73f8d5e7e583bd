"""Kernels as data: an op lists its kernels as :class:`Candidate` s in
preference order and :func:`choose` walks them (matmul, the fused MLP).
Also the device needs every VK_KHR_cooperative_matrix kernel shares."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import InvalidArgumentError, UnsupportedError


@dataclass(frozen=True)
class Candidate:
    """A kernel as data. ``why_not(problem, device)``: None when the kernel
    can compute the problem correctly on the device, else the reason it
    cannot. ``unwise(problem, device)``: None when it is also a good choice
    (a preference, skipped when a kernel is forced by name). ``spec`` builds
    its spec."""
    name: str
    why_not: Callable
    spec: Callable
    unwise: Callable = lambda p, d: None


def choose(op_name: str, candidates: tuple, p, d, kernel: str = None) -> tuple:
    """(candidate name, KernelSpec) of the first of ``candidates`` that
    applies to problem ``p`` on device ``d`` and is a wise choice, or of the
    one named ``kernel`` (UnsupportedError when it does not apply). The
    last candidate must apply to every problem the op accepts."""
    named = {c.name: c for c in candidates}
    if kernel is not None:
        if kernel not in named:
            raise InvalidArgumentError(f"{op_name}: unknown kernel {kernel!r}; use one of {sorted(named)}")
        reason = named[kernel].why_not(p, d)
        if reason is not None:
            raise UnsupportedError(f"{op_name}: kernel {kernel!r} does not apply: {reason}")
        return kernel, named[kernel].spec(p, d)
    for c in candidates:
        if c.why_not(p, d) is None and c.unwise(p, d) is None:
            return c.name, c.spec(p, d)
    raise AssertionError(f"the last {op_name} candidate applies to every problem")  # pragma: no cover


def khr_fragments_why_not(acc: str, d, subgroup: int):
    """Why device ``d`` cannot run a kernel on VK_KHR_cooperative_matrix's
    16x16x16 fp16 fragments with ``acc`` accumulators, laid out for
    ``subgroup``-wide subgroups (None: it can); matmul's and the fused
    MLP's kernels share these needs."""
    if not d.coopmat_khr_shapes:
        return "the host did not enable VK_KHR_cooperative_matrix"
    if (16, 16, 16, acc) not in d.coopmat_khr_shapes:
        return f"the device reports no 16x16x16 fp16 fragment with a {acc} accumulator"
    if d.subgroup_size != subgroup:
        return f"the kernel is laid out for {subgroup}-wide subgroups"
    return None
