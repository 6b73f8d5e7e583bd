"""Encoder: what one recording writes into its command buffer, and the
barrier state that decides it.

The :class:`~guestcompute.recording.recorder.Recorder` is the user's face
(op methods, hooks, programs, timing); each recorder owns one Encoder, which
is package-internal and does the encoding:

- the **hot path**: ``record_all`` resolves every dispatch's plan (maybe
  creating a pipeline) before anything is recorded, then ``record`` appends
  each dispatch's prebuilt command, which carries its hazard keys, after
  the entry barrier it needs (earlier guest work, imports, image layouts).
  The walker that records the batch decides each dispatch's hazard barrier
  itself (``vk/sync.HazardTracker``, or the C walker's twin of it);
- **barriers around guest work that is not a dispatch** (a program replay,
  a parameter update, a host hook, an upload): ``sync_before_work`` before
  it, ``after_work`` after it, ``emit_barrier`` for a barrier with image
  layout transitions, ``forget_bound_state`` after something else bound
  compute state;
- **entry work**: the uploads waiting for a recording and the first layouts
  of guest images made without a queue or during a recording
  (``device/transfers.py`` keeps the lists; only the encoder records them);
- the **exit barrier** (``finish``), which hands the host's buffers back.

Commands reach the command buffer in batches (``vk/command_stream.py``);
reading ``command_buffer`` first records what waits, so a collaborator's own
commands land in order.

Hazards are tracked per memory (``Buffer.hazard_keys``: a guest buffer, or
a byte range of a host VkBuffer; an image subresource), not per import, so
imports of overlapping ranges of one host VkBuffer are ordered and disjoint
ones are not.

Thread-safety: an Encoder belongs to its recorder's thread.
"""
from __future__ import annotations

import vulkan as vk
from vulkan import ffi

from ..errors import UnsupportedError
from ..vk import sync
from ..vk.command_stream import DispatchCommand
from .dispatch_plan import plan_for

_GUEST_STAGES, _GUEST_ACCESS = sync.GUEST_STAGES, sync.GUEST_ACCESS
_EMPTY = frozenset()
_TRANSFER_DST = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL      # the layout copies into an image are fastest in


class Target:
    """Where a recording goes, and what that changes (see the module notes).

    ``waits_for_host``: entry barriers wait for the host's declared
    accesses of imported buffers. ``enters``: the first command waits for
    earlier guest work; the recording records pending uploads and first
    image layouts (a program's replay does, not its capture). ``family``: the queue
    family the command buffer runs on (None: the adopted one).
    ``capture``: an object told about every dispatch, every non-dispatch
    piece of work and every op's arguments and results (programs), or None.
    ``nests_programs`` / ``times``: ``rec.execute`` and ``rec.timing`` work.
    """
    waits_for_host = True
    enters = True
    family = None
    capture = None
    nests_programs = True
    times = True
    kind = "the host's command buffer"

    def exit_masks(self, state: sync.BarrierState):
        """The exit barrier's masks, or None (see BarrierState.exit_masks)."""
        return state.exit_masks(to_host_accesses=True)


HOST_BUFFER = Target()


