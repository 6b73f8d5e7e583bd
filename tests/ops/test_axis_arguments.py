"""Axis arguments, the same for every op that takes one: numpy integers are
accepted wherever Python ints are (and plan exactly the same dispatches);
floats, bools, out-of-range and repeated axes are refused with one
ShapeError wording, before anything is recorded."""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops

HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SHAPE = (2, 3, 4)
NDIM = len(SHAPE)
BAD_AXIS = re.compile(r"^\w+: axis .+ is (out of range|not an integer|a bool, not an integer|repeated) "
                      r"for a \d-d tensor; use an int in -\d\.\.\d")

# Each op with its axis argument in one place: fn(ops, ctx, t, axis) plans it.
# "tuples": the op also takes a tuple of axes (reductions; permute takes
# nothing else).
OPS = {
    "sum": (lambda o, c, t, a: o["sum"](c, t["x"], a), True),
    "mean": (lambda o, c, t, a: o["mean"](c, t["x"], a), True),
    "max": (lambda o, c, t, a: o["max"](c, t["x"], a), True),
    "min": (lambda o, c, t, a: o["min"](c, t["x"], a, keepdims=True), True),
    "argmax": (lambda o, c, t, a: o["argmax"](c, t["x"], a), False),
    "argmin": (lambda o, c, t, a: o["argmin"](c, t["x"], a), False),
    "softmax": (lambda o, c, t, a: o["softmax"](c, t["x"], a), False),
    "log_softmax": (lambda o, c, t, a: o["log_softmax"](c, t["x"], a), False),
    "cumsum": (lambda o, c, t, a: o["cumsum"](c, t["x"], a), False),
    "concat": (lambda o, c, t, a: o["concat"](c, [t["x"], t["x"]], a), False),
    "transpose": (lambda o, c, t, a: o["transpose"](c, t["x"], a, -1), False),
    "transpose_second": (lambda o, c, t, a: o["transpose"](c, t["x"], 0, a), False),
    "index_select": (lambda o, c, t, a: o["index_select"](c, t["x"], t["idx"], a), False),
    "gather": (lambda o, c, t, a: o["gather"](c, t["x"], t["idx3"], a), False),
}


@pytest.fixture
def tensors(ctx):
    return {"x": ctx.tensor(np.arange(24, dtype=np.float32).reshape(SHAPE)),
            "idx": ctx.tensor(np.array([1, 0], np.int32)),
            "idx3": ctx.tensor(np.zeros((1, 1, 1), np.int32))}


def _plan(op, ctx, t, axis):
    result = OPS[op][0](registered_ops(), ctx, t, axis)
    value = result.value
    shape = value.shape if isinstance(value, gc.Tensor) else None
    return shape, [(d.spec, d.push, d.groups) for d in result.dispatches]


NUMPY_INTS = [np.int8, np.int16, np.int32, np.int64, np.intp]


@st.composite
def valid_numpy_axis(draw):
    a = draw(st.integers(-NDIM, NDIM - 1))
    kind = draw(st.sampled_from(NUMPY_INTS + ["0-d array", "unsigned"]))
    if kind == "0-d array":
        return a, np.array(a)
    if kind == "unsigned":
        return a % NDIM, np.uint32(a % NDIM)
    return a, kind(a)


@HYP
@given(op=st.sampled_from(sorted(OPS)), axis=valid_numpy_axis())
def test_numpy_integer_axes_plan_like_python_ints(ctx, tensors, op, axis):
    python_axis, numpy_axis = axis
    assert _plan(op, ctx, tensors, numpy_axis) == _plan(op, ctx, tensors, python_axis)


