"""Elementwise operations: one kernel family, ``map``, renders them all.

An elementwise op is data: a GLSL expression over the inputs ``x0, x1, x2``
(already converted to the compute type) and the push-constant scalar ``s``.
Two kernels per expression, chosen by :func:`plan_map`:

- ``contig``: every operand contiguous and same-shaped; loads and stores
  vec4 (or vec2) when the size and every offset allow, else scalars.
- ``strided``: any views and numpy broadcasting; the index is decomposed
  over up to 4 (or 6) coalesced dims whose sizes and strides are push
  constants, so new shapes never create a pipeline.

Expressions that need more than one GLSL expression (NaN-aware maximum,
integer floor division...) bring *helpers*: GLSL function text rendered
before ``main`` (with vec2/vec4 overloads for the vector widths) and kept in
the spec like everything else. Ops with two scalar operands (clamp) use
``s`` and ``t``.
"""
from __future__ import annotations

import math
import re

from ..dtypes import DType, as_dtype, host_scalar
from ..errors import InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import F16_EXTENSIONS, LINEAR_INDEX, U8_EXTENSIONS
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import (Dispatch, OpResult, broadcast_shapes, broadcast_strides, check_dtype,
                   check_out, check_tensor, coalesce, op, same_dtype)
from .memo import LIMIT, scalar_key, store_bounded
from ..tensor import Tensor
from .windows import POINTWISE

COMPUTE_TYPE = {"float": "float", "int": "int", "uint": "uint", "complex": "vec2"}
WORKGROUP = 128


def compute_vec(d: DType, width: int) -> str:
    base = COMPUTE_TYPE[d.kind]
    if width == 1:
        return base
    return {"float": "vec", "int": "ivec", "uint": "uvec"}[d.kind] + str(width)


def storage_extensions(dtypes) -> tuple:
    """GLSL extensions a kernel on tensors of ``dtypes`` needs (16/8-bit storage)."""
    exts = []
    if any(d.name == "float16" for d in dtypes):
        exts += F16_EXTENSIONS
    if any(d.name == "uint8" for d in dtypes):
        exts += U8_EXTENSIONS
    return tuple(dict.fromkeys(exts))


def storage_features(dtypes) -> tuple:
    """Host features a kernel on tensors of ``dtypes`` needs (a KernelSpec's ``features``)."""
    return tuple(sorted({d.feature for d in dtypes if d.feature}))


@family("map")
def _render_map(spec: KernelSpec) -> str:
    expr = re.sub(r"\bs\b", "pc.s", spec.param("expr"))
    if spec.param("nscalars", 1) == 2:
        expr = re.sub(r"\bt\b", "pc.t", expr)
    in_types = [as_dtype(n) for n in spec.param("inputs")]
    out_type = as_dtype(spec.param("output"))
    mode = spec.param("mode")
    width = spec.param("width", 1)
    lines = [spec.param("helpers")] if spec.param("helpers") else []
    lines += ["void main() {", f"  uint i = {LINEAR_INDEX};", "  if (i >= pc.n) return;"]
    if mode == "contig":
        idx = {k: f"pc.off{k} + i" for k in range(len(in_types))}
        out_idx = "pc.offo + i"
    else:
        rank = spec.param("rank")
        lines.append("  uint rem = i;")
        names = [f"o{k}" for k in range(len(in_types))] + ["oo"]
        offs = [f"pc.off{k}" for k in range(len(in_types))] + ["pc.offo"]
        for name, off in zip(names, offs):
            lines.append(f"  int {name} = int({off});")
        lines.append(f"  for (int d = {rank - 1}; d >= 0; --d) {{")
        lines.append("    uint c = rem % pc.shape[d]; rem /= pc.shape[d];")
        for k, name in enumerate(names):
            st = f"pc.st{k}" if k < len(in_types) else "pc.sto"
            lines.append(f"    {name} += int(c) * {st}[d];")
        lines.append("  }")
        idx = {k: f"o{k}" for k in range(len(in_types))}
        out_idx = "oo"
    for k, d in enumerate(in_types):
        lines.append(f"  {compute_vec(d, width)} x{k} = {compute_vec(d, width)}(in{k}[{idx[k]}]);")
    out_vec = out_type.vec(width)
    lines.append(f"  out0[{out_idx}] = {out_vec}({compute_vec(out_type, width)}({expr}));")
    lines.append("}")
    return "\n".join(lines)


