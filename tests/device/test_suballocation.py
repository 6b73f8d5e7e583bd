"""The suballocator: small tensors share device-memory blocks, released
buffers are reused, a frame loop allocates nothing after warm-up whatever
signal retires its epochs, and the device's maxMemoryAllocationCount is
respected."""
import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.device.suballocator import KEEP_TICKS
VK_ERROR_TOO_MANY_OBJECTS = -10
from frame_loop import FrameLoop


def _allocations(ctx) -> int:
    return ctx.live_objects()["allocations"]


def test_20000_small_tensors_use_at_most_64_allocations_and_give_them_back(modern_host):
    ctx = modern_host.adopt()
    try:
        start = _allocations(ctx)
        tensors = [ctx.empty((4,)) for _ in range(20_000)]        # 16 bytes each
        assert _allocations(ctx) - start <= 64
        report = ctx.memory_report()
        assert report["buffers"] >= 20_000 and report["used_bytes"] >= 20_000 * 16
        assert report["reserved_bytes"] >= report["used_bytes"]
        # Each is its own memory: write distinct values into all, read a sample back.
        for i, t in enumerate(tensors[::997]):
            t.write(np.full(4, i, np.float32))
        for i, t in enumerate(tensors[::997]):
            np.testing.assert_array_equal(t.numpy(), np.full(4, i, np.float32))
        del tensors, t
        ctx.device.epochs.collect()
        assert ctx.live_objects()["buffers"] == 0
        for _ in range(KEEP_TICKS + 1):           # idle memory goes back after a while...
            ctx.advance_epoch()
        assert _allocations(ctx) == start
        assert ctx.live_objects()["recycled_buffers"] == 0 and ctx.live_objects()["reserved_bytes"] == 0
        again = [ctx.empty((4,)) for _ in range(100)]
        assert _allocations(ctx) == start + 1
        del again
        ctx.device.epochs.collect()
        ctx.trim_memory()                          # ...or at once
        assert _allocations(ctx) == start
    finally:
        ctx.close()


def _frame_loop_memory(host, ctx, signal: str, frames: int):
    """Run ``frames`` frames that each make fresh tensors (an op output and
    an explicit temporary) with two frames in flight, retiring epochs by
    ``signal``; returns per-frame (allocations, VkBuffers created, pending, recycled)."""
    loop = FrameLoop(host, 2, timeline=signal == "timeline")
    sub = ctx.device.suballocator
    a = ctx.tensor(np.arange(64, dtype=np.float32))
    acc = ctx.zeros((64,))
    seen, submissions = [], []
    try:
        for frame in range(frames):
            if signal == "submission":
                def body(rec):
                    tmp = ctx.empty((64,))
                    rec.add(rec.mul(a, 2.0), 1.0, out=tmp)
                    rec.add(acc, tmp, out=acc)
                if len(submissions) == 2:         # two frames in flight
                    submissions.pop(0).wait()
                submissions.append(ctx.submit(body))
                ctx.retire_when(submission=submissions[-1])
            else:
                cmd, fence = loop.begin(frame)
                with ctx.record(cmd) as rec:
                    tmp = ctx.empty((64,))
                    rec.add(rec.mul(a, 2.0), 1.0, out=tmp)
                    rec.add(acc, tmp, out=acc)
                loop.submit(cmd, fence, frame)
                del tmp
                if signal == "fence":
                    ctx.retire_when(fence=fence)
                else:
                    ctx.retire_when(semaphore=(loop.semaphore, frame + 1))
            live = ctx.live_objects()
            seen.append((live["allocations"], sub.vulkan_buffers_created, live["pending_free"],
                         live["recycled_buffers"]))
        loop.drain()
        for submission in submissions:
            submission.wait()
        np.testing.assert_array_equal(acc.numpy(), frames * (np.arange(64) * 2.0 + 1.0))
    finally:
        loop.close()
    return seen


FRAMES_IN_FLIGHT = 2          # _frame_loop_memory's loop
TEMPORARIES_PER_FRAME = 2     # the op output and the explicit temporary, one size class


