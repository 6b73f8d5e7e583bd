"""The image formats guestcompute understands: what a renderer really has
(colour targets, swapchain images, HDR buffers, depth), each with what the
shaders and the host need to know about it.

A row says how a shader reads the format (``sampled``: ``texelFetch`` /
``texture`` through a ``sampler2D``, which also decodes sRGB and swizzles
BGRA), how it writes it (``qualifier``: the GLSL storage-image format, or
None where GLSL has none — BGRA and the sRGB formats), what numpy dtype
holds one texel channel when bytes move between host and image, and for
sRGB formats the UNORM format a storage view may use when the host created
the image with ``VK_IMAGE_CREATE_MUTABLE_FORMAT_BIT`` (the shader then
encodes sRGB itself).

Which of these a device supports, and for what, comes from
``vkGetPhysicalDeviceFormatProperties`` (:func:`format_features`).
"""
from __future__ import annotations

from dataclasses import dataclass

import vulkan as vk
from vulkan import lib

from ..vk.structs import new

COLOR = vk.VK_IMAGE_ASPECT_COLOR_BIT
DEPTH = vk.VK_IMAGE_ASPECT_DEPTH_BIT


@dataclass(frozen=True)
class Format:
    name: str
    vk_format: int
    channels: int           # channels a shader sees (depth: 1)
    texel_bytes: int
    kind: str               # "unorm", "srgb", "float", "uint", "depth"
    dtype: str              # numpy dtype of one channel in host memory ("uint32" for packed words)
    qualifier: str = None   # GLSL storage format qualifier, None when GLSL has none
    unorm: str = None       # sRGB formats: the UNORM format of a storage view (MUTABLE_FORMAT images)
    packed: bool = False    # one 32-bit word per texel (host arrays hold the words)
    aspect: int = COLOR

    @property
    def integer(self) -> bool:
        """Read as ``usampler2D`` / written as ``uimage2D``."""
        return self.kind == "uint"

    @property
    def host_shape_tail(self) -> tuple:
        """The trailing dims of a host array of this format: () for one
        channel or a packed word, (channels,) otherwise."""
        return () if self.channels == 1 or self.packed else (self.channels,)


_ROWS = (
    Format("rgba8_unorm", vk.VK_FORMAT_R8G8B8A8_UNORM, 4, 4, "unorm", "uint8", "rgba8"),
    Format("rgba8_srgb", vk.VK_FORMAT_R8G8B8A8_SRGB, 4, 4, "srgb", "uint8", unorm="rgba8_unorm"),
    Format("bgra8_unorm", vk.VK_FORMAT_B8G8R8A8_UNORM, 4, 4, "unorm", "uint8"),
    Format("bgra8_srgb", vk.VK_FORMAT_B8G8R8A8_SRGB, 4, 4, "srgb", "uint8", unorm="bgra8_unorm"),
    Format("rgba16f", vk.VK_FORMAT_R16G16B16A16_SFLOAT, 4, 8, "float", "float16", "rgba16f"),
    Format("rgba32f", vk.VK_FORMAT_R32G32B32A32_SFLOAT, 4, 16, "float", "float32", "rgba32f"),
    Format("rg16f", vk.VK_FORMAT_R16G16_SFLOAT, 2, 4, "float", "float16", "rg16f"),
    Format("r32f", vk.VK_FORMAT_R32_SFLOAT, 1, 4, "float", "float32", "r32f"),
    Format("r8_unorm", vk.VK_FORMAT_R8_UNORM, 1, 1, "unorm", "uint8", "r8"),
    Format("r32ui", vk.VK_FORMAT_R32_UINT, 1, 4, "uint", "uint32", "r32ui"),
    Format("a2b10g10r10_unorm", vk.VK_FORMAT_A2B10G10R10_UNORM_PACK32, 4, 4, "unorm", "uint32", "rgb10_a2",
           packed=True),
    Format("b10g11r11_ufloat", vk.VK_FORMAT_B10G11R11_UFLOAT_PACK32, 3, 4, "float", "uint32",
           "r11f_g11f_b10f", packed=True),
    Format("d32_sfloat", vk.VK_FORMAT_D32_SFLOAT, 1, 4, "depth", "float32", aspect=DEPTH),
    Format("d16_unorm", vk.VK_FORMAT_D16_UNORM, 1, 2, "depth", "uint16", aspect=DEPTH),
    Format("d24_unorm_s8", vk.VK_FORMAT_D24_UNORM_S8_UINT, 1, 4, "depth", "uint32", aspect=DEPTH, packed=True),
)
FORMATS = {f.name: f for f in _ROWS}
BY_VK = {f.vk_format: f for f in _ROWS}
# Other spellings a renderer uses.
ALIASES = {"rgba8": "rgba8_unorm", "bgra8": "bgra8_unorm", "r8": "r8_unorm", "rgba16_sfloat": "rgba16f",
           "rgba32_sfloat": "rgba32f", "r32_sfloat": "r32f", "rg16_sfloat": "rg16f", "d32": "d32_sfloat",
           "d16": "d16_unorm", "d24s8": "d24_unorm_s8"}

# VkFormatFeatureFlags the guest asks about.
SAMPLED = vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT
STORAGE = vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT
LINEAR_FILTER = vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT
FEATURE_NAMES = {SAMPLED: "SAMPLED_IMAGE", STORAGE: "STORAGE_IMAGE",
                 LINEAR_FILTER: "SAMPLED_IMAGE_FILTER_LINEAR"}


def format_names() -> list:
    return sorted(FORMATS)


def find(value):
    """The Format named ``value`` (a Format, a name, an alias or a VkFormat value), or None."""
    if isinstance(value, Format):
        return value
    if isinstance(value, str):
        key = value.lower().replace("vk_format_", "")
        return FORMATS.get(ALIASES.get(key, key))
    if isinstance(value, int) and not isinstance(value, bool):
        return BY_VK.get(value)
    return None


def format_features(physical_device, fmt: Format) -> int:
    """The optimal-tiling VkFormatFeatureFlags of ``fmt`` on this device."""
    props = new("VkFormatProperties")
    lib.vkGetPhysicalDeviceFormatProperties(physical_device, fmt.vk_format, props)
    return props.optimalTilingFeatures
