"""The recorder's op methods: one per registered operation, made when this
module is imported, with the op's own signature (less ``ctx``) and docstring.

``op_methods.pyi`` beside this file is the same surface written out, for
grep, IDEs and type checkers; ``python -m guestcompute stubs`` regenerates
it, and a test keeps it equal to what this module builds.
"""
from __future__ import annotations

import inspect

from .. import ops  # noqa: F401  (importing the package registers every op)
from ..ops.base import registered_ops

THREADS_NOTE = "\n\n    Thread-safety: the recorder's own thread only; tensors may be shared between threads."


def op_docstring(planner) -> str:
    """The docstring of an op's method: the planner's, plus the thread rule."""
    return (planner.__doc__ or "").rstrip() + THREADS_NOTE


def op_signature(planner) -> inspect.Signature:
    """The planner's signature with ``self`` in place of ``ctx``."""
    sig = inspect.signature(planner)
    params = list(sig.parameters.values())
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sig.replace(parameters=[self_param] + params[1:])


def close_matches(name: str) -> list:
    """Up to three op names resembling ``name``, for "did you mean": those
    within a third of its length in edits, nearest first. (Not difflib: it
    imports heapq, which an application's own heapq.py can shadow.)"""
    most = max(1, len(name) // 3)
    near = sorted((edit_distance(name, op), op) for op in OPS)
    return [op for d, op in near if d <= most][:3]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


OPS: dict = dict(sorted(registered_ops().items()))



class OpMethods:
    """Every registered operation as a Recorder method: added by recorder.py
    at import, typed in op_methods.pyi."""
    __slots__ = ()


# -- the checked-in stub ----------------------------------------------------------

STUB_HEADER = '''"""Every op method of the Recorder, for grep, IDEs and type checkers.

Generated from the op registry by ``python -m guestcompute.recording.op_methods``;
tests/recording/test_op_surface.py keeps it equal to what op_methods.py builds at import.
"""
from typing import Any


class OpMethods:
'''


def _stub_parameters(planner) -> str:
    """The planner's parameters as stub source: names, kinds and whether
    each has a default (``= ...``), without annotations."""
    out, star_done = ["self"], False
    for p in list(inspect.signature(planner).parameters.values())[1:]:
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            out.append("*")
            star_done = True
        out.append(p.name if p.default is p.empty else f"{p.name}=...")
    return ", ".join(out)


def _stub_docstring(doc: str) -> str:
    lines = inspect.cleandoc(doc).splitlines() or [""]
    body = "\n".join(("        " + line).rstrip() for line in lines)
    return f'        """\n{body}\n        """'


def stub_source() -> str:
    """The text of ``op_methods.pyi`` for the ops registered now."""
    parts = [STUB_HEADER]
    for name, planner in OPS.items():
        parts.append(f"    def {name}({_stub_parameters(planner)}) -> Any:\n"
                     f"{_stub_docstring(op_docstring(planner))}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    from pathlib import Path
    Path(__file__).with_suffix(".pyi").write_text(stub_source())
