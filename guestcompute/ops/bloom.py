"""``rec.bloom``: light that bleeds around bright parts of an HDR image.

The chain (the usual one in real-time renderers, e.g. Jimenez 2014's
"next generation post processing in Call of Duty"): keep what is brighter
than ``threshold`` at half resolution (a 2x2 box; each pixel's colour
scaled by ``(L - threshold) / L``, ``L`` its Rec. 709 luminance, so the
glow keeps the light's hue), blur it by halving it
``levels - 1`` times (``generate_mips`` on a guest rgba16f chain), walk back
up adding each level's bilinear upsample into the one above it, and add
``intensity`` times the result to the image. Every step reads the level
the previous one wrote, inside one image kept in GENERAL: the recorder puts
a memory barrier between steps and no layout transition.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, InvalidArgumentError
from ..image import SAMPLED, STORAGE, ImageBinding
from ..kernels.catalogue import variants
from ..kernels.spec import READ, READWRITE, Binding, KernelSpec, Push, family
from ..vk import formats
from . import pixels as px
from .base import Dispatch, OpResult, op
from .filters import IMAGE_READS, IMAGE_WRITES, image_spec, pixels_out
from .image_copy import generate_mips

CHAIN_FORMAT = "rgba16f"
_SIZE = (Push("H", "uint"), Push("W", "uint"))


@family("bloom_threshold")
def _render_threshold(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void main() {{
  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (x >= int(pc.W) || y >= int(pc.H)) return;
  int x0 = min(2 * x, int(pc.SW) - 1), x1 = min(2 * x + 1, int(pc.SW) - 1);
  int y0 = min(2 * y, int(pc.SH) - 1), y1 = min(2 * y + 1, int(pc.SH) - 1);
  vec3 c = max(0.25 * (load_src(y0, x0) + load_src(y0, x1) + load_src(y1, x0) + load_src(y1, x1)).rgb, vec3(0.0));
  // The threshold is on luminance and scales the colour, keeping its hue
  // (a per-channel cut shifts hue towards the strongest channel): the part
  // of the light above the threshold, c * (L - threshold) / L.
  float l = dot(c, vec3(0.2126, 0.7152, 0.0722));
  store_dst(y, x, vec4(l > pc.threshold ? c * (1.0 - pc.threshold / l) : vec3(0.0), 1.0));
}}"""


def threshold_spec(src: str) -> KernelSpec:
    push = _SIZE + (Push("SH", "uint"), Push("SW", "uint"), Push("threshold", "float")) \
        + px.operand_push("src") + px.operand_push("dst")
    return image_spec("bloom_threshold", src, "put:rgba16f", (), push, ())


@family("bloom_up")
def _render_up(spec: KernelSpec) -> str:
    return """void main() {
  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (x >= int(pc.W) || y >= int(pc.H)) return;
  vec2 uv = (vec2(x, y) + 0.5) / vec2(pc.W, pc.H);
  vec4 v = imageLoad(level, ivec2(x, y)) + textureLod(below, uv, 0.0);
  imageStore(level, ivec2(x, y), vec4(v.rgb, 1.0));
}"""


def up_spec() -> KernelSpec:
    return KernelSpec("bloom_up", (Binding("below", "sampler2D", READ, "sampled"),
                                   Binding("level", "image2D", READWRITE, "storage", "rgba16f")),
                      _SIZE, (), px.TILE, (), ())


@family("bloom_composite")
def _render_composite(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void main() {{
  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (x >= int(pc.W) || y >= int(pc.H)) return;
  vec2 uv = (vec2(x, y) + 0.5) / vec2(pc.W, pc.H);
  vec4 v = load_src(y, x);
  store_dst(y, x, vec4(v.rgb + pc.intensity * textureLod(glow, uv, 0.0).rgb, v.a));
}}"""


def composite_spec(src: str, dst: str) -> KernelSpec:
    push = _SIZE + (Push("intensity", "float"),) + px.operand_push("src") + px.operand_push("dst")
    return image_spec("bloom_composite", src, dst, (Binding("glow", "sampler2D", READ, "sampled"),), push, ())


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"bloom {what} must be a finite number >= 0, got {value!r}")
    return float(value)


@op("bloom", windows=None)
def bloom(ctx, img, out=None, *, threshold: float = 1.0, intensity: float = 0.5, levels: int = 5):
    """Add bloom to HDR image ``img`` (see the module notes) into ``out``
    (an image or float32 pixel tensor; default a new image like ``img``;
    may be ``img``). ``threshold``: the Rec. 709 luminance above which light
    blooms (the colour is scaled by ``(L - threshold) / L``, keeping its
    hue); ``intensity``: how much of the glow is added; ``levels``: how many
    halvings the glow spreads over (at most what the half-size image has)."""
    threshold, intensity = _number(threshold, "threshold"), _number(intensity, "intensity")
    src = px.read_pixels(ctx, img, "bloom img")
    if src.kind[0] in "up":
        raise DTypeError("bloom works on HDR images and float32 tensors")
    hw, hh = max(1, src.w // 2), max(1, src.h // 2)
    most = max(hw, hh).bit_length()
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= most:
        raise InvalidArgumentError(f"bloom levels must be an int in 1..{most} for a {src.w}x{src.h} image, "
                                   f"got {levels!r}")
    if not ctx.device.format_features[CHAIN_FORMAT] & formats.LINEAR_FILTER:
        raise DTypeError(f"bloom needs linear filtering of {CHAIN_FORMAT}, which this device lacks")
    dst = pixels_out(ctx, out, src, "bloom out")
    chain = ctx.image((hw, hh), CHAIN_FORMAT, mips=levels)
    first = px.write_pixels(ctx, chain.level(0), "bloom")
    spec = threshold_spec(src.layout)
    values = {"H": hh, "W": hw, "SH": src.h, "SW": src.w, "threshold": threshold, **src.push("src"),
              **first.push("dst")}
    dispatches = [Dispatch(spec, (src.resource, first.resource), spec.pack(values), px.groups(ctx, first))]
    dispatches += generate_mips(ctx, chain).dispatches
    up = up_spec()
    for mip in range(levels - 2, -1, -1):
        w, h = chain.mip_extent(mip)
        below = ImageBinding(chain, mip + 1, 0, SAMPLED, sampler="linear")
        level = ImageBinding(chain, mip, 0, STORAGE)
        dispatches.append(Dispatch(up, (below, level), up.pack({"H": h, "W": w}),
                                   px.extent_groups(ctx, w, h)))
    glow = ImageBinding(chain, 0, 0, SAMPLED, sampler="linear")
    spec = composite_spec(src.layout, dst.layout)
    values = {"H": src.h, "W": src.w, "intensity": intensity, **src.push("src"), **dst.push("dst")}
    dispatches.append(Dispatch(spec, (src.resource, dst.resource, glow), spec.pack(values), px.groups(ctx, dst)))
    return OpResult(dst.value, dispatches)


@variants("bloom_threshold")
def _threshold_variants():
    for read in IMAGE_READS + ("rgba32f", "rgba32f_s", "r32f"):
        yield threshold_spec(read)


@variants("bloom_up")
def _up_variants():
    yield up_spec()


@variants("bloom_composite")
def _composite_variants():
    floats = ("rgba32f", "rgba32f_s", "r32f")
    for read in IMAGE_READS + floats:
        for write in IMAGE_WRITES + floats:
            yield composite_spec(read, write)
