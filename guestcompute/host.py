"""The host contract: what to enable, what the host declares, handle kinds.

The guest never guesses from what the *physical* device supports: it uses
exactly what the host says it enabled on the logical device (FSR2 probed the
physical device and broke hosts that had not enabled a feature).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import vulkan as vk
from vulkan import ffi, lib

from .errors import InvalidArgumentError, UnsupportedError
from .vk.functions import instance_function
from .vk.structs import chain, new, structure_type

# Device extensions guestcompute uses when the host enabled them. None is
# required: a bare Vulkan 1.0 device without extensions works.
OPTIONAL_EXTENSIONS = (
    "VK_KHR_push_descriptor",         # descriptors without pools or set caching
    "VK_KHR_16bit_storage",           # float16 tensors
    "VK_KHR_8bit_storage",            # uint8 (RGBA8) tensors
    "VK_KHR_shader_float16_int8",     # fp16 arithmetic in the cooperative-matrix kernel
    "VK_KHR_storage_buffer_storage_class",
    "VK_KHR_timeline_semaphore",      # semaphore hand-off mode
    "VK_EXT_subgroup_size_control",   # kernels tuned to the subgroup size
    "VK_NV_cooperative_matrix",       # tensor-core matmul
    "VK_KHR_vulkan_memory_model",     # glslang's NV cooperative-matrix SPIR-V requires it
    "VK_KHR_cooperative_matrix",
    "VK_EXT_memory_budget",           # per-heap budget and usage in ctx.memory_report()
    "VK_KHR_external_memory_fd",      # exportable tensors (another VkDevice, CUDA/PyTorch)
    "VK_KHR_external_semaphore_fd",   # shared timelines (GPU-side order with them)
)

GET_PROPERTIES2 = "VK_KHR_get_physical_device_properties2"


@dataclass(frozen=True)
class _Dependencies:
    """What the Vulkan spec asks before a device may enable an extension (its
    "Extension and Version Dependencies"): either the API version reaches
    ``version``, or, below it, every extension in ``instance`` is enabled on
    the instance and every one in ``device`` on the device too. ``instance``
    of None: there is no extension route, only the version."""
    version: tuple = (1, 0)
    instance: tuple | None = ()
    device: tuple = ()


_NEEDS_PROPERTIES2 = _Dependencies((1, 1), (GET_PROPERTIES2,))
_DEPENDENCIES = {
    "VK_KHR_push_descriptor": _NEEDS_PROPERTIES2,
    "VK_KHR_storage_buffer_storage_class": _Dependencies(),
    "VK_KHR_16bit_storage": _Dependencies((1, 1), (GET_PROPERTIES2,), ("VK_KHR_storage_buffer_storage_class",)),
    "VK_KHR_8bit_storage": _Dependencies((1, 1), (GET_PROPERTIES2,), ("VK_KHR_storage_buffer_storage_class",)),
    "VK_KHR_shader_float16_int8": _NEEDS_PROPERTIES2,
    "VK_KHR_timeline_semaphore": _NEEDS_PROPERTIES2,
    "VK_EXT_subgroup_size_control": _Dependencies((1, 1), None),
    "VK_NV_cooperative_matrix": _NEEDS_PROPERTIES2,
    "VK_KHR_vulkan_memory_model": _NEEDS_PROPERTIES2,
    "VK_KHR_cooperative_matrix": _NEEDS_PROPERTIES2,
    "VK_EXT_memory_budget": _NEEDS_PROPERTIES2,
    # Below 1.1 each needs its base extension on the device and the base's
    # capabilities extension (which needs properties2) on the instance.
    "VK_KHR_external_memory_fd": _Dependencies(
        (1, 1), (GET_PROPERTIES2, "VK_KHR_external_memory_capabilities"), ("VK_KHR_external_memory",)),
    "VK_KHR_external_semaphore_fd": _Dependencies(
        (1, 1), (GET_PROPERTIES2, "VK_KHR_external_semaphore_capabilities"), ("VK_KHR_external_semaphore",)),
}

# Below these API versions guestcompute has no use for the extension even
# where the spec allows it, and why: the kernels that need 16/8-bit storage,
# fp16 arithmetic, subgroup control or cooperative matrices are SPIR-V 1.3,
# which only a Vulkan 1.1 device runs (see KernelSpec.target_env and HostCaps).
_SPIRV_1_3 = ((1, 1), "guestcompute's kernels that use it are SPIR-V 1.3")
USED_SINCE = {
    "VK_KHR_16bit_storage": _SPIRV_1_3, "VK_KHR_8bit_storage": _SPIRV_1_3,
    "VK_KHR_shader_float16_int8": _SPIRV_1_3, "VK_EXT_subgroup_size_control": _SPIRV_1_3,
    "VK_NV_cooperative_matrix": _SPIRV_1_3, "VK_KHR_vulkan_memory_model": _SPIRV_1_3,
    "VK_KHR_cooperative_matrix": _SPIRV_1_3,
    "VK_KHR_storage_buffer_storage_class": ((1, 1), "guestcompute needs it only for 16/8-bit storage"),
    "VK_EXT_memory_budget": ((1, 1), "the budget is read with vkGetPhysicalDeviceMemoryProperties2"),
    "VK_KHR_external_memory_fd": ((1, 1), "the device UUID that names shared memory is a Vulkan 1.1 property"),
    "VK_KHR_external_semaphore_fd": ((1, 1), "the device UUID that names shared semaphores is a Vulkan 1.1 "
                                     "property"),
}

# Vulkan 1.0 core features guestcompute uses when enabled: storage writes
# to images whose format GLSL cannot name (BGRA swapchain images), and reads
# of them as storage images.
CORE_FEATURES = ("shaderStorageImageWriteWithoutFormat", "shaderStorageImageReadWithoutFormat")

# Feature name → the struct that holds it, for the pNext chain a host builds.
FEATURE_STRUCTS = {
    "storageBuffer16BitAccess": "VkPhysicalDevice16BitStorageFeatures",
    "storageBuffer8BitAccess": "VkPhysicalDevice8BitStorageFeatures",
    "shaderFloat16": "VkPhysicalDeviceShaderFloat16Int8Features",
    "shaderInt8": "VkPhysicalDeviceShaderFloat16Int8Features",
    "timelineSemaphore": "VkPhysicalDeviceTimelineSemaphoreFeatures",
    "subgroupSizeControl": "VkPhysicalDeviceSubgroupSizeControlFeaturesEXT",
    "cooperativeMatrix": "VkPhysicalDeviceCooperativeMatrixFeaturesNV",
    # The KHR struct's member is also named cooperativeMatrix: this name
    # stands for it (FEATURE_FIELDS maps it back).
    "cooperativeMatrixKHR": "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
    "vulkanMemoryModel": "VkPhysicalDeviceVulkanMemoryModelFeatures",
    # glslang gives every atomic Device scope, which a device with the memory
    # model enabled accepts only with this on too
    "vulkanMemoryModelDeviceScope": "VkPhysicalDeviceVulkanMemoryModelFeatures",
}
# A feature name whose struct member is named otherwise.
FEATURE_FIELDS = {"cooperativeMatrixKHR": "cooperativeMatrix"}
_FEATURE_EXTENSION = {
    "storageBuffer16BitAccess": "VK_KHR_16bit_storage",
    "storageBuffer8BitAccess": "VK_KHR_8bit_storage",
    "shaderFloat16": "VK_KHR_shader_float16_int8",
    "shaderInt8": "VK_KHR_shader_float16_int8",
    "timelineSemaphore": "VK_KHR_timeline_semaphore",
    "subgroupSizeControl": "VK_EXT_subgroup_size_control",
    "cooperativeMatrix": "VK_NV_cooperative_matrix",
    "cooperativeMatrixKHR": "VK_KHR_cooperative_matrix",
    "vulkanMemoryModel": "VK_KHR_vulkan_memory_model",
    "vulkanMemoryModelDeviceScope": "VK_KHR_vulkan_memory_model",
}
# Promoted to core in these versions (extension name then not needed).
_CORE_SINCE = {
    "VK_KHR_16bit_storage": (1, 1), "VK_KHR_storage_buffer_storage_class": (1, 1),
    "VK_KHR_8bit_storage": (1, 2), "VK_KHR_shader_float16_int8": (1, 2),
    "VK_KHR_timeline_semaphore": (1, 2), "VK_EXT_subgroup_size_control": (1, 3),
    "VK_KHR_push_descriptor": (1, 4), "VK_KHR_vulkan_memory_model": (1, 2),
    "VK_KHR_external_memory": (1, 1), "VK_KHR_external_semaphore": (1, 1),
}


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


@dataclass
class HostCaps:
    """What the host declared it enabled; the only source of truth for the guest."""
    api_version: tuple = (1, 0)
    extensions: frozenset = frozenset()
    features: dict = field(default_factory=dict)

    def has_extension(self, name: str) -> bool:
        core = _CORE_SINCE.get(name)
        return name in self.extensions or (core is not None and self.api_version >= core)

    def feature(self, name: str) -> bool:
        return bool(self.features.get(name, False))

    @property
    def push_descriptors(self) -> bool:
        return self.has_extension("VK_KHR_push_descriptor")

    @property
    def float16_storage(self) -> bool:
        return self.api_version >= (1, 1) and self.has_extension("VK_KHR_16bit_storage") \
            and self.feature("storageBuffer16BitAccess")

    @property
    def uint8_storage(self) -> bool:
        return self.api_version >= (1, 1) and self.has_extension("VK_KHR_8bit_storage") \
            and self.feature("storageBuffer8BitAccess") \
            and self.feature("shaderInt8")

    @property
    def timeline_semaphores(self) -> bool:
        return self.has_extension("VK_KHR_timeline_semaphore") and self.feature("timelineSemaphore")

    @property
    def external_memory_fd(self) -> bool:
        """Tensors can be exported to (and imported from) opaque fds."""
        return self.api_version >= (1, 1) and self.has_extension("VK_KHR_external_memory_fd")

    @property
    def external_timelines(self) -> bool:
        """Timeline semaphores can be exported to (and imported from) opaque fds."""
        return self.api_version >= (1, 1) and self.timeline_semaphores \
            and self.has_extension("VK_KHR_external_semaphore_fd")

    @property
    def cooperative_matrix(self) -> bool:
        # glslang emits the NV cooperative-matrix ops under the Vulkan memory model.
        return "VK_NV_cooperative_matrix" in self.extensions and self.feature("cooperativeMatrix") \
            and self.feature("shaderFloat16") and self.feature("vulkanMemoryModel")

    @property
    def cooperative_matrix_khr(self) -> bool:
        # The KHR kernel is compiled under the Vulkan memory model too.
        return "VK_KHR_cooperative_matrix" in self.extensions and self.feature("cooperativeMatrixKHR") \
            and self.feature("shaderFloat16") and self.feature("vulkanMemoryModel")


# Feature structs read from a host's chain besides those of FEATURE_STRUCTS:
# the Vulkan 1.x aggregates and the ones behind SPIR-V capabilities a user
# kernel may declare (kernels/capabilities.py).
_CHAIN_STRUCTS = (
    "VkPhysicalDeviceVulkan11Features", "VkPhysicalDeviceVulkan12Features",
    "VkPhysicalDeviceVulkan13Features", "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
    "VkPhysicalDeviceShaderAtomicInt64Features", "VkPhysicalDeviceShaderAtomicFloatFeaturesEXT",
    "VkPhysicalDeviceVariablePointersFeatures", "VkPhysicalDeviceBufferDeviceAddressFeatures",
)


def features_from_chain(pnext) -> dict:
    """Read enabled feature flags (every VkBool32 member, by name) from a
    VkDeviceCreateInfo pNext chain (cdata). The core VkPhysicalDeviceFeatures
    (shaderInt64, shaderFloat64, ...) count from a VkPhysicalDeviceFeatures2
    in the chain; a ``VkPhysicalDeviceFeatures *`` (what ``pEnabledFeatures``
    points to) or the ``VkDeviceCreateInfo *`` itself are read as well."""
    found = {}
    if pnext in (None, ffi.NULL):
        return found
    kind = ffi.typeof(pnext)
    if kind is ffi.typeof("VkPhysicalDeviceFeatures *"):
        _read_flags(pnext, "VkPhysicalDeviceFeatures", found)
        return found
    if kind is ffi.typeof("VkDeviceCreateInfo *"):
        if pnext.pEnabledFeatures != ffi.NULL:
            _read_flags(pnext.pEnabledFeatures, "VkPhysicalDeviceFeatures", found)
        pnext = pnext.pNext
    names = set(FEATURE_STRUCTS.values()) | {s for s in _CHAIN_STRUCTS if hasattr(vk, s)}
    by_stype = {structure_type(s): s for s in names}
    features2 = structure_type("VkPhysicalDeviceFeatures2")
    node = ffi.cast("VkBaseInStructure *", pnext) if pnext != ffi.NULL else None
    while node is not None and node != ffi.NULL:
        if node.sType == features2:
            _read_flags(ffi.cast("VkPhysicalDeviceFeatures2 *", node).features,
                        "VkPhysicalDeviceFeatures", found)
        struct = by_stype.get(node.sType)
        if struct is not None:
            _read_flags(ffi.cast(struct + " *", node), struct, found)
        node = node.pNext
    return found


def _read_flags(typed, struct: str, found: dict) -> None:
    for name, _ in ffi.typeof(struct).fields:
        if name not in ("sType", "pNext"):
            found[name] = found.get(name, False) or bool(getattr(typed, name))
    for feat, field_name in FEATURE_FIELDS.items():       # names that stand for another struct's member
        if FEATURE_STRUCTS[feat] == struct:
            found[feat] = found.get(feat, False) or bool(getattr(typed, field_name))


@dataclass
class Requirements:
    """What a host should enable before vkCreateDevice.

    ``device_extensions``: enable all of them (each is optional for
    guestcompute). With ``physical_device`` given, only extensions it
    supports are listed, and only those the API version and the instance's
    extensions make legal, with the device extensions they depend on.
    ``features``: feature names to switch on (see :meth:`feature_chain`).
    ``api_version``: the highest guestcompute uses here (never above the
    instance's or the device's).

    ``instance_extensions``: instance extensions the instance did not
    enable that would unlock more of ``device_extensions`` (on Vulkan 1.0:
    ``VK_KHR_get_physical_device_properties2`` for push descriptors and
    timeline semaphores). Enable them at vkCreateInstance and call
    :func:`requirements` again with them. ``held_back``: for each optional
    extension the device supports but that is not listed, what it needs.
    """
    required_extensions: list
    device_extensions: list
    features: list
    api_version: tuple = (1, 3)
    min_api_version: tuple = (1, 0)
    instance_extensions: list = field(default_factory=list)
    held_back: dict = field(default_factory=dict)
    # Vulkan 1.0 core features (VkPhysicalDeviceFeatures members) to switch
    # on through pEnabledFeatures (see :meth:`core_feature_struct`); declare
    # them to Context.adopt in ``features`` like the others.
    core_features: list = field(default_factory=list)

    def features2_chain(self):
        """One pNext chain for VkDeviceCreateInfo that enables everything:
        a VkPhysicalDeviceFeatures2 holding ``core_features``, followed by
        :meth:`feature_chain` (leave pEnabledFeatures NULL). Needs Vulkan 1.1
        (or VK_KHR_get_physical_device_properties2); keep it alive until
        vkCreateDevice returns."""
        f2 = new("VkPhysicalDeviceFeatures2", features={f: vk.VK_TRUE for f in self.core_features})
        rest = self.feature_chain()
        return chain(f2, rest) if rest is not None else f2

    def core_feature_struct(self):
        """A VkPhysicalDeviceFeatures with ``core_features`` on, for
        VkDeviceCreateInfo.pEnabledFeatures, or None when there are none."""
        return new("VkPhysicalDeviceFeatures", **{f: vk.VK_TRUE for f in self.core_features}) \
            if self.core_features else None

    def feature_chain(self):
        """A ready ``VkPhysicalDeviceFeatures2``-free pNext chain enabling
        ``features``; put it in VkDeviceCreateInfo.pNext (keep it alive)."""
        groups: dict = {}
        for feat in self.features:
            groups.setdefault(FEATURE_STRUCTS[feat], {})[FEATURE_FIELDS.get(feat, feat)] = vk.VK_TRUE
        structs = [new(s, **flags) for s, flags in groups.items()]
        return chain(*structs) if structs else None


def requirements(physical_device=None, instance_api_version=None, instance_extensions=(), *,
                 instance=None) -> Requirements:
    """Extensions and features to enable for guestcompute (all optional).

    With ``physical_device``, only what it supports is listed. Pass the API
    version your instance was created with (default: 1.1, or 1.3 without a
    physical device) and the instance extensions you enabled: on Vulkan 1.0
    most extensions need ``VK_KHR_get_physical_device_properties2`` on the
    instance, and are left out without it (``instance_extensions`` of the
    result then names it). Features are read with vkGetPhysicalDeviceFeatures2
    (Vulkan 1.1) or, on a 1.0 instance with that extension, its KHR form,
    which is resolved through ``instance`` (then required).

    Thread-safety: free function, safe from any thread.
    """
    enabled_on_instance = frozenset(extension_names(instance_extensions, "instance_extensions"))
    if physical_device is None:
        api = min((1, 3), version_tuple(instance_api_version if instance_api_version is not None else (1, 3)))
        supported = frozenset(OPTIONAL_EXTENSIONS)
    else:
        pd = as_handle(physical_device, "VkPhysicalDevice", "physical_device")
        supported = frozenset(supported_extensions(pd))
        props = new("VkPhysicalDeviceProperties")
        lib.vkGetPhysicalDeviceProperties(pd, props)
        instance_api = version_tuple(instance_api_version if instance_api_version is not None else (1, 1))
        api = min((1, 3), version_tuple(props.apiVersion), instance_api)
    exts, held_back = _choose_extensions(api, enabled_on_instance, supported)
    if physical_device is None:
        feats = [f for f in FEATURE_STRUCTS if _feature_struct_usable(f, api, exts)]
    else:
        read_features = _features2_function(api, enabled_on_instance, instance)
        feats = [f for f, on in query_features(pd, api, exts, read_features).items() if on]
    core = []
    if physical_device is not None:
        have = new("VkPhysicalDeviceFeatures")
        lib.vkGetPhysicalDeviceFeatures(pd, have)
        core = [f for f in CORE_FEATURES if getattr(have, f)]
    return Requirements(required_extensions=[], device_extensions=exts, features=feats, api_version=api,
                        core_features=core,
                        instance_extensions=_unlocking_instance_extensions(api, enabled_on_instance,
                                                                           supported, held_back),
                        held_back=held_back)


def extension_names(names, what: str) -> list:
    """Extension names as str, from a list of str or bytes."""
    if isinstance(names, (str, bytes)):
        raise InvalidArgumentError(f"{what} must be a list of names (extension names), not one string")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def _version_text(v: tuple) -> str:
    return f"Vulkan {v[0]}.{v[1]}"


def _spec_blocker(ext: str, api: tuple, on_instance: frozenset, supported: frozenset):
    """Why the spec forbids enabling ``ext`` here, or None when it allows it."""
    dep = _DEPENDENCIES.get(ext, _Dependencies())
    if api >= dep.version:
        return None
    if dep.instance is None:
        return _version_text(dep.version)
    lacking = [e for e in dep.instance if e not in on_instance]
    if lacking:
        return f"{' and '.join(lacking)} enabled on the instance, or {_version_text(dep.version)}"
    for needed in dep.device:
        if needed not in supported:
            return f"{needed}, which the device does not support"
        blocker = _spec_blocker(needed, api, on_instance, supported)
        if blocker is not None:
            return f"{needed}, which needs {blocker}"
    return None


def _choose_extensions(api: tuple, on_instance: frozenset, supported: frozenset):
    """(extensions to enable, {held-back extension: what it needs})."""
    chosen, held_back = set(), {}
    for ext in OPTIONAL_EXTENSIONS:
        if ext not in supported:
            continue
        used_since, why = USED_SINCE.get(ext, ((1, 0), ""))
        blocker = _spec_blocker(ext, api, on_instance, supported)
        if api < used_since:
            held_back[ext] = f"{_version_text(used_since)} ({why})"
        elif blocker is not None:
            held_back[ext] = blocker
        else:
            chosen.add(ext)
    # Below an extension's promotion its device-extension dependencies are
    # enabled with it (already checked legal and supported above).
    for ext in list(chosen):
        dep = _DEPENDENCIES.get(ext, _Dependencies())
        if api < dep.version:
            chosen.update(dep.device)
            for needed in dep.device:
                held_back.pop(needed, None)
    return [e for e in OPTIONAL_EXTENSIONS if e in chosen], held_back


def _unlocking_instance_extensions(api, on_instance, supported, held_back) -> list:
    """Instance extensions, not enabled yet, that would make a held-back
    extension legal."""
    candidates = sorted({e for ext in held_back for e in (_DEPENDENCIES[ext].instance or ())} - on_instance)
    unlocking = []
    for candidate in candidates:
        more, _ = _choose_extensions(api, on_instance | {candidate}, supported)
        if any(ext in held_back for ext in more):
            unlocking.append(candidate)
    return unlocking


def _features2_function(api: tuple, on_instance: frozenset, instance):
    """The vkGetPhysicalDeviceFeatures2 entry point legal here, or None.

    The core one is a Vulkan 1.1 command: on a 1.0 instance only the KHR
    alias of VK_KHR_get_physical_device_properties2 may be called, and it
    comes from vkGetInstanceProcAddr."""
    if api >= (1, 1):
        return lib.vkGetPhysicalDeviceFeatures2
    if GET_PROPERTIES2 not in on_instance:
        return None
    if instance is None:
        raise InvalidArgumentError(
            f"requirements(): with {GET_PROPERTIES2} on a Vulkan 1.0 instance, pass instance= too "
            "(its vkGetPhysicalDeviceFeatures2KHR reads the device's features)")
    fn = instance_function(as_handle(instance, "VkInstance", "instance"), "vkGetPhysicalDeviceFeatures2KHR")
    if fn is None:
        raise UnsupportedError(f"the instance does not expose vkGetPhysicalDeviceFeatures2KHR: "
                               f"was it created with {GET_PROPERTIES2} enabled?")
    return fn


def supported_extensions(pd) -> list:
    count = ffi.new("uint32_t *")
    lib.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, count, ffi.NULL)
    props = ffi.new("VkExtensionProperties[]", count[0])
    lib.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, count, props)
    return [ffi.string(props[i].extensionName).decode() for i in range(count[0])]


def _feature_struct_usable(feat: str, api: tuple, extensions) -> bool:
    """A feature's struct may be chained when its extension is enabled, or
    the API version has it in core."""
    ext = _FEATURE_EXTENSION[feat]
    return ext in extensions or api >= _CORE_SINCE.get(ext, (9, 9))


def query_features(pd, api: tuple, extensions, read_features) -> dict:
    """Which of guestcompute's optional features the physical device
    supports, among those ``extensions`` (the ones to be enabled) and the
    API version make available. ``read_features``: the legal
    vkGetPhysicalDeviceFeatures2 entry point, or None (nothing is read)."""
    structs = {}
    for feat, struct in FEATURE_STRUCTS.items():
        if _feature_struct_usable(feat, api, extensions):
            structs.setdefault(struct, new(struct))
    if read_features is None or not structs:
        return {}
    f2 = new("VkPhysicalDeviceFeatures2")
    chain(f2, *structs.values())
    read_features(pd, f2)
    return {feat: bool(getattr(structs[s], FEATURE_FIELDS.get(feat, feat)))
            for feat, s in FEATURE_STRUCTS.items() if s in structs}
