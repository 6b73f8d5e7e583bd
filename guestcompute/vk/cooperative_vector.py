"""VK_NV_cooperative_vector and VK_EXT_shader_replicated_composites: the
structs and commands the ``vulkan`` package predates (its headers are
Vulkan 1.3.275), declared here from vulkan_core.h in a cffi of our own.

Our structs join a chain of the ``vulkan`` package's structs by address:
:func:`link` points one struct's pNext at another whichever cffi made it,
and :func:`read_features` reads our feature structs back from a host's
chain. The chain's owner keeps them alive (:func:`structs.keep_alive`).
"""
from __future__ import annotations

import functools

import cffi
import numpy as np
from vulkan import ffi, lib

_DECLARATIONS = """
typedef struct { int sType; void* pNext; uint32_t cooperativeVector; uint32_t cooperativeVectorTraining; }
    CoopVecFeatures;
typedef struct { int sType; void* pNext; uint32_t shaderReplicatedComposites; } ReplicatedFeatures;
typedef struct { int sType; void* pNext; int inputType; int inputInterpretation; int matrixInterpretation;
    int biasInterpretation; int resultType; uint32_t transpose; } CoopVecProperties;
typedef union { uint64_t deviceAddress; const void* hostAddress; } AddressConst;
typedef union { uint64_t deviceAddress; void* hostAddress; } Address;
typedef struct { int sType; const void* pNext; size_t srcSize; AddressConst srcData; size_t* pDstSize;
    Address dstData; int srcComponentType; int dstComponentType; uint32_t numRows; uint32_t numColumns;
    int srcLayout; size_t srcStride; int dstLayout; size_t dstStride; } ConvertInfo;
typedef int (*PropertiesFn)(void* physicalDevice, uint32_t* count, CoopVecProperties* properties);
typedef int (*ConvertFn)(void* device, const ConvertInfo* info);
"""


@functools.lru_cache(maxsize=None)
def own():
    """Our cffi, made on first use: declaring it runs cffi's C parser,
    which imports more of the standard library than importing guestcompute
    may (an application's own selectors.py beside its script must not break
    the import)."""
    made = cffi.FFI()
    made.cdef(_DECLARATIONS)
    return made

EXTENSION = "VK_NV_cooperative_vector"
REPLICATED_EXTENSION = "VK_EXT_shader_replicated_composites"
STYPE_FEATURES = 1000491000
STYPE_PROPERTIES = 1000491002
STYPE_CONVERT_INFO = 1000491004
STYPE_REPLICATED_FEATURES = 1000564000
# Feature name -> (our struct, its sType, the member), as FEATURE_STRUCTS
# maps the ``vulkan`` package's features.
FEATURES = {
    "cooperativeVector": ("CoopVecFeatures", STYPE_FEATURES, "cooperativeVector"),
    "shaderReplicatedComposites": ("ReplicatedFeatures", STYPE_REPLICATED_FEATURES, "shaderReplicatedComposites"),
}
FEATURE_EXTENSION = {"cooperativeVector": EXTENSION, "shaderReplicatedComposites": REPLICATED_EXTENSION}
COMPONENT_NAMES = {0: "float16", 1: "float32"}       # VkComponentTypeKHR values this library reads
_FLOAT16 = 0
_ROW_MAJOR, _INFERENCING_OPTIMAL = 0, 2


def address(cdata) -> int:
    """The address of a struct made by either cffi."""
    for f in (own(), ffi):
        try:
            return int(f.cast("uintptr_t", cdata))
        except TypeError:
            continue
    raise TypeError(f"not a cffi pointer: {cdata!r}")


def feature_struct(name: str, value: bool = True):
    """Our struct holding feature ``name``, set to ``value``."""
    struct, stype, member = FEATURES[name]
    return own().new(struct + " *", {"sType": stype, member: int(bool(value))})


def link(first, then) -> None:
    """Point ``first``'s pNext (a struct of either cffi) at ``then`` (or at nothing)."""
    target = address(then) if then is not None else 0
    base = ffi.cast("VkBaseOutStructure *", address(first))
    base.pNext = ffi.cast("VkBaseOutStructure *", target)


def read_features(stype: int, node_address: int) -> dict:
    """{feature: on} of one chain node that is one of our structs, else {}."""
    found = {}
    for name, (struct, want, member) in FEATURES.items():
        if stype == want:
            found[name] = bool(getattr(own().cast(struct + " *", node_address), member))
    return found


def matmul_types(instance, pd) -> tuple:
    """The (input, matrix, bias, result) component types of every matrix-
    vector multiply the device supports with input interpretation = input
    type, as names of COMPONENT_NAMES (others left out); () when the query
    is missing."""
    fn = lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeVectorPropertiesNV")
    if fn == ffi.NULL:
        return ()
    c = own()
    query = c.cast("PropertiesFn", address(fn))
    handle = c.cast("void *", address(pd))
    count = c.new("uint32_t *")
    if query(handle, count, c.NULL) < 0 or count[0] == 0:
        return ()
    props = c.new("CoopVecProperties[]", count[0])
    for i in range(count[0]):
        props[i].sType = STYPE_PROPERTIES
    if query(handle, count, props) < 0:
        return ()
    found = set()
    for i in range(count[0]):
        p = props[i]
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
    c = own()
    convert = c.cast("ConvertFn", address(fn))
    src = np.ascontiguousarray(matrix, np.float16)
    size = c.new("size_t *")
    info = c.new("ConvertInfo *", {
        "sType": STYPE_CONVERT_INFO, "srcSize": src.nbytes, "pDstSize": size,
        "srcComponentType": _FLOAT16, "dstComponentType": _FLOAT16,
        "numRows": src.shape[0], "numColumns": src.shape[1], "srcLayout": _ROW_MAJOR,
        "srcStride": src.shape[1] * 2, "dstLayout": _INFERENCING_OPTIMAL, "dstStride": 0})
    keep = c.from_buffer(src)
    info.srcData.hostAddress = keep
    info.dstData.hostAddress = c.NULL
    handle = c.cast("void *", address(device))
    if convert(handle, info) != 0:
        raise RuntimeError("vkConvertCooperativeVectorMatrixNV: the size query failed")
    dst = c.new("char[]", size[0])
    info.dstData.hostAddress = dst
    if convert(handle, info) != 0:
        raise RuntimeError("vkConvertCooperativeVectorMatrixNV failed")
    return bytes(c.buffer(dst, size[0]))
