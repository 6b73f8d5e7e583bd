"""Instance and device creation, shared by the standalone context and the
test host. A renderer that adopts guestcompute never calls this."""
from __future__ import annotations

import os

import vulkan as vk
from vulkan import ffi, lib

from ..errors import UnsupportedError, check
from .functions import instance_function
from .structs import new

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"


def available_layers() -> list:
    count = ffi.new("uint32_t *")
    lib.vkEnumerateInstanceLayerProperties(count, ffi.NULL)
    props = ffi.new("VkLayerProperties[]", count[0])
    lib.vkEnumerateInstanceLayerProperties(count, props)
    return [ffi.string(props[i].layerName).decode() for i in range(count[0])]


def layer_extensions(layer: str) -> list:
    """The instance extensions ``layer`` itself provides."""
    count = ffi.new("uint32_t *")
    lib.vkEnumerateInstanceExtensionProperties(layer.encode(), count, ffi.NULL)
    props = ffi.new("VkExtensionProperties[]", count[0])
    lib.vkEnumerateInstanceExtensionProperties(layer.encode(), count, props)
    return [ffi.string(props[i].extensionName).decode() for i in range(count[0])]


# Layer settings for synchronization validation, where the layer takes settings
# (VK_EXT_layer_settings, layers 1.3.268 and later). Without the shader-access
# heuristic, layer 1.4.309 on the NVIDIA driver reported no hazard at all between
# two dispatches where one writes a storage buffer the other reads with no
# barrier between them (the canary test); with it, it reports READ_AFTER_WRITE.
# The heuristic reads each shader's SPIR-V to tell a binding's reads from its
# writes instead of treating every storage binding as read-write.
SYNC_VALIDATION_SETTINGS = (("validate_sync", True), ("syncval_shader_accesses_heuristic", True))


def _layer_settings(keep: list, pnext):
    """A VkLayerSettingsCreateInfoEXT (chained before ``pnext``) turning on
    SYNC_VALIDATION_SETTINGS; its arrays are appended to ``keep``."""
    values = [ffi.new("VkBool32 *", int(v)) for _, v in SYNC_VALIDATION_SETTINGS]
    names = [ffi.new("char[]", n.encode()) for n, _ in SYNC_VALIDATION_SETTINGS]
    layer = ffi.new("char[]", VALIDATION_LAYER.encode())
    settings = ffi.new("VkLayerSettingEXT[]", len(values))
    for i, (name, value) in enumerate(zip(names, values)):
        settings[i].pLayerName = layer
        settings[i].pSettingName = name
        settings[i].type = vk.VK_LAYER_SETTING_TYPE_BOOL32_EXT
        settings[i].valueCount = 1
        settings[i].pValues = value
    keep.extend([values, names, layer, settings])
    info = new("VkLayerSettingsCreateInfoEXT", pNext=pnext, settingCount=len(values), pSettings=settings)
    keep.append(info)
    return info


def instance_api_version() -> tuple:
    fn = instance_function(ffi.NULL, "vkEnumerateInstanceVersion")
    if fn is None:
        return (1, 0)
    out = ffi.new("uint32_t *")
    fn(out)
    return (vk.VK_VERSION_MAJOR(out[0]), vk.VK_VERSION_MINOR(out[0]))


class DebugMessenger:
    """Collects validation messages (warnings and errors) into ``messages``,
    except those ``ignore(text)`` is true of, which go to ``ignored``."""

    def __init__(self, instance):
        self.messages: list = []
        self.ignored: list = []
        self.ignore = None
        self.instance = instance

        def on_message(severity, types, data, user):
            text = ffi.string(data.pMessage).decode(errors="replace")
            # Layers from 1.3.268 on leave the message's name (e.g.
            # SYNC-HAZARD-READ-AFTER-WRITE, a VUID) out of the text; it is
            # pMessageIdName. Each message reads "[name] text", whichever layer.
            name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else ""
            text = text if not name or name in text else f"[{name}] {text}"
            (self.ignored if self.ignore is not None and self.ignore(text) else self.messages).append(text)
            return vk.VK_FALSE

        self._callback = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", on_message)
        create = instance_function(instance, "vkCreateDebugUtilsMessengerEXT")
        self._destroy = instance_function(instance, "vkDestroyDebugUtilsMessengerEXT")
        self.handle = ffi.new("VkDebugUtilsMessengerEXT *")
        info = new("VkDebugUtilsMessengerCreateInfoEXT", **self.create_info_fields())
        check("vkCreateDebugUtilsMessengerEXT", create(instance, info, ffi.NULL, self.handle))

    def create_info_fields(self) -> dict:
        return dict(
            messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            pfnUserCallback=self._callback)

    def close(self):
        if self.handle is not None:
            self._destroy(self.instance, self.handle[0], ffi.NULL)
            self.handle = None


