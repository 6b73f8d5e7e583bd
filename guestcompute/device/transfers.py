"""Moving bytes between host memory and guest buffers.

Host-visible memory (lavapipe, integrated GPUs, resizable BAR) is a plain
memcpy. Otherwise a staging buffer is copied on the context's queue in a
one-time command buffer — only from ``ctx.tensor`` / ``t.numpy()`` /
``ctx.run`` (and image reads, writes and first layouts) called while no
recording is open on the calling thread. Nothing
here submits while one is (``submit_and_wait`` raises RecordingError): an
upload made then waits in ``pending_uploads`` and that recording records it
before its next work; for an adopted context without a queue, the next
recording on any thread records it at its start. A new guest image is
UNDEFINED until its first layout is set, the same way (``init_image``).
The recorders record what waits (recording/recorder.py); this module only
keeps the lists.

Host buffers (``ctx.import_buffer``) are read back with vkCmdCopyBuffer only
when the host declared TRANSFER_SRC in their ``usage``; otherwise a compute
copy moves the view into a guest tensor first, since STORAGE_BUFFER is the
one usage every imported buffer has. They are never written from host
memory: the host owns their contents (it writes its own buffer, or records
``rec.copy(guest_tensor, out=view)``), so TRANSFER_DST is never needed.
"""
from __future__ import annotations

import threading

import vulkan as vk
from vulkan import ffi

from ..errors import RecordingError, UnsupportedError, check
from ..vk import sync
from ..vk.commands import allocate_command_buffer, create_command_pool
from ..vk.memory import STAGING_USAGE
from ..vk.structs import new


