"""Image filters: ``gaussian_blur``, ``conv2d`` and ``histogram`` on
pixels — a tensor in one of the pixel layouts or an image (an Image or
``img.level(mip, layer)``); see ops/pixels.py for both.

Filters work in float32. On 8-bit tensors values are 0..255 and stores
round half up, clamped to 0..255; images hold what a shader sees (0..1 for
UNORM, linear light for sRGB, floats). Stores into UNORM (and sRGB) images
round to the nearest code in the shader, half up, and hand the hardware a
value it must convert exactly (ops/pixels.py), so every driver stores the
same codes.
Borders clamp to the edge. All channels, alpha included, are filtered
alike. An image's result is an image: ``out`` defaults to a new guest image
of the input's format and extent.

Filter weights are computed on the host and written into a small scratch
tensor by ``put`` dispatches (a push-constant block copied by a tiny
kernel), so they travel inside the host's command buffer like everything
else and the recorder orders them before their reader; nothing is uploaded
behind the host's back.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import float32, uint32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import U8_EXTENSIONS
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family
from ..image import Image, ImageLevel
from ..tensor import Tensor
from ..vk import formats
from . import pixels as px
from .base import Dispatch, OpResult, check_out, check_tensor, coalesce, op, overlaps, registered_ops
from .elementwise import map_variants, plan_map

TILE = px.TILE
MAX_KERNEL = 7               # conv2d kernels up to 7x7
MAX_RADIUS = 4096
PUT_VALUES = 30              # 32-bit values one put dispatch carries (2 + 30 words = 128 bytes)
HIST_SHARED = 2048           # counters a histogram workgroup keeps in shared memory
HIST_WG = 128
HIST_RANK = 4
# Every image layout an op can meet (ops/pixels.py), for the bake catalogue:
# sampled reads, storage reads and writes in each GLSL format guestcompute's
# colour formats have, writes without a format (BGRA), and sRGB encoding.
_QUALIFIERS = sorted({f.qualifier for f in formats.FORMATS.values() if f.qualifier and not f.integer})
IMAGE_READS = ("tex",) + tuple(f"img:{q}" for q in _QUALIFIERS)
IMAGE_WRITES = tuple(f"put:{q}" for q in _QUALIFIERS) + ("put:", "put_srgb:rgba8", "put_srgb:")
# Tensor layouts the filters take (two- and three-channel ones are for copies).
FILTER_LAYOUTS = tuple(lay for lay in px.LAYOUTS if px.KIND[lay][1] in "14")


def image_spec(family_name: str, src: str, dst: str, extra_bindings: tuple, push: tuple, params: tuple,
               workgroup: tuple = TILE):
    """A filter's spec: ``src`` read, ``dst`` written, then ``extra_bindings``."""
    bindings = (px.binding("src", src, READ), px.binding("dst", dst, WRITE)) + extra_bindings
    u8 = px.needs_u8(src, dst)
    features = ("int8",) if u8 else ()
    if dst.endswith(":"):           # a storage write without a format qualifier
        features += ("image_write_without_format",)
    return KernelSpec(family_name, bindings, push, (("src", src), ("dst", dst)) + params, workgroup,
                      U8_EXTENSIONS if u8 else (), features)


_PIXEL = """  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  int W = int(pc.W), H = int(pc.H);
  if (x >= W || y >= H) return;"""


def pixels_out(ctx, out, src: px.Pixels, what: str) -> px.Pixels:
    """``out`` as a writable operand of ``src``'s size and pixel kind, or a new one like ``src``."""
    if out is None:
        return px.new_like(ctx, src, what)
    o = px.write_pixels(ctx, out, what)
    if (o.h, o.w) != (src.h, src.w):
        raise ShapeError(f"{what} is {o.h}x{o.w} pixels; the input is {src.h}x{src.w}")
    if not src.is_image and not o.is_image:
        check_out(ctx, o.value, src.value.shape, src.value.dtype, (), what)
    elif any(k[0] in "up" for k in (o.kind, src.kind)):
        raise DTypeError(f"{what}: 8-bit tensors hold 0..255 and images 0..1 or floats; filter between a "
                         "float32 tensor and an image, or copy first (rec.copy scales 8-bit values)")
    return o


def _same_memory(a: px.Pixels, b: px.Pixels) -> bool:
    if a.is_image or b.is_image:
        return a.same_image_level(b)
    return overlaps(a.value, b.value)


# -- put: small host data into a buffer, inside the command stream -----------

@family("put")
def _render_put(spec: KernelSpec) -> str:
    return """void main() {
  uint i = gl_LocalInvocationID.x;
  if (i < pc.count) dst[pc.off + i] = pc.vals[i];
}"""


