"""Buffers, images and their memory: one dedicated allocation per guest
buffer or image.

Dedicated allocations keep the code obvious and make "reallocated" a
precise event (a new VkBuffer with a new uid). Device-local memory is
preferred; where the device-local heap is also host-visible (integrated
GPUs, lavapipe, resizable BAR) uploads and downloads are plain memcpy.
"""
from __future__ import annotations

import itertools
import threading

import vulkan as vk
from vulkan import ffi

from ..errors import OutOfMemoryError, check
from .structs import new

STORAGE_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)
STAGING_USAGE = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT

_DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
_HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
_HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
_HOST_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT

_uids = itertools.count(1)


def next_uid() -> int:
    """Process-wide unique id for buffers. Caches key on it, never on VkBuffer
    handle values, which the driver reuses after a destroy."""
    return next(_uids)


class Allocation:
    """A VkBuffer bound to its own VkDeviceMemory (mapped if host-visible)."""
    __slots__ = ("buffer", "memory", "size", "mapped", "host_visible", "coherent", "device_local", "past_range")

    def __init__(self, buffer, memory, size, mapped, flags):
        self.buffer = buffer
        self.memory = memory
        self.size = size
        self.mapped = mapped
        self.host_visible = bool(flags & _HOST_VISIBLE)
        self.coherent = bool(flags & _HOST_COHERENT)
        self.device_local = bool(flags & _DEVICE_LOCAL)
        self.past_range = 0     # MemoryManager.past_range_count when made, if larger than one binding reaches


class ImageAllocation:
    """A VkImage (optimal tiling) bound to its own device-local VkDeviceMemory."""
    __slots__ = ("image", "memory", "size")

    def __init__(self, image, memory, size):
        self.image = image
        self.memory = memory
        self.size = size


