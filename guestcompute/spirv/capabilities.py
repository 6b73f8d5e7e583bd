"""What a SPIR-V module needs from the host's device, checked before any
driver sees the module.

A module declares ``OpCapability`` for everything beyond core Vulkan 1.0
compute: 64-bit floats, 16-bit storage, subgroup operations... Each one is
only legal when the host enabled the feature (and, before the Vulkan version
that promoted it, the extension) behind it; a driver handed a module using
one that is off may miscompile, crash or reject it at pipeline creation.
guestcompute knows only what the host declared at adoption
(``ctx.caps``), so that is what the capabilities are checked against.

A capability missing from :data:`CAPABILITIES` and :data:`CORE_CAPABILITIES`
(a vendor or very new one) is left to the driver: this table cannot know
which feature enables it.

The kernel's shared memory (Workgroup storage, counted by
:func:`.reflect.workgroup_memory_size`) must fit
``maxComputeSharedMemorySize``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedError


@dataclass(frozen=True)
class Needs:
    """What enables one SPIR-V capability: a feature flag the host switched
    on at vkCreateDevice, an extension it enabled (not needed from the
    Vulkan version in ``core_since`` on), or just an API version."""
    name: str                     # the capability's SPIR-V name
    feature: str = None           # a VkPhysicalDevice*Features member
    extension: str = None
    core_since: tuple = None      # the Vulkan version that promoted ``extension``
    api: tuple = None             # the Vulkan version the capability needs

    def missing(self, caps) -> str | None:
        """What the host still has to enable (a sentence part), None when
        everything is on."""
        needs = []
        if self.api is not None and caps.api_version < self.api:
            needs.append(f"a Vulkan {self.api[0]}.{self.api[1]} device (the host declared "
                         f"{caps.api_version[0]}.{caps.api_version[1]})")
        if self.extension is not None and not self._extension_on(caps):
            core = (f", core in Vulkan {self.core_since[0]}.{self.core_since[1]}"
                    if self.core_since else "")
            needs.append(f"the device extension {self.extension}{core}")
        if self.feature is not None and not caps.feature(self.feature):
            needs.append(f"the {self.feature} feature")
        return " and ".join(needs) or None

    def _extension_on(self, caps) -> bool:
        if self.extension in caps.extensions:
            return True
        return self.core_since is not None and caps.api_version >= self.core_since


# Core Vulkan 1.0 capabilities that need nothing enabled.
CORE_CAPABILITIES = {
    0: "Matrix", 1: "Shader", 40: "InputAttachment", 43: "Sampled1D", 44: "Image1D",
    46: "SampledBuffer", 47: "ImageBuffer", 49: "StorageImageExtendedFormats",
    50: "ImageQuery", 51: "DerivativeControl",
}

_F16I8 = ("VK_KHR_shader_float16_int8", (1, 2))
_S16 = ("VK_KHR_16bit_storage", (1, 1))
_S8 = ("VK_KHR_8bit_storage", (1, 2))
_VARPTR = ("VK_KHR_variable_pointers", (1, 1))
_MEMMODEL = ("VK_KHR_vulkan_memory_model", (1, 2))


def _ext(name, feature, ext_core):
    return Needs(name, feature, ext_core[0], ext_core[1])


CAPABILITIES = {
    9: _ext("Float16", "shaderFloat16", _F16I8),
    10: Needs("Float64", "shaderFloat64"),
    11: Needs("Int64", "shaderInt64"),
    12: _ext("Int64Atomics", "shaderBufferInt64Atomics", ("VK_KHR_shader_atomic_int64", (1, 2))),
    22: Needs("Int16", "shaderInt16"),
    30: Needs("StorageBufferArrayDynamicIndexing", "shaderStorageBufferArrayDynamicIndexing"),
    39: _ext("Int8", "shaderInt8", _F16I8),
    55: Needs("StorageImageReadWithoutFormat", "shaderStorageImageReadWithoutFormat"),
    56: Needs("StorageImageWriteWithoutFormat", "shaderStorageImageWriteWithoutFormat"),
    **{cap: Needs(name, api=(1, 1)) for cap, name in (
        (61, "GroupNonUniform"), (62, "GroupNonUniformVote"), (63, "GroupNonUniformArithmetic"),
        (64, "GroupNonUniformBallot"), (65, "GroupNonUniformShuffle"),
        (66, "GroupNonUniformShuffleRelative"), (67, "GroupNonUniformClustered"),
        (68, "GroupNonUniformQuad"))},
    4423: Needs("SubgroupBallotKHR", extension="VK_EXT_shader_subgroup_ballot"),
    4431: Needs("SubgroupVoteKHR", extension="VK_EXT_shader_subgroup_vote"),
    4433: _ext("StorageBuffer16BitAccess", "storageBuffer16BitAccess", _S16),
    4434: _ext("UniformAndStorageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", _S16),
    4435: _ext("StoragePushConstant16", "storagePushConstant16", _S16),
    4436: _ext("StorageInputOutput16", "storageInputOutput16", _S16),
    4441: _ext("VariablePointersStorageBuffer", "variablePointersStorageBuffer", _VARPTR),
    4442: _ext("VariablePointers", "variablePointers", _VARPTR),
    4448: _ext("StorageBuffer8BitAccess", "storageBuffer8BitAccess", _S8),
    4449: _ext("UniformAndStorageBuffer8BitAccess", "uniformAndStorageBuffer8BitAccess", _S8),
    4450: _ext("StoragePushConstant8", "storagePushConstant8", _S8),
    5345: _ext("VulkanMemoryModel", "vulkanMemoryModel", _MEMMODEL),
    5346: _ext("VulkanMemoryModelDeviceScope", "vulkanMemoryModelDeviceScope", _MEMMODEL),
    5347: _ext("PhysicalStorageBufferAddresses", "bufferDeviceAddress",
                ("VK_KHR_buffer_device_address", (1, 2))),
    5357: Needs("CooperativeMatrixNV", "cooperativeMatrix", "VK_NV_cooperative_matrix"),
    6022: Needs("CooperativeMatrixKHR", "cooperativeMatrixKHR", "VK_KHR_cooperative_matrix"),
    6033: Needs("AtomicFloat32AddEXT", "shaderBufferFloat32AtomicAdd", "VK_EXT_shader_atomic_float"),
    6034: Needs("AtomicFloat64AddEXT", "shaderBufferFloat64AtomicAdd", "VK_EXT_shader_atomic_float"),
}


def check_capabilities(caps, capabilities, what: str) -> None:
    """UnsupportedError naming what to enable if ``capabilities`` (SPIR-V
    capability numbers) use anything the host did not enable; ``what``
    names the kernel in the message."""
    for cap in capabilities:
        needs = CAPABILITIES.get(cap)
        missing = needs.missing(caps) if needs is not None else None
        if missing:
            raise UnsupportedError(
                f"{what} uses the SPIR-V capability {needs.name}, which needs {missing}, and the "
                f"host did not declare that: enable it when creating the device and declare it to "
                f"Context.adopt (api_version=, enabled_extensions=, features=), or remove "
                f"that use from the kernel")


def check_shared_memory(limits, nbytes: int, what: str) -> None:
    """UnsupportedError if ``nbytes`` of shared memory exceed the device's
    maxComputeSharedMemorySize."""
    if nbytes > limits.max_shared_memory:
        raise UnsupportedError(
            f"{what} declares {nbytes} bytes of shared memory; the device allows "
            f"{limits.max_shared_memory} (maxComputeSharedMemorySize): make the shared arrays "
            f"smaller (or the workgroup, where their size follows it)")
