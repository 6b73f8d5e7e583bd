"""HDR post-processing: bloom, auto-exposure and tone mapping from the
renderer's rgba16f scene image straight into its output image.

The renderer runs in HDR mode (``HostRenderer(hdr=True)``): its pass draws
the particles additively into a scene image, where light piles up past
1.0, and it lets us *resolve* the scene into the output (the swapchain
image, or the offscreen image it reads back). Both are imported, zero-copy:

- the scene with ``layout="color_attachment"`` (the state the pass leaves
  it in, and wants back);
- the output with the renderer's ``output_entry_access`` (UNDEFINED: its old
  contents are discarded; the stage the swapchain's acquire is waited at),
  handed back in ``color_attachment_access`` for the renderer's present or
  readback.

Per frame: ``rec.bloom`` (threshold → downsample chain → upsample/add) of the
scene into a guest rgba16f image, ``rec.luminance`` of that into a
one-element exposure tensor (clamped to a range, so a dark frame is not
lifted to grey), and ``rec.tonemap`` (ACES fit, sRGB encoded in the shader
for a UNORM output) with that exposure — nothing leaves the GPU. The work
is recorded once per (scene, output) pair as a program and replayed.

Where the output cannot be written by a shader (an sRGB swapchain, or one
without STORAGE usage) the tonemapped frame goes back into the scene image
in the after-pass hook, and the renderer's own resolve blit (which encodes
sRGB for an sRGB output) copies it out.

With a colour grade (``--grade``, demos/grade.py) the tone map writes a
guest rgba16f image instead, holding the values the target would have
stored (in [0, 1], sRGB-encoded unless an sRGB output encodes as it stores),
and one ``rec.mlp`` of the learned grade carries every pixel of it into the
target.
"""
from __future__ import annotations

import vulkan as vk

from guestcompute.vk import formats

from .renderer_images import PerImage, shader_writable

THRESHOLD = 1.0          # scene light above this glows
INTENSITY = 0.6
LEVELS = 5
KEY = 0.05               # the frame's log-average luminance maps to this ...
EXPOSURE_LIMITS = (0.35, 2.0)   # ... within this range
_SAMPLED_STORAGE = vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT


class HdrPostProcess:
    """Guest images and programs for one frame size; make a new one when the size changes."""

    def __init__(self, ctx, renderer, direct: bool = False, grade=None):
        self.ctx, self.renderer = ctx, renderer
        self.extent = renderer.extent
        self.glow = ctx.image(self.extent, "rgba16f")     # scene + bloom, before the tone curve
        self.exposure = ctx.empty((1,))
        self.fmt = formats.find(int(renderer.color_format))
        self.writes_output = self.output_writable(ctx, renderer)
        self.per_image = PerImage(ctx, direct)
        # The tone-mapped frame before the grade (a demos.grade.ColourGrade) reads it.
        self.grade = grade
        self.ldr = ctx.image(self.extent, "rgba16f") if grade is not None else None

    @staticmethod
    def supported(renderer) -> bool:
        return renderer.hdr and renderer.scene_usage & _SAMPLED_STORAGE == _SAMPLED_STORAGE

    @staticmethod
    def output_writable(ctx, renderer) -> bool:
        return shader_writable(ctx, renderer)

    def destroy(self):
        self.per_image.destroy()

    # -- imports ----------------------------------------------------------------------------
    def _scene(self):
        r = self.renderer
        return self.per_image.imported(r.scene_image, lambda: self.ctx.import_image(
            r.scene_image, "rgba16f", self.extent, layout="color_attachment", usage=r.scene_usage))

    def _output(self):
        r = self.renderer
        stage, access, layout = r.output_entry_access
        exit_stage, exit_access, exit_layout = r.color_attachment_access
        return self.per_image.imported(r.current_image, lambda: self.ctx.import_image(
            r.current_image, r.color_format, self.extent, layout=layout, host_access=(stage, access),
            exit_layout=exit_layout, exit_access=(exit_stage, exit_access), usage=r.image_usage))

    # -- per frame: the renderer's hooks ------------------------------------------------------
    def record_after_pass(self, cmd, app) -> None:
        """Without a writable output: tone-map back into the scene, which the renderer blits out."""
        if not self.writes_output:
            key, scene = self._scene()
            self.per_image.record(cmd, app, (key,), lambda rec: self._process(rec, scene, scene))

    def record_resolve(self, cmd, app) -> None:
        """With a writable output: resolve the scene into it ourselves."""
        scene_key, scene = self._scene()
        output_key, output = self._output()
        self.per_image.record(cmd, app, (scene_key, output_key), lambda rec: self._process(rec, scene, output))

    def _process(self, rec, scene, target) -> None:
        self.record_glow(rec, scene)
        rec.luminance(self.glow, self.exposure, key=KEY, limits=EXPOSURE_LIMITS)
        # A UNORM target is displayed as sRGB: encode in the shader. An sRGB
        # output is reached through the scene and the host's blit, which encodes.
        srgb = self.fmt is None or self.fmt.kind != "srgb"
        if self.grade is None:
            rec.tonemap(self.glow, target, exposure=self.exposure, curve="aces", srgb=srgb)
        else:
            # In [0, 1], the range the grade was trained on; then the net into the target.
            rec.tonemap(self.glow, self.ldr, exposure=self.exposure, curve="aces", srgb=srgb)
            self.grade.record(rec, self.ldr, target)

    @property
    def srgb_store(self) -> bool:
        """Whether the output encodes sRGB as it stores (then the tone map does not)."""
        return self.fmt is not None and self.fmt.kind == "srgb"

    def record_glow(self, rec, scene) -> None:
        """The scene with its bloom added, into ``self.glow``."""
        rec.bloom(scene, out=self.glow, threshold=THRESHOLD, intensity=INTENSITY, levels=LEVELS)
