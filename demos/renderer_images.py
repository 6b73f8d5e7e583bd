"""The renderer's images as guest resources, for the demos' post-processes:
whether a shader may write them, and one import and one program per image
(a swapchain has several; the renderer hands us whichever it acquired)."""
from __future__ import annotations

import vulkan as vk

from guestcompute.vk import formats


def shader_writable(ctx, renderer) -> bool:
    """Whether a storage-image write reaches the renderer's output images:
    STORAGE usage, a format that is not sRGB, and a GLSL format qualifier
    for it (else shaderStorageImageWriteWithoutFormat, e.g. for BGRA)."""
    fmt = formats.find(int(renderer.color_format))
    if fmt is None or fmt.kind == "srgb" or not renderer.image_usage & vk.VK_IMAGE_USAGE_STORAGE_BIT:
        return False
    return bool(fmt.qualifier) or ctx.caps.feature("shaderStorageImageWriteWithoutFormat")


class PerImage:
    """Imports keyed by VkImage handle value, and programs keyed by the
    images they capture; ``direct`` records op by op instead of replaying."""

    def __init__(self, ctx, direct: bool = False):
        self.ctx, self.direct = ctx, direct
        self.imports: dict = {}          # VkImage handle value -> gc.Image
        self.programs: dict = {}         # tuple of handle values -> gc.Program

    def imported(self, handle, make):
        """``(key, image)``: the import of ``handle``, made by ``make()`` the first time."""
        key = int(vk.ffi.cast("uintptr_t", handle))
        img = self.imports.get(key)
        if img is None:
            img = self.imports[key] = make()
        return key, img

    def record(self, cmd, app, key, process) -> None:
        """``process(rec)`` into ``cmd``: the program for ``key`` (recorded the
        first time), or op by op when direct."""
        if self.direct:
            app.record(cmd, process)
            return
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self.ctx.program(process)
        app.record(cmd, lambda rec: rec.execute(program))

    def destroy(self) -> None:
        for program in self.programs.values():
            program.release()
        self.programs.clear()
        self.imports.clear()
