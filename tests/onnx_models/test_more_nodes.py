"""Nodes whose edges the onnx node cases do not reach: activations and
log-sum-exp at extreme inputs, Pad's modes with cropping, reductions over
empty axes, a small mobile-style conv block against onnxruntime, and the
typed refusals of training-mode nodes."""
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

import guestcompute as gc  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import builders  # noqa: E402
from test_models import onnxruntime_outputs  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integration.md"


def one_node(op, x_shape, y_shape, inits=None, inputs=("x",), opset=18, dtype=TensorProto.FLOAT, **attrs):
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    return builders.make_model([node], [helper.make_tensor_value_info("x", dtype, list(x_shape))],
                               [helper.make_tensor_value_info("y", dtype, y_shape)], inits or {}, opset)


def run(ctx, model, x):
    return gc.onnx.load(model).bind(ctx).run(x=x)["y"]


def test_softplus_and_mish_stay_finite_where_the_naive_formula_overflows(ctx):
    x = np.array([-200, -90, -20, -1, 0, 1, 20, 90, 200], np.float32)
    stable = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x.astype(np.float64))))
    got = run(ctx, one_node("Softplus", x.shape, x.shape), x)
    np.testing.assert_allclose(got, stable, rtol=1e-5, atol=1e-6)
    mish = run(ctx, one_node("Mish", x.shape, x.shape), x)
    np.testing.assert_allclose(mish, x * np.tanh(stable), rtol=1e-5, atol=1e-6)


def test_log_sum_exp_of_large_and_infinite_values(ctx):
    x = np.array([[1000, 999, 998], [-np.inf, -np.inf, -np.inf], [np.inf, 0, 1], [-1000, -1001, -np.inf]],
                 np.float32)
    got = run(ctx, one_node("ReduceLogSumExp", x.shape, None, {"axes": np.array([1], np.int64)},
                            inputs=("x", "axes"), keepdims=0), x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        peak = x64.max(1)
        shift = np.where(np.isfinite(peak), peak, 0)
        want = np.log(np.exp(x64 - shift[:, None]).sum(1)) + shift
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.isposinf(got[2]) and np.isneginf(got[1])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_modes_with_cropping_match_numpy(ctx, mode):
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    pads = np.array([2, -1, 1, 3], np.int64)      # rows: 2 before, 1 after; columns: crop 1, add 3
    inits = {"pads": pads, "value": np.array(7.5, np.float32)}
    model = one_node("Pad", x.shape, None, inits, inputs=("x", "pads", "value"), mode=mode)
    cropped = x[:, 1:]
    kw = {"constant_values": 7.5} if mode == "constant" else {}
    want = np.pad(cropped, ((2, 1), (0, 3)), mode=mode, **kw)
    np.testing.assert_array_equal(run(ctx, model, x), want)
    np.testing.assert_array_equal(want, onnxruntime_outputs(model, {"x": x})[0])


def test_reductions_over_an_empty_axis_give_the_identity(ctx):
    x = np.zeros((3, 0, 2), np.float32)
    axes = {"axes": np.array([1], np.int64)}
    for op, value in (("ReduceSum", 0.0), ("ReduceMax", -np.inf), ("ReduceMin", np.inf), ("ReduceL2", 0.0),
                      ("ReduceLogSumExp", -np.inf)):
        got = run(ctx, one_node(op, x.shape, None, axes, inputs=("x", "axes"), keepdims=1), x)
        assert got.shape == (3, 1, 2) and (got == value).all(), op


def test_arg_max_takes_the_last_of_equal_maxima_when_asked(ctx):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [5, 1, 5, 5]], np.float32)
    for last, want in ((0, [1, 0, 0]), (1, [2, 3, 3])):
        got = run(ctx, one_node("ArgMax", x.shape, None, axis=1, keepdims=0, select_last_index=last), x)
        np.testing.assert_array_equal(got, want)


