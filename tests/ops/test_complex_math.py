"""complex64 elementwise arithmetic (add sub mul div neg conj abs angle,
cast, copy) against numpy: the accuracy bounds of ops/complex_exprs.py over
parts spread across many binades, numpy's promotion of mixed operands,
broadcasting and views, special values, out= and the typed errors."""
import itertools
import pathlib
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import complex_exprs as cx
from guestcompute.ops.base import registered_ops
from guestcompute.ops.elementwise import plan_map
from strided_views import broadcast_to_operand, draw_view, need, shapes
from refusals import assert_all_refused

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BOUNDS = {"mul": 2.0 ** -22, "div": 2.0 ** -20, "abs": 1, "angle": 6}     # as documented (test_documented_bounds_...)


def parts(rng, shape, lo=-60, hi=60):
    """float32 values with random signs, mantissas and binades 2**lo .. 2**hi."""
    return (rng.choice([-1, 1], shape) * rng.uniform(1, 2, shape)
            * np.exp2(rng.integers(lo, hi + 1, shape))).astype(np.float32)


def cplx(rng, shape, lo=-60, hi=60):
    return (parts(rng, shape, lo, hi) + 1j * parts(rng, shape, lo, hi)).astype(np.complex64)


def ulps(got, exact):
    """|got - exact| in ulps of the float32 nearest ``exact`` (normal numbers)."""
    spacing = np.spacing(np.maximum(np.abs(exact).astype(np.float32), np.float32(2.0 ** -126)))
    return np.abs(got.astype(np.float64) - exact) / spacing


def check_bound(op, got, a, b=None):
    """``got`` (complex64 or float32) within the op's bound of the exact
    result of complex128 operands ``a`` (and ``b``)."""
    a = np.asarray(a, np.complex128)
    got = np.asarray(got)
    if op in ("abs", "angle"):
        exact = np.abs(a) if op == "abs" else np.angle(a)
        # A subnormal result may come back as zero: Vulkan lets a driver
        # flush subnormal results (NVIDIA's does: the angle of 1e38 + 1j).
        flushed = (np.abs(exact) < 2.0 ** -126) & (got == 0)
        assert (flushed | (ulps(got, exact) <= BOUNDS[op])).all(), op
        return
    b = np.asarray(b, np.complex128)
    exact = a * b if op == "mul" else a / b
    scale = np.abs(a) * np.abs(b) if op == "mul" else np.abs(exact)
    got = got.astype(np.complex128)
    for part in (np.real, np.imag):
        within = np.abs(part(got) - part(exact)) <= BOUNDS[op] * scale
        # A part whose exact value is subnormal may come back as zero: Vulkan
        # lets a driver flush subnormal results (docs/integration.md §16).
        flushed = (np.abs(part(exact)) < 2.0 ** -126) & (part(got) == 0)
        assert (within | flushed).all(), op


def run(host, ctx, fn):
    return host.run(ctx, fn)


# -- accuracy ------------------------------------------------------------------------------

@pytest.mark.parametrize("binades", [60, 3])
def test_accuracy_over_many_binades(host, ctx, binades):
    rng = np.random.default_rng(binades)
    a, b = cplx(rng, 1 << 14, -binades, binades), cplx(rng, 1 << 14, -binades, binades)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    got = run(host, ctx, lambda rec: {op: getattr(rec, op)(ta, tb) for op in ("add", "sub", "mul", "div")}
              | {op: getattr(rec, op)(ta) for op in ("abs", "angle", "neg", "conj")})
    np.testing.assert_array_equal(got["add"].numpy(), a + b)        # one rounding per part: numpy's
    np.testing.assert_array_equal(got["sub"].numpy(), a - b)
    np.testing.assert_array_equal(got["neg"].numpy(), -a)
    np.testing.assert_array_equal(got["conj"].numpy(), np.conj(a))
    assert got["abs"].dtype == got["angle"].dtype == gc.float32
    for op in ("mul", "div"):
        assert got[op].dtype == gc.complex64
        check_bound(op, got[op].numpy(), a, b)
    for op in ("abs", "angle"):
        check_bound(op, got[op].numpy(), a)


