"""The fused MLP's VK_NV_cooperative_vector kernel (ops/mlp_coopvec.py):
selection from hand-built device facts and the network buffer's layout on
every device; numpy parity where the device runs it (skipped elsewhere,
saying why)."""
import dataclasses

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops import matmul as mm
from guestcompute.ops import mlp_coopvec as cv
from guestcompute.ops import mlp_op

RNG = np.random.default_rng(5)
FP16_ONLY = (("float16",) * 4,)
BOTH = FP16_ONLY + (("float16", "float16", "float16", "float32"),)
COOPVEC = mm.MatmulDevice(subgroup_size=32, subgroup_arithmetic=True, max_shared_memory=49152,
                          max_invocations=1024, coopmat_khr_shapes=((16, 16, 16, "float16"),
                                                                    (16, 16, 16, "float32")),
                          coopvec_types=FP16_ONLY)
# The documented bound (fp16 activations between layers, as the
# cooperative-matrix kernel): |got - ref| <= TOL * max(1, max |ref|).
TOL = 2e-2


def _p(acc="float16", x="f16", o="f16", classes=(32, 64, 16), huge=False, dtype="float16"):
    return mlp_op.Problem(dtype, acc, 64, x, o, classes, huge)


def test_width_classes():
    assert cv.classes_of((32, 64, 64, 16)) == (32, 64, 16)
    assert cv.classes_of((3, 100, 20, 4)) == (16, 128, 16)
    assert cv.classes_of((64, 128)) == (64, 16, 128)          # one layer: no hidden width
    assert cv.classes_of((65, 16, 16)) is None


def test_selection_prefers_cooperative_vectors():
    name, spec = mlp_op.select(_p(), COOPVEC)
    assert name == "nv_coopvec" and spec.family == "mlp_coopvec" and spec.language == "slang"
    assert (spec.param("in"), spec.param("w"), spec.param("out"), spec.param("acc")) == (32, 64, 16, "float16")
    assert spec.target_env == "vulkan1.2" and "cooperative_vector" in spec.features
    both = dataclasses.replace(COOPVEC, coopvec_types=BOTH)
    assert mlp_op.select(_p(acc="float32", x="f32", o="f32"), both)[0] == "nv_coopvec"


@pytest.mark.parametrize("device,problem,why", [
    (COOPVEC, _p(dtype="float32"), "float16 weights"),
    (dataclasses.replace(COOPVEC, coopvec_types=()), _p(), "did not enable VK_NV_cooperative_vector"),
    (COOPVEC, _p(acc="float32"), "float32 results"),
    (COOPVEC, _p(x="tex"), "tensor operands"),
    (COOPVEC, _p(o="put:rgba16f"), "tensor operands"),
    (COOPVEC, _p(classes=None), "width classes"),
    (COOPVEC, _p(huge=True), "4 GiB"),
])
def test_selection_falls_back_saying_why(device, problem, why):
    assert mlp_op.select(problem, device)[0] == ("fma" if problem.dtype == "float32" else "khr_coopmat")
    assert why in dict(mlp_op.explain(problem, device))["nv_coopvec"]
    with pytest.raises(gc.UnsupportedError, match=why):
        mlp_op.select(problem, device, "nv_coopvec")


def test_every_coopvec_spec_the_selector_makes_is_baked():
    catalogue = set(all_specs())
    device = dataclasses.replace(COOPVEC, coopvec_types=BOTH)
    for in_c in cv.IN_CLASSES:
        for w_c in cv.WIDTH_CLASSES:
            for out_c in cv.WIDTH_CLASSES:
                for acc in ("float16", "float32"):
                    name, spec = mlp_op.select(_p(acc=acc, classes=(in_c, w_c, out_c)), device)
                    assert name == "nv_coopvec" and spec in catalogue


def test_the_network_buffer_layout():
    """Table entries point at 64-byte aligned matrices (N x K, padded to
    the classes with zeros) and 16-byte aligned biases; row-major bytes
    stand in for the device's conversion here."""
    layers = [gc.Dense(RNG.standard_normal((20, 50)), RNG.standard_normal(50), "relu"),
              gc.Dense(RNG.standard_normal((50, 33)), RNG.standard_normal(33), "leaky_relu", slope=0.25),
              gc.Dense(RNG.standard_normal((33, 3)), RNG.standard_normal(3), "sigmoid")]
    classes = cv.classes_of((20, 50, 33, 3))
    assert classes == (32, 64, 16)
    blob = cv.pack(layers, classes, lambda m: m.tobytes()).tobytes()
    shapes = [(64, 32), (64, 64), (16, 64)]
    for i, (layer, (n, k)) in enumerate(zip(layers, shapes)):
        w_at, b_at, code, slope = np.frombuffer(blob, np.uint32, 4, i * cv.TABLE_BYTES)
        assert w_at % cv.MATRIX_ALIGN == 0 and b_at % cv.BIAS_ALIGN == 0
        m = np.frombuffer(blob, np.float16, n * k, w_at).reshape(n, k)
        want = np.zeros((n, k), np.float16)
        want[:layer.shape[1], :layer.shape[0]] = layer.weight.T
        assert np.array_equal(m, want)
        b = np.frombuffer(blob, np.float16, n, b_at)
        assert np.array_equal(b[:layer.shape[1]], layer.bias.astype(np.float16)) and not b[layer.shape[1]:].any()
        assert mlp_op.kernels.ACTIVATIONS[code] == layer.activation
        assert np.uint32(slope).view(np.float32) == np.float32(layer.slope)
    assert len(blob) % 16 == 0


