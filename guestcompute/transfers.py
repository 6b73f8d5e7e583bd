"""Moving bytes between host memory and guest buffers.

Host-visible memory (lavapipe, integrated GPUs, resizable BAR) is a plain
memcpy. Otherwise a staging buffer is copied on the context's queue in a
one-time command buffer — only from ``ctx.tensor`` / ``t.numpy()`` /
``ctx.run``, never from ``record`` — or, for an adopted context without a
queue, the copy is recorded at the start of the host's next recording.

Host buffers (``ctx.import_buffer``) are read back with vkCmdCopyBuffer only
when the host declared TRANSFER_SRC in their ``usage``; otherwise a compute
copy moves the view into a guest tensor first, since STORAGE_BUFFER is the
one usage every imported buffer has. They are never written from host
memory: the host owns their contents (it writes its own buffer, or records
``rec.copy(guest_tensor, out=view)``), so TRANSFER_DST is never needed.
"""
from __future__ import annotations

import vulkan as vk
from vulkan import ffi

from .dtypes import uint8, uint32
from .errors import InvalidArgumentError, UnsupportedError, check
from .tensor import Buffer, Tensor
from .vk.memory import STAGING_USAGE, next_uid
from .vk.commands import allocate_command_buffer, create_command_pool
from .vk.structs import new


# VkBufferUsageFlagBits by the short names import_buffer(usage=...) takes.
BUFFER_USAGE_NAMES = {
    "transfer_src": vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
    "transfer_dst": vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    "uniform_texel_buffer": vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
    "storage_texel_buffer": vk.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT,
    "uniform_buffer": vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
    "storage_buffer": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    "index_buffer": vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT,
    "vertex_buffer": vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT,
    "indirect_buffer": vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
    "shader_device_address": 0x00020000,   # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
}


def _usage_bit(name: str) -> int:
    key = name.strip().lower()
    if key.startswith("vk_buffer_usage_") and key.endswith("_bit"):
        key = key[len("vk_buffer_usage_"):-len("_bit")]
    bit = BUFFER_USAGE_NAMES.get(key)
    if bit is None:
        raise InvalidArgumentError(f"unknown buffer usage {name!r}; use VkBufferUsageFlags or names from "
                                   f"{sorted(BUFFER_USAGE_NAMES)}, joined with '|'")
    return bit


