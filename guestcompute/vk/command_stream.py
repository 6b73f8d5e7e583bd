"""Command streams: the commands of planned dispatches, recorded in batches.

A cffi call costs about a third of a microsecond on the hosts measured, and
a dispatch needs three or four of them (bind, push descriptors, push
constants, dispatch). So the recorder does not call Vulkan per command: it
appends to a list — a prebuilt :class:`DispatchCommand`, or the words of a
global memory barrier — and hands the list over in one call when its block ends or when something else must record in
order (a host hook, a program replay, a timestamp, a label, an upload; see
``Recorder.command_buffer``).

Two walkers record a stream, with the same result command for command:

- the C command interpreter (``native/command_interpreter.c``), compiled at
  install time (``make`` does it; ``guestcompute build-native`` otherwise)
  and called through cffi function pointers (native_library.py), so it is
  a plain shared library that does not depend on the Python version;
- a Python walker, the fallback where no compiler was available, which
  reads the same fields (as Python objects) and calls the same device
  functions.

``GUESTCOMPUTE_NATIVE`` picks: unset or ``auto`` (the C walker when built),
``off`` (the Python walker), ``require`` (the C walker, else
UnsupportedError when a context is made).

Both skip a pipeline bind and a descriptor push when what is bound already
matches (``gc_bound``, cleared by ``CommandStream.forget_bound``).

A command is described once, by ``FIELDS``: the C struct is packed from the
Python walker's tuple of the same fields, and the loader refuses a library
whose gc_dispatch differs. A command built with hazard keys is checked, as
the walker reaches it, against the stream's tracker (``sync.HazardTracker``
for the Python walker, ``native_tracker.NativeTracker`` for the C one, the
same rule): on a hazard the walker records the barrier before it. Every
barrier a walker records clears the tracker.

Measured when batches came (lavapipe host, µs per ``rec.add`` on distinct
buffer sets, 64 per frame, 2026-12-03): 7.38 with a cffi call per command,
4.70 through the Python walker, 3.38 through the C interpreter, against
1.42 for a raw cffi loop issuing the same commands.

Thread-safety: a stream belongs to one recorder (one thread) and holds
everything a walk writes (bound state, the Python walker's barrier struct);
the interpreter is shared by every thread and only read.
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
import sys
from collections import namedtuple
from pathlib import Path
from typing import NamedTuple

import vulkan as vk
from vulkan import ffi

from ..errors import UnsupportedError
from ..log import log
from ..paths import cache_root
from .native_library import NativeLibrary
from .native_tracker import NativeTracker, tracker_offsets
from .sync import GUEST_ACCESS, GUEST_STAGES, HazardTracker

# Stream words: four more follow each (src stages, dst stages, src access, dst access).
BARRIER = 1
BARRIER_COVERING = 2   # a barrier whose sources, when it has any, also cover the tracked work
TRACK_HAZARDS = 1      # DispatchCommand flag: the walker checks and tracks its hazard keys
_BIND = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_PUSH_STAGE = vk.VK_SHADER_STAGE_COMPUTE_BIT
SOURCE = Path(__file__).with_name("native") / "command_interpreter.c"
ENV = "GUESTCOMPUTE_NATIVE"

_FUNCTIONS = ("vkCmdBindPipeline", "vkCmdPushDescriptorSetKHR", "vkCmdBindDescriptorSets",
              "vkCmdPushConstants", "vkCmdDispatch", "vkCmdDispatchIndirect", "vkCmdPipelineBarrier")


class Field(NamedTuple):
    """One field of gc_dispatch. ``ctype``: ``u64`` or ``u32``. ``kind``:
    ``int`` (both walkers hold the same integer), ``pointer`` (the Python
    walker holds a cffi object or None, the C struct its address or 0) or
    ``keys`` (the Python walker holds a tuple of 64-bit hazard keys, the C
    struct the address of a uint64_t array of them)."""
    name: str
    ctype: str
    kind: str
    meaning: str


# The one description of a dispatch command: the C struct gc_dispatch has
# these fields in this order (the loader checks it against the library's
# gc_dispatch_fields), and the Python walker reads a tuple of them in this order.
FIELDS = (
    Field("pipeline", "u64", "pointer", "VkPipeline"),
    Field("layout", "u64", "pointer", "VkPipelineLayout"),
    Field("descriptors", "u64", "int", "identity of the descriptor entry: a rebind is skipped when unchanged"),
    Field("descriptor_writes", "u64", "pointer", "VkWriteDescriptorSet array for push descriptors, else none"),
    Field("descriptor_set", "u64", "pointer", "VkDescriptorSet[1] of a bound set, else none"),
    Field("push", "u64", "pointer", "push-constant bytes, or none"),
    Field("indirect_buffer", "u64", "pointer", "VkBuffer for vkCmdDispatchIndirect, or none"),
    Field("indirect_offset", "u64", "int", "byte offset of the indirect arguments"),
    Field("hazard_reads", "u64", "keys", "hazard keys the dispatch reads"),
    Field("hazard_writes", "u64", "keys", "hazard keys the dispatch writes"),
    Field("descriptor_write_count", "u32", "int", "entries in descriptor_writes"),
    Field("push_size", "u32", "int", "bytes of push constants, 0 for none"),
    Field("group_x", "u32", "int", "workgroups along x (direct dispatches; 0 for indirect)"),
    Field("group_y", "u32", "int", "workgroups along y"),
    Field("group_z", "u32", "int", "workgroups along z"),
    Field("flags", "u32", "int", "TRACK_HAZARDS, or 0"),
    Field("hazard_read_count", "u32", "int", "keys in hazard_reads"),
    Field("hazard_write_count", "u32", "int", "keys in hazard_writes"),
)

_SIZES = {"u64": 8, "u32": 4}


def field_offsets() -> tuple:
    """(name, offset, size) of each of FIELDS as a C compiler lays them out
    (natural alignment), and the struct's size."""
    out, offset, align = [], 0, 1
    for f in FIELDS:
        size = _SIZES[f.ctype]
        offset = -(-offset // size) * size
        out.append((f.name, offset, size))
        offset += size
        align = max(align, size)
    return tuple(out), -(-offset // align) * align


PyDispatch = namedtuple("PyDispatch", [f.name for f in FIELDS])
PyDispatch.__doc__ = "A dispatch command as the Python walker reads it: FIELDS' values, in order."
# struct's native mode pads like the C compiler: the bytes of gc_dispatch.
_LAYOUT = struct.Struct("@" + "".join("Q" if f.ctype == "u64" else "I" for f in FIELDS))
_POINTERS = tuple(i for i, f in enumerate(FIELDS) if f.kind == "pointer")
_KEYS = tuple(i for i, f in enumerate(FIELDS) if f.kind == "keys")
_WORDS = field_offsets()[1] // 8


def _address(cdata) -> int:
    return int(ffi.cast("uintptr_t", cdata))


def c_words(py: PyDispatch) -> tuple:
    """The gc_dispatch struct of ``py`` as a uint64_t array (the vulkan
    package's ffi: no C declarations are parsed at import time), and the
    array of hazard keys it points into (to keep alive with it)."""
    values = list(py)
    for i in _POINTERS:
        v = values[i]
        values[i] = 0 if v is None else int(ffi.cast("uintptr_t", v))
    keys = [k for i in _KEYS for k in values[i]]
    key_array = ffi.new("uint64_t[]", keys) if keys else None
    at = _address(key_array) if keys else 0
    for i in _KEYS:           # each field's keys follow the previous field's in the one array
        n = len(values[i])
        values[i] = at if n else 0
        at += 8 * n
    words = ffi.new("uint64_t[]", _WORDS)
    ffi.memmove(words, _LAYOUT.pack(*values), _LAYOUT.size)
    return words, key_array


class DispatchCommand:
    """One dispatch's commands, built once per planned dispatch: ``py_fields``
    (a PyDispatch) for the Python walker and ``fields`` (gc_dispatch, made
    from it) at ``address`` for the C walker. ``push`` and ``groups`` are
    the Dispatch's own objects, so the recorder can tell (by identity) that
    they were not replaced.

    ``reads`` / ``writes``: the dispatch's hazard keys (unsigned 64-bit
    integers). With them (even empty) the walker checks the dispatch
    against the stream's tracker and records a barrier before it when
    needed; without (None) it records the dispatch as it comes."""
    __slots__ = ("fields", "address", "push", "groups", "py_fields", "_descriptors", "_keys")

    def __init__(self, pipe, desc, push: bytes, groups, indirect, reads=None, writes=None):
        # The entry (its write array) lives as long as this command, which
        # the stream holds until the command is recorded.
        self._descriptors = desc
        self.push, self.groups = push, groups
        push_bytes = ffi.new("char[]", bytes(push)) if push else None
        if indirect is not None:
            buffer, offset, (gx, gy, gz) = indirect[0].handle, indirect[1], (0, 0, 0)
        else:
            buffer, offset, (gx, gy, gz) = None, 0, groups
        bound_set = desc.pset is not None
        tracked = reads is not None or writes is not None
        reads, writes = tuple(reads or ()), tuple(writes or ())
        # Positional, in FIELDS order (keywords cost a microsecond here).
        py = self.py_fields = PyDispatch(
            pipe.handle, pipe.layout, id(desc), None if bound_set else desc.writes, desc.pset, push_bytes, buffer,
            offset, reads, writes, 0 if bound_set else desc.count, len(push) if push else 0, gx, gy, gz,
            TRACK_HAZARDS if tracked else 0, len(reads), len(writes))
        f, self._keys = c_words(py)
        self.fields = f
        self.address = _address(f)


class CommandStream:
    """What waits for one command buffer, and what is bound in it.

    ``words`` holds DispatchCommand objects (not just their addresses: the
    stream keeps them, and what they point to, alive until recorded) and the
    integers of barriers. ``bound``: what is bound (pipeline, layout,
    descriptors): gc_bound for the C walker, the handles for the Python one.
    ``tracker``: the hazard tracker the walker runs for dispatches with
    hazard keys (sync.HazardTracker, or native_tracker.NativeTracker for
    the C walker); read or change it only with nothing waiting."""
    __slots__ = ("words", "append", "bound", "barrier_struct", "tracker", "_interpreter", "_cmd")

    def __init__(self, interpreter: "CommandInterpreter", cmd, barrier_struct, tracker):
        self.words: list = []
        self.append = self.words.append      # the recorder appends DispatchCommands
        self.bound = None              # gc_bound, made by the first walk (a recording may have none)
        # A VkMemoryBarrier the Python walker fills in: the recorder's own
        # (one per stream, so threads never share it).
        self.barrier_struct = barrier_struct
        self.tracker = tracker
        self._interpreter = interpreter
        self._cmd = cmd

    def barrier(self, src_stage: int, dst_stage: int, src_access: int, dst_access: int,
                covering: bool = False) -> None:
        """A global memory barrier after the commands waiting; recording it
        clears the tracker. ``covering``: when it has source stages, widen
        them (and its source access) by what the tracker holds then."""
        self.words += (BARRIER_COVERING if covering else BARRIER, src_stage, dst_stage, src_access, dst_access)

    def flush(self) -> None:
        """Record every waiting word into the command buffer, in order."""
        words = self.words
        if words:
            try:
                self._interpreter.record(self, words)
            finally:
                words.clear()

    def forget_bound(self) -> None:
        """Something else may have bound compute state: rebind before the
        next dispatch. Call with nothing waiting (after ``flush``)."""
        b = self.bound
        if b is not None:
            b[0] = b[1] = b[2] = 0


class CommandInterpreter:
    """Records streams into command buffers of one device (see module notes).
    ``kind``: ``"native"`` or ``"python"``; ``library``: the loaded file."""

    def __init__(self, fns, mode: str = None):
        self._fns = fns
        mode = _mode(mode)
        self.library = native_library_path() if mode != "off" else None
        if mode == "require" and self.library is None:
            raise UnsupportedError(f"{ENV}=require, but the command interpreter is not built; run "
                                   "`guestcompute build-native` (needs a C compiler)")
        self._native = None            # native_library.NativeLibrary
        if self.library is not None:
            try:
                self._native = load(self.library)
            except UnsupportedError as e:
                if mode == "require":
                    raise
                # auto: a library that does not load (a broken build) must
                # not stop contexts from being made; the Python walker
                # records the same commands.
                log.warning("guestcompute: %s; recording uses the Python walker", e)
                self.library = None
        self.kind = "native" if self.library is not None else "python"
        if self.kind == "native":
            table = self._functions = ffi.new("uint64_t[]", len(_FUNCTIONS))
            for i, name in enumerate(_FUNCTIONS):
                fn = getattr(fns, name, None)
                table[i] = _address(fn) if fn is not None else 0

    def tracker(self, dst_stages: int = GUEST_STAGES, dst_access: int = GUEST_ACCESS):
        """A hazard tracker for this interpreter's walker, whose barriers
        have ``dst_stages`` / ``dst_access`` as their second scope."""
        if self.kind == "native":
            return NativeTracker(self._native, dst_stages, dst_access)
        return HazardTracker(dst_stages, dst_access)

    def stream(self, cmd, barrier_struct, tracker=None) -> CommandStream:
        """A stream for ``cmd``; ``barrier_struct``: a VkMemoryBarrier (sType
        set) the stream may overwrite, owned by the caller's thread;
        ``tracker``: from ``self.tracker()`` (a new one when None)."""
        return CommandStream(self, cmd, barrier_struct, tracker if tracker is not None else self.tracker())

    def record(self, stream: CommandStream, words: list) -> None:
        if self.kind == "native":
            if stream.bound is None:
                stream.bound = ffi.new("uint64_t[3]")
            n = len(words)
            array = ffi.new("uint64_t[]", [w if w.__class__ is int else w.address for w in words])
            done = self._native.record(self._functions, stream.bound, stream.tracker.pointer, stream._cmd, array, n)
            if done != n:
                raise RuntimeError(f"command stream cut short at word {done} of {n} (a malformed stream, "
                                   "or no memory for the hazard tracker)")
        else:
            if stream.bound is None:
                stream.bound = [0, 0, 0]     # the bound handles, compared by value
            self._walk(stream, words)

    def _walk(self, stream: CommandStream, words: list) -> None:
        """The Python walker: what gc_record does, a cffi call per command,
        from the same fields (``DispatchCommand.py_fields``, in FIELDS order)."""
        fns, cmd, bound, hz = self._fns, stream._cmd, stream.bound, stream.tracker
        i, n = 0, len(words)
        while i < n:
            word = words[i]
            if word.__class__ is int:
                if (word != BARRIER and word != BARRIER_COVERING) or n - i < 5:
                    raise RuntimeError(f"command stream cut short at word {i} of {n}")
                src_stage, src_access = words[i + 1], words[i + 3]
                if word == BARRIER_COVERING:
                    src_stage, src_access = hz.covering(src_stage, src_access)
                self._barrier(stream, src_stage, words[i + 2], src_access, words[i + 4])
                i += 5
                continue
            (pipeline, layout, descriptors, writes, dset, push, indirect, offset, hazard_reads, hazard_writes,
             count, push_size, gx, gy, gz, flags, _, _) = word.py_fields
            # An indirect dispatch after a narrowed barrier waits too (vk/sync.py's notes).
            if flags & TRACK_HAZARDS and ((indirect is not None and hz.narrowed)
                                          or hz.needs_barrier(hazard_reads, hazard_writes)):
                src_stage, src_access = hz.hazard_sources()
                dst_stage, dst_access = hz.hazard_scope(indirect is not None)
                self._barrier(stream, src_stage, dst_stage, src_access, dst_access)
                hz.hazard_barriers += 1
            if pipeline != bound[0]:
                fns.vkCmdBindPipeline(cmd, _BIND, pipeline)
                bound[0] = pipeline
            if descriptors != bound[2] or layout != bound[1]:
                if writes is not None:
                    fns.vkCmdPushDescriptorSetKHR(cmd, _BIND, layout, 0, count, writes)
                else:
                    fns.vkCmdBindDescriptorSets(cmd, _BIND, layout, 0, 1, dset, 0, ffi.NULL)
                bound[1], bound[2] = layout, descriptors
            if push_size:
                fns.vkCmdPushConstants(cmd, layout, _PUSH_STAGE, 0, push_size, push)
            if indirect is not None:
                fns.vkCmdDispatchIndirect(cmd, indirect, offset)
            else:
                fns.vkCmdDispatch(cmd, gx, gy, gz)
            if flags & TRACK_HAZARDS:
                hz.touch(hazard_reads, hazard_writes)
            i += 1

    def _barrier(self, stream: CommandStream, src_stage: int, dst_stage: int, src_access: int,
                 dst_access: int) -> None:
        """One global memory barrier; it clears the tracker (as gc_record's record_barrier)."""
        bar = stream.barrier_struct
        bar.srcAccessMask, bar.dstAccessMask = src_access, dst_access
        self._fns.vkCmdPipelineBarrier(stream._cmd, src_stage, dst_stage, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)
        stream.tracker.barrier_recorded(src_stage, src_access, dst_stage, dst_access)


# -- finding and building the C walker ---------------------------------------------

def _mode(mode: str = None) -> str:
    mode = (mode if mode is not None else os.environ.get(ENV, "auto")).strip().lower()
    aliases = {"": "auto", "auto": "auto", "off": "off", "0": "off", "python": "off", "no": "off",
               "require": "require", "1": "require", "native": "require", "yes": "require"}
    if mode not in aliases:
        raise UnsupportedError(f"{ENV}={mode!r}: use auto, off or require")
    return aliases[mode]


@functools.lru_cache(maxsize=None)
def library_name() -> str:
    """The file name of the build of this exact source (its hash in the
    name, so a build of an older source is never loaded)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    suffix = ".dylib" if sys.platform == "darwin" else ".dll" if os.name == "nt" else ".so"
    return f"command_interpreter-{digest}{suffix}"


def library_dirs() -> list:
    """Where builds are looked for: next to the source (an in-place or
    editable install), then the cache directory."""
    return [SOURCE.parent, cache_root() / "native"]


def native_library_path():
    name = library_name()
    for folder in library_dirs():
        path = folder / name
        if path.is_file():
            return path
    return None


_loaded: dict = {}


def load(path: Path) -> NativeLibrary:
    """The library at ``path`` (its gc_record when called), opened once."""
    lib = _loaded.get(path)
    if lib is None:
        try:
            lib = _loaded[path] = open_library(path)
        except UnsupportedError as e:
            raise UnsupportedError(f"{e}; rebuild it with `guestcompute build-native`") from None
    return lib


def open_library(path: Path) -> NativeLibrary:
    """The library at ``path``, uncached; UnsupportedError when the file does
    not load or does not export what the walker calls (an empty or foreign
    file, a build of another layout)."""
    lib = NativeLibrary(path)
    if lib.layout("dispatch") != field_offsets() or lib.layout("tracker") != tracker_offsets():
        raise UnsupportedError(f"{path.name} was built for another layout of gc_dispatch or gc_tracker")
    return lib
