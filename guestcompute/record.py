"""Recorder: records guest operations into a command buffer the host is
recording.

Per op: validate (the op function) → resolve pipelines (host-side work,
maybe creating one) → then, and only then, Vulkan commands: at most one
barrier, bind pipeline (skipped when already bound), push descriptors or
bind a cached set (skipped when unchanged), push constants, dispatch.

What recording touches in the host's command buffer — the *clobber list*:
the compute pipeline binding, compute descriptor set 0 (push descriptors or
a bound set), compute push constants. It never touches graphics state, never
begins or ends a render pass, never submits, waits or compiles. Barriers it
records are pipeline barriers outside any render pass.

Thread-safety: a Recorder belongs to one thread; different threads may
record with the same context into different command buffers at once.
"""
from __future__ import annotations

import vulkan as vk
from vulkan import ffi

from .errors import RecordingError
from .ops.base import Dispatch, registered_ops
from .vk.hazards import HazardTracker

_BIND = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_HOST = vk.VK_PIPELINE_STAGE_HOST_BIT
_SHADER_READ = vk.VK_ACCESS_SHADER_READ_BIT
_SHADER_WRITE = vk.VK_ACCESS_SHADER_WRITE_BIT
_SHADER_RW = _SHADER_READ | _SHADER_WRITE
_TRANSFER_WRITE = vk.VK_ACCESS_TRANSFER_WRITE_BIT
_INDIRECT_STAGE = vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT
_INDIRECT_READ = vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT
_PUSH_STAGE = vk.VK_SHADER_STAGE_COMPUTE_BIT


