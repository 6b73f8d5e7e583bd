"""matmul: numpy.matmul semantics (batched, broadcast, 1-D operands) for
float32 and float16, with the kernel chosen from variants-as-data.

The op canonicalises its operands into a :class:`Problem` — ``C[m, n] =
sum_k A[m, k] * B[k, n]`` with element strides per operand — and walks
:data:`CANDIDATES` in preference order: the first kernel that can compute
the problem on this device (``why_not``) and is a good choice for its shape
(``unwise``) runs. The last candidate applies to every problem the op
accepts, so there is no unhandled case: what the op cannot do it rejects
with a typed error before anything is recorded.

Preference order (:func:`explain` reports why each is skipped):

1. ``gemv``     M == 1 or N == 1: a matrix-vector product; one workgroup per
                output (subgroup or shared-memory reduction, sized by the
                subgroup size) when the matrix is contiguous along K, else
                one thread per output.
2. ``coopmat_khr`` float16, the host enabled VK_KHR_cooperative_matrix (plus
                shaderFloat16 and vulkanMemoryModel) and the device has 16×16×16
                fragments for the accumulator asked for; row-major A, B and C
                with 16-byte aligned rows, and M, N, K whole blocks (256×256×32
                for fp16 accumulators, 128×128×16 for fp32): no bounds checks.
                Other fp16 problems of at least 512 in every dimension run on
                it too, through zero-padded row-major copies (``plan_padded``):
                4095×4096×4097 at 135 TFLOP/s on an H200 instead of 6 on the
                tiled kernel; smaller ones go on down this list.
3. ``coopmat``  float16, the host enabled VK_NV_cooperative_matrix (plus
                shaderFloat16 and vulkanMemoryModel), a fragment shape the
                device reports, operands laid out for f16vec4 loads, enough
                shared memory; M, N, K >= 16. Chosen by preference only when
                the caller accepts fp16 accumulation: with fp32 accumulators
                it measured slower than ``vec4_128`` (see ``_coopmat_unwise``).
4. ``vec4_128`` register-blocked 128×128 tiles (8×8 outputs per thread) for
                large problems (>= 512² outputs) when shared memory allows.
5. ``vec4_64``  the same with 64×64 tiles (4×4 per thread).
6. ``tiled``    16×16 shared-memory tiles, one output per thread.
7. ``tiled_8``  8×8 tiles: 64 invocations, which every device allows.

Strided operands (``a.T``, slices, broadcast batch dims) are read in place,
never copied: every kernel takes per-operand row, column and batch strides.
The vec4 and coopmat kernels need each of A and B contiguous along one of
its two matrix dims (either one: ``a.T`` of a contiguous tensor qualifies),
that dim a multiple of 4 and 16-byte alignment; other layouts run on the
tiled kernels, which accept any strides.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from ..device.caps import CoopShape, DeviceLimits  # noqa: F401  (CoopShape: what MatmulDevice.coopmat_shapes holds)
from ..errors import InvalidArgumentError, ShapeError
from ..kernels.spec import KernelSpec
from ..tensor import Tensor
from . import matmul_coopmat as coop
from . import matmul_kernels as kernels
from .base import (Dispatch, OpResult, broadcast_shapes, check_dtype, check_out, check_tensor, coalesce, op,
                   registered_ops, same_dtype)
from .candidates import Candidate, choose, khr_fragments_why_not  # noqa: F401  (Candidate: what CANDIDATES holds)
from .windows import MATMUL

DTYPES = ("float32", "float16", "int32")


# -- what selection may know about the device ------------------------------------

@dataclass(frozen=True)
class MatmulDevice:
    """The device facts kernel selection uses. Built from a context's
    :class:`~guestcompute.device.caps.DeviceLimits` by :meth:`of`; tests
    build it directly to exercise GPU-only choices."""
    subgroup_size: int = 1
    subgroup_arithmetic: bool = False
    max_shared_memory: int = 16384
    max_invocations: int = 128
    coopmat_shapes: tuple = ()      # empty unless the host enabled cooperative matrices
    coopmat_khr_shapes: tuple = ()  # (M, N, K, accumulator) of VK_KHR_cooperative_matrix, when enabled
    coopvec_types: tuple = ()       # VK_NV_cooperative_vector's (input, matrix, bias, result) types, when enabled
    coopmat_khr_bf16_shapes: tuple = ()  # the KHR shapes with bfloat16 A/B, when the host enabled them

    @classmethod
    def of(cls, ctx) -> "MatmulDevice":
        return _matmul_device(ctx.limits)


@functools.lru_cache(maxsize=16)
def _matmul_device(lim: DeviceLimits) -> MatmulDevice:
    return MatmulDevice(subgroup_size=lim.subgroup_size, subgroup_arithmetic=lim.subgroup_arithmetic,
                        max_shared_memory=lim.max_shared_memory, max_invocations=lim.max_workgroup_invocations,
                        coopmat_shapes=lim.coopmat_shapes, coopmat_khr_shapes=lim.coopmat_khr_shapes,
                        coopvec_types=lim.coopvec_types, coopmat_khr_bf16_shapes=lim.coopmat_khr_bf16_shapes)


# -- the canonical problem ---------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """A batch of matrices in one buffer: element ``offset``, strides along
    rows and columns (0 for size-1 dims), and one stride per batch dim."""
    offset: int
    rs: int
    cs: int
    bs: tuple


@dataclass(frozen=True)
class Problem:
    dtype: str
    M: int
    N: int
    K: int
    batch: tuple        # coalesced batch dims (size-1 dims dropped)
    a: Operand          # M × K
    b: Operand          # K × N
    c: Operand          # M × N (the output)
    acc: str = "float32"    # the narrowest accumulator the caller accepts

    @property
    def batch_count(self) -> int:
        return math.prod(self.batch)


def _aligned(o: Operand, w: int) -> bool:
    return o.offset % w == 0 and all(s % w == 0 for s in o.bs)


def a_layout(p: Problem, w: int = 4):
    """"mk" when A can be read as ``w``-vectors along K, "km" along M, else None."""
    a = p.a
    if not _aligned(a, w):
        return None
    if a.cs == 1 and p.K % w == 0 and a.rs % w == 0:
        return "mk"
    if a.rs == 1 and p.M % w == 0 and a.cs % w == 0:
        return "km"
    return None


def b_layout(p: Problem, w: int = 4):
    """"kn" when B can be read as ``w``-vectors along N, "nk" along K, else None."""
    b = p.b
    if not _aligned(b, w):
        return None
    if b.cs == 1 and p.N % w == 0 and b.rs % w == 0:
        return "kn"
    if b.rs == 1 and p.K % w == 0 and b.cs % w == 0:
        return "nk"
    return None


def c_vec4(p: Problem) -> bool:
    c = p.c
    return _aligned(c, 4) and c.cs == 1 and p.N % 4 == 0 and c.rs % 4 == 0


# -- the candidates ------------------------------------------------------------------

def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _gemv_spec(p: Problem, d: MatmulDevice) -> KernelSpec:
    mat_rs, mat_ks, rows = _gemv_matrix(p)
    if mat_rs == 1 and mat_ks != 1 and rows >= 64:
        return kernels.gemv_spec(p.dtype, "cols", workgroup=64)
    # A workgroup of about four subgroups (64..256 threads) per output row.
    wg = min(256, max(64, 4 * d.subgroup_size), _pow2_floor(d.max_invocations))
    reduce = "subgroup" if d.subgroup_arithmetic and d.subgroup_size > 1 else "shared"
    return kernels.gemv_spec(p.dtype, "rows", reduce, wg)


def _gemv_matrix(p: Problem) -> tuple:
    """(row stride, k stride, rows) of the GEMV matrix: A when N == 1,
    else B transposed."""
    if p.N == 1:
        return p.a.rs, p.a.cs, p.M
    return p.b.cs, p.b.rs, p.N


def _gemv_why_not(p, d):
    return None if min(p.M, p.N) == 1 else "neither M nor N is 1"


def _pick_coopmat_shape(p: Problem, d: MatmulDevice):
    """The fragment shape to use: an fp32 accumulator unless the caller
    accepts fp16 (then fp16, the faster one, is preferred)."""
    known = [s for s in d.coopmat_shapes if (s.m, s.n, s.k) in coop.COOPMAT_SHAPES
             and (p.acc == "float16" or s.acc == "float32")]
    known.sort(key=lambda s: (s.acc != p.acc, coop.COOPMAT_SHAPES.index((s.m, s.n, s.k))))
    return known[0] if known else None


def coopmat_tiling(d: MatmulDevice):
    """The first of the kernel's tilings (best first) the device can run."""
    for t in coop.COOPMAT_TILINGS:
        if (coop.coopmat_shared_bytes(t, "km", "kn") <= d.max_shared_memory
                and coop.coopmat_shared_bytes(t, "mk", "nk") <= d.max_shared_memory
                and t.threads <= d.max_invocations):
            return t
    return None


