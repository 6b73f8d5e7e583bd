"""Render pass, the graphics pipeline helper and the point-sprite pipeline."""
from __future__ import annotations

import struct

import vulkan as vk

from .shaders import load_spirv

# Vertex layout: binding 0 = positions, binding 1 = colours, one vec4 each.
VEC4_BYTES = 16
VERTEX_BINDINGS = (0, 1)
PUSH_CONSTANT_BYTES = 4  # float point_scale


def create_render_pass(device, color_format: int):
    """One colour attachment, cleared at load and kept in
    COLOR_ATTACHMENT_OPTIMAL at the end (the renderer transitions it to its
    final use itself, after ``record_after_pass``)."""
    attachment = vk.VkAttachmentDescription(
        format=color_format,
        samples=vk.VK_SAMPLE_COUNT_1_BIT,
        loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE,
        initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        finalLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    color_ref = vk.VkAttachmentReference(
        attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    subpass = vk.VkSubpassDescription(
        pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
        pColorAttachments=[color_ref])
    # The attachment's earlier use (a previous frame's colour writes, or its
    # copy to the readback buffer) must finish before the clear / the layout
    # transition. With a swapchain this also chains onto the acquire
    # semaphore, which is waited at COLOR_ATTACHMENT_OUTPUT.
    before = vk.VkSubpassDependency(
        srcSubpass=vk.VK_SUBPASS_EXTERNAL,
        dstSubpass=0,
        srcStageMask=vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
        dstStageMask=vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
        srcAccessMask=0,
        dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    return vk.vkCreateRenderPass(device, vk.VkRenderPassCreateInfo(
        pAttachments=[attachment],
        pSubpasses=[subpass],
        pDependencies=[before]), None)


def _shader_module(device, name: str):
    code = load_spirv(name)
    return vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(
        codeSize=len(code), pCode=code), None)


ALL_COMPONENTS = (vk.VK_COLOR_COMPONENT_R_BIT | vk.VK_COLOR_COMPONENT_G_BIT
                  | vk.VK_COLOR_COMPONENT_B_BIT | vk.VK_COLOR_COMPONENT_A_BIT)


def create_graphics_pipeline(device, render_pass, layout, shader: str, topology: int,
                             blend, vertex_input=None, fragment: str | None = None):
    """A graphics pipeline from ``<shader>.vert`` / ``<shader>.frag`` (or
    ``<fragment>.frag``) for subpass 0 of ``render_pass``: one colour
    attachment blended by ``blend`` (a VkPipelineColorBlendAttachmentState),
    no culling, dynamic viewport and scissor (so it survives resizes)."""
    vert = _shader_module(device, f"{shader}.vert")
    try:
        frag = _shader_module(device, f"{fragment or shader}.frag")
    except BaseException:
        vk.vkDestroyShaderModule(device, vert, None)
        raise
    try:
        # Every struct the create info points to is held in a local: the
        # cffi wrappers do not keep nested temporaries alive.
        stages = [vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_VERTEX_BIT, module=vert, pName="main"),
                  vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_FRAGMENT_BIT, module=frag, pName="main")]
        vertex_input = vertex_input or vk.VkPipelineVertexInputStateCreateInfo()
        input_assembly = vk.VkPipelineInputAssemblyStateCreateInfo(topology=topology)
        viewport = vk.VkPipelineViewportStateCreateInfo(viewportCount=1, scissorCount=1)
        raster = vk.VkPipelineRasterizationStateCreateInfo(
            polygonMode=vk.VK_POLYGON_MODE_FILL, cullMode=vk.VK_CULL_MODE_NONE,
            frontFace=vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, lineWidth=1.0)
        multisample = vk.VkPipelineMultisampleStateCreateInfo(rasterizationSamples=vk.VK_SAMPLE_COUNT_1_BIT)
        blend_state = vk.VkPipelineColorBlendStateCreateInfo(pAttachments=[blend])
        dynamic = vk.VkPipelineDynamicStateCreateInfo(
            pDynamicStates=[vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_SCISSOR])
        info = vk.VkGraphicsPipelineCreateInfo(
            pStages=stages, pVertexInputState=vertex_input, pInputAssemblyState=input_assembly,
            pViewportState=viewport, pRasterizationState=raster, pMultisampleState=multisample,
            pColorBlendState=blend_state, pDynamicState=dynamic,
            layout=layout, renderPass=render_pass, subpass=0)
        return vk.vkCreateGraphicsPipelines(device, None, 1, [info], None)[0]
    finally:
        vk.vkDestroyShaderModule(device, vert, None)
        vk.vkDestroyShaderModule(device, frag, None)


