"""HDR to display: ``rec.tonemap`` and ``rec.luminance`` (auto-exposure).

``tonemap`` reads an HDR image or float tensor (linear light), multiplies by
the exposure, applies a curve — Reinhard ``c / (1 + c)``, the ACES filmic
fit of Krzysztof Narkowicz (2016), or none (clamp) — and writes display
values. An sRGB target (``rgba8_srgb``, ``bgra8_srgb``) is encoded by its
UNORM view's storer; a UNORM target gets sRGB encoding in the shader with
``srgb=True`` (the usual case of a BGRA8_UNORM swapchain), ``gamma=``, or
linear values with ``srgb=False`` — it must say which.

``luminance`` computes the exposure a frame's average brightness asks for,
``key / exp(mean(log(1e-4 + L)))`` with ``L`` the Rec. 709 luminance of
each pixel (Reinhard 2002's log-average; pixels whose ``L`` is inf or NaN
are left out), into a one-element float32
tensor that ``tonemap(exposure=that_tensor)`` reads on the GPU: no
readback, so auto-exposure stays inside the host's command buffer.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family
from ..tensor import Tensor
from . import pixels as px
from .base import Dispatch, OpResult, check_out, check_tensor, op, registered_ops
from .filters import IMAGE_READS, IMAGE_WRITES, image_spec

# The textbook forms give NaN for the brightest pixels, stored as black:
# Reinhard's c / (1 + c) is inf / inf at +inf (an rgba16f scene that
# overflowed), ACES's c * c overflows from c = 1.2e19. Both limits are
# white. Reinhard above 1 is evaluated divided through by c, 1 / (1 + 1/c),
# which +inf takes to 1 (and no reciprocal of a huge 1 + c underflows).
# ACES reaches 1 at c = 7.24 and stays above it, clamped to 1: from 64 on
# it is 1 outright, and the textbook form keeps its accuracy below that.
CURVES = {
    "none": "c",
    "reinhard": "mix(c / (1.0 + c), 1.0 / (1.0 + 1.0 / c), greaterThan(c, vec3(1.0)))",
    "aces": "mix(clamp((c * (2.51 * c + 0.03)) / (c * (2.43 * c + 0.59) + 0.14), 0.0, 1.0), vec3(1.0), "
            "greaterThan(c, vec3(64.0)))",
}
LUMA = "vec3(0.2126, 0.7152, 0.0722)"


CURVE_IDS = {"none": 0, "reinhard": 1, "aces": 2}
ENCODE_IDS = {"none": 0, "srgb": 1, "gamma": 2}


@family("tonemap")
def _render_tonemap(spec: KernelSpec) -> str:
    # The curve and the output encoding are push constants: a uniform branch
    # costs nothing, and one pipeline per operand layout serves them all.
    exposure = "pc.exposure * exposure_in[pc.exp_off]" if spec.param("exposure_tensor") else "pc.exposure"
    helpers = "" if "srgb_encode" in px.storer("dst", spec.param("dst")) else px.SRGB_ENCODE
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
{helpers}
void pixel(int x, int y) {{
  vec4 v = load_src(y, x);
  vec3 c = max(v.rgb * ({exposure}), vec3(0.0));
  if (pc.curve == 1u) c = {CURVES["reinhard"]};
  else if (pc.curve == 2u) c = {CURVES["aces"]};
  if (pc.encode == 1u) c = srgb_encode(c);
  else if (pc.encode == 2u) c = pow(clamp(c, 0.0, 1.0), vec3(1.0 / pc.gamma));
  store_dst(y, x, vec4(clamp(c, 0.0, 1.0), clamp(v.a, 0.0, 1.0)));
}}
{px.ROWS_MAIN}"""


def tonemap_spec(src: str, dst: str, exposure_tensor: bool) -> KernelSpec:
    extra = (Binding("exposure_in", "float", READ),) if exposure_tensor else ()
    push = (Push("H", "uint"), Push("W", "uint"), Push("exposure", "float"), Push("gamma", "float"),
            Push("exp_off", "uint"), Push("curve", "uint"), Push("encode", "uint")) \
        + px.operand_push("src") + px.operand_push("dst")
    return image_spec("tonemap", src, dst, extra, push, (("exposure_tensor", exposure_tensor),), px.ROW_TILE)


