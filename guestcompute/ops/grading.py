"""Colour grading: ``rec.colour_matrix`` — every pixel's RGBA times a 4x4
matrix plus an offset (saturation, channel mixing, white balance, colour
space conversion), on images or float32 pixel tensors."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..kernels.catalogue import variants
from ..kernels.spec import KernelSpec, Push, family
from . import pixels as px
from .base import Dispatch, OpResult, op
from .filters import IMAGE_READS, IMAGE_WRITES, image_spec, pixels_out

_FLOATS = ("rgba32f", "rgba32f_s", "r32f")


@family("colour_matrix")
def _render_colour_matrix(spec: KernelSpec) -> str:
    return f"""{px.loader("src", spec.param("src"))}
{px.storer("dst", spec.param("dst"))}
void pixel(int x, int y) {{
  store_dst(y, x, mat4(pc.m[0], pc.m[1], pc.m[2], pc.m[3]) * load_src(y, x) + pc.offset);
}}
{px.ROWS_MAIN}"""


def colour_matrix_spec(src: str, dst: str) -> KernelSpec:
    push = (Push("m", "vec4", 4), Push("offset", "vec4"), Push("H", "uint"), Push("W", "uint")) \
        + px.operand_push("src") + px.operand_push("dst")
    return image_spec("colour_matrix", src, dst, (), push, (), px.ROW_TILE)


@op("colour_matrix", windows=None)
def colour_matrix(ctx, img, matrix, out=None, *, offset=(0.0, 0.0, 0.0, 0.0)):
    """``out = matrix @ rgba + offset`` per pixel of ``img`` (an image or a
    float32 pixel tensor). ``matrix``: 4x4, or 3x3 for RGB (alpha passes
    through); ``offset``: 4 (or 3) numbers. ``out`` defaults to a new image
    (tensor) like ``img`` and may be ``img`` itself."""
    try:
        m = np.asarray(matrix, dtype=np.float64)
        off = np.asarray(offset, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError("colour_matrix matrix and offset must be numbers") from None
    if m.shape == (3, 3):
        m = np.block([[m, np.zeros((3, 1))], [np.zeros((1, 3)), np.ones((1, 1))]])
    if m.shape != (4, 4):
        raise ShapeError(f"colour_matrix matrix must be 4x4 (or 3x3 for RGB), got {m.shape}")
    if off.shape == (3,):
        off = np.append(off, 0.0)
    if off.shape != (4,):
        raise ShapeError(f"colour_matrix offset must have 4 (or 3) values, got {off.shape}")
    # The shader computes in float32: a value past its range would be inf
    # there (numpy's float32 cast gives inf too), so it is refused here.
    with np.errstate(over="ignore"):
        finite32 = np.all(np.isfinite(m.astype(np.float32))) and np.all(np.isfinite(off.astype(np.float32)))
    if not finite32:
        raise InvalidArgumentError("colour_matrix matrix and offset must be finite in float32 "
                                   f"(|v| <= {float(np.finfo(np.float32).max):.4g})")
    src = px.read_pixels(ctx, img, "colour_matrix img")
    if src.kind[0] in "up":
        raise DTypeError("colour_matrix works on images and float32 tensors")
    dst = pixels_out(ctx, out, src, "colour_matrix out")
    spec = colour_matrix_spec(src.layout, dst.layout)
    # GLSL matrices are column-major: column j is m[:, j].
    columns = [tuple(float(v) for v in m[:, j]) for j in range(4)]
    values = {"m": columns, "offset": tuple(float(v) for v in off), "H": src.h, "W": src.w,
              **src.push("src"), **dst.push("dst")}
    return OpResult(dst.value, [Dispatch(spec, (src.resource, dst.resource), spec.pack(values),
                                         px.groups(ctx, dst, rows=True))])


@variants("colour_matrix")
def _colour_matrix_variants():
    for read in IMAGE_READS + _FLOATS:
        for write in IMAGE_WRITES + _FLOATS:
            yield colour_matrix_spec(read, write)
