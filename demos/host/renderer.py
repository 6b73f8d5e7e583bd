"""HostRenderer: a small Vulkan point-sprite renderer with a frame loop that
lets outside code record its own GPU work into each frame's command buffer.

Frame anatomy (one command buffer, one submit per frame)::

    begin command buffer
    record_before_pass(cmd)      <- outside any render pass; e.g. compute
                                    that writes the vertex buffers
    begin render pass (clear)
      draw points from the vertex buffers
    end render pass
    record_after_pass(cmd)       <- e.g. post-processing
    copy to readback (offscreen) / transition for present (window)
    end, submit, present

Synchronisation contract for code recording into the frame:

* The renderer reads the vertex buffers at ``vertex_buffer_access``
  (VERTEX_INPUT stage, VERTEX_ATTRIBUTE_READ access) during the render pass.
  Work recorded in ``record_before_pass`` that writes them must put a barrier
  *before* its writes with that pair as source (the previous frame, still
  possibly in flight on the same queue, reads them), and one *after* its
  writes with that pair as destination. The values are identical in the
  synchronization2 enums, so they can be used with either barrier API.
* While ``record_after_pass`` runs, ``current_image`` (view
  ``current_image_view``, format ``color_format``, size ``extent``) has just
  been written by the render pass and is in the state
  ``color_attachment_access`` (stage, access, layout). Code that touches it
  must leave it in that layout, with its own writes synchronised to the
  COLOR_ATTACHMENT_OUTPUT stage: the renderer's next barrier (to the readback
  copy or to presentation) starts from that stage.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import glfw
import numpy as np
import vulkan as vk

from . import swapchain as sc
from .device import SWAPCHAIN, create_device, effective_api_version, pick_physical_device
from .instance import DebugMessenger, create_instance, version_tuple
from .offscreen import OffscreenTarget
from .pipeline import VEC4_BYTES, PointsPipeline, create_render_pass
from .png import write_png
from .resources import (DEVICE_LOCAL, HOST_COHERENT, HOST_VISIBLE, Buffer, buffer_barrier,
                        one_time_commands, pipeline_barrier)

Recorder = Callable[[object], None]


class VertexBuffers(NamedTuple):
    """The two vertex buffers: one vec4 per point in each."""
    positions: object       # VkBuffer: xy clip-space position, z unused, w point size (px)
    colors: object          # VkBuffer: rgb colour, a intensity
    positions_size: int     # bytes
    colors_size: int        # bytes
    count: int              # points


def _key(handle) -> int:
    return int(vk.ffi.cast("uintptr_t", handle))


class HostRenderer:
    """Point-sprite renderer, offscreen (``headless=True``) or in a GLFW window.

    Parameters:
        width, height: render size (offscreen) / initial window size.
        title: window title and VkApplicationInfo name.
        headless: render into an offscreen image read back after each frame;
            no window system is touched.
        device_name: case-insensitive substring of the device to use;
            otherwise a discrete GPU is preferred, then anything.
        device_extensions: device extensions to enable where supported
            (``enabled_extensions`` lists what was actually enabled).
        features_chain: a features struct (or pointer) chained into
            VkDeviceCreateInfo.pNext as given. If it contains a
            VkPhysicalDeviceFeatures2, the renderer sets ``largePoints`` in
            it (when supported) instead of passing pEnabledFeatures.
        validation: enable VK_LAYER_KHRONOS_validation with synchronization
            validation; warnings and errors go to ``validation_messages``.

    Handles for code that records into the frame: ``instance``,
    ``physical_device``, ``device``, ``queue``, ``queue_family_index``,
    ``api_version`` ((major, minor), at most (1, 3)), ``enabled_extensions``,
    ``command_pool`` (resettable command buffers, this queue family),
    ``memory_properties``, ``frames_in_flight``.
    """

    FRAMES_IN_FLIGHT = 2

    # Usage of the vertex buffers: besides vertex input they can be written
    # by compute shaders and transfers (and read back with transfers).
    VERTEX_BUFFER_USAGE = (vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT
                           | vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
                           | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
                           | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT)

    # How the renderer itself accesses the vertex buffers: (stage, access).
    vertex_buffer_access = (vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT,
                            vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT)

    # State of the target image around record_after_pass: (stage, access, layout).
    color_attachment_access = (vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                               vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                               vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)

    def __init__(self, width: int = 800, height: int = 600, title: str = "host renderer",
                 headless: bool = False, device_name: str | None = None,
                 device_extensions=(), features_chain=None, validation: bool = False):
        self.headless = headless
        self.validation = validation
        self.validation_messages: list[str] = []

        self.window = None
        self.surface = None
        self.instance = None
        self.physical_device = None
        self.device = None
        self.queue = None
        self.queue_family_index = None
        self.api_version: tuple[int, int] | None = None
        self.enabled_extensions: list[str] = []
        self.command_pool = None

        self.point_scale = 1.0
        self.clear_color = (0.01, 0.01, 0.02, 1.0)
        self.vertex_buffers: VertexBuffers | None = None
        self.draw_count = 0
        self.frame_count = 0
        self.current_frame_slot = 0     # frame-in-flight slot being recorded / next to record
        self.current_image = None       # VkImage the frame being recorded renders to
        self.current_image_view = None  # and its VkImageView
        self.device_name = None
        self.large_points = False       # point sizes above 1 px supported and enabled

        self._teardown: list[Callable[[], None]] = []   # run in reverse by close()
        self._buffers: dict[int, Buffer] = {}
        self._last_slot = None
        try:
            self._create(width, height, title, device_name, device_extensions, features_chain)
        except BaseException:
            self.close()
            raise

    # -- construction ----------------------------------------------------------

    def _create(self, width, height, title, device_name, device_extensions, features_chain):
        instance_extensions = []
        if not self.headless:
            self.window = sc.create_window(width, height, title)
            self._teardown.append(lambda: sc.destroy_window(self.window))
            instance_extensions += sc.required_instance_extensions()

        messenger = DebugMessenger(self.validation_messages) if self.validation else None
        self.instance, instance_version = create_instance(
            title, instance_extensions, self.validation, messenger)
        self._teardown.append(lambda: vk.vkDestroyInstance(self.instance, None))
        if messenger is not None:
            self._teardown.append(lambda: messenger.destroy(self.instance))

        if self.window is not None:
            self.surface = sc.create_surface(self.instance, self.window)
            destroy_surface = vk.vkGetInstanceProcAddr(self.instance, "vkDestroySurfaceKHR")
            self._teardown.append(lambda: destroy_surface(self.instance, self.surface, None))

        required = [] if self.headless else [SWAPCHAIN]
        choice = pick_physical_device(self.instance, device_name, self.surface, required)
        self.physical_device = choice.physical_device
        self.device_name = choice.name
        self.queue_family_index = choice.queue_family_index
        self.api_version = version_tuple(effective_api_version(instance_version, choice))
        self.device, self.enabled_extensions, self.large_points = create_device(
            choice, device_extensions, features_chain, required)
        self._teardown.append(lambda: vk.vkDestroyDevice(self.device, None))
        self._teardown.append(self._destroy_vertex_buffers)
        self.memory_properties = vk.vkGetPhysicalDeviceMemoryProperties(self.physical_device)
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family_index, 0)

        self.command_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=self.queue_family_index), None)
        self._teardown.append(lambda: vk.vkDestroyCommandPool(self.device, self.command_pool, None))
        self._command_buffers = list(vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=self.FRAMES_IN_FLIGHT)))
        self._fences = [
            vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(flags=vk.VK_FENCE_CREATE_SIGNALED_BIT), None)
            for _ in range(self.FRAMES_IN_FLIGHT)]
        self._teardown.append(lambda: [vk.vkDestroyFence(self.device, f, None) for f in self._fences])

        if self.headless:
            self._target = OffscreenTarget(self.device, self.memory_properties, width, height,
                                           self.FRAMES_IN_FLIGHT)
        else:
            self._target = sc.Swapchain(self.instance, self.physical_device, self.device, self.queue,
                                        self.surface, self.window, self.FRAMES_IN_FLIGHT)
        self._teardown.append(self._target.destroy)
        self.render_pass = create_render_pass(self.device, self._target.format)
        self._teardown.append(lambda: vk.vkDestroyRenderPass(self.device, self.render_pass, None))
        self._target.build(self.render_pass)

        self.pipeline = PointsPipeline(self.device, self.render_pass)
        self._teardown.append(self.pipeline.destroy)

    # -- properties ------------------------------------------------------------

    @property
    def extent(self) -> tuple[int, int]:
        """Current render size (width, height); changes when the window is resized."""
        return self._target.extent

    @property
    def color_format(self) -> int:
        return self._target.format

    @property
    def frames_in_flight(self) -> int:
        return self.FRAMES_IN_FLIGHT

    @property
    def should_close(self) -> bool:
        return self.window is not None and bool(glfw.window_should_close(self.window))

    # -- vertex buffers --------------------------------------------------------

    def create_vertex_buffers(self, count: int) -> VertexBuffers:
        """(Re)create the position and colour buffers for ``count`` points.

        Device-local memory where available (any memory type otherwise),
        zero-filled (zero intensity: invisible until written). Sets
        ``draw_count`` to ``count``.
        """
        if count <= 0:
            raise ValueError("count must be positive")
        self.wait_idle()
        self._destroy_vertex_buffers()
        size = count * VEC4_BYTES
        positions, colors = (
            Buffer(self.device, self.memory_properties, size, self.VERTEX_BUFFER_USAGE, preferred=DEVICE_LOCAL)
            for _ in range(2))
        for buffer in (positions, colors):
            self._buffers[_key(buffer.handle)] = buffer
        with one_time_commands(self.device, self.command_pool, self.queue) as cmd:
            for buffer in (positions, colors):
                vk.vkCmdFillBuffer(cmd, buffer.handle, 0, size, 0)
            self._barrier_after_transfer(cmd, positions, colors)
        self.vertex_buffers = VertexBuffers(positions.handle, colors.handle, size, size, count)
        self.draw_count = count
        return self.vertex_buffers

    def upload(self, buffer, data: np.ndarray, offset: int = 0):
        """Copy ``data`` into one of the renderer's buffers at byte ``offset``.

        A setup-time helper: it waits until the device is idle and goes
        through a staging buffer.
        """
        target = self._buffers.get(_key(buffer))
        if target is None:
            raise ValueError("upload() only accepts buffers created by this renderer")
        data = np.ascontiguousarray(data)
        nbytes = data.nbytes
        if offset < 0 or offset + nbytes > target.size:
            raise ValueError(f"{nbytes} bytes at offset {offset} exceed the buffer size {target.size}")
        if nbytes == 0:
            return

        self.wait_idle()
        staging = Buffer(self.device, self.memory_properties, nbytes, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                         required=HOST_VISIBLE | HOST_COHERENT)
        try:
            staging.map()[0:nbytes] = data.tobytes()
            with one_time_commands(self.device, self.command_pool, self.queue) as cmd:
                pipeline_barrier(
                    cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                    buffers=[buffer_barrier(target.handle, target.size,
                                            vk.VK_ACCESS_MEMORY_WRITE_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)])
                vk.vkCmdCopyBuffer(cmd, staging.handle, target.handle, 1,
                                   [vk.VkBufferCopy(srcOffset=0, dstOffset=offset, size=nbytes)])
                self._barrier_after_transfer(cmd, target)
        finally:
            staging.destroy()

    @staticmethod
    def _barrier_after_transfer(cmd, *buffers: Buffer):
        """Make transfer writes visible to every later use of ``buffers``."""
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            buffers=[buffer_barrier(b.handle, b.size, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                    vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
                     for b in buffers])

    def _destroy_vertex_buffers(self):
        for buffer in self._buffers.values():
            buffer.destroy()
        self._buffers.clear()
        self.vertex_buffers = None
        self.draw_count = 0

    # -- frame loop ------------------------------------------------------------

    def frame(self, record_before_pass: Recorder | None = None,
              record_after_pass: Recorder | None = None) -> bool:
        """Record, submit and present one frame.

        ``record_before_pass(cmd)`` and ``record_after_pass(cmd)`` receive the
        frame's VkCommandBuffer (already begun). Returns False, without calling
        them, when the window has been closed.
        """
        if self.window is not None:
            glfw.poll_events()
            if self.should_close:
                return False

        slot = self.current_frame_slot
        fence = self._fences[slot]
        vk.vkWaitForFences(self.device, 1, [fence], vk.VK_TRUE, vk.UINT64_MAX)
        index = self._target.acquire(slot)
        if index is None:
            return False

        cmd = self._command_buffers[slot]
        vk.vkResetCommandBuffer(cmd, 0)
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        self.current_image = self._target.image(index)
        self.current_image_view = self._target.view(index)
        if record_before_pass is not None:
            record_before_pass(cmd)
        self._record_pass(cmd, index)
        if record_after_pass is not None:
            record_after_pass(cmd)
        self._target.record_finish(cmd, index)
        vk.vkEndCommandBuffer(cmd)

        waits, wait_stages = self._target.submit_waits(slot)
        signals = self._target.submit_signals(index)
        submit = vk.VkSubmitInfo(
            pWaitSemaphores=waits or None,
            pWaitDstStageMask=wait_stages or None,
            pCommandBuffers=[cmd],
            pSignalSemaphores=signals or None)
        # Reset only now, so an exception while recording cannot leave the
        # fence unsignalled with nothing submitted to signal it.
        vk.vkResetFences(self.device, 1, [fence])
        vk.vkQueueSubmit(self.queue, 1, [submit], fence)
        self._target.present(index)

        self._last_slot = slot
        self.current_frame_slot = (slot + 1) % self.FRAMES_IN_FLIGHT
        self.frame_count += 1
        return True

    def _record_pass(self, cmd, index: int):
        width, height = self._target.extent
        clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=list(self.clear_color)))
        vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
            renderPass=self.render_pass,
            framebuffer=self._target.framebuffers[index],
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0),
                                   extent=vk.VkExtent2D(width=width, height=height)),
            pClearValues=[clear]), vk.VK_SUBPASS_CONTENTS_INLINE)
        if self.vertex_buffers is not None and self.draw_count > 0:
            count = min(self.draw_count, self.vertex_buffers.count)
            self.pipeline.record_draw(cmd, (width, height), self.vertex_buffers.positions,
                                      self.vertex_buffers.colors, count, self.point_scale)
        vk.vkCmdEndRenderPass(cmd)

    # -- readback --------------------------------------------------------------

    def last_frame_rgba(self) -> np.ndarray:
        """(H, W, 4) uint8 RGBA pixels of the last frame (offscreen mode only);
        waits for that frame to finish."""
        if not self.headless:
            raise RuntimeError("last_frame_rgba() needs headless (offscreen) mode")
        if self._last_slot is None:
            raise RuntimeError("no frame has been rendered yet")
        vk.vkWaitForFences(self.device, 1, [self._fences[self._last_slot]], vk.VK_TRUE, vk.UINT64_MAX)
        return self._target.read(self._last_slot)

    def save_png(self, path):
        """Write the last offscreen frame to ``path`` as PNG; returns the path."""
        return write_png(path, self.last_frame_rgba())

    # -- teardown --------------------------------------------------------------

    def wait_idle(self):
        if self.device is not None:
            vk.vkDeviceWaitIdle(self.device)

    def close(self):
        """Wait for the device and destroy everything, newest first. Safe to call twice."""
        if not self._teardown:
            return
        self.wait_idle()
        while self._teardown:
            self._teardown.pop()()
        self.device = self.instance = self.window = self.surface = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
