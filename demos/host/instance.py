"""Instance creation, with optional validation and a collecting debug messenger."""
from __future__ import annotations

import vulkan as vk

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS = "VK_EXT_debug_utils"
VALIDATION_FEATURES = "VK_EXT_validation_features"
PORTABILITY_ENUMERATION = "VK_KHR_portability_enumeration"

MAX_API_VERSION = vk.VK_MAKE_VERSION(1, 3, 0)


def version_tuple(version: int) -> tuple[int, int]:
    return (vk.VK_VERSION_MAJOR(version) & 0x7F, vk.VK_VERSION_MINOR(version))


def instance_api_version() -> int:
    """Highest API version we ask for: min(1.3, what the loader offers)."""
    try:
        loader = vk.vkEnumerateInstanceVersion()
    except (AttributeError, vk.VkException):
        loader = vk.VK_MAKE_VERSION(1, 0, 0)
    return min(loader, MAX_API_VERSION)


class DebugMessenger:
    """Collects VK_EXT_debug_utils warnings and errors as strings into ``sink``.

    Owns its own cffi callback, so several renderers in one process do not
    overwrite each other's message lists.
    """

    SEVERITY = (vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
    TYPES = (vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
             | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
             | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)

    def __init__(self, sink: list, echo: bool = False):
        self.sink = sink
        self.echo = echo
        self.handle = None
        self._destroy_fn = None
        self._callback = vk.ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", self._on_message)

    def _on_message(self, severity, types, data, user_data):
        level = "ERROR" if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT else "WARNING"
        name = vk.ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else "-"
        text = vk.ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else ""
        message = f"{level} [{name}] {text}"
        self.sink.append(message)
        if self.echo:
            print(message, flush=True)
        return vk.VK_FALSE

    def create_info(self):
        """Create-info struct; also chained into VkInstanceCreateInfo so that
        instance creation and destruction are covered."""
        info = vk.VkDebugUtilsMessengerCreateInfoEXT(
            messageSeverity=self.SEVERITY, messageType=self.TYPES)
        info.pfnUserCallback = self._callback
        return info

    def attach(self, instance):
        create = vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT")
        self._destroy_fn = vk.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT")
        self.handle = create(instance, self.create_info(), None)

    def destroy(self, instance):
        if self.handle is not None:
            self._destroy_fn(instance, self.handle, None)
            self.handle = None


def _available_instance_extensions(layer: str | None = None) -> set[str]:
    return {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(layer)}


def create_instance(app_name: str, required_extensions, validation: bool, messenger: DebugMessenger | None):
    """Create a VkInstance.

    ``required_extensions`` are e.g. what GLFW needs for surfaces. With
    ``validation`` the Khronos layer is enabled with synchronization
    validation, and ``messenger`` receives its messages.

    Returns ``(instance, api_version)``.
    """
    available = _available_instance_extensions()
    extensions = list(dict.fromkeys(required_extensions))
    missing = [e for e in extensions if e not in available]
    if missing:
        raise RuntimeError(f"instance extensions not available: {missing}")

    flags = 0
    if PORTABILITY_ENUMERATION in available:
        # Lets the loader list portability drivers (e.g. MoltenVK) too.
        extensions.append(PORTABILITY_ENUMERATION)
        flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR

    layers = []
    next_struct = None
    if validation:
        layer_names = {layer.layerName for layer in vk.vkEnumerateInstanceLayerProperties()}
        if VALIDATION_LAYER not in layer_names:
            raise RuntimeError(f"validation requested but {VALIDATION_LAYER} is not installed")
        layers.append(VALIDATION_LAYER)
        layer_extensions = _available_instance_extensions(VALIDATION_LAYER)
        if DEBUG_UTILS not in available | layer_extensions:
            raise RuntimeError(f"validation requested but {DEBUG_UTILS} is not available")
        extensions.append(DEBUG_UTILS)
        if messenger is not None:
            next_struct = messenger.create_info()
        if VALIDATION_FEATURES in layer_extensions:
            extensions.append(VALIDATION_FEATURES)
        next_struct = vk.VkValidationFeaturesEXT(
            pNext=next_struct,
            pEnabledValidationFeatures=[
                vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])

    api_version = instance_api_version()
    app_info = vk.VkApplicationInfo(
        pApplicationName=app_name,
        applicationVersion=vk.VK_MAKE_VERSION(0, 1, 0),
        pEngineName="demos.host",
        engineVersion=vk.VK_MAKE_VERSION(0, 1, 0),
        apiVersion=api_version)
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(
        pNext=next_struct,
        flags=flags,
        pApplicationInfo=app_info,
        ppEnabledLayerNames=layers or None,
        ppEnabledExtensionNames=list(dict.fromkeys(extensions)) or None), None)

    if validation and messenger is not None:
        messenger.attach(instance)
    return instance, api_version
