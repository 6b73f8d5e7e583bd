"""index_select and gather index like numpy: negative indices in [-n, 0)
count from the end (np.take, np.take_along_axis); an index outside [-n, n)
never silently picks a real element unless a numpy mode asks for it
("wrap", "clip"); the default gives 0 for it."""
import numpy as np
import pytest

RNG = np.random.default_rng(11)


def _arr(shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32])
def test_index_select_negative_indices_count_from_the_end(host, ctx, index_dtype):
    x_np = _arr((4, 6, 3))
    x = ctx.tensor(x_np)
    for axis in (0, 1, 2, -1):
        n = x_np.shape[axis]
        idx_np = np.array([[-1, 0, -n], [n - 1, -2, 1]])
        if index_dtype == np.uint32:
            idx_np = idx_np % n          # uint32 indices have no negatives
        got = host.run(ctx, lambda rec: rec.index_select(x, ctx.tensor(idx_np.astype(index_dtype)), axis))
        np.testing.assert_array_equal(got.numpy(), np.take(x_np, idx_np, axis=axis))


def test_gather_negative_indices_count_from_the_end(host, ctx):
    x_np = _arr((4, 5, 3))
    x = ctx.tensor(x_np)
    for axis in (0, 1, 2):
        n = x_np.shape[axis]
        shape = list(x_np.shape)
        shape[axis] = 6
        idx_np = RNG.integers(-n, n, size=shape).astype(np.int32)
        got = host.run(ctx, lambda rec: rec.gather(x, ctx.tensor(idx_np), axis))
        np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x_np, idx_np, axis))


def test_gather_out_of_range_modes(host, ctx):
    x_np = _arr((3, 5))
    x = ctx.tensor(x_np)
    idx_np = np.array([[-6, -5, 5, 9], [0, -1, 2**31 - 1, -2**31], [4, -7, 12, 3]], np.int32)
    idx = ctx.tensor(idx_np)
    got = host.run(ctx, lambda rec: {mode: rec.gather(x, idx, 1, mode=mode)
                                     for mode in ("zero", "wrap", "clip")})
    rows = np.arange(3)[:, None]
    wide = idx_np.astype(np.int64)
    np.testing.assert_array_equal(got["wrap"].numpy(), x_np[rows, wide % 5])
    np.testing.assert_array_equal(got["clip"].numpy(), x_np[rows, np.clip(wide, 0, 4)])
    inside = (wide >= -5) & (wide < 5)
    want = np.where(inside, x_np[rows, np.where(inside, wide, 0)], 0)
    np.testing.assert_array_equal(got["zero"].numpy(), want)