class Encoder:
    """The encoder of one recording into ``cmd`` (see the module notes).

    Public attributes for collaborators (programs, timing, hand-off):
    ``ctx``, ``target``, ``state`` (the
    :class:`~guestcompute.vk.sync.BarrierState`), ``dispatches`` and
    ``barriers`` (counts so far), ``thread`` (the recording thread's id,
    set when the recorder's block is entered).
    """

    def __init__(self, ctx, cmd, target: Target = HOST_BUFFER):
        self.ctx = ctx
        self.target = target
        self._cmd = cmd
        device = self._device = ctx.device
        self._fns = device.fns
        # Commands wait here and reach the command buffer in batches (see
        # vk/command_stream.py and the command_buffer property).
        self._barrier = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER})
        # The walker decides each dispatch's hazard barrier as it reaches it,
        # with this tracker (the C walker's own, or sync.HazardTracker): it is
        # current only after a flush, so everything here that reads or
        # changes it flushes first.
        tracker = device.interpreter.tracker()
        self._stream = device.interpreter.stream(cmd, self._barrier, tracker)
        self._append = self._stream.append
        self._epochs = device.epochs
        self._pipelines = device.pipelines
        self._hits = 0                 # pipeline-cache hits of kept plans, added up at the end
        # Uploads waiting for a recording (Transfers.pending_uploads, the
        # same list throughout); a program's capture leaves them to its replay.
        self._uploads = device.transfers.pending_uploads if target.enters else ()
        self.thread = None
        self.state = sync.BarrierState(entered=not target.enters, waits_for_host=target.waits_for_host,
                                       hazards=tracker)
        self._capture = target.capture
        self.dispatches = 0
        self._barriers = 0             # barriers the encoder recorded (the walker counts its own)

    @property
    def barriers(self) -> int:
        """Barriers recorded so far: the encoder's and, up to the last
        flush, those the walker added for hazards."""
        return self._barriers + self._stream.tracker.hazard_barriers

    @property
    def command_buffer(self):
        """The command buffer, after recording every command still waiting in the batch."""
        if self._stream.words:
            self._stream.flush()
        return self._cmd

    def flush(self) -> None:
        """Record the commands still waiting in the batch now."""
        self._stream.flush()

    def finish(self) -> None:
        """The recording's end: the uploads made after its last op, the exit
        barrier, and everything still waiting. Called even when the
        recorder's block raised: whatever was recorded before the error must
        still hand the host's buffers back."""
        try:
            if self._uploads:
                self._record_pending()
            self._stream.flush()           # the tracker is current (exit_masks resets it)
            masks = self.target.exit_masks(self.state)
            if masks is not None:
                src_stage, src_access, dst_stage, dst_access, transitions = masks
                if transitions or not self._stream.words:
                    self.emit_barrier(*masks)      # nothing to batch it with: record it now
                else:
                    self.queue_barrier(src_stage, src_access, dst_stage, dst_access)
        finally:
            try:
                self._stream.flush()
            finally:
                if self._hits:
                    self._pipelines.count_hit(self._hits)
                    self._hits = 0

    # -- the hot path -----------------------------------------------------------
    def record_all(self, dispatches) -> None:
        """Record planned Dispatches in order. Every pipeline is resolved
        (maybe created) before the first command is recorded, so a failure
        leaves the command buffer untouched."""
        ctx = self.ctx
        if len(dispatches) == 1:          # the common case, without the lists
            d = dispatches[0]
            plan = d.resolved
            # DispatchPlan.is_current_for(ctx, d), inlined for the repeated op;
            # a plan with images that need entry work takes the long way.
            if (plan is not None and plan.ctx is ctx and plan.spec is d.spec and plan.bindings is d.bindings
                    and plan.indirect is d.indirect and not plan.images
                    and (not plan.image_bindings or plan.images_current())):
                self._hits += 1
            else:
                plan = plan_for(ctx, d)
                if plan.images:
                    self._check_images((plan,))
            self.record(d, plan)
            return
        plans = [plan_for(ctx, d) for d in dispatches]
        self._check_images(plans)
        for d, plan in zip(dispatches, plans):
            self.record(d, plan)

    def record(self, d, plan) -> None:
        """Append one planned dispatch, after the barrier it needs."""
        state = self.state
        if self._uploads or not state.entered:
            self._record_pending()
        src_stage = src_access = 0
        if not state.entered:
            # Guest work recorded earlier (previous frames, other recordings,
            # uploads) is ordered before this recording's first dispatch.
            src_stage, src_access = sync.EARLIER_GUEST_STAGES, sync.EARLIER_GUEST_WRITES
            state.entered = True
        epoch = self._epochs.current
        if plan.epoch != epoch:        # its buffers are stamped once per epoch
            plan.epoch = epoch
            for b in plan.stamped:
                b.last_epoch = epoch
        if plan.writes_mapped:
            state.wrote_mapped = True
        if plan.imports:
            if plan.import_stages & ~state.covered_stages or plan.import_access & ~state.covered_access:
                for b, w in plan.imports:
                    # One global entry barrier covers every buffer the host
                    # touched with those stages: later imports with the same
                    # declared access need no barrier of their own.
                    stage, access = state.host_sources(b, w)
                    src_stage |= stage
                    src_access |= access
            else:       # covered already: registered when the exit barrier (or a capture) asks
                state.waiting_imports.append(plan)
        transitions = None
        if plan.images:
            src_stage, src_access, transitions = self._image_entry(plan.images, src_stage, src_access)
        if src_stage:
            # Entry work needs a barrier: it also waits for the guest work
            # tracked since the last one (covering), and the walker then
            # finds no hazard left for this dispatch. The dispatch's own
            # hazards the walker decides (HazardTracker.needs_barrier).
            if transitions:
                self._stream.flush()
                src_stage, src_access = state.covering_tracked(src_stage, src_access)
                self.emit_barrier(src_stage, src_access, _GUEST_STAGES, _GUEST_ACCESS, transitions)
                state.barrier_recorded(src_stage, src_access)
            else:
                self._stream.barrier(src_stage, _GUEST_STAGES, src_access, _GUEST_ACCESS, True)
                self._barriers += 1
                state.covered_stages |= src_stage
                state.covered_access |= src_access
        if self._capture is not None:
            self._capture.dispatch(d, plan)
        command = plan.command
        if command.push is not d.push or command.groups is not d.groups:
            # The Dispatch's push bytes or groups were replaced since the plan was made.
            command = plan.command = DispatchCommand(plan.pipe, plan.desc, d.push, d.groups, d.indirect,
                                                     plan.reads, plan.writes)
        self._append(command)
        self.dispatches += 1

    def _check_images(self, plans) -> None:
        """Before anything is recorded: a hand-off submission has no host
        layout to move an imported image from (its semaphores order it, its
        layouts are the host's), so it takes guest images only."""
        target = self.target
        if target.waits_for_host or target.capture is not None:
            return
        for plan in plans:
            if any(img.imported for img, _ in plan.images):
                raise UnsupportedError(f"an imported image in {target.kind}: its layout transitions belong in "
                                       "the host's command buffer; record the op with ctx.record(cmd), or "
                                       "copy into a guest image there first")

    def _image_entry(self, images, src_stage: int, src_access: int) -> tuple:
        """The entry part of a dispatch's images: a guest image still
        UNDEFINED gets its first layout now (Transfers.init_image; a
        program's capture leaves it to the replay, which sets it once: every
        replay would discard what the image holds); imported ones their move
        from the host's layout on first use (see BarrierState.host_image_sources)."""
        state, transitions, first = self.state, [], None
        for img, w in images:
            if img.pending_init and self.target.enters and self._device.transfers.take_image_init(img):
                first = first or []
                first.append(sync.first_layout_transition(img))
            if img.entry is None:
                continue
            stage, access, t = state.host_image_sources(img, w)
            src_stage |= stage
            src_access |= access
            if t is not None:
                transitions.append(t)
        if first:
            # A barrier of their own: it waits for nothing (the images hold
            # nothing yet), so it leaves the hazard tracker as it is.
            self.emit_barrier(sync.TOP_OF_PIPE, 0, _GUEST_STAGES, _GUEST_ACCESS, first)
        return src_stage, src_access, transitions

    # -- barriers around guest work that is not a dispatch ------------------------
    def sync_before_work(self, reads, writes, shared, dst_stage, dst_access, force=False, images=()) -> None:
        """The barrier before guest work that is not a dispatch (a program
        replay, a parameter update, a host hook) reading ``reads`` and writing
        ``writes`` (sets of ``Buffer.hazard_keys``) in ``dst_stage``. ``shared``:
        (Buffer, written) pairs of host-shared buffers among them; ``images``:
        (Image, written) pairs of the images it uses. ``force``: order
        everything recorded so far before it."""
        if self._uploads or not self.state.entered:
            self._record_pending()
        self._sync_before(reads, writes, shared, dst_stage, dst_access, force, images)

    def _sync_before(self, reads, writes, shared, dst_stage, dst_access, force=False, images=()) -> None:
        state = self.state
        self._stream.flush()          # the tracker is current once the walker walked what waits
        if self._capture is not None:
            self._capture.sync(dst_stage, dst_access)
        src_stage = src_access = 0
        if not state.entered:
            src_stage, src_access = sync.EARLIER_GUEST_STAGES, sync.EARLIER_GUEST_WRITES
            state.entered = True
        for b, w in shared:
            stage, access = state.host_sources(b, w)
            src_stage |= stage
            src_access |= access
        transitions = None
        if images:
            src_stage, src_access, transitions = self._image_entry(images, src_stage, src_access)
        stage, access = state.sources_before(reads, writes, force, bool(self.dispatches))
        src_stage, src_access = state.covering_tracked(src_stage | stage, src_access | access)
        if src_stage:
            self.emit_barrier(src_stage, src_access, dst_stage | sync.GUEST_STAGES,
                              dst_access | sync.GUEST_ACCESS, transitions)
            state.barrier_recorded(src_stage, src_access)

    def _record_pending(self) -> None:
        """Record what waits for a recording (see device/transfers.py) before
        the work that comes next: the uploads made on this thread while this
        recording was open and, at its start, those waiting for any
        recording and the first layouts of images made without a queue. The
        copies are guest transfer work, ordered by the hazard tracker."""
        transfers = self._device.transfers
        entering = not self.state.entered
        if entering and transfers.pending_image_inits and self.target.enters:
            images = transfers.take_image_inits()
            if images:
                self.emit_barrier(sync.TOP_OF_PIPE, 0, _GUEST_STAGES, _GUEST_ACCESS,
                                  [sync.first_layout_transition(img) for img in images])
        uploads = transfers.take_uploads(self.thread, shared=entering) if self._uploads else None
        if not uploads:
            return
        keys = frozenset(k for u in uploads for k in u.keys)
        self._sync_before(_EMPTY, keys, (), sync.TRANSFER, sync.TRANSFER_WRITE)
        images = {u.target.uid: u.target for u in uploads if u.image}
        if images:
            # Copies into an image write it in TRANSFER_DST_OPTIMAL: each goes
            # there (from UNDEFINED when nothing set its layout yet) and back.
            self.emit_barrier(sync.EARLIER_GUEST_STAGES, sync.EARLIER_GUEST_WRITES, sync.TRANSFER,
                              sync.TRANSFER_WRITE,
                              [sync.whole_image_transition(img, sync.UNDEFINED if transfers.take_image_init(img)
                                                           else sync.GUEST_LAYOUT, _TRANSFER_DST,
                                                           sync.GUEST_WRITES, sync.TRANSFER_WRITE)
                               for img in images.values()])
        cmd, fns = self.command_buffer, self._fns
        for u in uploads:
            if u.image:
                fns.vkCmdCopyBufferToImage(cmd, u.staging.buffer, u.target.handle, _TRANSFER_DST, 1, u.region)
            else:
                fns.vkCmdCopyBuffer(cmd, u.staging.buffer, u.target.handle, 1, u.region)
        if images:
            self.emit_barrier(sync.TRANSFER, sync.TRANSFER_WRITE, _GUEST_STAGES, _GUEST_ACCESS,
                              [sync.whole_image_transition(img, _TRANSFER_DST, sync.GUEST_LAYOUT, sync.TRANSFER_WRITE,
                                                           sync.IMAGE_GUEST_ACCESS) for img in images.values()])
        self.after_work(_EMPTY, keys, sync.TRANSFER, sync.TRANSFER_WRITE, buffers=tuple(u.target for u in uploads))
        transfers.uploads_recorded(uploads)

    def after_work(self, reads, writes, stages, write_access, wrote_mapped=False, buffers=()) -> None:
        """Account for non-dispatch work just recorded (see sync_before_work)."""
        if self._capture is not None:
            self._capture.work(reads, writes, stages, write_access, buffers)
        self.state.after_work(reads, writes, stages, write_access, wrote_mapped)
        epoch = self._epochs.current
        for b in buffers:
            b.last_epoch = epoch

    def forget_bound_state(self) -> None:
        """Something else bound compute state (a hook, a replay): rebind before the next dispatch."""
        stream = self._stream
        if stream.words:
            stream.flush()
        stream.forget_bound()

    def queue_barrier(self, src_stage, src_access, dst_stage, dst_access) -> None:
        """A global memory barrier into the batch, after the commands waiting there."""
        self._stream.barrier(src_stage, dst_stage, src_access, dst_access)
        self._barriers += 1

    def emit_barrier(self, src_stage, src_access, dst_stage, dst_access, transitions=None) -> None:
        """Record one global memory barrier into this recorder's command
        buffer now (after the commands waiting in the batch), with the image
        layout ``transitions`` (vk/sync.ImageTransition) in the same
        vkCmdPipelineBarrier. For collaborators that record commands of their
        own right after it."""
        if self._stream.words:
            self._stream.flush()
        bar = self._barrier
        bar.srcAccessMask = src_access
        bar.dstAccessMask = dst_access
        if transitions:
            images = sync.image_barriers(transitions)
            self._fns.vkCmdPipelineBarrier(self._cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL,
                                           len(transitions), images)
        else:
            self._fns.vkCmdPipelineBarrier(self._cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL,
                                           0, ffi.NULL)
        self._barriers += 1
