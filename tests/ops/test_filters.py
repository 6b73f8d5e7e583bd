"""Image ops (gaussian_blur, conv2d, histogram) against numpy references, on both host profiles."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from image_refs import ref_blur, ref_correlate

HYP = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def to8(v: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(v + 0.5), 0, 255).astype(np.uint8)


def pack(rgba8: np.ndarray) -> np.ndarray:
    return rgba8.astype(np.uint32) @ np.array([1, 1 << 8, 1 << 16, 1 << 24], np.uint32)


def unpack(words: np.ndarray) -> np.ndarray:
    return ((words[..., None] >> np.array([0, 8, 16, 24], np.uint32)) & 0xFF).astype(np.uint8)


def assert_8bit_close(got: np.ndarray, ref_float: np.ndarray):
    """8-bit results: float32 vs float64 may flip a value sitting on a rounding
    edge by one, never more, and only rarely."""
    diff = np.abs(got.astype(np.int32) - to8(ref_float).astype(np.int32))
    assert diff.max() <= 1
    assert np.mean(diff) < 0.01


# -- gaussian blur -------------------------------------------------------------------

@pytest.mark.parametrize("shape,sigma", [((1, 1, 4), 1.0), ((17, 33, 4), 1.5), ((40, 9, 4), 3.2),
                                         ((25, 30), 2.0), ((12, 13, 4), 0.0)])
def test_blur_float(host, ctx, shape, sigma):
    rng = np.random.default_rng(0)
    img_np = rng.random(shape, dtype=np.float32)
    img = ctx.tensor(img_np)
    out = host.run(ctx, lambda rec: rec.gaussian_blur(img, sigma))
    radius = math.ceil(3 * sigma)
    np.testing.assert_allclose(out.numpy(), ref_blur(img_np, sigma, radius), rtol=1e-5, atol=1e-6)


def test_blur_radius_larger_than_image_and_explicit_radius(host, ctx):
    rng = np.random.default_rng(1)
    img_np = rng.random((6, 5, 4), dtype=np.float32)
    img = ctx.tensor(img_np)
    a, b = host.run(ctx, lambda rec: (rec.gaussian_blur(img, 4.0), rec.gaussian_blur(img, 2.0, radius=2)))
    np.testing.assert_allclose(a.numpy(), ref_blur(img_np, 4.0, 12), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), ref_blur(img_np, 2.0, 2), rtol=1e-5, atol=1e-6)


def test_blur_packed_rgba8(host, ctx):
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (21, 34, 4)).astype(np.uint8)
    img = ctx.tensor(pack(rgba))
    out = host.run(ctx, lambda rec: rec.gaussian_blur(img, 1.3))
    assert out.dtype == gc.uint32 and out.shape == (21, 34)
    assert_8bit_close(unpack(out.numpy()), ref_blur(rgba, 1.3, 4))


def test_blur_uint8_needs_8bit_storage(host, ctx):
    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, (19, 23, 4)).astype(np.uint8)
    if not ctx.caps.uint8_storage:
        with pytest.raises(gc.UnsupportedError):
            ctx.tensor(rgba)
        return
    img = ctx.tensor(rgba)
    gray = ctx.tensor(rgba[..., 1].copy())
    out, out_gray = host.run(ctx, lambda rec: (rec.gaussian_blur(img, 2.0), rec.gaussian_blur(gray, 1.0)))
    assert out.dtype == gc.uint8
    assert_8bit_close(out.numpy(), ref_blur(rgba, 2.0, 6))
    assert_8bit_close(out_gray.numpy(), ref_blur(rgba[..., 1], 1.0, 3))


def test_blur_strided_views_and_in_place(host, ctx):
    rng = np.random.default_rng(4)
    big_np = rng.random((30, 40, 4), dtype=np.float32)
    big = ctx.tensor(big_np)
    crop = big[3:20, 5:37:2]                        # vec4 loads (pixel-aligned view)
    chan = big[2:12, 1:9, ::-1]                     # reversed channels: scalar loads
    out_a, out_b = host.run(ctx, lambda rec: (rec.gaussian_blur(crop, 1.0), rec.gaussian_blur(chan, 1.0)))
    np.testing.assert_allclose(out_a.numpy(), ref_blur(big_np[3:20, 5:37:2], 1.0, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out_b.numpy(), ref_blur(big_np[2:12, 1:9, ::-1], 1.0, 3), rtol=1e-5, atol=1e-6)
    img_np = rng.random((14, 11, 4), dtype=np.float32)
    img = ctx.tensor(img_np)
    host.run(ctx, lambda rec: rec.gaussian_blur(img, 1.5, out=img))
    np.testing.assert_allclose(img.numpy(), ref_blur(img_np, 1.5, 5), rtol=1e-5, atol=1e-6)


# -- conv2d ------------------------------------------------------------------------

@pytest.mark.parametrize("kshape", [(1, 1), (3, 3), (5, 5), (7, 7), (2, 4), (7, 1)])
def test_conv2d_float_kernel_sizes(host, ctx, kshape):
    rng = np.random.default_rng(sum(kshape))
    img_np = rng.standard_normal((23, 18, 4)).astype(np.float32)
    k_np = rng.standard_normal(kshape).astype(np.float32)
    img = ctx.tensor(img_np)
    out = host.run(ctx, lambda rec: rec.conv2d(img, k_np))
    np.testing.assert_allclose(out.numpy(), ref_correlate(img_np, k_np), rtol=1e-5, atol=1e-5)


def test_conv2d_kernel_tensor_and_one_channel(host, ctx):
    rng = np.random.default_rng(8)
    img_np = rng.standard_normal((16, 21)).astype(np.float32)
    kbig_np = rng.standard_normal((6, 8)).astype(np.float32)
    kbig = ctx.tensor(kbig_np)
    k_view, k_ref = kbig[1:6:2, ::-3], kbig_np[1:6:2, ::-3]    # a strided 3x3 view
    img = ctx.tensor(img_np)
    out = host.run(ctx, lambda rec: rec.conv2d(img, k_view))
    np.testing.assert_allclose(out.numpy(), ref_correlate(img_np, k_ref), rtol=1e-5, atol=1e-5)


def test_conv2d_packed_and_uint8(host, ctx):
    rng = np.random.default_rng(9)
    rgba = rng.integers(0, 256, (13, 27, 4)).astype(np.uint8)
    sharpen = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32)   # clamps at 0 and 255
    box = np.full((3, 3), 1 / 9, np.float32)
    img = ctx.tensor(pack(rgba))
    a, b = host.run(ctx, lambda rec: (rec.conv2d(img, sharpen), rec.conv2d(img, box)))
    np.testing.assert_array_equal(unpack(a.numpy()), to8(ref_correlate(rgba, sharpen)))
    assert_8bit_close(unpack(b.numpy()), ref_correlate(rgba, box))
    if ctx.caps.uint8_storage:
        img8 = ctx.tensor(rgba)
        out8 = ctx.tensor(np.zeros((13, 27, 4), np.uint8))
        host.run(ctx, lambda rec: rec.conv2d(img8, box, out=out8))
        assert_8bit_close(out8.numpy(), ref_correlate(rgba, box))


@HYP
@given(h=st.integers(1, 40), w=st.integers(1, 40), kh=st.integers(1, 7), kw=st.integers(1, 7),
       channels=st.sampled_from([1, 4]), seed=st.integers(0, 1000))
def test_conv2d_hypothesis(host, ctx, h, w, kh, kw, channels, seed):
    rng = np.random.default_rng(seed)
    img_np = rng.standard_normal((h, w, 4) if channels == 4 else (h, w)).astype(np.float32)
    k_np = rng.standard_normal((kh, kw)).astype(np.float32)
    img = ctx.tensor(img_np)
    out = host.run(ctx, lambda rec: rec.conv2d(img, k_np))
    np.testing.assert_allclose(out.numpy(), ref_correlate(img_np, k_np), rtol=1e-5, atol=1e-5)


@HYP
@given(h=st.integers(1, 35), w=st.integers(1, 35), sigma=st.floats(0.3, 4.0), seed=st.integers(0, 1000))
def test_blur_hypothesis(host, ctx, h, w, sigma, seed):
    img_np = np.random.default_rng(seed).random((h, w, 4), dtype=np.float32)
    img = ctx.tensor(img_np)
    out = host.run(ctx, lambda rec: rec.gaussian_blur(img, sigma))
    np.testing.assert_allclose(out.numpy(), ref_blur(img_np, sigma, math.ceil(3 * sigma)), rtol=1e-5, atol=1e-6)


# -- histogram -------------------------------------------------------------------

def off_edge_values(rng, shape, bins, lo, hi):
    """Values at least a quarter bin away from every bin edge (float32 and
    numpy's float64 edges then agree), plus exact ends and outliers."""
    width = (hi - lo) / bins
    b = rng.integers(0, bins, shape)
    v = lo + (b + rng.uniform(0.25, 0.75, shape)) * width
    flat = v.reshape(-1)
    special = [lo, hi, lo - 1.0, hi + 1.0, np.nan]     # lo counts, hi goes to the last bin, others dropped
    flat[:len(special)] = special[:flat.size]
    return v.astype(np.float32)


@pytest.mark.parametrize("n", [1, 100, 4097, 200_000])
@pytest.mark.parametrize("bins", [1, 10, 256, 5000])
def test_histogram_values(host, ctx, n, bins):
    rng = np.random.default_rng(n + bins)
    lo, hi = -2.0, 3.0
    x_np = off_edge_values(rng, n, bins, lo, hi)
    x = ctx.tensor(x_np)
    counts = host.run(ctx, lambda rec: rec.histogram(x, bins, (lo, hi)))
    assert counts.dtype == gc.uint32 and counts.shape == (bins,)
    np.testing.assert_array_equal(counts.numpy(), np.histogram(x_np, bins, (lo, hi))[0])


def test_histogram_per_channel_float_image_and_accumulate(host, ctx):
    rng = np.random.default_rng(12)
    img_np = off_edge_values(rng, (31, 17, 4), 64, 0.0, 1.0)
    img = ctx.tensor(img_np)
    counts = host.run(ctx, lambda rec: rec.histogram(img, 64, (0.0, 1.0), per_channel=True))
    ref = np.stack([np.histogram(img_np[..., c], 64, (0.0, 1.0))[0] for c in range(4)])
    np.testing.assert_array_equal(counts.numpy(), ref)
    host.run(ctx, lambda rec: rec.histogram(img[::2], 64, (0.0, 1.0), per_channel=True, out=counts,
                                            accumulate=True))
    ref2 = ref + np.stack([np.histogram(img_np[::2, :, c], 64, (0.0, 1.0))[0] for c in range(4)])
    np.testing.assert_array_equal(counts.numpy(), ref2)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_histogram_integers(host, ctx, dtype):
    rng = np.random.default_rng(13)
    x_np = rng.integers(0, 1000, (50, 70)).astype(dtype)
    x = ctx.tensor(x_np)
    counts = host.run(ctx, lambda rec: rec.histogram(x[:, 3:], 100, (0, 1000)))
    np.testing.assert_array_equal(counts.numpy(), np.histogram(x_np[:, 3:], 100, (0, 1000))[0])


def test_histogram_rgba8_packed_and_uint8(host, ctx):
    rng = np.random.default_rng(14)
    rgba = rng.integers(0, 256, (40, 33, 4)).astype(np.uint8)
    words = ctx.tensor(pack(rgba))
    per, pooled, coarse = host.run(ctx, lambda rec: (
        rec.histogram(words, packed=True, per_channel=True),
        rec.histogram(words, packed=True),
        rec.histogram(words, 16, packed=True, per_channel=True)))
    ref = np.stack([np.bincount(rgba[..., c].ravel(), minlength=256) for c in range(4)])
    np.testing.assert_array_equal(per.numpy(), ref)
    np.testing.assert_array_equal(pooled.numpy(), ref.sum(axis=0))
    np.testing.assert_array_equal(coarse.numpy(), ref.reshape(4, 16, 16).sum(axis=2))
    if ctx.caps.uint8_storage:
        img8 = ctx.tensor(rgba)
        per8 = host.run(ctx, lambda rec: rec.histogram(img8, per_channel=True))
        np.testing.assert_array_equal(per8.numpy(), ref)


@HYP
@given(shape=st.lists(st.integers(1, 30), min_size=1, max_size=3).map(tuple), bins=st.integers(1, 3000),
       seed=st.integers(0, 1000))
def test_histogram_hypothesis(host, ctx, shape, bins, seed):
    rng = np.random.default_rng(seed)
    x_np = off_edge_values(rng, shape, bins, -1.0, 1.0)
    x = ctx.tensor(x_np)
    counts = host.run(ctx, lambda rec: rec.histogram(x, bins, (-1.0, 1.0)))
    np.testing.assert_array_equal(counts.numpy(), np.histogram(x_np, bins, (-1.0, 1.0))[0])


def test_histogram_kernel_choice_by_size(host, ctx):
    x = ctx.tensor(np.zeros(10, np.float32))
    hist = registered_ops()["histogram"]
    small = hist(ctx, x, 256, (0.0, 1.0), per_channel=False)
    large = hist(ctx, x, 4096, (0.0, 1.0))
    assert small.dispatches[-1].spec.param("shared") is True
    assert large.dispatches[-1].spec.param("shared") is False


# -- errors ------------------------------------------------------------------------

def test_typed_errors(host, ctx):
    img = ctx.tensor(np.zeros((8, 8, 4), np.float32))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.gaussian_blur(ctx.empty((8, 8, 3)), 1.0))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.gaussian_blur(ctx.empty((8, 8), "int32"), 1.0))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.gaussian_blur(img, -1.0))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.gaussian_blur(img, float("nan")))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.gaussian_blur(img, 1.0, radius=-2))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.gaussian_blur(img, 1.0, out=ctx.empty((8, 7, 4))))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.conv2d(img, np.ones((9, 3))))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.conv2d(img, np.ones(3)))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.conv2d(img, ctx.empty((3, 3), "int32")))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.conv2d(img, np.ones((3, 3)), out=img))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.conv2d(img, [[1.0, float("inf")]]))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.histogram(img, 10))                 # float needs a range
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.histogram(img, 10, (1.0, 1.0)))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.histogram(img, 0, (0.0, 1.0)))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.histogram(ctx.empty((5, 3)), 4, (0, 1), per_channel=True))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.histogram(img, 4, (0, 1), packed=True))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.histogram(img, 4, (0, 1), out=ctx.empty((5,), "uint32")))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.histogram(img, 4, (0, 1), accumulate=True))
    assert not host.messages


