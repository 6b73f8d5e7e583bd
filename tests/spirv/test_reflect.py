"""Tests for the SPIR-V reflection parser (no GPU needed).

Kernels are compiled from GLSL with glslc for Vulkan 1.0 (SPIR-V 1.0, where
storage buffers are Uniform + BufferBlock) and Vulkan 1.2 (SPIR-V 1.5, where
they are StorageBuffer + Block), so both encodings are covered.
"""
from __future__ import annotations

import functools
import os
import random
import shutil
import struct
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guestcompute.errors import KernelError
from guestcompute.spirv.reflect import (
    MAGIC,
    ReflectedBinding,
    SpirvError,
    reflect,
)

ENVS = ["vulkan1.0", "vulkan1.2"]
# SPIR-V version word each target env produces.
SPIRV_VERSION = {"vulkan1.0": 0x00010000, "vulkan1.2": 0x00010500, "vulkan1.3": 0x00010600}

CAP_SHADER = 1
CAP_INT64 = 11

needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="glslc not installed")
needs_spirv_as = pytest.mark.skipif(
    shutil.which("spirv-as") is None, reason="spirv-as not installed")


@functools.lru_cache(maxsize=None)
def compile_glsl(source: str, env: str = "vulkan1.0") -> bytes:
    # Cached (rather than a fixture) so hypothesis tests can reuse modules.
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.comp")
        out = os.path.join(tmp, "kernel.spv")
        with open(src, "w") as f:
            f.write(source)
        subprocess.run(
            ["glslc", "-fshader-stage=compute", f"--target-env={env}", src, "-o", out],
            check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()


@functools.lru_cache(maxsize=None)
def assemble(text: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "module.spvasm")
        out = os.path.join(tmp, "module.spv")
        with open(src, "w") as f:
            f.write(text)
        subprocess.run(["spirv-as", "--target-env", "spv1.0", src, "-o", out],
                       check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()


def words_of(spirv: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(spirv) // 4}I", spirv))


def bytes_of(words, order: str = "<") -> bytes:
    return struct.pack(f"{order}{len(words)}I", *words)


BUFFERS = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 1) readonly buffer In { float data[]; } src;
layout(set = 0, binding = 0) writeonly buffer Out { float data[]; } dst;
layout(set = 1, binding = 0) uniform Params { vec4 scale; } params;
layout(set = 0, binding = 2) buffer Scratch { float tmp[]; };
layout(set = 0, binding = 3) buffer Mixed { readonly float a[4]; float b[]; } mixed;
void main() {
    uint i = gl_GlobalInvocationID.x;
    tmp[i] = src.data[i];
    mixed.b[i] = mixed.a[0];
    dst.data[i] = tmp[i] * params.scale.x;
}
"""

PUSH_SIMPLE = """
#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform PC { uint n; vec4 v; float f[3]; } pc;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[0] = float(pc.n) + pc.v.y + pc.f[2]; }
"""

PUSH_NESTED = """
#version 450
layout(local_size_x = 1) in;
struct Inner { vec2 a; float b; };
layout(push_constant) uniform PC {
    mat3 n;                        // offset 0, 3 columns with stride 16
    Inner s[2];                    // offset 48, array stride 16
    uint tail;                     // offset 80
    layout(row_major) mat2x3 r;    // offset 88, 3 rows with stride 8
} pc;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[0] = pc.n[0][0] + pc.s[1].b + float(pc.tail) + pc.r[1][2]; }
"""

PUSH_VEC3_LAST = """
#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform PC { vec3 v; } pc;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[0] = pc.v.z; }
"""

NO_PUSH = """
#version 450
layout(local_size_x = 8, local_size_y = 4, local_size_z = 2) in;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[gl_LocalInvocationIndex] = 1.0; }
"""

SPEC_SIZE = """
#version 450
layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const float SCALE = 2.0;
layout(constant_id = 3) const bool FLAG = false;
layout(constant_id = 4) const int COUNT = 3;
layout(constant_id = 5) const uint MASK = 7u;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    x[i] = SCALE * float(COUNT) + float(MASK) + (FLAG ? 1.0 : 0.0);
}
"""

SPEC_PARTIAL = """
#version 450
layout(local_size_x_id = 7, local_size_z = 4) in;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[gl_GlobalInvocationID.x] = 0.0; }
"""

IMAGES = """
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0, rgba8) uniform readonly image2D src_img;
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D dst_img;
layout(set = 0, binding = 2) uniform sampler2D combined;
layout(set = 0, binding = 3) uniform texture2D tex;
layout(set = 0, binding = 4) uniform sampler smp;
layout(set = 0, binding = 5) uniform samplerBuffer utb;
layout(set = 0, binding = 6, r32f) uniform imageBuffer stb;
void main() {
    vec4 c = imageLoad(src_img, ivec2(0)) + texture(combined, vec2(0))
           + texture(sampler2D(tex, smp), vec2(0)) + texelFetch(utb, 0)
           + imageLoad(stb, 0);
    imageStore(dst_img, ivec2(0), c);
}
"""

INT64 = """
#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 1) in;
layout(constant_id = 0) const uint64_t BIG = 1ul;
layout(set = 0, binding = 0) buffer B { uint64_t x[]; };
void main() { x[0] = BIG; }
"""


# -- descriptors -------------------------------------------------------------

@needs_glslc
@pytest.mark.parametrize("env", ENVS)
def test_buffer_bindings(env):
    spirv = compile_glsl(BUFFERS, env)
    # Make sure each env really produced the SPIR-V version under test.
    assert words_of(spirv)[1] == SPIRV_VERSION[env]
    shader = reflect(spirv)
    assert shader.entry_point == "main"
    assert shader.bindings == (
        ReflectedBinding(0, 0, "storage_buffer", readonly=False, writeonly=True, name="dst"),
        ReflectedBinding(0, 1, "storage_buffer", readonly=True, writeonly=False, name="src"),
        # Anonymous instance: falls back to the block name.
        ReflectedBinding(0, 2, "storage_buffer", readonly=False, writeonly=False, name="Scratch"),
        # Only one member is readonly, so the buffer as a whole is not.
        ReflectedBinding(0, 3, "storage_buffer", readonly=False, writeonly=False, name="mixed"),
        ReflectedBinding(1, 0, "uniform_buffer", readonly=False, writeonly=False, name="params"),
    )
    assert shader.push_constant_size == 0
    assert CAP_SHADER in shader.capabilities


@needs_glslc
def test_buffer_bindings_same_across_spirv_versions():
    results = {env: reflect(compile_glsl(BUFFERS, env)) for env in ENVS + ["vulkan1.3"]}
    assert len({r.bindings for r in results.values()}) == 1


@needs_glslc
@pytest.mark.parametrize("env", ENVS)
def test_image_and_sampler_kinds(env):
    shader = reflect(compile_glsl(IMAGES, env))
    got = {b.binding: (b.kind, b.readonly, b.writeonly, b.name) for b in shader.bindings}
    assert got == {
        0: ("storage_image", True, False, "src_img"),
        1: ("storage_image", False, True, "dst_img"),
        2: ("combined_image_sampler", False, False, "combined"),
        3: ("sampled_image", False, False, "tex"),
        4: ("sampler", False, False, "smp"),
        5: ("uniform_texel_buffer", False, False, "utb"),
        6: ("storage_texel_buffer", False, False, "stb"),
    }


# -- push constants ----------------------------------------------------------

@needs_glslc
@pytest.mark.parametrize("env", ENVS)
def test_push_constant_std430_offsets(env):
    # uint @0, vec4 @16 (16-byte aligned), float[3] @32 with stride 4 -> 44.
    assert reflect(compile_glsl(PUSH_SIMPLE, env)).push_constant_size == 44


@needs_glslc
@pytest.mark.parametrize("env", ENVS)
def test_push_constant_matrices_and_nested_structs(env):
    # row_major mat2x3 at 88: 3 rows x MatrixStride 8 = 24 -> ends at 112.
    assert reflect(compile_glsl(PUSH_NESTED, env)).push_constant_size == 112


@needs_glslc
def test_push_constant_not_padded_past_last_member():
    assert reflect(compile_glsl(PUSH_VEC3_LAST)).push_constant_size == 12


# -- workgroup size and specialization ----------------------------------------

@needs_glslc
@pytest.mark.parametrize("env", ENVS)
def test_literal_local_size(env):
    shader = reflect(compile_glsl(NO_PUSH, env))
    assert shader.local_size == (8, 4, 2)
    assert shader.local_size_default == (8, 4, 2)
    assert shader.local_size_spec_ids == (None, None, None)
    assert shader.spec_constants == {}
    assert shader.push_constant_size == 0


# vulkan1.3 (SPIR-V 1.6) uses LocalSizeId; older targets the WorkgroupSize built-in.
@needs_glslc
@pytest.mark.parametrize("env", ENVS + ["vulkan1.3"])
def test_spec_driven_local_size(env):
    shader = reflect(compile_glsl(SPEC_SIZE, env))
    assert shader.local_size is None
    assert shader.local_size_spec_ids == (0, 1, None)
    assert shader.local_size_default == (1, 1, 1)
    assert shader.spec_constants == {
        0: "uint", 1: "uint", 2: "float", 3: "bool", 4: "int", 5: "uint"}


@needs_glslc
@pytest.mark.parametrize("env", ENVS + ["vulkan1.3"])
def test_partially_spec_driven_local_size(env):
    shader = reflect(compile_glsl(SPEC_PARTIAL, env))
    assert shader.local_size is None
    assert shader.local_size_spec_ids == (7, None, None)
    assert shader.local_size_default == (1, 1, 4)


@needs_glslc
def test_64bit_spec_constant_and_capabilities():
    shader = reflect(compile_glsl(INT64))
    assert shader.spec_constants == {0: "uint64"}
    assert shader.capabilities[0] == CAP_SHADER
    assert CAP_INT64 in shader.capabilities


# -- hand-written modules ------------------------------------------------------

GROUPED = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint Fragment %frag "frag"
               OpEntryPoint GLCompute %main "kernel_main"
               OpExecutionMode %frag OriginUpperLeft
               OpExecutionMode %main LocalSize 32 1 1
               OpName %buf "buf"
               OpDecorate %grp DescriptorSet 3
               OpDecorate %grp Binding 5
        %grp = OpDecorationGroup
               OpGroupDecorate %grp %buf
               OpDecorate %S BufferBlock
               OpMemberDecorate %S 0 Offset 0
               OpMemberDecorate %S 0 NonWritable
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
          %S = OpTypeStruct %float
      %ptr_S = OpTypePointer Uniform %S
        %buf = OpVariable %ptr_S Uniform
       %main = OpFunction %void None %fn
         %l0 = OpLabel
               OpReturn
               OpFunctionEnd
       %frag = OpFunction %void None %fn
         %l1 = OpLabel
               OpReturn
               OpFunctionEnd
"""

