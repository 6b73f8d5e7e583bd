"""Elementwise math on NaN, ±inf, ±0 and float32 subnormals against numpy,
on both host profiles and every kernel width (vec4, vec2, scalar).

pow follows the C99 Annex F special cases as np.power does; the unary ops,
clamp, where and cast follow their numpy counterparts; log, sqrt and rsqrt
of subnormal inputs are right on devices that flush or mishandle them."""
import itertools
import math
import warnings

import numpy as np
import pytest

from guestcompute.ops.base import registered_ops

F32 = np.float32
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0]
POW_BASES = SPECIAL + [1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0]
# integral and fractional, odd and even, huge (every float32 >= 2**24 is an even integer)
POW_EXPONENTS = SPECIAL + [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 0.3, -0.3, 3.3, -3.3,
                           2.0 ** 30, -(2.0 ** 30) - 128.0]
UNARY_VALUES = SPECIAL + [1.0, -1.0, 0.3, -0.3, 0.6, -0.7, 2.5, -2.5, 20.0, -20.0, 100.0, -100.0]
SUBNORMALS = [1e-45, 3e-45, 1e-42, 1e-40, 1e-39, 5.9e-39, 1.1754942e-38]
SMALLEST_NORMAL = 1.17549435e-38
WIDTH_PADDING = {4: 0, 2: 2, 1: 1}      # n % 4 for a size that allows vec4, only vec2, only scalars


def numpy_quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*args)


def sized_for(values, width):
    """``values`` repeated cyclically up to the next size whose contiguous
    kernel has exactly ``width`` (n % 4 == 0, == 2, odd)."""
    values = list(values)
    n = len(values)
    while not (n % 4 == WIDTH_PADDING[width] if width != 1 else n % 2 == 1):
        n += 1
    return [values[k % len(values)] for k in range(n)]


def planned_width(ctx, name, *args, **kw):
    spec = registered_ops()[name](ctx, *args, **kw).dispatches[0].spec
    assert spec.param("mode") == "contig"
    return spec.param("width")


