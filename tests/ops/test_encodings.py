"""The input encodings of neural-graphics networks — rec.frequency_encoding
(NeRF's positional encoding) and rec.hash_grid_encode (Instant-NGP's
multiresolution hash grid) — against the float64 numpy references of
encoding_refs.py, and their argument errors, raised before recording."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.encodings import TILE, tile_shape

from encoding_refs import ref_frequency, ref_hash_grid
from refusals import assert_refused
from strided_views import draw_view, shapes


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ulp of ``ref`` rounded to float32 (0 where both are 0)."""
    spacing = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


# -- frequency encoding -------------------------------------------------------------------------

@pytest.mark.parametrize("n, include_input", [(0, True), (1, False), (6, True), (10, False)])
def test_frequency_layout_is_nerfs(host, ctx, n, include_input):
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, (4, 5, 3)).astype(np.float32)
    out = host.run(ctx, lambda rec: rec.frequency_encoding(ctx.tensor(x), n, include_input=include_input))
    assert out.shape == (4, 5, 3 * (include_input + 2 * n)) and out.dtype == gc.float32
    ref = ref_frequency(x, n, include_input)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=4e-7)
    if include_input:
        np.testing.assert_array_equal(out.numpy()[..., :3], x)
    # The plain formula in float64 agrees to its own rounding of 2**k pi x.
    plain = np.concatenate(([x] if include_input else []) + [f(2.0 ** k * np.pi * x.astype(np.float64))
                            for k in range(n) for f in (np.sin, np.cos)], axis=-1)
    np.testing.assert_allclose(out.numpy(), plain, rtol=0, atol=1e-6)


def test_frequency_float32_is_within_3_ulp_for_every_binade(ctx, host):
    rng = np.random.default_rng(7)
    mags = np.ldexp(rng.uniform(1, 2, 4096), rng.integers(-30, 30, 4096))
    x = (mags * rng.choice([-1, 1], 4096)).astype(np.float32)
    x[:8] = [0.0, -0.0, 0.5, -0.25, 1.0, 3.0, 2.0 ** 24, -(2.0 ** 30)]    # exact zeros of sin or cos
    n = 24
    got = host.run(ctx, lambda rec: rec.frequency_encoding(ctx.tensor(x.reshape(-1, 1)), n,
                                                           include_input=False)).numpy()
    ref = ref_frequency(x.reshape(-1, 1), n, include_input=False)
    errors = ulp_errors(got, ref)
    assert errors.max() <= 3, errors.max()
    exact_zero = ref == 0
    assert np.all(got[exact_zero] == 0)
    assert np.all(np.abs(got) <= 1)


def test_frequency_special_values(ctx, host):
    x = np.array([[np.nan, np.inf, -np.inf, 1e30]], np.float32)
    got = host.run(ctx, lambda rec: rec.frequency_encoding(ctx.tensor(x.reshape(4, 1)), 2)).numpy()
    np.testing.assert_array_equal(got[:3, 0], x[0, :3])
    assert np.all(np.isnan(got[:3, 1:]))
    np.testing.assert_array_equal(got[3], [x[0, 3], 0.0, 1.0, 0.0, 1.0])     # an even integer


def test_frequency_float16_in_and_out(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (64, 2)).astype(np.float16)
    t = ctx.tensor(x)
    half = host.run(ctx, lambda rec: rec.frequency_encoding(t, 8))
    assert half.dtype == gc.float16
    ref = ref_frequency(x.astype(np.float32), 8)
    # Within one float16 ulp of the exact value.
    spacing = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(half.numpy().astype(np.float64) - ref) <= spacing)
    wide = host.run(ctx, lambda rec: rec.frequency_encoding(t, 8, out=ctx.empty((64, 34), "float32")))
    np.testing.assert_allclose(wide.numpy(), ref, rtol=0, atol=4e-7)


