"""``debugPrintfEXT`` in user kernels without the validation layer: the
calls are rewritten, before compiling, into appends to a print log the
library owns (:mod:`guestcompute.recording.print_log`), so a kernel keeps
the portable GLSL syntax and its prints reach the host on any driver.

Each call ``debugPrintfEXT("fmt", a, b);`` becomes one statement on the
same line (error lines stay where they were) that reserves ``2 + 5 * args``
words of the log with one atomic add and writes the format's number, the
argument count and, per argument, a type tag and up to four 32-bit
components. Arguments may be float, int, uint or bool scalars or vectors
(2-4 components); any other type is a compile error at the call's line.
The log is one more storage buffer, bound after the kernel's own
bindings. A kernel compiled with ``prints=False`` has its calls removed
instead: it is the same code as one that never printed.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from ..errors import KernelCompileError

CALL = "debugPrintfEXT"
ARG_WORDS = 5                   # a tag and four components per argument
HEADER_WORDS = 2                # the format's number and the argument count
_EXTENSION = re.compile(r"^\s*#\s*extension\s+GL_EXT_debug_printf\b.*$", re.M)
_BINDING = re.compile(r"\bbinding\s*=\s*(\d+)")
_DIRECTIVE = re.compile(r"^\s*#\s*(version|extension)\b")
_LINE_MARKER = re.compile(r'^\s*#\s*line\s+(\d+)(?:\s+"([^"]*)")?')


@dataclass(frozen=True)
class PrintCall:
    """One rewritten call: its format string and argument count."""
    format: str
    args: int


def format_id(key: str, index: int) -> int:
    """The number the records of a kernel's ``index``-th call carry: from
    the kernel's text key and the call's position, so the same kernel
    compiles to the same text (one SPIR-V cache entry) in every context."""
    return zlib.crc32(f"{key}:{index}".encode()) & 0x7FFFFFFF


def _helpers(binding: int) -> str:
    """The log's declaration and the overloads that write one argument.
    Tags: kind (1 float, 2 int, 3 uint, 4 bool) plus 16 * components."""
    puts = []
    for kind, (scalar, vec, bits) in enumerate((("float", "vec", "floatBitsToUint"), ("int", "ivec", "uint"),
                                                ("uint", "uvec", "uint"), ("bool", "bvec", "uint")), 1):
        puts.append(f"void gcPrintPut(uint at, {scalar} v) {{ gcPrintWords[at] = {kind + 16}u; "
                    f"gcPrintWords[at + 1u] = {bits}(v); }}")
        for n in (2, 3, 4):
            body = " ".join(f"gcPrintWords[at + {i + 1}u] = {bits}(v[{i}]);" for i in range(n))
            puts.append(f"void gcPrintPut(uint at, {vec}{n} v) {{ gcPrintWords[at] = {kind + 16 * n}u; {body} }}")
    # The log: words reserved so far, prints that found no room, room (words).
    return "\n".join([
        f"layout(std430, binding = {binding}) buffer GcPrintLog {{ uint gcPrintUsed; uint gcPrintDropped; "
        "uint gcPrintRoom; uint gcPrintWords[]; };",
        "uint gcPrintBegin(uint words) {",
        "  uint at = atomicAdd(gcPrintUsed, words);",
        "  if (at + words > gcPrintRoom) { atomicAdd(gcPrintDropped, 1u); return 0xFFFFFFFFu; }",
        "  return at;",
        "}",
        *puts])


def _string_end(text: str, i: int) -> int:
    """Index after the string literal starting at ``text[i] == '"'``."""
    j = i + 1
    while j < len(text) and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _call_arguments(text: str, open_at: int) -> tuple:
    """(argument texts, index after the closing parenthesis) of a call whose
    '(' is at ``open_at``."""
    args, depth, start, i = [], 0, open_at + 1, open_at + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[start:i])
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
        i += 1
    raise ValueError("unclosed call")


def _unquote(literal: str) -> str:
    body = literal.strip()
    if len(body) < 2 or body[0] != '"' or body[-1] != '"':
        raise ValueError("the first argument must be a string literal")
    return bytes(body[1:-1], "utf-8").decode("unicode_escape")


def _code_mask(text: str) -> list:
    """True for each character outside comments and string literals."""
    mask, i = [True] * len(text), 0
    while i < len(text):
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = len(text) if j < 0 else j + 2
        elif text[i] == '"':
            j = _string_end(text, i)
        else:
            i += 1
            continue
        for k in range(i, min(j, len(text))):
            if text[k] != "\n":
                mask[k] = False
        i = j
    return mask


def has_prints(text: str) -> bool:
    return CALL in text


def _calls(text: str, mask: list):
    """(start, end, format, args) of every debugPrintfEXT call statement
    (``mask``: :func:`_code_mask` of ``text``)."""
    for m in re.finditer(rf"\b{CALL}\s*\(", text):
        if not mask[m.start()]:
            continue
        args, end = _call_arguments(text, m.end() - 1)
        semi = re.compile(r"\s*;").match(text, end)
        if semi is None:
            raise ValueError(f"{CALL}(...) must be a statement of its own")
        yield m.start(), semi.end(), _unquote(args[0]), [a.strip() for a in args[1:]]


def _line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def rewrite(text: str, name: str, ids, enabled: bool = True) -> tuple:
    """(GLSL with the calls rewritten — or removed when not ``enabled`` —,
    the PrintCall of each call, in order). ``ids(k)`` is the number the
    k-th call's records carry. Raises KernelCompileError for a call it
    cannot read."""
    out, calls, pos, start = [], [], 0, 0
    mask = _code_mask(text)
    try:
        for start, end, fmt, args in _calls(text, mask):
            newlines = "\n" * text.count("\n", start, end)
            out.append(text[pos:start])
            if enabled:
                words = HEADER_WORDS + ARG_WORDS * len(args)
                puts = "".join(f" gcPrintPut(gcAt + {HEADER_WORDS + ARG_WORDS * k}u, ({a}));"
                               for k, a in enumerate(args))
                out.append(f"{{ uint gcAt = gcPrintBegin({words}u); if (gcAt != 0xFFFFFFFFu) {{ "
                           f"gcPrintWords[gcAt] = {ids(len(calls))}u; gcPrintWords[gcAt + 1u] = {len(args)}u;"
                           f"{puts} }} }}{newlines}")
                calls.append(PrintCall(fmt, len(args)))
            else:
                out.append(f";{newlines}")
            pos = end
    except ValueError as e:
        raise KernelCompileError(f"kernel {name}: the {CALL} call at line {_line_of(text, start)} of the "
                                 f"compiled text could not be read ({e})") from None
    out.append(text[pos:])
    body = _EXTENSION.sub("", "".join(out))
    if not calls:
        return body, ()
    bindings = [int(m.group(1)) for m in _BINDING.finditer(text) if mask[m.start()]]
    return _with_helpers(body, max(bindings, default=-1) + 1), tuple(calls)


def _with_helpers(text: str, binding: int) -> str:
    """``text`` with the log's helpers after its leading #version and
    #extension lines, and a #line that gives the lines after them their
    numbers back (following the #line markers of expanded includes)."""
    lines = text.split("\n")
    mask_lines = _code_mask(text)
    at, number, file, offset = 0, 1, None, 0
    for i, line in enumerate(lines):
        code = "".join(c for c, keep in zip(line, mask_lines[offset:offset + len(line)]) if keep).strip()
        offset += len(line) + 1
        marker = _LINE_MARKER.match(line)
        if marker:
            number, file = int(marker.group(1)), marker.group(2) or file
            continue
        if code and not code.startswith("#"):
            break
        if _DIRECTIVE.match(line):
            at = i + 1
            resume = (number + 1, file)
        number += 1
    if at == 0:
        resume = (1, file)
    marker = f'#line {resume[0]}' + (f' "{resume[1]}"' if resume[1] is not None else "")
    return "\n".join(lines[:at] + [_helpers(binding), marker] + lines[at:])
