"""Feature structs of extensions newer than the ``vulkan`` package (its
headers are Vulkan 1.3.275), declared with ctypes from vulkan_core.h:
VK_NV_cooperative_vector's and VK_EXT_shader_replicated_composites' (their
structs live with the rest of that extension, vk/cooperative_vector.py)
and VK_KHR_shader_bfloat16's.

They join a chain of the ``vulkan`` package's structs by address
(:func:`cooperative_vector.link`). A chain holds each struct type once, so
:func:`feature_structs` makes one struct per type with every named member
set, and :func:`read_features` reads any of them back from a host's chain.
"""
from __future__ import annotations

import ctypes

from . import cooperative_vector as coopvec

BFLOAT16_EXTENSION = "VK_KHR_shader_bfloat16"
STYPE_BFLOAT16_FEATURES = 1000141000
COMPONENT_TYPE_BFLOAT16 = 1000141000      # VkComponentTypeKHR of a bfloat16 matrix


class BFloat16Features(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("shaderBFloat16Type", ctypes.c_uint32),
                ("shaderBFloat16DotProduct", ctypes.c_uint32),
                ("shaderBFloat16CooperativeMatrix", ctypes.c_uint32)]


# Feature name -> (our struct, its sType, the member), as caps.FEATURE_STRUCTS
# maps the ``vulkan`` package's features. bfloat16 dot products are left
# out: no kernel here uses them.
FEATURES = {
    **coopvec.FEATURES,
    "shaderBFloat16Type": (BFloat16Features, STYPE_BFLOAT16_FEATURES, "shaderBFloat16Type"),
    "shaderBFloat16CooperativeMatrix": (BFloat16Features, STYPE_BFLOAT16_FEATURES,
                                        "shaderBFloat16CooperativeMatrix"),
}
FEATURE_EXTENSION = {**coopvec.FEATURE_EXTENSION, "shaderBFloat16Type": BFLOAT16_EXTENSION,
                     "shaderBFloat16CooperativeMatrix": BFLOAT16_EXTENSION}


def feature_structs(names, value: bool = True) -> list:
    """One struct per struct type among ``names`` (features of
    :data:`FEATURES`), each of its named members set to ``value``."""
    by_type: dict = {}
    for name in names:
        struct, stype, member = FEATURES[name]
        made = by_type.setdefault(stype, struct(sType=stype))
        setattr(made, member, int(bool(value)))
    return list(by_type.values())


def values(structs) -> dict:
    """{feature: on} of every feature of :data:`FEATURES` the ``structs`` hold."""
    return {name: on for s in structs for name, on in read_features(s.sType, ctypes.addressof(s)).items()}


def read_features(stype: int, node_address: int) -> dict:
    """{feature: on} of one chain node that is one of our structs, else {}."""
    return {name: bool(getattr(struct.from_address(node_address), member))
            for name, (struct, want, member) in FEATURES.items() if stype == want}
