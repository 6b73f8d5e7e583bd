"""Device: one VkDevice's services — function table, memory, descriptors,
pipelines, epochs, transfers — and its lifecycle (open, closing, closed).

Nothing here records into a host's command buffer; the recorder does, with
what this object provides. A :class:`~guestcompute.context.Context` owns one
Device (``ctx.device``) and is its public face.

Thread-safety: the services lock what they share; :meth:`recorder_opened`
and :meth:`stop_recording` hold ``lock`` so that ``close()`` either sees an
opening recorder (and waits for it) or the recorder sees ``close()`` (and
raises).
"""
from __future__ import annotations

import threading

from .pipeline_store import ContextPipelineCache
from ..spirv.cache import SpirvCache
from ..errors import ContextClosedError, RecordingError, UnsupportedError
from ..vk.command_stream import CommandInterpreter
from ..vk.descriptors import Descriptors
from ..vk.functions import DeviceFunctions, optional_names
from ..vk.memory import Allocation, MemoryManager, heap_budgets
from .caps import query_format_features, query_image_limits, query_limits
from .epochs import Epochs
from .image_views import ImageViews
from .imported_ranges import ImportedRanges
from .pipelines import Pipelines
from .shared_memory import SharedMemory
from .shared_timeline import SharedTimelines
from .suballocator import Suballocator
from .transfers import Transfers


def wanted_functions(caps) -> list:
    """Optional device functions to resolve for what the host enabled."""
    wanted = []
    if caps.push_descriptors:
        wanted += optional_names("VK_KHR_push_descriptor")
    if caps.api_version >= (1, 1):
        wanted += optional_names("core11")
    if caps.api_version >= (1, 2):
        wanted += optional_names("timeline")
    elif caps.has_extension("VK_KHR_timeline_semaphore"):
        wanted += optional_names("VK_KHR_timeline_semaphore")
    if caps.external_memory_fd:
        wanted += optional_names("VK_KHR_external_memory_fd")
    if caps.external_timelines:
        wanted += optional_names("VK_KHR_external_semaphore_fd")
    return wanted


