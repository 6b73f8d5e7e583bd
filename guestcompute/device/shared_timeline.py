"""Timeline semaphores shared with another VkDevice or with CUDA, and the
value counter the sharers draw from.

Every party that signals a shared timeline must signal values that rise in
the order the signals execute. In one process the parties draw them from
one :class:`TimelineValues` (a context's timeline and its imports into other
contexts or into CUDA share it), so a frame loop's steps — guest work
signals ``v``, torch waits ``v`` and signals ``v + 1``, the next guest work
waits ``v + 1`` — never have to count by hand.

A point is what a queue submission takes: ``signal_point()`` reserves the
next value and gives ``(semaphore, value)`` for a VkSubmitInfo's signal list
(or ``ctx.submit(signal=[...])``); ``wait_point()`` gives ``(semaphore,
value, stages)`` for its wait list.
"""
from __future__ import annotations

import os
import threading

from vulkan import ffi

from ..errors import InvalidArgumentError, UnsupportedError, check
from ..vk import external
from ..vk.structs import new
from . import epochs


class TimelineValues:
    """The last value handed out on one shared timeline (thread-safe)."""

    def __init__(self, start: int = 0):
        self._lock = threading.Lock()
        self.last = start

    def reserve(self) -> int:
        with self._lock:
            self.last += 1
            return self.last


class SharedTimeline:
    """A timeline VkSemaphore of one device whose payload other devices or
    CUDA share (``ctx.shared_timeline()``, ``ctx.import_timeline(...)``).

    ``semaphore``: the VkSemaphore (valid until the context closes or
    :meth:`destroy`); ``values``: the shared counter; ``last``: the value
    most recently reserved by any sharer."""

    def __init__(self, device, semaphore, values: TimelineValues):
        self._device = device
        self.semaphore = semaphore
        self.values = values

    @property
    def last(self) -> int:
        return self.values.last

    def signal_point(self) -> tuple:
        """``(semaphore, value)``: reserve the next value for a submission
        that signals it (the host's, in injection mode, or ``ctx.submit``)."""
        self._device.check_open()
        return (self.semaphore, self.values.reserve())

    def wait_point(self, value: int = None, stages=None) -> tuple:
        """``(semaphore, value, stages)`` for a submission that waits until
        the timeline reaches ``value`` (default: the last value reserved).
        ``stages``: the VkPipelineStageFlags that wait (None: the guest's
        compute and transfer stages, which ``ctx.submit`` fills in)."""
        self._device.check_open()
        value = self.values.last if value is None else epochs.semaphore_value(value, "wait value")
        if value > self.values.last:
            raise InvalidArgumentError(f"wait for value {value}, which nobody has reserved yet (last: "
                                       f"{self.values.last}); a wait on a value no signal will reach never ends")
        return (self.semaphore, value, stages)

    def counter(self) -> int:
        """The value the semaphore has reached now (vkGetSemaphoreCounterValue)."""
        dev = self._device
        out = ffi.new("uint64_t *")
        get, _ = epochs.timeline_functions(dev.fns, dev.caps)
        check("vkGetSemaphoreCounterValue", get(dev.handle, self.semaphore, out))
        return out[0]

    def wait(self, value: int = None, timeout: float = None) -> bool:
        """Block the calling thread until the timeline reaches ``value``
        (default: the last reserved); False on timeout. For tests and
        teardown: frame loops wait on the GPU through wait points."""
        dev = self._device
        value = self.values.last if value is None else epochs.semaphore_value(value, "wait value")
        _, fn = epochs.timeline_functions(dev.fns, dev.caps)
        sems = ffi.new("VkSemaphore[1]", [self.semaphore])
        vals = ffi.new("uint64_t[1]", [value])
        info = new("VkSemaphoreWaitInfo", semaphoreCount=1, pSemaphores=sems, pValues=vals)
        nanos = (1 << 64) - 1 if timeout is None else max(0, int(timeout * 1e9))
        res = fn(dev.handle, info, nanos)
        if res == 2:            # VK_TIMEOUT
            return False
        check("vkWaitSemaphores", res)
        return True

    def export(self) -> int:
        """A new opaque fd for the payload (yours to hand on or close)."""
        self._device.check_open()
        return external.semaphore_fd(self._device.fns, self._device.handle, self.semaphore)

    def destroy(self) -> None:
        """Destroy the VkSemaphore now (no pending submission may use it)."""
        self._device.shared_timelines.forget(self)


class SharedTimelines:
    """The device's shared timelines (``device.shared_timelines``), destroyed at close."""

    def __init__(self, device):
        self._device = device
        self._lock = threading.Lock()
        self._live: dict = {}
        self._support = None

    def check_supported(self) -> None:
        caps = self._device.caps
        if not caps.external_timelines:
            raise UnsupportedError(
                "shared timelines need timeline semaphores and VK_KHR_external_semaphore_fd enabled on the "
                "device (Vulkan 1.1+); gc.requirements() lists them where the device supports them")
        with self._lock:
            if self._support is None:
                self._support = external.timeline_export_support(self._device.physical_device)
        exportable, importable = self._support
        if not (exportable and importable):
            raise UnsupportedError("this device cannot export or import timeline semaphores as opaque fds "
                                   "(vkGetPhysicalDeviceExternalSemaphoreProperties)")

    def create(self) -> SharedTimeline:
        self.check_supported()
        dev = self._device
        sem = external.create_exportable_timeline(dev.fns, dev.handle)
        return self._keep(SharedTimeline(dev, sem, TimelineValues()))

    def import_(self, source) -> SharedTimeline:
        """Import a SharedTimeline of another context (sharing its values)
        or an fd from another process (values continue from the counter)."""
        self.check_supported()
        dev = self._device
        if isinstance(source, SharedTimeline):
            fd = source.export()
            try:
                sem = external.import_timeline(dev.fns, dev.handle, fd)
            finally:
                os.close(fd)
            return self._keep(SharedTimeline(dev, sem, source.values))
        if isinstance(source, bool) or not isinstance(source, int) or source < 0:
            raise InvalidArgumentError(f"import_timeline takes a SharedTimeline or an fd, got {source!r}")
        sem = external.import_timeline(dev.fns, dev.handle, source)
        tl = SharedTimeline(dev, sem, TimelineValues())
        tl.values.last = tl.counter()
        return self._keep(tl)

    def _keep(self, tl: SharedTimeline) -> SharedTimeline:
        with self._lock:
            self._live[id(tl)] = tl
        return tl

    def forget(self, tl: SharedTimeline) -> None:
        with self._lock:
            if self._live.pop(id(tl), None) is None:
                return
        self._device.fns.vkDestroySemaphore(self._device.handle, tl.semaphore, ffi.NULL)

    @property
    def count(self) -> int:
        return len(self._live)

    def destroy_all(self) -> None:
        for tl in list(self._live.values()):
            self.forget(tl)
