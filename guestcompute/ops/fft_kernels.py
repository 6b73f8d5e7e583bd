"""The FFT kernel: one workgroup transforms one row (a 1-D sequence along
the transform axis) wholly in shared memory, reading it from and writing it
to any strided view.

The transform is a Stockham autosort FFT: stages of radix 8, 4, 2, 3, 5
and 7, each reading the whole row from shared memory into registers and
writing it back reordered, so the result lands in natural order with no
bit-reversal pass. The row's length and its stages are push constants (a
4-bit radix per stage), so one pipeline serves every length of a size
class and every batch, view and direction; only the size class (shared
memory), the element kinds read and written, and Bluestein's variant are
compiled in.

Lengths with other prime factors take Bluestein's algorithm inside the
same kernel: the row times a chirp, zero-padded to a power of two ``N >=
2n - 1``, transformed, multiplied by the chirp's precomputed spectrum,
transformed back, times the chirp again.

Every twiddle factor comes from a table of the N-th roots of unity and
every chirp value from a table, both computed on the host in float64 and
rounded once to float32: no ``sin``/``cos`` on the GPU, whose accuracy
Vulkan leaves to the driver.
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ..dtypes import complex64, float16, float32
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import WG_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family
from .elementwise import storage_extensions, storage_features
from .pixels import binding as pixel_binding, is_image_layout

RADICES = (8, 4, 2, 3, 5, 7)        # the stage radices, in the order a plan uses them
MAX_STAGES = 16                     # two 32-bit words of 4-bit radix codes
SIZES = ((256, 64), (4096, 256))    # (complex elements of shared memory, invocations) per size class
# Row kinds: "complex" (complex64), "real" (float32), "half" (float16
# storage, widened to float32 on load and rounded to float16 on store),
# "hermitian" (the first n/2 + 1 values of a complex64 row whose rest are
# their conjugates).
LOADS = ("complex", "real", "half", "hermitian")
STORES = ("complex", "real", "half")
KINDS = (("complex", "complex"), ("real", "complex"), ("hermitian", "real"),      # (load, store) pairs built
         ("half", "complex"), ("hermitian", "half"))
BATCH_DIMS = 3                      # batch axes a dispatch walks (more: one dispatch per leading index)


def radix_plan(n: int):
    """The stage radices of a length-``n`` Stockham FFT (``[]`` for n = 1),
    or None when ``n`` has a prime factor above 7."""
    plan = []
    for r in RADICES:
        while n % r == 0:
            plan.append(r)
            n //= r
    return plan if n == 1 else None


def packed_plan(plan) -> tuple:
    """(word 0, word 1): 4 bits per stage, stage 0 lowest."""
    words = [0, 0]
    for i, r in enumerate(plan):
        words[i // 8] |= r << (4 * (i % 8))
    return tuple(words)


def bluestein_size(n: int) -> int:
    """The power of two Bluestein's convolution of a length-``n`` row takes."""
    return 1 << (2 * n - 2).bit_length() if n > 1 else 1


def size_class(ctx, points: int):
    """(shared elements, invocations) of the smallest size class holding
    ``points`` complex values that this device runs, or None."""
    lim = ctx.limits
    for size, threads in SIZES:
        if points <= size and 8 * size <= lim.max_shared_memory and threads <= lim.max_workgroup_invocations:
            return size, threads
    return None


def workgroup_method(ctx, n: int):
    """How one workgroup transforms a length-``n`` row on this device:
    ("direct", n, stages), ("bluestein", points, stages) for lengths with
    other prime factors, or None when the row does not fit."""
    plan = radix_plan(n)
    if plan is not None and size_class(ctx, n) is not None:
        return "direct", n, plan
    points = bluestein_size(n)
    if size_class(ctx, points) is not None:
        return "bluestein", points, radix_plan(points)
    return None