# map_spec arguments -> KernelSpec, shared by every context: a pure function
# of its key (specs are few; building one is not free).
_SPECS: dict = {}


def map_spec(expr: str, in_types, out_type: DType, mode: str, width: int = 1, rank: int = 0,
             scalar: str = None, helpers=None, nscalars: int = 1) -> KernelSpec:
    """``helpers``: None or ``fn(width) -> GLSL text``, the same function
    object whenever the text is the same (``Helper.renderer`` keeps one per
    helper), since it is part of the cache key; ``nscalars``: 2 adds the
    push-constant scalar ``t`` (same type as ``s``)."""
    key = (expr, tuple(in_types), out_type, mode, width, rank, scalar, nscalars, helpers)
    spec = _SPECS.get(key)
    if spec is None:
        # The same spec object every time also makes the pipeline lookup an identity hit.
        spec = _SPECS[key] = _build_map_spec(expr, in_types, out_type, mode, width, rank, scalar, helpers,
                                             nscalars)
    return spec


def _build_map_spec(expr, in_types, out_type, mode, width, rank, scalar, helpers, nscalars) -> KernelSpec:
    bindings = tuple(Binding(f"in{k}", d.vec(width), READ) for k, d in enumerate(in_types))
    bindings += (Binding("out0", out_type.vec(width), WRITE),)
    push = [Push("n", "uint")]
    if mode == "contig":
        push += [Push(f"off{k}", "uint") for k in range(len(in_types))] + [Push("offo", "uint")]
    else:
        push.append(Push("shape", "uint", rank))
        for k in range(len(in_types)):
            push += [Push(f"off{k}", "uint"), Push(f"st{k}", "int", rank)]
        push += [Push("offo", "uint"), Push("sto", "int", rank)]
    if scalar:
        push.append(Push("s", scalar))
        if nscalars == 2:
            push.append(Push("t", scalar))
    all_types = list(in_types) + [out_type]
    params = [("expr", expr), ("inputs", tuple(d.name for d in in_types)),
              ("output", out_type.name), ("mode", mode), ("width", width), ("scalar", scalar or "")]
    if mode != "contig":
        params.append(("rank", rank))
    if helpers is not None:
        params.append(("helpers", helpers(width)))
    if nscalars != 1:       # only when used, so single-scalar specs keep their keys
        params.append(("nscalars", nscalars))
    return KernelSpec("map", bindings, tuple(push), tuple(params), (WORKGROUP, 1, 1),
                      storage_extensions(all_types), storage_features(all_types))


def _vec_width(n: int, offsets) -> int:
    for w in (4, 2):
        if n % w == 0 and all(o % w == 0 for o in offsets):
            return w
    return 1


# (layout key -> (spec, push bytes, groups)), shared by every context: a pure
# function of its key, which names the one device fact it reads (the
# workgroup count limit); bounded like the call memo.
_LAYOUT_PLANS: dict = {}


def plan_map(ctx, expr: str, inputs, out, out_dtype: DType, scalar=None, scalar_type=None,
             helpers=None) -> Dispatch:
    """The dispatch computing ``out = expr(inputs, s)`` with broadcasting.
    ``inputs`` and ``out`` are already validated tensors; ``scalar`` is one
    value or a pair ``(s, t)``.

    Everything but the buffers depends only on the views' layouts, so it is
    remembered per layout (``_LAYOUT_PLANS``): the same op on fresh tensors
    of a shape seen before skips the planning below."""
    key = (expr, out_dtype, scalar_type, helpers, ctx.limits.max_workgroup_count, scalar_key(scalar),
           out.shape, out.strides, out.offset, *((t.dtype, t.shape, t.strides, t.offset) for t in inputs))
    known = _LAYOUT_PLANS.get(key)
    if known is None:
        known = _plan_layout(ctx, expr, inputs, out, out_dtype, scalar, scalar_type, helpers)
        store_bounded(_LAYOUT_PLANS, key, known, LIMIT)
    spec, push, groups = known
    return Dispatch(spec, tuple(t.buffer for t in inputs) + (out.buffer,), push, groups)


