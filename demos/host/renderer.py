"""HostRenderer: a small Vulkan point-sprite renderer with a frame loop that
lets outside code record its own GPU work into each frame's command buffer.

Frame anatomy (one command buffer, one submit per frame)::

    begin command buffer
    record_before_pass(cmd)      <- outside any render pass; e.g. compute
                                    that writes the vertex buffers
    begin render pass (clear)
      draw the backdrop texture, if there is one
      draw points from the vertex buffers (in the index buffer's order,
      if the buffers were created ``indexed``)
    end render pass
    record_after_pass(cmd)       <- e.g. post-processing (copy_image_to_buffer,
                                    work on the buffer, copy_buffer_to_image)
    record_resolve(cmd)          <- HDR mode only: scene image -> output image
                                    (default: a blit)
    copy to readback (offscreen) / transition for present (window)
    end, submit, present

In HDR mode (``hdr=True``) the pass draws into an rgba16f *scene image* per
frame slot (``scene_image``) instead of the output image, so additive light
goes past 1.0; the resolve step writes the output (``current_image``).

Synchronisation contract for code recording into the frame:

* The renderer reads the vertex buffers at ``vertex_buffer_access``
  (VERTEX_INPUT stage, VERTEX_ATTRIBUTE_READ access) during the render pass,
  and the index buffer, if any, at ``index_buffer_access`` (INDEX_READ).
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
  copy or to presentation) starts from that stage. ``copy_image_to_buffer``
  and ``copy_buffer_to_image`` do exactly that for code that processes the
  frame in a buffer (``image_copy_supported`` says whether the images allow
  it).
* HDR mode: around ``record_after_pass`` and ``record_resolve`` the scene
  image is in ``color_attachment_access`` state, and must be left so. The
  output image enters ``record_resolve`` in ``output_entry_access`` state
  (UNDEFINED layout: its old contents are discarded; stage
  COLOR_ATTACHMENT_OUTPUT, which the swapchain's acquire semaphore is waited
  at, so a barrier from it is ordered after the acquire). The resolve must
  write all of it and leave it in ``color_attachment_access`` state.
* The backdrop texture (``create_backdrop``) is sampled in the pass in
  ``Backdrop.access`` state (fragment-shader reads, SHADER_READ_ONLY_OPTIMAL);
  code writing it in ``record_before_pass`` must leave it in that state.

Libraries that need device extensions or features of their own (a compute
library adopting the device, say) get a say before the device exists:
``configure_device(physical_device, api_version)`` returns what to enable.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import glfw
import numpy as np
import vulkan as vk

from . import swapchain as sc
from .backdrop import Backdrop
from .device import SWAPCHAIN, create_device, effective_api_version, pick_physical_device
from .frame_timer import FrameTimer
from .instance import DebugMessenger, create_instance, version_tuple
from .offscreen import OffscreenTarget
from .pipeline import VEC4_BYTES, PointsPipeline, create_render_pass
from .png import write_png
from .scene import SceneTarget
from .resources import (DEVICE_LOCAL, HOST_COHERENT, HOST_VISIBLE, Buffer, buffer_barrier,
                        image_barrier, one_time_commands, pipeline_barrier)

Recorder = Callable[[object], None]
# (physical_device, (major, minor)) -> (device extensions, features pNext chain or None)
DeviceConfigurator = Callable[[object, tuple], tuple]

# Image formats whose pixels are 4 bytes: the ones copy_image_to_buffer handles.
_COPYABLE_FORMATS = (vk.VK_FORMAT_R8G8B8A8_UNORM, vk.VK_FORMAT_B8G8R8A8_UNORM)
_COPY_BYTES_PER_PIXEL = 4


class VertexBuffers(NamedTuple):
    """The two vertex buffers: one vec4 per point in each."""
    positions: object       # VkBuffer: xy clip-space position, z unused, w point size (px)
    colors: object          # VkBuffer: rgb colour, a intensity
    positions_size: int     # bytes
    colors_size: int        # bytes
    count: int              # points
    indices: object = None  # VkBuffer of ``count`` uint32: the draw order (``indexed=True``)


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
        hdr: draw into an rgba16f scene image per frame slot, resolved into
            the output after the pass (see the module notes).
        blend: ``"additive"`` (light adds up, any order) or ``"over"``
            (premultiplied alpha, for points drawn back to front).
        extra_image_usage: VkImageUsageFlags the output images (where the
            surface allows them) and the scene images get besides what the
            renderer needs (e.g. SAMPLED | STORAGE for compute on them).
        configure_device: called once the physical device is chosen and
            before the logical device is created, as
            ``configure_device(physical_device, api_version)``; returns
            ``(extensions, features_chain)`` to enable as well (extensions the
            device lacks are skipped; the chain is used like
            ``features_chain``, so pass at most one of the two).

    Handles for code that records into the frame: ``instance``,
    ``physical_device``, ``device``, ``queue``, ``queue_family_index``,
    ``api_version`` ((major, minor), at most (1, 3)), ``enabled_extensions``,
    ``command_pool`` (resettable command buffers, this queue family),
    ``frame_timer`` (GPU time of each frame's command buffer),
    ``memory_properties``, ``frames_in_flight``, ``features_chain`` (the
    pNext chain the device was created with, kept alive; None if none).
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
    # The index buffer (``create_vertex_buffers(indexed=True)``): the draw order.
    index_buffer_access = (vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, vk.VK_ACCESS_INDEX_READ_BIT)
    INDEX_BUFFER_USAGE = ((VERTEX_BUFFER_USAGE & ~vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT)
                          | vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT)

    # State of the target image around record_after_pass: (stage, access, layout).
    color_attachment_access = (vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                               vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                               vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)

    def __init__(self, width: int = 800, height: int = 600, title: str = "host renderer",
                 headless: bool = False, device_name: str | None = None,
                 device_extensions=(), features_chain=None, validation: bool = False,
                 configure_device: DeviceConfigurator | None = None, extra_image_usage: int = 0,
                 hdr: bool = False, blend: str = "additive"):
        self.headless = headless
        self.blend = blend
        self.hdr = hdr
        self.validation = validation
        # Usage the application wants its target images to have besides
        # colour attachment (e.g. SAMPLED | STORAGE to post-process them in
        # compute); swapchains grant what the surface supports.
        self.extra_image_usage = extra_image_usage
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
        self.features_chain = None
        self.command_pool = None

        self.point_scale = 1.0
        self.clear_color = (0.01, 0.01, 0.02, 1.0)
        self.vertex_buffers: VertexBuffers | None = None
        self.draw_count = 0
        self.frame_count = 0
        self.current_frame_slot = 0     # frame-in-flight slot being recorded / next to record
        self.current_image = None       # VkImage the frame being recorded renders to
        self.current_image_view = None  # and its VkImageView
        self.scene_image = None         # HDR mode: the VkImage the pass draws into
        self.scene_image_view = None
        self.backdrop = None            # create_backdrop()
        self._scene: SceneTarget | None = None
        self.device_name = None
        self.large_points = False       # point sizes above 1 px supported and enabled

        self._teardown: list[Callable[[], None]] = []   # run in reverse by close()
        self._buffers: dict[int, Buffer] = {}        # vertex buffers
        self._extra_buffers: dict[int, Buffer] = {}  # create_buffer()
        self._last_slot = None
        try:
            self._create(width, height, title, device_name, device_extensions, features_chain,
                         configure_device)
        except BaseException:
            self.close()
            raise

    # -- construction ----------------------------------------------------------

    def _create(self, width, height, title, device_name, device_extensions, features_chain,
                configure_device):
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
        if configure_device is not None:
            extra_extensions, extra_chain = configure_device(self.physical_device, self.api_version)
            device_extensions = [*device_extensions, *extra_extensions]
            if extra_chain is not None:
                if features_chain is not None:
                    raise ValueError("features_chain and a configure_device chain were both given")
                features_chain = extra_chain
        self.features_chain = features_chain
        self.device, self.enabled_extensions, self.large_points = create_device(
            choice, device_extensions, features_chain, required)
        self._teardown.append(lambda: vk.vkDestroyDevice(self.device, None))
        self._teardown.append(self._destroy_vertex_buffers)
        self._teardown.append(self._destroy_extra_buffers)
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
                                           self.FRAMES_IN_FLIGHT, extra_usage=self.extra_image_usage)
        else:
            self._target = sc.Swapchain(self.instance, self.physical_device, self.device, self.queue,
                                        self.surface, self.window, self.FRAMES_IN_FLIGHT,
                                        extra_usage=self.extra_image_usage)
        self._teardown.append(self._target.destroy)
        self.render_pass = create_render_pass(self.device, SceneTarget.FORMAT if self.hdr else self._target.format)
        self._teardown.append(lambda: vk.vkDestroyRenderPass(self.device, self.render_pass, None))
        self._target.build(None if self.hdr else self.render_pass)
        if self.hdr:
            self._scene = SceneTarget(self.device, self.memory_properties, self._target.extent,
                                      self.FRAMES_IN_FLIGHT, self.render_pass, self.extra_image_usage)
            self._teardown.append(self._scene.destroy)

        self.pipeline = PointsPipeline(self.device, self.render_pass, self.blend)
        self._teardown.append(self.pipeline.destroy)
        self.frame_timer = FrameTimer(self.physical_device, self.device, self.queue_family_index,
                                      self.FRAMES_IN_FLIGHT)
        self._teardown.append(self.frame_timer.destroy)

    # -- properties ------------------------------------------------------------

    @property
    def extent(self) -> tuple[int, int]:
        """Current render size (width, height); changes when the window is resized."""
        return self._target.extent

    @property
    def color_format(self) -> int:
        return self._target.format

    @property
    def scene_format(self) -> int:
        """HDR mode: the scene images' VkFormat (rgba16f)."""
        return SceneTarget.FORMAT

    @property
    def scene_usage(self) -> int:
        """HDR mode: VkImageUsageFlags of the scene images."""
        return self._scene.usage if self._scene is not None else 0

    # State of the output image when record_resolve begins: (stage, access, layout).
    output_entry_access = (vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, vk.VK_IMAGE_LAYOUT_UNDEFINED)

    @property
    def frames_in_flight(self) -> int:
        return self.FRAMES_IN_FLIGHT

    @property
    def image_usage(self) -> int:
        """VkImageUsageFlags the target images were created with."""
        return self._target.image_usage

    @property
    def image_copy_supported(self) -> bool:
        """Whether the target images can be copied to and from buffers
        (``copy_image_to_buffer`` / ``copy_buffer_to_image``)."""
        return bool(self._target.transfer_usage) and self._target.format in _COPYABLE_FORMATS

    @property
    def image_bytes(self) -> int:
        """Size of the current image as tightly packed 4-byte pixels."""
        width, height = self._target.extent
        return width * height * _COPY_BYTES_PER_PIXEL

    @property
    def should_close(self) -> bool:
        return self.window is not None and bool(glfw.window_should_close(self.window))

    def set_title(self, title: str):
        """Set the window title (ignored offscreen)."""
        if self.window is not None:
            glfw.set_window_title(self.window, title)

    # -- vertex buffers --------------------------------------------------------

    def create_vertex_buffers(self, count: int, indexed: bool = False) -> VertexBuffers:
        """(Re)create the position and colour buffers for ``count`` points,
        and with ``indexed`` an index buffer that gives the draw order (the
        identity until someone writes it).

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
        indices = None
        if indexed:
            index = Buffer(self.device, self.memory_properties, count * 4, self.INDEX_BUFFER_USAGE,
                           preferred=DEVICE_LOCAL)
            self._buffers[_key(index.handle)] = index
            self.upload(index.handle, np.arange(count, dtype=np.uint32))
            indices = index.handle
        self.vertex_buffers = VertexBuffers(positions.handle, colors.handle, size, size, count, indices)
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

    # -- backdrop ----------------------------------------------------------------

    def create_backdrop(self, width: int, height: int, extra_usage: int = 0) -> Backdrop:
        """A ``width`` x ``height`` rgba8 texture drawn behind everything from
        the next frame on (replacing an earlier one; waits for the device).
        Black until written; see ``Backdrop.access`` for the contract of
        code that writes it. ``extra_usage``: e.g. STORAGE for compute writes."""
        if width <= 0 or height <= 0:
            raise ValueError("backdrop size must be positive")
        self.wait_idle()
        if self.backdrop is None:
            self._teardown.append(self._destroy_backdrop)
        else:
            self.backdrop.destroy()
        self.backdrop = Backdrop(self, width, height, extra_usage)
        return self.backdrop

    def _destroy_backdrop(self):
        if self.backdrop is not None:
            self.backdrop.destroy()
            self.backdrop = None

    # -- extra buffers and frame copies ----------------------------------------

    STORAGE_BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
                            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    def create_buffer(self, size: int, usage: int | None = None):
        """A device-local buffer (``STORAGE_BUFFER_USAGE`` by default) owned
        by the renderer and destroyed by ``close()`` or ``destroy_buffer()``.
        Returns its VkBuffer. Contents are undefined."""
        if size <= 0:
            raise ValueError("size must be positive")
        buffer = Buffer(self.device, self.memory_properties, size,
                        self.STORAGE_BUFFER_USAGE if usage is None else usage, preferred=DEVICE_LOCAL)
        self._extra_buffers[_key(buffer.handle)] = buffer
        return buffer.handle

    def destroy_buffer(self, handle):
        """Destroy a buffer from ``create_buffer``; waits until the device is idle."""
        buffer = self._extra_buffers.pop(_key(handle), None)
        if buffer is None:
            raise ValueError("destroy_buffer() only accepts buffers from create_buffer()")
        self.wait_idle()
        buffer.destroy()

    def _destroy_extra_buffers(self):
        for buffer in self._extra_buffers.values():
            buffer.destroy()
        self._extra_buffers.clear()

    def _check_image_copy(self):
        if not self.image_copy_supported:
            raise RuntimeError("the render target does not allow copies (see image_copy_supported)")
        if self.current_image is None:
            raise RuntimeError("image copies are recorded from inside frame()")

    def _image_region(self):
        width, height = self._target.extent
        return vk.VkBufferImageCopy(
            bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
            imageSubresource=vk.VkImageSubresourceLayers(
                aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, baseArrayLayer=0, layerCount=1),
            imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
            imageExtent=vk.VkExtent3D(width=width, height=height, depth=1))

    def copy_image_to_buffer(self, cmd, buffer):
        """In ``record_after_pass``: copy the frame's image into ``buffer``
        (``image_bytes`` bytes, tightly packed 4-byte pixels in
        ``color_format`` channel order).

        Before the copy it waits for earlier TRANSFER-stage use of the buffer
        (so whoever used it before must have handed it to the TRANSFER stage,
        e.g. with a barrier whose destination is TRANSFER). After it the
        buffer holds the pixels, written at (TRANSFER, TRANSFER_WRITE), and
        the image is back in ``color_attachment_access`` state.
        """
        self._check_image_copy()
        image = self.current_image
        attachment_stage, attachment_access, attachment_layout = self.color_attachment_access
        pipeline_barrier(
            cmd, attachment_stage | vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
            buffers=[buffer_barrier(buffer, self.image_bytes, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                    vk.VK_ACCESS_TRANSFER_WRITE_BIT)],
            images=[image_barrier(image, attachment_layout, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                                  attachment_access, vk.VK_ACCESS_TRANSFER_READ_BIT)])
        vk.vkCmdCopyImageToBuffer(cmd, image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, buffer, 1,
                                  [self._image_region()])
        # Back to the attachment layout; later colour writes wait for the copy.
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, attachment_stage,
            images=[image_barrier(image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, attachment_layout,
                                  0, attachment_access | vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT)])

    def copy_buffer_to_image(self, cmd, buffer):
        """In ``record_after_pass``: overwrite the frame's image with the
        pixels in ``buffer`` (same layout as ``copy_image_to_buffer``).

        The buffer's contents must already be available to the TRANSFER
        stage (the writer's barrier has TRANSFER / TRANSFER_READ as its
        destination). The image is left in ``color_attachment_access`` state,
        its new contents synchronised to COLOR_ATTACHMENT_OUTPUT.
        """
        self._check_image_copy()
        image = self.current_image
        attachment_stage, attachment_access, attachment_layout = self.color_attachment_access
        pipeline_barrier(
            cmd, attachment_stage, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
            images=[image_barrier(image, attachment_layout, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                  attachment_access, vk.VK_ACCESS_TRANSFER_WRITE_BIT)])
        vk.vkCmdCopyBufferToImage(cmd, buffer, image, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1,
                                  [self._image_region()])
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, attachment_stage,
            images=[image_barrier(image, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, attachment_layout,
                                  vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                  attachment_access | vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT)])

    # -- frame loop ------------------------------------------------------------

    def frame(self, record_before_pass: Recorder | None = None,
              record_after_pass: Recorder | None = None,
              record_resolve: Recorder | None = None) -> bool:
        """Record, submit and present one frame.

        ``record_before_pass(cmd)``, ``record_after_pass(cmd)`` and, in HDR
        mode, ``record_resolve(cmd)`` (which replaces the default blit of the
        scene into the output) receive the frame's VkCommandBuffer (already
        begun). Returns False, without calling them, when the window has been
        closed.
        """
        if record_resolve is not None and not self.hdr:
            raise ValueError("record_resolve needs hdr=True")
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
        self.frame_timer.begin(cmd, slot)
        self.current_image = self._target.image(index)
        self.current_image_view = self._target.view(index)
        if self._scene is not None:
            if self._scene.extent != self._target.extent:    # the window was resized
                self.wait_idle()
                self._scene.resize(self._target.extent)
            self.scene_image = self._scene.images[slot].handle
            self.scene_image_view = self._scene.images[slot].view
        if record_before_pass is not None:
            record_before_pass(cmd)
        self._record_pass(cmd, index, slot)
        if record_after_pass is not None:
            record_after_pass(cmd)
        if record_resolve is not None:
            record_resolve(cmd)
        elif self._scene is not None:
            if not self._target.transfer_usage:
                raise RuntimeError("the output images allow no transfers: pass record_resolve")
            self._scene.record_blit(cmd, slot, self.current_image, self.color_attachment_access)
        self._target.record_finish(cmd, index)
        self.frame_timer.end(cmd, slot)
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

    def _record_pass(self, cmd, index: int, slot: int):
        width, height = self._target.extent
        clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=list(self.clear_color)))
        framebuffer = self._scene.framebuffers[slot] if self._scene is not None else self._target.framebuffers[index]
        vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
            renderPass=self.render_pass,
            framebuffer=framebuffer,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0),
                                   extent=vk.VkExtent2D(width=width, height=height)),
            pClearValues=[clear]), vk.VK_SUBPASS_CONTENTS_INLINE)
        if self.backdrop is not None:
            self.backdrop.record_draw(cmd, (width, height))
        if self.vertex_buffers is not None and self.draw_count > 0:
            count = min(self.draw_count, self.vertex_buffers.count)
            self.pipeline.record_draw(cmd, (width, height), self.vertex_buffers.positions,
                                      self.vertex_buffers.colors, count, self.point_scale,
                                      self.vertex_buffers.indices)
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
