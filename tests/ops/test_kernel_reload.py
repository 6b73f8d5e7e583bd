"""Hot reload of user kernels: an edited file is compiled off the recording
thread and used from the next recorded dispatch — in direct recording, in
a program, in hand-off mode, from two recording threads; a broken edit or a
refused layout keeps the last good pipeline and reports where."""
import shutil
import threading

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import kernel_watch

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")
N = 96
WAIT = 120.0            # seconds a test waits for the watcher before it calls the run a hang


def _source(factor: str, extra_binding: bool = False) -> str:
    extra = "layout(std430, binding = 2) writeonly buffer Aux { float aux[]; };\n" if extra_binding else ""
    store = "    aux[i] = 7.0;\n" if extra_binding else ""
    return ("#version 450\nlayout(local_size_x = 32) in;\n"
            "layout(std430, binding = 0) readonly buffer Src { float src[]; };\n"
            "layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };\n" + extra +
            "layout(push_constant) uniform Push { uint n; } pc;\n"
            "void main() {\n    uint i = gl_GlobalInvocationID.x;\n    if (i >= pc.n) return;\n"
            f"    dst[i] = src[i] * {factor};\n{store}}}\n")


@pytest.fixture
def data(ctx):
    src_np = np.arange(N, dtype=np.float32) - 20
    return src_np, ctx.tensor(src_np), ctx.zeros((N,))


def _scale(rec, k, src, dst):
    k(rec, src, dst, push=np.uint32(N), groups=N // 32)


def test_reload_in_direct_recording(host, ctx, data, tmp_path):
    src_np, src, dst = data
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path)
    # The same argument objects every frame: the remembered call is planned again too.
    buffers, push, groups = [src, dst], np.uint32(N), N // 32
    frame = lambda rec: rec.run_kernel(k, buffers, push=push, groups=groups)   # noqa: E731
    host.run(ctx, frame)
    np.testing.assert_array_equal(dst.numpy(), src_np * 2)
    uid, spec = k.uid, k.spec
    assert k.reload() is False and k.uid == uid          # nothing changed: nothing compiled
    path.write_text(_source("3.0"))
    assert k.reload() is True
    assert k.version == 1 and k.uid != uid and k.spec != spec and k.last_error is None
    host.run(ctx, frame)
    np.testing.assert_array_equal(dst.numpy(), src_np * 3)


def test_broken_edit_keeps_the_last_good_pipeline(host, ctx, data, tmp_path):
    src_np, src, dst = data
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    heard = []
    k = ctx.kernel(path, on_reload=lambda kernel, error: heard.append((kernel, error)))
    path.write_text(_source("2.0 * bogus"))
    assert k.reload() is False
    err = k.last_error
    assert isinstance(err, gc.KernelCompileError) and heard == [(k, err)]
    d = err.diagnostics[0]
    assert (d.file, d.line) == (path.as_posix(), 9) and "bogus" in d.source_line and d.column
    assert f"{path.as_posix()}:9:{d.column}: error:" in str(err)
    host.run(ctx, lambda rec: _scale(rec, k, src, dst))      # recording goes on with the last good kernel
    np.testing.assert_array_equal(dst.numpy(), src_np * 2)
    path.write_text(_source("4.0"))
    assert k.reload() is True and k.last_error is None and heard[-1] == (k, None)
    host.run(ctx, lambda rec: _scale(rec, k, src, dst))
    np.testing.assert_array_equal(dst.numpy(), src_np * 4)


