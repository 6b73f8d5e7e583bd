"""Row numerics against float64 numpy references on both host profiles:
layer_norm / rms_norm of rows far from zero, log_softmax at large
magnitudes, numpy's float sort order (NaNs last, -0.0 == +0.0), and the
reductions of 0-d tensors under every kind of axis argument."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops.normalize import REGISTER_FLOATS, WORKGROUP

# Row lengths for every path of the row kernels: shorter than a workgroup,
# exactly one, several per invocation, past the in-register limit of
# softmax; multiples of 4 take the vec4 path there, the others scalar loads.
ROW_LENGTHS = (1, 7, WORKGROUP, 1000, 1001, WORKGROUP * REGISTER_FLOATS, 5000, 5003)


def layer_norm_ref(x, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def log_softmax_ref(x, axis):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("mean", [0.0, 1e4, 1e6])
def test_layer_norm_of_rows_far_from_zero(host, ctx, mean):
    # Before: an fp32 mean of the raw values, rounded to the grid of the
    # offset, put the output off by ~2e-3 at 1e4 and by ~0.1 at 1e6.
    rng = np.random.default_rng(int(mean) + 1)
    xs = [(mean + rng.uniform(-1, 1, (3, n))).astype(np.float32) for n in ROW_LENGTHS]
    ts = [ctx.tensor(x) for x in xs]
    got = host.run(ctx, lambda rec: [rec.layer_norm(t, eps=1e-5) for t in ts])
    for x, g in zip(xs, got):
        np.testing.assert_allclose(g.numpy(), layer_norm_ref(x, 1e-5), rtol=0, atol=3e-5,
                                   err_msg=f"row length {x.shape[-1]}, mean {mean}")


def test_layer_norm_with_an_outlier_first_and_affine(host, ctx):
    """The first element of a row is no better a reference than any other:
    an outlier there, a weight and a bias still give float64 accuracy."""
    rng = np.random.default_rng(5)
    x = (1e4 + rng.uniform(-1, 1, (4, 300))).astype(np.float32)
    x[:, 0] = [1e4 + 500, 1e4 - 3000, -1e4, 0.0]
    w = rng.uniform(0.5, 2, 300).astype(np.float32)
    b = rng.uniform(-1, 1, 300).astype(np.float32)
    got = host.run(ctx, lambda rec: rec.layer_norm(ctx.tensor(x), ctx.tensor(w), ctx.tensor(b)))
    ref = layer_norm_ref(x, 1e-5) * w + b
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=5e-5)


@pytest.mark.parametrize("scale", [1e-3, 1e4])
def test_rms_norm_of_large_and_small_rows(host, ctx, scale):
    rng = np.random.default_rng(7)
    xs = [(scale * (1 + rng.uniform(-1, 1, (2, n)))).astype(np.float32) for n in (7, 1000, 5003)]
    got = host.run(ctx, lambda rec: [rec.rms_norm(ctx.tensor(x), eps=1e-12) for x in xs])
    for x, g in zip(xs, got):
        x64 = x.astype(np.float64)
        ref = x64 / np.sqrt((x64 ** 2).mean(axis=-1, keepdims=True) + 1e-12)
        np.testing.assert_allclose(g.numpy(), ref, rtol=2e-6, atol=0)


@pytest.mark.parametrize("magnitude", [0.0, 1e4, -1e4])
def test_log_softmax_at_large_magnitudes(host, ctx, magnitude):
    # Before: x - (max + log(sum)) rounded max + log(sum) to the 1e-3 grid
    # of 1e4 first: 2e-4 relative error on results of about -1..-10.
    rng = np.random.default_rng(11)
    xs = [(magnitude + rng.uniform(-5, 5, (2, n))).astype(np.float32) for n in ROW_LENGTHS]
    ts = [ctx.tensor(x) for x in xs]
    column = (magnitude + rng.uniform(-5, 5, (1001, 3))).astype(np.float32)   # a strided axis
    got = host.run(ctx, lambda rec: [rec.log_softmax(t) for t in ts]
                   + [rec.log_softmax(ctx.tensor(column), axis=0)])
    for x, g in zip(xs + [column], got):
        axis = 0 if x is column else -1
        ref = log_softmax_ref(x, axis)
        np.testing.assert_allclose(g.numpy(), ref, rtol=1e-6, atol=2e-6,
                                   err_msg=f"shape {x.shape}, magnitude {magnitude}")


# -- numpy's float sort order -----------------------------------------------------

def _floats(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


SPECIALS = _floats([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0xFF800001,   # NaNs, both signs
                    0x80000000, 0x00000000, 0x7F800000, 0xFF800000,                # -0, +0, +inf, -inf
                    0x00000001, 0x80000001, 0x3F800000, 0xBF800000])               # denormals, +-1


@pytest.mark.parametrize("n", [13, 1000, 3000])
def test_sort_puts_every_nan_last_and_ties_signed_zeros(host, ctx, n):
    rng = np.random.default_rng(n)
    x = SPECIALS[rng.integers(0, len(SPECIALS), n)]
    x[: len(SPECIALS)] = SPECIALS                  # every special at least once
    x = x[rng.permutation(n)]
    order = np.argsort(x, kind="stable")
    keys = ctx.tensor(x)
    payload = ctx.tensor(np.arange(n, dtype=np.uint32))
    in_place = ctx.tensor(x)
    got_order, (got_keys, got_values), _ = host.run(ctx, lambda rec: [
        rec.argsort(keys), rec.sort(keys, payload), rec.sort(in_place, out_keys=in_place)])
    np.testing.assert_array_equal(got_order.numpy(), order)
    np.testing.assert_array_equal(got_values.numpy(), order)
    # the keys move bit for bit: -0.0 stays -0.0, NaN payloads survive
    np.testing.assert_array_equal(got_keys.numpy().view(np.uint32), x[order].view(np.uint32))
    np.testing.assert_array_equal(in_place.numpy().view(np.uint32), x[order].view(np.uint32))


# -- reductions of 0-d tensors ------------------------------------------------------

ZERO_D_AXES = [0, -1, (), None, 1, -2, (0,), (-1,), np.int64(0), np.int32(-1)]


def _numpy_reduction(op, x, axis, keepdims):
    try:
        return getattr(np, op)(x, axis=axis, keepdims=keepdims)
    except (TypeError, ValueError, IndexError):     # AxisError is a ValueError and an IndexError
        return None


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "argmax", "argmin"])
def test_reductions_of_a_0d_tensor_follow_numpy(host, ctx, op):
    x_np = np.array(3.5, np.float32)
    x = ctx.tensor(x_np)
    cases = [(axis, keep) for axis in ZERO_D_AXES for keep in (False, True)]
    cmd = host.begin()
    results = []
    with ctx.record(cmd) as rec:
        for axis, keep in cases:
            ref = _numpy_reduction(op, x_np, axis, keep)
            if ref is None:
                with pytest.raises(gc.ShapeError, match=r"axis .* for a \d-d tensor; "):
                    getattr(rec, op)(x, axis, keepdims=keep)
            else:
                results.append((axis, keep, np.asarray(ref), getattr(rec, op)(x, axis, keepdims=keep)))
    host.submit_and_wait(cmd)
    assert results, "numpy accepts some axis for every reduction of a 0-d array"
    for axis, keep, ref, got in results:
        g = got.numpy()
        assert g.shape == ref.shape, (axis, keep)
        assert g == ref, (axis, keep)


def test_sum_of_a_0d_int_tensor_along_axis_0(host, ctx):
    x = ctx.tensor(np.array(-7, np.int32))
    got = host.run(ctx, lambda rec: [rec.sum(x, 0), rec.max(x, -1), rec.argmin(x, 0)])
    assert [g.numpy().item() for g in got] == [-7, -7, 0]
    assert all(g.shape == () for g in got)
