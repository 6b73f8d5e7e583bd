"""User kernels from files: #include, defines, and compile errors shown at
file:line:column with the offending source line."""
import shutil

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.spirv.glsl_source import expand, text_name

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")

MAIN = """#version 450
// scales by a factor from the included files
#include "lib/factor.glsl"
#include <offset.glsl>
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < N) dst[i] = src[i] * factor() + OFFSET;
}
"""


def _tree(tmp_path, factor_body="return TWO * SCALE;"):
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "shared").mkdir(exist_ok=True)
    (tmp_path / "main.comp").write_text(MAIN)
    (tmp_path / "lib" / "factor.glsl").write_text(f'#include "two.glsl"\nfloat factor() {{ {factor_body} }}\n')
    (tmp_path / "lib" / "two.glsl").write_text("const float TWO = 2.0;\n")
    (tmp_path / "shared" / "offset.glsl").write_text("const float OFFSET = 0.5;\n")
    return tmp_path / "main.comp"


def _run(host, ctx, k, n=100):
    src_np = np.arange(n, dtype=np.float32)
    src, dst = ctx.tensor(src_np), ctx.zeros((n,))
    host.run(ctx, lambda rec: k(rec, src, dst, groups=(n + 63) // 64))
    return src_np, dst.numpy()


def test_includes_and_defines(host, ctx, tmp_path):
    path = _tree(tmp_path)
    k = ctx.kernel(path, include_dirs=[tmp_path / "shared"], defines={"SCALE": 1.5, "N": "100u"})
    src, got = _run(host, ctx, k)
    np.testing.assert_array_equal(got, src * np.float32(3.0) + np.float32(0.5))
    names = sorted(p.name for p in k.files)
    assert names == ["factor.glsl", "main.comp", "offset.glsl", "two.glsl"] and k.files[0] == path
    # The path as a one-line string is the same kernel; another define is another one.
    same = ctx.kernel(str(path), include_dirs=str(tmp_path / "shared"), defines={"SCALE": 1.5, "N": "100u"})
    assert same.spec == k.spec
    other = ctx.kernel(path, include_dirs=[tmp_path / "shared"], defines={"SCALE": 2, "N": "100u"})
    assert other.spec != k.spec
    assert np.array_equal(_run(host, ctx, other)[1], src * np.float32(4.0) + np.float32(0.5))


def test_an_edited_include_is_another_kernel(host, ctx, tmp_path):
    path = _tree(tmp_path)
    args = dict(include_dirs=[tmp_path / "shared"], defines={"SCALE": 1, "N": "100u"})
    k1 = ctx.kernel(path, **args)
    (tmp_path / "lib" / "two.glsl").write_text("const float TWO = 5.0;\n")
    k2 = ctx.kernel(path, **args)
    assert k1.spec != k2.spec
    src, got = _run(host, ctx, k2)
    np.testing.assert_array_equal(got, src * np.float32(5.0) + np.float32(0.5))


def test_text_without_includes_is_compiled_as_given():
    text = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
    src = expand(text)
    assert src.text == text and src.name == text_name(text) and src.files == ()
    marked = expand(text, defines={"A": True, "B": None})
    lines = marked.text.splitlines()
    assert lines[0] == "#version 450" and "#define A 1" in lines and "#define B" in lines
    assert lines[lines.index("#define B") + 1] == f'#line 2 "{marked.name}"'


def test_error_in_text_kernel_points_at_the_line(ctx):
    text = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {\n    float v = undeclared * 2.0;\n}\n"
    with pytest.raises(gc.KernelCompileError) as info:
        ctx.kernel(text)
    d = info.value.diagnostics[0]
    assert (d.file, d.line, d.column, d.severity) == (text_name(text), 4, 15, "error")
    assert d.source_line == "    float v = undeclared * 2.0;" and "undeclared" in d.message
    message = str(info.value)
    assert f"{text_name(text)}:4:15: error:" in message
    assert "    4 |     float v = undeclared * 2.0;" in message and "|               ^" in message


def test_error_in_an_included_file_names_that_file(ctx, tmp_path):
    path = _tree(tmp_path, factor_body="return TWO * SCALE + missing_name;")
    with pytest.raises(gc.KernelCompileError) as info:
        ctx.kernel(path, include_dirs=[tmp_path / "shared"], defines={"SCALE": 1, "N": "100u"})
    d = info.value.diagnostics[0]
    assert d.file.endswith("lib/factor.glsl") and d.line == 2 and d.column is not None
    assert "missing_name" in d.source_line and d.source_line[d.column - 1:].startswith("missing_name")


def test_error_after_an_include_keeps_the_kernel_lines(ctx, tmp_path):
    path = _tree(tmp_path)
    path.write_text(MAIN.replace("src[i] * factor()", "src[i] * factor() * nope"))
    with pytest.raises(gc.KernelCompileError) as info:
        ctx.kernel(path, include_dirs=[tmp_path / "shared"], defines={"SCALE": 1, "N": "100u"})
    d = info.value.diagnostics[0]
    assert d.file == path.as_posix() and d.line == 10 and "nope" in d.source_line


@pytest.mark.parametrize("case", ["missing", "cycle", "angle_without_dirs"])
def test_bad_includes_are_compile_errors_at_the_include(ctx, tmp_path, case):
    k = tmp_path / "k.comp"
    if case == "missing":
        k.write_text('#version 450\n#include "nowhere.glsl"\nlayout(local_size_x = 1) in;\nvoid main() {}\n')
        expect = ("nowhere.glsl", "not found")
    elif case == "cycle":
        (tmp_path / "a.glsl").write_text('#include "b.glsl"\n')
        (tmp_path / "b.glsl").write_text('#include "a.glsl"\n')
        k.write_text('#version 450\n#include "a.glsl"\nlayout(local_size_x = 1) in;\nvoid main() {}\n')
        expect = ("a.glsl", "includes itself")
    else:
        (tmp_path / "x.glsl").write_text("\n")
        k.write_text('#version 450\n#include <x.glsl>\nlayout(local_size_x = 1) in;\nvoid main() {}\n')
        expect = ("x.glsl", "not found")
    with pytest.raises(gc.KernelCompileError) as info:
        ctx.kernel(k)
    assert all(part in str(info.value) for part in expect)
    assert info.value.diagnostics[0].line >= 1


def test_bad_arguments_are_typed_errors(ctx, tmp_path):
    good = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
    with pytest.raises(gc.InvalidArgumentError, match="does not exist"):
        ctx.kernel(tmp_path / "missing.comp")
    with pytest.raises(gc.InvalidArgumentError, match="not a preprocessor name"):
        ctx.kernel(good, defines={"1BAD": 1})
    with pytest.raises(gc.InvalidArgumentError, match="a number, a string"):
        ctx.kernel(good, defines={"A": [1]})
    with pytest.raises(gc.InvalidArgumentError, match="not a directory"):
        ctx.kernel(good, include_dirs=[tmp_path / "nope"])
    with pytest.raises(gc.InvalidArgumentError, match="needs a kernel file"):
        ctx.kernel(good, watch=True)
    with pytest.raises(gc.InvalidArgumentError, match="on_reload must be callable"):
        ctx.kernel(good, on_reload=3)
    spirv = ctx.kernel(good).spirv
    with pytest.raises(gc.InvalidArgumentError, match="apply to GLSL"):
        ctx.kernel(spirv, defines={"A": 1})
