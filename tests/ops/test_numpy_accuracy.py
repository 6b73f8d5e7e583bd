"""float32 accuracy against numpy's own validation data and ulp bounds.

numpy ships, for each transcendental ufunc, rows of (input, correctly
rounded output, allowed ulp error) that its ``test_umath_accuracy`` checks
its own SIMD kernels against. Every float32 row of the functions
guestcompute has is run here, through the kernel, against numpy's bound —
read from the installed numpy at test time, not copied. Random sweeps then
measure the bounds the op docs state (docs/integration.md, "Accuracy")."""
import pathlib
import re

import numpy as np
import pytest

F32 = np.float32
DATA = pathlib.Path(np.__file__).parent / "_core" / "tests" / "data"
# guestcompute op -> numpy's validation file name
VALIDATED = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh"}
# the bound the op docs state, in float32 ulp, checked on the sweeps below
DOCUMENTED_ULP = {"exp": 2, "log": 2, "sin": 2, "cos": 2, "tanh": 2, "sigmoid": 3, "silu": 3, "pow": 8,
                  "floor": 0, "ceil": 0, "trunc": 0, "rint": 0, "sign": 0}
# ops that are one GLSL operation: Vulkan's required precision for it
DEVICE_ULP = {"sqrt": 3, "div": 3}


def validation_rows(name):
    """(inputs, expected, max ulp) of numpy's float32 rows for ``name``."""
    path = DATA / f"umath-validation-set-{name}.csv"
    if not path.exists():
        pytest.skip(f"this numpy ships no validation data ({path.name})")
    rows = [line.split(",") for line in path.read_text().splitlines()
            if line.startswith("np.float32,")]
    assert rows, f"{path.name} has no float32 rows"
    bits = lambda column: np.array([int(r[column], 16) for r in rows], np.uint32).view(F32)  # noqa: E731
    return bits(1), bits(2), max(int(r[3]) for r in rows)


