"""requirements() → vkCreateDevice → adopt, on a host written with nothing
but the ``vulkan`` package, at every API version a renderer may pick.

The host enables exactly what ``gc.requirements()`` recommends for its
instance (version and instance extensions) and nothing else, under the
Khronos validation layer with synchronization validation: any message
fails the test. This is the integration guide's first step, followed
literally.
"""
import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi, lib

import guestcompute as gc
from guestcompute.vk.bootstrap import pick_physical_device
from guestcompute.vk.structs import new

GPDP2 = "VK_KHR_get_physical_device_properties2"

# (instance API version, instance extensions the host enables for itself)
PROFILES = {
    "1.0": ((1, 0), []),
    "1.0+gpdp2": ((1, 0), [GPDP2]),
    "1.1": ((1, 1), []),
    "1.3": ((1, 3), []),
}


class RawHost:
    """A renderer's start-up: instance, device, one queue, a command pool."""

    def __init__(self, api, instance_extensions):
        self.api, self.instance_extensions = api, list(instance_extensions)
        self.messages = []
        self._keep = []
        self._create_instance()
        self.physical_device = pick_physical_device(self.instance)
        self.queue_family = self._graphics_compute_family()
        self.requirements = gc.requirements(self.physical_device, api, self.instance_extensions,
                                            instance=self.instance)
        self._create_device(self.requirements)

    def _new(self, ctype, **fields):
        obj = ffi.new(ctype + " *", fields)
        self._keep.append(obj)
        return obj

    def _strings(self, names):
        strs = [ffi.new("char[]", n.encode()) for n in names]
        arr = ffi.new("char *[]", strs)
        self._keep += strs + [arr]
        return arr if names else ffi.NULL

    def _create_instance(self):
        def on_message(severity, types, data, user):
            self.messages.append(ffi.string(data.pMessage).decode(errors="replace"))
            return vk.VK_FALSE
        self._callback = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", on_message)
        messenger_info = self._new(
            "VkDebugUtilsMessengerCreateInfoEXT",
            sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            pfnUserCallback=self._callback)
        enables = ffi.new("VkValidationFeatureEnableEXT[1]",
                          [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
        self._keep.append(enables)
        features = self._new("VkValidationFeaturesEXT", sType=vk.VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                             enabledValidationFeatureCount=1, pEnabledValidationFeatures=enables)
        app = self._new("VkApplicationInfo", sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                        apiVersion=vk.VK_MAKE_VERSION(self.api[0], self.api[1], 0))
        exts = self.instance_extensions + ["VK_EXT_debug_utils"]
        info = self._new("VkInstanceCreateInfo", sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                         pNext=features, pApplicationInfo=app,
                         enabledLayerCount=1, ppEnabledLayerNames=self._strings(["VK_LAYER_KHRONOS_validation"]),
                         enabledExtensionCount=len(exts), ppEnabledExtensionNames=self._strings(exts))
        out = ffi.new("VkInstance *")
        assert lib.vkCreateInstance(info, ffi.NULL, out) == vk.VK_SUCCESS
        self.instance = out[0]
        create = ffi.cast("PFN_vkCreateDebugUtilsMessengerEXT",
                          lib.vkGetInstanceProcAddr(self.instance, b"vkCreateDebugUtilsMessengerEXT"))
        self._messenger = ffi.new("VkDebugUtilsMessengerEXT *")
        assert create(self.instance, messenger_info, ffi.NULL, self._messenger) == vk.VK_SUCCESS

    def _graphics_compute_family(self):
        count = ffi.new("uint32_t *")
        lib.vkGetPhysicalDeviceQueueFamilyProperties(self.physical_device, count, ffi.NULL)
        props = ffi.new("VkQueueFamilyProperties[]", count[0])
        lib.vkGetPhysicalDeviceQueueFamilyProperties(self.physical_device, count, props)
        want = vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT
        return next(i for i in range(count[0]) if props[i].queueFlags & want == want)

    def _create_device(self, req):
        self.feature_chain = req.feature_chain()      # alive as long as the device
        priority = ffi.new("float[1]", [1.0])
        self._keep.append(priority)
        queue_info = self._new("VkDeviceQueueCreateInfo", sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                               queueFamilyIndex=self.queue_family, queueCount=1, pQueuePriorities=priority)
        info = self._new("VkDeviceCreateInfo", sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                         pNext=self.feature_chain if self.feature_chain is not None else ffi.NULL,
                         queueCreateInfoCount=1, pQueueCreateInfos=queue_info,
                         enabledExtensionCount=len(req.device_extensions),
                         ppEnabledExtensionNames=self._strings(req.device_extensions))
        out = ffi.new("VkDevice *")
        assert lib.vkCreateDevice(self.physical_device, info, ffi.NULL, out) == vk.VK_SUCCESS
        self.device = out[0]
        queue = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(self.device, self.queue_family, 0, queue)
        self.queue = queue[0]
        pool_info = self._new("VkCommandPoolCreateInfo", sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                              queueFamilyIndex=self.queue_family)
        pool = ffi.new("VkCommandPool *")
        assert lib.vkCreateCommandPool(self.device, pool_info, ffi.NULL, pool) == vk.VK_SUCCESS
        self.pool = pool[0]

    def adopt(self):
        req = self.requirements
        return gc.Context.adopt(instance=self.instance, physical_device=self.physical_device,
                                device=self.device, queue_family_index=self.queue_family,
                                api_version=req.api_version, enabled_extensions=req.device_extensions,
                                features=self.feature_chain, queue=self.queue)

    def run(self, ctx, fn):
        """One frame: begin a command buffer, let the guest record, submit, wait."""
        alloc = self._new("VkCommandBufferAllocateInfo", sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                          commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        cmd = ffi.new("VkCommandBuffer[1]")
        assert lib.vkAllocateCommandBuffers(self.device, alloc, cmd) == vk.VK_SUCCESS
        begin = ffi.new("VkCommandBufferBeginInfo *", {"sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO})
        assert lib.vkBeginCommandBuffer(cmd[0], begin) == vk.VK_SUCCESS
        with ctx.record(cmd[0]) as rec:
            result = fn(rec)
        assert lib.vkEndCommandBuffer(cmd[0]) == vk.VK_SUCCESS
        submit = ffi.new("VkSubmitInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                            "commandBufferCount": 1, "pCommandBuffers": cmd})
        assert lib.vkQueueSubmit(self.queue, 1, submit, ffi.NULL) == vk.VK_SUCCESS
        assert lib.vkQueueWaitIdle(self.queue) == vk.VK_SUCCESS
        lib.vkFreeCommandBuffers(self.device, self.pool, 1, cmd)
        return result

    def close(self):
        lib.vkDeviceWaitIdle(self.device)
        lib.vkDestroyCommandPool(self.device, self.pool, ffi.NULL)
        lib.vkDestroyDevice(self.device, ffi.NULL)
        destroy = ffi.cast("PFN_vkDestroyDebugUtilsMessengerEXT",
                           lib.vkGetInstanceProcAddr(self.instance, b"vkDestroyDebugUtilsMessengerEXT"))
        destroy(self.instance, self._messenger[0], ffi.NULL)
        lib.vkDestroyInstance(self.instance, ffi.NULL)


@pytest.fixture(params=list(PROFILES))
def raw_host(request):
    api, instance_extensions = PROFILES[request.param]
    h = RawHost(api, instance_extensions)
    yield h
    messages = list(h.messages)
    h.close()
    assert not messages, "validation layer reported:\n" + "\n\n".join(messages)


def _device_supports(host, name):
    return name in gc.host.supported_extensions(host.physical_device)


def test_recommendations_are_legal_for_the_instance(raw_host):
    req = raw_host.requirements
    assert req.api_version <= raw_host.api
    needs_properties2 = {"VK_KHR_push_descriptor", "VK_KHR_16bit_storage", "VK_KHR_8bit_storage",
                         "VK_KHR_shader_float16_int8", "VK_KHR_timeline_semaphore",
                         "VK_EXT_subgroup_size_control", "VK_NV_cooperative_matrix",
                         "VK_KHR_vulkan_memory_model", "VK_KHR_cooperative_matrix"}
    if req.api_version < (1, 1) and GPDP2 not in raw_host.instance_extensions:
        assert not needs_properties2 & set(req.device_extensions)
        if _device_supports(raw_host, "VK_KHR_push_descriptor"):
            assert req.instance_extensions == [GPDP2]
            assert GPDP2 in req.held_back["VK_KHR_push_descriptor"]
    else:
        assert req.instance_extensions == []
        if _device_supports(raw_host, "VK_KHR_push_descriptor"):
            assert "VK_KHR_push_descriptor" in req.device_extensions
    if req.api_version < (1, 1):
        # the subgroup-size extension exists only from Vulkan 1.1; the 16-bit
        # storage kernels are SPIR-V 1.3
        assert "VK_EXT_subgroup_size_control" not in req.device_extensions
        assert "VK_KHR_16bit_storage" not in req.device_extensions
    if "VK_KHR_16bit_storage" in req.device_extensions and req.api_version < (1, 1):
        assert "VK_KHR_storage_buffer_storage_class" in req.device_extensions


def test_adopting_what_was_recommended_runs_ops_cleanly(raw_host):
    req = raw_host.requirements
    ctx = raw_host.adopt()
    try:
        assert ctx.cache_stats()["push_descriptors"] == ("VK_KHR_push_descriptor" in req.device_extensions)
        x = np.arange(64, dtype=np.float32)
        a, b = ctx.tensor(x), ctx.tensor(np.full(64, 0.5, np.float32))
        total, doubled = raw_host.run(ctx, lambda rec: (rec.sum(rec.mul(a, b)), rec.add(a, a)))
        np.testing.assert_array_equal(doubled.numpy(), x + x)
        np.testing.assert_allclose(total.numpy(), (x * 0.5).sum())
        if "storageBuffer16BitAccess" in req.features:
            h = ctx.tensor(np.linspace(0, 1, 32).astype(np.float16))
            out = raw_host.run(ctx, lambda rec: rec.add(h, h))
            np.testing.assert_array_equal(out.numpy(), h.numpy() + h.numpy())
        if ctx.caps.uint8_storage:
            u = ctx.tensor(np.arange(32, dtype=np.uint8))
            out = raw_host.run(ctx, lambda rec: rec.copy(u))
            np.testing.assert_array_equal(out.numpy(), np.arange(32, dtype=np.uint8))
        ctx.advance_epoch()
    finally:
        ctx.close()


# -- the dependency rules, without a device -----------------------------------------

def test_vulkan_1_0_without_properties2_recommends_nothing_that_needs_it():
    req = gc.requirements(None, (1, 0))
    assert req.device_extensions == []
    assert req.features == []
    assert req.instance_extensions == [GPDP2]


def test_properties2_on_a_1_0_instance_unlocks_push_descriptors_and_timelines():
    req = gc.requirements(None, (1, 0), [GPDP2])
    assert req.device_extensions == ["VK_KHR_push_descriptor", "VK_KHR_timeline_semaphore"]
    assert req.features == ["timelineSemaphore"]
    assert req.instance_extensions == []
    assert "Vulkan 1.1" in req.held_back["VK_EXT_subgroup_size_control"]


def test_storage_extensions_bring_their_device_dependency(monkeypatch):
    # Were the 16-bit storage kernels usable on 1.0, the storage-class
    # extension they depend on would be enabled with them.
    monkeypatch.delitem(gc.host.USED_SINCE, "VK_KHR_16bit_storage")
    req = gc.requirements(None, (1, 0), [GPDP2])
    assert "VK_KHR_16bit_storage" in req.device_extensions
    assert "VK_KHR_storage_buffer_storage_class" in req.device_extensions


def test_properties2_on_1_0_needs_the_instance_to_read_features():
    h = RawHost((1, 0), [GPDP2])
    try:
        with pytest.raises(gc.InvalidArgumentError, match="pass instance="):
            gc.requirements(h.physical_device, (1, 0), [GPDP2])
        with pytest.raises(gc.InvalidArgumentError, match="list of names"):
            gc.requirements(h.physical_device, (1, 0), GPDP2, instance=h.instance)
    finally:
        h.close()
    assert not h.messages


# -- adopt checks ----------------------------------------------------------------------

def test_adopt_rejects_a_queue_family_the_device_does_not_have(host):
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(host.physical_device, count, ffi.NULL)
    for bad in (count[0], count[0] + 7, 1 << 31):
        with pytest.raises(gc.InvalidArgumentError, match=f"{bad} is not a queue family"):
            host.adopt(queue_family_index=bad)
    with pytest.raises(gc.InvalidArgumentError, match="non-negative int"):
        host.adopt(queue_family_index=True)


def test_a_standalone_vulkan_1_0_context_enables_only_what_is_legal():
    with gc.Context.create(validation=True, api_version=(1, 0)) as ctx:
        assert ctx.caps.api_version == (1, 0)
        assert "VK_KHR_push_descriptor" not in ctx.caps.extensions
        a = ctx.tensor(np.arange(10, dtype=np.float32))
        out = ctx.run(lambda rec: rec.add(a, a))
        np.testing.assert_array_equal(out.numpy(), np.arange(10) * 2.0)
        assert ctx.messenger.messages == []


def test_both_cooperative_matrix_extensions_are_asked_for_with_their_own_features():
    """The KHR kernel needs VK_KHR_cooperative_matrix and the member of
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR (named cooperativeMatrixKHR
    here, the NV struct's member keeping cooperativeMatrix); the NV kernel
    keeps its extension."""
    req = gc.requirements(None, (1, 3))
    assert {"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix"} <= set(req.device_extensions)
    assert {"cooperativeMatrix", "cooperativeMatrixKHR"} <= set(req.features)
    structs = {}
    node = req.feature_chain()
    while node is not None and node != ffi.NULL:
        base = ffi.cast("VkBaseInStructure *", node)
        structs[base.sType] = node
        node = base.pNext if base.pNext != ffi.NULL else None
    khr = ffi.cast("VkPhysicalDeviceCooperativeMatrixFeaturesKHR *",
                   structs[vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR])
    nv = ffi.cast("VkPhysicalDeviceCooperativeMatrixFeaturesNV *",
                  structs[vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV])
    assert khr.cooperativeMatrix and nv.cooperativeMatrix
    # read back from a host's chain: both names
    found = gc.host.features_from_chain(req.feature_chain())
    assert found["cooperativeMatrixKHR"] and found["cooperativeMatrix"]
    only_khr = new("VkPhysicalDeviceCooperativeMatrixFeaturesKHR", cooperativeMatrix=vk.VK_TRUE)
    assert gc.host.features_from_chain(only_khr)["cooperativeMatrixKHR"]

