"""The command stream's one field table (command_stream.FIELDS) against the
C library's struct layout, and what a DispatchCommand holds for each walker.

No device needed: handles are made up, and nothing is recorded here.
"""
import ctypes
import sys

import pytest
from vulkan import ffi

from guestcompute.vk import command_stream, native_build
from guestcompute.vk.command_stream import FIELDS, DispatchCommand, PyDispatch


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The built C interpreter: the installed build, else one built here."""
    path = command_stream.native_library_path()
    if path is None:
        if native_build.find_compiler() is None:
            pytest.skip("no C compiler and no built command interpreter")
        path = native_build.build(tmp_path_factory.mktemp("native"))
    return ctypes.CDLL(str(path))


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


def test_the_library_lays_gc_dispatch_out_as_the_field_table_says(library):
    fields, size = command_stream.library_layout(library)
    assert [name for name, _, _ in fields] == [f.name for f in FIELDS]
    assert (fields, size) == command_stream.field_offsets()
    assert size % 8 == 0          # the C walker reads the struct as 64-bit words


def _c_struct(command: DispatchCommand, library) -> dict:
    """The struct at ``command.address``, read at the library's own offsets."""
    fields, size = command_stream.library_layout(library)
    raw = bytes(ffi.buffer(command.fields, size))
    return {name: int.from_bytes(raw[offset:offset + n], sys.byteorder) for name, offset, n in fields}


def _address(cdata) -> int:
    return 0 if cdata is None else int(ffi.cast("uintptr_t", cdata))


@pytest.mark.parametrize("kind", ["push descriptors", "bound set", "indirect"])
def test_both_walkers_read_the_same_values_from_one_command(library, kind):
    """The C struct holds, field for field, what the Python walker's tuple
    holds: the same integer, or the address of the same cffi object."""
    pipe = FakePipe(0x1000, 0x2000)
    desc = FakeDescriptors(bound_set=0x3000) if kind == "bound set" else FakeDescriptors(count=3)
    indirect = (FakeBuffer(0x4000), 48) if kind == "indirect" else None
    command = DispatchCommand(pipe, desc, b"\x01\x02\x03\x04", (5, 6, 7), indirect)
    py = command.py_fields
    assert isinstance(py, PyDispatch) and len(py) == len(FIELDS)
    c = _c_struct(command, library)
    for f in FIELDS:
        value = getattr(py, f.name)
        assert c[f.name] == (_address(value) if f.pointer else value), f.name
    assert c["push_size"] == 4 and c["descriptors"] == id(desc)
    if kind == "bound set":
        assert py.descriptor_writes is None and c["descriptor_write_count"] == 0
        assert c["descriptor_set"] == _address(desc.pset)
    else:
        assert c["descriptor_writes"] == _address(desc.writes) and c["descriptor_write_count"] == 3
    if kind == "indirect":
        assert (c["indirect_buffer"], c["indirect_offset"], c["group_x"]) == (0x4000, 48, 0)
    else:
        assert (c["indirect_buffer"], c["group_x"], c["group_y"], c["group_z"]) == (0, 5, 6, 7)


def test_the_loader_refuses_a_library_of_another_layout(monkeypatch, library):
    path = command_stream.native_library_path()
    if path is None:
        pytest.skip("no installed build to load")
    monkeypatch.setattr(command_stream, "FIELDS", FIELDS[:-1] + (command_stream.Field("pad", "u64", False, ""),))
    with pytest.raises(command_stream.UnsupportedError, match="another layout"):
        command_stream.open_library(path)
