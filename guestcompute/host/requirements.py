"""What a host must enable before vkCreateDevice for guestcompute to use
all it can: :func:`requirements` negotiates the optional extensions and
features against the physical device, the API version and the instance's
extensions (the spec's extension dependencies), and :class:`Requirements`
builds the pNext chain that enables them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import vulkan as vk
from vulkan import ffi, lib

from ..errors import InvalidArgumentError, UnsupportedError
from ..vk import cooperative_vector as coopvec
from ..vk import newer_features as newer
from ..vk.functions import instance_function
from ..vk.structs import chain, keep_alive, new
from .caps import CORE_SINCE, FEATURE_FIELDS, FEATURE_STRUCTS
from .declarations import as_handle, extension_names, version_tuple

# Device extensions guestcompute uses when the host enabled them. None is
# required: a bare Vulkan 1.0 device without extensions works.
OPTIONAL_EXTENSIONS = (
    "VK_KHR_push_descriptor",         # descriptors without pools or set caching
    "VK_KHR_16bit_storage",           # float16 tensors
    "VK_KHR_8bit_storage",            # uint8 (RGBA8) tensors
    "VK_KHR_shader_float16_int8",     # fp16 arithmetic in the cooperative-matrix kernels
    "VK_KHR_storage_buffer_storage_class",
    "VK_KHR_timeline_semaphore",      # semaphore hand-off mode
    "VK_EXT_subgroup_size_control",   # kernels tuned to the subgroup size
    "VK_NV_cooperative_matrix",       # tensor-core matmul
    "VK_KHR_vulkan_memory_model",     # glslang's NV cooperative-matrix SPIR-V requires it
    "VK_KHR_cooperative_matrix",      # tensor-core matmul and fused MLP (rec.mlp): 16x16x16 fp16 fragments
    "VK_EXT_memory_budget",           # per-heap budget and usage in ctx.memory_report()
    "VK_KHR_external_memory_fd",      # exportable tensors (another VkDevice, CUDA/PyTorch)
    "VK_KHR_external_semaphore_fd",   # shared timelines (GPU-side order with them)
    "VK_NV_shader_subgroup_partitioned",  # one-instruction digit matching in the radix sort
    "VK_NV_cooperative_vector",       # fused MLP (rec.mlp): matrix-vector products on the tensor cores
    "VK_EXT_shader_replicated_composites",  # slangc builds the cooperative-vector kernel's constants with it
    "VK_KHR_shader_bfloat16",         # fused MLP (rec.mlp) with bfloat16 weights on the tensor cores (opt-in)
)
# VK_KHR_shader_bfloat16 is listed only when asked for (``requirements(bfloat16=True)``):
# the Khronos validation layer 1.4.309 does not know it, and reports its name
# and its feature struct as unknown at vkCreateDevice (testing.py says more).

GET_PROPERTIES2 = "VK_KHR_get_physical_device_properties2"


@dataclass(frozen=True)
class _Dependencies:
    """What the Vulkan spec asks before a device may enable an extension (its
    "Extension and Version Dependencies"): either the API version reaches
    ``version``, or, below it, every extension in ``instance`` is enabled on
    the instance and every one in ``device`` on the device too. ``instance``
    of None: there is no extension route, only the version."""
    version: tuple = (1, 0)
    instance: tuple | None = ()
    device: tuple = ()


_NEEDS_PROPERTIES2 = _Dependencies((1, 1), (GET_PROPERTIES2,))
_DEPENDENCIES = {
    "VK_KHR_push_descriptor": _NEEDS_PROPERTIES2,
    "VK_KHR_storage_buffer_storage_class": _Dependencies(),
    "VK_KHR_16bit_storage": _Dependencies((1, 1), (GET_PROPERTIES2,), ("VK_KHR_storage_buffer_storage_class",)),
    "VK_KHR_8bit_storage": _Dependencies((1, 1), (GET_PROPERTIES2,), ("VK_KHR_storage_buffer_storage_class",)),
    "VK_KHR_shader_float16_int8": _NEEDS_PROPERTIES2,
    "VK_KHR_timeline_semaphore": _NEEDS_PROPERTIES2,
    "VK_EXT_subgroup_size_control": _Dependencies((1, 1), None),
    "VK_NV_shader_subgroup_partitioned": _Dependencies((1, 1), None),
    "VK_NV_cooperative_matrix": _NEEDS_PROPERTIES2,
    "VK_KHR_vulkan_memory_model": _NEEDS_PROPERTIES2,
    "VK_KHR_cooperative_matrix": _NEEDS_PROPERTIES2,
    "VK_EXT_memory_budget": _NEEDS_PROPERTIES2,
    "VK_NV_cooperative_vector": _NEEDS_PROPERTIES2,
    "VK_EXT_shader_replicated_composites": _NEEDS_PROPERTIES2,
    "VK_KHR_shader_bfloat16": _NEEDS_PROPERTIES2,
    # Below 1.1 each needs its base extension on the device and the base's
    # capabilities extension (which needs properties2) on the instance.
    "VK_KHR_external_memory_fd": _Dependencies(
        (1, 1), (GET_PROPERTIES2, "VK_KHR_external_memory_capabilities"), ("VK_KHR_external_memory",)),
    "VK_KHR_external_semaphore_fd": _Dependencies(
        (1, 1), (GET_PROPERTIES2, "VK_KHR_external_semaphore_capabilities"), ("VK_KHR_external_semaphore",)),
}

# Below these API versions guestcompute has no use for the extension even
# where the spec allows it, and why: the kernels that need 16/8-bit storage,
# fp16 arithmetic, subgroup control or cooperative matrices are SPIR-V 1.3,
# which only a Vulkan 1.1 device runs (see KernelSpec.target_env and HostCaps).
_SPIRV_1_3 = ((1, 1), "guestcompute's kernels that use it are SPIR-V 1.3")
_SPIRV_1_5 = ((1, 2), "guestcompute's kernel that uses it is SPIR-V 1.5")
USED_SINCE = {
    "VK_KHR_16bit_storage": _SPIRV_1_3, "VK_KHR_8bit_storage": _SPIRV_1_3,
    "VK_KHR_shader_float16_int8": _SPIRV_1_3, "VK_EXT_subgroup_size_control": _SPIRV_1_3,
    "VK_NV_cooperative_matrix": _SPIRV_1_3, "VK_KHR_vulkan_memory_model": _SPIRV_1_3,
    "VK_KHR_cooperative_matrix": _SPIRV_1_3,
    "VK_NV_cooperative_vector": _SPIRV_1_5, "VK_EXT_shader_replicated_composites": _SPIRV_1_5,
    "VK_KHR_shader_bfloat16": _SPIRV_1_3,
    "VK_KHR_storage_buffer_storage_class": ((1, 1), "guestcompute needs it only for 16/8-bit storage"),
    "VK_EXT_memory_budget": ((1, 1), "the budget is read with vkGetPhysicalDeviceMemoryProperties2"),
    "VK_KHR_external_memory_fd": ((1, 1), "the device UUID that names shared memory is a Vulkan 1.1 property"),
    "VK_KHR_external_semaphore_fd": ((1, 1), "the device UUID that names shared semaphores is a Vulkan 1.1 "
                                     "property"),
}

# Vulkan 1.0 core features guestcompute uses when enabled: storage writes
# to images whose format GLSL cannot name (BGRA swapchain images), and reads
# of them as storage images.
CORE_FEATURES = ("shaderStorageImageWriteWithoutFormat", "shaderStorageImageReadWithoutFormat")

# The extension that brings each optional feature's struct (or, once it is
# core, the API version in caps.CORE_SINCE).
_FEATURE_EXTENSION = {
    "storageBuffer16BitAccess": "VK_KHR_16bit_storage",
    "uniformAndStorageBuffer16BitAccess": "VK_KHR_16bit_storage",
    "storageBuffer8BitAccess": "VK_KHR_8bit_storage",
    "shaderFloat16": "VK_KHR_shader_float16_int8",
    "shaderInt8": "VK_KHR_shader_float16_int8",
    "timelineSemaphore": "VK_KHR_timeline_semaphore",
    "subgroupSizeControl": "VK_EXT_subgroup_size_control",
    "cooperativeMatrix": "VK_NV_cooperative_matrix",
    "cooperativeMatrixKHR": "VK_KHR_cooperative_matrix",
    "vulkanMemoryModel": "VK_KHR_vulkan_memory_model",
    "vulkanMemoryModelDeviceScope": "VK_KHR_vulkan_memory_model",
    **newer.FEATURE_EXTENSION,
}


@dataclass
class Requirements:
    """What a host should enable before vkCreateDevice.

    ``device_extensions``: enable all of them (each is optional for
    guestcompute). With ``physical_device`` given, only extensions it
    supports are listed, and only those the API version and the instance's
    extensions make legal, with the device extensions they depend on.
    ``features``: feature names to switch on (see :meth:`feature_chain`).
    ``api_version``: the highest guestcompute uses here (never above the
    instance's or the device's).

    ``instance_extensions``: instance extensions the instance did not
    enable that would unlock more of ``device_extensions`` (on Vulkan 1.0:
    ``VK_KHR_get_physical_device_properties2`` for push descriptors and
    timeline semaphores). Enable them at vkCreateInstance and call
    :func:`requirements` again with them. ``held_back``: for each optional
    extension the device supports but that is not listed, what it needs.
    """
    required_extensions: list
    device_extensions: list
    features: list
    api_version: tuple = (1, 3)
    min_api_version: tuple = (1, 0)
    instance_extensions: list = field(default_factory=list)
    held_back: dict = field(default_factory=dict)
    # Vulkan 1.0 core features (VkPhysicalDeviceFeatures members) to switch
    # on through pEnabledFeatures (see :meth:`core_feature_struct`); declare
    # them to Context.adopt in ``features`` like the others.
    core_features: list = field(default_factory=list)

    def without(self, *extensions) -> "Requirements":
        """These requirements less ``extensions`` and the features they bring."""
        drop = set(extensions)
        return dataclasses.replace(
            self, device_extensions=[e for e in self.device_extensions if e not in drop],
            features=[f for f in self.features if _FEATURE_EXTENSION.get(f) not in drop])

    def features2_chain(self):
        """One pNext chain for VkDeviceCreateInfo that enables everything:
        a VkPhysicalDeviceFeatures2 holding ``core_features``, followed by
        :meth:`feature_chain` (leave pEnabledFeatures NULL). Needs Vulkan 1.1
        (or VK_KHR_get_physical_device_properties2); keep it alive until
        vkCreateDevice returns."""
        f2 = new("VkPhysicalDeviceFeatures2", features={f: vk.VK_TRUE for f in self.core_features})
        rest = self.feature_chain()
        return chain(f2, rest) if rest is not None else f2

    def core_feature_struct(self):
        """A VkPhysicalDeviceFeatures with ``core_features`` on, for
        VkDeviceCreateInfo.pEnabledFeatures, or None when there are none."""
        return new("VkPhysicalDeviceFeatures", **{f: vk.VK_TRUE for f in self.core_features}) \
            if self.core_features else None

    def feature_chain(self):
        """A ready ``VkPhysicalDeviceFeatures2``-free pNext chain enabling
        ``features``; put it in VkDeviceCreateInfo.pNext (keep it alive)."""
        groups: dict = {}
        for feat in self.features:
            if feat in FEATURE_STRUCTS:
                groups.setdefault(FEATURE_STRUCTS[feat], {})[FEATURE_FIELDS.get(feat, feat)] = vk.VK_TRUE
        structs = [new(s, **flags) for s, flags in groups.items()]
        own = newer.feature_structs(f for f in self.features if f in newer.FEATURES)
        return _with_own_structs(chain(*structs) if structs else None, own)


def requirements(physical_device=None, instance_api_version=None, instance_extensions=(), *,
                 instance=None, bfloat16: bool = False) -> Requirements:
    """Extensions and features to enable for guestcompute (all optional).

    With ``physical_device``, only what it supports is listed. Pass the API
    version your instance was created with (default: 1.1, or 1.3 without a
    physical device) and the instance extensions you enabled: on Vulkan 1.0
    most extensions need ``VK_KHR_get_physical_device_properties2`` on the
    instance, and are left out without it (``instance_extensions`` of the
    result then names it). Features are read with vkGetPhysicalDeviceFeatures2
    (Vulkan 1.1) or, on a 1.0 instance with that extension, its KHR form,
    which is resolved through ``instance`` (then required).

    ``bfloat16``: list VK_KHR_shader_bfloat16 and its type and
    cooperative-matrix features too, for ``ctx.mlp(..., dtype="bfloat16")``
    on the tensor cores (off by default: validation layers that predate it,
    1.4.309 among them, report it as unknown).

    Thread-safety: free function, safe from any thread.
    """
    enabled_on_instance = frozenset(extension_names(instance_extensions, "instance_extensions"))
    if physical_device is None:
        api = min((1, 3), version_tuple(instance_api_version if instance_api_version is not None else (1, 3)))
        supported = frozenset(OPTIONAL_EXTENSIONS)
    else:
        pd = as_handle(physical_device, "VkPhysicalDevice", "physical_device")
        supported = frozenset(supported_extensions(pd))
        props = new("VkPhysicalDeviceProperties")
        lib.vkGetPhysicalDeviceProperties(pd, props)
        instance_api = version_tuple(instance_api_version if instance_api_version is not None else (1, 1))
        api = min((1, 3), version_tuple(props.apiVersion), instance_api)
    exts, held_back = _choose_extensions(api, enabled_on_instance, supported)
    if physical_device is None:
        feats = [f for f in ALL_FEATURES if _feature_struct_usable(f, api, exts)]
    else:
        read_features = _features2_function(api, enabled_on_instance, instance)
        feats = [f for f, on in query_features(pd, api, exts, read_features).items() if on]
    core = []
    if physical_device is not None:
        have = new("VkPhysicalDeviceFeatures")
        lib.vkGetPhysicalDeviceFeatures(pd, have)
        core = [f for f in CORE_FEATURES if getattr(have, f)]
    req = Requirements(required_extensions=[], device_extensions=exts, features=feats, api_version=api,
                       core_features=core,
                       instance_extensions=_unlocking_instance_extensions(api, enabled_on_instance,
                                                                          supported, held_back),
                       held_back=held_back)
    return req if bfloat16 else req.without(newer.BFLOAT16_EXTENSION)


def _version_text(v: tuple) -> str:
    return f"Vulkan {v[0]}.{v[1]}"


def _spec_blocker(ext: str, api: tuple, on_instance: frozenset, supported: frozenset):
    """Why the spec forbids enabling ``ext`` here, or None when it allows it."""
    dep = _DEPENDENCIES.get(ext, _Dependencies())
    if api >= dep.version:
        return None
    if dep.instance is None:
        return _version_text(dep.version)
    lacking = [e for e in dep.instance if e not in on_instance]
    if lacking:
        return f"{' and '.join(lacking)} enabled on the instance, or {_version_text(dep.version)}"
    for needed in dep.device:
        if needed not in supported:
            return f"{needed}, which the device does not support"
        blocker = _spec_blocker(needed, api, on_instance, supported)
        if blocker is not None:
            return f"{needed}, which needs {blocker}"
    return None


def _choose_extensions(api: tuple, on_instance: frozenset, supported: frozenset):
    """(extensions to enable, {held-back extension: what it needs})."""
    chosen, held_back = set(), {}
    for ext in OPTIONAL_EXTENSIONS:
        if ext not in supported:
            continue
        used_since, why = USED_SINCE.get(ext, ((1, 0), ""))
        blocker = _spec_blocker(ext, api, on_instance, supported)
        if api < used_since:
            held_back[ext] = f"{_version_text(used_since)} ({why})"
        elif blocker is not None:
            held_back[ext] = blocker
        else:
            chosen.add(ext)
    # Below an extension's promotion its device-extension dependencies are
    # enabled with it (already checked legal and supported above).
    for ext in list(chosen):
        dep = _DEPENDENCIES.get(ext, _Dependencies())
        if api < dep.version:
            chosen.update(dep.device)
            for needed in dep.device:
                held_back.pop(needed, None)
    return [e for e in OPTIONAL_EXTENSIONS if e in chosen], held_back


def _unlocking_instance_extensions(api, on_instance, supported, held_back) -> list:
    """Instance extensions, not enabled yet, that would make a held-back
    extension legal."""
    candidates = sorted({e for ext in held_back for e in (_DEPENDENCIES[ext].instance or ())} - on_instance)
    unlocking = []
    for candidate in candidates:
        more, _ = _choose_extensions(api, on_instance | {candidate}, supported)
        if any(ext in held_back for ext in more):
            unlocking.append(candidate)
    return unlocking


def _features2_function(api: tuple, on_instance: frozenset, instance):
    """The vkGetPhysicalDeviceFeatures2 entry point legal here, or None.

    The core one is a Vulkan 1.1 command: on a 1.0 instance only the KHR
    alias of VK_KHR_get_physical_device_properties2 may be called, and it
    comes from vkGetInstanceProcAddr."""
    if api >= (1, 1):
        return lib.vkGetPhysicalDeviceFeatures2
    if GET_PROPERTIES2 not in on_instance:
        return None
    if instance is None:
        raise InvalidArgumentError(
            f"requirements(): with {GET_PROPERTIES2} on a Vulkan 1.0 instance, pass instance= too "
            "(its vkGetPhysicalDeviceFeatures2KHR reads the device's features)")
    fn = instance_function(as_handle(instance, "VkInstance", "instance"), "vkGetPhysicalDeviceFeatures2KHR")
    if fn is None:
        raise UnsupportedError(f"the instance does not expose vkGetPhysicalDeviceFeatures2KHR: "
                               f"was it created with {GET_PROPERTIES2} enabled?")
    return fn


def supported_extensions(pd) -> list:
    count = ffi.new("uint32_t *")
    lib.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, count, ffi.NULL)
    props = ffi.new("VkExtensionProperties[]", count[0])
    lib.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, count, props)
    return [ffi.string(props[i].extensionName).decode() for i in range(count[0])]


ALL_FEATURES = tuple(FEATURE_STRUCTS) + tuple(newer.FEATURES)


def _feature_struct_usable(feat: str, api: tuple, extensions) -> bool:
    """A feature's struct may be chained when its extension is enabled, or
    the API version has it in core."""
    ext = _FEATURE_EXTENSION[feat]
    return ext in extensions or api >= CORE_SINCE.get(ext, (9, 9))


def _with_own_structs(head, own: list):
    """``head``'s chain (None for none) followed by ``own`` (structs of
    vk/newer_features.py, linked by address and kept alive by the head)."""
    for a, b in zip(own, own[1:]):
        coopvec.link(a, b)
    if not own:
        return head
    if head is None:
        # A head of the vulkan package's cffi for callers to pass on: a
        # struct of Vulkan 1.1 core with nothing switched on (our features
        # are only listed on Vulkan 1.2 and later).
        head = new("VkPhysicalDevice16BitStorageFeatures")
    tail = head
    while tail.pNext != ffi.NULL:
        tail = ffi.cast("VkBaseOutStructure *", tail.pNext)
    coopvec.link(tail, own[0])
    keep_alive(head, *own)
    return head


def query_features(pd, api: tuple, extensions, read_features) -> dict:
    """Which of guestcompute's optional features the physical device
    supports, among those ``extensions`` (the ones to be enabled) and the
    API version make available. ``read_features``: the legal
    vkGetPhysicalDeviceFeatures2 entry point, or None (nothing is read)."""
    structs = {}
    for feat, struct in FEATURE_STRUCTS.items():
        if _feature_struct_usable(feat, api, extensions):
            structs.setdefault(struct, new(struct))
    own = newer.feature_structs((f for f in newer.FEATURES if _feature_struct_usable(f, api, extensions)), False)
    if read_features is None or not (structs or own):
        return {}
    f2 = _with_own_structs(chain(new("VkPhysicalDeviceFeatures2"), *structs.values()), own)
    read_features(pd, f2)
    found = {feat: bool(getattr(structs[s], FEATURE_FIELDS.get(feat, feat)))
             for feat, s in FEATURE_STRUCTS.items() if s in structs}
    found.update(newer.values(own))
    return found
