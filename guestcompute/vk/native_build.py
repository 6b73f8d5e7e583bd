"""Building the C command interpreter (see command_stream.py).

Run at install time (``make`` runs ``guestcompute build-native``); never
while recording. The result is a plain shared library named after the hash
of its source, written next to the source when that folder is writable
(in-place and editable installs) and into the cache directory otherwise.
Without a C compiler nothing is built and recording takes the Python walker.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import UnsupportedError
from .command_stream import SOURCE, library_dirs, library_name, open_library

_FLAGS = ["-O2", "-std=c99", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror"]


def find_compiler():
    """``$CC``, else the first of cc, gcc, clang on PATH; None without one."""
    try:
        env = shlex.split(os.environ.get("CC", ""))
    except ValueError as e:
        raise RuntimeError(f"CC={os.environ['CC']!r} is not a command line ({e})") from None
    if env:
        return env
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def _check_loads(path: str, compiler: list) -> None:
    """A compiler that exits 0 may still leave no library (``CC=true``) or
    one for another platform: the build only replaces a good library with
    one this process can load and that exports what the walker calls."""
    try:
        open_library(Path(path))
    except UnsupportedError as e:
        raise RuntimeError(f"{shlex.join(compiler)!r} exited 0 but what it built is not a usable command "
                           f"interpreter: {e}; nothing was installed") from None


def build(dest: Path = None) -> Path:
    """Compile the interpreter; returns the library's path. Raises
    RuntimeError without a compiler, when compilation fails, and when the
    result does not load; a library already installed is then kept."""
    compiler = find_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (set CC, or install cc/gcc/clang); recording will use the "
                           "Python walker")
    folders = [dest] if dest is not None else library_dirs()
    errors = []
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Compile to a temp name in the same folder, then rename: a
            # process loading the library never sees half a file.
            fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=folder)
            os.close(fd)
        except OSError as e:
            errors.append(f"{folder}: {e}")
            continue
        try:
            try:
                done = subprocess.run([*compiler, *_FLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True)
            except OSError as e:
                raise RuntimeError(f"cannot run the C compiler {shlex.join(compiler)!r} ({e.strerror or e}); "
                                   "set CC to a working compiler") from None
            if done.returncode != 0:
                raise RuntimeError(f"compiling {SOURCE.name} failed:\n{done.stderr.strip()}")
            _check_loads(tmp, compiler)
            path = folder / library_name()
            os.replace(tmp, path)
            for old in folder.glob("command_interpreter-*"):     # builds of earlier sources
                if old != path:
                    with contextlib.suppress(OSError):
                        old.unlink()
            return path
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise RuntimeError("no writable folder for the command interpreter: " + "; ".join(errors))
