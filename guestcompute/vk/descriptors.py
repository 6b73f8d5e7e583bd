"""Descriptor structs for a pipeline + buffer set, built once and reused.

Push-descriptor path: the VkWriteDescriptorSet array is built the first
time a (binding count, buffers) combination is seen, then every later
dispatch passes the same cdata to vkCmdPushDescriptorSetKHR.

Set path (no VK_KHR_push_descriptor, e.g. a bare Vulkan 1.0 host): one
VkDescriptorSet per (binding count, buffers), written once and *never*
rewritten, so a command buffer recorded earlier can never see its
descriptors change (VkFFT #155/#185). Sets are freed only together with a
buffer they reference, which happens only after that buffer's last epoch
retired.

A binding is a buffer (a Buffer: STORAGE_BUFFER) or one subresource of an
image (an ImageBinding with a resolved view: STORAGE_IMAGE, or
COMBINED_IMAGE_SAMPLER for sampled reads), always in GENERAL layout.

Keys use buffer and image uids, never VkBuffer/VkImageView handle values.
Thread-safety: internally locked; entries are immutable once built.
"""
from __future__ import annotations

import threading

import vulkan as vk
from vulkan import ffi

from ..errors import VK_ERROR_FRAGMENTED_POOL, VK_ERROR_OUT_OF_POOL_MEMORY, check
from .structs import new

_STORAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
STORAGE_IMAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE
SAMPLED_IMAGE = vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER
# The descriptor type of a binding, from its kind (kernels/spec.Binding.kind):
# "texture" and "sampler" are GLSL's separate texture2D and sampler.
DESCRIPTOR_TYPES = {"buffer": _STORAGE, "storage": STORAGE_IMAGE, "sampled": SAMPLED_IMAGE,
                    "texture": vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE, "sampler": vk.VK_DESCRIPTOR_TYPE_SAMPLER}
_GENERAL = vk.VK_IMAGE_LAYOUT_GENERAL


def _owner(resource_key) -> int:
    """The uid whose retirement drops an entry holding ``resource_key``."""
    return resource_key[0] if isinstance(resource_key, tuple) else resource_key
_POOL_SETS = 256


class DescriptorEntry:
    __slots__ = ("writes", "infos", "images", "count", "set", "pset", "writes_address")

    def __init__(self, writes, infos, images, count, dset=None):
        self.writes = writes
        self.writes_address = int(ffi.cast("uintptr_t", writes))     # for the command interpreter
        self.infos = infos
        self.images = images
        self.count = count
        self.set = dset
        self.pset = ffi.new("VkDescriptorSet[1]", [dset]) if dset is not None else None


_TEMPLATES: dict = {}


def _write_template(n: int):
    """``n`` storage-buffer writes for bindings 0..n-1, the fields every
    entry shares (kept per count; read-only once made)."""
    t = _TEMPLATES.get(n)
    if t is None:
        t = ffi.new("VkWriteDescriptorSet[]", max(n, 1))
        for i in range(n):
            t[i].sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
            t[i].dstBinding = i
            t[i].descriptorCount = 1
            t[i].descriptorType = _STORAGE
        _TEMPLATES[n] = t
    return t


