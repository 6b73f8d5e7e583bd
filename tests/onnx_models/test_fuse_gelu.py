"""The erf form of GELU written out in nodes (opsets before 20, torch's
TorchScript exporter) becomes one Gelu node: each way of writing it is
found and matches onnxruntime; an Erf outside the pattern, or a pattern
whose inner value is read elsewhere, is refused as the unsupported Erf."""
import math

import numpy as np
import pytest

pytest.importorskip("onnx")

import guestcompute as gc  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import builders  # noqa: E402
from test_models import onnxruntime_outputs  # noqa: E402

SHAPE = (4, 33)


def gelu_model(scale="div", add_first_one=False, form="outer_half", const_nodes=False, divisor=math.sqrt(2.0),
               extra_output=None):
    """``y = 0.5 * x * (1 + erf(x / sqrt(2)))`` written one of the ways
    exporters write it. ``scale``: "div" (x / sqrt 2), "mul" (x * 1/sqrt 2)
    or "mul_first" (1/sqrt 2 * x); ``form``: "outer_half" (Mul(Mul(x, a),
    0.5)) or "inner_half" (Mul(Mul(x, 0.5), a)); ``const_nodes``: the
    scalars from Constant nodes rather than initializers; ``extra_output``:
    an inner value also made a graph output."""
    values = {"c_scale": np.float32(divisor if scale == "div" else 1 / divisor), "c_one": np.float32(1.0),
              "c_half": np.float32(0.5)}
    n = helper.make_node
    nodes, inits = [], {}
    for name, v in values.items():
        if const_nodes:
            nodes.append(n("Constant", [], [name], value=helper.make_tensor(name + "_t", TensorProto.FLOAT, [], [v])))
        else:
            inits[name] = np.array(v, np.float32)
    scaled = {"div": n("Div", ["x", "c_scale"], ["d"]), "mul": n("Mul", ["x", "c_scale"], ["d"]),
              "mul_first": n("Mul", ["c_scale", "x"], ["d"])}[scale]
    nodes += [scaled, n("Erf", ["d"], ["e"]),
              n("Add", ["c_one", "e"] if add_first_one else ["e", "c_one"], ["a"])]
    if form == "outer_half":
        nodes += [n("Mul", ["x", "a"], ["m"]), n("Mul", ["m", "c_half"], ["y"])]
    else:
        nodes += [n("Mul", ["c_half", "x"], ["m"]), n("Mul", ["a", "m"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))]
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, list(SHAPE)))
    return builders.make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                               outputs, inits, 17)


WAYS = [dict(), dict(scale="mul"), dict(scale="mul_first", add_first_one=True), dict(form="inner_half"),
        dict(form="inner_half", const_nodes=True, scale="mul"), dict(const_nodes=True, add_first_one=True)]


@pytest.mark.parametrize("way", WAYS, ids=lambda w: ",".join(f"{k}={v}" for k, v in w.items()) or "torch")
def test_each_way_of_writing_gelu_becomes_one_gelu_node(ctx, way):
    model = gelu_model(**way)
    loaded = gc.onnx.load(model)
    kinds = [node.op_type for node in loaded.graph.nodes]
    assert kinds.count("Gelu") == 1 and not {"Erf", "Div", "Add", "Mul"} & set(kinds), kinds
    x = np.random.default_rng(0).normal(0, 3, SHAPE).astype(np.float32)
    x[0, :5] = [0.0, -0.0, 30.0, -30.0, 1e-3]
    got = loaded.bind(ctx).run(x=x)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(model, {"x": x})[0], rtol=1e-5, atol=2e-6)


def test_an_erf_outside_the_pattern_is_refused_by_name(ctx):
    model = builders.make_model([helper.make_node("Erf", ["x"], ["y"], name="lonely")],
                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))], {}, 17)
    with pytest.raises(gc.UnsupportedError, match=r"'lonely' \(Erf\)"):
        gc.onnx.load(model)


@pytest.mark.parametrize("change", [dict(extra_output="e"), dict(extra_output="a"), dict(divisor=1.5)],
                         ids=["erf_also_an_output", "sum_also_an_output", "not_sqrt2"])
def test_a_pattern_that_is_not_gelu_keeps_its_erf(ctx, change):
    with pytest.raises(gc.UnsupportedError, match=r"\(Erf\)"):
        gc.onnx.load(gelu_model(**change))


def test_two_gelus_on_one_input_both_fuse(ctx):
    """Each pattern is matched on its own, even where they read the same x."""
    first = gelu_model()
    second = gelu_model(form="inner_half")
    for node in second.graph.node:
        node.input[:] = [v if v in ("x", "c_scale", "c_one", "c_half") else v + "2" for v in node.input]
        node.output[:] = [v + "2" for v in node.output]
    first.graph.node.extend(second.graph.node)
    first.graph.node.append(helper.make_node("Add", ["y", "y2"], ["z"]))
    first.graph.output[0].name = "z"
    loaded = gc.onnx.load(first)
    assert [node.op_type for node in loaded.graph.nodes] == ["Gelu", "Gelu", "Add"]
    x = np.linspace(-6, 6, SHAPE[0] * SHAPE[1], dtype=np.float32).reshape(SHAPE)
    got = loaded.bind(ctx).run(x=x)["z"]
    np.testing.assert_allclose(got, onnxruntime_outputs(first, {"x": x})[0], rtol=1e-5, atol=4e-6)

