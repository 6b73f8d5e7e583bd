"""Models built with onnx.helper, bound and run through guestcompute.onnx,
against numpy and (where installed) onnxruntime on the CPU; and the typed
errors of unsupported nodes, wrong inputs and a missing onnx package."""
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")

import guestcompute as gc  # noqa: E402
from guestcompute.errors import (DTypeError, MissingDependencyError, ShapeError,  # noqa: E402
                                 UnsupportedError)

import builders  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-5)


def onnxruntime_outputs(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def np_mlp(x, p, layers):
    for k in range(layers):
        x = x @ p[f"w{k}"].T + p[f"b{k}"]
        x = 1 / (1 + np.exp(-x)) if k == layers - 1 else np.maximum(x, 0)
    return x


def np_conv(x, w, b, pad, stride):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y + b[:, None, None]


def test_mlp_matches_numpy_and_onnxruntime_inside_a_program(ctx):
    rng = np.random.default_rng(1)
    proto, params = builders.mlp(rng)
    model = gc.onnx.load(proto.SerializeToString())
    assert [(i.name, i.shape, i.dtype) for i in model.inputs] == [("x", ("batch", 3), "float32")]
    bound = model.bind(ctx, dims={"batch": 37})
    x_np = rng.normal(size=(37, 3)).astype(np.float32)
    x = ctx.tensor(x_np)
    prog = ctx.program(lambda rec: bound(rec, x=x))
    ctx.run(lambda rec: rec.execute(prog))
    y = bound.run(x=x_np)["y"]
    np.testing.assert_allclose(y, np_mlp(x_np.astype(np.float64), params, 3), **TOL)
    outs = {}
    ctx.run(lambda rec: outs.update(bound(rec, x=x)))
    np.testing.assert_allclose(outs["y"].numpy(), y, **TOL)
    np.testing.assert_allclose(y, onnxruntime_outputs(proto, {"x": x_np})[0], **TOL)


def test_conv_net_matches_numpy_and_onnxruntime(ctx):
    rng = np.random.default_rng(2)
    proto, p = builders.conv_net(rng)
    bound = gc.onnx.load(proto).bind(ctx)
    x = rng.normal(size=(2, 3, 16, 16)).astype(np.float32)
    y = bound.run(x=x)["y"]
    c = np.maximum(np_conv(x.astype(np.float64), p["cw"], p["cb"], 1, 2), 0)
    pooled = c.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(y, pooled.reshape(2, -1) @ p["fw"] + p["fb"], **TOL)
    np.testing.assert_allclose(y, onnxruntime_outputs(proto, {"x": x})[0], **TOL)


def test_nerf_mlp_with_skip_concat_and_folded_shape_chain(ctx):
    rng = np.random.default_rng(3)
    proto, p = builders.nerf(rng)
    bound = gc.onnx.load(proto).bind(ctx, x=(50, 3))
    assert bound.output_shapes == {"y": (50, 4)}
    x = rng.normal(size=(50, 3)).astype(np.float32)
    y = bound.run(x=x)["y"]
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    h = relu(relu(x @ p["w0"] + p["b0"]) @ p["w1"] + p["b1"])
    ref = relu(np.concatenate([h, x], -1) @ p["w2"] + p["b2"]) @ p["w3"] + p["b3"]
    np.testing.assert_allclose(y, ref, **TOL)
    np.testing.assert_allclose(y, onnxruntime_outputs(proto, {"x": x})[0], **TOL)


def test_an_unsupported_node_is_named_at_load():
    with pytest.raises(UnsupportedError, match="the_erf.*Erf"):
        gc.onnx.load(builders.unsupported_node())


def test_an_unsupported_attribute_is_named_at_bind(ctx):
    from onnx import TensorProto, helper
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2])
    vi = lambda n, t: helper.make_tensor_value_info(n, t, None)  # noqa: E731
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [vi("y", TensorProto.FLOAT), vi("i", TensorProto.INT64)])
    model = gc.onnx.load(helper.make_model(graph))
    with pytest.raises(UnsupportedError, match="'pool' \\(MaxPool\\).*Indices"):
        model.bind(ctx)


def test_wrong_inputs_raise_before_recording(ctx):
    rng = np.random.default_rng(4)
    bound = gc.onnx.load(builders.mlp(rng)[0]).bind(ctx, x=(8, 3))
    with pytest.raises(ShapeError, match="bound for"):
        bound.run(x=np.zeros((9, 3), np.float32))
    with pytest.raises(DTypeError):
        ctx.run(lambda rec: bound(rec, x=ctx.tensor(np.zeros((8, 3), np.int32))))
    with pytest.raises(gc.InvalidArgumentError, match="missing"):
        ctx.run(lambda rec: bound(rec))
    with pytest.raises(ShapeError, match="symbolic"):
        gc.onnx.load(builders.mlp(rng)[0]).bind(ctx)
    with pytest.raises(ShapeError, match="declared"):
        gc.onnx.load(builders.mlp(rng)[0]).bind(ctx, x=(8, 4))


def test_without_onnx_load_says_which_extra_to_install():
    code = ("import sys; sys.modules['onnx'] = None\n"
            "import guestcompute as gc\n"
            "try:\n    gc.onnx.load('model.onnx')\n"
            "except gc.MissingDependencyError as e:\n    print('typed:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "typed:" in out and "pip install guestcompute[onnx]" in out
    assert issubclass(MissingDependencyError, ImportError)


def test_importing_guestcompute_does_not_import_onnx():
    code = "import sys, guestcompute as gc; gc.Tensor; gc.onnx; print('onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_layer_normalization_over_trailing_axes_matches_numpy(ctx):
    """Y alone (the node cases ask for Mean and InvStdDev too), over the last two axes."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    scale, bias = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(5,)).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-2, epsilon=1e-3)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 5])],
                              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    y = gc.onnx.load(helper.make_model(graph)).bind(ctx).run(x=x)["y"]
    mean, var = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3) * scale + bias, rtol=1e-4, atol=1e-4)
