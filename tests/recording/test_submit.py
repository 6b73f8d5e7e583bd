"""Semaphore hand-off mode: the guest submits its own command buffer,
ordered against the host's submissions by semaphores."""
import threading

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.recording import handoff as gsubmit
from guestcompute.vk.structs import new

_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT


def _semaphore(host, timeline: bool):
    out = ffi.new("VkSemaphore *")
    if timeline:
        kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        info = new("VkSemaphoreCreateInfo", pNext=kind)
    else:
        info = new("VkSemaphoreCreateInfo")
    assert host.fns.vkCreateSemaphore(host.device, info, ffi.NULL, out) == vk.VK_SUCCESS
    return out[0]


def _host_submit(host, cmd, wait=(), signal=(), fence=False):
    """The host's own vkQueueSubmit, not waited for: wait/signal are
    (semaphore, value or None); the host waits in the transfer stage."""
    host.submit(cmd, wait_for=[(sem, value, _TRANSFER) for sem, value in wait], signal=signal,
                fence=fence, block=False, free=False)
    return cmd


def _handoff_frame(host, ctx, fn, buf, n, timeline):
    """Host fill → (semaphore) → guest fn → (semaphore) → host fill of the
    first element; returns the guest Submission."""
    s1, s2 = _semaphore(host, timeline), _semaphore(host, timeline)
    try:
        cmd = host.begin()
        host.fill_buffer(cmd, buf, 0x3F800000, n * 4)                    # 1.0f everywhere
        a = _host_submit(host, cmd, signal=[(s1, 1 if timeline else None)])
        sub = ctx.submit(fn, wait=[(s1, 1 if timeline else None, "compute")],
                         signal=[(s2, 2 if timeline else None)])
        cmd2 = host.begin()
        host.fill_buffer(cmd2, buf, 0, 4)                                # after the guest's writes
        b = _host_submit(host, cmd2, wait=[(s2, 2 if timeline else None)], fence=True)
        host.wait()
        assert sub.wait(timeout=10)
        host.free([a, b])
        return sub
    finally:
        # A semaphore may be destroyed only once no queue work refers to it
        # any more. The fences waited for say so, but lavapipe's queue thread
        # was seen still signalling a batch's semaphores after its fence
        # (a rare crash here): idle the device first.
        host.fns.vkDeviceWaitIdle(host.device)
        host.fns.vkDestroySemaphore(host.device, s1, ffi.NULL)
        host.fns.vkDestroySemaphore(host.device, s2, ffi.NULL)


def test_binary_semaphore_handoff_on_the_same_queue(host, ctx):
    n = 256
    buf = host.create_buffer(n * 4)
    t = ctx.import_buffer(buf, (n,), "float32", host_access="transfer", buffer_size=n * 4)
    sub = _handoff_frame(host, ctx, lambda rec: rec.scale(t, 3.0, out=t), buf, n, timeline=False)
    expect = np.full(n, 3.0, np.float32)
    expect[0] = 0.0
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, n), expect)
    assert sub.done() and sub.epoch == ctx.epoch


def test_timeline_semaphore_handoff_and_guest_timeline(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    assert ctx.caps.timeline_semaphores
    n = 128
    buf = host.create_buffer(n * 4)
    t = ctx.import_buffer(buf, (n,), "float32", host_access="transfer", buffer_size=n * 4)
    sub = _handoff_frame(host, ctx, lambda rec: rec.add(t, 1.5, out=t), buf, n, timeline=True)
    expect = np.full(n, 2.5, np.float32)
    expect[0] = 0.0
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, n), expect)
    assert sub.value == 1 and sub.semaphore is not None
    # The host can wait GPU-side on the guest's own timeline.
    later = ctx.submit(lambda rec: rec.add(t, 1.0, out=t))
    assert later.value == 2
    cmd = host.begin()
    host.fill_buffer(cmd, buf, 0, 4, offset=4)
    _host_submit(host, cmd, wait=[(later.semaphore, later.value)], fence=True)
    host.wait()
    host.free(cmd)
    got = host.read_buffer(buf, np.float32, n)
    assert got[1] == 0.0 and got[2] == 3.5 and got[0] == 1.0
    assert later.wait()
    host.fns.vkDeviceWaitIdle(host.device)     # before the context destroys its timeline (see above)


