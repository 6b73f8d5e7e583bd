"""Context: guestcompute's face for one VkDevice — adopted from a host, or
created standalone for scripts, tests and benchmarks.

A Context only delegates: the device's services live in
:class:`~guestcompute.device.device.Device` (``ctx.device``), recording in
:mod:`guestcompute.recording`, planning in :mod:`guestcompute.ops`. What it
adds is the factories (tensors, recorders, programs, kernels, hand-off
submissions) and the order of teardown.
"""
from __future__ import annotations

import itertools
import math

from vulkan import ffi, lib

from .host.caps import HostCaps, declared_caps
from .host.declarations import as_handle, check_queue_family
from .host.requirements import requirements
from .warmup import WarmupReport, warm
from .device.caps import DeviceLimits
from .device.device import Device
from .device.shared_memory import ExportedMemory
from .device.shared_timeline import SharedTimeline
from .dtypes import as_dtype, host_array
from .errors import InvalidArgumentError
from .interop.cuda_driver import driver as cuda_driver
from .interop.cuda_timeline import CudaTimeline
from .ops.hash_grid import HashGrid
from .ops.kernel_watch import KernelWatcher
from .ops.user_kernel import UserKernel, build as build_user_kernel
from .ops.memo import CallMemo
from .ops.mlp import Network
from .recording.handoff import Submission, Submitter, submit
from .recording.print_log import PrintLogs
from .recording.program import Program, ProgramPool
from .recording.recorder import Recorder
from .recording.timing import DebugLabels, Timestamps
from .image import Image, create_image, image_from, import_image
from .tensor import Buffer, Tensor, as_shape
from .tensor_imports import import_buffer, import_memory, read_through_compute
from .vk import bootstrap

__all__ = ["Context", "DeviceLimits"]


