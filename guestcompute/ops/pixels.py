"""Pixel operands: what image ops read and write, a tensor or an image.

An op on pixels calls ``load_<name>(y, x)`` and ``store_<name>(y, x, v)``
in its GLSL and never knows what is behind them. Each operand has a
*layout*, a short string that is part of the kernel spec and picks both the
binding and those two functions:

Tensors (``y`` down, ``x`` right; values of 8-bit layouts are 0..255):

==========================  ===============================================
``rgba32f`` / ``rgba32f_s`` ``float32 (H, W, 4)``, vec4 loads when aligned
``r32f``                    ``float32 (H, W)``
``rgba8`` / ``rgba8_s``     ``uint8 (H, W, 4)``; needs 8-bit storage
``r8``                      ``uint8 (H, W)``; same
``rgba8_packed``            ``uint32 (H, W)``: RGBA8 packed, R in the low byte
==========================  ===============================================

Images (one mip level and array layer; values as a shader sees them:
0..1 for UNORM, linear 0..1 for sRGB, floats for float formats):

==========================  ===============================================
``tex``                     read sampled: texelFetch through a sampler2D
                            (decodes sRGB, swizzles BGRA, reads depth)
``img:<fmt>``               read as a storage image with format ``<fmt>``
``put:<fmt>``               write as a storage image (``put:`` without a
                            format: a write-only image, when the host enabled
                            shaderStorageImageWriteWithoutFormat)
``put_srgb:<fmt>``          write an sRGB image through its UNORM view,
                            encoding sRGB in the shader
==========================  ===============================================
"""
from __future__ import annotations

import numpy as np

from ..dtypes import float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..image import SAMPLED, STORAGE, Image, ImageBinding, ImageLevel, storage_format, storage_write_problem
from ..host.images import STORAGE_USAGE, usage_names
from ..kernels.spec import READ, Binding, Push
from ..tensor import Tensor
from ..vk import formats
from .base import check_tensor

TILE = (16, 8, 1)            # threads per workgroup over (x, y)
# Point-wise kernels (copy, tonemap, grading) run 16x16 threads, each over
# ROWS pixels of one column: on the H200 that moved an rgba8 image copy from
# 1.4 to 2.7 TB/s at 3840x2160 (one pixel per thread pays per-thread costs
# that a texel of 4 bytes does not cover).
ROW_TILE = (16, 16, 1)
ROWS = 4
# A workgroup covers ROWS times its height; each thread's rows are a
# workgroup height apart, so at every step the threads of a subgroup touch
# adjacent rows — what tiled (block-linear) image memory keeps local. Four
# consecutive rows per thread measured 0.84x of this on a 3840x2160 rgba8
# image copy (H200).
ROWS_MAIN = f"""void main() {{
  int x = int(gl_GlobalInvocationID.x);
  int step = int(gl_WorkGroupSize.y);
  int y0 = int(gl_WorkGroupID.y) * step * {ROWS} + int(gl_LocalInvocationID.y);
  if (x >= int(pc.W)) return;
  for (int r = 0; r < {ROWS}; ++r) {{
    int y = y0 + r * step;
    if (y >= int(pc.H)) return;
    pixel(x, y);
  }}
}}"""

