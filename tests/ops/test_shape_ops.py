"""Shape ops: contiguous, transpose, permute, slice, concat (dynamic
metadata), index_select and gather with negative indices and out-of-range modes."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import shape as sh

RNG = np.random.default_rng(3)


def _arr(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(0, 200, size=shape).astype(dtype)


def test_materialising_views(host, ctx):
    x_np = _arr((3, 4, 5))
    x = ctx.tensor(x_np)
    c, t, t02, p, s1, s2 = host.run(ctx, lambda rec: (
        rec.contiguous(x[:, ::-2]), rec.transpose(x), rec.transpose(x, 0, 2),
        rec.permute(x, (2, 0, 1)), rec.slice(x, (1, slice(None, None, -1))),
        rec.slice(x, (Ellipsis, 3))))
    for got, want in [(c, x_np[:, ::-2]), (t, np.swapaxes(x_np, -2, -1)), (t02, np.swapaxes(x_np, 0, 2)),
                      (p, np.transpose(x_np, (2, 0, 1))), (s1, x_np[1, ::-1]), (s2, x_np[..., 3])]:
        assert got.is_contiguous and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
    out = ctx.empty((5, 4, 3))
    host.run(ctx, lambda rec: rec.permute(x, (2, 1, 0), out=out))
    np.testing.assert_array_equal(out.numpy(), x_np.T)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
def test_concat_many_inputs_and_axes(host, ctx, dtype):
    # 9 inputs: three concat dispatches of up to 4 inputs (the offsets table)
    parts = [_arr((2, n, 3), dtype) for n in (1, 4, 2, 0, 5, 3, 1, 2, 6)]
    ts = [ctx.tensor(p) for p in parts]
    out = host.run(ctx, lambda rec: rec.concat(ts, axis=1))
    np.testing.assert_array_equal(out.numpy(), np.concatenate(parts, axis=1))
    first = [_arr((n, 2, 3), dtype) for n in (2, 1, 3)]
    out = host.run(ctx, lambda rec: rec.concat([ctx.tensor(p) for p in first], axis=0))
    np.testing.assert_array_equal(out.numpy(), np.concatenate(first, axis=0))
    last = [_arr((2, 3, n), dtype) for n in (1, 5, 2, 2, 3)]
    out = host.run(ctx, lambda rec: rec.concat([ctx.tensor(p) for p in last], axis=-1))
    np.testing.assert_array_equal(out.numpy(), np.concatenate(last, axis=-1))


def test_concat_views_scratch_and_strided_out(host, ctx):
    a_np, b_np = _arr((4, 6, 5)), _arr((4, 3, 5))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    # step and permuted views are read in place; out is a strided view
    weird_np = np.transpose(_arr((5, 2, 4)), (2, 1, 0))       # shape (4, 2, 5)
    weird = ctx.tensor(np.transpose(weird_np, (2, 1, 0))).permute(2, 1, 0)
    big = ctx.zeros((4, 20, 5))
    host.run(ctx, lambda rec: rec.concat([a[:, ::2], b, weird, a[:, :2]], axis=1, out=big[:, ::2]))
    want = np.concatenate([a_np[:, ::2], b_np, weird_np, a_np[:, :2]], axis=1)
    expect = np.zeros((4, 20, 5), np.float32)
    expect[:, ::2] = want
    np.testing.assert_array_equal(big.numpy(), expect)
    # an input whose outer dims cannot be merged goes through a scratch copy
    x_np = _arr((3, 4, 2))
    x = ctx.tensor(x_np).permute(1, 0, 2)                      # (4, 3, 2): outer dims fine
    y = ctx.tensor(_arr((2, 3, 4))).permute(2, 1, 0)           # (4, 3, 2)
    assert sh.as_3d(y[:, :, :], 2) is None                    # outer (4, 3) strides do not merge
    yn = y.numpy()
    out = host.run(ctx, lambda rec: rec.concat([x, y], axis=2))
    np.testing.assert_array_equal(out.numpy(), np.concatenate([np.transpose(x_np, (1, 0, 2)), yn], axis=2))


def test_concat_float16_and_uint8(modern_host, modern_ctx):
    ctx = modern_ctx
    for dtype in (np.float16, np.uint8):
        parts = [_arr((n, 7), dtype) for n in (3, 1, 5, 2, 2)]
        out = modern_host.run(ctx, lambda rec: rec.concat([ctx.tensor(p) for p in parts]))
        np.testing.assert_array_equal(out.numpy(), np.concatenate(parts))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_concat_hypothesis(host, ctx, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    count = data.draw(st.integers(1, 7))
    parts = []
    for _ in range(count):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 4))
        parts.append(_arr(tuple(s)))
    step = data.draw(st.sampled_from([1, -1]))
    flip = (slice(None, None, step),) * len(shape)
    ts = [ctx.tensor(p)[flip] if p.size else ctx.tensor(p) for p in parts]
    want = np.concatenate([p[flip] for p in parts], axis=axis)
    out = host.run(ctx, lambda rec: rec.concat(ts, axis=axis))
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32])
def test_index_select_matches_numpy_take(host, ctx, index_dtype):
    x_np = _arr((4, 6, 3))
    x = ctx.tensor(x_np)
    idx_np = np.array([[5, 0, 2], [1, 1, 4]], index_dtype)
    idx = ctx.tensor(idx_np)
    for axis in (0, 1, 2, -1):
        n = x_np.shape[axis]
        ok = idx_np % n
        got = host.run(ctx, lambda rec: rec.index_select(x, ctx.tensor(ok.astype(index_dtype)), axis))
        np.testing.assert_array_equal(got.numpy(), np.take(x_np, ok, axis=axis))
    # strided x and strided indices
    got = host.run(ctx, lambda rec: rec.index_select(x[::-1, ::2], idx[:, ::2], axis=1, mode="clip"))
    want = np.take(x_np[::-1, ::2], idx_np[:, ::2], axis=1, mode="clip")
    np.testing.assert_array_equal(got.numpy(), want)


def test_out_of_range_indices_zero_wrap_clip(host, ctx):
    x_np = _arr((5, 4))
    x = ctx.tensor(x_np)
    signed = np.array([-3, 0, 4, 7, 100, -1, -5, -6, -2**31, 2**31 - 1], np.int32)
    unsigned = np.array([0, 4, 5, 2**32 - 1, 3], np.uint32)
    s, u = ctx.tensor(signed), ctx.tensor(unsigned)
    got = host.run(ctx, lambda rec: {(name, mode): rec.index_select(x, idx, 0, mode=mode)
                                     for name, idx in (("signed", s), ("unsigned", u))
                                     for mode in ("zero", "wrap", "clip")})
    for name, idx in (("signed", signed.astype(np.int64)), ("unsigned", unsigned.astype(np.int64))):
        # wrap and clip are numpy's modes (clip: negatives become 0, as in numpy)
        for mode in ("wrap", "clip"):
            np.testing.assert_array_equal(got[name, mode].numpy(), np.take(x_np, idx, axis=0, mode=mode))
        # zero: [-5, 5) picks like np.take (negatives from the end), the rest is 0
        inside = (idx >= -5) & (idx < 5)
        want = np.where(inside[:, None], x_np[np.where(inside, idx, 0)], 0)
        np.testing.assert_array_equal(got[name, "zero"].numpy(), want)
    # an empty axis: zero mode fills zeros, wrap and clip have nothing to pick
    empty = ctx.empty((0, 4))
    got = host.run(ctx, lambda rec: rec.index_select(empty, u, 0))
    np.testing.assert_array_equal(got.numpy(), np.zeros((5, 4), np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for mode in ("wrap", "clip"):
            with pytest.raises(gc.InvalidArgumentError):
                rec.index_select(empty, u, 0, mode=mode)
    host.submit_and_wait(cmd)


def test_gather_matches_take_along_axis(host, ctx):
    x_np = _arr((4, 5, 3))
    x = ctx.tensor(x_np)
    for axis in (0, 1, 2):
        shape = list(x_np.shape)
        shape[axis] = 7
        idx_np = RNG.integers(0, x_np.shape[axis], size=shape).astype(np.int32)
        got = host.run(ctx, lambda rec: rec.gather(x, ctx.tensor(idx_np), axis))
        np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x_np, idx_np, axis))
    # broadcasting: indices of size 1 along other dims (and x of size 1)
    idx_np = RNG.integers(0, 5, size=(1, 2, 3)).astype(np.uint32)
    got = host.run(ctx, lambda rec: rec.gather(x, ctx.tensor(idx_np), 1))
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x_np, idx_np.astype(np.int64), 1))
    # argsort-style use: sort each row by gathering with its argsort
    rows = _arr((6, 9))
    order = np.argsort(rows, axis=1).astype(np.int32)
    got = host.run(ctx, lambda rec: rec.gather(ctx.tensor(rows), ctx.tensor(order), axis=-1, mode="zero"))
    np.testing.assert_array_equal(got.numpy(), np.sort(rows, axis=1))


def test_gather_float16_uint8(modern_host, modern_ctx):
    ctx = modern_ctx
    for dtype in (np.float16, np.uint8):
        x_np = _arr((6, 4), dtype)
        idx_np = np.array([[5], [0], [3]], np.int32)
        got = modern_host.run(ctx, lambda rec: rec.index_select(ctx.tensor(x_np), ctx.tensor(idx_np), 0))
        np.testing.assert_array_equal(got.numpy(), np.take(x_np, idx_np, axis=0))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(xshape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       ishape=st.lists(st.integers(0, 4), min_size=0, max_size=3), data=st.data())
def test_index_select_hypothesis(host, ctx, xshape, ishape, data):
    axis = data.draw(st.integers(0, len(xshape) - 1))
    mode = data.draw(st.sampled_from(["zero", "wrap", "clip"]))
    x_np = _arr(tuple(xshape))
    n = xshape[axis]
    idx_np = RNG.integers(-n - 2, n + 2, size=tuple(ishape)).astype(np.int32)
    idx = ctx.tensor(idx_np.reshape(-1)).reshape(idx_np.shape)   # keeps 0-d index arrays 0-d
    got = host.run(ctx, lambda rec: rec.index_select(ctx.tensor(x_np), idx, axis, mode=mode))
    if mode == "zero":
        inside = (idx_np >= -n) & (idx_np < n)
        picked = np.take(x_np, np.where(inside, idx_np, 0), axis=axis)
        mask = inside.reshape((1,) * axis + inside.shape + (1,) * (len(xshape) - axis - 1))
        want = np.where(mask, picked, 0)
    else:
        want = np.take(x_np, idx_np, axis=axis, mode=mode)
    np.testing.assert_array_equal(got.numpy(), want)


def test_many_dims_stage_through_contiguous_copies(host, ctx):
    # every-other-element views of 4-d x and 4-d indices: 7 output dims, no
    # two of which merge -> x and the indices are staged through copies
    x_np = _arr((4, 4, 4, 4))
    idx_np = RNG.integers(0, 2, size=(4, 4, 4, 4)).astype(np.int32)
    x = ctx.tensor(x_np)[::2, ::2, ::2, ::2]
    idx = ctx.tensor(idx_np)[::2, ::2, ::2, ::2]
    planned = sh.index_select(ctx, x, idx, 1)
    assert [d.spec.family for d in planned.dispatches] == ["map", "map", "gather"]
    got = host.run(ctx, lambda rec: rec.index_select(x, idx, 1))
    want = np.take(x_np[::2, ::2, ::2, ::2], idx_np[::2, ::2, ::2, ::2], axis=1)
    np.testing.assert_array_equal(got.numpy(), want)


def test_typed_errors(host, ctx):
    x = ctx.tensor(_arr((3, 4)))
    i = ctx.tensor(np.array([0, 1], np.int32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.index_select(x, ctx.tensor(np.array([0.0], np.float32)))
        with pytest.raises(gc.InvalidArgumentError, match="'clamp' is now 'clip'"):
            rec.index_select(x, i, mode="clamp")
        with pytest.raises(gc.InvalidArgumentError):
            rec.gather(x[:2], ctx.tensor(np.zeros((2, 4), np.int32)), mode="raise")
        with pytest.raises(gc.ShapeError):
            rec.index_select(x, i, axis=2)
        with pytest.raises(gc.ShapeError):
            rec.gather(x, i)                                   # ndim mismatch
        with pytest.raises(gc.ShapeError):
            rec.gather(x, ctx.tensor(np.zeros((2, 3), np.int32)), 0)   # 3 vs 4 do not broadcast
        with pytest.raises(gc.ShapeError):
            rec.concat([x, ctx.tensor(_arr((3, 5)))], axis=0)
        with pytest.raises(gc.DTypeError):
            rec.concat([x, ctx.tensor(np.ones((3, 4), np.int32))])
        with pytest.raises(gc.InvalidArgumentError):
            rec.concat([])
        with pytest.raises(gc.InvalidArgumentError):
            rec.concat([x, x], out=x)                          # overlaps an input
        with pytest.raises(gc.ShapeError):
            rec.concat([x, x], axis=2)
        with pytest.raises(gc.ShapeError):
            rec.transpose(ctx.tensor(_arr((4,))))
        with pytest.raises(gc.ShapeError):
            rec.permute(x, (0, 0))
        with pytest.raises(gc.InvalidArgumentError):
            rec.permute(x, "ab")
        with pytest.raises(gc.ShapeError):
            rec.slice(x, (5,))
        with pytest.raises(gc.ShapeError):
            rec.contiguous(x, out=ctx.empty((4, 3)))
    host.submit_and_wait(cmd)


def test_every_spec_is_in_the_catalogue():
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    for count in range(1, sh.CONCAT_GROUP + 1):
        assert sh.concat_spec("float32", count) in catalogue
    assert sh.gather_spec("uint8", "uint32", "zero", 6) in catalogue
    # the dynamic offsets table grows with the input count, within 128 bytes
    assert sh.concat_spec("float32", sh.CONCAT_GROUP).push_size <= 128
    for mode in sh.MODES:
        assert sh.gather_spec("float32", "int32", mode, 6) in catalogue
    assert sh.gather_spec("float32", "int32", "clip", 6).push_size <= 128