def _coopmat_vec(p: Problem) -> int:
    """16-byte staging loads when both operands allow them, else 8-byte."""
    return 8 if a_layout(p, 8) and b_layout(p, 8) else 4


def _coopmat_why_not(p, d):
    if p.dtype != "float16":
        return "cooperative matrices are used for float16 only"
    if not d.coopmat_shapes:
        return "the host did not enable cooperative matrices"
    shape = _pick_coopmat_shape(p, d)
    if shape is None:
        return f"the device reports no fp16 fragment shape this kernel knows with a {p.acc} accumulator"
    if a_layout(p) is None or b_layout(p) is None:
        return "A or B is not laid out for f16vec4 loads"
    if d.subgroup_size != coop.COOPMAT_SUBGROUP:
        return f"the kernel is laid out for {coop.COOPMAT_SUBGROUP}-wide subgroups"
    if coopmat_tiling(d) is None:
        return "not enough shared memory or invocations for any of its tilings"
    return None


def _coopmat_khr_why_not(p, d):
    if p.dtype != "float16":
        return "cooperative matrices are used for float16 only"
    reason = khr_fragments_why_not(p.acc, d, coop.COOPMAT_SUBGROUP)
    if reason is not None:
        return reason
    t = coop.KHR_TILINGS[p.acc]
    if t.shared_bytes > d.max_shared_memory or t.threads > d.max_invocations:
        return "not enough shared memory or invocations for its tiling"
    (bm, bn), bk = t.block, t.bk
    if p.K == 0:
        # Its first tile is read before the K loop (and, with fp32
        # accumulators, its last step runs after it): A and B must have columns.
        return "K is 0 (the result is zeros; another kernel writes them)"
    if p.M % bm or p.N % bn or p.K % bk:
        return f"M, N and K are not multiples of its {bm}x{bn}x{bk} block (it has no bounds checks)"
    if a_layout(p, 8) != "mk" or b_layout(p, 8) != "kn":
        return "A and B must be row-major with 16-byte aligned rows"
    if p.c.cs != 1 or p.c.rs % 8 or not _aligned(p.c, 8):
        return "C must be row-major with 16-byte aligned rows"
    return None


