"""What the host declared it enabled (:class:`HostCaps`), the guest's only
source of truth: it never guesses from what the *physical* device supports
(FSR2 probed the physical device and broke hosts that had not enabled a
feature). Also the feature vocabulary: which struct holds each feature and
when an extension became core, and :func:`features_from_chain`, which reads
the features a host enabled from its VkDeviceCreateInfo pNext chain.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import vulkan as vk
from vulkan import ffi

from ..vk import cooperative_vector as coopvec
from ..vk import newer_features as newer
from ..vk.structs import structure_type
from .declarations import extension_names, version_tuple

# Feature name → the struct that holds it, for the pNext chain a host builds.
FEATURE_STRUCTS = {
    "storageBuffer16BitAccess": "VkPhysicalDevice16BitStorageFeatures",
    # slangc's 16-bit loads declare the capability of this one too (the
    # cooperative-vector MLP kernel)
    "uniformAndStorageBuffer16BitAccess": "VkPhysicalDevice16BitStorageFeatures",
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
# Promoted to core in these versions (extension name then not needed).
CORE_SINCE = {
    "VK_KHR_16bit_storage": (1, 1), "VK_KHR_storage_buffer_storage_class": (1, 1),
    "VK_KHR_8bit_storage": (1, 2), "VK_KHR_shader_float16_int8": (1, 2),
    "VK_KHR_timeline_semaphore": (1, 2), "VK_EXT_subgroup_size_control": (1, 3),
    "VK_KHR_push_descriptor": (1, 4), "VK_KHR_vulkan_memory_model": (1, 2),
    "VK_KHR_external_memory": (1, 1), "VK_KHR_external_semaphore": (1, 1),
}


@dataclass
class HostCaps:
    """What the host declared it enabled; the only source of truth for the guest."""
    api_version: tuple = (1, 0)
    extensions: frozenset = frozenset()
    features: dict = field(default_factory=dict)

    def has_extension(self, name: str) -> bool:
        core = CORE_SINCE.get(name)
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

    @property
    def cooperative_vector(self) -> bool:
        """The fused MLP's cooperative-vector kernel may run: slangc's SPIR-V
        for it declares fp16 arithmetic and 16-bit buffer access of both
        kinds, replicated composites and the Vulkan memory model."""
        return self.api_version >= (1, 2) and coopvec.EXTENSION in self.extensions \
            and coopvec.REPLICATED_EXTENSION in self.extensions \
            and all(self.feature(f) for f in COOPERATIVE_VECTOR_FEATURES)


    @property
    def bfloat16_cooperative_matrix(self) -> bool:
        """The KHR fused-MLP kernel may take bfloat16 fragments
        (VK_KHR_shader_bfloat16's type and cooperative matrices, beside
        what :attr:`cooperative_matrix_khr` needs)."""
        return self.cooperative_matrix_khr and newer.BFLOAT16_EXTENSION in self.extensions \
            and self.feature("shaderBFloat16Type") and self.feature("shaderBFloat16CooperativeMatrix")


# Every feature HostCaps.cooperative_vector needs.
COOPERATIVE_VECTOR_FEATURES = ("cooperativeVector", "shaderReplicatedComposites", "shaderFloat16",
                               "storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess",
                               "vulkanMemoryModel")


def declared_caps(api_version, enabled_extensions, features) -> HostCaps:
    """HostCaps from what a host says it enabled (``Context.adopt``'s
    arguments): ``features`` is None, a dict of names, or the
    VkDeviceCreateInfo pNext chain."""
    if features is None:
        feats = {}
    elif isinstance(features, dict):
        feats = {str(k): bool(v) for k, v in features.items()}
    else:
        feats = features_from_chain(features)
    exts = frozenset(extension_names(enabled_extensions, "enabled_extensions"))
    return HostCaps(version_tuple(api_version), exts, feats)


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
        for name, on in newer.read_features(node.sType, int(ffi.cast("uintptr_t", node))).items():
            found[name] = found.get(name, False) or on
        node = node.pNext
    return found


def _read_flags(typed, struct: str, found: dict) -> None:
    for name, _ in ffi.typeof(struct).fields:
        if name not in ("sType", "pNext"):
            found[name] = found.get(name, False) or bool(getattr(typed, name))
    for feat, field_name in FEATURE_FIELDS.items():       # names that stand for another struct's member
        if FEATURE_STRUCTS[feat] == struct:
            found[feat] = found.get(feat, False) or bool(getattr(typed, field_name))

