"""softmax, log_softmax, layer_norm and rms_norm against numpy (float64
references) on both host profiles: axes, strided views, long rows, in place."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from strided_views import draw_view, need, shapes

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def softmax_ref(x, axis, log=False):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return shifted - lse if log else np.exp(shifted - lse)


def layer_norm_ref(x, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def rms_norm_ref(x, w=None, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 if w is None else w)


def close(got, ref, dtype, atol=2e-6):
    tol = dict(rtol=3e-3, atol=3e-3) if dtype == "float16" else dict(rtol=2e-5, atol=atol)
    np.testing.assert_allclose(got.numpy().astype(np.float64), ref, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_softmax_axes_and_lengths(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(0)
    x_np = (rng.standard_normal((3, 5, 1500)) * 4).astype(dtype)     # rows past 1024 elements
    x = ctx.tensor(x_np)
    cases = [(axis, log) for axis in (-1, 0, 1) for log in (False, True)]
    got = host.run(ctx, lambda rec: [(rec.log_softmax if log else rec.softmax)(x, axis) for axis, log in cases])
    for (axis, log), g in zip(cases, got):
        assert g.shape == x_np.shape and g.dtype.name == dtype
        close(g, softmax_ref(x_np, axis, log), dtype, atol=2e-6 if not log else 2e-5)


def test_softmax_is_stable_for_large_inputs(host, ctx):
    x_np = np.array([[1000, 1001, 1002, -1000], [-5e4, -5e4 + 1, -5e4 + 2, 88.0]], np.float32)
    x = ctx.tensor(x_np)
    s, ls = host.run(ctx, lambda rec: (rec.softmax(x), rec.log_softmax(x)))
    assert np.isfinite(s.numpy()).all() and np.isfinite(ls.numpy()).all()
    np.testing.assert_allclose(s.numpy(), softmax_ref(x_np, -1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ls.numpy(), softmax_ref(x_np, -1, log=True), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm_and_rms_norm(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(1)
    x_np = (rng.standard_normal((4, 3, 1100)) * 3 + 5).astype(dtype)    # offset mean: cancellation test
    w_np = rng.standard_normal(1100).astype(dtype)
    b_np = rng.standard_normal(1100).astype(dtype)
    x, w, b = ctx.tensor(x_np), ctx.tensor(w_np), ctx.tensor(b_np)
    got = host.run(ctx, lambda rec: (rec.layer_norm(x), rec.layer_norm(x, w), rec.layer_norm(x, w, b, eps=1e-3),
                                     rec.layer_norm(x, bias=b), rec.rms_norm(x), rec.rms_norm(x, w, eps=0.5)))
    refs = (layer_norm_ref(x_np), layer_norm_ref(x_np, w_np), layer_norm_ref(x_np, w_np, b_np, 1e-3),
            layer_norm_ref(x_np, b=b_np), rms_norm_ref(x_np), rms_norm_ref(x_np, w_np, 0.5))
    for g, r in zip(got, refs):
        close(g, r, dtype, atol=1e-5)


def test_strided_views_and_in_place(host, ctx):
    rng = np.random.default_rng(2)
    base_np = rng.standard_normal((40, 70)).astype(np.float32)
    w_np = rng.standard_normal(80).astype(np.float32)
    base, w = ctx.tensor(base_np), ctx.tensor(w_np)
    view, view_np = base[::2, ::-3].T, base_np[::2, ::-3].T          # (24, 20), no unit strides
    got = host.run(ctx, lambda rec: (rec.softmax(view, 0), rec.layer_norm(view, w[::4][:20], w[1::4][:20]),
                                     rec.rms_norm(view, w[::-4][:20])))
    close(got[0], softmax_ref(view_np, 0), "float32")
    close(got[1], layer_norm_ref(view_np, w_np[::4][:20], w_np[1::4][:20]), "float32", atol=1e-5)
    close(got[2], rms_norm_ref(view_np, w_np[::-4][:20]), "float32", atol=1e-5)
    x_np = rng.standard_normal((6, 300)).astype(np.float32)
    x, y = ctx.tensor(x_np), ctx.tensor(x_np)
    host.run(ctx, lambda rec: (rec.softmax(x, out=x), rec.layer_norm(y, out=y)))
    close(x, softmax_ref(x_np, -1), "float32")
    close(y, layer_norm_ref(x_np), "float32", atol=1e-5)


def test_typed_errors(host, ctx):
    x = ctx.tensor(np.ones((4, 8), np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.softmax(ctx.tensor(np.ones(4, np.int32)))
        with pytest.raises(gc.InvalidArgumentError):
            rec.softmax(x, 2)
        with pytest.raises(gc.InvalidArgumentError):
            rec.log_softmax(x, (0, 1))
        with pytest.raises(gc.ShapeError):
            rec.layer_norm(x, ctx.tensor(np.ones(4, np.float32)))
        with pytest.raises(gc.DTypeError):
            rec.rms_norm(x, ctx.tensor(np.ones(8, np.int32)))
        with pytest.raises(gc.InvalidArgumentError):
            rec.layer_norm(x, eps=-1.0)
        with pytest.raises(gc.InvalidArgumentError):
            rec.layer_norm(x, np.ones(8, np.float32))
        with pytest.raises(gc.ShapeError):
            rec.rms_norm(ctx.tensor(np.ones((), np.float32)).reshape(()))
        big = ctx.tensor(np.ones((5, 8), np.float32))
        with pytest.raises(gc.InvalidArgumentError, match="overlaps"):
            rec.softmax(big[:4], out=big[1:])
    host.submit_and_wait(cmd)


def test_one_pipeline_per_kernel_across_shapes(host, ctx):
    xs = [ctx.tensor(np.ones(shape, np.float32)) for shape in ((4, 30), (9, 129), (2, 3, 1000))]
    host.run(ctx, lambda rec: [rec.softmax(x) for x in xs] + [rec.softmax(x.T, 0) for x in xs[:2]])
    assert ctx.cache_stats()["pipelines_created"] == 2          # scalar, and vec4 for (2, 3, 1000)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_softmax_vec4_and_scalar_rows(host, ctx, dtype):
    """Aligned rows a multiple of 4 long move vec4s; odd lengths, misaligned
    starts and in-place use keep the same results; -inf entries add nothing."""
    from guestcompute.ops.base import registered_ops
    need(ctx, dtype)
    rng = np.random.default_rng(3)
    x_np = (rng.standard_normal((5, 1036)) * 4).astype(dtype)
    x_np[1, [0, 9, 1000]] = -np.inf
    x_np[2, 3] = 40.0                                     # a late new maximum rescales the sum
    x = ctx.tensor(x_np)
    cases = [(x, x_np, 4), (x[:, 4:1032], x_np[:, 4:1032], 4), (x[:, 1:1029], x_np[:, 1:1029], 1),
             (x[:, :1034], x_np[:, :1034], 1)]
    for v, _, vec in cases:
        spec = registered_ops()["softmax"](ctx, v, -1).dispatches[0].spec
        assert spec.param("vec", 1) == vec
    got = host.run(ctx, lambda rec: [f(v) for v, _, _ in cases for f in (rec.softmax, rec.log_softmax)])
    it = iter(got)
    for _, v_np, _ in cases:
        close(next(it), softmax_ref(v_np, -1), dtype)
        ls, ref = next(it).numpy().astype(np.float64), softmax_ref(v_np, -1, log=True)
        finite = np.isfinite(ref)
        assert np.array_equal(finite, np.isfinite(ls))
        tol = 3e-2 if dtype == "float16" else 2e-5
        np.testing.assert_allclose(ls[finite], ref[finite], rtol=tol, atol=tol)
    y = ctx.tensor(x_np)
    host.run(ctx, lambda rec: rec.softmax(y, out=y))     # in place, vec4
    close(y, softmax_ref(x_np, -1), dtype)


@HYP
@given(data=st.data())
def test_random_views_and_axes(host, ctx, data):
    op = data.draw(st.sampled_from(["softmax", "log_softmax", "layer_norm", "rms_norm"]))
    shape = data.draw(shapes(max_dims=3, max_side=9) | st.sampled_from([(2, 1030), (129,), (3, 200, 2)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, shape, lambda s: (rng.standard_normal(s) * 3).astype(np.float32))
    if op in ("softmax", "log_softmax"):
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        got = host.run(ctx, lambda rec: getattr(rec, op)(x, axis))
        close(got, softmax_ref(x_np, axis, op == "log_softmax"), "float32", atol=2e-5)
        return
    w_np = rng.standard_normal(shape[-1]).astype(np.float32) if data.draw(st.booleans()) else None
    w = ctx.tensor(w_np) if w_np is not None else None
    if op == "layer_norm":
        got = host.run(ctx, lambda rec: rec.layer_norm(x, w))
        ref = layer_norm_ref(x_np, w_np)
    else:
        got = host.run(ctx, lambda rec: rec.rms_norm(x, w))
        ref = rms_norm_ref(x_np, w_np)
    close(got, ref, "float32", atol=5e-5)


def test_planned_specs_are_in_the_bake_catalogue(modern_ctx):
    from guestcompute.kernels.catalogue import all_specs
    from guestcompute.ops.base import registered_ops
    ctx, ops, catalogue, planned = modern_ctx, registered_ops(), set(all_specs()), []
    for dtype in ("float32", "float16"):
        x, w = ctx.empty((3, 40), dtype), ctx.empty((40,), dtype)
        for name in ("softmax", "log_softmax"):
            planned += ops[name](ctx, x, 0).dispatches + ops[name](ctx, x, -1).dispatches
        for weight in (None, w):
            planned += ops["rms_norm"](ctx, x, weight).dispatches
            for bias in (None, w):
                planned += ops["layer_norm"](ctx, x, weight, bias).dispatches
    assert len({d.spec for d in planned}) == 20
    assert all(d.spec in catalogue for d in planned)
