"""Epochs: transient guest memory retires when the host says its GPU work
finished — by value, by a fence, or by a timeline semaphore value."""

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.device import epochs
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


def _wait_for_timeline(ctx, semaphore, value):
    _, wait = epochs.timeline_functions(ctx.device.fns, ctx.caps)
    semaphores, values = ffi.new("VkSemaphore[1]", [semaphore]), ffi.new("uint64_t[1]", [value])
    info = new("VkSemaphoreWaitInfo", semaphoreCount=1, pSemaphores=semaphores, pValues=values)
    assert wait(ctx.device.handle, info, 10 ** 10) == vk.VK_SUCCESS


def test_retire_when_timeline_semaphore(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    x = ctx.tensor(np.zeros(8, np.float32))
    sub = ctx.submit(lambda rec: rec.add(x, 2.0, out=x))
    epoch = ctx.retire_when(semaphore=(sub.semaphore, sub.value))
    # Wait for the semaphore itself: Vulkan does not order a submission's
    # fence and semaphore signals, so after sub.wait() (its fence) the
    # timeline may still lag for a moment (it did on lavapipe under load).
    _wait_for_timeline(ctx, sub.semaphore, sub.value)
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
    return {"graveyard": ctx.device.epochs.pending, "waits": len(ctx.device.epochs.retire_waits),
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
        frames.drain()
        np.testing.assert_array_equal(acc.numpy(), np.full(64, float(total)))
        assert prog.stats["rerecords"] == 40
        assert snapshot[0]["command_buffers"] <= 3 and snapshot[0]["pending_free"] <= 4
    finally:
        frames.close()
        ctx.close()


# -- retire() without an epoch: exactly what was recorded before it --------------------------------

@pytest.mark.parametrize("trim", [False, True], ids=["recycled", "trimmed"])
def test_retire_without_an_epoch_keeps_what_is_recorded_after_it(host, ctx, trim):
    """The next frame's dropped tensor is not retired by an earlier retire():
    recycled (or destroyed by trim_memory) while that frame is unsubmitted,
    a new tensor would take its buffer and the frame would read its data."""
    ctx.retire()                                    # the device is idle
    a = ctx.tensor(np.full(64, 2.0, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        out = rec.copy(a)
    del a                                           # recorded after retire(): kept
    if trim:
        ctx.trim_memory()
    assert ctx.live_objects()["pending_free"] == 1
    b = ctx.tensor(np.full(64, 10.0, np.float32))   # same size class as a
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(out.numpy(), np.full(64, 2.0, np.float32))
    ctx.retire()
    assert ctx.live_objects()["pending_free"] == 0
    del b


@pytest.mark.parametrize("trim", [False, True], ids=["recycled", "trimmed"])
def test_retire_and_trim_inside_an_open_recording(host, ctx, trim):
    """retire() inside a recording retires only what came before it (its
    queued commands still use what was dropped in the block: a new tensor
    must not take their buffers), and trim_memory() then gives back
    nothing the recording uses."""
    x = ctx.tensor(np.arange(64, dtype=np.float32))
    a = ctx.tensor(np.full(64, 2.0, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        tmp = rec.add(x, 1.0)
        out = rec.mul(tmp, 2.0)
        copied = rec.copy(a)
        del tmp, a                                  # dropped while their commands are queued
        ctx.retire()
        if trim:
            ctx.trim_memory()
        assert ctx.live_objects()["pending_free"] == 2
        b = ctx.tensor(np.full(64, 10.0, np.float32))
        late = rec.add(out, b)
    host.submit_and_wait(cmd)
    want = (np.arange(64, dtype=np.float32) + 1) * 2
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(copied.numpy(), np.full(64, 2.0, np.float32))
    np.testing.assert_array_equal(late.numpy(), want + 10)
    ctx.retire()
    assert ctx.live_objects()["pending_free"] == 0


def test_retiring_the_epoch_of_an_open_recording_is_refused(host, ctx):
    x = ctx.tensor(np.ones(16, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.add(x, 1.0)                             # a dropped result of this recording
        epoch = ctx.advance_epoch()
        with pytest.raises(gc.RecordingError, match="still open"):
            ctx.retire(epoch)
        ctx.retire(epoch - 1)                       # before the recording: fine
        assert ctx.live_objects()["pending_free"] == 1
    host.submit_and_wait(cmd)
    ctx.retire(epoch)
    assert ctx.live_objects()["pending_free"] == 0


def test_a_signalled_fence_does_not_retire_an_open_recording(host, ctx):
    """retire_when closes the epoch an open recording began in; the fence
    (submitted before) cannot cover that recording, so its poll retires
    only the epochs before it."""
    x = ctx.tensor(np.ones(16, np.float32))
    signalled = ffi.new("VkFence *")
    info = new("VkFenceCreateInfo", flags=vk.VK_FENCE_CREATE_SIGNALED_BIT)
    assert host.fns.vkCreateFence(host.device, info, ffi.NULL, signalled) == vk.VK_SUCCESS
    try:
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            rec.add(x, 1.0)
            epoch = ctx.retire_when(fence=signalled[0])
            ctx.advance_epoch()                     # polls: signalled, but the recording is open
            assert ctx.device.epochs.retired < epoch
            assert ctx.live_objects()["pending_free"] == 1
        host.submit_and_wait(cmd)
        ctx.retire()
        assert ctx.live_objects()["pending_free"] == 0
    finally:
        host.fns.vkDestroyFence(host.device, signalled[0], ffi.NULL)


def test_retire_forgets_every_fence_and_semaphore_it_was_handed(host, ctx):
    """A host re-creating its swapchain waits for the device, destroys the
    fences (and semaphores) it handed to retire_when, and says
    ctx.retire(): nothing of them may be polled afterwards."""
    fns, dev = host.fns, host.device
    fence = ffi.new("VkFence *")
    assert fns.vkCreateFence(dev, new("VkFenceCreateInfo"), ffi.NULL, fence) == vk.VK_SUCCESS
    ctx.retire_when(fence=fence[0])                 # never signalled: the poll stays pending
    semaphore = None
    if ctx.caps.timeline_semaphores:
        semaphore = ffi.new("VkSemaphore *")
        kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        assert fns.vkCreateSemaphore(dev, new("VkSemaphoreCreateInfo", pNext=kind), ffi.NULL,
                                     semaphore) == vk.VK_SUCCESS
        ctx.retire_when(semaphore=(semaphore[0], 1))
    assert ctx.live_objects()["retire_waits"] == (2 if semaphore is not None else 1)
    fns.vkDeviceWaitIdle(dev)
    fns.vkDestroyFence(dev, fence[0], ffi.NULL)
    if semaphore is not None:
        fns.vkDestroySemaphore(dev, semaphore[0], ffi.NULL)
    ctx.retire()
    assert ctx.live_objects()["retire_waits"] == 0
    ctx.advance_epoch()                             # polls nothing (a destroyed fence would crash)
