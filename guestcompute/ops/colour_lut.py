"""3-D LUT colour grading: ``rec.colour_lut`` — every pixel's RGB looked up
in an N x N x N table of colours (a .cube grade, a film emulation, a baked
chain of colour corrections), trilinearly interpolated, on images or
float32 pixel tensors.

The table is a guest float32 tensor read as a storage buffer, addressed
through its strides, so any view (a slice of a bigger tensor, a permuted
one) works as it is; it is bound beside the two pixel operands like
``tonemap``'s exposure tensor.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.spec import READ, Binding, KernelSpec, Push, family
from . import pixels as px
from .base import Dispatch, OpResult, check_tensor, op, overlaps
from .filters import IMAGE_READS, IMAGE_WRITES, image_spec, pixels_out

_FLOATS = ("rgba32f", "rgba32f_s", "r32f")


@family("colour_lut")
def _render_colour_lut(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
vec3 lut_at(int b, int g, int r) {{
  int i = int(pc.lut_off) + b * pc.lut_sb + g * pc.lut_sg + r * pc.lut_sr;
  return vec3(lut[i], lut[i + pc.lut_sc], lut[i + 2 * pc.lut_sc]);
}}
void pixel(int x, int y) {{
  vec4 v = load_src(y, x);
  vec3 p = clamp(v.rgb, 0.0, 1.0) * float(pc.n - 1u);
  // The cell's low corner stops at n - 2 (weight 1 on the top entry at 1.0);
  // clamping the integer keeps every read inside the table whatever p is.
  ivec3 i0 = clamp(ivec3(p), ivec3(0), ivec3(int(pc.n) - 2));
  ivec3 i1 = i0 + 1;
  vec3 f = p - vec3(i0);
  vec3 c00 = mix(lut_at(i0.b, i0.g, i0.r), lut_at(i0.b, i0.g, i1.r), f.r);
  vec3 c01 = mix(lut_at(i0.b, i1.g, i0.r), lut_at(i0.b, i1.g, i1.r), f.r);
  vec3 c10 = mix(lut_at(i1.b, i0.g, i0.r), lut_at(i1.b, i0.g, i1.r), f.r);
  vec3 c11 = mix(lut_at(i1.b, i1.g, i0.r), lut_at(i1.b, i1.g, i1.r), f.r);
  vec3 graded = mix(mix(c00, c01, f.g), mix(c10, c11, f.g), f.b);
  // The ends are exact: strength 1 gives the table's colour even for an
  // infinite input, strength 0 the input itself.
  vec3 c = pc.strength == 1.0 ? graded : pc.strength == 0.0 ? v.rgb : v.rgb + pc.strength * (graded - v.rgb);
  store_dst(y, x, vec4(c, v.a));
}}
{px.ROWS_MAIN}"""


def colour_lut_spec(src: str, dst: str) -> KernelSpec:
    push = (Push("H", "uint"), Push("W", "uint"), Push("n", "uint"), Push("strength", "float"),
            Push("lut_off", "uint"), Push("lut_sb", "int"), Push("lut_sg", "int"), Push("lut_sr", "int"),
            Push("lut_sc", "int")) + px.operand_push("src") + px.operand_push("dst")
    return image_spec("colour_lut", src, dst, (Binding("lut", "float", READ),), push, (), px.ROW_TILE)


def _lut(ctx, lut):
    """``lut`` checked: a float32 (N, N, N, 3 or 4) tensor of this context, N >= 2."""
    t = check_tensor(ctx, lut, "colour_lut lut")
    if t.dtype != float32:
        raise DTypeError(f"colour_lut lut must be float32, got {t.dtype}")
    if t.ndim != 4 or t.shape[3] not in (3, 4):
        raise ShapeError(f"colour_lut lut must have shape (N, N, N, 3) or (N, N, N, 4), got {t.shape}")
    n = t.shape[0]
    if t.shape[1] != n or t.shape[2] != n:
        raise ShapeError(f"colour_lut lut must be a cube (N, N, N, channels), got {t.shape}")
    if n < 2:
        raise ShapeError(f"colour_lut lut needs N >= 2 entries per axis to interpolate, got N = {n}")
    return t


def _strength(strength) -> float:
    if isinstance(strength, bool) or not isinstance(strength, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"colour_lut strength must be a number in [0, 1], got {strength!r}")
    s = float(strength)
    if not (math.isfinite(s) and 0.0 <= s <= 1.0):
        raise InvalidArgumentError(f"colour_lut strength must be a finite number in [0, 1], got {s}")
    return s


@op("colour_lut", windows=None)
def colour_lut(ctx, img, lut, out=None, *, strength=1.0):
    """Grade ``img`` (an image or a float32 pixel tensor) through the 3-D
    colour table ``lut``: a float32 tensor of shape (N, N, N, 3) or
    (N, N, N, 4), N >= 2, indexed ``lut[b, g, r]`` (red varies fastest, the
    order of .cube files; a fourth channel is ignored). Any view works: the
    table is read through its strides.

    Per pixel, r, g and b are clamped to [0, 1], scaled by N - 1, and the
    table is interpolated trilinearly between the 8 entries around that
    point; ``out.rgb = rgb + strength * (graded - rgb)`` with ``rgb`` the
    unclamped input, ``strength`` in [0, 1] (0 gives the input, 1 the
    table's colour). Alpha passes through; channels an operand lacks read
    as 0. ``out`` defaults to a new image (tensor) like ``img``, may be
    ``img`` itself, and must not overlap ``lut``."""
    s = _strength(strength)
    table = _lut(ctx, lut)
    src = px.read_pixels(ctx, img, "colour_lut img")
    if src.kind[0] in "up":
        raise DTypeError("colour_lut works on images and float32 tensors")
    if out is not None:
        o = px.write_pixels(ctx, out, "colour_lut out")
        if not o.is_image and overlaps(o.value, table):
            raise InvalidArgumentError("colour_lut out overlaps lut (every pixel reads the whole table)")
    dst = pixels_out(ctx, out, src, "colour_lut out")
    if src.h == 0 or src.w == 0:
        return OpResult(dst.value, [])
    spec = colour_lut_spec(src.layout, dst.layout)
    sb, sg, sr, sc = table.strides
    values = {"H": src.h, "W": src.w, "n": table.shape[0], "strength": s, "lut_off": table.offset,
              "lut_sb": sb, "lut_sg": sg, "lut_sr": sr, "lut_sc": sc, **src.push("src"), **dst.push("dst")}
    return OpResult(dst.value, [Dispatch(spec, (src.resource, dst.resource, table.buffer), spec.pack(values),
                                         px.groups(ctx, dst, rows=True))])


@variants("colour_lut")
def _colour_lut_variants():
    for read in IMAGE_READS + _FLOATS:
        for write in IMAGE_WRITES + _FLOATS:
            yield colour_lut_spec(read, write)
