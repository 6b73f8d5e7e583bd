"""Shader modules, layouts and compute pipelines, each created once.

Keys (Kompute re-created pipelines for every new buffer set; here new
buffers or new sizes never create anything):

- shader module     ← SHA-256 of the SPIR-V
- set layout        ← (number of storage-buffer bindings, push-descriptor flag)
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

from ..errors import UnsupportedError, check
from ..vk.structs import new


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
                 "__weakref__")

    def __init__(self, handle, layout, set_layout, n_bindings, push_size, spec, bindings):
        self.handle = handle
        self.layout = layout
        self.set_layout = set_layout
        self.n_bindings = n_bindings
        self.push_size = push_size
        self.spec = spec
        self.bindings = bindings   # tuple of (reads, writes) per binding


class PipelineCache:
    def __init__(self, device, fns, push_descriptors: bool, vk_pipeline_cache=None,
                 max_push_constants: int = 128):
        self.device = device
        self.fns = fns
        self.push_descriptors = push_descriptors
        self.vk_cache = vk_pipeline_cache if vk_pipeline_cache is not None else ffi.NULL
        self.max_push = max_push_constants
        self._lock = threading.RLock()
        self._stats_lock = threading.Lock()
        self._hit_cell = threading.local()   # .n: this thread's [hit count]
        self._hit_cells: list = []
        self._modules: dict = {}
        self._set_layouts: dict = {}
        self._layouts: dict = {}
        self._pipelines: dict = {}     # full key -> Pipeline
        self._by_spec: dict = {}       # KernelSpec -> Pipeline (fast path)
        self._pending: dict = {}       # full key -> Future of a pipeline being created
        self.stats = {"pipelines_created": 0, "pipeline_hits": 0, "modules_created": 0,
                      "module_hits": 0, "layouts_created": 0, "set_layouts_created": 0,
                      "pipeline_create_seconds": 0.0}

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
    def set_layout(self, n_bindings: int):
        with self._lock:
            sl = self._set_layouts.get(n_bindings)
            if sl is not None:
                return sl
            binds = [dict(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                          descriptorCount=1, stageFlags=COMPUTE) for i in range(n_bindings)]
            flags = vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if self.push_descriptors else 0
            info = new("VkDescriptorSetLayoutCreateInfo", flags=flags, bindingCount=n_bindings,
                       pBindings=binds if binds else ffi.NULL)
            out = ffi.new("VkDescriptorSetLayout *")
            check("vkCreateDescriptorSetLayout",
                  self.fns.vkCreateDescriptorSetLayout(self.device, info, ffi.NULL, out))
            self._set_layouts[n_bindings] = out[0]
            self.stats["set_layouts_created"] += 1
            return out[0]

    def pipeline_layout(self, n_bindings: int, push_size: int):
        key = (n_bindings, push_size)
        with self._lock:
            pl = self._layouts.get(key)
            if pl is not None:
                return pl
            if push_size > self.max_push:
                raise UnsupportedError(f"kernel needs {push_size} bytes of push constants; the device "
                                       f"allows {self.max_push}")
            sl = ffi.new("VkDescriptorSetLayout[]", [self.set_layout(n_bindings)])
            ranges = [dict(stageFlags=COMPUTE, offset=0, size=push_size)] if push_size else []
            info = new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sl,
                       pushConstantRangeCount=len(ranges), pPushConstantRanges=ranges or ffi.NULL)
            out = ffi.new("VkPipelineLayout *")
            check("vkCreatePipelineLayout", self.fns.vkCreatePipelineLayout(self.device, info, ffi.NULL, out))
            self._layouts[key] = out[0]
            self.stats["layouts_created"] += 1
            return out[0]

    # -- pipelines -------------------------------------------------------
    def count_hit(self) -> None:
        # `+=` on a shared dict item is not atomic (concurrent recorders would
        # lose counts) and a lock costs the recording hot path more than a
        # counter per thread, summed by hits().
        try:
            self._hit_cell.n[0] += 1
        except AttributeError:
            cell = self._hit_cell.n = [1]
            with self._stats_lock:
                self._hit_cells.append(cell)

    def hits(self) -> int:
        """Pipeline lookups that found an existing pipeline, all threads."""
        return self.stats["pipeline_hits"] + sum(c[0] for c in list(self._hit_cells))

    def lookup(self, spec):
        """The pipeline of a spec if it already exists (lock-free)."""
        return self._by_spec.get(spec)

    def get(self, spec, spirv: bytes, bindings: tuple, push_size: int, entry: str = "main",
            spec_constants: tuple = ()) -> Pipeline:
        """Pipeline for ``spec`` whose code is ``spirv``. ``bindings`` is a
        tuple of (reads, writes) per binding; ``spec_constants`` extra
        (id, uint value) pairs after the workgroup size (ids 0..2)."""
        hit = self._by_spec.get(spec)
        if hit is not None:
            self.count_hit()
            return hit
        with self._lock:
            mod_key, module = self.module(spirv)
            layout = self.pipeline_layout(len(bindings), push_size)
            set_layout = self.set_layout(len(bindings))
            consts = tuple((i, v) for i, v in enumerate(spec.workgroup)) + tuple(spec_constants)
            key = (mod_key, entry, consts, len(bindings), push_size)
            pipe = self._pipelines.get(key)
            if pipe is not None:
                self.count_hit()
                self._by_spec[spec] = pipe
                return pipe
            pending = self._pending.get(key)
            creator = pending is None
            if creator:
                pending = self._pending[key] = _Pending()
        if not creator:
            pipe = pending.result()          # another thread creates it; re-raises its error
            with self._lock:
                self.count_hit()
                self._by_spec[spec] = pipe
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
            self._by_spec[spec] = pipe
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
