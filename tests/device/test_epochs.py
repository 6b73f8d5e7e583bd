"""Epochs: transient guest memory retires when the host says its GPU work
finished — by value, by a fence, or by a timeline semaphore value."""
import time

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.vk.structs import new
from frame_loop import FrameLoop


def test_retire_when_fence_frees_transient_memory(host, ctx):
    frames = FrameLoop(host, 1)
    try:
        x = ctx.tensor(np.ones(256, np.float32))
        cmd, fence = frames.begin(0)
        with ctx.record(cmd) as rec:
            tmp = rec.add(x, x)
            rec.add(tmp, x, out=x)
        frames.submit(cmd, fence)
        live = ctx.live_objects()["buffers"]
        del tmp                                   # freed in Python while the GPU may still use it
        epoch = ctx.retire_when(fence=fence)
        assert epoch == ctx.epoch - 1
        assert ctx.live_objects()["buffers"] == live      # not destroyed yet (or the poll saw it done)
        frames.drain()
        ctx.advance_epoch()                       # polls: the fence signalled
        assert ctx.live_objects()["buffers"] == live - 1
        assert ctx.live_objects()["retire_waits"] == 0
        np.testing.assert_array_equal(x.numpy(), np.full(256, 3.0))
    finally:
        frames.close()


def test_retire_when_is_in_order(host, ctx):
    frames = FrameLoop(host, 2)
    try:
        x = ctx.tensor(np.ones(16, np.float32))
        pending = ffi.new("VkFence *")
        assert host.fns.vkCreateFence(host.device, new("VkFenceCreateInfo"), ffi.NULL, pending) == vk.VK_SUCCESS
        first = ctx.retire_when(fence=pending[0])          # never signalled in this test
        cmd, fence = frames.begin(0)
        with ctx.record(cmd) as rec:
            rec.add(x, 1.0, out=x)
        frames.submit(cmd, fence)
        second = ctx.retire_when(fence=fence)
        frames.drain()
        ctx.advance_epoch()
        # The second fence signalled but the first did not: nothing retires.
        assert ctx.device.epochs.retired < first < second
        assert ctx.live_objects()["retire_waits"] == 2
        ctx.retire(second)
        host.fns.vkDestroyFence(host.device, pending[0], ffi.NULL)
        ctx.device.epochs.retire_waits.clear()     # the destroyed fence must not be polled again
    finally:
        frames.close()


