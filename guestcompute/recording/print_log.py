"""The print log: where user kernels' ``debugPrintfEXT`` calls write
(:mod:`guestcompute.spirv.glsl_print` rewrites them), read back on the host
when the epoch that wrote it retires.

Each epoch in which a printing kernel is recorded gets a log of its own: a
host-visible buffer of ``CAPACITY`` bytes of records plus a header
(``[used, dropped, room]``: the words reserved so far, the prints that
found no room, the room in words), zeroed on the host when it is handed out — its
previous epoch retired, so the GPU no longer writes it. When the epoch
retires the records are decoded in the order the GPU reserved them (so
each invocation's prints in the order it made them), formatted like C's
printf and delivered to the printing kernel's ``on_print(kernel_name,
text)`` or, without one, to the library's logger (INFO); prints that did
not fit are reported as a warning with their count. The buffer then goes
back to the pool for a later epoch.

Formats: ``%d %i %u %x %X %o %c %f %F %e %E %g %G %%`` with flags,
width and precision as C's, and debugPrintfEXT's vectors ``%v2f``..``%v4u``
(components separated by ", "). An integer printed with ``%f`` (or a
float with ``%d``) is converted as Python converts it — C leaves that
undefined.
"""
from __future__ import annotations

import re
import struct
import threading

import numpy as np

from ..log import log
from ..spirv.glsl_print import ARG_WORDS, HEADER_WORDS
from ..tensor import Buffer
from ..vk.memory import STORAGE_USAGE

CAPACITY = 1 << 20                  # bytes of records per epoch
HEADER = 3                          # words before the records: used, dropped, room
_CONVERSION = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(v[234])?(hh|h|ll|l)?([diuxXocfFeEgG%])")
_KINDS = {1: "f", 2: "i", 3: "u", 4: "b"}


def _as(value, kind: str, conversion: str):
    """A decoded component as Python wants it for ``conversion``."""
    if conversion in "diouxXc":
        if kind == "f":
            return int(value) if np.isfinite(value) else 0
        if conversion in "uxXo" and kind == "i":
            return int(value) & 0xFFFFFFFF
        return int(value)
    return float(value)


def format_print(fmt: str, args: list) -> str:
    """C's printf of ``fmt`` with ``args`` [(kind, [components])]."""
    out, pos, k = [], 0, 0
    for m in _CONVERSION.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, vector, _, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        if k >= len(args):
            out.append(m.group(0))
            continue
        kind, values = args[k]
        k += 1
        spec = "%" + flags + ("d" if conv in "iu" else conv)
        shown = [spec % _as(v, kind, conv) for v in (values if vector else values[:1])]
        out.append(", ".join(shown))
    out.append(fmt[pos:])
    return "".join(out)


def decode(words: np.ndarray, formats: dict) -> list:
    """[(format id, text)] of the records in ``words`` (uint32), in order."""
    out, at, n = [], 0, len(words)
    while at + HEADER_WORDS <= n:
        fid, count = int(words[at]), int(words[at + 1])
        size = HEADER_WORDS + ARG_WORDS * count
        if at + size > n or fid not in formats:
            break
        args = []
        for a in range(count):
            slot = words[at + HEADER_WORDS + ARG_WORDS * a: at + HEADER_WORDS + ARG_WORDS * (a + 1)]
            tag = int(slot[0])
            kind, comps = _KINDS.get(tag & 15, "u"), max(1, tag >> 4)
            raw = slot[1:1 + comps]
            if kind == "f":
                values = list(raw.view(np.float32))
            elif kind == "i":
                values = [int(v) for v in raw.view(np.int32)]
            elif kind == "b":
                values = [int(v != 0) for v in raw]
            else:
                values = [int(v) for v in raw]
            args.append((kind, values))
        out.append((fid, format_print(formats[fid][1], args)))
        at += size
    return out


class PrintLogs:
    """The context's print logs: one per epoch that printed, pooled.

    Thread-safety: any thread (one lock)."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._lock = threading.Lock()
        self._formats: dict = {}        # id -> (kernel name, format, on_print)
        self._by_epoch: dict = {}       # epoch -> Buffer
        self._free: list = []
        self.made = 0                   # log buffers created so far

    def register(self, fid: int, kernel_name: str, fmt: str, on_print) -> None:
        with self._lock:
            self._formats[fid] = (kernel_name, fmt, on_print)

    def buffer(self) -> Buffer:
        """The log of the epoch being recorded (handed out zeroed at its first print)."""
        epoch = self._ctx.device.epochs.current
        with self._lock:
            buf = self._by_epoch.get(epoch)
            if buf is not None:
                return buf
            buf = self._free.pop() if self._free else None
        if buf is None:
            dev = self._ctx.device
            alloc = dev.suballocator.create(4 * HEADER + CAPACITY, STORAGE_USAGE, host_visible=True)
            buf = Buffer(self._ctx, alloc.buffer, alloc.size, alloc)
            self.made += 1
        # Its previous epoch retired: the GPU is done with it, so the host may write it.
        buf.alloc.mapped[0:4 * HEADER] = struct.pack("<3I", 0, 0, CAPACITY // 4)
        self._ctx.device.memory.flush(buf.alloc)
        with self._lock:
            self._by_epoch.setdefault(epoch, buf)
            if self._by_epoch[epoch] is not buf:        # another thread handed one out first
                self._free.append(buf)
            return self._by_epoch[epoch]

    def collect(self, retired: int) -> None:
        """Decode and deliver the logs no unretired epoch wrote."""
        with self._lock:
            done = [(e, b) for e, b in self._by_epoch.items() if e <= retired and b.last_epoch <= retired]
            for e, _ in done:
                del self._by_epoch[e]
            formats = dict(self._formats)
        for epoch, buf in sorted(done, key=lambda eb: eb[0]):
            try:
                self._deliver(epoch, buf, formats)
            finally:
                with self._lock:
                    self._free.append(buf)

    def _deliver(self, epoch: int, buf: Buffer, formats: dict) -> None:
        self._ctx.device.memory.invalidate(buf.alloc)
        head = np.frombuffer(bytes(buf.alloc.mapped[0:4 * HEADER]), np.uint32)
        used, dropped, cap = int(head[0]), int(head[1]), int(head[2])
        n = min(used, cap)
        words = np.frombuffer(bytes(buf.alloc.mapped[4 * HEADER:4 * (HEADER + n)]), np.uint32)
        for fid, text in decode(words, formats):
            name, _, on_print = formats[fid]
            if on_print is None:
                log.info("%s: %s", name, text)
                continue
            try:
                on_print(name, text)
            except Exception:
                log.exception("guestcompute: the on_print callback of kernel %r raised", name)
        if dropped:
            log.warning("guestcompute: %d kernel print(s) of epoch %d were dropped: the epoch's print log "
                        "(%d KiB) was full", dropped, epoch, CAPACITY // 1024)