def _coopmat_spec(p, d):
    s, vec = _pick_coopmat_shape(p, d), _coopmat_vec(p)
    return coop.coopmat_spec((s.m, s.n, s.k), s.acc, a_layout(p, vec), b_layout(p, vec),
                           coopmat_tiling(d), vec)


def _vec4_why_not(tile: str):
    def why_not(p, d):
        if p.dtype in kernels.INT_DTYPES:
            return "the vec4 kernels are for floats"
        if a_layout(p) is None:
            return "A is not contiguous along K or M with a multiple-of-4 size and aligned"
        if b_layout(p) is None:
            return "B is not contiguous along K or N with a multiple-of-4 size and aligned"
        tx, ty = kernels.vec4_threads(tile)
        if tx * ty > d.max_invocations:
            return "workgroup exceeds maxComputeWorkGroupInvocations"
        if kernels.vec4_shared_bytes(tile) > d.max_shared_memory:
            return "not enough shared memory"
        return None
    return why_not


def _fewer_outputs_than(min_work: int):
    def unwise(p, d):
        return f"fewer than {min_work} outputs" if p.M * p.N * p.batch_count < min_work else None
    return unwise


def _coopmat_unwise(p, d):
    if min(p.M, p.N) < 16 or p.K < 16:
        return "M, N or K below 16: a fragment would be mostly padding"
    # Measured on an H200 (COOPMAT_SWEEP): with fp32 accumulators every
    # tiling of this kernel runs at about 34 TFLOP/s at 4096³, below the
    # vec4 kernel's 38; only fp16 accumulators (about 64) beat it. The rate
    # did not move with block or subgroup tiling, K step, double buffering,
    # load width or fragment shape, so the MMA path the driver gives
    # GL_NV_cooperative_matrix bounds it: prefer vec4 unless fp16
    # accumulation is accepted.
    if _pick_coopmat_shape(p, d).acc == "float32":
        return "with fp32 accumulators it is slower than the vec4 kernels (pass accumulate='float16')"
    return None


