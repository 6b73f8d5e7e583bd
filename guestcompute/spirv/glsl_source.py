"""A user kernel's GLSL as the compiler sees it: ``#include``\\ s expanded,
``defines`` set, and ``#line`` markers naming every piece's file.

Why expand here rather than let glslc resolve includes: the expanded text
is exactly what the compiler sees, so it alone is the SPIR-V cache key (an
edited header changes it, the same text never recompiles), the list of
files read is what hot reload watches, and the ``#line "file"`` markers
make the compiler's messages name the user's files and lines, which
:mod:`guestcompute.spirv.compile_errors` turns back into source lines.

Rules:

- ``#include "name"`` looks beside the including file first, then in
  ``include_dirs`` in order; ``#include <name>`` only in ``include_dirs``.
  An include is expanded where it stands, whatever ``#if`` surrounds it, so
  a missing file is an error even inside a disabled block. A file that
  includes itself, directly or not, is an error naming the chain.
- ``defines={"NAME": value}`` become ``#define NAME value`` lines after
  ``#version`` (``True`` defines ``1``; ``None`` defines the name empty).
- Text given as a string is named ``<kernel 3f2a91c0>`` (its SHA-256) in
  messages; a file by the path it was given as.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidArgumentError

# The extension that lets ``#line`` carry a file name (glslang, hence glslc).
_LINE_EXTENSION = "#extension GL_GOOGLE_cpp_style_line_directive : require"
_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)\s*(?://.*)?$')
_VERSION = re.compile(r"^\s*#\s*version\b")
_DEFINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class IncludeError(Exception):
    """An ``#include`` that cannot be expanded: (file, line, message)."""

    def __init__(self, file: str, line: int, message: str):
        super().__init__(f"{file}:{line}: {message}")
        self.file, self.line, self.message = file, line, message


@dataclass(frozen=True)
class KernelSource:
    """The expanded ``text`` of a kernel, the ``name`` it is shown by,
    the ``files`` it was read from (the kernel's own first, when it is one)
    and each piece's lines by the name the compiler reports (``lines``)."""
    text: str
    name: str
    files: tuple = ()
    lines: dict = field(default_factory=dict, compare=False)


def text_name(text: str) -> str:
    """How GLSL given as a string is named in messages."""
    return f"<kernel {hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:8]}>"


def display_name(path: Path) -> str:
    """A path as messages show it (forward slashes; no quotes, which would end the ``#line`` string)."""
    return path.as_posix().replace('"', "'")


def looks_like_path(source) -> bool:
    """Whether ``source`` names a kernel file rather than holding GLSL: a
    path object, or a string of one line (GLSL needs a ``#version`` line
    of its own, so a one-line string cannot be a kernel)."""
    return isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source)


def checked_defines(defines) -> list:
    """``defines`` as [(name, value text)]; InvalidArgumentError for a bad one."""
    if defines is None:
        return []
    if not isinstance(defines, dict):
        raise InvalidArgumentError(f"defines must be a dict of NAME -> value, got {type(defines).__name__}")
    out = []
    for k, v in defines.items():
        if not isinstance(k, str) or not _DEFINE_NAME.match(k):
            raise InvalidArgumentError(f"defines: {k!r} is not a preprocessor name")
        if v is None:
            value = ""
        elif isinstance(v, bool):
            value = "1" if v else "0"
        elif isinstance(v, (int, float, str)):
            value = str(v)
        else:
            raise InvalidArgumentError(f"defines: the value of {k} must be a number, a string, True/False "
                                       f"or None, got {type(v).__name__}")
        if "\n" in value:
            raise InvalidArgumentError(f"defines: the value of {k} spans lines")
        out.append((k, value))
    return out


def checked_dirs(include_dirs) -> tuple:
    """``include_dirs`` as Paths; InvalidArgumentError for one that is not a directory."""
    if include_dirs is None:
        return ()
    if isinstance(include_dirs, (str, os.PathLike)):
        include_dirs = (include_dirs,)
    dirs = tuple(Path(d) for d in include_dirs)
    for d in dirs:
        if not d.is_dir():
            raise InvalidArgumentError(f"include_dirs: {d.as_posix()} is not a directory")
    return dirs


class _Expander:
    def __init__(self, include_dirs: tuple):
        self.dirs, self.files, self.lines, self.out = include_dirs, [], {}, []

    def find(self, name: str, quoted: bool, here: Path | None, where: tuple) -> Path:
        candidates = ([here / name] if quoted and here is not None else []) + [d / name for d in self.dirs]
        for c in candidates:
            if c.is_file():
                return c
        looked = ", ".join(display_name(c.parent) for c in candidates) or "no include_dirs given"
        raise IncludeError(*where, f"#include {'%r' % name}: not found (looked in {looked})")

    def piece(self, text: str, name: str, here: Path | None, chain: tuple, first: int = 1) -> None:
        """Lines ``first``.. of ``text`` (1-based), includes expanded, after a marker naming them."""
        lines = text.splitlines()
        self.lines[name] = lines
        self.out.append(f'#line {first} "{name}"')
        for number, line in enumerate(lines[first - 1:], first):
            m = _INCLUDE.match(line)
            if m is None:
                self.out.append(line)
                continue
            path = self.find(m.group(1) or m.group(2), m.group(1) is not None, here, (name, number))
            resolved = path.resolve()
            if resolved in chain:
                raise IncludeError(name, number, f"#include {display_name(path)!r} includes itself "
                                   f"({' -> '.join(p.name for p in chain + (resolved,))})")
            self.files.append(path)
            self.piece(read_text(path, (name, number)), display_name(path), path.parent, chain + (resolved,))
            self.out.append(f'#line {number + 1} "{name}"')


def read_text(path: Path, where: tuple | None = None) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        message = f"{display_name(path)} is not UTF-8 text ({e.reason} at byte {e.start})"
    except OSError as e:
        message = f"{display_name(path)} cannot be read ({e.strerror})"
    if where is None:
        raise InvalidArgumentError(f"kernel file {message}")
    raise IncludeError(*where, message)


def expand(source, defines=None, include_dirs=None) -> KernelSource:
    """``source`` (GLSL text, or a file path: see :func:`looks_like_path`)
    with its includes expanded and ``defines`` set. Text without includes
    or defines comes back unchanged. Raises InvalidArgumentError for bad
    arguments or an unreadable kernel file, IncludeError for an include."""
    define_lines = [f"#define {k} {v}".rstrip() for k, v in checked_defines(defines)]
    dirs = checked_dirs(include_dirs)
    if looks_like_path(source):
        path = Path(source)
        if not path.is_file():
            raise InvalidArgumentError(f"kernel file {display_name(path)} does not exist (GLSL given as a string "
                                       "must hold the kernel's lines)")
        text, name, here, files = read_text(path), display_name(path), path.parent, [path]
    else:
        text, name, here, files = source, text_name(source), None, []
    if not define_lines and not files and not any(_INCLUDE.match(line) for line in text.splitlines()):
        return KernelSource(text, name, (), {name: text.splitlines()})
    # #version must come first: the extension, the defines and the first
    # marker go after it (before it only comments may stand).
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if _VERSION.match(line)), -1)
    ex = _Expander(dirs)
    ex.out += lines[:at + 1] + [_LINE_EXTENSION] + define_lines
    ex.piece(text, name, here, (files[0].resolve(),) if files else (), first=at + 2)
    return KernelSource("\n".join(ex.out) + "\n", name, tuple(files + ex.files), ex.lines)
