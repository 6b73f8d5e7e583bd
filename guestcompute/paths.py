"""Where on-disk caches live (GUESTCOMPUTE_CACHE_DIR, else the XDG cache
dir), and the two ways guestcompute touches files there.

Cache files are read with :func:`read_cache_file`, which opens without
blocking and only accepts a regular file of bounded size: a named pipe at a
cache path would otherwise block the open forever, and a link to
``/dev/zero`` (or a huge file) would be read until memory runs out. The
check is made with ``fstat`` on the descriptor that is then read, so the
file cannot be swapped between the check and the read.

Cache files are written with :func:`atomic_write` (a unique temp file, then
a rename); a failed write (a full disk, a file-size limit) removes its temp
file instead of leaving it behind.
"""
from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

# Opening must neither block (FIFOs) nor make the file our controlling terminal.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))
_CHUNK = 1 << 20


class CacheFileRefused(OSError):
    """A cache path holds something that is not read: not a regular file, or
    larger than the reader's bound. ``str(e)`` says which."""


def cache_root(override=None) -> Path:
    if override:
        return Path(override)
    env = os.environ.get("GUESTCOMPUTE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "guestcompute"


def read_cache_file(path: Path, max_bytes: int) -> bytes:
    """The contents of the regular file at ``path``, at most ``max_bytes``.

    Raises FileNotFoundError (and the other OSErrors of ``open``) as usual,
    and :class:`CacheFileRefused` for a FIFO, device, socket or directory, or
    for a file larger than ``max_bytes`` (also one that grows past it while
    being read)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CacheFileRefused(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise CacheFileRefused(f"{info.st_size} bytes is larger than the {max_bytes}-byte "
                                   "limit for this cache file")
        return _read_at_most(fd, max_bytes)
    finally:
        os.close(fd)


def _read_at_most(fd: int, max_bytes: int) -> bytes:
    chunks, total = [], 0
    while True:
        chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise CacheFileRefused(f"grew past the {max_bytes}-byte limit for this cache file "
                                   "while it was read")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return f"file type {stat.S_IFMT(mode):o}"


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a unique temp file + rename: readers never see a torn file and
    two concurrent writers each leave a complete one (last rename wins). If
    anything fails (a full disk, say) the temp file is removed before the
    error propagates."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _create_temp(path)
    try:
        with open(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path):
    """A new, uniquely named temp file beside ``path``: (its path, an fd open
    for writing). O_EXCL: never write through a file or link already there
    (a random name, so a leftover of a killed process cannot block it;
    os.urandom rather than the secrets module, which imports random and so
    breaks under an application's own random.py)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(16):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a unique temp file beside {path}")
