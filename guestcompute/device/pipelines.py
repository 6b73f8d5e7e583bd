"""The one way from a kernel spec to a compute pipeline, and every limit a
kernel is checked against on that way: storage-buffer bindings per kernel,
push-constant bytes, and (for SPIR-V a caller brings) capabilities, shared
memory and validity. Shader modules, layouts and pipelines are each created
once.

Keys (Kompute re-created pipelines for every new buffer set; here new
buffers or new sizes never create anything):

- shader module     ← SHA-256 of the SPIR-V
- set layout        ← the descriptor kind of each binding (storage buffer,
                      storage image, sampled image); the push-descriptor flag
                      is the device's
- pipeline layout   ← (set layout key, push-constant size)
- pipeline          ← (module, entry point, specialization constants, layout)

Thread-safety: lookups are lock-free dict reads; modules and layouts are
created under a lock. The slow call, vkCreateComputePipelines, runs outside
it (the VkPipelineCache is internally synchronised), so warm-up threads
compile in parallel; a per-key future makes a second thread asking for the
same pipeline wait for the first instead of creating a duplicate.
"""
from __future__ import annotations

import hashlib
import struct
import threading
import time

import vulkan as vk
from vulkan import ffi

from ..spirv.compiler import is_spirv, validate
from ..errors import KernelError, UnsupportedError, check
from ..spirv.capabilities import check_capabilities, check_shared_memory
from ..spirv.reflect import reflect, workgroup_memory_size
from ..vk.descriptors import DESCRIPTOR_TYPES
from ..vk.structs import new

# Push descriptors are further capped by maxPushDescriptors (32 guaranteed).
MAX_PUSH_DESCRIPTORS = 32


