"""``rec.fft_convolve``: circular 2-D convolution through the FFT with a
kernel spectrum the caller keeps, as convolution bloom caches its kernel's.

``fft_convolve(x, spectrum, axes)`` is ``irfft2(rfft2(x, axes=axes) *
spectrum, s=..., axes=axes)``: the real rows transformed along the last
axis into a half-spectrum, then along the first axis each column is
transformed, multiplied by the kernel spectrum and transformed back in one
pass (the fixed-length kernel's convolution variant: the column never
leaves the workgroup between the three steps), then the half-spectrum rows
transformed back to real values. Three passes over memory instead of five.
Where the column length has no fixed-length kernel the middle pass is
three: transform, product, inverse.

The spectrum is ``rec.rfft2`` of the kernel at the image's size (its origin
at pixel (0, 0), wrapping around): computed once and reused every frame.
"""
from __future__ import annotations

from ..dtypes import complex64, float16, float32
from ..errors import DTypeError, ShapeError
from .base import OpResult, broadcast_shapes, broadcast_strides, check_out, check_tensor, normalize_axis, op
from . import fft, fft_images
from .fft_images import LAST_TWO
from .fft_product import plan_product


def _checked(ctx, x, spectrum, axes, out, what: str):
    """(image, spectrum, (column axis, row axis), half-spectrum shape),
    every argument checked; an image ``x`` as ops/fft_images.ImageRows.
    With an image ``x`` or ``out`` the default axes are the spatial ones
    (a float16 or float32 tensor into an image too, as irfft2's)."""
    if fft_images.is_image(x):
        t = fft_images.image_rows(ctx, x, what)
    else:
        t = fft.checked_input(ctx, x, what, fft.REAL)
    if fft_images.is_image(x) or fft_images.is_image(out):
        axes = fft_images.image_axes(t.ndim, None, axes, what)
    k = check_tensor(ctx, spectrum, f"{what} spectrum")
    if k.dtype != complex64:
        raise DTypeError(f"{what}: the spectrum must be complex64 (rec.rfft2 of the kernel), got {k.dtype}")
    if not isinstance(axes, (tuple, list)) or len(axes) != 2:
        raise ShapeError(f"{what}: axes must name two axes, got {axes!r}")
    a0, a1 = (normalize_axis(a, t.ndim, what) for a in axes)
    if a0 == a1:
        raise ShapeError(f"{what}: axes must be two different axes, got {axes!r}")
    half = list(t.shape)
    half[a1] = t.shape[a1] // 2 + 1
    half = tuple(half)
    if k.ndim > len(half) or _broadcast(k.shape, half) != half:
        raise ShapeError(f"{what}: the spectrum's shape {k.shape} does not broadcast to the image's "
                         f"half-spectrum shape {half} (rfft2 of the kernel at the image's size)")
    return t, k, (a0, a1), half


def _broadcast(shape: tuple, to: tuple):
    try:
        return broadcast_shapes(shape, to)
    except ShapeError:
        return None


@op("fft_convolve", windows=None)
def fft_convolve(ctx, x, spectrum, axes=LAST_TWO, out=None):
    """``x`` (float32 or float16) circularly convolved over ``axes`` with
    the kernel whose ``rec.rfft2`` (at ``x``'s size over the same axes) is
    ``spectrum`` (complex64, broadcast over ``x``'s other axes): numpy's
    ``irfft2(rfft2(x, axes=axes) * spectrum, s, axes=axes)``, computed in
    float32. The result has ``x``'s shape: a new float32 tensor, or
    ``out=`` of float32 or float16 (``x`` itself works). ``x`` may be an
    image and ``out`` an image (ops/fft_images.py): an image's channels are
    batches, its spatial axes the default (``axes=(-2, -1)`` means them,
    given or not); an image ``x`` with a float16
    ``out``, or a float16 ``x`` with an image ``out``, work as well."""
    what = "fft_convolve"
    t, k, (a0, a1), half = _checked(ctx, x, spectrum, axes, out, what)
    height, width = t.shape[a0], t.shape[a1]
    row_method, column_method = fft.pass_method(ctx, width, what), fft.pass_method(ctx, height, what)
    target = fft_images.ImageOut(ctx, out, t.shape, what) if fft_images.is_image(out) else None
    if target is not None:
        result = target.tensor
    else:
        result = ctx.empty(t.shape, float32) if out is None else \
            check_out(ctx, out, t.shape, (float32, float16), {"the input": t, "the spectrum": k}, f"{what} out")
    if isinstance(t, fft_images.ImageRows):
        t, dispatches = fft_images.readable(ctx, t, a1, width, what)
    else:
        dispatches = []
    if t.size == 0:
        return OpResult(result, [])
    spectra = ctx.empty(half, complex64)
    scale = 1.0 / (height * width)
    forward = fft.Pass(a1, width, "auto", "complex", -1, half[a1])
    dispatches += fft.plan_pass(ctx, t, spectra, forward, row_method, 1.0)
    if column_method[0] == "direct" and fft.fuses(ctx, spectra, a0, height):
        dispatches += fft.plan_rows(ctx, spectra, spectra, a0, height, "complex", "complex", -1, height, height,
                                    scale, column_method, spectrum=(k, broadcast_strides(k, half)))
    else:
        dispatches += fft.plan_pass(ctx, spectra, spectra, fft.Pass(a0, height, "auto", "complex", -1, height),
                                    column_method, 1.0)
        dispatches.append(plan_product(ctx, spectra, k, spectra))
        dispatches += fft.plan_pass(ctx, spectra, spectra, fft.Pass(a0, height, "auto", "complex", 1, height),
                                    column_method, scale)
    inverse = fft.Pass(a1, width, "hermitian", "real", 1, width)
    dispatches += fft.plan_pass(ctx, spectra, result, inverse, row_method, 1.0)
    if target is not None:
        return target.finish(OpResult(result, dispatches))
    return OpResult(result, dispatches)
