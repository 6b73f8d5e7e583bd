"""Reading an ONNX model into plain Python: nodes with their attributes as
Python values, initializers as numpy arrays, and the graph's inputs and
outputs with their (possibly symbolic) shapes.

This is the only module that touches the ``onnx`` package, and it imports
it when a model is read, not when guestcompute is imported: onnx is the
optional extra ``guestcompute[onnx]``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError

INSTALL_HINT = "pip install guestcompute[onnx]"


def require_onnx():
    """The ``onnx`` module, or MissingDependencyError naming the extra."""
    try:
        return importlib.import_module("onnx")
    except ImportError:
        raise MissingDependencyError(
            f"loading ONNX models needs the onnx package: {INSTALL_HINT}") from None


@dataclass(frozen=True)
class ValueInfo:
    """A graph input or output: ``shape`` holds ints for fixed dims and
    strings for symbolic ones (``"batch"``; ``"?"`` where the model names
    none); ``shape`` is None when the model gives no shape. ``dtype`` is
    the ONNX element type's numpy name (``"float32"``, ``"int64"``...)."""
    name: str
    shape: tuple | None
    dtype: str


@dataclass
class Node:
    name: str
    op_type: str
    inputs: list          # value names; "" marks an omitted optional input
    outputs: list
    attrs: dict = field(default_factory=dict)
    domain: str = ""

    def label(self) -> str:
        """How errors name the node: its name (or its first output) and op type."""
        return f"node {self.name or self.outputs[0]!r} ({self.op_type})"


@dataclass
class Graph:
    nodes: list
    inputs: list          # ValueInfo of the inputs the caller feeds (initializers excluded)
    outputs: list
    initializers: dict    # name -> numpy array
    opset: int            # the default domain's opset version


def _dtype_name(onnx, elem_type: int) -> str:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _value_info(onnx, info) -> ValueInfo:
    t = info.type.tensor_type
    shape = None
    if t.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                      for d in t.shape.dim)
    return ValueInfo(info.name, shape, _dtype_name(onnx, t.elem_type))


def _attributes(onnx, node) -> dict:
    attrs = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        if a.type == onnx.AttributeProto.TENSOR:
            value = onnx.numpy_helper.to_array(value)
        elif isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        attrs[a.name] = value
    return attrs


def as_model_proto(src):
    """A ModelProto from a path, the model's bytes, or a ModelProto."""
    onnx = require_onnx()
    if isinstance(src, onnx.ModelProto):
        return src
    if isinstance(src, (bytes, bytearray, memoryview)):
        return onnx.load_from_string(bytes(src))
    if isinstance(src, (str, Path)):
        return onnx.load(str(src))
    raise InvalidArgumentError(f"onnx.load: expected a path, bytes or an onnx.ModelProto, got {type(src).__name__}")


def read_graph(model) -> Graph:
    """The model's main graph as a :class:`Graph`."""
    onnx = require_onnx()
    g = model.graph
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    nodes = [Node(n.name, n.op_type, list(n.input), list(n.output), _attributes(onnx, n), n.domain)
             for n in g.node]
    inputs = [_value_info(onnx, i) for i in g.input if i.name not in initializers]
    outputs = [_value_info(onnx, o) for o in g.output]
    return Graph(nodes, inputs, outputs, initializers, opset)
