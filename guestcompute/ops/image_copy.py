"""Moving pixels between images and tensors, and resampling images:
``rec.copy`` (its image half), ``rec.resize`` and ``rec.generate_mips``.

Values: a shader sees UNORM texels as 0..1, sRGB texels as linear 0..1
(decoded on read, encoded on write), float texels as they are. 8-bit
tensors hold 0..255, so a copy between an image and a uint8 tensor scales
by 255 (exact both ways for 8-bit UNORM images); float32 tensors take the
values unchanged. A tensor has the image's channel count: (H, W) for one
channel, (H, W, C) otherwise, in logical RGBA order (a BGRA image's first
tensor channel is red).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..image import Image, ImageLevel
from ..kernels.catalogue import variants
from ..kernels.spec import KernelSpec, Push, family
from ..tensor import Tensor
from . import pixels as px
from .base import Dispatch, OpResult, op
from .filters import IMAGE_READS, IMAGE_WRITES, image_spec

_SIZE_PUSH = (Push("H", "uint"), Push("W", "uint"))


def is_pixels_image(x) -> bool:
    return isinstance(x, (Image, ImageLevel))


# -- copy ------------------------------------------------------------------------------

@family("pixel_copy")
def _render_copy(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void pixel(int x, int y) {{
  vec4 v = load_src(y, x) * pc.scale;
  if (pc.alpha_one != 0u) v.a = 1.0;     // a tensor without alpha into an image
  store_dst(y, x, v);
}}
{px.ROWS_MAIN}"""


def copy_spec(src: str, dst: str) -> KernelSpec:
    push = _SIZE_PUSH + (Push("scale", "float"), Push("alpha_one", "uint")) + px.operand_push("src") \
        + px.operand_push("dst")
    return image_spec("pixel_copy", src, dst, (), push, (), px.ROW_TILE)


def _tensor_for(ctx, level: ImageLevel, dtype) -> Tensor:
    fmt = level.image.format
    w, h = level.extent
    return ctx.empty((h, w) if fmt.channels == 1 else (h, w, fmt.channels), dtype)


def copy_pixels(ctx, src, out=None) -> OpResult:
    """The image half of ``rec.copy`` (see the module notes): image -> image,
    image -> tensor (default: a new float32 tensor), tensor -> image. Returns
    ``out`` when given; the plan then depends on nothing but the arguments,
    so the recorder may remember the call (ops/memo.CallMemo)."""
    result = _plan_copy(ctx, src, out)
    if out is None:
        return result
    return OpResult(out, result.dispatches, reusable=True)


def _plan_copy(ctx, src, out) -> OpResult:
    if out is None:
        if not is_pixels_image(src):
            raise InvalidArgumentError("rec.copy(tensor, out=image): name the image to write")
        out = _tensor_for(ctx, px.as_level(ctx, src, "copy src"), float32)
    a = px.read_pixels(ctx, src, "copy src", any_channels=True)
    b = px.write_pixels(ctx, out, "copy out", any_channels=True)
    if (a.h, a.w) != (b.h, b.w):
        raise ShapeError(f"copy: the source is {a.h}x{a.w} pixels, out is {b.h}x{b.w}; use rec.resize to "
                         "change the size")
    for p, q in ((a, b), (b, a)):
        if not p.is_image and q.is_image and p.channels != q.channels:
            raise ShapeError(f"copy: the image has {q.channels} channel(s) ({q.value.image.format.name}); the "
                             f"tensor must have the same number, got {p.value.shape}")
    scale = 1.0
    eight_bit = [p for p in (a, b) if not p.is_image and p.kind[0] in "up"]
    if eight_bit and not (a.is_image or b.is_image):
        raise DTypeError("copy between two tensors is rec.copy's tensor form; this path is for images")
    if eight_bit:
        img = (b if a is eight_bit[0] else a).value.image
        if img.format.kind not in ("unorm",):
            raise DTypeError(f"copy: uint8 tensors pair with 8-bit UNORM images; {img.format.name} values are "
                             "not 0..255 steps: copy into a float32 tensor")
        scale = 255.0 if b is eight_bit[0] else 1.0 / 255.0
    if a.same_image_level(b):
        raise InvalidArgumentError("copy: src and out are the same image level")
    if a.h == 0 or a.w == 0:
        return OpResult(b.value, [])
    spec = copy_spec(a.layout, b.layout)
    values = {"H": a.h, "W": a.w, "scale": scale, "alpha_one": int(not a.is_image and a.channels < 4 and b.is_image),
              **a.push("src"), **b.push("dst")}
    return OpResult(b.value, [Dispatch(spec, (a.resource, b.resource), spec.pack(values),
                                       px.groups(ctx, b, rows=True))])


# -- resize ------------------------------------------------------------------------------

