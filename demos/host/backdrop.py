"""A texture the renderer draws behind everything, and that outside code
may write.

The renderer samples it in a full-frame draw at the start of its render
pass. It is created cleared to black in ``SHADER_READ_ONLY_OPTIMAL``; code
that writes it in ``record_before_pass`` finds it in ``Backdrop.access``
(fragment-shader reads, that layout) and must leave it so, its writes
synchronised to the FRAGMENT_SHADER stage.
"""
from __future__ import annotations

import vulkan as vk

from .pipeline import ALL_COMPONENTS, create_graphics_pipeline, set_viewport
from .resources import COLOR_RANGE, Image2D, image_barrier, one_time_commands, pipeline_barrier


class Backdrop:
    FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
    # (stage, access, layout) the renderer uses the texture in.
    access = (vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT,
              vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL)

    def __init__(self, renderer, width: int, height: int, extra_usage: int = 0):
        self.device = device = renderer.device
        self.extent = (width, height)
        self.usage = vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT | extra_usage
        self._destroy = []
        try:
            self.image = Image2D(device, renderer.memory_properties, width, height, self.FORMAT, self.usage)
            self._destroy.append(self.image.destroy)
            self.sampler = vk.vkCreateSampler(device, vk.VkSamplerCreateInfo(
                magFilter=vk.VK_FILTER_LINEAR, minFilter=vk.VK_FILTER_LINEAR,
                mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST,
                addressModeU=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
                addressModeV=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
                addressModeW=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE, maxLod=0.0), None)
            self._destroy.append(lambda: vk.vkDestroySampler(device, self.sampler, None))
            self._create_descriptor(device)
            self.layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
                pSetLayouts=[self.set_layout]), None)
            self._destroy.append(lambda: vk.vkDestroyPipelineLayout(device, self.layout, None))
            opaque = vk.VkPipelineColorBlendAttachmentState(blendEnable=vk.VK_FALSE, colorWriteMask=ALL_COMPONENTS)
            self.pipeline = create_graphics_pipeline(device, renderer.render_pass, self.layout, "backdrop",
                                                     vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST, opaque)
            self._destroy.append(lambda: vk.vkDestroyPipeline(device, self.pipeline, None))
            self._clear(renderer)
        except BaseException:
            self.destroy()
            raise

    @property
    def handle(self):
        """The VkImage."""
        return self.image.handle

    def _create_descriptor(self, device):
        sampled = vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER
        self.set_layout = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(
            pBindings=[vk.VkDescriptorSetLayoutBinding(
                binding=0, descriptorType=sampled, descriptorCount=1,
                stageFlags=vk.VK_SHADER_STAGE_FRAGMENT_BIT)]), None)
        self._destroy.append(lambda: vk.vkDestroyDescriptorSetLayout(device, self.set_layout, None))
        self.pool = vk.vkCreateDescriptorPool(device, vk.VkDescriptorPoolCreateInfo(
            maxSets=1, pPoolSizes=[vk.VkDescriptorPoolSize(type=sampled, descriptorCount=1)]), None)
        self._destroy.append(lambda: vk.vkDestroyDescriptorPool(device, self.pool, None))
        self.set = vk.vkAllocateDescriptorSets(device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.pool, pSetLayouts=[self.set_layout]))[0]
        vk.vkUpdateDescriptorSets(device, 1, [vk.VkWriteDescriptorSet(
            dstSet=self.set, dstBinding=0, descriptorType=sampled, descriptorCount=1,
            pImageInfo=[vk.VkDescriptorImageInfo(sampler=self.sampler, imageView=self.image.view,
                                                 imageLayout=self.access[2])])], 0, None)

    def _clear(self, renderer):
        """Black, in the layout the draw samples it in."""
        stage, access, layout = self.access
        with one_time_commands(self.device, renderer.command_pool, renderer.queue) as cmd:
            pipeline_barrier(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, images=[
                image_barrier(self.image.handle, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                              0, vk.VK_ACCESS_TRANSFER_WRITE_BIT)])
            vk.vkCmdClearColorImage(cmd, self.image.handle, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                    vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0]), 1, [COLOR_RANGE])
            pipeline_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, stage, images=[
                image_barrier(self.image.handle, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, layout,
                              vk.VK_ACCESS_TRANSFER_WRITE_BIT, access)])

    def record_draw(self, cmd, extent):
        """The full-frame draw (inside the render pass)."""
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, self.pipeline)
        set_viewport(cmd, extent)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, self.layout, 0, 1, [self.set], 0, None)
        vk.vkCmdDraw(cmd, 3, 1, 0, 0)

    def destroy(self):
        while self._destroy:
            self._destroy.pop()()
