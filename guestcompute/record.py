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
records are pipeline barriers outside any render pass. Two calls widen the
list on purpose: ``rec.execute(program)`` replays a secondary command
buffer, after which *all* of the host buffer's bound state is undefined (a
Vulkan rule), and ``rec.host(callback)`` runs the host's own commands.

Lifecycle: a Recorder is single-use. Its ``with`` block is the only time it
records; entering it again raises RecordingError, because by then the host
may have submitted, freed or reused the command buffer it was made for. At
most one recorder is open on a command buffer at a time (a second one would
keep its own hazard state and miss barriers against the first).

Hazards are tracked per memory (``Buffer.hazard_keys``: a guest buffer, or
a byte range of a host VkBuffer), not per import, so imports of overlapping
ranges of one host VkBuffer are ordered and disjoint ones are not.

Thread-safety: a Recorder belongs to one thread; different threads may
record with the same context into different command buffers at once.
``ctx.close()`` waits for open recorders to leave their ``with`` block.
"""
from __future__ import annotations

import inspect

import vulkan as vk
from vulkan import ffi

from .errors import InvalidArgumentError, RecordingError, UnknownOperationError, UnsupportedError
from .ops.base import Dispatch, registered_ops
from .timing import DEFAULT_COLOR, RecorderTiming, label, labels_of
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
# Every guest barrier's second scope: all stages guest work itself uses
# (dispatches, parameter updates and staging copies, indirect-argument
# reads), so the hazard tracker may start over after any barrier.
_GUEST_STAGES = _COMPUTE | _TRANSFER | _INDIRECT_STAGE
_GUEST_ACCESS = _SHADER_RW | vk.VK_ACCESS_TRANSFER_READ_BIT | _TRANSFER_WRITE | _INDIRECT_READ
_WRITE_ACCESS = (_SHADER_WRITE | _TRANSFER_WRITE | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT
                 | vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT | vk.VK_ACCESS_HOST_WRITE_BIT
                 | vk.VK_ACCESS_MEMORY_WRITE_BIT)


def _close_matches(name: str, names) -> list:
    """Up to three of ``names`` resembling ``name``, for "did you mean". difflib
    is imported only here, and may fail there: it imports heapq, which an
    application's own heapq.py can shadow; the error then just has no hint."""
    try:
        import difflib
        return difflib.get_close_matches(name, names, n=3)
    except (ImportError, AttributeError):
        return []


