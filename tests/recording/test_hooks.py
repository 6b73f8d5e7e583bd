"""Host hooks: the host records its own commands between guest ops, and the
guest's barriers treat the hook as touching what the host declared."""
import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc
from guestcompute.vk.structs import new


def _copier(host, src, dst, nbytes):
    """A host hook: vkCmdCopyBuffer from tensor src to tensor dst."""
    def copy(cmd):
        region = new("VkBufferCopy", srcOffset=src.offset * 4, dstOffset=dst.offset * 4, size=nbytes)
        host.fns.vkCmdCopyBuffer(cmd, src.buffer.handle, dst.buffer.handle, 1, region)
        return "copied"
    return copy


def test_hook_copy_is_ordered_between_guest_ops(host, ctx):
    n = 1000
    x_np = np.arange(n, dtype=np.float32)
    x = ctx.tensor(x_np)
    y, z = ctx.empty((n,)), ctx.empty((n,))

    def frame(rec):
        rec.scale(x, 2.0, out=y)                                  # guest writes y
        got = rec.host(_copier(host, y, z, n * 4), reads=[y], writes=[z])   # host copies y -> z
        assert got == "copied"
        rec.add(z, 1.0, out=x)                                    # guest reads z, overwrites x
        return rec
    rec = host.run(ctx, frame)
    np.testing.assert_array_equal(z.numpy(), x_np * 2)
    np.testing.assert_array_equal(x.numpy(), x_np * 2 + 1)
    assert rec.barriers >= 2


def test_undeclared_hook_is_a_hazard_sync_validation_sees(bare_host):
    """The same hook without its declaration: the missing barriers are
    reported, which proves the test above checks the ordering."""
    ctx = bare_host.adopt()
    try:
        x = ctx.tensor(np.ones(256, np.float32))
        y, z = ctx.empty((256,)), ctx.empty((256,))
        cmd = bare_host.begin()
        with ctx.record(cmd) as rec:
            rec.scale(x, 2.0, out=y)
            rec.host(_copier(bare_host, y, z, 1024))
        bare_host.submit_and_wait(cmd)
        assert any("SYNC-HAZARD" in m for m in bare_host.messages), bare_host.messages
    finally:
        bare_host.messages.clear()
        ctx.close()


def test_hook_inside_a_program(host, ctx):
    n = 300
    x = ctx.tensor(np.zeros(n, np.float32))
    y, z = ctx.empty((n,)), ctx.empty((n,))

    def body(rec, p):
        rec.add(x, p.step, out=x)
        rec.scale(x, 3.0, out=y)
        rec.host(_copier(host, y, z, n * 4), reads=y, writes=z)
        rec.add(z, x, out=y)
    prog = ctx.program(body, params={"step": "float32"})
    for step in (1.0, 2.0):
        host.run(ctx, lambda rec: rec.execute(prog, params={"step": step}))
    np.testing.assert_array_equal(z.numpy(), np.full(n, 9.0))
    np.testing.assert_array_equal(y.numpy(), np.full(n, 12.0))
    # the hook ran again when the program re-recorded
    x.resize((n,))
    x.write(np.zeros(n, np.float32))
    host.run(ctx, lambda rec: rec.execute(prog, params={"step": 1.0}))
    np.testing.assert_array_equal(y.numpy(), np.full(n, 4.0))
    assert prog.stats["rerecords"] == 1


def test_hook_in_other_stages_writes_an_imported_buffer(host, ctx):
    """A hook declared in stages the guest never uses (ALL_COMMANDS) filling
    a host vertex buffer the guest then reads and writes."""
    n = 64
    buf = host.create_buffer(n * 4)
    host.write_buffer(buf, np.zeros(n, np.float32))
    v = ctx.import_buffer(buf, (n,), "float32", host_access="vertex", buffer_size=n * 4)
    w = ctx.tensor(np.arange(n, dtype=np.float32))
    out = ctx.empty((n,))
    access = (vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)

    def frame(rec):
        rec.scale(w, 1.0, out=out)
        rec.host(lambda cmd: host.fill_buffer(cmd, buf, 0x40000000, n * 4), writes=[v], access=access)  # 2.0f
        rec.add(v, out, out=v)
    host.run(ctx, frame)
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, n), np.arange(n) + 2.0)


def test_hook_with_stages_override_and_transfer_reads(host, ctx):
    x = ctx.tensor(np.full(128, 4.0, np.float32))
    y = ctx.empty((128,))
    seen = []

    def frame(rec):
        rec.scale(x, 0.5, out=x)
        rec.host(_copier(host, x, y, 512), reads=[x], writes=[y], stages=vk.VK_PIPELINE_STAGE_TRANSFER_BIT)
        rec.host(lambda cmd: seen.append(cmd))         # declares nothing: no barrier, still called
        rec.scale(x, 3.0, out=x)                       # WAR against the hook's read
    host.run(ctx, frame)
    assert len(seen) == 1
    np.testing.assert_array_equal(y.numpy(), np.full(128, 2.0))
    np.testing.assert_array_equal(x.numpy(), np.full(128, 6.0))


def test_hook_errors_record_nothing(host, ctx):
    x = ctx.tensor(np.ones(4, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.InvalidArgumentError):
            rec.host("not callable")
        with pytest.raises(gc.InvalidArgumentError):
            rec.host(lambda cmd: None, reads=[np.ones(4)])
        with pytest.raises(gc.InvalidArgumentError):
            rec.host(lambda cmd: None, writes=[x], access="bogus")
        with pytest.raises(gc.InvalidArgumentError):
            rec.host(lambda cmd: None, writes=3)
        assert rec.barriers == 0 and rec.dispatches == 0
    host.submit_and_wait(cmd)
    with pytest.raises(gc.RecordingError):
        rec.host(lambda cmd: None)
