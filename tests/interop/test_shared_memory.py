"""Exportable tensors: memory one context exports and a second device's
context imports (same physical device) holds the same bytes both ways,
with guest ops on each side, under validation on both devices."""
import copy
import dataclasses
import os
import types

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.host import supported_extensions
from guestcompute.interop.cuda_memory import CudaView
from guestcompute.vk import external

def test_bytes_cross_between_devices_both_ways(pair):
    host_a, a, host_b, b = pair
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = a.tensor(data, exportable=True)           # A writes, B reads
    back = a.zeros((4, 6), exportable=True)       # B writes, A reads
    with x.export() as ex, back.export() as eb:
        x_b, back_b = b.import_memory(ex), b.import_memory(eb)
    assert x_b.shape == (4, 6) and x_b.dtype == gc.float32 and x_b.exportable

    host_a.run(a, lambda rec: rec.mul(x, 3.0, out=x))       # A's GPU work; the fence wait orders B after it
    np.testing.assert_array_equal(x_b.numpy(), data * 3)
    host_b.run(b, lambda rec: rec.add(x_b, 1.0, out=back_b))   # B's GPU work writes A's memory
    np.testing.assert_array_equal(back.numpy(), data * 3 + 1)
    total = host_a.run(a, lambda rec: rec.sum(back, axis=1))    # and A's GPU reads what B wrote
    np.testing.assert_array_equal(total.numpy(), (data * 3 + 1).sum(axis=1))


def test_an_exported_view_keeps_shape_strides_and_offset(pair):
    _, a, _, b = pair
    data = np.arange(60, dtype=np.int32).reshape(6, 10)
    t = a.tensor(data, exportable=True)
    view = t[1:5, 2::3]
    with view.export() as ex:
        assert (ex.shape, ex.strides, ex.dtype) == ((4, 3), (10, 3), "int32")
        assert ex.offset == (10 + 2) * 4
        seen = b.import_memory(ex)
    np.testing.assert_array_equal(seen.numpy(), data[1:5, 2::3])
    # An op in B on the imported view writes through to A's tensor.
    b.run(lambda rec: rec.fill(seen, 7))
    expect = data.copy()
    expect[1:5, 2::3] = 7
    np.testing.assert_array_equal(t.numpy(), expect)


@pytest.mark.parametrize("change,error,message", [
    (dict(shape=(800,)), gc.BufferRangeError, "outside the exported"),       # past the exported bytes
    (dict(shape=(8, 2), strides=(1, 100)), gc.BufferRangeError, "outside the exported"),
    (dict(strides=(-1,)), gc.BufferRangeError, "outside the exported"),     # before its first byte
    (dict(offset=2), gc.InvalidArgumentError, "not a multiple"),            # between two elements
    (dict(offset=-4), gc.InvalidArgumentError, "non-negative"),
    (dict(strides=(1, 1)), gc.InvalidArgumentError, "one per axis"),
    (dict(shape=(-8,)), gc.ShapeError, "negative"),
], ids=["shape", "strides", "negative-stride", "misaligned", "negative-offset", "strides-rank", "bad-shape"])
def test_an_import_trusts_no_view_past_the_exported_buffer(pair, change, error, message):
    """The view an ExportedMemory describes is checked against its buffer
    and its dtype before anything is imported: one past the bytes would
    read past the memory, an offset between elements shifts every one."""
    _, a, _, b = pair
    t = a.tensor(np.arange(8, dtype=np.float32), exportable=True)
    with t.export() as ex:
        allocations = b.live_objects()["allocations"]
        with dataclasses.replace(ex, fd=os.dup(ex.fd), **change) as bad, pytest.raises(error, match=message):
            b.import_memory(bad)
        assert b.live_objects()["allocations"] == allocations
        np.testing.assert_array_equal(b.import_memory(ex).numpy(), np.arange(8, dtype=np.float32))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "float16", "uint8", "complex64"])