def test_layout_change(host, ctx, data, tmp_path):
    src_np, src, dst = data
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path)
    path.write_text(_source("5.0", extra_binding=True))
    assert k.reload() is True and len(k.bindings) == 3
    with pytest.raises(gc.InvalidArgumentError, match="has 3 storage-buffer bindings but got 2"):
        host.run(ctx, lambda rec: _scale(rec, k, src, dst))
    aux = ctx.zeros((N,))
    host.run(ctx, lambda rec: k(rec, src, dst, aux, push=np.uint32(N), groups=N // 32))
    np.testing.assert_array_equal(dst.numpy(), src_np * 5)
    np.testing.assert_array_equal(aux.numpy(), np.full(N, 7, np.float32))


def test_a_reload_that_breaks_the_push_layout_is_refused(host, ctx, data, tmp_path):
    src_np, src, dst = data
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path, push_layout=[("n", "uint32")])
    path.write_text(_source("3.0").replace("uint n; }", "uint n; float unused; }"))
    assert k.reload() is False
    assert isinstance(k.last_error, gc.InvalidArgumentError) and "push_layout packs 4 bytes" in str(k.last_error)
    host.run(ctx, lambda rec: k(rec, src, dst, push={"n": N}, groups=N // 32))
    np.testing.assert_array_equal(dst.numpy(), src_np * 2)


def test_a_program_records_again_after_a_reload(host, ctx, data, tmp_path):
    src_np, src, dst = data
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path)
    prog = ctx.program(lambda rec: _scale(rec, k, src, dst))
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(dst.numpy(), src_np * 2)
    version = prog.version
    path.write_text(_source("-1.0"))
    assert k.reload()
    host.run(ctx, lambda rec: rec.execute(prog))
    assert prog.version != version
    np.testing.assert_array_equal(dst.numpy(), -src_np)


def test_reload_in_handoff_mode(modern_ctx, tmp_path):
    ctx = modern_ctx
    src_np = np.arange(N, dtype=np.float32)
    src, dst = ctx.tensor(src_np), ctx.zeros((N,))
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path)
    assert ctx.submit(lambda rec: _scale(rec, k, src, dst)).wait()
    np.testing.assert_array_equal(dst.numpy(), src_np * 2)
    path.write_text(_source("6.0"))
    assert k.reload()
    assert ctx.submit(lambda rec: _scale(rec, k, src, dst)).wait()
    np.testing.assert_array_equal(dst.numpy(), src_np * 6)


def test_the_watcher_reloads_an_edited_kernel_and_include(host, ctx, data, tmp_path):
    src_np, src, dst = data
    (tmp_path / "factor.glsl").write_text("const float F = 2.0;\n")
    path = tmp_path / "scale.comp"
    path.write_text(_source("F").replace("layout(local_size_x", '#include "factor.glsl"\nlayout(local_size_x'))
    events = []
    changed = threading.Event()

    def heard(kernel, error):
        events.append(error)
        changed.set()
    k = ctx.kernel(path, watch=True, on_reload=heard)
    assert ctx.kernel_watcher.watched == 1
    (tmp_path / "factor.glsl").write_text("const float F = 8.0;\n")
    assert changed.wait(WAIT), "the watcher did not reload the kernel"
    assert events[-1] is None and k.version == 1
    host.run(ctx, lambda rec: _scale(rec, k, src, dst))
    np.testing.assert_array_equal(dst.numpy(), src_np * 8)
    changed.clear()
    path.write_text(path.read_text().replace("src[i] * F", "src[i] * F * oops"))
    assert changed.wait(WAIT), "the watcher did not report the broken edit"
    assert isinstance(events[-1], gc.KernelCompileError) and k.version == 1


def test_a_same_size_save_right_after_is_seen(tmp_path):
    """A rewrite of the same size inside one file-system timestamp tick
    still changes the stamp (its contents do)."""
    path = tmp_path / "k.comp"
    path.write_text("const float F = 2.0;\n")
    before = kernel_watch.stamp([path])
    path.write_text("const float F = 8.0;\n")
    assert kernel_watch.stamp([path]) != before
    path.unlink()
    assert kernel_watch.stamp([path]) == (None,)


def test_two_threads_record_while_the_kernel_reloads(ctx, tmp_path):
    src_np = np.arange(N, dtype=np.float32) + 1
    path = tmp_path / "scale.comp"
    path.write_text(_source("2.0"))
    k = ctx.kernel(path)
    started, reloaded, failures = threading.Barrier(3), threading.Event(), []

    def worker(seed):
        src, dst = ctx.tensor(src_np), ctx.zeros((N,))
        try:
            started.wait()
            for frame in range(12):
                after = reloaded.is_set()
                ctx.run(lambda rec: _scale(rec, k, src, dst))
                got = dst.numpy()
                factor = got[0] / src_np[0]
                # One kernel or the other, whole; once the reload returned, the new one.
                assert factor in (2.0, 3.0) and np.array_equal(got, src_np * factor), (seed, frame)
                assert not after or factor == 3.0, (seed, frame)
        except BaseException as e:      # reported by the main thread
            failures.append(e)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    started.wait()
    path.write_text(_source("3.0"))
    assert k.reload()
    reloaded.set()
    for t in threads:
        t.join()
    assert not failures, failures[0]
