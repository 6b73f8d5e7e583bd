"""import_buffer(usage=...): what the host created its buffer for decides how
a view is read back, and a buffer no guest op could bind is refused.

A host buffer without TRANSFER_SRC cannot be the source of vkCmdCopyBuffer;
``view.numpy()`` then reads it through a compute copy. Every test runs
under synchronization validation: a copy from such a buffer would be
reported."""
import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc

STORAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
VERTEX = vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT
TRANSFER_SRC = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT


def _vertex_buffer(host, data, usage):
    buf = host.create_buffer(max(data.nbytes, 64), usage=usage)
    host.write_buffer(buf, data)
    return buf


@pytest.mark.parametrize("declared", [None, STORAGE | VERTEX, "storage_buffer|vertex_buffer"])
def test_a_buffer_without_transfer_src_reads_back(host, ctx, declared):
    data = np.arange(16, dtype=np.float32)
    buf = _vertex_buffer(host, data, STORAGE | VERTEX)
    said = {} if declared is None else {"usage": declared}     # None: the host does not say
    view = ctx.import_buffer(buf, (4, 4), "float32", host_access="vertex", buffer_size=64, **said)
    np.testing.assert_array_equal(view.numpy(), data.reshape(4, 4))
    np.testing.assert_array_equal(view[1:3, ::2].numpy(), data.reshape(4, 4)[1:3, ::2])


def test_declared_transfer_src_reads_with_a_plain_copy(host, ctx):
    data = np.arange(16, dtype=np.int32)
    buf = _vertex_buffer(host, data, STORAGE | VERTEX | TRANSFER_SRC)
    view = ctx.import_buffer(buf, (16,), "int32", host_access="vertex", buffer_size=64,
                             usage=["VK_BUFFER_USAGE_STORAGE_BUFFER_BIT", "transfer_src", VERTEX])
    assert view.buffer.usage == STORAGE | VERTEX | TRANSFER_SRC
    np.testing.assert_array_equal(view.numpy(), data)


@pytest.mark.parametrize("dtype, offset, count", [("float16", 2, 3), ("float16", 0, 3), ("uint8", 1, 5),
                                                  ("uint8", 3, 1)])
def test_narrow_views_at_any_offset_read_back(modern_host, modern_ctx, dtype, offset, count):
    data = np.arange(32).astype(dtype)
    buf = _vertex_buffer(modern_host, data, STORAGE | VERTEX)
    # No buffer_size: the view's own end bounds what the copy may touch.
    view = modern_ctx.import_buffer(buf, (count,), dtype, offset=offset, usage=STORAGE | VERTEX)
    first = offset // data.itemsize
    np.testing.assert_array_equal(view.numpy(), data[first:first + count])


def test_without_8bit_storage_an_unaligned_tail_asks_for_transfer_src(modern_host):
    features = {k: v for k, v in modern_host.features.items() if k != "storageBuffer8BitAccess"}
    ctx = modern_host.adopt(features=features)
    try:
        data = np.arange(8).astype(np.float16)
        buf = _vertex_buffer(modern_host, data, STORAGE | VERTEX)
        view = ctx.import_buffer(buf, (3,), "float16", usage=STORAGE | VERTEX)
        with pytest.raises(gc.UnsupportedError, match="TRANSFER_SRC"):
            view.numpy()
        readable = _vertex_buffer(modern_host, data, STORAGE | VERTEX | TRANSFER_SRC)
        view = ctx.import_buffer(readable, (3,), "float16", usage=STORAGE | VERTEX | TRANSFER_SRC)
        np.testing.assert_array_equal(view.numpy(), data[:3])
    finally:
        ctx.close()


def test_usage_without_storage_buffer_is_refused_at_import(host, ctx):
    buf = host.create_buffer(64)
    with pytest.raises(gc.InvalidArgumentError, match="STORAGE_BUFFER"):
        ctx.import_buffer(buf, (4,), buffer_size=64, usage=VERTEX | TRANSFER_SRC)
    with pytest.raises(gc.InvalidArgumentError, match="STORAGE_BUFFER"):
        ctx.import_buffer(buf, (4,), buffer_size=64, usage="vertex_buffer")


@pytest.mark.parametrize("bad", ["storage_buffer|telepathy", True, 1.5, -1, 1 << 40, [STORAGE, "nope"]])
def test_malformed_usage_is_a_typed_error(host, ctx, bad):
    buf = host.create_buffer(64)
    with pytest.raises(gc.InvalidArgumentError, match="usage"):
        ctx.import_buffer(buf, (4,), buffer_size=64, usage=bad)


def test_writes_into_imported_views_say_what_to_do_instead(host, ctx):
    view = ctx.import_buffer(host.create_buffer(64), (4,), buffer_size=64)
    with pytest.raises(gc.UnsupportedError, match=r"rec\.copy"):
        view.write(np.zeros(4, np.float32))
