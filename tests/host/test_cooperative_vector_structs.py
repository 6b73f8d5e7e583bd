"""The feature structs of VK_NV_cooperative_vector,
VK_EXT_shader_replicated_composites and VK_KHR_shader_bfloat16, which the
``vulkan`` package predates (vk/newer_features.py): a chain
``Requirements.feature_chain()`` builds with them reads back through
``features_from_chain`` as the host declared."""
from vulkan import ffi

import guestcompute as gc
from guestcompute.host import features_from_chain
from guestcompute.vk import cooperative_vector as coopvec
from guestcompute.vk import newer_features as newer


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
    (struct,) = newer.feature_structs(["cooperativeVector"], False)
    assert newer.read_features(coopvec.STYPE_FEATURES, coopvec.address(struct)) == {"cooperativeVector": False}
    assert newer.read_features(12345, coopvec.address(struct)) == {}


def test_two_features_of_one_struct_share_it():
    """bfloat16's type and cooperative-matrix features live in one struct,
    which a chain may hold once."""
    feats = ["shaderBFloat16Type", "shaderBFloat16CooperativeMatrix", "cooperativeMatrixKHR"]
    head = _requirements(feats).feature_chain()
    stypes, node = [], ffi.cast("VkBaseInStructure *", head)
    while node != ffi.NULL:
        stypes.append(node.sType)
        node = node.pNext
    assert stypes.count(newer.STYPE_BFLOAT16_FEATURES) == 1 and len(stypes) == len(set(stypes))
    found = features_from_chain(head)
    assert all(found[f] for f in feats) and not found.get("shaderBFloat16DotProduct")


def test_requirements_without_an_extension_drop_its_features():
    req = gc.Requirements(required_extensions=[], device_extensions=["VK_KHR_shader_bfloat16", "VK_KHR_16bit_storage"],
                          features=["shaderBFloat16Type", "storageBuffer16BitAccess"])
    less = req.without("VK_KHR_shader_bfloat16")
    assert less.device_extensions == ["VK_KHR_16bit_storage"] and less.features == ["storageBuffer16BitAccess"]
    assert req.features == ["shaderBFloat16Type", "storageBuffer16BitAccess"]     # the original is kept