def put_spec() -> KernelSpec:
    return KernelSpec("put", (Binding("dst", "uint", WRITE),),
                      (Push("off", "uint"), Push("count", "uint"), Push("vals", "uint", PUT_VALUES)),
                      (), (32, 1, 1))


def plan_put(ctx, values: np.ndarray) -> tuple:
    """A new float32 tensor holding ``values`` and the dispatches that fill it."""
    flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    t = ctx.empty(flat.shape, float32)
    words = flat.view(np.uint32)
    spec = put_spec()
    out = []
    for start in range(0, words.size, PUT_VALUES):
        chunk = words[start:start + PUT_VALUES]
        vals = list(int(v) for v in chunk) + [0] * (PUT_VALUES - chunk.size)
        out.append(Dispatch(spec, (t.buffer,), spec.pack({"off": start, "count": chunk.size, "vals": vals}),
                            (1, 1, 1)))
    return t, out


# -- separable blur ------------------------------------------------------------

@family("image_sep")
def _render_sep(spec: KernelSpec) -> str:
    if spec.param("axis") == "x":
        lo, hi = "load_src(y, max(x - i, 0))", "load_src(y, min(x + i, W - 1))"
    else:
        lo, hi = "load_src(max(y - i, 0), x)", "load_src(min(y + i, H - 1), x)"
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void main() {{
{_PIXEL}
  vec4 acc = weights[0] * load_src(y, x);
  for (int i = 1; i <= int(pc.radius); ++i) acc += weights[i] * ({lo} + {hi});
  store_dst(y, x, acc);
}}"""


_SEP_PUSH = (Push("H", "uint"), Push("W", "uint"), Push("radius", "uint"))


def sep_spec(src: str, dst: str, axis: str) -> KernelSpec:
    return image_spec("image_sep", src, dst, (Binding("weights", "float", READ),),
                      _SEP_PUSH + px.operand_push("src") + px.operand_push("dst"), (("axis", axis),))


def gaussian_weights(sigma: float, radius: int) -> np.ndarray:
    """Normalised one-sided Gaussian weights ``w[0..radius]``."""
    if radius == 0 or sigma == 0:
        return np.array([1.0] + [0.0] * radius, np.float32)
    i = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-0.5 * (i / sigma) ** 2)
    return (w / w.sum())[radius:].astype(np.float32)


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"{what} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {value}")
    return value


@op("gaussian_blur", windows=None)
def gaussian_blur(ctx, img, sigma, out=None, *, radius=None):
    """Gaussian blur of pixels (a tensor in a pixel layout, or an image /
    ``img.level(mip)``; see ops/pixels.py), separable: a horizontal pass
    into a float32 scratch, then a vertical pass into ``out``. ``radius``
    defaults to ``ceil(3 * sigma)``; borders clamp to the edge. ``out``
    (same size; a tensor of the same shape and dtype, or an image) may be
    ``img`` itself; for an image input it defaults to a new guest image."""
    src = px.read_pixels(ctx, img, "gaussian_blur img")
    sigma = _number(sigma, "gaussian_blur sigma")
    if sigma < 0:
        raise InvalidArgumentError(f"gaussian_blur sigma must be >= 0, got {sigma}")
    if radius is None:
        radius = int(math.ceil(3.0 * sigma))
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or not 0 <= radius <= MAX_RADIUS:
        raise InvalidArgumentError(f"gaussian_blur radius must be an int in 0..{MAX_RADIUS}, got {radius!r}")
    radius = int(radius)
    empty = src.h == 0 or src.w == 0
    groups = None if empty else px.groups(ctx, src)
    dst = pixels_out(ctx, out, src, "gaussian_blur out")
    if empty:
        return OpResult(dst.value, [])
    weights, dispatches = plan_put(ctx, gaussian_weights(sigma, radius))
    ch = 1 if src.channels == 1 else 4
    mid = px.scratch_pixels(ctx, src.h, src.w, ch)
    size = {"H": src.h, "W": src.w, "radius": radius}
    for axis, a, b in (("x", src, mid), ("y", mid, dst)):
        spec = sep_spec(a.layout, b.layout, axis)
        dispatches.append(Dispatch(spec, (a.resource, b.resource, weights.buffer),
                                   spec.pack(dict(size, **a.push("src"), **b.push("dst"))), groups))
    return OpResult(dst.value, dispatches)


# -- small 2-D convolution ----------------------------------------------------------

@family("image_conv")
def _render_conv(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void main() {{
{_PIXEL}
  int kh = int(pc.kh), kw = int(pc.kw);
  vec4 acc = vec4(0.0);
  for (int i = 0; i < kh; ++i) {{
    int yy = clamp(y + i - kh / 2, 0, H - 1);
    for (int j = 0; j < kw; ++j) {{
      int xx = clamp(x + j - kw / 2, 0, W - 1);
      acc += kern[int(pc.k_off) + i * pc.k_sy + j * pc.k_sx] * load_src(yy, xx);
    }}
  }}
  store_dst(y, x, acc);
}}"""


