"""Buffers, images and their memory at the Vulkan level: VkDeviceMemory
allocations (counted against the device's maxMemoryAllocationCount),
buffers and images with memory of their own, and the counters leak tests
and memory reports read.

Guest tensors do not come here one by one: the suballocator
(``device/suballocator.py``) carves them out of large blocks it allocates
through :meth:`MemoryManager.allocate`. Device-local memory is preferred;
where the device-local heap is also host-visible (integrated GPUs,
lavapipe, resizable BAR) uploads and downloads are plain memcpy.
"""
from __future__ import annotations

import itertools
import threading

import vulkan as vk
from vulkan import ffi, lib

from ..errors import OutOfMemoryError, UnsupportedError, check
from . import external
from .structs import chain, new

STORAGE_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)
STAGING_USAGE = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT

_DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
HOST_VISIBLE = _HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
_HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
_HOST_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
_WHOLE_SIZE = (1 << 64) - 1        # VK_WHOLE_SIZE (the vulkan package spells it -1)

_uids = itertools.count(1)


def next_uid() -> int:
    """Process-wide unique id for buffers. Caches key on it, never on VkBuffer
    handle values, which the driver reuses after a destroy."""
    return next(_uids)


class Allocation:
    """A VkBuffer bound at ``offset`` of a VkDeviceMemory (mapped if
    host-visible: ``mapped`` covers the buffer's own bytes only).

    ``block`` is the suballocator's block the buffer lives in, or None when
    the buffer has its memory to itself (staging, large tensors)."""
    __slots__ = ("buffer", "memory", "offset", "size", "mapped", "host_visible", "coherent", "device_local",
                 "past_range", "block", "usage", "reserved", "key", "shareable", "cuda")

    def __init__(self, buffer, memory, size, mapped, flags, offset=0, block=None, usage=0):
        self.buffer = buffer
        self.memory = memory
        self.offset = offset
        self.size = size
        self.mapped = mapped
        self.host_visible = bool(flags & _HOST_VISIBLE)
        self.coherent = bool(flags & _HOST_COHERENT)
        self.device_local = bool(flags & _DEVICE_LOCAL)
        self.past_range = 0     # MemoryManager.past_range_count when made, if larger than one binding reaches
        self.block = block
        self.usage = usage
        self.reserved = size     # bytes taken from the memory (the buffer's memory requirements)
        self.key = None          # the suballocator's recycle key
        self.shareable = False   # memory another device or CUDA can import (vk/external.py)
        self.cuda = None         # the memory's CUDA mapping, once made (interop/cuda_memory.py)


class ImageAllocation:
    """A VkImage (optimal tiling) bound to its own device-local VkDeviceMemory."""
    __slots__ = ("image", "memory", "size", "type_index")

    def __init__(self, image, memory, size, type_index=0):
        self.image = image
        self.memory = memory
        self.size = size
        self.type_index = type_index