NO_COMPUTE = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint Fragment %frag "frag"
               OpExecutionMode %frag OriginUpperLeft
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %frag = OpFunction %void None %fn
         %l1 = OpLabel
               OpReturn
               OpFunctionEnd
"""


@needs_spirv_as
def test_first_compute_entry_point_and_decoration_groups():
    shader = reflect(assemble(GROUPED))
    assert shader.entry_point == "kernel_main"
    assert shader.local_size == (32, 1, 1)
    assert shader.bindings == (
        ReflectedBinding(3, 5, "storage_buffer", readonly=True, writeonly=False, name="buf"),)


@needs_spirv_as
def test_missing_compute_entry_point():
    with pytest.raises(SpirvError, match="no GLCompute entry point"):
        reflect(assemble(NO_COMPUTE))


# -- byte order and errors -------------------------------------------------------

@needs_glslc
def test_big_endian_module():
    spirv = compile_glsl(SPEC_SIZE)
    swapped = bytes_of(words_of(spirv), ">")
    assert swapped[:4] == MAGIC.to_bytes(4, "big")
    assert reflect(swapped) == reflect(spirv)


@needs_glslc
def test_accepts_bytearray_and_memoryview():
    spirv = compile_glsl(NO_PUSH)
    assert reflect(bytearray(spirv)) == reflect(memoryview(spirv)) == reflect(spirv)


def test_spirv_error_is_a_kernel_error():
    assert issubclass(SpirvError, KernelError)
    assert issubclass(SpirvError, ValueError)


def test_empty_input():
    with pytest.raises(SpirvError, match="header"):
        reflect(b"")


def test_length_not_multiple_of_4():
    with pytest.raises(SpirvError, match="multiple of 4"):
        reflect(MAGIC.to_bytes(4, "little") + bytes(17))


def test_bad_magic():
    with pytest.raises(SpirvError, match="magic"):
        reflect(bytes_of([0xDEADBEEF, 0x00010000, 0, 10, 0]))


def test_header_only_has_no_entry_point():
    with pytest.raises(SpirvError, match="entry point"):
        reflect(bytes_of([MAGIC, 0x00010000, 0, 10, 0]))


@needs_glslc
def test_truncated_by_words():
    spirv = compile_glsl(BUFFERS)
    with pytest.raises(SpirvError, match="overflowing"):
        # Cutting inside the OpEntryPoint leaves its word count past the end.
        reflect(spirv[:5 * 4 + 3 * 4 + 4 * 4])


@needs_glslc
def test_truncated_by_bytes():
    spirv = compile_glsl(BUFFERS)
    with pytest.raises(SpirvError, match="multiple of 4"):
        reflect(spirv[:-2])


def test_zero_word_count():
    with pytest.raises(SpirvError, match="word count of 0"):
        reflect(bytes_of([MAGIC, 0x00010000, 0, 10, 0, 0x00000011]))


def test_too_few_operands():
    # OpCapability (17) with no operand word.
    with pytest.raises(SpirvError, match="operand"):
        reflect(bytes_of([MAGIC, 0x00010000, 0, 10, 0, (1 << 16) | 17]))


def test_random_bytes_are_rejected():
    rng = random.Random(1234)
    for _ in range(200):
        data = rng.randbytes(rng.randrange(0, 256))
        with pytest.raises(SpirvError):
            reflect(data)


# -- fuzzing: only SpirvError may escape ------------------------------------------

def reflect_or_spirv_error(data: bytes) -> None:
    try:
        reflect(data)
    except SpirvError:
        pass


@given(st.binary(max_size=512))
@settings(max_examples=300, deadline=None)
def test_fuzz_random_bytes(data):
    reflect_or_spirv_error(data)


@given(st.lists(st.integers(0, 2**32 - 1), max_size=64), st.sampled_from("<>"))
@settings(max_examples=300, deadline=None)
def test_fuzz_random_words_after_valid_header(body, order):
    reflect_or_spirv_error(bytes_of([MAGIC, 0x00010000, 0, 100, 0] + body, order))


@needs_glslc
@given(data=st.data())
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
def test_fuzz_mutated_real_modules(data):
    source = data.draw(st.sampled_from([BUFFERS, PUSH_NESTED, SPEC_SIZE, IMAGES]))
    env = data.draw(st.sampled_from(ENVS + ["vulkan1.3"]))
    words = words_of(compile_glsl(source, env))
    # Mutate words past the magic so the parser gets deep into the module.
    for _ in range(data.draw(st.integers(1, 8))):
        index = data.draw(st.integers(1, len(words) - 1))
        if data.draw(st.booleans()):
            words[index] ^= 1 << data.draw(st.integers(0, 31))  # flip one bit
        else:
            # Small values make plausible ids, word counts and literals.
            words[index] = data.draw(st.one_of(st.integers(0, 64), st.integers(0, 2**32 - 1)))
    cut = data.draw(st.integers(5, len(words)))
    reflect_or_spirv_error(bytes_of(words[:cut]))