# Tensor layouts. name: (binding type, load, store, needs 8-bit storage). In
# load/store templates {b} is the buffer, {i} the element index, {c} the
# channel stride; stores see ``v`` and, for 8-bit layouts, ``q`` (0..255).
LAYOUTS = {
    "rgba32f": ("vec4", "{b}[{i}]", "{b}[{i}] = v;", False),
    "rgba32f_s": ("float", "vec4({b}[{i}], {b}[{i} + {c}], {b}[{i} + 2 * {c}], {b}[{i} + 3 * {c}])",
                  "{b}[{i}] = v.x; {b}[{i} + {c}] = v.y; {b}[{i} + 2 * {c}] = v.z; {b}[{i} + 3 * {c}] = v.w;",
                  False),
    "r32f": ("float", "vec4({b}[{i}], 0.0, 0.0, 0.0)", "{b}[{i}] = v.x;", False),
    "rg32f_s": ("float", "vec4({b}[{i}], {b}[{i} + {c}], 0.0, 0.0)", "{b}[{i}] = v.x; {b}[{i} + {c}] = v.y;",
                False),
    "rgb32f_s": ("float", "vec4({b}[{i}], {b}[{i} + {c}], {b}[{i} + 2 * {c}], 0.0)",
                 "{b}[{i}] = v.x; {b}[{i} + {c}] = v.y; {b}[{i} + 2 * {c}] = v.z;", False),
    "rgba8": ("u8vec4", "vec4({b}[{i}])", "{b}[{i}] = u8vec4(q);", True),
    "rgba8_s": ("uint8_t", "vec4(float({b}[{i}]), float({b}[{i} + {c}]), float({b}[{i} + 2 * {c}]), "
                "float({b}[{i} + 3 * {c}]))",
                "{b}[{i}] = uint8_t(q.x); {b}[{i} + {c}] = uint8_t(q.y); {b}[{i} + 2 * {c}] = uint8_t(q.z); "
                "{b}[{i} + 3 * {c}] = uint8_t(q.w);", True),
    "r8": ("uint8_t", "vec4(float({b}[{i}]), 0.0, 0.0, 0.0)", "{b}[{i}] = uint8_t(q.x);", True),
    "rgba8_packed": ("uint", "vec4((uvec4({b}[{i}]) >> uvec4(0u, 8u, 16u, 24u)) & 0xFFu)",
                     "{b}[{i}] = q.x | (q.y << 8) | (q.z << 16) | (q.w << 24);", False),
}
# Layouts a float scratch (intermediate) tensor uses, by channel count.
SCRATCH = {4: "rgba32f", 1: "r32f"}
# Pixel kind of each tensor layout: f(loat) / u(int8) / p(acked), channels.
KIND = {"rgba32f": "f4", "rgba32f_s": "f4", "r32f": "f1", "rg32f_s": "f2", "rgb32f_s": "f3", "rgba8": "u4",
        "rgba8_s": "u4", "r8": "u1", "rgba8_packed": "p4"}

SRGB_ENCODE = """vec3 srgb_encode(vec3 c) {
  c = clamp(c, 0.0, 1.0);
  return mix(c * 12.92, 1.055 * pow(c, vec3(1.0 / 2.4)) - 0.055, step(vec3(0.0031308), c));
}"""


def is_image_layout(layout: str) -> bool:
    return layout == "tex" or ":" in layout


def pixel_kind(layout: str, channels: int) -> str:
    """f/u/p plus channel count; images count as float pixels (their values are 0..1 or floats)."""
    return f"f{channels}" if is_image_layout(layout) else KIND[layout]


def binding(name: str, layout: str, access: str) -> Binding:
    """The spec Binding of operand ``name`` in ``layout``."""
    if layout == "tex":
        return Binding(name, "sampler2D", READ, "sampled")
    if ":" in layout:
        qualifier = layout.split(":", 1)[1]
        return Binding(name, "image2D", access, "storage", qualifier)
    return Binding(name, LAYOUTS[layout][0], access)


def needs_u8(*layouts) -> bool:
    return any(not is_image_layout(lay) and LAYOUTS[lay][3] for lay in layouts)


def loader(name: str, layout: str) -> str:
    """GLSL ``vec4 load_<name>(int y, int x)``."""
    if layout == "tex":
        return f"vec4 load_{name}(int y, int x) {{ return texelFetch({name}, ivec2(x, y), 0); }}"
    if layout.startswith("img:"):
        return f"vec4 load_{name}(int y, int x) {{ return imageLoad({name}, ivec2(x, y)); }}"
    load = LAYOUTS[layout][1].format(b=name, i="i", c=f"pc.{name}_sc")
    return (f"vec4 load_{name}(int y, int x) {{\n"
            f"  int i = int(pc.{name}_off) + y * pc.{name}_sy + x * pc.{name}_sx;\n"
            f"  return {load};\n}}")


