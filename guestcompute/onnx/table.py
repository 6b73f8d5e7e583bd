"""The node-to-op table: each supported ONNX op type has a *rule* that
turns one node, given what is known of its inputs at bind time, into either
constants (folded on the CPU) or a plan that records guestcompute ops.

A rule is ``rule(node, args, opset) -> list[Const] | Plan``. ``args`` holds
one entry per node input: a :class:`Const` (an initializer, a Constant
node, or a value folded from constants: the Shape → Gather → Concat →
Reshape chains exporters emit end up here), a :class:`Sym` (a guest tensor
of known shape and dtype, computed on the GPU), or None for an omitted
optional input. Rules check attributes and dtypes and raise
:class:`UnsupportedError` naming the node before anything is recorded.

Passes over the planned steps (plan.py, ``plan_graph``) may replace a
chain of steps whose intermediates nothing else reads by one step: the
fusion of Gemm/MatMul + Add + activation chains into the fused MLP op
(fuse_mlp.py) is one. The table itself stays one rule per op type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import UnsupportedError

# ONNX element types guestcompute holds, by numpy name -> guest dtype name.
# int64 (shapes, indices: what exporters write) is carried as int32 on the
# guest; its values must fit (checked where they are host data).
GUEST_DTYPES = {"float32": "float32", "float16": "float16", "int32": "int32", "int64": "int32",
                "uint32": "uint32", "uint8": "uint8", "bool": "uint8"}     # bool: a mask of 1s and 0s
FLOATS = ("float32", "float16")
NUMBERS = ("float32", "float16", "int32", "uint32")


@dataclass
class Const:
    """A value known on the CPU at bind time (a numpy array)."""
    value: np.ndarray

    @property
    def shape(self) -> tuple:
        return tuple(self.value.shape)


@dataclass
class Sym:
    """A guest tensor computed on the GPU: its shape and guest dtype name."""
    shape: tuple
    dtype: str


@dataclass
class Tensors:
    """What a plan's ``record`` gets: ``ins`` (one guest tensor per node
    input it uses, None for the others), ``outs``, ``consts`` (the plan's
    ``uploads``, uploaded once at bind) and ``scratch`` tensors."""
    ins: list
    outs: list
    consts: list
    scratch: list


@dataclass
class Plan:
    """A node that runs on the GPU. ``record(rec, t: Tensors)`` records it
    with guestcompute ops into ``t.outs``; a ``view`` plan instead returns
    its outputs as views of its inputs (``view(ins) -> list``) and records
    nothing. ``uses``: the input positions ``record`` reads as guest
    tensors (None: every input that is present); constants among them are
    uploaded once at bind. ``uploads``: extra host arrays it needs on the
    GPU (index tables, weights rearranged at bind); ``scratch``: (shape,
    dtype) of work tensors it owns. ``build(ctx) -> list``: guest objects it
    makes when bound (a fused step's ``ctx.mlp`` network), following the
    uploads in ``t.consts``."""
    outputs: list
    record: Callable | None = None
    view: Callable | None = None
    uses: tuple | None = None
    uploads: list = field(default_factory=list)
    scratch: list = field(default_factory=list)
    build: Callable | None = None


@dataclass
class Step:
    """A planned GPU step: the node (for a fused step, a stand-in whose
    inputs and outputs are the chain's), its plan, the value names it
    reads ("" where omitted); ``fused``: the names of the nodes a fused
    step replaces (empty for a node's own step)."""
    node: object
    plan: Plan
    inputs: list
    fused: tuple = ()


RULES: dict = {}


def rule(*op_types: str):
    """Register ``fn`` as the rule of ``op_types``."""
    def register(fn):
        for t in op_types:
            RULES[t] = fn
        return fn
    return register


def unsupported(node, what: str) -> UnsupportedError:
    """The typed error for a node guestcompute cannot run (raise it)."""
    return UnsupportedError(f"{node.label()}: {what}")


def attr(node, name: str, default=None):
    return node.attrs.get(name, default)


def only_attrs(node, allowed: dict) -> None:
    """Reject attributes whose value is not one the rule handles: ``allowed``
    maps an attribute name to a predicate of its value."""
    for name, ok in allowed.items():
        if name in node.attrs and not ok(node.attrs[name]):
            raise unsupported(node, f"attribute {name}={node.attrs[name]!r} is not supported")


def guest_dtype(node, dtype: str) -> str:
    """The guest dtype holding ONNX dtype ``dtype`` (a numpy name)."""
    if dtype not in GUEST_DTYPES:
        raise unsupported(node, f"dtype {dtype} is not supported (guest tensors hold "
                                f"{', '.join(sorted(GUEST_DTYPES))}; int64 as int32)")
    return GUEST_DTYPES[dtype]


def dtype_of(node, arg) -> str:
    """The guest dtype of an argument (a Const's numpy dtype mapped)."""
    return arg.dtype if isinstance(arg, Sym) else guest_dtype(node, arg.value.dtype.name)


def require_dtype(node, arg, allowed, what: str = "input") -> str:
    d = dtype_of(node, arg)
    if d not in allowed:
        raise unsupported(node, f"{what} dtype {d} is not supported here (takes {', '.join(allowed)})")
    return d


def const_input(node, args, k: int, what: str) -> np.ndarray:
    """Input ``k`` as host data; a value computed on the GPU is unsupported
    (shapes, axes and the like must be known at bind time)."""
    a = args[k] if k < len(args) else None
    if a is None:
        return None
    if not isinstance(a, Const):
        raise unsupported(node, f"{what} (input {k}) is computed on the GPU; it must be a constant "
                                "or foldable at bind time")
    return a.value


def broadcast_shape(node, *args) -> tuple:
    """numpy's broadcast of the arguments' shapes; unsupported where they do not broadcast."""
    shapes = [tuple(a.shape) for a in args]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise unsupported(node, f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def all_const(args) -> bool:
    return all(a is None or isinstance(a, Const) for a in args)


def norm_axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise unsupported(node, f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
