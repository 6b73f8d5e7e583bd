"""Context: guestcompute's state for one VkDevice — adopted from a host, or
created standalone for scripts, tests and benchmarks."""
from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from . import host as _host
from .cache.pipeline_store import ContextPipelineCache
from .cache.pipelines import PipelineCache
from .cache.spirv import SpirvCache
from .dtypes import DType, as_dtype, host_array
from .errors import (BufferRangeError, ContextClosedError, DTypeError, InvalidArgumentError,
                     KernelError, RecordingError, ShapeError, UnsupportedError)
from .epochs import EpochMixin
from .recording.recorder import Recorder
from .tensor import Buffer, Tensor
from .transfers import TransferMixin, as_buffer_usage
from .vk import bootstrap
from .vk.descriptors import Descriptors
from .vk.functions import DeviceFunctions, optional_names
from .vk.memory import MemoryManager, next_uid
from .vk.structs import chain, new


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
    # Storage buffers one kernel may bind (per-stage and per-set limits).
    max_storage_buffers: int = 4


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
        subgroup_size=subgroup, timestamp_period=lim.timestampPeriod,
        max_storage_buffers=min(lim.maxPerStageDescriptorStorageBuffers, lim.maxDescriptorSetStorageBuffers))


class Context(EpochMixin, TransferMixin):
    """guestcompute on one device. Make one with :meth:`create` (standalone)
    or :meth:`adopt` (inside a host renderer).

    Thread-safety: tensor creation, recording, cache lookups and stats may be
    used from several threads at once; :meth:`close` stops all of them (see
    there).
    """

    # -- construction -------------------------------------------------------
    def __init__(self, *, instance, physical_device, device, queue_family_index, caps,
                 queue=None, owned=None, cache_dir=None, pipeline_cache=None, queue_lock=None,
                 persist_pipeline_cache=None, debug_utils=False):
        self.instance = instance
        self.debug_utils = bool(debug_utils)   # the instance enabled VK_EXT_debug_utils: labels work
        self.op_labels = False                 # True: a debug label around every op (timing.py)
        self._timestamps = None                # timing.Timestamps, made by the first rec.timing()
        self.physical_device = physical_device
        self.device = device
        self.queue_family_index = queue_family_index
        self.queue = queue
        self.caps: _host.HostCaps = caps
        self._owned = owned            # (messenger,) when standalone
        self._queue_lock = queue_lock or threading.Lock()
        # True from the moment close() begins: every later op or record raises
        # ContextClosedError (the one check the recording hot path makes).
        self.closed = False
        self._destroyed = False        # close() finished destroying what the guest made
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
        # The VkPipelineCache: the host's, or our own seeded from the per-device file.
        self._vk_pipeline_cache = ContextPipelineCache(device, self._fns, self.limits, cache_dir,
                                                       pipeline_cache, persist_pipeline_cache)
        self._pipelines = PipelineCache(device, self._fns, push, self._vk_pipeline_cache.handle,
                                        self.limits.max_push_constants)
        self._descriptors = Descriptors(device, self._fns, push, self.limits.max_storage_buffer_range)
        self._spirv = SpirvCache(cache_dir)
        self.cache_dir = cache_dir
        self._epoch = 1
        self._retired = 0
        self._graveyard = collections.deque()   # (epoch, Allocation, uid)
        self._pending_uploads = []
        self._lock = threading.RLock()
        # Open recorders: command-buffer handle value -> thread recording it.
        # close() waits on the condition for this to empty.
        self._open_recorders: dict = {}
        self._recorders_left = threading.Condition(self._lock)
        self._imported_ranges: dict = {}    # VkBuffer handle value -> [(start, end, hazard key)]
        self._submit_lock = threading.RLock()
        self._submit_depth = 0
        self._pool = None
        self._retire_waits = collections.deque()   # (epoch, done()) from retire_when, in order
        self._programs = None       # ProgramPool (program.py), made by the first ctx.program
        self._submitter = None      # Submitter (submit.py), made by the first ctx.submit

    @classmethod
    def create(cls, device=None, *, validation: bool = False, cache_dir=None,
               api_version=(1, 3)) -> "Context":
        """A standalone context with its own instance, device and queue: the
        best GPU, else lavapipe. ``device`` (or env GUESTCOMPUTE_DEVICE) is a
        name substring or an index.

        Thread-safety: any thread; the context then follows the rules below."""
        instance, messenger, inst_api = bootstrap.create_instance(api_version, validation)
        try:
            pd = bootstrap.pick_physical_device(instance, device)
            # requirements() lists only what this API version makes legal
            # (the instance enables no extension that would unlock more).
            req = _host.requirements(pd, inst_api)
            api = req.api_version
            qf = bootstrap.compute_queue_family(pd)
            features = req.feature_chain()
            exts = req.device_extensions
            dev = bootstrap.create_device(pd, qf, exts, features)
        except BaseException:
            if messenger:
                messenger.close()
            lib.vkDestroyInstance(instance, ffi.NULL)
            raise
        queue = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(dev, qf, 0, queue)
        caps = _host.HostCaps(api, frozenset(exts), {f: True for f in req.features})
        ctx = cls(instance=instance, physical_device=pd, device=dev, queue_family_index=qf, caps=caps,
                  queue=queue[0], owned=(messenger,), cache_dir=cache_dir, debug_utils=validation)
        ctx.messenger = messenger
        return ctx

    @classmethod
    def adopt(cls, *, instance, physical_device, device, queue_family_index: int, api_version=(1, 0),
              enabled_extensions=(), features=None, queue=None, queue_lock=None, cache_dir=None,
              pipeline_cache=None, persist_pipeline_cache=None, debug_utils=False) -> "Context":
        """Adopt a host's device. Handles are ``vulkan``-package cdata or ints.

        ``debug_utils=True``: the host's instance enabled VK_EXT_debug_utils,
        so ``rec.label(...)`` (and ``ctx.op_labels``) record debug labels.

        ``api_version`` / ``enabled_extensions`` / ``features`` say what the
        host *enabled* on the device (features: a dict of names, or the
        VkDeviceCreateInfo pNext chain). Nothing else is used. ``queue``
        (optional) lets ``ctx.tensor``/``t.numpy`` move data through staging
        on devices without host-visible device memory; guestcompute submits
        to it only from those calls, never from ``record``, holding
        ``queue_lock`` while it does.

        ``pipeline_cache``: the host's VkPipelineCache, used for every guest
        pipeline; guestcompute then saves nothing to disk unless
        ``persist_pipeline_cache=True``. Without it guestcompute keeps its own,
        persisted per device under the cache directory (``cache_dir``, else
        GUESTCOMPUTE_CACHE_DIR, else the XDG cache); ``persist_pipeline_cache=
        False`` keeps it in memory only.

        Thread-safety: any thread. The host keeps the device (and ``queue``)
        alive until :meth:`close`, and shares ``queue_lock`` with its own
        submissions to ``queue``.
        """
        inst = _host.as_handle(instance, "VkInstance", "instance")
        pd = _host.as_handle(physical_device, "VkPhysicalDevice", "physical_device")
        dev = _host.as_handle(device, "VkDevice", "device")
        _check_queue_family(pd, queue_family_index)
        q = _host.as_handle(queue, "VkQueue", "queue") if queue is not None else None
        if features is None:
            feats = {}
        elif isinstance(features, dict):
            feats = {str(k): bool(v) for k, v in features.items()}
        else:
            feats = _host.features_from_chain(features)
        exts = frozenset(_host.extension_names(enabled_extensions, "enabled_extensions"))
        caps = _host.HostCaps(_host.version_tuple(api_version), exts, feats)
        pc = None
        if pipeline_cache is not None:
            pc = _host.as_handle(pipeline_cache, "VkPipelineCache", "pipeline_cache")
        return cls(instance=inst, physical_device=pd, device=dev, queue_family_index=queue_family_index,
                   caps=caps, queue=q, queue_lock=queue_lock, cache_dir=cache_dir, pipeline_cache=pc,
                   persist_pipeline_cache=persist_pipeline_cache, debug_utils=debug_utils)

    # -- state checks ---------------------------------------------------------
    def _check_open(self):
        if self.closed:
            raise ContextClosedError("this guestcompute context was closed; its tensors died with it: "
                                     "create or adopt a new context")

    def _check_dtype_enabled(self, d: DType):
        if d.feature == "float16" and not self.caps.float16_storage:
            raise UnsupportedError("float16 tensors need VK_KHR_16bit_storage with storageBuffer16BitAccess "
                                   "enabled by the host (see gc.requirements())")
        if d.feature == "int8" and not self.caps.uint8_storage:
            raise UnsupportedError("uint8 tensors need VK_KHR_8bit_storage (storageBuffer8BitAccess) and "
                                   "shaderInt8 enabled by the host (see gc.requirements())")

    # -- tensors ------------------------------------------------------------------
    def empty(self, shape, dtype="float32") -> Tensor:
        """An uninitialised guest-owned tensor.

        Thread-safety: any thread, also while other threads record."""
        self._check_open()
        shape = _as_shape(shape)
        d = as_dtype(dtype)
        self._check_dtype_enabled(d)
        nbytes = math.prod(shape) * d.size
        self._collect()
        alloc = self.memory.create(nbytes)
        return Tensor(Buffer(self, alloc.buffer, alloc.size, alloc), shape, d)

    def tensor(self, data, dtype=None) -> Tensor:
        """A guest-owned tensor holding a copy of ``data`` (an ndarray, a
        nested list or a number). Without ``dtype`` the data's kind picks
        one (float64 -> float32, int64 -> int32); values the dtype cannot
        hold raise (see "Host data and dtypes" in docs/integration.md).

        Thread-safety: any thread, also while other threads record (without
        host-visible memory the copy takes its turn on the queue, holding
        ``queue_lock``)."""
        self._check_open()
        arr = host_array(data, dtype, "ctx.tensor")
        t = self.empty(arr.shape, arr.dtype)
        if arr.size:
            self._write_bytes(t.buffer, 0, arr.tobytes())
        return t

    def zeros(self, shape, dtype="float32") -> Tensor:
        """A guest-owned tensor of zeros. Thread-safety: as :meth:`tensor`."""
        # Device memory first: a shape too large fails before any host-side copy.
        t = self.empty(shape, dtype)
        if t.nbytes:
            self._write_bytes(t.buffer, 0, bytes(t.nbytes))
        return t

    def import_buffer(self, buffer, shape, dtype="float32", offset: int = 0, host_access="compute",
                      buffer_size: int = None, usage=None) -> Tensor:
        """A zero-copy tensor view of a host-owned VkBuffer (created with
        STORAGE_BUFFER usage). ``offset`` is in bytes; ``host_access`` is how
        the host itself uses the buffer (e.g. ``"vertex"``): the guest waits
        for it on entry and hands its writes back to it on exit. Give
        ``buffer_size`` so out-of-range views are caught here.

        ``usage``: the VkBufferUsageFlags the buffer was created with (an
        int, or names such as ``"storage_buffer|transfer_src"``); it must
        include STORAGE_BUFFER. ``view.numpy()`` copies with vkCmdCopyBuffer
        when it includes TRANSFER_SRC, and otherwise (also when ``usage`` is
        not given) through a compute copy into guest memory, which needs
        nothing but STORAGE_BUFFER.

        Thread-safety: any thread. The host's buffer must outlive every
        recording that uses the view."""
        self._check_open()
        handle = _host.as_handle(buffer, "VkBuffer", "buffer")
        shape = _as_shape(shape)
        d = as_dtype(dtype)
        self._check_dtype_enabled(d)
        access = _host.as_host_access(host_access)
        usage_flags = as_buffer_usage(usage)
        if usage_flags is not None and not usage_flags & vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT:
            raise InvalidArgumentError(f"the buffer's usage ({usage_flags:#x}) lacks STORAGE_BUFFER, which every "
                                       "guest op binds it as: create it with "
                                       "VK_BUFFER_USAGE_STORAGE_BUFFER_BIT")
        if not isinstance(offset, int) or offset < 0:
            raise BufferRangeError(f"offset must be a non-negative int of bytes, got {offset!r}")
        if offset % d.size:
            raise BufferRangeError(f"offset {offset} is not a multiple of the {d} element size {d.size}; "
                                   "align the offset to the element size")
        nbytes = math.prod(shape) * d.size
        if buffer_size is not None:
            if not isinstance(buffer_size, int) or buffer_size <= 0:
                raise BufferRangeError(f"buffer_size must be a positive int, got {buffer_size!r}")
            if offset + nbytes > buffer_size:
                raise BufferRangeError(f"view of {nbytes} bytes at offset {offset} does not fit the "
                                       f"{buffer_size}-byte buffer; shrink the shape or the offset")
        # The buffer is no larger than its memory requirements: a view past
        # them is out of range even when the host did not give buffer_size.
        reqs = new("VkMemoryRequirements")
        self._fns.vkGetBufferMemoryRequirements(self.device, handle, reqs)
        if max(offset + nbytes, buffer_size or 0) > reqs.size:
            raise BufferRangeError(f"view of {nbytes} bytes at offset {offset} (buffer_size={buffer_size}) "
                                   f"reaches past the buffer, which is at most {reqs.size} bytes; "
                                   "pass the real buffer_size and a view that fits")
        size = buffer_size if buffer_size is not None else offset + nbytes
        if size > self.limits.max_storage_buffer_range:
            size = self.limits.max_storage_buffer_range
            if offset + nbytes > size:
                raise UnsupportedError("imported view ends past maxStorageBufferRange")
        keys = self._import_hazard_keys(handle, offset, offset + nbytes)
        buffer = Buffer(self, handle, size, None, access, usage=usage_flags, hazard_keys=keys)
        return Tensor(buffer, shape, d, offset=offset // d.size)

    def _import_hazard_keys(self, handle, start: int, end: int) -> tuple:
        """Hazard keys of an import of bytes [start, end) of VkBuffer ``handle``:
        the key of that range (the same for every import of exactly that
        range), then the keys of earlier imports whose ranges overlap it.

        Only the later of two overlapping imports lists the other, and its
        ops both check and mark those keys: whichever of the two is written
        first, the other's access then meets a key the tracker saw, so the
        barrier is never missed, while imports of disjoint ranges (one
        vertex buffer shared out in pieces) need none between them. Keys are
        never reused, so a range stays known for the context's life; a
        handle value the host reuses for a new buffer can only add barriers."""
        with self._lock:
            ranges = self._imported_ranges.setdefault(int(ffi.cast("uintptr_t", handle)), [])
            own, overlapping = None, []
            for lo, hi, key in ranges:
                if (lo, hi) == (start, end):
                    own = key
                elif lo < end and start < hi:
                    overlapping.append(key)
            if own is None:
                own = next_uid()
                ranges.append((start, end, own))
            return (own, *overlapping)

    # -- recording ------------------------------------------------------------------
    def record(self, command_buffer) -> Recorder:
        """A recorder for the host's ``command_buffer`` (recording, primary or
        secondary, outside a render pass). Use it as a context manager, once:
        a recorder is single-use, and only one may be open on a command
        buffer at a time (both raise RecordingError).

        Thread-safety: any thread. Each thread records with its own Recorder
        into its own command buffers, allocated from a command pool only that
        thread uses (Vulkan pools are externally synchronized); pipelines,
        descriptors and memory are shared safely."""
        self._check_open()
        cmd = _host.as_handle(command_buffer, "VkCommandBuffer", "command_buffer")
        return Recorder(self, cmd)

    def _recorder_opened(self, cmd_key: int) -> None:
        """A recorder enters its block on the command buffer ``cmd_key``.
        Under the lock, so close() either sees it (and waits) or it sees
        close() (and raises)."""
        with self._lock:
            self._check_open()
            if cmd_key in self._open_recorders:
                raise RecordingError("another recorder is already open on this command buffer; record "
                                     "everything through the open one (nested ctx.record(cmd) on one "
                                     "command buffer would miss barriers between the two)")
            self._open_recorders[cmd_key] = threading.get_ident()

    def _recorder_closed(self, cmd_key: int) -> None:
        with self._lock:
            self._open_recorders.pop(cmd_key, None)
            if not self._open_recorders:
                self._recorders_left.notify_all()

    def run(self, fn):
        """Standalone convenience: record ``fn(rec)`` into a guest-owned
        command buffer, submit it and wait. Returns ``fn``'s result. A
        standalone context then retires the epoch; an adopted one leaves its
        epochs to the host.

        Thread-safety: any thread; concurrent calls take turns (one guest
        command pool) and submit holding ``queue_lock``."""
        self._check_open()
        result = []

        def body(cmd):
            with self.record(cmd) as rec:
                result.append(fn(rec))
        self._submit_and_wait(body)
        return result[0]

    def program(self, fn, params: dict = None):
        """Record ``fn(rec)`` once into a guest-owned secondary command buffer;
        ``rec.execute(prog)`` replays it in any host command buffer. With
        ``params={"dt": "float32", ...}``, ``fn(rec, params)`` gets 1-element
        tensors ``params.dt``... that ops read, and ``rec.execute(prog,
        params={"dt": 0.016})`` sets them per frame. See
        :class:`~guestcompute.recording.program.Program`.

        Thread-safety: any thread; a program may be executed by several
        threads at once, each into its own command buffer."""
        from .recording.program import Program
        self._check_open()
        return Program(self, fn, params)

    def kernel(self, source, *, entry: str = "main", workgroup=None, name: str = None,
               push_layout=None):
        """A user kernel from GLSL text (compiled once through the SPIR-V
        cache; needs glslc) or SPIR-V bytes. Bindings, their access and the
        push-constant size are reflected; its pipeline is created now, so
        recording never compiles. ``workgroup`` picks the size of a kernel
        declared with ``local_size_*_id``; ``push_layout=[(name, type), ...]``
        lets ``push=`` be a dict. Record it with ``rec.run_kernel(k,
        [tensors], push=..., groups=...)`` or ``k(rec, *tensors, ...)``.
        See :mod:`guestcompute.kernels.user` for what a kernel may declare.

        Thread-safety: any thread, also while other threads record."""
        from .kernels.user import build
        return build(self, source, entry=entry, workgroup=workgroup, name=name,
                     push_layout=push_layout)

    def submit(self, fn, *, queue=None, wait=(), signal=(), queue_family_index: int = None,
               shared=(), queue_lock=None):
        """Semaphore hand-off mode: record ``fn(rec)`` into a guest-owned
        command buffer and submit it to ``queue`` (default: the adopted one)
        after ``wait`` [(semaphore, value or None, stages)], signalling
        ``signal`` [(semaphore, value or None)]. Returns a
        :class:`~guestcompute.recording.handoff.Submission` to wait on. See
        :func:`guestcompute.recording.handoff.submit`.

        Thread-safety: any thread (each thread records into its own pool);
        pass the ``queue_lock`` the host submits to ``queue`` under."""
        from .recording.handoff import submit
        self._check_open()
        return submit(self, fn, queue=queue, wait=wait, signal=signal,
                      queue_family_index=queue_family_index, shared=shared, queue_lock=queue_lock)

    def _pipeline_for(self, d):
        pipe = self._pipelines.lookup(d.spec)
        if pipe is not None:
            self._pipelines.count_hit()
            return pipe
        spec = d.spec
        # Push descriptors are further capped by maxPushDescriptors (32 guaranteed).
        most = self.limits.max_storage_buffers
        if self._descriptors.push:
            most = min(most, 32)
        if len(spec.bindings) > most:
            raise UnsupportedError(f"kernel {spec.family!r} has {len(spec.bindings)} storage-buffer bindings; "
                                   f"this device allows {most} per kernel: "
                                   "split it into several kernels or pack buffers together")
        if spec.push_size > self.limits.max_push_constants:
            raise UnsupportedError(f"kernel {spec.family!r} needs {spec.push_size} bytes of push constants; "
                                   f"this device allows {self.limits.max_push_constants}: pass the rest "
                                   "in a small tensor")
        if d.spirv is not None:
            _check_spirv(d.spirv, self.caps, self.limits, d.spec.family,
                         dict(enumerate(spec.workgroup)) | dict(d.spec_constants))
        spirv = d.spirv if d.spirv is not None else self._spirv.get(spec.render(), spec.target_env)
        bindings = tuple((b.reads, b.writes) for b in spec.bindings)
        return self._pipelines.get(spec, spirv, bindings, spec.push_size, spec_constants=d.spec_constants)

    def warmup(self, specs=None, *, progress=None, threads=None):
        """Create pipelines now, ahead of the first frame, instead of while
        recording. ``specs``: None or ``"all"`` (every built-in kernel this
        context can run), a list of KernelSpecs and/or kernel family names
        (e.g. ``"map"``: all its built-in variants), or an object with a
        ``specs()`` method (a program). ``progress(done, total)`` is called
        on this thread; ``threads`` creates pipelines in parallel (default:
        one per CPU, at most 8). Saves the persisted pipeline cache after.
        Returns a :class:`~guestcompute.cache.warmup.WarmupReport`.

        Thread-safety: may run while other threads record with this context.
        """
        from .cache.warmup import warm
        self._check_open()
        report = warm(self, specs, progress, threads)
        report.saved = self._vk_pipeline_cache.save()
        return report

    # -- introspection ------------------------------------------------------------
    def timings(self, epoch: int = None) -> dict:
        """``{name: milliseconds}`` of the ``rec.timing(name)`` scopes recorded
        in ``epoch`` (default: the latest retired epoch that had any), summed
        over every recording of that epoch. Available once the epoch is
        retired (``ctx.retire``); the last few epochs are kept."""
        if self._timestamps is None:
            return {}
        return self._timestamps.epoch_results(epoch)

    def cache_stats(self) -> dict:
        """Counts of cache activity: pipelines_created, pipeline_hits,
        modules_created, module_hits, layouts, SPIR-V baked/disk hits and
        compiles, descriptor sets, live buffers and bytes.

        Thread-safety: any thread; a snapshot (counters are exact)."""
        stats = dict(self._pipelines.stats)
        stats["pipeline_hits"] = self._pipelines.hits()
        stats.update(self._spirv.stats)
        stats.update(self._vk_pipeline_cache.stats)
        stats["descriptor_sets"] = self._descriptors.live_sets()
        stats["live_buffers"] = self.memory.live_buffers
        stats["live_bytes"] = self.memory.live_bytes
        stats["push_descriptors"] = self._descriptors.push
        stats.update(programs_recorded=0, program_rerecords=0, program_replays=0, submissions=0)
        for helper in (self._programs, self._submitter):
            if helper is not None:
                stats.update(helper.stats)
        return stats

    def live_objects(self) -> dict:
        """Vulkan objects guestcompute holds right now (leak checks).
        Thread-safety: any thread; a snapshot."""
        return {"buffers": self.memory.live_buffers, "pipeline_objects": self._pipelines.live_objects(),
                "descriptor_sets": self._descriptors.live_sets(), "pending_free": len(self._graveyard),
                "command_buffers": sum(h.live_command_buffers for h in (self._programs, self._submitter)
                                       if h is not None),
                "retire_waits": len(self._retire_waits)}

    # -- teardown -------------------------------------------------------------------
    def close(self, *, timeout: float = 10.0) -> None:
        """Destroy everything guestcompute created. The host must make sure no
        submitted work that uses guest objects is still running. A standalone
        context also destroys its device and instance. Calling it again does
        nothing.

        Thread-safety: any thread. From its first moment every new op,
        ``ctx.record`` or tensor call on any thread raises
        ContextClosedError; then it waits (up to ``timeout`` seconds) for
        recorders open on other threads to leave their ``with`` block, whose
        exit barrier is still recorded, and for a ``ctx.run`` in flight to
        finish, and only then destroys. Raises RecordingError (destroying
        nothing) when called on a thread inside its own open recorder, or
        when recorders are still open after ``timeout`` — the context then
        stays closed to new work; call close() again once they have left."""
        if self._destroyed:
            return
        self._stop_recording(timeout)
        with self._submit_lock:         # a ctx.run / upload in flight finishes first
            if self._destroyed:         # another thread's close() won the race
                return
            self._destroyed = True
            self._destroy()

    def _stop_recording(self, timeout: float) -> None:
        """Mark the context closed and wait until no recorder is open."""
        with self._lock:
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

    def _destroy(self) -> None:
        fns, dev = self._fns, self.device
        if self._owned is not None:
            fns.vkDeviceWaitIdle(dev)
        self._retired = self._epoch + 1
        self._collect()
        self._retire_waits.clear()
        for helper in (self._submitter, self._programs):
            if helper is not None:
                helper.destroy()
        self._submitter = self._programs = None
        for staging, *_ in self._pending_uploads:
            self.memory.destroy(staging)
        self._pending_uploads.clear()
        self.memory.destroy_all()       # tensors the caller still holds die with the context
        if self._timestamps is not None:
            self._timestamps.destroy()
        self._descriptors.destroy()
        self._vk_pipeline_cache.save()      # never raises: a failed save is only a warning
        self._pipelines.destroy()
        self._vk_pipeline_cache.destroy()
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


def _check_queue_family(pd, index) -> None:
    """The family the host's command buffers come from must exist on the
    device and run compute work: guest dispatches are recorded into them."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidArgumentError(f"queue_family_index must be a non-negative int, got {index!r}")
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, ffi.NULL)
    if index >= count[0]:
        raise InvalidArgumentError(f"queue_family_index {index} is not a queue family of this device, "
                                   f"which has {count[0]} (0 to {count[0] - 1}); pass the family "
                                   "your queue and command pools were created for")
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, props)
    if not props[index].queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
        raise InvalidArgumentError(f"queue family {index} has no compute support; guestcompute records "
                                   "compute dispatches: pass a family with VK_QUEUE_COMPUTE_BIT")


def _check_spirv(code, caps, limits, family: str, spec_values: dict) -> None:
    """SPIR-V brought by the caller never reaches the driver unread (drivers
    may crash on garbage): anything malformed is a KernelError here; a
    capability the host did not enable, or more shared memory than the
    device has (with ``spec_values`` {SpecId: value} applied), an
    UnsupportedError."""
    from .cache.spirv import is_spirv, validate
    from .kernels.capabilities import check_capabilities, check_shared_memory
    from .kernels.reflect import reflect, workgroup_memory_size
    if not isinstance(code, (bytes, bytearray)) or not is_spirv(bytes(code)):
        raise KernelError("the kernel's SPIR-V is not a SPIR-V module (bad magic or length); "
                          "pass the bytes glslc or another SPIR-V compiler wrote")
    code = bytes(code)
    try:
        reflection = reflect(code)
        shared = workgroup_memory_size(code, spec_values)
    except KernelError as e:    # SpirvError: say what to do about it
        raise type(e)(f"the kernel's SPIR-V is malformed ({e}); recompile it, and check it "
                      "with spirv-val") from None
    check_capabilities(caps, reflection.capabilities, f"kernel {family!r}")
    check_shared_memory(limits, shared, f"kernel {family!r}")
    api = min(caps.api_version, limits.api_version, (1, 3))
    validate(code, f"vulkan{api[0]}.{api[1]}")


def _as_shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in dims):
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    shape = tuple(int(s) for s in dims)
    if any(s < 0 for s in shape):
        raise ShapeError(f"negative dimension in shape {shape}; dimensions must be >= 0")
    return shape