def conv_spec(src: str, dst: str) -> KernelSpec:
    push = (Push("H", "uint"), Push("W", "uint"), Push("kh", "uint"), Push("kw", "uint"),
            Push("k_off", "uint"), Push("k_sy", "int"), Push("k_sx", "int"))
    return image_spec("image_conv", src, dst, (Binding("kern", "float", READ),),
                      push + px.operand_push("src") + px.operand_push("dst"), ())


@op("conv2d", windows=None)
def conv2d(ctx, img, kernel, out=None):
    """2-D filter of every channel of ``img`` with a small ``kernel`` (a
    numpy array or a float32 tensor, at most 7x7), borders clamped:
    ``out[y, x] = sum k[i, j] * img[y + i - kh//2, x + j - kw//2]`` — a
    correlation, as in most deep-learning libraries (flip the kernel for a
    mathematical convolution). ``out`` must not overlap ``img``."""
    src = px.read_pixels(ctx, img, "conv2d img")
    if isinstance(kernel, Tensor):
        k = check_tensor(ctx, kernel, "conv2d kernel")
        if k.dtype != float32:
            raise DTypeError(f"conv2d kernel tensor must be float32, got {k.dtype}")
        kshape = k.shape
    else:
        try:
            with np.errstate(over="ignore"):
                k_np = np.asarray(kernel, dtype=np.float32)
        except (TypeError, ValueError):
            raise InvalidArgumentError("conv2d kernel must be a numpy array or a float32 tensor") from None
        kshape = k_np.shape
    if len(kshape) != 2 or not (1 <= kshape[0] <= MAX_KERNEL and 1 <= kshape[1] <= MAX_KERNEL):
        raise ShapeError(f"conv2d kernel must be 2-D, at most {MAX_KERNEL}x{MAX_KERNEL}, got shape {kshape}")
    if out is not None and _same_memory(src, px.write_pixels(ctx, out, "conv2d out")):
        raise InvalidArgumentError("conv2d out must not overlap img (each pixel reads its neighbours)")
    if not isinstance(kernel, Tensor) and not np.all(np.isfinite(k_np)):
        raise InvalidArgumentError("conv2d kernel has values that are not finite in float32")
    empty = src.h == 0 or src.w == 0
    groups = None if empty else px.groups(ctx, src)
    dst = pixels_out(ctx, out, src, "conv2d out")
    if empty:
        return OpResult(dst.value, [])
    if isinstance(kernel, Tensor):
        dispatches, kbuf = [], k.buffer
        k_off, k_sy, k_sx = k.offset, k.strides[0], k.strides[1]
    else:
        kt, dispatches = plan_put(ctx, k_np)
        k_off, k_sy, k_sx, kbuf = 0, kshape[1], 1, kt.buffer
    spec = conv_spec(src.layout, dst.layout)
    values = {"H": src.h, "W": src.w, "kh": kshape[0], "kw": kshape[1], "k_off": k_off, "k_sy": k_sy,
              "k_sx": k_sx, **src.push("src"), **dst.push("dst")}
    dispatches.append(Dispatch(spec, (src.resource, dst.resource, kbuf), spec.pack(values), groups))
    return OpResult(dst.value, dispatches)


# -- histogram ------------------------------------------------------------------------

HIST_KINDS = ("float32", "int32", "uint32", "uint8", "packed")


