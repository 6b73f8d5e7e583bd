"""User kernels and caller SPIR-V are checked against what the host enabled
(SPIR-V capabilities, shared memory) before any driver sees them; bad text
and bad push constants are typed errors; push_layout takes numpy names."""
import re
import shutil
import struct

import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc
from guestcompute.spirv.compiler import compile_glsl
from guestcompute.host import HostCaps, features_from_chain
from guestcompute.spirv.capabilities import check_capabilities
from guestcompute.spirv.reflect import reflect, workgroup_memory_size
from guestcompute.kernels.spec import READWRITE, Binding, KernelSpec, family
from guestcompute.ops.base import Dispatch
from guestcompute.vk.structs import chain, new
from rejecting_validator import rejecting_validator

needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")


def _env(ctx) -> str:
    # What ctx.kernel compiles GLSL for on this context.
    return "vulkan1.1" if min(ctx.caps.api_version, ctx.limits.api_version) >= (1, 1) else "vulkan1.0"


def _kernel_body(extension: str, body: str, local: str = "local_size_x = 64", shared: str = "") -> str:
    # The workgroup size comes before shared arrays that use gl_WorkGroupSize.
    return (f"#version 450\n{extension}\nlayout({local}) in;\n{shared}\n"
            "layout(std430, binding = 0) buffer B { uint x[]; };\n"
            f"void main() {{ uint i = gl_GlobalInvocationID.x; {body} }}\n")


INT64 = _kernel_body("#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require",
                     "uint64_t v = uint64_t(x[i]) << 33; x[i] = uint(v >> 33);")
FLOAT64 = _kernel_body("", "double d = double(x[i]) * 0.5; x[i] = uint(d * 2.0);")
INT16 = _kernel_body("#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require",
                     "uint16_t s = uint16_t(x[i]); x[i] = uint(s + uint16_t(1));")
HALF_STORAGE = """#version 450
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { float16_t src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
void main() { uint i = gl_GlobalInvocationID.x; dst[i] = float(src[i]) * 2.0; }
"""


def _shared_kernel(floats: int) -> str:
    # Each invocation of a 64-wide group reads its neighbour's slot: only slots 0..63 are written.
    return _kernel_body("", f"s[i % {floats}u] = float(x[i]); barrier(); x[i] = uint(s[(i + 1u) % 64u]);",
                        shared=f"shared float s[{floats}];")


# 256 bytes of shared memory per invocation: the workgroup size picks the total.
PER_INVOCATION = _kernel_body("", "s[gl_LocalInvocationID.x * 16u] = vec4(x[i]); barrier(); "
                              "x[i] = uint(s[gl_LocalInvocationID.x * 16u].x) + 1u;",
                              local="local_size_x_id = 0", shared="shared vec4 s[gl_WorkGroupSize.x * 16];")


# -- SPIR-V capabilities ------------------------------------------------------------

@needs_glslc
@pytest.mark.parametrize("source, feature", [
    (INT64, "shaderInt64"), (FLOAT64, "shaderFloat64"), (INT16, "shaderInt16"),
], ids=["int64", "float64", "int16"])
def test_kernel_using_a_feature_the_host_did_not_enable_is_refused(host, ctx, source, feature):
    # Neither test host enables the core 64-/16-bit shader features.
    assert not ctx.caps.feature(feature)
    with pytest.raises(gc.UnsupportedError, match=rf"needs the {feature} feature.*enable it"):
        ctx.kernel(source)
    with pytest.raises(gc.UnsupportedError, match=feature):
        ctx.kernel(compile_glsl(source, _env(ctx)))         # the same as SPIR-V bytes
    assert ctx.cache_stats()["pipelines_created"] == 0


@needs_glslc
def test_16bit_storage_kernel_runs_only_where_the_host_enabled_it(host, ctx):
    if not ctx.caps.float16_storage:
        with pytest.raises(gc.UnsupportedError, match="storageBuffer16BitAccess"):
            ctx.kernel(HALF_STORAGE)
        return
    k = ctx.kernel(HALF_STORAGE)
    src = np.linspace(-4, 4, 128).astype(np.float16)
    a, out = ctx.tensor(src), ctx.empty((128,))
    host.run(ctx, lambda rec: k(rec, a, out, groups=2))
    np.testing.assert_array_equal(out.numpy(), src.astype(np.float32) * 2)


