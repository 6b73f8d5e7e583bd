"""Fourier transforms on images: the forward n-dimensional transforms
(``fft2 ifft2 rfft2 fftn ifftn rfftn``) and ``fft_convolve`` read an
image, the inverse real ones (``irfft2 irfftn``) and ``fft_convolve``
write one, so a post-process works on the host's images with no copy of
its own.

An image (an Image, its mip 0 of layer 0, or ``img.level(mip, layer)``)
stands for the float32 array ``rec.copy(img)`` gives: (H, W, C) — (H, W)
for one channel — of the values a shader sees (floats as they are, UNORM
as 0..1, sRGB decoded to linear, BGRA as RGBA). Each channel is a batch:
the transform runs over the spatial axes, by default both. ``axes`` equal
to ``(-2, -1)`` — the 2-D ops' default, passed or left out alike — means
the two spatial axes (0, 1) of an image; any other ``axes`` are positions
in the (H, W, C) pixel array, and naming its channel axis (2, or -1 alone,
on a multi-channel image) is refused with ShapeError.

Reading: the transform's first pass reads the texels itself — the row
kernels' image load (ops/fft_kernels.py ``texel``): ``texelFetch`` where
the image has SAMPLED usage, else ``imageLoad`` through a storage view —
for rgba16f, rgba32f and r32f images whose first pass fits a workgroup
(rows up to 4,096 points with 32 KB of shared memory). Other formats, and
longer rows (the four-step FFT reads strided views of a tensor), are first
copied once into a float32 tensor (``rec.copy``) and transformed from it.

Writing: a row kernel's invocation holds one channel of a pixel while an
image store writes whole texels, so the result goes into a float32 tensor
of the image's pixels and one ``rec.copy`` moves it into the image (which
needs STORAGE usage). Its shape must be the image's pixels' exactly.
"""
from __future__ import annotations

from ..dtypes import float32
from ..errors import ShapeError
from ..image import Image, ImageLevel
from ..kernels.catalogue import variants
from ..vk import formats
from . import fft_fixed, fft_kernels as fk
from . import pixels as px
from .base import OpResult, normalize_axis
from .image_copy import copy_pixels

LAST_TWO = (-2, -1)         # the 2-D ops' default axes: for an image (equal in value), its two spatial axes
DIRECT_FORMATS = ("rgba16f", "rgba32f", "r32f")
# The row kernels' image loads: sampled, or storage views of each direct format.
IMAGE_LOADS = ("tex",) + tuple(f"img:{formats.FORMATS[f].qualifier}" for f in DIRECT_FORMATS)


def is_image(x) -> bool:
    return isinstance(x, (Image, ImageLevel))


def pixel_shape(level: ImageLevel) -> tuple:
    """The shape of ``level``'s pixels as an array: (H, W) or (H, W, C)."""
    w, h = level.extent
    c = level.image.format.channels
    return (h, w) if c == 1 else (h, w, c)


class ImageRows:
    """An image level's pixels as the row kernels see them: a float32 array
    of :func:`pixel_shape` whose element (y, x, c) has index
    (y * W + x) * C + c, read through ``image_binding`` (an ImageBinding,
    no tensor's buffer) by the image load ``load``. ``pixels`` is the
    checked read operand (pixels.read_pixels); ``load`` is None until
    :func:`readable` chooses the direct read, and a pass must not read the
    rows before (fft.row_kind asserts it)."""

    def __init__(self, pixels, direct: bool = False):
        level = pixels.value                 # read_pixels of an ImageLevel: the level itself
        self.level, self.pixels = level, pixels
        self.load = pixels.layout if direct else None
        self.image_binding = pixels.resource
        self.shape = pixel_shape(level)
        w, c = level.extent[0], level.image.format.channels
        self.strides = (w * c, c, 1)[:len(self.shape)]
        self.offset = 0
        self.dtype = float32
        self.push = {"tex_w": w, "tex_c": c}

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1] * (self.shape[2] if self.ndim == 3 else 1)


def image_rows(ctx, x, what: str) -> ImageRows:
    """``x`` (an Image or image level) to transform; readable, or a typed error."""
    level = px.as_level(ctx, x, f"{what} input")
    return ImageRows(px.read_pixels(ctx, level, f"{what} input"))    # integer formats, missing usage: refused here


def image_axes(ndim: int, s, axes, what: str):
    """The axes a transform of an image's pixels (``ndim`` axes: (H, W) or
    (H, W, C)) runs over: both spatial ones for ``axes`` None or equal to
    :data:`LAST_TWO` (with ``s`` alone and ``axes`` None: the last len(s)
    of them); other axes index the pixel array and must not name the
    channel axis."""
    if axes is None or (isinstance(axes, (tuple, list)) and tuple(axes) == LAST_TWO):
        if axes is None and isinstance(s, (tuple, list)):
            if len(s) > 2:
                raise ShapeError(f"{what}: s has {len(s)} lengths, an image has two spatial axes")
            return (0, 1)[2 - len(s):]
        return (0, 1)
    named = axes if isinstance(axes, (tuple, list)) else (axes,)
    if ndim == 3 and any(normalize_axis(a, 3, what) == 2 for a in named):
        raise ShapeError(f"{what}: axes {axes!r} name the channel axis of an image's (H, W, C) pixels; "
                         "each channel is a batch: transform the spatial axes (0, 1), the default")
    return axes


def readable(ctx, rows: ImageRows, axis: int, n: int, what: str) -> tuple:
    """(source, dispatches): what the first pass (along ``axis``, length
    ``n``) reads — ``rows`` bound for a direct read where the format and
    the row allow, else a float32 tensor of the pixels and the copy that
    fills it."""
    level = rows.level
    if level.image.format.name in DIRECT_FORMATS and fk.workgroup_method(ctx, n) is not None:
        return ImageRows(rows.pixels, direct=True), []
    copied = copy_pixels(ctx, level)
    return copied.value, list(copied.dispatches)


class ImageOut:
    """An image ``out=`` of an inverse transform: the float32 ``tensor`` the
    transform writes and :meth:`finish`, which copies it into the image."""

    def __init__(self, ctx, out, shape: tuple, what: str):
        self.ctx = ctx
        self.level = px.as_level(ctx, out, f"{what} out")
        px.write_pixels(ctx, self.level, f"{what} out")    # STORAGE usage, a writable format
        self.value = out
        want = pixel_shape(self.level)
        if tuple(shape) != want:
            raise ShapeError(f"{what} out: the image's pixels have shape {want}, the result has shape "
                             f"{tuple(shape)}; pass an image of the result's size and channels, or none")
        self.tensor = ctx.empty(want, float32)

    def finish(self, result: OpResult) -> OpResult:
        copied = copy_pixels(self.ctx, self.tensor, out=self.level)
        return OpResult(self.value, list(result.dispatches) + list(copied.dispatches))


# -- the bake catalogue ------------------------------------------------------------

@variants("fft_fixed")
def _fixed_image_variants():
    for n in fft_fixed.LENGTHS:
        for load in IMAGE_LOADS:
            for columns in (False, True):
                yield fft_fixed.fixed_spec(n, load, "complex", columns)
            if n in fft_fixed.NARROW_LENGTHS:
                yield fft_fixed.fixed_spec(n, load, "complex", True, form="narrow")


@variants("fft_rows")
def _rows_image_variants():
    for load in IMAGE_LOADS:
        for bluestein in (False, True):
            for size, threads in fk.SIZES:
                yield fk.fft_spec(load, "complex", bluestein, size, threads)