def test_frequency_reads_views_and_writes_into_a_wider_tensor(host, ctx):
    rng = np.random.default_rng(4)
    base = rng.uniform(-1, 1, (32, 4)).astype(np.float32)
    x = ctx.tensor(base)[:, 1:3]                        # strided rows
    features = ctx.zeros((32, 40))                      # e.g. an MLP's input: encoding, then other columns
    host.run(ctx, lambda rec: rec.frequency_encoding(x, 4, out=features[:, 2:20]))
    got = features.numpy()
    np.testing.assert_allclose(got[:, 2:20], ref_frequency(base[:, 1:3], 4), rtol=0, atol=4e-7)
    assert not got[:, :2].any() and not got[:, 20:].any()


@pytest.mark.parametrize("rows, d, n, include_input", [
    (1000, 3, 10, True),      # 32-row tiles, the last one partial
    (7, 40, 32, True),        # a row of 2600 values: chunks of 31 coordinates, the last of 9
    (5, 40, 32, False),       # 2560 values: chunks of 32 and 8
])
def test_frequency_tiles_partial_chunked_and_strided(host, ctx, rows, d, n, include_input):
    """A workgroup encodes a tile of whole rows, or of one row's coordinates
    where a row does not fit: every tile boundary lands where it should,
    through strided input and output views."""
    width = d * (include_input + 2 * n)
    tile_rows, cols = tile_shape(rows, d, include_input + 2 * n)
    assert tile_rows * cols * (include_input + 2 * n) <= TILE             # the kernel's shared tile
    assert (cols < d) == (width > TILE) and (rows % tile_rows or d % cols)
    rng = np.random.default_rng(rows + d)
    base = rng.uniform(-4, 4, (rows, d + 3)).astype(np.float32)
    base[0, 1:4] = [np.nan, -np.inf, 2.0 ** 25]         # and in the last tile, -0 and a quarter turn
    base[-1, d - 1:d + 1] = [-0.0, 0.75]
    x = ctx.tensor(base)[:, 1:d + 1]                    # strided rows
    table = ctx.zeros((rows + 2, width + 9))           # the rows past the last tile's stay 0
    host.run(ctx, lambda rec: rec.frequency_encoding(x, n, include_input=include_input,
                                                     out=table[:rows, 4:width + 4]))
    got = table.numpy()
    ref = ref_frequency(base[:, 1:d + 1], n, include_input)
    np.testing.assert_allclose(got[:rows, 4:width + 4], ref, rtol=0, atol=4e-7)
    if include_input:
        np.testing.assert_array_equal(got[:rows, 4:d + 4], base[:, 1:d + 1])
    assert not got[:, :4].any() and not got[:, width + 4:].any() and not got[rows:].any()


def test_frequency_folded_grid(host, ctx):
    """More tiles than maxComputeWorkGroupCount[0]: the grid folds into y,
    and the workgroups past the last tile write nothing."""
    x_np = np.random.default_rng(8).uniform(-1, 1, (1000, 3)).astype(np.float32)
    object.__setattr__(ctx.limits, "max_workgroup_count", (3, 65535, 65535))     # 32 tiles: 11 x 3 groups
    table = ctx.zeros((1100, 63))
    host.run(ctx, lambda rec: rec.frequency_encoding(ctx.tensor(x_np), 10, out=table[:1000]))
    got = table.numpy()
    np.testing.assert_allclose(got[:1000], ref_frequency(x_np, 10), rtol=0, atol=4e-7)
    assert not got[1000:].any()


