"""Fused MLPs with bfloat16 weights (``ctx.mlp(layers, dtype="bfloat16")``):
the packing and rounding against numpy's float32 bits, the portable kernel
on every device, the choice of the tensor-core kernel, and that kernel on a
device whose host enabled VK_KHR_shader_bfloat16."""
import dataclasses

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops import mlp, mlp_op
from guestcompute.ops import mlp_kernels as mk
from guestcompute.ops.mlp import apply_activation, bfloat16_bits, rounded_to
from guestcompute.spirv import bfloat16
from test_mlp import KHR, random_layers

RNG = np.random.default_rng(5)
# The portable kernel's bound (fp32 activations and sums, exact bfloat16
# weights): |got - ref| <= TOL * (1 + |ref|).
TOL = 1e-4
# The cooperative-matrix kernel rounds the input and every hidden
# activation to bfloat16 (8 significant bits against float16's 11):
# |got - ref| <= KHR_BF16_TOL * max(1, max |ref|).
KHR_BF16_TOL = 4e-2

KHR_BF16 = dataclasses.replace(KHR, coopmat_khr_bf16_shapes=((16, 16, 16, "float32"),))


def test_bfloat16_bits_round_to_nearest_even():
    one = 0x3F80
    cases = {1.0: one, 1.0 + 2.0 ** -8: one,                  # a tie: the even neighbour
             1.0 + 3 * 2.0 ** -8: one + 2,                     # a tie: up to the even one
             1.0 + 2.0 ** -8 + 2.0 ** -20: one + 1,            # past the tie
             -2.0: 0xC000, 0.0: 0, np.inf: 0x7F80, -np.inf: 0xFF80,
             3.4e38: 0x7F80}                                   # past bfloat16's largest: infinity
    got = bfloat16_bits(np.array(list(cases), np.float32))
    assert [hex(v) for v in got] == [hex(v) for v in cases.values()]
    assert bfloat16_bits(np.float32(np.nan)) == 0x7FC0
    x = RNG.standard_normal(1000).astype(np.float32)
    r = rounded_to(x, "bfloat16")
    assert np.all(r.view(np.uint32) & 0xFFFF == 0)
    assert np.all(np.abs(r - x) <= np.abs(x) * 2.0 ** -8)


def test_pack_stores_bfloat16_bits_and_sixteen_bias_rows():
    layers = [gc.Dense(RNG.standard_normal((20, 33)), RNG.standard_normal(33), "relu")]
    words = mlp.pack(layers, "bfloat16")
    k, n, code, _, wo, bo = words[:6]
    assert (k, n, code) == (32, 48, mk.ACTIVATIONS.index("relu"))
    w = words[wo:bo].view(np.uint16).reshape(32, 48)
    assert np.array_equal(w[:20, :33], bfloat16_bits(layers[0].weight)) and not w[20:].any() and not w[:, 33:].any()
    b = words[bo:bo + 16 * 48 // 2].view(np.uint16).reshape(16, 48)
    assert all(np.array_equal(row[:33], bfloat16_bits(layers[0].bias)) for row in b)


def test_bad_bfloat16_networks_raise_typed_errors(ctx):
    with pytest.raises(gc.InvalidArgumentError, match="float16 weights"):
        ctx.mlp(random_layers([16, 16]), dtype="bfloat16", accumulate="float16")
    with pytest.raises(gc.InvalidArgumentError, match="does not fit bfloat16"):
        ctx.mlp([gc.Dense(np.full((16, 16), 3.4e38, np.float32))], dtype="bfloat16")
    big = ctx.mlp([gc.Dense(np.full((16, 16), 1e30, np.float32))], dtype="bfloat16")   # fits: float32's range
    assert big.dtype == "bfloat16"


@pytest.mark.parametrize("x_dtype,out_dtype", [("float32", "float32"), ("float16", "float16")])
def test_the_portable_kernel_matches_numpy(host, ctx, x_dtype, out_dtype):
    if x_dtype == "float16" and not ctx.caps.float16_storage:
        pytest.skip("float16 tensors need 16-bit storage")
    net = ctx.mlp(random_layers([30, 64, 48, 7], ["relu", "silu", "none"]), dtype="bfloat16")
    x = RNG.standard_normal((200, 30)).astype(x_dtype)
    got = host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net, kernel="fma")).numpy().astype(np.float32)
    ref = net.numpy(x.astype(np.float32))
    tol = TOL if out_dtype == "float32" else 1e-3
    assert np.all(np.abs(got - ref) <= tol * (1 + np.abs(ref))), np.abs(got - ref).max()
    # the reference is the float32 network of bfloat16-rounded weights, not the float32 weights
    assert not np.allclose(net.numpy(x.astype(np.float32)), _float32_network(net.layers, x), atol=1e-5)


