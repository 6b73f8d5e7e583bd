"""FFTs on images: rfft2 / fft2 / fftn / rfftn / ifft2 reading an image's
pixels (each channel a batch) against numpy.fft in float64 on the values a
shader reads; irfft2 / irfftn and fft_convolve writing into an image; the
direct texel reads (sampled and storage) and the copy route; images with
float16 tensors (an image convolved into a float16 out=, float16 rows into
an image out=); the typed errors raised before anything is recorded. Every test runs under
synchronization validation (the fixtures fail it on any message)."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops.base import registered_ops
from refusals import assert_refused
from test_fft import accuracy_bound, check_close
from test_fft_float16 import check_half

FORMATS = ["rgba16f", "rgba32f", "r32f", "rgba8_unorm"]
EXTENTS = [(32, 16), (48, 40)]          # (width, height): fixed-length kernels, and the generic one


def pixels_of(fmt: str, extent, rng) -> tuple:
    """(texels to upload, the float64 pixels a shader reads from them)."""
    w, h = extent
    shape = (h, w) if fmt == "r32f" else (h, w, 4)
    if fmt == "rgba8_unorm":
        data = rng.integers(0, 256, shape, dtype=np.uint8)
        return data, data / 255.0
    data = rng.uniform(-2, 2, shape).astype(np.float16 if fmt == "rgba16f" else np.float32)
    return data, data.astype(np.float64)


def image_of(ctx, fmt: str, extent, seed: int, usage=None) -> tuple:
    data, values = pixels_of(fmt, extent, np.random.default_rng(seed))
    img = ctx.image(extent, fmt, usage=usage)
    img.write(data)
    return img, values


FORWARD = [("rfft2", {}), ("fft2", {}), ("fftn", {}), ("rfftn", {}), ("ifft2", {"norm": "ortho"}),
           ("rfft2", {"axes": (1, 0)}), ("rfftn", {"s": (24, 50)}), ("fftn", {"axes": (0,)})]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extent", EXTENTS)
def test_forward_transforms_of_an_image_match_numpy_on_its_pixels(modern_host, modern_ctx, fmt, extent):
    img, values = image_of(modern_ctx, fmt, extent, 1)
    outs = modern_host.run(modern_ctx, lambda rec: [getattr(rec, name)(img, **kw) for name, kw in FORWARD])
    for (name, kw), out in zip(FORWARD, outs):
        axes = kw.get("axes", (0, 1) if "s" not in kw else (0, 1)[2 - len(kw["s"]):])
        ref = getattr(np.fft, name)(values, **{**kw, "axes": axes})
        assert out.dtype == gc.complex64 and out.shape == ref.shape, name
        check_close(out.numpy(), ref, max(extent))


def test_explicit_default_axes_are_the_spatial_axes(modern_host, modern_ctx):
    """axes=(-2, -1) given explicitly (a tuple or a list) means what the
    2-D ops' default does for an image, its spatial axes; other axes index
    the (H, W, C) pixel array: (-3, -2) is the spatial pair too."""
    img, values = image_of(modern_ctx, "rgba32f", (32, 16), 3)
    calls = [("fft2", {"axes": (-2, -1)}), ("rfft2", {"axes": [-2, -1]}), ("fftn", {"axes": (-2, -1)}),
             ("rfftn", {"s": (16, 32), "axes": (-2, -1)}), ("fft2", {"axes": (-3, -2)})]
    outs = modern_host.run(modern_ctx, lambda rec: [getattr(rec, name)(img, **kw) for name, kw in calls])
    for (name, kw), out in zip(calls, outs):
        ref = getattr(np.fft, name)(values, **{**kw, "axes": (0, 1)})
        assert out.shape == ref.shape, (name, kw)
        check_close(out.numpy(), ref, 32)
    spec = modern_ctx.tensor(np.fft.rfft2(values, axes=(0, 1)).astype(np.complex64))
    back = modern_ctx.image((32, 16), "rgba32f")
    modern_host.run(modern_ctx, lambda rec: rec.irfft2(spec, axes=(-2, -1), out=back))
    np.testing.assert_allclose(back.numpy(), values, atol=1e-5)


def test_a_storage_only_image_is_read_through_image_load(modern_host, modern_ctx):
    img, values = image_of(modern_ctx, "rgba16f", (64, 8), 2, usage="storage")
    spec = modern_host.run(modern_ctx, lambda rec: rec.rfft2(img))
    check_close(spec.numpy(), np.fft.rfft2(values, axes=(0, 1)), 64)


def test_a_level_of_a_layered_mipmapped_image(modern_host, modern_ctx):
    rng = np.random.default_rng(3)
    img = modern_ctx.image((40, 24), "rgba32f", mips=2, layers=2)
    data = rng.uniform(-1, 1, (12, 20, 4)).astype(np.float32)
    img.level(1, 1).write(data)
    out = modern_host.run(modern_ctx, lambda rec: rec.fft2(img.level(1, 1)))
    check_close(out.numpy(), np.fft.fft2(data.astype(np.float64), axes=(0, 1)), 20)


def test_direct_formats_read_texels_and_others_copy_once(modern_ctx):
    """rgba16f / rgba32f / r32f rows are read by the FFT kernel itself;
    another format, or a row too long for one workgroup, is copied once
    into a float32 tensor first."""
    ops = registered_ops()
    for fmt in ("rgba16f", "rgba32f", "r32f"):
        dispatches = ops["rfft2"](modern_ctx, modern_ctx.image((32, 16), fmt)).dispatches
        assert [d.spec.family for d in dispatches] == ["fft_fixed", "fft_fixed"]
        assert dispatches[0].spec.param("load") in ("tex", f"img:{fmt}")
    dispatches = ops["rfft2"](modern_ctx, modern_ctx.image((32, 16), "rgba8_unorm")).dispatches
    assert [d.spec.family for d in dispatches] == ["pixel_copy", "fft_fixed", "fft_fixed"]
    assert dispatches[1].spec.param("load") == "real"
    long_row = modern_ctx.image((8192, 2), "r32f")
    assert ops["rfft2"](modern_ctx, long_row).dispatches[0].spec.family == "pixel_copy"


def test_a_row_longer_than_a_workgroup_holds(modern_host, modern_ctx):
    img, values = image_of(modern_ctx, "r32f", (8192, 2), 4)
    out = modern_host.run(modern_ctx, lambda rec: rec.rfft2(img))
    check_close(out.numpy(), np.fft.rfft2(values), 8192)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extent", EXTENTS)
def test_irfft2_writes_an_image(modern_host, modern_ctx, fmt, extent):
    img, values = image_of(modern_ctx, fmt, extent, 5)
    out = modern_ctx.image(extent, fmt)
    spec = modern_ctx.tensor(np.fft.rfft2(values, axes=(0, 1)).astype(np.complex64))
    got = modern_host.run(modern_ctx, lambda rec: rec.irfft2(spec, s=values.shape[:2], out=out))
    assert got is out
    if fmt == "rgba8_unorm":        # within 1e-6 of each code: stored exactly
        np.testing.assert_array_equal(out.numpy(), np.round(values * 255).astype(np.uint8))
        return
    tolerance = 2e-3 if fmt == "rgba16f" else 1e-5        # float16 keeps 11 bits
    np.testing.assert_allclose(out.numpy().astype(np.float64), values, rtol=tolerance, atol=tolerance)


def test_a_round_trip_through_the_spectrum_with_default_axes(modern_host, modern_ctx):
    """rfft2 of an image and irfft2 / irfftn back into another, every axis
    argument left to its default (the image's spatial axes)."""
    img, values = image_of(modern_ctx, "rgba32f", (48, 40), 6)
    a, b = modern_ctx.image((48, 40), "rgba32f"), modern_ctx.image((48, 40), "rgba32f")
    modern_host.run(modern_ctx, lambda rec: [rec.irfft2(rec.rfft2(img), out=a), rec.irfftn(rec.rfftn(img), out=b)])
    for out in (a, b):
        np.testing.assert_allclose(out.numpy(), values, atol=1e-5)


def ref_convolve(values, spectrum):
    h, w = values.shape[:2]
    return np.fft.irfft2(np.fft.rfft2(values, axes=(0, 1)) * spectrum, s=(h, w), axes=(0, 1))


@pytest.mark.parametrize("fmt", ["rgba16f", "rgba32f", "r32f", "rgba8_unorm"])
@pytest.mark.parametrize("extent", EXTENTS)
def test_fft_convolve_image_to_image(modern_host, modern_ctx, fmt, extent):
    img, values = image_of(modern_ctx, fmt, extent, 7)
    w, h = extent
    kernel = np.zeros((h, w))
    kernel[:3, :3] = 1 / 9
    spectrum = np.fft.rfft2(kernel).astype(np.complex64)
    if fmt != "r32f":
        spectrum = spectrum[:, :, None]         # one kernel for every channel
    out = modern_ctx.image(extent, "rgba32f" if fmt != "r32f" else "r32f")
    k = modern_ctx.tensor(spectrum)
    got, tensor = modern_host.run(modern_ctx, lambda rec: (rec.fft_convolve(img, k, out=out),
                                                           rec.fft_convolve(img, k)))
    ref = ref_convolve(values, spectrum.astype(np.complex128))
    assert got is out and tensor.shape == values.shape
    bound = 1e-6 * np.log2(h * w) * np.sqrt(np.mean(ref ** 2))
    for result in (out.numpy(), tensor.numpy()):
        assert np.sqrt(np.mean((result - ref) ** 2)) <= bound
        assert np.abs(result - ref).max() <= 10 * bound


def test_fft_convolve_in_place_with_a_spectrum_per_channel(modern_host, modern_ctx):
    img, values = image_of(modern_ctx, "rgba32f", (64, 32), 8)
    spectrum = np.fft.rfft2(np.random.default_rng(9).standard_normal((32, 64, 4)), axes=(0, 1))
    k = modern_ctx.tensor(spectrum.astype(np.complex64))
    modern_host.run(modern_ctx, lambda rec: rec.fft_convolve(img, k, out=img))
    ref = ref_convolve(values, spectrum.astype(np.complex64).astype(np.complex128))
    assert np.sqrt(np.mean((img.numpy() - ref) ** 2)) <= 1e-6 * 11 * np.sqrt(np.mean(ref ** 2))


def test_typed_errors_before_anything_is_recorded(modern_host, modern_ctx):
    ctx = modern_ctx
    img = ctx.image((16, 8), "rgba32f")
    grey = ctx.image((16, 8), "r32f")
    spec = ctx.tensor(np.ones((8, 9, 4), np.complex64))
    k = ctx.tensor(np.ones((8, 9, 1), np.complex64))
    sampled_only = ctx.image((16, 8), "rgba32f", usage="sampled")
    cases = [
        (gc.DTypeError, lambda rec: rec.rfft2(ctx.image((16, 8), "r32ui")), "integers"),
        (gc.UnsupportedError, lambda rec: rec.fft2(ctx.image((16, 8), "rgba32f", usage="color_attachment")),
         "SAMPLED"),
        (gc.ShapeError, lambda rec: rec.rfft2(img, axes=(0, 2)), "channel axis"),
        (gc.ShapeError, lambda rec: rec.fftn(img, axes=(-1,)), "channel axis"),
        (gc.ShapeError, lambda rec: rec.fftn(img, axes=(1, 2)), "channel axis"),
        (gc.ShapeError, lambda rec: rec.fft2(img, axes=(-1, -2)), "channel axis"),   # only (-2, -1) is the default
        (gc.ShapeError, lambda rec: rec.fftn(img, s=(4, 4, 4)), "two spatial axes"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(img, k, axes=(1, 2)), "channel axis"),
        (gc.DTypeError, lambda rec: rec.irfft2(img), "real pixels"),
        (gc.ShapeError, lambda rec: rec.irfft2(spec, out=ctx.image((8, 8), "rgba32f")), "pixels have shape"),
        (gc.ShapeError, lambda rec: rec.irfft2(spec, out=grey), "pixels have shape"),
        (gc.UnsupportedError, lambda rec: rec.irfft2(spec, out=sampled_only), "STORAGE"),
        (gc.UnsupportedError, lambda rec: rec.irfft2(ctx.tensor(np.ones((8, 9), np.complex64)),
                                                     out=ctx.image((16, 8), "d32_sfloat")), "depth"),
        (gc.UnsupportedError, lambda rec: rec.fft_convolve(img, k, out=sampled_only), "STORAGE"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(img, k, out=grey), "pixels have shape"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(img, ctx.tensor(np.ones((8, 9), np.complex64))),
         "half-spectrum"),
        (gc.InvalidArgumentError, lambda rec: rec.rfft2(img, out=img), "Tensor"),
    ]
    for error, fn, match in cases:
        assert_refused(modern_host, ctx, error, fn, match)


def test_planned_kernels_are_in_the_bake_catalogue(modern_ctx):
    """Every pipeline an image's transforms plan is baked: sampled and
    storage reads of each direct format, fixed-length and generic rows,
    Bluestein's, and the copies in and out."""
    ctx, ops, catalogue = modern_ctx, registered_ops(), set(all_specs())
    planned = []
    for fmt in ("rgba16f", "rgba32f", "r32f", "rgba8_unorm"):
        for usage in (None, "storage"):
            for extent in ((32, 16), (48, 40), (17, 8)):
                img = ctx.image(extent, fmt, usage=usage)
                channels = () if fmt == "r32f" else (4,)
                half = ctx.empty((extent[1], extent[0] // 2 + 1) + channels, "complex64")
                k = ctx.empty((extent[1], extent[0] // 2 + 1, 1)[:len(half.shape)], "complex64")
                for name in ("rfft2", "fft2"):
                    planned += ops[name](ctx, img).dispatches
                planned += ops["irfft2"](ctx, half, s=(extent[1], extent[0]), out=img).dispatches
                planned += ops["fft_convolve"](ctx, img, k, out=img).dispatches
    missing = {d.spec.family + str(d.spec.params)[:120] for d in planned if d.spec not in catalogue}
    assert not missing, sorted(missing)[:5]


# -- images meet float16 tensors --------------------------------------------------------

@pytest.fixture
def half_ctx(modern_ctx):
    if not modern_ctx.caps.float16_storage:
        pytest.skip("float16 tensors need 16-bit storage")
    return modern_ctx


@pytest.mark.parametrize("fmt", ["rgba16f", "rgba8_unorm"])     # texels read directly, and copied first
def test_fft_convolve_of_an_image_into_a_float16_tensor(modern_host, half_ctx, fmt):
    """An image's pixels (read as float32) convolved into a float16 out=:
    the last pass rounds each value to float16 once as it writes it."""
    img, values = image_of(half_ctx, fmt, (48, 32), 10)
    kernel = np.zeros((32, 48))
    kernel[:2, :3] = 1 / 6
    spectrum = np.fft.rfft2(kernel).astype(np.complex64)[:, :, None]
    out = half_ctx.empty(values.shape, "float16")
    got = modern_host.run(half_ctx, lambda rec: rec.fft_convolve(img, half_ctx.tensor(spectrum), out=out))
    assert got is out
    check_half(out.numpy(), ref_convolve(values, spectrum.astype(np.complex128)), 32 * 48)


def test_float16_tensors_into_an_image(modern_host, half_ctx):
    """A float16 x convolved into an image out=, and the spectrum of
    float16 rows transformed back into one by irfft2: both through the
    float32 tensor an image out= is written from."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-2, 2, (32, 48, 4)).astype(np.float16)
    values = x.astype(np.float64)
    spectrum = np.fft.rfft2(rng.standard_normal((32, 48))).astype(np.complex64)[:, :, None]
    xt, k = half_ctx.tensor(x), half_ctx.tensor(spectrum)
    convolved, back = half_ctx.image((48, 32), "rgba32f"), half_ctx.image((48, 32), "rgba16f")
    got = modern_host.run(half_ctx, lambda rec: (rec.fft_convolve(xt, k, out=convolved),
                                                 rec.irfft2(rec.rfft2(xt, axes=(0, 1)), out=back)))
    assert got == (convolved, back)
    ref = ref_convolve(values, spectrum.astype(np.complex128))
    assert np.sqrt(np.mean((convolved.numpy() - ref) ** 2)) <= 10 * accuracy_bound(32 * 48) * np.sqrt(np.mean(ref ** 2))
    np.testing.assert_allclose(back.numpy().astype(np.float64), values, rtol=2e-3, atol=2e-3)


def test_an_image_read_needs_no_16bit_storage(modern_ctx):
    """The row kernels read any image as float32 texels: an rgba16f image's
    pipelines ask for no 16-bit storage, where a float16 tensor's do."""
    ops = registered_ops()
    for usage in (None, "storage"):
        img = modern_ctx.image((32, 16), "rgba16f", usage=usage)
        for d in ops["rfft2"](modern_ctx, img).dispatches:
            assert not d.spec.features and not d.spec.glsl_extensions, d.spec.params


def test_images_with_float16_refusals_before_anything_is_recorded(modern_host, half_ctx):
    """A complex result from an image refuses a float16 out= as from any
    input; a float16 out= must still be the pixels' shape; a float16 x
    into an image out= transforms the spatial axes, never the channels."""
    ctx = half_ctx
    img = ctx.image((16, 8), "rgba16f")
    k = ctx.tensor(np.ones((8, 9, 1), np.complex64))
    cases = [
        (gc.DTypeError, lambda rec: rec.rfft2(img, out=ctx.empty((8, 9, 4), "float16")), "complex64"),
        (gc.DTypeError, lambda rec: rec.fft2(img, out=ctx.empty((8, 16, 4), "float16")), "complex64"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(img, k, out=ctx.empty((8, 16), "float16")), "shape"),
        (gc.DTypeError, lambda rec: rec.fft_convolve(img, k, out=ctx.empty((8, 16, 4), "int32")),
         "float32 or float16"),
        (gc.ShapeError, lambda rec: rec.fft_convolve(ctx.empty((8, 16, 4), "float16"), k, axes=(1, 2), out=img),
         "channel axis"),
    ]
    for error, fn, match in cases:
        assert_refused(modern_host, ctx, error, fn, match)


def test_planned_image_and_float16_kernels_are_in_the_bake_catalogue(half_ctx):
    ctx, ops, catalogue = half_ctx, registered_ops(), set(all_specs())
    planned = []
    for fmt in ("rgba16f", "r32f", "rgba8_unorm"):
        for extent in ((32, 16), (48, 40)):
            img = ctx.image(extent, fmt)
            shape = (extent[1], extent[0]) + (() if fmt == "r32f" else (4,))
            k = ctx.empty((extent[1], extent[0] // 2 + 1) + (() if fmt == "r32f" else (1,)), "complex64")
            half = ctx.empty(shape, "float16")
            planned += ops["fft_convolve"](ctx, img, k, out=half).dispatches
            planned += ops["fft_convolve"](ctx, half, k, out=img).dispatches
    missing = {d.spec.family + str(d.spec.params)[:120] for d in planned if d.spec not in catalogue}
    assert not missing, sorted(missing)[:5]
