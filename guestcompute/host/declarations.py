"""What a host declares, parsed and checked: its Vulkan handles, API version
and extension names, how it touches a buffer it shares (:class:`HostAccess`,
its presets, the stage and access tables that check it) and usage flags.

Every value is checked where it comes in, so a bad one raises
InvalidArgumentError before any Vulkan call is made with it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class HostAccess:
    """How the host itself touches a buffer it shares: pipeline stages and
    access flags. The guest's entry barrier waits on these; its exit barrier
    makes guest writes available to them.

    Both masks go into the guest's vkCmdPipelineBarrier calls, so they are
    checked when made: non-negative 32-bit masks of defined
    VkPipelineStageFlagBits / VkAccessFlagBits, at least one stage, and every
    access bit supported by at least one of the stages (the Vulkan spec's
    table of supported access types). A bad value raises
    InvalidArgumentError here instead of an error at the first barrier."""
    stages: int
    access: int

    def __post_init__(self):
        stages = _flag_mask(self.stages, "stage mask", "VkPipelineStageFlags", _STAGE_BITS)
        access = _flag_mask(self.access, "access mask", "VkAccessFlags", _ACCESS_BITS)
        if not stages:
            raise InvalidArgumentError("host access stages must not be empty: name the pipeline stages "
                                       "the host touches the buffer in (e.g. VK_PIPELINE_STAGE_VERTEX_INPUT_BIT)")
        _check_access_supported(stages, access)
        # Plain ints from here on (numpy integers in, ints out).
        object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "access", access)

    def __or__(self, other: "HostAccess") -> "HostAccess":
        return HostAccess(self.stages | other.stages, self.access | other.access)


def _flag_mask(value, what: str, vk_type: str, defined: dict) -> int:
    """``value`` as an int mask of bits from ``defined`` ({bit: name}), else
    InvalidArgumentError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"host access {what} must be an int mask of {vk_type}, "
                                   f"got {type(value).__name__} {value!r}")
    value = int(value)
    if value < 0 or value >= 1 << 32:
        raise InvalidArgumentError(f"host access {what} {value!r} is not a 32-bit {vk_type} mask; "
                                   f"OR together {vk_type[:-5]}FlagBits values")
    unknown = value & ~_all_bits(defined)
    if unknown:
        raise InvalidArgumentError(f"host access {what} {value:#x} has bits {unknown:#x} that are no "
                                   f"{vk_type[:-5]}FlagBits value; use the vulkan package's constants")
    return value


def _all_bits(defined: dict) -> int:
    mask = 0
    for bit in defined:
        mask |= bit
    return mask


def _check_access_supported(stages: int, access: int) -> None:
    """Every access bit must be supported by one of ``stages`` (a barrier with
    an access its stages cannot perform is invalid Vulkan usage)."""
    expanded = _expand_stages(stages)
    for bit, name in _ACCESS_BITS.items():
        if access & bit and not expanded & _ACCESS_STAGES[bit]:
            have = "|".join(n for b, n in _STAGE_BITS.items() if stages & b)
            need = "|".join(n for b, n in _STAGE_BITS.items() if _ACCESS_STAGES[bit] & b)
            raise InvalidArgumentError(f"host access {name} is not performed by stages {have}; "
                                       f"it needs one of {need} (or ALL_COMMANDS)")


def _expand_stages(stages: int) -> int:
    """The stages ALL_COMMANDS / ALL_GRAPHICS stand for, added to ``stages``."""
    if stages & vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT:
        stages |= _all_bits(_STAGE_BITS)
    if stages & vk.VK_PIPELINE_STAGE_ALL_GRAPHICS_BIT:
        stages |= _GRAPHICS_STAGES
    return stages


def _bits(*names: str) -> dict:
    return {getattr(vk, n): n.replace("VK_PIPELINE_STAGE_", "").replace("VK_ACCESS_", "") for n in names}


