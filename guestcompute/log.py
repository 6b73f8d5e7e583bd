"""guestcompute's warnings (a corrupt cache file ignored, a cache directory
that cannot be written...) go to the standard logger named "guestcompute".

The ``logging`` module is looked up when a warning is emitted, never at
import: an application may keep its own ``logging.py`` beside its script,
and then that file is what ``import logging`` finds in the application's
process. guestcompute must work there all the same, so when the module found
has no working ``getLogger`` the warning is written to ``sys.stderr``.
"""
from __future__ import annotations

import sys

LOGGER_NAME = "guestcompute"


class _Log:
    """Stands in for ``logging.getLogger("guestcompute")``; each call finds
    the logger afresh (``logging`` returns the same object every time)."""

    def warning(self, msg: str, *args) -> None:
        self._emit("warning", msg, args)

    def info(self, msg: str, *args) -> None:
        self._emit("info", msg, args)

    def debug(self, msg: str, *args) -> None:
        self._emit("debug", msg, args)

    def exception(self, msg: str, *args) -> None:
        """A warning with the traceback of the exception being handled."""
        import traceback
        self._emit("warning", msg + "\n%s", args + (traceback.format_exc().rstrip(),))

    @staticmethod
    def _emit(level: str, msg: str, args: tuple) -> None:
        logger = _standard_logger()
        if logger is not None:
            getattr(logger, level)(msg, *args)
        elif level == "warning":
            try:
                text = msg % args if args else msg
            except (TypeError, ValueError):
                text = f"{msg} {args}"
            print(text, file=sys.stderr)


def _standard_logger():
    """The stdlib logger, or None when ``logging`` is not the stdlib's."""
    try:
        import logging
        logger = logging.getLogger(LOGGER_NAME)
    except Exception:       # shadowed (no getLogger) or broken: never the host's problem
        return None
    if not all(callable(getattr(logger, level, None)) for level in ("warning", "info", "debug")):
        return None
    return logger


log = _Log()
