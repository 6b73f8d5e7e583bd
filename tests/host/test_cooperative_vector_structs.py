"""The feature structs of VK_NV_cooperative_vector and
VK_EXT_shader_replicated_composites, which the ``vulkan`` package predates
(vk/cooperative_vector.py): a chain ``Requirements.feature_chain()`` builds
with them reads back through ``features_from_chain`` as the host declared."""
from vulkan import ffi

import guestcompute as gc
from guestcompute.host import features_from_chain
from guestcompute.vk import cooperative_vector as coopvec


def _requirements(features):
    return gc.Requirements(required_extensions=[], device_extensions=[], features=list(features))


def test_a_chain_with_our_structs_reads_back():
    feats = ["shaderFloat16", "storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess",
             "cooperativeVector", "shaderReplicatedComposites"]
    head = _requirements(feats).feature_chain()
    assert {f for f, on in features_from_chain(head).items() if on} >= set(feats)
    stypes, node = [], ffi.cast("VkBaseInStructure *", head)
    while node != ffi.NULL:
        stypes.append(node.sType)
        node = node.pNext
    assert coopvec.STYPE_FEATURES in stypes and coopvec.STYPE_REPLICATED_FEATURES in stypes
    assert len(stypes) == len(set(stypes))          # each struct once


def test_our_structs_alone_get_a_head_of_the_vulkan_package():
    head = _requirements(["cooperativeVector"]).feature_chain()
    found = features_from_chain(head)
    assert found["cooperativeVector"] and not found.get("storageBuffer16BitAccess")


def test_a_feature_switched_off_reads_back_off():
    struct = coopvec.feature_struct("cooperativeVector", False)
    assert coopvec.read_features(coopvec.STYPE_FEATURES, coopvec.address(struct)) == {"cooperativeVector": False}
    assert coopvec.read_features(12345, coopvec.address(struct)) == {}
