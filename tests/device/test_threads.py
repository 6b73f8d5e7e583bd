"""Threads: eight threads share one context and its caches, each recording
into command buffers of its own command pool (Vulkan pools are externally
synchronized), some frames through ``ctx.run`` instead. Results must be
exact, the validation layer (thread-safety checks included) silent, the
pipelines shared (created exactly as often as by one thread) and the cache
counters exact (no increment lost to a race)."""
import gc as pygc
import threading
import traceback

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

from guestcompute.errors import check
from guestcompute.vk.structs import new

THREADS = 8
FRAMES = 12
N = 256


def _inputs(ctx, seed: int):
    rng = np.random.default_rng(seed)
    host = {"a": rng.integers(-50, 50, N, dtype=np.int32), "b": rng.integers(-9, 9, N, dtype=np.int32),
            "k": rng.integers(0, 1 << 20, N, dtype=np.uint32),
            "m": rng.integers(-4, 5, (16, 24)).astype(np.float32)}
    return host, {name: ctx.tensor(v) for name, v in host.items()}


def _frame(rec, t):
    """One frame of mixed work: several kernels, barriers, scratch memory."""
    s = rec.add(t["a"], t["b"])
    p = rec.mul(s, t["b"])
    q = rec.scale(p, 3)
    return {"s": s, "p": p, "q": q, "c": rec.cumsum(q), "sorted": rec.sort(t["k"]),
            "mm": rec.matmul(t["m"], t["m"].T), "f": rec.sub(t["m"], 0.5)}


def _expected(h):
    s = h["a"] + h["b"]
    p = s * h["b"]
    q = p * 3
    return {"s": s, "p": p, "q": q, "c": np.cumsum(q, dtype=np.int32), "sorted": np.sort(h["k"]),
            "mm": h["m"] @ h["m"].T, "f": h["m"] - np.float32(0.5)}


def _check(got, want, where):
    for name, w in want.items():
        g = got[name].numpy()
        assert g.dtype == w.dtype, (where, name)
        np.testing.assert_array_equal(g, w, err_msg=f"{where}: {name}")


class ThreadHost:
    """What one host thread owns: a command pool, a command buffer, a fence."""

    def __init__(self, host):
        self.host, fns, dev = host, host.fns, host.device
        info = new("VkCommandPoolCreateInfo", queueFamilyIndex=host.queue_family_index,
                   flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        self.pool = ffi.new("VkCommandPool *")
        check("vkCreateCommandPool", fns.vkCreateCommandPool(dev, info, ffi.NULL, self.pool))
        alloc = new("VkCommandBufferAllocateInfo", commandPool=self.pool[0],
                    level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        self.cmds = ffi.new("VkCommandBuffer[1]")
        check("vkAllocateCommandBuffers", fns.vkAllocateCommandBuffers(dev, alloc, self.cmds))
        self.fence = ffi.new("VkFence *")
        check("vkCreateFence", fns.vkCreateFence(dev, new("VkFenceCreateInfo"), ffi.NULL, self.fence))
        self.begin_info = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        self.submit_info = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=self.cmds)

    def begin(self):
        check("vkBeginCommandBuffer", self.host.fns.vkBeginCommandBuffer(self.cmds[0], self.begin_info))
        return self.cmds[0]

    def submit_and_wait(self, queue_lock):
        fns, dev = self.host.fns, self.host.device
        check("vkEndCommandBuffer", fns.vkEndCommandBuffer(self.cmds[0]))
        with queue_lock:                        # the queue is externally synchronized too
            check("vkQueueSubmit", fns.vkQueueSubmit(self.host.queue, 1, self.submit_info, self.fence[0]))
        check("vkWaitForFences", fns.vkWaitForFences(dev, 1, self.fence, vk.VK_TRUE, 2 ** 63 - 1))
        check("vkResetFences", fns.vkResetFences(dev, 1, self.fence))

    def destroy(self):
        fns, dev = self.host.fns, self.host.device
        fns.vkDestroyFence(dev, self.fence[0], ffi.NULL)
        fns.vkDestroyCommandPool(dev, self.pool[0], ffi.NULL)


def _run_frames(host, ctx, queue_lock, seed, frames, start=None, use_run=True):
    """The body of one host thread."""
    th = ThreadHost(host)
    try:
        if start is not None:
            start.wait()
        for f in range(frames):
            h, t = _inputs(ctx, seed * 1000 + f)
            if use_run and f % 4 == 3:
                got = ctx.run(lambda rec: _frame(rec, t))          # the guest's own command buffer
            else:
                cmd = th.begin()
                with ctx.record(cmd) as rec:
                    got = _frame(rec, t)
                th.submit_and_wait(queue_lock)
            _check(got, _expected(h), f"thread {seed} frame {f}")
    finally:
        th.destroy()


def _lookups(ctx):
    s = ctx.cache_stats()
    return s["pipelines_created"] + s["pipeline_hits"]


def test_eight_threads_share_one_context(host):
    queue_lock = threading.Lock()

    # One thread first: what a frame creates and looks up.
    ref = host.adopt(queue_lock=queue_lock)
    try:
        _run_frames(host, ref, queue_lock, 99, 1, use_run=False)
        created_alone = ref.cache_stats()["pipelines_created"]
        per_frame = _lookups(ref)             # each lookup either created a pipeline or hit
        _run_frames(host, ref, queue_lock, 98, 1)
        assert _lookups(ref) == 2 * per_frame and ref.cache_stats()["pipelines_created"] == created_alone
    finally:
        ref.close()
    assert created_alone > 3 and per_frame > 5

    ctx = host.adopt(queue_lock=queue_lock)
    try:
        baseline = ctx.live_objects()
        start = threading.Barrier(THREADS)
        errors = []

        def body(i):
            try:
                _run_frames(host, ctx, queue_lock, i, FRAMES, start)
            except BaseException:
                errors.append(traceback.format_exc())
                start.abort()

        threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=600)
        assert not any(th.is_alive() for th in threads)
        assert not errors, errors[0]

        stats = ctx.cache_stats()
        # Shared: each pipeline created once for all threads, as by one thread alone...
        assert stats["pipelines_created"] == created_alone
        # ...and every lookup counted exactly once (no lost increments).
        assert _lookups(ctx) == per_frame * THREADS * FRAMES
        assert stats["pipeline_hits"] >= per_frame * THREADS * FRAMES - created_alone

        # Everything the frames made and dropped is freed once the epochs retire.
        pygc.collect()
        ctx.retire(ctx.advance_epoch())
        after = ctx.live_objects()
        assert after["buffers"] == baseline["buffers"]
        assert after["descriptor_sets"] == baseline["descriptor_sets"]
        assert after["pending_free"] == 0
    finally:
        ctx.close()


