"""Made-up dispatch commands and logging device functions for the command
stream's tests: no device, every handle an invented number.

PythonFunctions (for the Python walker) and CFunctions (ctypes callbacks
whose addresses go into the C walker's gc_functions table) log the same
tuple for the same call, so two walkers' logs compare directly.
"""
import ctypes

import pytest
from vulkan import ffi

from guestcompute.vk import command_stream, native_build


def built_library(tmp_path_factory):
    """The built C interpreter's path: the installed build, else one built
    into a temporary folder; skips the test without either."""
    path = command_stream.native_library_path()
    if path is None:
        if native_build.find_compiler() is None:
            pytest.skip("no C compiler and no built command interpreter")
        path = native_build.build(tmp_path_factory.mktemp("native"))
    return path


def address(handle) -> int:
    """A cffi handle or pointer as an int (0 for None)."""
    return 0 if handle is None else int(ffi.cast("uintptr_t", handle))


class FakePipe:
    def __init__(self, pipeline, layout):
        self.handle = ffi.cast("VkPipeline", pipeline)
        self.layout = ffi.cast("VkPipelineLayout", layout)


class FakeDescriptors:
    """A descriptor entry: push-descriptor writes, or a bound set."""

    def __init__(self, count=0, bound_set=None):
        self.count = count
        self.writes = ffi.new("VkWriteDescriptorSet[]", max(count, 1))
        self.pset = ffi.new("VkDescriptorSet[1]", [ffi.cast("VkDescriptorSet", bound_set)]) if bound_set else None


class FakeBuffer:
    def __init__(self, handle):
        self.handle = ffi.cast("VkBuffer", handle)


class PythonFunctions:
    """Device functions for the Python walker: each logs its call."""

    def __init__(self, log):
        self.log = log

    def vkCmdBindPipeline(self, cmd, point, pipeline):
        self.log.append(("bind", address(cmd), point, address(pipeline)))

    def vkCmdPushDescriptorSetKHR(self, cmd, point, layout, first, count, writes):
        self.log.append(("descriptors", address(cmd), point, address(layout), first, count, address(writes)))

    def vkCmdBindDescriptorSets(self, cmd, point, layout, first, count, sets, dynamic_count, offsets):
        self.log.append(("set", address(cmd), point, address(layout), first, count, address(sets), dynamic_count))

    def vkCmdPushConstants(self, cmd, layout, stages, offset, size, values):
        self.log.append(("push", address(cmd), address(layout), stages, offset, bytes(ffi.buffer(values, size))))

    def vkCmdDispatch(self, cmd, x, y, z):
        self.log.append(("dispatch", address(cmd), x, y, z))

    def vkCmdDispatchIndirect(self, cmd, buffer, offset):
        self.log.append(("indirect", address(cmd), address(buffer), offset))

    def vkCmdPipelineBarrier(self, cmd, src, dst, flags, count, bar, *rest):
        self.log.append(("barrier", address(cmd), src, dst, flags, count, bar.srcAccessMask, bar.dstAccessMask))


class _MemoryBarrier(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("next", ctypes.c_void_p), ("src", ctypes.c_uint32),
                ("dst", ctypes.c_uint32)]


_P, _U32, _U64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64
_TYPES = {
    "vkCmdBindPipeline": (_P, _U32, _U64),
    "vkCmdPushDescriptorSetKHR": (_P, _U32, _U64, _U32, _U32, _P),
    "vkCmdBindDescriptorSets": (_P, _U32, _U64, _U32, _U32, _P, _U32, _P),
    "vkCmdPushConstants": (_P, _U64, _U32, _U32, _U32, _P),
    "vkCmdDispatch": (_P, _U32, _U32, _U32),
    "vkCmdDispatchIndirect": (_P, _U64, _U64),
    "vkCmdPipelineBarrier": (_P, _U32, _U32, _U32, _U32, _P, _U32, _P, _U32, _P),
}


class CFunctions:
    """Device functions for the C walker: ctypes callbacks (their addresses
    go into gc_functions) that log the same tuples as PythonFunctions."""

    def __init__(self, log):
        self.log = log
        self._callbacks = []
        for name, types in _TYPES.items():
            callback = ctypes.CFUNCTYPE(None, *types)(getattr(self, "_" + name))
            self._callbacks.append(callback)
            setattr(self, name, ctypes.cast(callback, ctypes.c_void_p).value)

    def _vkCmdBindPipeline(self, cmd, point, pipeline):
        self.log.append(("bind", cmd or 0, point, pipeline))

    def _vkCmdPushDescriptorSetKHR(self, cmd, point, layout, first, count, writes):
        self.log.append(("descriptors", cmd or 0, point, layout, first, count, writes or 0))

    def _vkCmdBindDescriptorSets(self, cmd, point, layout, first, count, sets, dynamic_count, offsets):
        self.log.append(("set", cmd or 0, point, layout, first, count, sets or 0, dynamic_count))

    def _vkCmdPushConstants(self, cmd, layout, stages, offset, size, values):
        self.log.append(("push", cmd or 0, layout, stages, offset, ctypes.string_at(values, size)))

    def _vkCmdDispatch(self, cmd, x, y, z):
        self.log.append(("dispatch", cmd or 0, x, y, z))

    def _vkCmdDispatchIndirect(self, cmd, buffer, offset):
        self.log.append(("indirect", cmd or 0, buffer, offset))

    def _vkCmdPipelineBarrier(self, cmd, src, dst, flags, count, bar, *rest):
        b = _MemoryBarrier.from_address(bar)
        self.log.append(("barrier", cmd or 0, src, dst, flags, count, b.src, b.dst))