def test_every_dtype_crosses_exactly(pair, dtype):
    _, a, _, b = pair
    try:
        t = a.tensor(np.arange(50).astype(dtype), exportable=True)
    except gc.UnsupportedError:
        pytest.skip(f"{dtype} tensors are not enabled here")
    with t.export() as ex:
        u = b.import_memory(ex)
    np.testing.assert_array_equal(u.numpy(), np.arange(50).astype(dtype))


def test_the_import_outlives_the_exporting_tensor(pair):
    _, a, _, b = pair
    before = a.live_objects()["allocations"]
    t = a.empty((256,), exportable=True)
    a.run(lambda rec, t=t: rec.fill(t, 5.0))    # no staging upload: the only new allocation is t's
    with t.export() as ex:
        u = b.import_memory(ex)
    assert a.live_objects()["allocations"] == before + 1
    del t
    a.retire()                      # A frees its buffer and memory now
    assert a.live_objects()["allocations"] == before
    np.testing.assert_array_equal(u.numpy(), np.full(256, 5, np.float32))
    b.run(lambda rec: rec.add(u, 1.0, out=u))
    np.testing.assert_array_equal(u.numpy(), np.full(256, 6, np.float32))


def test_fds_are_the_callers_and_none_leak(pair):
    _, a, _, b = pair
    t = a.zeros((1000,), exportable=True)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(40):
        ex = t.export()
        u = b.import_memory(ex)
        os.fstat(ex.fd)                 # still open after the import: a duplicate was imported
        ex.close()
        ex.close()                      # closing twice is harmless
        del u
        b.retire()
    assert len(os.listdir("/proc/self/fd")) <= before
    assert b.live_objects()["buffers"] == 0 and b.live_objects()["allocations"] == 0


def test_exportable_tensors_are_released_and_never_recycled(pair):
    _, a, _, _ = pair
    base = a.live_objects()
    for _ in range(5):
        t = a.empty((4096,), exportable=True)
        assert t.exportable
        del t
        a.retire()
    after = a.live_objects()
    assert (after["buffers"], after["allocations"], after["recycled_buffers"]) == \
        (base["buffers"], base["allocations"], base["recycled_buffers"])
    plain = a.empty((4096,))
    assert not plain.exportable             # a plain tensor never gets shareable memory


def test_bad_exports_and_imports_raise_typed_errors(pair):
    _, a, _, b = pair
    plain = a.empty((8,))
    with pytest.raises(gc.InvalidArgumentError, match="exportable=True"):
        plain.export()
    with pytest.raises(gc.InvalidArgumentError, match="exportable"):
        plain.cuda_view()
    assert not hasattr(plain, "__cuda_array_interface__")
    ex = a.empty((8,), exportable=True).export()
    with pytest.raises(gc.UnsupportedError, match="deviceUUID"):
        b.import_memory(dataclasses.replace(ex, fd=os.dup(ex.fd), device_uuid=bytes(16)))
    ex.close()
    with pytest.raises(gc.InvalidArgumentError, match="closed"):
        b.import_memory(ex)
    with pytest.raises(gc.InvalidArgumentError, match="t.export"):
        b.import_memory(3)


def test_a_device_without_the_extension_refuses_exportable_tensors(bare_host):
    ctx = bare_host.adopt()
    try:
        with pytest.raises(gc.UnsupportedError, match="VK_KHR_external_memory_fd"):
            ctx.empty((4,), exportable=True)
        with pytest.raises(gc.UnsupportedError, match="VK_KHR_external_semaphore_fd"):
            ctx.shared_timeline()
    finally:
        ctx.close()


def test_requirements_offer_the_sharing_extensions_where_supported(modern_host):
    req = gc.requirements(modern_host.physical_device, (1, 3))
    supported = set(supported_extensions(modern_host.physical_device))
    for ext in ("VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd"):
        assert (ext in req.device_extensions) == (ext in supported)
    held = gc.requirements(modern_host.physical_device, (1, 0)).held_back
    if "VK_KHR_external_memory_fd" in supported:
        assert "VK_KHR_external_memory_fd" in held


