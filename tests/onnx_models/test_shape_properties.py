"""Property tests of the ONNX rules whose work is all shapes and axes —
Tile, Expand, Pad (every mode, negative pads), Split, CumSum, the
reductions, ArgMax/ArgMin and broadcasting arithmetic — against
onnxruntime on the CPU, over random shapes, axes and attributes."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import guestcompute as gc  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import builders  # noqa: E402

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def matches_onnxruntime(ctx, nodes, x, inits, outputs=("y",), opset=18):
    """Bind and run the graph; its outputs equal onnxruntime's (shape and values)."""
    model = builders.make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                                [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                                inits, opset)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = gc.onnx.load(model).bind(ctx).run(x=x)
    for name, w in zip(outputs, want):
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


@SETTINGS
@given(shape=shapes, data_=st.data())
def test_tile_and_expand(modern_ctx, shape, data_):
    reps = np.array(data_.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape))), np.int64)
    matches_onnxruntime(modern_ctx, [helper.make_node("Tile", ["x", "r"], ["y"])], data(shape), {"r": reps})
    target = [data_.draw(st.integers(1, 3)) if n == 1 else n for n in shape]
    target = [data_.draw(st.integers(1, 2))] * data_.draw(st.integers(0, 1)) + target
    matches_onnxruntime(modern_ctx, [helper.make_node("Expand", ["x", "s"], ["y"])], data(shape),
                        {"s": np.array(target, np.int64)})


@SETTINGS
@given(shape=shapes, mode=st.sampled_from(["constant", "edge", "reflect", "wrap"]), data_=st.data())
def test_pad(modern_ctx, shape, mode, data_):
    # Per side a crop of one (leaving at least one sample, two for reflect) or a growth (for
    # reflect at most the cropped length - 1): where onnxruntime defines the modes.
    least = 2 if mode == "reflect" else 1
    begin, end = [], []
    for n in shape:
        crops = [data_.draw(st.booleans()) for _ in range(2)]
        while n - sum(crops) < min(least, n):
            crops[crops.index(True)] = False
        left = n - sum(crops)
        # wrap: at most the kept length (some onnxruntime releases return stray values for more)
        grow = st.integers(0, {"reflect": left - 1, "wrap": left}.get(mode, 3))
        begin.append(-1 if crops[0] else data_.draw(grow))
        end.append(-1 if crops[1] else data_.draw(grow))
    pads = begin + end
    inits = {"p": np.array(pads, np.int64), "v": np.array(1.5, np.float32)}
    inputs = ["x", "p", "v"] if mode == "constant" else ["x", "p"]
    matches_onnxruntime(modern_ctx, [helper.make_node("Pad", inputs, ["y"], mode=mode)], data(shape), inits)


@SETTINGS
@given(shape=shapes, data_=st.data())
def test_split_and_cumsum(modern_ctx, shape, data_):
    axis = data_.draw(st.integers(-len(shape), len(shape) - 1))
    # k parts whose last is not empty: some onnxruntime releases refuse the others (4 in 3 parts of
    # 2, 2 and 0), which opset 18 allows
    n = shape[axis]
    k = data_.draw(st.sampled_from([k for k in range(1, n + 1) if -(-n // k) * (k - 1) < n]))
    outs = tuple(f"y{i}" for i in range(k))
    matches_onnxruntime(modern_ctx, [helper.make_node("Split", ["x"], list(outs), axis=axis, num_outputs=k)],
                        data(shape), {}, outputs=outs)
    flags = dict(exclusive=data_.draw(st.integers(0, 1)), reverse=data_.draw(st.integers(0, 1)))
    matches_onnxruntime(modern_ctx, [helper.make_node("CumSum", ["x", "a"], ["y"], **flags)], data(shape),
                        {"a": np.array(axis, np.int64)})


@SETTINGS
@given(shape=shapes, data_=st.data(),
       op=st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
                           "ReduceSumSquare", "ReduceLogSumExp"]))
def test_reductions_and_arg_extremes(modern_ctx, shape, data_, op):
    axes = sorted(set(data_.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))))
    keepdims = data_.draw(st.integers(0, 1))
    matches_onnxruntime(modern_ctx, [helper.make_node(op, ["x", "ax"], ["y"], keepdims=keepdims)], data(shape),
                        {"ax": np.array(axes, np.int64)})
    arg = data_.draw(st.sampled_from(["ArgMax", "ArgMin"]))
    nodes = [helper.make_node(arg, ["x"], ["i"], axis=axes[0], keepdims=keepdims,
                              select_last_index=data_.draw(st.integers(0, 1))),
             helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)]
    matches_onnxruntime(modern_ctx, nodes, np.round(data(shape)), {})     # rounded: ties happen


@SETTINGS
@given(shape=shapes, data_=st.data(), op=st.sampled_from(["Add", "Sub", "Mul", "Max", "Min", "Sum", "Mean"]))
def test_broadcasting_arithmetic(modern_ctx, shape, data_, op):
    # the constant operand: some of x's trailing dims, each kept or made 1; with all of them, maybe
    # a leading dim x lacks
    tail = shape[data_.draw(st.integers(0, len(shape))):]
    other = tuple(n if data_.draw(st.booleans()) else 1 for n in tail)
    if len(tail) == len(shape):
        other = (2,) * data_.draw(st.integers(0, 1)) + other
    matches_onnxruntime(modern_ctx, [helper.make_node(op, ["c", "x"], ["y"])], data(shape),
                        {"c": data(other, seed=1)})