# Stores into UNORM images round in the shader. Vulkan converts a float f to
# a b-bit code as convertFloatToUint(f * (2^b - 1)): "one of the two
# integers closest", round to nearest only recommended, exact only when the
# product is an integer. So a store hands over q / (2^b - 1), q the nearest
# code (half up, like 8-bit tensor stores), as the float whose product with
# 2^b - 1 is exactly q: every conforming driver then stores q. One multiply
# by the rounded reciprocal and one ulp of correction give that float (the
# correctly rounded quotient) for every code of 2 to 16 bits.
# Codes per channel by GLSL storage qualifier; no qualifier is BGRA8.
UNORM_CODES = {"rgba8": (255,) * 4, "rg8": (255,) * 4, "r8": (255,) * 4, "": (255,) * 4,
               "rgba16": (65535,) * 4, "rg16": (65535,) * 4, "r16": (65535,) * 4,
               "rgb10_a2": (1023, 1023, 1023, 3)}
UNORM_EXACT = """vec4 unorm_exact(vec4 v, vec4 codes, vec4 inverse) {
  vec4 q = floor(clamp(v, 0.0, 1.0) * codes + 0.5);
  vec4 f = q * inverse;
  vec4 back = f * codes;
  return uintBitsToFloat(floatBitsToUint(f) + uvec4(lessThan(back, q)) - uvec4(greaterThan(back, q)));
}"""


def _unorm_store(name: str, qualifier: str, value: str) -> str:
    """GLSL storing ``value`` into UNORM storage image ``name`` as exact codes."""
    codes = UNORM_CODES[qualifier]
    inverse = ", ".join(repr(float(np.float32(1.0 / c))) for c in codes)
    return (f"{UNORM_EXACT}\nvoid store_{name}(int y, int x, vec4 v) {{ imageStore({name}, ivec2(x, y), "
            f"unorm_exact({value}, vec4({', '.join(f'{c}.0' for c in codes)}), vec4({inverse}))); }}")


def storer(name: str, layout: str) -> str:
    """GLSL ``void store_<name>(int y, int x, vec4 v)`` (plus helpers it needs)."""
    if layout.startswith("put_srgb:"):
        return f"{SRGB_ENCODE}\n" + _unorm_store(name, layout.split(":", 1)[1],
                                                   "vec4(srgb_encode(v.rgb), v.a)")
    if layout.startswith("put:"):
        qualifier = layout.split(":", 1)[1]
        if qualifier in UNORM_CODES:
            return _unorm_store(name, qualifier, "v")
        return f"void store_{name}(int y, int x, vec4 v) {{ imageStore({name}, ivec2(x, y), v); }}"
    store = LAYOUTS[layout][2].format(b=name, i="i", c=f"pc.{name}_sc")
    eight_bit = KIND[layout][0] in "up"
    quant = "  uvec4 q = uvec4(clamp(floor(v + 0.5), 0.0, 255.0));\n" if eight_bit else ""
    return (f"void store_{name}(int y, int x, vec4 v) {{\n"
            f"  int i = int(pc.{name}_off) + y * pc.{name}_sy + x * pc.{name}_sx;\n"
            f"{quant}  {store}\n}}")


class Pixels:
    """One pixel operand resolved to a layout: ``resource`` is what the
    Dispatch binds (a Buffer or an ImageBinding), ``value`` what an op
    returns for it (the Tensor, Image or ImageLevel), ``off/sy/sx/sc`` the
    tensor addressing in binding elements (0 for images)."""

    def __init__(self, value, layout: str, resource, h: int, w: int, channels: int,
                 off: int = 0, sy: int = 0, sx: int = 0, sc: int = 0):
        self.value, self.layout, self.resource = value, layout, resource
        self.h, self.w, self.channels = h, w, channels
        self.off, self.sy, self.sx, self.sc = off, sy, sx, sc

    @property
    def is_image(self) -> bool:
        return is_image_layout(self.layout)

    @property
    def kind(self) -> str:
        return pixel_kind(self.layout, self.channels)

    def same_image_level(self, other: "Pixels") -> bool:
        """Both operands bind the same (image, mip level, array layer)."""
        a, b = self.resource, other.resource
        return (isinstance(a, ImageBinding) and isinstance(b, ImageBinding) and a.image is b.image
                and a.mip == b.mip and a.layer == b.layer)

    def push(self, name: str) -> dict:
        return {f"{name}_off": self.off, f"{name}_sy": self.sy, f"{name}_sx": self.sx, f"{name}_sc": self.sc}


# -- tensors ---------------------------------------------------------------------------