@family("histogram")
def _render_histogram(spec: KernelSpec) -> str:
    kind, per_channel, shared = spec.param("kind"), spec.param("per_channel"), spec.param("shared")
    wg = spec.workgroup[0]
    target = "sh" if shared else "counts"
    if kind == "packed":
        body = f"""    uint p = src[o];
    for (uint c = 0u; c < 4u; ++c) add(float((p >> (8u * c)) & 0xFFu), {"c * pc.bins" if per_channel else "0u"});"""
    else:
        body = f"    add(float(src[o]), {'(i % 4u) * pc.bins' if per_channel else '0u'});"
    nbins = "4u * pc.bins" if per_channel else "pc.bins"
    zero = flush = ""
    if shared:
        zero = f"""  for (uint k = t; k < {nbins}; k += {wg}u) sh[k] = 0u;
  barrier();"""
        flush = f"""  barrier();
  for (uint k = t; k < {nbins}; k += {wg}u) if (sh[k] != 0u) atomicAdd(counts[k], sh[k]);"""
    return f"""{f"shared uint sh[{HIST_SHARED}];" if shared else ""}
void add(float v, uint base) {{
  // NaN fails both tests; v == hi lands in the last bin, as in numpy.
  if (v >= pc.lo && v <= pc.hi) atomicAdd({target}[base + min(uint((v - pc.lo) * pc.scale), pc.bins - 1u)], 1u);
}}
void main() {{
  uint t = gl_LocalInvocationID.x;
{zero}
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * {wg}u) {{
    uint rem = i;
    int o = int(pc.off);
    for (int d = {HIST_RANK - 1}; d >= 0; --d) {{
      uint c = rem % pc.shape[d]; rem /= pc.shape[d];
      o += int(c) * pc.st[d];
    }}
{body}
  }}
{flush}
}}"""


def histogram_spec(kind: str, per_channel: bool, shared: bool) -> KernelSpec:
    glsl = {"float32": "float", "int32": "int", "uint32": "uint", "uint8": "uint8_t", "packed": "uint"}[kind]
    u8 = kind == "uint8"
    push = (Push("n", "uint"), Push("bins", "uint"), Push("lo", "float"), Push("hi", "float"),
            Push("scale", "float"), Push("off", "uint"), Push("shape", "uint", HIST_RANK),
            Push("st", "int", HIST_RANK))
    return KernelSpec("histogram", (Binding("src", glsl, READ), Binding("counts", "uint", READWRITE)), push,
                      (("kind", kind), ("per_channel", per_channel), ("shared", shared)),
                      (HIST_WG, 1, 1), U8_EXTENSIONS if u8 else (), ("int8",) if u8 else ())


