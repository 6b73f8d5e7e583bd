"""User kernels: GLSL or SPIR-V in, reflected bindings and push constants,
cached pipelines, barriers from reflected access, typed errors."""
import shutil
import struct

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.spirv.compiler import compile_glsl

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")

SCALE = """#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push { uint n; float s; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < pc.n) dst[i] = src[i] * pc.s;
}
"""

# In-place: binding 0 is read and written.
ACCUMULATE = """#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer Acc { float acc[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
void main() { acc[gl_GlobalInvocationID.x] += x[gl_GlobalInvocationID.x]; }
"""


def test_glsl_kernel_runs_with_every_push_form(host, ctx):
    k = ctx.kernel(SCALE, workgroup=64, push_layout=[("n", "uint"), ("s", "float")], name="scale")
    assert k.push_size == 8 and len(k.bindings) == 2 and k.workgroup == (64, 1, 1)
    assert [b.readonly for b in k.bindings] == [True, False]
    src_np = np.arange(100, dtype=np.float32)
    src = ctx.tensor(src_np)
    outs = [ctx.zeros((100,)) for _ in range(4)]
    struct_dtype = np.dtype([("n", "<u4"), ("s", "<f4")])

    def work(rec):
        k(rec, src, outs[0], push={"n": 100, "s": 2.0}, groups=2)
        k(rec, src, outs[1], push=struct.pack("<If", 90, 3.0), groups=(2, 1, 1))
        rec.run_kernel(k, [src, outs[2]], push=np.array((100, -1.0), struct_dtype)[()], groups=[2])
        rec.run_kernel(k, [src, outs[3]], push=np.array([100, 0], np.uint32), groups=(0,))  # empty grid
    host.run(ctx, work)
    np.testing.assert_array_equal(outs[0].numpy(), src_np * 2)
    np.testing.assert_array_equal(outs[1].numpy(), np.where(np.arange(100) < 90, src_np * 3, 0))
    np.testing.assert_array_equal(outs[2].numpy(), -src_np)
    np.testing.assert_array_equal(outs[3].numpy(), np.zeros(100, np.float32))


# Two views of one buffer at binding 0 (slangc declares a byte-address
# buffer once per element type it loads or stores): one binding, read and
# written, so the barriers treat it as read-write.
ALIASED = """#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer Bits { uint bits[]; };
layout(std430, binding = 0) writeonly buffer Vals { float vals[]; };
layout(std430, binding = 1) writeonly buffer Out { uint out_bits[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    out_bits[i] = bits[i];
    vals[i] = 2.0 * float(i);
}
"""


def test_aliased_views_of_one_buffer_are_one_binding(host, ctx):
    k = ctx.kernel(ALIASED, name="aliased")
    assert len(k.bindings) == 2 and not k.bindings[0].readonly and not k.bindings[0].writeonly
    x_np = np.linspace(-1, 1, 64, dtype=np.float32)
    x, bits = ctx.tensor(x_np), ctx.zeros((64,), "uint32")
    host.run(ctx, lambda rec: k(rec, x, bits, groups=2))
    np.testing.assert_array_equal(bits.numpy(), x_np.view(np.uint32))
    np.testing.assert_array_equal(x.numpy(), 2.0 * np.arange(64, dtype=np.float32))