class MemoryManager:
    """Allocates and frees VkDeviceMemory, creates and destroys buffers and
    images with memory of their own, and counts what is alive.

    Counters (read by ``ctx.live_objects()`` and ``ctx.memory_report()``):
    ``allocations`` (live VkDeviceMemory objects, whatever holds them),
    ``reserved_bytes`` (their total size), ``live_buffers`` /
    ``live_images`` (VkBuffers and VkImages the guest made, suballocated or
    not) and ``live_bytes`` (the bytes those use), ``peak_bytes``.

    ``max_allocations`` is the device's maxMemoryAllocationCount: an
    allocation past it is refused here with OutOfMemoryError, before the
    driver sees it (VUID-vkAllocateMemory-maxMemoryAllocationCount-04101).
    So is one larger than its heap, than ``max_allocation_size``
    (maxMemoryAllocationSize, where known) or, where ``read_budget()``
    gives (budget, usage) per heap (VK_EXT_memory_budget), than what is
    left of its heap's budget.

    Thread-safety: all methods may be called from any thread.
    """

    def __init__(self, device, fns, physical_device, max_binding_range: int | None = None,
                 max_allocation_size: int | None = None, read_budget=None):
        self.device = device
        self.fns = fns
        props = new("VkPhysicalDeviceMemoryProperties")
        lib.vkGetPhysicalDeviceMemoryProperties(physical_device, props)
        self.types = [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                      for i in range(props.memoryTypeCount)]
        self.heap_sizes = [props.memoryHeaps[i].size for i in range(props.memoryHeapCount)]
        self.heap_device_local = [bool(props.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
                                  for i in range(props.memoryHeapCount)]
        dev_props = new("VkPhysicalDeviceProperties")
        lib.vkGetPhysicalDeviceProperties(physical_device, dev_props)
        self.max_allocations = dev_props.limits.maxMemoryAllocationCount
        # Flushes and invalidations of non-coherent memory cover whole atoms.
        self.atom = max(1, dev_props.limits.nonCoherentAtomSize)
        self._lock = threading.Lock()
        self._live: dict = {}       # id(Allocation) -> Allocation, for close()
        self.allocations = 0
        self.reserved_bytes = 0
        self.heap_reserved = [0] * len(self.heap_sizes)
        self.live_buffers = 0
        self.live_images = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        # Buffers larger than one storage-buffer binding reaches (the device's
        # maxStorageBufferRange): counted, so the recorder can tell, with one
        # compare per op, whether an op just made one (see recording/recorder.py).
        self.max_binding_range = max_binding_range
        self.past_range_count = 0
        self.max_allocation_size = max_allocation_size
        self.read_budget = read_budget
        # Called with no arguments when an allocation would pass
        # max_allocations or the heap's budget, before refusing: the
        # suballocator frees its idle blocks there.
        self.on_allocation_limit = None

    # -- device memory -------------------------------------------------------------
    def pick_type(self, type_bits: int, host_visible: bool) -> int:
        """The memory type for a buffer whose requirements allow ``type_bits``."""
        if host_visible:
            prefs = (_HOST_VISIBLE | _HOST_COHERENT | _HOST_CACHED, _HOST_VISIBLE | _HOST_COHERENT, _HOST_VISIBLE)
        else:
            prefs = (_DEVICE_LOCAL | _HOST_VISIBLE | _HOST_COHERENT, _DEVICE_LOCAL, 0)
        return self._pick_type(type_bits, prefs)

    def _pick_type(self, type_bits: int, preferences) -> int:
        for want in preferences:
            for i, (flags, _) in enumerate(self.types):
                if type_bits & (1 << i) and flags & want == want:
                    return i
        raise OutOfMemoryError("vkAllocateMemory", -2, "no memory type fits this buffer")

    def prefers_dedicated(self, buffer) -> bool:
        """Whether the driver prefers (or requires) ``buffer`` to have memory
        of its own (VkMemoryDedicatedRequirements; Vulkan 1.1). False where
        that cannot be asked."""
        get = getattr(self.fns, "vkGetBufferMemoryRequirements2", None)
        if get is None:
            return False
        dedicated = new("VkMemoryDedicatedRequirements")
        reqs = new("VkMemoryRequirements2")
        chain(reqs, dedicated)
        get(self.device, new("VkBufferMemoryRequirementsInfo2", buffer=buffer), reqs)
        return bool(dedicated.prefersDedicatedAllocation or dedicated.requiresDedicatedAllocation)

    def allocate(self, size: int, type_index: int, hint: str, smaller: str = "tensors", for_buffer=None,
                 extend=None, budgeted: bool = True):
        """A VkDeviceMemory of ``size`` bytes of memory type ``type_index``.
        A size past the type's heap is refused before the driver sees it
        (VUID-vkAllocateMemory-pAllocateInfo-01713), as is one allocation
        more than maxMemoryAllocationCount. ``extend(info)``: chains more
        onto the VkMemoryAllocateInfo (export, import) and returns what to
        call if the allocation fails, or None. ``budgeted=False``: the
        memory exists already (an import), so the budget is not asked."""
        heap_index = self.types[type_index][1]
        heap = self.heap_sizes[heap_index]
        if size > heap:
            raise OutOfMemoryError("vkAllocateMemory", -2, f"{size} bytes requested but the memory "
                                   f"heap has {heap}; use smaller {smaller}")
        self.check_allocation_size(size, smaller)
        if budgeted and self.read_budget is not None:
            self._check_budget(heap_index, size, smaller)
        if self.allocations >= self.max_allocations and self.on_allocation_limit is not None:
            self.on_allocation_limit()
        with self._lock:
            if self.allocations >= self.max_allocations:
                raise OutOfMemoryError("vkAllocateMemory", -10, f"the device allows "
                                       f"{self.max_allocations} memory allocations "
                                       "(maxMemoryAllocationCount) and all are in use; free tensors "
                                       "or images, or retire epochs")
            self.allocations += 1       # counted first: two threads never both take the last one
        alloc = new("VkMemoryAllocateInfo", allocationSize=size, memoryTypeIndex=type_index)
        if for_buffer is not None:         # memory of the buffer's own, which the driver asked for
            chain(alloc, new("VkMemoryDedicatedAllocateInfo", buffer=for_buffer))
        mem = ffi.new("VkDeviceMemory *")
        on_failure = None
        try:
            if extend is not None:
                on_failure = extend(alloc)
            check("vkAllocateMemory", self.fns.vkAllocateMemory(self.device, alloc, ffi.NULL, mem), hint)
        except BaseException:
            with self._lock:
                self.allocations -= 1
            if on_failure is not None:
                on_failure()
            raise
        with self._lock:
            self.reserved_bytes += size
            self.heap_reserved[heap_index] += size
        return mem[0]

    def check_allocation_size(self, size: int, smaller: str = "tensors") -> None:
        """OutOfMemoryError when one VkDeviceMemory cannot hold ``size``
        bytes (maxMemoryAllocationSize: drivers fail or misbehave past it)."""
        limit = self.max_allocation_size
        if limit is not None and size > limit:
            raise OutOfMemoryError("vkAllocateMemory", -2, f"{size} bytes requested but one memory allocation "
                                   f"holds at most {limit} on this device (maxMemoryAllocationSize); use "
                                   f"smaller {smaller}")

    def _check_budget(self, heap_index: int, size: int, smaller: str) -> None:
        """OutOfMemoryError when ``size`` bytes more would pass what the
        process may use of the heap (its budget), after giving idle guest
        memory back. A budget of 0 means the driver does not say."""
        budget, usage = self.read_budget()[heap_index]
        if budget == 0 or usage + size <= budget:
            return
        if self.on_allocation_limit is not None:
            self.on_allocation_limit()
            budget, usage = self.read_budget()[heap_index]
            if usage + size <= budget:
                return
        raise OutOfMemoryError("vkAllocateMemory", -2, f"{size} bytes requested but the memory heap's budget "
                               f"(VK_EXT_memory_budget) has {max(0, budget - usage)} of {budget} left; free "
                               f"tensors or images, or use smaller {smaller}")

    def free(self, memory, size: int, type_index: int) -> None:
        """Free a VkDeviceMemory from :meth:`allocate` (unmapped implicitly)."""
        self.fns.vkFreeMemory(self.device, memory, ffi.NULL)
        with self._lock:
            self.allocations -= 1
            self.reserved_bytes -= size
            self.heap_reserved[self.types[type_index][1]] -= size

    def map(self, memory, size: int):
        """A host pointer to the first ``size`` bytes of ``memory``."""
        ptr = ffi.new("void **")
        check("vkMapMemory", self.fns.vkMapMemory(self.device, memory, 0, size, 0, ptr))
        return ptr[0]

    # -- buffers ---------------------------------------------------------------------
    def new_buffer(self, size: int, usage: int, pnext=None):
        """(VkBuffer, VkMemoryRequirements) of a buffer not yet bound to memory."""
        info = new("VkBufferCreateInfo", size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        if pnext is not None:
            chain(info, pnext)
        out = ffi.new("VkBuffer *")
        check("vkCreateBuffer", self.fns.vkCreateBuffer(self.device, info, ffi.NULL, out))
        reqs = new("VkMemoryRequirements")
        self.fns.vkGetBufferMemoryRequirements(self.device, out[0], reqs)
        return out[0], reqs

    def count_buffer(self, a: Allocation) -> None:
        """Count a new live buffer (and tag it when one binding cannot reach all of it)."""
        with self._lock:
            if self.max_binding_range is not None and a.size > self.max_binding_range:
                self.past_range_count += 1
                a.past_range = self.past_range_count
            self.live_buffers += 1
            self.live_bytes += a.size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def uncount_buffer(self, a: Allocation) -> None:
        with self._lock:
            self.live_buffers -= 1
            self.live_bytes -= a.size

    def create(self, size: int, usage: int = STORAGE_USAGE, host_visible: bool = False,
               dedicated: bool = False) -> Allocation:
        """A buffer of at least ``size`` bytes with memory of its own.
        ``host_visible`` forces mappable memory (staging); otherwise
        device-local is preferred. ``dedicated``: allocate it as the
        buffer's dedicated memory (the driver prefers that for it)."""
        size = max(16, (size + 15) & ~15)
        # Fail before asking the driver: an allocation larger than its heap is
        # invalid usage (VUID-vkAllocateMemory-pAllocateInfo-01713), and
        # lavapipe, whose heap is host RAM, might otherwise really try.
        largest = max(self.heap_sizes)
        if size > largest:
            raise OutOfMemoryError("vkAllocateMemory", -2, f"{size} bytes requested but the largest memory "
                                   f"heap has {largest}; use smaller tensors")
        self.check_allocation_size(size)
        buffer, reqs = self.new_buffer(size, usage)
        try:
            type_index = self.pick_type(reqs.memoryTypeBits, host_visible)
            memory = self.allocate(reqs.size, type_index, f"{size} bytes requested",
                                   for_buffer=buffer if dedicated else None)
        except BaseException:
            self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            raise
        return self._bind_own(buffer, memory, size, reqs.size, type_index, usage)

    def _bind_own(self, buffer, memory, size: int, memory_size: int, type_index: int, usage: int) -> Allocation:
        """Bind ``buffer`` at offset 0 of ``memory`` (of its own), map it if
        host-visible, and count it; both are destroyed if that fails."""
        flags = self.types[type_index][0]
        mapped = None
        try:
            check("vkBindBufferMemory", self.fns.vkBindBufferMemory(self.device, buffer, memory, 0))
            if flags & _HOST_VISIBLE:
                mapped = ffi.buffer(self.map(memory, memory_size), size)
        except BaseException:
            self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            self.free(memory, memory_size, type_index)
            raise
        a = Allocation(buffer, memory, size, mapped, flags, usage=usage)
        a.block = _Dedicated(memory_size, type_index)
        a.reserved = memory_size
        self.count_buffer(a)
        with self._lock:
            self._live[id(a)] = a
        return a

    def create_shared(self, size: int, usage: int, imported=None) -> Allocation:
        """A buffer of ``size`` bytes bound at offset 0 of memory of its own
        that another VkDevice or CUDA can share through an opaque fd: new,
        exportable memory, or with ``imported=(fd, allocation_size,
        type_index, dedicated)`` the memory behind ``fd`` (a duplicate of
        it is imported). Allocations made here are never recycled."""
        size = max(16, (size + 15) & ~15)
        self.check_allocation_size(size)
        buffer, reqs = self.new_buffer(size, usage, external.external_buffer_info())
        try:
            if imported is None:
                type_index = self.pick_type(reqs.memoryTypeBits, False)
                alloc_size = reqs.size

                def export(a):
                    external.export_allocate_info(a, buffer)
                memory = self.allocate(alloc_size, type_index, f"{size} bytes of exportable memory", extend=export)
            else:
                fd, alloc_size, type_index, dedicated = imported
                if not reqs.memoryTypeBits & (1 << type_index) or alloc_size < reqs.size:
                    raise UnsupportedError(
                        f"the exported memory (type {type_index}, {alloc_size} bytes) cannot back this "
                        f"device's buffer of {size} bytes (types {reqs.memoryTypeBits:#x}, "
                        f"{reqs.size} bytes); export and import on the same physical device")

                def import_fd(a):
                    return external.import_allocate_info(a, fd, buffer, dedicated)
                memory = self.allocate(alloc_size, type_index, "importing shared memory", extend=import_fd,
                                       budgeted=False)
        except BaseException:
            self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            raise
        a = self._bind_own(buffer, memory, size, alloc_size, type_index, usage)
        a.shareable = True
        return a

    def create_image(self, info) -> ImageAllocation:
        """A VkImage from ``info`` (a VkImageCreateInfo pointer) with its own
        device-local memory. Images count in ``live_images``."""
        out = ffi.new("VkImage *")
        check("vkCreateImage", self.fns.vkCreateImage(self.device, info, ffi.NULL, out))
        image = out[0]
        try:
            reqs = new("VkMemoryRequirements")
            self.fns.vkGetImageMemoryRequirements(self.device, image, reqs)
            type_index = self._pick_type(reqs.memoryTypeBits, (_DEVICE_LOCAL, 0))
            memory = self.allocate(reqs.size, type_index, f"an image of {reqs.size} bytes", "images")
        except BaseException:
            self.fns.vkDestroyImage(self.device, image, ffi.NULL)
            raise
        try:
            check("vkBindImageMemory", self.fns.vkBindImageMemory(self.device, image, memory, 0))
        except BaseException:
            self.fns.vkDestroyImage(self.device, image, ffi.NULL)
            self.free(memory, reqs.size, type_index)
            raise
        a = ImageAllocation(image, memory, reqs.size, type_index)
        with self._lock:
            self._live[id(a)] = a
            self.live_images += 1
            self.live_bytes += a.size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return a

    def destroy(self, a, counted: bool = True) -> None:
        """Destroy an image's Allocation, or a buffer's made by :meth:`create`
        (once; later calls do nothing). ``counted=False``: the buffer was
        already taken off the live counts (the suballocator's recycled ones)."""
        with self._lock:
            if self._live.pop(id(a), None) is None:
                return          # already destroyed (e.g. by destroy_all at close)
        if isinstance(a, ImageAllocation):
            self.fns.vkDestroyImage(self.device, a.image, ffi.NULL)
            self.free(a.memory, a.size, a.type_index)
            with self._lock:
                self.live_images -= 1
                self.live_bytes -= a.size
            return
        self.fns.vkDestroyBuffer(self.device, a.buffer, ffi.NULL)
        self.free(a.memory, a.block.size, a.block.type_index)    # unmaps it too
        if counted:
            self.uncount_buffer(a)

    def destroy_all(self) -> None:
        """Destroy every buffer and image made here still alive (context teardown)."""
        for a in list(self._live.values()):
            self.destroy(a)

    # -- host access to mapped memory -------------------------------------------------
    def _range(self, a: Allocation):
        # Whole atoms of the memory object, clipped to the buffer's block.
        lo = (a.offset // self.atom) * self.atom
        hi = -(-(a.offset + a.size) // self.atom) * self.atom
        size = _WHOLE_SIZE if hi >= a.block.size else hi - lo
        return new("VkMappedMemoryRange", memory=a.memory, offset=lo, size=size)

    def flush(self, a: Allocation) -> None:
        """Make host writes visible for non-coherent memory."""
        if not a.coherent:
            self.fns.vkFlushMappedMemoryRanges(self.device, 1, self._range(a))

    def invalidate(self, a: Allocation) -> None:
        if not a.coherent:
            self.fns.vkInvalidateMappedMemoryRanges(self.device, 1, self._range(a))


def heap_budgets(physical_device, heap_count: int) -> list:
    """(budget, usage) in bytes per memory heap, from VK_EXT_memory_budget
    (the caller checked the device supports it and Vulkan 1.1): what the
    whole process may use of each heap now, and what it uses."""
    budget = new("VkPhysicalDeviceMemoryBudgetPropertiesEXT")
    props = new("VkPhysicalDeviceMemoryProperties2")
    chain(props, budget)
    lib.vkGetPhysicalDeviceMemoryProperties2(physical_device, props)
    return [(budget.heapBudget[i], budget.heapUsage[i]) for i in range(heap_count)]


class _Dedicated:
    """What a buffer with memory of its own knows of that memory (the
    suballocator's blocks answer the same two questions)."""
    __slots__ = ("size", "type_index")

    def __init__(self, size, type_index):
        self.size = size
        self.type_index = type_index