class Context:
    """guestcompute on one device. Make one with :meth:`create` (standalone)
    or :meth:`adopt` (inside a host renderer).

    Package-internal collaborators are public attributes: ``device`` (the
    :class:`~guestcompute.device.device.Device` and its services),
    ``call_memo``, ``program_pool``, ``submitter``, ``timestamps``,
    ``debug_labels``.

    Thread-safety: tensor creation, recording, cache lookups and stats may be
    used from several threads at once; :meth:`close` stops all of them (see
    there).
    """

    # -- construction -------------------------------------------------------
    def __init__(self, *, instance, physical_device, device, queue_family_index, caps,
                 queue=None, owned=None, cache_dir=None, pipeline_cache=None, queue_lock=None,
                 persist_pipeline_cache=None, debug_utils=False):
        self.device = Device(instance=instance, physical_device=physical_device, handle=device,
                             queue_family_index=queue_family_index, caps=caps, queue=queue,
                             queue_lock=queue_lock, standalone=owned is not None, cache_dir=cache_dir,
                             pipeline_cache=pipeline_cache, persist_pipeline_cache=persist_pipeline_cache)
        self.debug_utils = bool(debug_utils)   # the instance enabled VK_EXT_debug_utils: labels work
        self.op_labels = False                 # True: a debug label around every op (recording/timing.py)
        self.cache_dir = cache_dir
        self.messenger = owned[0] if owned is not None else None
        self._owned = owned            # (messenger,) when standalone
        self._destroyed = False        # close() finished destroying what the guest made
        self.call_memo = CallMemo()
        # Changes at every tensor resize and image rebind of this context:
        # remembered calls and programs compare it with the value they saw,
        # and look at their own tensors and images only when it changed.
        self.swaps = 0
        self._swap_numbers = itertools.count(1)
        self.program_pool = ProgramPool(self)
        self.kernel_watcher = KernelWatcher()
        self.print_logs = PrintLogs(self)
        self.submitter = Submitter(self)
        self.timestamps = Timestamps(self)
        self.debug_labels = DebugLabels(self)
        self.device.epochs.on_advance.append(self.submitter.poll)
        self.device.epochs.on_retire.append(self.timestamps.collect)
        self.device.epochs.on_retire.append(self.print_logs.collect)

    def count_swap(self) -> None:
        """A tensor of this context got a new Buffer, or an image a new VkImage."""
        self.swaps = next(self._swap_numbers)     # atomic: no lost count between threads

    # -- what the host handed over, and device facts -----------------------------
    instance = property(lambda self: self.device.instance, doc="The VkInstance.")
    physical_device = property(lambda self: self.device.physical_device, doc="The VkPhysicalDevice.")
    queue_family_index = property(lambda self: self.device.queue_family_index,
                                  doc="The family of the host's command buffers (and of ``queue``).")
    queue = property(lambda self: self.device.queue, doc="The adopted VkQueue, or None.")
    caps = property(lambda self: self.device.caps, doc="What the host enabled (a HostCaps).")
    limits = property(lambda self: self.device.limits, doc="The device's facts (a DeviceLimits).")
    memory = property(lambda self: self.device.memory, doc="The guest's memory manager.")

    @property
    def closed(self) -> bool:
        """True from the moment :meth:`close` begins."""
        return self.device.closed

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
            req = requirements(pd, inst_api)
            api = req.api_version
            qf = bootstrap.compute_queue_family(pd)
            features = req.feature_chain()
            exts = req.device_extensions
            core = req.core_feature_struct()
            dev = bootstrap.create_device(pd, qf, exts, features, core)
        except BaseException:
            if messenger:
                messenger.close()
            lib.vkDestroyInstance(instance, ffi.NULL)
            raise
        queue = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(dev, qf, 0, queue)
        caps = HostCaps(api, frozenset(exts), {f: True for f in req.features + req.core_features})
        ctx = cls(instance=instance, physical_device=pd, device=dev, queue_family_index=qf, caps=caps,
                  queue=queue[0], owned=(messenger,), cache_dir=cache_dir, debug_utils=validation)
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
        inst = as_handle(instance, "VkInstance", "instance")
        pd = as_handle(physical_device, "VkPhysicalDevice", "physical_device")
        dev = as_handle(device, "VkDevice", "device")
        check_queue_family(pd, queue_family_index)
        q = as_handle(queue, "VkQueue", "queue") if queue is not None else None
        caps = declared_caps(api_version, enabled_extensions, features)
        pc = None
        if pipeline_cache is not None:
            pc = as_handle(pipeline_cache, "VkPipelineCache", "pipeline_cache")
        return cls(instance=inst, physical_device=pd, device=dev, queue_family_index=queue_family_index,
                   caps=caps, queue=q, queue_lock=queue_lock, cache_dir=cache_dir, pipeline_cache=pc,
                   persist_pipeline_cache=persist_pipeline_cache, debug_utils=debug_utils)

    # -- tensors ------------------------------------------------------------------
    def empty(self, shape, dtype="float32", *, exportable: bool = False) -> Tensor:
        """An uninitialised guest-owned tensor. ``exportable=True``: its
        memory (of its own) can be shared — ``t.export()`` to another
        context, ``t.to_torch()`` / DLPack / ``__cuda_array_interface__`` to
        CUDA; needs VK_KHR_external_memory_fd (UnsupportedError otherwise).

        Thread-safety: any thread, also while other threads record."""
        self.device.check_open()
        shape = as_shape(shape)
        d = as_dtype(dtype)
        self.device.check_dtype_enabled(d)
        nbytes = math.prod(shape) * d.size
        self.device.epochs.collect()
        if exportable:
            alloc = self.device.shared_memory.create(nbytes)
        else:
            alloc = self.device.suballocator.create(nbytes)
        return Tensor(Buffer(self, alloc.buffer, alloc.size, alloc), shape, d)

    def tensor(self, data, dtype=None, *, exportable: bool = False) -> Tensor:
        """A guest-owned tensor holding a copy of ``data`` (an ndarray, a
        nested list or a number). Without ``dtype`` the data's kind picks
        one (float64 -> float32, int64 -> int32); values the dtype cannot
        hold raise (see "Host data and dtypes" in docs/integration.md).
        ``exportable``: as for :meth:`empty`.

        Thread-safety: any thread, also while other threads record (without
        host-visible memory the copy takes its turn on the queue, holding
        ``queue_lock``)."""
        self.device.check_open()
        arr = host_array(data, dtype, "ctx.tensor")
        t = self.empty(arr.shape, arr.dtype, exportable=exportable)
        if arr.size:
            self.device.transfers.write(t.buffer, 0, arr.tobytes())
        return t

    def zeros(self, shape, dtype="float32", *, exportable: bool = False) -> Tensor:
        """A guest-owned tensor of zeros. Thread-safety: as :meth:`tensor`."""
        # Device memory first: a shape too large fails before any host-side copy.
        t = self.empty(shape, dtype, exportable=exportable)
        if t.nbytes:
            self.device.transfers.write(t.buffer, 0, bytes(t.nbytes))
        return t

    # -- sharing with other devices and CUDA ---------------------------------------------
    def import_memory(self, exported: ExportedMemory) -> Tensor:
        """A tensor of this context over memory another context exported
        (``t.export()``), on the same physical device and driver: the same
        bytes, shape, dtype and strides, no copy. ``exported.fd`` stays the
        caller's (a duplicate is imported). Order the two contexts' accesses
        with a shared timeline (:meth:`shared_timeline`). The tensor is
        exportable too. The view ``exported`` describes must lie inside its
        buffer (BufferRangeError) and start at a whole element of its dtype
        (InvalidArgumentError). Thread-safety: any thread."""
        self.device.check_open()
        return import_memory(self, exported)

    def shared_timeline(self) -> SharedTimeline:
        """A timeline semaphore other contexts (:meth:`import_timeline`) and
        CUDA (:meth:`cuda_timeline`) share, for GPU-side order between them:
        ``tl.signal_point()`` / ``tl.wait_point()`` go into submissions
        (``ctx.submit(signal=..., wait=...)``, or the host's own VkSubmitInfo
        in injection mode). Needs timeline semaphores and
        VK_KHR_external_semaphore_fd. Destroyed at :meth:`close` (or
        ``tl.destroy()``). Thread-safety: any thread."""
        self.device.check_open()
        return self.device.shared_timelines.create()

    def import_timeline(self, source) -> SharedTimeline:
        """This context's handle on a shared timeline: ``source`` is another
        context's SharedTimeline (the two then draw values from one counter)
        or an fd from ``tl.export()`` in another process (values go on from
        the semaphore's current one; the fd stays the caller's)."""
        self.device.check_open()
        return self.device.shared_timelines.import_(source)

    def cuda_timeline(self, timeline: SharedTimeline) -> CudaTimeline:
        """``timeline`` imported into CUDA on the device whose UUID is this
        context's (torch's streams then wait on and signal it; see
        :class:`~guestcompute.interop.cuda_timeline.CudaTimeline`)."""
        self.device.check_open()
        if not isinstance(timeline, SharedTimeline):
            raise InvalidArgumentError(f"cuda_timeline takes a SharedTimeline (ctx.shared_timeline()), "
                                       f"got {type(timeline).__name__}")
        ordinal = cuda_driver().ordinal_for_uuid(self.device.shared_memory.uuids[0])
        return CudaTimeline(timeline, ordinal)

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
        self.device.check_open()
        return import_buffer(self, buffer, shape, dtype, offset, host_access, buffer_size, usage)

    # -- images ----------------------------------------------------------------------
    def import_image(self, image, format, extent, *, layout, host_access=None, exit_layout=None,
                     exit_access=None, mip_levels: int = 1, array_layers: int = 1, aspect: str = "color",
                     usage=None, mutable_format: bool = False, samples: int = 1,
                     image_type: str = "2d") -> Image:
        """A host VkImage as a guest resource, zero-copy.

        The host declares how it made the image — ``format`` (a name such as
        ``"rgba8_unorm"`` / ``"bgra8_srgb"`` / ``"rgba16f"`` or a VkFormat),
        ``extent`` (width, height), ``mip_levels``, ``array_layers``,
        ``usage`` (required: the VkImageUsageFlags it was created with, or
        names like ``"color_attachment|sampled|storage"``; guest ops read
        through SAMPLED and write through STORAGE),
        ``mutable_format`` (created with MUTABLE_FORMAT: an sRGB image with
        STORAGE usage is then written through a UNORM view) — and the contract of every
        recording: ``layout`` it is in when guest work begins (a preset
        name: ``"shader_read_only"``, ``"color_attachment"``,
        ``"present_src"``, ``"general"``, ``"transfer_src"``, ``"undefined"``
        (contents may be discarded)... or a VkImageLayout), ``host_access``
        (default: the preset's; e.g. ``"fragment_read"``), and ``exit_layout``
        / ``exit_access`` it wants back (default: as on entry).
        ``rec.using(img, layout=...)`` overrides them for one recording.

        Checked here (typed errors): the format's features for the declared
        usage, extent and mip count, the aspect, 2-D single-sample images
        only. Thread-safety: any thread; the host's image must outlive every
        recording that uses it, and ``img.rebind(new_image)`` follows a
        swapchain re-creation."""
        return import_image(self, image, format, extent, layout=layout, host_access=host_access,
                            exit_layout=exit_layout, exit_access=exit_access, mip_levels=mip_levels,
                            array_layers=array_layers, aspect=aspect, usage=usage,
                            mutable_format=mutable_format, samples=samples, image_type=image_type)

    def image(self, extent, format="rgba8_unorm", *, mips: int = 1, layers: int = 1, usage=None) -> Image:
        """A guest-owned 2-D image of ``extent`` (width, height), in GENERAL
        layout from creation on (made inside a recording on this thread: from
        a barrier there before its first use; nothing is submitted), with
        SAMPLED, STORAGE (where the format allows them) and TRANSFER usage.
        Read it with ``img.numpy()``, fill it with ``img.write(array)``, or
        pass it (or ``img.level(mip)``) to ops. Thread-safety: any thread."""
        return create_image(self, extent, format, mips=mips, layers=layers, usage=usage)

    def image_from(self, data, format="rgba8_unorm", *, mips: int = 1) -> Image:
        """A guest image holding ``data``: shape (height, width) or (height,
        width, channels), in the format's channel dtype and order (uint8 for
        8-bit formats, float16 for 16-bit float ones...). Mip 0 is filled;
        other levels are undefined until ``rec.generate_mips``."""
        return image_from(self, data, format, mips=mips)

    def mlp(self, layers, dtype="float16", accumulate="float32") -> Network:
        """A network of ``gc.Dense`` layers packed once into one guest buffer,
        for ``rec.mlp(x, net)`` (ops/mlp.py). Thread-safety: as :meth:`tensor`."""
        return Network(self, layers, dtype, accumulate)

    # -- recording ------------------------------------------------------------------
    def record(self, command_buffer) -> Recorder:
        """A recorder for the host's ``command_buffer`` (recording, primary or
        secondary, outside a render pass). Use it as a context manager, once:
        a recorder is single-use, and only one may be open on a command
        buffer at a time (both raise RecordingError).

        Thread-safety: any thread, each with its own Recorder and command
        buffers (from a pool only it uses); pipelines, descriptors and memory are shared."""
        self.device.check_open()
        cmd = as_handle(command_buffer, "VkCommandBuffer", "command_buffer")
        return Recorder(self, cmd)

    def run(self, fn):
        """Standalone convenience: record ``fn(rec)`` into a guest-owned
        command buffer, submit it and wait. Returns ``fn``'s result. A
        standalone context then retires the epoch; an adopted one leaves its
        epochs to the host. Thread-safety: any thread; concurrent calls take turns (one guest
        command pool) and submit holding ``queue_lock``."""
        self.device.check_open()
        result = []

        def body(cmd):
            with self.record(cmd) as rec:
                result.append(fn(rec))
        self.device.transfers.submit_and_wait(body)
        return result[0]

    def program(self, fn, params: dict = None) -> Program:
        """Record ``fn(rec)`` once into a guest-owned secondary command buffer;
        ``rec.execute(prog)`` replays it in any host command buffer. With
        ``params={"dt": "float32", ...}`` (float32, int32, uint32; GLSL's
        "float", "int", "uint" name the same 32-bit types), ``fn(rec, params)``
        gets 1-element tensors ``params.dt``... that ops read, and
        ``rec.execute(prog, params={"dt": 0.016})`` sets them per frame
        (fields left out keep the value last written). See
        :class:`~guestcompute.recording.program.Program`.

        Thread-safety: any thread; a program may be executed by several
        threads at once, each into its own command buffer."""
        self.device.check_open()
        return Program(self, fn, params)

    def kernel(self, source, *, entry: str = "main", workgroup=None, name: str = None, push_layout=None,
               defines=None, include_dirs=None, watch: bool = False, on_reload=None, prints: bool = True,
               on_print=None, language: str = "glsl", validate: bool = True) -> UserKernel:
        """A user kernel from GLSL (text or a file's path; compiled once, by glslc) or SPIR-V
        bytes: reflected, and its pipeline created now, so recording never compiles.
        ``workgroup`` sizes a kernel declared with ``local_size_*_id``; ``push_layout=[(name,
        type), ...]`` lets ``push=`` be a dict. GLSL may ``#include`` files (beside the
        includer, then in ``include_dirs``) and takes ``defines={"NAME": value}``.
        ``watch=True`` reloads it when a file changes, telling ``on_reload(kernel, error)``;
        compile errors are KernelCompileErrors at file:line:column. ``debugPrintfEXT`` calls
        reach ``on_print(kernel_name, text)`` (default: the logger) when their epoch retires;
        ``prints=False`` compiles them out; ``language="slang"`` compiles Slang (slangc).
        SPIR-V that glslc did not write (bytes, or slangc's) goes through ``spirv-val`` first;
        ``validate=False`` skips that for a trusted module newer than the installed validator.
        Record with ``rec.run_kernel(k, [resources], ...)`` or ``k(rec, ...)``; see
        docs/integration.md §17 and :mod:`guestcompute.ops.user_kernel`.

        Thread-safety: any thread, also while other threads record."""
        return build_user_kernel(self, source, entry=entry, workgroup=workgroup, name=name,
                                 push_layout=push_layout, defines=defines, include_dirs=include_dirs,
                                 watch=watch, on_reload=on_reload, prints=prints, on_print=on_print,
                                 language=language, validate=validate)

    def hash_grid(self, n_input_dims=3, n_levels=16, n_features_per_level=2, log2_hashmap_size=19,
                  base_resolution=16, per_level_scale=2.0, dtype="float32", params=None, seed=0) -> HashGrid:
        """Instant-NGP's multiresolution hash-grid encoding: a HashGrid of parameters (``params``: host
        data, else uniform in [-1e-4, 1e-4] drawn with ``seed``) that ``rec.hash_grid_encode(x, grid)``
        reads; layout and semantics in ops/hash_grid.py. Thread-safety: as :meth:`tensor`."""
        return HashGrid(self, n_input_dims, n_levels, n_features_per_level, log2_hashmap_size,
                        base_resolution, per_level_scale, dtype, params, seed)

    def submit(self, fn, *, queue=None, wait=(), signal=(), queue_family_index: int = None,
               shared=(), queue_lock=None) -> Submission:
        """Semaphore hand-off mode: record ``fn(rec)`` into a guest-owned
        command buffer and submit it to ``queue`` (default: the adopted one)
        after ``wait`` [(semaphore, value or None, stages)], signalling
        ``signal`` [(semaphore, value or None)]. Returns a
        :class:`~guestcompute.recording.handoff.Submission` to wait on. See
        :func:`guestcompute.recording.handoff.submit`.

        Thread-safety: any thread (each thread records into its own pool);
        pass the ``queue_lock`` the host submits to ``queue`` under."""
        self.device.check_open()
        return submit(self, fn, queue=queue, wait=wait, signal=signal,
                      queue_family_index=queue_family_index, shared=shared, queue_lock=queue_lock)

    def warmup(self, specs=None, *, progress=None, threads=None) -> WarmupReport:
        """Create pipelines now, ahead of the first frame, instead of while
        recording. ``specs``: None or ``"all"`` (every built-in kernel this
        context can run), a list of KernelSpecs and/or kernel family names
        (e.g. ``"map"``: all its built-in variants), or an object with a
        ``specs()`` method (a program), and ``ctx.mlp`` networks (the
        pipelines specialized to each, for tensor operands). ``progress(done,
        total)`` is called on this thread; ``threads`` creates pipelines in
        parallel (default: one per CPU, at most 8). Saves the persisted
        pipeline cache after. Returns a :class:`~guestcompute.warmup.WarmupReport`.

        Thread-safety: may run while other threads record with this context.
        """
        self.device.check_open()
        report = warm(self, specs, progress, threads)
        report.saved = self.device.pipeline_cache.save()
        return report

    # -- epochs ---------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch that recordings made now belong to. Thread-safety: any thread."""
        return self.device.epochs.current

    def advance_epoch(self) -> int:
        """Close the current epoch (e.g. once per frame) and return its number. Thread-safety: any
        thread; epochs are per context, so with several recording threads one (the frame loop) owns them."""
        return self.device.epochs.advance()

    def retire(self, epoch: int = None) -> None:
        """The host promises all GPU work recorded in epochs ≤ ``epoch`` has
        completed; guest memory freed since then is destroyed now. An epoch
        that is not closed yet (the current one or later) raises
        InvalidArgumentError: close it with :meth:`advance_epoch` first; one
        in which a recording still open began raises RecordingError.

        Without an argument (the device is idle, e.g. after
        vkDeviceWaitIdle): everything recorded before this call — the current
        epoch is closed, so what is recorded after it is not covered — and
        every fence and semaphore poll of :meth:`retire_when` is forgotten
        (the host may destroy what it handed over). While a recording is
        open, only the epochs before the one it began in retire.

        Thread-safety: any thread, but the promise covers every thread's work
        in those epochs: retire only once all of it completed."""
        self.device.epochs.retire(epoch)

    def retire_when(self, *, fence=None, semaphore=None, submission=None, epoch: int = None) -> int:
        """Retire epochs ≤ ``epoch`` once the GPU says so: when ``fence`` (a
        VkFence) is signalled, the timeline ``semaphore=(sem, value)`` reaches
        ``value``, or ``submission`` (from :meth:`submit`) completed. Without
        ``epoch`` the current epoch is closed (:meth:`advance_epoch`) and used;
        a given ``epoch`` must be closed already (as for :meth:`retire`).
        Polled, in order, by :meth:`advance_epoch`; returns the epoch.

        The fence or semaphore must stay alive until its epoch retires;
        :meth:`retire` without an argument forgets every poll at once (a
        host re-creating its swapchain destroys them after that). A fence the host
        resets before the poll sees it only delays retirement until it is
        signalled again.

        Thread-safety: any thread; the poll reads the fence's status, so do
        not reset that fence on another thread while advance_epoch runs."""
        self.device.check_open()
        return self.device.epochs.retire_when(fence=fence, semaphore=semaphore, submission=submission,
                                              epoch=epoch)

    def read_bytes(self, buf: Buffer, offset: int, size: int) -> bytes:
        """``size`` bytes of ``buf`` from ``offset`` (what ``t.numpy()`` reads): mapped memory, a staging
        copy, or (a host's buffer without TRANSFER_SRC) a compute copy first. Package-internal."""
        transfers = self.device.transfers
        if size > 0 and self.device.queue is not None and transfers.needs_compute_copy(buf):
            return read_through_compute(self, buf, offset + buf.window_offset, size)
        return transfers.read(buf, offset, size)

    # -- introspection ------------------------------------------------------------
    def timings(self, epoch: int = None) -> dict:
        """``{name: milliseconds}`` of the ``rec.timing(name)`` scopes recorded
        in ``epoch`` (default: the latest retired epoch that had any), summed
        over every recording of that epoch. Available once the epoch is
        retired (``ctx.retire``); the last few epochs are kept."""
        return self.timestamps.epoch_results(epoch)

    def cache_stats(self) -> dict:
        """Counts of cache activity: pipelines_created, pipeline_hits,
        modules_created, module_hits, layouts, SPIR-V baked/disk hits and
        compiles, descriptor sets, live buffers and bytes, and
        ``op_call_hits``: repeated op calls answered by the context's call
        memo (ops/memo.py).

        Thread-safety: any thread; a snapshot (counters are exact; recorders
        add their pipeline and call hits when their block ends)."""
        stats = self.device.cache_stats()
        stats["op_call_hits"] = self.call_memo.hits
        stats.update(self.program_pool.stats)
        stats.update(self.submitter.stats)
        return stats

    def live_objects(self) -> dict:
        """Vulkan objects guestcompute holds right now (leak checks): buffers in use, ``recycled_buffers``
        (kept for reuse), ``allocations`` (VkDeviceMemory objects), ``reserved_bytes`` of device memory and
        ``used_bytes`` of it, images, views, samplers, pipelines, descriptor sets, command buffers, fences,
        query pools, and what waits for retirement. Thread-safety: any thread; a snapshot."""
        found = self.device.live_objects()
        found["command_buffers"] = (self.program_pool.live_command_buffers
                                    + self.submitter.live_command_buffers)
        found["query_pools"] = self.timestamps.query_pools
        found["fences"] = self.submitter.fence_count
        return found

    def memory_report(self) -> dict:
        """Where guest memory is: ``allocations`` (live VkDeviceMemory
        objects) of ``max_allocations`` (maxMemoryAllocationCount),
        ``reserved_bytes`` (their size) and ``used_bytes`` (what live
        buffers and images use of it), the suballocator's ``blocks``,
        ``dedicated_buffers`` and ``recycled_buffers`` (kept for reuse), and
        per memory heap its ``size`` and what the guest ``reserved`` there —
        with ``budget`` and ``usage`` (the whole process's) when the host
        enabled VK_EXT_memory_budget (``budget_known``).
        Thread-safety: any thread; a snapshot."""
        return self.device.memory_report()

    def trim_memory(self) -> None:
        """Give idle guest memory back to the driver now: buffers kept for reuse and empty blocks (which
        otherwise go after eight epoch advances unused), not memory pending retirement. Any thread."""
        self.device.check_open()
        self.device.epochs.collect()
        self.device.suballocator.trim()

    # -- teardown -------------------------------------------------------------------
    def close(self, *, timeout: float = 10.0) -> None:
        """Destroy everything guestcompute created. The host must make sure no
        submitted work that uses guest objects is still running. A standalone
        context also destroys its device and instance. Calling it again does
        nothing. Thread-safety: any thread. From its first moment every new op,
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
        self.kernel_watcher.stop(timeout)      # no reload may create a pipeline from here on
        self.device.stop_recording(timeout)
        with self.device.transfers.submit_lock:     # a ctx.run / upload in flight finishes first
            if self._destroyed:         # another thread's close() won the race
                return
            self._destroyed = True
            self._destroy()

    def _destroy(self) -> None:
        self.device.destroy(before_memory=(self.submitter.destroy, self.program_pool.destroy,
                                           self.timestamps.destroy))
        if self._owned is not None:
            lib.vkDestroyDevice(self.device.handle, ffi.NULL)
            if self.messenger is not None:
                self.messenger.close()
            lib.vkDestroyInstance(self.device.instance, ffi.NULL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