# A box resize whose output pixels average more source texels than this
# runs as two passes, across then down, through a float32 scratch: no
# invocation walks a large footprint (a 300x300 -> 1x1 mean in one loop
# passes lavapipe's 65,535-iteration loop cap and comes out wrong, and
# few long invocations are slow on any GPU). Each pass loops at most one
# source row or column.
BOX_ONE_PASS_TEXELS = 1024

# The footprint of output pixel i along an axis of S source and D output
# texels is [i*S/D, (i+1)*S/D]; it averages texels k whose centre k + 0.5
# lies inside: (2k+1)*D >= 2*i*S and (2k+1)*D <= 2*(i+1)*S, decided in
# integers (float32 cannot tell a centre on the boundary of a 4097-wide
# image from one just outside). A centre on a boundary counts for both
# pixels. An upscale's footprint may hold no centre: then the texel under
# the pixel's centre, floor((2i+1)*S / 2D) — box upscaling is nearest.
_BOX_RANGE = """uvec2 box_range(uint i, uint S, uint D) {
  uint lo = (2u * i * S + D - 1u) / (2u * D);
  uint top = 2u * (i + 1u) * S;
  if (top < D || (top - D) / (2u * D) < lo) {
    uint nearest = (2u * i + 1u) * S / (2u * D);
    return uvec2(nearest, nearest);
  }
  return uvec2(lo, (top - D) / (2u * D));
}"""


@family("pixel_resize")
def _render_resize(spec: KernelSpec) -> str:
    if spec.param("filter") == "linear":
        body = """  vec2 uv = (vec2(x, y) + 0.5) / vec2(pc.W, pc.H);
  vec4 v = textureLod(src, uv, 0.0);"""
        load = ""
    else:   # box: the mean of the source texels whose centres fall in this pixel's footprint
        body = """  uvec2 rx = box_range(uint(x), pc.SW, pc.W), ry = box_range(uint(y), pc.SH, pc.H);
  vec4 v = vec4(0.0);
  for (int j = int(ry.x); j <= int(ry.y); ++j)
    for (int i = int(rx.x); i <= int(rx.y); ++i) v += load_src(j, i);
  v /= float((rx.y - rx.x + 1u) * (ry.y - ry.x + 1u));"""
        load = px.loader("src", spec.param("src")) + "\n" + _BOX_RANGE
    return f"""{load}
{px.storer("dst", spec.param("dst"))}
void main() {{
  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (x >= int(pc.W) || y >= int(pc.H)) return;
{body}
  store_dst(y, x, v);
}}"""


def resize_spec(src: str, dst: str, filter: str) -> KernelSpec:
    push = _SIZE_PUSH + (Push("SH", "uint"), Push("SW", "uint")) + px.operand_push("src") + px.operand_push("dst")
    return image_spec("pixel_resize", src, dst, (), push, (("filter", filter),))


def box_footprint(n_src: int, n_dst: int, i: int) -> tuple:
    """The source texel range [lo, hi] a box resize averages for output ``i``
    (texel centres inside the output pixel, boundaries included; with none
    inside, the texel under the pixel's centre) — the numpy reference of
    the kernel's ``box_range``, in the same integers."""
    lo = (2 * i * n_src + n_dst - 1) // (2 * n_dst)
    top = 2 * (i + 1) * n_src
    if top < n_dst or (top - n_dst) // (2 * n_dst) < lo:
        nearest = (2 * i + 1) * n_src // (2 * n_dst)
        return nearest, nearest
    return lo, (top - n_dst) // (2 * n_dst)


def _box_span(n_src: int, n_dst: int) -> int:
    """At most how many source texels one output pixel averages along an axis."""
    return n_src // n_dst + 2 if n_src > n_dst else 1


def _size(size) -> tuple:
    """``size`` as (width, height): two ints >= 1 (not bools, not floats)."""
    try:
        w, h = size
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"resize size must be (width, height), got {size!r}") from None
    for v in (w, h):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidArgumentError(f"resize size must be two ints >= 1 (width, height), got {size!r}")
    return int(w), int(h)


def _box_dispatches(ctx, src: px.Pixels, dst: px.Pixels) -> list:
    """A box resize of ``src`` into ``dst``: one pass, or across then down."""
    if 2 * max(src.w * dst.w, src.h * dst.h) >= 1 << 32:
        raise UnsupportedError(f"resize: {src.w}x{src.h} -> {dst.w}x{dst.h} is past the 32-bit footprint "
                               "arithmetic of the box filter")
    passes = [(src, dst)]
    if _box_span(src.w, dst.w) * _box_span(src.h, dst.h) > BOX_ONE_PASS_TEXELS:
        mid = px.scratch_pixels(ctx, src.h, dst.w, 1 if src.channels == 1 else 4)
        passes = [(src, mid), (mid, dst)]
    out = []
    for a, b in passes:
        spec = resize_spec(a.layout, b.layout, "box")
        values = {"H": b.h, "W": b.w, "SH": a.h, "SW": a.w, **a.push("src"), **b.push("dst")}
        out.append(Dispatch(spec, (a.resource, b.resource), spec.pack(values), px.groups(ctx, b)))
    return out


