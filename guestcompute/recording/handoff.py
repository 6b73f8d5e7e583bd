"""Semaphore hand-off mode: the guest records its work into a command buffer
of its own and submits it, ordered against the host's submissions by
semaphores, instead of recording into the host's command buffer.

The same ``fn(rec)`` runs in both modes, so the two can be compared:

    with ctx.record(host_cmd) as rec: fn(rec)            # injected
    ctx.submit(fn, wait=[(sem, 1, stages)], signal=[(sem, 2)])   # hand-off

- Timeline semaphores (a value per wait / signal) when the host enabled
  them (VkTimelineSemaphoreSubmitInfo); binary semaphores (value None)
  always. With timelines enabled every submission also signals a
  guest-owned timeline semaphore (``Submission.semaphore`` / ``.value``) the
  host can wait on GPU-side.
- Command buffers come from a pool per thread and queue family and are
  reused once their fence signalled, so nothing grows with the frame count.
- A separate queue family (an async-compute queue the host gives with
  ``queue=``, ``queue_family_index=``) works too. Buffers used on both
  families with exclusive sharing need queue-family ownership transfers:
  name them in ``shared=``; the guest's submission acquires them first and
  releases them back last, and the host records the matching halves with
  :func:`release_to_guest` (before) and :func:`acquire_from_guest` (after)
  in its own command buffers. Both halves come from :func:`ownership_barrier`
  so their buffer ranges always match, as Vulkan requires.

Inside a submission the semaphore waits order the guest after the host's
accesses, so the recorder emits no barriers against the host's declared
stages (some, such as vertex input, would not even exist on a compute-only
queue); writes to host-mapped memory still get their barrier to the host.

Thread-safety: ``submit`` may be called from several threads (each records
into its own thread's pool); a Submission may be waited on from any thread.
"""
from __future__ import annotations

import collections
import threading

import vulkan as vk
from vulkan import ffi

from ..host.declarations import as_handle, as_host_access
from ..errors import InvalidArgumentError, UnsupportedError, check
from ..device.epochs import semaphore_value, timeline_functions
from ..ops.base import check_tensor
from ..vk import sync
from ..vk.commands import allocate_command_buffer, create_command_pool
from ..vk.structs import array, new
from .encoder import Target
from .recorder import Recorder


class Submission:
    """Guest work submitted by ``ctx.submit``. ``result``: what ``fn``
    returned; ``epoch``: the epoch it was recorded in; ``semaphore`` /
    ``value``: the guest timeline point it signals (None without timeline
    semaphores). ``fence`` is the guest's own, recycled (and set to None)
    once the submission is seen complete: wait with :meth:`wait` /
    :meth:`done` or ``ctx.retire_when(submission=...)``, not on the fence."""
    __slots__ = ("result", "epoch", "semaphore", "value", "_owner", "_pending")

    def __init__(self, owner: "Submitter", pending: "PendingWork", result, epoch: int):
        self.result, self.epoch = result, epoch
        self.semaphore = self.value = None
        self._owner, self._pending = owner, pending

    @property
    def fence(self):
        """The VkFence it signals; None once it was seen complete and recycled."""
        return self._pending.fence

    def done(self) -> bool:
        """Whether the GPU finished it (polls, never blocks)."""
        return self._owner.finished(self._pending)

    def wait(self, timeout: float = None) -> bool:
        """Block until it finished (or ``timeout`` seconds passed); True when done."""
        return self._owner.wait(self._pending, timeout)


class PendingWork:
    """What the submitter keeps of one submission until it is recycled: its
    command buffer and pool, its fence, whether it was seen finished and how
    many threads wait on the fence (which is not recycled meanwhile)."""
    __slots__ = ("command_buffer", "pool", "fence", "finished", "waiters")

    def __init__(self, command_buffer, pool: "_ThreadPool", fence):
        self.command_buffer, self.pool, self.fence = command_buffer, pool, fence
        self.finished = False
        self.waiters = 0


class _ThreadPool:
    """One thread's command pool for one queue family, and its command
    buffers free for reuse (their submissions completed)."""
    __slots__ = ("handle", "family", "free", "thread")

    def __init__(self, handle, family):
        self.handle = handle
        self.family = family
        self.free = []
        self.thread = threading.get_ident()