def create_instance(api_version=(1, 3), validation=False, extensions=(), app_name="guestcompute"):
    """Returns (instance, messenger or None). With ``validation`` the Khronos
    layer runs with synchronization validation on."""
    api_version = min(tuple(api_version), instance_api_version())
    exts = list(extensions)
    layers = []
    pnext = ffi.NULL
    keep = []
    if validation:
        if VALIDATION_LAYER not in available_layers():
            raise UnsupportedError(
                "the Khronos validation layer is not installed (Debian: apt-get install vulkan-validationlayers)")
        layers.append(VALIDATION_LAYER)
        exts.append("VK_EXT_debug_utils")
        enables = ffi.new("VkValidationFeatureEnableEXT[]",
                          [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
        keep.append(enables)
        pnext = new("VkValidationFeaturesEXT", enabledValidationFeatureCount=1,
                    pEnabledValidationFeatures=enables)
        keep.append(pnext)
        if "VK_EXT_layer_settings" in layer_extensions(VALIDATION_LAYER):
            exts.append("VK_EXT_layer_settings")
            pnext = _layer_settings(keep, pnext)
    app = new("VkApplicationInfo", pApplicationName=app_name, pEngineName="guestcompute",
              apiVersion=vk.VK_MAKE_VERSION(api_version[0], api_version[1], 0))
    info = new("VkInstanceCreateInfo", pNext=pnext, pApplicationInfo=app,
               enabledLayerCount=len(layers), ppEnabledLayerNames=layers or ffi.NULL,
               enabledExtensionCount=len(exts), ppEnabledExtensionNames=exts or ffi.NULL)
    out = ffi.new("VkInstance *")
    check("vkCreateInstance", lib.vkCreateInstance(info, ffi.NULL, out))
    instance = out[0]
    messenger = DebugMessenger(instance) if validation else None
    return instance, messenger, api_version


def physical_devices(instance) -> list:
    count = ffi.new("uint32_t *")
    lib.vkEnumeratePhysicalDevices(instance, count, ffi.NULL)
    arr = ffi.new("VkPhysicalDevice[]", count[0])
    lib.vkEnumeratePhysicalDevices(instance, count, arr)
    return [arr[i] for i in range(count[0])]


def device_name(pd) -> str:
    props = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, props)
    return ffi.string(props.deviceName).decode()


def device_type(pd) -> int:
    props = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, props)
    return props.deviceType


_TYPE_PREFERENCE = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2, vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 3,
}


def pick_physical_device(instance, wanted: str | None = None):
    """A GPU when there is one, else lavapipe. ``wanted`` (or the
    GUESTCOMPUTE_DEVICE env variable) is an index or a name substring."""
    devices = physical_devices(instance)
    if not devices:
        raise UnsupportedError("no Vulkan device found (Debian: apt-get install mesa-vulkan-drivers)")
    wanted = wanted if wanted is not None else os.environ.get("GUESTCOMPUTE_DEVICE")
    if wanted:
        if str(wanted).isdigit() and int(wanted) < len(devices):
            return devices[int(wanted)]
        for pd in devices:
            if str(wanted).lower() in device_name(pd).lower():
                return pd
        names = [device_name(pd) for pd in devices]
        raise UnsupportedError(f"no device matches {wanted!r}; devices: {names}")
    return min(devices, key=lambda pd: _TYPE_PREFERENCE.get(device_type(pd), 4))


def compute_queue_family(pd, need_graphics=False) -> int:
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, ffi.NULL)
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(pd, count, props)
    want = vk.VK_QUEUE_COMPUTE_BIT | (vk.VK_QUEUE_GRAPHICS_BIT if need_graphics else 0)
    for i in range(count[0]):
        if props[i].queueFlags & want == want:
            return i
    raise UnsupportedError("the device has no compute queue family")


def create_device(pd, queue_family: int, extensions=(), feature_chain=None, core_features=None):
    """Returns the VkDevice with one queue of ``queue_family``;
    ``core_features``: a VkPhysicalDeviceFeatures for pEnabledFeatures."""
    prio = ffi.new("float[]", [1.0])
    qinfo = new("VkDeviceQueueCreateInfo", queueFamilyIndex=queue_family, queueCount=1,
                pQueuePriorities=prio)
    exts = list(extensions)
    info = new("VkDeviceCreateInfo", pNext=feature_chain if feature_chain is not None else ffi.NULL,
               queueCreateInfoCount=1, pQueueCreateInfos=qinfo,
               enabledExtensionCount=len(exts), ppEnabledExtensionNames=exts or ffi.NULL,
               pEnabledFeatures=core_features if core_features is not None else ffi.NULL)
    out = ffi.new("VkDevice *")
    check("vkCreateDevice", lib.vkCreateDevice(pd, info, ffi.NULL, out))
    return out[0]
