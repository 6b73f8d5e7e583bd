"""The cooperative-matrix GEMM families: ``matmul_coopmat``
(GL_NV_cooperative_matrix: any M, N, K, operands in any of the vector
kernels' layouts) and ``matmul_coopmat_khr`` (VK_KHR_cooperative_matrix:
row-major fp16, whole blocks only).

Which kernel runs is decided in :mod:`.matmul`; the conventions every GEMM
family shares (element addressing, batch dims in z, split grids) are in
:mod:`.matmul_kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kernels.catalogue import variants
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, family
from .matmul_kernels import (A_LAYOUTS, B_LAYOUTS, GEMM_PUSH, UNROLL, batch_offsets_glsl,
                             extensions_for)


# -- cooperative-matrix fp16 GEMM (GL_NV_cooperative_matrix) --------------------

# Fragment shapes the selector knows, largest first: (M, N, K).
COOPMAT_SHAPES = ((16, 16, 16), (16, 8, 16))
COOPMAT_ACC = ("float32", "float16")
COOPMAT_SUBGROUP = 32     # NVIDIA's subgroup size; the staging loops are unrolled for it
COOPMAT_PAD = 8           # fp16 elements added to each shared row: no bank conflicts
COOPMAT_EXTS = ("GL_NV_cooperative_matrix", "GL_KHR_memory_scope_semantics",
                "GL_KHR_shader_subgroup_basic") + UNROLL


@dataclass(frozen=True)
class CoopTiling:
    """How a workgroup splits its block: ``warps`` subgroups along (N, M),
    each owning a ``warp_tile`` (rows, cols) of outputs; K advances by ``bk``
    per shared-memory tile, held in ``stages`` buffers (2: the next tile is
    stored while the current one is multiplied, one barrier per K step)."""
    warps: tuple
    warp_tile: tuple
    bk: int
    stages: int

    @property
    def block(self) -> tuple:
        """(BM, BN) output block of one workgroup."""
        return (self.warps[1] * self.warp_tile[0], self.warps[0] * self.warp_tile[1])

    @property
    def threads(self) -> int:
        return self.warps[0] * self.warps[1] * COOPMAT_SUBGROUP


# The tiling the selector uses (first that fits the device), then the
# others measured against it on an H200 (fp16, fp16 accumulators: 64.6
# TFLOP/s at 4096³ for the first, 59-64 for the others; with fp32
# accumulators all ran at 33-35). Four 64×64 subgroup
# tiles load the fewest fragments per MMA and need the least shared memory.
COOPMAT_TILINGS = (
    CoopTiling((2, 2), (64, 64), 32, 1),
)
COOPMAT_SWEEP = (
    CoopTiling((2, 2), (64, 64), 32, 2),
    CoopTiling((4, 2), (64, 32), 32, 1),      # 128×128, eight 64×32 subgroup tiles
    CoopTiling((4, 2), (64, 32), 32, 2),
    CoopTiling((2, 2), (64, 64), 64, 1),      # 128×128, four 64×64
    CoopTiling((2, 4), (64, 64), 32, 1),      # 256×128, eight 64×64
    CoopTiling((4, 2), (64, 64), 32, 1),      # 128×256
    CoopTiling((2, 4), (64, 64), 16, 2),
    CoopTiling((2, 2), (32, 64), 32, 2),      # 64×128, four 32×64
    CoopTiling((2, 2), (64, 64), 16, 2),
    CoopTiling((4, 2), (64, 64), 16, 2),
)


def _coopmat_rows(t: CoopTiling, a_layout, b_layout) -> dict:
    """Shared tile geometry of one stage in fp16 elements: (rows, row length)
    of A and B. Each tile is stored in its global layout (so staging is a
    straight vector copy); a k-major A or n-major B is loaded column-major."""
    (bm, bn), bk, pad = t.block, t.bk, COOPMAT_PAD
    a = (bm, bk + pad) if a_layout == "mk" else (bk, bm + pad)
    b = (bk, bn + pad) if b_layout == "kn" else (bn, bk + pad)
    return {"a": a, "b": b}


def coopmat_shared_bytes(t: CoopTiling, a_layout="mk", b_layout="kn") -> int:
    g = _coopmat_rows(t, a_layout, b_layout)
    return 2 * t.stages * (g["a"][0] * g["a"][1] + g["b"][0] * g["b"][1])


def coopmat_spec(shape, acc: str, a_layout: str, b_layout: str, tiling: CoopTiling = None,
                 vec: int = 8) -> KernelSpec:
    """Each subgroup computes a warp tile of fragments with coopMatMulAddNV;
    the workgroup stages BM×BK and BK×BN fp16 tiles in shared memory as
    ``vec``-element vectors (A and B need the vec4 kernel's layouts, and a
    multiple of 8 along the contiguous dim for ``vec`` 8), with the next
    tile's global loads issued before the current tile's math. Any M, N, K:
    tiles are zero-padded; a fragment wholly inside C with 16-byte aligned
    rows is stored directly, others element by element."""
    t = tiling or COOPMAT_TILINGS[0]
    # fp16 vectors travel as uvec2/uvec4 (their bits): glslang's
    # coopMatLoadNV takes uint vectors but not f16vec4 arrays.
    word = {4: "uvec2", 8: "uvec4"}[vec]
    bindings = (Binding("a4", word, READ), Binding("b4", word, READ),
                Binding("c", "float16_t", WRITE))
    params = (("shape", tuple(shape)), ("acc", acc), ("a", a_layout), ("b", b_layout),
              ("vec", vec), ("warps", t.warps), ("warp_tile", t.warp_tile), ("bk", t.bk),
              ("stages", t.stages))
    return KernelSpec("matmul_coopmat", bindings, GEMM_PUSH, params, (t.threads, 1, 1),
                      extensions_for("float16", COOPMAT_EXTS), ("cooperative_matrix", "float16", "subgroup"))


def coopmat_tiling(spec: KernelSpec) -> CoopTiling:
    return CoopTiling(spec.param("warps"), spec.param("warp_tile"), spec.param("bk"),
                      spec.param("stages"))


def _operand_loads(a_layout: str, b_layout: str) -> tuple:
    """Global -> registers for the tile at kt (zeros outside A and B), and
    registers -> shared: per operand (index decoding, in-bounds test,
    global vector index, shared vector index). Index i of thread tid is
    vector tid + i*NT of the tile."""
    if a_layout == "mk":       # rows m, vectors along k
        a_load = ("uint m = v / (BK / V), k = (v % (BK / V)) * V; uint row = bm0 + m, kk = kt + k;",
                  "row < pc.M && kk < pc.K", "(oa + int(row) * pc.sam + int(kk)) / int(V)",
                  "m * ALEN + k / V")
    else:                      # rows k, vectors along m
        a_load = ("uint k = v / (BM / V), m = (v % (BM / V)) * V; uint row = bm0 + m, kk = kt + k;",
                  "row < pc.M && kk < pc.K", "(oa + int(kk) * pc.sak + int(row)) / int(V)",
                  "k * ALEN + m / V")
    if b_layout == "kn":       # rows k, vectors along n
        b_load = ("uint k = v / (BN / V), n = (v % (BN / V)) * V; uint col = bn0 + n, kk = kt + k;",
                  "col < pc.N && kk < pc.K", "(ob + int(kk) * pc.sbk + int(col)) / int(V)",
                  "k * BLEN + n / V")
    else:                      # rows n, vectors along k
        b_load = ("uint n = v / (BK / V), k = (v % (BK / V)) * V; uint col = bn0 + n, kk = kt + k;",
                  "col < pc.N && kk < pc.K", "(ob + int(col) * pc.sbn + int(kk)) / int(V)",
                  "n * BLEN + k / V")
    return a_load, b_load


def _k_loop(stages: int, fetch, store, mma: list) -> list:
    """The K loop: with one stage, store; barrier; issue the next loads;
    multiply; barrier. With two, the tile for k0 + BK goes to the other
    buffer while this one is multiplied; a buffer is rewritten only after
    the barrier that ends the step which last read it, so one barrier per
    step suffices."""
    out = []
    if stages == 1:
        out += ["  const uint cur = 0u;",
                "  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {"]
        out += store("0u", "    ")
        out += ["    barrier();",
                "    if (k0 + BK < pc.K) {"]
        out += fetch("k0 + BK", "      ")
        out += ["    }"] + mma + ["    barrier();", "  }"]
    else:
        out += store("0u", "  ")
        out += ["  barrier();",
                "  uint cur = 0u;",
                "  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {",
                "    bool more = k0 + BK < pc.K;",
                "    if (more) {"]
        out += fetch("k0 + BK", "      ")
        out += ["    }"] + mma
        out += ["    if (more) {"] + store("(cur ^ 1u)", "      ") + ["    }",
                "    barrier();",
                "    cur ^= 1u;",
                "  }"]
    return out


def _epilogue(o_t: str) -> list:
    """The store: a fragment wholly inside C with 16-byte aligned rows goes
    straight to memory; edge fragments go through this subgroup's slice of
    As (free after the last barrier) and are copied element by element, so
    M and N need not be fragment multiples."""
    return [
        "  bool direct = pc.scn == 1 && pc.scm > 0 && ((uint(oc) | uint(pc.scm)) & 7u) == 0u;",
        "  uint lane = gl_SubgroupInvocationID, scratch = sg * FM * FN;",
        "  [[unroll]] for (uint i = 0u; i < WM; ++i) {",
        "    uint row = bm0 + sm + i * FM;",
        "    if (row >= pc.M) continue;",
        "    [[unroll]] for (uint j = 0u; j < WN; ++j) {",
        "      uint col = bn0 + sn + j * FN;",
        "      if (col >= pc.N) continue;",
        f"      {o_t} o = {o_t}(acc[i][j]);",
        "      if (direct && row + FM <= pc.M && col + FN <= pc.N) {",
        "        coopMatStoreNV(o, c, uint(oc + int(row) * pc.scm + int(col)), uint(pc.scm), false);",
        "        continue;",
        "      }",
        "      coopMatStoreNV(o, As, scratch / V, FN / V, false);",
        "      subgroupMemoryBarrierShared();",
        "      subgroupBarrier();",
        "      for (uint e = lane; e < FM * FN; e += gl_SubgroupSize) {",
        "        uint r = row + e / FN, q = col + e % FN;",
        "        uint h = scratch + e;",
        "        f16vec2 pair = unpackFloat2x16(As[h / V][(h / 2u) % (V / 2u)]);",
        "        if (r < pc.M && q < pc.N) c[oc + int(r) * pc.scm + int(q) * pc.scn] = pair[h % 2u];",
        "      }",
        "      subgroupBarrier();",
        "    }",
        "  }",
        "}",
    ]


@family("matmul_coopmat")
def _render_coopmat(spec: KernelSpec) -> str:
    fm, fn, fk = spec.param("shape")
    accbits = 32 if spec.param("acc") == "float32" else 16
    a_layout, b_layout, vec = spec.param("a"), spec.param("b"), spec.param("vec")
    t = coopmat_tiling(spec)
    wm, wn = t.warp_tile[0] // fm, t.warp_tile[1] // fn       # fragments per subgroup
    (bm, bn), bk, nt = t.block, t.bk, t.threads
    geo = _coopmat_rows(t, a_layout, b_layout)
    (a_rows, a_len), (b_rows, b_len) = geo["a"], geo["b"]
    word = {4: "uvec2", 8: "uvec4"}[vec]
    a_used, b_used = bm * bk // vec, bk * bn // vec        # vectors per tile
    assert a_used % nt == 0 and b_used % nt == 0, "tile not a multiple of the workgroup"
    acc_t = f"fcoopmatNV<{accbits}, gl_ScopeSubgroup, FM, FN>"
    a_t = "fcoopmatNV<16, gl_ScopeSubgroup, FM, FK>"
    b_t = "fcoopmatNV<16, gl_ScopeSubgroup, FK, FN>"
    o_t = "fcoopmatNV<16, gl_ScopeSubgroup, FM, FN>"
    out = [
        f"const uint FM = {fm}u, FN = {fn}u, FK = {fk}u, WM = {wm}u, WN = {wn}u, V = {vec}u;",
        f"const uint SGX = {t.warps[0]}u, BM = {bm}u, BN = {bn}u, BK = {bk}u, NT = {nt}u;",
        # shared row lengths and stage sizes, in vectors
        f"const uint ALEN = {a_len // vec}u, BLEN = {b_len // vec}u;",
        f"const uint ASTAGE = {a_rows * a_len // vec}u, BSTAGE = {b_rows * b_len // vec}u;",
        f"shared {word} As[{t.stages}u * ASTAGE];",
        f"shared {word} Bs[{t.stages}u * BSTAGE];",
        "void main() {",
        "  uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID;",
        "  uint bn0 = (gl_WorkGroupID.x + pc.x0) * BN, bm0 = (gl_WorkGroupID.y + pc.y0) * BM;",
        "  uint sm = (sg / SGX) * WM * FM, sn = (sg % SGX) * WN * FN;",   # subgroup's corner
        "  uint z = gl_WorkGroupID.z + pc.z0;",
        batch_offsets_glsl(["a", "b", "c"]),
        f"  {acc_t} acc[WM][WN];",
        "  [[unroll]] for (uint i = 0u; i < WM; ++i)",
        f"    [[unroll]] for (uint j = 0u; j < WN; ++j) acc[i][j] = {acc_t}(0.0);",
        f"  {word} ra[{a_used // nt}], rb[{b_used // nt}];",
    ]
    a_load, b_load = _operand_loads(a_layout, b_layout)
    parts = (("ra", a_load, "a4", "As", "ASTAGE", a_used // nt),
             ("rb", b_load, "b4", "Bs", "BSTAGE", b_used // nt))

    def fetch(k0: str, ind: str) -> list:
        lines = [f"{ind}uint kt = {k0};"]
        for reg, (decl, cond, src, _), buf, _, _, count in parts:
            lines += [f"{ind}[[unroll]] for (uint i = 0u; i < {count}u; ++i) {{",
                      f"{ind}  uint v = tid + i * NT; {decl}",
                      f"{ind}  {reg}[i] = ({cond}) ? {buf}[{src}] : {word}(0u);",
                      f"{ind}}}"]
        return lines

    def store(stage: str, ind: str) -> list:
        lines = []
        for reg, (decl, _, _, dst), _, sbuf, size, count in parts:
            lines += [f"{ind}[[unroll]] for (uint i = 0u; i < {count}u; ++i) {{",
                      f"{ind}  uint v = tid + i * NT, kt = 0u; {decl}",
                      f"{ind}  {sbuf}[{stage} * {size} + {dst}] = {reg}[i];",
                      f"{ind}}}"]
        return lines

    a_elem = (("(sm + i * FM) * ALEN + kk / V", "false") if a_layout == "mk"
              else ("kk * ALEN + (sm + i * FM) / V", "true"))
    b_elem = (("kk * BLEN + (sn + j * FN) / V", "false") if b_layout == "kn"
              else ("(sn + j * FN) * BLEN + kk / V", "true"))
    mma = [
        "    [[unroll]] for (uint kk = 0u; kk < BK; kk += FK) {",
        f"      {a_t} fa[WM];",
        f"      {b_t} fb[WN];",
        f"      [[unroll]] for (uint i = 0u; i < WM; ++i) coopMatLoadNV(fa[i], As, cur * ASTAGE + {a_elem[0]}, ALEN, {a_elem[1]});",
        f"      [[unroll]] for (uint j = 0u; j < WN; ++j) coopMatLoadNV(fb[j], Bs, cur * BSTAGE + {b_elem[0]}, BLEN, {b_elem[1]});",
        "      [[unroll]] for (uint i = 0u; i < WM; ++i)",
        "        [[unroll]] for (uint j = 0u; j < WN; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);",
        "    }"]
    out += ["  {"] + fetch("0u", "    ") + ["  }"]
    out += _k_loop(t.stages, fetch, store, mma)
    out += _epilogue(o_t)
    return "\n".join(out)


# -- KHR cooperative-matrix GEMM, whole blocks only ------------------------------------

@dataclass(frozen=True)
class KhrTiling:
    """A workgroup's ``block`` (BM, BN) of C, split among ``subgroups`` (along
    N, along M), each owning a (BM / along M) × (BN / along N) tile of 16×16
    fragments; K advances ``bk`` per shared-memory tile."""
    block: tuple
    subgroups: tuple
    bk: int

    @property
    def threads(self) -> int:
        return self.subgroups[0] * self.subgroups[1] * COOPMAT_SUBGROUP

    @property
    def shared_bytes(self) -> int:
        (bm, bn), bk = self.block, self.bk
        return 2 * (bm * (bk + COOPMAT_PAD) + bk * (bn + COOPMAT_PAD))


# Tiling study (H200, 4096³, fp16 A/B/C, TFLOP/s, 2026-12-03). fp16 accumulators: 256×256 of
# eight 128×64 subgroup tiles, BK 32 led (304; 128×128 of four 64×64: 290; 16×8×16: 299); fp32
# ones (twice the registers): 128×128 of four 64×64, BK 16 (192; peeling the last K step: 216.5).
# Two shared-memory stages lost here (277 vs 286); strides as constants gave 317-320 (a pipeline
# per (K, N)); NVIDIA's KHR sample reaches 395 (383 on an H100 beside this kernel's 285): what
# separated them was the loop's order (see the fp16 loop in _render_coopmat_khr).
KHR_TILINGS = {"float16": KhrTiling((256, 256), (4, 2), 32), "float32": KhrTiling((128, 128), (2, 2), 16)}
KHR_PEELED = ("float32",)      # accumulators whose kernel runs the last K step after its loop
# K and the row strides of A, B and C (in elements) are specialization
# constants, after the workgroup size's three: a pipeline per shape. Read
# from push constants they held the kernel at 343 TFLOP/s; specialized it
# runs 391-395, the minimal reference's 394 with every size compiled in
# (4096^3, fp16 accumulators, an H100, one process).
KHR_SHAPE_IDS = (3, 4, 5, 6)
KHR_SHAPE_GLSL = "\n".join(f"layout(constant_id = {i}) const uint {name} = 1u;"
                           for i, name in zip(KHR_SHAPE_IDS, ("KS", "SAM", "SBK", "SCM")))
KHR_EXTS = ("GL_KHR_cooperative_matrix", "GL_KHR_memory_scope_semantics", "GL_KHR_shader_subgroup_basic") + UNROLL


def coopmat_khr_spec(acc: str) -> KernelSpec:
    """C = A @ B for row-major fp16 A, B and C whose M, N and K are whole
    blocks (no bounds checks anywhere: other sizes take the NV kernel or the
    vector kernels). Each thread stages its share of the next A and B tiles
    in registers (16-byte loads) while the subgroups multiply the current
    one from shared memory; B fragments are loaded one at a time in the
    inner loop, A's once per K step. K and the row strides are
    specialization constants (:func:`khr_spec_constants`): a pipeline per
    shape. Written for glslang 13+ (``guestcompute bake`` uses
    glslangValidator for it)."""
    t = KHR_TILINGS[acc]
    bindings = (Binding("a4", "uvec4", READ), Binding("b4", "uvec4", READ), Binding("c", "float16_t", WRITE))
    params = (("acc", acc), ("block", t.block), ("subgroups", t.subgroups), ("bk", t.bk))
    if acc in KHR_PEELED:
        params += (("peel", True),)
    return KernelSpec("matmul_coopmat_khr", bindings, GEMM_PUSH, params, (t.threads, 1, 1),
                      extensions_for("float16", KHR_EXTS), ("cooperative_matrix_khr", "float16", "subgroup"))


def khr_tiling(spec: KernelSpec) -> KhrTiling:
    return KhrTiling(spec.param("block"), spec.param("subgroups"), spec.param("bk"))


def khr_spec_constants(k: int, a_row_stride: int, b_row_stride: int, c_row_stride: int) -> tuple:
    """(id, value) pairs of the KHR kernel's specialization constants for a
    problem (:data:`KHR_SHAPE_IDS`)."""
    return tuple(zip(KHR_SHAPE_IDS, (k, a_row_stride, b_row_stride, c_row_stride)))


@family("matmul_coopmat_khr")
def _render_coopmat_khr(spec: KernelSpec) -> str:
    t = khr_tiling(spec)
    (bm, bn), (sgx, sgy), bk, nt = t.block, t.subgroups, t.bk, t.threads
    wm, wn = bm // sgy // 16, bn // sgx // 16          # fragments per subgroup
    alen, blen = (bk + COOPMAT_PAD) // 8, (bn + COOPMAT_PAD) // 8
    av, bv = bm * bk // 8 // nt, bk * bn // 8 // nt   # uvec4 each thread stages
    acc_t = "float" if spec.param("acc") == "float32" else "float16_t"
    mat = "coopmat<{}, gl_ScopeSubgroup, 16u, 16u, {}>"
    acc_m, a_m = mat.format(acc_t, "gl_MatrixUseAccumulator"), mat.format("float16_t", "gl_MatrixUseA")
    b_m, o_m = mat.format("float16_t", "gl_MatrixUseB"), mat.format("float16_t", "gl_MatrixUseAccumulator")
    row = "gl_CooperativeMatrixLayoutRowMajor"
    a_at = "uint v = tid + i * NT; uint m = v / (BK / 8u), k = (v % (BK / 8u)) * 8u;"
    b_at = "uint v = tid + i * NT; uint k = v / (BN / 8u), n = (v % (BN / 8u)) * 8u;"
    stage = [   # the current tile from registers into shared memory
        f"    [[unroll]] for (uint i = 0u; i < AV; ++i) {{ {a_at} As[m * ALEN + k / 8u] = ra[i]; }}",
        f"    [[unroll]] for (uint i = 0u; i < BV; ++i) {{ {b_at} Bs[k * BLEN + n / 8u] = rb[i]; }}",
        "    barrier();"]

    def fetch(guard: str) -> list:
        """The next tile (K step kt) from global memory into registers,
        each load under ``guard``."""
        return [f"      [[unroll]] for (uint i = 0u; i < AV; ++i) {{ {a_at} "
                f"{guard}ra[i] = a4[(abase + m * SAM + kt + k) / 8u]; }}",
                f"      [[unroll]] for (uint i = 0u; i < BV; ++i) {{ {b_at} "
                f"{guard}rb[i] = b4[(bbase + (kt + k) * SBK + n) / 8u]; }}"]
    multiply = [
        "    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {",
        f"      {a_m} fa[WM];",
        "      [[unroll]] for (uint i = 0u; i < WM; ++i)",
        f"        coopMatLoad(fa[i], As, (sm + i * 16u) * ALEN + kk / 8u, ALEN, {row});",
        "      [[unroll]] for (uint j = 0u; j < WN; ++j) {",
        f"        {b_m} fb;",
        f"        coopMatLoad(fb, Bs, kk * BLEN + (sn + j * 16u) / 8u, BLEN, {row});",
        "        [[unroll]] for (uint i = 0u; i < WM; ++i) acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]);",
        "      }",
        "    }"]
    if spec.param("peel", False):
        # Every K step but the last fetches the next tile unconditionally;
        # the last one runs after the loop. Measured on the H200 (4096^3):
        # +15 % with fp32 accumulators, -3..8 % with fp16 ones.
        k_loop = ["  for (uint k0 = 0u; k0 + BK < KS; k0 += BK) {", *stage,
                  "    {", "      uint kt = k0 + BK;", *fetch(""), "    }", *multiply, "    barrier();", "  }",
                  *stage, *multiply]
    else:
        # Each load of the next tile under its own test, not one branch
        # around them all, and the barrier before the stores rather than
        # after the multiply: together 285 -> 343 TFLOP/s at 4096^3 on an
        # H100 (320 -> 381 for the minimal reference; either alone 307 and
        # 347). The same barrier move costs fp32 accumulators 219 -> 186.
        k_loop = ["  for (uint k0 = 0u; k0 < KS; k0 += BK) {", "    barrier();", *stage,
                  "    {", "      bool more = k0 + BK < KS;", "      uint kt = k0 + BK;", *fetch("if (more) "),
                  "    }", *multiply, "  }"]
    return "\n".join([
        "#pragma use_vulkan_memory_model",
        f"const uint BM = {bm}u, BN = {bn}u, BK = {bk}u, SGX = {sgx}u, NT = {nt}u, WM = {wm}u, WN = {wn}u;",
        f"const uint ALEN = {alen}u, BLEN = {blen}u, AV = {av}u, BV = {bv}u;",
        KHR_SHAPE_GLSL,
        "shared uvec4 As[BM * ALEN], Bs[BK * BLEN];",
        "void main() {",
        "  uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID;",
        "  uint bn0 = (gl_WorkGroupID.x + pc.x0) * BN, bm0 = (gl_WorkGroupID.y + pc.y0) * BM;",
        "  uint sm = (sg / SGX) * WM * 16u, sn = (sg % SGX) * WN * 16u;",
        "  uint z = gl_WorkGroupID.z + pc.z0;",
        batch_offsets_glsl(["a", "b", "c"]),
        # element offsets of this block's first row of A and first column of B
        "  uint abase = uint(oa) + bm0 * SAM, bbase = uint(ob) + bn0;",
        f"  {acc_m} acc[WM][WN];",
        "  [[unroll]] for (uint i = 0u; i < WM; ++i)",
        f"    [[unroll]] for (uint j = 0u; j < WN; ++j) acc[i][j] = {acc_m}(0.0);",
        "  uvec4 ra[AV], rb[BV];",
        f"  [[unroll]] for (uint i = 0u; i < AV; ++i) {{ {a_at} ra[i] = a4[(abase + m * SAM + k) / 8u]; }}",
        f"  [[unroll]] for (uint i = 0u; i < BV; ++i) {{ {b_at} rb[i] = b4[(bbase + k * SBK + n) / 8u]; }}",
        *k_loop,
        "  [[unroll]] for (uint i = 0u; i < WM; ++i)",
        "    [[unroll]] for (uint j = 0u; j < WN; ++j) {",
        f"      {o_m} o = {o_m}(acc[i][j]);",
        "      coopMatStore(o, c, uint(oc) + (bm0 + sm + i * 16u) * SCM + bn0 + sn + j * 16u, "
        f"SCM, {row});",
        "    }",
        "}"])


@variants("matmul_coopmat_khr")
def _coopmat_khr_variants():
    for acc in COOPMAT_ACC:
        yield coopmat_khr_spec(acc)


@variants("matmul_coopmat")
def coopmat_variants():
    # What the selector can produce: every tiling it may pick, for every
    # fragment shape, accumulator, layout and vector width.
    for t in COOPMAT_TILINGS:
        for shape in COOPMAT_SHAPES:
            for acc in COOPMAT_ACC:
                for a in A_LAYOUTS:
                    for b in B_LAYOUTS:
                        for vec in (8, 4):
                            yield coopmat_spec(shape, acc, a, b, t, vec)
    # The other tilings, for measuring against the chosen one (row-major
    # operands, 16x16x16 fragments).
    for t in COOPMAT_SWEEP:
        for acc in COOPMAT_ACC:
            yield coopmat_spec((16, 16, 16), acc, "mk", "kn", t, 8)