@pytest.mark.parametrize("signal,frames", [("fence", 10_000), ("timeline", 2_000), ("submission", 2_000)])
def test_a_steady_frame_loop_allocates_nothing_after_warm_up(modern_host, signal, frames):
    """Fresh tensors every frame: no VkDeviceMemory is made after warm-up, and
    the VkBuffers made stay within what the frames the GPU may still be running
    hold, however fast the GPU retires them.

    Which frame first needs the last of those buffers depends on when the GPU
    finishes (a frame may still run when the next one allocates), so the
    test holds the count to the bound, not to the count at some frame: at
    most the frames in flight, the frame being recorded and the frame whose
    signal is polled only when the next epoch closes hold temporaries.
    Recycling is oldest first, so a kept buffer never idles long enough to
    be returned and made again: the count made never passes the bound."""
    ctx = modern_host.adopt()
    try:
        base = ctx.device.suballocator.vulkan_buffers_created
        seen = _frame_loop_memory(modern_host, ctx, signal, frames)
        bound = base + 2 + TEMPORARIES_PER_FRAME * (FRAMES_IN_FLIGHT + 2)   # 2: the loop's a and acc
        warm = seen[20]
        for frame, (allocations, created, pending, recycled) in enumerate(seen[20:], 20):
            assert allocations == warm[0], (frame, seen[frame])
            assert created <= bound, (frame, seen[frame], bound)
            assert pending <= bound - base and recycled <= bound - base, (frame, seen[frame])
    finally:
        ctx.close()


def test_two_tensors_of_one_block_are_ordered_and_never_alias(host, ctx):
    """Written by one op and read by the next: they get their barrier (sync
    validation would report a hazard otherwise) and keep their own bytes."""
    a = ctx.tensor(np.arange(256, dtype=np.float32))
    b = ctx.zeros((256,))
    c = ctx.zeros((256,))
    alloc_a, alloc_b = a.buffer.alloc, b.buffer.alloc
    assert alloc_a.memory == alloc_b.memory and alloc_a.offset != alloc_b.offset     # one block
    assert alloc_a.offset + alloc_a.size <= alloc_b.offset or alloc_b.offset + alloc_b.size <= alloc_a.offset
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.mul(a, 3.0, out=b)            # writes b
        rec.add(b, 1.0, out=c)            # reads b: needs the barrier
        rec.add(a, 0.5, out=a)            # a's neighbour in the block is untouched
    host.submit_and_wait(cmd)
    x = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(b.numpy(), x * 3)
    np.testing.assert_array_equal(c.numpy(), x * 3 + 1)
    np.testing.assert_array_equal(a.numpy(), x + 0.5)


def test_a_released_buffer_is_reused_under_a_new_identity(host, ctx):
    """The recycled VkBuffer comes back as a new Buffer (new uid), so no
    cache or program confuses it with the tensor that held it before."""
    t = ctx.tensor(np.ones(32, np.float32))
    host.run(ctx, lambda rec: rec.add(t, 1.0, out=t))
    vk_buffer, uid = t.buffer.handle, t.buffer.uid
    del t
    ctx.retire()
    u = ctx.tensor(np.full(32, 7, np.float32))
    assert u.buffer.handle == vk_buffer and u.buffer.uid != uid
    out = host.run(ctx, lambda rec: rec.add(u, 1.0))
    np.testing.assert_array_equal(out.numpy(), np.full(32, 8, np.float32))


class _CountedAllocations:
    """A driver whose maxMemoryAllocationCount is ``limit``: vkAllocateMemory
    fails with VK_ERROR_TOO_MANY_OBJECTS past it, as the spec allows."""

    def __init__(self, fns, limit):
        self.fns, self.limit, self.live, self.calls = fns, limit, 0, 0
        self.real_allocate, self.real_free = fns.vkAllocateMemory, fns.vkFreeMemory
        fns.vkAllocateMemory, fns.vkFreeMemory = self.allocate, self.free

    def allocate(self, *args):
        self.calls += 1
        if self.live >= self.limit:
            return VK_ERROR_TOO_MANY_OBJECTS
        result = self.real_allocate(*args)
        self.live += result == 0
        return result

    def free(self, *args):
        self.live -= 1
        return self.real_free(*args)

    def restore(self):
        self.fns.vkAllocateMemory, self.fns.vkFreeMemory = self.real_allocate, self.real_free


