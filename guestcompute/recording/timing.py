"""GPU timestamps around guest work, and debug labels for capture tools.

``with rec.timing("blur"):`` writes a timestamp into the host's command
buffer before and after the work recorded inside it (vkCmdWriteTimestamp
into a query pool guestcompute owns). Once the GPU has run the frame the
durations are readable as ``rec.timings`` (that recording) and
``ctx.timings()`` (everything recorded in the last retired epoch), as
``{name: milliseconds}``; a name used several times adds up.

Both timestamps are written at the bottom of the pipe, i.e. when all earlier
commands in the queue have finished, so a scope measures the GPU time from
the end of what came before it to the end of its own work, and consecutive
scopes add up to the time of the whole sequence.

Query pools are recycled per epoch (Tracy and libplacebo both pool their
queries per frame): a recording takes a block of queries, resets it with
vkCmdResetQueryPool in the same command buffer (recording happens outside
any render pass, where that is allowed) and the block returns to the free
list only when its epoch is retired, i.e. when the host promised the GPU is
done with it. Retiring also reads the results, so they outlive the block.
Ticks become milliseconds through the device's timestampPeriod, and are
masked to the queue family's timestampValidBits (a counter narrower than
64 bits wraps).

``with rec.label("name"):`` brackets work with vkCmdBegin/EndDebugUtilsLabelEXT
when the host says its instance enabled VK_EXT_debug_utils
(``Context.adopt(..., debug_utils=True)``); otherwise it records nothing, so
host code can label unconditionally. ``ctx.op_labels = True`` labels every
op with its name.

Thread-safety: a Recorder's scopes belong to its thread; the per-context
pool list is locked.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import vulkan as vk
from vulkan import ffi, lib

from ..errors import RecordingError, UnsupportedError, check
from ..vk.functions import instance_function
from ..vk.structs import new

BLOCK = 64                    # queries per pool: 32 scopes
KEEP_EPOCHS = 8               # retired epochs whose results ctx.timings() can still give
_STAGE = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
_NOT_READY = 1


class _Block:
    """One VkQueryPool of BLOCK timestamp queries."""
    __slots__ = ("pool", "used", "epoch")

    def __init__(self, pool):
        self.pool = pool
        self.used = 0
        self.epoch = 0


class Timestamps:
    """The context's timestamp query pools and per-epoch results."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.valid_bits = queue_timestamp_bits(ctx.physical_device, ctx.queue_family_index)
        self.period_ns = ctx.limits.timestamp_period
        self._lock = threading.Lock()
        self._free: list = []
        self._pending: list = []        # (block, RecorderTiming) waiting for their epoch to retire
        self._all: list = []
        self.results: dict = {}         # epoch -> {name: ms}

    @property
    def supported(self) -> bool:
        return self.valid_bits > 0 and self.period_ns > 0

    @property
    def query_pools(self) -> int:
        """Query pools made so far; they are recycled once their epoch retired."""
        return len(self._all)

    def acquire(self, owner: "RecorderTiming") -> _Block:
        with self._lock:
            block = self._free.pop() if self._free else None
            if block is None:
                info = new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=BLOCK)
                out = ffi.new("VkQueryPool *")
                check("vkCreateQueryPool", self._ctx.device.fns.vkCreateQueryPool(self._ctx.device.handle, info, ffi.NULL, out))
                block = _Block(out[0])
                self._all.append(block)
            block.used = 0
            self._pending.append((block, owner))
        return block

    def ticks_to_ms(self, begin: int, end: int) -> float:
        mask = (1 << self.valid_bits) - 1 if self.valid_bits < 64 else (1 << 64) - 1
        return ((end - begin) & mask) * self.period_ns / 1e6

    def read(self, block: _Block) -> list:
        """The block's timestamps, or None while any is not yet available."""
        n = block.used
        if n == 0:
            return []
        data = ffi.new("uint64_t[]", 2 * n)
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WITH_AVAILABILITY_BIT
        res = self._ctx.device.fns.vkGetQueryPoolResults(self._ctx.device.handle, block.pool, 0, n, 16 * n, data, 16, flags)
        if res == _NOT_READY:
            return None
        check("vkGetQueryPoolResults", res)
        if not all(data[2 * i + 1] for i in range(n)):
            return None
        return [data[2 * i] for i in range(n)]

    def collect(self, retired: int) -> None:
        """Read every block whose epoch is retired, keep the results, and
        put the block back on the free list."""
        with self._lock:
            done = [(b, o) for b, o in self._pending if b.epoch <= retired]
            self._pending = [(b, o) for b, o in self._pending if b.epoch > retired]
        for block, owner in done:
            owner._harvest(block)
            epoch_results = self.results.setdefault(block.epoch, {})
            for name, ms in owner._durations(block).items():
                epoch_results[name] = epoch_results.get(name, 0.0) + ms
        with self._lock:
            self._free.extend(b for b, _ in done)
        for old in sorted(self.results)[:-KEEP_EPOCHS]:
            del self.results[old]

    def epoch_results(self, epoch=None) -> dict:
        if epoch is None:
            return dict(self.results[max(self.results)]) if self.results else {}
        return dict(self.results.get(int(epoch), {}))

    def destroy(self) -> None:
        for block in self._all:
            self._ctx.device.fns.vkDestroyQueryPool(self._ctx.device.handle, block.pool, ffi.NULL)
        self._all.clear()
        self._free.clear()
        self._pending.clear()


