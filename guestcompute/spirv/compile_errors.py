"""A GLSL compiler's complaints about a user kernel, as file:line:column
with the offending source line under each.

glslc (and glslangValidator) report ``file:line: error: 'token' : what``
with no column. The column is where the quoted token first appears on that
line of the source (the kernel's own text or an included file's, from
:class:`~guestcompute.spirv.glsl_source.KernelSource`); without a token on
the line it is left out and no caret is drawn.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import KernelCompileError

# glslc: "file:12: error: 'x' : what"; glslangValidator: "ERROR: file:12: 'x' : what".
_GLSLC = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<kind>error|warning): (?P<what>.*)$")
_GLSLANG = re.compile(r"^(?P<kind>ERROR|WARNING): (?P<file>.+?):(?P<line>\d+): (?P<what>.*)$")
_TOKEN = re.compile(r"^'([^']+)'")


@dataclass(frozen=True)
class Diagnostic:
    """One message: where (``file``, 1-based ``line``, ``column`` or None),
    ``severity`` ("error" / "warning"), ``message`` and ``source_line``."""
    file: str
    line: int
    column: int | None
    severity: str
    message: str
    source_line: str | None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" + (f":{self.column}" if self.column else "")
        text = f"{where}: {self.severity}: {self.message}"
        if self.source_line is None:
            return text
        gutter = f"{self.line:>5} | "
        text += f"\n{gutter}{self.source_line}"
        if self.column:
            lead = "".join(c if c == "\t" else " " for c in self.source_line[:self.column - 1])
            text += f"\n{' ' * (len(gutter) - 2)}| {lead}^"
        return text


def _column(source_line: str | None, message: str) -> int | None:
    m = _TOKEN.match(message)
    if source_line is None or m is None:
        return None
    at = source_line.find(m.group(1))
    return at + 1 if at >= 0 else None


def diagnostics(output: str, source) -> list:
    """The messages in compiler ``output`` about ``source`` (a KernelSource).
    A file the source does not know (the compiler's temporary file) is the
    kernel itself."""
    found = []
    for raw in output.splitlines():
        m = _GLSLC.match(raw) or _GLSLANG.match(raw)
        if m is None:
            continue
        file = m.group("file") if m.group("file") in source.lines else source.name
        line = int(m.group("line"))
        lines = source.lines.get(file, ())
        text = lines[line - 1] if 0 < line <= len(lines) else None
        what = m.group("what").strip()
        found.append(Diagnostic(file, line, _column(text, what), m.group("kind").lower(), what, text))
    return found


def compile_error(output: str, source, tool: str) -> KernelCompileError:
    """A KernelCompileError for ``source`` from the compiler's ``output``:
    its errors (then warnings) with their source lines, or the raw output
    where none could be read."""
    found = diagnostics(output, source)
    errors = [d for d in found if d.severity == "error"] or found
    if errors:
        body = "\n".join(str(d) for d in errors)
    else:
        body = output.strip() or f"{tool} failed without a message"
    return KernelCompileError(f"kernel {source.name} failed to compile; fix the source ({tool} says):\n{body}",
                              errors, output, tool)
