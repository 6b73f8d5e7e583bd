"""Epochs: when guest memory that the GPU may still use can be freed.

Every recording belongs to the context's current epoch. The host closes an
epoch (``advance_epoch``, typically once per frame) and later retires it —
by value once it knows the GPU finished (``retire``), or by handing a fence,
a timeline value or a hand-off submission the context polls
(``retire_when``). Guest objects released meanwhile (dropped tensors,
staging buffers, old program command buffers) wait in a graveyard tagged
with the epoch of their last use and are destroyed only after it retired.

Only closed epochs can be retired: an epoch number is an integer (numpy
integers too, never bools or floats) below the current epoch. Retiring the
current or a future epoch would free memory that command buffers still being
recorded use, so ``retire`` and ``retire_when`` reject it.
"""
from __future__ import annotations

import collections
import numbers

import vulkan as vk

from . import host as _host
from .errors import InvalidArgumentError


class EpochMixin:
    """The epoch half of :class:`~guestcompute.context.Context`."""

    @property
    def epoch(self) -> int:
        """The epoch that recordings made now belong to. Thread-safety: any thread."""
        return self._epoch

    def advance_epoch(self) -> int:
        """Close the current epoch (e.g. once per frame) and return its number.

        Thread-safety: any thread; epochs are per context, so with several
        recording threads one of them (the frame loop) should own them."""
        with self._lock:
            closed = self._epoch
            self._epoch += 1
        self._poll_retire_waits()
        if self._submitter is not None:
            self._submitter.poll()
        return closed

    def retire(self, epoch: int = None) -> None:
        """The host promises all GPU work recorded in epochs ≤ ``epoch`` has
        completed; guest memory freed since then is destroyed now. Without an
        argument: everything up to the current epoch (device idle). An epoch
        that is not closed yet (the current one or later) raises
        InvalidArgumentError: close it with :meth:`advance_epoch` first.

        Thread-safety: any thread, but the promise covers every thread's work
        in those epochs: retire only once all of it completed."""
        with self._lock:
            upto = self._epoch if epoch is None else self._closed_epoch(epoch, "retire")
            self._retired = max(self._retired, upto)
        self._collect()
        if self._timestamps is not None:
            self._timestamps.collect(self._retired)     # read before the query pools are reused

    def retire_when(self, *, fence=None, semaphore=None, submission=None, epoch: int = None) -> int:
        """Retire epochs ≤ ``epoch`` once the GPU says so: when ``fence`` (a
        VkFence) is signalled, the timeline ``semaphore=(sem, value)`` reaches
        ``value``, or ``submission`` (from :meth:`submit`) completed. Without
        ``epoch`` the current epoch is closed (:meth:`advance_epoch`) and used;
        a given ``epoch`` must be closed already (as for :meth:`retire`).
        Polled, in order, by :meth:`advance_epoch`; returns the epoch.

        The fence or semaphore must stay alive until then. A fence the host
        resets before the poll sees it only delays retirement until it is
        signalled again.

        Thread-safety: any thread; the poll reads the fence's status, so do
        not reset that fence on another thread while advance_epoch runs."""
        self._check_open()
        if epoch is not None:
            epoch = self._closed_epoch(epoch, "retire_when")
        given = [x is not None for x in (fence, semaphore, submission)]
        if sum(given) != 1:
            raise InvalidArgumentError("retire_when takes exactly one of fence=, semaphore=, submission=")
        if submission is not None:
            if not callable(getattr(submission, "done", None)):
                raise InvalidArgumentError("submission= takes what ctx.submit returned")
            done = submission.done
        elif fence is not None:
            handle = _host.as_handle(fence, "VkFence", "fence")
            fns, dev = self._fns, self.device

            def done():
                return fns.vkGetFenceStatus(dev, handle) == vk.VK_SUCCESS
        else:
            from .recording.handoff import timeline_reached
            done = timeline_reached(self, semaphore)
        if epoch is None:
            epoch = self.advance_epoch()
        with self._lock:
            self._retire_waits.append((epoch, done))
        return epoch

    def _closed_epoch(self, epoch, what: str) -> int:
        """``epoch`` as an int, if it names an epoch that was closed."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise InvalidArgumentError(f"{what}: epoch must be an integer epoch number (what advance_epoch "
                                       f"returned), got {type(epoch).__name__} {epoch!r}")
        epoch = int(epoch)
        if epoch < 0:
            raise InvalidArgumentError(f"{what}: epoch {epoch} is negative; epochs count up from 1")
        current = self._epoch
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
            waits = self._retire_waits
            while waits and waits[0][1]():
                last = waits.popleft()[0]
        if last is not None:
            self.retire(last)

    def _retire_later(self, epoch: int, destroy) -> None:
        """Call ``destroy()`` once ``epoch`` retired (guest objects other than
        buffers: program command buffers, ...)."""
        self._graveyard.append((epoch, destroy, None))

    def _release(self, alloc, uid, last_epoch):
        # May run from a finalizer on any thread: only enqueue.
        self._graveyard.append((last_epoch, alloc, uid))

    def _collect(self):
        keep = collections.deque()
        while self._graveyard:
            item = self._graveyard.popleft()
            epoch, alloc, uid = item
            if epoch <= self._retired:
                if uid is None:
                    alloc()         # from _retire_later
                    continue
                self._descriptors.forget_buffer(uid)
                self.memory.destroy(alloc)
            else:
                keep.append(item)
        self._graveyard.extend(keep)

