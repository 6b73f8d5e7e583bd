"""Every fact guestcompute uses about a device, queried once when a context
adopts (or creates) it: limits, identity, subgroup support, cooperative
matrix shapes. Nothing else queries the physical device for these.

Facts that depend on what the host enabled (cooperative matrices, subgroup
operations through Vulkan 1.1) take the host's declared caps into account:
a fact is only true when the guest may use it.
"""
from __future__ import annotations

from dataclasses import dataclass

import vulkan as vk
from vulkan import ffi, lib

from ..host.declarations import version_tuple
from ..host.requirements import CORE_FEATURES
from ..vk import cooperative_vector as coopvec
from ..vk import newer_features as newer
from ..vk.formats import FORMATS, format_features
from ..vk.functions import instance_function
from ..vk.structs import chain, new


@dataclass(frozen=True)
class CoopShape:
    """One cooperative-matrix shape the device supports for fp16 A/B."""
    m: int
    n: int
    k: int
    acc: str        # "float32" or "float16" accumulator (C/D type)


@dataclass(frozen=True)
class DeviceLimits:
    device_name: str
    device_type: int
    vendor_id: int
    device_id: int
    driver_version: int
    pipeline_cache_uuid: bytes
    api_version: tuple
    max_workgroup_count: tuple
    max_workgroup_size: tuple
    max_workgroup_invocations: int
    max_storage_buffer_range: int
    max_push_constants: int
    max_shared_memory: int
    min_storage_offset_alignment: int
    subgroup_size: int
    timestamp_period: float
    # Storage buffers one kernel may bind (per-stage and per-set limits).
    max_storage_buffers: int = 4
    # The host.CORE_FEATURES the device supports, enabled or not (an error
    # can then say whether the host should enable one or cannot).
    supported_core_features: frozenset = frozenset()
    # Subgroup arithmetic (subgroupAdd, subgroupExclusiveAdd) in compute
    # shaders: a Vulkan 1.1 device, as the host declared it, whose driver
    # reports arithmetic operations in the compute stage.
    subgroup_arithmetic: bool = False
    # Subgroup ballots and shuffles (subgroupBallot, gl_SubgroupLtMask,
    # subgroupShuffle) in compute shaders, on the same terms: what ranks keys
    # inside a subgroup.
    subgroup_ballot: bool = False
    # subgroupPartitionNV in compute shaders (VK_NV_shader_subgroup_partitioned,
    # enabled by the host): lanes holding equal values in one instruction.
    subgroup_partitioned: bool = False
    # Whether a workgroup that has started keeps being scheduled while another
    # spins waiting on it, so a kernel whose workgroups take tickets in order
    # and wait only on lower tickets (decoupled look-back) cannot hang.
    # Vulkan promises no such thing; it is a vendor fact (see FORWARD_PROGRESS).
    forward_progress: bool = False
    # Cooperative-matrix fragment shapes usable for fp16 A/B, best first;
    # () unless the host enabled cooperative matrices.
    coopmat_shapes: tuple = ()
    # Loop iterations one shader invocation may run in all before the driver
    # silently ends its loops; 0: no such cap. Mesa's llvmpipe (lavapipe)
    # stops at 65,535 (measured: two loops of 40,000 count 40,000 and 25,535).
    loop_iteration_cap: int = 0
    # (M, N, K, accumulator) fragment shapes of VK_KHR_cooperative_matrix for
    # fp16 A/B at subgroup scope; () unless the host enabled it.
    coopmat_khr_shapes: tuple = ()
    # The same for bfloat16 A/B (VK_KHR_shader_bfloat16); () unless the host
    # enabled what HostCaps.bfloat16_cooperative_matrix asks.
    coopmat_khr_bf16_shapes: tuple = ()
    # (input, matrix, bias, result) component types of the VK_NV_cooperative_vector
    # matrix-vector products the device runs ("float16"/"float32"); () unless
    # the host enabled what HostCaps.cooperative_vector asks.
    coopvec_types: tuple = ()
    # Largest width or height of a 2-D image, and array layers of one image.
    max_image_dimension_2d: int = 4096
    max_image_array_layers: int = 256
    # Bytes one VkDeviceMemory may hold (maxMemoryAllocationSize, Vulkan 1.1);
    # None where it cannot be asked (a Vulkan 1.0 host).
    max_memory_allocation_size: int = None