def set_viewport(cmd, extent):
    """The whole ``extent`` (width, height) as viewport and scissor."""
    width, height = extent
    vk.vkCmdSetViewport(cmd, 0, 1, [vk.VkViewport(
        x=0.0, y=0.0, width=float(width), height=float(height), minDepth=0.0, maxDepth=1.0)])
    vk.vkCmdSetScissor(cmd, 0, 1, [vk.VkRect2D(
        offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=width, height=height))])


BLENDS = ("additive", "over")


def _blend_state(blend: str):
    """``"additive"``: light adds up (ONE, ONE); ``"over"``: premultiplied
    alpha (ONE, ONE_MINUS_SRC_ALPHA), right when drawn back to front. Both
    keep the cleared alpha (1.0), so the image stays opaque."""
    if blend not in BLENDS:
        raise ValueError(f"blend must be one of {BLENDS}, got {blend!r}")
    return vk.VkPipelineColorBlendAttachmentState(
        blendEnable=vk.VK_TRUE,
        srcColorBlendFactor=vk.VK_BLEND_FACTOR_ONE,
        dstColorBlendFactor=vk.VK_BLEND_FACTOR_ONE if blend == "additive"
        else vk.VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
        colorBlendOp=vk.VK_BLEND_OP_ADD,
        srcAlphaBlendFactor=vk.VK_BLEND_FACTOR_ZERO,
        dstAlphaBlendFactor=vk.VK_BLEND_FACTOR_ONE,
        alphaBlendOp=vk.VK_BLEND_OP_ADD,
        colorWriteMask=ALL_COMPONENTS)


class PointsPipeline:
    """Draws POINT_LIST from two vertex buffers (positions, colours),
    blended additively or "over" (see ``_blend_state``), in vertex order or
    in the order of an index buffer."""

    def __init__(self, device, render_pass, blend: str = "additive"):
        self.device = device
        self.blend = blend
        state = _blend_state(blend)
        self.layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
            pPushConstantRanges=[vk.VkPushConstantRange(
                stageFlags=vk.VK_SHADER_STAGE_VERTEX_BIT, offset=0, size=PUSH_CONSTANT_BYTES)]), None)
        vertex_input = vk.VkPipelineVertexInputStateCreateInfo(
            pVertexBindingDescriptions=[
                vk.VkVertexInputBindingDescription(
                    binding=b, stride=VEC4_BYTES, inputRate=vk.VK_VERTEX_INPUT_RATE_VERTEX)
                for b in VERTEX_BINDINGS],
            pVertexAttributeDescriptions=[
                vk.VkVertexInputAttributeDescription(
                    location=b, binding=b, format=vk.VK_FORMAT_R32G32B32A32_SFLOAT, offset=0)
                for b in VERTEX_BINDINGS])
        try:
            self.handle = create_graphics_pipeline(device, render_pass, self.layout, "points",
                                                   vk.VK_PRIMITIVE_TOPOLOGY_POINT_LIST, state, vertex_input,
                                                   fragment="points" if blend == "additive" else "points_over")
        except BaseException:
            vk.vkDestroyPipelineLayout(device, self.layout, None)
            raise

    def record_draw(self, cmd, extent, positions, colors, count: int, point_scale: float, indices=None,
                    indirect=None):
        """Bind and draw ``count`` points (inside a render pass), in the
        order of ``indices`` (a VkBuffer of uint32 point indices) if given;
        with ``indirect`` (a VkBuffer holding one VkDrawIndexedIndirectCommand)
        the number of indices is read from it on the GPU."""
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, self.handle)
        set_viewport(cmd, extent)
        push = struct.pack("<f", point_scale)
        vk.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_VERTEX_BIT, 0, len(push),
                              vk.ffi.from_buffer(push))
        vk.vkCmdBindVertexBuffers(cmd, 0, 2, [positions, colors], [0, 0])
        if indices is None:
            vk.vkCmdDraw(cmd, count, 1, 0, 0)
        else:
            vk.vkCmdBindIndexBuffer(cmd, indices, 0, vk.VK_INDEX_TYPE_UINT32)
            if indirect is None:
                vk.vkCmdDrawIndexed(cmd, count, 1, 0, 0, 0)
            else:
                vk.vkCmdDrawIndexedIndirect(cmd, indirect, 0, 1, 20)

    def destroy(self):
        vk.vkDestroyPipeline(self.device, self.handle, None)
        vk.vkDestroyPipelineLayout(self.device, self.layout, None)