class Recorder:
    """Use as ``with ctx.record(cmd) as rec: rec.add(a, b, out=c)``.

    Every registered operation is a method (``rec.add``, ``rec.fill``...);
    ``dir(rec)`` lists them.

    Thread-safety: every method, ops included, is for the one thread that
    records into this recorder's command buffer; other threads use recorders
    of their own (see ``Context.record``).
    """

    def __init__(self, ctx, cmd):
        self._ctx = ctx
        self._cmd = cmd
        self._cmd_key = int(ffi.cast("uintptr_t", cmd))   # the handle's value: one open recorder per buffer
        self._used = False             # entered once already: a recorder is single-use
        self._fns = ctx._fns
        self._push_desc = ctx._descriptors.push
        self._count_hit = ctx._pipelines.count_hit
        self._active = False
        self._hazards = HazardTracker()
        self._entered = False
        # uid -> [Buffer, written?]: per import, not per memory, since each
        # import declares its own host access; the exit barrier ORs them all.
        self._imports: dict = {}
        self._wrote_mapped = False
        self._bound_pipeline = None
        self._bound_desc = None
        self._bound_layout = None
        self._covered_stages = 0       # source stages/access the entry barriers covered so far
        self._covered_access = 0
        self._barrier = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER})
        self.dispatches = 0
        self.barriers = 0
        # Stages / write accesses of guest work other than dispatches (program
        # replays, parameter updates, host hooks) since entry: the exit barrier
        # and barriers before hooks must wait for them too.
        self._extra_stages = 0
        self._extra_access = 0
        self._capture = None          # set while recording a program: sees every op's tensors
        self._timing = None           # timing.RecorderTiming, made by the first rec.timing()
        self._op_labels = labels_of(ctx) if ctx.op_labels and labels_of(ctx).enabled else None

    # -- scope -------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        if self._active:
            raise RecordingError("this recorder is already open; make a new one with ctx.record(cmd)")
        if self._used:
            raise RecordingError("this recorder was already used: a recorder is single-use, since the "
                                 "command buffer it was made for may have been submitted, freed or reused "
                                 "since; make a new one with ctx.record(cmd) for each recording")
        # Raises ContextClosedError once close() began, RecordingError when
        # another recorder is open on this command buffer.
        self._ctx._recorder_opened(self._cmd_key)
        self._used = True
        self._active = True
        return self

    def __exit__(self, exc_type, exc, tb):
        # The exit barrier is recorded even when the block raised (or the
        # context is closing): whatever was recorded before the error must
        # still hand the host's buffers back.
        try:
            self._finish()
        finally:
            self._active = False
            self._ctx._recorder_closed(self._cmd_key)
        return False

    def _check_active(self):
        if not self._active:
            raise RecordingError("record ops inside `with ctx.record(cmd) as rec:`")
        if self._ctx.closed:
            from .errors import ContextClosedError
            raise ContextClosedError("the context was closed while recording; finish this recording "
                                     "with a new context")

    # -- ops as methods ------------------------------------------------------
    def __getattr__(self, name):
        fn = registered_ops().get(name)
        if fn is None:
            hint = ""
            if not name.startswith("_"):
                near = _close_matches(name, registered_ops())
                hint = f"; did you mean {', '.join(near)}?" if near else "; dir(rec) lists the operations"
            raise UnknownOperationError(f"Recorder has no operation {name!r}{hint}")
        method = _as_method(name, fn)
        setattr(Recorder, name, method)
        return getattr(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(registered_ops()))

    def dispatch(self, dispatches) -> None:
        """Record already-planned :class:`Dispatch` objects (ops use this).
        Thread-safety: the recorder's own thread only."""
        self._check_active()
        if isinstance(dispatches, Dispatch):
            self._record_all((dispatches,))
            return
        if not isinstance(dispatches, (list, tuple)) or not all(isinstance(d, Dispatch) for d in dispatches):
            raise InvalidArgumentError("rec.dispatch takes a Dispatch or a list of them "
                                       "(build them with an op's planner, e.g. ops.elementwise.plan_map)")
        self._record_all(dispatches)

    def _record_all(self, dispatches) -> None:
        # Every pipeline is resolved (maybe created) before the first command
        # is recorded, so a failure leaves the host's command buffer untouched.
        ctx = self._ctx
        if len(dispatches) == 1:          # the common case, without the lists
            d = dispatches[0]
            plan = d.__dict__.get("_plan")
            if (plan is None or plan.ctx is not ctx or plan.spec is not d.spec
                    or plan.buffer_tuple is not d.buffers or plan.indirect is not d.indirect):
                plan = _plan_for(ctx, d)
            else:
                self._count_hit()
            self._record(d, plan)
            return
        plans = [_plan_for(ctx, d) for d in dispatches]
        for d, plan in zip(dispatches, plans):
            self._record(d, plan)

    # -- the hot path -----------------------------------------------------------
    def _record(self, d: Dispatch, plan: "_Plan") -> None:
        fns, cmd = self._fns, self._cmd
        epoch = self._ctx._epoch
        src_stage = src_access = 0
        if not self._entered:
            # Guest work recorded earlier (previous frames, other recordings,
            # uploads) is ordered before this recording's first dispatch.
            src_stage, src_access = _COMPUTE | _TRANSFER, _SHADER_WRITE | _TRANSFER_WRITE
            self._entered = True
            self._ctx._flush_pending_uploads(self)
        for b in plan.buffers:
            b.last_epoch = epoch
        if plan.writes_mapped:
            self._wrote_mapped = True
        if plan.imports:
            imports = self._imports
            for b, w in plan.imports:
                seen = imports.get(b.uid)
                if seen is None:
                    ha = b.host_access
                    # One global entry barrier covers every buffer the host
                    # touched with those stages: later imports with the same
                    # declared access need no barrier of their own.
                    if ha.stages & ~self._covered_stages or ha.access & ~self._covered_access:
                        src_stage |= ha.stages
                        src_access |= ha.access
                    imports[b.uid] = seen = [b, False]
                if w:
                    seen[1] = True
        reads, writes = plan.reads, plan.writes
        hz = self._hazards
        if hz.needs_barrier(reads, writes):
            # hz.stages / hz.access add what non-dispatch work (hooks, updates) did
            src_stage |= _COMPUTE | hz.stages
            src_access |= _SHADER_WRITE | hz.access
        if src_stage:
            self._emit_barrier(src_stage, src_access, _GUEST_STAGES, _GUEST_ACCESS)
            self._covered_stages |= src_stage
            self._covered_access |= src_access
            hz.after_barrier()
        hz.touch(reads, writes)

        pipe = plan.pipe
        if pipe is not self._bound_pipeline:
            fns.vkCmdBindPipeline(cmd, _BIND, pipe.handle)
            self._bound_pipeline = pipe
        desc = plan.desc
        if desc is not self._bound_desc or pipe.layout is not self._bound_layout:
            if self._push_desc:
                fns.vkCmdPushDescriptorSetKHR(cmd, _BIND, pipe.layout, 0, desc.count, desc.writes)
            else:
                fns.vkCmdBindDescriptorSets(cmd, _BIND, pipe.layout, 0, 1, desc.pset, 0, ffi.NULL)
            self._bound_desc = desc
            self._bound_layout = pipe.layout
        push = d.push
        if push:
            fns.vkCmdPushConstants(cmd, pipe.layout, _PUSH_STAGE, 0, len(push), push)
        if d.indirect is not None:
            fns.vkCmdDispatchIndirect(cmd, d.indirect[0].handle, d.indirect[1])
        else:
            gx, gy, gz = d.groups
            fns.vkCmdDispatch(cmd, gx, gy, gz)
        self.dispatches += 1

    # -- GPU timestamps and debug labels ---------------------------------------------
    def timing(self, name: str):
        """``with rec.timing("name"):`` — GPU time of the work recorded inside,
        from timestamps written into this command buffer. Read it after the
        GPU ran it: ``rec.timings`` or ``ctx.timings()`` (see timing.py)."""
        self._check_active()
        if self._capture is not None:
            raise UnsupportedError("rec.timing() inside a program: every replay would write the same "
                                   "queries; time the rec.execute(program) call instead")
        if self._timing is None:
            self._timing = RecorderTiming(self)
        return self._timing.scope(name)

    @property
    def timings(self) -> dict:
        """``{name: milliseconds}`` of this recording's timing scopes (a name
        used several times adds up); raises RecordingError until the GPU has
        run the recording."""
        return {} if self._timing is None else self._timing.results()

    def label(self, name: str, color=DEFAULT_COLOR):
        """``with rec.label("name"):`` — a VK_EXT_debug_utils label around the
        work inside, for capture tools; records nothing unless the host
        adopted with ``debug_utils=True``."""
        return label(self, name, color)

    # -- programs and host hooks -------------------------------------------------
    def execute(self, program, params: dict = None) -> None:
        """Replay ``program`` (from ``ctx.program``) here with one
        vkCmdExecuteCommands, re-recording it first if a tensor it captured was
        reallocated since. ``params`` (a dict) sets its per-frame parameters,
        written with vkCmdUpdateBuffer just before the replay; fields left out
        keep their last value. Entry and exit barriers against the host's
        declared accesses happen as for ops recorded directly.

        Like any secondary command buffer, the replay leaves *all* state bound
        in the host's command buffer undefined, graphics state included:
        rebind after it."""
        self._check_active()
        from .program import Program
        if not isinstance(program, Program):
            raise InvalidArgumentError(f"rec.execute takes a Program from ctx.program(fn), "
                                       f"got {type(program).__name__}")
        program._execute_in(self, params)

    def host(self, callback, *, reads=(), writes=(), access="transfer", stages: int = None):
        """Call ``callback(cmd)`` right here so the host records its own
        commands (a copy, a fill, an image transition) between guest ops;
        returns what it returns. Inside a program ``cmd`` is the program's
        secondary command buffer and ``callback`` runs again whenever the
        program re-records.

        ``reads`` / ``writes``: the tensors the host's commands touch;
        ``access``: how they touch them (a preset such as ``"transfer"`` or
        ``"compute"``, a HostAccess or a ``(stages, access)`` pair; ``stages``
        overrides its stages). Guest work before the hook that conflicts with
        what it declares is made visible to it by a barrier, and the hook's
        writes to guest work after it. Commands on buffers the hook does not
        declare are the host's to order. The callback may bind compute state:
        the recorder rebinds what it needs after it. ``access`` / ``stages``
        are checked like an import's ``host_access`` (InvalidArgumentError,
        before anything is recorded). A callback that raises is taken to have
        recorded all it declared: the exception propagates, and later ops
        still rebind and get their barriers."""
        self._check_active()
        from .host import as_host_access
        from .ops.base import check_tensor
        if not callable(callback):
            raise InvalidArgumentError(f"rec.host needs a callable taking the command buffer, "
                                       f"got {type(callback).__name__}")
        acc = as_host_access(access)
        if stages is not None:
            acc = as_host_access((stages, acc.access))     # the same checks for the override
        hook_stages = acc.stages
        ctx = self._ctx
        reads = [check_tensor(ctx, t, "rec.host reads") for t in _as_list(reads)]
        writes = [check_tensor(ctx, t, "rec.host writes") for t in _as_list(writes)]
        rbufs = {t.buffer.uid: t.buffer for t in reads}
        wbufs = {t.buffer.uid: t.buffer for t in writes}
        if self._capture is not None:
            self._capture(reads, writes, None)
        declared = bool(rbufs or wbufs)
        if declared:
            r_keys = frozenset(k for b in rbufs.values() for k in b.hazard_keys)
            w_keys = frozenset(k for b in wbufs.values() for k in b.hazard_keys)
            shared = [(b, b.uid in wbufs) for b in {**rbufs, **wbufs}.values() if b.host_access is not None]
            # The tracker's barriers cover only guest stages: a hook running in
            # others is ordered after everything recorded so far.
            self._sync_before(r_keys, w_keys, shared, hook_stages, acc.access,
                              force=bool(hook_stages & ~_GUEST_STAGES))
        try:
            return callback(self._cmd)
        finally:
            # Whether the hook returned or raised, it may have bound compute
            # state and recorded some of what it declared: forget the bindings
            # and assume (conservatively) it did all it declared, so the next
            # op rebinds and the barriers after it still wait for it.
            self._bound_pipeline = self._bound_desc = self._bound_layout = None
            if declared:
                write_access = (acc.access & _WRITE_ACCESS) or vk.VK_ACCESS_MEMORY_WRITE_BIT
                mapped = any(b.alloc is not None and b.alloc.mapped is not None for b in wbufs.values())
                self._after(r_keys, w_keys, hook_stages, write_access, mapped,
                            tuple(rbufs.values()) + tuple(wbufs.values()))

    def _sync_before(self, reads, writes, shared, dst_stage, dst_access, force=False) -> None:
        """The barrier before guest work that is not a dispatch (a program
        replay, a parameter update, a host hook) reading ``reads`` and writing
        ``writes`` (sets of ``Buffer.hazard_keys``) in ``dst_stage``. ``shared``:
        (Buffer, written) pairs of host-shared buffers among them. ``force``:
        order everything recorded so far before it."""
        src_stage = src_access = 0
        if not self._entered:
            src_stage, src_access = _COMPUTE | _TRANSFER, _SHADER_WRITE | _TRANSFER_WRITE
            self._entered = True
            self._ctx._flush_pending_uploads(self)
        for b, w in shared:
            stage, access = self._note_import(b, w)
            src_stage |= stage
            src_access |= access
        hz = self._hazards
        if force:
            if self.dispatches or self._extra_stages:
                src_stage |= _COMPUTE | self._extra_stages
                src_access |= _SHADER_WRITE | self._extra_access
        elif hz.needs_barrier(reads, writes):
            src_stage |= _COMPUTE | hz.stages
            src_access |= _SHADER_WRITE | hz.access
        if src_stage:
            self._emit_barrier(src_stage, src_access, dst_stage | _GUEST_STAGES, dst_access | _GUEST_ACCESS)
            self._covered_stages |= src_stage
            self._covered_access |= src_access
            hz.after_barrier()

    def _note_import(self, b, written: bool) -> tuple:
        """Register a host-shared buffer for the exit barrier; returns the
        (stages, access) the entry barrier must wait for (none if covered)."""
        seen = self._imports.get(b.uid)
        stage = access = 0
        if seen is None:
            ha = b.host_access
            if ha.stages & ~self._covered_stages or ha.access & ~self._covered_access:
                stage, access = ha.stages, ha.access
            self._imports[b.uid] = seen = [b, False]
        if written:
            seen[1] = True
        return stage, access

    def _after(self, reads, writes, stages, write_access, wrote_mapped=False, buffers=()) -> None:
        """Account for non-dispatch work just recorded (see _sync_before)."""
        self._hazards.touch(reads, writes, stages, write_access)
        self._extra_stages |= stages
        if writes:
            self._extra_access |= write_access
        if wrote_mapped:
            self._wrote_mapped = True
        epoch = self._ctx._epoch
        for b in buffers:
            b.last_epoch = epoch

    def _emit_barrier(self, src_stage, src_access, dst_stage, dst_access) -> None:
        bar = self._barrier
        bar.srcAccessMask = src_access
        bar.dstAccessMask = dst_access
        self._fns.vkCmdPipelineBarrier(self._cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL,
                                       0, ffi.NULL)
        self.barriers += 1

    def _finish(self) -> None:
        """Exit barrier: guest writes → the host's declared accesses."""
        extra_stages, extra_access = self._extra_stages, self._extra_access
        self._extra_stages = self._extra_access = 0
        if not self._imports and not self._wrote_mapped:
            return
        src_access = 0
        dst_stage = dst_access = 0
        for b, written in self._imports.values():
            dst_stage |= b.host_access.stages
            dst_access |= b.host_access.access
            if written:
                src_access = _SHADER_WRITE | extra_access
        if self._wrote_mapped:
            src_access = _SHADER_WRITE | extra_access
            dst_stage |= _HOST
            dst_access |= vk.VK_ACCESS_HOST_READ_BIT
        self._emit_barrier(_COMPUTE | extra_stages, src_access, dst_stage, dst_access)
        self._imports.clear()
        self._wrote_mapped = False
        self._entered = False
        self._covered_stages = self._covered_access = 0
        self._hazards.after_barrier()


