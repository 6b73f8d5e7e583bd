"""Physical device selection and logical device creation."""
from __future__ import annotations

from dataclasses import dataclass

import vulkan as vk

from .instance import MAX_API_VERSION

SWAPCHAIN = "VK_KHR_swapchain"

# Lower is better: discrete GPU first, then anything else.
_TYPE_RANK = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0,
    vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2,
    vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 3,
    vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: 4,
}
GRAPHICS_COMPUTE = vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT


@dataclass
class DeviceChoice:
    physical_device: object
    name: str
    device_type: int
    api_version: int
    queue_family_index: int
    extensions: set


def device_extensions(physical_device) -> set[str]:
    return {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical_device, None)}


def _queue_family(instance, physical_device, surface):
    """First queue family with graphics + compute (+ present to ``surface``)."""
    supports_present = None
    if surface is not None:
        supports_present = vk.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceSurfaceSupportKHR")
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)
    for index, family in enumerate(families):
        if family.queueCount == 0 or family.queueFlags & GRAPHICS_COMPUTE != GRAPHICS_COMPUTE:
            continue
        if supports_present and not supports_present(physical_device, index, surface):
            continue
        return index
    return None


def pick_physical_device(instance, name_filter: str | None = None, surface=None,
                         required_extensions=()) -> DeviceChoice:
    """Choose a device: matching ``name_filter`` (case-insensitive substring)
    if given, with a graphics+compute queue (that can present to ``surface``
    when given) and ``required_extensions``; discrete GPUs preferred."""
    candidates, rejected = [], []
    for physical_device in vk.vkEnumeratePhysicalDevices(instance):
        props = vk.vkGetPhysicalDeviceProperties(physical_device)
        name = props.deviceName
        if name_filter and name_filter.lower() not in name.lower():
            rejected.append(f"{name}: name does not match {name_filter!r}")
            continue
        extensions = device_extensions(physical_device)
        missing = [e for e in required_extensions if e not in extensions]
        if missing:
            rejected.append(f"{name}: missing {missing}")
            continue
        family = _queue_family(instance, physical_device, surface)
        if family is None:
            rejected.append(f"{name}: no graphics+compute queue family" + (" with present" if surface else ""))
            continue
        candidates.append(DeviceChoice(physical_device, name, props.deviceType,
                                       props.apiVersion, family, extensions))
    if not candidates:
        raise RuntimeError("no suitable Vulkan device. " + "; ".join(rejected))
    candidates.sort(key=lambda c: _TYPE_RANK.get(c.device_type, 5))
    return candidates[0]


def _find_in_chain(chain, stype):
    """The struct with ``stype`` in a pNext chain (as VkBaseOutStructure*), or None."""
    if chain is None:
        return None
    if vk.ffi.typeof(chain).kind == "struct":
        chain = vk.ffi.addressof(chain)
    node = vk.ffi.cast("VkBaseOutStructure *", chain)
    while node != vk.ffi.NULL:
        if node.sType == stype:
            return node
        node = node.pNext
    return None


def create_device(choice: DeviceChoice, requested_extensions=(), features_chain=None,
                  required_extensions=()):
    """Create the logical device with one queue.

    ``requested_extensions`` are enabled when the device supports them (the
    rest are skipped); ``required_extensions`` must be supported.
    ``features_chain`` (a struct or pointer, e.g. VkPhysicalDeviceVulkan12Features
    or VkPhysicalDeviceFeatures2 with further structs in its pNext) is chained
    into VkDeviceCreateInfo as given. The renderer needs ``largePoints`` for
    point sizes above 1 pixel: it is enabled when supported, inside the
    caller's VkPhysicalDeviceFeatures2 if the chain has one.

    Returns ``(device, enabled_extensions, large_points)``.
    """
    enabled = [e for e in dict.fromkeys([*required_extensions, *requested_extensions])
               if e in choice.extensions]
    missing = [e for e in required_extensions if e not in enabled]
    if missing:
        raise RuntimeError(f"{choice.name} lacks required extensions {missing}")

    large_points = bool(vk.vkGetPhysicalDeviceFeatures(choice.physical_device).largePoints)
    features2 = _find_in_chain(features_chain, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
    enabled_features = None
    if features2 is not None:
        if large_points:
            vk.ffi.cast("VkPhysicalDeviceFeatures2 *", features2).features.largePoints = vk.VK_TRUE
    else:
        enabled_features = vk.VkPhysicalDeviceFeatures(largePoints=vk.VK_TRUE if large_points else None)

    queue_info = vk.VkDeviceQueueCreateInfo(
        queueFamilyIndex=choice.queue_family_index,
        queueCount=1,
        pQueuePriorities=[1.0])
    device = vk.vkCreateDevice(choice.physical_device, vk.VkDeviceCreateInfo(
        pNext=features_chain,
        pQueueCreateInfos=[queue_info],
        ppEnabledExtensionNames=enabled or None,
        pEnabledFeatures=enabled_features), None)
    return device, enabled, large_points


def effective_api_version(instance_version: int, choice: DeviceChoice) -> int:
    """The version usable on this device: min(1.3, instance, device)."""
    return min(MAX_API_VERSION, instance_version, choice.api_version)
