"""Context: guestcompute's state for one VkDevice — adopted from a host, or
created standalone for scripts, tests and benchmarks."""
from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from . import host as _host
from .cache.pipelines import PipelineCache
from .cache.spirv import SpirvCache
from .dtypes import DType, as_dtype
from .errors import (BufferRangeError, ContextClosedError, InvalidArgumentError, ShapeError,
                     UnsupportedError, check)
from .record import Recorder
from .tensor import Buffer, Tensor
from .vk import bootstrap
from .vk.descriptors import Descriptors
from .vk.functions import DeviceFunctions, optional_names
from .vk.memory import STAGING_USAGE, MemoryManager
from .vk.structs import chain, new

log = logging.getLogger("guestcompute")


@dataclass(frozen=True)
class DeviceLimits:
    device_name: str
    device_type: int
    vendor_id: int
    device_id: int
    driver_version: int
    pipeline_cache_uuid: bytes
    api_version: tuple
    max_workgroup_count: tuple
    max_workgroup_size: tuple
    max_workgroup_invocations: int
    max_storage_buffer_range: int
    max_push_constants: int
    max_shared_memory: int
    min_storage_offset_alignment: int
    subgroup_size: int
    timestamp_period: float


def query_limits(pd, api: tuple) -> DeviceLimits:
    props = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, props)
    lim = props.limits
    subgroup = 1
    if api >= (1, 1):
        sub = new("VkPhysicalDeviceSubgroupProperties")
        p2 = new("VkPhysicalDeviceProperties2")
        chain(p2, sub)
        lib.vkGetPhysicalDeviceProperties2(pd, p2)
        subgroup = sub.subgroupSize
    return DeviceLimits(
        device_name=ffi.string(props.deviceName).decode(), device_type=props.deviceType,
        vendor_id=props.vendorID, device_id=props.deviceID, driver_version=props.driverVersion,
        pipeline_cache_uuid=bytes(ffi.buffer(props.pipelineCacheUUID, 16)),
        api_version=_host.version_tuple(props.apiVersion),
        max_workgroup_count=tuple(lim.maxComputeWorkGroupCount[i] for i in range(3)),
        max_workgroup_size=tuple(lim.maxComputeWorkGroupSize[i] for i in range(3)),
        max_workgroup_invocations=lim.maxComputeWorkGroupInvocations,
        max_storage_buffer_range=lim.maxStorageBufferRange,
        max_push_constants=lim.maxPushConstantsSize,
        max_shared_memory=lim.maxComputeSharedMemorySize,
        min_storage_offset_alignment=lim.minStorageBufferOffsetAlignment,
        subgroup_size=subgroup, timestamp_period=lim.timestampPeriod)