def bad_axes(tuples: bool):
    """(axis argument, the problem it must be reported as)."""
    single = (st.sampled_from([1.0, 0.5, np.float32(1), np.float64(-1), "1", 1j])
              .map(lambda a: (a, "not an integer"))
              | st.sampled_from([True, False, np.True_]).map(lambda a: (a, "a bool, not an integer"))
              | (st.integers(NDIM, 2**40) | st.integers(-2**40, -NDIM - 1)
                 | st.sampled_from([np.int64(NDIM), np.int8(-NDIM - 1)])).map(lambda a: (a, "out of range")))
    if not tuples:
        return single | st.just(((0, 1), "not an integer"))
    repeated = st.integers(0, NDIM - 1).flatmap(
        lambda a: st.sampled_from([(a, a), (a, a - NDIM), (np.int64(a), 0, a)])).map(lambda a: (a, "repeated"))
    inside = single.map(lambda c: ((0, c[0]), c[1]))
    return single | repeated | inside


def _refuse(op, ctx, tensors, axis, problem):
    with pytest.raises(gc.ShapeError) as info:
        _plan(op, ctx, tensors, axis)
    message = str(info.value)
    assert BAD_AXIS.match(message), message
    assert f"is {problem} for" in message, message


@HYP
@given(data=st.data(), op=st.sampled_from(sorted(OPS)))
def test_bad_axes_raise_one_typed_error(ctx, tensors, data, op):
    axis, problem = data.draw(bad_axes(OPS[op][1]))
    _refuse(op, ctx, tensors, axis, problem)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "cumsum", "concat", "transpose",
                                "index_select", "gather"])
def test_ops_of_one_axis_refuse_none(ctx, tensors, op):
    # reductions read None as "every axis"; these ops need an actual axis
    _refuse(op, ctx, tensors, None, "not an integer")


@HYP
@given(data=st.data())
def test_permute_takes_numpy_ints_and_refuses_bad_axes(ctx, tensors, data):
    ops = registered_ops()
    order = data.draw(st.permutations(range(NDIM)))
    as_numpy = [data.draw(st.sampled_from(NUMPY_INTS))(a) for a in order]
    expected = ops["permute"](ctx, tensors["x"], tuple(order))
    got = ops["permute"](ctx, tensors["x"], as_numpy)
    assert got.value.shape == expected.value.shape
    assert [d.push for d in got.dispatches] == [d.push for d in expected.dispatches]
    bad, problem = data.draw(st.sampled_from([(1.0, "not an integer"), (True, "a bool, not an integer"),
                                              (NDIM, "out of range"), (order[0], "repeated")]))
    wrong = list(order)
    wrong[1] = bad
    with pytest.raises(gc.ShapeError, match=f"is {problem} for a {NDIM}-d tensor"):
        ops["permute"](ctx, tensors["x"], tuple(wrong))


def test_numpy_integer_axes_give_numpy_results(host, ctx):
    x_np = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    idx_np = np.array([2, 0, 1, 1], np.int32)
    x, idx = ctx.tensor(x_np), ctx.tensor(idx_np)
    a = np.int64(1)
    got = host.run(ctx, lambda rec: [rec.sum(x, (np.int32(0), a)), rec.argmax(x, np.intp(-1)),
                                     rec.cumsum(x, a), rec.concat([x, x], a), rec.transpose(x, a, np.int8(2)),
                                     rec.index_select(x, idx, a), rec.softmax(x, a)])
    refs = [x_np.astype(np.float64).sum(axis=(0, 1)), x_np.argmax(axis=-1), np.cumsum(x_np, axis=1),
            np.concatenate([x_np, x_np], axis=1), np.swapaxes(x_np, 1, 2), np.take(x_np, idx_np, axis=1),
            np.exp(x_np) / np.exp(x_np).sum(axis=1, keepdims=True)]
    for g, ref in zip(got, refs):
        np.testing.assert_allclose(g.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_the_helpers_directly():
    from guestcompute.ops.base import normalize_axes, normalize_axis
    assert normalize_axis(np.int16(-1), 3, "op") == 2
    assert normalize_axes((2, np.int64(0)), 3, "op") == (2, 0)      # order kept; callers sort
    assert normalize_axes(None, 3, "op") == (0, 1, 2)
    assert normalize_axes((), 3, "op") == ()
    with pytest.raises(gc.ShapeError, match="is not an integer"):
        normalize_axes(None, 3, "op", allow_none=False)
    with pytest.raises(gc.ShapeError, match="a 0-d tensor has no axes"):
        normalize_axis(0, 0, "op")