def test_bad_fds_are_typed_errors_that_close_nothing_of_the_callers(pair):
    _, a, _, b = pair
    ex = a.empty((8,), exportable=True).export()
    before = b.live_objects()
    read_end, write_end = os.pipe()
    try:
        for bad in (read_end, 10 ** 6, "3", True):
            with pytest.raises(gc.InvalidArgumentError, match="fd"):
                dataclasses.replace(ex, fd=bad)
        os.fstat(read_end)                  # a refused fd stays the caller's
        os.close(ex.fd)                     # closed behind the export's back
        with pytest.raises(gc.InvalidArgumentError, match="not an open file descriptor"):
            b.import_memory(ex)
        ex.take_fd()                        # its number is not the export's to close any more
        after = b.live_objects()
        assert (after["buffers"], after["allocations"]) == (before["buffers"], before["allocations"])
    finally:
        os.close(read_end), os.close(write_end)


def test_a_copy_of_an_export_holds_its_own_fd(pair):
    _, a, _, b = pair
    t = a.tensor(np.arange(8, dtype=np.float32), exportable=True)
    ex = t.export()
    copies = [copy.copy(ex), copy.deepcopy(ex), dataclasses.replace(ex, shape=(4,), strides=(2,))]
    assert len({ex.fd, *(c.fd for c in copies)}) == 4
    ex.close()
    for c in copies:
        os.fstat(c.fd)                      # closing the original closed none of its copies
    np.testing.assert_array_equal(b.import_memory(copies[0]).numpy(), np.arange(8))
    np.testing.assert_array_equal(b.import_memory(copies[2]).numpy(), np.arange(0, 8, 2))
    for c in copies:
        c.close()


def test_a_failed_import_closes_its_duplicate_only_while_it_is_still_its_own(tmp_path):
    """A driver may close the imported duplicate even when the import fails;
    the number may then name a file opened since, which must stay open."""
    path = tmp_path / "f"
    path.write_bytes(b"x")
    original = os.open(path, os.O_RDONLY)
    try:
        dup, on_failure = external.duplicate_fd(original)
        on_failure()                        # still ours: closed
        with pytest.raises(OSError):
            os.fstat(dup)
        dup, on_failure = external.duplicate_fd(original)
        os.close(dup)                       # as a driver that closes it on failure does
        other = os.open(os.devnull, os.O_RDONLY)
        try:
            assert other == dup             # the lowest free number is reused
            on_failure()
            os.fstat(other)                 # the unrelated file is still open
        finally:
            os.close(other)
    finally:
        os.close(original)


def test_probing_for_the_cuda_array_interface_never_raises(pair):
    """hasattr(t, "__cuda_array_interface__") is how array libraries probe:
    False (never another error) where CUDA cannot see the tensor."""
    _, a, _, _ = pair
    t = a.empty((8,), exportable=True)
    try:
        t.cuda_view()
        cuda_sees_it = True
    except gc.GuestComputeError:            # no CUDA driver, or no CUDA device with this UUID
        cuda_sees_it = False
    assert hasattr(t, "__cuda_array_interface__") == cuda_sees_it
    if not cuda_sees_it:
        with pytest.raises(AttributeError, match="no __cuda_array_interface__"):
            t.__cuda_array_interface__


def test_resize_keeps_a_tensor_exportable(pair):
    _, a, _, b = pair
    t = a.empty((4,), exportable=True)
    t.resize((3, 5))
    assert t.exportable and t.shape == (3, 5)
    a.run(lambda rec: rec.fill(t, 2.0))
    with t.export() as ex:
        np.testing.assert_array_equal(b.import_memory(ex).numpy(), np.full((3, 5), 2, np.float32))
    plain = a.empty((4,))
    plain.resize((6,))
    assert not plain.exportable


def test_complex64_views_describe_themselves_to_cuda_libraries():
    memory = types.SimpleNamespace(ptr=0x10000, ordinal=0)
    view = CudaView(memory, None, offset=16, shape=(3, 4), dtype="complex64", strides=(8, 2))
    cai = view.__cuda_array_interface__
    assert cai["typestr"] == "<c8" and cai["strides"] == (64, 16) and cai["data"] == (0x10010, False)