class Descriptors:
    def __init__(self, device, fns, push_descriptors: bool, max_range: int):
        self.device = device
        self.fns = fns
        self.push = push_descriptors
        self.max_range = max_range
        self._lock = threading.Lock()
        self._entries: dict = {}        # (n, uids) -> DescriptorEntry
        self._by_uid: dict = {}         # uid -> set of keys
        self._pools: list = []          # [handle, sets in use]
        self._set_pool: dict = {}       # VkDescriptorSet address -> pool record
        self.sets_allocated = 0

    def get(self, set_layout, buffers) -> DescriptorEntry:
        """The entry binding ``buffers`` (Buffers and ImageBindings) in order."""
        key = (len(buffers),) + tuple(b.uid for b in buffers)
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._build(set_layout, buffers)
                self._entries[key] = entry
                for k in key[1:]:
                    self._by_uid.setdefault(_owner(k), set()).add(key)
            return entry

    def _build(self, set_layout, buffers) -> DescriptorEntry:
        n = len(buffers)
        infos = ffi.new("VkDescriptorBufferInfo[]", max(n, 1))
        images = None
        writes = ffi.new("VkWriteDescriptorSet[]", max(n, 1))
        # sType, dstBinding, descriptorCount and a storage-buffer type for
        # every write, copied from a template made once per binding count.
        ffi.memmove(writes, _write_template(n), ffi.sizeof(writes))
        dset = self._allocate_set(set_layout, n) if not self.push else None
        for i, b in enumerate(buffers):
            w = writes[i]
            if dset is not None:
                w.dstSet = dset
            kind = getattr(b, "kind", None)
            if kind is None:                   # a Buffer
                infos[i].buffer = b.handle
                infos[i].offset = b.window_offset
                infos[i].range = min(b.size, self.max_range)
                w.pBufferInfo = infos + i
            else:                              # an ImageBinding (its view resolved) or a SamplerBinding
                if images is None:
                    images = ffi.new("VkDescriptorImageInfo[]", n)
                images[i].imageView = b.view if kind != "sampler" else ffi.NULL
                images[i].imageLayout = _GENERAL
                images[i].sampler = b.sampler_handle if kind in ("sampled", "sampler") else ffi.NULL
                w.descriptorType = DESCRIPTOR_TYPES[kind]
                w.pImageInfo = images + i
        if dset is not None and n:
            self.fns.vkUpdateDescriptorSets(self.device, n, writes, 0, ffi.NULL)
        return DescriptorEntry(writes, infos, images, n, dset)

    def _allocate_set(self, set_layout, n: int):
        for pool in self._pools:
            dset = self._try_allocate(pool, set_layout, n)
            if dset is not None:
                return dset
        sizes = [dict(type=t, descriptorCount=_POOL_SETS * 8) for t in DESCRIPTOR_TYPES.values()]
        info = new("VkDescriptorPoolCreateInfo",
                   flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                   maxSets=_POOL_SETS, poolSizeCount=len(sizes), pPoolSizes=sizes)
        out = ffi.new("VkDescriptorPool *")
        check("vkCreateDescriptorPool", self.fns.vkCreateDescriptorPool(self.device, info, ffi.NULL, out))
        pool = [out[0], 0, 0]
        self._pools.append(pool)
        dset = self._try_allocate(pool, set_layout, n)
        if dset is None:
            raise RuntimeError("a fresh descriptor pool could not allocate one set")
        return dset

    def _try_allocate(self, pool, set_layout, n: int):
        # pool: [handle, sets in use, descriptors in use]. Allocating from a
        # full pool is invalid usage on Vulkan 1.0 (VUID-VkDescriptorSetAllocateInfo
        # -descriptorSetCount-00306): only ask pools that have room.
        if pool[1] >= _POOL_SETS or pool[2] + n > _POOL_SETS * 8:
            return None
        layouts = ffi.new("VkDescriptorSetLayout[1]", [set_layout])
        info = new("VkDescriptorSetAllocateInfo", descriptorPool=pool[0], descriptorSetCount=1,
                   pSetLayouts=layouts)
        out = ffi.new("VkDescriptorSet *")
        res = self.fns.vkAllocateDescriptorSets(self.device, info, out)
        if res in (VK_ERROR_OUT_OF_POOL_MEMORY, VK_ERROR_FRAGMENTED_POOL):   # try the next pool
            return None
        check("vkAllocateDescriptorSets", res)
        pool[1] += 1
        pool[2] += n
        self._set_pool[int(ffi.cast("uintptr_t", out[0]))] = pool
        self.sets_allocated += 1
        return out[0]

    def forget_buffer(self, uid: int) -> None:
        """Drop every entry referencing buffer ``uid`` (called when the buffer
        is destroyed, i.e. after its last use retired)."""
        with self._lock:
            for key in self._by_uid.pop(uid, ()):
                entry = self._entries.pop(key, None)
                if entry is None:
                    continue
                for other in key[1:]:
                    owner = _owner(other)
                    if owner != uid and owner in self._by_uid:
                        self._by_uid[owner].discard(key)
                if entry.set is not None:
                    pool = self._set_pool.pop(int(ffi.cast("uintptr_t", entry.set)))
                    self.fns.vkFreeDescriptorSets(self.device, pool[0], 1, entry.pset)
                    pool[1] -= 1
                    pool[2] -= entry.count
                    self.sets_allocated -= 1

    def live_sets(self) -> int:
        return self.sets_allocated

    @property
    def cached_entries(self) -> int:
        """Prebuilt descriptor entries held (one per distinct buffer set)."""
        return len(self._entries)

    @property
    def referenced_buffers(self) -> int:
        """Buffers that some cached entry refers to."""
        return len(self._by_uid)

    def destroy(self) -> None:
        for pool in self._pools:
            self.fns.vkDestroyDescriptorPool(self.device, pool[0], ffi.NULL)
        self._pools.clear()
        self._entries.clear()
        self._by_uid.clear()
        self._set_pool.clear()
        self.sets_allocated = 0
