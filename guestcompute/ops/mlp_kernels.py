"""The fused-MLP kernel families: a whole small network in one dispatch.

Which kernel runs is decided in :mod:`.mlp`; this file renders GLSL from a
frozen spec and lists every spec the selector can produce.

Both families read the network from one packed buffer (:mod:`.mlp_pack`):
a table of eight words per layer — padded fan-in K, padded width N,
activation code, its slope (float bits), the weights' and the bias's word
offsets — then each layer's weights, K x N row-major, and its bias. So
one kernel serves every architecture of its width class: the widths,
depth and activations are not part of the spec, and every variant is
baked. The portable kernel reads them from the table; the KHR kernel
takes them for its first layers as specialization constants
(:func:`khr_spec_constants`), a pipeline per network structure.

Operands: ``x`` rows of the input (a tensor, ``x[x_off + q*x_sr + k*x_sc]``,
or a sampled image whose pixel ``q`` is at (q % img_w, q / img_w)), and
``o`` the output, a tensor or a storage image written texel by texel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.catalogue import variants
from ..kernels.glsl_lib import F16_EXTENSIONS, WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family
from ..spirv import bfloat16
from . import pixels as px

UNROLL = ("GL_EXT_control_flow_attributes",)
TABLE_WORDS = 8                    # words of one layer's entry in the table
PAD = 16                           # every width is padded to a multiple of this (one fragment)
ACTIVATIONS = ("none", "relu", "leaky_relu", "sigmoid", "tanh", "silu")


def activation_words(layer) -> tuple:
    """(activation code, the slope's float32 bits) of a layer (ops/mlp.Dense)
    as the kernels read them, from the table or as specialization
    constants; (0, 0) for None, a slot past the network's depth."""
    if layer is None:
        return 0, 0
    return ACTIVATIONS.index(layer.activation), int(np.array([layer.slope], np.float32).view(np.uint32)[0])


WEIGHT_DTYPES = ("float16", "float32", "bfloat16")
# Input layouts: float tensors, or a sampled image read with texelFetch.
X_LAYOUTS = ("f16", "f32", "tex")
# Output layouts: float tensors, or storage images of these formats (others
# take a float32 tensor and a copy).
O_LAYOUTS = ("f16", "f32", "put:rgba16f", "put:rgba32f", "put:rgba8")

PUSH = (Push("rows", "uint"), Push("depth", "uint"), Push("in_w", "uint"), Push("out_w", "uint"),
        Push("img_w", "uint"), Push("x_off", "uint"), Push("x_sr", "int"), Push("x_sc", "int"),
        Push("o_off", "uint"), Push("o_sr", "int"), Push("o_sc", "int"))

# float activate(v, code, slope): the code is ACTIVATIONS' index. tanh and
# the sigmoid are written so that large |v| saturates instead of making
# inf/inf.
ACTIVATE = """float activate(float v, uint code, float slope) {
  if (code == 1u) return max(v, 0.0);
  if (code == 2u) return v >= 0.0 ? v : v * slope;
  if (code == 3u) return 1.0 / (1.0 + exp(-v));
  if (code == 4u) { float e = exp(-2.0 * abs(v)); return sign(v) * (1.0 - e) / (1.0 + e); }
  if (code == 5u) return v / (1.0 + exp(-v));
  return v;
}"""


def _binding(name: str, layout: str, access: str) -> Binding:
    if layout in ("f16", "f32"):
        return Binding(name, "float16_t" if layout == "f16" else "float", access)
    return px.binding(name, layout, access)


def _io_features(x: str, o: str) -> tuple:
    feats = {"float16"} if "f16" in (x, o) else set()
    return tuple(sorted(feats))


def _io_glsl(x: str, o: str) -> str:
    """``load_x(q, k)`` / ``load_px(q)`` and ``store_o(q, c, v)`` /
    ``store_px(q, v)`` for the operand layouts."""
    out = []
    if x == "tex":
        out.append("vec4 load_px(uint q) { return texelFetch(x, ivec2(int(q % pc.img_w), int(q / pc.img_w)), 0); }")
    else:
        out.append("float load_x(uint q, uint k) { return float(x[int(pc.x_off) + int(q) * pc.x_sr + int(k) * pc.x_sc]); }")
    if o in ("f16", "f32"):
        t = "float16_t" if o == "f16" else "float"
        out.append(f"void store_o(uint q, uint c, float v) {{ o[int(pc.o_off) + int(q) * pc.o_sr + int(c) * pc.o_sc] = {t}(v); }}")
    else:
        out.append(px.storer("o", o))
        out.append("void store_px(uint q, vec4 v) { store_o(int(q / pc.img_w), int(q % pc.img_w), v); }")
    return "\n".join(out)


def _is_image_out(o: str) -> bool:
    return o not in ("f16", "f32")


# -- fma: the portable kernel ---------------------------------------------------------

FMA_ROWS = 16          # queries per workgroup
FMA_THREADS = 64
FMA_WMAX = 128         # widest layer: two fp32 activation tiles of ROWS x WMAX = 16 KiB


def fma_spec(dtype: str, x: str, o: str) -> KernelSpec:
    """One workgroup of 64 invocations evaluates 16 queries: activations in
    two fp32 shared tiles (ping-pong), each invocation computing 4 rows x 1
    column per step with the weight read once from the packed buffer (the
    whole workgroup reads the same rows of it: cache hits). Runs on every
    Vulkan device (16 KiB of shared memory, 64 invocations)."""
    bindings = (_binding("x", x, READ), Binding("net", "uint", READ), _binding("o", o, WRITE))
    feats = _io_features(x, o)
    exts = (F16_EXTENSIONS if feats else ()) + UNROLL
    return KernelSpec("mlp_fma", bindings, PUSH, (("dtype", dtype), ("x", x), ("o", o)),
                      (FMA_THREADS, 1, 1), exts, feats)


def _weight_fn(dtype: str) -> str:
    if dtype == "float16":
        return "float weight(uint base, uint i) { return unpackHalf2x16(net[base + (i >> 1u)])[i & 1u]; }"
    if dtype == "bfloat16":
        # a bfloat16 is the high half of the float32 it rounds: exact
        return ("float weight(uint base, uint i) { uint w = net[base + (i >> 1u)]; "
                "return uintBitsToFloat((i & 1u) == 0u ? w << 16u : w & 0xFFFF0000u); }")
    return "float weight(uint base, uint i) { return uintBitsToFloat(net[base + i]); }"


@family("mlp_fma")
def _render_fma(spec: KernelSpec) -> str:
    x, o = spec.param("x"), spec.param("o")
    if x == "tex":
        load = ["  for (uint r = tid; r < R; r += NT) {",
                "    uint q = row0 + r;",
                "    vec4 p = q < pc.rows ? load_px(q) : vec4(0.0);",
                "    for (uint k = 0u; k < K0; ++k) act[0][r * WMAX + k] = k < pc.in_w ? p[min(k, 3u)] : 0.0;",
                "  }"]
    else:
        load = ["  for (uint i = tid; i < R * K0; i += NT) {",
                "    uint r = i / K0, k = i % K0, q = row0 + r;",
                "    act[0][r * WMAX + k] = (q < pc.rows && k < pc.in_w) ? load_x(q, k) : 0.0;",
                "  }"]
    if _is_image_out(o):
        store = ["  for (uint r = tid; r < R; r += NT) {",
                 "    uint q = row0 + r;",
                 "    if (q >= pc.rows) continue;",
                 "    vec4 v = vec4(0.0, 0.0, 0.0, 1.0);",
                 "    for (uint c = 0u; c < min(pc.out_w, 4u); ++c) v[c] = act[cur][r * WMAX + c];",
                 "    store_px(q, v);",
                 "  }"]
    else:
        store = ["  for (uint i = tid; i < R * pc.out_w; i += NT) {",
                 "    uint r = i / pc.out_w, c = i % pc.out_w, q = row0 + r;",
                 "    if (q < pc.rows) store_o(q, c, act[cur][r * WMAX + c]);",
                 "  }"]
    return "\n".join([
        f"const uint R = {FMA_ROWS}u, NT = {FMA_THREADS}u, WMAX = {FMA_WMAX}u;",
        "shared float act[2][R * WMAX];",
        _io_glsl(x, o),
        _weight_fn(spec.param("dtype")),
        ACTIVATE,
        "void main() {",
        "  uint tid = gl_LocalInvocationID.x;",
        f"  uint row0 = {WG_INDEX} * R;",
        "  uint K0 = net[0];",
        *load,
        "  barrier();",
        "  uint cur = 0u;",
        "  for (uint l = 0u; l < pc.depth; ++l) {",
        f"    uint t = l * {TABLE_WORDS}u;",
        "    uint K = net[t], N = net[t + 1u], code = net[t + 2u], wo = net[t + 4u], bo = net[t + 5u];",
        "    float slope = uintBitsToFloat(net[t + 3u]);",
        "    for (uint i = tid; i < (R / 4u) * N; i += NT) {",
        "      uint c = i % N, r0 = (i / N) * 4u * WMAX;",
        "      vec4 acc = vec4(weight(bo, c));",
        "      for (uint k = 0u; k < K; ++k) {",
        "        vec4 a = vec4(act[cur][r0 + k], act[cur][r0 + WMAX + k], act[cur][r0 + 2u * WMAX + k],"
        " act[cur][r0 + 3u * WMAX + k]);",
        "        acc += a * weight(wo, k * N + c);",
        "      }",
        "      [[unroll]] for (uint j = 0u; j < 4u; ++j) act[cur ^ 1u][r0 + j * WMAX + c] = activate(acc[j], code, slope);",
        "    }",
        "    barrier();",
        "    cur ^= 1u;",
        "  }",
        *store,
        "}"])


def fma_loop_iterations(widths: tuple) -> int:
    """Loop iterations one invocation of the fma kernel runs for padded
    ``widths`` (in, hidden..., out): what a driver that caps them (lavapipe)
    must allow."""
    total = -(-FMA_ROWS * widths[0] // FMA_THREADS) + FMA_ROWS * 4
    for k, n in zip(widths, widths[1:]):
        per_thread = -(-(FMA_ROWS // 4) * n // FMA_THREADS)
        total += per_thread * (k + 1) + 1
    return total + -(-FMA_ROWS * widths[-1] // FMA_THREADS)


# -- khr_coopmat: VK_KHR_cooperative_matrix 16x16x16 fp16 fragments ------------------------

ROW_MAJOR = "gl_CooperativeMatrixLayoutRowMajor"
SUBGROUP = 32          # the kernel's subgroups own rows of 16 x (row fragments); laid out for 32 lanes
KHR_EXTS = ("GL_KHR_cooperative_matrix", "GL_KHR_memory_scope_semantics", "GL_KHR_shader_subgroup_basic") + UNROLL


@dataclass(frozen=True)
class KhrTiling:
    """``wmax``: the widest layer it takes; ``subgroups`` of 32 lanes, each
    owning ``row_frags`` x 16 query rows (all columns)."""
    wmax: int
    subgroups: int
    row_frags: int

    @property
    def rows(self) -> int:
        return self.subgroups * self.row_frags * 16

    @property
    def threads(self) -> int:
        return self.subgroups * SUBGROUP

    @property
    def alen(self) -> int:
        """uvec4s per shared row of fp16 activations (8 halves of padding: no bank conflicts)."""
        return (self.wmax + 8) // 8

    @property
    def pool(self) -> int:
        """uvec4s of shared memory: each subgroup's rows of fp16
        activations, over which it writes its fp32 output a fragment
        column at a time (the weights are read from the buffer)."""
        return self.rows * max(self.alen, OUT_LEN)

    @property
    def shared_bytes(self) -> int:
        return self.pool * 16


OUT_LEN = 5            # uvec4s per row of a subgroup's fp32 output tile: 16 columns and 4 of padding
# Best first; the selector takes the first whose width class covers the
# network and which fits the device's shared memory and invocations.
# Four fragments a subgroup (36 KiB) ran no faster than two while the
# kernel staged its float16 rows element by element (4.02 against 3.82 ms
# for the benchmark network on an H100); once such rows are loaded and
# stored a fragment at a time it is the faster: 2.67 and 2.65 against
# 3.30 and 3.28 ms, alternating in one process. Two fragments (18 KiB)
# remain for devices with less shared memory.
KHR_TILINGS = (KhrTiling(64, 4, 4), KhrTiling(64, 4, 2), KhrTiling(128, 4, 1), KhrTiling(128, 2, 1))
KHR_ACC = ("float32", "float16")
# The KHR kernel's weight and activation types: bfloat16 takes float32
# accumulators (the fragments devices offer), and its kernel is the float16
# one with its fragments retyped (spirv/bfloat16.py).
KHR_DTYPES = ("float16", "bfloat16")

# float32 to bfloat16 bits, rounded to nearest even (a NaN stays a NaN).
PACK_BF16 = """uint bf16_bits(float v) {
  uint b = floatBitsToUint(v);
  return isnan(v) ? 0x7FC0u : (b + 0x7FFFu + ((b >> 16u) & 1u)) >> 16u;
}
uint packBFloat2x16(vec2 v) { return bf16_bits(v.x) | (bf16_bits(v.y) << 16u); }"""


def khr_spec(tiling: KhrTiling, acc: str, x: str, o: str, dtype: str = "float16") -> KernelSpec:
    """A workgroup owns ``tiling.rows`` queries, and each of its subgroups
    works on its own rows from start to end, with no workgroup barrier:
    it stages its input rows into shared memory as fp16; per layer it
    loads its accumulators with the bias (a bias block of 16 identical
    rows, loaded as a fragment), multiplies its rows by every weight
    fragment, loaded straight from the network buffer (every workgroup
    reads the same few kilobytes, which stay in cache; staging them
    through shared memory costs two workgroup barriers a layer, and the
    minimal reference, benchmarks/baselines/coopmat_mlp.comp, ran 70
    TFLOP/s that way against 82 from the buffer on an H100), applies the
    activation on the accumulator elements and stores its rows back as
    fp16. The last layer's accumulators go to the output through an fp32
    tile over the subgroup's rows, 16 columns at a time. A float16 tensor
    input or output whose rows are whole fragments skips the element-wise
    routes (:data:`DIRECT_IN`, :data:`DIRECT_OUT`): 3.84 -> 3.34 ms for the
    benchmark network on an H100. With ``dtype`` "bfloat16" the fragments
    and staged rows are bfloat16 and float16 tensors go element by element."""
    if dtype == "bfloat16" and acc != "float32":
        raise ValueError("bfloat16 fragments take float32 accumulators")
    bindings = (_binding("x", x, READ), Binding("net", "uvec4", READ), _binding("o", o, WRITE))
    params = (("acc", acc), ("x", x), ("o", o), ("wmax", tiling.wmax), ("subgroups", tiling.subgroups),
              ("row_frags", tiling.row_frags)) + ((("dtype", dtype),) if dtype != "float16" else ())
    feats = ("cooperative_matrix_khr", "float16", "subgroup") + \
        (("bfloat16_cooperative_matrix",) if dtype == "bfloat16" else ())
    return KernelSpec("mlp_khr", bindings, PUSH, params, (tiling.threads, 1, 1),
                      tuple(dict.fromkeys(F16_EXTENSIONS + KHR_EXTS)), feats)


def khr_tiling(spec: KernelSpec) -> KhrTiling:
    return KhrTiling(spec.param("wmax"), spec.param("subgroups"), spec.param("row_frags"))


# A float16 tensor whose rows are whole fragments (its width the first
# layer's padded fan-in, its row stride and offset 16-byte aligned, as
# cooperative-matrix loads ask) is read a fragment at a time, where the
# subgroup's rows are all queries; so is such an output written. Elsewhere
# the rows go element by element, with bounds and strides.
DIRECT_IN = ("pc.x_sc == 1 && pc.x_sr > 0 && (uint(pc.x_sr) & 7u) == 0u && (pc.x_off & 7u) == 0u"
             " && pc.in_w == K0 && q0 + SR <= pc.rows")
DIRECT_OUT = ("pc.o_sc == 1 && pc.o_sr > 0 && (uint(pc.o_sr) & 7u) == 0u && (pc.o_off & 7u) == 0u"
              " && pc.out_w == OUT_NF * 16u && q0 + SR <= pc.rows")


def _khr_load(x: str, mats: dict, bf16: bool) -> list:
    """The subgroup's input rows into its activation rows: whole fragments
    where :data:`DIRECT_IN` holds (and the fragments are float16, the
    tensor's type), else eight values (one uvec4) a lane a step."""
    staged = _khr_load_staged(x, "packBFloat2x16" if bf16 else "packHalf2x16")
    if x != "f16" or bf16:
        return staged
    return [f"  if ({DIRECT_IN}) {{",
            "    [[unroll]] for (uint i = 0u; i < RF; ++i)",
            "      for (uint kk = 0u; kk < KF0; ++kk) {",
            f"        {mats['h']} h;",
            f"        coopMatLoad(h, x, pc.x_off + (q0 + i * 16u) * uint(pc.x_sr) + kk * 16u, uint(pc.x_sr), {ROW_MAJOR});",
            f"        coopMatStore(h, pool, (sm + i * 16u) * ALEN + 2u * kk, ALEN, {ROW_MAJOR});",
            "      }",
            "  } else {",
            *("  " + line for line in staged),
            "  }"]


def _khr_load_staged(x: str, pack: str) -> list:
    if x == "tex":
        value = "(k + e < pc.in_w) ? p[min(k + e, 3u)] : 0.0"
        fetch = "    vec4 p = q < pc.rows ? load_px(q) : vec4(0.0);"
    else:
        value = "(q < pc.rows && k + e < pc.in_w) ? load_x(q, k + e) : 0.0"
        fetch = ""
    return ["  for (uint v = lane; v < SR * (K0 / 8u); v += SG) {",
            "    uint r = v / (K0 / 8u), k = (v % (K0 / 8u)) * 8u, q = q0 + r;",
            fetch,
            "    float h[8];",
            f"    [[unroll]] for (uint e = 0u; e < 8u; ++e) h[e] = {value};",
            f"    pool[(sm + r) * ALEN + k / 8u] = uvec4({pack}(vec2(h[0], h[1])), {pack}(vec2(h[2], h[3])),",
            f"                                         {pack}(vec2(h[4], h[5])), {pack}(vec2(h[6], h[7])));",
            "  }"]


def _khr_store(o: str) -> list:
    """The subgroup's output tile (columns c0 .. c0 + 15 of its rows) to the output."""
    read = "uintBitsToFloat(pool[ot + r * OUT_LEN + c / 4u][c % 4u])"
    if _is_image_out(o):
        # An image's pixel takes at most four channels: the first fragment column only.
        return ["      if (c0 == 0u) for (uint r = lane; r < SR; r += SG) {",
                "        uint q = q0 + r;",
                "        if (q >= pc.rows) continue;",
                "        vec4 v = vec4(0.0, 0.0, 0.0, 1.0);",
                f"        for (uint c = 0u; c < min(pc.out_w, 4u); ++c) v[c] = {read};",
                "        store_px(q, v);",
                "      }"]
    return ["      for (uint v = lane; v < SR * 16u; v += SG) {",
            "        uint r = v / 16u, c = v % 16u, q = q0 + r;",
            f"        if (q < pc.rows && c0 + c < pc.out_w) store_o(q, c0 + c, {read});",
            "      }"]


# Every lane of the subgroup has finished its shared-memory accesses before any goes on.
SUBGROUP_SYNC = ["    subgroupMemoryBarrierShared();", "    subgroupBarrier();"]

# The first KHR_SLOTS layers are written out with their fan-in and width in
# fragments, activation code and slope as specialization constants, so that
# the driver sees constant loop bounds and branches (the minimal reference
# with every size compiled in ran 81 TFLOP/s on an H200, 58 with its widths
# read from the table); deeper layers read them from the table in a loop.
# Specialization constant ids (0-2 are the workgroup size's):
KHR_SLOTS = 8
KHR_DEPTH_ID, KHR_OUT_NF_ID, KHR_KF_ID = 3, 4, 5
KHR_NF_ID, KHR_CODE_ID, KHR_SLOPE_ID = KHR_KF_ID + KHR_SLOTS, KHR_KF_ID + 2 * KHR_SLOTS, KHR_KF_ID + 3 * KHR_SLOTS


def khr_spec_constants(layers) -> tuple:
    """(id, uint value) pairs of the KHR kernel's specialization constants
    for ``layers`` (ops/mlp.Dense): the depth, the last layer's width in
    fragments, then each written-out layer's fan-in and width in
    fragments, activation code and slope bits (0 past the depth)."""
    out = [(KHR_DEPTH_ID, len(layers)), (KHR_OUT_NF_ID, -(-layers[-1].shape[1] // PAD))]
    for s in range(KHR_SLOTS):
        layer = layers[s] if s < len(layers) else None
        k, n = layer.shape if layer else (0, 0)
        code, slope = activation_words(layer)
        out += [(KHR_KF_ID + s, -(-k // PAD)), (KHR_NF_ID + s, -(-n // PAD)),
                (KHR_CODE_ID + s, code), (KHR_SLOPE_ID + s, slope)]
    return tuple(sorted(out))


def _khr_constants() -> list:
    """The constants' declarations, then each written-out layer's weight
    and bias offsets in uvec4s (WO, BO), which follow from the widths by
    the packed layout (ops/mlp.pack: the table, two uvec4s a layer, then
    each layer's K x N fp16 weights and its 16 rows of bias), so that no
    layer waits on a read of the table before its products."""
    out = [f"layout(constant_id = {KHR_DEPTH_ID}) const uint DEPTH = 1u;",
           f"layout(constant_id = {KHR_OUT_NF_ID}) const uint OUT_NF = 1u;"]
    for s in range(KHR_SLOTS):
        out += [f"layout(constant_id = {KHR_KF_ID + s}) const uint KF{s} = 1u;",
                f"layout(constant_id = {KHR_NF_ID + s}) const uint NF{s} = 1u;",
                f"layout(constant_id = {KHR_CODE_ID + s}) const uint CODE{s} = 0u;",
                f"layout(constant_id = {KHR_SLOPE_ID + s}) const float SLOPE{s} = 0.0;"]
    start = f"{TABLE_WORDS // 4}u * DEPTH"
    for s in range(KHR_SLOTS):
        # a 16 x 16 fp16 fragment is 32 uvec4s
        out += [f"const uint WO{s} = {start};", f"const uint BO{s} = WO{s} + 32u * KF{s} * NF{s};"]
        start = f"BO{s} + 32u * NF{s}"
    return out


def _khr_layer(mats: dict, acc_t: str, what: dict) -> list:
    """One layer: its bias into the accumulators, its products, its
    activation and, unless ``what["more"]`` is false, its rows back into
    the subgroup's activations. ``what``: GLSL expressions for the layer's
    fan-in K and width N, weight and bias uvec4 offsets, code, slope."""
    each = ["    [[unroll]] for (uint i = 0u; i < RF; ++i)",
            "      [[unroll]] for (uint j = 0u; j < NF; ++j) if (j < nf) {"]
    return [
        f"    uint K = {what['k']}, N = {what['n']}, nf = N / 16u, wo = {what['wo']}, bo = {what['bo']};",
        f"    uint code = {what['code']};",
        f"    float slope = {what['slope']};",
        "    [[unroll]] for (uint j = 0u; j < NF; ++j) if (j < nf) {",
        f"      {mats['h']} b;",
        f"      coopMatLoad(b, net, bo + 2u * j, N / 8u, {ROW_MAJOR});",
        f"      [[unroll]] for (uint i = 0u; i < RF; ++i) acc[i][j] = {mats['acc']}(b);",
        "    }",
        "    for (uint kk = 0u; kk < K / 16u; ++kk) {",
        f"      {mats['a']} fa[RF];",
        "      [[unroll]] for (uint i = 0u; i < RF; ++i)",
        f"        coopMatLoad(fa[i], pool, (sm + i * 16u) * ALEN + 2u * kk, ALEN, {ROW_MAJOR});",
        "      [[unroll]] for (uint j = 0u; j < NF; ++j) if (j < nf) {",
        f"        {mats['b']} fb;",
        f"        coopMatLoad(fb, net, wo + kk * 2u * N + 2u * j, N / 8u, {ROW_MAJOR});",
        "        [[unroll]] for (uint i = 0u; i < RF; ++i) acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]);",
        "      }",
        "    }",
        # The code is uniform (a constant for the written-out layers): one
        # branch per layer, and every element loop unrolled, so that no
        # fragment element is indexed dynamically.
        "    if (code == 1u) {",
        *each,
        "          [[unroll]] for (int e = 0; e < acc[i][j].length(); ++e)",
        f"            acc[i][j][e] = max(acc[i][j][e], {acc_t}(0.0));",
        "        }",
        "    } else if (code != 0u) {",
        *each,
        "          [[unroll]] for (int e = 0; e < acc[i][j].length(); ++e)",
        f"            acc[i][j][e] = {acc_t}(activate(float(acc[i][j][e]), code, slope));",
        "        }",
        "    }",
        f"    if ({what['more']}) {{",
        # Every lane has read the rows (the loads above) before any overwrites them.
        *SUBGROUP_SYNC,
        *each,
        f"        {mats['h']} h = {mats['h']}(acc[i][j]);",
        f"        coopMatStore(h, pool, (sm + i * 16u) * ALEN + 2u * j, ALEN, {ROW_MAJOR});",
        "      }",
        *SUBGROUP_SYNC,
        "    }"]


def _khr_layers(mats: dict, acc_t: str) -> list:
    """The written-out layers, each behind a test of the specialized
    depth, then the loop over the table for deeper ones."""
    out = []
    for s in range(KHR_SLOTS):
        out += [f"  if (DEPTH > {s}u) {{"]
        out += _khr_layer(mats, acc_t, dict(k=f"KF{s} * 16u", n=f"NF{s} * 16u", wo=f"WO{s}", bo=f"BO{s}",
                                             code=f"CODE{s}", slope=f"SLOPE{s}", more=f"DEPTH > {s + 1}u"))
        out += ["  }"]
    out += [f"  for (uint l = {KHR_SLOTS}u; l < DEPTH; ++l) {{",
            "    uvec4 t0 = net[2u * l], t1 = net[2u * l + 1u];"]
    out += _khr_layer(mats, acc_t, dict(k="t0.x", n="t0.y", wo="t1.x / 4u", bo="t1.y / 4u", code="t0.z",
                                         slope="uintBitsToFloat(t0.w)", more="l + 1u < DEPTH"))
    return out + ["  }"]


@family("mlp_khr")
def _render_khr(spec: KernelSpec) -> str:
    t = khr_tiling(spec)
    acc_t = "float" if spec.param("acc") == "float32" else "float16_t"
    bf16 = spec.param("dtype") == "bfloat16"
    mat = "coopmat<{}, gl_ScopeSubgroup, 16u, 16u, {}>"
    mats = dict(acc=mat.format(acc_t, "gl_MatrixUseAccumulator"), a=mat.format("float16_t", "gl_MatrixUseA"),
                b=mat.format("float16_t", "gl_MatrixUseB"), h=mat.format("float16_t", "gl_MatrixUseAccumulator"),
                f=mat.format("float", "gl_MatrixUseAccumulator"))
    return "\n".join([
        *([bfloat16.MARK] if bf16 else []),
        "#pragma use_vulkan_memory_model",
        f"const uint RF = {t.row_frags}u, NF = {t.wmax // 16}u, SR = RF * 16u, SG = {SUBGROUP}u;",
        f"const uint ALEN = {t.alen}u, OUT_LEN = {OUT_LEN}u;",
        *_khr_constants(),
        f"shared uvec4 pool[{t.pool}];",
        _io_glsl(spec.param("x"), spec.param("o")),
        *([PACK_BF16] if bf16 else []),
        ACTIVATE,
        "void main() {",
        # sm: the subgroup's first row in shared memory; q0: its first query.
        "  uint lane = gl_SubgroupInvocationID, sm = gl_SubgroupID * SR;",
        f"  uint q0 = ({WG_INDEX} * {t.subgroups}u + gl_SubgroupID) * SR;",
        "  uint K0 = KF0 * 16u;",
        *_khr_load(spec.param("x"), mats, bf16),
        f"  {mats['acc']} acc[RF][NF];",
        *SUBGROUP_SYNC,
        *_khr_layers(mats, acc_t),
        *_khr_out(spec.param("o"), mats, bf16),
        "}"])


def _khr_out(o: str, mats: dict, bf16: bool) -> list:
    """The last layer's accumulators to the output: whole fragments where
    :data:`DIRECT_OUT` holds (and they are float16), else through an fp32 tile,
    which lies over the subgroup's own activation rows, 16 columns at a time."""
    tiled = ["  uint ot = sm * ALEN;",
             "  [[unroll]] for (uint j = 0u; j < NF; ++j) if (j < OUT_NF) {",
             "    uint c0 = j * 16u;",
             *SUBGROUP_SYNC,
             "    [[unroll]] for (uint i = 0u; i < RF; ++i) {",
             f"      {mats['f']} f = {mats['f']}(acc[i][j]);",
             f"      coopMatStore(f, pool, ot + i * 16u * OUT_LEN, OUT_LEN, {ROW_MAJOR});",
             "    }",
             *SUBGROUP_SYNC,
             *_khr_store(o),
             "  }"]
    if o != "f16" or bf16:
        return tiled
    return [f"  if ({DIRECT_OUT}) {{",
            "    [[unroll]] for (uint i = 0u; i < RF; ++i)",
            "      [[unroll]] for (uint j = 0u; j < NF; ++j) if (j < OUT_NF) {",
            f"        {mats['h']} h = {mats['h']}(acc[i][j]);",
            f"        coopMatStore(h, o, pc.o_off + (q0 + i * 16u) * uint(pc.o_sr) + j * 16u, uint(pc.o_sr), {ROW_MAJOR});",
            "      }",
            "  } else {",
            *("  " + line for line in tiled),
            "  }"]


# -- every spec the selector can produce --------------------------------------------------

@variants("mlp_fma")
def _fma_variants():
    for dtype in WEIGHT_DTYPES:
        for x in X_LAYOUTS:
            for o in O_LAYOUTS:
                yield fma_spec(dtype, x, o)


@variants("mlp_khr")
def _khr_variants():
    for t in KHR_TILINGS:
        for dtype in KHR_DTYPES:
            for acc in KHR_ACC if dtype == "float16" else ("float32",):
                for x in X_LAYOUTS:
                    for o in O_LAYOUTS:
                        yield khr_spec(t, acc, x, o, dtype)
