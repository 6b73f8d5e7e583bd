"""Reductions: sum mean max min over any axes, argmax argmin over one axis
or all, with ``keepdims``, for any strided view (see :mod:`.rows`).

One kernel family, ``reduce``, in two shapes chosen as data (:data:`KERNELS`,
first applicable wins; ``rows`` applies to everything, so no input is left
without a kernel):

- ``cols``: one invocation per output element looping over its row. Chosen
  for many short rows, and for many rows whose neighbours are neighbours in
  memory (reducing a non-innermost axis: adjacent invocations read adjacent
  addresses) unless the rows are long and too few to fill the device.
- ``rows``: one 128-wide workgroup per row; each invocation strides over the
  row, then a shared-memory tree combines the 128 partial results. When a
  few rows are very long, each row is split into chunks (one workgroup
  each, about :data:`TARGET_GROUPS` in all: enough to keep every SM of a
  big GPU streaming) writing partial results, and a second ``rows`` pass
  reduces them. When every row is contiguous and starts on a 16-byte
  boundary and its length is a multiple of 4 (``vec=4``), invocations load
  whole vec4s, four at a time before combining them, so a long loop keeps
  several loads in flight instead of waiting on each.

On a driver that caps an invocation's loop iterations (lavapipe, see
:func:`.rows.loop_budget`), ``cols`` takes only rows within the budget and
the ``rows`` kernel chunks every row one workgroup cannot sweep within it.

Semantics: float16 accumulates in float32; int32/uint32 sums wrap mod 2**32
(numpy's ``sum(dtype=int32)``); ``mean`` is for floats only. ``max``/``min``
propagate NaN and ``argmax``/``argmin`` return the first NaN, else the first
occurrence of the extreme, like numpy; their indices are uint32 (flat
row-major indices over the reduced axes when ``axis`` is None). Empty
``max``/``min``/``arg*`` reductions raise; an empty ``sum`` is 0 and an
empty ``mean`` is NaN.

Axes follow numpy 2 exactly (:func:`reduction_axes`): an int, a tuple of
distinct ints, ``()`` (reduce nothing) or None (everything) for sum, mean,
max and min; one int or None for argmax/argmin. A 0-d tensor reduces to
itself with ``axis`` 0, -1, ``()`` or None, and its argmax/argmin is 0 —
except that ``mean`` refuses 0 and -1 there, as numpy does; ``(0,)`` is out
of range everywhere. Bad axes raise the ShapeError of :func:`.base.normalize_axes`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..dtypes import as_dtype, float32, int32, uint32
from ..errors import DTypeError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import LINEAR_INDEX, WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import contiguous_strides
from .base import (Dispatch, OpResult, check_dtype, check_tensor, normalize_axes, normalize_axis,
                   op)
from .elementwise import COMPUTE_TYPE, NUMERIC, output_tensor, storage_extensions, storage_features
from .rows import (Rows, glsl_element_offset, glsl_row_bases, glsl_tree, loop_budget, row_chunks,
                   rows_push, split_rows)
from .windows import rowwise

WORKGROUP = 128        # a power of two: the tree halves it
CHUNK = 4096           # a row this long keeps one workgroup busy enough
TARGET_GROUPS = 2048   # split long rows until about this many workgroups run (~16 per SM
                       # of a 132-SM GPU: a full reduction must fill the device)
COLS_MIN_ROWS = 256    # fewer rows than this cannot fill a device one per invocation

ACC = {"float32": float32, "float16": float32, "int32": int32, "uint32": uint32}
_NEG_INF, _INF = "uintBitsToFloat(0xff800000u)", "uintBitsToFloat(0x7f800000u)"
IDENTITY = {
    ("sum", "float"): "0.0", ("sum", "int"): "0", ("sum", "uint"): "0u",
    ("max", "float"): _NEG_INF, ("max", "int"): "int(0x80000000u)", ("max", "uint"): "0u",
    ("min", "float"): _INF, ("min", "int"): "0x7fffffff", ("min", "uint"): "0xffffffffu",
}
# "a is strictly better than b"; NaN beats everything, as numpy's max and argmax treat it
BETTER = {
    ("max", "float"): "a > b || (isnan(a) && !isnan(b))",
    ("min", "float"): "a < b || (isnan(a) && !isnan(b))",
    ("max", "int"): "a > b", ("max", "uint"): "a > b",
    ("min", "int"): "a < b", ("min", "uint"): "a < b",
}


def _base_op(name: str) -> str:
    return name[3:] if name.startswith("arg") else name


@family("reduce")
def _render_reduce(spec: KernelSpec) -> str:
    name, mode, stage = spec.param("op"), spec.param("mode"), spec.param("stage")
    vec = spec.param("vec", 1)
    dtype, out = as_dtype(spec.param("dtype")), as_dtype(spec.param("out"))
    t = COMPUTE_TYPE[dtype.kind]
    base, arg = _base_op(name), name.startswith("arg")
    lines = [glsl_element_offset(spec.param("rrank"), 1)]
    if base != "sum":
        lines.append(f"bool better({t} a, {t} b) {{ return {BETTER[base, t]}; }}")
    if base == "sum":
        step = "acc += v;"
    elif arg:
        step = "if (better(v, acc) || (!better(acc, v) && vi < ai)) { acc = v; ai = vi; }"
    else:
        step = "if (better(v, acc)) acc = v;"
    load = f"{t} v = {t}(in0[at]);"
    if arg:
        load += " uint vi = ini[at];" if stage == "final" else " uint vi = r;"
    if stage == "partial":
        write = "outv[o] = acc; outi[o] = ai;"
    elif arg:
        write = "out0[o] = ai;"
    elif base == "sum" and t == "float":
        write = f"out0[o] = {out.glsl}(acc * pc.scale);"
    else:
        write = f"out0[o] = {out.glsl}(acc);"
    init = f"  {t} acc = {IDENTITY[base, t]};" + ("\n  uint ai = 0xffffffffu;" if arg else "")

    if mode == "cols":
        lines += ["void main() {", f"  uint row = {LINEAR_INDEX};", "  if (row >= pc.rows) return;",
                  glsl_row_bases(2), init,
                  "  for (uint r = 0u; r < pc.row_len; ++r) {",
                  f"    int at = base0 + elem0(r); {load} {step}", "  }",
                  f"  int o = base1; {write}", "}"]
        return "\n".join(lines)
    lines.append(f"shared {t} sv[gl_WorkGroupSize.x];")
    if arg:
        lines.append("shared uint si[gl_WorkGroupSize.x];")
    tree_load = f"{t} v = sv[lid + s];" + (" uint vi = si[lid + s];" if arg else "")
    tree_store = "sv[lid] = acc;" + (" si[lid] = ai;" if arg else "")
    lines += ["void main() {", f"  uint g = {WG_INDEX};",
              "  if (g >= pc.rows * pc.chunks) return;   // whole workgroups leave together",
              "  uint row = g / pc.chunks, chunk = g % pc.chunks;",
              glsl_row_bases(2), "  uint lid = gl_LocalInvocationID.x;",
              "  uint lo = chunk * pc.chunk_len, hi = min(pc.row_len, lo + pc.chunk_len);", init]
    if vec == 4:
        lines += _vec4_loop(t, dtype.vec(4), step, arg)
    else:
        lines += ["  for (uint r = lo + lid; r < hi; r += gl_WorkGroupSize.x) {",
                  f"    int at = base0 + elem0(r); {load} {step}", "  }"]
    lines += [glsl_tree(step, tree_load, tree_store),
              f"  if (lid == 0u) {{ int o = base1 + int(chunk * pc.cstride); {write} }}", "}"]
    return "\n".join(lines)


def _vec4_loop(t: str, vt: str, step: str, arg: bool) -> list:
    """The row loop over vec4s ``[lo, hi) / 4`` (both multiples of 4): four
    loads issued before any is combined, then single vec4s for the rest.
    Components are combined in element order, so the first of equal values
    keeps its index (arg ties also compare indices)."""
    W = "gl_WorkGroupSize.x"

    def combine(a: str, q: str) -> str:
        return " ".join(f"{{ {t} v = {t}({a}.{c});" + (f" uint vi = 4u * ({q}) + {k}u;" if arg else "")
                        + f" {step} }}" for k, c in enumerate("xyzw"))
    return ["  uint vb = uint(base0) >> 2u, q = lo / 4u + lid, qe = hi / 4u;",
            f"  for (; q + 3u * {W} < qe; q += 4u * {W}) {{",
            f"    uint q1 = q + {W}, q2 = q1 + {W}, q3 = q2 + {W};",
            f"    {vt} a0 = in0[vb + q], a1 = in0[vb + q1], a2 = in0[vb + q2], a3 = in0[vb + q3];",
            "    " + combine("a0", "q"), "    " + combine("a1", "q1"),
            "    " + combine("a2", "q2"), "    " + combine("a3", "q3"), "  }",
            f"  for (; q < qe; q += {W}) {{ {vt} a0 = in0[vb + q]; {combine('a0', 'q')} }}"]


def reduce_spec(name: str, dtype, out, mode: str, rrank: int, stage: str = "single",
                vec: int = 1) -> KernelSpec:
    """``stage``: "single" (in → out), or for arg ops "partial" (in → values
    and indices of row chunks) and "final" (those → indices). ``vec`` 4:
    rows mode over contiguous, 16-byte aligned rows of a multiple of 4."""
    acc = ACC[dtype.name]
    in0 = Binding("in0", dtype.vec(vec), READ)
    if stage == "partial":
        bindings = (in0, Binding("outv", acc.glsl, WRITE), Binding("outi", "uint", WRITE))
    elif stage == "final":
        bindings = (in0, Binding("ini", "uint", READ), Binding("out0", "uint", WRITE))
    else:
        bindings = (in0, Binding("out0", out.glsl, WRITE))
    push = rows_push(2, 1, rrank)
    if mode == "rows":
        push += [Push("chunks", "uint"), Push("chunk_len", "uint"), Push("cstride", "uint")]
    if _base_op(name) == "sum" and dtype.kind == "float":
        push.append(Push("scale", "float"))
    params = (("op", name), ("dtype", dtype.name), ("out", out.name), ("mode", mode),
              ("rrank", rrank), ("stage", stage)) + ((("vec", vec),) if vec != 1 else ())
    types = (dtype, out)
    return KernelSpec("reduce", bindings, tuple(push), params, (WORKGROUP, 1, 1),
                      storage_extensions(types), storage_features(types))


# -- choosing a kernel -----------------------------------------------------------

@dataclass(frozen=True)
class Kernel:
    mode: str
    applies: Callable[[Rows], bool]


def _neighbour_rows(L: Rows) -> bool:
    """Adjacent rows start at adjacent input elements (reducing a non-innermost axis)."""
    return L.kshape[-1] > 1 and abs(L.kst[0][-1]) == 1


def _cols_fit(L: Rows) -> bool:
    """Enough rows to fill the device one per invocation, and rows short
    enough (or so many) that one invocation per row is not a long serial loop."""
    if L.rows < COLS_MIN_ROWS:
        return False
    return L.row_len <= 32 or (_neighbour_rows(L) and (L.row_len <= 1024 or L.rows >= 8192))


KERNELS = (
    Kernel("cols", _cols_fit),
    Kernel("rows", lambda L: True),     # applies to everything: no input is left without a kernel
)


def choose_kernel(L: Rows, budget: int = 0) -> str:
    """``budget``: loop iterations an invocation may run (0: any), which
    one invocation per row (``cols``) must not pass."""
    return next(k.mode for k in KERNELS if k.applies(L) and not (k.mode == "cols" and budget and L.row_len > budget))


def chunking(L: Rows, budget: int = 0) -> tuple:
    """(chunks, chunk_len) for the rows kernel: split only a few long rows,
    and (``budget``) every row one workgroup cannot sweep within it."""
    if L.rows * 2 > TARGET_GROUPS or L.row_len < 2 * CHUNK:
        chunks, chunk_len = 1, max(L.row_len, 1)
    else:
        chunks = min(-(-L.row_len // CHUNK), TARGET_GROUPS // L.rows)
        chunk_len = -(-L.row_len // chunks)
        chunk_len = -(-chunk_len // WORKGROUP) * WORKGROUP
        chunks, chunk_len = -(-L.row_len // chunk_len), chunk_len
    if budget and -(-chunk_len // WORKGROUP) > budget:
        return row_chunks(L.row_len, 1, budget, WORKGROUP)
    return chunks, chunk_len


def vec_width(L: Rows, offset: int, chunk_len: int) -> int:
    """4 when the input's rows (operand 0) can be read as whole vec4s:
    contiguous, every row starting 16-byte aligned, length a multiple of 4."""
    aligned = offset % 4 == 0 and all(s % 4 == 0 for s, n in zip(L.kst[0], L.kshape) if n > 1)
    if L.rrank == 1 and L.rst[0][0] == 1 and L.row_len % 4 == 0 and chunk_len % 4 == 0 and aligned:
        return 4
    return 1


# -- planning --------------------------------------------------------------------

def _dispatch(ctx, spec, buffers, L: Rows, offsets, mode, chunks=1, chunk_len=None, cstride=0,
              scale=None) -> Dispatch:
    values = L.values(offsets, reduced=1)
    if mode == "rows":
        values.update(chunks=chunks, chunk_len=chunk_len or max(L.row_len, 1), cstride=cstride)
        groups = groups_for(L.rows * chunks * WORKGROUP, WORKGROUP, ctx.limits.max_workgroup_count)
    else:
        groups = groups_for(L.rows, WORKGROUP, ctx.limits.max_workgroup_count)
    if scale is not None:
        values["scale"] = scale
    return Dispatch(spec, tuple(buffers), spec.pack(values), groups)


def reduction_axes(name: str, axis, ndim: int) -> tuple:
    """The reduced axes, sorted, by numpy 2's rules for each reduction.

    ``argmax``/``argmin`` take one int or None (numpy refuses tuples). On a
    0-d tensor numpy lets the ufunc reductions (sum, max, min) and the arg
    ops take ``axis=0`` or ``-1`` as if the scalar were 1-d (the result is
    the scalar itself, or index 0), while ``mean`` refuses them; ``()`` and
    None reduce nothing there. Tuples like ``(0,)`` stay out of range.
    """
    if name.startswith("arg"):
        if axis is None:
            return tuple(range(ndim))
        if ndim == 0:
            normalize_axis(axis, 1, name)   # as numpy: the scalar counts as 1-d here
            return ()
        return (normalize_axis(axis, ndim, name),)
    scalar_axis = axis is not None and not isinstance(axis, (tuple, list))
    if ndim == 0 and scalar_axis and name != "mean":
        normalize_axis(axis, 1, name)       # 0 and -1 pass, anything else is refused
        return ()
    return tuple(sorted(normalize_axes(axis, ndim, name)))


def _reduce(ctx, name: str, x, axis, keepdims: bool, out, mean: bool = False) -> OpResult:
    x = check_tensor(ctx, x, f"{name} x")
    arg = name.startswith("arg")
    allowed = ("float32", "float16") if mean else NUMERIC
    if mean and x.dtype.kind != "float":
        raise DTypeError(f"mean is for float dtypes (numpy would return float64); "
                         f"cast {x.dtype} to float32 first")
    check_dtype(ctx, x.dtype, allowed, name)
    axes = reduction_axes(name, axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims \
        else tuple(x.shape[d] for d in kept)
    out_dtype = uint32 if arg else x.dtype
    if out is not None:
        out = output_tensor(ctx, out, out_shape, out_dtype, [x], allow_alias_exact=False)
    out_strides = out.strides if out is not None else contiguous_strides(out_shape)
    if keepdims:
        aligned = tuple(0 if d in axes else out_strides[d] for d in range(x.ndim))
    else:
        it = iter(out_strides)
        aligned = tuple(0 if d in axes else next(it) for d in range(x.ndim))
    L = split_rows(x.shape, axes, [x.strides, aligned], name)
    base = _base_op("sum" if mean else name)
    if L.row_len == 0 and L.rows > 0 and base != "sum":
        raise ShapeError(f"{name} of an empty axis has no identity (as in numpy)")
    if out is None:
        out = ctx.empty(out_shape, out_dtype)
    if L.rows == 0:
        return OpResult(out, [])
    op_name = "sum" if mean else name
    is_sum_float = base == "sum" and x.dtype.kind == "float"
    final_scale = None
    if is_sum_float:
        final_scale = (1.0 / L.row_len if L.row_len else float("nan")) if mean else 1.0

    budget = loop_budget(ctx.limits)
    mode = choose_kernel(L, budget)
    chunks, chunk_len = chunking(L, budget) if mode == "rows" else (1, None)
    vec = vec_width(L, x.offset, chunk_len) if mode == "rows" else 1
    if chunks == 1:
        spec = reduce_spec(op_name, x.dtype, out_dtype, mode, L.rrank, vec=vec)
        return OpResult(out, [_dispatch(ctx, spec, (x.buffer, out.buffer), L, (x.offset, out.offset),
                                        mode, chunk_len=chunk_len, scale=final_scale)])

    # Two passes: chunks of each row → partial results [rows, chunks] → out.
    acc = ACC[x.dtype.name]
    part_kst = tuple(s * chunks for s in contiguous_strides(L.kshape))
    first = Rows(L.rows, L.row_len, L.kshape, (L.kst[0], part_kst), L.rshape, L.rst)
    second = Rows(L.rows, chunks, L.kshape, (part_kst, L.kst[1]), (chunks,), ((1,), (0,)))
    values = ctx.empty((L.rows, chunks), acc)
    scale1 = 1.0 if is_sum_float else None
    if arg:
        indices = ctx.empty((L.rows, chunks), uint32)
        spec1 = reduce_spec(op_name, x.dtype, acc, "rows", L.rrank, "partial", vec)
        spec2 = reduce_spec(op_name, acc, uint32, "rows", 1, "final")
        bufs1, bufs2 = (x.buffer, values.buffer, indices.buffer), (values.buffer, indices.buffer, out.buffer)
    else:
        spec1 = reduce_spec(op_name, x.dtype, acc, "rows", L.rrank, vec=vec)
        spec2 = reduce_spec(op_name, acc, out_dtype, "rows", 1)
        bufs1, bufs2 = (x.buffer, values.buffer), (values.buffer, out.buffer)
    return OpResult(out, [
        _dispatch(ctx, spec1, bufs1, first, (x.offset, 0), "rows", chunks, chunk_len, 1, scale1),
        _dispatch(ctx, spec2, bufs2, second, (0, out.offset), "rows", scale=final_scale),
    ])


def _make(name: str, mean: bool = False):
    def reduce_op(ctx, x, axis=None, *, keepdims: bool = False, out=None):
        return _reduce(ctx, name, x, axis, keepdims, out, mean=mean)
    reduce_op.__name__ = name
    return reduce_op


_DOCS = {
    "sum": "Sum over ``axis`` (int, tuple or None = all); ints wrap, float16 accumulates in fp32.",
    "mean": "Mean over ``axis`` (int, tuple or None = all); float dtypes only.",
    "max": "Maximum over ``axis`` (int, tuple or None = all); NaN propagates.",
    "min": "Minimum over ``axis`` (int, tuple or None = all); NaN propagates.",
    "argmax": "uint32 index of the first maximum along ``axis`` (int, or None = flat index).",
    "argmin": "uint32 index of the first minimum along ``axis`` (int, or None = flat index).",
}
for _name, _doc in _DOCS.items():
    _fn = _make(_name, mean=_name == "mean")
    _fn.__doc__ = _doc + " ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted."
    # sum/max/min/mean over axis 0 combine partial reductions; argmax/argmin cannot.
    op(_name, windows=rowwise(combine=not _name.startswith("arg")))(_fn)


@variants("reduce")
def _reduce_variants():
    for name in NUMERIC:
        d = as_dtype(name)
        acc = ACC[name]
        for op_name in ("sum", "max", "min", "argmax", "argmin"):
            arg = op_name.startswith("arg")
            out = uint32 if arg else d
            for rrank in (1, 4):
                for mode in ("rows", "cols"):
                    yield reduce_spec(op_name, d, out, mode, rrank)
                yield reduce_spec(op_name, d, acc, "rows", rrank, "partial" if arg else "single")
            # vec4 loads: contiguous rows only (rrank 1), single pass or first of two
            yield reduce_spec(op_name, d, out, "rows", 1, vec=4)
            yield reduce_spec(op_name, d, acc, "rows", 1, "partial" if arg else "single", 4)
            if arg:
                yield reduce_spec(op_name, acc, uint32, "rows", 1, "final")
            else:
                yield reduce_spec(op_name, acc, d, "rows", 1)