def assert_like_numpy(got, want, rtol, atol=0.0, where=None):
    """NaN where numpy has NaN; ±inf and ±0 exactly, sign included; other
    values within tolerance. A result numpy has in the float32 subnormal
    range may also be ±0 (the documented flush of subnormal results).
    ``where`` names the inputs in the message."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    where = np.arange(got.size) if where is None else where
    exact = np.isinf(want) | (want == 0)
    bad = np.isnan(got) != np.isnan(want)
    bad |= exact & ~np.isnan(want) & ((got != want) | (np.signbit(got) != np.signbit(want)))
    near = ~exact & ~np.isnan(want)
    with np.errstate(invalid="ignore"):
        close = np.abs(got - want) <= atol + rtol * np.abs(want)
    flushed = (np.abs(want) < np.finfo(F32).smallest_normal) & (got == 0) \
        & (np.signbit(got) == np.signbit(want))
    bad |= near & ~close & ~flushed
    assert not bad.any(), "\n".join(f"input {w}: got {g!r}, numpy {r!r}"
                                    for w, g, r in zip(np.asarray(where, object)[bad], got[bad], want[bad]))


# -- pow -------------------------------------------------------------------------------

def pow_pairs(dtype):
    exponents = POW_EXPONENTS
    if dtype == "float16":       # its huge exponents: even integers within float16's range
        exponents = [e for e in POW_EXPONENTS if not abs(e) > 65504] + [2048.0, -2050.0]
    pairs = list(itertools.product(POW_BASES, exponents))
    if dtype == "float32":
        pairs += [(1e-40, 0.5), (3e-45, -0.25), (1e-39, 0.1)]   # subnormal bases, normal results
    return pairs


def pow_tolerance(dtype):
    return 2e-3 if dtype == "float16" else 1e-5


@pytest.mark.parametrize("width", [4, 2, 1])
def test_pow_c99_special_cases_tensor_exponent(host, ctx, width):
    pairs = sized_for(pow_pairs("float32"), width)
    a_np, b_np = (np.array(v, F32) for v in zip(*pairs))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    assert planned_width(ctx, "pow", a, b) == width
    got = host.run(ctx, lambda rec: rec.pow(a, b))
    assert_like_numpy(got.numpy(), numpy_quiet(np.power, a_np, b_np), pow_tolerance("float32"),
                      where=pairs)


@pytest.mark.parametrize("width", [4, 2, 1])
def test_pow_c99_special_cases_scalar_exponent(host, ctx, width):
    bases_np = np.array(sized_for(POW_BASES, width), F32)
    bases = ctx.tensor(bases_np)
    assert planned_width(ctx, "pow", bases, 0.3) == width
    got = host.run(ctx, lambda rec: [rec.pow(bases, e) for e in POW_EXPONENTS])
    for e, g in zip(POW_EXPONENTS, got):
        # The reference takes the exponent as an array: np.power(x, 0.5) with a
        # scalar 0.5 is computed as sqrt(x) and departs from C99 at -inf and -0
        # (NaN and -0 instead of inf and +0); a scalar exponent here behaves
        # exactly as the same value in a tensor.
        exponent = np.full_like(bases_np, e)
        assert_like_numpy(g.numpy(), numpy_quiet(np.power, bases_np, exponent), pow_tolerance("float32"),
                          where=[(b, e) for b in bases_np])


def test_pow_special_cases_float16(modern_host, modern_ctx):
    ctx = modern_ctx
    pairs = pow_pairs("float16")
    a_np, b_np = (np.array(v, np.float16) for v in zip(*pairs))
    got = modern_host.run(ctx, lambda rec: (rec.pow(ctx.tensor(a_np), ctx.tensor(b_np)),
                                            rec.pow(ctx.tensor(a_np), -0.5)))
    assert_like_numpy(got[0].numpy(), numpy_quiet(np.power, a_np, b_np), 2e-3, where=pairs)
    exponent = np.full_like(a_np, -0.5)
    assert_like_numpy(got[1].numpy(), numpy_quiet(np.power, a_np, exponent), 2e-3, where=a_np)


# -- unary ops -------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def at_minus_inf(x, value, rest):
    """``rest`` with the limit ``value`` at -inf (where the formula is -inf * 0)."""
    return np.where(x == -np.inf, value, rest)


UNARY_REFERENCE = {
    # the library's own math (exp log sin cos tanh sigmoid silu): 3 ulp is 3.6e-7
    "neg": (np.negative, 0),
    "abs": (np.abs, 0),
    "exp": (np.exp, 4e-7),
    "log": (np.log, 4e-7),
    "sqrt": (np.sqrt, 2e-6),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 2e-6),
    "sin": (np.sin, 4e-7),
    "cos": (np.cos, 4e-7),
    "tanh": (np.tanh, 4e-7),
    # in float64: float32's 1 / (1 + e**100) is 0, sigmoid(-100) is 3.7e-44
    "sigmoid": (lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(F32), 4e-7),
    "relu": (lambda x: np.maximum(x, F32(0)), 0),
    # silu and gelu have no numpy function: the formulas, with their limit -0 at -inf
    "silu": (lambda x: at_minus_inf(x, -0.0, x / (1 + np.exp(-x))), 4e-7),
    "gelu": (lambda x: at_minus_inf(x, -0.0, 0.5 * x * (1 + _erf(x.astype(np.float64) / math.sqrt(2)))),
             2e-6),
}


@pytest.mark.parametrize("width", [4, 2, 1])
@pytest.mark.parametrize("name", sorted(UNARY_REFERENCE))
def test_unary_special_values_like_numpy(host, ctx, name, width):
    x_np = np.array(sized_for(UNARY_VALUES, width), F32)
    x = ctx.tensor(x_np)
    assert planned_width(ctx, name, x) == width
    got = host.run(ctx, lambda rec: getattr(rec, name)(x))
    reference, rtol = UNARY_REFERENCE[name]
    want = numpy_quiet(reference, x_np)
    # gelu's erfc approximation is accurate to 1.5e-7 absolute, not relative
    assert_like_numpy(got.numpy(), want, rtol, atol=2e-7 if name == "gelu" else 0.0, where=x_np)


def test_gelu_tanh_special_values(host, ctx):
    x_np = np.array(UNARY_VALUES, F32)
    got = host.run(ctx, lambda rec: rec.gelu(ctx.tensor(x_np), approximate="tanh"))
    u = np.sqrt(2 / np.pi) * (x_np + 0.044715 * x_np.astype(np.float64) ** 3)
    want = numpy_quiet(lambda: at_minus_inf(x_np, -0.0, 0.5 * x_np * (1 + np.tanh(u))))
    assert_like_numpy(got.numpy(), want, 2e-6, atol=2e-7, where=x_np)


def test_unary_special_values_float16(modern_host, modern_ctx):
    ctx = modern_ctx
    x_np = np.array(UNARY_VALUES, np.float16)
    names = sorted(UNARY_REFERENCE)
    got = modern_host.run(ctx, lambda rec: [getattr(rec, name)(ctx.tensor(x_np)) for name in names])
    for name, g in zip(names, got):
        reference, _ = UNARY_REFERENCE[name]
        # fp32 math, as the kernels do, rounded to float16 (beyond its range: ±inf)
        want = numpy_quiet(lambda v: reference(v).astype(np.float16), x_np.astype(F32))
        assert_like_numpy(g.numpy(), want, 2e-3, atol=1e-3 if name == "gelu" else 0.0, where=x_np)


def test_tanh_keeps_relative_precision_near_zero(host, ctx):
    x_np = np.concatenate([np.geomspace(1e-45, 0.7, 200, dtype=F32), SUBNORMALS]).astype(F32)
    x_np = np.concatenate([x_np, -x_np])
    got = host.run(ctx, lambda rec: rec.tanh(ctx.tensor(x_np)))
    assert_like_numpy(got.numpy(), np.tanh(x_np), 1e-6, where=x_np)


# -- subnormal inputs --------------------------------------------------------------------

@pytest.mark.parametrize("name,reference", [("log", np.log), ("sqrt", np.sqrt),
                                            ("rsqrt", lambda x: 1 / np.sqrt(x))])
def test_subnormal_inputs_decoded_from_bits(host, ctx, name, reference):
    x_np = np.array(SUBNORMALS + [SMALLEST_NORMAL] + [-v for v in SUBNORMALS], F32)
    assert np.all(np.abs(x_np[:len(SUBNORMALS)]) < np.finfo(F32).smallest_normal)
    got = host.run(ctx, lambda rec: getattr(rec, name)(ctx.tensor(x_np)))
    assert_like_numpy(got.numpy(), numpy_quiet(reference, x_np), 1e-6, where=x_np)


# -- clamp, maximum/minimum, where, cast ----------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_clamp_propagates_nan_like_np_clip(host, ctx, dtype):
    if dtype == "float16" and host.profile == "bare":
        pytest.skip("float16 tensors need 16-bit storage (modern profile)")
    x_np = np.array(UNARY_VALUES, dtype)
    x = ctx.tensor(x_np)
    bounds = [(-1, 1), (None, 0.5), (-0.5, None), (2, -2), (float("nan"), 1), (0, float("nan")),
              (-np.inf, np.inf)]
    got = host.run(ctx, lambda rec: [rec.clamp(x, lo, hi) for lo, hi in bounds])
    for (lo, hi), g in zip(bounds, got):
        want = numpy_quiet(np.clip, x_np, None if lo is None else np.array(lo, dtype),
                           None if hi is None else np.array(hi, dtype))
        assert_like_numpy(g.numpy(), want, 0, where=[(v, lo, hi) for v in x_np])


def test_maximum_minimum_where_on_special_values(host, ctx):
    a_np, b_np = (np.array(v, F32) for v in zip(*itertools.product(UNARY_VALUES[:8], UNARY_VALUES[:8])))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    mx, mn, mx_s, wh, wh_s = host.run(ctx, lambda rec: (
        rec.maximum(a, b), rec.minimum(a, b), rec.maximum(a, float("nan")),
        rec.where(a, a, b), rec.where(b, 7.0, a)))
    np.testing.assert_array_equal(mx.numpy(), np.maximum(a_np, b_np))
    np.testing.assert_array_equal(mn.numpy(), np.minimum(a_np, b_np))
    assert np.isnan(mx_s.numpy()).all()
    # NaN is a true condition, as np.where has it (nonzero)
    np.testing.assert_array_equal(wh.numpy(), np.where(a_np, a_np, b_np))
    np.testing.assert_array_equal(wh_s.numpy(), np.where(b_np, F32(7), a_np))


def test_float16_subnormals_compute_exactly(modern_host, modern_ctx):
    ctx = modern_ctx
    x_np = np.array([6e-8, 1e-6, 3e-5, -1e-6, 6.1e-5], np.float16)   # all below float16's smallest normal
    assert np.all(np.abs(x_np) < np.finfo(np.float16).smallest_normal)
    t = ctx.tensor(x_np)
    wide, logs, half = modern_host.run(ctx, lambda rec: (rec.cast(t, "float32"), rec.log(t), rec.mul(t, 0.5)))
    np.testing.assert_array_equal(wide.numpy(), x_np.astype(F32))
    assert_like_numpy(logs.numpy(), numpy_quiet(np.log, x_np.astype(F32)).astype(np.float16), 1e-3, where=x_np)
    np.testing.assert_array_equal(half.numpy(), x_np * np.float16(0.5))


def test_cast_special_values_between_floats(modern_host, modern_ctx):
    ctx = modern_ctx
    x_np = np.array(UNARY_VALUES + [70000.0, -70000.0, 1e-8], F32)   # beyond float16: ±inf and 0
    h = modern_host.run(ctx, lambda rec: rec.cast(ctx.tensor(x_np), "float16"))
    back = modern_host.run(ctx, lambda rec: rec.cast(h, "float32"))
    want = numpy_quiet(x_np.astype, np.float16)
    assert_like_numpy(h.numpy(), want, 0, where=x_np)
    assert_like_numpy(back.numpy(), want.astype(F32), 0, where=x_np)
