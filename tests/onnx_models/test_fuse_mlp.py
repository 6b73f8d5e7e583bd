"""Chains of dense layers recorded as one fused MLP op (guestcompute/onnx/
fuse_mlp.py): which nodes fuse (``bound.fused``), and fused results against
the unfused graph (``mlp="off"``), numpy and onnxruntime within the
tolerances docs/integration.md §18 gives."""
import numpy as np
import pytest

pytest.importorskip("onnx")

import guestcompute as gc  # noqa: E402
from guestcompute.errors import InvalidArgumentError  # noqa: E402

import builders  # noqa: E402
from test_models import onnxruntime_outputs  # noqa: E402

F32 = dict(rtol=1e-4, atol=1e-4)      # fp32 weights, fp32 arithmetic: the fused MLP's fma bound


def fp16_close(got, ref):
    """Within 2e-2 * max(1, max |ref|): the fused MLP's fp16 bound."""
    ref = np.asarray(ref, np.float64)
    bound = 2e-2 * max(1.0, float(np.abs(ref).max()))
    assert np.abs(np.asarray(got, np.float64) - ref).max() <= bound


def np_act(v, kind):
    if kind == "relu":
        return np.maximum(v, 0)
    if kind == "leaky_relu":
        return np.where(v >= 0, v, 0.2 * v)
    if kind == "sigmoid":
        return 1 / (1 + np.exp(-v))
    if kind == "tanh":
        return np.tanh(v)
    if kind == "silu":
        return v / (1 + np.exp(-v))
    return v


def np_chain(x, p, activations, gemm_trans_b=False):
    h = np.asarray(x, np.float64)
    for k, act in enumerate(activations):
        w = p[f"w{k}"].astype(np.float64)
        h = np_act(h @ (w.T if gemm_trans_b else w) + p[f"b{k}"], act)
    return h


def run_both(ctx, proto, x, **shapes):
    """(fused bound model, fused outputs, unfused outputs) for input ``x``."""
    model = gc.onnx.load(proto)
    fused = model.bind(ctx, **shapes)
    plain = model.bind(ctx, mlp="off", **shapes)
    assert plain.fused == []
    return fused, fused.run(x=x)["y"], plain.run(x=x)["y"]


@pytest.mark.parametrize("trans_b", [True, False])
def test_gemm_chains_fuse_whole_with_every_activation(ctx, trans_b):
    rng = np.random.default_rng(10)
    acts = ["relu", "leaky_relu", "sigmoid", "tanh", "silu", "none"]
    sizes = (12, 32, 48, 16, 64, 20, 5)
    proto, p = builders.dense_chain(rng, sizes, acts, trans_b=trans_b)
    x = rng.normal(size=(33, 12)).astype(np.float32)
    bound, y, y_off = run_both(ctx, proto, x, dims={"batch": 33})
    assert bound.fused == [("lin0", "act0", "lin1", "act1", "lin2", "act2", "lin3", "act3",
                            "lin4", "sig4", "mul4", "lin5")]
    np.testing.assert_allclose(y, y_off, **F32)
    np.testing.assert_allclose(y, np_chain(x, p, acts, trans_b), **F32)
    np.testing.assert_allclose(y, onnxruntime_outputs(proto, {"x": x})[0], **F32)


def test_matmul_add_chains_keep_the_leading_dims(ctx):
    rng = np.random.default_rng(11)
    acts = ["relu", "silu", "none"]
    proto, p = builders.dense_chain(rng, (6, 24, 24, 3), acts, linear="matmul", lead=(2, "n"))
    x = rng.normal(size=(2, 9, 6)).astype(np.float32)
    bound, y, y_off = run_both(ctx, proto, x, dims={"n": 9})
    assert bound.fused == [("lin0", "add0", "act0", "lin1", "add1", "sig1", "mul1", "lin2", "add2")]
    assert y.shape == (2, 9, 3)
    np.testing.assert_allclose(y, y_off, **F32)
    np.testing.assert_allclose(y, np_chain(x, p, acts), **F32)
    np.testing.assert_allclose(y, onnxruntime_outputs(proto, {"x": x})[0], **F32)


