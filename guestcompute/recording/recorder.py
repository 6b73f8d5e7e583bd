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

What reaches the command buffer, and which barriers, is the business of
the recorder's :class:`~guestcompute.recording.encoder.Encoder`
(``rec.encoder``, package-internal): this class is the user's face.

Targets: the same Recorder records into the host's command buffer
(``encoder.HOST_BUFFER``), into a program's secondary (``program.py``) and into
the guest's own hand-off submission (``handoff.py``). What differs is the
*target*: whether the recording waits for the host's declared accesses,
which exit barrier it records, which queue family it runs on, and whether
something captures what the recording touches.

Thread-safety: a Recorder belongs to one thread; different threads may
record with the same context into different command buffers at once.
``ctx.close()`` waits for open recorders to leave their ``with`` block.
"""
from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING

from vulkan import ffi

from ..dtypes import check_storage_only
from ..errors import (ContextClosedError, InvalidArgumentError, PastBindingRangeError, RecordingError,
                      UnknownOperationError, UnsupportedError)
from ..host.declarations import as_host_access
from ..image import image_states_for
from ..ops.base import Dispatch, check_tensor
from ..ops.windows import plan_in_windows
from ..tensor import Tensor
from ..vk import sync
from .encoder import HOST_BUFFER, Encoder, Target
from .op_methods import OPS, OpMethods, close_matches, op_docstring, op_signature
from .timing import DEFAULT_COLOR, RecorderTiming, label

class Recorder(OpMethods):
    """Use as ``with ctx.record(cmd) as rec: rec.add(a, b, out=c)``.

    Every registered operation is a method (``rec.add``, ``rec.fill``...);
    ``dir(rec)`` lists them, ``help(rec.add)`` shows its signature.

    Public attributes: ``ctx``, ``command_buffer``, ``target``,
    ``dispatches`` and ``barriers`` (counts so far); ``encoder`` (the
    :class:`~guestcompute.recording.encoder.Encoder`) for collaborators
    (programs, timing, hand-off).

    Thread-safety: every method, ops included, is for the one thread that
    records into this recorder's command buffer; other threads use recorders
    of their own (see ``Context.record``).
    """

    def __init__(self, ctx, cmd, target: Target = HOST_BUFFER):
        self.ctx = ctx
        self.target = target
        # The command encoder (package-internal): programs, timing and
        # hand-off drive it through ``rec.encoder``.
        self.encoder = encoder = Encoder(ctx, cmd, target)
        self._record_all = encoder.record_all
        self._cmd_key = int(ffi.cast("uintptr_t", cmd))   # the handle's value: one open recorder per buffer
        self._used = False             # entered once already: a recorder is single-use
        device = self._device = ctx.device
        self._calls = ctx.call_memo.get
        self._call_hits = 0            # calls the call memo answered, added up at the end
        self._memory = device.memory
        self._thread = None            # the thread of the `with` block
        self._active = False
        self._capture = target.capture
        self._timing = None           # timing.RecorderTiming, made by the first rec.timing()
        # The debug-label writer when every op is labelled (ctx.op_labels and
        # VK_EXT_debug_utils), else None.
        self.op_labels = ctx.debug_labels if ctx.op_labels and ctx.debug_labels.enabled else None

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
        self._device.recorder_opened(self._cmd_key)
        self._thread = self.encoder.thread = threading.get_ident()
        self._used = True
        self._active = True
        return self

    def __exit__(self, exc_type, exc, tb):
        # The exit barrier is recorded even when the block raised (or the
        # context is closing): whatever was recorded before the error must
        # still hand the host's buffers back.
        try:
            self.encoder.finish()
        finally:
            if self._call_hits:
                self.ctx.call_memo.count_hits(self._call_hits)
                self._call_hits = 0
            self._active = False
            device = self._device
            device.recorder_closed(self._cmd_key)
            if not self.target.enters and device.transfers.pending_uploads and not device.recording_here():
                # Uploads made in a program's fn, with no recording left open
                # on this thread to record them: the next recording does.
                device.transfers.share_uploads(self._thread)
        return False

    @property
    def command_buffer(self):
        """The command buffer this recorder records into. Reading it first
        records every command still waiting in the recorder's batch, so
        commands a caller then records there land after the guest work
        before them: collaborators (timing, labels, programs, uploads) and
        host hooks take the buffer from here."""
        return self.encoder.command_buffer

    def flush(self) -> None:
        """Record the guest commands still waiting into the command buffer
        now. Ops recorded in one ``with`` block reach the buffer in batches
        (at the block's end, and before a host hook, a program replay, a
        timing scope or a label); call this before recording commands of your
        own directly into the buffer inside the block, or use ``rec.host``."""
        self.encoder.flush()

    @property
    def dispatches(self) -> int:
        """Dispatches recorded so far."""
        return self.encoder.dispatches

    @property
    def barriers(self) -> int:
        """Pipeline barriers recorded so far."""
        return self.encoder.barriers

    @property
    def active(self) -> bool:
        """True inside the ``with`` block."""
        return self._active

    def check_active(self) -> None:
        """Raise unless this recorder may record now (inside its block, context open)."""
        if not self._active:
            raise RecordingError("record ops inside `with ctx.record(cmd) as rec:`")
        if self.ctx.closed:
            raise ContextClosedError("the context was closed while recording; finish this recording "
                                     "with a new context")

    if not TYPE_CHECKING:   # hidden from type checkers, so that they report a misspelt op
        def __getattr__(self, name):
            # Only reached for names that are neither methods nor attributes.
            hint = ""
            if not name.startswith("_"):
                near = close_matches(name)
                hint = f"; did you mean {', '.join(near)}?" if near else "; dir(rec) lists the operations"
            raise UnknownOperationError(f"Recorder has no operation {name!r}{hint}")

    # -- ops -------------------------------------------------------------------
    def record_op(self, name: str, planner, args: tuple, kwargs: dict):
        """Plan op ``name`` with ``planner(ctx, *args, **kwargs)`` and record
        its dispatches; returns the op's value. What every op method does
        (a planner of your own can be recorded the same way)."""
        return _op_method(name, planner)(self, *args, **kwargs)

    def dispatch(self, dispatches) -> None:
        """Record already-planned :class:`Dispatch` objects (ops use this).
        Thread-safety: the recorder's own thread only."""
        self.check_active()
        if isinstance(dispatches, Dispatch):
            self._record_all((dispatches,))
            return
        if not isinstance(dispatches, (list, tuple)) or not all(isinstance(d, Dispatch) for d in dispatches):
            raise InvalidArgumentError("rec.dispatch takes a Dispatch or a list of them "
                                       "(build them with an op's planner, e.g. ops.elementwise.plan_map)")
        self._record_all(dispatches)

    def _plan(self, name: str, planner, key, args: tuple, kwargs: dict):
        """Run op ``name``'s planner (the path of a call not remembered);
        remember the call when the op says its result is reusable."""
        memory = self._memory
        past_range = memory.past_range_count
        swaps = self.ctx.swaps
        check_storage_only(name, args, kwargs)
        try:
            result = planner(self.ctx, *args, **kwargs)
        except TypeError:
            _check_call(name, planner, self.ctx, args, kwargs)
            raise
        except PastBindingRangeError:
            # A tensor one binding cannot reach: plan the op in windows (or refuse).
            return plan_in_windows(self.ctx, name, planner, args, kwargs)
        if memory.past_range_count != past_range and _made_past_range(result, past_range):
            # It made itself an output one binding cannot reach: plan it
            # in windows instead (the unrecorded output is dropped).
            return plan_in_windows(self.ctx, name, planner, args, kwargs)
        if result.reusable:
            self.ctx.call_memo.put(key, args, kwargs, result, swaps)
        return result

    def using(self, image, *, layout=None, exit_layout=None, host_access=None, exit_access=None) -> None:
        """Declare, for this recording only, the layout (and host accesses)
        an imported image is in now and the one to leave it in — for hosts
        whose layout changes from frame to frame. Call it before the
        recording's first use of the image; what is not given keeps the
        import's declaration (``exit_layout`` defaults to ``layout``)."""
        self.check_active()
        entry, exit_state = image_states_for(image, layout, exit_layout, host_access, exit_access, "rec.using")
        if image.ctx is not self.ctx:
            raise InvalidArgumentError("rec.using: the image belongs to another context")
        state = self.encoder.state
        if image.handle_key in state.images:
            raise RecordingError("rec.using: this recording already used the image; declare its layouts "
                                 "before the first op that touches it")
        state.image_states[image.handle_key] = (entry, exit_state)

    # -- GPU timestamps and debug labels ---------------------------------------------
    def timing(self, name: str):
        """``with rec.timing("name"):`` — GPU time of the work recorded inside,
        from timestamps written into this command buffer. Read it after the
        GPU ran it: ``rec.timings`` or ``ctx.timings()`` (see timing.py)."""
        self.check_active()
        if not self.target.times:
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
        self.check_active()
        replay = getattr(program, "replay_into", None)
        if not callable(replay):
            raise InvalidArgumentError(f"rec.execute takes a Program from ctx.program(fn), "
                                       f"got {type(program).__name__}")
        if not self.target.nests_programs:
            raise RecordingError("a program cannot execute another program (Vulkan 1.x secondaries do not "
                                 "nest); call the other program's function inside this one instead")
        replay(self, params)

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
        self.check_active()
        if not callable(callback):
            raise InvalidArgumentError(f"rec.host needs a callable taking the command buffer, "
                                       f"got {type(callback).__name__}")
        acc = as_host_access(access)
        if stages is not None:
            acc = as_host_access((stages, acc.access))     # the same checks for the override
        hook_stages = acc.stages
        ctx = self.ctx
        reads = [check_tensor(ctx, t, "rec.host reads") for t in _as_list(reads)]
        writes = [check_tensor(ctx, t, "rec.host writes") for t in _as_list(writes)]
        rbufs = {t.buffer.uid: t.buffer for t in reads}
        wbufs = {t.buffer.uid: t.buffer for t in writes}
        if self._capture is not None:
            self._capture.values(reads, writes, None)
        declared = bool(rbufs or wbufs)
        if declared:
            r_keys = frozenset(k for b in rbufs.values() for k in b.hazard_keys)
            w_keys = frozenset(k for b in wbufs.values() for k in b.hazard_keys)
            shared = [(b, b.uid in wbufs) for b in {**rbufs, **wbufs}.values() if b.host_access is not None]
            # The tracker's barriers cover only guest stages: a hook running in
            # others is ordered after everything recorded so far.
            self.encoder.sync_before_work(r_keys, w_keys, shared, hook_stages, acc.access,
                                  force=bool(hook_stages & ~sync.GUEST_STAGES))
        try:
            return callback(self.command_buffer)
        finally:
            # Whether the hook returned or raised, it may have bound compute
            # state and recorded some of what it declared: forget the bindings
            # and assume (conservatively) it did all it declared, so the next
            # op rebinds and the barriers after it still wait for it.
            self.encoder.forget_bound_state()
            if declared:
                write_access = (acc.access & sync.WRITE_ACCESS) or sync.MEMORY_WRITE
                mapped = any(b.alloc is not None and b.alloc.mapped is not None for b in wbufs.values())
                self.encoder.after_work(r_keys, w_keys, hook_stages, write_access, mapped,
                                tuple(rbufs.values()) + tuple(wbufs.values()))

