"""Epochs: when guest memory that the GPU may still use can be freed.

Every recording belongs to the context's current epoch. The host closes an
epoch (``advance_epoch``, typically once per frame) and later retires it —
by value once it knows the GPU finished (``retire``), or by handing a fence,
a timeline value or a hand-off submission the context polls
(``retire_when``). Guest objects released meanwhile (dropped tensors,
staging buffers, old program command buffers) wait in a graveyard tagged
with the epoch of their last use and are destroyed only after it retired.

Other services hear about epochs through two lists: ``on_advance``
callables run after every :meth:`Epochs.advance` (the hand-off submitter
polls its fences there) and ``on_retire(retired)`` callables after every
retirement (timestamp queries are read there, before their pools are
reused).

Only closed epochs can be retired: an epoch number is an integer (numpy
integers too, never bools or floats) below the current epoch. Retiring the
current or a future epoch would free memory that command buffers still being
recorded use, so ``retire`` and ``retire_when`` reject it.

Open recordings are tracked with the epoch each began in: a recording may
stamp its resources with every epoch from that one on, so nothing from it
on retires while it is open. ``retire()`` without an epoch ("the device is
idle") closes the current epoch and retires it — or, while a recording is
open, everything before the oldest open one — and forgets every pending
poll, since all of it is done (the host may then destroy the fences and
semaphores it handed over).
"""
from __future__ import annotations

import collections
import numbers
import threading

import vulkan as vk
from vulkan import ffi

from ..host.declarations import as_handle
from ..errors import InvalidArgumentError, RecordingError, UnsupportedError, check