def test_a_driver_that_allows_4096_allocations_serves_100000_tensors(bare_host):
    ctx = bare_host.adopt()
    driver = _CountedAllocations(ctx.device.fns, 4096)
    ctx.device.memory.max_allocations = 4096       # what such a driver reports
    try:
        sizes = np.random.default_rng(5).integers(1, 1025, 100_000)
        tensors = [ctx.empty((int(n),)) for n in sizes]
        assert driver.live < 64 and ctx.live_objects()["allocations"] == driver.live
        t = tensors[-1]
        t.write(np.arange(t.size, dtype=np.float32))
        np.testing.assert_array_equal(bare_host.run(ctx, lambda rec: rec.add(t, 1.0)).numpy(),
                                      np.arange(t.size) + 1.0)
        del tensors, t
    finally:
        driver.restore()
        ctx.close()


def test_allocations_past_the_count_are_refused_before_the_driver_sees_them(bare_host):
    """With every allocation the device allows in use, a tensor that needs
    new memory gets a typed error naming the limit, and the driver is not
    asked (asking would be invalid usage); idle blocks are freed first."""
    ctx = bare_host.adopt()
    memory = ctx.device.memory
    try:
        keep = ctx.empty((4,))
        spare = ctx.empty((ctx.device.suballocator.block_size // 16,))   # a second block
        del spare
        ctx.device.epochs.collect()
        memory.max_allocations = memory.allocations          # the count is exhausted
        driver = _CountedAllocations(ctx.device.fns, 10 ** 9)
        try:
            big = ctx.device.suballocator.dedicated_from // 4
            first = ctx.empty((big,))     # the idle block and recycled buffer made room
            with pytest.raises(gc.OutOfMemoryError, match="maxMemoryAllocationCount"):
                ctx.empty((big,))
            assert driver.calls == 1
            del first
        finally:
            driver.restore()
        del keep
    finally:
        ctx.close()


def test_a_driver_that_prefers_dedicated_memory_gets_it(modern_host):
    """Where VkMemoryDedicatedRequirements says so (simulated in the
    function table), every buffer gets memory of its own, allocated as
    dedicated (VkMemoryDedicatedAllocateInfo: the validation layer checks it)."""
    ctx = modern_host.adopt()
    fns = ctx.device.fns
    real = fns.vkGetBufferMemoryRequirements2

    def prefers(device, info, reqs):
        real(device, info, reqs)
        node = ffi.cast("VkBaseOutStructure *", reqs).pNext
        while node != ffi.NULL:
            if node.sType == vk.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS:
                ffi.cast("VkMemoryDedicatedRequirements *", node).prefersDedicatedAllocation = vk.VK_TRUE
            node = node.pNext
    fns.vkGetBufferMemoryRequirements2 = prefers
    try:
        start = ctx.live_objects()["allocations"]
        tensors = [ctx.tensor(np.full(4, i, np.float32)) for i in range(5)]
        assert ctx.live_objects()["allocations"] == start + 5
        assert ctx.memory_report()["dedicated_buffers"] == 5
        out = modern_host.run(ctx, lambda rec: rec.add(tensors[1], tensors[4]))
        np.testing.assert_array_equal(out.numpy(), np.full(4, 5, np.float32))
        del tensors, out
    finally:
        fns.vkGetBufferMemoryRequirements2 = real
        ctx.close()


def test_without_that_preference_small_tensors_share_a_block(modern_host):
    ctx = modern_host.adopt()
    try:
        assert ctx.device.fns.has("vkGetBufferMemoryRequirements2")     # asked, and lavapipe says no
        tensors = [ctx.empty((4,)) for _ in range(5)]
        assert ctx.memory_report()["dedicated_buffers"] == 0
        assert len({t.buffer.alloc.memory for t in tensors}) == 1
        del tensors
    finally:
        ctx.close()


def test_temporaries_of_drifting_sizes_meet_recycled_buffers(modern_host):
    """Sizes round up to one of eight classes per power of two, so a frame
    loop whose temporary size drifts (a particle count) stops making
    buffers once every class it visits has been made."""
    ctx = modern_host.adopt()
    sub = ctx.device.suballocator
    try:
        rng = np.random.default_rng(11)
        seen = []
        for frame in range(300):
            n = 3500 + int(rng.integers(-40, 41))        # 13,840..14,160 bytes: one class
            tmp = ctx.empty((n,))
            assert 4 * n <= tmp.buffer.size <= 4 * n * 9 // 8
            del tmp
            ctx.advance_epoch()
            ctx.retire()
            seen.append(sub.vulkan_buffers_created)
        assert seen[-1] == seen[0]
    finally:
        ctx.close()


def test_size_classes_never_push_a_tensor_past_one_binding(modern_host):
    ctx = modern_host.adopt()
    try:
        reach = ctx.limits.max_storage_buffer_range
        # One allocation may hold less than one binding reaches (an H200:
        # 4 GiB - 2 MiB against 4 GiB - 1): the largest tensor there is is
        # what both allow.
        largest = min(reach, ctx.limits.max_memory_allocation_size)
        t = ctx.empty((largest // 4 - 1000,))         # fits one binding; its class would not
        assert t.buffer.size <= largest
        del t
    finally:
        ctx.close()


def test_a_tensor_past_one_allocation_is_refused_before_the_driver(modern_host):
    """maxMemoryAllocationSize bounds one VkDeviceMemory whatever the heap
    holds; a tensor that needs more is refused with OutOfMemoryError, and
    size classes never push one that fits past it."""
    ctx = modern_host.adopt()
    try:
        # As on a device whose allocations hold far less than its heap (an
        # H200: 4 GiB - 2 MiB of 141 GB), without allocating that much; like
        # there, the limit is no size class (48 MiB is).
        limit = min(ctx.limits.max_memory_allocation_size, (48 << 20) - (2 << 20))
        ctx.memory.max_allocation_size = limit
        start = _allocations(ctx)
        with pytest.raises(gc.OutOfMemoryError, match="maxMemoryAllocationSize"):
            ctx.empty((limit // 4 + 1,))
        if ctx.caps.external_memory_fd:              # memory of its own that others can share
            with pytest.raises(gc.OutOfMemoryError, match="maxMemoryAllocationSize"):
                ctx.empty((limit // 4 + 1,), exportable=True)
        assert _allocations(ctx) == start
        t = ctx.empty((limit // 4 - 1000,))          # fits one allocation; its class would not
        assert t.buffer.size <= limit
        del t
    finally:
        ctx.close()


def test_an_allocation_past_the_heap_budget_is_refused_before_the_driver(modern_host):
    """Where VK_EXT_memory_budget says what the process may still use of a
    heap, an allocation past it is refused with OutOfMemoryError (the
    driver would fail it) — after idle guest memory was given back."""
    ctx = modern_host.adopt()
    try:
        memory = ctx.memory
        budget = memory.reserved_bytes + (30 << 20)
        # A heap with 30 MiB left for this context, its usage what the guest reserved.
        memory.read_budget = lambda: [(budget, memory.reserved_bytes)] * len(memory.heap_sizes)
        start = _allocations(ctx)
        with pytest.raises(gc.OutOfMemoryError, match="budget"):
            ctx.empty((40 << 20) // 4)
        assert _allocations(ctx) == start
        kept = ctx.empty((12 << 20) // 4)
        del kept
        ctx.retire()                                  # its buffer now idle, kept for reuse
        assert ctx.live_objects()["recycled_buffers"] == 1
        big = ctx.empty((20 << 20) // 4)              # fits once the idle buffer's memory went back
        assert ctx.live_objects()["recycled_buffers"] == 0
        del big
    finally:
        ctx.close()
