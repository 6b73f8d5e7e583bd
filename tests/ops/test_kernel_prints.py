"""debugPrintfEXT in user kernels without the validation layer: prints
decoded when their epoch retires — exact values, in order per invocation —
in direct recording, programs and hand-off mode; a full log reports what
it dropped; a kernel without prints (or compiled with prints=False) binds
no log."""
import logging
import shutil

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.recording import print_log

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")

VALUES = """#version 450
#extension GL_EXT_debug_printf : enable
layout(local_size_x = 8) in;
layout(std430, binding = 0) readonly buffer F { float f[]; };
layout(std430, binding = 1) readonly buffer I { int ints[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    debugPrintfEXT("%u: f=%f e=%e g=%g %.3f|%10.2e", i, f[i], f[i], f[i], f[i], f[i]);
    debugPrintfEXT("%u: d=%d i=%i u=%u x=%x X=%08X", i, ints[i], ints[i], uint(ints[i]), ints[i], uint(ints[i]));
    debugPrintfEXT("%u: v=%v2f w=%v3d u=%v4u b=%d %%", i, vec2(f[i], -f[i]), ivec3(ints[i], 1, -2),
                   uvec4(i, 2u, 3u, 4u), ints[i] > 0);
}
"""

ORDERED = """#version 450
#extension GL_EXT_debug_printf : enable
layout(local_size_x = 32) in;
layout(std430, binding = 0) writeonly buffer D { uint d[]; };
layout(push_constant) uniform P { uint prints; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    for (uint k = 0u; k < pc.prints; ++k) {
        debugPrintfEXT("%u %u", i, k);
    }
    d[i] = i * 1000u + pc.prints;
}
"""


def _expected_values(f, ints):
    # The printed bool compares an int: comparing the float would test the
    # driver's treatment of the subnormal input (Vulkan lets it flush one).
    lines = []
    for i, (x, n) in enumerate(zip(f.astype(np.float64), ints)):
        u = int(n) & 0xFFFFFFFF
        lines += [f"{i}: f={x:f} e={x:e} g={x:g} {x:.3f}|{x:10.2e}",
                  f"{i}: d={n:d} i={n:d} u={u:d} x={u:x} X={u:08X}",
                  f"{i}: v={x:f}, {-x:f} w={n:d}, 1, -2 u={i}, 2, 3, 4 b={int(n > 0):d} %"]
    return lines


def _by_invocation(lines):
    out = {}
    for line in lines:
        i, rest = line.split(":", 1)
        out.setdefault(int(i), []).append(line)
    return out


def test_values_are_exact(host, ctx):
    rng = np.random.default_rng(4)
    f = np.concatenate([[0.0, -0.0, 1.5, -2.25e-8, 3.4e38, 1e-40], rng.standard_normal(10) * 1e3]).astype(np.float32)
    ints = np.concatenate([[0, -1, 2 ** 31 - 1, -2 ** 31, 255, -255], rng.integers(-2 ** 31, 2 ** 31, 10)]).astype(np.int32)
    got = []
    k = ctx.kernel(VALUES, on_print=lambda name, text: got.append((name, text)))
    assert len(k.bindings) == 2 and len(k.prints) == 3
    host.run(ctx, lambda rec: k(rec, ctx.tensor(f), ctx.tensor(ints), groups=2))
    assert got == []                      # delivered when the epoch retires, not before
    ctx.retire()
    assert {name for name, _ in got} == {"main"}
    # Each invocation's prints in the order it made them; invocations in any order.
    assert _by_invocation(t for _, t in got) == _by_invocation(_expected_values(f, ints))