def test_frequency_argument_errors(host, ctx):
    x = ctx.tensor(np.zeros((8, 3), np.float32))
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x, -1), "n_frequencies")
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x, 65), r"0\.\.64")
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x, 2.0), "int")
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x, True), "int")
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x, 2, include_input="yes"))
    assert_refused(host, ctx, gc.DTypeError, lambda rec: rec.frequency_encoding(ctx.tensor(np.zeros((8, 3), np.int32)), 2))
    assert_refused(host, ctx, gc.ShapeError, lambda rec: rec.frequency_encoding(ctx.tensor(np.float32(1)), 2), "last axis")
    assert_refused(host, ctx, gc.ShapeError, lambda rec: rec.frequency_encoding(x, 2, out=ctx.empty((8, 16))))
    assert_refused(host, ctx, gc.DTypeError, lambda rec: rec.frequency_encoding(x, 2, out=ctx.empty((8, 15), "int32")))
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(x[:, :1], 0, out=x[:, 1:2]),
            "overlaps")
    strided = ctx.empty((4, 6, 3))[:, :2]               # batch dims that do not merge
    assert_refused(host, ctx, gc.ShapeError, lambda rec: rec.frequency_encoding(strided, 1), "contiguous")
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.frequency_encoding(np.zeros((2, 3)), 1))


# -- hash grid --------------------------------------------------------------------------------------

def random_grid(ctx, rng, **config):
    grid = ctx.hash_grid(**config)
    grid.set_params(rng.uniform(-1, 1, grid.n_params))
    return grid


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("features", [1, 2, 4, 8])
def test_hash_grid_float32_matches_instant_ngp(host, ctx, dims, features):
    rng = np.random.default_rng(dims * 10 + features)
    grid = random_grid(ctx, rng, n_input_dims=dims, n_levels=6, n_features_per_level=features,
                       log2_hashmap_size=10, base_resolution=3, per_level_scale=1.9)
    assert {lv.dense for lv in grid.levels} == {True, False}          # both kinds of levels
    x = rng.uniform(0, 1, (7, 30, dims)).astype(np.float32)
    x[0, :4] = [[0.0] * dims, [1.0] * dims, [0.5] * dims, [1 / 3] * dims]   # edges and cell boundaries
    out = host.run(ctx, lambda rec: rec.hash_grid_encode(ctx.tensor(x), grid))
    assert out.shape == (7, 30, 6 * features) and out.dtype == gc.float32
    np.testing.assert_allclose(out.numpy(), ref_hash_grid(x, grid, grid.params.numpy()), rtol=0, atol=2e-6)


def test_hash_grid_float16_tables_and_outputs(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    rng = np.random.default_rng(11)
    grid = random_grid(ctx, rng, n_input_dims=3, n_levels=8, log2_hashmap_size=12, base_resolution=4,
                       per_level_scale=1.6, dtype="float16")
    assert grid.params.dtype == gc.float16
    x = ctx.tensor(rng.uniform(0, 1, (300, 3)).astype(np.float32))
    ref = ref_hash_grid(x.numpy(), grid, grid.params.numpy())
    half = host.run(ctx, lambda rec: rec.hash_grid_encode(x, grid))
    assert half.dtype == gc.float16
    # float32 interpolation of the float16 entries, rounded once.
    spacing = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(half.numpy().astype(np.float64) - ref) <= spacing)
    wide = host.run(ctx, lambda rec: rec.hash_grid_encode(x, grid, out=ctx.empty((300, 16), "float32")))
    np.testing.assert_allclose(wide.numpy(), ref, rtol=0, atol=2e-6)


def test_hash_grid_levels_and_default_parameters(ctx):
    grid = ctx.hash_grid(n_input_dims=2)                  # Instant-NGP's defaults
    dense = [lv.dense for lv in grid.levels]
    # resolutions 16 .. 512 fit their dense grid in 2**19 entries, 1024 and finer hash
    assert dense == [True] * 6 + [False] * 10
    assert [lv.resolution for lv in grid.levels[:3]] == [16, 32, 64]
    assert [lv.size for lv in grid.levels[:2]] == [256, 1024] and grid.levels[-1].size == 1 << 19
    assert grid.n_params == 2 * (sum(16 ** 2 * 4 ** k for k in range(6)) + 10 * (1 << 19))
    assert grid.output_dims == 32 and grid.params.shape == (grid.n_params,)
    values = grid.params.numpy()
    assert values.dtype == np.float32 and np.abs(values).max() <= 1e-4 and values.std() > 1e-5
    np.testing.assert_array_equal(ctx.hash_grid(2, seed=0).params.numpy(), values)
    assert not np.array_equal(ctx.hash_grid(2, seed=1).params.numpy(), values)