class HandoffTarget(Target):
    """The guest's own submission: the semaphore waits order it after the
    host, so no barrier waits for the host's declared stages and the exit
    barrier only hands host-mapped writes to the host."""
    waits_for_host = False
    kind = "a hand-off submission"

    def __init__(self, family: int):
        self.family = family          # programs can only replay on the adopted family

    def exit_masks(self, state):
        return state.exit_masks(to_host_accesses=False)


class Submitter:
    """The context's hand-off submissions (:meth:`submit`) and their state:
    per-thread command pools, fences, the guest timeline semaphore and the
    submissions in flight."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._lock = threading.RLock()
        self._local = threading.local()
        self._pools: list = []
        self._fences: list = []            # reset, free for reuse
        self._all_fences: list = []
        self._in_flight = collections.deque()
        self.live_command_buffers = 0
        self.timeline = timeline_functions(ctx.device.fns, ctx.caps) is not None
        self.semaphore = None
        self._value = 0
        self.stats = {"submissions": 0}

    # -- resources ----------------------------------------------------------

    @property
    def fence_count(self) -> int:
        """Fences made so far (reused once their submission finished)."""
        return len(self._all_fences)

    @property
    def in_flight_count(self) -> int:
        """Submissions not yet seen finished."""
        return len(self._in_flight)

    def _pool(self, family: int) -> _ThreadPool:
        pools = getattr(self._local, "pools", None)
        if pools is None:
            pools = self._local.pools = {}
        pool = pools.get(family)
        if pool is None:
            ctx = self.ctx
            handle = create_command_pool(ctx.device.fns, ctx.device.handle, family,
                                         vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT
                                         | vk.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT)
            pool = pools[family] = _ThreadPool(handle, family)
            with self._lock:
                self._pools.append(pool)
        return pool

    def _command_buffer(self, pool: _ThreadPool):
        if pool.free:
            return pool.free.pop()
        ctx = self.ctx
        cmd = allocate_command_buffer(ctx.device.fns, ctx.device.handle, pool.handle)
        with self._lock:
            self.live_command_buffers += 1
        return cmd

    def _fence(self):
        with self._lock:
            if self._fences:
                return self._fences.pop()
        ctx = self.ctx
        out = ffi.new("VkFence *")
        check("vkCreateFence", ctx.device.fns.vkCreateFence(ctx.device.handle, new("VkFenceCreateInfo"), ffi.NULL, out))
        with self._lock:
            self._all_fences.append(out[0])
        return out[0]

    def _timeline_semaphore(self):
        if self.semaphore is None:
            ctx = self.ctx
            kind = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
            info = new("VkSemaphoreCreateInfo", pNext=kind)
            out = ffi.new("VkSemaphore *")
            check("vkCreateSemaphore", ctx.device.fns.vkCreateSemaphore(ctx.device.handle, info, ffi.NULL, out))
            self.semaphore = out[0]
        return self.semaphore

    # -- submitting --------------------------------------------------------------
    def submit(self, fn, *, queue=None, wait=(), signal=(), queue_family_index: int = None, shared=(),
               queue_lock=None) -> Submission:
        """Record ``fn(rec)`` into a guest-owned command buffer and submit it
        (what :func:`submit` documents)."""
        ctx = self.ctx
        ctx.device.check_open()
        if not callable(fn):
            raise InvalidArgumentError(f"ctx.submit needs a callable fn(rec), got {type(fn).__name__}")
        family, queue = self._queue_and_family(queue, queue_family_index)
        waits, signals = _parse_waits(wait), _parse_signals(signal)
        _check_not_waiting_on_itself(waits, signals)
        if any(v is not None for _, v, _ in waits) or any(v is not None for _, v in signals):
            if not self.timeline:
                raise UnsupportedError("timeline semaphore values need timeline semaphores enabled by the host; "
                                       "pass None values for binary semaphores")
        cross = family != ctx.queue_family_index
        shared = list(shared) if cross else []
        if shared:
            shared = [check_tensor(ctx, t, "shared tensor") for t in shared]
        self.poll()

        pool = self._pool(family)
        cmd = self._command_buffer(pool)
        epoch = ctx.device.epochs.current
        result = self._record(fn, pool, cmd, family, shared)
        pending = PendingWork(cmd, pool, self._fence())
        submission = Submission(self, pending, result, epoch)
        self._queue_submit(queue, queue_lock or ctx.device.queue_lock, submission, pending, waits, signals)
        return submission

    def _queue_and_family(self, queue, queue_family_index):
        """(family, VkQueue) a submission goes to: the adopted ones unless given."""
        ctx = self.ctx
        family = ctx.queue_family_index if queue_family_index is None else queue_family_index
        if isinstance(family, bool) or not isinstance(family, int) or family < 0:
            raise InvalidArgumentError("queue_family_index must be a non-negative int")
        if queue is None:
            if family != ctx.queue_family_index:
                raise InvalidArgumentError("pass queue= for a queue family other than the adopted one")
            if ctx.queue is None:
                raise UnsupportedError("ctx.submit needs a queue: pass queue= here or to Context.adopt")
            queue = ctx.queue
        return family, as_handle(queue, "VkQueue", "queue")

    def _record(self, fn, pool: _ThreadPool, cmd, family: int, shared: list):
        """Record ``fn(rec)`` into ``cmd``, between the ownership transfers of
        ``shared``; returns what ``fn`` returned."""
        ctx = self.ctx
        fns = ctx.device.fns
        try:
            begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
            check("vkBeginCommandBuffer", fns.vkBeginCommandBuffer(cmd, begin))
            if shared:
                ownership_barrier(ctx, cmd, shared, src_family=ctx.queue_family_index, dst_family=family,
                                  src_stages=sync.TOP_OF_PIPE, src_access=0,
                                  dst_stages=sync.GUEST_STAGES, dst_access=sync.GUEST_ACCESS)
            rec = Recorder(ctx, cmd, HandoffTarget(family))
            with rec:
                result = fn(rec)
            if shared:
                ownership_barrier(ctx, cmd, shared, src_family=family, dst_family=ctx.queue_family_index,
                                  src_stages=sync.GUEST_STAGES, src_access=sync.GUEST_WRITES,
                                  dst_stages=sync.BOTTOM_OF_PIPE, dst_access=0)
            check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
        except BaseException:
            # A half-recorded buffer cannot be begun again: free it.
            fns.vkFreeCommandBuffers(ctx.device.handle, pool.handle, 1, ffi.new("VkCommandBuffer[1]", [cmd]))
            with self._lock:
                self.live_command_buffers -= 1
            raise
        return result

    def _queue_submit(self, queue, queue_lock, submission: Submission, pending: PendingWork, waits: list,
                      signals: list) -> None:
        """vkQueueSubmit ``pending``'s command buffer: wait on ``waits``, signal
        ``signals`` (and the guest timeline's next value, which ``submission``
        records) and the fence."""
        wait_sems = [w[0] for w in waits]
        wait_vals = [w[1] or 0 for w in waits]
        stages = [w[2] for w in waits]
        sig_sems = [g[0] for g in signals]
        sig_vals = [g[1] or 0 for g in signals]
        cmds = ffi.new("VkCommandBuffer[1]", [pending.command_buffer])
        with self._lock, queue_lock:
            # The guest timeline's values must rise in submission order: take the
            # next value and submit under one lock.
            pnext = None
            if self.timeline:
                sig_sems.append(self._timeline_semaphore())
                self._value += 1
                sig_vals.append(self._value)
                submission.semaphore, submission.value = self.semaphore, self._value
                # Lists, not ready cdata: new() keeps what it converts alive.
                pnext = new("VkTimelineSemaphoreSubmitInfo",
                            waitSemaphoreValueCount=len(wait_vals),
                            pWaitSemaphoreValues=wait_vals if wait_vals else ffi.NULL,
                            signalSemaphoreValueCount=len(sig_vals), pSignalSemaphoreValues=sig_vals)
            w_arr = array("VkSemaphore", wait_sems) if wait_sems else ffi.NULL
            st_arr = array("VkPipelineStageFlags", stages) if stages else ffi.NULL
            s_arr = array("VkSemaphore", sig_sems) if sig_sems else ffi.NULL
            info = new("VkSubmitInfo", pNext=pnext if pnext is not None else ffi.NULL, waitSemaphoreCount=len(wait_sems), pWaitSemaphores=w_arr,
                       pWaitDstStageMask=st_arr, commandBufferCount=1, pCommandBuffers=cmds,
                       signalSemaphoreCount=len(sig_sems), pSignalSemaphores=s_arr)
            res = self.ctx.device.fns.vkQueueSubmit(queue, 1, info, pending.fence)
            if res != vk.VK_SUCCESS:
                self._fences.append(pending.fence)
                pending.pool.free.append(pending.command_buffer)
                if self.timeline:
                    self._value -= 1
                check("vkQueueSubmit", res)
            self._in_flight.append(pending)
            self.stats["submissions"] += 1

    # -- completion ----------------------------------------------------------------
    def finished(self, pending: PendingWork) -> bool:
        """Whether ``pending`` finished on the GPU (polls its fence, never blocks)."""
        if pending.finished:
            return True
        with self._lock:       # the fence may be reset and reused once complete
            fns, dev = self.ctx.device.fns, self.ctx.device.handle
            if not pending.finished and fns.vkGetFenceStatus(dev, pending.fence) == vk.VK_SUCCESS:
                self.complete(pending)
            return pending.finished

    def wait(self, pending: PendingWork, timeout: float = None) -> bool:
        """Block until ``pending`` finished (or ``timeout`` seconds passed); True when done."""
        with self._lock:
            if pending.finished:
                return True
            pending.waiters += 1       # keeps the fence from being recycled meanwhile
        try:
            ns = 2 ** 63 - 1 if timeout is None else max(0, int(timeout * 1e9))
            fence = ffi.new("VkFence[1]", [pending.fence])
            res = self.ctx.device.fns.vkWaitForFences(self.ctx.device.handle, 1, fence, vk.VK_TRUE, ns)
        finally:
            with self._lock:
                pending.waiters -= 1
        if res == vk.VK_TIMEOUT:
            self.complete(pending, signalled=False)   # another waiter may have finished it
            return pending.finished
        check("vkWaitForFences", res)
        self.complete(pending)
        return True

    def complete(self, pending: PendingWork, signalled: bool = True) -> None:
        """``pending`` finished on the GPU: recycle its command buffer, and its
        fence once no thread is still waiting on it."""
        with self._lock:
            if signalled and not pending.finished:
                pending.finished = True
                try:
                    self._in_flight.remove(pending)
                except ValueError:
                    pass
                # Reused by its own thread only (begin resets it: the pool has
                # RESET_COMMAND_BUFFER); appending is safe from any thread.
                pending.pool.free.append(pending.command_buffer)
                pending.command_buffer = None
            if pending.finished and pending.waiters == 0 and pending.fence is not None:
                fence = ffi.new("VkFence[1]", [pending.fence])
                self.ctx.device.fns.vkResetFences(self.ctx.device.handle, 1, fence)
                self._fences.append(pending.fence)
                pending.fence = None

    def poll(self) -> None:
        """Recycle every submission whose fence signalled."""
        fns, dev = self.ctx.device.fns, self.ctx.device.handle
        with self._lock:
            for pending in list(self._in_flight):
                if not pending.finished and fns.vkGetFenceStatus(dev, pending.fence) == vk.VK_SUCCESS:
                    self.complete(pending)

    def destroy(self) -> None:
        """Context teardown (the host made sure nothing is pending)."""
        fns, dev = self.ctx.device.fns, self.ctx.device.handle
        with self._lock:
            for pool in self._pools:
                fns.vkDestroyCommandPool(dev, pool.handle, ffi.NULL)
            for f in self._all_fences:
                fns.vkDestroyFence(dev, f, ffi.NULL)
            if self.semaphore is not None:
                fns.vkDestroySemaphore(dev, self.semaphore, ffi.NULL)
            self._pools.clear()
            self._all_fences.clear()
            self._fences.clear()
            self._in_flight.clear()
            self.semaphore = None
            self.live_command_buffers = 0


def _as_stages(stages) -> int:
    if stages is None:
        return sync.GUEST_STAGES
    if isinstance(stages, int) and not isinstance(stages, bool):
        if stages <= 0:
            raise InvalidArgumentError("wait stages must be a non-empty VkPipelineStageFlags mask")
        return stages
    return as_host_access(stages).stages


def _parse_waits(wait):
    out = []
    for item in wait:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise InvalidArgumentError("wait= takes (semaphore, value or None, stages) tuples")
        sem = as_handle(item[0], "VkSemaphore", "wait semaphore")
        value = None if item[1] is None else semaphore_value(item[1], "wait value")
        out.append((sem, value, _as_stages(item[2] if len(item) == 3 else None)))
    return out


def _parse_signals(signal):
    out = []
    for item in signal:
        if isinstance(item, (tuple, list)):
            if len(item) != 2:
                raise InvalidArgumentError("signal= takes (semaphore, value or None) pairs")
            sem, value = item
        else:
            sem, value = item, None
        sem = as_handle(sem, "VkSemaphore", "signal semaphore")
        out.append((sem, None if value is None else semaphore_value(value, "signal value")))
    return out


def _check_not_waiting_on_itself(waits, signals) -> None:
    """A submission that waits for a timeline value it signals itself (or a
    later one) never runs, and stalls every submission after it on the
    queue: refuse it before anything is recorded."""
    signalled = {int(ffi.cast("uintptr_t", sem)): value for sem, value in signals if value is not None}
    for sem, value, _ in waits:
        own = signalled.get(int(ffi.cast("uintptr_t", sem)))
        if value is not None and own is not None and value >= own:
            raise InvalidArgumentError(
                f"this submission waits for value {value} of a timeline it signals to {own} itself: it would "
                "never run. Take the wait point before reserving the signal point (tl.wait_point() "
                "defaults to the last value reserved)")


def ownership_barrier(ctx, cmd, tensors, *, src_family: int, dst_family: int, src_stages: int,
                      src_access: int, dst_stages: int, dst_access: int) -> None:
    """Record a queue-family ownership transfer half (release when ``cmd``
    runs on ``src_family``, acquire on ``dst_family``) for the buffers of
    ``tensors``, each over its whole range so both halves match exactly."""
    bufs = {}
    for t in tensors:
        t = check_tensor(ctx, t, "shared tensor")
        bufs[t.buffer.uid] = t.buffer
    if not bufs:
        return
    bars = array("VkBufferMemoryBarrier", [
        new("VkBufferMemoryBarrier", srcAccessMask=src_access, dstAccessMask=dst_access,
            srcQueueFamilyIndex=src_family, dstQueueFamilyIndex=dst_family, buffer=b.handle,
            offset=0, size=b.size) for b in bufs.values()])
    ctx.device.fns.vkCmdPipelineBarrier(cmd, src_stages, dst_stages, 0, 0, ffi.NULL, len(bufs), bars, 0, ffi.NULL)


def _host_side(t) -> tuple:
    ha = t.buffer.host_access
    return (ha.stages, ha.access) if ha is not None else (sync.EARLIER_GUEST_STAGES, sync.GUEST_ACCESS)


def release_to_guest(ctx, host_cmd, tensors, guest_family: int) -> None:
    """Host side, before the guest's submission: release ``tensors`` from the
    adopted queue family to ``guest_family`` in the host's ``host_cmd``."""
    for t in tensors:
        stages, access = _host_side(t)
        ownership_barrier(ctx, host_cmd, [t], src_family=ctx.queue_family_index, dst_family=guest_family,
                          src_stages=stages, src_access=access & sync.WRITE_ACCESS,
                          dst_stages=sync.BOTTOM_OF_PIPE, dst_access=0)


