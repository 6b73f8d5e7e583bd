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

_THREADS = "\n\n    Thread-safety: the recorder's own thread only; tensors may be shared between threads."


def _method(name: str, planner):
    def method(self, *args, **kwargs):
        return self.record_op(name, planner, args, kwargs)
    method.__name__ = name
    method.__qualname__ = f"Recorder.{name}"
    method.__doc__ = (planner.__doc__ or "").rstrip() + _THREADS
    method.__signature__ = op_signature(planner)
    method.__wrapped_planner__ = planner
    return method


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

OpMethods = type("OpMethods", (), {
    "__doc__": "Every registered operation as a method (see op_methods.pyi).",
    "__slots__": (),
    **{name: _method(name, fn) for name, fn in OPS.items()},
})
