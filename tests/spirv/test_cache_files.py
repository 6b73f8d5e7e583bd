"""Whatever sits at a cache path, guestcompute neither blocks nor runs out of
memory on it: named pipes, devices and oversized files are ignored with a
warning and replaced; a failed write (a full disk) leaves no temp file."""
import contextlib
import errno
import logging
import os
import resource
import shutil
import signal
import stat
import threading

import numpy as np
import pytest

from guestcompute import paths
from guestcompute.device import pipeline_store as ps
from guestcompute.spirv import cache as spirv_cache

KERNEL = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { float x[]; };
void main() { x[gl_GlobalInvocationID.x] += 1.0; }
"""

needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")


# -- what may sit at a cache path -------------------------------------------------

@contextlib.contextmanager
def _fifo(path):
    """A named pipe at ``path``. Should the code under test open it for
    reading *blocking*, a helper thread sees the waiting reader (its own
    non-blocking open for writing then succeeds), writes a few bytes and
    closes, so the test fails on its assertions instead of hanging."""
    os.mkfifo(path)
    done = threading.Event()

    def release_blocked_readers():
        while not done.wait(0.05):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:       # ENXIO: nobody is reading; ENOENT: replaced
                if e.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                continue
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):     # not the file that replaced it
                    with contextlib.suppress(OSError):
                        os.write(fd, b"not a cache file")
            finally:
                os.close(fd)

    helper = threading.Thread(target=release_blocked_readers, daemon=True)
    helper.start()
    try:
        yield
    finally:
        done.set()
        helper.join()


def _dev_zero(path):
    os.symlink("/dev/zero", path)


def _sparse(size):
    def make(path):
        with open(path, "wb") as f:
            f.truncate(size)
    return make


@contextlib.contextmanager
def _odd_file(path, make):
    """Put the odd file at ``path`` for the block: a named pipe (``make`` is
    None; the pipe helper releases a blocked reader) or what ``make`` writes."""
    if make is None:
        with _fifo(path):
            yield
    else:
        make(path)
        yield


@pytest.mark.parametrize("make, reason", [
    (None, "not a regular file (a named pipe)"),
    (_dev_zero, "not a regular file (a character device)"),
    (_sparse(3 << 30), "larger than the"),
], ids=["fifo", "dev-zero", "3GB"])
def test_odd_file_at_the_pipeline_cache_path_is_ignored(host, ctx, tmp_path, caplog, make, reason):
    path = ps.pipelines_dir(tmp_path) / ps.DeviceIdentity.from_limits(ctx.limits).file_name()
    path.parent.mkdir(parents=True)
    caplog.set_level(logging.WARNING, logger="guestcompute")
    with _odd_file(path, make):
        adopted = host.adopt(cache_dir=tmp_path)
        try:
            stats = adopted.cache_stats()
            assert stats["pipeline_cache_loaded"] is False
            assert reason in stats["pipeline_cache_rejected"]
            assert any("ignoring pipeline cache file" in r.getMessage() and reason in r.getMessage()
                       for r in caplog.records)
            a = np.arange(300, dtype=np.float32)
            ta = adopted.tensor(a)
            out = host.run(adopted, lambda rec: rec.add(ta, ta))
            np.testing.assert_array_equal(out.numpy(), a + a)
        finally:
            adopted.close()
    # The close saved a real cache file in its place.
    assert path.is_file() and not path.is_symlink()
    assert ps.unpack(path.read_bytes(), ps.DeviceIdentity.from_limits(ctx.limits))


@needs_glslc
@pytest.mark.parametrize("make, reason", [
    (None, "not a regular file (a named pipe)"),
    (_dev_zero, "not a regular file (a character device)"),
    (_sparse(spirv_cache.MAX_FILE_BYTES + 4096), "larger than the"),
], ids=["fifo", "dev-zero", "too-large"])
def test_odd_file_at_a_spirv_cache_path_is_ignored(host, tmp_path, caplog, make, reason):
    ctx = host.adopt(cache_dir=tmp_path)
    try:
        env = "vulkan1.1" if host.api_version >= (1, 1) else "vulkan1.0"
        path = tmp_path / "spirv" / f"{spirv_cache.source_key(KERNEL, env)}.spv"
        path.parent.mkdir(parents=True)
        caplog.set_level(logging.WARNING, logger="guestcompute")
        with _odd_file(path, make):
            kernel = ctx.kernel(KERNEL)
        assert any("ignoring SPIR-V cache file" in r.getMessage() and reason in r.getMessage()
                   for r in caplog.records)
        assert ctx.cache_stats()["spirv_compiles"] == 1
        x = ctx.tensor(np.zeros(64, np.float32))
        host.run(ctx, lambda rec: kernel(rec, x, groups=1))
        np.testing.assert_array_equal(x.numpy(), np.ones(64, np.float32))
    finally:
        ctx.close()
    # The compiled kernel replaced whatever was there.
    assert path.is_file() and not path.is_symlink()
    assert spirv_cache.unseal(path.read_bytes(), spirv_cache.source_key(KERNEL, env))


def test_reader_takes_regular_files_up_to_its_bound(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert paths.read_cache_file(path, 100) == b"x" * 100
    with pytest.raises(paths.CacheFileRefused, match="larger than the 99-byte limit"):
        paths.read_cache_file(path, 99)
    with pytest.raises(paths.CacheFileRefused, match="a directory"):
        paths.read_cache_file(tmp_path, 100)
    with pytest.raises(FileNotFoundError):
        paths.read_cache_file(tmp_path / "missing", 100)


# -- failed writes ----------------------------------------------------------------

@contextlib.contextmanager
def _writes_fail():
    """Every write that would grow a file fails (EFBIG) while this is
    active, as on a full disk: RLIMIT_FSIZE at 0, with SIGXFSZ ignored so
    the write returns the error instead of the signal killing the process."""
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, old_limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)


def test_failed_write_removes_its_temp_file(tmp_path):
    target = tmp_path / "cache.bin"
    with _writes_fail():
        with pytest.raises(OSError) as err:
            paths.atomic_write(target, b"x" * 4096)
    assert err.value.errno == errno.EFBIG
    assert list(tmp_path.iterdir()) == []
    paths.atomic_write(target, b"x" * 4096)      # and a later write still works
    assert target.read_bytes() == b"x" * 4096
    assert list(tmp_path.iterdir()) == [target]


def test_pipeline_cache_save_on_a_full_disk_leaves_nothing_behind(modern_host, tmp_path, caplog):
    ctx = modern_host.adopt(cache_dir=tmp_path)
    a = np.arange(100, dtype=np.float32)
    ta = ctx.tensor(a)
    out = modern_host.run(ctx, lambda rec: rec.add(ta, ta))
    np.testing.assert_array_equal(out.numpy(), a + a)
    caplog.set_level(logging.WARNING, logger="guestcompute")
    with _writes_fail():
        ctx.close()                       # saves the pipeline cache
    stats = ctx.cache_stats()
    assert stats["pipeline_cache_saved"] == 0 and stats["pipeline_cache_save_error"]
    assert any("cannot write the pipeline cache" in r.getMessage() for r in caplog.records)
    assert list((tmp_path / "pipelines").iterdir()) == []


def test_cache_stats_reports_a_fifo_without_blocking(tmp_path, capsys):
    from guestcompute import cli
    pipes = tmp_path / "pipelines"
    pipes.mkdir()
    fifo = pipes / "10de-2335-00.bin"
    with _fifo(fifo):
        assert cli.main(["cache", "stats", "--json", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not a regular file (a named pipe)" in out
