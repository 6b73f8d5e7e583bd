"""Faults: damaged caches, unwritable cache directories and concurrent
writers are recovered from with a warning (results still correct); Vulkan
errors (out of memory, device lost) surface as typed errors carrying the
VkResult, and the context stays usable after them.

Kernels here use an elementwise expression no built-in op produces, so their
SPIR-V is never baked: it really goes through glslc and the disk cache.
"""
import errno
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.device import pipeline_store as ps
from guestcompute.spirv import cache as spirv_cache
from guestcompute.spirv.cache import unseal
from guestcompute.spirv.compiler import source_key
from guestcompute.ops.elementwise import elementwise
from guestcompute.testing import HeadlessHost

N = 64


def _probe(ctx, k: int):
    """Plan ``x * k + 1`` over a fresh tensor: (tensor, OpResult, numpy expectation)."""
    x = np.arange(N, dtype=np.float32) - 7
    t = ctx.tensor(x)
    return t, elementwise(ctx, f"x0 * {k}.0 + 1.0", [t], name="fault_probe"), x * k + 1


def _run_probe(host, ctx, k: int):
    """Record the probe kernel, run it and check it; returns its SPIR-V cache path."""
    t, res, want = _probe(ctx, k)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.dispatch(res.dispatches)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(res.value.numpy(), want)
    spec = res.dispatches[0].spec
    return ctx.device.spirv.dir / f"{source_key(spec.render(), spec.target_env)}.spv"


def _warnings(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# -- the SPIR-V disk cache ----------------------------------------------------------

def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x10]) + data[index + 1:]


HEAD = len(spirv_cache.DISK_MAGIC) + 32

