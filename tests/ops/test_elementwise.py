"""Elementwise math (binary, unary, clamp, where, cast) against numpy on both
host profiles: broadcasting, strided views, vec4/vec2/scalar kernels."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from strided_views import broadcast_to_operand, draw_view, need, random, shapes

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_erf = np.vectorize(math.erf)


def close(got, ref, dtype, rtol=None, atol=None):
    """Compare with a tolerance fitting the dtype (integers exactly)."""
    if dtype in ("int32", "uint32", "uint8"):
        np.testing.assert_array_equal(got, np.asarray(ref).astype(dtype))
        return
    if dtype == "float16":
        rtol, atol = max(rtol or 0, 2e-3), max(atol or 0, 1e-3)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol or 2e-6, atol=atol or 0)


# -- binary ----------------------------------------------------------------------------

def binary_inputs(rng, op, dtype, shape_a, shape_b):
    """Operands inside each op's domain (no division by zero, positive pow base)."""
    a = random(rng, shape_a, dtype, 0 if dtype == "uint32" else -20, 20)
    b = random(rng, shape_b, dtype, 0 if dtype == "uint32" else -20, 20)
    if op in ("div", "floordiv"):
        b = np.where(b == 0, 3, b).astype(dtype)
        if dtype in ("float32", "float16"):
            b = (np.sign(b) * (0.5 + np.abs(b) / 10)).astype(dtype)
    if op == "pow":
        if dtype in ("float32", "float16"):
            a = random(rng, shape_a, dtype, 0.1, 3.0)
            b = random(rng, shape_b, dtype, -3.0, 3.0)
        else:
            a = random(rng, shape_a, dtype, 0 if dtype == "uint32" else -6, 7)
            b = random(rng, shape_b, dtype, 0, 9)
    return a, b


def binary_ref(op, a, b, dtype):
    """numpy's result: floats in float64, integers in their own (wrapping) dtype."""
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "floordiv": np.floor_divide, "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}
    if dtype in ("float32", "float16"):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(all="ignore"):
        return fns[op](a, b)


