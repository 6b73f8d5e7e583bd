"""A host frame loop the way renderers write one: ``n`` frames in flight,
one command buffer and one fence per slot; each frame waits for its slot's
fence, resets it, records, and submits signalling it (and, optionally, a
timeline semaphore value: the frame's number plus one)."""
import vulkan as vk
from vulkan import ffi

from guestcompute.vk.structs import new

FOREVER = 2 ** 63 - 1


class FrameLoop:
    def __init__(self, host, n=2, timeline=False):
        self.host, self.fns = host, host.fns
        self.cmds = [host.allocate() for _ in range(n)]
        self.fences = []
        for _ in range(n):
            f = ffi.new("VkFence *")
            info = new("VkFenceCreateInfo", flags=vk.VK_FENCE_CREATE_SIGNALED_BIT)
            assert self.fns.vkCreateFence(host.device, info, ffi.NULL, f) == vk.VK_SUCCESS
            self.fences.append(f)
        self.semaphore = None
        if timeline:
            kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
            info = new("VkSemaphoreCreateInfo", pNext=kind)
            s = ffi.new("VkSemaphore *")
            assert self.fns.vkCreateSemaphore(host.device, info, ffi.NULL, s) == vk.VK_SUCCESS
            self.semaphore = s[0]

    def begin(self, frame):
        """(command buffer, its slot's fence handle) for ``frame``, recording."""
        i = frame % len(self.cmds)
        self.fns.vkWaitForFences(self.host.device, 1, self.fences[i], vk.VK_TRUE, FOREVER)
        self.fns.vkResetFences(self.host.device, 1, self.fences[i])
        return self.host.begin(self.cmds[i]), self.fences[i][0]

    def submit(self, cmd, fence, frame=None):
        """End and submit ``cmd``; with a timeline, signal ``frame + 1``."""
        assert self.fns.vkEndCommandBuffer(cmd) == vk.VK_SUCCESS
        arr = ffi.new("VkCommandBuffer[1]", [cmd])
        if self.semaphore is None:
            info = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=arr)
        else:
            value = ffi.new("uint64_t[1]", [frame + 1])
            sems = ffi.new("VkSemaphore[1]", [self.semaphore])
            values = new("VkTimelineSemaphoreSubmitInfo", signalSemaphoreValueCount=1, pSignalSemaphoreValues=value)
            info = new("VkSubmitInfo", pNext=values, commandBufferCount=1, pCommandBuffers=arr,
                       signalSemaphoreCount=1, pSignalSemaphores=sems)
        assert self.fns.vkQueueSubmit(self.host.queue, 1, info, fence) == vk.VK_SUCCESS

    def drain(self):
        for f in self.fences:
            self.fns.vkWaitForFences(self.host.device, 1, f, vk.VK_TRUE, FOREVER)

    def close(self):
        self.drain()
        for f in self.fences:
            self.fns.vkDestroyFence(self.host.device, f[0], ffi.NULL)
        if self.semaphore is not None:
            self.fns.vkDestroySemaphore(self.host.device, self.semaphore, ffi.NULL)
        self.fns.vkFreeCommandBuffers(self.host.device, self.host.command_pool, len(self.cmds),
                                      ffi.new("VkCommandBuffer[]", self.cmds))
