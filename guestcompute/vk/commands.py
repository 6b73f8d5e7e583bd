"""Command pools and command buffers: the two calls every owner of one makes."""
from __future__ import annotations

import vulkan as vk
from vulkan import ffi

from ..errors import check
from .structs import new


def create_command_pool(fns, device, queue_family_index: int, flags: int = 0):
    """A VkCommandPool for ``queue_family_index``. Pools are externally
    synchronized: use each from one thread at a time."""
    info = new("VkCommandPoolCreateInfo", queueFamilyIndex=queue_family_index, flags=flags)
    out = ffi.new("VkCommandPool *")
    check("vkCreateCommandPool", fns.vkCreateCommandPool(device, info, ffi.NULL, out))
    return out[0]


def allocate_command_buffer(fns, device, pool, secondary: bool = False):
    """One primary (or secondary) command buffer from ``pool``."""
    level = vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY if secondary else vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
    info = new("VkCommandBufferAllocateInfo", commandPool=pool, level=level, commandBufferCount=1)
    out = ffi.new("VkCommandBuffer *")
    check("vkAllocateCommandBuffers", fns.vkAllocateCommandBuffers(device, info, out))
    return out[0]