def _vec4_spec(tile: str):
    def spec(p, d):
        return kernels.vec4_spec(p.dtype, tile, a_layout(p), b_layout(p), c_vec4(p))
    return spec


def _tiled_why_not(tile: int):
    def why_not(p, d):
        return None if tile * tile <= d.max_invocations else "workgroup exceeds maxComputeWorkGroupInvocations"
    return why_not


CANDIDATES = (
    Candidate("gemv", _gemv_why_not, _gemv_spec),
    Candidate("coopmat_khr", _coopmat_khr_why_not, lambda p, d: coop.coopmat_khr_spec(p.acc)),
    Candidate("coopmat", _coopmat_why_not, _coopmat_spec, _coopmat_unwise),
    Candidate("vec4_128", _vec4_why_not("128"), _vec4_spec("128"), _fewer_outputs_than(512 * 512)),
    Candidate("vec4_64", _vec4_why_not("64"), _vec4_spec("64")),
    Candidate("tiled", _tiled_why_not(16), lambda p, d: kernels.tiled_spec(p.dtype, 16)),
    # Vulkan guarantees 128 invocations, so 8×8 always applies.
    Candidate("tiled_8", lambda p, d: None, lambda p, d: kernels.tiled_spec(p.dtype, 8)),
)


def explain(p: Problem, d: MatmulDevice) -> list:
    """[(candidate name, None if it would be chosen else why not)] in
    preference order."""
    return [(c.name, c.why_not(p, d) or c.unwise(p, d)) for c in CANDIDATES]


def select(p: Problem, d: MatmulDevice, kernel: str = None) -> tuple:
    """(candidate name, KernelSpec) of the preferred applicable kernel, or
    of the one named ``kernel`` (UnsupportedError when it does not apply)."""
    return choose("matmul", CANDIDATES, p, d, kernel)


# -- planning -------------------------------------------------------------------------