@op("histogram", windows=None)
def histogram(ctx, x, bins: int = 256, range=None, out=None, *, per_channel: bool = False,
              packed: bool = False, accumulate: bool = False):
    """Counts of ``x``'s values in ``bins`` equal bins over ``range = (lo,
    hi)``, as ``np.histogram(x, bins, range)[0]`` in uint32: the last bin
    includes ``hi``; values outside the range and NaN are not counted.

    ``x`` is float32, int32, uint32 or uint8 of any shape, or with
    ``packed=True`` a uint32 tensor of packed RGBA8 words (each word gives
    its four bytes). ``per_channel=False`` pools every value into
    ``(bins,)`` counts; ``per_channel=True`` counts RGBA channels apart into
    ``(4, bins)``: channel ``c`` of an unpacked ``(..., 4)`` tensor is the
    last index, of a packed word its byte ``c``. ``range`` defaults to
    ``(0, 256)`` for uint8 and packed input and is required otherwise. Bin
    positions are computed in float32 (exact for integers below 2**24).
    ``accumulate=True`` adds to ``out`` instead of overwriting it.

    An image (or ``img.level(mip)``) is histogrammed in the values a shader
    reads (0..1 for UNORM and sRGB, whose ``range`` defaults to (0, 1);
    floats need ``range``): it is first copied into a float32 scratch
    tensor, one extra pass.
    """
    if isinstance(x, (Image, ImageLevel)):
        return _image_histogram(ctx, x, bins, range, out, per_channel, accumulate)
    x = check_tensor(ctx, x, "histogram input")
    if ctx.caps.feature("vulkanMemoryModel") and not ctx.caps.feature("vulkanMemoryModelDeviceScope"):
        # glslang gives GLSL atomics Device scope, which such a device rejects.
        raise UnsupportedError("histogram counts with atomics: a host that enables vulkanMemoryModel must "
                               "also enable vulkanMemoryModelDeviceScope (see gc.requirements())")
    if packed:
        if x.dtype != uint32:
            raise DTypeError(f"histogram packed=True needs uint32 RGBA8 words, got {x.dtype}")
        kind = "packed"
    elif x.dtype.name in ("float32", "int32", "uint32", "uint8"):
        kind = x.dtype.name
    else:
        raise DTypeError(f"histogram: dtype {x.dtype} not supported; use float32, int32, uint32 or uint8")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not 1 <= bins <= 1 << 20:
        raise InvalidArgumentError(f"histogram bins must be an int in 1..2**20, got {bins!r}")
    bins = int(bins)
    if range is None:
        if kind not in ("uint8", "packed"):
            raise InvalidArgumentError("histogram needs range=(lo, hi) for this dtype")
        range = (0, 256)
    try:
        lo, hi = range
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"histogram range must be a pair (lo, hi), got {range!r}") from None
    lo, hi = _number(lo, "histogram range lo"), _number(hi, "histogram range hi")
    if not lo < hi:
        raise InvalidArgumentError(f"histogram range needs lo < hi, got ({lo}, {hi})")
    if per_channel and not packed and (x.ndim == 0 or x.shape[-1] != 4):
        raise ShapeError(f"histogram per_channel needs a (..., 4) tensor (or packed=True), got {x.shape}")
    shape_out = (4, bins) if per_channel else (bins,)
    shape, (strides,) = coalesce(x.shape, [x.strides]) if x.ndim else ((1,), [[0]])
    if len(shape) > HIST_RANK:
        raise ShapeError(f"histogram over a view with {len(shape)} non-mergeable dims (at most {HIST_RANK}); "
                         "copy it to a contiguous tensor first")
    if out is not None:
        out = check_out(ctx, out, shape_out, uint32, [x], "histogram out", in_place=False)
        if not out.is_contiguous:
            raise InvalidArgumentError("histogram out must be contiguous")
    else:
        if accumulate:
            raise InvalidArgumentError("histogram accumulate=True needs out=")
        out = ctx.empty(shape_out, uint32)
    dispatches = [] if accumulate else [plan_map(ctx, "s", [], out, uint32, 0, "uint")]
    n = x.size
    if n == 0:
        return OpResult(out, dispatches)
    shared = out.size <= HIST_SHARED
    spec = histogram_spec(kind, bool(per_channel), shared)
    pad = HIST_RANK - len(shape)
    groups = (min(-(-n // (HIST_WG * 16)), 1024), 1, 1)
    values = {"n": n, "bins": bins, "lo": lo, "hi": hi, "scale": bins / (hi - lo), "off": x.offset,
              "shape": (1,) * pad + tuple(shape), "st": (0,) * pad + tuple(strides)}
    dispatches.append(Dispatch(spec, (x.buffer, out.buffer), spec.pack(values), groups))
    return OpResult(out, dispatches)


def _image_histogram(ctx, img, bins, range, out, per_channel, accumulate) -> OpResult:
    level = px.as_level(ctx, img, "histogram input")
    fmt = level.image.format
    if range is None:
        if fmt.kind not in ("unorm", "srgb"):
            raise InvalidArgumentError(f"histogram of a {fmt.name} image needs range=(lo, hi)")
        range = (0.0, 1.0)
    w, h = level.extent
    scratch = ctx.empty((h, w) if fmt.channels == 1 else (h, w, fmt.channels), float32)
    copied = registered_ops()["copy"](ctx, level, out=scratch)      # the op registry: copy is defined later
    counted = histogram(ctx, scratch, bins, range, out, per_channel=per_channel, accumulate=accumulate)
    return OpResult(counted.value, copied.dispatches + counted.dispatches)


# -- the bake catalogue ----------------------------------------------------------------

def _conv_pairs():
    """(src, dst) layouts conv2d can meet: same pixel format, any alignment;
    images with float tensors and with each other."""
    for src in FILTER_LAYOUTS:
        for dst in FILTER_LAYOUTS:
            if px.KIND[src] == px.KIND[dst]:
                yield src, dst
    floats = ("rgba32f", "rgba32f_s", "r32f")
    for read in IMAGE_READS:
        for write in IMAGE_WRITES + floats:
            yield read, write
    for lay in floats:
        for write in IMAGE_WRITES:
            yield lay, write


@variants("put")
def _put_variants():
    yield put_spec()


@variants("image_sep")
def _sep_variants():
    for lay in FILTER_LAYOUTS:
        mid = px.SCRATCH[1 if px.KIND[lay].endswith("1") else 4]
        yield sep_spec(lay, mid, "x")
        yield sep_spec(mid, lay, "y")
    for read in IMAGE_READS:
        for mid in px.SCRATCH.values():
            yield sep_spec(read, mid, "x")
    for write in IMAGE_WRITES:
        for mid in px.SCRATCH.values():
            yield sep_spec(mid, write, "y")


@variants("image_conv")
def _conv_variants():
    for src, dst in _conv_pairs():
        yield conv_spec(src, dst)


@variants("histogram")
def _histogram_variants():
    for kind in HIST_KINDS:
        for per_channel in (False, True):
            for shared in (False, True):
                yield histogram_spec(kind, per_channel, shared)
    # zeroing the counts
    yield from map_variants("s", [], uint32, "uint")