def queue_timestamp_bits(physical_device, family: int) -> int:
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(physical_device, count, ffi.NULL)
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(physical_device, count, props)
    return props[family].timestampValidBits if family < count[0] else 0


class RecorderTiming:
    """The scopes one Recorder wrote: (name, block, begin query, end query)."""

    def __init__(self, rec):
        self._rec = rec
        self._ts = rec.ctx.timestamps
        if not self._ts.supported:
            raise UnsupportedError("this queue family writes no timestamps (timestampValidBits is 0); "
                                   "rec.timing() needs a queue that supports them")
        self._block = None
        self._scopes: list = []        # [name, block, begin, end]
        self._values: dict = {}        # id(block) -> list of ticks, once read
        self._results = None

    def _query(self, epoch: int):
        block = self._block
        if block is None or block.used == BLOCK:
            block = self._block = self._ts.acquire(self)
            self._rec.ctx.device.fns.vkCmdResetQueryPool(self._rec.command_buffer, block.pool, 0, BLOCK)
        block.epoch = max(block.epoch, epoch)
        q = block.used
        block.used += 1
        return block, q

    @contextmanager
    def scope(self, name: str):
        rec = self._rec
        rec.check_active()
        fns, cmd = rec.ctx.device.fns, rec.command_buffer
        block, q0 = self._query(rec.ctx.device.epochs.current)
        fns.vkCmdWriteTimestamp(cmd, _STAGE, block.pool, q0)
        entry = [str(name), block, q0, None, None]
        self._scopes.append(entry)
        self._results = None
        try:
            yield
        finally:
            if rec.active:
                end_block, q1 = self._query(rec.ctx.device.epochs.current)
                # Read again: that records the scope's batched work first.
                fns.vkCmdWriteTimestamp(rec.command_buffer, _STAGE, end_block.pool, q1)
                entry[3], entry[4] = end_block, q1

    def _harvest(self, block) -> None:
        """Keep the block's ticks before the block is recycled."""
        if id(block) not in self._values:
            values = self._ts.read(block)
            if values is not None:
                self._values[id(block)] = values

    def _durations(self, only_block=None) -> dict:
        out = {}
        for name, b0, q0, b1, q1 in self._scopes:
            if b1 is None or (only_block is not None and b1 is not only_block):
                continue
            v0, v1 = self._values.get(id(b0)), self._values.get(id(b1))
            if v0 is None or v1 is None:
                continue
            out[name] = out.get(name, 0.0) + self._ts.ticks_to_ms(v0[q0], v1[q1])
        return out

    def results(self) -> dict:
        if self._results is not None:
            return dict(self._results)
        if self._rec.active:
            raise RecordingError("timings are readable once the recording is closed and the GPU has run it")
        for _, b0, _, b1, _ in self._scopes:
            for b in (b0, b1):
                if b is not None and id(b) not in self._values:
                    values = self._ts.read(b)
                    if values is None:
                        raise RecordingError("the GPU has not finished this recording yet: read timings "
                                             "after waiting for the frame's fence (or after ctx.retire)")
                    self._values[id(b)] = values
        self._results = self._durations()
        return dict(self._results)


class DebugLabels:
    """vkCmdBegin/EndDebugUtilsLabelEXT, resolved once per context."""

    def __init__(self, ctx):
        self.begin = self.end = None
        if getattr(ctx, "debug_utils", False):
            self.begin = instance_function(ctx.instance, "vkCmdBeginDebugUtilsLabelEXT")
            self.end = instance_function(ctx.instance, "vkCmdEndDebugUtilsLabelEXT")
            if self.begin is None or self.end is None:
                self.begin = self.end = None
        self._labels: dict = {}

    @property
    def enabled(self) -> bool:
        return self.begin is not None

    def info(self, name: str, color):
        key = (name, color)
        info = self._labels.get(key)
        if info is None:
            info = new("VkDebugUtilsLabelEXT", pLabelName=name.encode(), color=list(color))
            self._labels[key] = info       # built once per name: labels repeat every frame
        return info


DEFAULT_COLOR = (0.2, 0.6, 1.0, 1.0)


@contextmanager
def label(rec, name: str, color=DEFAULT_COLOR):
    """Bracket the work recorded inside with a debug label (no-op without
    VK_EXT_debug_utils)."""
    labels = rec.ctx.debug_labels
    if not labels.enabled:
        yield
        return
    rec.check_active()
    labels.begin(rec.command_buffer, labels.info(str(name), tuple(float(c) for c in color)))
    try:
        yield
    finally:
        if rec.active:
            labels.end(rec.command_buffer)