def test_capability_needs_name_feature_extension_and_version():
    with pytest.raises(gc.UnsupportedError, match="shaderInt64"):
        check_capabilities(HostCaps((1, 3)), [1, 11], "kernel 'k'")
    check_capabilities(HostCaps((1, 0), features={"shaderInt64": True}), [1, 11], "kernel 'k'")
    # 16-bit storage on Vulkan 1.0 needs the extension as well as the feature.
    on_1_0 = HostCaps((1, 0), features={"storageBuffer16BitAccess": True})
    with pytest.raises(gc.UnsupportedError, match="VK_KHR_16bit_storage, core in Vulkan 1.1"):
        check_capabilities(on_1_0, [4433], "kernel 'k'")
    check_capabilities(HostCaps((1, 1), features={"storageBuffer16BitAccess": True}), [4433], "k")
    with pytest.raises(gc.UnsupportedError, match="a Vulkan 1.1 device"):
        check_capabilities(HostCaps((1, 0)), [61], "kernel 'k'")     # GroupNonUniform


def test_core_features_are_read_from_the_hosts_chain_or_create_info():
    core = new("VkPhysicalDeviceFeatures", shaderInt64=vk.VK_TRUE, shaderFloat64=vk.VK_TRUE)
    f2 = new("VkPhysicalDeviceFeatures2", features=core[0])
    f16 = new("VkPhysicalDevice16BitStorageFeatures", storageBuffer16BitAccess=vk.VK_TRUE,
              storagePushConstant16=vk.VK_TRUE)
    found = features_from_chain(chain(f16, f2))
    assert found["shaderInt64"] and found["shaderFloat64"] and not found["shaderInt16"]
    assert found["storageBuffer16BitAccess"] and found["storagePushConstant16"]
    info = new("VkDeviceCreateInfo", pEnabledFeatures=core, pNext=f16)
    found = features_from_chain(info)
    assert found["shaderInt64"] and found["storageBuffer16BitAccess"]
    assert features_from_chain(core)["shaderFloat64"]


# -- shared memory --------------------------------------------------------------------

