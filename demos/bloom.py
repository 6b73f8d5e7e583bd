"""Bloom and tonemapping of the rendered frame, as guest work on a buffer.

The renderer draws into an image; guestcompute works on buffers. So, in
the renderer's after-pass hook (same command buffer, after the draw):

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

from . import kernels

STEP = 4                  # glow resolution: every 4th pixel in x and y
NEAR, WIDE = 1.0, 3.5     # blur sigmas in glow pixels (x4 in frame pixels)
THRESHOLD = 0.3           # glow above this (0..1) is added
NEAR_GAIN, WIDE_GAIN = 0.7, 1.2
EXPOSURE = 1.25
WORKGROUP = (16, 8)
PUSH_LAYOUT = [("width", "uint"), ("height", "uint"), ("glow_width", "uint"), ("glow_height", "uint"),
               ("threshold", "float"), ("near_gain", "float"), ("wide_gain", "float"),
               ("exposure", "float")]


class Bloom:
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