def _exposure(ctx, exposure):
    """(push value, tensor or None) for a number or a 1-element float32 tensor."""
    if isinstance(exposure, Tensor):
        t = check_tensor(ctx, exposure, "tonemap exposure")
        if t.dtype != float32 or t.size != 1:
            raise ShapeError(f"tonemap exposure tensor must be one float32 value, got {t.dtype} {t.shape}")
        return 1.0, t
    if isinstance(exposure, bool) or not isinstance(exposure, (int, float, np.integer, np.floating)) \
            or not np.isfinite(exposure) or exposure < 0:
        raise InvalidArgumentError(f"tonemap exposure must be a finite number >= 0 or a float32 tensor, "
                                   f"got {exposure!r}")
    return float(exposure), None


@op("tonemap", windows=None)
def tonemap(ctx, img, out=None, *, exposure=1.0, curve: str = "aces", srgb=None, gamma=None):
    """Tone-map HDR ``img`` (an image or a float32 pixel tensor, linear
    light) into ``out`` (an image — sRGB formats encode themselves — or a
    float32 tensor; default: a new rgba8_unorm Image with sRGB encoding).
    ``exposure``: a number or a one-element float32 tensor (e.g. from
    ``rec.luminance``), multiplied in on the GPU. ``curve``: "aces",
    "reinhard" or "none"; +inf and huge values map to white.

    The output encoding: ``srgb=True`` encodes sRGB in the shader (a UNORM
    target shown as sRGB, e.g. a BGRA8_UNORM swapchain), ``gamma=2.2``
    applies a power curve instead, ``srgb=False`` stores linear values. A
    UNORM image ``out`` needs one of the three said: linear values in an
    8-bit display image look dark, so the choice is not guessed. Float
    targets default to linear; sRGB images encode in their store."""
    if curve not in CURVES:
        raise InvalidArgumentError(f"tonemap curve must be one of {sorted(CURVES)}, got {curve!r}")
    if srgb is not None and not isinstance(srgb, (bool, np.bool_)):
        raise InvalidArgumentError(f"tonemap srgb must be True, False or None, got {srgb!r}")
    src = px.read_pixels(ctx, img, "tonemap img")
    if src.kind[0] in "up":
        raise DTypeError("tonemap reads linear light: an image or a float32 tensor, not 8-bit values")
    value, exp_t = _exposure(ctx, exposure)
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating))
                              or not np.isfinite(gamma) or gamma <= 0):
        raise InvalidArgumentError(f"tonemap gamma must be a finite positive number, got {gamma!r}")
    if gamma is not None and srgb:
        raise InvalidArgumentError("tonemap takes srgb=True or gamma=, not both")
    made = None
    if out is None:
        made = out = ctx.image((src.w, src.h), "rgba8_unorm")
        if srgb is None and gamma is None:
            srgb = True
    dst = px.write_pixels(ctx, out, "tonemap out")
    if (dst.h, dst.w) != (src.h, src.w):
        raise ShapeError(f"tonemap out is {dst.h}x{dst.w}; img is {src.h}x{src.w} (resize first)")
    if dst.kind[0] in "up":
        raise DTypeError("tonemap writes an image or a float32 tensor")
    if srgb and dst.layout.startswith("put_srgb"):
        raise InvalidArgumentError("tonemap srgb=True: the target is an sRGB image, which encodes itself")
    if srgb is None and gamma is None and dst.is_image and dst.resource.image.format.kind == "unorm":
        name = dst.resource.image.format.name
        raise InvalidArgumentError(f"tonemap into a {name} image: say how to encode it - srgb=True (shown as "
                                   "sRGB, e.g. a UNORM swapchain), gamma=, or srgb=False to store linear values")
    encode = "srgb" if srgb else "gamma" if gamma is not None else "none"
    spec = tonemap_spec(src.layout, dst.layout, exp_t is not None)
    values = {"H": src.h, "W": src.w, "exposure": value, "gamma": float(gamma or 1.0),
              "curve": CURVE_IDS[curve], "encode": ENCODE_IDS[encode],
              "exp_off": exp_t.offset if exp_t is not None else 0, **src.push("src"), **dst.push("dst")}
    buffers = (src.resource, dst.resource) + ((exp_t.buffer,) if exp_t is not None else ())
    # A new image is returned itself, as other image ops do; an ``out`` given
    # as an Image gives its level, as theirs do.
    result = made if made is not None else dst.value
    return OpResult(result, [Dispatch(spec, buffers, spec.pack(values), px.groups(ctx, dst, rows=True))])


# -- auto-exposure ------------------------------------------------------------------------

