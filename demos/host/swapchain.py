"""GLFW window, surface and swapchain (with resize / minimize handling)."""
from __future__ import annotations

import glfw
import vulkan as vk

from .resources import create_image_view, image_barrier, pipeline_barrier

_PREFERRED_FORMATS = (vk.VK_FORMAT_B8G8R8A8_UNORM, vk.VK_FORMAT_R8G8B8A8_UNORM)
_ANY_EXTENT = 0xFFFFFFFF


def create_window(width: int, height: int, title: str):
    """A resizable GLFW window without an OpenGL context."""
    if not glfw.init():
        raise RuntimeError("glfw.init() failed (is a display available?)")
    if not glfw.vulkan_supported():
        glfw.terminate()
        raise RuntimeError("GLFW found no usable Vulkan loader / surface extensions")
    glfw.window_hint(glfw.CLIENT_API, glfw.NO_API)
    glfw.window_hint(glfw.RESIZABLE, glfw.TRUE)
    window = glfw.create_window(width, height, title, None, None)
    if not window:
        glfw.terminate()
        raise RuntimeError("glfw.create_window failed")
    return window


def required_instance_extensions() -> list[str]:
    """Instance extensions GLFW needs for window surfaces (call after glfw.init)."""
    return list(glfw.get_required_instance_extensions() or [])


def create_surface(instance, window):
    surface = vk.ffi.new("VkSurfaceKHR *")
    result = glfw.create_window_surface(instance, window, None, surface)
    if result != vk.VK_SUCCESS:
        raise RuntimeError(f"glfw.create_window_surface failed with VkResult {result}")
    return surface[0]


def destroy_window(window):
    glfw.destroy_window(window)
    glfw.terminate()


