"""The matmul kernel families: how each GEMM/GEMV kernel is written.

Which kernel runs is decided in :mod:`.matmul`; this file only renders
GLSL from a frozen spec and lists every spec the selector can produce.

Shared conventions (all families):

- operands are addressed in *elements* with signed strides, so transposed
  and sliced views need no copy: ``A[m, k] = a[offa + m*sam + k*sak]``;
- up to two (coalesced) batch dims ride in z: ``bshape``, and a batch
  stride per operand; the op loops over further batch dims itself;
- ``x0/y0/z0`` are the first workgroup of a dispatch: grids larger than
  ``maxComputeWorkGroupCount`` are split into several dispatches;
- float16 operands are loaded to float and accumulated in float32 (the
  cooperative-matrix kernels, :mod:`.matmul_coopmat`, accumulate in the
  fragment type their spec names); int32 ones (GEMV and tiled kernels
  only) in int, wrapping mod 2**32.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import F16_EXTENSIONS
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family

DTYPES = ("float32", "float16")
# int32 products accumulate in int (wrapping mod 2**32, as numpy's int32
# matmul); only the GEMV and tiled kernels take them.
INT_DTYPES = ("int32",)


def _acc(dtype: str) -> tuple:
    """(accumulator GLSL type, its zero) for ``dtype``."""
    return ("int", "0") if dtype in INT_DTYPES else ("float", "0.0")
UNROLL = ("GL_EXT_control_flow_attributes",)

# Push layout of the GEMM families (tiled, vec4): 92 bytes, under the
# 128 bytes every device offers.
GEMM_PUSH = (Push("M", "uint"), Push("N", "uint"), Push("K", "uint"),
             Push("offa", "uint"), Push("offb", "uint"), Push("offc", "uint"),
             Push("sam", "int"), Push("sak", "int"), Push("sbk", "int"), Push("sbn", "int"),
             Push("scm", "int"), Push("scn", "int"),
             Push("bshape", "uint", 2), Push("bsa", "int", 2), Push("bsb", "int", 2),
             Push("bsc", "int", 2), Push("x0", "uint"), Push("y0", "uint"), Push("z0", "uint"))

# GEMV: out[r] = sum_k mat[r, k] * vec[k] (the matrix is A, or B transposed).
GEMV_PUSH = (Push("R", "uint"), Push("K", "uint"), Push("offm", "uint"), Push("offv", "uint"),
             Push("offo", "uint"), Push("sr", "int"), Push("sk", "int"), Push("sv", "int"),
             Push("so", "int"), Push("bshape", "uint", 2), Push("bsm", "int", 2),
             Push("bsv", "int", 2), Push("bso", "int", 2), Push("x0", "uint"), Push("z0", "uint"))


def extensions_for(dtype: str, *more) -> tuple:
    exts = list(F16_EXTENSIONS) if dtype == "float16" else []
    for group in more:
        exts += list(group)
    return tuple(dict.fromkeys(exts))


def features_for(dtype: str, *more) -> tuple:
    return tuple(sorted(({"float16"} if dtype == "float16" else set()) | set(more)))


def batch_offsets_glsl(names) -> str:
    """GLSL computing ``o<name>`` element offsets of batch ``z`` for each
    operand (two batch dims, the last fastest)."""
    lines = ["  uint bz1 = z % pc.bshape[1], bz0 = z / pc.bshape[1];"]
    for n in names:
        lines.append(f"  int o{n} = int(pc.off{n}) + int(bz0) * pc.bs{n}[0] + int(bz1) * pc.bs{n}[1];")
    return "\n".join(lines)


# -- GEMV ----------------------------------------------------------------------

def gemv_spec(dtype: str, mode: str, reduce: str = "shared", workgroup: int = 64) -> KernelSpec:
    """``mode`` "rows": one workgroup per output element, threads stride over
    K and reduce (through subgroup ops when ``reduce`` is "subgroup", else
    shared memory); "cols": one thread per output element, looping over K
    (coalesced when the matrix is stored with unit stride along rows)."""
    t = as_dtype(dtype).glsl
    bindings = (Binding("mat", t, READ), Binding("vec", t, READ), Binding("outv", t, WRITE))
    sub = ("subgroup",) if reduce == "subgroup" else ()
    exts = ("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_arithmetic") if sub else ()
    params = (("dtype", dtype), ("mode", mode), ("reduce", reduce if mode == "rows" else ""))
    return KernelSpec("matmul_gemv", bindings, GEMV_PUSH, params, (workgroup, 1, 1),
                      extensions_for(dtype, exts), features_for(dtype, *sub))


@family("matmul_gemv")
def _render_gemv(spec: KernelSpec) -> str:
    t = as_dtype(spec.param("dtype")).glsl
    acc, zero = _acc(spec.param("dtype"))
    mode, reduce = spec.param("mode"), spec.param("reduce")
    head = ["void main() {",
            "  uint z = gl_WorkGroupID.z + pc.z0;",
            batch_offsets_glsl(["m", "v", "o"])]
    dot = (f"acc += {acc}(mat[om + int(r) * pc.sr + int(k) * pc.sk]) * "
           f"{acc}(vec[ov + int(k) * pc.sv]);")
    if mode == "cols":
        body = ["  uint r = (gl_WorkGroupID.x + pc.x0) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;",
                "  if (r >= pc.R) return;",
                f"  {acc} acc = {zero};",
                f"  for (uint k = 0u; k < pc.K; ++k) {{ {dot} }}",
                f"  outv[oo + int(r) * pc.so] = {t}(acc);",
                "}"]
        return "\n".join(head + body)
    # rows: the whole workgroup works on row r (r < R by construction of the
    # grid, so every invocation reaches the barriers).
    body = ["  uint r = gl_WorkGroupID.x + pc.x0;",
            "  uint lid = gl_LocalInvocationID.x;",
            f"  {acc} acc = {zero};",
            f"  for (uint k = lid; k < pc.K; k += gl_WorkGroupSize.x) {{ {dot} }}"]
    if reduce == "subgroup":
        body += ["  acc = subgroupAdd(acc);",
                 "  if (subgroupElect()) red[gl_SubgroupID] = acc;",
                 "  barrier();",
                 "  if (lid == 0u) {",
                 f"    {acc} total = {zero};",
                 "    for (uint s = 0u; s < gl_NumSubgroups; ++s) total += red[s];",
                 f"    outv[oo + int(r) * pc.so] = {t}(total);",
                 "  }"]
    else:
        body += ["  red[lid] = acc;",
                 "  barrier();",
                 "  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {",
                 "    if (lid < s) red[lid] += red[lid + s];",
                 "    barrier();",
                 "  }",
                 f"  if (lid == 0u) outv[oo + int(r) * pc.so] = {t}(red[0]);"]
    body.append("}")
    return f"shared {acc} red[gl_WorkGroupSize.x];\n" + "\n".join(head + body)


# -- tiled shared-memory GEMM ------------------------------------------------------

def tiled_spec(dtype: str, tile: int = 16) -> KernelSpec:
    """T×T threads, one output each; T×T tiles of A and B staged through
    shared memory. Any strides, any sizes: the fallback for everything."""
    t = as_dtype(dtype).glsl
    bindings = (Binding("a", t, READ), Binding("b", t, READ), Binding("c", t, WRITE))
    return KernelSpec("matmul_tiled", bindings, GEMM_PUSH, (("dtype", dtype), ("tile", tile)),
                      (tile, tile, 1), extensions_for(dtype, UNROLL), features_for(dtype))


@family("matmul_tiled")
def _render_tiled(spec: KernelSpec) -> str:
    t = as_dtype(spec.param("dtype")).glsl
    acc, zero = _acc(spec.param("dtype"))
    tile = spec.param("tile")
    return "\n".join([
        f"const uint T = {tile}u;",
        f"shared {acc} As[T][T + 1u];",    # +1: no bank conflicts on column reads
        f"shared {acc} Bs[T][T + 1u];",
        "void main() {",
        "  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;",
        "  uint col = (gl_WorkGroupID.x + pc.x0) * T + tx;",
        "  uint row = (gl_WorkGroupID.y + pc.y0) * T + ty;",
        "  uint z = gl_WorkGroupID.z + pc.z0;",
        batch_offsets_glsl(["a", "b", "c"]),
        f"  {acc} acc = {zero};",
        "  for (uint k0 = 0u; k0 < pc.K; k0 += T) {",
        "    uint ka = k0 + tx, kb = k0 + ty;",
        f"    As[ty][tx] = (row < pc.M && ka < pc.K) ? {acc}(a[oa + int(row) * pc.sam + int(ka) * pc.sak]) : {zero};",
        f"    Bs[ty][tx] = (kb < pc.K && col < pc.N) ? {acc}(b[ob + int(kb) * pc.sbk + int(col) * pc.sbn]) : {zero};",
        "    barrier();",
        "    [[unroll]] for (uint k = 0u; k < T; ++k) acc += As[ty][k] * Bs[k][tx];",
        "    barrier();",
        "  }",
        f"  if (row < pc.M && col < pc.N) c[oc + int(row) * pc.scm + int(col) * pc.scn] = {t}(acc);",
        "}"])


# -- register-blocked vec4 GEMM --------------------------------------------------

# (BM, BN, BK, TM, TN): block tile, K step, outputs per thread.
VEC4_TILES = {"64": (64, 64, 16, 4, 4), "128": (128, 128, 16, 8, 8)}
A_LAYOUTS = ("mk", "km")     # which index of A is contiguous: k ("mk") or m ("km")
B_LAYOUTS = ("kn", "nk")


def vec4_threads(tile: str) -> tuple:
    bm, bn, _, tm, tn = VEC4_TILES[tile]
    return (bn // tn, bm // tm)


def vec4_shared_bytes(tile: str) -> int:
    bm, bn, bk, _, _ = VEC4_TILES[tile]
    return (bm + bn) * bk * 4


def vec4_spec(dtype: str, tile: str, a_layout: str, b_layout: str, c_vec: bool) -> KernelSpec:
    """Each thread computes TM×TN outputs held in registers; A and B are
    read from memory as vec4 along their contiguous index and staged in
    shared memory k-major, so the inner loop reads vec4s from shared memory
    and does TM×TN/4 vec4 FMAs per k. ``c_vec``: store vec4 (else scalars)."""
    d = as_dtype(dtype)
    bindings = (Binding("a4", d.vec(4), READ), Binding("b4", d.vec(4), READ),
                Binding("c" + ("4" if c_vec else "1"), d.vec(4 if c_vec else 1), WRITE))
    params = (("dtype", dtype), ("tile", tile), ("a", a_layout), ("b", b_layout), ("cvec", c_vec))
    tx, ty = vec4_threads(tile)
    return KernelSpec("matmul_vec4", bindings, GEMM_PUSH, params, (tx, ty, 1),
                      extensions_for(dtype, UNROLL), features_for(dtype))


def _vec4_stage_a(a_layout: str, count: int) -> list:
    """GLSL staging this K step's A tile into As (k-major vec4 rows),
    ``count`` vec4 loads a thread."""
    if a_layout == "mk":   # vec4 along k: transpose into As while storing
        return [
            f"    [[unroll]] for (uint it = 0u; it < {count}u; ++it) {{",
            "      uint idx = tid + it * NT;",
            "      uint m = idx / (BK / 4u), k4 = idx % (BK / 4u);",
            "      uint row = bm0 + m, kk = k0 + k4 * 4u;",
            "      vec4 v = vec4(0.0);",
            "      if (row < pc.M && kk < pc.K) v = vec4(a4[(oa + int(row) * pc.sam + int(kk)) >> 2]);",
            "      [[unroll]] for (uint j = 0u; j < 4u; ++j) As[(k4 * 4u + j) * (BM / 4u) + m / 4u][m & 3u] = v[j];",
            "    }"]
    else:                  # vec4 along m: straight copy
        return [
            f"    [[unroll]] for (uint it = 0u; it < {count}u; ++it) {{",
            "      uint idx = tid + it * NT;",
            "      uint k = idx / (BM / 4u), m4 = idx % (BM / 4u);",
            "      uint row = bm0 + m4 * 4u, kk = k0 + k;",
            "      vec4 v = vec4(0.0);",
            "      if (row < pc.M && kk < pc.K) v = vec4(a4[(oa + int(kk) * pc.sak + int(row)) >> 2]);",
            "      As[k * (BM / 4u) + m4] = v;",
            "    }"]


def _vec4_stage_b(b_layout: str, count: int) -> list:
    """GLSL staging this K step's B tile into Bs (k-major vec4 rows),
    ``count`` vec4 loads a thread."""
    if b_layout == "kn":   # vec4 along n: straight copy
        return [
            f"    [[unroll]] for (uint it = 0u; it < {count}u; ++it) {{",
            "      uint idx = tid + it * NT;",
            "      uint k = idx / (BN / 4u), n4 = idx % (BN / 4u);",
            "      uint col = bn0 + n4 * 4u, kk = k0 + k;",
            "      vec4 v = vec4(0.0);",
            "      if (col < pc.N && kk < pc.K) v = vec4(b4[(ob + int(kk) * pc.sbk + int(col)) >> 2]);",
            "      Bs[k * (BN / 4u) + n4] = v;",
            "    }"]
    else:                  # vec4 along k: transpose into Bs while storing
        return [
            f"    [[unroll]] for (uint it = 0u; it < {count}u; ++it) {{",
            "      uint idx = tid + it * NT;",
            "      uint n = idx / (BK / 4u), k4 = idx % (BK / 4u);",
            "      uint col = bn0 + n, kk = k0 + k4 * 4u;",
            "      vec4 v = vec4(0.0);",
            "      if (col < pc.N && kk < pc.K) v = vec4(b4[(ob + int(col) * pc.sbn + int(kk)) >> 2]);",
            "      [[unroll]] for (uint j = 0u; j < 4u; ++j) Bs[(k4 * 4u + j) * (BN / 4u) + n / 4u][n & 3u] = v[j];",
            "    }"]


@family("matmul_vec4")
def _render_vec4(spec: KernelSpec) -> str:
    d = as_dtype(spec.param("dtype"))
    bm, bn, bk, tm, tn = VEC4_TILES[spec.param("tile")]
    a_layout, b_layout, c_vec = spec.param("a"), spec.param("b"), spec.param("cvec")
    ntx, nty = bn // tn, bm // tm
    nt = ntx * nty
    out = []
    out.append(f"const uint BM = {bm}u, BN = {bn}u, BK = {bk}u, TM = {tm}u, TN = {tn}u;")
    out.append(f"const uint NTX = {ntx}u, NTY = {nty}u, NT = {nt}u;")
    # Shared tiles are k-major vec4 rows: As[k][m/4], Bs[k][n/4].
    out.append("shared vec4 As[BK * BM / 4u];")
    out.append("shared vec4 Bs[BK * BN / 4u];")
    out.append("void main() {")
    out.append("  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;")
    out.append("  uint tid = ly * NTX + lx;")
    out.append("  uint bn0 = (gl_WorkGroupID.x + pc.x0) * BN, bm0 = (gl_WorkGroupID.y + pc.y0) * BM;")
    out.append("  uint z = gl_WorkGroupID.z + pc.z0;")
    out.append(batch_offsets_glsl(["a", "b", "c"]))
    out.append("  vec4 acc[TM][TN / 4u];")
    out.append("  [[unroll]] for (uint i = 0u; i < TM; ++i)")
    out.append("    [[unroll]] for (uint j = 0u; j < TN / 4u; ++j) acc[i][j] = vec4(0.0);")
    out.append("  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {")
    out += _vec4_stage_a(a_layout, bm * bk // 4 // nt) + _vec4_stage_b(b_layout, bn * bk // 4 // nt)
    # -- multiply: thread owns row groups (i4*NTY + ly) and column groups
    # (j4*NTX + lx) of four, so neighbouring threads read neighbouring vec4s.
    out += [
        "    barrier();",
        "    [[unroll]] for (uint k = 0u; k < BK; ++k) {",
        "      vec4 av[TM / 4u], bv[TN / 4u];",
        "      [[unroll]] for (uint i4 = 0u; i4 < TM / 4u; ++i4) av[i4] = As[k * (BM / 4u) + i4 * NTY + ly];",
        "      [[unroll]] for (uint j4 = 0u; j4 < TN / 4u; ++j4) bv[j4] = Bs[k * (BN / 4u) + j4 * NTX + lx];",
        "      [[unroll]] for (uint i = 0u; i < TM; ++i)",
        "        [[unroll]] for (uint j4 = 0u; j4 < TN / 4u; ++j4) acc[i][j4] += av[i / 4u][i & 3u] * bv[j4];",
        "    }",
        "    barrier();",
        "  }"]
    # -- store
    out += [
        "  [[unroll]] for (uint i = 0u; i < TM; ++i) {",
        "    uint row = bm0 + ((i / 4u) * NTY + ly) * 4u + (i & 3u);",
        "    if (row >= pc.M) continue;",
        "    [[unroll]] for (uint j4 = 0u; j4 < TN / 4u; ++j4) {",
        "      uint col = bn0 + (j4 * NTX + lx) * 4u;"]
    if c_vec:
        out += [f"      if (col < pc.N) c4[(oc + int(row) * pc.scm + int(col)) >> 2] = {d.vec(4)}(acc[i][j4]);"]
    else:
        out += ["      [[unroll]] for (uint e = 0u; e < 4u; ++e)",
                f"        if (col + e < pc.N) c1[oc + int(row) * pc.scm + int(col + e) * pc.scn] = {d.glsl}(acc[i][j4][e]);"]
    out += ["    }", "  }", "}"]
    return "\n".join(out)


# -- every spec the selector can produce --------------------------------------------

@variants("matmul_gemv")
def _gemv_variants():
    for dtype in DTYPES + INT_DTYPES:
        yield gemv_spec(dtype, "cols", workgroup=64)
        for wg in (64, 128, 256):
            yield gemv_spec(dtype, "rows", "shared", wg)
            yield gemv_spec(dtype, "rows", "subgroup", wg)


@variants("matmul_tiled")
def _tiled_variants():
    for dtype in DTYPES + INT_DTYPES:
        for tile in (8, 16):
            yield tiled_spec(dtype, tile)


@variants("matmul_vec4")
def _vec4_variants():
    for dtype in DTYPES:
        for tile in VEC4_TILES:
            for a in A_LAYOUTS:
                for b in B_LAYOUTS:
                    for c_vec in (True, False):
                        yield vec4_spec(dtype, tile, a, b, c_vec)