@family("log_luminance")
def _render_log_luminance(spec: KernelSpec) -> str:
    # Row 0 of ``logl`` gets each pixel's log luminance, row 1 a 1 where it
    # counts: a pixel whose luminance is inf or NaN (a scene that overflowed,
    # a shader's NaN) is left out of the average instead of turning the
    # exposure to 0 or NaN. Classified by its bits: a compiler that assumes
    # finite math cannot fold that test away.
    return f"""{px.loader("src", spec.param("src"))}
void main() {{
  int x = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (x >= int(pc.W) || y >= int(pc.H)) return;
  float l = dot(load_src(y, x).rgb, {LUMA});
  bool finite = (floatBitsToUint(l) & 0x7f800000u) != 0x7f800000u;
  int i = y * int(pc.W) + x;
  logl[i] = finite ? log(1e-4 + max(l, 0.0)) : 0.0;
  logl[int(pc.H * pc.W) + i] = finite ? 1.0 : 0.0;
}}"""


def log_luminance_spec(src: str) -> KernelSpec:
    return KernelSpec("log_luminance", (px.binding("src", src, READ), Binding("logl", "float", WRITE)),
                      (Push("H", "uint"), Push("W", "uint")) + px.operand_push("src"), (("src", src),), px.TILE,
                      (), ())


@op("luminance", windows=None)
def luminance(ctx, img, out=None, *, key: float = 0.18, limits=None):
    """The exposure that maps ``img``'s log-average luminance to ``key``
    (middle grey): ``key / exp(mean(log(1e-4 + L)))``, into ``out`` (a
    one-element float32 tensor; allocated when omitted) — for
    ``rec.tonemap(img, exposure=out)`` in the same recording.
    ``limits=(lo, hi)`` clamps the exposure (an auto-exposure's range: a
    nearly black frame is not lifted to grey, a flash not crushed).

    ``L`` is the Rec. 709 luminance, negative values counted as 0. Pixels
    whose ``L`` is not finite (+inf from an overflowed HDR scene, NaN) are
    left out of the mean: one such pixel does not black out the frame. A
    frame with no finite pixel gets the exposure ``key`` (clamped to
    ``limits``)."""
    src = px.read_pixels(ctx, img, "luminance img")
    if src.kind[0] in "up":
        raise DTypeError("luminance reads linear light: an image or a float32 tensor")
    if isinstance(key, bool) or not isinstance(key, (int, float, np.integer, np.floating)) \
            or not np.isfinite(key) or not key > 0:
        raise InvalidArgumentError(f"luminance key must be a finite positive number, got {key!r}")
    bounds = _exposure_limits(limits)
    if out is not None:
        out = check_out(ctx, out, None, float32, (), "luminance out")
        if out.size != 1:
            raise ShapeError(f"luminance out must be one float32 value, got shape {out.shape}")
    both = ctx.empty((2, src.h * src.w), float32)        # log luminances, then which pixels count
    spec = log_luminance_spec(src.layout)
    values = {"H": src.h, "W": src.w, **src.push("src")}
    dispatches = [Dispatch(spec, (src.resource, both.buffer), spec.pack(values), px.groups(ctx, src))]
    ops = registered_ops()
    sums = ops["sum"](ctx, both, 1)
    counted = ops["maximum"](ctx, sums.value[1:], 1.0)   # no finite pixel: a mean of 0, exposure = key
    mean = ops["div"](ctx, sums.value[:1], counted.value)
    dispatches += sums.dispatches + counted.dispatches + mean.dispatches
    x = mean.value
    steps = [("neg", ()), ("exp", ()), ("scale", (float(key),))]
    if bounds is not None:
        steps.append(("clamp", bounds))
    for i, (name, args) in enumerate(steps):
        last = i == len(steps) - 1
        if last and out is not None:
            x = x.reshape(out.shape)           # a view: the last step writes out as given
        r = ops[name](ctx, x, *args, **({"out": out} if last else {}))
        dispatches += r.dispatches
        x = r.value
    return OpResult(x.reshape(()) if out is None else out, dispatches)


def _exposure_limits(limits):
    """``(lo, hi)`` as floats with 0 < lo <= hi, or None."""
    if limits is None:
        return None
    try:
        lo, hi = (float(v) for v in limits)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"luminance limits must be (lo, hi) numbers, got {limits!r}") from None
    if not (0 < lo <= hi < float("inf")):
        raise InvalidArgumentError(f"luminance limits need 0 < lo <= hi (finite), got {limits!r}")
    return lo, hi


# -- the bake catalogue ---------------------------------------------------------------------

@variants("tonemap")
def _tonemap_variants():
    floats = ("rgba32f", "rgba32f_s", "r32f")
    for read in IMAGE_READS + floats:
        for write in IMAGE_WRITES + floats:
            for tensor in (False, True):
                yield tonemap_spec(read, write, tensor)


@variants("log_luminance")
def _log_luminance_variants():
    for read in IMAGE_READS + ("rgba32f", "rgba32f_s", "r32f"):
        yield log_luminance_spec(read)
