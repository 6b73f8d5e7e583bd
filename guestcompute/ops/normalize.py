"""Row normalizations: softmax and log_softmax over any axis, layer_norm and
rms_norm over the last axis, for any strided view (see :mod:`.rows`).

One 128-wide workgroup per row, in a single dispatch: every invocation
strides over the row accumulating in fp32 (float16 is loaded into fp32), a
shared-memory tree combines the workgroup's partial results (``row_max`` /
``row_sum``), and a last sweep writes the row. Rows are read two or three
times instead of being staged in shared memory, so any row length works.
softmax reads a row only twice: one sweep keeps a running maximum and the
sum of ``exp(x - max)`` rescaled whenever the maximum grows, then the write
sweep. When both rows are contiguous, 16-byte aligned and a multiple of 4
long (``vec=4``) softmax moves whole vec4s. Rows of up to
``WORKGROUP * REGISTER_FLOATS`` elements are read only once: every
invocation keeps its share of the row in registers (``slots``) between the
reduction and the write, one DRAM read and one write per element.

On a driver that caps an invocation's loop iterations (lavapipe, see
:func:`.rows.loop_budget`), a row too long for one workgroup's sweeps is cut
into chunks of one workgroup each, in two dispatches: ``stage="stats"``
writes each chunk's partial statistics (softmax: its maximum and the sum of
``exp(x - max)``; layer_norm: its mean and sum of squared deviations, both
relative to the row's first element; rms_norm: its sum of squares), then
``stage="apply"`` has every chunk's workgroup merge its row's partials (the
chunks' deviations combined as in Chan et al.'s parallel variance) and
write its chunk.

Numerics: softmax subtracts the row maximum before ``exp`` (no overflow);
log_softmax is ``(x - max) - log(sum(exp(x - max)))``, subtracted in that
order (``x - (max + log(sum))`` would round the sum to the grid of ``x``'s
magnitude); layer_norm takes the mean and the biased variance of the row
*shifted by its first element* in two sweeps (the second over the
deviations, never E[x²] - E[x]², which cancels), so a large common offset
cancels exactly before anything is summed and rows near 1e4 or 1e6 are as
accurate as rows near 0; rms_norm is ``x / sqrt(mean(x²) + eps)`` (a sum of
squares: nothing cancels). ``axis`` is read by :func:`.base.normalize_axis`.
Output may be the input itself (in place): every read of a row happens
before the barrier that precedes its first write.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import Tensor
from .base import Dispatch, OpResult, check_dtype, check_tensor, normalize_axis, op, same_dtype
from .elementwise import output_tensor, storage_extensions, storage_features
from .rows import (Rows, glsl_element_offset, glsl_row_bases, glsl_tree, loop_budget, row_chunks,
                   rows_push, split_rows)
from .windows import rowwise

WORKGROUP = 128
# softmax keeps a row of up to WORKGROUP * REGISTER_FLOATS elements in registers
# (4096 with 128 invocations): one read of the row instead of two. On an H200,
# 65536 rows of 4096 floats: 0.524 ms against 0.731 ms for two sweeps (2026-12-02).
REGISTER_FLOATS = 32
# False: always the two-sweep kernel (the benchmarks flip it to compare both).
SOFTMAX_IN_REGISTERS = True
FLOATS = ("float32", "float16")
_NEG_INF = "uintBitsToFloat(0xff800000u)"


def _glsl_row_reductions() -> str:
    """``row_max``/``row_sum``: combine one value per invocation across the
    workgroup; every invocation gets the result. The trailing barrier lets
    the next call reuse ``red``."""
    out = ["shared float red[gl_WorkGroupSize.x];"]
    for name, step in (("row_max", "acc = max(acc, v);"), ("row_sum", "acc += v;")):
        out += [f"float {name}(float acc) {{", "  uint lid = gl_LocalInvocationID.x;",
                glsl_tree(step, "float v = red[lid + s];", "red[lid] = acc;"),
                "  float result = red[0];", "  barrier();", "  return result;", "}"]
    return "\n".join(out)


def _row_loop(body: str) -> str:
    return (f"  for (uint r = lid; r < pc.row_len; r += gl_WorkGroupSize.x) {{\n"
            f"    float v = float(in0[base0 + elem0(r)]);\n    {body}\n  }}")


_HEAD = ["void main() {", f"  uint row = {WG_INDEX};",
         "  if (row >= pc.rows) return;   // whole workgroups leave together",
         glsl_row_bases(2), "  uint lid = gl_LocalInvocationID.x;"]


def _chunk_loop(body: str) -> str:
    return (f"  for (uint r = lo + lid; r < hi; r += gl_WorkGroupSize.x) {{\n"
            f"    float v = float(in0[base0 + elem0(r)]);\n    {body}\n  }}")


def _chunk_head(operands: int) -> list:
    """The start of a chunked kernel: workgroup ``g`` takes chunk ``chunk``
    (elements ``lo..hi``) of row ``row``; its partials live at ``stats[2g]``."""
    return ["void main() {", f"  uint g = {WG_INDEX};",
            "  if (g >= pc.rows * pc.chunks) return;   // whole workgroups leave together",
            "  uint row = g / pc.chunks, chunk = g % pc.chunks;",
            glsl_row_bases(operands), "  uint lid = gl_LocalInvocationID.x;",
            "  uint lo = chunk * pc.chunk_len, hi = min(pc.row_len, lo + pc.chunk_len);"]


# Over the chunks' partials of this workgroup's row: p0/p1 the two values, cn the chunk's length.
_FOR_PARTIALS = ("  for (uint c = lid; c < pc.chunks; c += gl_WorkGroupSize.x) {{\n"
                 "    uint at = 2u * (row * pc.chunks + c);\n"
                 "    float p0 = stats[at], p1 = stats[at + 1u];\n"
                 "    float cn = float(min(pc.row_len, (c + 1u) * pc.chunk_len) - c * pc.chunk_len);\n"
                 "    {body}\n  }}")


def chunk_push(operands: int) -> list:
    return rows_push(operands, operands, 1) + [Push("chunks", "uint"), Push("chunk_len", "uint")]


def _glsl_online_softmax() -> str:
    """Running (max ``rmax``, sum ``rsum`` of exp(x - rmax)) per invocation, merged
    across the workgroup by ``row_max_sum``. -inf elements add nothing (their
    exp is 0 against any maximum, and -inf - -inf would be NaN); NaN
    elements make the sum NaN, so the whole row comes out NaN, as in numpy."""
    return "\n".join([
        f"float rmax = {_NEG_INF}, rsum = 0.0;",
        f"float term(float v) {{ return v > {_NEG_INF} || isnan(v) ? exp(v - rmax) : 0.0; }}",
        "void grow(float mx) { if (mx > rmax) { rsum *= exp(rmax - mx); rmax = mx; } }",
        "shared float redm[gl_WorkGroupSize.x], reds[gl_WorkGroupSize.x];",
        # a partial sum rescaled to the maximum mx; an invocation holding only
        # NaN and -inf has max -inf and sum NaN: the NaN must survive
        "float rescaled(float m, float s, float mx) {",
        f"  return m > {_NEG_INF} ? s * exp(m - mx) : (isnan(s) ? s : 0.0);", "}",
        "void merge(float m2, float s2) {",
        "  float mx = max(rmax, m2);",
        "  rsum = rescaled(rmax, rsum, mx) + rescaled(m2, s2, mx);",
        "  rmax = mx;", "}",
        "void row_max_sum() {", "  uint lid = gl_LocalInvocationID.x;",
        glsl_tree("merge(m2, s2);", "float m2 = redm[lid + s]; float s2 = reds[lid + s];",
                  "redm[lid] = rmax; reds[lid] = rsum;"),
        "  rmax = redm[0]; rsum = reds[0];", "}"])


def _render_softmax_registers(spec: KernelSpec, result: str) -> list:
    """The whole row in registers: ``slots`` values (vec4s or scalars) per
    invocation, element ``lid + k * gl_WorkGroupSize.x`` in slot k so loads
    stay coalesced. One read of the row, one write; slots past the row end
    hold -inf, which adds nothing to the sum, and are not written."""
    dtype, vec, slots = as_dtype(spec.param("dtype")), spec.param("vec", 1), spec.param("slots")
    vt, ot = ("vec4", dtype.vec(4)) if vec == 4 else ("float", dtype.glsl)
    if vec == 4:
        count, load, store = "pc.row_len / 4u", "vec4(in0[vb0 + q])", "out0[vb1 + q]"
        vmax, vsum = "max(max(v.x, v.y), max(v.z, v.w))", "(term(v.x) + term(v.y)) + (term(v.z) + term(v.w))"
        lines = ["  uint vb0 = uint(base0) >> 2u, vb1 = uint(base1) >> 2u;"]
    else:
        count, load, store = "pc.row_len", "float(in0[base0 + elem0(q)])", "out0[base1 + elem1(q)]"
        vmax, vsum, lines = "v", "term(v)", []
    return lines + [
        f"  const uint SLOTS = {slots}u;", f"  uint n = {count};", f"  {vt} vals[SLOTS];",
        "  for (uint k = 0u; k < SLOTS; ++k) {",
        "    uint q = lid + k * gl_WorkGroupSize.x;",
        f"    if (q < n) vals[k] = {load}; else vals[k] = {vt}({_NEG_INF});", "  }",
        # the maximum first, then the sum against it: no rescaling needed
        f"  for (uint k = 0u; k < SLOTS; ++k) {{ {vt} v = vals[k]; float m = {vmax}; if (m > rmax) rmax = m; }}",
        f"  for (uint k = 0u; k < SLOTS; ++k) {{ {vt} v = vals[k]; rsum += {vsum}; }}",
        "  row_max_sum();", "  float lse = log(rsum), inv = 1.0 / rsum;",
        "  for (uint k = 0u; k < SLOTS; ++k) {",
        "    uint q = lid + k * gl_WorkGroupSize.x;",
        f"    if (q < n) {{ {vt} v = vals[k]; {store} = {ot}({result}); }}", "  }", "}"]


@family("softmax")
def _render_softmax(spec: KernelSpec) -> str:
    dtype = as_dtype(spec.param("dtype"))
    out_t = dtype.glsl
    # log_softmax subtracts in two steps: x - (max + lse) would round
    # max + lse to the grid of the row's magnitude first (1e-3 wide at 1e4)
    result = "(v - rmax) - lse" if spec.param("log") else "exp(v - rmax) * inv"   # no divide per element
    stage = spec.param("stage")
    if stage == "stats":
        return "\n".join([glsl_element_offset(1, 1), _glsl_online_softmax()] + _chunk_head(1) + [
            _chunk_loop("grow(v); rsum += term(v);"), "  row_max_sum();",
            "  if (lid == 0u) { stats[2u * g] = rmax; stats[2u * g + 1u] = rsum; }", "}"])
    if stage == "apply":
        return "\n".join([glsl_element_offset(1, 2), _glsl_online_softmax()] + _chunk_head(2) + [
            _FOR_PARTIALS.format(body="merge(p0, p1);"), "  row_max_sum();",
            "  float lse = log(rsum), inv = 1.0 / rsum;",
            _chunk_loop(f"out0[base1 + elem1(r)] = {out_t}({result});"), "}"])
    lines = [glsl_element_offset(1, 2), _glsl_online_softmax()] + _HEAD
    if spec.param("slots", 0):
        return "\n".join(lines + _render_softmax_registers(spec, result))
    if spec.param("vec", 1) == 4:
        ot = dtype.vec(4)
        lines += ["  uint vb0 = uint(base0) >> 2u, vb1 = uint(base1) >> 2u, qe = pc.row_len / 4u;",
                  "  for (uint q = lid; q < qe; q += gl_WorkGroupSize.x) {",
                  "    vec4 v = vec4(in0[vb0 + q]);",
                  "    grow(max(max(v.x, v.y), max(v.z, v.w)));",
                  "    rsum += (term(v.x) + term(v.y)) + (term(v.z) + term(v.w));", "  }",
                  "  row_max_sum();", "  float lse = log(rsum), inv = 1.0 / rsum;",
                  "  for (uint q = lid; q < qe; q += gl_WorkGroupSize.x) {",
                  f"    vec4 v = vec4(in0[vb0 + q]); out0[vb1 + q] = {ot}({result});", "  }", "}"]
        return "\n".join(lines)
    lines += [_row_loop("grow(v); rsum += term(v);"), "  row_max_sum();",
              "  float lse = log(rsum), inv = 1.0 / rsum;",
              _row_loop(f"out0[base1 + elem1(r)] = {out_t}({result});"), "}"]
    return "\n".join(lines)


def softmax_spec(dtype, log: bool, vec: int = 1, slots: int = 0, stage: str = None) -> KernelSpec:
    """``vec`` 4: both rows contiguous, 16-byte aligned, a multiple of 4 long.
    ``slots`` > 0: the row held in registers, ``slots`` vec-wide values per
    invocation (rows up to ``WORKGROUP * slots * vec`` elements). ``stage``
    "stats" / "apply": the two dispatches of rows cut into chunks."""
    if stage is not None:
        stats = Binding("stats", "float", WRITE if stage == "stats" else READ)
        bindings = (Binding("in0", dtype.glsl, READ), stats)
        if stage == "apply":
            bindings += (Binding("out0", dtype.glsl, WRITE),)
        return KernelSpec("softmax", bindings, tuple(chunk_push(1 if stage == "stats" else 2)),
                          (("dtype", dtype.name), ("log", log), ("stage", stage)), (WORKGROUP, 1, 1),
                          storage_extensions([dtype]), storage_features([dtype]))
    bindings = (Binding("in0", dtype.vec(vec), READ), Binding("out0", dtype.vec(vec), WRITE))
    params = (("dtype", dtype.name), ("log", log)) + ((("vec", vec),) if vec != 1 else ())
    params += (("slots", slots),) if slots else ()
    return KernelSpec("softmax", bindings, tuple(rows_push(2, 2, 1)), params, (WORKGROUP, 1, 1),
                      storage_extensions([dtype]), storage_features([dtype]))


def _norm_output(spec: KernelSpec, y: str) -> str:
    """The write of ``y`` (weight and bias applied) to element ``r``."""
    if spec.param("weight"):
        y += " y *= float(weight[int(pc.offw) + int(r) * pc.stw]);"
    if spec.param("bias"):
        y += " y += float(bias[int(pc.offb) + int(r) * pc.stb]);"
    return f"{y} out0[base1 + elem1(r)] = {as_dtype(spec.param('dtype')).glsl}(y);"


def _render_norm_chunks(spec: KernelSpec, stage: str) -> str:
    layer = spec.param("kind") == "layer"
    pivot = "  float pivot = float(in0[base0 + elem0(0u)]);"
    if stage == "stats":
        lines = [glsl_element_offset(1, 1), _glsl_row_reductions()] + _chunk_head(1)
        if layer:       # the chunk's own two passes, relative to the row's first element
            lines += [pivot, "  float cn = float(hi - lo), mean = 0.0;", _chunk_loop("mean += v - pivot;"),
                      "  mean = row_sum(mean) / cn;", "  float m2 = 0.0;",
                      _chunk_loop("float d = (v - pivot) - mean; m2 += d * d;"), "  m2 = row_sum(m2);",
                      "  if (lid == 0u) { stats[2u * g] = mean; stats[2u * g + 1u] = m2; }", "}"]
        else:
            lines += ["  float squares = 0.0;", _chunk_loop("squares += v * v;"), "  squares = row_sum(squares);",
                      "  if (lid == 0u) { stats[2u * g] = squares; stats[2u * g + 1u] = 0.0; }", "}"]
        return "\n".join(lines)
    lines = [glsl_element_offset(1, 2), _glsl_row_reductions()] + _chunk_head(2)
    lines.append("  float n = float(pc.row_len);")
    if layer:
        # The row's mean from the chunks' means, then its squared deviations:
        # each chunk's own plus its count times its mean's distance from the row's.
        lines += [pivot, "  float mean = 0.0;", _FOR_PARTIALS.format(body="mean += cn * p0;"),
                  "  mean = row_sum(mean) / n;", "  float m2 = 0.0;",
                  _FOR_PARTIALS.format(body="float d = p0 - mean; m2 += p1 + cn * d * d;"),
                  "  float inv = inversesqrt(row_sum(m2) / n + pc.eps);"]
        y = "float y = ((v - pivot) - mean) * inv;"
    else:
        lines += ["  float squares = 0.0;", _FOR_PARTIALS.format(body="squares += p0;"),
                  "  float inv = inversesqrt(row_sum(squares) / n + pc.eps);"]
        y = "float y = v * inv;"
    return "\n".join(lines + [_chunk_loop(_norm_output(spec, y)), "}"])


@family("norm")
def _render_norm(spec: KernelSpec) -> str:
    if spec.param("stage"):
        return _render_norm_chunks(spec, spec.param("stage"))
    lines = [glsl_element_offset(1, 2), _glsl_row_reductions()] + _HEAD
    lines.append("  float n = float(pc.row_len);")
    if spec.param("kind") == "layer":
        # Shifted two-pass statistics: every value is taken relative to the
        # row's first element, so a large common offset (rows near 1e4 or
        # 1e6) cancels exactly before anything is summed; the mean and the
        # deviations are then small numbers fp32 holds to full precision.
        # (An fp32 mean of the raw values is itself rounded to the offset's
        # grid, which no variance formula can recover.)
        lines += ["  float pivot = float(in0[base0 + elem0(0u)]);",
                  "  float mean = 0.0;", _row_loop("mean += v - pivot;"), "  mean = row_sum(mean) / n;",
                  "  float var = 0.0;", _row_loop("float d = (v - pivot) - mean; var += d * d;"),
                  "  float inv = inversesqrt(row_sum(var) / n + pc.eps);"]
        y = "float y = ((v - pivot) - mean) * inv;"
    else:
        lines += ["  float squares = 0.0;", _row_loop("squares += v * v;"),
                  "  float inv = inversesqrt(row_sum(squares) / n + pc.eps);"]
        y = "float y = v * inv;"
    lines += [_row_loop(_norm_output(spec, y)), "}"]
    return "\n".join(lines)


def norm_spec(dtype, kind: str, weight: bool, bias: bool, stage: str = None) -> KernelSpec:
    """``stage`` "stats" / "apply": the two dispatches of rows cut into chunks."""
    if stage == "stats":
        bindings = (Binding("in0", dtype.glsl, READ), Binding("stats", "float", WRITE))
        return KernelSpec("norm", bindings, tuple(chunk_push(1)),
                          (("dtype", dtype.name), ("kind", kind), ("stage", stage)), (WORKGROUP, 1, 1),
                          storage_extensions([dtype]), storage_features([dtype]))
    bindings = [Binding("in0", dtype.glsl, READ)]
    push = rows_push(2, 2, 1) + [Push("eps", "float")]
    if stage == "apply":
        bindings.append(Binding("stats", "float", READ))
        push = chunk_push(2) + [Push("eps", "float")]
    if weight:
        bindings.append(Binding("weight", dtype.glsl, READ))
        push += [Push("offw", "uint"), Push("stw", "int")]
    if bias:
        bindings.append(Binding("bias", dtype.glsl, READ))
        push += [Push("offb", "uint"), Push("stb", "int")]
    bindings.append(Binding("out0", dtype.glsl, WRITE))
    params = (("dtype", dtype.name), ("kind", kind), ("weight", weight), ("bias", bias))
    params += (("stage", stage),) if stage else ()
    return KernelSpec("norm", tuple(bindings), tuple(push), params, (WORKGROUP, 1, 1),
                      storage_extensions([dtype]), storage_features([dtype]))


# -- ops ---------------------------------------------------------------------

def _plan_rows(ctx, spec, x, axis: int, out, extra_buffers=(), extra_values=None) -> Dispatch:
    L = split_rows(x.shape, (axis,), [x.strides, out.strides], spec.family)
    values = L.values((x.offset, out.offset), reduced=2)
    values.update(extra_values or {})
    groups = groups_for(L.rows * WORKGROUP, WORKGROUP, ctx.limits.max_workgroup_count)
    return Dispatch(spec, (x.buffer,) + tuple(extra_buffers) + (out.buffer,), spec.pack(values), groups)


def _chunking(ctx, row_len: int, sweeps: int) -> tuple:
    """(chunks, chunk_len) of rows cut for a loop-capped driver, or None when
    one workgroup's ``sweeps`` over a whole row stay within its budget."""
    budget = loop_budget(ctx.limits)
    if not budget or sweeps * -(-row_len // WORKGROUP) <= budget:
        return None
    return row_chunks(row_len, 2, budget, WORKGROUP)    # stats: two sweeps; apply: one, plus the partials


def _plan_chunks(ctx, stats_spec, apply_spec, x, axis: int, out, chunking, extra_buffers=(),
                 extra_values=None) -> list:
    """The two dispatches of rows cut into ``chunking`` pieces: partials of
    every chunk into a (rows, chunks, 2) scratch tensor, then the write."""
    chunks, chunk_len = chunking
    L = split_rows(x.shape, (axis,), [x.strides, out.strides], stats_spec.family)
    stats = ctx.empty((L.rows, chunks, 2), "float32")
    groups = groups_for(L.rows * chunks * WORKGROUP, WORKGROUP, ctx.limits.max_workgroup_count)
    first = Rows(L.rows, L.row_len, L.kshape, L.kst[:1], L.rshape, L.rst[:1])
    values = dict(first.values((x.offset,), reduced=1), chunks=chunks, chunk_len=chunk_len)
    apply_values = dict(L.values((x.offset, out.offset), reduced=2), chunks=chunks, chunk_len=chunk_len)
    apply_values.update(extra_values or {})
    return [Dispatch(stats_spec, (x.buffer, stats.buffer), stats_spec.pack(values), groups),
            Dispatch(apply_spec, (x.buffer, stats.buffer) + tuple(extra_buffers) + (out.buffer,),
                     apply_spec.pack(apply_values), groups)]


def _softmax(ctx, x, axis, out, log: bool) -> OpResult:
    name = "log_softmax" if log else "softmax"
    x = check_tensor(ctx, x, f"{name} x")
    check_dtype(ctx, x.dtype, FLOATS, name)
    if x.ndim == 0:
        raise ShapeError(f"{name} needs at least one axis")
    axis = normalize_axis(axis, x.ndim, name)
    out = output_tensor(ctx, out, x.shape, x.dtype, [x])
    if out.size == 0:
        return OpResult(out, [])
    L = split_rows(x.shape, (axis,), [x.strides, out.strides], name)
    aligned = all(o % 4 == 0 for o in (x.offset, out.offset)) and all(
        s % 4 == 0 for st in L.kst for s, n in zip(st, L.kshape) if n > 1)
    vec = 4 if aligned and L.rst == ((1,), (1,)) and L.row_len % 4 == 0 else 1
    fits = SOFTMAX_IN_REGISTERS and L.row_len <= WORKGROUP * REGISTER_FLOATS
    slots = REGISTER_FLOATS // vec if fits else 0
    chunking = None if fits else _chunking(ctx, -(-L.row_len // vec), 2)
    if chunking is not None:
        chunking = _chunking(ctx, L.row_len, 2)      # the chunked kernels load scalars
        return OpResult(out, _plan_chunks(ctx, softmax_spec(x.dtype, log, stage="stats"),
                                          softmax_spec(x.dtype, log, stage="apply"), x, axis, out, chunking))
    return OpResult(out, [_plan_rows(ctx, softmax_spec(x.dtype, log, vec, slots), x, axis, out)])


@op("softmax", windows=rowwise())
def softmax(ctx, x, axis: int = -1, *, out=None):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``. ``out`` may be ``x``."""
    return _softmax(ctx, x, axis, out, log=False)


@op("log_softmax", windows=rowwise())
def log_softmax(ctx, x, axis: int = -1, *, out=None):
    """``(x - max) - log(sum(exp(x - max)))`` along ``axis``. ``out`` may be ``x``."""
    return _softmax(ctx, x, axis, out, log=True)


def _vector(ctx, v, x, what: str):
    """Validate a per-feature weight or bias: shape (x.shape[-1],), x's dtype."""
    if v is None:
        return None
    if not isinstance(v, Tensor):
        raise InvalidArgumentError(f"{what} must be a Tensor or None, got {type(v).__name__}")
    v = check_tensor(ctx, v, what)
    same_dtype([x, v], what)
    if v.shape != (x.shape[-1],):
        raise ShapeError(f"{what} has shape {v.shape}; it must be ({x.shape[-1]},), the last axis of x")
    return v


def _norm(ctx, kind: str, x, weight, bias, eps, out) -> OpResult:
    name = "layer_norm" if kind == "layer" else "rms_norm"
    x = check_tensor(ctx, x, f"{name} x")
    check_dtype(ctx, x.dtype, FLOATS, name)
    if x.ndim == 0:
        raise ShapeError(f"{name} normalizes the last axis; x is 0-d")
    weight = _vector(ctx, weight, x, f"{name} weight")
    bias = _vector(ctx, bias, x, f"{name} bias")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise InvalidArgumentError(f"{name} eps must be a non-negative number, got {eps!r}")
    out = output_tensor(ctx, out, x.shape, x.dtype, [t for t in (x, weight, bias) if t is not None])
    if out.size == 0:
        return OpResult(out, [])
    values, extra = {"eps": float(eps)}, []
    if weight is not None:
        values.update(offw=weight.offset, stw=weight.strides[0])
        extra.append(weight.buffer)
    if bias is not None:
        values.update(offb=bias.offset, stb=bias.strides[0])
        extra.append(bias.buffer)
    chunking = _chunking(ctx, x.shape[-1], 3 if kind == "layer" else 2)
    if chunking is not None:
        return OpResult(out, _plan_chunks(ctx, norm_spec(x.dtype, kind, False, False, "stats"),
                                          norm_spec(x.dtype, kind, weight is not None, bias is not None, "apply"),
                                          x, x.ndim - 1, out, chunking, extra, values))
    spec = norm_spec(x.dtype, kind, weight is not None, bias is not None)
    return OpResult(out, [_plan_rows(ctx, spec, x, x.ndim - 1, out, extra, values)])


@op("layer_norm", windows=rowwise(axis=None))
def layer_norm(ctx, x, weight=None, bias=None, *, eps: float = 1e-5, out=None):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis
    (biased variance, as in torch). ``weight``/``bias``: shape ``(x.shape[-1],)``."""
    return _norm(ctx, "layer", x, weight, bias, eps, out)


@op("rms_norm", windows=rowwise(axis=None))
def rms_norm(ctx, x, weight=None, *, eps: float = 1e-6, out=None):
    """``x / sqrt(mean(x²) + eps) * weight`` over the last axis."""
    return _norm(ctx, "rms", x, weight, None, eps, out)


@variants("softmax")
def _softmax_variants():
    for name in FLOATS:
        for log in (False, True):
            for vec in (1, 4):
                yield softmax_spec(as_dtype(name), log, vec)
                yield softmax_spec(as_dtype(name), log, vec, REGISTER_FLOATS // vec)
            for stage in ("stats", "apply"):
                yield softmax_spec(as_dtype(name), log, stage=stage)


@variants("norm")
def _norm_variants():
    for name in FLOATS:
        for weight in (False, True):
            yield norm_spec(as_dtype(name), "rms", weight, False)
            yield norm_spec(as_dtype(name), "rms", weight, False, "apply")
            for bias in (False, True):
                yield norm_spec(as_dtype(name), "layer", weight, bias)
                yield norm_spec(as_dtype(name), "layer", weight, bias, "apply")
        for kind in ("rms", "layer"):
            yield norm_spec(as_dtype(name), kind, False, False, "stats")
