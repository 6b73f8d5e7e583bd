"""A frame of host work + guest work: injected into the host's command
buffer vs handed off through semaphores (``ctx.submit``).

Each frame, both ways:

- host work before: vkCmdFillBuffer of a host buffer the guest reads;
- guest work: ``N_OPS`` elementwise ops over that buffer (imported) and
  guest tensors;
- host work after: vkCmdCopyBuffer of the guest's result;
- then the host waits for the frame's fence (frame time = CPU recording +
  submissions + GPU execution + wait).

Injected: one host command buffer, one submit. Hand-off: host submit
(signal) → guest submit (wait, signal) → host submit (wait, fence) — two
extra submissions and two semaphore hops per frame. Binary semaphores
always; timeline semaphores too when the device has them. Where the device
has a compute-only queue family, a third variant hands the guest work to
that (async-compute) queue, with queue-family ownership transfers of the
two host buffers; it also checks the result. lavapipe has one family, so
that variant reports itself skipped there.

Run: ``python -m benchmarks.handoff`` (prints JSON).
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import vulkan as vk
from vulkan import ffi

from vulkan import lib

from guestcompute import host as gchost
from guestcompute.testing import HeadlessHost
from guestcompute.vk import bootstrap
from guestcompute.vk.functions import DeviceFunctions
from guestcompute.vk.memory import MemoryManager
from guestcompute.vk.structs import new

from .results import Result, standalone_main

N = 1 << 16
N_OPS = 16
_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT


class HandoffBench:
    def __init__(self, host, ctx):
        from guestcompute.vk.structs import new
        self.new = new
        self.host, self.ctx, self.fns = host, ctx, host.fns
        self.src = host.create_buffer(N * 4)
        self.dst = host.create_buffer(N * 4)
        self.x = ctx.import_buffer(self.src, (N,), "float32", host_access="transfer", buffer_size=N * 4)
        self.y = ctx.tensor(np.full(N, 0.5, np.float32))
        self.z = ctx.import_buffer(self.dst, (N,), "float32", host_access="transfer", buffer_size=N * 4)
        self.cmds = [host.allocate() for _ in range(3)]
        self.binary = [self._semaphore(False) for _ in range(2)]
        self.timeline = [self._semaphore(True) for _ in range(2)] if ctx.caps.timeline_semaphores else None
        self.tick = 0

    def _semaphore(self, timeline):
        new = self.new
        info = new("VkSemaphoreCreateInfo")
        if timeline:
            info = new("VkSemaphoreCreateInfo", pNext=new("VkSemaphoreTypeCreateInfo",
                                                          semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE))
        out = ffi.new("VkSemaphore *")
        assert self.fns.vkCreateSemaphore(self.host.device, info, ffi.NULL, out) == vk.VK_SUCCESS
        return out[0]

    def guest(self, rec):
        rec.add(self.x, self.y, out=self.z)
        for _ in range(N_OPS - 1):
            rec.mul(self.z, self.y, out=self.z)

    def _host_before(self, cmd):
        self.host.fill_buffer(cmd, self.src, 0x3F800000, N * 4)

    def _host_after(self, cmd):
        region = self.new("VkBufferCopy", srcOffset=0, dstOffset=0, size=N * 4)
        self.fns.vkCmdCopyBuffer(cmd, self.dst, self.src, 1, region)

    def _submit(self, cmd, wait=(), signal=(), fence=False, timeline=False):
        # wait/signal: (semaphore, value or None); the host waits in its transfer stage.
        self.host.submit(cmd, wait_for=[(sem, value, _TRANSFER) for sem, value in wait], signal=signal,
                         fence=fence, block=False, free=False)

    def _wait(self):
        self.host.wait()

    def injected(self) -> float:
        t0 = time.perf_counter()
        cmd = self.host.begin(self.cmds[0])
        self._host_before(cmd)
        with self.ctx.record(cmd) as rec:
            self.guest(rec)
        self._host_after(cmd)
        self._submit(cmd, fence=True)
        self._wait()
        return time.perf_counter() - t0

    def handoff(self, timeline: bool) -> float:
        s1, s2 = self.timeline if timeline else self.binary
        self.tick += 1
        v1, v2 = (2 * self.tick - 1, 2 * self.tick) if timeline else (None, None)
        t0 = time.perf_counter()
        cmd = self.host.begin(self.cmds[1])
        self._host_before(cmd)
        self._submit(cmd, signal=[(s1, v1)], timeline=timeline)
        self.ctx.submit(self.guest, wait=[(s1, v1, "compute")], signal=[(s2, v2)])
        cmd = self.host.begin(self.cmds[2])
        self._host_after(cmd)
        self._submit(cmd, wait=[(s2, v2)], fence=True, timeline=timeline)
        self._wait()
        return time.perf_counter() - t0

    def check(self) -> None:
        expect = (1.0 + 0.5) * 0.5 ** (N_OPS - 1)
        for fn in (self.injected, lambda: self.handoff(False)):
            self.host.write_buffer(self.dst, np.zeros(N, np.float32))
            fn()
            got = self.host.read_buffer(self.src, np.float32, N)
            np.testing.assert_allclose(got, np.full(N, expect, np.float32), rtol=1e-6)

    def close(self):
        fns, dev = self.fns, self.host.device
        fns.vkDeviceWaitIdle(dev)
        for s in self.binary + (self.timeline or []):
            fns.vkDestroySemaphore(dev, s, ffi.NULL)
        fns.vkFreeCommandBuffers(dev, self.host.command_pool, len(self.cmds), ffi.new("VkCommandBuffer[]", self.cmds))


class AsyncFamilyHost(HeadlessHost):
    """A host whose device has two queue families in use: the host's own
    (graphics + compute) and a compute-only one it lends the guest."""

    def __init__(self, device=None):   # noqa: super().__init__ would make a one-family device
        self.profile = "modern"
        self.instance, self.messenger, api = bootstrap.create_instance((1, 3), False, app_name="handoff-bench")
        self.device = None
        pd = self.physical_device = bootstrap.pick_physical_device(self.instance, device)
        count = ffi.new("uint32_t *")
        lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, ffi.NULL)
        props = ffi.new("VkQueueFamilyProperties[]", count[0])
        lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, props)
        graphics = vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT
        flags = [props[i].queueFlags for i in range(count[0])]
        main = next((i for i, f in enumerate(flags) if f & graphics == graphics), None)
        side = next((i for i, f in enumerate(flags) if f & vk.VK_QUEUE_COMPUTE_BIT
                     and not f & vk.VK_QUEUE_GRAPHICS_BIT), None)
        if main is None or side is None:
            lib.vkDestroyInstance(self.instance, ffi.NULL)
            raise LookupError("the device has no compute-only queue family")
        self.main_family, self.side_family = main, side
        self.queue_family_index = main
        req = gchost.requirements(pd, api)
        self.api_version, self.extensions = min(req.api_version, api), list(req.device_extensions)
        self.features = {f: True for f in req.features}
        prio = ffi.new("float[]", [1.0])
        queues = [new("VkDeviceQueueCreateInfo", queueFamilyIndex=f, queueCount=1, pQueuePriorities=prio)
                  for f in (main, side)]
        chain = req.feature_chain()
        info = new("VkDeviceCreateInfo", pNext=chain if chain is not None else ffi.NULL, queueCreateInfoCount=2,
                   pQueueCreateInfos=queues, enabledExtensionCount=len(self.extensions),
                   ppEnabledExtensionNames=self.extensions or ffi.NULL)
        out = ffi.new("VkDevice *")
        assert lib.vkCreateDevice(pd, info, ffi.NULL, out) == vk.VK_SUCCESS
        self.device = out[0]
        q = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(self.device, main, 0, q)
        self.queue = q[0]
        lib.vkGetDeviceQueue(self.device, side, 0, q)
        self.side_queue = q[0]
        self.fns = DeviceFunctions(self.device)
        self._memory = MemoryManager(self.device, self.fns, pd)
        self._buffers = []
        self._images = []
        pool = ffi.new("VkCommandPool *")
        self.fns.vkCreateCommandPool(self.device, new("VkCommandPoolCreateInfo", queueFamilyIndex=main,
                                     flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), ffi.NULL, pool)
        self.command_pool = pool[0]
        self._fence = ffi.new("VkFence *")
        self.fns.vkCreateFence(self.device, new("VkFenceCreateInfo"), ffi.NULL, self._fence)



class AsyncBench(HandoffBench):
    """The hand-off frame with the guest on the compute-only family."""

    def handoff_async(self) -> float:
        from guestcompute.recording import handoff as gsubmit
        host, ctx = self.host, self.ctx
        s1, s2 = self.binary
        shared = [self.x, self.z]
        t0 = time.perf_counter()
        cmd = host.begin(self.cmds[1])
        self._host_before(cmd)
        gsubmit.release_to_guest(ctx, cmd, shared, host.side_family)
        self._submit(cmd, signal=[(s1, None)])
        ctx.submit(self.guest, queue=host.side_queue, queue_family_index=host.side_family,
                   wait=[(s1, None, "compute")], signal=[(s2, None)], shared=shared)
        cmd = host.begin(self.cmds[2])
        gsubmit.acquire_from_guest(ctx, cmd, shared, host.side_family)
        self._host_after(cmd)
        self._submit(cmd, wait=[(s2, None)], fence=True)
        self._wait()
        return time.perf_counter() - t0


def run_async(env) -> list:
    name = "frame with guest work on an async-compute queue family (binary semaphores)"
    try:
        host = AsyncFamilyHost(getattr(env, "device", None))
    except LookupError as e:
        return [Result("handoff", name, skipped=str(e))]
    ctx = host.adopt()
    bench = None
    try:
        bench = AsyncBench(host, ctx)
        expect = (1.0 + 0.5) * 0.5 ** (N_OPS - 1)
        bench.handoff_async()
        np.testing.assert_allclose(host.read_buffer(bench.src, np.float32, N), np.full(N, expect), rtol=1e-6)
        frames = 30 if getattr(env, "quick", False) else 150
        times = {"injected": [], "async": []}
        for _ in range(frames):
            times["injected"].append(bench.injected())
            times["async"].append(bench.handoff_async())
        us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        return [Result("handoff", name, us["async"], "µs/frame", "injected", us["injected"],
                       note=f"{N_OPS} ops on {N} floats; ownership transfers of 2 host buffers each way",
                       extra={"difference_us_per_frame": us["async"] - us["injected"],
                              "families": [host.main_family, host.side_family]})]
    finally:
        if bench is not None:
            bench.close()
        ctx.close()
        host.close()


def run(env) -> list:
    from guestcompute.testing import HeadlessHost
    host = HeadlessHost("modern", validation=False, device=getattr(env, "device", None))
    ctx = host.adopt()
    bench = None
    try:
        bench = HandoffBench(host, ctx)
        bench.check()
        frames = 30 if getattr(env, "quick", False) else 150
        variants = {"injected": bench.injected, "binary": lambda: bench.handoff(False)}
        if bench.timeline is not None:
            variants["timeline"] = lambda: bench.handoff(True)
        times = {k: [] for k in variants}
        for fn in variants.values():
            fn()
        for _ in range(frames):            # interleaved: drift hits every variant alike
            for k, fn in variants.items():
                times[k].append(fn())
        us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        note = f"{N_OPS} ops on {N} floats per frame, plus a host fill before and a host copy after"
        out = [Result("handoff", "frame with guest work injected (ctx.record)", us["injected"], "µs/frame",
                      note=note)]
        for k in ("binary", "timeline"):
            if k in us:
                out.append(Result("handoff", f"frame with guest work handed off ({k} semaphores)", us[k],
                                  "µs/frame", "injected", us["injected"], note=note,
                                  extra={"difference_us_per_frame": us[k] - us["injected"]}))
        return out
    finally:
        if bench is not None:
            bench.close()
        ctx.close()
        host.close()


def main(argv=None) -> int:
    return standalone_main("injected vs semaphore hand-off per frame (prints JSON)", (run, run_async), argv)


if __name__ == "__main__":
    import sys
    sys.exit(main())