class _Pending:
    """A pipeline another thread is creating. (concurrent.futures.Future
    would do, but importing concurrent.futures imports ``logging``, which an
    application's own logging.py may shadow: see guestcompute/log.py.)"""

    def __init__(self):
        self._done = threading.Event()
        self._pipeline = self._error = None

    def set_result(self, pipeline) -> None:
        self._pipeline = pipeline
        self._done.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def result(self):
        """Wait for the creating thread; its error is raised here too."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._pipeline


COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT


class Pipeline:
    """A ready compute pipeline plus what recording needs to use it."""
    __slots__ = ("handle", "layout", "set_layout", "n_bindings", "push_size", "spec", "bindings",
                 "addresses", "__weakref__")

    def __init__(self, handle, layout, set_layout, n_bindings, push_size, spec, bindings):
        self.handle = handle
        self.layout = layout
        # The two handles as integers, for the command interpreter's structs.
        self.addresses = (int(ffi.cast("uintptr_t", handle)), int(ffi.cast("uintptr_t", layout)))
        self.set_layout = set_layout
        self.n_bindings = n_bindings
        self.push_size = push_size
        self.spec = spec
        self.bindings = bindings   # tuple of (reads, writes) per binding


class Pipelines:
    """A device's pipelines: :meth:`resolve` turns a Dispatch's spec into its
    pipeline, creating it (and its module and layouts) on first use.

    ``spirv_source``: where built-in kernels' SPIR-V comes from (the SPIR-V
    cache: baked, on disk, or compiled). ``caps`` / ``limits``: what the host
    enabled and what the device allows."""

    def __init__(self, device, fns, push_descriptors: bool, vk_pipeline_cache, limits, caps, spirv_source):
        self.device = device
        self.fns = fns
        self.push_descriptors = push_descriptors
        self.vk_cache = vk_pipeline_cache if vk_pipeline_cache is not None else ffi.NULL
        self.limits = limits
        self.caps = caps
        self.spirv_source = spirv_source
        self.max_push = limits.max_push_constants
        self.max_bindings = (min(limits.max_storage_buffers, MAX_PUSH_DESCRIPTORS) if push_descriptors
                             else limits.max_storage_buffers)
        self._lock = threading.RLock()
        self._stats_lock = threading.Lock()
        self._hit_cell = threading.local()   # .n: this thread's [hit count]
        self._hit_cells: list = []
        self._modules: dict = {}
        self._set_layouts: dict = {}
        self._layouts: dict = {}
        self._pipelines: dict = {}     # full key -> Pipeline
        self._by_spec: dict = {}       # (KernelSpec, specialization constants) -> Pipeline (fast path)
        self._pending: dict = {}       # full key -> Future of a pipeline being created
        self.stats = {"pipelines_created": 0, "pipeline_hits": 0, "modules_created": 0,
                      "module_hits": 0, "layouts_created": 0, "set_layouts_created": 0,
                      "pipeline_create_seconds": 0.0}

    # -- spec -> pipeline ------------------------------------------------
    def resolve(self, spec, spirv: bytes = None, spec_constants: tuple = ()) -> "Pipeline":
        """The pipeline of ``spec`` (a Dispatch's), created on first use.
        ``spirv``: the code a user kernel brings (checked before the driver
        sees it); None renders the built-in spec through the SPIR-V cache.
        ``spec_constants``: (id, uint value) pairs after the workgroup size's."""
        pipe = self._by_spec.get((spec, tuple(spec_constants)))
        if pipe is not None:
            self.count_hit()
            return pipe
        self.check_limits(f"kernel {spec.family!r}", len(spec.bindings), spec.push_size)
        if spirv is not None:
            self.check_brought_spirv(spirv, spec.family, dict(enumerate(spec.workgroup)) | dict(spec_constants))
        else:
            spirv = self.spirv_source.get(spec.render(), spec.target_env)
        bindings = tuple((b.reads, b.writes) for b in spec.bindings)
        return self.get(spec, spirv, bindings, spec.push_size, spec_constants=spec_constants,
                        kinds=tuple(b.kind for b in spec.bindings))

    def check_limits(self, what: str, n_bindings: int, push_size: int) -> None:
        """UnsupportedError when a kernel binds more storage buffers or
        declares more push-constant bytes than this device allows."""
        if n_bindings > self.max_bindings:
            raise UnsupportedError(f"{what} has {n_bindings} storage-buffer bindings; this device allows "
                                   f"{self.max_bindings} per kernel: split it, or pack buffers together "
                                   "(split it into several kernels that each bind fewer buffers)")
        if push_size > self.max_push:
            raise UnsupportedError(f"{what} needs {push_size} bytes of push constants; this device allows "
                                   f"{self.max_push}: pass the rest in a small tensor")

    def check_brought_spirv(self, code, family: str, spec_values: dict) -> None:
        """SPIR-V brought by the caller never reaches the driver unread
        (drivers may crash on garbage): anything malformed is a KernelError;
        a capability the host did not enable, or more shared memory than the
        device has (with ``spec_values`` {SpecId: value} applied), an
        UnsupportedError."""
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
        check_capabilities(self.caps, reflection.capabilities, f"kernel {family!r}")
        check_shared_memory(self.limits, shared, f"kernel {family!r}")
        validate(code, self.target_env)

    @property
    def target_env(self) -> str:
        """The SPIR-V target environment of this device as the host declared it."""
        api = min(self.caps.api_version, self.limits.api_version, (1, 3))
        return f"vulkan{api[0]}.{api[1]}"

    # -- modules ---------------------------------------------------------
    def module(self, spirv: bytes):
        key = hashlib.sha256(spirv).hexdigest()
        with self._lock:
            mod = self._modules.get(key)
            if mod is not None:
                self.stats["module_hits"] += 1
                return key, mod
            code = ffi.new("char[]", spirv)
            info = new("VkShaderModuleCreateInfo", codeSize=len(spirv),
                       pCode=ffi.cast("uint32_t *", code))
            out = ffi.new("VkShaderModule *")
            check("vkCreateShaderModule", self.fns.vkCreateShaderModule(self.device, info, ffi.NULL, out))
            self._modules[key] = out[0]
            self.stats["modules_created"] += 1
            return key, out[0]

    # -- layouts ---------------------------------------------------------
    def set_layout(self, kinds: tuple):
        """The descriptor set layout of bindings of ``kinds`` ("buffer",
        "storage" image, "sampled" image), one per binding, in order."""
        with self._lock:
            sl = self._set_layouts.get(kinds)
            if sl is not None:
                return sl
            binds = [dict(binding=i, descriptorType=DESCRIPTOR_TYPES[k], descriptorCount=1, stageFlags=COMPUTE)
                     for i, k in enumerate(kinds)]
            flags = vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if self.push_descriptors else 0
            info = new("VkDescriptorSetLayoutCreateInfo", flags=flags, bindingCount=len(kinds),
                       pBindings=binds if binds else ffi.NULL)
            out = ffi.new("VkDescriptorSetLayout *")
            check("vkCreateDescriptorSetLayout",
                  self.fns.vkCreateDescriptorSetLayout(self.device, info, ffi.NULL, out))
            self._set_layouts[kinds] = out[0]
            self.stats["set_layouts_created"] += 1
            return out[0]

    def pipeline_layout(self, kinds: tuple, push_size: int):
        key = (kinds, push_size)
        with self._lock:
            pl = self._layouts.get(key)
            if pl is not None:
                return pl
            sl = ffi.new("VkDescriptorSetLayout[]", [self.set_layout(kinds)])
            ranges = [dict(stageFlags=COMPUTE, offset=0, size=push_size)] if push_size else []
            info = new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sl,
                       pushConstantRangeCount=len(ranges), pPushConstantRanges=ranges or ffi.NULL)
            out = ffi.new("VkPipelineLayout *")
            check("vkCreatePipelineLayout", self.fns.vkCreatePipelineLayout(self.device, info, ffi.NULL, out))
            self._layouts[key] = out[0]
            self.stats["layouts_created"] += 1
            return out[0]

    # -- pipelines -------------------------------------------------------
    def count_hit(self, n: int = 1) -> None:
        # `+=` on a shared dict item is not atomic (concurrent recorders would
        # lose counts) and a lock costs the recording hot path more than a
        # counter per thread, summed by hits(). (Recorders add up their hits
        # and report them when their block ends.)
        try:
            self._hit_cell.n[0] += n
        except AttributeError:
            cell = self._hit_cell.n = [n]
            with self._stats_lock:
                self._hit_cells.append(cell)

    def hits(self) -> int:
        """Pipeline lookups that found an existing pipeline, all threads."""
        return self.stats["pipeline_hits"] + sum(c[0] for c in list(self._hit_cells))

    def lookup(self, spec, spec_constants: tuple = ()):
        """The pipeline of a spec if it already exists (lock-free)."""
        return self._by_spec.get((spec, tuple(spec_constants)))

    def get(self, spec, spirv: bytes, bindings: tuple, push_size: int, entry: str = "main",
            spec_constants: tuple = (), kinds: tuple = None) -> Pipeline:
        """Pipeline for ``spec`` whose code is ``spirv``. ``bindings`` is a
        tuple of (reads, writes) per binding, ``kinds`` their descriptor kinds
        (default: all storage buffers); ``spec_constants`` extra (id, uint
        value) pairs after the workgroup size (ids 0..2)."""
        kinds = tuple(kinds) if kinds is not None else ("buffer",) * len(bindings)
        spec_constants = tuple(spec_constants)
        fast = (spec, spec_constants)
        hit = self._by_spec.get(fast)
        if hit is not None:
            self.count_hit()
            return hit
        with self._lock:
            mod_key, module = self.module(spirv)
            layout = self.pipeline_layout(kinds, push_size)
            set_layout = self.set_layout(kinds)
            consts = tuple((i, v) for i, v in enumerate(spec.workgroup)) + tuple(spec_constants)
            key = (mod_key, entry, consts, kinds, push_size)
            pipe = self._pipelines.get(key)
            if pipe is not None:
                self.count_hit()
                self._by_spec[fast] = pipe
                return pipe
            pending = self._pending.get(key)
            creator = pending is None
            if creator:
                pending = self._pending[key] = _Pending()
        if not creator:
            pipe = pending.result()          # another thread creates it; re-raises its error
            with self._lock:
                self.count_hit()
                self._by_spec[fast] = pipe
            return pipe
        try:
            handle, seconds = self._create(module, entry, consts, layout)
        except BaseException as e:
            with self._lock:
                del self._pending[key]
            pending.set_exception(e)
            raise
        pipe = Pipeline(handle, layout, set_layout, len(bindings), push_size, spec, bindings)
        with self._lock:
            self._pipelines[key] = pipe
            self._by_spec[fast] = pipe
            del self._pending[key]
            self.stats["pipelines_created"] += 1
            self.stats["pipeline_create_seconds"] += seconds
        pending.set_result(pipe)
        return pipe

    def _create(self, module, entry: str, consts: tuple, layout):
        """(VkPipeline, seconds the driver took); called without the lock."""
        entries = [dict(constantID=cid, offset=4 * i, size=4) for i, (cid, _) in enumerate(consts)]
        data = struct.pack(f"<{len(consts)}I", *(v for _, v in consts))
        blob = ffi.new("char[]", data)
        spec_info = new("VkSpecializationInfo", mapEntryCount=len(entries), pMapEntries=entries,
                        dataSize=len(data), pData=blob)
        name = ffi.new("char[]", entry.encode())
        stage = dict(stage=COMPUTE, module=module, pName=name, pSpecializationInfo=spec_info)
        info = new("VkComputePipelineCreateInfo", stage=new("VkPipelineShaderStageCreateInfo", **stage)[0],
                   layout=layout, basePipelineIndex=-1)
        out = ffi.new("VkPipeline *")
        t0 = time.perf_counter()
        check("vkCreateComputePipelines",
              self.fns.vkCreateComputePipelines(self.device, self.vk_cache, 1, info, ffi.NULL, out))
        return out[0], time.perf_counter() - t0

    def destroy(self):
        d, f = self.device, self.fns
        for p in self._pipelines.values():
            f.vkDestroyPipeline(d, p.handle, ffi.NULL)
        for pl in self._layouts.values():
            f.vkDestroyPipelineLayout(d, pl, ffi.NULL)
        for sl in self._set_layouts.values():
            f.vkDestroyDescriptorSetLayout(d, sl, ffi.NULL)
        for m in self._modules.values():
            f.vkDestroyShaderModule(d, m, ffi.NULL)
        self._pipelines.clear(); self._layouts.clear(); self._set_layouts.clear()
        self._modules.clear(); self._by_spec.clear()

    def live_objects(self) -> int:
        return len(self._pipelines) + len(self._layouts) + len(self._set_layouts) + len(self._modules)
