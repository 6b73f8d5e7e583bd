"""Vulkan objects other APIs (a second VkDevice, CUDA) can share: memory
and timeline semaphores exported as, or imported from, POSIX file
descriptors (VK_KHR_external_memory_fd, VK_KHR_external_semaphore_fd).

Only the opaque-fd handle type is used: it is the one CUDA's
cuImportExternalMemory / cuImportExternalSemaphore take on Linux, and the
one a second VkDevice on the same physical device (same deviceUUID and
driverUUID) may import. An fd names the whole VkDeviceMemory object, so an
exportable buffer always gets memory of its own.

Ownership of descriptors follows Vulkan: vkGetMemoryFdKHR /
vkGetSemaphoreFdKHR hand the caller a new descriptor; a successful import
takes the one it is given (the functions here import a duplicate, so the
caller's stays theirs to close).
"""
from __future__ import annotations

import os
import stat

import vulkan as vk
from vulkan import ffi, lib

from ..errors import InvalidArgumentError, check
from .structs import chain, new

OPAQUE_FD = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
SEMAPHORE_OPAQUE_FD = vk.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT


def device_uuids(physical_device) -> tuple:
    """(deviceUUID, driverUUID) as 16-byte strings: two devices may share
    opaque handles only when both match (and CUDA names its devices by the
    first)."""
    ids = new("VkPhysicalDeviceIDProperties")
    props = new("VkPhysicalDeviceProperties2", pNext=ids)
    lib.vkGetPhysicalDeviceProperties2(physical_device, props)
    return bytes(ffi.buffer(ids.deviceUUID, 16)), bytes(ffi.buffer(ids.driverUUID, 16))


def buffer_export_support(physical_device, usage: int) -> tuple:
    """(exportable, importable) of opaque-fd memory for a buffer of
    ``usage`` (vkGetPhysicalDeviceExternalBufferProperties). Whether the
    driver wants it dedicated is not asked: it always is here."""
    info = new("VkPhysicalDeviceExternalBufferInfo", usage=usage, handleType=OPAQUE_FD)
    props = new("VkExternalBufferProperties")
    lib.vkGetPhysicalDeviceExternalBufferProperties(physical_device, info, props)
    feats = props.externalMemoryProperties.externalMemoryFeatures
    return (bool(feats & vk.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT),
            bool(feats & vk.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT))


def timeline_export_support(physical_device) -> tuple:
    """(exportable, importable) of opaque-fd timeline semaphores."""
    kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
    info = new("VkPhysicalDeviceExternalSemaphoreInfo", pNext=kind, handleType=SEMAPHORE_OPAQUE_FD)
    props = new("VkExternalSemaphoreProperties")
    lib.vkGetPhysicalDeviceExternalSemaphoreProperties(physical_device, info, props)
    feats = props.externalSemaphoreFeatures
    return (bool(feats & vk.VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT),
            bool(feats & vk.VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT))


def external_buffer_info():
    """The VkBufferCreateInfo pNext of a buffer bound to shareable memory."""
    return new("VkExternalMemoryBufferCreateInfo", handleTypes=OPAQUE_FD)


def export_allocate_info(alloc_info, buffer) -> None:
    """Chain onto ``alloc_info`` what makes the memory exportable, dedicated
    to ``buffer`` (``chain`` keeps the structs alive with ``alloc_info``)."""
    chain(alloc_info, new("VkExportMemoryAllocateInfo", handleTypes=OPAQUE_FD),
          new("VkMemoryDedicatedAllocateInfo", buffer=buffer))