@dataclass(frozen=True)
class ImageLimits:
    """What vkGetPhysicalDeviceImageFormatProperties allows for 2-D images
    of one format, usage and create flags (optimal tiling)."""
    max_width: int
    max_height: int
    max_mip_levels: int
    max_array_layers: int
    max_resource_size: int


def query_limits(instance, pd, caps) -> DeviceLimits:
    """The device's facts, for a host that enabled ``caps`` (a HostCaps)."""
    api = min(caps.api_version, (1, 3))
    props = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, props)
    lim = props.limits
    device_api = version_tuple(props.apiVersion)
    subgroup, arithmetic, ballot, partitioned, max_allocation = 1, False, False, False, None
    if api >= (1, 1):
        sub = new("VkPhysicalDeviceSubgroupProperties")
        maintenance3 = new("VkPhysicalDeviceMaintenance3Properties")
        p2 = new("VkPhysicalDeviceProperties2")
        chain(p2, sub, maintenance3)
        lib.vkGetPhysicalDeviceProperties2(pd, p2)
        max_allocation = maintenance3.maxMemoryAllocationSize or None    # 0: a 1.0 device left it unset
        subgroup = sub.subgroupSize
        arithmetic = (device_api >= (1, 1)
                      and bool(sub.supportedOperations & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)
                      and bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT))
        partitioned = (bool(sub.supportedOperations & _PARTITIONED_BIT_NV) and arithmetic
                       and "VK_NV_shader_subgroup_partitioned" in caps.extensions)
        ballot = (arithmetic and bool(sub.supportedOperations & vk.VK_SUBGROUP_FEATURE_BALLOT_BIT)
                  and bool(sub.supportedOperations & vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT))
    name = ffi.string(props.deviceName).decode()
    have = new("VkPhysicalDeviceFeatures")
    lib.vkGetPhysicalDeviceFeatures(pd, have)
    return DeviceLimits(
        device_name=name, device_type=props.deviceType,
        vendor_id=props.vendorID, device_id=props.deviceID, driver_version=props.driverVersion,
        pipeline_cache_uuid=bytes(ffi.buffer(props.pipelineCacheUUID, 16)),
        api_version=device_api,
        max_workgroup_count=tuple(lim.maxComputeWorkGroupCount[i] for i in range(3)),
        max_workgroup_size=tuple(lim.maxComputeWorkGroupSize[i] for i in range(3)),
        max_workgroup_invocations=lim.maxComputeWorkGroupInvocations,
        max_storage_buffer_range=lim.maxStorageBufferRange,
        max_push_constants=lim.maxPushConstantsSize,
        max_shared_memory=lim.maxComputeSharedMemorySize,
        min_storage_offset_alignment=lim.minStorageBufferOffsetAlignment,
        subgroup_size=subgroup, timestamp_period=lim.timestampPeriod,
        max_storage_buffers=min(lim.maxPerStageDescriptorStorageBuffers, lim.maxDescriptorSetStorageBuffers),
        supported_core_features=frozenset(f for f in CORE_FEATURES if getattr(have, f)),
        subgroup_arithmetic=arithmetic, subgroup_ballot=ballot, subgroup_partitioned=partitioned,
        forward_progress=has_forward_progress(props.vendorID, props.deviceType),
        coopmat_shapes=coopmat_shapes(instance, pd, caps),
        coopmat_khr_shapes=coopmat_khr_shapes(instance, pd, caps),
        coopmat_khr_bf16_shapes=(tuple(_fragments(instance, pd, "KHR", "ResultType", _BF16) or ())
                                 if caps.bfloat16_cooperative_matrix else ()),
        coopvec_types=coopvec.matmul_types(instance, pd) if caps.cooperative_vector else (),
        loop_iteration_cap=LLVMPIPE_LOOP_CAP if name.startswith("llvmpipe") else 0,
        max_image_dimension_2d=lim.maxImageDimension2D, max_image_array_layers=lim.maxImageArrayLayers,
        max_memory_allocation_size=max_allocation)


LLVMPIPE_LOOP_CAP = 65535
_PARTITIONED_BIT_NV = 0x100     # VK_SUBGROUP_FEATURE_PARTITIONED_BIT_NV