@pytest.mark.parametrize("widths", [(20, 3), (20, 50, 3), (20, 50, 33, 3), (32, 64, 64, 64, 64, 16),
                                    (64, 128, 128, 128, 128, 128, 128, 128, 8), (16,) + (32,) * 11 + (4,)])
@pytest.mark.parametrize("matrix_bytes", [lambda m: m.tobytes(), lambda m: m.tobytes() + bytes(40)])
def test_offsets_are_the_tables_entries(widths, matrix_bytes):
    """The kernel's offset push constants give the first layer, the last
    and the first PUSHED_HIDDEN hidden layers the matrix and bias offsets
    their table entries hold (the deeper ones read the table), also where
    the device's layout makes a matrix longer than N x K fp16 values (the
    second converter)."""
    layers = [gc.Dense(RNG.standard_normal((k, n)), RNG.standard_normal(n)) for k, n in zip(widths, widths[1:])]
    words = cv.pack(layers, cv.classes_of(widths), matrix_bytes)
    pushed = cv.offsets(words, len(layers))
    assert set(pushed) == set(cv.OFFSET_PUSH)
    last = len(layers) - 1
    for i in range(len(layers)):
        entry = tuple(words[i * cv.TABLE_BYTES // 4:][:2])
        if i == last:
            assert (pushed["w_last"], pushed["b_last"]) == entry
        elif i == 0:
            assert (pushed["w_first"], pushed["b_first"]) == entry
        elif i <= cv.PUSHED_HIDDEN:
            assert (pushed[f"w{i}"], pushed[f"b{i}"]) == entry
    unused = range(max(1, last), cv.PUSHED_HIDDEN + 1)
    assert all(pushed[f"w{i}"] == pushed[f"b{i}"] == 0 for i in unused)


def test_the_kernel_writes_out_each_pushed_hidden_layer():
    """One test of the specialized depth per pushed hidden layer, with its
    activation's constants, then the loop over the table for the deeper
    ones; the push block fits the 128 bytes every device has."""
    spec = cv.coopvec_spec(32, 64, 16, "float16")
    source = spec.render()
    for layer in range(1, cv.PUSHED_HIDDEN + 1):
        assert f"if (DEPTH > {layer + 1}u) h = " in source
        assert f"pc.w{layer}, pc.b{layer}), CODE{layer}, SLOPE{layer})" in source
    assert f"for (uint l = {cv.PUSHED_HIDDEN + 1}u; l + 1u < DEPTH; ++l)" in source
    assert f"[vk::constant_id({cv.DEPTH_ID})] const uint DEPTH" in source
    assert spec.push_size <= 128


@pytest.mark.parametrize("depth", [1, 2, 3, cv.PUSHED_HIDDEN + 1, cv.PUSHED_HIDDEN + 2, cv.PUSHED_HIDDEN + 5])
def test_specialization_constants_carry_depth_and_activations(depth):
    """The depth, and each slot's activation code and slope bits: the
    first layer in slot 0, hidden layer l in slot l while it is pushed,
    the last layer in the last slot; slots the network lacks hold 0."""
    acts = list(mlp_op.kernels.ACTIVATIONS)
    layers = [gc.Dense(np.ones((16, 16)), None, acts[i % len(acts)], slope=0.5 + i) for i in range(depth)]
    constants = dict(cv.spec_constants(layers))
    assert len(constants) == 1 + 2 * cv.SLOTS and constants[cv.DEPTH_ID] == depth
    by_slot = {cv.SLOTS - 1: depth - 1} | {i: i for i in range(min(depth - 1, cv.PUSHED_HIDDEN + 1))}
    for slot in range(cv.SLOTS):
        code, bits = constants[cv.CODE_ID + slot], constants[cv.SLOPE_ID + slot]
        if slot in by_slot:
            layer = layers[by_slot[slot]]
            assert acts[code] == layer.activation
            assert np.uint32(bits).view(np.float32) == np.float32(layer.slope)
        else:
            assert code == bits == 0


def test_the_network_keeps_its_kernel_operands_between_dispatches(ctx, monkeypatch):
    """The converted buffer, offsets and specialization constants are made
    once, not each time a dispatch is recorded; an in-place update
    rewrites the buffer and renews the constants from the new layers (the
    row-major conversion stands in for the device's)."""
    layers = [gc.Dense(RNG.standard_normal((32, 64)), None, "relu", slope=0.5), gc.Dense(RNG.standard_normal((64, 16)))]
    net = ctx.mlp(layers)
    monkeypatch.setattr(net, "_coopvec_words", lambda ls, classes: cv.pack(ls, classes, lambda m: m.tobytes()))
    classes = cv.classes_of(net.widths)
    buffer, offsets, constants = net.coopvec_weights(classes)
    assert net.coopvec_weights(classes)[0] is buffer and constants == cv.spec_constants(layers)
    assert offsets == cv.offsets(buffer.numpy(), 2)
    new = [gc.Dense(RNG.standard_normal((32, 64)), None, "relu", slope=0.25), layers[1]]
    ctx.run(lambda rec: net.update(new, rec=rec))
    again, _, renewed = net.coopvec_weights(classes)
    assert again is buffer and renewed == cv.spec_constants(new) != constants
    np.testing.assert_array_equal(buffer.numpy(), cv.pack(new, classes, lambda m: m.tobytes()))


# -- on a device that runs it -------------------------------------------------------------

def _coopvec_ctx(ctx, acc):
    """``ctx``, or a skip saying why its device does not run the kernel."""
    probe = ctx.mlp([gc.Dense(np.ones((16, 16)))], accumulate=acc)
    try:
        mlp_op.kernel_for(ctx, probe, "nv_coopvec")
    except gc.UnsupportedError as e:
        pytest.skip(f"this device does not run the cooperative-vector kernel: {e}")
    return ctx


def _check(got, net, x):
    ref = net.numpy(np.asarray(x, np.float32))
    got = np.asarray(got, np.float32)
    assert got.shape == ref.shape
    err = np.abs(got - ref).max(initial=0)
    assert err <= TOL * max(1.0, float(np.abs(ref).max(initial=0))), err


@pytest.mark.parametrize("acc", ["float16", "float32"])
@pytest.mark.parametrize("widths,acts", [
    ((32, 64, 64, 64, 64, 16), None),
    ((3, 16), ["sigmoid"]),
    ((64, 128, 128), ["tanh", "none"]),
    ((7, 40, 24, 100, 5), ["leaky_relu", "silu", "relu", "sigmoid"]),
    ((16,) + (32,) * 11 + (4,), ["relu", "tanh", "leaky_relu", "silu"] * 3),      # past the pushed layers
])
def test_networks_match_numpy(modern_host, modern_ctx, acc, widths, acts):
    ctx = _coopvec_ctx(modern_ctx, acc)
    acts = acts or ["relu"] * (len(widths) - 2) + ["none"]
    layers = [gc.Dense(RNG.standard_normal((a, b)) / np.sqrt(a), RNG.standard_normal(b) * 0.1, act, slope=0.1)
              for a, b, act in zip(widths, widths[1:], acts)]
    net = ctx.mlp(layers, accumulate=acc)
    x = RNG.standard_normal((1000, widths[0])).astype(np.float32)
    for x_dtype in ("float16", "float32"):
        for out_dtype in ("float16", "float32"):
            xt = ctx.tensor(x.astype(x_dtype))
            out = ctx.empty((1000, widths[-1]), out_dtype)
            ctx.run(lambda rec: rec.mlp(xt, net, out=out, kernel="nv_coopvec"))
            _check(out.numpy(), net, x.astype(x_dtype))


def test_strided_operands_and_weight_updates(modern_host, modern_ctx):
    ctx = _coopvec_ctx(modern_ctx, "float16")
    layers = [gc.Dense(RNG.standard_normal((32, 64)) / 6, None, "relu"), gc.Dense(RNG.standard_normal((64, 16)) / 8)]
    net = ctx.mlp(layers, accumulate="float16")
    x = RNG.standard_normal((300, 40)).astype(np.float16)
    xt = ctx.tensor(x)[:, 4:36]                      # rows 80 bytes apart: element loads
    out = ctx.empty((300, 32), "float16")
    ctx.run(lambda rec: rec.mlp(xt, net, out=out[:, ::2], kernel="nv_coopvec"))
    _check(out.numpy()[:, ::2], net, x[:, 4:36])
    new = [gc.Dense(RNG.standard_normal((32, 64)) / 6, None, "relu"), gc.Dense(RNG.standard_normal((64, 16)) / 8)]
    dense = ctx.tensor(x[:, 4:36].copy())
    y = ctx.empty((300, 16), "float16")

    def body(rec):
        net.update(new, rec=rec)                     # the converted weights are rewritten in place too
        rec.mlp(dense, net, out=y, kernel="nv_coopvec")
    ctx.run(body)
    _check(y.numpy(), net, x[:, 4:36])
    # new activations take a new buffer: the kernel compiles them in
    net.update([gc.Dense(new[0].weight, None, "tanh"), new[1]])
    ctx.run(lambda rec: rec.mlp(dense, net, out=y, kernel="nv_coopvec"))
    _check(y.numpy(), net, x[:, 4:36])
