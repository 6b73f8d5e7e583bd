"""Running ONNX graphs with guestcompute's ops (the optional extra
``guestcompute[onnx]``; importing guestcompute never imports onnx).

    model = gc.onnx.load("net.onnx")          # a path, the model's bytes, or an onnx.ModelProto
    model.inputs, model.outputs               # names, shapes (symbolic dims as strings), dtypes
    bound = model.bind(ctx, dims={"batch": 64})   # or x=(64, 3): fixed shapes, tensors made once
    outs = bound(rec, x=x_tensor)             # records every node; {output name: guest tensor}

Files: graph.py reads the model (the only user of the onnx package);
table.py is the node-to-op table's machinery and the nodes_*.py / resize.py
files its rules; plan.py plans a graph for fixed shapes (folding constants
and shape subgraphs on the CPU); fuse_mlp.py replaces chains of dense
layers by one fused MLP op (``bind(..., mlp="auto"|"float16"|"float32"|"off")``,
``bound.fused`` names them); model.py holds OnnxModel and BoundModel.
A graph with a node no rule handles is refused by ``load`` (op type) or
``bind`` (an attribute, dtype or shape), naming the node, before anything
is made or recorded.
"""
from __future__ import annotations

from . import (nodes_activation, nodes_einsum, nodes_image, nodes_linear, nodes_logic, nodes_math,  # noqa: F401
               nodes_norm, nodes_pad, nodes_reduce, nodes_shape, resize)  # (each registers its rules)
from .graph import INSTALL_HINT, ValueInfo, as_model_proto, read_graph, require_onnx
from .model import BoundModel, OnnxModel
from .table import RULES

__all__ = ["load", "supported_ops", "OnnxModel", "BoundModel", "ValueInfo", "INSTALL_HINT", "require_onnx"]


def load(src) -> OnnxModel:
    """Read an ONNX model (a path, its bytes, or an ``onnx.ModelProto``) and
    check that guestcompute has a rule for every node (UnsupportedError
    naming the first that has none). Needs the onnx package
    (MissingDependencyError saying ``pip install guestcompute[onnx]``)."""
    return OnnxModel(read_graph(as_model_proto(src)))


def supported_ops() -> list:
    """The ONNX op types (default domain) guestcompute can run."""
    return sorted(RULES)
