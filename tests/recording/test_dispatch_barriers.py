"""The second scope of the barriers the recorder puts between guest work
(vk/sync.py's notes): before a direct dispatch a barrier reaches compute
shaders only, and the work of another stage that follows (an indirect
dispatch, an upload's copy) still waits for every dispatch before it, also
for those a conflict-free key set would not name. The validation layer
(synchronization validation, every test) reports a missing barrier; the
barriers' masks are read where the Python walker records them.
"""
import numpy as np
import pytest

from guestcompute.vk import sync


def _barriers(ctx, monkeypatch) -> list:
    """(src stages, dst stages, src access, dst access) of every global
    barrier the Python walker records from now on (skips with the C walker,
    whose calls Python cannot see: tests/recording/test_stream_hazards.py
    checks that both record the same)."""
    if ctx.device.interpreter.kind == "native":
        pytest.skip("the C walker records its barriers itself")
    fns, seen = ctx.device.fns, []
    real = fns.vkCmdPipelineBarrier

    def spy(cmd, src, dst, flags, count, barriers, *rest):
        if count:
            seen.append((src, dst, barriers[0].srcAccessMask, barriers[0].dstAccessMask))
        return real(cmd, src, dst, flags, count, barriers, *rest)
    monkeypatch.setattr(fns, "vkCmdPipelineBarrier", spy)
    return seen


def test_a_barrier_between_dependent_dispatches_reaches_compute_shaders_only(host, ctx, monkeypatch):
    x = ctx.tensor(np.arange(256, dtype=np.float32))
    y, z = ctx.empty((256,)), ctx.empty((256,))
    host.run(ctx, lambda rec: rec.scale(x, 2.0, out=y))       # first-use work out of the way
    seen = _barriers(ctx, monkeypatch)
    host.run(ctx, lambda rec: (rec.scale(x, 2.0, out=y), rec.scale(y, 3.0, out=z)))
    np.testing.assert_array_equal(z.numpy(), np.arange(256) * 6.0)
    between = [b for b in seen if b[1] == sync.DISPATCH_STAGES]
    assert between == [(sync.COMPUTE, sync.COMPUTE, sync.SHADER_WRITE, sync.SHADER_RW)], seen


def test_an_indirect_dispatch_waits_for_counts_written_before_a_narrow_barrier(host, ctx):
    """The counts are written, then a barrier reaching compute shaders only
    (another pair of dependent ops) clears the tracker; the indirect read of
    the counts still gets a barrier to the indirect stage."""
    n = 4099
    count = ctx.tensor(np.array([300], np.uint32))
    a, b = ctx.tensor(np.ones(64, np.float32)), ctx.empty((64,))
    out = ctx.tensor(np.full(n, -1.0, np.float32))

    def frame(rec):
        groups = rec.groups_from_count(count, 128)
        rec.scale(a, 2.0, out=b)
        rec.scale(b, 2.0, out=a)                # reads b: the narrow barrier
        rec.dispatch_indirect(groups, "fill", out, 7.0)
    host.run(ctx, frame)
    expect = np.full(n, -1.0, np.float32)
    expect[:384] = 7.0
    np.testing.assert_array_equal(out.numpy(), expect)
    np.testing.assert_array_equal(a.numpy(), np.full(64, 4.0))


def test_an_upload_waits_for_dispatches_before_a_narrow_barrier(modern_host, modern_ctx):
    """A copy into a tensor an earlier dispatch wrote, after a narrow barrier
    that left that write out of the tracker: the copy (a transfer) still
    waits for it, and the data read after is the upload's."""
    host, ctx = modern_host, modern_ctx
    target = ctx.zeros((64,))
    target.buffer.alloc.mapped = None           # a staging copy, as where device memory is not mappable
    b, c, got = ctx.zeros((64,)), ctx.empty((64,)), ctx.empty((64,))
    data = np.arange(64, dtype=np.float32)

    def frame(rec):
        rec.fill(b, 1.0)
        rec.fill(target, 5.0)                   # written here...
        rec.scale(b, 2.0, out=c)                # ...then a narrow barrier (c reads b)
        target.write(data)                      # the copy overwrites it
        rec.scale(target, 1.0, out=got)
    host.run(ctx, frame)
    np.testing.assert_array_equal(got.numpy(), data)
    np.testing.assert_array_equal(c.numpy(), np.full(64, 2.0))