def test_planned_kernels_are_in_the_bake_catalogue(host, ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    ops = registered_ops()
    images = [ctx.empty((6, 8, 4)), ctx.empty((6, 8, 4))[:, :, ::-1], ctx.empty((6, 8)),
              ctx.empty((6, 8), "uint32")]
    if ctx.caps.uint8_storage:
        images += [ctx.empty((6, 8, 4), "uint8"), ctx.empty((6, 8, 4), "uint8")[:, :, ::-1],
                   ctx.empty((6, 8), "uint8")]
    planned = []
    for img in images:
        planned += ops["gaussian_blur"](ctx, img, 1.0).dispatches + ops["conv2d"](ctx, img, np.ones((3, 3))).dispatches
        planned += ops["histogram"](ctx, img, 8, (0, 1), packed=img.dtype == gc.uint32).dispatches
    planned += ops["histogram"](ctx, images[0], 4000, (0, 1), per_channel=True).dispatches
    planned += ops["histogram"](ctx, ctx.empty((5,), "int32"), 4000, (0, 1)).dispatches
    assert planned and all(d.spec in catalogue for d in planned)


def test_histogram_refuses_memory_model_without_device_scope(modern_host):
    feats = dict(modern_host.features, vulkanMemoryModel=True, vulkanMemoryModelDeviceScope=False)
    ctx = modern_host.adopt(features=feats)
    try:
        x = ctx.tensor(np.zeros(10, np.float32))
        with pytest.raises(gc.UnsupportedError):
            modern_host.run(ctx, lambda rec: rec.histogram(x, 4, (0.0, 1.0)))
        k = ctx.tensor(np.arange(10, dtype=np.uint32)[::-1].copy())      # the sort needs no atomics
        np.testing.assert_array_equal(modern_host.run(ctx, lambda rec: rec.sort(k)).numpy(), np.arange(10))
    finally:
        ctx.close()
