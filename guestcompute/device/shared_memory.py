"""Memory shared with another VkDevice or with CUDA: exportable guest
buffers, what an export hands over, and imports of it.

An exportable tensor's buffer has memory of its own (an fd names a whole
VkDeviceMemory), allocated with VkExportMemoryAllocateInfo. Its
:class:`ExportedMemory` says everything an importer needs — the fd, the
allocation's size and memory type (an opaque-fd import must repeat both),
where the tensor's bytes start, and the UUIDs of the device and driver that
made it (an importer on another physical device or driver is refused).
"""
from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from dataclasses import dataclass

from ..errors import InvalidArgumentError, UnsupportedError
from ..vk import external
from ..vk.memory import STORAGE_USAGE, Allocation


# fd -> the live ExportedMemory that closes it.
_owners: "weakref.WeakValueDictionary[int, ExportedMemory]" = weakref.WeakValueDictionary()
_owners_lock = threading.Lock()


@dataclass
class ExportedMemory:
    """A guest tensor's memory as an opaque POSIX file descriptor.

    ``fd`` is yours: hand it to exactly one importer that takes ownership
    (CUDA's cuImportExternalMemory does), or :meth:`close` it; importing it
    into a guestcompute context (``ctx.import_memory``) imports a duplicate
    and leaves it open. ``allocation_size`` / ``memory_type_index`` /
    ``dedicated``: the VkDeviceMemory behind it, ``buffer_size`` the
    VkBuffer dedicated to it (an import repeats all four).
    ``offset``: the byte where the tensor's first element lives, ``nbytes``
    the bytes from there the view spans; ``shape``, ``dtype`` (a name),
    ``strides`` (in elements) describe the tensor. A copy (``copy.copy``,
    ``dataclasses.replace``) holds a duplicate of ``fd`` of its own.
    """
    fd: int
    allocation_size: int
    memory_type_index: int
    dedicated: bool
    buffer_size: int
    offset: int
    nbytes: int
    shape: tuple
    dtype: str
    strides: tuple
    device_uuid: bytes
    driver_uuid: bytes

    def __post_init__(self):
        # Each ExportedMemory closes its own fd, so one made from another
        # (dataclasses.replace, copy.copy) gets a duplicate: closing one
        # never closes the other's, nor a file that reused its number.
        fd = self.fd
        if isinstance(fd, int) and not isinstance(fd, bool) and fd < 0:
            return                                  # closed or handed on
        self.fd = -1                                # owns nothing until checked
        external.check_fd(fd)
        with _owners_lock:
            owner = _owners.get(fd)
            if owner is not None and owner.fd == fd:
                fd = os.dup(fd)
            _owners[fd] = self
        self.fd = fd

    def __copy__(self):
        return dataclasses.replace(self)

    def __deepcopy__(self, memo):
        return dataclasses.replace(self)

    def close(self) -> None:
        """Close ``fd`` (once; later calls do nothing)."""
        fd = self._disown()
        if fd >= 0:
            os.close(fd)

    def take_fd(self) -> int:
        """Hand ``fd`` to an importer that owns it from now on."""
        if self.fd < 0:
            raise InvalidArgumentError("this export's fd was closed or handed on already; call t.export() again")
        return self._disown()

    def _disown(self) -> int:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with _owners_lock:
                if _owners.get(fd) is self:
                    del _owners[fd]
        return fd

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except OSError:
            pass


class SharedMemory:
    """The device's exportable allocations and imports (``device.shared_memory``)."""

    def __init__(self, device):
        self._device = device
        self._lock = threading.Lock()
        self._support = None
        self._uuids = None

    @property
    def uuids(self) -> tuple:
        """(deviceUUID, driverUUID) of the physical device."""
        if self._uuids is None:
            self._uuids = external.device_uuids(self._device.physical_device)
        return self._uuids

    def check_supported(self) -> None:
        """Raise UnsupportedError unless tensors can be exported and imported here."""
        caps = self._device.caps
        if not caps.external_memory_fd:
            raise UnsupportedError(
                "exportable tensors need VK_KHR_external_memory_fd enabled on the device (and Vulkan 1.1); "
                "gc.requirements() lists it where the device supports it")
        with self._lock:
            if self._support is None:
                self._support = external.buffer_export_support(self._device.physical_device, STORAGE_USAGE)
        exportable, importable = self._support
        if not (exportable and importable):
            raise UnsupportedError("this device cannot export or import storage-buffer memory as an opaque fd "
                                   "(vkGetPhysicalDeviceExternalBufferProperties)")

    def create(self, nbytes: int) -> Allocation:
        """A buffer of ``nbytes`` with exportable memory of its own."""
        self.check_supported()
        return self._device.suballocator.create_shared(nbytes)

    def export(self, alloc: Allocation, *, offset: int, nbytes: int, shape, dtype: str, strides) -> ExportedMemory:
        """A new fd for ``alloc``'s memory, with the view it carries."""
        if alloc is None or not alloc.shareable:
            raise InvalidArgumentError("this tensor's memory is not exportable: make it with "
                                       "ctx.empty(..., exportable=True) (or ctx.tensor / ctx.zeros likewise)")
        self.check_supported()
        dev = self._device
        fd = external.memory_fd(dev.fns, dev.handle, alloc.memory)
        device_uuid, driver_uuid = self.uuids
        return ExportedMemory(fd=fd, allocation_size=alloc.block.size, memory_type_index=alloc.block.type_index,
                              dedicated=True, buffer_size=alloc.size, offset=offset, nbytes=nbytes, shape=tuple(shape), dtype=dtype,
                              strides=tuple(strides), device_uuid=device_uuid, driver_uuid=driver_uuid)

    def import_(self, exported: ExportedMemory) -> Allocation:
        """A buffer over the memory ``exported`` names (from a device with
        the same UUIDs), as large as the exporter's."""
        if exported.fd < 0:
            raise InvalidArgumentError("this export's fd was closed or handed on already; export again")
        self.check_supported()
        if (exported.device_uuid, exported.driver_uuid) != self.uuids:
            raise UnsupportedError("the memory was exported by another physical device or driver (its deviceUUID "
                                   "or driverUUID differs); opaque fds are shared only on the same device and driver")
        if exported.offset + exported.nbytes > exported.buffer_size:
            raise InvalidArgumentError(f"the exported view ({exported.nbytes} bytes at {exported.offset}) "
                                       f"passes the end of its {exported.buffer_size}-byte buffer")
        imported = (exported.fd, exported.allocation_size, exported.memory_type_index, exported.dedicated)
        return self._device.suballocator.create_shared(exported.buffer_size, imported)