def _skip_model(rng):
    """x -> h0 -> h1 -> o2, y = o2 + h0: h0 is read twice (the skip), so the
    chain is cut after the first layer; o1 (a pre-activation) is also a
    graph output, so its Relu stays a node of its own."""
    from onnx import TensorProto, helper
    n = helper.make_node
    p = {"w0": rng.normal(0, 0.4, (8, 16)), "b0": rng.normal(0, 0.1, 16),
         "w1": rng.normal(0, 0.3, (16, 16)), "b1": rng.normal(0, 0.1, 16),
         "w2": rng.normal(0, 0.3, (16, 16)), "b2": rng.normal(0, 0.1, 16),
         "w3": rng.normal(0, 0.3, (16, 16)), "b3": rng.normal(0, 0.1, 16)}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    nodes = [n("Gemm", ["x", "w0", "b0"], ["g0"], name="g0"), n("Relu", ["g0"], ["h0"], name="r0"),
             n("Gemm", ["h0", "w1", "b1"], ["g1"], name="g1"), n("Relu", ["g1"], ["h1"], name="r1"),
             n("Gemm", ["h1", "w2", "b2"], ["o1"], name="g2"), n("Relu", ["o1"], ["h2"], name="r2"),
             n("Gemm", ["h2", "w3", "b3"], ["o2"], name="g3"), n("Add", ["o2", "h0"], ["y"], name="skip")]
    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    return builders.make_model(nodes, [f("x", [10, 8])], [f("y", [10, 16]), f("o1", [10, 16])], p), p


