"""rec.fft_convolve against numpy's irfft2(rfft2(x) * spectrum): fused
(power-of-two columns) and unfused (other lengths, Bluestein among them),
a spectrum broadcast over channels or one per image, in place, and the
typed errors raised before anything is recorded."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops.base import registered_ops
from refusals import assert_refused

CASES = [
    ((3, 64, 128), (-2, -1), "one"),        # fused, the spectrum broadcast over the leading axis
    ((32, 16, 3), (0, 1), "channels"),      # fused, an image's channels: columns of neighbouring values
    ((2, 256, 512), (-2, -1), "each"),      # fused, a spectrum per image
    ((24, 40), (-2, -1), "one"),            # columns of 24: transform, product, inverse
    ((17, 64), (0, 1), "one"),              # columns of 17 through Bluestein's algorithm
]


def reference(x, spectrum, axes):
    h, w = x.shape[axes[0]], x.shape[axes[1]]
    return np.fft.irfft2(np.fft.rfft2(x.astype(np.float64), axes=axes) * spectrum, s=(h, w), axes=axes)


@pytest.mark.parametrize("shape,axes,kind", CASES)
def test_matches_numpy(modern_host, modern_ctx, shape, axes, kind):
    rng = np.random.default_rng(len(shape) + shape[0])
    x = rng.standard_normal(shape).astype(np.float32)
    h, w = x.shape[axes[0]], x.shape[axes[1]]
    spectrum = np.fft.rfft2(rng.standard_normal((shape[0], h, w) if kind == "each" else (h, w)))
    if kind == "channels":
        spectrum = spectrum[:, :, None]
    xt, kt = modern_ctx.tensor(x), modern_ctx.tensor(spectrum.astype(np.complex64))
    new, inplace = modern_host.run(modern_ctx, lambda rec: (rec.fft_convolve(xt, kt, axes=axes),
                                                            rec.fft_convolve(xt, kt, axes=axes, out=xt)))
    ref = reference(x, spectrum.astype(np.complex64).astype(np.complex128), axes)
    scale = np.sqrt(np.mean(ref ** 2))
    bound = 1e-6 * np.log2(h * w)
    for got in (new.numpy(), inplace.numpy()):
        assert np.sqrt(np.mean((got - ref) ** 2)) / scale <= bound
        assert np.abs(got - ref).max() / scale <= 10 * bound


def test_a_kernel_spectrum_made_by_rfft2_convolves_like_numpy(modern_host, modern_ctx):
    rng = np.random.default_rng(3)
    image, kernel = rng.standard_normal((2, 32, 64)).astype(np.float32)
    it, kt = modern_ctx.tensor(image), modern_ctx.tensor(kernel)
    spectrum = modern_host.run(modern_ctx, lambda rec: rec.rfft2(kt))
    got = modern_host.run(modern_ctx, lambda rec: rec.fft_convolve(it, spectrum)).numpy()
    ref = np.real(np.fft.ifft2(np.fft.fft2(image.astype(np.float64)) * np.fft.fft2(kernel.astype(np.float64))))
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_typed_errors_before_anything_is_recorded(modern_host, modern_ctx):
    x = modern_ctx.tensor(np.zeros((16, 32), np.float32))
    good = modern_ctx.tensor(np.zeros((16, 17), np.complex64))
    cases = [
        (gc.DTypeError, lambda rec: rec.fft_convolve(good, good), "float32"),
        (gc.DTypeError, lambda rec: rec.fft_convolve(x, x), "complex64"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(x, modern_ctx.tensor(np.zeros((16, 32), np.complex64))),
         "half-spectrum"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(x, good, axes=(0, 0)), "different"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(x, good, axes=(1,)), "two axes"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(x, good, axes=(0, 2)), "out of range"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(x, good, out=modern_ctx.empty((16, 17), "float32")), None),
    ]
    for error, fn, match in cases:
        assert_refused(modern_host, modern_ctx, error, fn, match)


def test_planned_kernels_are_in_the_bake_catalogue(modern_ctx):
    """Every pipeline the FFTs and the convolution plan is baked: fixed-length
    and generic rows, Bluestein, the four-step paths and the unfused product."""
    ctx, ops, catalogue = modern_ctx, registered_ops(), set(all_specs())
    real = ctx.tensor(np.ones((24, 40), np.float32))
    cplx = ctx.tensor(np.ones((6, 40), np.complex64))
    calls = [("fft_convolve", (real, ctx.tensor(np.ones((24, 21), np.complex64)))),
             ("fft_convolve", (ctx.tensor(np.ones((32, 64), np.float32)), ctx.tensor(np.ones((32, 33), np.complex64)))),
             ("fft2", (cplx,)), ("rfft2", (real,)), ("irfft2", (cplx,)), ("fft", (cplx, 17)), ("fft", (cplx, 8192)),
             ("fft", (cplx, 4099)), ("rfft", (real, 8192)), ("irfft", (cplx, 8192))]
    planned = [d for name, args in calls for d in ops[name](ctx, *args).dispatches]
    missing = {d.spec.family + str(d.spec.params)[:120] for d in planned if d.spec not in catalogue}
    assert not missing
