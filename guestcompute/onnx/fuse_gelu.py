"""The erf form of GELU, written out in elementary nodes, as one Gelu node.

ONNX has a Gelu op only from opset 20; before it, exporters write
``nn.GELU()`` as ``0.5 * x * (1 + erf(x / sqrt(2)))`` — torch's TorchScript
exporter as Div, Erf, Add, Mul, Mul. guestcompute has no erf kernel of its
own, so this pass finds that pattern and puts one ``Gelu`` node
(approximate "none") in its place, which ``rec.gelu`` evaluates in one
dispatch (its erf form, within 1e-6 of the exact value). An Erf outside
the pattern is left alone, and the loader refuses it as unsupported.

The pattern, in any operand order of the commutative nodes::

    d = Div(x, sqrt(2))   or  Mul(x, 1/sqrt(2))
    e = Erf(d)
    a = Add(e, 1)
    y = Mul(Mul(x, a), 0.5)   or  Mul(Mul(x, 0.5), a)

with scalar float constants (initializers or Constant nodes) within 1e-6
of those values, and every value between ``x`` and ``y`` read by the
pattern alone and not a graph output.
"""
from __future__ import annotations

import math

import numpy as np

from .graph import Graph, Node

_TOLERANCE = 1e-6


class _Index:
    """The graph's producers, readers and scalar constants by value name."""

    def __init__(self, graph: Graph):
        self.producer, self.readers = {}, {}
        for node in graph.nodes:
            for name in node.outputs:
                self.producer[name] = node
            for name in node.inputs:
                self.readers.setdefault(name, []).append(node)
        self.constants = dict(graph.initializers)
        for node in graph.nodes:
            if node.op_type == "Constant" and "value" in node.attrs and node.outputs:
                self.constants[node.outputs[0]] = np.asarray(node.attrs["value"])
        self.outputs = {o.name for o in graph.outputs}

    def scalar(self, name: str):
        value = self.constants.get(name)
        if value is None or value.size != 1 or value.dtype.kind != "f":
            return None
        return float(value.reshape(()))

    def only_reader(self, name: str):
        """The one node reading ``name``, or None (several, none, or a graph output)."""
        readers = self.readers.get(name, [])
        if len(readers) != 1 or name in self.outputs:
            return None
        return readers[0]


def _near(value, want: float) -> bool:
    return value is not None and abs(value - want) <= _TOLERANCE * abs(want)


def _split(index: _Index, node: Node, op_type: str, want: float):
    """For a two-input ``op_type`` node with one scalar operand near
    ``want``: the other operand's name, else None."""
    if node is None or node.op_type != op_type or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if _near(index.scalar(b), want):
        return a
    if op_type in ("Mul", "Add") and _near(index.scalar(a), want):
        return b
    return None


def _other(node: Node, name: str):
    """The operand of a two-input node that is not ``name`` (None if neither or both are)."""
    if node is None or len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _match(index: _Index, erf: Node):
    """(x, the pattern's nodes, y) around ``erf``, or None."""
    scaled = index.producer.get(erf.inputs[0]) if erf.inputs else None
    if scaled is None or index.only_reader(erf.inputs[0]) is not erf:
        return None
    x = _split(index, scaled, "Div", math.sqrt(2.0)) or _split(index, scaled, "Mul", math.sqrt(0.5))
    add = index.only_reader(erf.outputs[0])
    if x is None or _split(index, add, "Add", 1.0) != erf.outputs[0]:
        return None
    outer = index.only_reader(add.outputs[0])
    if outer is None or outer.op_type != "Mul":
        return None
    other = _other(outer, add.outputs[0])
    if other == x:                                    # Mul(x, a), then Mul(., 0.5)
        half = index.only_reader(outer.outputs[0])
        if _split(index, half, "Mul", 0.5) != outer.outputs[0]:
            return None
        return x, [scaled, erf, add, outer, half], half.outputs[0]
    halved = index.producer.get(other) if other else None     # Mul(Mul(x, 0.5), a)
    if _split(index, halved, "Mul", 0.5) != x or index.only_reader(other) is not outer:
        return None
    return x, [halved, scaled, erf, add, outer], outer.outputs[0]


def fuse_erf_gelu(graph: Graph) -> Graph:
    """``graph`` with every erf-form GELU replaced by a Gelu node placed
    where the pattern's last node was (its input ``x`` is computed before)."""
    index = _Index(graph)
    position = {id(n): k for k, n in enumerate(graph.nodes)}
    replace, dropped = {}, set()
    for node in graph.nodes:
        if node.op_type != "Erf" or node.domain not in ("", "ai.onnx") or id(node) in dropped:
            continue
        found = _match(index, node)
        if found is None:
            continue
        x, nodes, y = found
        if any(id(n) in dropped for n in nodes):
            continue
        dropped.update(id(n) for n in nodes)
        last = max(nodes, key=lambda n: position[id(n)])
        replace[id(last)] = Node(node.name or y, "Gelu", [x], [y], {"approximate": "none"})
    if not replace:
        return graph
    nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) in replace or id(n) not in dropped]
    return Graph(nodes, graph.inputs, graph.outputs, graph.initializers, graph.opset)