def test_spirv_bytes_and_pipeline_cache(host):
    ctx = host.adopt()
    try:
        env = "vulkan1.1" if host.api_version >= (1, 1) else "vulkan1.0"
        spirv = compile_glsl(SCALE, env)
        k1 = ctx.kernel(SCALE, workgroup=64)
        k2 = ctx.kernel(SCALE, workgroup=64)
        k3 = ctx.kernel(spirv, workgroup=64)
        # big-endian words are the same module
        swapped = struct.pack(f">{len(spirv) // 4}I", *struct.unpack(f"<{len(spirv) // 4}I", spirv))
        k4 = ctx.kernel(swapped, workgroup=64)
        assert k1.spec == k2.spec == k3.spec == k4.spec
        assert ctx.cache_stats()["pipelines_created"] == 1
        k5 = ctx.kernel(SCALE, workgroup=128)          # another workgroup: another pipeline
        assert k5.spec != k1.spec
        assert ctx.cache_stats()["pipelines_created"] == 2
        default = ctx.kernel(spirv)                    # the shader's default (spec-constant) size
        assert default.workgroup == (1, 1, 1)
        before = ctx.cache_stats()["pipelines_created"]
        tensors = [(ctx.tensor(np.full(64, i, np.float32)), ctx.empty((64,))) for i in range(20)]
        push = struct.pack("<If", 64, 0.5)
        host.run(ctx, lambda rec: [k4(rec, a, b, push=push) for a, b in tensors])
        # recording never creates pipelines: they exist since ctx.kernel()
        assert ctx.cache_stats()["pipelines_created"] == before
        assert [b.numpy()[3] for _, b in tensors[:3]] == [0.0, 0.5, 1.0]
    finally:
        ctx.close()


def test_barriers_follow_reflected_access(host, ctx):
    """Chained kernels writing and reading the same buffers: the recorder
    must put barriers between them (sync validation would report a hazard)."""
    scale = ctx.kernel(SCALE, workgroup=32)
    acc = ctx.kernel(ACCUMULATE)
    assert [b.readonly or b.writeonly for b in acc.bindings] == [False, True]
    a_np = np.arange(64, dtype=np.float32)
    a, tmp, total = ctx.tensor(a_np), ctx.empty((64,)), ctx.zeros((64,))
    push = struct.pack("<If", 64, 3.0)

    def work(rec):
        scale(rec, a, tmp, push=push, groups=2)      # tmp = 3a
        acc(rec, total, tmp, groups=2)               # total += tmp      (RAW on tmp)
        acc(rec, total, a, groups=2)                 # total += a        (RAW/WAW on total)
        scale(rec, total, a, push=push, groups=2)    # a = 3 total       (WAR on a, RAW on total)
        return rec
    rec = host.run(ctx, work)
    assert rec.barriers >= 3
    np.testing.assert_array_equal(a.numpy(), 3 * (3 * a_np + a_np))


def test_user_kernel_and_builtins_mix(host, ctx):
    k = ctx.kernel(SCALE, workgroup=16)
    x = ctx.tensor(np.arange(16, dtype=np.float32))
    y = ctx.empty((16,))

    def work(rec):
        k(rec, x, y, push=struct.pack("<If", 16, 2.0))
        return rec.add(y, x)
    out = host.run(ctx, work)
    np.testing.assert_array_equal(out.numpy(), np.arange(16) * 3.0)


# 2-D images are bound (tests/ops/test_images.py); 3-D ones are not.
IMAGE = """#version 450
layout(local_size_x = 1) in;
layout(binding = 0, rgba8) uniform writeonly image3D img;
void main() { imageStore(img, ivec3(0), vec4(1.0)); }
"""
UNIFORM = """#version 450
layout(local_size_x = 1) in;
layout(std140, binding = 0) uniform U { vec4 v; };
layout(std430, binding = 1) buffer B { vec4 b[]; };
void main() { b[0] = v; }
"""
SET1 = """#version 450
layout(local_size_x = 1) in;
layout(std430, set = 1, binding = 0) buffer B { float b[]; };
void main() { b[0] = 1.0; }
"""
GAP = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 2) buffer B { float b[]; };
void main() { b[0] = a[0]; }
"""


def huge_push(limit_bytes: int) -> str:
    """A kernel whose push constants are one vec4 past the device's limit."""
    n = limit_bytes // 16 + 1
    return f"""#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer B {{ vec4 b[]; }};
layout(push_constant) uniform P {{ vec4 v[{n}]; }} pc;
void main() {{ b[0] = pc.v[{n - 1}]; }}
"""


