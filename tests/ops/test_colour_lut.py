"""rec.colour_lut: 3-D LUT grading of images and float32 pixel tensors
against a numpy trilinear reference, on both host profiles under the
validation layer."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops

from strided_views import draw_view

HYP = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def ref_lut(px: np.ndarray, lut: np.ndarray, strength: float = 1.0) -> np.ndarray:
    """The graded pixels (float64, same shape as ``px``): a weighted sum of the
    8 table entries around each clamped, scaled colour; alpha unchanged."""
    px = px.astype(np.float64)
    table = lut[..., :3].astype(np.float64)
    n = table.shape[0]
    rgb = px[..., :3]
    pos = np.clip(np.nan_to_num(rgb), 0.0, 1.0) * (n - 1)
    lo = np.minimum(np.floor(pos).astype(int), n - 2)
    frac = pos - lo
    graded = np.zeros_like(rgb)
    for corner in np.ndindex(2, 2, 2):                      # (dr, dg, db)
        idx = lo + np.array(corner)
        weight = np.prod(np.where(np.array(corner) == 1, frac, 1.0 - frac), axis=-1, keepdims=True)
        graded += weight * table[idx[..., 2], idx[..., 1], idx[..., 0]]
    out = px.copy()
    with np.errstate(invalid="ignore"):
        out[..., :3] = graded if strength == 1.0 else rgb + strength * (graded - rgb)
    return out


def identity_lut(n: int, channels: int = 3) -> np.ndarray:
    b, g, r = np.meshgrid(*(np.arange(n),) * 3, indexing="ij")
    lut = np.stack([r, g, b] + [np.ones_like(r)] * (channels - 3), axis=-1) / (n - 1)
    return lut.astype(np.float32)


def random_lut(rng, n: int, channels: int = 3, lo=0.0, hi=1.0) -> np.ndarray:
    return rng.uniform(lo, hi, (n, n, n, channels)).astype(np.float32)


@pytest.mark.parametrize("n", [2, 17, 33])
def test_identity_lut_gives_the_input(host, ctx, n):
    rng = np.random.default_rng(n)
    data = rng.uniform(0, 1, (9, 13, 4)).astype(np.float32)
    img = ctx.image_from(data, "rgba32f")
    out = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(identity_lut(n, 4))))
    assert isinstance(out, gc.Image) and out.format.name == "rgba32f"
    np.testing.assert_allclose(out.numpy(), data, atol=2e-6)


@pytest.mark.parametrize("n", [2, 17, 33])
@pytest.mark.parametrize("channels", [3, 4])
def test_random_lut_on_rgba8_unorm_images(host, ctx, n, channels):
    rng = np.random.default_rng(100 + n)
    data = rng.integers(0, 256, (11, 6, 4), dtype=np.uint8)
    lut = random_lut(rng, n, channels)
    img = ctx.image_from(data, "rgba8_unorm")
    out = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(lut)))
    assert out.format.name == "rgba8_unorm"
    want = np.round(ref_lut(data / 255.0, lut) * 255)
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, atol=1)
    np.testing.assert_array_equal(out.numpy()[..., 3], data[..., 3])


@pytest.mark.parametrize("n", [2, 17, 33])
def test_random_lut_on_rgba16f_images(host, ctx, n):
    rng = np.random.default_rng(200 + n)
    data = rng.uniform(-0.25, 1.25, (7, 10, 4)).astype(np.float16)
    lut = random_lut(rng, n, 4, -2.0, 3.0)
    img = ctx.image_from(data, "rgba16f")
    out = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(lut), strength=0.5))
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref_lut(data, lut, 0.5), rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(out.numpy()[..., 3], data[..., 3])


@pytest.mark.parametrize("extent", [(1, 1), (3, 7), (64, 33)])
@pytest.mark.parametrize("strength", [0.0, 0.5, 1.0])
def test_float_tensor_extents_and_strengths(host, ctx, extent, strength):
    w, h = extent
    rng = np.random.default_rng(w * 100 + h)
    data = rng.uniform(0, 1, (h, w, 4)).astype(np.float32)
    lut = random_lut(rng, 17)
    out = host.run(ctx, lambda rec: rec.colour_lut(ctx.tensor(data), ctx.tensor(lut), strength=strength))
    assert out.shape == (h, w, 4) and out.dtype == gc.float32
    np.testing.assert_allclose(out.numpy(), ref_lut(data, lut, strength), rtol=1e-5, atol=1e-5)
    if strength == 0.0:
        np.testing.assert_array_equal(out.numpy(), data)


@pytest.mark.parametrize("extent", [(1, 1), (3, 7)])
def test_odd_image_extents(host, ctx, extent):
    w, h = extent
    rng = np.random.default_rng(300 + w)
    data = rng.uniform(0, 1, (h, w, 4)).astype(np.float32)
    lut = random_lut(rng, 5)
    img = ctx.image_from(data, "rgba32f")
    out = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(lut)))
    np.testing.assert_allclose(out.numpy(), ref_lut(data, lut), rtol=1e-5, atol=1e-5)


def test_values_outside_the_unit_cube_are_clamped(host, ctx):
    rng = np.random.default_rng(21)
    data = rng.uniform(-3, 4, (8, 8, 4)).astype(np.float32)
    data[0, :4, :3] = [[np.inf, -np.inf, 2.0], [-np.inf, np.inf, -1.0], [1.0, 0.0, np.inf], [-0.0, 1e30, -1e30]]
    lut = random_lut(rng, 9, 3, -1.0, 2.0)
    img = ctx.image_from(data, "rgba32f")
    out = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(lut)))
    got = out.numpy()
    np.testing.assert_allclose(got, ref_lut(data, lut), rtol=1e-5, atol=1e-5)
    # inf clamps to the table's top, -inf to its bottom: the table entries,
    # to a few ulp. The trilinear weights are exactly 0 and 1 there, but a
    # compiler may evaluate mix(a, b, 1) as a fused a + 1 * (b - a) (NVIDIA's
    # does), which is b only up to the rounding of b - a: GLSL's precision
    # rules allow it, so bit equality is not something the op can promise.
    for pixel, entry in ((got[0, 0, :3], lut[8, 0, 8]), (got[0, 1, :3], lut[0, 8, 0])):
        np.testing.assert_array_max_ulp(pixel, entry, maxulp=4)
    # With strength < 1 the input's own value is mixed in (unclamped).
    half = host.run(ctx, lambda rec: rec.colour_lut(img, ctx.tensor(lut), strength=0.5))
    finite = np.all(np.isfinite(data[..., :3]), axis=-1)
    np.testing.assert_allclose(half.numpy()[finite], ref_lut(data, lut, 0.5)[finite], rtol=1e-5, atol=1e-5)


def test_in_place_on_an_image_and_a_tensor(host, ctx):
    rng = np.random.default_rng(22)
    data = rng.uniform(0, 1, (5, 12, 4)).astype(np.float32)
    lut = ctx.tensor(random_lut(rng, 6, 4))
    img = ctx.image_from(data, "rgba32f")
    t = ctx.tensor(data)
    got_img, got_t = host.run(ctx, lambda rec: (rec.colour_lut(img, lut, out=img, strength=0.75),
                                                rec.colour_lut(t, lut, out=t, strength=0.75)))
    assert got_img.image is img and got_t is t          # out= an Image gives its level, as other ops do
    want = ref_lut(data, lut.numpy(), 0.75)
    np.testing.assert_allclose(img.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-5)


def test_image_to_tensor_and_one_channel_tensors(host, ctx):
    rng = np.random.default_rng(23)
    data = rng.integers(0, 256, (6, 9, 4), dtype=np.uint8)
    lut = random_lut(rng, 4)
    img = ctx.image_from(data, "rgba8_unorm")
    out = ctx.empty((6, 9, 4))
    grey = rng.uniform(0, 1, (6, 9)).astype(np.float32)
    got_grey = host.run(ctx, lambda rec: (rec.colour_lut(img, ctx.tensor(lut), out=out),
                                          rec.colour_lut(ctx.tensor(grey), ctx.tensor(lut)))[1])
    np.testing.assert_allclose(out.numpy(), ref_lut(data / 255.0, lut), rtol=1e-5, atol=1e-5)
    # A one-channel operand: green and blue read as 0, red is stored.
    rgba = np.stack([grey, np.zeros_like(grey), np.zeros_like(grey), np.zeros_like(grey)], axis=-1)
    np.testing.assert_allclose(got_grey.numpy(), ref_lut(rgba, lut)[..., 0], rtol=1e-5, atol=1e-5)


@given(data=st.data(), w=st.integers(1, 20), h=st.integers(1, 20), n=st.integers(2, 6),
       channels=st.sampled_from([3, 4]), strength=st.sampled_from([0.0, 0.3, 1.0]))
@HYP
def test_lut_views_and_pixel_views_match_numpy(host, ctx, data, w, h, n, channels, strength):
    """Any view of the table (permuted, reversed, stepped, offset) and of the
    pixels reads like the contiguous array numpy sees."""
    rng = np.random.default_rng(w * 1000 + h * 10 + n)
    lut, lut_np = draw_view(data, ctx, (n, n, n, channels), lambda s: rng.uniform(-1, 2, s).astype(np.float32))
    px, px_np = draw_view(data, ctx, (h, w, 4), lambda s: rng.uniform(-0.5, 1.5, s).astype(np.float32))
    out = host.run(ctx, lambda rec: rec.colour_lut(px, lut, strength=strength))
    np.testing.assert_allclose(out.numpy(), ref_lut(px_np, lut_np, strength), rtol=1e-5, atol=1e-5)


def test_a_lut_beside_other_data_in_one_buffer(host, ctx):
    """A table that is a slice of a bigger tensor, with the pixels and the
    output in the same buffer, reads only its own part."""
    rng = np.random.default_rng(24)
    n = 3
    pixels = rng.uniform(0, 1, (4, 5, 4)).astype(np.float32)
    lut_np = random_lut(rng, n, 4)
    flat = np.concatenate([pixels.ravel(), lut_np.ravel(), np.zeros(pixels.size, np.float32)])
    big = ctx.tensor(flat)
    src = big[:pixels.size].reshape(4, 5, 4)
    lut = big[pixels.size:pixels.size + lut_np.size].reshape(n, n, n, 4)
    out = big[pixels.size + lut_np.size:].reshape(4, 5, 4)
    host.run(ctx, lambda rec: rec.colour_lut(src, lut, out=out))
    np.testing.assert_allclose(out.numpy(), ref_lut(pixels, lut_np), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(lut.numpy(), lut_np)


def test_empty_tensor_records_nothing(host, ctx):
    lut = ctx.tensor(identity_lut(2))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        out = rec.colour_lut(ctx.empty((0, 3, 4)), lut)
        assert out.shape == (0, 3, 4) and rec.dispatches == 0
    host.submit_and_wait(cmd)


# -- hostile inputs ------------------------------------------------------------------------

def test_bad_arguments_raise_typed_errors_before_recording(host, ctx):
    img = ctx.image((4, 3), "rgba16f")
    lut = ctx.tensor(identity_lut(3))
    other = host.adopt()
    try:
        foreign = other.tensor(identity_lut(3))
        cases = [
            ((img, identity_lut(3)), {}, gc.InvalidArgumentError),            # numpy, not a guest tensor
            ((img, "lut"), {}, gc.InvalidArgumentError),
            ((img, foreign), {}, gc.WrongContextError),
            ((img, ctx.tensor(identity_lut(3).astype(np.float16))), {}, gc.DTypeError)
            if ctx.caps.float16_storage else None,
            ((img, ctx.empty((3, 3, 3, 3), "int32")), {}, gc.DTypeError),
            ((img, ctx.empty((27, 3))), {}, gc.ShapeError),                  # wrong rank
            ((img, ctx.empty((3, 3, 3, 3, 1))), {}, gc.ShapeError),
            ((img, ctx.empty((3, 3, 3, 2))), {}, gc.ShapeError),             # channels
            ((img, ctx.empty((3, 3, 3, 5))), {}, gc.ShapeError),
            ((img, ctx.empty((1, 1, 1, 3))), {}, gc.ShapeError),             # N < 2
            ((img, ctx.empty((2, 3, 2, 3))), {}, gc.ShapeError),             # not a cube
            ((img, ctx.empty((3, 3, 2, 4))), {}, gc.ShapeError),
            ((img, lut), {"strength": float("nan")}, gc.InvalidArgumentError),
            ((img, lut), {"strength": float("inf")}, gc.InvalidArgumentError),
            ((img, lut), {"strength": -0.1}, gc.InvalidArgumentError),
            ((img, lut), {"strength": 1.5}, gc.InvalidArgumentError),
            ((img, lut), {"strength": True}, gc.InvalidArgumentError),
            ((img, lut), {"strength": "1"}, gc.InvalidArgumentError),
            ((img, lut), {"strength": None}, gc.InvalidArgumentError),
            ((ctx.empty((3, 4), "uint32"), lut), {}, gc.DTypeError),          # packed RGBA8
            ((ctx.image((4, 3), "r32ui"), lut), {}, gc.DTypeError),           # integer image
            ((np.zeros((3, 4, 4), np.float32), lut), {}, gc.InvalidArgumentError),
            ((img, lut), {"out": ctx.image((3, 4), "rgba16f")}, gc.ShapeError),
            ((ctx.empty((3, 4, 4)), lut), {"out": ctx.empty((3, 4))}, gc.ShapeError),
        ]
        if ctx.caps.uint8_storage:
            cases.append(((ctx.empty((3, 4, 4), "uint8"), lut), {}, gc.DTypeError))
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            for args, kwargs, err in filter(None, cases):
                with pytest.raises(err) as caught:
                    rec.colour_lut(*args, **kwargs)
                assert type(caught.value) is err, (args, kwargs, caught.value)
            shared = ctx.empty((3 * 3 * 3 * 4,))
            with pytest.raises(gc.InvalidArgumentError, match="overlaps lut"):
                rec.colour_lut(ctx.empty((3, 3, 4)), shared.reshape(3, 3, 3, 4), out=shared.reshape(9, 3, 4)[:3])
            assert rec.dispatches == rec.barriers == 0
        host.submit_and_wait(cmd)
    finally:
        other.close()


def test_planned_kernels_are_in_the_bake_catalogue(modern_ctx):
    """Whatever colour_lut plans for these operands ships precompiled."""
    from guestcompute.ops import all_specs
    ctx, catalogue = modern_ctx, set(all_specs())
    colour_lut = registered_ops()["colour_lut"]
    lut = ctx.tensor(identity_lut(2))
    images = [ctx.image((8, 4), f) for f in ("rgba8_unorm", "rgba8_srgb", "bgra8_unorm", "rgba16f", "rgba32f",
                                            "rg16f", "r32f", "r8_unorm", "a2b10g10r10_unorm", "b10g11r11_ufloat")]
    images.append(ctx.image((8, 4), "rgba16f", usage="storage"))
    tensors = [ctx.empty((4, 8, 4)), ctx.empty((4, 8, 4))[:, :, ::-1], ctx.empty((4, 8))]
    planned = []
    for src in images + tensors:
        planned += colour_lut(ctx, src, lut).dispatches
        for out in tensors:
            if isinstance(src, gc.Image) or src.shape == out.shape:
                planned += colour_lut(ctx, src, lut, out=out).dispatches
    missing = {d.spec.family + str(d.spec.params) for d in planned if d.spec not in catalogue}
    assert not missing, sorted(missing)[:5]