def _grid(spec: KernelSpec, p: Problem, nb: int) -> tuple:
    fam = spec.family
    if fam == "matmul_gemv":
        rows = _gemv_matrix(p)[2]
        if spec.param("mode") == "cols":
            return (-(-rows // spec.workgroup[0]), 1, nb)
        return (rows, 1, nb)
    if fam == "matmul_tiled":
        t = spec.param("tile")
        return (-(-p.N // t), -(-p.M // t), nb)
    if fam == "matmul_vec4":
        bm, bn = kernels.VEC4_TILES[spec.param("tile")][:2]
    elif fam == "matmul_coopmat_khr":
        bm, bn = coop.khr_tiling(spec).block
    else:
        bm, bn = coop.coopmat_tiling(spec).block
    return (-(-p.N // bn), -(-p.M // bm), nb)


def _chunks(groups: tuple, max_count: tuple):
    """Split a grid into dispatches within maxComputeWorkGroupCount:
    yields (first group, group counts) per dispatch."""
    ranges = [[(s, min(m, g - s)) for s in range(0, g, m)] for g, m in zip(groups, max_count)]
    for (x0, gx), (y0, gy), (z0, gz) in itertools.product(*ranges):
        yield (x0, y0, z0), (gx, gy, gz)


def _push_values(spec: KernelSpec, p: Problem, offs: tuple, inner: tuple) -> dict:
    """Push constants except the grid origin; ``inner`` is the kernel's two
    batch dims as [(size, (stride a, stride b, stride c))]."""
    shape = [n for n, _ in inner]
    st = [s for _, s in inner]
    if spec.family == "matmul_gemv":
        if p.N == 1:
            mat, vec, outv = (offs[0], p.a.rs, p.a.cs, 0), (offs[1], p.b.rs, 1), (offs[2], p.c.rs, 2)
        else:
            mat, vec, outv = (offs[1], p.b.cs, p.b.rs, 1), (offs[0], p.a.cs, 0), (offs[2], p.c.cs, 2)
        return {"R": _gemv_matrix(p)[2], "K": p.K, "offm": mat[0], "offv": vec[0], "offo": outv[0],
                "sr": mat[1], "sk": mat[2], "sv": vec[1], "so": outv[1], "bshape": shape,
                "bsm": [s[mat[3]] for s in st], "bsv": [s[vec[2]] for s in st],
                "bso": [s[outv[2]] for s in st]}
    return {"M": p.M, "N": p.N, "K": p.K, "offa": offs[0], "offb": offs[1], "offc": offs[2],
            "sam": p.a.rs, "sak": p.a.cs, "sbk": p.b.rs, "sbn": p.b.cs, "scm": p.c.rs, "scn": p.c.cs,
            "bshape": shape, "bsa": [s[0] for s in st], "bsb": [s[1] for s in st],
            "bsc": [s[2] for s in st]}


def _buffers(spec: KernelSpec, p: Problem, a, b, c) -> tuple:
    if spec.family == "matmul_gemv" and p.N != 1:
        return (b.buffer, a.buffer, c.buffer)      # the matrix is B transposed
    return (a.buffer, b.buffer, c.buffer)


def plan(ctx, p: Problem, spec: KernelSpec, a, b, c) -> list:
    """Dispatches running ``spec`` on ``p``: the kernel covers the last two
    batch dims; earlier ones become separate dispatches (offsets moved)."""
    dims = list(zip(p.batch, zip(p.a.bs, p.b.bs, p.c.bs)))
    outer, inner = dims[:-2], dims[-2:]
    inner = [(1, (0, 0, 0))] * (2 - len(inner)) + inner
    nb = inner[0][0] * inner[1][0]
    buffers = _buffers(spec, p, a, b, c)
    groups = _grid(spec, p, nb)
    constants = coop.khr_spec_constants(p.K, p.a.rs, p.b.rs, p.c.rs) if spec.family == "matmul_coopmat_khr" else ()
    out = []
    for idx in itertools.product(*(range(n) for n, _ in outer)):
        offs = [p.a.offset, p.b.offset, p.c.offset]
        for i, (_, st) in zip(idx, outer):
            offs = [o + i * s for o, s in zip(offs, st)]
        values = _push_values(spec, p, tuple(offs), inner)
        for (x0, y0, z0), g in _chunks(groups, ctx.limits.max_workgroup_count):
            values.update(x0=x0, y0=y0, z0=z0)
            out.append(Dispatch(spec, buffers, spec.pack(values), g, spec_constants=constants))
    return out


def _matrix_view(t, batch: tuple):
    """Batch strides of ``t`` (…, r, c) broadcast to ``batch``, and its
    row/column strides with size-1 dims zeroed."""
    tb = t.shape[:-2]
    pad = len(batch) - len(tb)
    bs = tuple(0 if i < pad or tb[i - pad] == 1 else t.strides[i - pad] for i in range(len(batch)))
    r, c = t.shape[-2:]
    rs = t.strides[-2] if r != 1 else 0
    cs = t.strides[-1] if c != 1 else 0
    return bs, rs, cs


def problem_for(a, b, c, acc: str = "float32") -> Problem:
    """The canonical problem of ``c = a @ b`` for matrix-shaped views (at
    least 2-D, batch dims broadcast to ``c``'s)."""
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = c.shape[:-2]
    ab, ars, acs = _matrix_view(a, batch)
    bb, brs, bcs = _matrix_view(b, batch)
    cb, crs, ccs = _matrix_view(c, batch)
    shape, (sa, sb, sc) = coalesce(batch, [ab, bb, cb])
    if shape == (1,):
        shape, sa, sb, sc = (), [], [], []
    return Problem(a.dtype.name, M, N, K, tuple(shape), Operand(a.offset, ars, acs, tuple(sa)),
                   Operand(b.offset, brs, bcs, tuple(sb)), Operand(c.offset, crs, ccs, tuple(sc)), acc)


@op("matmul", windows=MATMUL)
def matmul(ctx, a, b, *, out=None, kernel: str = None, accumulate: str = "float32"):
    """``out = a @ b`` with numpy.matmul semantics: the last two dims are
    matrices, leading (batch) dims broadcast, a 1-D ``a`` is a row vector
    and a 1-D ``b`` a column vector (that dim is dropped from the result).
    float32 or float16 (stored as fp16, accumulated in fp32 — in the
    device's accumulator type on the cooperative-matrix path), or int32
    (wrapping mod 2**32 as numpy's int32 matmul does). Operands may
    be any views (transposes, slices): they are read in place. ``out`` must
    not overlap ``a`` or ``b``. Allocates ``out`` when omitted. ``kernel``
    forces one of :data:`CANDIDATES` by name (benchmarks, tests).
    ``accumulate="float16"`` lets float16 products accumulate in fp16 where
    that is faster (the cooperative-matrix kernel: about 1.7× on an H200,
    with about 10× the rounding error); the default keeps fp32 accumulators.
    The KHR cooperative-matrix kernel (float16 on a device that has it;
    sizes that are not whole blocks run on padded copies where that pays)
    is specialized to K and the row strides: the first product of each
    shape creates a pipeline, so record each shape once at load time.
    """
    a = check_tensor(ctx, a, "matmul a")
    b = check_tensor(ctx, b, "matmul b")
    dtype = same_dtype([a, b], "matmul")
    check_dtype(ctx, dtype, DTYPES, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: operands must have at least one dimension (use rec.mul for scalars)")
    a2 = a if a.ndim >= 2 else Tensor(a.buffer, (1,) + a.shape, a.dtype, (0,) + a.strides, a.offset)
    b2 = b if b.ndim >= 2 else Tensor(b.buffer, b.shape + (1,), b.dtype, b.strides + (0,), b.offset)
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(f"matmul: {a.shape} @ {b.shape}: inner dimensions {a2.shape[-1]} and "
                         f"{b2.shape[-2]} differ")
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    shape = batch + ((a2.shape[-2],) if a.ndim >= 2 else ()) + ((b2.shape[-1],) if b.ndim >= 2 else ())
    if out is None:
        out = ctx.empty(shape, dtype)
    else:
        out = check_out(ctx, out, shape, dtype, [a, b], "matmul out", in_place=False)
    if accumulate not in ("float32", "float16"):
        raise InvalidArgumentError(f"matmul: accumulate must be 'float32' or 'float16', got {accumulate!r}")
    if kernel is not None and not isinstance(kernel, str):
        raise InvalidArgumentError(f"matmul: kernel must be a name, got {kernel!r}")
    if out.size == 0:
        return OpResult(out, [])
    # The output as a batch of M×N matrices (a dropped dim has stride 0).
    cshape, cstrides = list(out.shape), list(out.strides)
    if a.ndim == 1:
        cshape.insert(len(cshape) - (b.ndim >= 2), 1)
        cstrides.insert(len(cstrides) - (b.ndim >= 2), 0)
    if b.ndim == 1:
        cshape.append(1)
        cstrides.append(0)
    c2 = Tensor(out.buffer, cshape, out.dtype, cstrides, out.offset)
    k = a2.shape[-1]
    cap = ctx.limits.loop_iteration_cap
    if cap and k > cap * K_STEP_MIN // 2:
        return OpResult(out, _plan_k_pieces(ctx, a2, b2, c2, out, kernel, accumulate, cap * K_STEP_MIN // 2))
    p = problem_for(a2, b2, c2, accumulate)
    d = MatmulDevice.of(ctx)
    if kernel is None and a.ndim == 2 and b.ndim == 2 and padding_pays(p, d):
        return OpResult(out, plan_padded(ctx, a, b, out, accumulate))
    _, spec = select(p, d, kernel)
    return OpResult(out, plan(ctx, p, spec, a, b, out))


# The KHR kernel on zero-padded copies beats the kernels that take any size
# once the product is this large in every dimension (the copies move
# O(M·K + K·N + M·N) bytes against O(M·N·K) multiply-adds).
PAD_FROM = 512


def padding_pays(p: Problem, d: MatmulDevice) -> bool:
    """Run an fp16 problem that the KHR kernel cannot take as it is (sizes
    not whole blocks, column-major or unaligned operands) on zero-padded
    row-major copies of its operands instead?"""
    if p.batch or min(p.M, p.N, p.K) < PAD_FROM or _coopmat_khr_why_not(p, d) is None:
        return False
    t = coop.KHR_TILINGS.get(p.acc)
    if t is None:
        return False
    (bm, bn), bk = t.block, t.bk
    padded = Problem(p.dtype, _round_up(p.M, bm), _round_up(p.N, bn), _round_up(p.K, bk), (),
                     Operand(0, _round_up(p.K, bk), 1, ()), Operand(0, _round_up(p.N, bn), 1, ()),
                     Operand(0, _round_up(p.N, bn), 1, ()), p.acc)
    return _coopmat_khr_why_not(padded, d) is None


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def plan_padded(ctx, a, b, out, accumulate, kernel: str = "coopmat_khr") -> list:
    """``out = a @ b`` (2-D fp16) through zero-padded row-major copies
    whose sizes are whole blocks of the KHR kernel: zero, copy in, multiply
    (with ``kernel``; tests pick one a CPU driver has), copy the result's
    corner out."""
    ops = registered_ops()
    t = coop.KHR_TILINGS[accumulate]
    (bm, bn), bk = t.block, t.bk
    (m, k), n = a.shape, b.shape[1]
    mp, np_, kp = _round_up(m, bm), _round_up(n, bn), _round_up(k, bk)
    ap, bp, cp = ctx.empty((mp, kp), "float16"), ctx.empty((kp, np_), "float16"), ctx.empty((mp, np_), "float16")
    dispatches = []
    for padded, src, shape in ((ap, a, (m, k)), (bp, b, (k, n))):
        if padded.shape != shape:
            dispatches += ops["fill"](ctx, padded, 0.0).dispatches
        dispatches += ops["copy"](ctx, src, out=padded[:shape[0], :shape[1]]).dispatches
    p = problem_for(ap, bp, cp, accumulate)
    _, spec = select(p, MatmulDevice.of(ctx), kernel)
    dispatches += plan(ctx, p, spec, ap, bp, cp)
    dispatches += ops["copy"](ctx, cp[:m, :n], out=out).dispatches
    return dispatches


# Every kernel advances K by at least this much per loop iteration of one
# invocation (the tiled kernel with 8×8 tiles; the others step further).
K_STEP_MIN = 8


def _plan_k_pieces(ctx, a2, b2, c2, out, kernel, accumulate, piece: int) -> list:
    """``out = a @ b`` as K ranges of at most ``piece``, the first written to
    ``out`` and each later partial product added to it: on a driver that
    caps the loop iterations of one invocation (lavapipe), a long K would
    otherwise stop short without an error."""
    add = registered_ops()["add"]
    dispatches = []
    for k0 in range(0, a2.shape[-1], piece):
        ka, kb = a2[..., k0:k0 + piece], b2[..., k0:k0 + piece, :]
        target = c2 if k0 == 0 else ctx.empty(c2.shape, c2.dtype)
        p = problem_for(ka, kb, target, accumulate)
        _, spec = select(p, MatmulDevice.of(ctx), kernel)
        dispatches += plan(ctx, p, spec, ka, kb, target)
        if k0:
            dispatches += add(ctx, c2, target, out=c2).dispatches
    return dispatches
