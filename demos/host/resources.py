"""Memory, buffer and image helpers shared by the host renderer."""
from __future__ import annotations

from contextlib import contextmanager

import vulkan as vk

HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
HOST_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT

COLOR_RANGE = vk.VkImageSubresourceRange(
    aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
    baseMipLevel=0, levelCount=1, baseArrayLayer=0, layerCount=1)


def find_memory_type(memory_properties, type_bits: int, required: int, preferred: int = 0) -> int:
    """Index of a memory type allowed by ``type_bits`` that has all
    ``required`` flags, choosing one that also has ``preferred`` when possible."""
    candidates = [
        i for i in range(memory_properties.memoryTypeCount)
        if type_bits & (1 << i)
        and memory_properties.memoryTypes[i].propertyFlags & required == required
    ]
    if not candidates:
        raise RuntimeError(f"no memory type with flags 0x{required:x} (type bits 0x{type_bits:x})")
    for i in candidates:
        if memory_properties.memoryTypes[i].propertyFlags & preferred == preferred:
            return i
    return candidates[0]


def allocate_memory(device, memory_properties, requirements, required: int, preferred: int = 0):
    """Allocate memory for ``requirements``; returns ``(memory, property_flags)``."""
    index = find_memory_type(memory_properties, requirements.memoryTypeBits, required, preferred)
    memory = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
        allocationSize=requirements.size, memoryTypeIndex=index), None)
    return memory, memory_properties.memoryTypes[index].propertyFlags


class Buffer:
    """A VkBuffer with its own dedicated memory allocation."""

    def __init__(self, device, memory_properties, size: int, usage: int,
                 required: int = 0, preferred: int = 0):
        self.device = device
        self.size = size
        self.usage = usage
        self.handle = vk.vkCreateBuffer(device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        requirements = vk.vkGetBufferMemoryRequirements(device, self.handle)
        self.memory, self.memory_flags = allocate_memory(
            device, memory_properties, requirements, required, preferred)
        vk.vkBindBufferMemory(device, self.handle, self.memory, 0)
        self.mapped = None

    @property
    def host_visible(self) -> bool:
        return bool(self.memory_flags & HOST_VISIBLE)

    def map(self):
        """Map the whole buffer (persistently) and return the cffi buffer."""
        if self.mapped is None:
            self.mapped = vk.vkMapMemory(self.device, self.memory, 0, self.size, 0)
        return self.mapped

    def destroy(self):
        if self.mapped is not None:
            vk.vkUnmapMemory(self.device, self.memory)
            self.mapped = None
        vk.vkDestroyBuffer(self.device, self.handle, None)
        vk.vkFreeMemory(self.device, self.memory, None)


class Image2D:
    """A single-mip 2D colour image with dedicated memory and a view."""

    def __init__(self, device, memory_properties, width: int, height: int, fmt: int, usage: int):
        self.device = device
        self.width, self.height, self.format = width, height, fmt
        self.handle = vk.vkCreateImage(device, vk.VkImageCreateInfo(
            imageType=vk.VK_IMAGE_TYPE_2D,
            format=fmt,
            extent=vk.VkExtent3D(width=width, height=height, depth=1),
            mipLevels=1,
            arrayLayers=1,
            samples=vk.VK_SAMPLE_COUNT_1_BIT,
            tiling=vk.VK_IMAGE_TILING_OPTIMAL,
            usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
            initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
        requirements = vk.vkGetImageMemoryRequirements(device, self.handle)
        self.memory, _ = allocate_memory(device, memory_properties, requirements, 0, DEVICE_LOCAL)
        vk.vkBindImageMemory(device, self.handle, self.memory, 0)
        self.view = create_image_view(device, self.handle, fmt)

    def destroy(self):
        vk.vkDestroyImageView(self.device, self.view, None)
        vk.vkDestroyImage(self.device, self.handle, None)
        vk.vkFreeMemory(self.device, self.memory, None)


def create_image_view(device, image, fmt: int):
    return vk.vkCreateImageView(device, vk.VkImageViewCreateInfo(
        image=image,
        viewType=vk.VK_IMAGE_VIEW_TYPE_2D,
        format=fmt,
        subresourceRange=COLOR_RANGE), None)


def image_barrier(image, old_layout, new_layout, src_access, dst_access):
    return vk.VkImageMemoryBarrier(
        srcAccessMask=src_access,
        dstAccessMask=dst_access,
        oldLayout=old_layout,
        newLayout=new_layout,
        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        image=image,
        subresourceRange=COLOR_RANGE)


def buffer_barrier(buffer, size: int, src_access, dst_access, offset: int = 0):
    return vk.VkBufferMemoryBarrier(
        srcAccessMask=src_access,
        dstAccessMask=dst_access,
        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        buffer=buffer,
        offset=offset,
        size=size)


def pipeline_barrier(cmd, src_stage, dst_stage, buffers=(), images=()):
    """vkCmdPipelineBarrier with buffer and/or image barriers."""
    buffers, images = list(buffers), list(images)
    vk.vkCmdPipelineBarrier(
        cmd, src_stage, dst_stage, 0,
        0, None,
        len(buffers), buffers or None,
        len(images), images or None)


@contextmanager
def one_time_commands(device, command_pool, queue):
    """Record into a throwaway command buffer; on exit submit it and wait."""
    cmd = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
        commandPool=command_pool,
        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        commandBufferCount=1))[0]
    fence = vk.vkCreateFence(device, vk.VkFenceCreateInfo(), None)
    try:
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        yield cmd
        vk.vkEndCommandBuffer(cmd)
        vk.vkQueueSubmit(queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])], fence)
        vk.vkWaitForFences(device, 1, [fence], vk.VK_TRUE, vk.UINT64_MAX)
    finally:
        vk.vkDestroyFence(device, fence, None)
        vk.vkFreeCommandBuffers(device, command_pool, 1, [cmd])
