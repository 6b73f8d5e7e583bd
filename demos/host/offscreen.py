"""Offscreen render target: one colour image + readback buffer per frame slot.

Each frame in flight owns its own image and host-visible buffer, so a frame
never touches resources a still-running frame uses.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

from .resources import (HOST_CACHED, HOST_COHERENT, HOST_VISIBLE, Buffer, Image2D,
                        buffer_barrier, image_barrier, pipeline_barrier)


class OffscreenTarget:
    FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
    BYTES_PER_PIXEL = 4

    def __init__(self, device, memory_properties, width: int, height: int, slots: int, extra_usage: int = 0):
        self.device = device
        self.format = self.FORMAT
        self.extent = (width, height)
        self.frame_bytes = width * height * self.BYTES_PER_PIXEL
        # TRANSFER_SRC for the readback; TRANSFER_DST too so that code
        # recording after the pass can copy a processed frame back in;
        # ``extra_usage`` for code that post-processes the image in place
        # (e.g. SAMPLED | STORAGE for compute).
        self.image_usage = (vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
                            | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT | extra_usage)
        self.images = [Image2D(device, memory_properties, width, height, self.FORMAT, self.image_usage)
                       for _ in range(slots)]
        self.transfer_usage = True
        self.readback = [
            Buffer(device, memory_properties, self.frame_bytes, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                   required=HOST_VISIBLE | HOST_COHERENT, preferred=HOST_CACHED)
            for _ in range(slots)]
        for buffer in self.readback:
            buffer.map()
        self.framebuffers = []

    def build(self, render_pass):
        """Framebuffers for ``render_pass``; none when it is None (the pass
        draws into an HDR scene image instead)."""
        if render_pass is None:
            return
        width, height = self.extent
        self.framebuffers = [
            vk.vkCreateFramebuffer(self.device, vk.VkFramebufferCreateInfo(
                renderPass=render_pass, pAttachments=[image.view],
                width=width, height=height, layers=1), None)
            for image in self.images]

    # -- per-frame interface used by HostRenderer.frame() -------------------

    def acquire(self, slot: int) -> int:
        return slot

    def image(self, index: int):
        return self.images[index].handle

    def view(self, index: int):
        return self.images[index].view

    def submit_waits(self, slot: int):
        return [], []

    def submit_signals(self, index: int):
        return []

    def record_finish(self, cmd, index: int):
        """After the pass: copy the image into this slot's readback buffer."""
        width, height = self.extent
        image, buffer = self.images[index].handle, self.readback[index]
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
            images=[image_barrier(
                image,
                vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)])
        region = vk.VkBufferImageCopy(
            bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
            imageSubresource=vk.VkImageSubresourceLayers(
                aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, baseArrayLayer=0, layerCount=1),
            imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
            imageExtent=vk.VkExtent3D(width=width, height=height, depth=1))
        vk.vkCmdCopyImageToBuffer(
            cmd, image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, buffer.handle, 1, [region])
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT,
            buffers=[buffer_barrier(
                buffer.handle, buffer.size,
                vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)])

    def present(self, index: int):
        """Nothing to present offscreen."""

    # -----------------------------------------------------------------------

    def read(self, index: int) -> np.ndarray:
        """Pixels of slot ``index`` as (H, W, 4) uint8; the caller must have
        waited for the frame that wrote them."""
        width, height = self.extent
        data = np.frombuffer(self.readback[index].mapped, dtype=np.uint8, count=self.frame_bytes)
        return data.reshape(height, width, self.BYTES_PER_PIXEL).copy()

    def destroy(self):
        for framebuffer in self.framebuffers:
            vk.vkDestroyFramebuffer(self.device, framebuffer, None)
        self.framebuffers = []
        for buffer in self.readback:
            buffer.destroy()
        for image in self.images:
            image.destroy()
        self.readback, self.images = [], []
