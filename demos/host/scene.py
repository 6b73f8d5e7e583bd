"""The HDR scene target: what the render pass draws into when the renderer
runs in HDR mode, one rgba16f image per frame slot.

Light then accumulates past 1.0 (additive sprites), and a *resolve* step
after the pass turns the scene into the displayable output image: the
application's own (tone mapping, say) or, without one, a plain blit that
clamps.
"""
from __future__ import annotations

import vulkan as vk

from .resources import Image2D, image_barrier, pipeline_barrier


class SceneTarget:
    FORMAT = vk.VK_FORMAT_R16G16B16A16_SFLOAT

    def __init__(self, device, memory_properties, extent, slots: int, render_pass, extra_usage: int = 0):
        self.device, self.memory_properties = device, memory_properties
        self.slots, self.render_pass = slots, render_pass
        # TRANSFER_SRC for the blit resolve; extra_usage for code that reads
        # or writes the scene itself (e.g. SAMPLED | STORAGE for compute).
        self.usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | extra_usage
        self.images, self.framebuffers = [], []
        self.extent = None
        self.resize(extent)

    def resize(self, extent):
        """(Re)create the images for ``extent``; the caller waits for the device first."""
        self.destroy()
        self.extent = width, height = tuple(extent)
        self.images = [Image2D(self.device, self.memory_properties, width, height, self.FORMAT, self.usage)
                       for _ in range(self.slots)]
        self.framebuffers = [
            vk.vkCreateFramebuffer(self.device, vk.VkFramebufferCreateInfo(
                renderPass=self.render_pass, pAttachments=[image.view], width=width, height=height, layers=1), None)
            for image in self.images]

    def record_blit(self, cmd, slot: int, output, attachment_access):
        """The default resolve: blit slot ``slot``'s scene into ``output``
        (found in UNDEFINED layout, left in ``attachment_access`` state;
        the scene is left in that state too)."""
        stage, access, layout = attachment_access
        scene = self.images[slot].handle
        width, height = self.extent
        pipeline_barrier(cmd, stage, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, images=[
            image_barrier(scene, layout, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, access,
                          vk.VK_ACCESS_TRANSFER_READ_BIT),
            image_barrier(output, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 0,
                          vk.VK_ACCESS_TRANSFER_WRITE_BIT)])
        whole = [vk.VkOffset3D(x=0, y=0, z=0), vk.VkOffset3D(x=width, y=height, z=1)]
        layers = vk.VkImageSubresourceLayers(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
                                             baseArrayLayer=0, layerCount=1)
        vk.vkCmdBlitImage(cmd, scene, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                          output, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1,
                          [vk.VkImageBlit(srcSubresource=layers, srcOffsets=whole,
                                          dstSubresource=layers, dstOffsets=whole)], vk.VK_FILTER_NEAREST)
        pipeline_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, stage, images=[
            image_barrier(scene, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, layout, 0, access),
            image_barrier(output, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, layout,
                          vk.VK_ACCESS_TRANSFER_WRITE_BIT, access | vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT)])

    def destroy(self):
        for framebuffer in self.framebuffers:
            vk.vkDestroyFramebuffer(self.device, framebuffer, None)
        for image in self.images:
            image.destroy()
        self.images, self.framebuffers = [], []