class Transfers:
    """Byte moves between host memory and one device's buffers, and the
    one-time submissions they (and ``ctx.run``) use.

    An imported buffer without TRANSFER_SRC cannot be copied out with
    vkCmdCopyBuffer (``needs_compute_copy``): the context, the layer that has
    the ops, reads it through a compute copy (``Context.read_bytes``).
    """

    def __init__(self, device):
        self.device = device
        self._lock = threading.RLock()          # the pending list and the pool's allocations
        self.submit_lock = threading.RLock()    # one submission at a time; close() waits on it
        self._depth = 0
        self._pool = None
        self.pending_uploads: list = []         # PendingUploads, see write()
        # Guest Images made without a queue outside a recording: the next
        # recording moves them to GENERAL at its start.
        self.pending_image_inits: list = []

    # -- host -> device ------------------------------------------------------------
    def write(self, buf, offset: int, data: bytes) -> None:
        dev = self.device
        offset += buf.window_offset
        if buf.alloc is None:
            raise UnsupportedError("write() into an imported buffer: the host owns its contents; write "
                                   "your buffer yourself, or record rec.copy(guest_tensor, out=view)")
        if buf.alloc.mapped is not None:
            buf.alloc.mapped[offset:offset + len(data)] = data
            dev.memory.flush(buf.alloc)
            return
        self._upload(buf, data, new("VkBufferCopy", srcOffset=0, dstOffset=offset, size=len(data)),
                     buf.hazard_keys, image=False)

    def _upload(self, target, data: bytes, region, keys, image: bool) -> None:
        """Copy ``data`` through a staging buffer into ``target`` (a Buffer,
        ``region`` a VkBufferCopy; or a guest Image, ``region`` a
        VkBufferImageCopy): on the queue now, or — while a recording is open
        on this thread, or without a queue — left in ``pending_uploads``."""
        dev = self.device
        staging = dev.suballocator.create(len(data), STAGING_USAGE, host_visible=True)
        staging.mapped[0:len(data)] = data
        upload = PendingUpload(None, staging, target, region, keys, image)
        recording = dev.recording_here()
        if recording or dev.queue is None:
            # No submission: the recording open on this thread records the
            # copy before its next work (without one, the next recording does
            # at its start); the staging buffer retires with its epoch.
            upload.thread = threading.get_ident() if recording else None
            with self._lock:
                self.pending_uploads.append(upload)
            return
        try:
            self.submit_and_wait(lambda cmd: self._copy_uploads(cmd, [upload]))
        finally:
            dev.suballocator.release(staging)

    def take_uploads(self, thread: int, shared: bool) -> list:
        """Remove and return the PendingUploads a recording on ``thread``
        records now: those made while it was open and, when ``shared`` (the
        recording's start), those waiting for any recording. The recorder
        then calls :meth:`uploads_recorded`."""
        with self._lock:
            taken, kept = [], []
            for u in self.pending_uploads:
                (taken if u.thread == thread or (shared and u.thread is None) else kept).append(u)
            self.pending_uploads[:] = kept      # the same list: recorders watch it
        return taken

    def share_uploads(self, thread: int) -> None:
        """Uploads made in ``thread``'s program recording, with no other
        recording open there, wait for the next recording on any thread (a
        program's secondary cannot copy them: every replay would)."""
        with self._lock:
            for u in self.pending_uploads:
                if u.thread == thread:
                    u.thread = None

    def uploads_recorded(self, uploads) -> None:
        """``uploads`` (from :meth:`take_uploads`) were recorded in the
        current epoch: their staging buffers go when it retires."""
        dev = self.device
        for u in uploads:
            dev.epochs.retire_later(dev.epochs.current, lambda staging=u.staging: dev.suballocator.release(staging))

    # -- guest images ------------------------------------------------------------
    def init_image(self, img) -> None:
        """A new guest image is UNDEFINED until a command buffer moves it to
        GENERAL, where it stays: one submitted now on the context's queue;
        while a recording is open on this thread, the first command buffer
        that uses it (that recording, a program's replay, a transfer);
        without a queue, the next recording at its start."""
        img.pending_init = True
        dev = self.device
        if dev.recording_here():
            return
        if dev.queue is None:
            with self._lock:
                self.pending_image_inits.append(img)
            return
        self.init_images_now([img])

    def init_images_now(self, images) -> None:
        """Set the first layout of those of ``images`` still UNDEFINED in a
        submission now, when there is a queue and no recording is open on
        this thread (else they keep waiting for the first command buffer
        that uses them). A program does this for the images its ``fn`` made,
        so that whichever command buffer replays it first may run first."""
        dev = self.device
        if dev.queue is None or dev.recording_here():
            return
        fresh = [img for img in images if self.take_image_init(img)]
        if not fresh:
            return
        transitions = sync.image_barriers([sync.first_layout_transition(img) for img in fresh])
        self.submit_and_wait(lambda cmd: self.device.fns.vkCmdPipelineBarrier(
            cmd, sync.TOP_OF_PIPE, sync.GUEST_STAGES, 0, 0, ffi.NULL, 0, ffi.NULL, len(fresh), transitions))

    def take_image_init(self, img) -> bool:
        """Claim ``img``'s first layout for the command buffer being
        recorded: True, once, while the image is still UNDEFINED."""
        with self._lock:
            if not img.pending_init:
                return False
            img.pending_init = False
            self.pending_image_inits[:] = [i for i in self.pending_image_inits if i is not img]
        return True

    def take_image_inits(self) -> list:
        """Claim every image waiting for the next recording's start."""
        with self._lock:
            images = [img for img in self.pending_image_inits if img.pending_init]
            self.pending_image_inits.clear()
            for img in images:
                img.pending_init = False
        return images

    def write_image(self, img, mip: int, layer: int, data: bytes) -> None:
        """Copy ``data`` (tightly packed texels) into (mip, layer) of a guest
        image: on the queue, or recorded as :meth:`write` records uploads."""
        self._upload(img, data, _image_region(img, mip, layer), (img.hazard_key(mip, layer),), image=True)

    def read_image(self, img, mip: int, layer: int) -> bytes:
        """The texels of (mip, layer) of a guest image, tightly packed."""
        w, h = img.mip_extent(mip)
        region = _image_region(img, mip, layer)
        src = vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL

        def copy(cmd, staging):
            # (asked here, after any waiting upload into the image claimed it)
            old = self._current_layout(img)
            self._transition(cmd, img, sync.EARLIER_GUEST_STAGES, sync.GUEST_WRITES, sync.TRANSFER,
                             sync.TRANSFER_READ, old, src)
            self.device.fns.vkCmdCopyImageToBuffer(cmd, img.handle, src, staging, 1, region)
            self._transition(cmd, img, sync.TRANSFER, 0, sync.GUEST_STAGES, sync.GUEST_ACCESS, src,
                             sync.GUEST_LAYOUT)
        return self._download(w * h * img.format.texel_bytes, copy)

    def _current_layout(self, img) -> int:
        """The layout a one-time copy finds ``img`` in (claiming its first
        layout when no command buffer set it yet)."""
        return sync.UNDEFINED if self.take_image_init(img) else sync.GUEST_LAYOUT

    def drop_pending_uploads(self) -> None:
        """Teardown: free the staging buffers of uploads never recorded."""
        for u in self.pending_uploads:
            self.device.suballocator.release(u.staging)
        self.pending_uploads.clear()

    # -- device -> host ------------------------------------------------------------
    def read(self, buf, offset: int, size: int) -> bytes:
        dev = self.device
        offset += buf.window_offset
        if size <= 0:
            return b""
        if buf.alloc is not None and buf.alloc.mapped is not None:
            dev.memory.invalidate(buf.alloc)
            return bytes(buf.alloc.mapped[offset:offset + size])
        if dev.queue is None:
            raise UnsupportedError("reading this tensor needs a staging copy: pass queue= to Context.adopt")
        if self.needs_compute_copy(buf):
            raise UnsupportedError("this imported buffer lacks TRANSFER_SRC: read it through its tensor "
                                   "(t.numpy()), which copies it with a compute shader first")
        region = new("VkBufferCopy", srcOffset=offset, dstOffset=0, size=size)
        src_stages = sync.EARLIER_GUEST_STAGES
        if buf.host_access is not None:
            src_stages |= buf.host_access.stages

        def copy(cmd, staging):
            self._barrier(cmd, src_stages, sync.GUEST_WRITES, sync.TRANSFER, sync.TRANSFER_READ)
            dev.fns.vkCmdCopyBuffer(cmd, buf.handle, staging, 1, region)
        return self._download(size, copy)

    @staticmethod
    def needs_compute_copy(buf) -> bool:
        """A host's buffer whose usage lacks TRANSFER_SRC: only a compute
        shader can copy it out."""
        return buf.alloc is None and not (buf.usage or 0) & vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT

    def _download(self, size: int, copy) -> bytes:
        """``copy(cmd, staging_buffer)`` records a copy into a host-visible
        staging buffer of ``size`` bytes; submit, wait, return its bytes."""
        dev = self.device
        staging = dev.suballocator.create(size, STAGING_USAGE, host_visible=True)
        # Uploads waiting for the next recording (those a program's fn made)
        # go first, so a read sees every write made before it.
        waiting = self.take_uploads(None, shared=True) if not dev.recording_here() else []

        def body(cmd):
            self._copy_uploads(cmd, waiting)
            copy(cmd, staging.buffer)
            self._barrier(cmd, sync.TRANSFER, sync.TRANSFER_WRITE, sync.HOST, sync.HOST_READ)
        try:
            self.submit_and_wait(body)
            dev.memory.invalidate(staging)
            return bytes(staging.mapped[0:size])
        except BaseException:
            with self._lock:            # not copied: they still wait for a recording
                self.pending_uploads[:0] = waiting
            waiting = []
            raise
        finally:
            dev.suballocator.release(staging)
            for u in waiting:
                dev.suballocator.release(u.staging)

    def _copy_uploads(self, cmd, uploads) -> None:
        """Record ``uploads`` (PendingUploads) into a one-time command
        buffer, each after a barrier (two may write the same bytes)."""
        dev = self.device
        for u in uploads:
            if not u.image:
                self._barrier(cmd, sync.EARLIER_GUEST_STAGES, sync.GUEST_WRITES, sync.TRANSFER, sync.TRANSFER_WRITE)
                dev.fns.vkCmdCopyBuffer(cmd, u.staging.buffer, u.target.handle, 1, u.region)
                continue
            img, dst = u.target, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL
            self._transition(cmd, img, sync.EARLIER_GUEST_STAGES, sync.GUEST_WRITES, sync.TRANSFER,
                             sync.TRANSFER_WRITE, self._current_layout(img), dst)
            dev.fns.vkCmdCopyBufferToImage(cmd, u.staging.buffer, img.handle, dst, 1, u.region)
            self._transition(cmd, img, sync.TRANSFER, sync.TRANSFER_WRITE, sync.GUEST_STAGES, sync.GUEST_ACCESS,
                             dst, sync.GUEST_LAYOUT)

    # -- one-time submissions ------------------------------------------------------
    def _barrier(self, cmd, src_stage, src_access, dst_stage, dst_access) -> None:
        bar = new("VkMemoryBarrier", srcAccessMask=src_access, dstAccessMask=dst_access)
        self.device.fns.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)

    def _transition(self, cmd, img, src_stage, src_access, dst_stage, dst_access, old, new_layout) -> None:
        t = sync.image_barriers([sync.whole_image_transition(img, old, new_layout, src_access, dst_access)])
        self.device.fns.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, ffi.NULL, 0, ffi.NULL, 1, t)

    def _command_pool(self):
        if self._pool is None:
            dev = self.device
            self._pool = create_command_pool(dev.fns, dev.handle, dev.queue_family_index,
                                             vk.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT)
        return self._pool

    def submit_and_wait(self, body) -> None:
        """Record ``body(cmd)`` into a one-time command buffer, submit, wait.

        RecordingError while a recording is open on the calling thread. One
        at a time: the transient pool is externally synchronized. Only a
        standalone context retires its epoch here, and only at the outermost
        level: an adopted context's epochs belong to the host, whose own
        frames may still be in flight."""
        dev = self.device
        if dev.recording_here():
            # The host's queue is the host's while it records: a submission
            # here would race its own (queues need external synchronization)
            # and stall its frame on our fence.
            raise RecordingError("guestcompute submits nothing while a recording is open on this thread (a "
                                 "`with ctx.record(cmd)` block, a program's fn, ctx.submit's fn): call "
                                 "ctx.run, t.numpy() and img.numpy() after the block")
        if dev.queue is None:
            raise UnsupportedError("this context has no queue; pass queue= to Context.adopt, or record "
                                   "into your own command buffer with ctx.record(cmd)")
        with self.submit_lock:
            self._depth += 1
            try:
                self._submit_once(body)
            finally:
                self._depth -= 1
            if dev.standalone and self._depth == 0:
                dev.epochs.retire()        # what it recorded and everything before (never an open recording)

    def _submit_once(self, body) -> None:
        dev = self.device
        fns, handle = dev.fns, dev.handle
        with self._lock:
            cmd = allocate_command_buffer(fns, handle, self._command_pool())
        fence = ffi.new("VkFence *")
        try:
            begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
            check("vkBeginCommandBuffer", fns.vkBeginCommandBuffer(cmd, begin))
            body(cmd)
            check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
            check("vkCreateFence", fns.vkCreateFence(handle, new("VkFenceCreateInfo"), ffi.NULL, fence))
            cmds = ffi.new("VkCommandBuffer[1]", [cmd])
            submit = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds)
            with dev.queue_lock:
                check("vkQueueSubmit", fns.vkQueueSubmit(dev.queue, 1, submit, fence[0]))
            res = fns.vkWaitForFences(handle, 1, fence, vk.VK_TRUE, 2**63 - 1)
            if res != vk.VK_SUCCESS:
                # Never free a command buffer or fence the GPU may still use:
                # drain the queue first (it returns at once on a lost device).
                with dev.queue_lock:
                    fns.vkQueueWaitIdle(dev.queue)
                check("vkWaitForFences", res)
        finally:
            if fence[0] != ffi.NULL:
                fns.vkDestroyFence(handle, fence[0], ffi.NULL)
            with self._lock:
                fns.vkFreeCommandBuffers(handle, self._pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))

    def destroy(self) -> None:
        if self._pool is not None:
            self.device.fns.vkDestroyCommandPool(self.device.handle, self._pool, ffi.NULL)
            self._pool = None


class PendingUpload:
    """A copy from ``staging`` waiting for a recording: into a Buffer
    (``region`` a VkBufferCopy) or a guest Image (``image``: a
    VkBufferImageCopy). ``thread``: the thread whose open recording records it, or
    None for the next recording on any thread; ``keys``: the hazard keys it
    writes."""
    __slots__ = ("thread", "staging", "target", "region", "keys", "image")

    def __init__(self, thread, staging, target, region, keys, image: bool):
        self.thread, self.staging, self.target, self.region, self.keys = thread, staging, target, region, keys
        self.image = image


def _image_region(img, mip: int, layer: int):
    w, h = img.mip_extent(mip)
    return new("VkBufferImageCopy", bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
               imageSubresource=dict(aspectMask=img.format.aspect, mipLevel=mip, baseArrayLayer=layer,
                                     layerCount=1),
               imageOffset=dict(x=0, y=0, z=0), imageExtent=dict(width=w, height=h, depth=1))