class Context:
    """guestcompute on one device. Make one with :meth:`create` (standalone)
    or :meth:`adopt` (inside a host renderer).

    Thread-safety: tensor creation, recording, cache lookups and stats may be
    used from several threads at once; :meth:`close` must not race with
    anything else.
    """

    # -- construction -------------------------------------------------------
    def __init__(self, *, instance, physical_device, device, queue_family_index, caps,
                 queue=None, owned=None, cache_dir=None, pipeline_cache=None, queue_lock=None):
        self.instance = instance
        self.physical_device = physical_device
        self.device = device
        self.queue_family_index = queue_family_index
        self.queue = queue
        self.caps: _host.HostCaps = caps
        self._owned = owned            # (messenger,) when standalone
        self._queue_lock = queue_lock or threading.Lock()
        self.closed = False
        self.limits = query_limits(physical_device, min(caps.api_version, (1, 3)))
        wanted = []
        if caps.push_descriptors:
            wanted += optional_names("VK_KHR_push_descriptor")
        if caps.api_version >= (1, 2):
            wanted += optional_names("timeline")
        elif caps.has_extension("VK_KHR_timeline_semaphore"):
            wanted += optional_names("VK_KHR_timeline_semaphore")
        self._fns = DeviceFunctions(device, wanted)
        self.memory = MemoryManager(device, self._fns, physical_device)
        push = caps.push_descriptors and self._fns.has("vkCmdPushDescriptorSetKHR")
        self._pipelines = PipelineCache(device, self._fns, push, pipeline_cache,
                                        self.limits.max_push_constants)
        self._descriptors = Descriptors(device, self._fns, push, self.limits.max_storage_buffer_range)
        self._spirv = SpirvCache(cache_dir)
        self.cache_dir = cache_dir
        self._epoch = 1
        self._retired = 0
        self._graveyard = collections.deque()   # (epoch, Allocation, uid)
        self._pending_uploads = []
        self._lock = threading.RLock()
        self._pool = None

    @classmethod
    def create(cls, device=None, *, validation: bool = False, cache_dir=None,
               api_version=(1, 3)) -> "Context":
        """A standalone context with its own instance, device and queue: the
        best GPU, else lavapipe. ``device`` (or env GUESTCOMPUTE_DEVICE) is a
        name substring or an index."""
        instance, messenger, inst_api = bootstrap.create_instance(api_version, validation)
        try:
            pd = bootstrap.pick_physical_device(instance, device)
            req = _host.requirements(pd, inst_api)
            api = min(req.api_version, inst_api)
            qf = bootstrap.compute_queue_family(pd)
            features = req.feature_chain() if api >= (1, 1) else None
            exts = req.device_extensions if api >= (1, 1) else [
                e for e in req.device_extensions if e == "VK_KHR_push_descriptor"]
            dev = bootstrap.create_device(pd, qf, exts, features)
        except BaseException:
            if messenger:
                messenger.close()
            lib.vkDestroyInstance(instance, ffi.NULL)
            raise
        queue = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(dev, qf, 0, queue)
        caps = _host.HostCaps(api, frozenset(exts), {f: True for f in req.features} if api >= (1, 1) else {})
        ctx = cls(instance=instance, physical_device=pd, device=dev, queue_family_index=qf, caps=caps,
                  queue=queue[0], owned=(messenger,), cache_dir=cache_dir)
        ctx.messenger = messenger
        return ctx

    @classmethod
    def adopt(cls, *, instance, physical_device, device, queue_family_index: int, api_version=(1, 0),
              enabled_extensions=(), features=None, queue=None, queue_lock=None, cache_dir=None,
              pipeline_cache=None) -> "Context":
        """Adopt a host's device. Handles are ``vulkan``-package cdata or ints.

        ``api_version`` / ``enabled_extensions`` / ``features`` say what the
        host *enabled* on the device (features: a dict of names, or the
        VkDeviceCreateInfo pNext chain). Nothing else is used. ``queue``
        (optional) lets ``ctx.tensor``/``t.numpy`` move data through staging
        on devices without host-visible device memory; guestcompute submits
        to it only from those calls, never from ``record``, holding
        ``queue_lock`` while it does.
        """
        inst = _host.as_handle(instance, "VkInstance", "instance")
        pd = _host.as_handle(physical_device, "VkPhysicalDevice", "physical_device")
        dev = _host.as_handle(device, "VkDevice", "device")
        if not isinstance(queue_family_index, int) or queue_family_index < 0:
            raise InvalidArgumentError("queue_family_index must be a non-negative int")
        q = _host.as_handle(queue, "VkQueue", "queue") if queue is not None else None
        if features is None:
            feats = {}
        elif isinstance(features, dict):
            feats = {str(k): bool(v) for k, v in features.items()}
        else:
            feats = _host.features_from_chain(features)
        exts = enabled_extensions
        if isinstance(exts, (str, bytes)):
            raise InvalidArgumentError("enabled_extensions must be a list of names")
        exts = frozenset(e.decode() if isinstance(e, bytes) else str(e) for e in exts)
        caps = _host.HostCaps(_host.version_tuple(api_version), exts, feats)
        pc = None
        if pipeline_cache is not None:
            pc = _host.as_handle(pipeline_cache, "VkPipelineCache", "pipeline_cache")
        return cls(instance=inst, physical_device=pd, device=dev, queue_family_index=queue_family_index,
                   caps=caps, queue=q, queue_lock=queue_lock, cache_dir=cache_dir, pipeline_cache=pc)

    # -- state checks ---------------------------------------------------------
    def _check_open(self):
        if self.closed:
            raise ContextClosedError("this guestcompute context was closed")

    def _check_dtype_enabled(self, d: DType):
        if d.feature == "float16" and not self.caps.float16_storage:
            raise UnsupportedError("float16 tensors need VK_KHR_16bit_storage with storageBuffer16BitAccess "
                                   "enabled by the host (see gc.requirements())")
        if d.feature == "int8" and not self.caps.uint8_storage:
            raise UnsupportedError("uint8 tensors need VK_KHR_8bit_storage (storageBuffer8BitAccess) and "
                                   "shaderInt8 enabled by the host (see gc.requirements())")

    # -- tensors ------------------------------------------------------------------
    def empty(self, shape, dtype="float32") -> Tensor:
        """An uninitialised guest-owned tensor."""
        self._check_open()
        shape = _as_shape(shape)
        d = as_dtype(dtype)
        self._check_dtype_enabled(d)
        nbytes = int(np.prod(shape, dtype=np.int64)) * d.size
        self._collect()
        alloc = self.memory.create(nbytes)
        return Tensor(Buffer(self, alloc.buffer, alloc.size, alloc), shape, d)

    def tensor(self, data, dtype=None) -> Tensor:
        """A guest-owned tensor holding a copy of ``data`` (array-like)."""
        arr = np.asarray(data)
        d = as_dtype(dtype if dtype is not None else (arr.dtype if arr.dtype != np.float64 else np.float32))
        arr = np.ascontiguousarray(arr, dtype=d.numpy)
        t = self.empty(arr.shape, d)
        if arr.size:
            self._write_bytes(t.buffer, 0, arr.tobytes())
        return t

    def zeros(self, shape, dtype="float32") -> Tensor:
        return self.tensor(np.zeros(_as_shape(shape), as_dtype(dtype).numpy))

    def import_buffer(self, buffer, shape, dtype="float32", offset: int = 0, host_access="compute",
                      buffer_size: int = None) -> Tensor:
        """A zero-copy tensor view of a host-owned VkBuffer (created with
        STORAGE_BUFFER usage). ``offset`` is in bytes; ``host_access`` is how
        the host itself uses the buffer (e.g. ``"vertex"``): the guest waits
        for it on entry and hands its writes back to it on exit. Give
        ``buffer_size`` so out-of-range views are caught here."""
        self._check_open()
        handle = _host.as_handle(buffer, "VkBuffer", "buffer")
        shape = _as_shape(shape)
        d = as_dtype(dtype)
        self._check_dtype_enabled(d)
        access = _host.as_host_access(host_access)
        if not isinstance(offset, int) or offset < 0:
            raise BufferRangeError(f"offset must be a non-negative int of bytes, got {offset!r}")
        if offset % d.size:
            raise BufferRangeError(f"offset {offset} is not a multiple of the {d} element size {d.size}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * d.size
        if buffer_size is not None:
            if not isinstance(buffer_size, int) or buffer_size <= 0:
                raise BufferRangeError(f"buffer_size must be a positive int, got {buffer_size!r}")
            if offset + nbytes > buffer_size:
                raise BufferRangeError(f"view of {nbytes} bytes at offset {offset} does not fit the "
                                       f"{buffer_size}-byte buffer")
        size = buffer_size if buffer_size is not None else offset + nbytes
        if size > self.limits.max_storage_buffer_range:
            size = self.limits.max_storage_buffer_range
            if offset + nbytes > size:
                raise UnsupportedError("imported view ends past maxStorageBufferRange")
        return Tensor(Buffer(self, handle, size, None, access), shape, d, offset=offset // d.size)

    # -- recording ------------------------------------------------------------------
    def record(self, command_buffer) -> Recorder:
        """A recorder for the host's ``command_buffer`` (recording, primary or
        secondary, outside a render pass). Use it as a context manager."""
        self._check_open()
        cmd = _host.as_handle(command_buffer, "VkCommandBuffer", "command_buffer")
        return Recorder(self, cmd)

    def run(self, fn):
        """Standalone convenience: record ``fn(rec)`` into a guest-owned
        command buffer, submit it and wait. Returns ``fn``'s result."""
        self._check_open()
        result = []

        def body(cmd):
            with self.record(cmd) as rec:
                result.append(fn(rec))
        self._submit_and_wait(body)
        return result[0]

    def _pipeline_for(self, d):
        pipe = self._pipelines.lookup(d.spec)
        if pipe is not None:
            self._pipelines.stats["pipeline_hits"] += 1
            return pipe
        spec = d.spec
        spirv = d.spirv if d.spirv is not None else self._spirv.get(spec.render(), spec.target_env)
        bindings = tuple((b.reads, b.writes) for b in spec.bindings)
        return self._pipelines.get(spec, spirv, bindings, spec.push_size, spec_constants=d.spec_constants)

    # -- epochs ---------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch that recordings made now belong to."""
        return self._epoch

    def advance_epoch(self) -> int:
        """Close the current epoch (e.g. once per frame) and return its number."""
        with self._lock:
            closed = self._epoch
            self._epoch += 1
            return closed

    def retire(self, epoch: int = None) -> None:
        """The host promises all GPU work recorded in epochs ≤ ``epoch`` has
        completed; guest memory freed since then is destroyed now. Without an
        argument: everything up to the current epoch (device idle)."""
        with self._lock:
            self._retired = max(self._retired, self._epoch if epoch is None else int(epoch))
        self._collect()

    def _release(self, alloc, uid, last_epoch):
        # May run from a finalizer on any thread: only enqueue.
        self._graveyard.append((last_epoch, alloc, uid))

    def _collect(self):
        keep = collections.deque()
        while self._graveyard:
            item = self._graveyard.popleft()
            epoch, alloc, uid = item
            if epoch <= self._retired:
                self._descriptors.forget_buffer(uid)
                self.memory.destroy(alloc)
            else:
                keep.append(item)
        self._graveyard.extend(keep)

    # -- data movement ------------------------------------------------------------
    def _write_bytes(self, buf: Buffer, offset: int, data: bytes):
        if buf.alloc is None:
            raise UnsupportedError("write() into an imported buffer: the host owns its contents")
        if buf.alloc.mapped is not None:
            buf.alloc.mapped[offset:offset + len(data)] = data
            self.memory.flush(buf.alloc)
            return
        staging = self.memory.create(len(data), STAGING_USAGE, host_visible=True)
        staging.mapped[0:len(data)] = data
        if self.queue is None:
            # No queue to submit on: the copy is recorded at the start of the
            # next recording, and the staging buffer retires with that epoch.
            self._pending_uploads.append((staging, buf, offset, len(data)))
            return
        region = new("VkBufferCopy", srcOffset=0, dstOffset=offset, size=len(data))

        def body(cmd):
            self._cmd_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                              vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
                              vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            self._fns.vkCmdCopyBuffer(cmd, staging.buffer, buf.handle, 1, region)
        try:
            self._submit_and_wait(body)
        finally:
            self.memory.destroy(staging)

    def _flush_pending_uploads(self, rec):
        if not self._pending_uploads:
            return
        with self._lock:
            uploads, self._pending_uploads = self._pending_uploads, []
        cmd = rec._cmd
        rec._emit_barrier(vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                          vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                          vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        for staging, buf, offset, size in uploads:
            region = new("VkBufferCopy", srcOffset=0, dstOffset=offset, size=size)
            self._fns.vkCmdCopyBuffer(cmd, staging.buffer, buf.handle, 1, region)
            from .vk.memory import next_uid
            self._graveyard.append((self._epoch, staging, next_uid()))

    def _read_bytes(self, buf: Buffer, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if buf.alloc is not None and buf.alloc.mapped is not None:
            self.memory.invalidate(buf.alloc)
            return bytes(buf.alloc.mapped[offset:offset + size])
        if self.queue is None:
            raise UnsupportedError("reading this tensor needs a staging copy: pass queue= to Context.adopt")
        staging = self.memory.create(size, STAGING_USAGE, host_visible=True)
        region = new("VkBufferCopy", srcOffset=offset, dstOffset=0, size=size)
        src_stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        if buf.host_access is not None:
            src_stages |= buf.host_access.stages

        def body(cmd):
            self._cmd_barrier(cmd, src_stages, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                              vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            self._fns.vkCmdCopyBuffer(cmd, buf.handle, staging.buffer, 1, region)
            self._cmd_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                              vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        try:
            self._submit_and_wait(body)
            self.memory.invalidate(staging)
            return bytes(staging.mapped[0:size])
        finally:
            self.memory.destroy(staging)

    def _cmd_barrier(self, cmd, src_stage, src_access, dst_stage, dst_access):
        bar = new("VkMemoryBarrier", srcAccessMask=src_access, dstAccessMask=dst_access)
        self._fns.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)

    def _command_pool(self):
        if self._pool is None:
            info = new("VkCommandPoolCreateInfo", queueFamilyIndex=self.queue_family_index,
                       flags=vk.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT)
            out = ffi.new("VkCommandPool *")
            check("vkCreateCommandPool", self._fns.vkCreateCommandPool(self.device, info, ffi.NULL, out))
            self._pool = out[0]
        return self._pool

    def _submit_and_wait(self, body):
        """Record ``body(cmd)`` into a one-time command buffer, submit, wait."""
        if self.queue is None:
            raise UnsupportedError("this context has no queue; pass queue= to Context.adopt, or record "
                                   "into your own command buffer with ctx.record(cmd)")
        fns, dev = self._fns, self.device
        with self._lock:
            pool = self._command_pool()
            alloc = new("VkCommandBufferAllocateInfo", commandPool=pool,
                        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
            out = ffi.new("VkCommandBuffer *")
            check("vkAllocateCommandBuffers", fns.vkAllocateCommandBuffers(dev, alloc, out))
        cmd = out[0]
        fence = ffi.new("VkFence *")
        try:
            begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
            check("vkBeginCommandBuffer", fns.vkBeginCommandBuffer(cmd, begin))
            body(cmd)
            check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
            check("vkCreateFence", fns.vkCreateFence(dev, new("VkFenceCreateInfo"), ffi.NULL, fence))
            cmds = ffi.new("VkCommandBuffer[1]", [cmd])
            submit = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds)
            with self._queue_lock:
                check("vkQueueSubmit", fns.vkQueueSubmit(self.queue, 1, submit, fence[0]))
            check("vkWaitForFences", fns.vkWaitForFences(dev, 1, fence, vk.VK_TRUE, 2**63 - 1))
        finally:
            if fence[0] != ffi.NULL:
                fns.vkDestroyFence(dev, fence[0], ffi.NULL)
            with self._lock:
                fns.vkFreeCommandBuffers(dev, self._pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))
        self.retire(self.advance_epoch())

    # -- introspection ------------------------------------------------------------
    def cache_stats(self) -> dict:
        """Counts of cache activity: pipelines_created, pipeline_hits,
        modules_created, module_hits, layouts, SPIR-V baked/disk hits and
        compiles, descriptor sets, live buffers and bytes."""
        stats = dict(self._pipelines.stats)
        stats.update(self._spirv.stats)
        stats["descriptor_sets"] = self._descriptors.live_sets()
        stats["live_buffers"] = self.memory.live_buffers
        stats["live_bytes"] = self.memory.live_bytes
        stats["push_descriptors"] = self._descriptors.push
        return stats

    def live_objects(self) -> dict:
        """Vulkan objects guestcompute holds right now (leak checks)."""
        return {"buffers": self.memory.live_buffers, "pipeline_objects": self._pipelines.live_objects(),
                "descriptor_sets": self._descriptors.live_sets(), "pending_free": len(self._graveyard)}

    # -- teardown -------------------------------------------------------------------
    def close(self) -> None:
        """Destroy everything guestcompute created. The host must make sure no
        submitted work that uses guest objects is still running. A standalone
        context also destroys its device and instance."""
        if self.closed:
            return
        fns, dev = self._fns, self.device
        if self._owned is not None:
            fns.vkDeviceWaitIdle(dev)
        self._retired = self._epoch + 1
        self._collect()
        for staging, *_ in self._pending_uploads:
            self.memory.destroy(staging)
        self._pending_uploads.clear()
        self.closed = True
        self._descriptors.destroy()
        self._pipelines.destroy()
        if self._pool is not None:
            fns.vkDestroyCommandPool(dev, self._pool, ffi.NULL)
            self._pool = None
        if self._owned is not None:
            lib.vkDestroyDevice(dev, ffi.NULL)
            messenger = self._owned[0]
            if messenger is not None:
                messenger.close()
            lib.vkDestroyInstance(self.instance, ffi.NULL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _as_shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ShapeError(f"negative dimension in shape {shape}")
    return shape
