"""Small ONNX models built with onnx.helper for the tests."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def make_model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    opsets = [helper.make_opsetid("", opset)]
    # The lowest IR version the opset needs, not the onnx package's newest:
    # an onnxruntime older than the onnx package refuses newer IR versions.
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp(rng, sizes=(3, 16, 16, 2)):
    """Gemm + Relu layers with a Sigmoid output; batch is symbolic."""
    nodes, inits, x = [], {}, "x"
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        inits[f"w{k}"] = rng.normal(0, 0.5, (b, a)).astype(np.float32)   # transB=1, torch's layout
        inits[f"b{k}"] = rng.normal(0, 0.1, b).astype(np.float32)
        nodes.append(helper.make_node("Gemm", [x, f"w{k}", f"b{k}"], [f"h{k}"], transB=1))
        x = f"h{k}"
        last = k == len(sizes) - 2
        nodes.append(helper.make_node("Sigmoid" if last else "Relu", [x], ["y" if last else f"a{k}"]))
        x = f"a{k}"
    return make_model(nodes, [_f("x", ["batch", sizes[0]])], [_f("y", ["batch", sizes[-1]])], inits), inits


def conv_net(rng):
    """Conv (pads, stride 2) + Relu + MaxPool + Flatten + Gemm: a tiny image classifier."""
    inits = {"cw": rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32),
             "cb": rng.normal(0, 0.1, 4).astype(np.float32),
             "fw": rng.normal(0, 0.3, (4 * 4 * 4, 5)).astype(np.float32),
             "fb": np.zeros(5, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"])]
    return make_model(nodes, [_f("x", [2, 3, 16, 16])], [_f("y", [2, 5])], inits), inits


def nerf(rng, width=32):
    """A NeRF-style MLP: positions through two layers, the input concatenated
    back in (the skip), two more layers; the batch reshaped through a
    Shape -> Gather -> Unsqueeze -> Concat chain as torch.onnx.export writes."""
    inits = {"w0": rng.normal(0, 0.4, (3, width)), "b0": rng.normal(0, 0.1, width),
             "w1": rng.normal(0, 0.2, (width, width)), "b1": rng.normal(0, 0.1, width),
             "w2": rng.normal(0, 0.2, (width + 3, width)), "b2": rng.normal(0, 0.1, width),
             "w3": rng.normal(0, 0.2, (width, 4)), "b3": rng.normal(0, 0.1, 4),
             "zero": np.array(0, np.int64), "four": np.array([4], np.int64)}
    inits = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in inits.items()}
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w0"], ["m0"]), n("Add", ["m0", "b0"], ["a0"]), n("Relu", ["a0"], ["h0"]),
             n("MatMul", ["h0", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["a1"]), n("Relu", ["a1"], ["h1"]),
             n("Concat", ["h1", "x"], ["skip"], axis=-1),
             n("MatMul", ["skip", "w2"], ["m2"]), n("Add", ["m2", "b2"], ["a2"]), n("Relu", ["a2"], ["h2"]),
             n("MatMul", ["h2", "w3"], ["m3"]), n("Add", ["m3", "b3"], ["raw"]),
             n("Shape", ["x"], ["shape"]), n("Gather", ["shape", "zero"], ["batch"], axis=0),
             n("Unsqueeze", ["batch", "zero1"], ["batch1"]), n("Concat", ["batch1", "four"], ["target"], axis=0),
             n("Reshape", ["raw", "target"], ["y"])]
    inits["zero1"] = np.array([0], np.int64)
    return make_model(nodes, [_f("x", ["n", 3])], [_f("y", ["n", 4])], inits), inits


def unsupported_node():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Erf", ["r"], ["y"], name="the_erf")]
    return make_model(nodes, [_f("x", [4])], [_f("y", [4])], {})


def _activation_nodes(kind, h, out, k):
    """Nodes applying activation ``kind`` to ``h`` into ``out``."""
    n = helper.make_node
    if kind == "none":
        return [n("Identity", [h], [out], name=f"id{k}")]
    if kind == "silu":      # torch's export of nn.SiLU
        return [n("Sigmoid", [h], [f"s{k}"], name=f"sig{k}"), n("Mul", [h, f"s{k}"], [out], name=f"mul{k}")]
    if kind == "leaky_relu":
        return [n("LeakyRelu", [h], [out], name=f"act{k}", alpha=0.2)]
    return [n({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[kind], [h], [out], name=f"act{k}")]


def dense_chain(rng, sizes, activations, linear="gemm", trans_b=True, dtype=np.float32, lead=("batch",)):
    """Dense layers ``sizes[0] -> ... -> sizes[-1]``: Gemm (torch's (out, in)
    weights with ``trans_b``) or MatMul + Add (bias on the left every other
    layer), each followed by its activation ("none" writes an Identity
    after the last layer, or no node in between). Node names: ``lin{k}``,
    ``add{k}``, ``act{k}`` (``sig{k}``/``mul{k}`` for silu)."""
    n = helper.make_node
    nodes, inits, x = [], {}, "x"
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = rng.normal(0, 1 / np.sqrt(a), (b, a) if trans_b and linear == "gemm" else (a, b))
        inits[f"w{k}"], inits[f"b{k}"] = w.astype(dtype), rng.normal(0, 0.1, b).astype(dtype)
        last = k == len(sizes) - 2
        out = "y" if last else f"h{k}"
        act = activations[k]
        pre = f"p{k}" if act != "none" or last else out
        if linear == "gemm":
            nodes.append(n("Gemm", [x, f"w{k}", f"b{k}"], [pre], name=f"lin{k}", transB=int(trans_b)))
        else:
            nodes.append(n("MatMul", [x, f"w{k}"], [f"m{k}"], name=f"lin{k}"))
            nodes.append(n("Add", [f"m{k}", f"b{k}"] if k % 2 == 0 else [f"b{k}", f"m{k}"], [pre], name=f"add{k}"))
        if pre != out:
            nodes += _activation_nodes(act, pre, out, k)
        x = out
    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", elem, list(lead) + [sizes[0]])]
    outputs = [helper.make_tensor_value_info("y", elem, list(lead) + [sizes[-1]])]
    return make_model(nodes, inputs, outputs, inits), inits
