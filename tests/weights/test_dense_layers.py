"""gc.dense_layers: the fused MLP's layers from torch-style state dicts —
numpy values, guest tensors, objects that only look like torch tensors and
modules, and (where torch is installed) a real nn.Sequential whose own
forward the fused op must match — and from safetensors files; typed errors
naming the entry for what is not a chain of Linear layers."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import mlp_op
from guestcompute.ops.mlp import apply_activation

from safetensors_files import pack_arrays

RNG = np.random.default_rng(21)
# The fused op's documented bounds (docs/integration.md §18): the portable
# kernel within TOL * (1 + |ref|), the cooperative-matrix one within
# KHR_TOL * max(1, max |ref|), ref numpy in float32 from the network's weights.
TOL, KHR_TOL = 1e-4, 2e-2


def bound(net, ref):
    b = TOL * (1 + np.abs(ref))
    if mlp_op.kernel_for(net.ctx, net) == "khr_coopmat":
        b = np.maximum(b, KHR_TOL * max(1.0, float(np.abs(ref).max(initial=0))))
    return b


def sequential_state(widths, gap=2):
    """nn.Sequential(Linear, act, Linear, act, ...)'s state dict: the
    Linear layers numbered 0, gap, 2 gap, ... with (out, in) weights."""
    state = {}
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        state[f"{i * gap}.weight"] = (RNG.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)
        state[f"{i * gap}.bias"] = (RNG.standard_normal(b) * 0.1).astype(np.float32)
    return state


def forward(state, names, acts, x):
    """The module's forward in float64: x @ W.T + b, then the activation."""
    h = np.asarray(x, np.float64)
    for name, act in zip(names, acts):
        h = h @ state[f"{name}.weight"].T.astype(np.float64) + state[f"{name}.bias"]
        h = apply_activation(h.astype(np.float32), act).astype(np.float64)
    return h


def test_a_sequential_state_dict():
    state = sequential_state([5, 16, 16, 3])
    layers = gc.dense_layers(state, "relu", output="sigmoid")
    assert [layer.activation for layer in layers] == ["relu", "relu", "sigmoid"]
    for layer, i in zip(layers, (0, 2, 4)):
        np.testing.assert_array_equal(layer.weight, state[f"{i}.weight"].T)
        np.testing.assert_array_equal(layer.bias, state[f"{i}.bias"])
    assert [layer.activation for layer in gc.dense_layers(state, "tanh")] == ["tanh", "tanh", "none"]
    assert [layer.activation for layer in gc.dense_layers(state, ["silu", "none", "tanh"])] == \
        ["silu", "none", "tanh"]


def test_numbered_layers_go_by_number_not_by_name():
    widths = [3] + [8 + i for i in range(11)] + [2]
    state = sequential_state(widths, gap=1)
    shuffled = dict(sorted(state.items()))               # "10.weight" before "2.weight", as safetensors files list
    layers = gc.dense_layers(shuffled, "relu")
    assert [layer.shape for layer in layers] == list(zip(widths, widths[1:]))
    nested = {f"layers.{k}": v for k, v in sorted(state.items())}
    assert [layer.shape for layer in gc.dense_layers(nested, "relu", prefix="layers.")] == \
        list(zip(widths, widths[1:]))


def test_named_layers_keep_the_mappings_order_or_take_names():
    state = {"fc_in.weight": np.ones((4, 2)), "fc_in.bias": np.zeros(4),
             "hidden.weight": np.ones((6, 4)), "out.weight": np.ones((1, 6))}
    assert [layer.shape for layer in gc.dense_layers(state, "relu")] == [(2, 4), (4, 6), (6, 1)]
    np.testing.assert_array_equal(gc.dense_layers(state, "relu")[2].bias, [0])        # no bias: zeros
    reordered = dict(reversed(list(state.items())))
    with pytest.raises(gc.ShapeError, match="'out' has 1 outputs but the next, 'hidden', takes 4"):
        gc.dense_layers(reordered, "relu")
    layers = gc.dense_layers(reordered, "relu", names=["fc_in", "hidden", "out"])
    assert [layer.shape for layer in layers] == [(2, 4), (4, 6), (6, 1)]


