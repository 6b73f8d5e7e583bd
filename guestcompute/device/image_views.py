"""Image views and samplers: created on first use, cached, destroyed with
what they view.

A view is keyed by (image uid, view format, mip level, array layer): guest
kernels always see one 2-D subresource, so one cached view per (mip, layer)
serves every op. Keying on the image's uid, never its VkImage handle, means
a rebound or destroyed image can never meet a stale view (handles are
reused by drivers). A sampler is keyed by its description (filter, address
mode); a device has a handful.

Thread-safety: lookups are dict reads; creation holds a lock.
"""
from __future__ import annotations

import threading

import vulkan as vk
from vulkan import ffi

from ..errors import check
from ..vk.structs import new

FILTERS = {"nearest": vk.VK_FILTER_NEAREST, "linear": vk.VK_FILTER_LINEAR}
ADDRESS_MODES = {"clamp": vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE, "repeat": vk.VK_SAMPLER_ADDRESS_MODE_REPEAT,
                 "mirror": vk.VK_SAMPLER_ADDRESS_MODE_MIRRORED_REPEAT,
                 "border": vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_BORDER}


class ImageViews:
    """One device's image views and samplers (see the module notes)."""

    def __init__(self, device, fns):
        self.device = device
        self.fns = fns
        self._lock = threading.Lock()
        self._views: dict = {}          # (uid, vk format, mip, layer, usage) -> VkImageView
        self._by_image: dict = {}       # uid -> set of view keys
        self._samplers: dict = {}       # (filter, address) -> VkSampler

    def view(self, image, vk_format: int, mip: int, layer: int, usage: int = 0):
        """The 2-D view of ``image``'s (mip, layer) in ``vk_format``.
        ``usage``: narrower usage for the view (VkImageViewUsageCreateInfo,
        Vulkan 1.1), e.g. an sRGB view of a storage image used for sampling."""
        key = (image.uid, vk_format, mip, layer, usage)
        found = self._views.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._views.get(key)
            if found is None:
                rng = dict(aspectMask=image.format.aspect, baseMipLevel=mip, levelCount=1,
                           baseArrayLayer=layer, layerCount=1)
                narrow = new("VkImageViewUsageCreateInfo", usage=usage) if usage else None
                info = new("VkImageViewCreateInfo", image=image.handle, viewType=vk.VK_IMAGE_VIEW_TYPE_2D,
                           format=vk_format, subresourceRange=rng, pNext=narrow if narrow is not None else ffi.NULL)
                out = ffi.new("VkImageView *")
                check("vkCreateImageView", self.fns.vkCreateImageView(self.device, info, ffi.NULL, out))
                found = self._views[key] = out[0]
                self._by_image.setdefault(image.uid, set()).add(key)
            return found

    def sampler(self, filter: str = "nearest", address: str = "clamp"):
        """A sampler with ``filter`` ("nearest"/"linear") for min and mag,
        one mip level (views hold one), unnormalized coordinates off."""
        key = (filter, address)
        found = self._samplers.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._samplers.get(key)
            if found is None:
                f, a = FILTERS[filter], ADDRESS_MODES[address]
                info = new("VkSamplerCreateInfo", magFilter=f, minFilter=f,
                           mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=a, addressModeV=a,
                           addressModeW=a, maxLod=0.0,
                           borderColor=vk.VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK)
                out = ffi.new("VkSampler *")
                check("vkCreateSampler", self.fns.vkCreateSampler(self.device, info, ffi.NULL, out))
                found = self._samplers[key] = out[0]
            return found

    def forget_image(self, uid: int) -> None:
        """Destroy the views of image ``uid`` (its last use retired)."""
        with self._lock:
            keys = self._by_image.pop(uid, ())
            views = [self._views.pop(k) for k in keys if k in self._views]
        for v in views:
            self.fns.vkDestroyImageView(self.device, v, ffi.NULL)

    @property
    def live_views(self) -> int:
        return len(self._views)

    @property
    def live_samplers(self) -> int:
        return len(self._samplers)

    def destroy(self) -> None:
        with self._lock:
            views, self._views = list(self._views.values()), {}
            samplers, self._samplers = list(self._samplers.values()), {}
            self._by_image.clear()
        for v in views:
            self.fns.vkDestroyImageView(self.device, v, ffi.NULL)
        for s in samplers:
            self.fns.vkDestroySampler(self.device, s, ffi.NULL)