def ulp_distance(got, want):
    """Units in the last place between float32 arrays (numpy's nulp_diff:
    through the ordered integer line, so 0 and the subnormals count too);
    0 where both are NaN or equal infinities."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    ordered = lambda x: np.where(x.view(np.int32) < 0, np.int64(-2**31) - x.view(np.int32),  # noqa: E731
                                 x.view(np.int32).astype(np.int64))
    d = np.abs(ordered(got) - ordered(want))
    both_nan = np.isnan(got) & np.isnan(want)
    d = np.where(both_nan | (got == want), 0, d)
    return np.where(np.isnan(got) != np.isnan(want), np.iinfo(np.int64).max, d)


def assert_within_ulp(x, got, want, bound, name):
    d = ulp_distance(got, want)
    bad = d > bound
    assert not bad.any(), (f"{name}: {bad.sum()} of {x.size} beyond {bound} ulp (worst {d.max()}):\n"
                           + "\n".join(f"  {name}({v!r} = {v.view(np.uint32):#010x}) = {g!r}, want {w!r} "
                                       f"({u} ulp)" for v, g, w, u in
                                       list(zip(x[bad], got[bad], want[bad], d[bad]))[:12]))


@pytest.mark.parametrize("name", sorted(VALIDATED))
def test_numpy_validation_data_within_numpys_ulp_bound(host, ctx, name):
    x, want, bound = validation_rows(VALIDATED[name])
    got = host.run(ctx, lambda rec: getattr(rec, name)(ctx.tensor(x))).numpy()
    assert_within_ulp(x, got, want, bound, name)


# -- sweeps: the documented bounds ---------------------------------------------------

def random_floats(rng, n, lo_bits, hi_bits, negative=False):
    """n float32 values uniform in their bit patterns between two bit
    patterns (so every binade is sampled), optionally of either sign."""
    bits = rng.integers(lo_bits, hi_bits, n, dtype=np.uint64).astype(np.uint32)
    if negative:
        bits |= rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    return bits.view(F32)


def f32_bits(v):
    return int(np.array(v, F32).view(np.uint32))


SWEEPS = {
    # exp: every input with a finite, nonzero result, subnormal results included
    "exp": (np.exp, lambda rng: np.concatenate([random_floats(rng, 60000, 0, f32_bits(88.7), True),
                                                -random_floats(rng, 20000, f32_bits(80), f32_bits(103.9)),
                                                rng.uniform(-1, 1, 20000).astype(F32)])),
    # log: all positive floats, subnormals included, and the neighbourhood of 1
    "log": (np.log, lambda rng: np.concatenate([random_floats(rng, 80000, 1, 0x7f800000),
                                                (1 + rng.uniform(-2**-8, 2**-8, 20000)).astype(F32)])),
    # sin, cos: every finite float, huge ones included
    "sin": (np.sin, lambda rng: np.concatenate([random_floats(rng, 80000, 0, 0x7f800000, True),
                                                rng.uniform(-200, 200, 20000).astype(F32)])),
    "cos": (np.cos, lambda rng: np.concatenate([random_floats(rng, 80000, 0, 0x7f800000, True),
                                                rng.uniform(-200, 200, 20000).astype(F32)])),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)),
                # (down to the smallest normal result: subnormal results are the device's business)
                lambda rng: np.concatenate([random_floats(rng, 80000, 0, f32_bits(87.3), True),
                                            rng.uniform(-20, 20, 20000).astype(F32)])),
    "silu": (lambda x: x / (1 + np.exp(-x)),
             # (from 2**-125 up: below it x / 2 is subnormal, the device's business)
             lambda rng: np.concatenate([random_floats(rng, 80000, 0x01000000, f32_bits(88), True),
                                         rng.uniform(-20, 20, 20000).astype(F32)])),
    "tanh": (np.tanh, lambda rng: np.concatenate([random_floats(rng, 80000, 0, f32_bits(12), True),
                                                  rng.uniform(-3, 3, 20000).astype(F32)])),
}
# floor, ceil, trunc, rint, sign: exact for every normal float of either sign (subnormal inputs
# are the device's business), whole and half-way values near zero included
for _name in ("floor", "ceil", "trunc", "rint", "sign"):
    SWEEPS[_name] = (getattr(np, _name), lambda rng: np.concatenate([
        random_floats(rng, 80000, 0x00800000, 0x7f800000, True), (rng.integers(-40, 40, 20000) / 4).astype(F32)]))


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep_within_documented_ulp_bound(host, ctx, name):
    reference, inputs = SWEEPS[name]
    x = inputs(np.random.default_rng(25))
    got = host.run(ctx, lambda rec: getattr(rec, name)(ctx.tensor(x))).numpy()
    # float64 numpy rounded once to float32: within half an ulp of the exact value
    want = reference(x.astype(np.float64)).astype(F32)
    assert_within_ulp(x, got, want, DOCUMENTED_ULP[name], name)


# -- pow and div -------------------------------------------------------------------------

def test_pow_small_integer_and_half_exponents_are_exact(host, ctx):
    # numpy's float32 x ** 1 is x, x ** 2 is x * x and x ** 0.5 the square root;
    # exp2(b log2 x) in float32 is tens of ulp off for large results.
    rng = np.random.default_rng(3)
    # (bases from 1.1e-19 up: below it x * x is subnormal, the device's business)
    x = np.concatenate([random_floats(rng, 4000, f32_bits(1.1e-19), f32_bits(1.8e19)),
                        np.array([3.0, 1e19, 1.5e-19, 7.0], F32)])
    xt = ctx.tensor(x)
    ones, twos, halves, scalar_twos, roots = host.run(ctx, lambda rec: (
        rec.pow(xt, ctx.tensor(np.ones_like(x))), rec.pow(xt, ctx.tensor(np.full_like(x, 2))),
        rec.pow(xt, ctx.tensor(np.full_like(x, 0.5))), rec.pow(xt, 2.0), rec.sqrt(xt)))
    np.testing.assert_array_equal(ones.numpy(), x)
    np.testing.assert_array_equal(twos.numpy(), x * x)
    np.testing.assert_array_equal(scalar_twos.numpy(), x * x)
    np.testing.assert_array_equal(halves.numpy(), roots.numpy())     # the device's sqrt, whatever it is
    assert_within_ulp(x, halves.numpy(), np.sqrt(x), DEVICE_ULP["sqrt"], "pow(x, 0.5)")


def test_pow_minus_one_is_the_reciprocal(host, ctx):
    # (1 / x is subnormal beyond 2**126: left out, subnormal results are the device's business)
    x = np.array([3.0, 8.5e37, -8e37, 1.2e-38, 2e-38, 0.1, 7.0, -3.0], F32)
    got = host.run(ctx, lambda rec: rec.pow(ctx.tensor(x), -1.0)).numpy()
    assert_within_ulp(x, got, F32(1) / x, DEVICE_ULP["div"], "pow(x, -1)")     # (2**±100 and beyond)
    mid = np.array([3.0, 33.0, 37.0, 0.1, -7.0, 1e-20, 3e25], F32)                 # correctly rounded here
    got = host.run(ctx, lambda rec: rec.pow(ctx.tensor(mid), -1.0)).numpy()
    assert_within_ulp(mid, got, F32(1) / mid, 0, "pow(x, -1)")


def test_div_of_huge_and_subnormal_divisors_like_numpy(host, ctx):
    # A device that divides as a * (1 / b) gives 0 for 1e38 / 1e38 (1 / b
    # underflows) unless the operands are scaled first.
    # (normal operands and results: subnormals are the device's business)
    a = np.array([1e38, 3e38, 2e38, -3.4e38, 1e30, 5.0, np.inf, 3e38, 1e-30, 7.0], F32)
    b = np.array([1e38, 2e38, -3e38, 1.7e38, 1e38, 1e38, 3e38, np.inf, 1e-30, 3.0], F32)
    got, scalar = host.run(ctx, lambda rec: (rec.div(ctx.tensor(a), ctx.tensor(b)),
                                             rec.div(ctx.tensor(a), 2e38)))
    with np.errstate(all="ignore"):
        assert_within_ulp(a, got.numpy(), a / b, DEVICE_ULP["div"], "div")
        assert_within_ulp(a, scalar.numpy(), a / F32(2e38), DEVICE_ULP["div"], "div by 2e38")


def test_pow_sweep_within_documented_ulp_bound(host, ctx):
    # positive bases of every binade, exponents up to the edge of float32's
    # range (|b log2 a| < 120), a third of them small
    rng = np.random.default_rng(25)
    x = random_floats(rng, 60000, 0x00800000, 0x7f000000)
    log2x = np.log2(x.astype(np.float64))
    y = rng.uniform(-120, 120, x.size) / np.where(np.abs(log2x) < 1e-3, 1e-3, log2x)
    y = np.where(rng.uniform(size=x.size) < 0.3, rng.uniform(-4, 4, x.size), y).astype(F32)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    normal = (want > np.finfo(F32).smallest_normal) & (want < np.finfo(F32).max)
    x, y, want = x[normal], y[normal], want[normal].astype(F32)
    got = host.run(ctx, lambda rec: rec.pow(ctx.tensor(x), ctx.tensor(y))).numpy()
    assert_within_ulp(x, got, want, DOCUMENTED_ULP["pow"], "pow")


def test_documented_bounds_are_the_tested_ones():
    # docs/integration.md's accuracy table states what this module checks
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "integration.md").read_text()
    # The real math ops' table: its own section (complex64's bounds are tabled elsewhere).
    section = doc.split("### Accuracy of the math ops", 1)[1]
    section = re.split(r"^#{2,3} ", section, maxsplit=1, flags=re.M)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1][:1].isdigit():
            for op in cells[0].replace("`", "").split(","):
                rows[op.strip()] = int(cells[1].split()[0])
    assert rows == DOCUMENTED_ULP


def test_trig_arguments_hard_to_reduce(host, ctx):
    # the float32 closest to a multiple of pi/2 below 6432 (r ~ 2**-28), the
    # edges of the two reductions, multiples of pi/2 and huge arguments
    x = np.array([252.89820861816406, 6431.99951171875, 6432.0, 6432.00048828125, np.pi / 2, np.pi,
                  3 * np.pi / 2, 2 * np.pi, 1e10, 2.0 ** 24 * np.pi, 1e22, 3.4e38, 0.7853982, 0.78539824],
                 F32)
    x = np.concatenate([x, -x])
    got_sin, got_cos = host.run(ctx, lambda rec: (rec.sin(ctx.tensor(x)), rec.cos(ctx.tensor(x))))
    assert_within_ulp(x, got_sin.numpy(), np.sin(x.astype(np.float64)).astype(F32), DOCUMENTED_ULP["sin"], "sin")
    assert_within_ulp(x, got_cos.numpy(), np.cos(x.astype(np.float64)).astype(F32), DOCUMENTED_ULP["cos"], "cos")
    assert abs(got_sin.numpy()[8] - (-0.48750603)) < 2e-7        # sin(1e10), as numpy


def test_pow_whole_exponents_round_correctly(host, ctx):
    # whole exponents up to 64 go through binary powering in two floats:
    # 59 ** 4 == 12117361 exactly, 10 ** -5 is the float nearest 1e-5
    base, exponent = (v.ravel().astype(F32) for v in np.meshgrid(np.arange(1, 60), np.arange(-6, 12)))
    got = host.run(ctx, lambda rec: rec.pow(ctx.tensor(base), ctx.tensor(exponent))).numpy()
    want = np.power(base.astype(np.float64), exponent.astype(np.float64)).astype(F32)
    assert_within_ulp(base, got, want, 0, "pow(x, n)")