def test_prefix_picks_a_sub_module():
    state = {"encoding.params": np.zeros(100), "decoder.norm_scale": np.ones(3),
             **{f"decoder.net.{k}": v for k, v in sequential_state([4, 8, 2]).items()}}
    assert [layer.shape for layer in gc.dense_layers(state, "relu", prefix="decoder.net.")] == [(4, 8), (8, 2)]
    one = gc.dense_layers(state, "relu", output="tanh", prefix="decoder.net.2.")    # a single Linear
    assert [(layer.shape, layer.activation) for layer in one] == [((8, 2), "tanh")]
    with pytest.raises(gc.InvalidArgumentError, match="'decoder.norm_scale' is not a Linear"):
        gc.dense_layers(state, "relu", prefix="decoder.")


def test_numpy_layout():
    w = RNG.standard_normal((3, 5))
    (layer,) = gc.dense_layers({"0.weight": w}, "relu", transposed=False)
    np.testing.assert_array_equal(layer.weight, w)


class FakeTorchTensor:
    """What dense_layers may use of a torch tensor: detach, cpu, numpy,
    dtype and float (bfloat16 has no numpy dtype)."""

    def __init__(self, values, dtype="torch.float32", device="cuda:0"):
        self.values, self.dtype, self.device, self.calls = values, dtype, device, []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        self.device = "cpu"
        return self

    def float(self):
        self.calls.append("float")
        self.dtype = "torch.float32"
        return self

    def numpy(self):
        if self.device != "cpu" or self.dtype == "torch.bfloat16":
            raise TypeError("can't convert to numpy")
        return self.values.astype(np.float32)


class FakeModule:
    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return self.state


def test_tensor_like_values_and_a_module():
    state = sequential_state([4, 8, 2])
    fakes = {k: FakeTorchTensor(v, "torch.bfloat16" if k == "0.weight" else "torch.float32")
             for k, v in state.items()}
    layers = gc.dense_layers(FakeModule(fakes), "relu")
    np.testing.assert_array_equal(layers[1].weight, state["2.weight"].T)
    assert fakes["0.weight"].calls == ["detach", "float", "cpu"]
    assert fakes["2.bias"].calls == ["detach", "cpu"]

    class ArrayLike:            # anything with __array__ (jax, cupy on the host...)
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    layers = gc.dense_layers({k: ArrayLike(v) for k, v in state.items()}, "relu")
    np.testing.assert_array_equal(layers[0].bias, state["0.bias"])


def test_a_tensor_like_value_that_fails_to_convert():
    class Broken:
        def detach(self):
            raise RuntimeError("no storage")

    with pytest.raises(gc.InvalidArgumentError, match="layer '0' weight.*RuntimeError: no storage"):
        gc.dense_layers({"0.weight": Broken()}, "relu")
    with pytest.raises(gc.InvalidArgumentError, match="Dense weight.*no storage"):
        gc.Dense(Broken())


@pytest.mark.parametrize("state,kwargs,error,message", [
    ({}, {}, gc.InvalidArgumentError, "the state is empty"),
    ({"0.weight": np.ones((2, 2))}, {"prefix": "head."}, gc.InvalidArgumentError, r"no entries named 'head\.\*'"),
    ([np.ones((2, 2))], {}, gc.InvalidArgumentError, "mapping of names to arrays"),
    ({0: np.ones((2, 2))}, {}, gc.InvalidArgumentError, "names must be strings"),
    ({"0.weight": np.ones((2, 2)), "1.weight": np.ones(2), "1.bias": np.ones(2)}, {}, gc.ShapeError,
     "layer '1' has a 1-d weight"),
    ({"0.weight": np.ones((2, 2)), "1.running_mean": np.ones(2)}, {}, gc.InvalidArgumentError,
     "'1.running_mean' is not a Linear"),
    ({"0.weight": np.ones((2, 2, 3, 3))}, {}, gc.ShapeError, "4-d weight"),
    ({"0.bias": np.ones(2)}, {}, gc.InvalidArgumentError, "'0.bias' has no weight"),
    ({"0.weight": np.ones((3, 2)), "0.bias": np.ones(2)}, {}, gc.ShapeError, "layer '0': Dense bias"),
    ({"0.weight": np.ones((2, 2))}, {"output": "gelu"}, gc.InvalidArgumentError, "layer '0': Dense activation"),
    ({"0.weight": np.ones((2, 2))}, {"names": ["1"]}, gc.InvalidArgumentError, "no entry '1.weight'"),
    ({"0.weight": np.ones((2, 2))}, {"names": "0"}, gc.InvalidArgumentError, "names must be a non-empty list"),
    ({"0.weight": np.ones((2, 2))}, {"prefix": 3}, gc.InvalidArgumentError, "prefix must be a string"),
    ({"0.weight": np.ones((2, 2)).astype(complex)}, {}, gc.DTypeError, "layer '0': Dense weight"),
])
def test_bad_states(state, kwargs, error, message):
    with pytest.raises(error, match=message):
        gc.dense_layers(state, "relu", **kwargs)