class Swapchain:
    """Swapchain render target for HostRenderer.

    Per frame slot: an "image available" semaphore (waited by the frame's
    submit at COLOR_ATTACHMENT_OUTPUT). Per swapchain image: a view, a
    framebuffer and a "render finished" semaphore (signalled by the submit,
    waited by the present). Out-of-date / suboptimal results and window
    resizes mark the swapchain for a rebuild, done at the next acquire.
    """

    def __init__(self, instance, physical_device, device, queue, surface, window, slots: int,
                 extra_usage: int = 0):
        self.physical_device, self.device, self.queue = physical_device, device, queue
        self.extra_usage = extra_usage
        self.image_usage = 0
        self.surface, self.window = surface, window

        def ifn(name):
            return vk.vkGetInstanceProcAddr(instance, name)

        def dfn(name):
            return vk.vkGetDeviceProcAddr(device, name)

        self._get_caps = ifn("vkGetPhysicalDeviceSurfaceCapabilitiesKHR")
        self._get_formats = ifn("vkGetPhysicalDeviceSurfaceFormatsKHR")
        self._create = dfn("vkCreateSwapchainKHR")
        self._destroy = dfn("vkDestroySwapchainKHR")
        self._get_images = dfn("vkGetSwapchainImagesKHR")
        self._acquire = dfn("vkAcquireNextImageKHR")
        self._present = dfn("vkQueuePresentKHR")

        self.format, self.color_space = self._choose_format()
        self.extent = (0, 0)
        self.handle = None
        self.render_pass = None
        self.images, self.views, self.framebuffers, self.render_finished = [], [], [], []
        self.image_available = [
            vk.vkCreateSemaphore(device, vk.VkSemaphoreCreateInfo(), None) for _ in range(slots)]
        self.needs_rebuild = False
        self.transfer_usage = False
        glfw.set_framebuffer_size_callback(window, self._on_framebuffer_resize)

    def _on_framebuffer_resize(self, window, width, height):
        self.needs_rebuild = True

    def _choose_format(self):
        formats = list(self._get_formats(self.physical_device, self.surface))
        for wanted in _PREFERRED_FORMATS:
            for f in formats:
                if f.format == wanted and f.colorSpace == vk.VK_COLOR_SPACE_SRGB_NONLINEAR_KHR:
                    return f.format, f.colorSpace
        return formats[0].format, formats[0].colorSpace

    def _choose_extent(self, caps):
        if caps.currentExtent.width != _ANY_EXTENT:
            return caps.currentExtent.width, caps.currentExtent.height
        width, height = glfw.get_framebuffer_size(self.window)
        return (min(max(width, caps.minImageExtent.width), caps.maxImageExtent.width),
                min(max(height, caps.minImageExtent.height), caps.maxImageExtent.height))

    def build(self, render_pass):
        """Create the swapchain (replacing the old one) and per-image objects."""
        self.render_pass = render_pass
        caps = self._get_caps(self.physical_device, self.surface)
        self.extent = self._choose_extent(caps)
        image_count = caps.minImageCount + 1
        if caps.maxImageCount:
            image_count = min(image_count, caps.maxImageCount)
        # Copies in and out of the images (post-processing in buffers) need
        # transfer usage; most surfaces allow it, but it is optional.
        copy_usage = vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT
        self.transfer_usage = caps.supportedUsageFlags & copy_usage == copy_usage
        usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | (copy_usage if self.transfer_usage else 0)
        usage |= self.extra_usage & caps.supportedUsageFlags     # what the surface allows of it
        self.image_usage = usage
        composite = vk.VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR
        if not caps.supportedCompositeAlpha & composite:
            composite = caps.supportedCompositeAlpha & -caps.supportedCompositeAlpha  # lowest bit

        old = self.handle
        self.handle = self._create(self.device, vk.VkSwapchainCreateInfoKHR(
            surface=self.surface,
            minImageCount=image_count,
            imageFormat=self.format,
            imageColorSpace=self.color_space,
            imageExtent=vk.VkExtent2D(width=self.extent[0], height=self.extent[1]),
            imageArrayLayers=1,
            imageUsage=usage,
            imageSharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
            preTransform=caps.currentTransform,
            compositeAlpha=composite,
            presentMode=vk.VK_PRESENT_MODE_FIFO_KHR,
            clipped=vk.VK_TRUE,
            oldSwapchain=old), None)
        if old is not None:
            self._destroy(self.device, old, None)

        self.images = list(self._get_images(self.device, self.handle))
        width, height = self.extent
        for image in self.images:
            view = create_image_view(self.device, image, self.format)
            self.views.append(view)
            if render_pass is not None:     # None: the pass draws elsewhere (an HDR scene image)
                self.framebuffers.append(vk.vkCreateFramebuffer(self.device, vk.VkFramebufferCreateInfo(
                    renderPass=render_pass, pAttachments=[view], width=width, height=height, layers=1), None))
            self.render_finished.append(vk.vkCreateSemaphore(self.device, vk.VkSemaphoreCreateInfo(), None))
        self.needs_rebuild = False

    def _destroy_per_image(self):
        for framebuffer in self.framebuffers:
            vk.vkDestroyFramebuffer(self.device, framebuffer, None)
        for view in self.views:
            vk.vkDestroyImageView(self.device, view, None)
        for semaphore in self.render_finished:
            vk.vkDestroySemaphore(self.device, semaphore, None)
        self.images, self.views, self.framebuffers, self.render_finished = [], [], [], []

    def rebuild(self) -> bool:
        """Recreate for the current window size. While the window is minimised
        (framebuffer size 0) this blocks in glfw.wait_events(); returns False
        if the window is closed meanwhile."""
        while True:
            if glfw.window_should_close(self.window):
                return False
            width, height = glfw.get_framebuffer_size(self.window)
            if width > 0 and height > 0:
                break
            glfw.wait_events()
        vk.vkDeviceWaitIdle(self.device)
        self._destroy_per_image()
        self.build(self.render_pass)
        return True

    # -- per-frame interface used by HostRenderer.frame() -------------------

    def acquire(self, slot: int):
        """Index of the next swapchain image, or None if the window closed."""
        while True:
            if self.needs_rebuild and not self.rebuild():
                return None
            index = vk.ffi.new("uint32_t *")
            try:
                self._acquire(self.device, self.handle, vk.UINT64_MAX,
                              self.image_available[slot], None, index)
            except vk.VkErrorOutOfDateKhr:
                self.needs_rebuild = True
                continue
            except vk.VkSuboptimalKhr:
                # The image was acquired (and the semaphore will be
                # signalled): render this frame, rebuild at the next acquire.
                self.needs_rebuild = True
            return index[0]

    def image(self, index: int):
        return self.images[index]

    def view(self, index: int):
        return self.views[index]

    def submit_waits(self, slot: int):
        return [self.image_available[slot]], [vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT]

    def submit_signals(self, index: int):
        return [self.render_finished[index]]

    def record_finish(self, cmd, index: int):
        """After the pass: transition the image for presentation."""
        pipeline_barrier(
            cmd, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
            images=[image_barrier(
                self.images[index],
                vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_PRESENT_SRC_KHR,
                vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, 0)])

    def present(self, index: int):
        info = vk.VkPresentInfoKHR(
            pWaitSemaphores=[self.render_finished[index]],
            pSwapchains=[self.handle],
            pImageIndices=[index])
        try:
            self._present(self.queue, info)
        except (vk.VkErrorOutOfDateKhr, vk.VkSuboptimalKhr):
            self.needs_rebuild = True

    # -----------------------------------------------------------------------

    def destroy(self):
        self._destroy_per_image()
        if self.handle is not None:
            self._destroy(self.device, self.handle, None)
            self.handle = None
        for semaphore in self.image_available:
            vk.vkDestroySemaphore(self.device, semaphore, None)
        self.image_available = []
        glfw.set_framebuffer_size_callback(self.window, None)