def test_order_per_invocation_and_a_full_log(ctx, monkeypatch, caplog):
    """Up to the log's size every print arrives, each invocation's in order;
    past it the rest are dropped and counted in a warning."""
    monkeypatch.setattr(print_log, "CAPACITY", 64 * 1024)       # a small log for this context's buffers
    got = []
    k = ctx.kernel(ORDERED, on_print=lambda name, text: got.append(tuple(map(int, text.split()))))
    out = ctx.zeros((256,), "uint32")
    record_words = 2 + 5 * 2
    fits = (64 * 1024 // 4) // record_words
    with caplog.at_level(logging.WARNING, logger="guestcompute"):
        ctx.run(lambda rec: k(rec, out, push=np.uint32(2), groups=8))       # 512 prints: all fit
        ctx.retire()
        assert sorted(got) == [(i, j) for i in range(256) for j in range(2)]
        assert not [r for r in caplog.records if "dropped" in r.getMessage()]
        got.clear()
        ctx.run(lambda rec: k(rec, out, push=np.uint32(40), groups=8))      # 10,240 prints: most do not
        ctx.retire()
    assert len(got) == fits
    per = {}
    for i, j in got:
        per.setdefault(i, []).append(j)
    assert all(js == list(range(len(js))) for js in per.values())          # a prefix of each invocation's
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1 and f"{256 * 40 - fits} kernel print(s)" in dropped[0]


def test_a_megabyte_of_prints_in_one_epoch(ctx):
    got = []
    k = ctx.kernel(ORDERED, on_print=lambda name, text: got.append(text))
    n, prints = 2048, 10                    # 20,480 records of 12 words: 983,040 bytes
    out = ctx.zeros((n,), "uint32")
    ctx.run(lambda rec: k(rec, out, push=np.uint32(prints), groups=n // 32))
    ctx.retire()
    pairs = [tuple(map(int, t.split())) for t in got]
    assert len(pairs) == n * prints
    per = {}
    for i, j in pairs:
        per.setdefault(i, []).append(j)
    assert all(per[i] == list(range(prints)) for i in range(n))


def test_prints_in_a_program_each_frame(host, ctx):
    got = []
    k = ctx.kernel(ORDERED, on_print=lambda name, text: got.append(text))
    out = ctx.zeros((32,), "uint32")
    prog = ctx.program(lambda rec: k(rec, out, push=np.uint32(1), groups=1))
    for frame in range(3):
        host.run(ctx, lambda rec: rec.execute(prog))
        ctx.advance_epoch()
        ctx.retire()
        assert sorted(got) == sorted(f"{i} 0" for i in range(32)), frame
        got.clear()
    assert prog.version >= 2        # each frame's replay writes that frame's log


def test_prints_in_handoff_mode(modern_ctx):
    ctx = modern_ctx
    got = []
    k = ctx.kernel(ORDERED, on_print=lambda name, text: got.append(text))
    out = ctx.zeros((64,), "uint32")
    sub = ctx.submit(lambda rec: k(rec, out, push=np.uint32(1), groups=2))
    assert sub.wait()
    ctx.retire()
    assert sorted(got) == sorted(f"{i} 0" for i in range(64))


def test_prints_go_to_the_logger_without_a_callback(ctx, caplog):
    k = ctx.kernel(ORDERED, name="ordered")
    out = ctx.zeros((32,), "uint32")
    with caplog.at_level(logging.INFO, logger="guestcompute"):
        ctx.run(lambda rec: k(rec, out, push=np.uint32(1), groups=1))
        ctx.retire()
    assert sorted(r.getMessage() for r in caplog.records if r.getMessage().startswith("ordered: ")) == \
        sorted(f"ordered: {i} 0" for i in range(32))


def test_a_kernel_without_prints_pays_nothing(ctx):
    plain = ORDERED.replace('debugPrintfEXT("%u %u", i, k);', "").replace("#extension GL_EXT_debug_printf : enable\n", "")
    quiet = ctx.kernel(ORDERED, prints=False)
    bare = ctx.kernel(plain)
    for k in (quiet, bare):
        assert k.prints == () and len(k.reflection.bindings) == 1 and ("prints", True) not in k.spec.params
    assert quiet.spirv == bare.spirv and quiet.spec == bare.spec     # the same code: one pipeline
    out = ctx.zeros((32,), "uint32")
    ctx.run(lambda rec: (quiet(rec, out, push=np.uint32(3), groups=1), bare(rec, out, push=np.uint32(3), groups=1)))
    ctx.retire()
    assert ctx.print_logs.made == 0
    np.testing.assert_array_equal(out.numpy(), np.arange(32, dtype=np.uint32) * 1000 + 3)


def test_a_reloaded_kernel_starts_printing(ctx, tmp_path):
    path = tmp_path / "k.comp"
    path.write_text(ORDERED.replace('debugPrintfEXT("%u %u", i, k);', ""))
    got = []
    k = ctx.kernel(path, on_print=lambda name, text: got.append(text))
    out = ctx.zeros((32,), "uint32")
    assert k.prints == ()
    path.write_text(ORDERED)
    assert k.reload() and len(k.prints) == 1
    ctx.run(lambda rec: k(rec, out, push=np.uint32(1), groups=1))
    ctx.retire()
    assert len(got) == 32


def test_a_print_error_points_at_its_line(ctx):
    bad = ORDERED.replace('debugPrintfEXT("%u %u", i, k);', 'debugPrintfEXT("%f", dmat2(1.0));')
    with pytest.raises(gc.KernelCompileError) as info:
        ctx.kernel(bad)
    assert info.value.diagnostics[0].line == 9 and "debugPrintfEXT" in info.value.diagnostics[0].source_line
    with pytest.raises(gc.KernelCompileError, match="could not be read"):
        ctx.kernel(ORDERED.replace('debugPrintfEXT("%u %u", i, k);', "debugPrintfEXT(fmt, i);"))
