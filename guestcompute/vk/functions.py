"""Device-level function pointers, resolved once per device.

Calling ``vulkan.lib.vkCmdDispatch`` goes through the loader's trampoline;
``vkGetDeviceProcAddr`` gives the driver's (or the validation layer's) entry
point directly, and the raw cffi call skips the ``vulkan`` package's Python
wrappers, which rebuild structs and convert every argument (5–20× slower).
A missing required entry point fails at adoption, never while recording.
"""
from __future__ import annotations

from vulkan import ffi, lib

from ..errors import UnsupportedError

_CORE = (
    "vkCmdBindPipeline", "vkCmdBindDescriptorSets", "vkCmdPushConstants", "vkCmdDispatch",
    "vkCmdDispatchIndirect", "vkCmdPipelineBarrier", "vkCmdCopyBuffer", "vkCmdFillBuffer",
    "vkCmdUpdateBuffer", "vkCmdExecuteCommands", "vkCmdWriteTimestamp", "vkCmdResetQueryPool",
    "vkCreateBuffer", "vkDestroyBuffer", "vkGetBufferMemoryRequirements", "vkAllocateMemory",
    "vkFreeMemory", "vkBindBufferMemory", "vkMapMemory", "vkUnmapMemory",
    "vkFlushMappedMemoryRanges", "vkInvalidateMappedMemoryRanges",
    "vkCreateShaderModule", "vkDestroyShaderModule", "vkCreateDescriptorSetLayout",
    "vkDestroyDescriptorSetLayout", "vkCreatePipelineLayout", "vkDestroyPipelineLayout",
    "vkCreateComputePipelines", "vkDestroyPipeline", "vkCreatePipelineCache",
    "vkDestroyPipelineCache", "vkGetPipelineCacheData", "vkMergePipelineCaches",
    "vkCreateDescriptorPool",
    "vkDestroyDescriptorPool", "vkAllocateDescriptorSets", "vkFreeDescriptorSets",
    "vkUpdateDescriptorSets", "vkCreateCommandPool", "vkDestroyCommandPool",
    "vkAllocateCommandBuffers", "vkFreeCommandBuffers", "vkBeginCommandBuffer",
    "vkEndCommandBuffer", "vkResetCommandPool", "vkGetDeviceQueue", "vkQueueSubmit",
    "vkQueueWaitIdle", "vkDeviceWaitIdle", "vkCreateFence", "vkDestroyFence", "vkWaitForFences",
    "vkResetFences", "vkGetFenceStatus", "vkCreateSemaphore", "vkDestroySemaphore",
    "vkCreateQueryPool", "vkDestroyQueryPool", "vkGetQueryPoolResults",
    "vkCreateImage", "vkDestroyImage", "vkGetImageMemoryRequirements", "vkBindImageMemory",
    "vkCreateImageView", "vkDestroyImageView", "vkCreateSampler", "vkDestroySampler",
    "vkCmdCopyBufferToImage", "vkCmdCopyImageToBuffer", "vkCmdClearColorImage", "vkCmdCopyImage",
)

# name -> extension (or core version) that provides it; resolved only when declared.
_OPTIONAL = {
    "vkCmdPushDescriptorSetKHR": "VK_KHR_push_descriptor",
    "vkGetSemaphoreCounterValue": "timeline",
    "vkWaitSemaphores": "timeline",
    "vkSignalSemaphore": "timeline",
    "vkGetSemaphoreCounterValueKHR": "VK_KHR_timeline_semaphore",
    "vkWaitSemaphoresKHR": "VK_KHR_timeline_semaphore",
    "vkCmdBeginDebugUtilsLabelEXT": "debug_utils",
    "vkCmdEndDebugUtilsLabelEXT": "debug_utils",
    "vkSetDebugUtilsObjectNameEXT": "debug_utils",
    "vkGetBufferMemoryRequirements2": "core11",
    "vkGetMemoryFdKHR": "VK_KHR_external_memory_fd",
    "vkGetSemaphoreFdKHR": "VK_KHR_external_semaphore_fd",
    "vkImportSemaphoreFdKHR": "VK_KHR_external_semaphore_fd",
}


class DeviceFunctions:
    """Attribute per Vulkan function, e.g. ``fns.vkCmdDispatch(cmd, x, y, z)``."""

    def __init__(self, device, wanted_optional=()):
        self.device = device
        for name in _CORE:
            setattr(self, name, self._resolve(name, required=True))
        for name in wanted_optional:
            setattr(self, name, self._resolve(name, required=False))

    def _resolve(self, name: str, required: bool):
        ptr = lib.vkGetDeviceProcAddr(self.device, name.encode())
        if ptr == ffi.NULL:
            if required:
                raise UnsupportedError(f"the device does not expose {name}")
            return None
        return ffi.cast(f"PFN_{name}", ptr)

    def has(self, name: str) -> bool:
        return getattr(self, name, None) is not None


def instance_function(instance, name: str):
    """An instance-level extension function, or None when not available."""
    ptr = lib.vkGetInstanceProcAddr(instance, name.encode())
    return None if ptr == ffi.NULL else ffi.cast(f"PFN_{name}", ptr)


def optional_names(kind: str):
    return [n for n, k in _OPTIONAL.items() if k == kind]