SPIRV_DAMAGE = {
    "truncated-half": lambda d, other: d[: len(d) // 2],
    # cut on a word boundary: the SPIR-V magic and length checks alone would pass it
    "truncated-on-a-word": lambda d, other: d[: HEAD + ((len(d) - HEAD) // 2 & ~3)],
    "header-only": lambda d, other: d[:HEAD],
    "empty": lambda d, other: b"",
    "bit-flipped-code": lambda d, other: _flip(d, HEAD + 200),      # the magic stays intact
    "bit-flipped-digest": lambda d, other: _flip(d, len(spirv_cache.DISK_MAGIC) + 3),
    "bare-spirv-no-header": lambda d, other: d[HEAD:],
    "another-kernels-file": lambda d, other: other,                  # intact, but not this key's
    "garbage": lambda d, other: os.urandom(len(d)),
}


@pytest.mark.parametrize("damage", sorted(SPIRV_DAMAGE))
def test_damaged_spirv_cache_file_is_recompiled_with_a_warning(bare_host, tmp_path, caplog, damage):
    caplog.set_level(logging.WARNING, logger="guestcompute")
    ctx = bare_host.adopt(cache_dir=tmp_path)
    path = _run_probe(bare_host, ctx, 3)
    other = _run_probe(bare_host, ctx, 5)
    ctx.close()
    good = path.read_bytes()
    assert unseal(good, path.stem) is not None
    path.write_bytes(SPIRV_DAMAGE[damage](good, other.read_bytes()))

    ctx = bare_host.adopt(cache_dir=tmp_path)
    try:
        _run_probe(bare_host, ctx, 3)          # correct, and no validation message (fixture)
        stats = ctx.cache_stats()
        assert stats["spirv_bad_files"] == 1 and stats["spirv_compiles"] == 1
        assert _warnings(caplog, "ignoring corrupt SPIR-V cache file")
    finally:
        ctx.close()
    assert unseal(path.read_bytes(), path.stem) is not None           # rewritten intact

    caplog.clear()
    ctx = bare_host.adopt(cache_dir=tmp_path)
    try:
        _run_probe(bare_host, ctx, 3)
        stats = ctx.cache_stats()
        assert stats["spirv_disk_hits"] >= 1 and stats["spirv_compiles"] == 0
        assert not _warnings(caplog, "SPIR-V")
    finally:
        ctx.close()


SPIRV_WRITER = r"""
import json, sys
from guestcompute.paths import atomic_write
from guestcompute.spirv.cache import SpirvCache, seal
from guestcompute.spirv.compiler import source_key
glsl_file, env, cache_dir, rounds = sys.argv[1:5]
glsl = open(glsl_file).read()
cache = SpirvCache(cache_dir)
spirv = cache.get(glsl, env)              # both processes compile and write at once
key = source_key(glsl, env)
for _ in range(int(rounds)):              # then keep renaming onto the same file
    atomic_write(cache.dir / f"{key}.spv", seal(spirv, key))
print(json.dumps(cache.stats))
"""


def test_two_processes_writing_the_spirv_cache_at_once(bare_host, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="guestcompute")
    ctx = bare_host.adopt(cache_dir=tmp_path / "scratch")
    t, res, want = _probe(ctx, 11)
    spec = res.dispatches[0].spec
    glsl = tmp_path / "kernel.comp"
    glsl.write_text(spec.render())
    ctx.close()
    cache = tmp_path / "shared"
    path = cache / "spirv" / f"{source_key(spec.render(), spec.target_env)}.spv"
    procs = [subprocess.Popen([sys.executable, "-c", SPIRV_WRITER, str(glsl), spec.target_env, str(cache), "150"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    reads, torn = 0, 0
    while any(p.poll() is None for p in procs):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            time.sleep(0.001)
            continue
        reads += 1
        torn += unseal(data, path.stem) is None
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out)["spirv_bad_files"] == 0
    assert reads > 0 and torn == 0, f"{torn} of {reads} reads saw a torn file"
    assert sorted(os.listdir(path.parent)) == [path.name]          # no temp file left behind

    ctx = bare_host.adopt(cache_dir=cache)
    try:
        assert _run_probe(bare_host, ctx, 11) == path
        stats = ctx.cache_stats()
        assert stats["spirv_disk_hits"] == 1 and stats["spirv_compiles"] == 0
        assert not _warnings(caplog, "SPIR-V")
    finally:
        ctx.close()


# -- the pipeline cache file -----------------------------------------------------------

def _repack_for_another_device(blob, ident):
    data = ps.unpack(blob, ident)
    other = ps.DeviceIdentity(ident.vendor_id ^ 0x1, ident.device_id, ident.driver_version, ident.uuid)
    return ps.pack(data, other)         # a valid file, checksums and all, for another device


PIPELINE_DAMAGE = {
    "truncated": lambda b, ident: b[: len(b) * 2 // 3],
    "bit-flipped": lambda b, ident: _flip(b, len(b) - 1),            # in the driver's data
    "another-device": _repack_for_another_device,
    "another-driver-version": lambda b, ident: ps.pack(
        ps.unpack(b, ident), ps.DeviceIdentity(ident.vendor_id, ident.device_id, ident.driver_version + 1,
                                               ident.uuid)),
}


@pytest.mark.parametrize("damage", sorted(PIPELINE_DAMAGE))
def test_damaged_pipeline_cache_and_spirv_cache_at_once(modern_host, tmp_path, caplog, damage):
    caplog.set_level(logging.WARNING, logger="guestcompute")
    ctx = modern_host.adopt(cache_dir=tmp_path)
    spv = _run_probe(modern_host, ctx, 13)
    ident = ps.DeviceIdentity.from_limits(ctx.limits)
    ctx.close()
    pipes = list((tmp_path / "pipelines").glob("*.bin"))
    assert len(pipes) == 1
    pipes[0].write_bytes(PIPELINE_DAMAGE[damage](pipes[0].read_bytes(), ident))
    spv.write_bytes(_flip(spv.read_bytes(), HEAD + 100))

    ctx = modern_host.adopt(cache_dir=tmp_path)
    try:
        stats = ctx.cache_stats()
        assert stats["pipeline_cache_loaded"] is False and stats["pipeline_cache_rejected"]
        _run_probe(modern_host, ctx, 13)
        assert _warnings(caplog, "ignoring pipeline cache file")
        assert _warnings(caplog, "ignoring corrupt SPIR-V cache file")
    finally:
        ctx.close()
    assert ps.unpack(pipes[0].read_bytes(), ident)                     # replaced by a good one
    assert unseal(spv.read_bytes(), spv.stem) is not None


# -- cache directories that cannot be written ------------------------------------------------

def test_cache_dir_that_cannot_exist(host, tmp_path, caplog):
    """A cache path below a regular file can be neither created nor written
    (even by root, whom permission bits do not stop)."""
    caplog.set_level(logging.WARNING, logger="guestcompute")
    (tmp_path / "plain-file").write_bytes(b"")
    cache = tmp_path / "plain-file" / "cache"
    for round_ in range(2):                     # the second context cannot profit from the first
        ctx = host.adopt(cache_dir=cache)
        try:
            _run_probe(host, ctx, 17)
            assert ctx.cache_stats()["spirv_compiles"] == 1
        finally:
            ctx.close()
        assert ctx.cache_stats()["pipeline_cache_save_error"]
    assert _warnings(caplog, "cannot write SPIR-V cache")
    assert _warnings(caplog, "cannot write the pipeline cache")


def test_read_only_cache_dir_still_serves_what_it_holds(modern_host, tmp_path, caplog, monkeypatch):
    """A populated cache that became read-only: hits still load, misses are
    compiled and their writes fail with a warning (EROFS is simulated, since
    permission bits do not stop root); nothing on disk changes."""
    ctx = modern_host.adopt(cache_dir=tmp_path)
    _run_probe(modern_host, ctx, 19)
    ctx.close()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    def read_only(path, data):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(spirv_cache, "atomic_write", read_only)
    monkeypatch.setattr(ps, "atomic_write", read_only)
    caplog.set_level(logging.WARNING, logger="guestcompute")
    ctx = modern_host.adopt(cache_dir=tmp_path)
    try:
        assert ctx.cache_stats()["pipeline_cache_loaded"] is True
        _run_probe(modern_host, ctx, 19)             # from the disk
        _run_probe(modern_host, ctx, 23)             # compiled; not stored
        stats = ctx.cache_stats()
        assert stats["spirv_disk_hits"] == 1 and stats["spirv_compiles"] == 1
    finally:
        ctx.close()
    # (lavapipe's pipeline cache data does not grow, so there is nothing new to save there)
    assert _warnings(caplog, "cannot write SPIR-V cache")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


# -- Vulkan errors ------------------------------------------------------------------------------

def test_tensor_larger_than_the_heap_is_out_of_memory_and_context_survives(host, ctx):
    live = ctx.live_objects()
    heap = max(ctx.memory.heap_sizes)
    for shape in [(heap // 4 + 1,), (heap // 2, 4), (1 << 62,)]:
        with pytest.raises(gc.OutOfMemoryError) as info:
            ctx.empty(shape)
        assert info.value.result == -2 and "VK_ERROR_OUT_OF_DEVICE_MEMORY" in str(info.value)
        with pytest.raises(gc.OutOfMemoryError):
            ctx.zeros(shape)
    assert ctx.live_objects() == live
    a = ctx.tensor(np.arange(100, dtype=np.float32))
    out = host.run(ctx, lambda rec: rec.add(a, a))
    np.testing.assert_array_equal(out.numpy(), np.arange(100, dtype=np.float32) * 2)


def _failing(result):
    calls = []

    def fn(*args):
        calls.append(args)
        return result
    fn.calls = calls
    return fn


@pytest.mark.parametrize("where", ["new block", "own memory"])
@pytest.mark.parametrize("call,result", [("vkAllocateMemory", -2), ("vkAllocateMemory", -1),
                                         ("vkCreateBuffer", -2), ("vkMapMemory", -5)])
def test_driver_allocation_failures_are_typed_and_leak_nothing(call, result, where):
    """The driver itself refuses, while the suballocator makes a new block
    or a large tensor's own memory: a typed error carrying its VkResult,
    nothing half-made left behind (the validation layer's object tracker
    checks that at vkDestroyDevice), and the next allocation works."""
    host = HeadlessHost("bare")
    try:
        ctx = host.adopt()
        a = ctx.tensor(np.ones(16, np.float32))
        live = ctx.live_objects()
        sub = ctx.device.suballocator
        # Too large for the first block, or large enough for memory of its own.
        nbytes = sub.block_size // 4 if where == "new block" else sub.dedicated_from
        real = getattr(ctx.device.fns, call)
        setattr(ctx.device.fns, call, _failing(result))
        try:
            with pytest.raises(gc.VulkanError) as info:
                ctx.empty((nbytes // 4,))
        finally:
            setattr(ctx.device.fns, call, real)
        assert info.value.result == result and info.value.call == call
        if result in (-1, -2):
            assert isinstance(info.value, gc.OutOfMemoryError)
        assert ctx.live_objects() == live
        out = host.run(ctx, lambda rec: rec.add(a, 1.0))
        np.testing.assert_array_equal(out.numpy(), np.full(16, 2, np.float32))
        del a, out
        ctx.close()
    finally:
        host.close()
    assert not host.messages, host.messages


def test_descriptor_pool_and_pipeline_creation_failures_leave_the_host_buffer_intact(bare_host):
    """Failures while an op resolves its pipeline or descriptors happen
    before its first command: the host's own work still runs, and the op
    succeeds once the driver recovers."""
    ctx = bare_host.adopt()
    try:
        a = ctx.tensor(np.arange(32, dtype=np.float32))
        witness = bare_host.create_buffer(16)
        for call in ("vkCreateDescriptorPool", "vkCreateComputePipelines"):
            real = getattr(ctx.device.fns, call)
            setattr(ctx.device.fns, call, _failing(-2))
            cmd = bare_host.begin()
            bare_host.fill_buffer(cmd, witness, 0x3F800000, 16)
            try:
                with pytest.raises(gc.OutOfMemoryError) as info:
                    with ctx.record(cmd) as rec:
                        rec.sub(a, 1.0) if call == "vkCreateDescriptorPool" else rec.mul(a, 3.0)
            finally:
                setattr(ctx.device.fns, call, real)
            assert info.value.call == call and info.value.result == -2
            bare_host.submit_and_wait(cmd)
            np.testing.assert_array_equal(bare_host.read_buffer(witness, np.float32, 4), np.ones(4))
        out = bare_host.run(ctx, lambda rec: (rec.sub(a, 1.0), rec.mul(a, 3.0)))
        np.testing.assert_array_equal(out[0].numpy(), np.arange(32) - 1.0)
        np.testing.assert_array_equal(out[1].numpy(), np.arange(32) * 3.0)
    finally:
        ctx.close()


def test_device_lost_from_a_fence_is_typed(host, ctx, monkeypatch):
    a = ctx.tensor(np.arange(8, dtype=np.float32))
    out = ctx.empty((8,))
    real = ctx.device.fns.vkWaitForFences
    monkeypatch.setattr(ctx.device.fns, "vkWaitForFences", _failing(-4))
    with pytest.raises(gc.DeviceLostError) as info:
        ctx.device.transfers.submit_and_wait(lambda cmd: _record_add(ctx, cmd, a, out))
    assert info.value.result == -4 and info.value.call == "vkWaitForFences"
    with pytest.raises(gc.DeviceLostError) as info:
        ctx.run(lambda rec: rec.scale(a, 2.0))
    assert info.value.result == -4
    monkeypatch.setattr(ctx.device.fns, "vkWaitForFences", real)
    # Simulated, so the device is really fine: the context carries on.
    np.testing.assert_array_equal(ctx.run(lambda rec: rec.add(a, 1.0)).numpy(), np.arange(8) + 1.0)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2.0)


def _record_add(ctx, cmd, a, out):
    with ctx.record(cmd) as rec:
        rec.add(a, a, out=out)


def test_device_lost_while_waiting_for_a_handoff_submission(modern_host, modern_ctx, monkeypatch):
    ctx = modern_ctx
    a = ctx.tensor(np.arange(8, dtype=np.float32))
    sub = ctx.submit(lambda rec: rec.scale(a, 4.0))
    real = ctx.device.fns.vkWaitForFences
    monkeypatch.setattr(ctx.device.fns, "vkWaitForFences", _failing(-4))
    with pytest.raises(gc.DeviceLostError) as info:
        sub.wait()
    assert info.value.result == -4
    monkeypatch.setattr(ctx.device.fns, "vkWaitForFences", real)
    assert sub.wait()
    np.testing.assert_array_equal(sub.result.numpy(), np.arange(8) * 4.0)


def test_a_fragmented_descriptor_pool_moves_on_to_a_new_pool(bare_host):
    """Without push descriptors every buffer set gets a cached set. A pool
    that answers VK_ERROR_FRAGMENTED_POOL (-12) is passed over for a fresh
    one, like an exhausted pool (the check once compared against the code of
    VK_ERROR_INVALID_EXTERNAL_HANDLE instead, and -12 became an error)."""
    ctx = bare_host.adopt()
    try:
        assert not ctx.device.descriptors.push
        a, b = ctx.tensor(np.arange(8, dtype=np.float32)), ctx.empty((8,))
        bare_host.run(ctx, lambda rec: rec.add(a, 2.0, out=a))    # the first pool exists now
        real = ctx.device.fns.vkAllocateDescriptorSets
        calls = []

        def fragmented_once(device, info, out):
            calls.append(1)
            return -12 if len(calls) == 1 else real(device, info, out)
        ctx.device.fns.vkAllocateDescriptorSets = fragmented_once
        try:
            bare_host.run(ctx, lambda rec: rec.add(a, 1.0, out=b))
        finally:
            ctx.device.fns.vkAllocateDescriptorSets = real
        assert len(calls) == 2
        np.testing.assert_array_equal(b.numpy(), np.arange(8) + 3.0)
        assert ctx.live_objects()["descriptor_sets"] == 2
    finally:
        ctx.close()
