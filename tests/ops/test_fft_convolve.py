"""rec.fft_convolve against numpy's irfft2(rfft2(x) * spectrum): fused
(power-of-two columns) and unfused (other lengths, Bluestein among them),
a spectrum broadcast over channels or one per image, in place, and the
typed errors raised before anything is recorded."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops.base import registered_ops
from refusals import assert_refused
from strided_views import draw_view, shapes

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


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), batch=shapes(0, 2, 3), h=st.sampled_from([1, 2, 5, 8, 12, 16, 17, 32]),
       w=st.sampled_from([1, 2, 3, 8, 9, 16, 31, 64]), per_image=st.booleans())
def test_any_view_and_axis_pair_matches_numpy(host, ctx, data, batch, h, w, per_image):
    """x a view (steps, reversal, permuted axes, offsets) with the two
    transformed axes anywhere in it; the spectrum one for all, or one per
    batch entry laid out as x's other axes are."""
    shape = list(batch)
    ax0 = data.draw(st.integers(0, len(shape)))
    shape.insert(ax0, h)
    ax1 = data.draw(st.integers(0, len(shape)))
    shape.insert(ax1, w)
    ax0 += ax1 <= ax0                      # the h axis moved right if w went before it
    axes = (ax0, ax1)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, tuple(shape), lambda s: rng.standard_normal(s).astype(np.float32))
    rest = [n if per_image else 1 for i, n in enumerate(shape) if i not in axes]
    kernel = rng.standard_normal(rest + [h, w])
    spectrum = np.fft.rfft2(kernel).astype(np.complex64)
    # x's layout: its other axes in order, (h, w // 2 + 1) where x has (h, w)
    spectrum_view = np.moveaxis(spectrum, (-2, -1), axes)
    st_ = ctx.tensor(np.ascontiguousarray(spectrum_view))
    got = host.run(ctx, lambda rec: rec.fft_convolve(x, st_, axes=axes)).numpy()
    ref = reference(x_np, spectrum_view.astype(np.complex128), axes)
    scale = max(np.sqrt(np.mean(ref ** 2)), 1e-30)
    bound = 1e-6 * max(np.log2(h * w), 1.0)
    assert np.sqrt(np.mean((got - ref) ** 2)) / scale <= bound
    assert np.abs(got - ref).max() / scale <= 10 * bound
