"""Command pools and command buffers: the calls every owner of one makes,
and the wait for the fence its submission signals."""
from __future__ import annotations

import time

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


# Fence waits go in slices rather than one wait "forever": a driver that
# loses the wakeup of an infinite wait (llvmpipe has been reported to stall
# in such waits; one stalled a CPU run of the test suite for minutes) still
# looks at the fence again at the end of every slice.
WAIT_SLICE_NS = 100_000_000


def wait_for_fences(fns, device, fences, timeout_ns: int = None, count: int = 1) -> int:
    """vkWaitForFences on the ``count`` fences at ``fences`` (a VkFence
    pointer or array), all of them, up to ``timeout_ns`` (None: until they
    signal), in slices; returns the last VkResult (VK_SUCCESS, VK_TIMEOUT
    or an error)."""
    deadline = None if timeout_ns is None else time.monotonic_ns() + timeout_ns
    while True:
        left = WAIT_SLICE_NS if deadline is None else max(0, min(WAIT_SLICE_NS, deadline - time.monotonic_ns()))
        res = fns.vkWaitForFences(device, count, fences, vk.VK_TRUE, left)
        if res != vk.VK_TIMEOUT or (deadline is not None and time.monotonic_ns() >= deadline):
            return res
