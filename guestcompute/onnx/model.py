"""The loaded model and the model bound to a context.

``OnnxModel`` is the graph as read (no device): its inputs and outputs,
every node already checked against the table. ``model.bind(ctx, ...)``
fixes the input shapes, plans the graph (plan.py), uploads the constants
the GPU steps read once, and allocates one guest tensor per intermediate
value and output; the result, a ``BoundModel``, records the whole graph
with guestcompute ops each time it is called with a recorder — in direct
recording, in ``ctx.program(...)``, in ``ctx.run``.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError, WrongContextError
from ..tensor import Tensor
from .fuse_gelu import fuse_erf_gelu
from .fuse_mlp import check_mode
from .plan import check_supported, input_shapes, plan_graph
from .table import GUEST_DTYPES, Const, Tensors


class OnnxModel:
    """An ONNX graph, read and checked; bind it to a context to run it.
    ``inputs`` / ``outputs``: :class:`~guestcompute.onnx.graph.ValueInfo`
    (name, shape with symbolic dims as strings, ONNX dtype name);
    ``opset``: the default domain's opset version."""

    def __init__(self, graph):
        graph = fuse_erf_gelu(graph)          # before the check: its Erf has no rule of its own
        check_supported(graph)
        self.graph = graph
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        self.opset = graph.opset

    def __repr__(self):
        return (f"OnnxModel(inputs={[(i.name, i.shape, i.dtype) for i in self.inputs]}, "
                f"outputs={[(o.name, o.shape, o.dtype) for o in self.outputs]}, nodes={len(self.graph.nodes)})")

    def bind(self, ctx, dims: dict = None, mlp: str = "auto", **shapes) -> "BoundModel":
        """Plan the graph for fixed shapes and make its tensors on ``ctx``.
        ``shapes``: an input's whole shape by input name (``x=(8, 3)``);
        ``dims``: values of symbolic dims by name (``dims={"batch": 8}``).
        Inputs whose declared shape is fixed need neither. ``mlp``: how
        chains of dense layers fuse into ``rec.mlp`` (fuse_mlp.py): "auto"
        (weights in the model's dtype), "float16", "float32", or "off".
        Raises UnsupportedError naming the node (and the attribute or
        dtype) that cannot run, ShapeError for shapes that do not fit,
        before any tensor is made."""
        mode = check_mode(mlp)
        fixed = input_shapes(self.graph, shapes, dims or {})
        env, steps = plan_graph(self.graph, fixed, mode, ctx.limits.loop_iteration_cap)
        return BoundModel(ctx, self, fixed, env, steps)


def to_guest(array: np.ndarray, what: str) -> np.ndarray:
    """Host data in the guest dtype holding it (int64 as int32, checked)."""
    name = array.dtype.name
    if name not in GUEST_DTYPES:
        raise UnsupportedError(f"{what}: dtype {name} is not supported on the guest")
    if name == "int64" and array.size and (array.min() < -2 ** 31 or array.max() >= 2 ** 31):
        raise UnsupportedError(f"{what}: int64 values outside the int32 range")
    return np.array(array, dtype=GUEST_DTYPES[name], order="C")     # keeps 0-d arrays 0-d


