"""The host contract for images: the layout an image is in when guest work
begins, the stages and accesses the host used it with, what it wants back
at the end, and how the host created it (usage flags).

Layouts come as Vulkan values (``VkImageLayout``) or readable presets. A
preset also names the host's usual access in that layout, so
``layout="shader_read_only"`` alone says "the host samples it in fragment
shaders"; ``host_access=`` overrides that (any form ``import_buffer``
takes). The guest works on images in ``GENERAL`` (see vk/sync.py): one
transition on entry, one back on exit, none between its own dispatches.
"""
from __future__ import annotations

from dataclasses import dataclass

import vulkan as vk

from ..errors import InvalidArgumentError
from .declarations import HostAccess, as_host_access, parse_flags

_FRAGMENT_TESTS = vk.VK_PIPELINE_STAGE_EARLY_FRAGMENT_TESTS_BIT | vk.VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT
_COLOR_OUT = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
_COLOR_RW = vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT
_DS_RW = vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_READ_BIT | vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT

# preset name -> (VkImageLayout, the host's usual stages and accesses in it)
LAYOUT_PRESETS = {
    "undefined": (vk.VK_IMAGE_LAYOUT_UNDEFINED, HostAccess(vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0)),
    "general": (vk.VK_IMAGE_LAYOUT_GENERAL,
                HostAccess(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                           vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)),
    "color_attachment": (vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, HostAccess(_COLOR_OUT, _COLOR_RW)),
    "depth_attachment": (vk.VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL, HostAccess(_FRAGMENT_TESTS, _DS_RW)),
    "depth_read_only": (vk.VK_IMAGE_LAYOUT_DEPTH_STENCIL_READ_ONLY_OPTIMAL,
                        HostAccess(_FRAGMENT_TESTS | vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                                   vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT)),
    "shader_read_only": (vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL,
                         HostAccess(vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)),
    "transfer_src": (vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                     HostAccess(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)),
    "transfer_dst": (vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                     HostAccess(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)),
    # A swapchain image the host rendered (or will render) into and presents:
    # its last writer is colour-attachment output; presentation itself is
    # ordered by the host's semaphores.
    "present_src": (vk.VK_IMAGE_LAYOUT_PRESENT_SRC_KHR, HostAccess(_COLOR_OUT, _COLOR_RW)),
}
_KNOWN_LAYOUTS = {layout: name for name, (layout, _) in LAYOUT_PRESETS.items()}


@dataclass(frozen=True)
class HostImageState:
    """One side of the contract for an image: its layout and the host's
    stages/accesses on it (before guest work on entry, after it on exit)."""
    layout: int
    access: HostAccess


def as_host_image_state(layout, host_access=None, what: str = "layout") -> HostImageState:
    """A HostImageState from a preset name or VkImageLayout value, and an
    optional ``host_access`` overriding the preset's stages and accesses."""
    if isinstance(layout, HostImageState):
        return layout if host_access is None else HostImageState(layout.layout, as_host_access(host_access))
    if isinstance(layout, str):
        key = layout.strip().lower()
        if key.startswith("vk_image_layout_"):
            key = key[len("vk_image_layout_"):].replace("_optimal", "").replace("_khr", "")
        preset = LAYOUT_PRESETS.get(key)
        if preset is None:
            raise InvalidArgumentError(f"unknown image {what} {layout!r}; use one of {sorted(LAYOUT_PRESETS)} "
                                       "or a VkImageLayout value")
        value, access = preset
    elif isinstance(layout, int) and not isinstance(layout, bool) and layout in _KNOWN_LAYOUTS:
        value, access = LAYOUT_PRESETS[_KNOWN_LAYOUTS[layout]]
    else:
        raise InvalidArgumentError(f"image {what} must be a layout preset name ({sorted(LAYOUT_PRESETS)}) or "
                                   f"one of their VkImageLayout values, got {layout!r}")
    if host_access is not None:
        access = as_host_access(host_access)
    return HostImageState(value, access)


# VkImageUsageFlagBits by the short names import_image(usage=...) takes.
IMAGE_USAGE_NAMES = {
    "transfer_src": vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
    "transfer_dst": vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT,
    "sampled": vk.VK_IMAGE_USAGE_SAMPLED_BIT,
    "storage": vk.VK_IMAGE_USAGE_STORAGE_BIT,
    "color_attachment": vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT,
    "depth_stencil_attachment": vk.VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT,
    "input_attachment": vk.VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT,
}
SAMPLED_USAGE = vk.VK_IMAGE_USAGE_SAMPLED_BIT
STORAGE_USAGE = vk.VK_IMAGE_USAGE_STORAGE_BIT
TRANSFER_USAGE = vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT


def as_image_usage(value) -> int:
    """VkImageUsageFlags from an int, a '|'-joined string of names
    (``"sampled|storage"``, or the full Vk names) or a list of names/ints."""
    return parse_flags(value, IMAGE_USAGE_NAMES, "vk_image_usage_", "VkImageUsageFlags", "image usage")


def usage_names(flags: int) -> str:
    return "|".join(n for n, b in IMAGE_USAGE_NAMES.items() if flags & b) or "none"
