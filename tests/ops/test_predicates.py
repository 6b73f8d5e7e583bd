"""Comparisons, logical ops and isnan/isinf/isfinite (uint8 masks), and
floor/ceil/trunc/rint/sign, against numpy: every pair of special values,
every dtype, scalar operands, vector widths and strided views, numpy
broadcasting (hypothesis), the bake catalogue, and the typed refusals."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from refusals import assert_all_refused
from strided_views import broadcast_to_operand, draw_view, need, shapes

HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
COMPARISONS = ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor")
CLASSES = ("isnan", "isinf", "isfinite")
ROUNDING = ("floor", "ceil", "trunc", "rint", "sign")
FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3e38, -3e38, 1e-30,
          -0.7, 8388609.0, -8388609.0, 16777217.0, 0.49999997]
INTS = {"int32": [0, 1, -1, 7, -7, 2 ** 31 - 1, -2 ** 31], "uint32": [0, 1, 7, 2 ** 31, 2 ** 32 - 1],
        "uint8": [0, 1, 7, 255]}


def values(dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):                 # 3e38 is inf in float16
        return np.array(FLOATS if dtype in ("float32", "float16") else INTS[dtype], dtype)


def need_masks(ctx):
    if not ctx.caps.uint8_storage:
        pytest.skip("masks are uint8: 8-bit storage, which only the modern profile enables")


def pairs(dtype: str) -> tuple:
    v = values(dtype)
    return np.repeat(v, len(v)), np.tile(v, len(v))


def quiet(fn, *args):
    with np.errstate(all="ignore"):
        return fn(*args)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "uint8"])
def test_binary_predicates_on_every_pair_of_special_values(host, ctx, dtype):
    need_masks(ctx)
    need(ctx, dtype)
    a, b = pairs(dtype)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    names = COMPARISONS + LOGICAL
    got = host.run(ctx, lambda rec: {n: getattr(rec, n)(ta, tb) for n in names})
    for n in names:
        assert got[n].dtype == gc.uint8, n
        np.testing.assert_array_equal(got[n].numpy(), getattr(np, n)(a, b).astype(np.uint8), err_msg=n)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "uint8"])
def test_unary_predicates_and_scalar_comparisons(host, ctx, dtype):
    need_masks(ctx)
    need(ctx, dtype)
    x = values(dtype)
    tx = ctx.tensor(x)
    scalar = 0.5 if dtype in ("float32", "float16") else 1
    got = host.run(ctx, lambda rec: {n: getattr(rec, n)(tx) for n in CLASSES + ("logical_not",)}
                   | {n: getattr(rec, n)(tx, scalar) for n in COMPARISONS})
    for n in CLASSES + ("logical_not",):
        np.testing.assert_array_equal(got[n].numpy(), getattr(np, n)(x).astype(np.uint8), err_msg=n)
    for n in COMPARISONS:
        want = getattr(np, n)(x, np.array(scalar, x.dtype))
        np.testing.assert_array_equal(got[n].numpy(), want.astype(np.uint8), err_msg=n)


def same(got, want) -> bool:
    """Equal as numpy's: NaN where NaN, else the same value and sign."""
    return bool(((np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))).all())


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("width", [1, 4])
def test_rounding_and_sign_of_special_values_are_numpy_s_bit_for_bit(host, ctx, dtype, width):
    """-0.0 stays -0.0 where numpy keeps it (floor, ceil(-0.5), trunc(-0.7),
    rint(-0.5)) and sign(-0.0) is +0.0; whole floats past 2**23 are left as
    they are. ``width`` 4: a length the vec4 kernel takes."""
    need(ctx, dtype)
    x = values(dtype)
    x = x[(np.abs(x) >= np.finfo(dtype).tiny) | (x == 0) | ~np.isfinite(x)]     # subnormals: the device's
    x = np.resize(x, -(-len(x) // 4) * 4) if width == 4 else x[:-1]
    tx = ctx.tensor(x)
    got = host.run(ctx, lambda rec: {n: getattr(rec, n)(tx) for n in ROUNDING})
    for n in ROUNDING:
        assert got[n].dtype == tx.dtype
        assert same(got[n].numpy(), getattr(np, n)(x)), (n, x, got[n].numpy(), getattr(np, n)(x))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_floor_ceil_trunc_keep_the_dtype_and_sign_is_numpy_s(host, ctx, dtype):
    x = values(dtype)
    tx = ctx.tensor(x)
    got = host.run(ctx, lambda rec: {n: getattr(rec, n)(tx) for n in ("floor", "ceil", "trunc", "sign")})
    for n, t in got.items():
        assert t.dtype.name == dtype
        np.testing.assert_array_equal(t.numpy(), getattr(np, n)(x), err_msg=n)


@HYP
@given(data=st.data())
def test_random_shapes_broadcasts_and_views(host, ctx, data):
    need_masks(ctx)
    op = data.draw(st.sampled_from(COMPARISONS + LOGICAL + ("isnan", "logical_not", "floor", "sign")))
    dtype = data.draw(st.sampled_from(["float32", "int32"]))
    shape = data.draw(shapes(max_dims=4, max_side=7) | st.sampled_from([(129,), (3, 1025), (2, 70, 9)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))

    def make(s):                     # few distinct values, so equal pairs and zeros are common
        return rng.choice(values(dtype)[:12] if dtype == "float32" else values(dtype), s).astype(dtype)
    if op in ("isnan", "logical_not", "floor", "sign"):
        x, x_np = draw_view(data, ctx, shape, make)
        got = host.run(ctx, lambda rec: getattr(rec, op)(x))
        want = quiet(getattr(np, op), x_np)
        assert same(got.numpy(), want.astype(got.dtype.numpy)) if dtype == "float32" else \
            np.array_equal(got.numpy(), want)
        return
    a, a_np = draw_view(data, ctx, broadcast_to_operand(data, shape), make)
    b, b_np = draw_view(data, ctx, broadcast_to_operand(data, shape), make)
    got = host.run(ctx, lambda rec: getattr(rec, op)(a, b))
    want = getattr(np, op)(a_np, b_np)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.astype(np.uint8))


def test_a_mask_feeds_where_and_compact(host, ctx):
    """What masks are for: rec.where(mask, ...) and rec.compact(x, mask)."""
    need_masks(ctx)
    x = np.linspace(-3, 3, 40, dtype=np.float32)
    tx = ctx.tensor(x)

    def body(rec):
        mask = rec.greater(tx, 0.25)
        return rec.where(mask, tx, 0.0), rec.compact(tx, mask)
    picked, (kept, n) = host.run(ctx, body)
    np.testing.assert_array_equal(picked.numpy(), np.where(x > 0.25, x, 0))
    assert int(n.numpy()[0]) == int((x > 0.25).sum())
    np.testing.assert_array_equal(kept.numpy()[:int(n.numpy()[0])], x[x > 0.25])


def test_planned_specs_are_in_the_bake_catalogue(modern_ctx):
    from guestcompute.ops import all_specs
    ctx, ops, catalogue = modern_ctx, registered_ops(), set(all_specs())
    planned = []
    for dtype in ("float32", "float16", "int32", "uint32", "uint8"):
        flat = ctx.empty((1030,), dtype)
        deep = ctx.empty((2, 2, 2, 2, 2, 3), dtype).permute(5, 4, 3, 2, 1, 0)
        for v in (flat[:1024], flat[:1022], flat[:1021], flat[::2], deep):
            for name in COMPARISONS:
                planned += ops[name](ctx, v, v).dispatches + ops[name](ctx, v, 1).dispatches
            for name in LOGICAL:
                planned += ops[name](ctx, v, v).dispatches
            for name in CLASSES + ("logical_not",):
                planned += ops[name](ctx, v).dispatches
            for name in ROUNDING:
                if dtype != "uint8" and (name != "rint" or dtype.startswith("float")):
                    planned += ops[name](ctx, v).dispatches
    missing = {d.spec.key for d in planned if d.spec not in catalogue}
    assert not missing, f"{len(missing)} planned specs missing from the catalogue"


def test_bad_arguments_are_refused_before_recording(host, ctx):
    a = ctx.tensor(np.zeros(4, np.float32))
    i = ctx.tensor(np.zeros(4, np.int32))
    cases = [(gc.DTypeError, lambda rec: rec.greater(a, i), "dtype"),
             (gc.DTypeError, lambda rec: rec.rint(i), "cast integers to float32"),
             (gc.ShapeError, lambda rec: rec.less(a, ctx.tensor(np.zeros(3, np.float32))), None)]
    if ctx.caps.uint8_storage:
        cases.append((gc.DTypeError, lambda rec: rec.equal(a, a, out=ctx.empty((4,), "float32")),
                      "out must be a uint8 tensor"))
    else:
        cases.append((gc.GuestComputeError, lambda rec: rec.equal(a, a), "8-bit|uint8"))
    assert_all_refused(host, ctx, cases)
