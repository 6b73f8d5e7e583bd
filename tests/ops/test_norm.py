"""softmax, log_softmax, layer_norm and rms_norm against numpy (float64
references) on both host profiles: axes, strided views, long rows, in place."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from strided_views import draw_view, need, random, shapes

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


def float_dtypes(ctx):
    """float32, and float16 where the host enabled 16-bit storage."""
    return st.sampled_from(["float32", "float16"] if ctx.caps.float16_storage else ["float32"])


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


@HYP
@given(data=st.data(), shape=shapes(1, 3, 40), log=st.booleans())
def test_softmax_of_any_view_along_any_axis_matches_numpy(host, ctx, data, shape, log):
    dtype = data.draw(float_dtypes(ctx))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, shape, lambda s: random(rng, s, dtype))
    got = host.run(ctx, lambda rec: (rec.log_softmax if log else rec.softmax)(x, axis))
    assert got.shape == shape and got.dtype.name == dtype
    close(got, softmax_ref(x_np, axis, log), dtype, atol=2e-5 if log else 2e-6)


@HYP
@given(data=st.data(), shape=shapes(1, 3, 40), kind=st.sampled_from(["layer", "rms"]), weighted=st.booleans(),
       biased=st.booleans())
def test_norms_of_any_view_with_strided_weights_match_numpy(host, ctx, data, shape, kind, weighted, biased):
    """Weight and bias are views of their own (steps, reversal, offsets)."""
    dtype = data.draw(float_dtypes(ctx))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, shape, lambda s: random(rng, s, dtype, 1.0, 5.0))
    n = shape[-1]
    w, w_np = draw_view(data, ctx, (n,), lambda s: random(rng, s, dtype)) if weighted else (None, None)
    b, b_np = draw_view(data, ctx, (n,), lambda s: random(rng, s, dtype)) if biased and kind == "layer" else (None, None)
    if kind == "layer":
        got = host.run(ctx, lambda rec: rec.layer_norm(x, w, b))
        ref = layer_norm_ref(x_np, w_np, b_np)
    else:
        got = host.run(ctx, lambda rec: rec.rms_norm(x, w))
        ref = rms_norm_ref(x_np, w_np)
    assert got.shape == shape and got.dtype.name == dtype
    close(got, ref, dtype, atol=1e-5)


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
                                                                # (both rows-in-registers forms)


def _softmax_cases():
    """Rows at, below and above the register capacity (128 × 32 elements),
    vec4 and scalar, with -inf entries, an all -inf row and a NaN row."""
    return [((slice(None), slice(0, 4096)), 4, 8),             # 4096: exactly at capacity, vec4
            ((slice(None), slice(0, 2052)), 4, 8),             # below: vec4 slots past the end masked
            ((slice(None), slice(0, 1034)), 1, 32),            # a partial last vec4: scalar registers
            ((slice(None), slice(1, 4097)), 1, 32),            # misaligned start, at capacity
            ((slice(None), slice(0, 4100)), 4, 0),             # just above: the two-sweep kernel
            ((slice(None), slice(0, 4097)), 1, 0),
            ((slice(None), slice(0, 8)), 4, 8),                # an invocation holding only NaN and -inf
            ((slice(None), slice(0, 7)), 1, 32)]


def _check_softmax(got, v_np, dtype, log=False):
    """NaN and ±inf exactly where numpy has them; finite values close."""
    with np.errstate(invalid="ignore"):
        ref = softmax_ref(v_np, -1, log)
    g = got.numpy().astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(ref)) and np.array_equal(np.isinf(g), np.isinf(ref))
    ok = np.isfinite(ref)
    tol = (3e-3 if dtype == "float16" else 2e-5) * (10 if log else 1)
    np.testing.assert_allclose(g[ok], ref[ok], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("in_registers", [True, False])
def test_softmax_rows_in_registers(host, ctx, dtype, in_registers, monkeypatch):
    """Rows up to 4096 elements are read once into registers; longer rows
    fall back to the two-sweep kernel. Both agree with numpy, NaN and
    -inf included (an all -inf row is NaN, as in numpy)."""
    from guestcompute.ops import normalize
    from guestcompute.ops.base import registered_ops
    need(ctx, dtype)
    monkeypatch.setattr(normalize, "SOFTMAX_IN_REGISTERS", in_registers)
    rng = np.random.default_rng(4)
    x_np = (rng.standard_normal((4, 4104)) * 4).astype(dtype)
    x_np[0, [0, 7, 1033, 2051, 4095, 4099]] = -np.inf
    x_np[1] = -np.inf
    x_np[2, [1500, 5]] = np.nan
    x_np[2, [4, 6, 7]] = -np.inf
    x_np[3, 4095] = 30.0
    x = ctx.tensor(x_np)
    views = [(x[idx], x_np[idx]) for idx, _, _ in _softmax_cases()]
    for (v, _), (_, vec, slots) in zip(views, _softmax_cases()):
        spec = registered_ops()["softmax"](ctx, v, -1).dispatches[0].spec
        assert (spec.param("vec", 1), spec.param("slots", 0)) == (vec, slots if in_registers else 0)
    got = host.run(ctx, lambda rec: [f(v) for v, _ in views for f in (rec.softmax, rec.log_softmax)])
    for k, (_, v_np) in enumerate(views):
        _check_softmax(got[2 * k], v_np, dtype)
        _check_softmax(got[2 * k + 1], v_np, dtype, log=True)
    y, z = (ctx.tensor(np.ascontiguousarray(x_np[:, :4096])) for _ in range(2))  # in place: vec4, scalar
    zv = z[:, 1:4093]
    host.run(ctx, lambda rec: (rec.softmax(y, out=y), rec.log_softmax(zv, out=zv)))
    _check_softmax(y, x_np[:, :4096], dtype)
    _check_softmax(zv, x_np[:, 1:4093], dtype, log=True)
    np.testing.assert_array_equal(z.numpy()[:, [0, 4093, 4094, 4095]], x_np[:, [0, 4093, 4094, 4095]])
