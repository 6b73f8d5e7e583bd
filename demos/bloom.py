"""Bloom and tonemapping of the rendered frame.

:class:`ImageBloom` works on the rendered image itself, when the renderer
made its images with SAMPLED and STORAGE usage (the demo asks for them, and
a swapchain grants them when the surface does): the image is imported with
the layout the renderer leaves it in around its after-pass hook
(COLOR_ATTACHMENT_OPTIMAL), ``rec.bloom`` writes the frame plus its glow
into a guest rgba16f image, and ``rec.tonemap`` writes that back into the
renderer's image — no buffer, no copy, one entry and one exit barrier. One
import (and, replayed, one program) per image: a swapchain has several.

:class:`BufferBloom` is the route for images that allow neither (or an sRGB
swapchain, whose images cannot be storage images): the frame goes through a
buffer. In the renderer's after-pass hook (same command buffer, after the
draw):

1. host:  ``copy_image_to_buffer`` — the frame's pixels into a host-owned
          storage buffer, imported as an ``(H, W)`` uint32 tensor of packed
          RGBA8 pixels with ``host_access="transfer"`` (the guest waits for
          that copy and hands its own writes back to the transfer stage);
2. guest: the bloom below, writing the result over the same buffer;
3. host:  ``copy_buffer_to_image`` — the processed frame back into the
          image, which is then presented (or read back) as usual.

The bloom:

- ``gaussian_blur`` of the frame seen at quarter resolution (a strided view,
  ``pixels[::4, ::4]``: nothing is copied to downsample) at two radii, a
  tight halo and a wide glow, into one small ``(2, H/4, W/4)`` tensor;
- one user kernel (``demos/kernels/bloom_composite.comp``) over the full
  frame: add the part of the glow above a threshold (bilinear upsampling),
  tonemap with ``1 - exp(-exposure · x)``, store opaque pixels.

Packed RGBA8 in uint32 needs no 8-bit storage, so this runs on a bare
Vulkan 1.0 device too; channels are treated alike, so RGBA and BGRA
swapchain formats both work.

It is the same work every frame, so it is recorded once per frame size as a
program (``ctx.program``) and replayed with ``rec.execute`` — or, with
``direct=True``, recorded op by op every frame, for comparison.
"""
from __future__ import annotations

import vulkan as vk

from . import kernels
from .renderer_images import PerImage, shader_writable

STEP = 4                  # glow resolution: every 4th pixel in x and y
NEAR, WIDE = 1.0, 3.5     # blur sigmas in glow pixels (x4 in frame pixels)
THRESHOLD = 0.3           # glow above this (0..1) is added
NEAR_GAIN, WIDE_GAIN = 0.7, 1.2
EXPOSURE = 1.25
WORKGROUP = (16, 8)
PUSH_LAYOUT = [("width", "uint"), ("height", "uint"), ("glow_width", "uint"), ("glow_height", "uint"),
               ("threshold", "float"), ("near_gain", "float"), ("wide_gain", "float"),
               ("exposure", "float")]


class BufferBloom:
    """Guest resources (and the program) for one frame size; make a new one
    when the size changes."""

    def __init__(self, ctx, renderer, direct: bool = False):
        self.renderer = renderer
        self.extent = width, height = renderer.extent
        self.frame_buffer = renderer.create_buffer(renderer.image_bytes)
        self.pixels = ctx.import_buffer(self.frame_buffer, (height, width), "uint32",
                                        host_access="transfer", buffer_size=renderer.image_bytes)
        small = self.pixels[::STEP, ::STEP]
        self.glow = ctx.empty((2,) + small.shape, "uint32")     # near, wide
        self.composite = ctx.kernel(kernels.source("bloom_composite"), workgroup=WORKGROUP,
                                    name="bloom_composite", push_layout=PUSH_LAYOUT)
        self.push = {"width": width, "height": height,
                     "glow_width": small.shape[1], "glow_height": small.shape[0],
                     "threshold": THRESHOLD, "near_gain": NEAR_GAIN, "wide_gain": WIDE_GAIN,
                     "exposure": EXPOSURE}
        self.groups = (-(-width // WORKGROUP[0]), -(-height // WORKGROUP[1]), 1)
        self.program = None if direct else ctx.program(self._process)

    @staticmethod
    def supported(renderer) -> bool:
        return renderer.image_copy_supported

    def destroy(self):
        """Give the frame buffer back to the renderer (waits for the device)."""
        if self.program is not None:
            self.program.release()
        self.renderer.destroy_buffer(self.frame_buffer)

    # -- per frame --------------------------------------------------------------
    def record(self, cmd, app) -> None:
        """In the after-pass hook: copy out, process, copy back."""
        self.renderer.copy_image_to_buffer(cmd, self.frame_buffer)
        if self.program is not None:
            app.record(cmd, lambda rec: rec.execute(self.program))
        else:
            app.record(cmd, self._process)
        self.renderer.copy_buffer_to_image(cmd, self.frame_buffer)

    def _process(self, rec) -> None:
        small = self.pixels[::STEP, ::STEP]
        rec.gaussian_blur(small, NEAR, out=self.glow[0])
        rec.gaussian_blur(small, WIDE, out=self.glow[1])
        self.composite(rec, self.pixels, self.glow, push=self.push, groups=self.groups)


# ImageBloom: the glow and the tonemap curve of the buffer route, as image ops.
IMAGE_THRESHOLD = 0.3
IMAGE_INTENSITY = 1.2
IMAGE_LEVELS = 4


class ImageBloom:
    """Bloom + tonemap read from and written to the renderer's own images
    (see the module notes); one per frame size."""

    def __init__(self, ctx, renderer, direct: bool = False):
        self.ctx, self.renderer = ctx, renderer
        self.extent = width, height = renderer.extent
        self.hdr = ctx.image((width, height), "rgba16f")     # frame + glow, before the tonemap
        self.per_image = PerImage(ctx, direct)

    @staticmethod
    def supported(ctx, renderer) -> bool:
        # The frame is read sampled as well as written.
        return bool(renderer.image_usage & vk.VK_IMAGE_USAGE_SAMPLED_BIT) and shader_writable(ctx, renderer)

    def destroy(self):
        self.per_image.destroy()

    def record(self, cmd, app) -> None:
        r = self.renderer
        key, img = self.per_image.imported(r.current_image, lambda: self.ctx.import_image(
            r.current_image, r.color_format, self.extent, layout="color_attachment", usage=r.image_usage))
        self.per_image.record(cmd, app, (key,), lambda rec: self._process(rec, img))

    def _process(self, rec, img) -> None:
        rec.bloom(img, out=self.hdr, threshold=IMAGE_THRESHOLD, intensity=IMAGE_INTENSITY, levels=IMAGE_LEVELS)
        # The frame's values go back as they came (an sRGB image encodes itself).
        rec.tonemap(self.hdr, img, exposure=EXPOSURE, curve="reinhard", srgb=False)


def make_bloom(ctx, renderer, direct: bool = False, route: str = "auto"):
    """The image route where the renderer's images allow it (``route`` "auto"
    or "image"), else the buffer route (or "buffer" to force it, for
    comparison), else None."""
    if route in ("auto", "image") and ImageBloom.supported(ctx, renderer):
        return ImageBloom(ctx, renderer, direct)
    if route in ("auto", "buffer") and BufferBloom.supported(renderer):
        return BufferBloom(ctx, renderer, direct)
    return None
