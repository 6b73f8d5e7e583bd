"""Slang kernels: compiled by slangc, then reflected, cached and reloaded
like GLSL ones; errors at file:line:column with the source line."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.errors import CompilerNotFoundError
from guestcompute.spirv.slang import slangc_path
from rejecting_validator import rejecting_validator


def _have_slangc() -> bool:
    try:
        slangc_path()
        return True
    except CompilerNotFoundError:
        return False


pytestmark = pytest.mark.skipif(not _have_slangc(), reason="no slangc (pip install --no-deps slangtorch)")

SCALE = """
struct Push { uint n; float scale; };
[[vk::push_constant]] ConstantBuffer<Push> pc;
StructuredBuffer<float> src;
RWStructuredBuffer<float> dst;

[shader("compute")]
[numthreads(64, 1, 1)]
void main(uint3 id : SV_DispatchThreadID)
{
    if (id.x < pc.n)
        dst[id.x] = src[id.x] * pc.scale + OFFSET;
}
"""


@pytest.fixture
def slang_ctx(modern_ctx):
    return modern_ctx          # SPIR-V 1.3: a Vulkan 1.1 device


def _run(ctx, k, n=100, scale=2.0):
    src_np = np.arange(n, dtype=np.float32) - 7
    src, dst = ctx.tensor(src_np), ctx.zeros((n,))
    push = np.array([(n, scale)], dtype=[("n", "<u4"), ("s", "<f4")])[0]
    ctx.run(lambda rec: k(rec, src, dst, push=push, groups=-(-n // 64)))
    return src_np, dst.numpy()


def test_slang_text_kernel_runs(slang_ctx):
    k = slang_ctx.kernel(SCALE, language="slang", defines={"OFFSET": 0.5})
    assert len(k.bindings) == 2 and k.push_size == 8 and k.workgroup == (64, 1, 1)
    assert [b.readonly for b in k.bindings] == [True, False]
    src, got = _run(slang_ctx, k)
    np.testing.assert_array_equal(got, src * 2 + np.float32(0.5))


def test_slang_file_with_an_include_is_cached_and_reloads(slang_ctx, tmp_path):
    (tmp_path / "offset.slangh").write_text("static const float OFFSET = 1.0;\n")
    path = tmp_path / "scale.slang"
    path.write_text('#include "offset.slangh"\n' + SCALE)
    k = slang_ctx.kernel(path, language="slang")
    assert sorted(p.name for p in k.files) == ["offset.slangh", "scale.slang"]
    src, got = _run(slang_ctx, k)
    np.testing.assert_array_equal(got, src * 2 + 1)
    compiles = slang_ctx.device.spirv.stats["spirv_compiles"]
    again = slang_ctx.kernel(path, language="slang")            # unchanged files: no compile
    assert again.spec == k.spec and slang_ctx.device.spirv.stats["spirv_compiles"] == compiles
    (tmp_path / "offset.slangh").write_text("static const float OFFSET = 4.0;\n")
    assert k.reload() and k.version == 1
    src, got = _run(slang_ctx, k)
    np.testing.assert_array_equal(got, src * 2 + 4)


def test_slang_errors_point_at_the_source_line(slang_ctx, tmp_path):
    path = tmp_path / "bad.slang"
    path.write_text(SCALE.replace("src[id.x] * pc.scale", "src[id.x] * nothere"))
    with pytest.raises(gc.KernelCompileError) as info:
        slang_ctx.kernel(path, language="slang", defines={"OFFSET": 0})
    d = info.value.diagnostics[0]
    assert d.file == path.as_posix() and d.line == 12 and "nothere" in d.source_line
    assert d.source_line[d.column - 1:].startswith("nothere")
    assert f"{path.as_posix()}:12:{d.column}: error:" in str(info.value)
    with pytest.raises(gc.KernelCompileError) as info:
        slang_ctx.kernel(SCALE.replace("pc.scale", "oops"), language="slang", defines={"OFFSET": 0})
    assert info.value.diagnostics[0].file.startswith("<kernel ") and "oops" in info.value.diagnostics[0].source_line


def test_bad_slang_arguments(slang_ctx):
    with pytest.raises(gc.InvalidArgumentError, match="language must be"):
        slang_ctx.kernel(SCALE, language="hlsl")
    with pytest.raises(gc.InvalidArgumentError, match="Slang text or a .slang file"):
        slang_ctx.kernel(b"\x03\x02\x23\x07", language="slang")


# A byte-address buffer read as float16 and as uint32: slangc declares one
# variable per element type at the same binding, which is one binding.
TYPED_LOADS = """
ByteAddressBuffer src;
RWByteAddressBuffer dst;

[shader("compute")]
[numthreads(64, 1, 1)]
void main(uint3 id : SV_DispatchThreadID)
{
    uint i = id.x;
    float lo = float(src.Load<half>(i * 4));
    dst.Store(i * 8, src.Load(i * 4));
    dst.Store<float>(i * 8 + 4, lo);
}
"""


def test_typed_loads_of_a_byte_address_buffer(slang_ctx):
    ctx = slang_ctx
    if not ctx.caps.float16_storage:
        pytest.skip("reads float16 from a buffer: needs 16-bit storage")
    k = ctx.kernel(TYPED_LOADS, language="slang", name="typed_loads")
    assert len(k.bindings) == 2
    halves = np.linspace(-2, 2, 128).astype(np.float16)
    src, dst = ctx.tensor(halves.view(np.uint32)), ctx.zeros((128,), "uint32")
    ctx.run(lambda rec: k(rec, src, dst, groups=1))
    got = dst.numpy().reshape(64, 2)
    np.testing.assert_array_equal(got[:, 0], halves.view(np.uint32))
    np.testing.assert_array_equal(got[:, 1].view(np.float32), halves[0::2].astype(np.float32))


def test_validate_false_skips_spirv_val_for_slangc_output(slang_ctx, tmp_path, monkeypatch):
    """slangc's SPIR-V goes through spirv-val like any module guestcompute's
    glslc did not write; validate=False leaves it out (here: a validator
    that rejects everything)."""
    rejecting_validator(tmp_path, monkeypatch, "error: line 1: Invalid capability operand: 6022")
    with pytest.raises(gc.KernelError, match="may predate"):
        slang_ctx.kernel(SCALE, language="slang", defines={"OFFSET": 0.25})
    k = slang_ctx.kernel(SCALE, language="slang", defines={"OFFSET": 0.25}, validate=False)
    src, got = _run(slang_ctx, k)
    np.testing.assert_array_equal(got, src * 2 + np.float32(0.25))