class BoundModel:
    """A model planned for fixed input shapes, its tensors on one context.

    ``bound(rec, x=tensor, ...)`` records every node into ``rec`` and returns
    ``{output name: guest tensor}``. The output (and intermediate) tensors
    belong to the bound model and are the same on every call: a later call
    overwrites them (copy out what must survive it). ``input_shapes`` /
    ``input_dtypes``: what each input tensor must be (guest dtypes: an
    int64 model input is an int32 tensor); ``output_shapes``.
    ``run(**arrays)``: the standalone convenience (upload, ``ctx.run``,
    read back as numpy)."""

    def __init__(self, ctx, model, shapes, env, steps):
        self.ctx, self.model, self._steps = ctx, model, steps
        self.input_shapes = dict(shapes)
        self.fused = [step.fused for step in steps if step.fused]
        self.input_dtypes = {i.name: env[i.name].dtype for i in model.inputs}
        outs = [o.name for o in model.outputs]
        self.output_shapes = {name: tuple(env[name].shape) for name in outs}
        self._tensors = {}      # value name -> guest tensor made at bind
        self._uploads, self._scratch = [], []
        for step in steps:
            self._allocate(step, env)
        for name in outs:       # outputs folded to constants still come back as tensors
            if isinstance(env[name], Const) and name not in self._tensors:
                self._tensors[name] = ctx.tensor(to_guest(env[name].value, f"output {name!r}"))

    def _allocate(self, step, env):
        plan, label = step.plan, step.node.label()
        uses = plan.uses if plan.uses is not None else tuple(k for k, n in enumerate(step.inputs) if n)
        step.uses = uses
        for k in uses:
            name = step.inputs[k]
            if isinstance(env[name], Const) and name not in self._tensors:
                self._tensors[name] = self.ctx.tensor(to_guest(env[name].value, f"{label} input {name!r}"))
        if plan.view is None:
            for name, sym in zip(step.node.outputs, plan.outputs):
                self._tensors[name or f"{label} unused output"] = self.ctx.empty(sym.shape, sym.dtype)
        made = list(plan.build(self.ctx)) if plan.build is not None else []
        self._uploads.append([self.ctx.tensor(to_guest(a, f"{label} constant")) for a in plan.uploads] + made)
        self._scratch.append([self.ctx.empty(s, d) for s, d in plan.scratch])

    def _check_inputs(self, inputs: dict) -> dict:
        expected = self.input_shapes
        missing, extra = sorted(set(expected) - set(inputs)), sorted(set(inputs) - set(expected))
        if missing or extra:
            raise InvalidArgumentError(f"model inputs: missing {missing}, unknown {extra}; the model "
                                       f"takes {sorted(expected)}")
        for name, t in inputs.items():
            if not isinstance(t, Tensor):
                raise InvalidArgumentError(f"model input {name!r} must be a guest Tensor, got "
                                           f"{type(t).__name__} (upload it with ctx.tensor)")
            if t.ctx is not self.ctx:
                raise WrongContextError(f"model input {name!r} belongs to another context")
            if t.shape != expected[name]:
                raise ShapeError(f"model input {name!r} has shape {t.shape}; the model was bound for "
                                 f"{expected[name]} (bind again for other shapes)")
            if t.dtype.name != self.input_dtypes[name]:
                raise DTypeError(f"model input {name!r} is {t.dtype.name}; the model takes "
                                 f"{self.input_dtypes[name]}")
            if not t.is_contiguous:
                raise ShapeError(f"model input {name!r} is a non-contiguous view; pass "
                                 "rec.contiguous(view)")
        return dict(inputs)

    def __call__(self, rec, **inputs) -> dict:
        """Record the graph into ``rec`` reading ``inputs`` (guest tensors by
        input name); returns the output tensors by output name. Every check
        (and every view) happens before the first op is recorded."""
        env = dict(self._tensors)
        env.update(self._check_inputs(inputs))
        steps = []
        for step, uploads, scratch in zip(self._steps, self._uploads, self._scratch):
            ins = [env[n] if k in step.uses else None for k, n in enumerate(step.inputs)]
            if step.plan.view is not None:
                for name, t in zip(step.node.outputs, step.plan.view(ins)):
                    env[name] = t
                continue
            outs = [env[n or f"{step.node.label()} unused output"] for n in step.node.outputs]
            steps.append((step.plan.record, Tensors(ins, outs, uploads, scratch)))
        for record, tensors in steps:
            record(rec, tensors)
        return {o.name: env[o.name] for o in self.model.outputs}

    def run(self, **arrays) -> dict:
        """Upload ``arrays`` (numpy, by input name), record and run the graph
        with ``ctx.run``, and return the outputs as numpy arrays."""
        tensors = {name: self.ctx.tensor(np.asarray(a, self.input_dtypes.get(name)))
                   for name, a in arrays.items()}
        outs = self.ctx.run(lambda rec: self(rec, **tensors))
        return {name: t.numpy() for name, t in outs.items()}
