"""A Vulkan device of the benchmarks' own, for kernels that reach their
buffers by device address (VK_KHR_buffer_device_address, core in Vulkan
1.2): each buffer's address goes to the kernel in push constants, and no
descriptor set is bound.

guestcompute binds every buffer through descriptors. This device is how the
benchmarks measure, on the same GPU and in the same run, what addressing
buffers the other way is worth (``benchmarks/matmul_reference.py``). It
enables what ``gc.requirements()`` recommends for the device plus
``bufferDeviceAddress``, and it does only what a measurement needs:
device-local buffers filled and read through a staging copy, one pipeline
per SPIR-V module, and dispatches timed between two timestamps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from guestcompute.errors import UnsupportedError, check
from guestcompute.host.requirements import requirements
from guestcompute.vk import bootstrap
from guestcompute.vk.commands import allocate_command_buffer, create_command_pool
from guestcompute.vk.functions import DeviceFunctions
from guestcompute.vk.structs import chain, new

# Vulkan 1.2's values; the ``vulkan`` package leaves these names None.
ADDRESS_USAGE = 0x00020000          # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
ADDRESS_ALLOCATION = 0x00000002     # VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT
DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT


@dataclass
class AddressedBuffer:
    handle: object
    memory: object
    nbytes: int
    address: int          # 0 for a staging buffer


class AddressDevice:
    """``AddressDevice(device_name, validation)``; ``buffer``, ``upload``,
    ``download``, ``pipeline``, ``gpu_seconds``; ``close`` (or ``with``).
    With ``validation`` the Khronos layer runs with synchronization
    validation, and its messages collect in :attr:`messages`."""

    def __init__(self, device_name=None, validation: bool = False):
        self.instance, self.messenger, api = bootstrap.create_instance(
            (1, 3), validation, app_name="guestcompute-benchmarks")
        self.device = None
        self.physical_device = bootstrap.pick_physical_device(self.instance, device_name)
        props = new("VkPhysicalDeviceProperties")
        lib.vkGetPhysicalDeviceProperties(self.physical_device, props)
        device_api = (vk.VK_VERSION_MAJOR(props.apiVersion), vk.VK_VERSION_MINOR(props.apiVersion))
        if min(api, device_api) < (1, 2):
            self.close()
            raise UnsupportedError("buffer device addresses need Vulkan 1.2 here")
        self.timestamp_period = props.limits.timestampPeriod
        self._open(requirements(self.physical_device, api))

    def _open(self, req) -> None:
        self.queue_family = bootstrap.compute_queue_family(self.physical_device)
        features = chain(new("VkPhysicalDeviceBufferDeviceAddressFeatures", bufferDeviceAddress=vk.VK_TRUE),
                         req.feature_chain())
        self.features = set(req.features)
        self.device = bootstrap.create_device(self.physical_device, self.queue_family, req.device_extensions,
                                              features, req.core_feature_struct())
        self.fns = DeviceFunctions(self.device)
        self._get_address = ffi.cast("PFN_vkGetBufferDeviceAddress",
                                     lib.vkGetDeviceProcAddr(self.device, b"vkGetBufferDeviceAddress"))
        queue = ffi.new("VkQueue *")
        self.fns.vkGetDeviceQueue(self.device, self.queue_family, 0, queue)
        self.queue = queue[0]
        self.pool = create_command_pool(self.fns, self.device, self.queue_family)
        self._memory_props = new("VkPhysicalDeviceMemoryProperties")
        lib.vkGetPhysicalDeviceMemoryProperties(self.physical_device, self._memory_props)
        self._owned = []          # (destroy function, handle), destroyed in reverse order

    @property
    def messages(self) -> list:
        return self.messenger.messages if self.messenger is not None else []

    # -- buffers ---------------------------------------------------------------

    def _memory_type(self, bits: int, flags: int) -> int:
        for i in range(self._memory_props.memoryTypeCount):
            if bits & (1 << i) and self._memory_props.memoryTypes[i].propertyFlags & flags == flags:
                return i
        raise UnsupportedError(f"no memory type with flags {flags:#x}")

    def buffer(self, nbytes: int, staging: bool = False) -> AddressedBuffer:
        """A device-local storage buffer with a device address, or (``staging``)
        a host-visible one for copies."""
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        if not staging:
            usage |= vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | ADDRESS_USAGE
        out = ffi.new("VkBuffer *")
        check("vkCreateBuffer", self.fns.vkCreateBuffer(
            self.device, new("VkBufferCreateInfo", size=nbytes, usage=usage,
                             sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), ffi.NULL, out))
        handle = out[0]
        need = new("VkMemoryRequirements")
        self.fns.vkGetBufferMemoryRequirements(self.device, handle, need)
        flags_info = None if staging else new("VkMemoryAllocateFlagsInfo",
                                              flags=ADDRESS_ALLOCATION)
        info = new("VkMemoryAllocateInfo", pNext=flags_info if flags_info is not None else ffi.NULL,
                   allocationSize=need.size,
                   memoryTypeIndex=self._memory_type(need.memoryTypeBits, HOST_VISIBLE if staging else DEVICE_LOCAL))
        mem = ffi.new("VkDeviceMemory *")
        check("vkAllocateMemory", self.fns.vkAllocateMemory(self.device, info, ffi.NULL, mem))
        check("vkBindBufferMemory", self.fns.vkBindBufferMemory(self.device, handle, mem[0], 0))
        if not staging:           # a staging buffer is released by its one user
            self._owned += [(self.fns.vkFreeMemory, mem[0]), (self.fns.vkDestroyBuffer, handle)]
        address = 0 if staging else int(self._get_address(self.device, new("VkBufferDeviceAddressInfo", buffer=handle)))
        return AddressedBuffer(handle, mem[0], nbytes, address)

    def _copy(self, src, dst, nbytes: int) -> None:
        cmd = self._begin()
        self.fns.vkCmdCopyBuffer(cmd, src, dst, 1, new("VkBufferCopy", size=nbytes))
        self._submit(cmd)

    def _release(self, staging: AddressedBuffer) -> None:
        self.fns.vkDestroyBuffer(self.device, staging.handle, ffi.NULL)
        self.fns.vkFreeMemory(self.device, staging.memory, ffi.NULL)

    def _mapped(self, staging: AddressedBuffer):
        ptr = ffi.new("void **")
        check("vkMapMemory", self.fns.vkMapMemory(self.device, staging.memory, 0, staging.nbytes, 0, ptr))
        return ffi.buffer(ptr[0], staging.nbytes)

    def upload(self, buf: AddressedBuffer, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).tobytes()
        staging = self.buffer(len(data), staging=True)
        self._mapped(staging)[:] = data
        self.fns.vkUnmapMemory(self.device, staging.memory)
        self._copy(staging.handle, buf.handle, len(data))
        self._release(staging)

    def download(self, buf: AddressedBuffer, dtype) -> np.ndarray:
        staging = self.buffer(buf.nbytes, staging=True)
        self._copy(buf.handle, staging.handle, buf.nbytes)
        out = np.frombuffer(bytes(self._mapped(staging)), dtype=dtype).copy()
        self.fns.vkUnmapMemory(self.device, staging.memory)
        self._release(staging)
        return out

    # -- kernels -----------------------------------------------------------------

    def pipeline(self, spirv: bytes, push_bytes: int) -> tuple:
        """(pipeline, layout) of a compute module whose only interface is
        ``push_bytes`` of push constants."""
        code = ffi.from_buffer("uint32_t[]", spirv)
        module = ffi.new("VkShaderModule *")
        check("vkCreateShaderModule", self.fns.vkCreateShaderModule(
            self.device, new("VkShaderModuleCreateInfo", codeSize=len(spirv), pCode=code), ffi.NULL, module))
        push = new("VkPushConstantRange", stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=push_bytes)
        layout = ffi.new("VkPipelineLayout *")
        check("vkCreatePipelineLayout", self.fns.vkCreatePipelineLayout(
            self.device, new("VkPipelineLayoutCreateInfo", pushConstantRangeCount=1, pPushConstantRanges=push),
            ffi.NULL, layout))
        self._owned.append((self.fns.vkDestroyPipelineLayout, layout[0]))
        stage = new("VkPipelineShaderStageCreateInfo", stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module[0],
                    pName="main")
        info = new("VkComputePipelineCreateInfo", stage=stage[0], layout=layout[0])
        pipe = ffi.new("VkPipeline *")
        check("vkCreateComputePipelines", self.fns.vkCreateComputePipelines(
            self.device, ffi.NULL, 1, info, ffi.NULL, pipe))
        self.fns.vkDestroyShaderModule(self.device, module[0], ffi.NULL)
        self._owned.append((self.fns.vkDestroyPipeline, pipe[0]))
        return pipe[0], layout[0]

    def gpu_seconds(self, kernel: tuple, push: bytes, groups: tuple, reps: int) -> float:
        """GPU seconds per dispatch of ``reps`` dispatches of ``kernel``
        (from :meth:`pipeline`) between two timestamps, each dispatch after
        a barrier on the one before (they write the same buffers)."""
        pipe, layout = kernel
        pool = ffi.new("VkQueryPool *")
        check("vkCreateQueryPool", self.fns.vkCreateQueryPool(
            self.device, new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2),
            ffi.NULL, pool))
        barrier = new("VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
                      dstAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_SHADER_READ_BIT)
        data = ffi.from_buffer("char[]", push)
        cmd = self._begin()
        fns, shader = self.fns, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
        fns.vkCmdResetQueryPool(cmd, pool[0], 0, 2)
        fns.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
        fns.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), data)
        fns.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool[0], 0)
        for i in range(reps):
            if i:
                fns.vkCmdPipelineBarrier(cmd, shader, shader, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL)
            fns.vkCmdDispatch(cmd, *groups)
        fns.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool[0], 1)
        self._submit(cmd)
        stamps = ffi.new("uint64_t[2]")
        check("vkGetQueryPoolResults", fns.vkGetQueryPoolResults(
            self.device, pool[0], 0, 2, 16, stamps, 8,
            vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT))
        fns.vkDestroyQueryPool(self.device, pool[0], ffi.NULL)
        return (stamps[1] - stamps[0]) * self.timestamp_period * 1e-9 / reps

    # -- submission ----------------------------------------------------------------

    def _begin(self):
        cmd = allocate_command_buffer(self.fns, self.device, self.pool)
        check("vkBeginCommandBuffer", self.fns.vkBeginCommandBuffer(
            cmd, new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)))
        return cmd

    def _submit(self, cmd) -> None:
        """End ``cmd``, run it and wait for it, then free it."""
        fns = self.fns
        check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
        cmds = ffi.new("VkCommandBuffer[]", [cmd])
        check("vkQueueSubmit", fns.vkQueueSubmit(
            self.queue, 1, new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds), ffi.NULL))
        check("vkQueueWaitIdle", fns.vkQueueWaitIdle(self.queue))
        fns.vkFreeCommandBuffers(self.device, self.pool, 1, cmds)

    def close(self) -> None:
        if self.device is not None:
            self.fns.vkDeviceWaitIdle(self.device)
            for destroy, handle in reversed(self._owned):
                destroy(self.device, handle, ffi.NULL)
            self.fns.vkDestroyCommandPool(self.device, self.pool, ffi.NULL)
            lib.vkDestroyDevice(self.device, ffi.NULL)
            self.device = None
        if self.messenger is not None:
            self.messenger.close()
            self.messenger = None
        if self.instance is not None:
            lib.vkDestroyInstance(self.instance, ffi.NULL)
            self.instance = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