def test_bad_activations():
    state = sequential_state([4, 8, 2])
    with pytest.raises(gc.InvalidArgumentError, match="a list of 2 names"):
        gc.dense_layers(state, ["relu"])
    with pytest.raises(gc.InvalidArgumentError, match="output= is for one hidden"):
        gc.dense_layers(state, ["relu", "none"], output="none")
    with pytest.raises(gc.InvalidArgumentError, match="a list of 2 names"):
        gc.dense_layers(state, None)


def test_from_a_safetensors_file_through_the_fused_op(modern_host, modern_ctx, tmp_path):
    ctx = modern_ctx
    state = sequential_state([6, 32, 32, 4])
    path = tmp_path / "mlp.safetensors"
    path.write_bytes(pack_arrays(state))
    net = ctx.mlp(gc.dense_layers(gc.load_safetensors(path), "silu", output="tanh"), dtype="float32")
    x = RNG.standard_normal((200, 6)).astype(np.float32)
    got = modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net)).numpy()
    ref = forward(state, ["0", "2", "4"], ["silu", "silu", "tanh"], x)
    assert np.all(np.abs(got - ref) <= bound(net, ref))


def test_guest_tensors_as_values(modern_ctx):
    state = sequential_state([4, 8, 2])
    layers = gc.dense_layers({k: modern_ctx.tensor(v) for k, v in state.items()}, "relu")
    np.testing.assert_array_equal(layers[0].weight, state["0.weight"].T)


# -- torch, where it is installed ---------------------------------------------------------

def small_module(torch):
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                               torch.nn.Linear(32, 32), torch.nn.SiLU(), torch.nn.Linear(32, 3),
                               torch.nn.Sigmoid()).eval()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_torch_sequential_matches_its_own_forward(modern_host, modern_ctx, dtype):
    torch = pytest.importorskip("torch")
    ctx, module = modern_ctx, small_module(torch)
    if dtype == "float16":      # the weights the network holds, so the module computes the documented reference
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(p.half().float())
    net = ctx.mlp(gc.dense_layers(module, ["relu", "silu", "sigmoid"]), dtype=dtype)
    x = torch.randn(300, 6)
    with torch.no_grad():
        ref = module(x).numpy()
    got = modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x.numpy()), net)).numpy()
    assert np.all(np.abs(got - ref) <= bound(net, ref)), np.abs(got - ref).max()


def test_torch_parameters_bfloat16_and_gpu_tensors():
    torch = pytest.importorskip("torch")
    module = small_module(torch)
    want = [module[i].weight.detach().numpy().T for i in (0, 3, 5)]
    layers = gc.dense_layers(dict(module.named_parameters()), "relu")      # these require grad
    assert all(np.array_equal(layer.weight, w) for layer, w in zip(layers, want))
    layer = gc.Dense(module[5].weight, module[5].bias, "none", transposed=True)     # straight from nn.Linear
    np.testing.assert_array_equal(layer.weight, want[2])
    half = small_module(torch).to(torch.bfloat16)
    layers = gc.dense_layers(half, "relu")
    np.testing.assert_array_equal(layers[1].weight, half[3].weight.detach().float().numpy().T)
    if torch.cuda.is_available():
        layers = gc.dense_layers(small_module(torch).cuda(), "relu")
        assert all(np.array_equal(layer.weight, w) for layer, w in zip(layers, want))


def test_torch_state_saved_by_the_safetensors_package(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    for module in (small_module(torch), small_module(torch).to(torch.bfloat16)):
        st.save_file(module.state_dict(), tmp_path / "m.safetensors")
        layers = gc.dense_layers(gc.load_safetensors(tmp_path / "m.safetensors"), "relu")
        for layer, i in zip(layers, (0, 3, 5)):
            np.testing.assert_array_equal(layer.weight, module[i].weight.detach().float().numpy().T)
            np.testing.assert_array_equal(layer.bias, module[i].bias.detach().float().numpy())