# Vendors whose desktop GPUs keep every resident workgroup scheduled (no
# starvation of a started workgroup by one that spins), the property
# single-pass scans with decoupled look-back rely on: CUB's Onesweep and
# chained scans run on them. Mobile GPUs, software rasterizers (lavapipe)
# and unknown devices get the multi-pass kernels instead.
FORWARD_PROGRESS = {0x10DE: "NVIDIA", 0x1002: "AMD"}
_DESKTOP_TYPES = (vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU)


def has_forward_progress(vendor_id: int, device_type: int) -> bool:
    return vendor_id in FORWARD_PROGRESS and device_type in _DESKTOP_TYPES


# The NV names alias these KHR values (the NV query reports the same enums).
_FP16, _FP32 = vk.VK_COMPONENT_TYPE_FLOAT16_KHR, vk.VK_COMPONENT_TYPE_FLOAT32_KHR
_SCOPE_SUBGROUP = vk.VK_SCOPE_SUBGROUP_KHR
_BF16 = newer.COMPONENT_TYPE_BFLOAT16
_FALLBACK = (CoopShape(16, 16, 16, "float16"),)


def coopmat_shapes(instance, pd, caps) -> tuple:
    """Fragment shapes usable by the coopmat kernel, best first; () unless
    the host enabled VK_NV_cooperative_matrix with cooperativeMatrix,
    shaderFloat16 and vulkanMemoryModel (glslang's NV route needs the
    Vulkan memory model). Without the NV query entry point: 16x16x16 fp16."""
    if not caps.cooperative_matrix:
        return ()
    found = _fragments(instance, pd, "NV", "DType")
    return _FALLBACK if found is None else tuple(CoopShape(*f) for f in found)


def coopmat_khr_shapes(instance, pd, caps) -> tuple:
    """KHR fragment shapes with fp16 A and B at subgroup scope, as (M, N, K,
    accumulator) tuples; () unless the host enabled the KHR extension (and
    its feature, fp16 arithmetic and the memory model: caps.cooperative_matrix_khr)."""
    if not caps.cooperative_matrix_khr:
        return ()
    return tuple(_fragments(instance, pd, "KHR", "ResultType") or ())


def _fragments(instance, pd, suffix: str, result: str, ab_type: int = _FP16):
    """[(M, N, K, accumulator)] of the subgroup-scope shapes with A and B
    of ``ab_type`` (fp16 unless given) that
    vkGetPhysicalDeviceCooperativeMatrixProperties<suffix> reports (both
    forms share the enums; the result member is named ``result``), or None
    when the query is missing or fails."""
    fn = instance_function(instance, f"vkGetPhysicalDeviceCooperativeMatrixProperties{suffix}")
    if fn is None:
        return None
    count = ffi.new("uint32_t *")
    if fn(pd, count, ffi.NULL) < 0 or count[0] == 0:
        return None
    struct = f"VkCooperativeMatrixProperties{suffix}"
    props = ffi.new(f"{struct}[]", count[0])
    stype = new(struct).sType
    for i in range(count[0]):
        props[i].sType = stype
    if fn(pd, count, props) < 0:
        return None
    found = []
    for i in range(count[0]):
        p = props[i]
        if (p.AType, p.BType, p.scope) != (ab_type, ab_type, _SCOPE_SUBGROUP) or p.CType != getattr(p, result):
            continue
        acc = {_FP16: "float16", _FP32: "float32"}.get(p.CType)
        if acc is not None:
            found.append((p.MSize, p.NSize, p.KSize, acc))
    return found


def query_format_features(pd) -> dict:
    """Format name -> optimal-tiling VkFormatFeatureFlags, for every format
    guestcompute knows (vk/formats.py)."""
    return {name: format_features(pd, fmt) for name, fmt in FORMATS.items()}


def query_image_limits(pd, vk_format: int, usage: int, flags: int):
    """The :class:`ImageLimits` of 2-D optimal-tiling images of ``vk_format``
    with ``usage`` and create ``flags``; None when the device supports no
    such image."""
    props = new("VkImageFormatProperties")
    result = lib.vkGetPhysicalDeviceImageFormatProperties(pd, vk_format, vk.VK_IMAGE_TYPE_2D,
                                                          vk.VK_IMAGE_TILING_OPTIMAL, usage, flags, props)
    if result != vk.VK_SUCCESS:
        return None
    return ImageLimits(props.maxExtent.width, props.maxExtent.height, props.maxMipLevels,
                       props.maxArrayLayers, props.maxResourceSize)