CLASH = """#version 450
layout(local_size_x = 8) in;
layout(constant_id = 1) const uint FACTOR = 2;
layout(std430, binding = 0) buffer B { uint b[]; };
void main() { b[0] = FACTOR; }
"""
MIXED = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer B { float b[]; };
layout(binding = 0, r32f) uniform image2D img;
void main() { b[0] = imageLoad(img, ivec2(0)).x; }
"""
OTHER_ID = """#version 450
layout(local_size_x_id = 3) in;
layout(std430, binding = 0) buffer B { uint b[]; };
void main() { b[0] = 1u; }
"""


@pytest.mark.parametrize("name", ["IMAGE", "UNIFORM", "SET1", "GAP", "HUGE_PUSH", "CLASH", "OTHER_ID",
                                  "WORKGROUP", "MIXED"])
def test_unsupported_declarations(host, ctx, name):
    with pytest.raises(gc.UnsupportedError):
        if name == "HUGE_PUSH":
            ctx.kernel(huge_push(ctx.limits.max_push_constants))
        elif name == "WORKGROUP":                          # past maxComputeWorkGroupSize
            ctx.kernel(SCALE, workgroup=ctx.limits.max_workgroup_size[0] * 2)
        else:
            ctx.kernel(globals()[name])
    assert ctx.cache_stats()["pipelines_created"] == 0


def test_bad_kernels_are_kernel_errors(host, ctx):
    with pytest.raises(gc.KernelError):
        ctx.kernel("#version 450\nvoid main() { this is not glsl }\n")
    with pytest.raises(gc.KernelError):
        ctx.kernel(b"\x03\x02\x23\x07" + bytes(16))      # a header and nothing else
    with pytest.raises(gc.KernelError):
        ctx.kernel(b"definitely not spir-v bytes!")
    with pytest.raises(gc.KernelError):
        ctx.kernel(compile_glsl(SCALE)[:-6])               # truncated
    with pytest.raises(gc.KernelError):
        ctx.kernel(SCALE, entry="other")
    with pytest.raises(gc.InvalidArgumentError):
        ctx.kernel(42)
    with pytest.raises(gc.InvalidArgumentError):
        ctx.kernel(ACCUMULATE, workgroup=64)              # literal local_size_x = 32
    with pytest.raises(gc.InvalidArgumentError):
        ctx.kernel(SCALE, push_layout=[("n", "uint")])     # 4 bytes, the block is 8
    with pytest.raises(gc.InvalidArgumentError):
        ctx.kernel(SCALE, push_layout=[("n", "double"), ("s", "float")])


def test_bad_record_arguments(host, ctx):
    k = ctx.kernel(SCALE, workgroup=64)
    with_layout = ctx.kernel(SCALE, workgroup=64, push_layout=[("n", "uint"), ("s", "float")])
    a, b = ctx.tensor(np.ones(64, np.float32)), ctx.empty((64,))
    good = struct.pack("<If", 64, 1.0)
    other = host.adopt()
    try:
        foreign = other.kernel(SCALE, workgroup=64)
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, push=good)                                       # 1 tensor, 2 bindings
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, b, push=good + bytes(4))                         # 12 bytes, block is 8
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, b)                                               # push missing
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, b, push={"n": 64, "s": 1.0})                     # dict without a layout
            with pytest.raises(gc.InvalidArgumentError):
                with_layout(rec, a, b, push={"n": 64})                     # missing field
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, b, push=good, groups=(1, -1))
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, b, push=good, groups=(1, 1, 1, 1))
            with pytest.raises(gc.UnsupportedError):
                k(rec, a, b, push=good, groups=(ctx.limits.max_workgroup_count[0] + 1,))
            with pytest.raises(gc.InvalidArgumentError):
                k(rec, a, np.zeros(64, np.float32), push=good)
            with pytest.raises(gc.WrongContextError):
                rec.run_kernel(foreign, [a, b], push=good)
            with pytest.raises(gc.InvalidArgumentError):
                rec.run_kernel("not a kernel", [a, b])
        host.submit_and_wait(cmd)
    finally:
        other.close()
    assert rec.dispatches == 0
