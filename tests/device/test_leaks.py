"""Leaks and bounds: 10 000 frames of record + submit + retire on a
HeadlessHost, one reused command buffer, a temporary tensor made and
dropped every frame. After warm-up the library's own bookkeeping (live
Vulkan objects, guest memory, descriptor entries, remembered plans) stays
exactly constant; at the end the validation layer's object tracker, which
reports every child object still alive at vkDestroyDevice, finds nothing.
"""
import time

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

from guestcompute.errors import check
from guestcompute.testing import HeadlessHost
from guestcompute.vk.structs import new

FRAMES = 10_000
WARMUP = 60          # a plain frame (frames 50, 150, ... do extra work)
CHECK_EVERY = 500
# The VUID for a child object left at vkDestroyDevice: 00378 in layers up to 1.3.2xx,
# 05137 in 1.4 (the spec split the rule by object type).
LEAK_VUIDS = ("VUID-vkDestroyDevice-device-00378", "VUID-vkDestroyDevice-device-05137")


def _bookkeeping(ctx) -> dict:
    """Everything that would grow with the frame count if something leaked."""
    state = dict(ctx.live_objects())
    state.update(live_buffers=ctx.memory.live_buffers, live_bytes=ctx.memory.live_bytes,
                 descriptor_entries=ctx.device.descriptors.cached_entries,
                 descriptor_buffers=ctx.device.descriptors.referenced_buffers,
                 calls=len(ctx.call_memo), pending_uploads=len(ctx.device.transfers.pending_uploads))
    return state


class FrameLoop:
    """A host's minimal frame: one command buffer reset and re-recorded
    every frame, one fence."""

    def __init__(self, host):
        self.host = host
        self.cmd = host.allocate()         # the host's pool resets buffers individually
        self.cmds = ffi.new("VkCommandBuffer[1]", [self.cmd])
        self.fence = ffi.new("VkFence *")
        check("vkCreateFence", host.fns.vkCreateFence(host.device, new("VkFenceCreateInfo"), ffi.NULL,
                                                       self.fence))
        self.begin_info = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        self.submit_info = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=self.cmds)

    def begin(self):
        check("vkBeginCommandBuffer", self.host.fns.vkBeginCommandBuffer(self.cmd, self.begin_info))
        return self.cmd

    def submit_and_wait(self):
        fns, dev = self.host.fns, self.host.device
        check("vkEndCommandBuffer", fns.vkEndCommandBuffer(self.cmd))
        check("vkQueueSubmit", fns.vkQueueSubmit(self.host.queue, 1, self.submit_info, self.fence[0]))
        check("vkWaitForFences", fns.vkWaitForFences(dev, 1, self.fence, vk.VK_TRUE, 2 ** 63 - 1))
        check("vkResetFences", fns.vkResetFences(dev, 1, self.fence))

    def destroy(self):
        self.host.fns.vkFreeCommandBuffers(self.host.device, self.host.command_pool, 1, self.cmds)
        self.host.fns.vkDestroyFence(self.host.device, self.fence[0], ffi.NULL)


@pytest.mark.parametrize("profile", ["bare", "modern"])
def test_ten_thousand_frames_hold_steady(profile):
    host = HeadlessHost(profile)
    counts = {}
    try:
        ctx = host.adopt()
        loop = FrameLoop(host)
        x_np = np.arange(64, dtype=np.float32)
        x, y = ctx.tensor(x_np), ctx.empty((64,))
        steady = None
        start = time.perf_counter()
        for frame in range(FRAMES):
            cmd = loop.begin()
            with ctx.record(cmd) as rec:
                tmp = rec.add(x, float(frame % 5))        # a new tensor every frame...
                rec.mul(tmp, x, out=y)                     # ...used, then dropped
            if frame % 100 == 50:
                # Now and then: uploads, a multi-pass op with scratch memory, and a view.
                data = np.full((4, 16), frame % 13, np.int32)
                extra_in = ctx.tensor(data)
                with ctx.record(cmd) as rec:
                    extra = rec.cumsum(extra_in.T, axis=0)
            loop.submit_and_wait()
            ctx.retire(ctx.advance_epoch())               # the frame's fence signalled
            if frame % 100 == 50:
                np.testing.assert_array_equal(extra.numpy(), np.cumsum(data.T, axis=0, dtype=np.int32))
                del extra, extra_in
            if frame % CHECK_EVERY == 0 or frame == WARMUP or frame == FRAMES - 1:
                np.testing.assert_array_equal(y.numpy(), (x_np + frame % 5) * x_np)
                state = _bookkeeping(ctx)
                if frame == 0:
                    counts["start"] = state
                if frame == WARMUP:
                    steady = state
                elif frame > WARMUP:
                    assert state == steady, f"frame {frame}: {state} != after warm-up {steady}"
        seconds = time.perf_counter() - start
        counts["end"] = _bookkeeping(ctx)
        assert counts["end"] == steady
        del tmp
        ctx.retire()
        after = ctx.live_objects()
        assert after["buffers"] == 2 and after["pending_free"] == 0       # x and y only
        assert after["descriptor_sets"] == 0              # every set referenced the dropped tmp
        loop.destroy()
        ctx.close()
        assert ctx.memory.live_buffers == 0 and ctx.memory.live_bytes == 0
    finally:
        host.close()
    # The object tracker reports each child object still alive when the device goes.
    assert not [m for m in host.messages if any(v in m for v in LEAK_VUIDS)], host.messages[:3]
    assert not host.messages, host.messages[:3]
    print(f"\n{profile}: {FRAMES} frames in {seconds:.1f} s; objects at start {counts['start']}, "
          f"at end {counts['end']}")


def test_the_object_tracker_reports_a_leak_at_destroy():
    """The check above can fail: a buffer left alive is reported at vkDestroyDevice."""
    host = HeadlessHost("bare")
    try:
        info = new("VkBufferCreateInfo", size=256, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        leaked = ffi.new("VkBuffer *")
        check("vkCreateBuffer", host.fns.vkCreateBuffer(host.device, info, ffi.NULL, leaked))
    finally:
        host.close()
    assert any(any(v in m for v in LEAK_VUIDS) for m in host.messages), host.messages


def test_tensors_dropped_mid_flight_wait_for_their_epoch():
    """A temporary dropped before its frame's work completed is destroyed only
    when that epoch retires, never earlier (the validation layer would
    report a buffer destroyed while in use)."""
    host = HeadlessHost("bare")
    try:
        ctx = host.adopt()
        loop = FrameLoop(host)
        x = ctx.tensor(np.ones(1024, np.float32))
        base = ctx.live_objects()["buffers"]
        cmd = loop.begin()
        with ctx.record(cmd) as rec:
            for _ in range(10):
                rec.add(x, 1.0)                          # each result dropped at once
        assert ctx.live_objects()["pending_free"] == 10
        keep = ctx.empty((4,))                           # allocation collects what it can...
        assert ctx.live_objects()["buffers"] == base + 11   # ...but not these: still recorded
        loop.submit_and_wait()
        epoch = ctx.advance_epoch()
        ctx.retire(epoch - 1)                            # an older epoch: still not these
        assert ctx.live_objects()["buffers"] == base + 11
        ctx.retire(epoch)
        assert ctx.live_objects()["buffers"] == base + 1 and ctx.live_objects()["pending_free"] == 0
        del keep
        loop.destroy()
        ctx.close()
    finally:
        host.close()
    assert not host.messages, host.messages[:3]