def tensor_pixels(ctx, t, what: str, any_channels: bool = False) -> Pixels:
    """A tensor as pixels. ``any_channels``: float32 (H, W, 2) and (H, W, 3)
    are accepted too (copies to and from two- and three-channel images)."""
    t = check_tensor(ctx, t, what)
    if any_channels and t.dtype.name == "float32" and t.ndim == 3 and t.shape[2] in (2, 3):
        sy, sx, sc = t.strides
        return Pixels(t, "rg32f_s" if t.shape[2] == 2 else "rgb32f_s", t.buffer, t.shape[0], t.shape[1],
                      t.shape[2], t.offset, sy, sx, sc)
    kind = t.dtype.name
    if kind == "uint32":
        if t.ndim != 2:
            raise ShapeError(f"{what}: a uint32 image is packed RGBA8 of shape (H, W), got {t.shape}")
        return Pixels(t, "rgba8_packed", t.buffer, t.shape[0], t.shape[1], 4, t.offset, t.strides[0],
                      t.strides[1], 0)
    if kind not in ("float32", "uint8"):
        raise DTypeError(f"{what}: images are float32, uint8 or packed-RGBA8 uint32, got {t.dtype}")
    if t.ndim == 2:
        return Pixels(t, "r32f" if kind == "float32" else "r8", t.buffer, t.shape[0], t.shape[1], 1, t.offset,
                      t.strides[0], t.strides[1], 0)
    if t.ndim != 3 or t.shape[2] != 4:
        raise ShapeError(f"{what}: expected (H, W, 4) RGBA or (H, W) one channel, got {t.shape}")
    sy, sx, sc = t.strides
    base = "rgba32f" if kind == "float32" else "rgba8"
    h, w = t.shape[0], t.shape[1]
    if sc == 1 and t.offset % 4 == 0 and sy % 4 == 0 and sx % 4 == 0:
        return Pixels(t, base, t.buffer, h, w, 4, t.offset // 4, sy // 4, sx // 4, 1)   # one vector per pixel
    return Pixels(t, base + "_s", t.buffer, h, w, 4, t.offset, sy, sx, sc)


def scratch_pixels(ctx, h: int, w: int, channels: int) -> Pixels:
    """A float32 tensor for intermediate results (4 or 1 channels)."""
    t = ctx.empty((h, w, 4) if channels == 4 else (h, w), float32)
    return Pixels(t, SCRATCH[channels], t.buffer, h, w, channels, 0, w, 1, 1 if channels == 4 else 0)


# -- images ----------------------------------------------------------------------------

def as_level(ctx, x, what: str) -> ImageLevel:
    """An Image (mip 0, layer 0) or an ImageLevel of this context."""
    level = x.level(0, 0) if isinstance(x, Image) else x
    if not isinstance(level, ImageLevel):
        raise InvalidArgumentError(f"{what} must be an Image or img.level(mip, layer), got {type(x).__name__}")
    if level.image.ctx is not ctx:
        raise InvalidArgumentError(f"{what} belongs to another context; images are per context")
    ctx.device.check_open()
    return level


def _usage_hint(img, what: str, need: str) -> str:
    if need == "read":
        return (f"{what}: the image was declared with usage {usage_names(img.usage)}; reading it needs SAMPLED "
                "(or STORAGE with a format GLSL can name)")
    return (f"{what}: writing a {img.format.name} image needs STORAGE usage (declared: "
            f"{usage_names(img.usage)}); add VK_IMAGE_USAGE_STORAGE_BIT when creating it, or write into a "
            "guest image and copy")


def sampled_binding(ctx, level: ImageLevel, what: str, sampler: str = "nearest",
                    kind: str = SAMPLED) -> ImageBinding:
    """``level`` read through a sampler (``kind`` SAMPLED: a combined image
    sampler; TEXTURE: a separate texture). The caller checked SAMPLED usage."""
    img = level.image
    have = ctx.device.format_features[img.format.name]
    if sampler == "linear" and not have & formats.LINEAR_FILTER:
        raise UnsupportedError(f"{what}: {img.format.name} has no SAMPLED_IMAGE_FILTER_LINEAR on this device; "
                               "use the nearest or box filter")
    # A view inherits the image's usage; where the format cannot be a
    # storage image (sRGB with a UNORM storage twin) the sampled view
    # drops STORAGE (Vulkan 1.1 view usage).
    narrow = img.usage & ~STORAGE_USAGE if img.storage_usage and not have & formats.STORAGE else 0
    return ImageBinding(img, level.mip, level.layer, kind, sampler=sampler, view_usage=narrow)


def read_pixels(ctx, x, what: str, sampler: str = "nearest", any_channels: bool = False) -> Pixels:
    """A readable operand for a tensor or an image level."""
    if isinstance(x, Tensor):
        return tensor_pixels(ctx, x, what, any_channels)
    level = as_level(ctx, x, what)
    img = level.image
    fmt = img.format
    if fmt.integer:
        raise DTypeError(f"{what}: {fmt.name} images hold integers; pixel ops work on colour and float formats")
    w, h = level.extent
    if img.sampled_usage and ctx.device.format_features[fmt.name] & formats.SAMPLED:
        return Pixels(level, "tex", sampled_binding(ctx, level, what, sampler), h, w, fmt.channels)
    if img.storage_usage and fmt.qualifier:
        res = ImageBinding(img, level.mip, level.layer, STORAGE)
        return Pixels(level, f"img:{fmt.qualifier}", res, h, w, fmt.channels)
    raise UnsupportedError(_usage_hint(img, what, "read"))


def write_pixels(ctx, x, what: str, any_channels: bool = False) -> Pixels:
    """A writable operand for a tensor or an image level."""
    if isinstance(x, Tensor):
        return tensor_pixels(ctx, x, what, any_channels)
    level = as_level(ctx, x, what)
    img = level.image
    fmt = img.format
    if fmt.kind == "depth":
        raise UnsupportedError(f"{what}: depth images are read-only for guest ops (sampled); write depth in "
                               "the host's render pass")
    if fmt.integer:
        raise DTypeError(f"{what}: {fmt.name} images hold integers; pixel ops write colour and float formats")
    if not img.storage_usage:
        raise UnsupportedError(_usage_hint(img, what, "write"))
    w, h = level.extent
    view_fmt = storage_format(ctx, fmt, img.mutable_format, what)
    layout = "put_srgb" if view_fmt is not fmt else "put"
    problem = storage_write_problem(ctx, view_fmt, what)
    if problem:
        raise UnsupportedError(problem)
    qualifier = view_fmt.qualifier or ""
    res = ImageBinding(img, level.mip, level.layer, STORAGE, view_fmt.vk_format)
    return Pixels(level, f"{layout}:{qualifier}", res, h, w, fmt.channels)


def new_like(ctx, src: Pixels, what: str):
    """An output operand like ``src``: a tensor of its shape and dtype, or a
    guest image of its format and extent."""
    if src.is_image:
        img = src.value.image
        fmt = img.format
        if fmt.kind == "depth":
            fmt = formats.FORMATS["r32f"]
        made = ctx.image((src.w, src.h), fmt.name)
        out = write_pixels(ctx, made, what)
        out.value = made            # the op returns the new Image itself
        return out
    t = src.value
    return tensor_pixels(ctx, ctx.empty(t.shape, t.dtype), what)


def groups(ctx, p: Pixels, rows: bool = False) -> tuple:
    """Workgroups covering ``p``: TILE threads of one pixel each, or with
    ``rows`` ROW_TILE threads of ROWS pixels each (kernels using ROWS_MAIN)."""
    return extent_groups(ctx, p.w, p.h, rows)


def extent_groups(ctx, w: int, h: int, rows: bool = False) -> tuple:
    """:func:`groups` for a ``w`` x ``h`` pixel grid."""
    tile_x, tile_y = (ROW_TILE[0], ROW_TILE[1] * ROWS) if rows else TILE[:2]
    gx, gy = -(-w // tile_x), -(-h // tile_y)
    mx = ctx.limits.max_workgroup_count
    if gx > mx[0] or gy > mx[1]:
        raise UnsupportedError(f"a {h}x{w} image needs {gx}x{gy} workgroups, more than the "
                               f"device's maxComputeWorkGroupCount {mx[:2]}")
    return (gx, gy, 1)


def operand_push(name: str) -> tuple:
    """Push fields addressing a tensor operand (unused by image layouts)."""
    return (Push(f"{name}_off", "uint"), Push(f"{name}_sy", "int"), Push(f"{name}_sx", "int"),
            Push(f"{name}_sc", "int"))