def test_no_overflow_or_underflow_inside_div_and_abs(host, ctx):
    """Parts near float32's ends: the scaled algorithms give the quotient and
    modulus where numpy's float32 formulas overflow (1 / (3e38 + 3e38j))."""
    big, small = np.float32(3e38), np.float32(2.0 ** -120)
    a = np.array([1, 1e-30, big + big / 2 * 1j, small + small * 1j, 3 + 4j, 1e18 + 1e18j], np.complex64)
    b = np.array([big + big * 1j, 1e-30 + 1e-30j, big - big * 1j, small - 2 * small * 1j, 1e-37 + 1e-37j,
                  1e-20 + 3e-20j], np.complex64)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    q, m = run(host, ctx, lambda rec: (rec.div(ta, tb), rec.abs(ta)))
    check_bound("div", q.numpy(), a, b)
    check_bound("abs", m.numpy(), a)
    np.testing.assert_array_equal(m.numpy()[4], np.float32(5))


def table_bounds(text: str) -> dict:
    """op -> bound of a complex bounds table (markdown or reST rows): 2**-k
    for ``2^-k``/``2**-k`` bounds, n for ``n ulp``."""
    bounds = {}
    for line in text.splitlines():
        m = re.match(r"(?:\|\s*`|)(mul|div|abs|angle)(?:`\s*\||\s{2,})\s*(.*)", line.strip())
        if not m:
            continue
        power = re.search(r"2(?:\^|\*\*)(-\d+)", m.group(2))
        ulp = re.match(r"(\d+) ulp", m.group(2))
        bounds[m.group(1)] = 2.0 ** int(power.group(1)) if power else int(ulp.group(1))
    return bounds


def test_documented_bounds_are_the_tested_ones():
    """docs/integration.md's complex table and ops/complex_exprs.py's state BOUNDS."""
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "integration.md").read_text()
    section = doc.split("**Complex arithmetic.**", 1)[1].split("\n\n**", 1)[0]
    assert table_bounds(section) == BOUNDS
    module = cx.__doc__.split("Accuracy", 1)[1].split("measured against", 1)[0]
    assert table_bounds(module) == BOUNDS
    for op in ("abs", "angle"):
        assert f"within {BOUNDS[op]} ulp" in registered_ops()[op].__doc__, op


# -- special values ---------------------------------------------------------------------------

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, 3e38, -3e38, 1e38, -1e38]   # huge: 1 / b is 0 on some drivers
VALUES = np.array([complex(x, y) for x, y in itertools.product(SPECIAL, SPECIAL)], np.complex64)


