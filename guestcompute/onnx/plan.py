"""Planning a graph for fixed input shapes: every node's rule (table.py) is
asked, in graph order, what it becomes given its inputs — constants fold on
the CPU (shape subgraphs included), the rest become GPU steps of known
output shapes. Nothing touches the device here: a graph that cannot run
raises before any tensor is made."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError, ShapeError, UnsupportedError
from .fuse_mlp import fuse
from .table import RULES, Const, Plan, Step, Sym, guest_dtype

DEFAULT_DOMAINS = ("", "ai.onnx")


def check_supported(graph) -> None:
    """Raise UnsupportedError naming the first node no rule handles."""
    for node in graph.nodes:
        if node.domain not in DEFAULT_DOMAINS:
            raise UnsupportedError(f"{node.label()}: domain {node.domain!r} is not supported "
                                   "(only the default ONNX domain)")
        if node.op_type not in RULES:
            raise UnsupportedError(f"{node.label()}: op type {node.op_type} is not supported; "
                                   f"supported: {', '.join(sorted(RULES))}")


def input_shapes(graph, shapes: dict, dims: dict) -> dict:
    """Each graph input's concrete shape: ``shapes[name]`` where given, else
    its declared shape with symbolic dims looked up in ``dims``."""
    unknown = sorted(set(shapes) - {i.name for i in graph.inputs})
    if unknown:
        raise InvalidArgumentError(f"bind: {unknown} are not inputs of the model; its inputs are "
                                   f"{[i.name for i in graph.inputs]}")
    result = {}
    for info in graph.inputs:
        shape = shapes.get(info.name, info.shape)
        if shape is None:
            raise ShapeError(f"bind: input {info.name!r} has no shape in the model; pass "
                             f"{info.name}=(...) to bind")
        shape = tuple(dims.get(s, s) if isinstance(s, str) else s for s in shape)
        if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape):
            missing = [s for s in shape if isinstance(s, str)]
            raise ShapeError(f"bind: input {info.name!r} has shape {shape}; give the symbolic dims "
                             f"{missing} (dims={{...}}) or the whole shape ({info.name}=(...))")
        declared = info.shape
        if declared is not None and (len(declared) != len(shape) or any(
                isinstance(d, int) and d != s for d, s in zip(declared, shape))):
            raise ShapeError(f"bind: input {info.name!r} is declared {declared}, got {shape}")
        result[info.name] = tuple(int(s) for s in shape)
    return result


def _node_args(node, env):
    args = []
    for name in node.inputs:
        if not name:
            args.append(None)
        elif name not in env:
            raise InvalidArgumentError(f"{node.label()}: input {name!r} is produced by no node, "
                                       "initializer or graph input")
        else:
            args.append(env[name])
    while args and args[-1] is None:
        args.pop()
    return args


def plan_graph(graph, shapes: dict, mlp: str = "auto", loop_cap: int = 0):
    """``(env, steps)``: ``env`` maps every value name to a Const or Sym,
    ``steps`` the GPU steps in order. ``shapes``: from :func:`input_shapes`;
    ``mlp``: the fusion mode (fuse_mlp.py); ``loop_cap``: the driver's
    loop iteration cap (0: none), which bounds a fused network's depth."""
    env = {name: Const(value) for name, value in graph.initializers.items()}
    for info in graph.inputs:
        env[info.name] = Sym(shapes[info.name], guest_dtype(_InputLabel(info.name), info.dtype))
    steps = []
    for node in graph.nodes:
        args = _node_args(node, env)
        result = RULES[node.op_type](node, args, graph.opset)
        outputs = result.outputs if isinstance(result, Plan) else result
        named = [o for o in node.outputs]
        if len(outputs) < len([o for o in named if o]):
            raise UnsupportedError(f"{node.label()}: only {len(outputs)} of its outputs are supported")
        for name, value in zip(named, outputs):
            if name:
                env[name] = value
        if isinstance(result, Plan):
            steps.append(Step(node, result, list(node.inputs)))
    # Passes over the steps run here, before anything is allocated.
    return env, fuse(graph, env, steps, mlp, loop_cap)


class _InputLabel:
    """Stands in for a node in the dtype error of a graph input."""

    def __init__(self, name):
        self.name = name

    def label(self) -> str:
        return f"graph input {self.name!r}"