# Every VkPipelineStageFlagBits / VkAccessFlagBits value (Vulkan 1.0 flags with
# the extensions that added bits to them; the 64-bit *2 flags are not taken).
_STAGE_BITS = _bits(
    "VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT", "VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT",
    "VK_PIPELINE_STAGE_VERTEX_INPUT_BIT", "VK_PIPELINE_STAGE_VERTEX_SHADER_BIT",
    "VK_PIPELINE_STAGE_TESSELLATION_CONTROL_SHADER_BIT", "VK_PIPELINE_STAGE_TESSELLATION_EVALUATION_SHADER_BIT",
    "VK_PIPELINE_STAGE_GEOMETRY_SHADER_BIT", "VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT",
    "VK_PIPELINE_STAGE_EARLY_FRAGMENT_TESTS_BIT", "VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT",
    "VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT", "VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT",
    "VK_PIPELINE_STAGE_TRANSFER_BIT", "VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT", "VK_PIPELINE_STAGE_HOST_BIT",
    "VK_PIPELINE_STAGE_ALL_GRAPHICS_BIT", "VK_PIPELINE_STAGE_ALL_COMMANDS_BIT",
    "VK_PIPELINE_STAGE_COMMAND_PREPROCESS_BIT_NV", "VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT",
    "VK_PIPELINE_STAGE_TASK_SHADER_BIT_EXT", "VK_PIPELINE_STAGE_MESH_SHADER_BIT_EXT",
    "VK_PIPELINE_STAGE_RAY_TRACING_SHADER_BIT_KHR", "VK_PIPELINE_STAGE_FRAGMENT_SHADING_RATE_ATTACHMENT_BIT_KHR",
    "VK_PIPELINE_STAGE_FRAGMENT_DENSITY_PROCESS_BIT_EXT", "VK_PIPELINE_STAGE_TRANSFORM_FEEDBACK_BIT_EXT",
    "VK_PIPELINE_STAGE_ACCELERATION_STRUCTURE_BUILD_BIT_KHR")
_ACCESS_BITS = _bits(
    "VK_ACCESS_INDIRECT_COMMAND_READ_BIT", "VK_ACCESS_INDEX_READ_BIT", "VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT",
    "VK_ACCESS_UNIFORM_READ_BIT", "VK_ACCESS_INPUT_ATTACHMENT_READ_BIT", "VK_ACCESS_SHADER_READ_BIT",
    "VK_ACCESS_SHADER_WRITE_BIT", "VK_ACCESS_COLOR_ATTACHMENT_READ_BIT", "VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT",
    "VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_READ_BIT", "VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT",
    "VK_ACCESS_TRANSFER_READ_BIT", "VK_ACCESS_TRANSFER_WRITE_BIT", "VK_ACCESS_HOST_READ_BIT",
    "VK_ACCESS_HOST_WRITE_BIT", "VK_ACCESS_MEMORY_READ_BIT", "VK_ACCESS_MEMORY_WRITE_BIT",
    "VK_ACCESS_COMMAND_PREPROCESS_READ_BIT_NV", "VK_ACCESS_COMMAND_PREPROCESS_WRITE_BIT_NV",
    "VK_ACCESS_COLOR_ATTACHMENT_READ_NONCOHERENT_BIT_EXT", "VK_ACCESS_CONDITIONAL_RENDERING_READ_BIT_EXT",
    "VK_ACCESS_ACCELERATION_STRUCTURE_READ_BIT_KHR", "VK_ACCESS_ACCELERATION_STRUCTURE_WRITE_BIT_KHR",
    "VK_ACCESS_FRAGMENT_SHADING_RATE_ATTACHMENT_READ_BIT_KHR", "VK_ACCESS_FRAGMENT_DENSITY_MAP_READ_BIT_EXT",
    "VK_ACCESS_TRANSFORM_FEEDBACK_WRITE_BIT_EXT", "VK_ACCESS_TRANSFORM_FEEDBACK_COUNTER_READ_BIT_EXT",
    "VK_ACCESS_TRANSFORM_FEEDBACK_COUNTER_WRITE_BIT_EXT")


def _mask(*names: str) -> int:
    return _all_bits(_bits(*names))


