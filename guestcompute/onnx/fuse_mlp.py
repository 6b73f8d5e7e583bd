"""Fusing chains of dense layers into one fused MLP op (``rec.mlp``).

A *layer* is a Gemm (alpha = beta = 1, transA = 0, any transB) or a
MatMul followed by an Add of a per-column bias, then optionally an
activation: Relu, LeakyRelu, Sigmoid, Tanh, or SiLU written as
``Mul(h, Sigmoid(h))`` (how torch exports ``nn.SiLU``). Its weights and
bias must be constants and its input a float16/float32 value computed on
the GPU, shaped (..., in). Layers chain when one's output is read by the
next one's linear node alone; every value inside a chain must be read by
nothing else and must not be a graph output (its tensor disappears).

A chain is cut where a layer does not fit the fused network's widths
(ops/mlp.py: the input up to MAX_INPUT, every output up to MAX_WIDTH),
where its weights do not fit a float16 network's range, or where the
portable kernel would run more loop iterations than the driver
allows one invocation; the layers that fit no piece stay unfused. Each
piece becomes one step recording ``rec.mlp(x, net, out=y)`` with a network
made by ``ctx.mlp`` when the model is bound.

Precision (``mlp=`` of ``bind``): "auto" stores the network's weights in
the model's value dtype (a float32 model keeps fp32 arithmetic
throughout); "float16" and "float32" force the weights' dtype ("float16"
lets a float32 model use the tensor-core kernel); "off" fuses nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidArgumentError
from ..ops.mlp import MAX_INPUT, MAX_WIDTH, Dense, padded
from ..ops.mlp_kernels import fma_loop_iterations
from .graph import Node
from .table import FLOATS, Const, Plan, Step, Sym

MODES = ("auto", "float16", "float32", "off")
ACTIVATION_NODES = {"Relu": "relu", "LeakyRelu": "leaky_relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


@dataclass
class Layer:
    """One matched layer: its nodes' step indices, the value it reads and
    the value it writes, and its host weights ((in, out), float64)."""
    steps: list
    x: str
    y: str
    weight: np.ndarray
    bias: np.ndarray
    activation: str = "none"
    slope: float = 0.01
    names: list = field(default_factory=list)

    @property
    def widths(self) -> tuple:
        return self.weight.shape


class _Uses:
    """Who reads each value: the GPU steps (by index) and the graph outputs.
    Nodes folded on the CPU need no tensor of what they read (a Shape of a
    computed value folds from its known shape), so they do not count."""

    def __init__(self, graph, steps):
        self.readers = {}
        for i, step in enumerate(steps):
            for name in step.inputs:
                if name:
                    self.readers.setdefault(name, []).append(i)
        self.outputs = {o.name for o in graph.outputs}

    def only(self, name: str):
        """The one step index reading ``name`` when nothing else needs it."""
        r = self.readers.get(name, [])
        return r[0] if len(r) == 1 and name not in self.outputs else None

    def all(self, name: str) -> list:
        return [] if name in self.outputs else self.readers.get(name, [])


def check_mode(mode) -> str:
    if mode not in MODES:
        raise InvalidArgumentError(f"bind: mlp={mode!r}; use one of {list(MODES)}")
    return mode


def _arg(env, name):
    return env.get(name) if name else None


def _bias_vector(value: np.ndarray, n: int, max_ndim: int):
    """A constant that adds one value per output column, as an (n,) array
    (None when it adds anything else or would change the result's shape)."""
    if value.ndim > max_ndim or any(s != 1 for s in value.shape[:-1]):
        return None
    if value.ndim and value.shape[-1] not in (1, n):
        return None
    return np.broadcast_to(value.reshape(-1) if value.ndim else value, (n,)).astype(np.float64)


def _linear(step, env):
    """(x name, weight (in, out), bias or None) of a Gemm/MatMul step that can
    start a layer, else None."""
    node = step.node
    if node.op_type not in ("Gemm", "MatMul") or len(step.inputs) < 2:
        return None
    x, w = _arg(env, step.inputs[0]), _arg(env, step.inputs[1])
    if not isinstance(x, Sym) or x.dtype not in FLOATS or not isinstance(w, Const) or w.value.ndim != 2:
        return None
    weight = w.value.astype(np.float64)
    if 0 in weight.shape:
        return None
    if node.op_type == "MatMul":
        return step.inputs[0], weight, None
    a = node.attrs
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0 or a.get("transA", 0):
        return None
    if a.get("transB", 0):
        weight = weight.T
    c = _arg(env, step.inputs[2]) if len(step.inputs) > 2 else None
    if c is None:
        return step.inputs[0], weight, None
    bias = _bias_vector(c.value, weight.shape[1], 2) if isinstance(c, Const) else None
    return None if bias is None else (step.inputs[0], weight, bias)


def _matmul_bias(layer, steps, env, uses) -> None:
    """Take in the Add of a constant bias after a MatMul."""
    i = uses.only(layer.y)
    if i is None or steps[i].node.op_type != "Add" or len(steps[i].inputs) != 2:
        return
    other = [n for n in steps[i].inputs if n != layer.y]
    if len(other) != 1 or not isinstance(_arg(env, other[0]), Const):
        return
    bias = _bias_vector(env[other[0]].value, layer.weight.shape[1], len(env[layer.y].shape))
    if bias is not None:
        layer.bias = bias
        layer.steps.append(i)
        layer.y = steps[i].node.outputs[0]


def _silu(layer, steps, uses, sig: int) -> bool:
    """Take in ``Mul(h, Sigmoid(h))`` when ``sig`` is that Sigmoid."""
    s = steps[sig].node.outputs[0]
    mul = uses.only(s)
    readers = sorted(uses.all(layer.y))
    if mul is None or readers != sorted([sig, mul]) or steps[mul].node.op_type != "Mul":
        return False
    if sorted(steps[mul].inputs) != sorted([layer.y, s]):
        return False
    layer.steps += [sig, mul]
    layer.activation, layer.y = "silu", steps[mul].node.outputs[0]
    return True


def _activation(layer, steps, uses) -> None:
    readers = uses.all(layer.y)
    sigmoids = [i for i in readers if steps[i].node.op_type == "Sigmoid"]
    if len(readers) == 2 and len(sigmoids) == 1 and _silu(layer, steps, uses, sigmoids[0]):
        return
    i = uses.only(layer.y)
    if i is None or steps[i].node.op_type not in ACTIVATION_NODES:
        return
    node = steps[i].node
    layer.activation = ACTIVATION_NODES[node.op_type]
    layer.slope = float(node.attrs.get("alpha", 0.01))
    layer.steps.append(i)
    layer.y = node.outputs[0]


def match_layers(steps, env, uses) -> list:
    """Every layer the steps hold, in graph order."""
    layers, taken = [], set()
    for i, step in enumerate(steps):
        if i in taken:
            continue
        found = _linear(step, env)
        if found is None:
            continue
        x, weight, bias = found
        layer = Layer([i], x, step.node.outputs[0], weight,
                      bias if bias is not None else np.zeros(weight.shape[1]))
        if step.node.op_type == "MatMul":
            _matmul_bias(layer, steps, env, uses)
        _activation(layer, steps, uses)
        layer.names = [steps[k].node.name or steps[k].node.outputs[0] for k in layer.steps]
        taken.update(layer.steps)
        layers.append(layer)
    return layers


def chains(layers, steps, uses) -> list:
    """The layers grouped into chains (lists in order)."""
    by_linear = {layer.steps[0]: layer for layer in layers}
    follows = {}
    for layer in layers:
        nxt = by_linear.get(uses.only(layer.y))
        if nxt is not None and steps[nxt.steps[0]].inputs[0] == layer.y:
            follows[id(layer)] = nxt
    heads = [layer for layer in layers if all(f is not layer for f in follows.values())]
    result = []
    for head in heads:
        chain = [head]
        while id(chain[-1]) in follows:
            chain.append(follows[id(chain[-1])])
        result.append(chain)
    return result


def _fits(piece, loop_cap: int) -> bool:
    widths = tuple(padded(w) for w in (piece[0].widths[0],) + tuple(layer.widths[1] for layer in piece))
    return not loop_cap or fma_loop_iterations(widths) <= loop_cap // 2


def _holds(layer, dtype: str) -> bool:
    """The layer's weights fit the network's dtype (float16's range)."""
    if dtype != "float16":
        return True
    big = max(np.abs(layer.weight).max(), np.abs(layer.bias).max())
    return big <= np.finfo(np.float16).max


def split(chain, dtype: str, loop_cap: int) -> list:
    """The chain cut into pieces that fit the fused network: a layer too
    wide, or whose weights the dtype cannot hold, stays out."""
    pieces, piece = [], []
    for layer in chain:
        k, n = layer.widths
        fits = n <= MAX_WIDTH and _holds(layer, dtype)
        if piece and fits and _fits(piece + [layer], loop_cap):
            piece.append(layer)
            continue
        if piece:
            pieces.append(piece)
        piece = [layer] if fits and k <= MAX_INPUT and _fits([layer], loop_cap) else []
    return pieces + ([piece] if piece else [])


def network_dtype(mode: str, value_dtype: str) -> str:
    return value_dtype if mode == "auto" else mode


def fused_step(piece, env, dtype: str) -> Step:
    """One step recording the piece with ``rec.mlp``."""
    x, y = piece[0].x, piece[-1].y
    dense = [Dense(layer.weight, layer.bias, layer.activation, slope=layer.slope) for layer in piece]
    names = tuple(name for layer in piece for name in layer.names)
    node = Node(f"{names[0]}..{names[-1]}", "FusedMLP", [x], [y])

    def build(ctx):
        return [ctx.mlp(dense, dtype=dtype, accumulate="float32")]

    def record(rec, t):
        rec.mlp(t.ins[0], t.consts[0], out=t.outs[0])
    plan = Plan([Sym(tuple(env[y].shape), env[y].dtype)], record, uses=(0,), build=build)
    return Step(node, plan, [x], fused=names)


def fuse(graph, env, steps, mode: str, loop_cap: int = 0) -> list:
    """``steps`` with every chain that fits replaced by one fused step
    (placed where the chain's last node was)."""
    if mode == "off":
        return steps
    uses = _Uses(graph, steps)
    removed, placed = set(), {}
    for chain in chains(match_layers(steps, env, uses), steps, uses):
        dtype = network_dtype(mode, env[chain[0].x].dtype)
        for piece in split(chain, dtype, loop_cap):
            indices = [i for layer in piece for i in layer.steps]
            removed.update(indices)
            placed[max(indices)] = fused_step(piece, env, dtype)
    return [placed[i] if i in placed else step for i, step in enumerate(steps)
            if i in placed or i not in removed]
