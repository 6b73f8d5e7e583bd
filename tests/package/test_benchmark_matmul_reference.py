"""The fp16 matmul's own reference (benchmarks/matmul_reference.py): its
committed modules have the interface the row binds, they are what their
source compiles to, the device it runs the address build on works (here,
under the validation layer), and the row stands aside where rec.matmul
does not run its KHR kernel."""
import os
import struct

import numpy as np
import pytest

from benchmarks import matmul_reference as mr
from rebuilt_spirv import assert_rebuilds_alike

def shared_bytes(block_m: int, block_n: int, k_step: int) -> int:
    """An A tile block_m x (k_step + 8) fp16 and a B tile k_step x (block_n + 8)."""
    return (block_m * (k_step + 8) + k_step * (block_n + 8)) * 2


def test_every_build_is_committed_with_the_interface_the_row_binds():
    from guestcompute.spirv.reflect import reflect, workgroup_memory_size
    blobs = {b: mr.spirv_path(b).read_bytes() for b in mr.BUILDS}
    r = reflect(blobs["addresses"])
    assert not r.bindings
    assert r.push_constant_size == 24                       # three 64-bit addresses
    assert 5347 in r.capabilities                           # PhysicalStorageBufferAddresses
    assert mr.TILINGS["bindings"] == mr.TILINGS["addresses"] == mr.LIBRARY_TILING
    assert shared_bytes(*mr.LIBRARY_TILING[:3]) == (256 * 5 + 32 * 33) * 16
    for build, blob in blobs.items():
        block_m, block_n, k_step, along_m, along_n = mr.TILINGS[build]
        r = reflect(blob)
        if build != "addresses":
            assert [b.kind for b in r.bindings] == ["storage_buffer"] * 3 and r.push_constant_size == 0
        assert r.local_size == (along_m * along_n * 32, 1, 1) and 6022 in r.capabilities   # CooperativeMatrixKHR
        assert workgroup_memory_size(blob, {}) == shared_bytes(block_m, block_n, k_step), build
        assert mr.groups(build, 4096) == (4096 // block_n, 4096 // block_m, 1)
    assert len(set(blobs.values())) == len(blobs)


@pytest.mark.parametrize("build", mr.BUILDS)
def test_every_tiling_splits_evenly(build):
    """The source divides without remainders: whole fragments per
    subgroup, whole uvec4s per thread for each staged tile, whole K steps
    and blocks of the benchmark's size."""
    block_m, block_n, k_step, along_m, along_n = mr.TILINGS[build]
    threads = along_m * along_n * 32
    assert block_m % (along_m * 16) == 0 and block_n % (along_n * 16) == 0 and k_step % 16 == 0
    assert (block_m * k_step) % (8 * threads) == 0 and (k_step * block_n) % (8 * threads) == 0
    assert mr.SIZE % block_m == 0 and mr.SIZE % block_n == 0 and mr.SIZE % k_step == 0


def test_the_committed_builds_are_what_their_source_compiles_to(tmp_path):
    """Rebuilt where glslangValidator 13+ exists: the same interface and
    shared memory (bytes may differ between compiler versions)."""
    assert_rebuilds_alike(mr.build, [mr.spirv_path(name) for name in mr.BUILDS], tmp_path)


SCALE_BY_ADDRESS = """#version 450
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Src { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer Dst { float v[]; };
layout(push_constant) uniform Push { Src src; Dst dst; uint n; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) pc.dst.v[i] = 2.0 * pc.src.v[i] + 1.0;
}
"""


def test_the_address_device_runs_a_kernel_on_addresses_under_validation():
    """Buffers with device addresses, a pipeline with only push constants,
    the timed dispatches and the read-back, with the validation layer
    (synchronization validation on) reporting nothing."""
    from guestcompute.errors import UnsupportedError
    from guestcompute.spirv.compiler import compile_glsl
    from benchmarks.address_device import AddressDevice
    try:
        dev = AddressDevice(validation=os.environ.get("GUESTCOMPUTE_TEST_VALIDATION", "1") != "0")
    except UnsupportedError as e:
        pytest.skip(str(e))
    with dev:
        x = np.arange(1000, dtype=np.float32)
        src, dst = dev.buffer(x.nbytes), dev.buffer(x.nbytes)
        assert src.address and dst.address and src.address != dst.address
        dev.upload(src, x)
        dev.upload(dst, np.full_like(x, np.nan))
        kernel = dev.pipeline(compile_glsl(SCALE_BY_ADDRESS, "vulkan1.2"), 20)
        seconds = dev.gpu_seconds(kernel, struct.pack("<QQI", src.address, dst.address, x.size), (16, 1, 1), 3)
        assert seconds > 0
        np.testing.assert_array_equal(dev.download(dst, np.float32), 2 * x + 1)
        assert not dev.messages, "\n".join(dev.messages)


def test_the_row_stands_aside_where_matmul_runs_another_kernel(modern_ctx):
    """On a device without KHR cooperative matrices rec.matmul takes
    another kernel, and the row says which instead of timing."""
    if modern_ctx.caps.cooperative_matrix_khr or not modern_ctx.caps.float16_storage:
        pytest.skip("the row's other kernel path needs fp16 storage and no KHR cooperative matrices")
    rows = mr.gpu_rows(modern_ctx, quick=True)
    assert [r.name for r in rows] == [mr.ROW]
    assert rows[0].skipped.startswith("rec.matmul runs ") and "not its KHR cooperative-matrix kernel" in rows[0].skipped


def test_a_references_note_gives_each_rate_then_what_failed():
    from benchmarks.gpu_ops import reference_rates
    assert reference_rates(2e12, {"a": 1.0, "b": 0.5}, []) == "a 2 TFLOP/s, b 4 TFLOP/s"
    assert reference_rates(2e12, {"a": 1.0}, ["c: boom", "d: bust"]) == "a 2 TFLOP/s; failed: c: boom; d: bust"