def test_a_value_read_twice_cuts_the_chain_and_graph_outputs_stay(ctx):
    rng = np.random.default_rng(12)
    proto, p = _skip_model(rng)
    x = rng.normal(size=(10, 8)).astype(np.float32)
    model = gc.onnx.load(proto)
    bound, plain = model.bind(ctx), model.bind(ctx, mlp="off")
    assert bound.fused == [("g0", "r0"), ("g1", "r1", "g2"), ("g3",)]
    outs, ref = bound.run(x=x), plain.run(x=x)
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    h0 = relu(x @ p["w0"] + p["b0"])
    o1 = relu(h0 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    y = relu(o1) @ p["w3"] + p["b3"] + h0
    for name, want in (("y", y), ("o1", o1)):
        np.testing.assert_allclose(outs[name], ref[name], **F32)
        np.testing.assert_allclose(outs[name], want, **F32)
    ort = onnxruntime_outputs(proto, {"x": x})
    np.testing.assert_allclose(outs["y"], ort[0], **F32)
    np.testing.assert_allclose(outs["o1"], ort[1], **F32)


@pytest.mark.parametrize("sizes, fused", [
    ((80, 32, 16, 4), [("lin1", "act1", "lin2")]),        # an input over 64: its layer stays unfused
    ((16, 200, 8), []),                                    # a hidden layer over 128: nothing fits
    ((16, 40, 160, 24, 4), [("lin0", "act0"), ("lin3",)]),  # 160 wide: the chain is cut around it
    ((64, 128, 128, 8), [("lin0", "act0", "lin1", "act1", "lin2")]),   # the limits themselves
])
def test_widths_over_the_limits_fall_back_to_unfused_nodes(ctx, sizes, fused):
    rng = np.random.default_rng(13)
    acts = ["relu"] * (len(sizes) - 2) + ["none"]
    proto, p = builders.dense_chain(rng, sizes, acts, linear="gemm", trans_b=False)
    x = rng.normal(size=(7, sizes[0])).astype(np.float32)
    bound, y, y_off = run_both(ctx, proto, x, dims={"batch": 7})
    assert bound.fused == fused
    np.testing.assert_allclose(y, y_off, **F32)
    np.testing.assert_allclose(y, np_chain(x, p, acts), **F32)


def test_a_float16_model_fuses_into_a_float16_network(ctx):
    if not ctx.caps.float16_storage:
        pytest.skip("the host did not enable float16 storage")
    rng = np.random.default_rng(14)
    acts = ["relu", "tanh", "none"]
    proto, p = builders.dense_chain(rng, (16, 64, 32, 8), acts, linear="matmul", dtype=np.float16)
    x = rng.normal(size=(40, 16)).astype(np.float16)
    bound, y, y_off = run_both(ctx, proto, x, dims={"batch": 40})
    assert len(bound.fused) == 1 and y.dtype == np.float16
    ref = np_chain(x.astype(np.float64), p, acts)
    fp16_close(y, ref)
    fp16_close(y_off, ref)


def test_mlp_float16_opts_a_float32_model_into_fp16_weights(ctx):
    rng = np.random.default_rng(15)
    acts = ["relu", "relu", "sigmoid"]
    proto, p = builders.dense_chain(rng, (32, 64, 64, 16), acts)
    x = rng.normal(size=(50, 32)).astype(np.float32)
    model = gc.onnx.load(proto)
    bound = model.bind(ctx, dims={"batch": 50}, mlp="float16")
    assert len(bound.fused) == 1
    y = bound.run(x=x)["y"]
    assert y.dtype == np.float32
    fp16_close(y, np_chain(x, p, acts, True))
    with pytest.raises(InvalidArgumentError, match="mlp="):
        model.bind(ctx, dims={"batch": 50}, mlp="bfloat16")


def test_weights_beyond_float16_keep_a_forced_float16_chain_unfused(ctx):
    rng = np.random.default_rng(16)
    proto, p = builders.dense_chain(rng, (4, 8, 2), ["relu", "none"])
    from onnx import numpy_helper
    big = p["w0"].copy()
    big[0, 0] = 1e6
    proto.graph.initializer[0].CopyFrom(numpy_helper.from_array(big, "w0"))
    model = gc.onnx.load(proto)
    assert model.bind(ctx, dims={"batch": 3}, mlp="float16").fused == [("lin1",)]
    assert len(model.bind(ctx, dims={"batch": 3}).fused) == 1


def _single(op, inputs, inits, shape_x, shape_y, **attrs):
    from onnx import TensorProto, helper
    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    node = helper.make_node(op, inputs, ["y"], name="lin", **attrs)
    extra = [f(n, list(v)) for n, v in inits.items() if isinstance(v, tuple)]
    arrays = {n: v for n, v in inits.items() if not isinstance(v, tuple)}
    return builders.make_model([node], [f("x", shape_x)] + extra, [f("y", shape_y)], arrays)


def test_what_does_not_fit_the_pattern_stays_unfused(ctx):
    rng = np.random.default_rng(17)
    w, b = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    cases = [
        _single("Gemm", ["x", "w", "b"], {"w": w, "b": b}, [2, 4], [2, 3], alpha=0.5),
        _single("Gemm", ["x", "w", "b"], {"w": w, "b": b}, [4, 2], [2, 3], transA=1),
        _single("Gemm", ["x", "w", "b"], {"w": (4, 3), "b": b}, [2, 4], [2, 3]),      # weights fed at run time
        _single("Gemm", ["x", "w", "b"], {"w": w, "b": rng.normal(size=(2, 3)).astype(np.float32)},
                [2, 4], [2, 3]),                                                        # not a per-column bias
    ]
    for proto in cases:
        bound = gc.onnx.load(proto).bind(ctx)
        assert bound.fused == []
    ok = _single("Gemm", ["x", "w", "b"], {"w": w, "b": b.reshape(1, 3)}, [2, 4], [2, 3])
    assert gc.onnx.load(ok).bind(ctx).fused == [("lin",)]


def test_a_chain_deeper_than_the_loop_cap_allows_stops_short_of_it(ctx):
    """Where the driver caps loop iterations, the fused piece ends before
    the cap; the layers after it take 128 inputs (over the fused input
    limit), so they stay unfused."""
    rng = np.random.default_rng(18)
    depth = 36
    acts = ["relu"] * (depth - 1) + ["none"]
    proto, p = builders.dense_chain(rng, (16,) + (128,) * (depth - 1) + (4,), acts, trans_b=False)
    x = rng.normal(size=(3, 16)).astype(np.float32)
    bound, y, y_off = run_both(ctx, proto, x, dims={"batch": 3})
    assert len(bound.fused) == 1 and bound.fused[0][:2] == ("lin0", "act0")
    if ctx.limits.loop_iteration_cap:
        assert len(bound.fused[0]) < 2 * depth - 1
    else:
        assert len(bound.fused[0]) == 2 * depth - 1
    np.testing.assert_allclose(y, y_off, **F32)
    np.testing.assert_allclose(y, np_chain(x, p, acts), **F32)
