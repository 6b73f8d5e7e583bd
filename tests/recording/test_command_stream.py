"""The command stream's one field table (command_stream.FIELDS) against the
C library's struct layout, and what a DispatchCommand holds for each walker.

No device needed: handles are made up, and nothing is recorded here.
"""
import sys

import pytest
from vulkan import ffi

from guestcompute.vk import command_stream
from guestcompute.vk.native_tracker import tracker_offsets
from guestcompute.vk.command_stream import FIELDS, DispatchCommand, PyDispatch

from stream_fakes import FakeBuffer, FakeDescriptors, FakePipe, address, built_library


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return command_stream.open_library(built_library(tmp_path_factory))


def test_the_library_lays_gc_dispatch_out_as_the_field_table_says(library):
    fields, size = library.layout("dispatch")
    assert [name for name, _, _ in fields] == [f.name for f in FIELDS]
    assert (fields, size) == command_stream.field_offsets()
    assert size % 8 == 0          # the C walker reads the struct as 64-bit words
    assert library.layout("tracker") == tracker_offsets()


def _c_struct(command: DispatchCommand, library) -> dict:
    """The struct at ``command.address``, read at the library's own offsets."""
    fields, size = library.layout("dispatch")
    raw = bytes(ffi.buffer(command.fields, size))
    return {name: int.from_bytes(raw[offset:offset + n], sys.byteorder) for name, offset, n in fields}


def _key_array(address: int, n: int) -> tuple:
    return tuple(ffi.cast("uint64_t *", address)[0:n]) if n else ()


@pytest.mark.parametrize("kind", ["push descriptors", "bound set", "indirect"])
def test_both_walkers_read_the_same_values_from_one_command(library, kind):
    """The C struct holds, field for field, what the Python walker's tuple
    holds: the same integer, or the address of the same cffi object."""
    pipe = FakePipe(0x1000, 0x2000)
    desc = FakeDescriptors(bound_set=0x3000) if kind == "bound set" else FakeDescriptors(count=3)
    indirect = (FakeBuffer(0x4000), 48) if kind == "indirect" else None
    keys = dict(reads=[3, 2**64 - 1], writes=[0]) if kind == "push descriptors" else {}
    command = DispatchCommand(pipe, desc, b"\x01\x02\x03\x04", (5, 6, 7), indirect, **keys)
    py = command.py_fields
    assert isinstance(py, PyDispatch) and len(py) == len(FIELDS)
    c = _c_struct(command, library)
    for f in FIELDS:
        value = getattr(py, f.name)
        if f.kind == "keys":
            assert _key_array(c[f.name], len(value)) == value, f.name
        else:
            assert c[f.name] == (address(value) if f.kind == "pointer" else value), f.name
    if keys:
        assert py.hazard_reads == (3, 2**64 - 1) and py.hazard_writes == (0,)
        assert (c["flags"], c["hazard_read_count"], c["hazard_write_count"]) == (command_stream.TRACK_HAZARDS, 2, 1)
    else:
        assert (c["flags"], c["hazard_reads"], c["hazard_read_count"]) == (0, 0, 0)
    assert (c["pipeline"], c["layout"]) == (0x1000, 0x2000)
    assert c["push_size"] == 4 and c["descriptors"] == id(desc)
    if kind == "bound set":
        assert py.descriptor_writes is None and c["descriptor_write_count"] == 0
        assert c["descriptor_set"] == address(desc.pset)
    else:
        assert c["descriptor_writes"] == address(desc.writes) and c["descriptor_write_count"] == 3
    if kind == "indirect":
        assert (c["indirect_buffer"], c["indirect_offset"], c["group_x"]) == (0x4000, 48, 0)
    else:
        assert (c["indirect_buffer"], c["group_x"], c["group_y"], c["group_z"]) == (0, 5, 6, 7)


def test_the_loader_refuses_a_library_of_another_layout(monkeypatch, library):
    path = command_stream.native_library_path()
    if path is None:
        pytest.skip("no installed build to load")
    wider = command_stream.Field("hazard_write_count", "u64", "int", "")
    monkeypatch.setattr(command_stream, "FIELDS", FIELDS[:-1] + (wider,))
    with pytest.raises(command_stream.UnsupportedError, match="another layout"):
        command_stream.open_library(path)