def _float32_network(layers, x):
    h = np.asarray(x, np.float32)
    for layer in layers:
        h = apply_activation(h @ layer.weight + layer.bias, layer.activation, layer.slope)
    return h


# -- choosing the kernel -------------------------------------------------------------------

def _p(acc="float32", wmax=64, x="f32", o="f32"):
    return mlp_op.Problem("bfloat16", acc, wmax, x, o)


def test_selection_takes_the_khr_kernel_with_bfloat16_fragments():
    name, spec = mlp_op.select(_p(x="f16", o="f16"), KHR_BF16)
    assert name == "khr_coopmat" and spec.param("dtype") == "bfloat16"
    assert "bfloat16_cooperative_matrix" in spec.features and spec in set(all_specs())


@pytest.mark.parametrize("device,problem,why", [
    (dataclasses.replace(KHR_BF16, coopmat_khr_bf16_shapes=()), _p(), "VK_KHR_shader_bfloat16"),
    (KHR_BF16, _p(acc="float16"), "float32 accumulators"),
    (dataclasses.replace(KHR_BF16, coopmat_khr_shapes=()), _p(), "VK_KHR_cooperative_matrix"),
])
def test_selection_falls_back_to_the_portable_kernel(device, problem, why):
    assert mlp_op.select(problem, device)[0] == "fma"
    assert why in dict(mlp_op.explain(problem, device))["khr_coopmat"]
    assert mlp_op.select(problem, device)[1] in set(all_specs())


def test_the_bfloat16_kernel_keeps_float16_tensors_float16():
    """Only the fragments are retyped: a float16 tensor is read and written
    element by element as float16, never as whole (bfloat16) fragments,
    and the staged rows are packed as bfloat16 bits."""
    t = mk.KHR_TILINGS[0]
    bf16 = mk.khr_spec(t, "float32", "f16", "f16", "bfloat16").render()
    f16 = mk.khr_spec(t, "float32", "f16", "f16").render()
    assert "coopMatLoad(h, x" in f16 and "coopMatStore(h, o" in f16
    assert "coopMatLoad(h, x" not in bf16 and "coopMatStore(h, o" not in bf16
    assert "packBFloat2x16(" in bf16 and "packHalf2x16(" not in bf16
    assert "buffer B0 { float16_t x[]; }" in bf16 and "buffer B2 { float16_t o[]; }" in bf16
    assert bfloat16.MARK in bf16 and bfloat16.MARK not in f16
    with pytest.raises(ValueError):
        mk.khr_spec(t, "float16", "f32", "f32", "bfloat16")


def test_the_bfloat16_accuracy_bound_holds_in_numpy():
    """numpy rounding the input and every hidden activation to bfloat16,
    as the kernel does, stays within the documented bound."""
    for depth in range(1, 7):
        layers = random_layers([32] + [64] * depth + [16])
        x = RNG.standard_normal((1000, 32)).astype(np.float32)
        h, ref = rounded_to(x, "bfloat16"), x
        for i, layer in enumerate(layers):
            w, b = rounded_to(layer.weight, "bfloat16"), rounded_to(layer.bias, "bfloat16")
            h = apply_activation(h @ w + b, layer.activation)
            h = rounded_to(h, "bfloat16") if i + 1 < len(layers) else h
            ref = apply_activation(ref @ w + b, layer.activation)
        assert np.abs(h - ref).max() <= KHR_BF16_TOL * max(1.0, np.abs(ref).max()), depth


# -- hosts ---------------------------------------------------------------------------------

def test_a_validated_host_leaves_bfloat16_off_unless_asked(modern_host):
    assert "VK_KHR_shader_bfloat16" not in modern_host.extensions
    assert not any(f.startswith("shaderBFloat16") for f in modern_host.features)


def _bf16_ctx(bfloat16_host):
    ctx = bfloat16_host.adopt()
    if not ctx.limits.coopmat_khr_bf16_shapes:
        ctx.close()
        pytest.skip("the device has no bfloat16 cooperative matrices (VK_KHR_shader_bfloat16)")
    return ctx


@pytest.mark.parametrize("x_dtype,out_dtype", [("float32", "float32"), ("float16", "float16"),
                                               ("float32", "float16")])
@pytest.mark.parametrize("widths", [[32, 64, 64, 64, 64, 16], [30, 128, 48, 5],
                                    [20, 64, 16, 48, 128, 32, 64, 16, 80, 24, 40, 5]])