_SHADER_STAGES = _mask(
    "VK_PIPELINE_STAGE_VERTEX_SHADER_BIT", "VK_PIPELINE_STAGE_TESSELLATION_CONTROL_SHADER_BIT",
    "VK_PIPELINE_STAGE_TESSELLATION_EVALUATION_SHADER_BIT", "VK_PIPELINE_STAGE_GEOMETRY_SHADER_BIT",
    "VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT", "VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT",
    "VK_PIPELINE_STAGE_TASK_SHADER_BIT_EXT", "VK_PIPELINE_STAGE_MESH_SHADER_BIT_EXT",
    "VK_PIPELINE_STAGE_RAY_TRACING_SHADER_BIT_KHR")
_GRAPHICS_STAGES = _mask(
    "VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT", "VK_PIPELINE_STAGE_VERTEX_INPUT_BIT",
    "VK_PIPELINE_STAGE_VERTEX_SHADER_BIT", "VK_PIPELINE_STAGE_TESSELLATION_CONTROL_SHADER_BIT",
    "VK_PIPELINE_STAGE_TESSELLATION_EVALUATION_SHADER_BIT", "VK_PIPELINE_STAGE_GEOMETRY_SHADER_BIT",
    "VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT", "VK_PIPELINE_STAGE_EARLY_FRAGMENT_TESTS_BIT",
    "VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT", "VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT",
    "VK_PIPELINE_STAGE_TASK_SHADER_BIT_EXT", "VK_PIPELINE_STAGE_MESH_SHADER_BIT_EXT",
    "VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT", "VK_PIPELINE_STAGE_TRANSFORM_FEEDBACK_BIT_EXT",
    "VK_PIPELINE_STAGE_FRAGMENT_SHADING_RATE_ATTACHMENT_BIT_KHR",
    "VK_PIPELINE_STAGE_FRAGMENT_DENSITY_PROCESS_BIT_EXT")
_AS_BUILD = vk.VK_PIPELINE_STAGE_ACCELERATION_STRUCTURE_BUILD_BIT_KHR
_FRAGMENT_TESTS = vk.VK_PIPELINE_STAGE_EARLY_FRAGMENT_TESTS_BIT | vk.VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT
_COLOR_OUTPUT = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
_ANY_STAGE = _all_bits(_STAGE_BITS)
# The spec's "supported access types" table: which stages may perform each access.
_ACCESS_STAGES = {
    vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT: vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT | _AS_BUILD,
    vk.VK_ACCESS_INDEX_READ_BIT: vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT,
    vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT: vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT,
    vk.VK_ACCESS_UNIFORM_READ_BIT: _SHADER_STAGES,
    vk.VK_ACCESS_INPUT_ATTACHMENT_READ_BIT: vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
    vk.VK_ACCESS_SHADER_READ_BIT: _SHADER_STAGES | _AS_BUILD,
    vk.VK_ACCESS_SHADER_WRITE_BIT: _SHADER_STAGES,
    vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT: _COLOR_OUTPUT,
    vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT: _COLOR_OUTPUT,
    vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_READ_BIT: _FRAGMENT_TESTS,
    vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT: _FRAGMENT_TESTS,
    vk.VK_ACCESS_TRANSFER_READ_BIT: vk.VK_PIPELINE_STAGE_TRANSFER_BIT | _AS_BUILD,
    vk.VK_ACCESS_TRANSFER_WRITE_BIT: vk.VK_PIPELINE_STAGE_TRANSFER_BIT | _AS_BUILD,
    vk.VK_ACCESS_HOST_READ_BIT: vk.VK_PIPELINE_STAGE_HOST_BIT,
    vk.VK_ACCESS_HOST_WRITE_BIT: vk.VK_PIPELINE_STAGE_HOST_BIT,
    vk.VK_ACCESS_MEMORY_READ_BIT: _ANY_STAGE,
    vk.VK_ACCESS_MEMORY_WRITE_BIT: _ANY_STAGE,
    vk.VK_ACCESS_COMMAND_PREPROCESS_READ_BIT_NV: vk.VK_PIPELINE_STAGE_COMMAND_PREPROCESS_BIT_NV,
    vk.VK_ACCESS_COMMAND_PREPROCESS_WRITE_BIT_NV: vk.VK_PIPELINE_STAGE_COMMAND_PREPROCESS_BIT_NV,
    vk.VK_ACCESS_COLOR_ATTACHMENT_READ_NONCOHERENT_BIT_EXT: _COLOR_OUTPUT,
    vk.VK_ACCESS_CONDITIONAL_RENDERING_READ_BIT_EXT: vk.VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT,
    vk.VK_ACCESS_ACCELERATION_STRUCTURE_READ_BIT_KHR: _SHADER_STAGES | _AS_BUILD,
    vk.VK_ACCESS_ACCELERATION_STRUCTURE_WRITE_BIT_KHR: _AS_BUILD,
    vk.VK_ACCESS_FRAGMENT_SHADING_RATE_ATTACHMENT_READ_BIT_KHR:
        vk.VK_PIPELINE_STAGE_FRAGMENT_SHADING_RATE_ATTACHMENT_BIT_KHR,
    vk.VK_ACCESS_FRAGMENT_DENSITY_MAP_READ_BIT_EXT: vk.VK_PIPELINE_STAGE_FRAGMENT_DENSITY_PROCESS_BIT_EXT,
    vk.VK_ACCESS_TRANSFORM_FEEDBACK_WRITE_BIT_EXT: vk.VK_PIPELINE_STAGE_TRANSFORM_FEEDBACK_BIT_EXT,
    vk.VK_ACCESS_TRANSFORM_FEEDBACK_COUNTER_READ_BIT_EXT:
        vk.VK_PIPELINE_STAGE_TRANSFORM_FEEDBACK_BIT_EXT | vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
    vk.VK_ACCESS_TRANSFORM_FEEDBACK_COUNTER_WRITE_BIT_EXT: vk.VK_PIPELINE_STAGE_TRANSFORM_FEEDBACK_BIT_EXT,
}


