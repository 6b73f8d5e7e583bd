"""A shared timeline imported into CUDA: CUDA streams (torch's) wait for
guest work and signal the guest back, all on the GPU.

The values come from the timeline's :class:`~guestcompute.device.
shared_timeline.TimelineValues`, so guest submissions and CUDA streams
interleave their signals without counting by hand::

    ctx.submit(write_x, signal=[tl.signal_point()])      # guest signals v
    cuda_tl.wait()                                       # torch's stream waits for v
    y_t.copy_(torch.relu(x_t))
    v = cuda_tl.signal()                                 # ... and signals v + 1
    ctx.submit(read_y, wait=[tl.wait_point(v)])          # guest waits for it
"""
from __future__ import annotations

import sys

from ..errors import InvalidArgumentError
from ..vk import external
from .cuda_driver import driver


def stream_handle(stream) -> int:
    """A CUstream from an int, an object with ``cuda_stream`` (a
    torch.cuda.Stream) or None: torch's current stream on the device when
    torch is loaded, else the default stream (0)."""
    if stream is None:
        torch = sys.modules.get("torch")
        return int(torch.cuda.current_stream().cuda_stream) if torch is not None else 0
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, bool) or not isinstance(handle, int) or handle < 0:
        raise InvalidArgumentError(f"stream must be a CUstream (int), a torch.cuda.Stream or None, got {stream!r}")
    return handle


class CudaTimeline:
    """``timeline`` (a SharedTimeline) imported into CUDA device ``ordinal``
    (default: the one whose UUID matches the timeline's Vulkan device).
    Make it with ``ctx.cuda_timeline(tl)``."""

    def __init__(self, timeline, ordinal: int):
        self.timeline = timeline
        self.ordinal = ordinal
        cuda = driver()
        fd = timeline.export()
        close_on_failure = external.closer(fd)
        with cuda.current(ordinal):
            try:
                self._semaphore = cuda.import_timeline(fd)
            except BaseException:
                close_on_failure()      # CUDA owns it only on success
                raise

    def wait(self, value: int = None, stream=None) -> int:
        """Make ``stream``'s later work wait until the timeline reaches
        ``value`` (default: the last value reserved, i.e. the guest's latest
        signal point). Returns the value waited for."""
        _, value, _ = self.timeline.wait_point(value)
        cuda = driver()
        with cuda.current(self.ordinal):
            cuda.wait(self._semaphore, value, stream_handle(stream))
        return value

    def signal(self, stream=None) -> int:
        """Reserve the next value and signal it on ``stream`` once the work
        enqueued there before completes. Returns the value (wait for it with
        ``tl.wait_point(value)`` in a guest submission)."""
        value = self.timeline.values.reserve()
        cuda = driver()
        with cuda.current(self.ordinal):
            cuda.signal(self._semaphore, value, stream_handle(stream))
        return value

    def close(self) -> None:
        """Drop CUDA's import (no enqueued wait or signal may still use it)."""
        sem, self._semaphore = getattr(self, "_semaphore", None), None
        if sem is not None:
            cuda = driver()
            with cuda.current(self.ordinal):
                cuda.destroy_semaphore(sem)

    def __del__(self):
        try:
            self.close()
        except Exception:       # interpreter shutdown: CUDA may be gone already
            pass
