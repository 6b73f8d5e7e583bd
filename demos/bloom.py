"""Bloom and tonemapping of the rendered frame, as guest ops on a buffer.

The renderer draws into an image; guestcompute works on buffers. So, in
the renderer's after-pass hook (same command buffer, after the draw):

1. host:  ``copy_image_to_buffer`` — the frame's pixels into a host-owned
          storage buffer, imported as an ``(H, W, 4)`` uint8 tensor with
          ``host_access="transfer"`` (the guest waits for that copy, and hands
          its own writes back to the transfer stage);
2. guest: the bloom below, writing the result over the same buffer;
3. host:  ``copy_buffer_to_image`` — the processed frame back into the
          image, which is then presented (or read back) as usual.

The bloom: convert to float, box-filter to half resolution (strided views
of the frame), keep what is brighter than a threshold, blur that at two
radii (``gaussian_blur``) and add the glow back into the full-resolution
frame (a nearest-neighbour upsample: four strided adds). Then tonemap with
``1 - exp(-exposure · x)`` and quantise to 8 bits. All channels are
processed alike, so RGBA and BGRA images both work.

All of it is the same every frame, so it is recorded once per frame size as
a program (``ctx.program``) and replayed with ``rec.execute`` — or recorded
op by op each frame with ``direct=True``, for comparison.

Needs 8-bit storage buffers (``VK_KHR_8bit_storage``, which
``gc.requirements()`` recommends); without them the demo skips this pass.
"""
from __future__ import annotations

THRESHOLD = 0.45          # of full scale: where the glow starts
NEAR, WIDE = 2.0, 7.0     # blur sigmas at half resolution, in pixels
NEAR_GAIN, WIDE_GAIN = 0.6, 0.9
EXPOSURE = 1.25


class Bloom:
    """Guest resources (and the program) for one frame size; make a new one
    when the size changes."""

    def __init__(self, ctx, renderer, direct: bool = False):
        self.renderer = renderer
        self.extent = renderer.extent
        width, height = self.extent
        self.frame_buffer = renderer.create_buffer(renderer.image_bytes)
        self.pixels = ctx.import_buffer(self.frame_buffer, (height, width, 4), "uint8",
                                        host_access="transfer", buffer_size=renderer.image_bytes)
        self.linear = ctx.empty((height, width, 4))
        self.half = ctx.empty((height // 2, width // 2, 4))
        self.wide = ctx.empty(self.half.shape)
        self.program = None if direct else ctx.program(self._process)

    @staticmethod
    def supported(ctx, renderer) -> bool:
        return ctx.caps.uint8_storage and renderer.image_copy_supported

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
        lin, half, wide = self.linear, self.half, self.wide
        rec.cast(self.pixels, "float32", out=lin)            # 0..255
        # Half resolution: the 2x2 box average (odd edges dropped).
        h, w = half.shape[:2]
        top = lin[:2 * h, :2 * w]
        rec.add(top[0::2, 0::2], top[1::2, 0::2], out=half)
        rec.add(half, top[0::2, 1::2], out=half)
        rec.add(half, top[1::2, 1::2], out=half)
        rec.scale(half, 0.25, out=half)
        # Only what is bright glows.
        rec.sub(half, 255.0 * THRESHOLD, out=half)
        rec.clamp(half, lo=0.0, out=half)
        # A tight halo plus a wide glow.
        rec.gaussian_blur(half, WIDE, out=wide)
        rec.gaussian_blur(half, NEAR, out=half)
        rec.scale(half, NEAR_GAIN, out=half)
        rec.scale(wide, WIDE_GAIN, out=wide)
        rec.add(half, wide, out=half)
        for dy in (0, 1):                                     # upsample-add
            for dx in (0, 1):
                quadrant = lin[dy:2 * h:2, dx:2 * w:2]
                rec.add(quadrant, half, out=quadrant)
        # Tonemap and quantise: 255 · (1 − exp(−exposure · x / 255)), rounded.
        rec.scale(lin, -EXPOSURE / 255.0, out=lin)
        rec.exp(lin, out=lin)
        rec.scale(lin, -255.0, out=lin)
        rec.add(lin, 255.5, out=lin)
        rec.clamp(lin, 0.0, 255.0, out=lin)
        rec.cast(lin, "uint8", out=self.pixels)
        rec.fill(self.pixels[:, :, 3], 255)                   # keep the frame opaque