def _plan_layout(ctx, expr, inputs, out, out_dtype, scalar, scalar_type, helpers) -> tuple:
    nscalars = 2 if isinstance(scalar, tuple) else 1
    n = out.size
    contiguous = all(t.is_contiguous and t.shape == out.shape for t in inputs) and out.is_contiguous
    if contiguous and _copies_words(expr, inputs, out_dtype):
        return _plan_layout(ctx, expr, [_float_words(t) for t in inputs], _float_words(out), as_dtype("float32"),
                            scalar, scalar_type, helpers)
    if contiguous:
        # A complex element is a vec2 already: no wider loads.
        complex_ = any(d.kind == "complex" for d in [t.dtype for t in inputs] + [out_dtype])
        w = 1 if complex_ else _vec_width(n, [t.offset for t in inputs] + [out.offset])
        spec = map_spec(expr, [t.dtype for t in inputs], out_dtype, "contig", w, scalar=scalar_type,
                        helpers=helpers, nscalars=nscalars)
        values = {"n": n // w, "offo": out.offset // w}
        values.update({f"off{k}": t.offset // w for k, t in enumerate(inputs)})
        invocations = n // w
    else:
        strides = [broadcast_strides(t, out.shape) for t in inputs] + [out.strides]
        shape, strides = coalesce(out.shape, strides)
        limit = 4 if len(inputs) >= 3 else 6
        if len(shape) > limit:
            raise ShapeError(f"elementwise op over {len(shape)} non-mergeable strided dims "
                             f"(at most {limit}); make an operand contiguous first")
        rank = 4 if len(shape) <= 4 else 6
        pad = rank - len(shape)
        spec = map_spec(expr, [t.dtype for t in inputs], out_dtype, "strided", 1, rank, scalar_type,
                        helpers, nscalars)
        values = {"n": n, "shape": (1,) * pad + tuple(shape), "offo": out.offset,
                  "sto": (0,) * pad + tuple(strides[-1])}
        for k, t in enumerate(inputs):
            values[f"off{k}"] = t.offset
            values[f"st{k}"] = (0,) * pad + tuple(strides[k])
        invocations = n
    if scalar_type:
        if nscalars == 2:
            values["s"], values["t"] = scalar
        else:
            values["s"] = scalar
    groups = groups_for(invocations, WORKGROUP, ctx.limits.max_workgroup_count)
    return spec, spec.pack(values), groups


def _copies_words(expr: str, inputs, out_dtype: DType) -> bool:
    """Whether the op is a plain copy of complex64 values, contiguous on
    both sides: it then moves float32 words, two a value, four at a time
    where the offsets allow, rather than a value (a vec2) at a time. (32
    complex64 1,024 x 1,024 planes: 222 us a value at a time on an H100,
    where a float32 copy of the same bytes took 180.)"""
    return (expr == "x0" and len(inputs) == 1 and inputs[0].dtype.kind == "complex"
            and out_dtype.kind == "complex")


def _float_words(t: Tensor) -> Tensor:
    """A contiguous complex64 tensor's memory as a 1-D float32 view."""
    return Tensor(t.buffer, (2 * t.size,), "float32", (1,), 2 * t.offset, base=t.base if t.base is not None else t)


def scalar_for(dtype: DType, value, what: str):
    """A Python number operand as (value, compute type) for the push
    constants. Like numpy 2 with a Python scalar, it takes the tensor's
    dtype; a value that dtype cannot hold raises (see host_scalar)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{what} must be a Python number, got {type(value).__name__}")
    return host_scalar(value, dtype, what), COMPUTE_TYPE[dtype.kind]


def output_tensor(ctx, out, shape, dtype: DType, inputs, allow_alias_exact=True):
    """Validate ``out=`` (or allocate it). An output may be exactly one of
    the inputs (in place) but must not partially overlap any of them."""
    if out is None:
        if math.prod(shape) == 0:
            return ctx.empty(shape, dtype)
        return ctx.empty(shape, dtype)
    return check_out(ctx, out, shape, dtype, inputs, in_place=allow_alias_exact)


def elementwise(ctx, expr: str, inputs, out=None, out_dtype=None, scalar=None, allowed=None,
                name="op", helpers=None) -> OpResult:
    """Validate, allocate and plan any elementwise op (used by all of them).
    ``scalar`` is a Python number or a pair of them (``s`` and ``t``).
    With ``out`` given the plan depends on nothing but the arguments, so the
    recorder may remember the call (ops/memo.CallMemo)."""
    inputs = [check_tensor(ctx, t, f"{name} input {k}") for k, t in enumerate(inputs)]
    dtype = same_dtype(inputs, name) if inputs else None
    if allowed is not None and dtype is not None:
        check_dtype(ctx, dtype, allowed, name)
    out_dtype = as_dtype(out_dtype) if out_dtype is not None else dtype
    shape = broadcast_shapes(*(t.shape for t in inputs))
    scalar_value = scalar_type = None
    if isinstance(scalar, tuple):
        pair = [scalar_for(dtype or out_dtype, v, f"{name} scalar") for v in scalar]
        scalar_value, scalar_type = (pair[0][0], pair[1][0]), pair[0][1]
    elif scalar is not None:
        scalar_value, scalar_type = scalar_for(dtype or out_dtype, scalar, f"{name} scalar")
    if out is None and not inputs:
        raise InvalidArgumentError(f"{name} needs out=")
    reusable = out is not None
    out = output_tensor(ctx, out, out.shape if (out is not None and not inputs) else shape, out_dtype, inputs)
    if out.size == 0:
        dispatches = []
    else:
        dispatches = [plan_map(ctx, expr, inputs, out, out_dtype, scalar_value, scalar_type, helpers)]
    return OpResult(out, dispatches, reusable=reusable)


# -- arithmetic, copy and fill ------------------------------------------------

NUMERIC = ("float32", "float16", "int32", "uint32")

BINARY = {"add": "x0 + x1", "sub": "x0 - x1", "mul": "x0 * x1"}


def _binary(name, expr):
    def binary_op(ctx, a, b, *, out=None):
        if not isinstance(b, Tensor) and isinstance(a, Tensor) and isinstance(b, (int, float)):
            return elementwise(ctx, expr.replace("x1", "s"), [a], out, scalar=b, allowed=NUMERIC, name=name)
        return elementwise(ctx, expr, [a, b], out, allowed=NUMERIC, name=name)
    binary_op.__name__ = name
    binary_op.__doc__ = (f"``out = a {expr[3]} b`` elementwise with numpy broadcasting; ``b`` may be "
                         "a Python number. Allocates ``out`` when omitted.")
    return binary_op


# The real-dtype planners: ops/complex_math.py registers add, sub and mul
# around them (complex64 operands go its way).
REAL_BINARY = {name: _binary(name, expr) for name, expr in BINARY.items()}


@op("scale", windows=POINTWISE)
def scale(ctx, x, factor, *, out=None):
    """``out = factor * x`` for a Python number ``factor``."""
    if factor is None:
        raise InvalidArgumentError("scale needs a Python number factor, got None")
    return elementwise(ctx, "x0 * s", [x], out, scalar=factor, allowed=NUMERIC, name="scale")


def copy_tensor(ctx, src, *, out=None):
    """Copy (and broadcast) tensor ``src`` into ``out``; views of any
    strides (the tensor half of ``rec.copy``, see ops/copy.py)."""
    return elementwise(ctx, "x0", [src], out, name="copy")


@op("fill", windows=POINTWISE)
def fill(ctx, out, value):
    """Set every element of ``out`` (any view) to ``value``."""
    out = check_tensor(ctx, out, "fill out")
    if value is None:
        raise InvalidArgumentError("fill needs a Python number value, got None")
    return elementwise(ctx, "s", [], out, out_dtype=out.dtype, scalar=value, name="fill")


def map_variants(expr: str, in_dtypes, out_dtype: DType, scalar: str = None, helpers=None,
                 nscalars: int = 1):
    """Every spec ``plan_map`` can produce for one expression and dtypes
    (complex64 operands: scalar loads only, a complex element is a vec2)."""
    widths = (1,) if any(d.kind == "complex" for d in [*in_dtypes, out_dtype]) else (1, 2, 4)
    for w in widths:
        yield map_spec(expr, in_dtypes, out_dtype, "contig", w, scalar=scalar, helpers=helpers,
                       nscalars=nscalars)
    ranks = (4,) if len(in_dtypes) >= 3 else (4, 6)
    for rank in ranks:
        yield map_spec(expr, in_dtypes, out_dtype, "strided", 1, rank, scalar, helpers, nscalars)


@variants("map")
def _arithmetic_variants():
    for name in NUMERIC:
        d = as_dtype(name)
        for expr in BINARY.values():
            yield from map_variants(expr, [d, d], d)
            yield from map_variants(expr.replace("x1", "s"), [d], d, d.kind)
        yield from map_variants("x0 * s", [d], d, d.kind)
    for name in NUMERIC + ("uint8",):
        d = as_dtype(name)
        yield from map_variants("x0", [d], d)
        yield from map_variants("s", [], d, d.kind)