def test_mobile_block_matches_onnxruntime(ctx):
    """Conv -> BatchNormalization -> HardSwish -> Pad (reflect) -> depthwise Conv -> PRelu ->
    GlobalAveragePool -> Flatten -> Gemm -> Softplus: the nodes of a small image network as
    torch.onnx.export writes them in eval mode."""
    rng = np.random.default_rng(7)
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    inits = {"cw": f32(8, 3, 3, 3) * 0.3, "cb": f32(8) * 0.1, "g": 1 + f32(8) * 0.1, "b": f32(8) * 0.1,
             "m": f32(8) * 0.2, "v": 0.5 + np.abs(f32(8)), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
             "dw": f32(8, 1, 3, 3) * 0.3, "slope": np.full((8, 1, 1), 0.25, np.float32),
             "fw": f32(5, 8) * 0.3, "fb": f32(5) * 0.1}
    n = helper.make_node
    nodes = [n("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
             n("HardSwish", ["bn"], ["hs"]), n("Pad", ["hs", "pads"], ["p"], mode="reflect"),
             n("Conv", ["p", "dw"], ["d"], group=8), n("PRelu", ["d", "slope"], ["pr"]),
             n("GlobalAveragePool", ["pr"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", "fw", "fb"], ["lin"], transB=1), n("Softplus", ["lin"], ["y"])]
    model = builders.make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], inits)
    x = f32(2, 3, 16, 16)
    np.testing.assert_allclose(run(ctx, model, x), onnxruntime_outputs(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_upscaler_with_transposed_conv_and_pixel_shuffle_matches_onnxruntime(ctx, mode):
    """Conv -> BatchNormalization -> Relu -> ConvTranspose (stride 2, grouped) -> Conv ->
    DepthToSpace -> Sigmoid, and back down with SpaceToDepth: a 4x sub-pixel upscaler's nodes."""
    rng = np.random.default_rng(8)
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    inits = {"cw": f32(8, 3, 3, 3) * 0.3, "g": 1 + f32(8) * 0.1, "b": f32(8) * 0.1, "m": f32(8) * 0.1,
             "v": 0.5 + np.abs(f32(8)), "tw": f32(8, 4, 4, 4) * 0.2, "tb": f32(8) * 0.1,
             "ow": f32(12, 8, 3, 3) * 0.2}
    n = helper.make_node
    nodes = [n("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]),
             n("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"]), n("Relu", ["bn"], ["r"]),
             n("ConvTranspose", ["r", "tw", "tb"], ["up"], strides=[2, 2], pads=[1, 1, 1, 1], group=2),
             n("Conv", ["up", "ow"], ["o"], pads=[1, 1, 1, 1]),
             n("DepthToSpace", ["o"], ["shuffled"], blocksize=2, mode=mode), n("Sigmoid", ["shuffled"], ["s"]),
             n("SpaceToDepth", ["s"], ["y"], blocksize=4)]
    model = builders.make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    x = f32(1, 3, 6, 5)
    got = gc.onnx.load(model).bind(ctx).run(x=x)["y"]
    want = onnxruntime_outputs(model, {"x": x})[0]
    assert got.shape == want.shape == (1, 48, 6, 5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_style_block_with_instance_and_lp_normalization_matches_onnxruntime(ctx):
    """Conv -> InstanceNormalization -> Relu -> Trilu over the image's last two axes ->
    LpNormalization over channels: a style-transfer block's nodes (and two shape-preserving ones)."""
    rng = np.random.default_rng(9)
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    inits = {"cw": f32(6, 3, 3, 3) * 0.3, "s": 1 + f32(6) * 0.1, "b": f32(6) * 0.1, "k": np.array(-1, np.int64)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]),
             n("InstanceNormalization", ["c", "s", "b"], ["i"], epsilon=1e-3), n("Relu", ["i"], ["r"]),
             n("Trilu", ["r", "k"], ["t"], upper=1), n("LpNormalization", ["t"], ["y"], axis=1, p=2)]
    model = builders.make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 9])],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    x = f32(2, 3, 7, 9)
    want = onnxruntime_outputs(model, {"x": x})[0]
    np.testing.assert_allclose(run(ctx, model, x), want, rtol=1e-4, atol=1e-5)


def test_layer_normalization_statistics_of_a_float16_input_are_float32(modern_ctx):
    ctx = modern_ctx
    x = (np.random.default_rng(10).normal(size=(3, 4, 6)) * 4 + 1).astype(np.float16)
    node = helper.make_node("LayerNormalization", ["x"], ["y", "mean", "inv"], axis=1, epsilon=1e-2)
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in
            (("y", TensorProto.FLOAT16), ("mean", TensorProto.FLOAT), ("inv", TensorProto.FLOAT))]
    model = builders.make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 4, 6])],
                                outs, {})
    got = gc.onnx.load(model).bind(ctx).run(x=x)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(1, 2), keepdims=True)
    inv = 1 / np.sqrt(x64.var(axis=(1, 2), keepdims=True) + 1e-2)
    assert got["mean"].dtype == got["inv"].dtype == np.float32 and got["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(got["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["inv"], inv, rtol=1e-5)
    np.testing.assert_allclose(got["y"].astype(np.float64), (x64 - mean) * inv, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("scales, attrs", [
    ((1, 1, 2.0, 1.5), dict(mode="cubic")),                                      # bicubic upscaling
    ((1, 1, 2.0, 2.0), dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)),
    ((1, 1, 0.5, 0.4), dict(mode="linear", antialias=1)),                         # box-like downscaling
    ((1, 1, 0.5, 0.75), dict(mode="cubic", antialias=1)),
])
def test_resize_cubic_and_antialiased_match_onnxruntime(ctx, scales, attrs):
    x = np.random.default_rng(11).uniform(0, 1, (1, 3, 10, 12)).astype(np.float32)
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array(scales, np.float32)}
    model = one_node("Resize", x.shape, None, inits, inputs=("x", "roi", "scales"), **attrs)
    want = onnxruntime_outputs(model, {"x": x})[0]
    got = run(ctx, model, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_training_mode_nodes_are_refused_at_bind(ctx):
    inits = {k: np.ones(2, np.float32) for k in ("g", "b", "m", "v")}
    bn = one_node("BatchNormalization", (1, 2, 3), [1, 2, 3], inits, inputs=("x", "g", "b", "m", "v"),
                  training_mode=1)
    with pytest.raises(gc.UnsupportedError, match="BatchNormalization.*training mode"):
        gc.onnx.load(bn).bind(ctx)
    drop = one_node("Dropout", (4,), [4], {"r": np.array(0.5, np.float32), "t": np.array(True)},
                    inputs=("x", "r", "t"))
    with pytest.raises(gc.UnsupportedError, match="Dropout.*training mode"):
        gc.onnx.load(drop).bind(ctx)


def test_the_guide_lists_every_supported_op_type():
    text = DOCS.read_text()
    listed = text[text.index("Supported op types"):text.index("Anything else")]
    missing = [op for op in gc.onnx.supported_ops() if not re.search(rf"\b{op}\b", listed)]
    assert not missing, missing