def _as_method(name, fn):
    def method(self, *args, **kwargs):
        if not self._active or self._ctx.closed:
            self._check_active()
        try:
            result = fn(self._ctx, *args, **kwargs)
        except TypeError:
            _check_call(name, fn, self._ctx, args, kwargs)
            raise
        if result.dispatches:
            labels = self._op_labels
            if labels is None:
                self._record_all(result.dispatches)
            else:
                labels.begin(self._cmd, labels.info(name, DEFAULT_COLOR))
                try:
                    self._record_all(result.dispatches)
                finally:
                    labels.end(self._cmd)
        if self._capture is not None:
            self._capture(args, kwargs, result.value)
        return result.value
    method.__name__ = name
    method.__qualname__ = f"Recorder.{name}"
    method.__doc__ = (fn.__doc__ or "").rstrip() + ("\n\n    Thread-safety: the recorder's own thread "
                                                     "only; tensors may be shared between threads.")
    return method


def _check_call(name, fn, ctx, args, kwargs) -> None:
    """Turn a TypeError from calling op ``name`` with arguments that do not
    fit its signature into an InvalidArgumentError; any other TypeError (a
    DTypeError, or a bug) propagates unchanged."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(ctx, *args, **kwargs)
    except TypeError as e:
        params = str(sig).replace("(ctx, ", "(", 1)
        raise InvalidArgumentError(f"rec.{name}{params}: {e}; see help(rec.{name})") from None


def _as_list(tensors) -> list:
    """One tensor or a sequence of them."""
    from .tensor import Tensor
    if isinstance(tensors, Tensor):
        return [tensors]
    if not isinstance(tensors, (list, tuple, set, frozenset)):
        raise InvalidArgumentError(f"expected a tensor or a list of tensors, got {type(tensors).__name__}")
    return list(tensors)


class _Plan:
    """What recording one :class:`Dispatch` needs beyond its push bytes and
    groups: the pipeline, the hazard keys it reads and writes (for barriers),
    the buffers whose last epoch it bumps, imported buffers, and its
    descriptor entry. Built once per Dispatch object and kept on it, so an
    op that returns the same Dispatch again (a memoized plan) records with
    no lookups at all."""
    __slots__ = ("ctx", "spec", "buffer_tuple", "indirect", "pipe", "reads", "writes", "buffers", "imports",
                 "writes_mapped", "desc")

    def __init__(self, ctx, d: Dispatch):
        pipe = ctx._pipeline_for(d)
        reads, writes, imports = [], [], []
        writes_mapped = False
        for b, (r, w) in zip(d.buffers, pipe.bindings):
            if r:
                reads.extend(b.hazard_keys)
            if w:
                writes.extend(b.hazard_keys)
                if b.alloc is not None and b.alloc.mapped is not None:
                    writes_mapped = True
            if b.host_access is not None:
                imports.append((b, w))
        buffers = list(d.buffers)
        if d.indirect is not None:
            reads.extend(d.indirect[0].hazard_keys)
            buffers.append(d.indirect[0])
        self.ctx = ctx
        self.spec = d.spec
        self.buffer_tuple = d.buffers
        self.indirect = d.indirect
        self.pipe = pipe
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.buffers = tuple(buffers)
        self.imports = tuple(imports)
        self.writes_mapped = writes_mapped
        self.desc = ctx._descriptors.get(pipe.set_layout, d.buffers)


def _plan_for(ctx, d: Dispatch) -> _Plan:
    # A kept plan is valid while the Dispatch still names the same spec and
    # buffers (its Buffers are alive, so their uids and descriptors are too).
    plan = d.__dict__.get("_plan")
    if (plan is not None and plan.ctx is ctx and plan.spec is d.spec and plan.buffer_tuple is d.buffers
            and plan.indirect is d.indirect):
        ctx._pipelines.count_hit()
        return plan
    plan = _Plan(ctx, d)
    if type(d.buffers) is tuple and (d.indirect is None or type(d.indirect) is tuple):
        d._plan = plan
    return plan