def test_retire_when_timeline_semaphore(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    x = ctx.tensor(np.zeros(8, np.float32))
    sub = ctx.submit(lambda rec: rec.add(x, 2.0, out=x))
    epoch = ctx.retire_when(semaphore=(sub.semaphore, sub.value))
    sub.wait()
    ctx.advance_epoch()
    assert ctx.device.epochs.retired >= epoch
    sub2 = ctx.submit(lambda rec: rec.add(x, 2.0, out=x))
    epoch2 = ctx.retire_when(submission=sub2)
    sub2.wait()
    ctx.advance_epoch()
    assert ctx.device.epochs.retired >= epoch2
    np.testing.assert_array_equal(x.numpy(), np.full(8, 4.0))


def test_staging_upload_flushed_by_a_replay_retires_with_its_epoch(host):
    """Without a queue and without host-visible memory, ``t.write`` stages
    the data and the next recording copies it; a program replay as the
    first command does the copy too, and the staging buffer lives until the
    epoch retires."""
    ctx = host.adopt(with_queue=False)
    frames = FrameLoop(host, 1)
    try:
        x = ctx.empty((256,))
        y = ctx.tensor(np.zeros(256, np.float32))
        x.buffer.alloc.mapped = None           # as on a GPU whose device-local memory is not mappable
        prog = ctx.program(lambda rec: rec.scale(x, 2.0, out=y))
        data = np.arange(256, dtype=np.float32)
        x.write(data)
        assert len(ctx.device.transfers.pending_uploads) == 1
        live = ctx.live_objects()["buffers"]
        cmd, fence = frames.begin(0)
        with ctx.record(cmd) as rec:
            rec.execute(prog)
        frames.submit(cmd, fence)
        assert not ctx.device.transfers.pending_uploads
        ctx.retire_when(fence=fence)
        assert ctx.live_objects()["buffers"] in (live, live - 1)
        frames.drain()
        ctx.advance_epoch()
        assert ctx.live_objects()["buffers"] == live - 1       # the staging buffer is gone
        np.testing.assert_array_equal(y.numpy(), data * 2)
    finally:
        frames.close()
        ctx.close()


def test_retire_when_errors(host, ctx):
    with pytest.raises(gc.InvalidArgumentError):
        ctx.retire_when()
    with pytest.raises(gc.InvalidArgumentError):
        ctx.retire_when(fence=1, semaphore=(1, 1))
    with pytest.raises(gc.InvalidArgumentError):
        ctx.retire_when(fence="fence")
    if not ctx.caps.timeline_semaphores:
        with pytest.raises(gc.UnsupportedError):
            ctx.retire_when(semaphore=(1, 1))


def _internal_sizes(ctx) -> dict:
    """Every guest-side collection that could grow frame after frame."""
    sub = ctx.submitter
    return {"graveyard": len(ctx.device.epochs.graveyard), "waits": len(ctx.device.epochs.retire_waits),
            "descriptor_entries": ctx.device.descriptors.cached_entries,
            "pending_uploads": len(ctx.device.transfers.pending_uploads),
            "fences": sub.fence_count if sub else 0, "in_flight": sub.in_flight_count if sub else 0}


def test_memory_stays_bounded_over_10000_frames(host):
    """Frames of record + submit + retire_when: a transient output, a program
    replay with per-frame params, now and then a re-record (old secondaries
    retire) and a hand-off submission. After warm-up, what the guest holds
    is the same at every checkpoint."""
    ctx = host.adopt()
    frames = FrameLoop(host, 2)
    try:
        a = ctx.tensor(np.ones(64, np.float32))
        acc = ctx.zeros((64,))
        prog = ctx.program(lambda rec, p: rec.add(acc, rec.mul(a, p.k), out=acc), params={"k": "float32"})
        snapshot = None
        t0 = time.perf_counter()
        total = 10_000
        for frame in range(total):
            cmd, fence = frames.begin(frame)
            with ctx.record(cmd) as rec:
                tmp = rec.add(a, 1.0)                    # a fresh transient tensor every frame
                rec.execute(prog, params={"k": 1.0})
            frames.submit(cmd, fence)
            del tmp
            ctx.retire_when(fence=fence)
            if frame % 250 == 100:
                a.resize(a.shape)                        # re-record at the next execute
                a.write(np.ones(64, np.float32))
            if frame % 500 == 0:
                ctx.retire_when(submission=ctx.submit(lambda rec: rec.add(acc, 0.0, out=acc)))
            if frame % 1000 == 999:
                frames.drain()
                ctx.advance_epoch()                      # polls: every fence signalled
                live = ctx.live_objects()
                # Buffers waiting for reuse: how many depends on where the
                # checkpoint falls in the recycle list's ageing, not on the frame count.
                assert live.pop("recycled_buffers") <= 8
                state = (live, ctx.cache_stats()["live_bytes"], _internal_sizes(ctx))
                if snapshot is None:
                    snapshot = state
                assert state == snapshot, (frame, state, snapshot)
        elapsed = time.perf_counter() - t0
        frames.drain()
        np.testing.assert_array_equal(acc.numpy(), np.full(64, float(total)))
        assert prog.stats["rerecords"] == 40
        assert snapshot[0]["command_buffers"] <= 3 and snapshot[0]["pending_free"] <= 4
        assert elapsed < 120
    finally:
        frames.close()
        ctx.close()