@op("resize", windows=None)
def resize(ctx, img, out=None, *, size=None, filter: str = "linear"):
    """Resample image ``img`` (an Image or ``img.level(mip)``) to ``out``'s
    extent, or to ``size`` = (width, height) in a new guest image of the same
    format. ``filter``: ``"linear"`` (bilinear through a sampler, texel
    centres aligned, edges clamped; the format must support linear
    filtering) or ``"box"`` (the mean of the source texels whose centres
    fall inside each output pixel, a centre on a pixel boundary counting
    for both: exact area averaging for integer downscales; where no centre
    falls inside, as in upscaling, the texel under the pixel's centre, so
    box upscaling is nearest-neighbour). ``out`` may also be a float32
    tensor."""
    if filter not in ("linear", "box"):
        raise InvalidArgumentError(f"resize filter must be 'linear' or 'box', got {filter!r}")
    if not is_pixels_image(img):
        raise InvalidArgumentError(f"resize reads an image (Image or img.level(mip)), got {type(img).__name__}")
    if out is not None and size is not None:
        raise InvalidArgumentError("resize takes out= or size=, not both")
    if out is None and size is None:
        raise InvalidArgumentError("resize needs out= or size=(width, height)")
    if size is not None:
        size = _size(size)
    src = px.read_pixels(ctx, img, "resize img", sampler="linear" if filter == "linear" else "nearest")
    if filter == "linear" and src.layout != "tex":
        raise UnsupportedError("resize filter='linear' samples the image: it needs SAMPLED usage")
    made = None
    if out is None:
        fmt = src.value.image.format
        made = out = ctx.image(size, "r32f" if fmt.kind == "depth" else fmt.name)
    dst = px.write_pixels(ctx, out, "resize out")
    if dst.kind[0] in "up":
        raise DTypeError("resize writes an image or a float32 tensor")
    if dst.same_image_level(src):
        raise InvalidArgumentError("resize: img and out are the same image level")
    result = made if made is not None else dst.value     # a new image itself, as tonemap's
    if filter == "box":
        return OpResult(result, _box_dispatches(ctx, src, dst))
    spec = resize_spec(src.layout, dst.layout, filter)
    values = {"H": dst.h, "W": dst.w, "SH": src.h, "SW": src.w, **src.push("src"), **dst.push("dst")}
    return OpResult(result, [Dispatch(spec, (src.resource, dst.resource), spec.pack(values),
                                      px.groups(ctx, dst))])


@op("generate_mips", windows=None)
def generate_mips(ctx, img, *, base: int = 0, layer: int = 0):
    """Fill mip levels ``base + 1 ..`` of ``img`` from level ``base``: each
    level is the 2x2 box mean of the one above it (odd sizes average the
    texels each output pixel covers, as ``resize(filter="box")``). One
    dispatch per level; each reads the level its predecessor wrote, and
    the recorder orders them (the image stays in GENERAL throughout)."""
    if not isinstance(img, Image):
        raise InvalidArgumentError(f"generate_mips takes an Image, got {type(img).__name__}")
    base, layer = img.check_subresource(base, layer, "generate_mips")
    dispatches = []
    for mip in range(base + 1, img.mip_levels):
        src = px.read_pixels(ctx, img.level(mip - 1, layer), "generate_mips")
        dst = px.write_pixels(ctx, img.level(mip, layer), "generate_mips")
        dispatches += _box_dispatches(ctx, src, dst)
    return OpResult(img, dispatches)


# -- the bake catalogue --------------------------------------------------------------------

@variants("pixel_copy")
def _copy_variants():
    tensors = ("rgba32f", "rgba32f_s", "r32f", "rg32f_s", "rgb32f_s", "rgba8", "rgba8_s", "r8")
    for read in IMAGE_READS:
        for write in IMAGE_WRITES + tensors:
            yield copy_spec(read, write)
    for lay in tensors:
        for write in IMAGE_WRITES:
            yield copy_spec(lay, write)


@variants("pixel_resize")
def _resize_variants():
    for write in IMAGE_WRITES + ("rgba32f", "rgba32f_s", "r32f"):
        yield resize_spec("tex", write, "linear")
        for read in IMAGE_READS + tuple(px.SCRATCH.values()):     # the scratch: a two-pass box's second
            yield resize_spec(read, write, "box")
