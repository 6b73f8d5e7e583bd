"""VK_NV_cooperative_vector and VK_EXT_shader_replicated_composites: the
structs and commands the ``vulkan`` package predates (its headers are
Vulkan 1.3.275), declared here from vulkan_core.h with ctypes — not a cffi
of our own, whose C parser imports more of the standard library than
guestcompute may (an application's own selectors.py beside its script
must not break it).

Our structs join a chain of the ``vulkan`` package's structs by address:
:func:`link` points one struct's pNext at another whichever library made
it (vk/newer_features.py makes and reads the feature structs). The chain's
owner keeps them alive (:func:`structs.keep_alive`).
"""
from __future__ import annotations

import ctypes

import numpy as np
from vulkan import ffi, lib

_u32, _i32, _ptr, _size = ctypes.c_uint32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t


class CoopVecFeatures(ctypes.Structure):
    _fields_ = [("sType", _i32), ("pNext", _ptr), ("cooperativeVector", _u32), ("cooperativeVectorTraining", _u32)]


class ReplicatedFeatures(ctypes.Structure):
    _fields_ = [("sType", _i32), ("pNext", _ptr), ("shaderReplicatedComposites", _u32)]


class CoopVecProperties(ctypes.Structure):
    _fields_ = [("sType", _i32), ("pNext", _ptr), ("inputType", _i32), ("inputInterpretation", _i32),
                ("matrixInterpretation", _i32), ("biasInterpretation", _i32), ("resultType", _i32),
                ("transpose", _u32)]


class ConvertInfo(ctypes.Structure):
    # srcData and dstData are unions of a device address and a host
    # pointer; only host pointers are used here.
    _fields_ = [("sType", _i32), ("pNext", _ptr), ("srcSize", _size), ("srcData", _ptr),
                ("pDstSize", ctypes.POINTER(_size)), ("dstData", _ptr), ("srcComponentType", _i32),
                ("dstComponentType", _i32), ("numRows", _u32), ("numColumns", _u32), ("srcLayout", _i32),
                ("srcStride", _size), ("dstLayout", _i32), ("dstStride", _size)]


_PropertiesFn = ctypes.CFUNCTYPE(_i32, _ptr, ctypes.POINTER(_u32), ctypes.POINTER(CoopVecProperties))
_ConvertFn = ctypes.CFUNCTYPE(_i32, _ptr, ctypes.POINTER(ConvertInfo))

EXTENSION = "VK_NV_cooperative_vector"
REPLICATED_EXTENSION = "VK_EXT_shader_replicated_composites"
STYPE_FEATURES = 1000491000
STYPE_PROPERTIES = 1000491002
STYPE_CONVERT_INFO = 1000491004
STYPE_REPLICATED_FEATURES = 1000564000
# Feature name -> (our struct, its sType, the member), as FEATURE_STRUCTS
# maps the ``vulkan`` package's features.
FEATURES = {
    "cooperativeVector": (CoopVecFeatures, STYPE_FEATURES, "cooperativeVector"),
    "shaderReplicatedComposites": (ReplicatedFeatures, STYPE_REPLICATED_FEATURES, "shaderReplicatedComposites"),
}
FEATURE_EXTENSION = {"cooperativeVector": EXTENSION, "shaderReplicatedComposites": REPLICATED_EXTENSION}
COMPONENT_NAMES = {0: "float16", 1: "float32"}       # VkComponentTypeKHR values this library reads
_FLOAT16 = 0
_ROW_MAJOR, _INFERENCING_OPTIMAL = 0, 2


def address(struct) -> int:
    """The address of a struct of ours or of the ``vulkan`` package's cffi."""
    if isinstance(struct, ctypes.Structure):
        return ctypes.addressof(struct)
    return int(ffi.cast("uintptr_t", struct))


def link(first, then) -> None:
    """Point ``first``'s pNext (a struct of ours or the vulkan package's) at ``then`` (or at nothing)."""
    base = ffi.cast("VkBaseOutStructure *", address(first))
    base.pNext = ffi.cast("VkBaseOutStructure *", address(then) if then is not None else 0)


def matmul_types(instance, pd) -> tuple:
    """The (input, matrix, bias, result) component types of every matrix-
    vector multiply the device supports with input interpretation = input
    type, as names of COMPONENT_NAMES (others left out); () when the query
    is missing."""
    fn = lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeVectorPropertiesNV")
    if fn == ffi.NULL:
        return ()
    query = _PropertiesFn(int(ffi.cast("uintptr_t", fn)))
    handle = int(ffi.cast("uintptr_t", pd))
    count = _u32(0)
    if query(handle, ctypes.byref(count), None) < 0 or count.value == 0:
        return ()
    props = (CoopVecProperties * count.value)()
    for p in props:
        p.sType = STYPE_PROPERTIES
    if query(handle, ctypes.byref(count), props) < 0:
        return ()
    found = set()
    for p in props[:count.value]:
        kinds = (p.inputType, p.matrixInterpretation, p.biasInterpretation, p.resultType)
        if p.inputType == p.inputInterpretation and all(k in COMPONENT_NAMES for k in kinds):
            found.add(tuple(COMPONENT_NAMES[k] for k in kinds))
    return tuple(sorted(found))


def to_inferencing_optimal(device, matrix: np.ndarray) -> bytes:
    """A row-major float16 (rows, columns) matrix in the device's
    inferencing-optimal layout (vkConvertCooperativeVectorMatrixNV on the
    host). RuntimeError when the device lacks the command or it fails."""
    fn = lib.vkGetDeviceProcAddr(device, b"vkConvertCooperativeVectorMatrixNV")
    if fn == ffi.NULL:
        raise RuntimeError("the device exposes no vkConvertCooperativeVectorMatrixNV")
    convert = _ConvertFn(int(ffi.cast("uintptr_t", fn)))
    src = np.ascontiguousarray(matrix, np.float16)
    size = _size(0)
    info = ConvertInfo(sType=STYPE_CONVERT_INFO, srcSize=src.nbytes, srcData=src.ctypes.data,
                       pDstSize=ctypes.pointer(size), dstData=None, srcComponentType=_FLOAT16,
                       dstComponentType=_FLOAT16, numRows=src.shape[0], numColumns=src.shape[1],
                       srcLayout=_ROW_MAJOR, srcStride=src.shape[1] * 2, dstLayout=_INFERENCING_OPTIMAL, dstStride=0)
    handle = int(ffi.cast("uintptr_t", device))
    if convert(handle, ctypes.byref(info)) != 0:
        raise RuntimeError("vkConvertCooperativeVectorMatrixNV: the size query failed")
    dst = ctypes.create_string_buffer(size.value)
    info.dstData = ctypes.addressof(dst)
    if convert(handle, ctypes.byref(info)) != 0:
        raise RuntimeError("vkConvertCooperativeVectorMatrixNV failed")
    return dst.raw