def test_hash_grid_clamps_points_and_writes_into_views(host, ctx):
    rng = np.random.default_rng(12)
    grid = random_grid(ctx, rng, n_input_dims=2, n_levels=4, log2_hashmap_size=8, base_resolution=5)
    x = np.array([[-0.5, 2.0], [np.nan, 0.25], [1.0, 0.0], [0.7, -np.inf]], np.float32)
    clamped = np.nan_to_num(np.clip(x, 0, 1), nan=0.0)
    table = ctx.zeros((4, 12))
    host.run(ctx, lambda rec: rec.hash_grid_encode(ctx.tensor(x), grid, out=table[:, 2:10]))
    got = table.numpy()
    np.testing.assert_allclose(got[:, 2:10], ref_hash_grid(clamped, grid, grid.params.numpy()), atol=2e-6)
    assert not got[:, :2].any() and not got[:, 10:].any()


def test_hash_grid_params_are_a_tensor_ops_write(host, ctx):
    rng = np.random.default_rng(13)
    grid = random_grid(ctx, rng, n_input_dims=3, n_levels=3, log2_hashmap_size=9)
    x = ctx.tensor(rng.uniform(0, 1, (50, 3)).astype(np.float32))
    before = host.run(ctx, lambda rec: rec.hash_grid_encode(x, grid)).numpy()
    host.run(ctx, lambda rec: rec.scale(grid.params, 2.0, out=grid.params))     # an optimiser's step, say
    after = host.run(ctx, lambda rec: rec.hash_grid_encode(x, grid)).numpy()
    np.testing.assert_allclose(after, 2 * before, rtol=1e-6, atol=1e-7)
    entries = grid.params.numpy().reshape(-1, 2)
    grid.set_params(entries[::-1].copy())                                     # the (entries, features) form
    np.testing.assert_array_equal(grid.params.numpy(), entries[::-1].reshape(-1))


def test_hash_grid_configuration_errors(ctx):
    for bad, error in [(dict(n_input_dims=4), gc.InvalidArgumentError),
                       (dict(n_input_dims=2.0), gc.InvalidArgumentError),
                       (dict(n_features_per_level=3), gc.InvalidArgumentError),
                       (dict(n_levels=0), gc.InvalidArgumentError),
                       (dict(log2_hashmap_size=40), gc.InvalidArgumentError),
                       (dict(per_level_scale=0.5), gc.InvalidArgumentError),
                       (dict(per_level_scale=float("nan")), gc.InvalidArgumentError),
                       (dict(base_resolution=0), gc.InvalidArgumentError),
                       (dict(n_levels=40, per_level_scale=2.0), gc.InvalidArgumentError),
                       (dict(dtype="int32"), gc.DTypeError),
                       (dict(params=np.zeros(5)), gc.ShapeError),
                       (dict(n_levels=1, base_resolution=2, params=np.array(["a"] * 16)), gc.DTypeError)]:
        with pytest.raises(error):
            ctx.hash_grid(**bad)
    grid = ctx.hash_grid(2, n_levels=1, base_resolution=2, dtype="float32")
    with pytest.raises(gc.ShapeError):
        grid.set_params(np.zeros(grid.n_params + 1))


def test_hash_grid_float16_needs_16_bit_storage(bare_host):
    ctx = bare_host.adopt()
    try:
        if ctx.caps.float16_storage:
            pytest.skip("the bare host has 16-bit storage")
        with pytest.raises(gc.UnsupportedError):
            ctx.hash_grid(2, dtype="float16")
    finally:
        ctx.close()