class Recorder:
    """Use as ``with ctx.record(cmd) as rec: rec.add(a, b, out=c)``.

    Every registered operation is a method (``rec.add``, ``rec.fill``...);
    ``dir(rec)`` lists them.
    """

    def __init__(self, ctx, cmd):
        self._ctx = ctx
        self._cmd = cmd
        self._fns = ctx._fns
        self._push_desc = ctx._descriptors.push
        self._active = False
        self._hazards = HazardTracker()
        self._entered = False
        self._imports: dict = {}          # uid -> [Buffer, written?]
        self._wrote_mapped = False
        self._bound_pipeline = None
        self._bound_desc = None
        self._barrier = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER})
        self.dispatches = 0
        self.barriers = 0

    # -- scope -------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        self._ctx._check_open()
        if self._active:
            raise RecordingError("this recorder is already open")
        self._active = True
        return self

    def __exit__(self, exc_type, exc, tb):
        # The exit barrier is recorded even when the block raised: whatever was
        # recorded before the error must still hand the host's buffers back.
        try:
            self._finish()
        finally:
            self._active = False
        return False

    def _check_active(self):
        if not self._active:
            raise RecordingError("record ops inside `with ctx.record(cmd) as rec:`")
        if self._ctx.closed:
            from .errors import ContextClosedError
            raise ContextClosedError("the context was closed")

    # -- ops as methods ------------------------------------------------------
    def __getattr__(self, name):
        fn = registered_ops().get(name)
        if fn is None:
            raise AttributeError(f"Recorder has no operation {name!r}")
        method = _as_method(name, fn)
        setattr(Recorder, name, method)
        return getattr(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(registered_ops()))

    def dispatch(self, dispatches) -> None:
        """Record already-planned :class:`Dispatch` objects (ops use this)."""
        self._check_active()
        if isinstance(dispatches, Dispatch):
            dispatches = [dispatches]
        pipes = [self._ctx._pipeline_for(d) for d in dispatches]
        for d, p in zip(dispatches, pipes):
            self._record(d, p)

    # -- the hot path -----------------------------------------------------------
    def _record(self, d: Dispatch, pipe) -> None:
        fns, cmd = self._fns, self._cmd
        epoch = self._ctx._epoch
        reads, writes = [], []
        src_stage = src_access = 0
        if not self._entered:
            # Guest work recorded earlier (previous frames, other recordings,
            # uploads) is ordered before this recording's first dispatch.
            src_stage, src_access = _COMPUTE | _TRANSFER, _SHADER_WRITE | _TRANSFER_WRITE
            self._entered = True
            self._ctx._flush_pending_uploads(self)
        imports = self._imports
        for b, (r, w) in zip(d.buffers, pipe.bindings):
            uid = b.uid
            if r:
                reads.append(uid)
            if w:
                writes.append(uid)
                if b.alloc is not None and b.alloc.mapped is not None:
                    self._wrote_mapped = True
            b.last_epoch = epoch
            if b.host_access is not None:
                seen = imports.get(uid)
                if seen is None:
                    src_stage |= b.host_access.stages
                    src_access |= b.host_access.access
                    imports[uid] = seen = [b, False]
                if w:
                    seen[1] = True
        if d.indirect is not None:
            reads.append(d.indirect[0].uid)
            d.indirect[0].last_epoch = epoch
        if self._hazards.needs_barrier(reads, writes):
            src_stage |= _COMPUTE
            src_access |= _SHADER_WRITE
        if src_stage:
            dst_stage, dst_access = _COMPUTE, _SHADER_RW
            if d.indirect is not None:
                dst_stage |= _INDIRECT_STAGE
                dst_access |= _INDIRECT_READ
            self._emit_barrier(src_stage, src_access, dst_stage, dst_access)
            self._hazards.after_barrier()
        self._hazards.touch(reads, writes)

        if pipe is not self._bound_pipeline:
            fns.vkCmdBindPipeline(cmd, _BIND, pipe.handle)
            self._bound_pipeline = pipe
        desc = self._ctx._descriptors.get(pipe.set_layout, d.buffers)
        state = (pipe.layout, desc)
        if state != self._bound_desc:
            if self._push_desc:
                fns.vkCmdPushDescriptorSetKHR(cmd, _BIND, pipe.layout, 0, desc.count, desc.writes)
            else:
                fns.vkCmdBindDescriptorSets(cmd, _BIND, pipe.layout, 0, 1, desc.pset, 0, ffi.NULL)
            self._bound_desc = state
        if d.push:
            fns.vkCmdPushConstants(cmd, pipe.layout, _PUSH_STAGE, 0, len(d.push), d.push)
        if d.indirect is not None:
            fns.vkCmdDispatchIndirect(cmd, d.indirect[0].handle, d.indirect[1])
        else:
            gx, gy, gz = d.groups
            fns.vkCmdDispatch(cmd, gx, gy, gz)
        self.dispatches += 1

    def _emit_barrier(self, src_stage, src_access, dst_stage, dst_access) -> None:
        bar = self._barrier
        bar.srcAccessMask = src_access
        bar.dstAccessMask = dst_access
        self._fns.vkCmdPipelineBarrier(self._cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL,
                                       0, ffi.NULL)
        self.barriers += 1

    def _finish(self) -> None:
        """Exit barrier: guest writes → the host's declared accesses."""
        if not self._imports and not self._wrote_mapped:
            return
        src_access = 0
        dst_stage = dst_access = 0
        for b, written in self._imports.values():
            dst_stage |= b.host_access.stages
            dst_access |= b.host_access.access
            if written:
                src_access = _SHADER_WRITE
        if self._wrote_mapped:
            src_access = _SHADER_WRITE
            dst_stage |= _HOST
            dst_access |= vk.VK_ACCESS_HOST_READ_BIT
        self._emit_barrier(_COMPUTE, src_access, dst_stage, dst_access)
        self._imports.clear()
        self._wrote_mapped = False
        self._entered = False
        self._hazards.after_barrier()


def _as_method(name, fn):
    def method(self, *args, **kwargs):
        self._check_active()
        result = fn(self._ctx, *args, **kwargs)
        if result.dispatches:
            self.dispatch(result.dispatches)
        return result.value
    method.__name__ = name
    method.__qualname__ = f"Recorder.{name}"
    method.__doc__ = fn.__doc__
    return method
