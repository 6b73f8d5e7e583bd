"""Ops that would make an output (or a temporary) larger than one storage
buffer binding reaches (maxStorageBufferRange; 128 MiB on lavapipe) are
refused with a typed error before anything is recorded — before, every
element past the range silently stayed unwritten."""
import numpy as np
import pytest

import guestcompute as gc

RANGE = 1 << 27        # what lavapipe reports


@pytest.fixture
def big_ctx(modern_host):
    c = modern_host.adopt()
    if c.limits.max_storage_buffer_range != RANGE:
        c.close()
        pytest.skip("needs a device whose maxStorageBufferRange is 128 MiB")
    yield c
    c.close()


def _refused(host, ctx, op):
    """``op(rec)`` raises UnsupportedError naming the range, having recorded
    nothing; the recorder stays usable and the command buffer submits."""
    small = ctx.tensor(np.arange(4, dtype=np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.UnsupportedError, match="maxStorageBufferRange"):
            op(rec)
        assert rec.dispatches == rec.barriers == 0
        after = rec.add(small, small)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(after.numpy(), np.arange(4) * 2)


def test_broadcast_output_past_the_range_is_refused(modern_host, big_ctx):
    a = big_ctx.tensor(np.ones((1, 6000), np.float32))
    b = big_ctx.tensor(np.ones((6000, 1), np.float32))
    assert 6000 * 6000 * 4 > RANGE                         # 144 MB of output
    _refused(modern_host, big_ctx, lambda rec: rec.add(a, b))


def test_matmul_output_past_the_range_is_refused(modern_host, big_ctx):
    a = big_ctx.tensor(np.ones((6000, 1), np.float32))
    b = big_ctx.tensor(np.ones((1, 6000), np.float32))
    _refused(modern_host, big_ctx, lambda rec: rec.matmul(a, b))


def test_concat_and_cast_outputs_past_the_range_are_refused(modern_host, big_ctx):
    half = big_ctx.empty((RANGE // 4 // 2 + 1024,), "float32")          # each part fits
    _refused(modern_host, big_ctx, lambda rec: rec.concat([half, half]))
    if not big_ctx.device.caps.uint8_storage:
        pytest.skip("uint8 tensors need 8-bit storage")
    quarter = big_ctx.empty((RANGE // 4 + 1024,), "uint8")              # fits; as float32 it does not
    _refused(modern_host, big_ctx, lambda rec: rec.cast(quarter, "float32"))


def test_outputs_up_to_the_range_still_work(modern_host, big_ctx):
    # The largest broadcast output that fits, checked at its last elements.
    n = RANGE // 4 // 4096
    a = big_ctx.tensor(np.arange(4096, dtype=np.float32).reshape(1, 4096))
    b = big_ctx.tensor(np.arange(n, dtype=np.float32).reshape(n, 1))
    out = modern_host.run(big_ctx, lambda rec: rec.add(a, b))
    assert out.buffer.size <= RANGE
    tail = out[n - 2:].numpy()
    np.testing.assert_array_equal(tail, np.arange(n - 2, n, dtype=np.float32)[:, None] + np.arange(4096))
