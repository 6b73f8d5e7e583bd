"""Hot reload: one thread per context that watches the files of kernels
made with ``ctx.kernel(path, watch=True)`` and reloads a kernel when one of
its files changes.

Why polling: a look at a few small files every ``interval`` seconds (20 ms)
costs microseconds, works on every platform and file system (network
mounts and editors that replace the file by renaming included), and needs
no dependency. A look compares each file's contents (a CRC) as well as its
modification time, size and inode: a file's timestamp moves in coarse
ticks, so a same-size save within one tick of the last would otherwise go
unseen. The compile runs on this thread, never on a recording one: a
recording thread keeps the last good pipeline until the new one exists,
then picks it up at its next dispatch (:meth:`UserKernel.reload`). A
change is compiled once the files look the same twice in a row, so a save
caught half-written (editors truncate, then write) is not compiled; one
that still is fails quietly into ``last_error``, and the finished write
reloads.

Watched kernels are held weakly: a kernel the application drops stops
being watched. The thread starts with the first watched kernel and ends
with the context (``ctx.close`` stops it before destroying anything).
"""
from __future__ import annotations

import os
import threading
import weakref
import zlib

from ..log import log

INTERVAL = 0.02         # seconds between looks at the files


def stamp(files) -> tuple:
    """What changes when any of ``files`` is written, replaced or removed."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
            with open(f, "rb") as fh:
                crc = zlib.crc32(fh.read())
            out.append((st.st_mtime_ns, st.st_size, st.st_ino, crc))
        except OSError:
            out.append(None)
    return tuple(out)


class KernelWatcher:
    """Thread-safety: ``watch`` and ``stop`` from any thread."""

    def __init__(self, interval: float = INTERVAL):
        self.interval = interval
        self._kernels: dict = {}            # id -> (weakref to kernel, files, stamp)
        self._pending: dict = {}            # id -> a changed stamp, seen once (reloaded when seen twice)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def watch(self, kernel) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self._kernels[id(kernel)] = (weakref.ref(kernel), kernel.files, stamp(kernel.files))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="guestcompute-kernel-watch", daemon=True)
                self._thread.start()

    @property
    def watched(self) -> int:
        with self._lock:
            return sum(1 for ref, _, _ in self._kernels.values() if ref() is not None)

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread, letting a reload in progress finish first."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Reload every watched kernel whose files changed since the last look."""
        with self._lock:
            entries = list(self._kernels.items())
        pending = self._pending
        for key, (ref, files, seen) in entries:
            kernel = ref()
            if kernel is None:
                with self._lock:
                    self._kernels.pop(key, None)
                pending.pop(key, None)
                continue
            now = stamp(files)
            if now == seen or self._stop.is_set():
                continue
            if now != pending.get(key):
                # Changed since the last look: wait one more look for the
                # save to finish (an editor truncates, then writes).
                pending[key] = now
                continue
            pending.pop(key, None)
            try:
                kernel.reload()
            except Exception:           # a closed context, or a bug: report, keep watching the others
                log.exception("guestcompute: reloading kernel %r failed", kernel.name)
            # The reload may have found new includes: watch what it read.
            with self._lock:
                if key in self._kernels:
                    self._kernels[key] = (ref, kernel.files if kernel.last_error is None else files, now)