def test_threads_creating_the_same_new_pipelines_at_once(modern_host):
    """All threads miss the cache on the same specs at the same moment."""
    queue_lock = threading.Lock()
    ctx = modern_host.adopt(queue_lock=queue_lock)
    try:
        start = threading.Barrier(THREADS)
        errors, results = [], {}

        def body(i):
            try:
                th = ThreadHost(modern_host)
                try:
                    x = ctx.tensor(np.arange(N, dtype=np.float32) + i)
                    start.wait()
                    cmd = th.begin()
                    with ctx.record(cmd) as rec:
                        y = rec.tanh(rec.sqrt(rec.abs(x)))
                    th.submit_and_wait(queue_lock)
                    results[i] = y.numpy()
                finally:
                    th.destroy()
            except BaseException:
                errors.append(traceback.format_exc())
                start.abort()

        threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=600)
        assert not errors, errors[0]
        stats = ctx.cache_stats()
        assert stats["pipelines_created"] == 3
        assert stats["pipelines_created"] + stats["pipeline_hits"] == 3 * THREADS
        for i, y in results.items():
            want = np.tanh(np.sqrt(np.abs(np.arange(N, dtype=np.float32) + i)))
            np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)
        assert len(results) == THREADS
    finally:
        ctx.close()


@pytest.mark.parametrize("profile", ["bare"])
def test_run_from_many_threads_is_serialized(request, profile):
    """``ctx.run`` uses one guest command pool: concurrent calls must take
    turns (the validation layer's thread-safety checks report any overlap)."""
    host = request.getfixturevalue(f"{profile}_host")
    ctx = host.adopt()
    try:
        errors = []
        start = threading.Barrier(THREADS)

        def body(i):
            try:
                a = ctx.tensor(np.full(N, i, np.int32))
                start.wait()
                for _ in range(6):
                    out = ctx.run(lambda rec: rec.mul(rec.add(a, 1), 2))
                    np.testing.assert_array_equal(out.numpy(), np.full(N, (i + 1) * 2, np.int32))
            except BaseException:
                errors.append(traceback.format_exc())
                start.abort()

        threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=600)
        assert not errors, errors[0]
    finally:
        ctx.close()