def test_hash_grid_encode_argument_errors(host, ctx, modern_host):
    grid = ctx.hash_grid(3, n_levels=2, log2_hashmap_size=6)
    x = ctx.tensor(np.zeros((8, 3), np.float32))
    assert_refused(host, ctx, gc.ShapeError, lambda rec: rec.hash_grid_encode(ctx.tensor(np.zeros((8, 2), np.float32)),
                                                                       grid), r"\(\.\.\., 3\)")
    assert_refused(host, ctx, gc.DTypeError, lambda rec: rec.hash_grid_encode(ctx.tensor(np.zeros((8, 3), np.int32)), grid))
    assert_refused(host, ctx, gc.InvalidArgumentError, lambda rec: rec.hash_grid_encode(x, grid.params), "HashGrid")
    assert_refused(host, ctx, gc.ShapeError, lambda rec: rec.hash_grid_encode(x, grid, out=ctx.empty((8, 5))))
    assert_refused(host, ctx, gc.DTypeError, lambda rec: rec.hash_grid_encode(x, grid, out=ctx.empty((8, 4), "uint32")))
    assert_refused(host, ctx, gc.InvalidArgumentError,
            lambda rec: rec.hash_grid_encode(x, grid, out=grid.params[:32].reshape(8, 4)), "overlaps")
    other = modern_host.adopt()
    try:
        foreign = other.hash_grid(3, n_levels=2, log2_hashmap_size=6)
        assert_refused(host, ctx, gc.WrongContextError, lambda rec: rec.hash_grid_encode(x, foreign))
    finally:
        other.close()


# -- any view -------------------------------------------------------------------------------------

def _batch_merges(t) -> bool:
    """Whether the batch dims of ``t`` (all but the last) are one strided dim."""
    dims = [(n, s) for n, s in zip(t.shape[:-1], t.strides[:-1]) if n != 1]
    return all(s_outer == s_inner * n_inner for (_, s_outer), (n_inner, s_inner) in zip(dims, dims[1:]))


ANY_VIEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _encoded_or_refused(host, ctx, x, encode, ref):
    """``encode(rec, x)`` matches ``ref``, or (exactly where x's batch dims do
    not merge) is refused with a ShapeError, and then encodes rec.contiguous(x)."""
    if _batch_merges(x):
        got = host.run(ctx, lambda rec: encode(rec, x))
    else:
        assert_refused(host, ctx, gc.ShapeError, lambda rec: encode(rec, x), "contiguous")
        got = host.run(ctx, lambda rec: encode(rec, rec.contiguous(x)))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=2e-6)


@ANY_VIEW
@given(data=st.data(), batch=shapes(0, 3, 6), d=st.integers(1, 4), n=st.integers(0, 8), include_input=st.booleans())
def test_frequency_encoding_of_any_view(host, ctx, data, batch, d, n, include_input):
    """Any view of the points (steps, reversal, permuted axes, offsets)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, batch + (d,), lambda s: rng.uniform(-2, 2, s).astype(np.float32))
    _encoded_or_refused(host, ctx, x, lambda rec, v: rec.frequency_encoding(v, n, include_input=include_input),
                        ref_frequency(x_np, n, include_input))


@ANY_VIEW
@given(data=st.data(), batch=shapes(0, 3, 6), dims=st.integers(2, 3), features=st.sampled_from([1, 2, 4]))
def test_hash_grid_encode_of_any_view(host, ctx, data, batch, dims, features):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    grid = random_grid(ctx, rng, n_input_dims=dims, n_levels=3, n_features_per_level=features, log2_hashmap_size=8,
                       base_resolution=3)
    x, x_np = draw_view(data, ctx, batch + (dims,), lambda s: rng.uniform(0, 1, s).astype(np.float32))
    _encoded_or_refused(host, ctx, x, lambda rec, v: rec.hash_grid_encode(v, grid),
                        ref_hash_grid(x_np, grid, grid.params.numpy()))
