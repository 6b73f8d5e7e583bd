"""Tensors over memory the guest did not allocate: a host's VkBuffer
(``ctx.import_buffer``, and reading one the host did not make a copy
source) and memory another context exported (``ctx.import_memory``).

An import trusts nothing it is told: a view past the memory would read and
write past it, an offset between elements would shift every element. So
every declared value is checked here, with a typed error, before the view
exists (and before anything is recorded with it).
"""
from __future__ import annotations

import math

import numpy as np
import vulkan as vk
from vulkan import ffi

from .device.shared_memory import ExportedMemory
from .dtypes import as_dtype, uint8, uint32
from .errors import BufferRangeError, InvalidArgumentError, UnsupportedError
from .host.declarations import as_buffer_usage, as_handle, as_host_access
from .tensor import Buffer, Tensor, as_shape


def import_buffer(ctx, buffer, shape, dtype, offset: int, host_access, buffer_size, usage) -> Tensor:
    """A tensor view of the host's VkBuffer ``buffer``, as
    :meth:`~guestcompute.context.Context.import_buffer` documents."""
    handle = as_handle(buffer, "VkBuffer", "buffer")
    shape = as_shape(shape)
    d = as_dtype(dtype)
    ctx.device.check_dtype_enabled(d)
    access = as_host_access(host_access)
    usage_flags = as_buffer_usage(usage)
    if usage_flags is not None and not usage_flags & vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT:
        raise InvalidArgumentError(f"the buffer's usage ({usage_flags:#x}) lacks STORAGE_BUFFER, which every "
                                   "guest op binds it as: create it with "
                                   "VK_BUFFER_USAGE_STORAGE_BUFFER_BIT")
    if not isinstance(offset, int) or offset < 0:
        raise BufferRangeError(f"offset must be a non-negative int of bytes, got {offset!r}")
    if offset % d.size:
        raise BufferRangeError(f"offset {offset} is not a multiple of the {d} element size {d.size}; "
                               "align the offset to the element size")
    nbytes = math.prod(shape) * d.size
    size = _bound_size(ctx.device, handle, offset, nbytes, buffer_size)
    keys = ctx.device.imported_ranges.hazard_keys(handle, offset, offset + nbytes,
                                                  guest=ctx.device.suballocator.holds(handle))
    imported = Buffer(ctx, handle, size, None, access, usage=usage_flags, hazard_keys=keys)
    return Tensor(imported, shape, d, offset=offset // d.size)


def _bound_size(device, handle, offset: int, nbytes: int, buffer_size) -> int:
    """The bytes of the host's buffer a binding of the view covers, once the
    view of ``nbytes`` at ``offset`` is known to fit ``buffer_size`` (when
    given), the buffer's memory requirements and maxStorageBufferRange."""
    if buffer_size is not None:
        if not isinstance(buffer_size, int) or buffer_size <= 0:
            raise BufferRangeError(f"buffer_size must be a positive int, got {buffer_size!r}")
        if offset + nbytes > buffer_size:
            raise BufferRangeError(f"view of {nbytes} bytes at offset {offset} does not fit the "
                                   f"{buffer_size}-byte buffer; shrink the shape or the offset")
    # The buffer is no larger than its memory requirements: a view past
    # them is out of range even when the host did not give buffer_size.
    reqs = ffi.new("VkMemoryRequirements *")
    device.fns.vkGetBufferMemoryRequirements(device.handle, handle, reqs)
    if max(offset + nbytes, buffer_size or 0) > reqs.size:
        raise BufferRangeError(f"view of {nbytes} bytes at offset {offset} (buffer_size={buffer_size}) "
                               f"reaches past the buffer, which is at most {reqs.size} bytes; "
                               "pass the real buffer_size and a view that fits")
    size = buffer_size if buffer_size is not None else offset + nbytes
    if size > device.limits.max_storage_buffer_range:
        size = device.limits.max_storage_buffer_range
        if offset + nbytes > size:
            raise UnsupportedError("imported view ends past maxStorageBufferRange")
    return size


def import_memory(ctx, exported: ExportedMemory) -> Tensor:
    """A tensor over the memory another context exported, as
    :meth:`~guestcompute.context.Context.import_memory` documents."""
    if not isinstance(exported, ExportedMemory):
        raise InvalidArgumentError(f"import_memory takes what t.export() returned, got {type(exported).__name__}")
    d = as_dtype(exported.dtype)
    ctx.device.check_dtype_enabled(d)       # before the import: nothing to undo
    shape, strides, first = _exported_view(exported, d)
    alloc = ctx.device.shared_memory.import_(exported)
    return Tensor(Buffer(ctx, alloc.buffer, alloc.size, alloc), shape, d, strides, first)


def _exported_view(exported: ExportedMemory, d) -> tuple:
    """(shape, strides, offset in elements) of the view ``exported``
    describes, once it is known to lie inside the exported buffer at whole
    elements."""
    shape = as_shape(exported.shape)
    strides = exported.strides
    if (not isinstance(strides, (tuple, list)) or len(strides) != len(shape)
            or not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in strides)):
        raise InvalidArgumentError(f"import_memory: strides {strides!r} must be {len(shape)} ints (in elements), "
                                   f"one per axis of shape {shape}; pass what t.export() returned")
    strides = tuple(int(s) for s in strides)
    offset, size = exported.offset, exported.buffer_size
    for name, value in (("offset", offset), ("buffer_size", size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InvalidArgumentError(f"import_memory: {name} must be a non-negative int, got {value!r}; pass "
                                       "what t.export() returned")
    if offset % d.size:
        raise InvalidArgumentError(f"import_memory: offset {offset} is not a multiple of {d.name}'s "
                                   f"{d.size} bytes, so no element starts there; pass what t.export() returned")
    if math.prod(shape):
        lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides)) * d.size
        hi = offset + (sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + 1) * d.size
        if lo < 0 or hi > size:
            raise BufferRangeError(f"import_memory: the view (bytes {lo} to {hi}) lies outside the exported "
                                   f"{size}-byte buffer; shrink the shape or the offset, or pass what "
                                   "t.export() returned")
    return shape, strides, int(offset) // d.size


def read_through_compute(ctx, buf: Buffer, offset: int, size: int) -> bytes:
    """Read a host buffer that may lack TRANSFER_SRC: a compute copy into
    a guest tensor (which has every usage), then read that. The copy
    moves whole 32-bit words where the widened range stays inside the
    buffer, else single bytes (8-bit storage)."""
    first = offset - offset % 4
    end = -(-(offset + size) // 4) * 4
    if end <= buf.size:
        src = Tensor(buf, ((end - first) // 4,), uint32, offset=first // 4)
    elif ctx.caps.uint8_storage:
        src, first = Tensor(buf, (size,), uint8, offset=offset), offset
    else:
        raise UnsupportedError(
            f"reading {size} bytes at offset {offset} of this imported buffer needs a copy: declare "
            "usage= with TRANSFER_SRC (and create the buffer with VK_BUFFER_USAGE_TRANSFER_SRC_BIT), "
            "or give a buffer_size that covers whole 4-byte words")
    words = ctx.run(lambda rec: rec.copy(src))
    raw = ctx.device.transfers.read(words.buffer, 0, words.nbytes)
    return raw[offset - first:offset - first + size]
