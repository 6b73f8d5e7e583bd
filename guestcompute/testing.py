"""HeadlessHost: a host application in a box, for tests and benchmarks.

It creates its own instance and device the way a renderer would — with the
Khronos validation layer and synchronization validation on, every message
captured in ``messages`` — and offers the few things a host does around
guestcompute: begin a command buffer, submit and wait, make its own
buffers. Two profiles:

- ``"bare"``: Vulkan 1.0, no device extensions, no optional features;
- ``"modern"``: Vulkan 1.3 (or the device's) with everything
  ``gc.requirements()`` recommends that the device supports (with
  ``bfloat16=True``, VK_KHR_shader_bfloat16 too).

The validation layer these tests run (1.4.309) predates VK_KHR_shader_bfloat16:
at vkCreateDevice it calls the extension's name and its feature struct
unknown, and for each bfloat16 shader module its spirv-val (at module
creation) and spirv-opt (at pipeline creation, to apply specialization
constants) stop at the unknown capability ("Invalid capability operand:
5116") and it calls SPV_KHR_bfloat16 unsupported, though the driver runs
the module and a spirv-val that knows the extension
(SPIRV-Tools 2025.5) passes it. A host made with ``bfloat16=True`` sets
exactly those messages aside (:func:`predates_bfloat16`, into the
messenger's ``ignored``); every other message counts, synchronization
validation's included. The suite checks the bfloat16 kernels' SPIR-V with
such a spirv-val instead.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from .host.requirements import requirements
from .context import Context
from .errors import check
from .vk import bootstrap
from .vk.functions import DeviceFunctions
from .vk.memory import MemoryManager
from .vk.commands import allocate_command_buffer, create_command_pool
from .vk.structs import new

PROFILES = ("bare", "modern")

# What layer 1.4.309 says only because it predates VK_KHR_shader_bfloat16
# (the module notes), each naming the extension, its struct type or
# capability (BFloat16TypeKHR is 5116), or a check the layer could not run
# on such a module: its capability check's word for a capability it has no
# name for, and specialization by its spirv-opt, which stops at 5116 too.
_PREDATES_BFLOAT16 = (
    "unknown VkStructureType (1000141000)",
    "VK_KHR_shader_bfloat16 is not a known extension string",
    "Invalid capability operand: 5116.",
    "SPIR-V Extension SPV_KHR_bfloat16 was declared, but that is not supported by Vulkan.",
    "SPIR-V has Capability (Unhandled OpCapability) declared",
    "attempted to apply specialization constants with spirv-opt but failed.",
)


def predates_bfloat16(text: str) -> bool:
    """Whether a validation message is one layer 1.4.309 gives only for not
    knowing VK_KHR_shader_bfloat16."""
    return any(words in text for words in _PREDATES_BFLOAT16)


class HeadlessHost:
    def __init__(self, profile: str = "modern", validation: bool = True, device=None, bfloat16: bool = False):
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}")
        self.profile = profile
        want_api = (1, 0) if profile == "bare" else (1, 3)
        self.instance, self.messenger, inst_api = bootstrap.create_instance(
            want_api, validation, app_name="guestcompute-headless-host")
        if bfloat16 and self.messenger is not None:
            self.messenger.ignore = predates_bfloat16
        self.physical_device = bootstrap.pick_physical_device(self.instance, device)
        self.queue_family_index = bootstrap.compute_queue_family(self.physical_device, need_graphics=True)
        if profile == "bare":
            self.api_version, self.extensions, self.features, chain, core = (1, 0), [], {}, None, None
        else:
            req = requirements(self.physical_device, inst_api, bfloat16=bfloat16)
            self.api_version = min(req.api_version, inst_api)
            self.extensions = list(req.device_extensions)
            self.features = {f: True for f in req.features + req.core_features}
            chain = req.feature_chain()
            core = req.core_feature_struct()
        self._feature_chain = chain
        self.device = bootstrap.create_device(self.physical_device, self.queue_family_index,
                                              self.extensions, chain, core)
        q = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(self.device, self.queue_family_index, 0, q)
        self.queue = q[0]
        self.fns = DeviceFunctions(self.device)
        self._memory = MemoryManager(self.device, self.fns, self.physical_device)
        self._buffers = []
        self._images = []
        self.command_pool = create_command_pool(self.fns, self.device, self.queue_family_index,
                                                vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        self._fence = ffi.new("VkFence *")
        check("vkCreateFence", self.fns.vkCreateFence(self.device, new("VkFenceCreateInfo"), ffi.NULL,
                                                      self._fence))

    # -- what a host hands to guestcompute -------------------------------------
    @property
    def messages(self) -> list:
        return self.messenger.messages if self.messenger is not None else []

    def adopt_kwargs(self, **extra) -> dict:
        kw = dict(instance=self.instance, physical_device=self.physical_device, device=self.device,
                  queue_family_index=self.queue_family_index, api_version=self.api_version,
                  enabled_extensions=list(self.extensions), features=dict(self.features))
        kw.update(extra)
        return kw

    def adopt(self, with_queue: bool = True, **extra) -> Context:
        if with_queue:
            extra.setdefault("queue", self.queue)
        return Context.adopt(**self.adopt_kwargs(**extra))

    # -- command buffers ------------------------------------------------------------
    def allocate(self, secondary: bool = False):
        return allocate_command_buffer(self.fns, self.device, self.command_pool, secondary)

    def begin(self, cmd=None):
        """Begin (a new or the given) primary command buffer; returns it."""
        cmd = cmd if cmd is not None else self.allocate()
        begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        check("vkBeginCommandBuffer", self.fns.vkBeginCommandBuffer(cmd, begin))
        return cmd

    def submit(self, cmds, *, end: bool = True, wait_for=(), signal=(), fence: bool = True,
               block: bool = True, free: bool = None) -> None:
        """Submit one command buffer or a list of them, in order, one
        vkQueueSubmit each (so a list is frames in flight, not one batch).

        ``end``: call vkEndCommandBuffer first (False to resubmit a buffer
        that was ended before). ``wait_for``: [(semaphore, value or None,
        stage mask or None)] the first submission waits on (None stage: all
        commands); ``signal``: [(semaphore, value or None)] the last one
        signals (a value makes it a timeline semaphore). With ``fence`` the
        last submission signals :attr:`fence` (an earlier submission that
        signals it must have been waited for). ``block``: wait for it before
        returning. ``free``: free the command buffers afterwards (default:
        when blocking); without blocking, call :meth:`wait` and then :meth:`free`."""
        cmds = list(cmds) if isinstance(cmds, (list, tuple)) else [cmds]
        free = block if free is None else free
        if free and not block:
            raise ValueError("free=True needs block=True: the buffers are still executing")
        if block and not fence:
            raise ValueError("block=True waits on the fence: pass fence=True")
        fns = self.fns
        if fence:
            check("vkResetFences", fns.vkResetFences(self.device, 1, self._fence))
        for i, cmd in enumerate(cmds):
            if end:
                check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
            first, last = i == 0, i == len(cmds) - 1
            info = self._submit_info(cmd, list(wait_for) if first else [], list(signal) if last else [])
            signalled = self.fence if (last and fence) else ffi.NULL
            check("vkQueueSubmit", fns.vkQueueSubmit(self.queue, 1, info, signalled))
        if block:
            self.wait()
        if free:
            self.free(cmds)

    @staticmethod
    def _submit_info(cmd, wait_for: list, signal: list):
        everything = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
        pnext = ffi.NULL
        if any(v is not None for _, v, *_ in wait_for) or any(v is not None for _, v in signal):
            pnext = new("VkTimelineSemaphoreSubmitInfo", waitSemaphoreValueCount=len(wait_for),
                        pWaitSemaphoreValues=[w[1] or 0 for w in wait_for] or ffi.NULL,
                        signalSemaphoreValueCount=len(signal),
                        pSignalSemaphoreValues=[v or 0 for _, v in signal] or ffi.NULL)
        # Lists, not ready cdata: new() keeps the arrays it makes alive with the struct.
        return new("VkSubmitInfo", pNext=pnext, commandBufferCount=1, pCommandBuffers=[cmd],
                   waitSemaphoreCount=len(wait_for),
                   pWaitSemaphores=[w[0] for w in wait_for] or ffi.NULL,
                   pWaitDstStageMask=[(w[2] if len(w) > 2 and w[2] is not None else everything)
                                      for w in wait_for] or ffi.NULL,
                   signalSemaphoreCount=len(signal),
                   pSignalSemaphores=[sem for sem, _ in signal] or ffi.NULL)

    @property
    def fence(self):
        """The VkFence the last :meth:`submit` signals (for ``ctx.retire_when(fence=...)``)."""
        return self._fence[0]

    def wait(self) -> None:
        """Wait for the last :meth:`submit` to finish."""
        check("vkWaitForFences", self.fns.vkWaitForFences(self.device, 1, self._fence, vk.VK_TRUE, 2**63 - 1))

    def free(self, cmds) -> None:
        """Free command buffers of this host's pool (after they finished)."""
        cmds = list(cmds) if isinstance(cmds, (list, tuple)) else [cmds]
        self.fns.vkFreeCommandBuffers(self.device, self.command_pool, len(cmds),
                                      ffi.new("VkCommandBuffer[]", cmds))

    def submit_and_wait(self, cmd, free: bool = True) -> None:
        """End, submit and wait for ``cmd`` (:meth:`submit` with its defaults)."""
        self.submit(cmd, free=free)

    def run(self, ctx, fn):
        """Record ``fn(rec)`` into a fresh command buffer of this host,
        submit it and wait; returns what ``fn`` returned."""
        cmd = self.begin()
        with ctx.record(cmd) as rec:
            value = fn(rec)
        self.submit_and_wait(cmd)
        return value

    # -- host-owned buffers -----------------------------------------------------------
    def create_buffer(self, size: int, usage: int = None):
        """A host-owned, host-visible buffer usable as vertex + storage buffer.
        Returns its VkBuffer."""
        usage = usage if usage is not None else (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        a = self._memory.create(size, usage, host_visible=True)
        self._buffers.append(a)
        return a.buffer

    def _alloc_of(self, buffer):
        for a in self._buffers:
            if a.buffer == buffer:
                return a
        raise KeyError("not a buffer of this host")

    def write_buffer(self, buffer, data: np.ndarray, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).tobytes()
        self._alloc_of(buffer).mapped[offset:offset + len(raw)] = raw

    def read_buffer(self, buffer, dtype, count: int, offset: int = 0) -> np.ndarray:
        n = np.dtype(dtype).itemsize * count
        return np.frombuffer(bytes(self._alloc_of(buffer).mapped[offset:offset + n]), dtype=dtype).copy()

    def fill_buffer(self, cmd, buffer, value: int, size: int, offset: int = 0) -> None:
        """Host work of its own: vkCmdFillBuffer (transfer stage)."""
        self.fns.vkCmdFillBuffer(cmd, buffer, offset, size, value)

    # -- host-owned images -----------------------------------------------------------
    def create_image(self, width: int, height: int, vk_format: int, usage: int, *, mips: int = 1,
                     layers: int = 1, flags: int = 0):
        """A host-owned 2-D image (optimal tiling, device-local, layout
        UNDEFINED) as a renderer makes its targets. Returns its VkImage."""
        info = new("VkImageCreateInfo", flags=flags, imageType=vk.VK_IMAGE_TYPE_2D, format=vk_format,
                   extent=dict(width=width, height=height, depth=1), mipLevels=mips, arrayLayers=layers,
                   samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL, usage=usage,
                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
        a = self._memory.create_image(info)
        self._images.append(a)
        return a.image

    def transition_image(self, cmd, image, old_layout: int, new_layout: int, src_stage: int, src_access: int,
                         dst_stage: int, dst_access: int, aspect: int = vk.VK_IMAGE_ASPECT_COLOR_BIT,
                         mips: int = 1, layers: int = 1) -> None:
        """Host work of its own: one image layout transition."""
        bar = new("VkImageMemoryBarrier", srcAccessMask=src_access, dstAccessMask=dst_access,
                  oldLayout=old_layout, newLayout=new_layout, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                  dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=image,
                  subresourceRange=dict(aspectMask=aspect, baseMipLevel=0, levelCount=mips, baseArrayLayer=0,
                                        layerCount=layers))
        self.fns.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, ffi.NULL, 0, ffi.NULL, 1, bar)

    def clear_image(self, cmd, image, rgba, layout: int = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                    mips: int = 1, layers: int = 1) -> None:
        """Host work of its own: vkCmdClearColorImage (transfer stage) with a float colour."""
        color = new("VkClearColorValue", float32=list(rgba))
        rng = new("VkImageSubresourceRange", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                  levelCount=mips, baseArrayLayer=0, layerCount=layers)
        self.fns.vkCmdClearColorImage(cmd, image, layout, color, 1, rng)

    def close(self) -> None:
        if self.device is None:
            return
        self.fns.vkDeviceWaitIdle(self.device)
        for a in self._buffers + self._images:
            self._memory.destroy(a)
        self._buffers.clear()
        self._images.clear()
        self.fns.vkDestroyFence(self.device, self._fence[0], ffi.NULL)
        self.fns.vkDestroyCommandPool(self.device, self.command_pool, ffi.NULL)
        lib.vkDestroyDevice(self.device, ffi.NULL)
        self.device = None
        if self.messenger is not None:
            self.messenger.close()
        lib.vkDestroyInstance(self.instance, ffi.NULL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def limit_binding_range(ctx: Context, nbytes: int) -> None:
    """Make ``ctx`` act as on a device whose maxStorageBufferRange is
    ``nbytes`` (at most the real one), so that tests reach the windowed
    path of ops (ops/windows.py) with small tensors. Call it right after
    adopting, before any tensor or recording."""
    dev = ctx.device
    if not 16 <= nbytes <= dev.limits.max_storage_buffer_range:
        raise ValueError(f"nbytes must be in 16..{dev.limits.max_storage_buffer_range}")
    dev.limits = dataclasses.replace(dev.limits, max_storage_buffer_range=nbytes)
    dev.memory.max_binding_range = nbytes
    dev.descriptors.max_range = nbytes