class MemoryManager:
    """Creates and destroys buffers; counts what is alive (for leak tests).

    Thread-safety: all methods may be called from any thread.
    """

    def __init__(self, device, fns, physical_device, max_binding_range: int | None = None):
        from vulkan import lib
        self.device = device
        self.fns = fns
        props = new("VkPhysicalDeviceMemoryProperties")
        lib.vkGetPhysicalDeviceMemoryProperties(physical_device, props)
        self.types = [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                      for i in range(props.memoryTypeCount)]
        self.heap_sizes = [props.memoryHeaps[i].size for i in range(props.memoryHeapCount)]
        self._lock = threading.Lock()
        self._live: dict = {}       # id(Allocation) -> Allocation, for close()
        self.live_buffers = 0
        self.live_images = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        # Buffers larger than one storage-buffer binding reaches (the device's
        # maxStorageBufferRange): counted, so the recorder can tell, with one
        # compare per op, whether an op just made one (see recording/recorder.py).
        self.max_binding_range = max_binding_range
        self.past_range_count = 0

    def _pick_type(self, type_bits: int, preferences) -> int:
        for want in preferences:
            for i, (flags, _) in enumerate(self.types):
                if type_bits & (1 << i) and flags & want == want:
                    return i
        raise OutOfMemoryError("vkAllocateMemory", -2, "no memory type fits this buffer")

    def _allocate(self, reqs, preferences, hint: str, smaller: str) -> tuple:
        """(VkDeviceMemory, memory type index) for ``reqs``, of the first
        memory type matching ``preferences``. A size past that type's heap is
        refused before the driver sees it: such an allocation is invalid
        usage (VUID-vkAllocateMemory-pAllocateInfo-01713)."""
        type_index = self._pick_type(reqs.memoryTypeBits, preferences)
        heap = self.heap_sizes[self.types[type_index][1]]
        if reqs.size > heap:
            raise OutOfMemoryError("vkAllocateMemory", -2, f"{reqs.size} bytes requested but the memory "
                                   f"heap has {heap}; use smaller {smaller}")
        alloc = new("VkMemoryAllocateInfo", allocationSize=reqs.size, memoryTypeIndex=type_index)
        mem = ffi.new("VkDeviceMemory *")
        check("vkAllocateMemory", self.fns.vkAllocateMemory(self.device, alloc, ffi.NULL, mem), hint)
        return mem[0], type_index

    def create(self, size: int, usage: int = STORAGE_USAGE, host_visible: bool = False) -> Allocation:
        """A buffer of at least ``size`` bytes. ``host_visible`` forces
        mappable memory (staging); otherwise device-local is preferred."""
        size = max(16, (size + 15) & ~15)
        # Fail before asking the driver: an allocation larger than its heap is
        # invalid usage (VUID-vkAllocateMemory-pAllocateInfo-01713), and
        # lavapipe, whose heap is host RAM, might otherwise really try.
        largest = max(self.heap_sizes)
        if size > largest:
            raise OutOfMemoryError("vkAllocateMemory", -2, f"{size} bytes requested but the largest memory "
                                   f"heap has {largest}; use smaller tensors")
        info = new("VkBufferCreateInfo", size=size, usage=usage,
                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        out = ffi.new("VkBuffer *")
        check("vkCreateBuffer", self.fns.vkCreateBuffer(self.device, info, ffi.NULL, out))
        buffer = out[0]
        try:
            reqs = new("VkMemoryRequirements")
            self.fns.vkGetBufferMemoryRequirements(self.device, buffer, reqs)
            if host_visible:
                prefs = (_HOST_VISIBLE | _HOST_COHERENT | _HOST_CACHED, _HOST_VISIBLE | _HOST_COHERENT,
                         _HOST_VISIBLE)
            else:
                prefs = (_DEVICE_LOCAL | _HOST_VISIBLE | _HOST_COHERENT, _DEVICE_LOCAL, 0)
            memory, type_index = self._allocate(reqs, prefs, f"{size} bytes requested", "tensors")
        except BaseException:
            self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            raise
        flags = self.types[type_index][0]
        mapped = None
        try:
            check("vkBindBufferMemory", self.fns.vkBindBufferMemory(self.device, buffer, memory, 0))
            if flags & _HOST_VISIBLE:
                ptr = ffi.new("void **")
                check("vkMapMemory", self.fns.vkMapMemory(self.device, memory, 0, reqs.size, 0, ptr))
                mapped = ffi.buffer(ptr[0], size)
        except BaseException:
            self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            self.fns.vkFreeMemory(self.device, memory, ffi.NULL)
            raise
        a = Allocation(buffer, memory, size, mapped, flags)
        with self._lock:
            if self.max_binding_range is not None and size > self.max_binding_range:
                self.past_range_count += 1
                a.past_range = self.past_range_count
            self._live[id(a)] = a
            self.live_buffers += 1
            self.live_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
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
            memory, _ = self._allocate(reqs, (_DEVICE_LOCAL, 0), f"an image of {reqs.size} bytes", "images")
        except BaseException:
            self.fns.vkDestroyImage(self.device, image, ffi.NULL)
            raise
        try:
            check("vkBindImageMemory", self.fns.vkBindImageMemory(self.device, image, memory, 0))
        except BaseException:
            self.fns.vkDestroyImage(self.device, image, ffi.NULL)
            self.fns.vkFreeMemory(self.device, memory, ffi.NULL)
            raise
        a = ImageAllocation(image, memory, reqs.size)
        with self._lock:
            self._live[id(a)] = a
            self.live_images += 1
            self.live_bytes += a.size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return a

    def destroy(self, a) -> None:
        """Destroy a buffer's or an image's Allocation (once; later calls do nothing)."""
        with self._lock:
            if self._live.pop(id(a), None) is None:
                return          # already destroyed (e.g. by destroy_all at close)
        if isinstance(a, ImageAllocation):
            self.fns.vkDestroyImage(self.device, a.image, ffi.NULL)
            self.fns.vkFreeMemory(self.device, a.memory, ffi.NULL)
            with self._lock:
                self.live_images -= 1
                self.live_bytes -= a.size
            return
        if a.mapped is not None:
            self.fns.vkUnmapMemory(self.device, a.memory)
        self.fns.vkDestroyBuffer(self.device, a.buffer, ffi.NULL)
        self.fns.vkFreeMemory(self.device, a.memory, ffi.NULL)
        with self._lock:
            self.live_buffers -= 1
            self.live_bytes -= a.size

    def destroy_all(self) -> None:
        """Destroy every buffer and image still alive (context teardown)."""
        for a in list(self._live.values()):
            self.destroy(a)

    def flush(self, a: Allocation) -> None:
        """Make host writes visible for non-coherent memory."""
        if not a.coherent:
            rng = new("VkMappedMemoryRange", memory=a.memory, offset=0, size=a.size)
            self.fns.vkFlushMappedMemoryRanges(self.device, 1, rng)

    def invalidate(self, a: Allocation) -> None:
        if not a.coherent:
            rng = new("VkMappedMemoryRange", memory=a.memory, offset=0, size=a.size)
            self.fns.vkInvalidateMappedMemoryRanges(self.device, 1, rng)