def rows_per_group(size: int, points: int, rows: int) -> tuple:
    """(rows a workgroup transforms, shared-memory stride between them):
    as many as its size class holds, a padding element apart so that rows
    read side by side do not fall into the same shared-memory bank."""
    stride = points + 1
    if size // stride < 2 or rows < 2:
        return 1, points
    return min(size // stride, rows), stride


def largest_points(ctx) -> int:
    """The longest row this device transforms in shared memory."""
    fitting = [size for size, threads in SIZES if 8 * size <= ctx.limits.max_shared_memory
               and threads <= ctx.limits.max_workgroup_invocations]
    return max(fitting, default=0)


# -- GLSL --------------------------------------------------------------------------

def _factor(u: str, s: int, t: int, radix: int) -> str:
    """GLSL: ``u`` times W^(s*t) with W = exp(sg * 2*pi*i / radix); the
    quarter turns exactly, the rest with float32-rounded constants."""
    quarter = (4 * s * t) % (4 * radix)
    if quarter % radix == 0:
        turn = quarter // radix        # 0..3 quarter turns
        return (u, f"vec2(-sg * {u}.y, sg * {u}.x)", f"-{u}", f"vec2(sg * {u}.y, -sg * {u}.x)")[turn]
    angle = 2.0 * math.pi * s * t / radix
    c, sn = float(np.float32(math.cos(angle))), float(np.float32(math.sin(angle)))
    return f"cmul({u}, vec2({c!r}, sg * {sn!r}))"


def _stage(radix: int, size: int, threads: int) -> str:
    """GLSL: one Stockham stage of ``radix`` over ``buf`` (rows up to ``size``)."""
    per = -(-size // (radix * threads))          # butterflies an invocation does at most
    loads = "\n".join(f"      vec2 u{s} = cmul(buf[b + {s}u * m], twiddle({s}u * k * step, sg));" for s in range(1, radix))
    outs = "\n".join(f"      o[q * {radix}u + {t}u] = " + " + ".join(_factor(f"u{s}", s, t, radix) for s in range(radix)) + ";"
                     for t in range(radix))
    writes = "\n".join(f"      buf[base + {t}u * ls] = o[q * {radix}u + {t}u];" for t in range(radix))
    return f"""void stage{radix}(uint n, uint ls, float sg) {{
  // Butterfly j of the workgroup's rows: row c = j / m, its butterfly jj.
  uint m = n / {radix}u, step = n / (ls * {radix}u), total = pc.per_group * m;
  vec2 o[{per * radix}];
  for (uint q = 0u; q < {per}u; ++q) {{
    uint j = gl_LocalInvocationID.x + q * {threads}u;
    if (j < total) {{
      uint c = j / m, jj = j - c * m, k = jj % ls, b = c * pc.stride + jj;
      vec2 u0 = buf[b];
{loads}
{outs}
    }}
  }}
  barrier();
  for (uint q = 0u; q < {per}u; ++q) {{
    uint j = gl_LocalInvocationID.x + q * {threads}u;
    if (j < total) {{
      uint c = j / m, jj = j - c * m, k = jj % ls, base = c * pc.stride + (jj - k) * {radix}u + k;
{writes}
    }}
  }}
  barrier();
}}"""


CMUL = "vec2 cmul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }"


def row_loads(i: str, n: str, mirror: str) -> tuple:
    """({row kind: GLSL reading position ``i`` of the row at ``ib``}, the
    GLSL of ``hermitian()``) for a kernel whose row length is ``n``;
    ``mirror`` names the Hermitian helper's mirrored index. Both row
    kernels read rows this way (fft_fixed.py with its own names)."""
    loads = {
        "complex": f"{i} < pc.len_in ? src[ib + int({i}) * pc.in_step] : vec2(0.0)",
        "real": f"vec2({i} < pc.len_in ? src[ib + int({i}) * pc.in_step] : 0.0, 0.0)",
        "half": f"vec2({i} < pc.len_in ? float(src[ib + int({i}) * pc.in_step]) : 0.0, 0.0)",
        # The first n/2 + 1 entries of a Hermitian row; the rest are their conjugates.
        "hermitian": f"hermitian({i}, ib)",
        # Real rows of an image's pixels (ops/fft_images.py), read by texel().
        "image": f"vec2({i} < pc.len_in ? texel(ib + int({i}) * pc.in_step) : 0.0, 0.0)",
    }
    hermitian = f"""vec2 hermitian(uint {i}, int ib) {{
  bool low = {i} <= {n} / 2u;
  uint {mirror} = low ? {i} : {n} - {i};
  vec2 v = {mirror} < pc.len_in ? src[ib + int({mirror}) * pc.in_step] : vec2(0.0);
  return low ? v : vec2(v.x, -v.y);
}}"""
    return loads, hermitian


def load_glsl(loads: dict, load: str) -> str:
    """The row-reading expression of ``load`` from :func:`row_loads`'s dict."""
    return loads["image" if is_image_layout(load) else load]


def texel_source(load: str) -> str:
    """For an image ``load`` (a pixel layout: "tex" sampled, "img:<fmt>"
    storage), GLSL ``float texel(int e)``: element ``e`` of the image's
    pixels seen as a float32 array (H, W, C), e = (y * W + x) * C + c, with
    W and C push constants; "" for the other loads."""
    if not is_image_layout(load):
        return ""
    fetch = "texelFetch(src, xy, 0)" if load == "tex" else "imageLoad(src, xy)"
    return f"""float texel(int e) {{
  uint u = uint(e), p = u / pc.tex_c;
  ivec2 xy = ivec2(int(p % pc.tex_w), int(p / pc.tex_w));
  vec4 v = {fetch};
  return v[u - p * pc.tex_c];
}}"""


_LOADS, _HERMITIAN = row_loads("i", "pc.n", "j")

# GLSL: the value a row kernel writes for the complex result ``v``, by row kind.
STORED = {"complex": lambda v: v, "real": lambda v: f"{v}.x", "half": lambda v: f"float16_t({v}.x)"}


@family("fft_rows")
def _render(spec: KernelSpec) -> str:
    size, threads = spec.param("size"), spec.param("threads")
    load, store, bluestein = spec.param("load"), spec.param("store"), spec.param("bluestein")
    stages = "\n".join(_stage(r, size, threads) for r in RADICES)
    dispatch = "\n    ".join(f"{'if' if i == 0 else 'else if'} (r == {r}u) stage{r}(n, ls, sg);"
                           for i, r in enumerate(RADICES))
    value = load_glsl(_LOADS, load)
    if bluestein:
        fill = f"i < pc.n ? cmul({value}, chirp[i]) : vec2(0.0)"
        middle = """run(pc.points, -1.0);
  for (uint idx = t; idx < pc.per_group * pc.points; idx += gl_WorkGroupSize.x) {
    uint c = idx / pc.points, i = idx - c * pc.points;
    buf[c * pc.stride + i] = cmul(buf[c * pc.stride + i], spectrum[i]);
  }
  barrier();
  run(pc.points, 1.0);"""
        result = "cmul(buf[c * pc.stride + k], chirp[k]) * pc.scale"
    else:
        fill, middle, result = value, "run(pc.points, pc.sign);", "buf[c * pc.stride + k] * pc.scale"
    put = f"dst[ob + int(k) * pc.out_step] = {STORED[store]('v')};"
    return f"""shared vec2 buf[{size}];
{CMUL}
vec2 twiddle(uint i, float sg) {{ vec2 r = roots[i]; return vec2(r.x, sg * r.y); }}
{_HERMITIAN if load == "hermitian" else texel_source(load)}
{stages}
void run(uint n, float sg) {{
  uint ls = 1u;
  for (uint s = 0u; s < pc.stages; ++s) {{
    uint r = ((s < 8u ? pc.plan0 >> (4u * s) : pc.plan1 >> (4u * (s - 8u))) & 15u);
    {dispatch}
    ls *= r;
  }}
}}
// Element idx of the workgroup's rows as (row c, position i): rows fastest
// where neighbouring rows are neighbours in memory (columns), else positions.
uvec2 place(uint idx, uint len, uint rows_fast) {{
  return rows_fast != 0u ? uvec2(idx % pc.per_group, idx / pc.per_group) : uvec2(idx / len, idx % len);
}}
void main() {{
  uint first = {WG_INDEX} * pc.per_group;
  if (first >= pc.rows) return;
  uint t = gl_LocalInvocationID.x, count = min(pc.per_group, pc.rows - first);
  for (uint idx = t; idx < pc.per_group * pc.points; idx += gl_WorkGroupSize.x) {{
    uvec2 ci = place(idx, pc.points, pc.load_rows_fast);
    uint c = ci.x, i = ci.y, row = first + c;
    uint i2 = row % pc.b2, rest = row / pc.b2, i1 = rest % pc.b1, i0 = rest / pc.b1;
    int ib = int(pc.in_off) + int(i0) * pc.is0 + int(i1) * pc.is1 + int(i2) * pc.is2;
    buf[c * pc.stride + i] = c < count ? {fill} : vec2(0.0);
  }}
  barrier();
  {middle}
  for (uint idx = t; idx < pc.per_group * pc.out_len; idx += gl_WorkGroupSize.x) {{
    uvec2 ck = place(idx, pc.out_len, pc.store_rows_fast);
    uint c = ck.x, k = ck.y, row = first + c;
    if (c < count) {{
      uint i2 = row % pc.b2, rest = row / pc.b2, i1 = rest % pc.b1, i0 = rest / pc.b1;
      int ob = int(pc.out_off) + int(i0) * pc.os0 + int(i1) * pc.os1 + int(i2) * pc.os2;
      vec2 v = {result};
      {put}
    }}
  }}
}}"""


_PUSH = tuple(Push(name, "uint") for name in ("n", "points", "plan0", "plan1", "stages", "len_in", "out_len",
                                              "in_off", "out_off", "rows", "b1", "b2", "per_group", "stride",
                                              "load_rows_fast", "store_rows_fast")) + \
    tuple(Push(name, "int") for name in ("in_step", "out_step", "is0", "is1", "is2", "os0", "os1", "os2")) + \
    (Push("sign", "float"), Push("scale", "float"))


_ELEMENT = {"complex": complex64, "hermitian": complex64, "real": float32, "half": float16}
IMAGE_PUSH = (Push("tex_w", "uint"), Push("tex_c", "uint"))     # an image load's width and channels


def row_bindings(load: str, store: str) -> tuple:
    """The bindings both row kernels start with: the rows read (a buffer
    of the row kind's dtype, or an image for image loads), the rows
    written (of its row kind's dtype)."""
    src = pixel_binding("src", load, READ) if is_image_layout(load) else Binding("src", _ELEMENT[load].glsl, READ)
    return src, Binding("dst", _ELEMENT[store].glsl, WRITE)


def row_push(push: tuple, load: str) -> tuple:
    """A row kernel's push fields, with the image's for an image load."""
    return push + IMAGE_PUSH if is_image_layout(load) else push


def row_storage(load: str, store: str) -> dict:
    """The KernelSpec arguments a row kernel's buffers need: float16 rows
    take 16-bit storage (extensions and the host feature), as every
    float16 kernel does; the others nothing (their specs unchanged). An
    image read is no buffer: its texels arrive as float32 whatever the
    format."""
    dtypes = tuple(_ELEMENT[kind] for kind in (load, store) if not is_image_layout(kind))
    return {"glsl_extensions": storage_extensions(dtypes), "features": storage_features(dtypes)}


def fft_spec(load: str, store: str, bluestein: bool, size: int, threads: int) -> KernelSpec:
    """``load``: what a row holds ("complex", "real", "half", "hermitian":
    the first n/2 + 1 values of a row whose rest are their conjugates, or
    an image's real pixels through a pixel layout, "tex" or "img:<fmt>");
    ``store``: what is written ("complex", or the real parts: "real" as
    float32, "half" as float16)."""
    bindings = row_bindings(load, store) + (Binding("roots", "vec2", READ),)
    if bluestein:
        bindings += (Binding("chirp", "vec2", READ), Binding("spectrum", "vec2", READ))
    return KernelSpec("fft_rows", bindings, row_push(_PUSH, load),
                      (("load", load), ("store", store), ("bluestein", bluestein), ("size", size),
                       ("threads", threads)), (threads, 1, 1), **row_storage(load, store))


@variants("fft_rows")
def _variants():
    for load, store in KINDS:
        for bluestein in (False, True):
            for size, threads in SIZES:
                yield fft_spec(load, store, bluestein, size, threads)


# -- host tables -------------------------------------------------------------------

_tables = weakref.WeakKeyDictionary()     # context -> {key: Tensor}
_tables_lock = threading.Lock()


def table(ctx, key, make):
    """The context's table ``key``, uploaded once (``make()`` gives its
    complex128 values)."""
    with _tables_lock:
        tables = _tables.setdefault(ctx, {})
        t = tables.get(key)
    if t is None:
        t = ctx.tensor(np.asarray(make(), np.complex128).astype(np.complex64))
        with _tables_lock:
            t = tables.setdefault(key, t)
    return t


def roots(ctx, size: int):
    """exp(2*pi*i*k/size), k < size (the kernel conjugates for forward transforms)."""
    return table(ctx, ("roots", size), lambda: np.exp(2j * np.pi * np.arange(size) / size))


def chirp(ctx, n: int, sign: int):
    """exp(sign * pi * i * k^2 / n), k < n, the exponent reduced exactly first."""
    def make():
        k = np.arange(n, dtype=np.int64)
        return np.exp(sign * 1j * np.pi * ((k * k) % (2 * n)) / n)
    return table(ctx, ("chirp", n, sign), make)


def chirp_spectrum(ctx, n: int, size: int, sign: int):
    """The forward FFT of the conjugate chirp laid out for a circular
    convolution of length ``size``, divided by ``size`` (the kernel's inverse
    pass does not scale)."""
    def make():
        k = np.arange(n, dtype=np.int64)
        w = np.exp(-sign * 1j * np.pi * ((k * k) % (2 * n)) / n)
        b = np.zeros(size, np.complex128)
        b[:n] = w
        b[size - n + 1:] = w[1:][::-1]
        return np.fft.fft(b) / size
    return table(ctx, ("spectrum", n, size, sign), make)