class Device:
    """The services of one VkDevice (see the module notes).

    Handles: ``instance``, ``physical_device``, ``handle`` (the VkDevice),
    ``queue`` (or None) with ``queue_lock``, ``queue_family_index``. Facts:
    ``caps`` (what the host enabled), ``limits`` (what the device allows).
    Services: ``fns``, ``memory`` (VkDeviceMemory, images, counters),
    ``suballocator`` (guest buffers), ``descriptors``, ``spirv``,
    ``pipeline_cache`` (the VkPipelineCache and its file), ``pipelines``,
    ``interpreter`` (records batches of commands: vk/command_stream.py),
    ``epochs``, ``transfers``, ``imported_ranges``, ``shared_memory`` and
    ``shared_timelines`` (what other devices and CUDA share). ``standalone``: the guest
    created the device (and may retire epochs itself).
    """

    def __init__(self, *, instance, physical_device, handle, queue_family_index, caps, queue=None,
                 queue_lock=None, standalone=False, cache_dir=None, pipeline_cache=None,
                 persist_pipeline_cache=None):
        self.instance = instance
        self.physical_device = physical_device
        self.handle = handle
        self.queue_family_index = queue_family_index
        self.queue = queue
        self.queue_lock = queue_lock or threading.Lock()
        self.caps = caps
        self.standalone = standalone
        self.lock = threading.RLock()
        # True from the moment close() begins: every later op or record raises
        # ContextClosedError (the one check the recording hot path makes).
        self.closed = False
        self.limits = query_limits(instance, physical_device, caps)
        self.format_features = query_format_features(physical_device)
        self._image_limits: dict = {}       # (VkFormat, usage, flags) -> ImageLimits or None
        self.fns = DeviceFunctions(handle, wanted_functions(caps))
        # Records batches of planned commands (C when built, else Python).
        self.interpreter = CommandInterpreter(self.fns)
        self.memory = MemoryManager(handle, self.fns, physical_device, self.limits.max_storage_buffer_range,
                                    self.limits.max_memory_allocation_size,
                                    read_budget=self._heap_budgets if self.budget_known else None)
        self.suballocator = Suballocator(self.memory)
        push = caps.push_descriptors and self.fns.has("vkCmdPushDescriptorSetKHR")
        # The VkPipelineCache: the host's, or our own seeded from the per-device file.
        self.pipeline_cache = ContextPipelineCache(handle, self.fns, self.limits, cache_dir, pipeline_cache,
                                                   persist_pipeline_cache)
        self.spirv = SpirvCache(cache_dir)
        self.pipelines = Pipelines(handle, self.fns, push, self.pipeline_cache.handle, self.limits, caps,
                                   self.spirv)
        self.descriptors = Descriptors(handle, self.fns, push, self.limits.max_storage_buffer_range)
        self.epochs = Epochs(self.fns, handle, caps, self._destroy_buffer)
        self.epochs.on_advance.append(self.suballocator.tick)
        self.transfers = Transfers(self)
        self.imported_ranges = ImportedRanges()
        self.shared_memory = SharedMemory(self)
        self.shared_timelines = SharedTimelines(self)
        self.image_views = ImageViews(handle, self.fns)
        # Open recorders: command-buffer handle value -> thread recording it.
        # stop_recording() waits on the condition for this to empty.
        self._open_recorders: dict = {}
        self._recorders_left = threading.Condition(self.lock)

    # -- device facts -----------------------------------------------------------------
    @property
    def budget_known(self) -> bool:
        """The host enabled VK_EXT_memory_budget (read through Vulkan 1.1)."""
        return self.caps.has_extension("VK_EXT_memory_budget") and self.caps.api_version >= (1, 1)

    def _heap_budgets(self) -> list:
        return heap_budgets(self.physical_device, len(self.memory.heap_sizes))

    def image_limits(self, vk_format: int, usage: int, flags: int):
        """The device's ImageLimits for guest images of this kind (None:
        unsupported); asked once per kind."""
        key = (vk_format, usage, flags)
        limits = self._image_limits.get(key)
        if limits is None and key not in self._image_limits:
            limits = self._image_limits[key] = query_image_limits(self.physical_device, *key)
        return limits

    # -- state checks ---------------------------------------------------------------
    def check_open(self) -> None:
        if self.closed:
            raise ContextClosedError("this guestcompute context was closed; its tensors died with it: "
                                     "create or adopt a new context")

    def check_dtype_enabled(self, d) -> None:
        """UnsupportedError unless the host enabled the storage ``d`` needs."""
        if d.feature == "float16" and not self.caps.float16_storage:
            raise UnsupportedError("float16 tensors need VK_KHR_16bit_storage with storageBuffer16BitAccess "
                                   "enabled by the host (see gc.requirements())")
        if d.feature == "int8" and not self.caps.uint8_storage:
            raise UnsupportedError("uint8 tensors need VK_KHR_8bit_storage (storageBuffer8BitAccess) and "
                                   "shaderInt8 enabled by the host (see gc.requirements())")

    # -- open recorders -------------------------------------------------------------
    def recorder_opened(self, cmd_key: int) -> None:
        """A recorder enters its block on the command buffer ``cmd_key``."""
        with self.lock:
            self.check_open()
            if cmd_key in self._open_recorders:
                raise RecordingError("another recorder is already open on this command buffer; record "
                                     "everything through the open one (nested ctx.record(cmd) on one "
                                     "command buffer would miss barriers between the two)")
            self._open_recorders[cmd_key] = threading.get_ident()
            self.epochs.recording_opened(cmd_key)

    def recorder_closed(self, cmd_key: int) -> None:
        with self.lock:
            self._open_recorders.pop(cmd_key, None)
            self.epochs.recording_closed(cmd_key)
            if not self._open_recorders:
                self._recorders_left.notify_all()

    def recording_here(self) -> bool:
        """A recorder is open on the calling thread (a ``with ctx.record``
        block, a program's recording or ``ctx.submit``'s ``fn``): what that
        thread asks for now must be recorded there, never submitted."""
        with self.lock:
            return threading.get_ident() in self._open_recorders.values()

    def stop_recording(self, timeout: float) -> None:
        """Mark the device closed and wait until no recorder is open."""
        with self.lock:
            if threading.get_ident() in self._open_recorders.values():
                raise RecordingError("ctx.close() inside an open `with ctx.record(cmd)` block on this thread "
                                     "would destroy what that block still records with; leave the block, "
                                     "then close")
            self.closed = True
            if not self._recorders_left.wait_for(lambda: not self._open_recorders, timeout):
                n = len(self._open_recorders)
                raise RecordingError(f"ctx.close(): {n} recorder{'s' if n != 1 else ''} still open on other "
                                     f"threads after {timeout} s; every op they record now raises "
                                     "ContextClosedError: let them leave their `with` blocks, then call "
                                     "close() again")

    # -- memory -----------------------------------------------------------------------
    def _destroy_buffer(self, alloc, uid) -> None:
        # Guest buffers and guest images alike (their uids never collide).
        self.descriptors.forget_buffer(uid)
        self.image_views.forget_image(uid)
        if alloc.__class__ is Allocation:
            self.suballocator.release(alloc)
        else:
            self.memory.destroy(alloc)

    def forget_image(self, uid: int) -> None:
        """The views and descriptor entries of image ``uid`` go now."""
        self.descriptors.forget_buffer(uid)
        self.image_views.forget_image(uid)

    def retire_image(self, uid: int, last_epoch: int) -> None:
        """An imported image was dropped or rebound: its views and
        descriptors go once ``last_epoch`` (its last use) retired."""
        if last_epoch == 0:
            self.forget_image(uid)
        else:
            self.epochs.retire_later(last_epoch, lambda: self.forget_image(uid))

    def live_objects(self) -> dict:
        m = self.memory
        return {"buffers": m.live_buffers, "images": m.live_images, "allocations": m.allocations,
                "recycled_buffers": self.suballocator.recycled_buffers,
                "reserved_bytes": m.reserved_bytes, "used_bytes": m.live_bytes,
                "image_views": self.image_views.live_views, "samplers": self.image_views.live_samplers,
                "pipeline_objects": self.pipelines.live_objects(),
                "descriptor_sets": self.descriptors.live_sets(), "pending_free": self.epochs.pending,
                "retire_waits": len(self.epochs.retire_waits),
                "shared_timelines": self.shared_timelines.count}

    def memory_report(self) -> dict:
        """See Context.memory_report."""
        m, sub = self.memory, self.suballocator
        budgets = self._heap_budgets() if self.budget_known else None
        heaps = []
        for i, size in enumerate(m.heap_sizes):
            heap = {"index": i, "size": size, "device_local": m.heap_device_local[i],
                    "reserved": m.heap_reserved[i]}
            if budgets is not None:
                heap["budget"], heap["usage"] = budgets[i]
            heaps.append(heap)
        return {"allocations": m.allocations, "max_allocations": m.max_allocations,
                "reserved_bytes": m.reserved_bytes, "used_bytes": m.live_bytes, "peak_bytes": m.peak_bytes,
                "buffers": m.live_buffers, "images": m.live_images, "blocks": sub.blocks(),
                "block_bytes": sub.block_bytes(), "block_size": sub.block_size,
                "dedicated_buffers": sub.dedicated, "dedicated_from": sub.dedicated_from,
                "recycled_buffers": sub.recycled_buffers, "recycled_bytes": sub.recycled_bytes,
                "budget_known": budgets is not None, "heaps": heaps}

    def cache_stats(self) -> dict:
        stats = dict(self.pipelines.stats)
        stats["pipeline_hits"] = self.pipelines.hits()
        stats.update(self.spirv.stats)
        stats.update(self.pipeline_cache.stats)
        stats["descriptor_sets"] = self.descriptors.live_sets()
        stats["live_buffers"] = self.memory.live_buffers
        stats["live_bytes"] = self.memory.live_bytes
        stats["push_descriptors"] = self.descriptors.push
        return stats

    # -- teardown ---------------------------------------------------------------------
    def destroy(self, before_memory=()) -> None:
        """Destroy every guest object (the caller made sure nothing is
        pending). ``before_memory``: teardown callables of higher services
        (programs, submissions, timestamps), run after the graveyard and
        before memory goes."""
        fns, dev = self.fns, self.handle
        if self.standalone:
            fns.vkDeviceWaitIdle(dev)
        self.epochs.retire_all()
        for destroy in before_memory:
            destroy()
        self.shared_timelines.destroy_all()
        self.transfers.drop_pending_uploads()
        self.image_views.destroy()      # views go before the images they view
        self.suballocator.destroy_all()  # tensors the caller still holds die with the context
        self.memory.destroy_all()
        self.descriptors.destroy()
        self.pipeline_cache.save()      # never raises: a failed save is only a warning
        self.pipelines.destroy()
        self.pipeline_cache.destroy()
        self.transfers.destroy()