def test_same_work_recorded_or_submitted(host, ctx):
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal(777).astype(np.float32)
    a = ctx.tensor(a_np)

    def work(out):
        def fn(rec):
            rec.mul(a, a, out=out)
            rec.add(out, a, out=out)
            return out
        return fn
    injected, handed = ctx.empty((777,)), ctx.empty((777,))
    host.run(ctx, work(injected))
    sub = ctx.submit(work(handed))
    assert sub.wait()
    assert sub.result is handed
    np.testing.assert_array_equal(injected.numpy(), handed.numpy())
    np.testing.assert_allclose(handed.numpy(), a_np * a_np + a_np, rtol=1e-6)


def test_command_buffers_are_reused(host, ctx):
    x = ctx.tensor(np.zeros(64, np.float32))
    for _ in range(20):
        sub = ctx.submit(lambda rec: rec.add(x, 1.0, out=x))
        sub.wait()
    assert ctx.live_objects()["command_buffers"] == 1
    assert ctx.cache_stats()["submissions"] == 20
    np.testing.assert_array_equal(x.numpy(), np.full(64, 20.0))


def test_submit_from_two_threads(host, ctx):
    xs = [ctx.tensor(np.zeros(32, np.float32)) for _ in range(2)]
    errors = []

    def worker(x):
        try:
            for _ in range(10):
                ctx.submit(lambda rec: rec.add(x, 1.0, out=x)).wait()
        except Exception as e:          # surfaced below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for x in xs:
        np.testing.assert_array_equal(x.numpy(), np.full(32, 10.0))


def test_ownership_transfer_halves_record_cleanly(host, ctx):
    """One queue family here: the release/acquire halves degenerate to plain
    buffer barriers, but the host-side helpers and the submit path run."""
    n = 64
    buf = host.create_buffer(n * 4)
    host.write_buffer(buf, np.ones(n, np.float32))
    t = ctx.import_buffer(buf, (n,), "float32", host_access="vertex", buffer_size=n * 4)
    family = ctx.queue_family_index
    cmd = host.begin()
    gsubmit.release_to_guest(ctx, cmd, [t], family)
    host.submit_and_wait(cmd)
    sub = ctx.submit(lambda rec: rec.scale(t, 4.0, out=t), queue=host.queue, queue_family_index=family,
                     shared=[t])
    sub.wait()
    cmd = host.begin()
    gsubmit.acquire_from_guest(ctx, cmd, [t], family)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, n), np.full(n, 4.0))


def test_submit_errors(host, ctx):
    x = ctx.tensor(np.ones(4, np.float32))
    sem = _semaphore(host, timeline=False)
    try:
        with pytest.raises(gc.InvalidArgumentError):
            ctx.submit("nope")
        with pytest.raises(gc.InvalidArgumentError):
            ctx.submit(lambda rec: None, queue_family_index=ctx.queue_family_index + 1)
        with pytest.raises(gc.InvalidArgumentError):
            ctx.submit(lambda rec: None, wait=[(sem,)])
        with pytest.raises(gc.InvalidArgumentError):
            ctx.submit(lambda rec: None, wait=[(sem, -1, "compute")])
        if not ctx.caps.timeline_semaphores:
            with pytest.raises(gc.UnsupportedError):
                ctx.submit(lambda rec: None, signal=[(sem, 5)])
        live = ctx.live_objects()["command_buffers"]
        with pytest.raises(gc.ShapeError):
            ctx.submit(lambda rec: rec.add(x, ctx.empty((5,))))
        assert ctx.live_objects()["command_buffers"] <= live
        no_queue = host.adopt(with_queue=False)
        try:
            with pytest.raises(gc.UnsupportedError):
                no_queue.submit(lambda rec: None)
        finally:
            no_queue.close()
    finally:
        host.fns.vkDestroySemaphore(host.device, sem, ffi.NULL)
