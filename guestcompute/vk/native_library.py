"""The built C command interpreter as Python calls it: every function it
exports, as a cffi function pointer of the vulkan package's ffi (a call
costs a few hundred nanoseconds, and no C declarations are parsed at
import time), and the struct layouts it reports.

ctypes only opens the file and finds the symbols (cffi's own dlopen would
need declarations). Loaded once per library file (command_stream.load).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from vulkan import ffi

from ..errors import UnsupportedError

# gc_ name: its C type. Pointers the walker reads are void * here, so the
# cffi objects Python holds (arrays, handles) pass as they are.
_FUNCTIONS = {
    "gc_record": "unsigned long long (*)(void *, void *, void *, void *, void *, unsigned long long)",
    "gc_tracker_new": "void *(*)(uint64_t, uint64_t, uint64_t, uint64_t)",
    "gc_tracker_free": "void (*)(void *)",
    "gc_tracker_needs_barrier": "int (*)(void *, uint64_t *, uint64_t, uint64_t *, uint64_t)",
    "gc_tracker_touch": "int (*)(void *, uint64_t *, uint64_t, uint64_t *, uint64_t, uint64_t, uint64_t)",
    "gc_tracker_after_barrier": "void (*)(void *)",
    "gc_tracker_keys": "uint64_t (*)(void *, int, uint64_t *, uint64_t)",
}
_LAYOUTS = ("gc_dispatch_fields", "gc_tracker_fields")


class _CField(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("offset", ctypes.c_uint), ("size", ctypes.c_uint)]


class NativeLibrary:
    """The functions of one library file as attributes named without their
    ``gc_`` prefix (``record``, ``tracker_new``, ...); calling the object
    calls gc_record. UnsupportedError when the file does not load or lacks
    an export (an empty or foreign file, a build of an older source)."""

    def __init__(self, path: Path):
        try:
            self._lib = lib = ctypes.CDLL(str(path))
            symbols = {name: getattr(lib, name) for name in (*_FUNCTIONS, *_LAYOUTS)}
        except (OSError, AttributeError) as e:
            raise UnsupportedError(f"the command interpreter {path} does not load ({e})") from None
        for name, ctype in _FUNCTIONS.items():
            setattr(self, name[3:], ffi.cast(ctype, ctypes.cast(symbols[name], ctypes.c_void_p).value))
        for name in _LAYOUTS:
            symbols[name].restype, symbols[name].argtypes = ctypes.POINTER(_CField), []
        self.path = path

    def __call__(self, *args):
        return self.record(*args)

    def layout(self, struct: str) -> tuple:
        """The fields of ``struct`` ("dispatch" or "tracker") as the library
        lays them out: ((name, offset, size), ...), then the struct's size
        (for the tracker, the size of the part Python reads)."""
        table, out, i = getattr(self._lib, f"gc_{struct}_fields")(), [], 0
        while table[i].name is not None:
            out.append((table[i].name.decode(), table[i].offset, table[i].size))
            i += 1
        return tuple(out), table[i].offset