def same(got, want):
    """Equal as numpy's results: NaN where NaN (either sign), else the same value and sign."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind == "c":
        return same(got.real, want.real) & same(got.imag, want.imag)
    return (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))


def numpy_quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*args)


def unfused_product(a, b):
    """(product, rounded) of complex64 ``a`` and ``b`` by mul's formula,
    every product and sum rounded on its own (numpy's float32 ufuncs);
    ``rounded``: a part with a product that float32 rounds or overflows.
    numpy's loop fuses a product into the sum where the CPU has fused
    multiply-adds, so only the other parts are held to numpy's own result."""
    a, b = np.asarray(a, np.complex64), np.asarray(b, np.complex64)
    out = np.empty(np.broadcast(a, b).shape, np.complex64)
    rounded = np.zeros(out.shape, bool)
    for part, terms, sign in ((out.real, ((a.real, b.real), (a.imag, b.imag)), -1),
                              (out.imag, ((a.real, b.imag), (a.imag, b.real)), 1)):
        products = [numpy_quiet(np.multiply, x, y) for x, y in terms]
        part[...] = numpy_quiet(np.add, products[0], sign * products[1])
        for (x, y), p in zip(terms, products):
            exact = numpy_quiet(np.multiply, x.astype(np.float64), y.astype(np.float64))
            rounded |= (p != exact) & ~np.isnan(exact)
    return out, rounded


def check_mul(got, a, b):
    """mul's documented formula exactly, and numpy's result where no product rounds."""
    unfused, rounded = unfused_product(a, b)
    bad = ~same(got, unfused)
    assert not bad.any(), (a[bad][:4], b[bad][:4], got[bad][:4], unfused[bad][:4])
    want = numpy_quiet(np.multiply, a, b)
    bad = ~same(got, want) & ~rounded
    assert not bad.any(), (a[bad][:4], b[bad][:4], got[bad][:4], want[bad][:4])


def test_special_values_match_numpy(host, ctx):
    a = np.repeat(VALUES, len(VALUES))
    b = np.tile(VALUES, len(VALUES))
    ta, tb, tv = ctx.tensor(a), ctx.tensor(b), ctx.tensor(VALUES)
    got = run(host, ctx, lambda rec: {op: getattr(rec, op)(ta, tb) for op in ("add", "sub", "mul", "div")}
              | {op: getattr(rec, op)(tv) for op in ("abs", "angle", "neg", "conj")})
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    # Finite quotients round differently (numpy multiplies by a rounded 1 / d):
    # those are held to the bound, every other result to numpy's exactly.
    finite = np.isfinite(a) & np.isfinite(b) & (b != 0)
    check_bound("div", got["div"].numpy()[finite], a[finite], b[finite])
    check_mul(got.pop("mul").numpy(), a, b)
    for op, fn in fns.items():
        if op in got:
            want = numpy_quiet(fn, a, b)
            bad = ~same(got[op].numpy(), want) & np.logical_not(finite if op == "div" else False)
            assert not bad.any(), (op, a[bad][:4], b[bad][:4], got[op].numpy()[bad][:4], want[bad][:4])
    # Finite moduli and angles off the axes are held to the bound (numpy's
    # hypotf and atan2f round their own ways); moduli beyond float32 are inf.
    off_axes = np.isfinite(VALUES) & (VALUES.real != 0) & (VALUES.imag != 0)
    rounded = {"abs": off_axes & (np.abs(VALUES.astype(np.complex128)) <= np.finfo(np.float32).max),
               "angle": off_axes}
    for op, mask in rounded.items():
        check_bound(op, got[op].numpy()[mask], VALUES[mask])
    for op, fn in {"abs": np.abs, "angle": np.angle, "neg": np.negative, "conj": np.conj}.items():
        want = numpy_quiet(fn, VALUES)
        assert (same(got[op].numpy(), want) | rounded.get(op, False)).all(), op


@pytest.mark.parametrize("order", ["complex_real", "real_complex"])
def test_special_values_of_mixed_operands_match_numpy(host, ctx, order):
    """A real operand is numpy's ``x + 0j``: signed zeros, inf and NaN as numpy's loop makes them."""
    reals = np.array(SPECIAL, np.float32)
    z = np.repeat(VALUES, len(reals))
    r = np.tile(reals, len(VALUES))
    a, b = (z, r) if order == "complex_real" else (r, z)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    got = run(host, ctx, lambda rec: {op: getattr(rec, op)(ta, tb) for op in ("add", "sub", "mul", "div")})
    finite = np.isfinite(a) & np.isfinite(b) & (b != 0)
    check_bound("div", got["div"].numpy()[finite], a[finite], b[finite])
    check_mul(got.pop("mul").numpy(), a, b)
    for op, fn in {"add": np.add, "sub": np.subtract, "div": np.divide}.items():
        want = numpy_quiet(fn, a, b)
        bad = ~same(got[op].numpy(), want) & np.logical_not(finite if op == "div" else False)
        assert not bad.any(), (op, a[bad][:4], b[bad][:4], got[op].numpy()[bad][:4], want[bad][:4])


def test_c99_atan2_and_hypot_cases(host, ctx):
    inf, nan = np.inf, np.nan
    z = np.array([complex(-inf, inf), complex(-inf, -inf), complex(inf, -inf), complex(-0.0, 0.0),
                  complex(-0.0, -0.0), complex(-1, 0.0), complex(-1, -0.0), complex(0.0, -3),
                  complex(nan, inf), complex(-inf, nan), complex(nan, 1)], np.complex64)
    t = ctx.tensor(z)
    ang, mod = run(host, ctx, lambda rec: (rec.angle(t), rec.abs(t)))
    pi = np.float32(np.pi)
    want = np.array([3 * np.pi / 4, -3 * np.pi / 4, -np.pi / 4, pi, -pi, pi, -pi, -np.pi / 2, nan, nan, nan], np.float32)
    assert same(ang.numpy(), want).all()
    assert same(ang.numpy(), np.angle(z)).all()
    assert same(mod.numpy(), np.array([inf] * 3 + [0, 0, 1, 1, 3, inf, inf, nan], np.float32)).all()


def test_mul_where_both_products_overflow_is_nan(host, ctx):
    """The documented exception: (3e38 + 3e38j)**2 has 9e76 - 9e76 in its
    real part; without a fused multiply-add that is inf - inf."""
    z = ctx.tensor(np.array([3e38 + 3e38j], np.complex64))
    got = run(host, ctx, lambda rec: rec.mul(z, z)).numpy()[0]
    assert np.isnan(got.real) and got.imag == np.inf


# -- mixed operands, scalars, broadcasting ----------------------------------------------------

@pytest.mark.parametrize("real", ["float32", "float16"])
def test_mixed_operands_promote_to_complex64(host, ctx, real):
    need(ctx, real)
    rng = np.random.default_rng(4)
    z = cplx(rng, (3, 1, 7), -4, 4)
    r = rng.uniform(-4, 4, (5, 7)).astype(real)
    tz, tr = ctx.tensor(z), ctx.tensor(r)
    scalars = [3, -2.5, 2j, 1.5 - 0.5j, complex(0.0, -0.0)]
    got = run(host, ctx, lambda rec: {
        (op, k): call for op in ("add", "sub", "mul", "div") for k, call in
        [("zr", getattr(rec, op)(tz, tr)), ("rz", getattr(rec, op)(tr, tz))]
        + [(f"z{s}", getattr(rec, op)(tz, s)) for s in scalars]
        + [(f"r{s}", getattr(rec, op)(tr, s)) for s in scalars if isinstance(s, complex)]})
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    for (op, k), t in got.items():
        x, y = {"zr": (z, r), "rz": (r, z)}.get(k, (z if k[0] == "z" else r, None))
        if y is None:
            y = next(s for s in scalars if f"{k[0]}{s}" == k)
        want = numpy_quiet(fns[op], x, y)
        assert t.dtype == gc.complex64 and want.dtype == np.complex64, (op, k)
        assert t.shape == want.shape
        if op in ("add", "sub") or np.all(np.asarray(y) == 0):       # (x / 0 is numpy's inf and NaN)
            assert same(t.numpy(), want).all(), (op, k)
        else:
            check_bound(op, t.numpy(), np.asarray(x, np.complex64), np.asarray(y, np.complex64))


def test_uint8_with_complex64_promotes_to_complex64(host, ctx):
    """numpy: complex64 with uint8 is complex64 (every uint8 is exact in float32)."""
    if not ctx.caps.uint8_storage:
        pytest.skip("uint8 needs 8-bit storage, which only the modern profile enables")
    rng = np.random.default_rng(8)
    z = cplx(rng, (3, 1, 9), -4, 4)
    u = rng.integers(0, 256, (4, 9)).astype(np.uint8)
    u[0, :3] = (0, 255, 128)
    tz, tu = ctx.tensor(z), ctx.tensor(u)
    got = run(host, ctx, lambda rec: {(op, k): getattr(rec, op)(*args) for op in ("add", "sub", "mul", "div")
                                      for k, args in (("zu", (tz, tu)), ("uz", (tu, tz[:, :, ::-1])))})
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    for (op, k), t in got.items():
        x, y = (z, u) if k == "zu" else (u, z[:, :, ::-1])
        want = numpy_quiet(fns[op], x, y)
        assert t.dtype == gc.complex64 and want.dtype == np.complex64 and t.shape == want.shape, (op, k)
        if op in ("add", "sub"):
            assert same(t.numpy(), want).all(), (op, k)
            continue
        zero = np.broadcast_to(y == 0, want.shape)          # x * 0 and x / 0 (±inf, NaN): numpy's exactly
        assert same(t.numpy()[zero], want[zero]).all(), (op, k)
        xb, yb = (np.broadcast_to(v.astype(np.complex64), want.shape)[~zero] for v in (x, y))
        check_bound(op, t.numpy()[~zero], xb, yb)


HYP_OPS = ["add", "sub", "mul", "div", "abs", "angle", "conj", "neg"]


@HYP
@given(data=st.data())
def test_random_shapes_broadcasts_and_views(host, ctx, data):
    op = data.draw(st.sampled_from(HYP_OPS))
    shape = data.draw(shapes(max_dims=4, max_side=7) | st.sampled_from([(129,), (3, 1025), (2, 70, 9)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    binades = data.draw(st.sampled_from([3, 60]))
    if op in ("abs", "angle", "conj", "neg"):
        x, x_np = draw_view(data, ctx, shape, lambda s: cplx(rng, s, -binades, binades))
        got = host.run(ctx, lambda rec: getattr(rec, op)(x)).numpy()
        if op in ("abs", "angle"):
            check_bound(op, got, x_np)
        else:
            np.testing.assert_array_equal(got, np.negative(x_np) if op == "neg" else np.conj(x_np))
        return
    kinds = data.draw(st.sampled_from(["cc", "cr", "rc", "cs", "rs"]))
    make = {"c": lambda s: cplx(rng, s, -binades, binades), "r": lambda s: parts(rng, s, -binades, binades)}
    shape_a = broadcast_to_operand(data, shape)
    a, a_np = draw_view(data, ctx, shape_a, make[kinds[0]])
    if kinds[1] == "s":
        b = b_np = complex(parts(rng, (), -3, 3), parts(rng, (), -3, 3)) if kinds[0] == "r" \
            else data.draw(st.sampled_from([2, -0.5, 1.5j, complex(-3, 0.25)]))
    else:
        b, b_np = draw_view(data, ctx, broadcast_to_operand(data, shape), make[kinds[1]])
    got = host.run(ctx, lambda rec: getattr(rec, op)(a, b))
    want = numpy_quiet({"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op], a_np, b_np)
    assert got.shape == want.shape and got.dtype == gc.complex64
    if op in ("add", "sub"):
        np.testing.assert_array_equal(got.numpy(), want)
    else:
        check_bound(op, got.numpy(), np.asarray(a_np, np.complex64), np.asarray(b_np, np.complex64))


# -- real dtypes: angle, conj, cast ------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_angle_and_conj_of_real_tensors(host, ctx, dtype):
    need(ctx, dtype)
    if dtype.startswith("float"):
        x_np = np.array([-0.0, 0.0, -1, 1, np.nan, -np.nan, -np.inf, np.inf, 3.5, -1e-3], dtype)
    else:
        x_np = np.array([0, 1, 7, 2 ** 31 - 1] if dtype == "uint32" else [0, -1, 5, -2 ** 31], dtype)
    x = ctx.tensor(x_np)
    ang, con = run(host, ctx, lambda rec: (rec.angle(x), rec.conj(x)))
    want = np.angle(x_np).astype(np.float16 if dtype == "float16" else np.float32)
    assert ang.dtype.name == want.dtype.name
    assert same(ang.numpy(), want).all()
    assert con.dtype.name == dtype
    np.testing.assert_array_equal(con.numpy(), np.conj(x_np))


@pytest.mark.parametrize("src", ["float32", "float16", "int32", "uint32", "uint8"])
def test_cast_into_complex64(host, ctx, src):
    need(ctx, src)
    if src == "uint8" and not ctx.caps.uint8_storage:
        pytest.skip("uint8 needs 8-bit storage, which only the modern profile enables")
    values = {"float32": [1.5, -0.0, np.inf, np.nan, -3e38], "float16": [1.5, -0.0, -np.inf, 65504, 0.1],
              "int32": [1, -2 ** 31, 2 ** 31 - 1, 16777217, 0], "uint32": [0, 2 ** 32 - 1, 16777217, 5, 1],
              "uint8": [0, 255, 7, 1, 128]}[src]
    x_np = np.array(values, src)
    x = ctx.tensor(x_np)
    z = run(host, ctx, lambda rec: rec.cast(x[::-1], "complex64"))
    assert z.dtype == gc.complex64
    assert same(z.numpy(), x_np[::-1].astype(np.complex64)).all()
    assert (np.signbit(z.numpy().imag) == False).all()     # noqa: E712  imaginary parts are +0


def test_cast_and_copy_complex64(host, ctx):
    z_np = cplx(np.random.default_rng(5), (4, 6))
    z = ctx.tensor(z_np)
    same_, copied, strided = run(host, ctx, lambda rec: (rec.cast(z, "complex64"), rec.copy(z),
                                                        rec.copy(z.T)))
    np.testing.assert_array_equal(same_.numpy(), z_np)
    np.testing.assert_array_equal(copied.numpy(), z_np)
    np.testing.assert_array_equal(strided.numpy(), z_np.T)


def test_complex_copies_move_float32_words_four_at_a_time(host, ctx):
    z_np = cplx(np.random.default_rng(7), (5, 6))
    z, out = ctx.tensor(z_np), ctx.empty((5, 6), "complex64")
    plan = plan_map(ctx, "x0", [z], out, gc.complex64)
    assert [b.type for b in plan.spec.bindings] == ["vec4", "vec4"]      # 60 words, 15 vec4s
    # One value in: the words are 2 apart from a vec4 boundary, so two at a time.
    tail = plan_map(ctx, "x0", [z.reshape(-1)[1:]], out.reshape(-1)[:29], gc.complex64)
    assert [b.type for b in tail.spec.bindings] == ["vec2", "vec2"]
    run(host, ctx, lambda rec: (rec.copy(z, out=out), rec.copy(z.reshape(-1)[1:], out=out.reshape(-1)[:29])))
    np.testing.assert_array_equal(out.numpy().reshape(-1), np.concatenate([z_np.reshape(-1)[1:], z_np[-1, -1:]]))

# -- out=, in place, typed errors --------------------------------------------------------------

def test_in_place_and_out(host, ctx):
    rng = np.random.default_rng(6)
    z_np, r_np = cplx(rng, 64, -3, 3), parts(rng, 64, -3, 3)
    z, r = ctx.tensor(z_np), ctx.tensor(r_np)
    out = ctx.empty((64,), "complex64")
    mod = ctx.empty((64,), "float32")
    run(host, ctx, lambda rec: (rec.add(z, r, out=out), rec.mul(z, 2j, out=z), rec.abs(out, out=mod)))
    np.testing.assert_array_equal(out.numpy(), z_np + r_np)
    np.testing.assert_array_equal(z.numpy(), z_np * np.complex64(2j))
    check_bound("abs", mod.numpy(), z_np + r_np)
    run(host, ctx, lambda rec: rec.conj(z, out=z))
    np.testing.assert_array_equal(z.numpy(), np.conj(z_np * np.complex64(2j)))


def test_typed_errors_before_recording(host, ctx):
    z = ctx.tensor(np.ones((4, 8), np.complex64))
    f = ctx.tensor(np.ones((4, 8), np.float32))
    i = ctx.tensor(np.ones((4, 8), np.int32))
    u8 = ctx.tensor(np.ones((4, 8), np.uint8)) if ctx.caps.uint8_storage else None
    calls = [
        (gc.DTypeError, lambda rec: rec.add(z, z, out=ctx.empty((4, 8)))),          # complex into real out
        (gc.DTypeError, lambda rec: rec.mul(f, 2j, out=ctx.empty((4, 8)))),
        (gc.DTypeError, lambda rec: rec.abs(z, out=ctx.empty((4, 8), "complex64"))),
        (gc.DTypeError, lambda rec: rec.angle(z, out=ctx.empty((4, 8), "complex64"))),
        (gc.DTypeError, lambda rec: rec.mul(z, i)),                                  # numpy: complex128
        (gc.DTypeError, lambda rec: rec.add(i, z)),
        (gc.DTypeError, lambda rec: rec.sub(i, 1j)),
        (gc.DTypeError, lambda rec: rec.cast(z, "float32")),                         # take z.real
        (gc.DTypeError, lambda rec: rec.exp(z)),
        (gc.DTypeError, lambda rec: rec.maximum(z, z)),
        (gc.DTypeError, lambda rec: rec.pow(z, 2)),
        (gc.DTypeError, lambda rec: rec.sum(z)),
        (gc.DTypeError, lambda rec: rec.sort(z.reshape(-1))),
        (gc.DTypeError, lambda rec: rec.where(f, z, z)),
        (gc.ShapeError, lambda rec: rec.add(z, ctx.tensor(np.ones(5, np.complex64)))),
        (gc.InvalidArgumentError, lambda rec: rec.mul(z, np.complex64(2))),            # Python numbers only
        (gc.InvalidArgumentError, lambda rec: rec.mul(z, complex(1e39, 0))),           # beyond float32
        (gc.InvalidArgumentError, lambda rec: rec.add(z[:, 1:], z[:, :-1], out=z[:, :-1])),
    ]
    if u8 is not None:
        calls.append((gc.DTypeError, lambda rec: rec.mul(u8, 2j)))                    # numpy: complex128
    assert_all_refused(host, ctx, calls)


def test_cast_complex_to_real_says_take_real(ctx):
    with pytest.raises(gc.DTypeError, match=r"\.real"):
        registered_ops()["cast"](ctx, ctx.tensor(np.ones(3, np.complex64)), "float32")


def test_scalars_key_their_plans_by_bits(host, ctx):
    """0j and -0j (and 1 and 1.0 + 0j) are different push constants: a plan
    remembered for one must not serve the other."""
    z = ctx.tensor(np.array([complex(-0.0, -0.0)], np.complex64))
    got = run(host, ctx, lambda rec: [rec.add(z, 0j), rec.add(z, complex(-0.0, -0.0))])
    assert same(got[0].numpy(), np.array([0j], np.complex64)).all()
    assert same(got[1].numpy(), np.array([complex(-0.0, -0.0)], np.complex64)).all()


# -- the bake catalogue ------------------------------------------------------------------------

def test_planned_specs_are_in_the_bake_catalogue(modern_ctx):
    from guestcompute.ops import all_specs
    ctx, ops, catalogue = modern_ctx, registered_ops(), set(all_specs())
    views = {d: [ctx.empty((1030,), d)[:1021], ctx.empty((2, 2, 2, 2, 2, 3), d).permute(5, 4, 3, 2, 1, 0)]
             for d in ("complex64", "float32", "float16", "int32", "uint32", "uint8")}
    planned = []
    for zv in views["complex64"]:
        for op in ("add", "sub", "mul", "div"):
            for other in views["complex64"][:1] + [v for d in ("float32", "float16", "uint8") for v in views[d]]:
                if other.shape == zv.shape:
                    planned += ops[op](ctx, zv, other).dispatches + ops[op](ctx, other, zv).dispatches
            for s in (2, 1.5j):
                planned += ops[op](ctx, zv, s).dispatches
                for d in ("float32", "float16"):
                    planned += ops[op](ctx, views[d][views["complex64"].index(zv)], 1.5j).dispatches
        for op in ("neg", "conj", "abs", "angle", "copy"):
            planned += ops[op](ctx, zv).dispatches
        planned += ops["cast"](ctx, zv, "complex64").dispatches
    for d, vs in views.items():
        for v in vs:
            planned += ops["cast"](ctx, v, "complex64").dispatches
            if d not in ("complex64", "uint8"):
                planned += ops["angle"](ctx, v).dispatches + ops["conj"](ctx, v).dispatches
    assert planned
    missing = {d.spec.key for d in planned if d.spec not in catalogue}
    assert not missing, f"{len(missing)} planned complex specs are not in the catalogue"
