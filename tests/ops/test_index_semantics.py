"""index_select and gather index like numpy: negative indices in [-n, 0)
count from the end (np.take, np.take_along_axis); an index outside [-n, n)
never silently picks a real element unless a numpy mode asks for it
("wrap", "clip"); the default gives 0 for it."""
import numpy as np
import pytest

import guestcompute as gc

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


def test_host_indices_are_checked_like_np_take(host, ctx):
    x_np = _arr((5, 3))
    x = ctx.tensor(x_np)
    cases = [("zero", [[-1, 4], [0, -5]]), ("wrap", [7, -6, 2, 10**12]), ("clip", [-3, 9, 1]),
             ("clip", np.array([12, 4], np.uint64)), ("wrap", np.array([12, 4], np.uint64))]
    got = host.run(ctx, lambda rec: [rec.index_select(x, idx, 0, mode=mode) for mode, idx in cases])
    for (mode, idx), g in zip(cases, got):
        idx = np.asarray(idx).astype(np.int64)
        if mode == "wrap":
            want = np.take(x_np, idx % 5, 0)    # numpy's own wrap steps by n: 10**12 would take minutes
        else:                                    # "zero" raises for host data, as numpy's default
            want = np.take(x_np, idx, 0, mode="raise" if mode == "zero" else mode)
        np.testing.assert_array_equal(g.numpy(), want)
    idx_np = np.array([[-1], [2], [-3], [0], [1]])
    got = host.run(ctx, lambda rec: rec.gather(x, idx_np, 1))
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x_np, idx_np, 1))
    # out of range with the default mode: an IndexError, as np.take raises, before any command
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for bad in ([0, 5], [-6], np.array([2**40])):
            with pytest.raises(gc.IndexOutOfRangeError, match="out of range for axis 0 of size 5"):
                rec.index_select(x, bad)
            with pytest.raises(IndexError):
                rec.gather(x, np.reshape(bad, (-1, 1)), 0)
        with pytest.raises(gc.DTypeError):
            rec.index_select(x, [0.5, 1.0])
        with pytest.raises(gc.DTypeError):
            rec.index_select(x, [True, False])
        with pytest.raises(gc.IndexOutOfRangeError):
            rec.index_select(ctx.empty((0, 3)), [0])
        assert rec.dispatches == 0
    host.submit_and_wait(cmd)
