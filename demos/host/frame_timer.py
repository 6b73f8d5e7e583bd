"""GPU time of each frame: a timestamp at the start and the end of the
frame's command buffer, read back when the frame slot comes round again
(its fence has been waited, so the results are there)."""
from __future__ import annotations

import statistics

import vulkan as vk


class FrameTimer:
    def __init__(self, physical_device, device, queue_family_index: int, slots: int):
        self.device = device
        family = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)[queue_family_index]
        limits = vk.vkGetPhysicalDeviceProperties(physical_device).limits
        self.supported = family.timestampValidBits > 0 and limits.timestampPeriod > 0
        self.period_ns = limits.timestampPeriod
        self.frame_ms: list[float] = []
        self._written = [False] * slots
        self.pool = None
        if self.supported:
            self.pool = vk.vkCreateQueryPool(device, vk.VkQueryPoolCreateInfo(
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2 * slots), None)

    def begin(self, cmd, slot: int) -> None:
        """At the start of the slot's command buffer (its fence waited): collect
        the slot's previous frame, then start timing this one."""
        if not self.supported:
            return
        if self._written[slot]:
            data = vk.ffi.new("uint64_t[2]")
            vk.vkGetQueryPoolResults(self.device, self.pool, 2 * slot, 2, 16, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
            self.frame_ms.append((data[1] - data[0]) * self.period_ns / 1e6)
        vk.vkCmdResetQueryPool(cmd, self.pool, 2 * slot, 2)
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, self.pool, 2 * slot)

    def end(self, cmd, slot: int) -> None:
        """Just before the command buffer ends."""
        if not self.supported:
            return
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool, 2 * slot + 1)
        self._written[slot] = True

    def median_ms(self, skip: int = 1) -> float | None:
        """Median GPU ms per frame, leaving out the first ``skip`` frames (caches filling)."""
        values = self.frame_ms[skip:] if len(self.frame_ms) > skip else self.frame_ms
        return statistics.median(values) if values else None

    def destroy(self) -> None:
        if self.pool is not None:
            vk.vkDestroyQueryPool(self.device, self.pool, None)
            self.pool = None