@needs_glslc
def test_shared_memory_past_the_device_limit_is_refused(host, ctx):
    most = ctx.limits.max_shared_memory
    with pytest.raises(gc.UnsupportedError, match=rf"{most + 4} bytes of shared memory.*"
                                                  r"maxComputeSharedMemorySize"):
        ctx.kernel(_shared_kernel(most // 4 + 1))
    assert ctx.cache_stats()["pipelines_created"] == 0
    # Exactly at the limit is fine, and runs.
    k = ctx.kernel(_shared_kernel(most // 4))
    assert k.reflection.workgroup_memory_size == most
    x = ctx.tensor(np.arange(64, dtype=np.uint32))
    host.run(ctx, lambda rec: k(rec, x, groups=1))
    np.testing.assert_array_equal(x.numpy(), (np.arange(64) + 1) % 64)


def _largest_workgroup(ctx) -> int:
    return min(ctx.limits.max_workgroup_size[0], ctx.limits.max_workgroup_invocations)


@needs_glslc
def test_shared_memory_sized_by_the_workgroup_is_counted_for_the_chosen_size(host, ctx):
    big = _largest_workgroup(ctx)
    if big * 256 <= ctx.limits.max_shared_memory:
        pytest.skip("this device's shared memory holds 256 bytes for every invocation")
    with pytest.raises(gc.UnsupportedError, match=rf"{big * 256} bytes of shared memory"):
        ctx.kernel(PER_INVOCATION, workgroup=big)
    k = ctx.kernel(PER_INVOCATION, workgroup=32)
    x = ctx.tensor(np.arange(64, dtype=np.uint32))
    host.run(ctx, lambda rec: k(rec, x, groups=2))
    np.testing.assert_array_equal(x.numpy(), np.arange(64) + 1)


@needs_glslc
def test_workgroup_memory_size_follows_specialization():
    spirv = compile_glsl(PER_INVOCATION)
    assert reflect(spirv).workgroup_memory_size == 256          # default local_size_x = 1
    assert workgroup_memory_size(spirv, {0: 100}) == 25600


# -- caller SPIR-V in a Dispatch ----------------------------------------------------

@family("capability_check_test_kernel")
def _never_rendered(spec):
    return "void main() {}"      # the dispatches below bring their own SPIR-V


def _spec(workgroup=(64, 1, 1)) -> KernelSpec:
    return KernelSpec("capability_check_test_kernel", (Binding("x", "uint", READWRITE),), (), (),
                      workgroup)


def _record_refused(host, ctx, dispatch, error, pattern):
    """``dispatch`` raises before recording anything: the same buffer then
    takes a valid op and runs."""
    x = ctx.tensor(np.arange(8, dtype=np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(error, match=pattern):
            rec.dispatch(dispatch)
        out = rec.add(x, x)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32) * 2)


@needs_glslc
def test_dispatch_spirv_with_a_capability_the_host_did_not_enable(host, ctx):
    spirv = compile_glsl(INT64, _env(ctx))
    buf = ctx.empty((64,), "uint32")
    _record_refused(host, ctx, Dispatch(_spec(), (buf.buffer,), b"", (1, 1, 1), spirv=spirv),
                    gc.UnsupportedError, "shaderInt64")


@needs_glslc
def test_dispatch_spirv_with_too_much_shared_memory(host, ctx):
    buf = ctx.empty((64,), "uint32")
    literal = compile_glsl(_shared_kernel(ctx.limits.max_shared_memory // 4 + 1), _env(ctx))
    _record_refused(host, ctx, Dispatch(_spec(), (buf.buffer,), b"", (1, 1, 1), spirv=literal),
                    gc.UnsupportedError, "maxComputeSharedMemorySize")
    big = _largest_workgroup(ctx)
    if big * 256 > ctx.limits.max_shared_memory:
        # At its default workgroup size (1) it would fit: the spec's size is what counts.
        sized = compile_glsl(PER_INVOCATION, _env(ctx))
        _record_refused(host, ctx, Dispatch(_spec((big, 1, 1)), (buf.buffer,), b"", (1, 1, 1),
                                            spirv=sized),
                        gc.UnsupportedError, rf"{big * 256} bytes of shared memory")


# -- text that is not text ------------------------------------------------------------

@needs_glslc
@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="needs spirv-val")
def test_corrupt_spirv_whose_validator_message_is_not_utf8(host, ctx):
    spirv = bytearray(compile_glsl(INT64.replace("uint64_t v = uint64_t(x[i]) << 33; "
                                                 "x[i] = uint(v >> 33);", "x[i] = 1u;"), _env(ctx)))
    at = spirv.find(b"GLSL.std.450")
    spirv[at:at + 3] = b"\xff\xfe\x80"        # spirv-val echoes the import name byte for byte
    with pytest.raises(gc.KernelError, match=r"invalid .*spirv-val: .*\ufffd.*recompile it"):
        ctx.kernel(bytes(spirv))


@needs_glslc
@pytest.mark.parametrize("message, hint", [
    ("error: line 1: Invalid capability operand: 5394", "may predate a capability or extension"),
    ("error: line 7: ID 4[%4] has not been defined", "recompile it from its source")])
def test_a_validator_that_does_not_know_an_operand_says_it_may_be_too_old(host, ctx, tmp_path, monkeypatch,
                                                                          message, hint):
    """SPIR-V newer than the installed SPIRV-Tools (a vendor capability) is
    told apart from SPIR-V that is wrong."""
    spirv = compile_glsl(_kernel_body("", f"x[i] = {len(message)}u;"), _env(ctx))     # bytes no run validated
    rejecting_validator(tmp_path, monkeypatch, message)
    with pytest.raises(gc.KernelError, match=re.escape(message) + r".*" + re.escape(hint)):
        ctx.kernel(spirv)


@needs_glslc
def test_validate_false_passes_a_module_the_validator_cannot_read(host, ctx, tmp_path, monkeypatch):
    """A trusted module newer than the installed spirv-val runs with
    validate=False; the capability check still applies (not this kernel's
    concern: it needs nothing)."""
    spirv = compile_glsl(_kernel_body("", "x[i] = x[i] * 3u + 1u;"), _env(ctx))
    rejecting_validator(tmp_path, monkeypatch, "error: line 1: Invalid capability operand: 6022")
    with pytest.raises(gc.KernelError, match="may predate"):
        ctx.kernel(spirv, name="checked")
    k = ctx.kernel(spirv, name="trusted", validate=False)
    x = ctx.tensor(np.arange(64, dtype=np.uint32))
    ctx.run(lambda rec: k(rec, x, groups=(1, 1, 1)))
    np.testing.assert_array_equal(x.numpy(), np.arange(64, dtype=np.uint32) * 3 + 1)


@pytest.mark.parametrize("value", [0, "no", None])
def test_validate_takes_only_a_bool(host, ctx, value):
    with pytest.raises(gc.InvalidArgumentError, match="validate must be True or False"):
        ctx.kernel(b"\x03\x02\x23\x07" + bytes(16), validate=value)


def test_glsl_with_a_lone_surrogate_is_an_argument_error(host, ctx):
    source = _kernel_body("", "x[i] = 1u; // caf\udce9")      # surrogateescape'd Latin-1 byte
    with pytest.raises(gc.InvalidArgumentError, match=r"'\\udce9' at index \d+.*no UTF-8 form"):
        ctx.kernel(source)


# -- push constants ------------------------------------------------------------------------

SCALE = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { float x[]; };
layout(push_constant) uniform Push { uint n; float s; int shift; } pc;
void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) x[i] = x[i] * pc.s + float(pc.shift); }
"""


@needs_glslc
@pytest.mark.parametrize("layout", [
    [("n", "uint32"), ("s", "float32"), ("shift", "int32")],
    [("n", "uint"), ("s", "float"), ("shift", "int")],
    [("n", np.uint32), ("s", np.dtype("float32")), ("shift", "int32")],
], ids=["numpy-names", "glsl-names", "numpy-types"])
def test_push_layout_takes_numpy_and_glsl_names(host, ctx, layout):
    k = ctx.kernel(SCALE, push_layout=layout)
    values = {"n": 60, "s": 1.5, "shift": -2}
    assert k.push_bytes(values) == struct.pack("<Ifi", 60, 1.5, -2)
    data = np.arange(64, dtype=np.float32)
    x = ctx.tensor(data)
    host.run(ctx, lambda rec: k(rec, x, push=values, groups=1))
    np.testing.assert_array_equal(x.numpy(), np.where(np.arange(64) < 60, data * 1.5 - 2, data))


@needs_glslc
@pytest.mark.parametrize("bad", ["float64", "uint64", "double", "uint8", "half", np.int64, None, 7])
def test_unknown_push_type_names_one_clear_error(ctx, bad):
    with pytest.raises(gc.InvalidArgumentError, match=r"unknown push constant type .*uint32/int32/"
                                                      r"float32 \(or GLSL uint/int/float\)"):
        ctx.kernel(SCALE, push_layout=[("n", bad), ("s", "float32"), ("shift", "int32")])


@needs_glslc
def test_malformed_push_layouts(ctx):
    for layout in ("n:uint32", [("n",)], [("n", "uint32", 0), ("s", "float32")],
                   [("n", "uint32"), ("n", "float32"), ("shift", "int32")]):
        with pytest.raises(gc.InvalidArgumentError, match="push_layout|count"):
            ctx.kernel(SCALE, push_layout=layout)


@needs_glslc
def test_unknown_push_constant_key_is_refused(host, ctx):
    k = ctx.kernel(SCALE, push_layout=[("n", "uint32"), ("s", "float32"), ("shift", "int32")])
    x = ctx.tensor(np.ones(64, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.InvalidArgumentError, match=r"unknown push constant\(s\) 'scale'; "
                                                          r"its push_layout declares 'n', 's', 'shift'"):
            k(rec, x, push={"n": 64, "s": 2.0, "shift": 0, "scale": 3.0}, groups=1)
        with pytest.raises(gc.InvalidArgumentError, match="'shift' is missing"):
            k(rec, x, push={"n": 64, "s": 2.0}, groups=1)
        k(rec, x, push={"n": 64, "s": 2.0, "shift": 1}, groups=1)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(x.numpy(), np.full(64, 3, np.float32))


def _module_with_shared_length_chain(squarings: int) -> bytes:
    """A hand-written module: ``shared float s[L]`` where L is 3 squared
    ``squarings`` times by OpSpecConstantOp IMul, each step using the
    previous one twice."""
    words = [0x07230203, 0x00010000, 0, 100 + squarings, 0]

    def ins(opcode, *operands):
        words.extend([(len(operands) + 1) << 16 | opcode, *operands])
    ins(17, 1)                                                    # OpCapability Shader
    ins(14, 0, 1)                                                 # OpMemoryModel Logical GLSL450
    ins(15, 5, 1, *struct.unpack("<2I", b"main\0\0\0\0"))         # OpEntryPoint GLCompute %1
    ins(16, 1, 17, 1, 1, 1)                                       # LocalSize 1 1 1
    ins(21, 2, 32, 0)                                             # %2 = uint
    ins(50, 2, 3, 3)                                              # %3 = OpSpecConstant 3
    length = 3
    for i in range(squarings):
        ins(52, 2, 10 + i, 132, length, length)                   # OpSpecConstantOp IMul
        length = 10 + i
    ins(22, 4, 32)                                                # %4 = float
    ins(28, 90 + squarings, 4, length)                            # float[L]
    ins(32, 91 + squarings, 4, 90 + squarings)                    # Workgroup pointer
    ins(59, 91 + squarings, 92 + squarings, 4)                    # the shared variable
    return struct.pack(f"<{len(words)}I", *words)


def test_shared_length_arithmetic_wraps_like_the_shaders_integers():
    assert reflect(_module_with_shared_length_chain(2)).workgroup_memory_size == 81 * 4
    # 3 ** (2 ** 40) wraps at 64 bits instead of growing a number of 2**40 digits.
    expected = pow(3, 2 ** 40, 2 ** 64) * 4
    assert reflect(_module_with_shared_length_chain(40)).workgroup_memory_size == expected