def _op_method(name: str, planner):
    """Recorder.<name>: plan with ``planner``, then record its dispatches;
    with the planner's signature and docstring. One closure per op, so the
    hot path makes no extra call on the way to the planner.

    A call that repeats an earlier one (the same argument objects, no tensor
    resized since, see ops/memo.CallMemo) skips the planner, and a single
    dispatch whose plan is still current is appended with no lookups
    (``Encoder.record_all``)."""
    def method(self, *args, **kwargs):
        if not self._active or self._device.closed:
            self.check_active()
        # The call memo's key: the op's name, the ids of the positional
        # arguments, then each keyword's name and its value's id. Spelt out
        # for one or two positional arguments and one keyword, the usual
        # calls: unpacking map(id, ...) costs about 0.15 µs more per call.
        n = len(args)
        key = (name, id(args[0]), id(args[1])) if n == 2 else (name, id(args[0])) if n == 1 else (name, *map(id, args))
        if kwargs:
            if len(kwargs) == 1:
                for k, v in kwargs.items():
                    key += (k, id(v))
            else:
                key += (*kwargs, *map(id, kwargs.values()))
        entry = self._calls(key)
        if entry is not None and entry[0] == self.ctx.swaps:
            self._call_hits += 1
            dispatches, where = entry[1], entry[2]
            value = None if where is None else args[where] if where.__class__ is int else kwargs[where]
        else:
            result = self._plan(name, planner, key, args, kwargs)
            dispatches, value = result.dispatches, result.value
        if dispatches:
            if self.op_labels is not None:
                labels = self.op_labels
                labels.begin(self.command_buffer, labels.info(name, DEFAULT_COLOR))
                try:
                    self._record_all(dispatches)
                finally:
                    labels.end(self.command_buffer)
            else:
                self._record_all(dispatches)
        if self._capture is not None:
            self._capture.values(args, kwargs, value)
        return value
    method.__name__ = name
    method.__qualname__ = f"Recorder.{name}"
    method.__doc__ = op_docstring(planner)
    method.__signature__ = op_signature(planner)
    return method


for _name, _planner in OPS.items():
    setattr(Recorder, _name, _op_method(_name, _planner))
del _name, _planner


def _made_past_range(result, since: int) -> bool:
    """Does one of ``result``'s dispatches bind a buffer made since
    ``since`` that is larger than one binding reaches? (The kernel would see
    only its first maxStorageBufferRange bytes; the rest would stay
    unwritten without an error from anyone.)"""
    for d in result.dispatches:
        for b in d.bindings:
            alloc = getattr(b, "alloc", None)
            if alloc is not None and getattr(alloc, "past_range", 0) > since:
                return True
    return False


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
    if isinstance(tensors, Tensor):
        return [tensors]
    if not isinstance(tensors, (list, tuple, set, frozenset)):
        raise InvalidArgumentError(f"expected a tensor or a list of tensors, got {type(tensors).__name__}")
    return list(tensors)