def acquire_from_guest(ctx, host_cmd, tensors, guest_family: int) -> None:
    """Host side, after the guest's submission: acquire ``tensors`` back on
    the adopted queue family in the host's ``host_cmd``."""
    for t in tensors:
        stages, access = _host_side(t)
        ownership_barrier(ctx, host_cmd, [t], src_family=guest_family, dst_family=ctx.queue_family_index,
                          src_stages=sync.TOP_OF_PIPE, src_access=0,
                          dst_stages=stages, dst_access=access)


def submit(ctx, fn, *, queue=None, wait=(), signal=(), queue_family_index: int = None, shared=(),
           queue_lock=None) -> Submission:
    """Record ``fn(rec)`` into a guest-owned command buffer and submit it.

    ``queue``: a VkQueue of ``queue_family_index`` (default: the queue and
    family given to ``Context.adopt``). ``wait``: ``(semaphore, value,
    stages)`` tuples — ``value`` None for a binary semaphore, an int for a
    timeline one; ``stages`` the guest stages that wait (default: all guest
    stages). ``signal``: ``(semaphore, value)`` pairs or bare binary
    semaphores. ``shared``: tensors used on both queue families (only for
    another family; see the module notes). ``queue_lock``: held around
    vkQueueSubmit (default: the lock given to adopt). The work belongs to
    the current epoch; retire it with ``ctx.retire_when(submission=s)``.
    """
    return ctx.submitter.submit(fn, queue=queue, wait=wait, signal=signal, queue_family_index=queue_family_index,
                                shared=shared, queue_lock=queue_lock)