def check_fd(fd) -> None:
    """InvalidArgumentError unless ``fd`` is an open descriptor that can
    name memory or a semaphore. Pipes, sockets and folders never do (a
    driver may block reading one); what a driver's opaque fds are
    otherwise differs by driver, so the driver judges the rest."""
    if isinstance(fd, bool) or not isinstance(fd, int) or fd < 0:
        raise InvalidArgumentError(f"fd={fd!r}: give an open file descriptor (an int, at least 0)")
    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        raise InvalidArgumentError(f"fd {fd} is not an open file descriptor ({e.strerror})") from None
    for is_kind, kind in ((stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if is_kind(mode):
            raise InvalidArgumentError(f"fd {fd} is {kind}, not an exported Vulkan memory or semaphore handle")


def closer(fd: int):
    """What closes ``fd`` after an import of it failed: a successful import
    owns it, and some drivers close it on a failed one too, when its number
    may be taken by a file opened since; so it is closed only while it still
    names the file it named now."""
    before = os.fstat(fd)

    def close_if_still_ours():
        try:
            now = os.fstat(fd)
        except OSError:
            return                          # the importer closed it
        if (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
            os.close(fd)
    return close_if_still_ours


def duplicate_fd(fd: int):
    """(a duplicate of ``fd`` for an import, what closes it if the import
    fails: see :func:`closer`)."""
    check_fd(fd)
    dup = os.dup(fd)
    return dup, closer(dup)


def import_allocate_info(alloc_info, fd: int, buffer, dedicated: bool):
    """Chain onto ``alloc_info`` the import of a duplicate of ``fd`` (which
    the driver owns once the allocation succeeds); returns what to call if
    the allocation fails."""
    dup, on_failure = duplicate_fd(fd)
    chain(alloc_info, new("VkImportMemoryFdInfoKHR", handleType=OPAQUE_FD, fd=dup),
          new("VkMemoryDedicatedAllocateInfo", buffer=buffer) if dedicated else None)
    return on_failure


def memory_fd(fns, device, memory) -> int:
    """A new opaque fd for ``memory`` (the caller owns it)."""
    out = ffi.new("int *")
    check("vkGetMemoryFdKHR", fns.vkGetMemoryFdKHR(
        device, new("VkMemoryGetFdInfoKHR", memory=memory, handleType=OPAQUE_FD), out))
    return out[0]


def create_exportable_timeline(fns, device, initial: int = 0):
    """A timeline VkSemaphore whose payload can be exported as an opaque fd."""
    kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=initial)
    export = new("VkExportSemaphoreCreateInfo", handleTypes=SEMAPHORE_OPAQUE_FD)
    chain(kind, export)
    out = ffi.new("VkSemaphore *")
    check("vkCreateSemaphore", fns.vkCreateSemaphore(device, new("VkSemaphoreCreateInfo", pNext=kind),
                                                     ffi.NULL, out))
    return out[0]


def semaphore_fd(fns, device, semaphore) -> int:
    """A new opaque fd for ``semaphore``'s payload (the caller owns it)."""
    out = ffi.new("int *")
    check("vkGetSemaphoreFdKHR", fns.vkGetSemaphoreFdKHR(
        device, new("VkSemaphoreGetFdInfoKHR", semaphore=semaphore, handleType=SEMAPHORE_OPAQUE_FD), out))
    return out[0]


def import_timeline(fns, device, fd: int):
    """A timeline VkSemaphore of ``device`` sharing the payload behind
    ``fd`` (a duplicate is imported; ``fd`` stays the caller's)."""
    kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
    out = ffi.new("VkSemaphore *")
    check("vkCreateSemaphore", fns.vkCreateSemaphore(device, new("VkSemaphoreCreateInfo", pNext=kind),
                                                     ffi.NULL, out))
    sem = out[0]
    try:
        dup, on_failure = duplicate_fd(fd)
    except BaseException:
        fns.vkDestroySemaphore(device, sem, ffi.NULL)
        raise
    info = new("VkImportSemaphoreFdInfoKHR", semaphore=sem, handleType=SEMAPHORE_OPAQUE_FD, fd=dup)
    res = fns.vkImportSemaphoreFdKHR(device, info)
    if res != vk.VK_SUCCESS:
        on_failure()
        fns.vkDestroySemaphore(device, sem, ffi.NULL)
        check("vkImportSemaphoreFdKHR", res)
    return sem