VERTEX_BUFFER = HostAccess(vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT)
INDEX_BUFFER = HostAccess(vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, vk.VK_ACCESS_INDEX_READ_BIT)
INDIRECT_BUFFER = HostAccess(vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT)
TRANSFER = HostAccess(vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
FRAGMENT_READ = HostAccess(vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)
VERTEX_SHADER_READ = HostAccess(vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)
COMPUTE = HostAccess(vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                     vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
HOST = HostAccess(vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_HOST_WRITE_BIT)
ACCESS_PRESETS = {
    "vertex": VERTEX_BUFFER, "index": INDEX_BUFFER, "indirect": INDIRECT_BUFFER,
    "transfer": TRANSFER, "fragment_read": FRAGMENT_READ, "vertex_shader_read": VERTEX_SHADER_READ,
    "compute": COMPUTE, "host": HOST,
}


def as_host_access(value) -> HostAccess:
    """Accept a HostAccess, a preset name, a ``(stages, access)`` pair of
    Vulkan flag masks, or a '|'-joined string of preset names like
    ``"vertex|transfer"``. Masks are checked as :class:`HostAccess` says."""
    if isinstance(value, HostAccess):
        return value
    if isinstance(value, str):
        acc = None
        for part in value.split("|"):
            preset = ACCESS_PRESETS.get(part.strip())
            if preset is None:
                raise InvalidArgumentError(
                    f"unknown host access {part!r}; use one of {sorted(ACCESS_PRESETS)} "
                    "or a (stages, access) pair of Vk flags")
            acc = preset if acc is None else acc | preset
        return acc
    if isinstance(value, tuple) and len(value) == 2:
        return HostAccess(value[0], value[1])
    raise InvalidArgumentError(f"host_access must be a HostAccess, preset name or (stages, access), got {value!r}")


# VkBufferUsageFlagBits by the short names import_buffer(usage=...) takes.
BUFFER_USAGE_NAMES = {
    "transfer_src": vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
    "transfer_dst": vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    "uniform_texel_buffer": vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
    "storage_texel_buffer": vk.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT,
    "uniform_buffer": vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
    "storage_buffer": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    "index_buffer": vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT,
    "vertex_buffer": vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT,
    "indirect_buffer": vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
    "shader_device_address": 0x00020000,   # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
}


def parse_flags(value, names: dict, vk_prefix: str, flags_type: str, what: str) -> int:
    """Flags from an int, a '|'-joined string of short ``names`` (or their
    full Vulkan spellings, ``<vk_prefix><name>_BIT``) or a list of names/ints.
    ``flags_type`` / ``what`` name them in errors ("VkBufferUsageFlags",
    "buffer usage")."""
    if isinstance(value, str):
        value = value.split("|")
    elif isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        raise InvalidArgumentError(f"usage must be {flags_type} (int) or {what.replace(' ', '-')} names, "
                                   f"got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < 1 << 32:
            raise InvalidArgumentError(f"usage {value!r} is not a {flags_type} value")
        return value
    flags = 0
    for part in value:
        if not isinstance(part, str):
            flags |= parse_flags(part, names, vk_prefix, flags_type, what)
            continue
        key = part.strip().lower()
        if key.startswith(vk_prefix) and key.endswith("_bit"):
            key = key[len(vk_prefix):-len("_bit")]
        bit = names.get(key)
        if bit is None:
            raise InvalidArgumentError(f"unknown {what} {part!r}; use {flags_type} or names from "
                                       f"{sorted(names)}, joined with '|'")
        flags |= bit
    return flags


def as_buffer_usage(value):
    """VkBufferUsageFlags from an int, a '|'-joined string of names
    (``"storage_buffer|transfer_src"``, or the full Vk names) or a list of
    names/ints. None stays None: the host did not say."""
    if value is None:
        return None
    return parse_flags(value, BUFFER_USAGE_NAMES, "vk_buffer_usage_", "VkBufferUsageFlags", "buffer usage")


def version_tuple(v) -> tuple:
    """(major, minor) from a tuple, 'major.minor' string, or packed VK_MAKE_VERSION int."""
    if isinstance(v, tuple) and len(v) >= 2 and all(isinstance(x, int) and x >= 0 for x in v[:2]):
        return (int(v[0]), int(v[1]))
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\.\d+(\.\d+)?\s*", v):
        major, minor = v.split(".")[:2]
        return (int(major), int(minor))
    if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 32:
        return (vk.VK_VERSION_MAJOR(v), vk.VK_VERSION_MINOR(v))
    raise InvalidArgumentError(f"api_version must be (major, minor), 'M.m' or a packed int, got {v!r}")


def as_handle(value, ctype: str, what: str):
    """A Vulkan handle as cffi cdata, from cdata (vulkan package) or an int."""
    if isinstance(value, ffi.CData):
        if ffi.typeof(value).kind != "pointer":
            raise InvalidArgumentError(f"{what}: expected a {ctype} handle, got {ffi.typeof(value).cname}")
        if value == ffi.NULL:
            raise InvalidArgumentError(f"{what} is a null handle")
        # The vulkan package types every handle (struct VkBuffer_T * ...), so
        # a handle of another kind is caught here instead of crashing the driver.
        got, want = ffi.typeof(value), ffi.typeof(ctype)
        if got is not want and got.item.kind == "struct" and got.item.cname.startswith("struct Vk"):
            raise InvalidArgumentError(f"{what}: expected a {ctype} handle, got a {got.item.cname[7:-2]}; "
                                       f"pass the {ctype} itself")
        return ffi.cast(ctype, value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{what}: expected a {ctype} handle (cffi cdata or int), got {type(value).__name__}")
    if value <= 0 or value >= 1 << 64:
        raise InvalidArgumentError(f"{what}: {value!r} is not a valid {ctype} handle; pass the handle "
                                   "Vulkan returned (cffi cdata or its integer value)")
    return ffi.cast(ctype, value)


def check_queue_family(pd, index) -> None:
    """The family the host's command buffers come from must exist on the
    device and run compute work: guest dispatches are recorded into them."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidArgumentError(f"queue_family_index must be a non-negative int, got {index!r}")
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, ffi.NULL)
    if index >= count[0]:
        raise InvalidArgumentError(f"queue_family_index {index} is not a queue family of this device, "
                                   f"which has {count[0]} (0 to {count[0] - 1}); pass the family "
                                   "your queue and command pools were created for")
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, props)
    if not props[index].queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
        raise InvalidArgumentError(f"queue family {index} has no compute support; guestcompute records "
                                   "compute dispatches: pass a family with VK_QUEUE_COMPUTE_BIT")


def extension_names(names, what: str) -> list:
    """Extension names as str, from a list of str or bytes."""
    if isinstance(names, (str, bytes)):
        raise InvalidArgumentError(f"{what} must be a list of names (extension names), not one string")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]

