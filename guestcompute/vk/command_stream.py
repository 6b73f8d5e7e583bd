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
  and loaded with ctypes, so it is a plain shared library that does not
  depend on the Python version;
- a Python walker, the fallback where no compiler was available, which
  reads the same fields (kept beside each struct as Python objects) and
  calls the same device functions.

``GUESTCOMPUTE_NATIVE`` picks: unset or ``auto`` (the C walker when built),
``off`` (the Python walker), ``require`` (the C walker, else
UnsupportedError when a context is made).

Both skip a pipeline bind and a descriptor push when what is bound already
matches (``gc_bound``, cleared by ``CommandStream.forget_bound``).

Thread-safety: a stream belongs to one recorder (one thread) and holds
everything a walk writes (bound state, the Python walker's barrier struct);
the interpreter is shared by every thread and only read.
"""
from __future__ import annotations

import ctypes
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

BARRIER = 1        # stream word: four more follow (src stages, dst stages, src access, dst access)
_BIND = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_PUSH_STAGE = vk.VK_SHADER_STAGE_COMPUTE_BIT
SOURCE = Path(__file__).with_name("native") / "command_interpreter.c"
ENV = "GUESTCOMPUTE_NATIVE"

_FUNCTIONS = ("vkCmdBindPipeline", "vkCmdPushDescriptorSetKHR", "vkCmdBindDescriptorSets",
              "vkCmdPushConstants", "vkCmdDispatch", "vkCmdDispatchIndirect", "vkCmdPipelineBarrier")


class Field(NamedTuple):
    """One field of gc_dispatch. ``ctype``: ``u64`` or ``u32``; ``pointer``:
    the Python walker holds a cffi object (or None) and the C struct its
    address (or 0); otherwise both hold the same integer."""
    name: str
    ctype: str
    pointer: bool
    meaning: str


# The one description of a dispatch command: the C struct gc_dispatch has
# these fields in this order (the loader checks it against the library's
# gc_dispatch_fields), and the Python walker reads a tuple of them in this order.
FIELDS = (
    Field("pipeline", "u64", True, "VkPipeline"),
    Field("layout", "u64", True, "VkPipelineLayout"),
    Field("descriptors", "u64", False, "identity of the descriptor entry: a rebind is skipped when unchanged"),
    Field("descriptor_writes", "u64", True, "VkWriteDescriptorSet array for push descriptors, else none"),
    Field("descriptor_set", "u64", True, "VkDescriptorSet[1] of a bound set, else none"),
    Field("push", "u64", True, "push-constant bytes, or none"),
    Field("indirect_buffer", "u64", True, "VkBuffer for vkCmdDispatchIndirect, or none"),
    Field("indirect_offset", "u64", False, "byte offset of the indirect arguments"),
    Field("descriptor_write_count", "u32", False, "entries in descriptor_writes"),
    Field("push_size", "u32", False, "bytes of push constants, 0 for none"),
    Field("group_x", "u32", False, "workgroups (direct dispatches)"),
    Field("group_y", "u32", False, ""),
    Field("group_z", "u32", False, ""),
    Field("pad", "u32", False, "keeps the struct a whole number of 64-bit words"),
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
_POINTERS = tuple(i for i, f in enumerate(FIELDS) if f.pointer)
_WORDS = field_offsets()[1] // 8


def _address(cdata) -> int:
    return int(ffi.cast("uintptr_t", cdata))


def c_words(py: PyDispatch):
    """The gc_dispatch struct of ``py`` as a uint64_t array (the vulkan
    package's ffi: no C declarations are parsed at import time)."""
    values = list(py)
    for i in _POINTERS:
        v = values[i]
        values[i] = 0 if v is None else _address(v)
    words = ffi.new("uint64_t[]", _WORDS)
    _LAYOUT.pack_into(ffi.buffer(words), 0, *values)
    return words


class DispatchCommand:
    """One dispatch's commands, built once per planned dispatch: ``py_fields``
    (a PyDispatch) for the Python walker and ``fields`` (gc_dispatch, made
    from it) at ``address`` for the C walker. ``push`` and ``groups`` are
    the Dispatch's own objects, so the recorder can tell (by identity) that
    they were not replaced."""
    __slots__ = ("fields", "address", "push", "groups", "py_fields", "_descriptors")

    def __init__(self, pipe, desc, push: bytes, groups, indirect):
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
        py = self.py_fields = PyDispatch(
            pipeline=pipe.handle, layout=pipe.layout, descriptors=id(desc),
            descriptor_writes=None if bound_set else desc.writes, descriptor_set=desc.pset, push=push_bytes,
            indirect_buffer=buffer, indirect_offset=offset, descriptor_write_count=0 if bound_set else desc.count,
            push_size=len(push) if push else 0, group_x=gx, group_y=gy, group_z=gz, pad=0)
        f = self.fields = c_words(py)
        self.address = _address(f)


class CommandStream:
    """What waits for one command buffer, and what is bound in it.

    ``words`` holds DispatchCommand objects (not just their addresses: the
    stream keeps them, and what they point to, alive until recorded) and the
    integers of barriers. ``bound``: what is bound (pipeline, layout,
    descriptors): gc_bound for the C walker, the handles for the Python one."""
    __slots__ = ("words", "append", "bound", "barrier_struct", "_interpreter", "_cmd", "_addresses")

    def __init__(self, interpreter: "CommandInterpreter", cmd, barrier_struct):
        self.words: list = []
        self.append = self.words.append      # the recorder appends DispatchCommands
        self.bound = None              # gc_bound, made by the first walk (a recording may have none)
        # A VkMemoryBarrier the Python walker fills in: the recorder's own
        # (one per stream, so threads never share it).
        self.barrier_struct = barrier_struct
        self._interpreter = interpreter
        self._cmd = cmd
        self._addresses = None         # (command buffer, gc_bound) as integers, at the first call into C

    def barrier(self, src_stage: int, dst_stage: int, src_access: int, dst_access: int) -> None:
        self.words += (BARRIER, src_stage, dst_stage, src_access, dst_access)

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
        self._record = None
        if self.library is not None:
            try:
                self._record = load(self.library)
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
            self._functions_address = _address(table)

    def stream(self, cmd, barrier_struct) -> CommandStream:
        """A stream for ``cmd``; ``barrier_struct``: a VkMemoryBarrier (sType
        set) the stream may overwrite, owned by the caller's thread."""
        return CommandStream(self, cmd, barrier_struct)

    def record(self, stream: CommandStream, words: list) -> None:
        if self.kind == "native":
            if stream.bound is None:
                stream.bound = ffi.new("uint64_t[3]")
            n = len(words)
            array = ffi.new("uint64_t[]", [w if w.__class__ is int else w.address for w in words])
            if stream._addresses is None:
                stream._addresses = (_address(stream._cmd), _address(stream.bound))
            cmd, bound = stream._addresses
            done = self._record(self._functions_address, bound, cmd, _address(array), n)
            if done != n:
                raise RuntimeError(f"command stream cut short at word {done} of {n}")
        else:
            if stream.bound is None:
                stream.bound = [0, 0, 0]     # the bound handles, compared by value
            self._walk(stream, words)

    def _walk(self, stream: CommandStream, words: list) -> None:
        """The Python walker: what gc_record does, a cffi call per command,
        from the same fields (``DispatchCommand.py_fields``, in FIELDS order)."""
        fns, cmd, bound = self._fns, stream._cmd, stream.bound
        i, n = 0, len(words)
        while i < n:
            word = words[i]
            if word.__class__ is int:
                if word != BARRIER or n - i < 5:
                    raise RuntimeError(f"command stream cut short at word {i} of {n}")
                bar = stream.barrier_struct
                bar.srcAccessMask, bar.dstAccessMask = words[i + 3], words[i + 4]
                fns.vkCmdPipelineBarrier(cmd, words[i + 1], words[i + 2], 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)
                i += 5
                continue
            (pipeline, layout, descriptors, writes, dset, push, indirect, offset, count, push_size,
             gx, gy, gz, _pad) = word.py_fields
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
            i += 1


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


def load(path: Path):
    """gc_record from the library at ``path``, through ctypes: one call per
    batch, so its cost per call (about a microsecond) does not matter, and
    nothing needs C declarations parsed at import time."""
    fn = _loaded.get(path)
    if fn is None:
        try:
            fn = _loaded[path] = open_library(path)
        except UnsupportedError as e:
            raise UnsupportedError(f"{e}; rebuild it with `guestcompute build-native`") from None
    return fn


def open_library(path: Path):
    """gc_record of the library at ``path``, uncached; UnsupportedError when
    the file does not load or does not export what the walker calls (an
    empty or foreign file, a build of another layout)."""
    try:
        lib = ctypes.CDLL(str(path))
        fields, fn = lib.gc_dispatch_fields, lib.gc_record
    except (OSError, AttributeError) as e:
        raise UnsupportedError(f"the command interpreter {path} does not load ({e})") from None
    if library_layout(lib) != field_offsets():
        raise UnsupportedError(f"{path.name} was built for another layout of gc_dispatch")
    fn.restype = ctypes.c_ulonglong
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
    return fn


class _CField(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("offset", ctypes.c_uint), ("size", ctypes.c_uint)]


def library_layout(lib: ctypes.CDLL) -> tuple:
    """gc_dispatch as the loaded library ``lib`` lays it out, in the shape of
    ``field_offsets()``: ((name, offset, size), ...), struct size."""
    get = lib.gc_dispatch_fields
    get.restype = ctypes.POINTER(_CField)
    get.argtypes = []
    table, out, i = get(), [], 0
    while table[i].name is not None:
        out.append((table[i].name.decode(), table[i].offset, table[i].size))
        i += 1
    return tuple(out), table[i].offset