def test_the_tensor_core_kernel_matches_numpy(bfloat16_host, widths, x_dtype, out_dtype):
    ctx = _bf16_ctx(bfloat16_host)
    try:
        acts = [("relu", "leaky_relu", "sigmoid", "tanh", "silu")[i % 5] for i in range(len(widths) - 2)] + ["none"]
        net = ctx.mlp(random_layers(widths, acts), dtype="bfloat16")
        assert mlp_op.kernel_for(ctx, net) == "khr_coopmat"
        x = RNG.standard_normal((1000, widths[0])).astype(x_dtype)
        out = ctx.empty((1000, widths[-1]), out_dtype)
        got = bfloat16_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net, out=out)).numpy().astype(np.float32)
        ref = net.numpy(x.astype(np.float32))
        assert np.abs(got - ref).max() <= KHR_BF16_TOL * max(1.0, np.abs(ref).max())
    finally:
        ctx.close()


def test_the_tensor_core_kernel_reads_and_writes_images(bfloat16_host):
    ctx = _bf16_ctx(bfloat16_host)
    try:
        net = ctx.mlp(random_layers([3, 64, 64, 3], ["relu", "relu", "sigmoid"]), dtype="bfloat16")
        pixels = RNG.uniform(0, 1, (40, 50, 4)).astype(np.float32)
        src = ctx.image_from(pixels, "rgba32f")
        dst = ctx.image((50, 40), "rgba32f")
        bfloat16_host.run(ctx, lambda rec: rec.mlp(src, net, out=dst))
        got = dst.numpy().astype(np.float32).reshape(40, 50, 4)
        ref = net.numpy(pixels[..., :3])
        assert np.abs(got[..., :3] - ref).max() <= KHR_BF16_TOL
        assert np.all(got[..., 3] == 1.0)
    finally:
        ctx.close()


def test_requirements_list_bfloat16_only_when_asked():
    assert "VK_KHR_shader_bfloat16" not in gc.requirements().device_extensions
    asked = gc.requirements(bfloat16=True)
    assert "VK_KHR_shader_bfloat16" in asked.device_extensions
    assert {"shaderBFloat16Type", "shaderBFloat16CooperativeMatrix"} <= set(asked.features)


def test_only_what_the_layer_says_for_not_knowing_bfloat16_is_set_aside():
    from guestcompute.testing import predates_bfloat16
    set_aside = [
        "[VUID-VkDeviceCreateInfo-pNext-pNext] vkCreateDevice(): pCreateInfo->pNext chain includes a structure "
        "with unknown VkStructureType (1000141000).",
        "vkCreateDevice(): pCreateInfo->ppEnabledExtensionNames[14] VK_KHR_shader_bfloat16 is not a known "
        "extension string.",
        "vkCreateShaderModule(): pCreateInfo->pCode (spirv-val produced an error):\nInvalid capability operand: "
        "5116.\nThe Vulkan spec states: (...#VUID-VkShaderModuleCreateInfo-pCode-08737)",
        "vkCreateShaderModule(): SPIR-V Extension SPV_KHR_bfloat16 was declared, but that is not supported by "
        "Vulkan.\nThe Vulkan spec states: (...#VUID-VkShaderModuleCreateInfo-pCode-08741)",
        "vkCreateComputePipelines(): pCreateInfos[0].stage VkShaderModule 0x9c000000009c failed in spirv-opt "
        "because it does not contain valid spirv for stage VK_SHADER_STAGE_COMPUTE_BIT. Invalid capability "
        "operand: 5116.",
        "vkCreateComputePipelines(): pCreateInfos[0].stage VkShaderModule 0x9c000000009c shader (stage "
        "VK_SHADER_STAGE_COMPUTE_BIT) attempted to apply specialization constants with spirv-opt but failed."]
    kept = [
        "[VUID-VkDeviceCreateInfo-pNext-pNext] vkCreateDevice(): pCreateInfo->pNext chain includes a structure "
        "with unknown VkStructureType (1000491000).",
        "vkCreateShaderModule(): pCreateInfo->pCode (spirv-val produced an error):\nID '12' has not been defined.",
        "vkCreateShaderModule(): pCreateInfo->pCode (spirv-val produced an error):\nInvalid capability operand: "
        "5117.",
        "vkCreateShaderModule(): SPIR-V has Capability (Int64Atomics) declared, but this is not supported by Vulkan.",
        "[SYNC-HAZARD-READ-AFTER-WRITE] vkCmdDispatch(): Hazard READ_AFTER_WRITE for VkBuffer 0x1.",
        "vkCreateShaderModule(): SPIR-V Extension SPV_NV_bindless was declared, but that is not supported by Vulkan."]
    assert all(predates_bfloat16(m) for m in set_aside)
    assert not any(predates_bfloat16(m) for m in kept)