FLOAT_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
INT_BINARY = ["add", "sub", "mul", "floordiv", "pow", "maximum", "minimum"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_binary_ops_broadcast_and_scalars(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(3)
    ops = FLOAT_BINARY if dtype.startswith("float") else INT_BINARY
    cases = []
    for op in ops:
        a, b = binary_inputs(rng, op, dtype, (3, 1, 37), (5, 37))
        s = float(b.flat[0]) if dtype.startswith("float") else int(b.flat[0])
        cases.append((op, a, b, s, ctx.tensor(a), ctx.tensor(b)))
    got = host.run(ctx, lambda rec: [(getattr(rec, op)(ta, tb), getattr(rec, op)(ta, s))
                                     for op, a, b, s, ta, tb in cases])
    for (op, a, b, s, _, _), (tensor_result, scalar_result) in zip(cases, got):
        rtol = 2e-5 if op == "pow" else None
        assert tensor_result.shape == (3, 5, 37) and tensor_result.dtype.name == dtype
        close(tensor_result.numpy(), binary_ref(op, a, b, dtype), dtype, rtol)
        close(scalar_result.numpy(), binary_ref(op, a, np.asarray(s, a.dtype), dtype), dtype, rtol)


def test_integer_division_is_floor_division(host, ctx):
    a_np = np.array([7, -7, 7, -7, 0, 5, -5, 2**31 - 1, -2**31, -2**31, 9, -9], np.int32)
    b_np = np.array([2, 2, -2, -2, 3, 0, 0, 7, -1, 1, 3, 3], np.int32)
    ua_np = np.array([7, 0, 2**32 - 1, 5, 9], np.uint32)
    ub_np = np.array([2, 3, 7, 0, 3], np.uint32)
    a, b, ua, ub = map(ctx.tensor, (a_np, b_np, ua_np, ub_np))
    q, uq, qs = host.run(ctx, lambda rec: (rec.floordiv(a, b), rec.floordiv(ua, ub), rec.floordiv(a, -4)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q.numpy(), a_np // b_np)        # x // 0 == 0, INT_MIN // -1 wraps
        np.testing.assert_array_equal(uq.numpy(), ua_np // ub_np)
        np.testing.assert_array_equal(qs.numpy(), a_np // np.int32(-4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.floordiv(ctx.tensor(np.ones(3, np.float32)), 2.0)
    host.submit_and_wait(cmd)


def test_integer_true_division_gives_float32(host, ctx):
    # numpy's int / int is float64; guestcompute has no float64 and gives
    # float32, with numpy's inf and NaN for x / 0.
    a_np = np.array([7, -7, 1, 0, 5, -5, 0, 2**24, -2**31, 2**31 - 1, 1, 3], np.int32)
    b_np = np.array([2, 2, 3, 7, 0, 0, 0, 3, 7, -1, -2**31, 10], np.int32)
    ua_np = np.array([7, 0, 2**32 - 1, 5, 0, 1], np.uint32)
    ub_np = np.array([2, 3, 7, 0, 0, 3], np.uint32)
    a, b, ua, ub = map(ctx.tensor, (a_np, b_np, ua_np, ub_np))
    q, uq, qs, out = host.run(ctx, lambda rec: (rec.div(a, b), rec.div(ua, ub), rec.div(a, -4),
                                                rec.div(a, b, out=ctx.empty(a.shape, "float32"))))
    assert q.dtype.name == uq.dtype.name == qs.dtype.name == "float32"
    with np.errstate(all="ignore"):
        for got, want in ((q, a_np / b_np), (uq, ua_np / ub_np), (qs, a_np / -4), (out, a_np / b_np)):
            np.testing.assert_allclose(got.numpy(), want.astype(np.float32), rtol=3e-7)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.div(a, b, out=ctx.empty(a.shape, "int32"))     # the result is float32
    host.submit_and_wait(cmd)


def test_pow_follows_numpy_rules(host, ctx):
    a_np = np.array([-2, -2, -2, -8, 0, 0, 0, 3, 2.5, -1.5, 4, 1], np.float32)
    b_np = np.array([3, 2, 0.5, -1, 2, -1, 0, 0, 1.5, 4, -0.5, 7], np.float32)
    ia_np = np.array([3, -3, 7, 1, -1, -1, 2, 5], np.int32)
    ib_np = np.array([3, 3, 20, -5, -5, -4, -1, 0], np.int32)
    a, b, ia, ib = map(ctx.tensor, (a_np, b_np, ia_np, ib_np))
    fp, ip, ipos = host.run(ctx, lambda rec: (rec.pow(a, b), rec.pow(ia, ib), rec.pow(ia, 3)))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(fp.numpy(), np.power(a_np.astype(np.float64), b_np), rtol=1e-5)
    # numpy refuses negative int exponents; here they truncate 1 / a**n toward zero
    expect = np.array([27, -27, 7 ** 20 % 2 ** 32, 1, -1, 1, 0, 1], np.int64)
    expect = np.where(expect >= 2 ** 31, expect - 2 ** 32, expect).astype(np.int32)
    np.testing.assert_array_equal(ip.numpy(), expect)
    np.testing.assert_array_equal(ipos.numpy(), ia_np ** 3)
    with pytest.raises(gc.InvalidArgumentError, match="negative"):
        host.run(ctx, lambda rec: rec.pow(ia, -2))


def test_maximum_minimum_propagate_nan(host, ctx):
    a_np = np.array([1, np.nan, 3, np.nan, -np.inf, 2], np.float32)
    b_np = np.array([np.nan, 2, 1, np.nan, 5, np.inf], np.float32)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    mx, mn, ms = host.run(ctx, lambda rec: (rec.maximum(a, b), rec.minimum(a, b), rec.maximum(a, 2.5)))
    np.testing.assert_array_equal(mx.numpy(), np.maximum(a_np, b_np))
    np.testing.assert_array_equal(mn.numpy(), np.minimum(a_np, b_np))
    np.testing.assert_array_equal(ms.numpy(), np.maximum(a_np, np.float32(2.5)))


# -- unary ----------------------------------------------------------------------------------

def gelu_exact(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


UNARY = {   # op: (numpy reference in float64, domain)
    "neg": (np.negative, (-10, 10)), "abs": (np.abs, (-10, 10)), "exp": (np.exp, (-10, 10)),
    "log": (np.log, (0.01, 50)), "sqrt": (np.sqrt, (0, 50)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 50)),
    "sin": (np.sin, (-10, 10)), "cos": (np.cos, (-10, 10)), "tanh": (np.tanh, (-12, 12)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-30, 30)), "relu": (lambda x: np.maximum(x, 0), (-10, 10)),
    "silu": (lambda x: x / (1 + np.exp(-x)), (-30, 30)), "gelu": (gelu_exact, (-12, 12)),
}
INT_UNARY = {"int32": ["neg", "abs", "relu"], "uint32": ["neg", "abs"]}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_float_unary_ops_match_numpy(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(5)
    cases = {op: random(rng, 1003, dtype, *domain) for op, (_, domain) in UNARY.items()}
    tensors = {op: ctx.tensor(x) for op, x in cases.items()}
    got = host.run(ctx, lambda rec: {op: getattr(rec, op)(t) for op, t in tensors.items()})
    for op, x in cases.items():
        # fp32 transcendentals: a few ulp relative, absolute near zero crossings
        close(got[op].numpy(), UNARY[op][0](x.astype(np.float64)), dtype, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_unary_ops(host, ctx, dtype):
    x_np = np.array([0, 1, 5, 2**31 - 1, 17, 3], dtype) if dtype == "uint32" else \
        np.array([0, -1, 5, -2**31, 2**31 - 1, -17], dtype)
    x = ctx.tensor(x_np)
    got = host.run(ctx, lambda rec: [getattr(rec, op)(x) for op in INT_UNARY[dtype]])
    refs = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, 0)}
    with np.errstate(all="ignore"):
        for op, g in zip(INT_UNARY[dtype], got):
            np.testing.assert_array_equal(g.numpy(), refs[op](x_np))
    with pytest.raises(gc.DTypeError, match="cast"):
        host.run(ctx, lambda rec: rec.exp(x))


def test_unary_special_values(host, ctx):
    x_np = np.array([-1, 0, 1, 4, np.inf], np.float32)
    x = ctx.tensor(x_np)
    log, sqrt, rsqrt = host.run(ctx, lambda rec: (rec.log(x), rec.sqrt(x), rec.rsqrt(x)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(log.numpy(), np.log(x_np))
        np.testing.assert_array_equal(sqrt.numpy(), np.sqrt(x_np))
        np.testing.assert_array_equal(rsqrt.numpy(), 1 / np.sqrt(x_np))


def test_gelu_tanh_approximation(host, ctx):
    x_np = np.linspace(-12, 12, 999, dtype=np.float32)
    x = ctx.tensor(x_np)
    approx, exact = host.run(ctx, lambda rec: (rec.gelu(x, approximate="tanh"), rec.gelu(x)))
    x64 = x_np.astype(np.float64)
    ref = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(approx.numpy(), ref, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(exact.numpy(), gelu_exact(x64), rtol=2e-5, atol=1e-6)
    # the two forms really differ: the test above would catch a swapped formula
    assert np.abs(ref - gelu_exact(x64)).max() > 1e-4
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.gelu(x, approximate="erf"))


# -- clamp, where, cast ---------------------------------------------------------------------

def test_clamp_like_np_clip(host, ctx):
    rng = np.random.default_rng(7)
    x_np = rng.uniform(-5, 5, (7, 33)).astype(np.float32)
    i_np = rng.integers(-100, 100, 130).astype(np.int32)
    u_np = rng.integers(0, 100, 130).astype(np.uint32)
    x, i, u = ctx.tensor(x_np), ctx.tensor(i_np), ctx.tensor(u_np)
    got = host.run(ctx, lambda rec: (rec.clamp(x, -1, 2.5), rec.clamp(x.T, hi=0.5), rec.clamp(x, lo=1),
                                     rec.clamp(x, 3, -3), rec.clamp(i, -10, 20), rec.clamp(u, 5, 50)))
    refs = (np.clip(x_np, -1, 2.5), np.clip(x_np.T, None, 0.5), np.clip(x_np, 1, None),
            np.minimum(np.maximum(x_np, 3), -3), np.clip(i_np, -10, 20), np.clip(u_np, 5, 50))
    for g, r in zip(got, refs):
        np.testing.assert_array_equal(g.numpy(), r)
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.clamp(x))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.clamp(u, -1, 5))       # -1 does not fit uint32


@pytest.mark.parametrize("cond_dtype", ["uint32", "int32", "float32", "float16", "uint8"])
def test_where_with_any_condition_dtype(host, ctx, cond_dtype):
    need(ctx, cond_dtype)
    if cond_dtype == "uint8" and not ctx.caps.uint8_storage:
        pytest.skip("uint8 needs 8-bit storage, which only the modern profile enables")
    rng = np.random.default_rng(11)
    cond_np = (rng.integers(0, 3, (4, 1, 6)) * rng.integers(0, 2, (4, 1, 6))).astype(cond_dtype)
    if cond_dtype.startswith("float"):
        cond_np[0, 0, :2] = [np.nan, -0.5]                      # NaN and negatives are true
    a_np = rng.standard_normal((5, 6)).astype(np.float32)
    b_np = rng.standard_normal((4, 5, 6)).astype(np.float32)
    ia_np = rng.integers(-9, 9, (4, 5, 6)).astype(np.int32)
    cond, a, b, ia = map(ctx.tensor, (cond_np, a_np, b_np, ia_np))
    got = host.run(ctx, lambda rec: (rec.where(cond, a, b), rec.where(cond, 7.5, b), rec.where(cond, a, -1),
                                     rec.where(cond, ia, 3), rec.where(cond, ia[:, ::-1], ia)))
    refs = (np.where(cond_np, a_np, b_np), np.where(cond_np, np.float32(7.5), b_np),
            np.where(cond_np, a_np, np.float32(-1)), np.where(cond_np, ia_np, np.int32(3)),
            np.where(cond_np, ia_np[:, ::-1], ia_np))
    for g, r in zip(got, refs):
        assert g.dtype.name == r.dtype.name
        np.testing.assert_array_equal(g.numpy(), r)


def test_where_errors(host, ctx):
    cond = ctx.tensor(np.ones(4, np.uint32))
    a, i = ctx.tensor(np.ones(4, np.float32)), ctx.tensor(np.ones(4, np.int32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.where(cond, a, i)
        with pytest.raises(gc.InvalidArgumentError):
            rec.where(cond, 1.0, 2.0)
        with pytest.raises(gc.ShapeError):
            rec.where(ctx.tensor(np.ones(3, np.uint32)), a, a)
        with pytest.raises(gc.InvalidArgumentError):
            rec.where(cond, i, 0.5)
    host.submit_and_wait(cmd)


CAST_DATA = {
    "float32": np.array([-3.7, -0.5, 0, 0.5, 1.5, 2.9, 100.25, 250.0], np.float32),
    "float16": np.array([-3.7, -0.5, 0, 0.5, 1.5, 2.9, 100.25, 250.0], np.float16),
    "int32": np.array([-70000, -1, 0, 1, 7, 255, 65504, 2**31 - 1], np.int32),
    "uint32": np.array([0, 1, 7, 255, 256, 70000, 2**31, 2**32 - 1], np.uint32),
    "uint8": np.array([0, 1, 7, 100, 128, 200, 254, 255], np.uint8),
}


def cast_in_range(src: np.ndarray, dst: str) -> np.ndarray:
    """The elements whose conversion numpy and C both define."""
    if src.dtype.kind == "f" and dst in ("int32", "uint32", "uint8"):
        lo, hi = (0, 255) if dst == "uint8" else ((0, 2**32 - 1) if dst == "uint32" else (-2**31, 2**31 - 1))
        wide = src.astype(np.float64)
        return (wide >= lo) & (wide <= hi)
    if src.dtype.kind in "iu" and dst == "uint8":
        return (src >= 0) & (src <= 255)      # wider ints truncated to 8 bits is numpy's wrap
    if src.dtype.kind in "iu" and dst == "float16":
        return np.abs(src.astype(np.float64)) <= 65504
    return np.ones(src.shape, bool)


@pytest.mark.parametrize("src", list(CAST_DATA))
def test_cast_between_every_dtype(host, ctx, src):
    need(ctx, src)
    dsts = [d for d in CAST_DATA if ctx.caps.float16_storage or d != "float16"]
    dsts = [d for d in dsts if ctx.caps.uint8_storage or d != "uint8"]
    if src == "uint8" and not ctx.caps.uint8_storage:
        pytest.skip("uint8 needs 8-bit storage, which only the modern profile enables")
    x_np = CAST_DATA[src]
    x = ctx.tensor(x_np)
    got = host.run(ctx, lambda rec: {d: rec.cast(x, d) for d in dsts} | {"odd": rec.cast(x[1:6], "float32")})
    for d in dsts:
        assert got[d].dtype.name == d
        ok = cast_in_range(x_np, d)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got[d].numpy()[ok], x_np.astype(d)[ok], err_msg=f"{src} -> {d}")
    np.testing.assert_array_equal(got["odd"].numpy(), x_np[1:6].astype(np.float32))


def test_cast_float32_to_float16_rounds_to_nearest(modern_host, modern_ctx):
    x_np = np.random.default_rng(2).standard_normal(4000).astype(np.float32) * 100
    x = modern_ctx.tensor(x_np)
    h = modern_host.run(modern_ctx, lambda rec: rec.cast(x, "float16"))
    np.testing.assert_array_equal(h.numpy(), x_np.astype(np.float16))


def test_cast_errors(host, ctx):
    x = ctx.tensor(np.ones(4, np.float32))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.cast(x, "uint64"))         # stored, not computed with
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.cast(ctx.tensor(np.ones(4, np.complex64)), "float32"))   # take .real
    if not ctx.caps.float16_storage:
        with pytest.raises(gc.UnsupportedError):
            host.run(ctx, lambda rec: rec.cast(x, "float16"))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.cast(x, "int32", out=ctx.empty((4,), "uint32")))


# -- layouts, kernel choice and caching ----------------------------------------------------

def test_vector_widths_and_offsets(host, ctx):
    """Sizes and offsets that allow vec4, only vec2, or only scalars."""
    base_np = np.random.default_rng(9).uniform(0.5, 4, 1030).astype(np.float32)
    base = ctx.tensor(base_np)
    div = registered_ops()["div"]
    cases = {4: (base[:1024], base[4:1028]), 2: (base[:1022], base[2:1024]), 1: (base[1:1004], base[:1003])}
    for width, (a, b) in cases.items():
        spec = div(ctx, a, b).dispatches[0].spec
        assert (spec.param("mode"), spec.param("width")) == ("contig", width)
    got = host.run(ctx, lambda rec: [rec.div(a, b) for a, b in cases.values()] + [rec.sqrt(base[3:])])
    for (a, b), g in zip(cases.values(), got):
        np.testing.assert_allclose(g.numpy(), a.numpy() / b.numpy(), rtol=2e-6)
    np.testing.assert_allclose(got[-1].numpy(), np.sqrt(base_np[3:]), rtol=2e-6)


def test_in_place_and_out_checks(host, ctx):
    x_np = np.linspace(0.5, 3, 64, dtype=np.float32)
    x = ctx.tensor(x_np)
    host.run(ctx, lambda rec: rec.sqrt(x, out=x))
    np.testing.assert_allclose(x.numpy(), np.sqrt(x_np), rtol=2e-6)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.ShapeError):
            rec.exp(x, out=ctx.empty((65,)))
        with pytest.raises(gc.DTypeError):
            rec.maximum(x, x, out=ctx.empty((64,), "int32"))
        with pytest.raises(gc.InvalidArgumentError):
            rec.minimum(x[1:], x[:-1], out=x[:-1])
        with pytest.raises(gc.DTypeError):
            rec.pow(x, ctx.tensor(np.ones(64, np.int32)))
        with pytest.raises(gc.ShapeError):
            rec.div(x, ctx.tensor(np.ones(63, np.float32)))
        with pytest.raises(gc.InvalidArgumentError):
            rec.maximum(x, np.float32(2))          # numpy scalars are not Python numbers
        with pytest.raises(gc.InvalidArgumentError):
            rec.floordiv(ctx.tensor(np.ones(4, np.int32)), 1.5)
        with pytest.raises(gc.InvalidArgumentError):
            rec.tanh(x_np)
    host.submit_and_wait(cmd)


def test_one_pipeline_per_kernel_across_sizes(host, ctx):
    xs = [ctx.tensor(np.full(n, 0.5, np.float32)) for n in range(4, 4100, 292)]    # all vec4
    mats = [ctx.tensor(np.full((r, c), 2.0, np.float32)) for r, c in ((3, 5), (40, 7), (9, 130))]
    host.run(ctx, lambda rec: [rec.silu(x) for x in xs])
    assert ctx.cache_stats()["pipelines_created"] == 1
    host.run(ctx, lambda rec: [rec.maximum(m.T, 1.0) for m in mats])
    assert ctx.cache_stats()["pipelines_created"] == 2           # one strided kernel for every shape
    before = ctx.cache_stats()["pipeline_hits"]
    host.run(ctx, lambda rec: [rec.silu(x) for x in xs] + [rec.maximum(m.T, 1.0) for m in mats])
    assert ctx.cache_stats()["pipelines_created"] == 2
    assert ctx.cache_stats()["pipeline_hits"] - before == len(xs) + len(mats)


# -- hypothesis: shapes, broadcasting, views --------------------------------------------------

HYP_OPS = ["add", "div", "pow", "maximum", "floordiv", "exp", "tanh", "abs", "neg", "gelu", "clamp", "where"]


@HYP
@given(data=st.data())
def test_random_shapes_broadcasts_and_views(host, ctx, data):
    op = data.draw(st.sampled_from(HYP_OPS))
    dtype = "int32" if op == "floordiv" else data.draw(
        st.sampled_from(["float32", "int32"] if op in ("add", "maximum", "abs", "neg", "pow", "clamp", "where")
                        else ["float32"]))
    shape = data.draw(shapes(max_dims=4, max_side=7) | st.sampled_from([(129,), (3, 1025), (2, 70, 9)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    if op in ("exp", "tanh", "abs", "neg", "gelu", "clamp"):
        x, x_np = draw_view(data, ctx, shape, lambda s: random(rng, s, dtype, -5, 5))
        fn = {"clamp": lambda rec: rec.clamp(x, -2, 3)}.get(op, lambda rec: getattr(rec, op)(x))
        ref = {"exp": np.exp, "tanh": np.tanh, "abs": np.abs, "neg": np.negative, "gelu": gelu_exact,
               "clamp": lambda v: np.clip(v, -2, 3)}[op]
        got = host.run(ctx, fn)
        close(got.numpy(), ref(x_np.astype(np.float64) if dtype == "float32" else x_np), dtype,
              rtol=2e-5, atol=1e-6)
        return
    shape_a, shape_b = broadcast_to_operand(data, shape), broadcast_to_operand(data, shape)
    a_np, b_np = binary_inputs(rng, op if op != "where" else "add", dtype, shape_a, shape_b)
    a, a_np = draw_view(data, ctx, shape_a, lambda s: np.resize(a_np, s))
    b, b_np = draw_view(data, ctx, shape_b, lambda s: np.resize(b_np, s))
    if op == "where":
        cond, cond_np = draw_view(data, ctx, broadcast_to_operand(data, shape),
                                  lambda s: rng.integers(0, 2, s).astype(np.uint32))
        got = host.run(ctx, lambda rec: rec.where(cond, a, b))
        np.testing.assert_array_equal(got.numpy(), np.where(cond_np, a_np, b_np))
        return
    got = host.run(ctx, lambda rec: getattr(rec, op)(a, b))
    assert got.shape == np.broadcast_shapes(a_np.shape, b_np.shape)
    close(got.numpy(), binary_ref(op, a_np, b_np, dtype), dtype, rtol=2e-5 if op == "pow" else None)


def test_planned_specs_are_in_the_bake_catalogue(modern_ctx):
    """Every kernel these ops can pick is enumerated for baking (vec widths,
    strided ranks 4 and 6, scalar operands, where/cast dtype pairs)."""
    from guestcompute.ops import all_specs
    ctx, ops, catalogue = modern_ctx, registered_ops(), set(all_specs())
    planned = []

    def plan(name, *args, **kw):
        try:
            planned.extend(ops[name](ctx, *args, **kw).dispatches)
        except gc.DTypeError:
            pass                                  # an op/dtype pair that is not defined
    for dtype in ("float32", "float16", "int32", "uint32"):
        flat = ctx.empty((1030,), dtype)
        deep = ctx.empty((2, 2, 2, 2, 2, 3), dtype).permute(5, 4, 3, 2, 1, 0)   # rank 6, unmergeable
        views = [flat[:1024], flat[:1022], flat[:1021], flat[::2], deep]
        for v in views:
            for name in ("div", "floordiv", "pow", "maximum", "minimum"):
                plan(name, v, v)
                plan(name, v, 2)
            for name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                         "relu", "gelu", "silu"):
                plan(name, v)
            plan("gelu", v, approximate="tanh")
            plan("clamp", v, 0, 1)
            for target in ("float32", "float16", "int32", "uint32", "uint8"):
                plan("cast", v, target)
        for cond_dtype in ("float32", "float16", "int32", "uint32", "uint8"):
            cond = ctx.empty((1030,), cond_dtype)
            for c, v in ((cond[:1024], flat[:1024]), (cond[::2], flat[:515])):
                plan("where", c, v, v)
                plan("where", c, 1, v)
                plan("where", c, v, 1)
    layouts = {(d.spec.param("mode"), d.spec.param("width"), d.spec.param("rank")) for d in planned}
    assert layouts == {("contig", 4, None), ("contig", 2, None), ("contig", 1, None),
                       ("strided", 1, 4), ("strided", 1, 6)}
    missing = {d.spec.key for d in planned if d.spec not in catalogue}
    assert not missing, f"{len(missing)} planned specs missing from the catalogue"