def as_buffer_usage(value):
    """VkBufferUsageFlags from an int, a '|'-joined string of names
    (``"storage_buffer|transfer_src"``, or the full Vk names) or a list of
    names/ints. None stays None: the host did not say."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split("|")
    elif isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        raise InvalidArgumentError(f"usage must be VkBufferUsageFlags (int) or buffer-usage names, "
                                   f"got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < 1 << 32:
            raise InvalidArgumentError(f"usage {value!r} is not a VkBufferUsageFlags value")
        return value
    flags = 0
    for part in value:
        flags |= _usage_bit(part) if isinstance(part, str) else as_buffer_usage(part)
    return flags


class TransferMixin:
    """The data-movement half of :class:`~guestcompute.context.Context`."""

    def _write_bytes(self, buf: Buffer, offset: int, data: bytes):
        if buf.alloc is None:
            raise UnsupportedError("write() into an imported buffer: the host owns its contents; write "
                                   "your buffer yourself, or record rec.copy(guest_tensor, out=view)")
        if buf.alloc.mapped is not None:
            buf.alloc.mapped[offset:offset + len(data)] = data
            self.memory.flush(buf.alloc)
            return
        staging = self.memory.create(len(data), STAGING_USAGE, host_visible=True)
        staging.mapped[0:len(data)] = data
        if self.queue is None:
            # No queue to submit on: the copy is recorded at the start of the
            # next recording, and the staging buffer retires with that epoch.
            with self._lock:            # _flush_pending_uploads swaps the list under it
                self._pending_uploads.append((staging, buf, offset, len(data)))
            return
        region = new("VkBufferCopy", srcOffset=0, dstOffset=offset, size=len(data))

        def body(cmd):
            self._cmd_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                              vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
                              vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            self._fns.vkCmdCopyBuffer(cmd, staging.buffer, buf.handle, 1, region)
        try:
            self._submit_and_wait(body)
        finally:
            self.memory.destroy(staging)

    def _flush_pending_uploads(self, rec):
        if not self._pending_uploads:
            return
        with self._lock:
            uploads, self._pending_uploads = self._pending_uploads, []
        cmd = rec.command_buffer
        rec.emit_barrier(vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                          vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                          vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        for staging, buf, offset, size in uploads:
            region = new("VkBufferCopy", srcOffset=0, dstOffset=offset, size=size)
            self._fns.vkCmdCopyBuffer(cmd, staging.buffer, buf.handle, 1, region)
            self._graveyard.append((self._epoch, staging, next_uid()))

    def _read_bytes(self, buf: Buffer, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if buf.alloc is not None and buf.alloc.mapped is not None:
            self.memory.invalidate(buf.alloc)
            return bytes(buf.alloc.mapped[offset:offset + size])
        if self.queue is None:
            raise UnsupportedError("reading this tensor needs a staging copy: pass queue= to Context.adopt")
        if buf.alloc is None and not (buf.usage or 0) & vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT:
            return self._read_through_compute(buf, offset, size)
        staging = self.memory.create(size, STAGING_USAGE, host_visible=True)
        region = new("VkBufferCopy", srcOffset=offset, dstOffset=0, size=size)
        src_stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        if buf.host_access is not None:
            src_stages |= buf.host_access.stages

        def body(cmd):
            self._cmd_barrier(cmd, src_stages, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                              vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            self._fns.vkCmdCopyBuffer(cmd, buf.handle, staging.buffer, 1, region)
            self._cmd_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                              vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        try:
            self._submit_and_wait(body)
            self.memory.invalidate(staging)
            return bytes(staging.mapped[0:size])
        finally:
            self.memory.destroy(staging)

    def _read_through_compute(self, buf: Buffer, offset: int, size: int) -> bytes:
        """Read a host buffer that may lack TRANSFER_SRC: a compute copy into
        a guest tensor (which has every usage), then read that. The copy
        moves whole 32-bit words where the widened range stays inside the
        buffer, else single bytes (8-bit storage)."""
        first = offset - offset % 4
        end = -(-(offset + size) // 4) * 4
        if end <= buf.size:
            src = Tensor(buf, ((end - first) // 4,), uint32, offset=first // 4)
        elif self.caps.uint8_storage:
            src, first = Tensor(buf, (size,), uint8, offset=offset), offset
        else:
            raise UnsupportedError(
                f"reading {size} bytes at offset {offset} of this imported buffer needs a copy: declare "
                "usage= with TRANSFER_SRC (and create the buffer with VK_BUFFER_USAGE_TRANSFER_SRC_BIT), "
                "or give a buffer_size that covers whole 4-byte words")
        words = self.run(lambda rec: rec.copy(src))
        raw = self._read_bytes(words.buffer, 0, words.nbytes)
        return raw[offset - first:offset - first + size]

    def _cmd_barrier(self, cmd, src_stage, src_access, dst_stage, dst_access):
        bar = new("VkMemoryBarrier", srcAccessMask=src_access, dstAccessMask=dst_access)
        self._fns.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)

    def _command_pool(self):
        if self._pool is None:
            self._pool = create_command_pool(self._fns, self.device, self.queue_family_index,
                                             vk.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT)
        return self._pool

    def _submit_and_wait(self, body):
        """Record ``body(cmd)`` into a one-time command buffer, submit, wait.

        One at a time: the transient pool is externally synchronized (uploads
        made inside ``body`` re-enter). Only a standalone context retires its
        epoch here, and only at the outermost level: an adopted context's
        epochs belong to the host, whose own frames may still be in flight."""
        if self.queue is None:
            raise UnsupportedError("this context has no queue; pass queue= to Context.adopt, or record "
                                   "into your own command buffer with ctx.record(cmd)")
        with self._submit_lock:
            self._submit_depth += 1
            try:
                self._submit_once(body)
            finally:
                self._submit_depth -= 1
            if self._owned is not None and self._submit_depth == 0:
                self.retire(self.advance_epoch())

    def _submit_once(self, body):
        fns, dev = self._fns, self.device
        with self._lock:
            cmd = allocate_command_buffer(fns, dev, self._command_pool())
        fence = ffi.new("VkFence *")
        try:
            begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
            check("vkBeginCommandBuffer", fns.vkBeginCommandBuffer(cmd, begin))
            body(cmd)
            check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
            check("vkCreateFence", fns.vkCreateFence(dev, new("VkFenceCreateInfo"), ffi.NULL, fence))
            cmds = ffi.new("VkCommandBuffer[1]", [cmd])
            submit = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds)
            with self._queue_lock:
                check("vkQueueSubmit", fns.vkQueueSubmit(self.queue, 1, submit, fence[0]))
            res = fns.vkWaitForFences(dev, 1, fence, vk.VK_TRUE, 2**63 - 1)
            if res != vk.VK_SUCCESS:
                # Never free a command buffer or fence the GPU may still use:
                # drain the queue first (it returns at once on a lost device).
                with self._queue_lock:
                    fns.vkQueueWaitIdle(self.queue)
                check("vkWaitForFences", res)
        finally:
            if fence[0] != ffi.NULL:
                fns.vkDestroyFence(dev, fence[0], ffi.NULL)
            with self._lock:
                fns.vkFreeCommandBuffers(dev, self._pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))