class Epochs:
    """The epoch counter, the graveyard and the retirement polls of one device.

    ``destroy_buffer(alloc, uid)``: frees a guest buffer's memory and its
    descriptors once its epoch retired."""

    def __init__(self, fns, device_handle, caps, destroy_buffer):
        self.current = 1
        self.retired = 0
        self._fns, self._device, self._caps = fns, device_handle, caps
        self._destroy_buffer = destroy_buffer
        self._lock = threading.RLock()
        self.graveyard = collections.deque()    # (epoch, Allocation or destroy(), uid or None)
        # What collect() found not yet retired, looked at again only once
        # more epochs retired: collect runs at every tensor creation inside
        # a recording, and rescanning thousands of waiting items each time
        # made a frame that creates many tensors quadratic.
        self._waiting = collections.deque()
        self._waiting_checked = -1              # self.retired when _waiting was last scanned
        self.retire_waits = collections.deque()  # (epoch, done()) from retire_when, in order
        self._open_recordings: dict = {}         # recording key -> the epoch it began in
        self.on_advance: list = []
        self.on_retire: list = []

    def advance(self) -> int:
        """Close the current epoch and return its number (see Context.advance_epoch)."""
        with self._lock:
            closed = self.current
            self.current += 1
        self._poll_retire_waits()
        for listener in self.on_advance:
            listener()
        return closed

    def retire(self, epoch: int = None) -> None:
        """Everything recorded in epochs <= ``epoch`` finished on the GPU;
        without ``epoch``, everything recorded so far did (the device is
        idle). Destroy what waited for that (see Context.retire)."""
        closed = False
        with self._lock:
            oldest_open = min(self._open_recordings.values(), default=None)
            if epoch is None:
                # Idle: every poll would say done, and the host may now
                # destroy what it handed over, so none may be polled again.
                self.retire_waits.clear()
                if oldest_open is None:
                    # Close the epoch: what is recorded after this call
                    # belongs to the next one and is not retired here.
                    upto, closed = self.current, True
                    self.current += 1
                else:
                    upto = oldest_open - 1
            else:
                upto = self.closed_epoch(epoch, "retire")
                if oldest_open is not None and upto >= oldest_open:
                    raise RecordingError(
                        f"retire({upto}): a recording begun in epoch {oldest_open} is still open, so "
                        "the GPU cannot have finished it; retire that epoch once the recording was "
                        "submitted and its work completed (ctx.retire() without an epoch retires "
                        "everything before the open recording)")
            self._retire_through(upto)
        if closed:
            for listener in self.on_advance:
                listener()
        self.collect()
        for listener in self.on_retire:
            listener(self.retired)

    def _retire_through(self, upto: int) -> None:
        """Epochs <= ``upto`` are retired (caller holds the lock); polls
        for them can only repeat that, so they go."""
        self.retired = max(self.retired, upto)
        if any(e <= self.retired for e, _ in self.retire_waits):
            self.retire_waits = collections.deque(w for w in self.retire_waits if w[0] > self.retired)

    def recording_opened(self, key) -> None:
        """A recording begins now, in the current epoch."""
        with self._lock:
            self._open_recordings[key] = self.current

    def recording_closed(self, key) -> None:
        with self._lock:
            self._open_recordings.pop(key, None)

    def retire_all(self) -> None:
        """Teardown: every epoch counts as retired, the polls are dropped."""
        self.retired = self.current + 1
        self.collect()
        self.retire_waits.clear()

    def retire_when(self, *, fence=None, semaphore=None, submission=None, epoch: int = None) -> int:
        """See Context.retire_when."""
        if epoch is not None:
            epoch = self.closed_epoch(epoch, "retire_when")
        given = [x is not None for x in (fence, semaphore, submission)]
        if sum(given) != 1:
            raise InvalidArgumentError("retire_when takes exactly one of fence=, semaphore=, submission=")
        if submission is not None:
            if not callable(getattr(submission, "done", None)):
                raise InvalidArgumentError("submission= takes what ctx.submit returned")
            done = submission.done
        elif fence is not None:
            handle = as_handle(fence, "VkFence", "fence")
            fns, dev = self._fns, self._device

            def done():
                return fns.vkGetFenceStatus(dev, handle) == vk.VK_SUCCESS
            done.fence = int(ffi.cast("uintptr_t", handle))
            self._fence_reused(done.fence)
        else:
            done = timeline_reached(self._fns, self._device, self._caps, semaphore)
        if epoch is None:
            epoch = self.advance()
        with self._lock:
            self.retire_waits.append((epoch, done))
        return epoch

    def _fence_reused(self, fence: int) -> None:
        """A fence handed again was submitted again, which Vulkan allows only
        once its earlier submission completed (a fence must be unsignaled and
        free of pending work to be submitted, and may be reset only then):
        the earlier waits on it are done. Hosts reset a fence right after
        waiting on it, so a poll would mostly find it unsignaled again and
        retirement would lag by many frames."""
        with self._lock:
            waits = self.retire_waits
            for i, (epoch, done) in enumerate(waits):
                if getattr(done, "fence", None) == fence:
                    waits[i] = (epoch, _done)

    def closed_epoch(self, epoch, what: str) -> int:
        """``epoch`` as an int, if it names an epoch that was closed."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise InvalidArgumentError(f"{what}: epoch must be an integer epoch number (what advance_epoch "
                                       f"returned), got {type(epoch).__name__} {epoch!r}")
        epoch = int(epoch)
        if epoch < 0:
            raise InvalidArgumentError(f"{what}: epoch {epoch} is negative; epochs count up from 1")
        current = self.current
        if epoch >= current:
            raise InvalidArgumentError(f"{what}: epoch {epoch} is not closed yet (the current epoch is "
                                       f"{current}, still being recorded); retire only epochs that "
                                       "advance_epoch() returned, once the GPU finished them")
        return epoch

    def _poll_retire_waits(self):
        # In order: retiring epoch e promises every epoch before it finished
        # too, which a later fence on another queue would not prove.
        last = None
        with self._lock:
            waits = self.retire_waits
            while waits and waits[0][1]():
                last = waits.popleft()[0]
            if last is None:
                return
            # A recording still open began before its work could be in the
            # signalled submission: retire only what precedes it.
            oldest_open = min(self._open_recordings.values(), default=None)
            if oldest_open is not None:
                last = min(last, oldest_open - 1)
            self._retire_through(last)
        self.collect()
        for listener in self.on_retire:
            listener(self.retired)

    def retire_later(self, epoch: int, destroy) -> None:
        """Call ``destroy()`` once ``epoch`` retired (guest objects other than
        buffers: program command buffers, staging buffers, ...)."""
        self.graveyard.append((epoch, destroy, None))

    def release(self, alloc, uid, last_epoch) -> None:
        """A guest buffer was dropped; free it once ``last_epoch`` retired.
        May run from a finalizer on any thread: only enqueue."""
        self.graveyard.append((last_epoch, alloc, uid))

    def collect(self) -> None:
        """Destroy everything in the graveyard whose epoch retired."""
        if self._waiting and self._waiting_checked != self.retired:
            self._waiting_checked = self.retired
            waiting, self._waiting = self._waiting, collections.deque()
            self._sort_out(waiting)
        self._sort_out(self.graveyard)

    def _sort_out(self, items: collections.deque) -> None:
        """Destroy the retired items of ``items`` (emptying it); the rest wait."""
        while items:
            try:
                item = items.popleft()
            except IndexError:          # another thread's collect took the last one
                break
            epoch, alloc, uid = item
            if epoch <= self.retired:
                if uid is None:
                    alloc()         # from retire_later
                else:
                    self._destroy_buffer(alloc, uid)
            else:
                self._waiting.append(item)

    @property
    def pending(self) -> int:
        """Objects waiting for their epoch to retire before they are destroyed."""
        return len(self.graveyard) + len(self._waiting)


def _done() -> bool:
    return True


def timeline_functions(fns, caps):
    """(vkGetSemaphoreCounterValue, vkWaitSemaphores) when the host enabled
    timeline semaphores, else None."""
    if not caps.timeline_semaphores:
        return None
    for suffix in ("", "KHR"):
        get = getattr(fns, "vkGetSemaphoreCounterValue" + suffix, None)
        if get is not None:
            return get, getattr(fns, "vkWaitSemaphores" + suffix, None)
    return None


def timeline_reached(fns, device_handle, caps, semaphore):
    """A poll function: has timeline ``semaphore=(sem, value)`` reached value?"""
    if not (isinstance(semaphore, tuple) and len(semaphore) == 2):
        raise InvalidArgumentError("semaphore= takes a (timeline VkSemaphore, value) pair")
    found = timeline_functions(fns, caps)
    if found is None:
        raise UnsupportedError("retire_when(semaphore=) needs timeline semaphores enabled by the host "
                               "(Vulkan 1.2 or VK_KHR_timeline_semaphore, feature timelineSemaphore)")
    get = found[0]
    sem = as_handle(semaphore[0], "VkSemaphore", "semaphore")
    value = semaphore_value(semaphore[1], "semaphore value")
    out = ffi.new("uint64_t *")

    def reached() -> bool:
        check("vkGetSemaphoreCounterValue", get(device_handle, sem, out))
        return out[0] >= value
    return reached


def semaphore_value(v, what):
    """A timeline semaphore value: an int in 0 .. 2**64-1."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 64:
        raise InvalidArgumentError(f"{what} must be a non-negative int, got {v!r}")
    return v
