"""Recorder lifecycle: single-use recorders, one open recorder per command
buffer, close() against recording threads, epochs that may be retired, host
hooks that raise, hazards shared by imports of one VkBuffer, and the host
access masks the barriers are built from."""
import threading

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.ops.elementwise import elementwise

N = 256


def _free(host, cmd):
    """Free a host command buffer that was never submitted (any state)."""
    host.fns.vkFreeCommandBuffers(host.device, host.command_pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))


# -- item: epochs that are not closed cannot be retired -----------------------------------

def test_retire_rejects_epochs_that_are_not_closed(host, ctx):
    x = ctx.tensor(np.arange(N, dtype=np.float32))
    out = ctx.empty((N,))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        tmp = rec.add(x, x)               # a temporary the buffer still uses after it is dropped
        rec.add(tmp, x, out=out)
    del tmp
    live = ctx.live_objects()
    for future in (ctx.epoch, ctx.epoch + 100):
        with pytest.raises(gc.InvalidArgumentError, match="not closed yet"):
            ctx.retire(future)
        with pytest.raises(gc.InvalidArgumentError, match="not closed yet"):
            ctx.retire_when(fence=host.fence, epoch=future)
    assert ctx.live_objects() == live      # nothing freed, nothing queued
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(out.numpy(), np.arange(N) * 3)
    closed = ctx.advance_epoch()
    # numpy integers are epoch numbers too
    assert ctx.retire_when(fence=host.fence, epoch=np.int64(closed)) == closed
    ctx.advance_epoch()                             # polls the signalled fence: retires `closed`
    assert ctx.live_objects()["buffers"] == live["buffers"] - 1


@pytest.mark.parametrize("bad", ["abc", 2.5, True, None, -1])
def test_retire_rejects_values_that_are_not_epochs(host, ctx, bad):
    ctx.advance_epoch()
    if bad is not None:
        with pytest.raises(gc.InvalidArgumentError, match="epoch"):
            ctx.retire(bad)
    with pytest.raises(gc.InvalidArgumentError, match="epoch"):
        ctx.retire_when(fence=host.fence, epoch=bad if bad is not None else 1.0)
    assert ctx.live_objects()["retire_waits"] == 0
    ctx.retire(np.uint32(1))                        # the epoch closed above


# -- item: a recorder is single-use -----------------------------------------------------------

def test_a_finished_recorder_cannot_be_entered_again(host, ctx):
    x = ctx.tensor(np.ones(N, np.float32))
    cmd = host.begin()
    rec = ctx.record(cmd)
    with rec:
        rec.scale(x, 2.0, out=x)
    counts = (rec.dispatches, rec.barriers)
    with pytest.raises(gc.RecordingError, match="single-use"):
        with rec:
            rec.scale(x, 2.0, out=x)
    assert (rec.dispatches, rec.barriers) == counts
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(x.numpy(), np.full(N, 2.0))


def test_program_and_handoff_recorders_are_single_use_too(host, ctx):
    x = ctx.tensor(np.ones(N, np.float32))
    kept = []

    def body(rec):
        kept.append(rec)
        rec.scale(x, 2.0, out=x)
    prog = ctx.program(body)
    ctx.submit(body).wait()
    assert len(kept) == 2
    for rec in kept:
        with pytest.raises(gc.RecordingError, match="single-use"):
            with rec:
                pass
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(x.numpy(), np.full(N, 4.0))


# -- item: one open recorder per command buffer ----------------------------------------------

def test_a_second_recorder_on_an_open_command_buffer_is_refused(host, ctx):
    """The nested recorder would write ``y`` behind the outer recorder's
    hazard tracker: the outer read of ``y`` then has no barrier (a
    read-after-write hazard sync validation reports). Refused, the work goes
    through the open recorder and is ordered."""
    x = ctx.tensor(np.arange(N, dtype=np.float32))
    w, y, z = ctx.empty((N,)), ctx.empty((N,)), ctx.empty((N,))
    cmd = host.begin()
    refused = False
    with ctx.record(cmd) as rec:
        rec.scale(x, 1.0, out=w)
        try:
            with ctx.record(cmd) as inner:
                inner.scale(x, 2.0, out=y)
        except gc.RecordingError as e:
            assert "already open on this command buffer" in str(e)
            refused = True
            rec.scale(x, 2.0, out=y)
        rec.add(y, 1.0, out=z)
    host.submit_and_wait(cmd)
    assert refused
    np.testing.assert_array_equal(z.numpy(), np.arange(N) * 2 + 1)
    # the buffer's recorder left its block: a new one may record into another buffer
    host.run(ctx, lambda rec: rec.scale(x, 3.0, out=y))
    np.testing.assert_array_equal(y.numpy(), np.arange(N) * 3)


# -- item: close() while other threads record -----------------------------------------------------

@pytest.mark.parametrize("attempt", range(3))
def test_close_while_another_thread_records(host, attempt):
    ctx = host.adopt()
    x = ctx.tensor(np.ones(64, np.float32))
    y = ctx.empty((64,))
    cmd = host.begin()
    started = threading.Event()
    outcome = []

    def record_until_closed():
        try:
            for _ in range(500):
                with ctx.record(cmd) as rec:
                    for _ in range(10):
                        rec.add(x, 1.0, out=y)
                        rec.scale(y, 0.5, out=x)
                        started.set()
            outcome.append("finished")
        except gc.ContextClosedError:
            outcome.append("closed")
        except BaseException as e:          # anything else is a failure the main thread reports
            outcome.append(e)
        finally:
            started.set()

    t = threading.Thread(target=record_until_closed)
    t.start()
    try:
        assert started.wait(60)
        ctx.close()
    finally:
        t.join(60)
    assert not t.is_alive()
    assert outcome in (["closed"], ["finished"]), outcome
    with pytest.raises(gc.ContextClosedError):
        ctx.record(cmd)
    _free(host, cmd)     # never submitted: it names objects close() destroyed


def test_close_inside_an_open_recorder_on_the_same_thread_raises(host, ctx):
    x = ctx.tensor(np.ones(N, np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.scale(x, 2.0, out=x)
        with pytest.raises(gc.RecordingError, match="leave the block"):
            ctx.close()
        assert not ctx.closed
        rec.scale(x, 2.0, out=x)          # still usable: close() changed nothing
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(x.numpy(), np.full(N, 4.0))


def test_close_waits_a_bounded_time_for_a_recorder_that_stays_open(host):
    ctx = host.adopt()
    x = ctx.tensor(np.ones(N, np.float32))
    cmd = host.begin()
    opened, release = threading.Event(), threading.Event()
    outcome = []

    def hold_a_recorder_open():
        try:
            with ctx.record(cmd) as rec:
                rec.scale(x, 2.0, out=x)
                opened.set()
                release.wait(60)
                rec.scale(x, 2.0, out=x)      # the context is closing by now
            outcome.append("recorded")
        except gc.ContextClosedError:
            outcome.append("closed")
        finally:
            opened.set()

    t = threading.Thread(target=hold_a_recorder_open)
    t.start()
    try:
        assert opened.wait(60)
        with pytest.raises(gc.RecordingError, match="1 recorder still open"):
            ctx.close(timeout=0.05)
        assert ctx.closed
        with pytest.raises(gc.ContextClosedError):
            ctx.empty((4,))
    finally:
        release.set()
        t.join(60)
    assert outcome == ["closed"]
    ctx.close()                                # now nothing is open: it destroys
    ctx.close()                                # and again is a no-op
    _free(host, cmd)


# -- item: a host hook that raises ----------------------------------------------------------------

def test_hook_that_binds_a_pipeline_and_raises_leaves_no_stale_binding(host, ctx):
    """The hook binds a pipeline of the same layout as ``rec.scale`` (out =
    2x + 100) and raises; the caller catches it and records the same scale
    again, which must rebind its own pipeline."""
    x = ctx.tensor(np.arange(N, dtype=np.float32))
    y = ctx.empty((N,))
    hosts_plan = elementwise(ctx, "x0 * s + 100.0", [x], out=y, scalar=2.0, name="hosts_kernel")
    hosts_pipeline = ctx.device.pipelines.resolve(hosts_plan.dispatches[0].spec).handle

    def bind_then_fail(cmd):
        host.fns.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, hosts_pipeline)
        raise RuntimeError("the host's hook failed")

    def frame(rec):
        rec.scale(x, 3.0, out=y)
        with pytest.raises(RuntimeError, match="hook failed"):
            rec.host(bind_then_fail)
        rec.scale(x, 3.0, out=y)
    host.run(ctx, frame)
    np.testing.assert_array_equal(y.numpy(), np.arange(N) * 3)


def test_hook_that_raises_is_assumed_to_have_done_what_it_declared(host, ctx):
    """The hook fills ``z`` (declared) and then raises: the next op reading
    ``z`` still gets the barrier after the fill."""
    x = ctx.tensor(np.arange(N, dtype=np.float32))
    w, z, out = ctx.empty((N,)), ctx.empty((N,)), ctx.empty((N,))

    def fill_then_fail(cmd):
        host.fill_buffer(cmd, z.buffer.handle, 0x40000000, N * 4)     # 2.0f
        raise RuntimeError("the host's hook failed")

    def frame(rec):
        rec.scale(x, 1.0, out=w)
        with pytest.raises(RuntimeError, match="hook failed"):
            rec.host(fill_then_fail, writes=[z])
        rec.add(z, x, out=out)
    host.run(ctx, frame)
    np.testing.assert_array_equal(out.numpy(), np.arange(N) + 2.0)


# -- item: imports of one VkBuffer share hazard identity ------------------------------------------

def test_two_imports_of_one_vkbuffer_are_ordered(host, ctx):
    """Written through one import, read through another: a read-after-write
    on the same memory that needs a barrier (sync validation reports it, and
    the read may see stale data, without one)."""
    buf = host.create_buffer(N * 4)
    host.write_buffer(buf, np.zeros(N, np.float32))
    first = ctx.import_buffer(buf, (N,), "float32", host_access="vertex", buffer_size=N * 4)
    second = ctx.import_buffer(buf, (N,), "float32", host_access="vertex", buffer_size=N * 4)
    x = ctx.tensor(np.arange(N, dtype=np.float32))
    y = ctx.empty((N,))

    def frame(rec):
        rec.scale(x, 2.0, out=first)
        rec.add(second, 1.0, out=y)
        rec.scale(x, 5.0, out=second)      # write after that read, through the other import
        return rec
    rec = host.run(ctx, frame)
    np.testing.assert_array_equal(y.numpy(), np.arange(N) * 2 + 1)
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, N), np.arange(N) * 5)
    # entry, RAW, WAR and exit barriers: the two imports count once at entry and exit
    assert rec.barriers == 4


@pytest.mark.parametrize("written_first", ["whole", "upper"])
def test_imports_of_overlapping_ranges_are_ordered(host, ctx, written_first):
    """``whole`` is imported before ``upper`` (its second half): written
    through either one and then read through the other needs a barrier."""
    buf = host.create_buffer(2 * N * 4)
    host.write_buffer(buf, np.zeros(2 * N, np.float32))
    whole = ctx.import_buffer(buf, (2 * N,), "float32", host_access="transfer", buffer_size=2 * N * 4)
    upper = ctx.import_buffer(buf, (N,), "float32", offset=N * 4, host_access="vertex", buffer_size=2 * N * 4)
    y = ctx.zeros((2 * N,))

    def frame(rec):
        if written_first == "whole":
            rec.fill(whole, 7.0)
            rec.add(upper, 1.0, out=y[N:])
        else:
            rec.fill(upper, 7.0)
            rec.add(whole, 1.0, out=y)
    host.run(ctx, frame)
    got = y.numpy()
    np.testing.assert_array_equal(got[N:], np.full(N, 8.0))
    if written_first == "whole":
        np.testing.assert_array_equal(got[:N], np.zeros(N))    # never written
    else:
        np.testing.assert_array_equal(got[:N], np.ones(N))


def test_imports_of_disjoint_ranges_need_no_barrier_between_them(host, ctx):
    """One host buffer shared out in pieces: writes to different pieces
    are independent (only the entry and exit barriers)."""
    pieces = 4
    buf = host.create_buffer(pieces * N * 4)
    views = [ctx.import_buffer(buf, (N,), "float32", offset=i * N * 4, host_access="vertex",
                               buffer_size=pieces * N * 4) for i in range(pieces)]
    x = ctx.tensor(np.arange(N, dtype=np.float32))

    def frame(rec):
        for i, v in enumerate(views):
            rec.scale(x, float(i), out=v)
        return rec
    rec = host.run(ctx, frame)
    assert rec.barriers == 2
    want = np.concatenate([np.arange(N) * i for i in range(pieces)])
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, pieces * N), want)


# -- item: host access masks are validated where they are given -----------------------------------

_FRAGMENT = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT
_VERTEX_INPUT = vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT


@pytest.mark.parametrize("access, message", [
    ((-1, 0), "32-bit"),
    ((1 << 32, 0), "32-bit"),
    ((_VERTEX_INPUT, -1), "32-bit"),
    ((0, 0), "must not be empty"),
    ((1 << 27, 0), "no VkPipelineStageFlagBits"),
    ((_VERTEX_INPUT, 1 << 29), "no VkAccessFlagBits"),
    ((True, vk.VK_ACCESS_SHADER_READ_BIT), "int mask"),
    ((2.0, 0), "int mask"),
    ((_FRAGMENT, vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT), "VERTEX_ATTRIBUTE_READ_BIT is not performed"),
    ((vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk.VK_ACCESS_SHADER_READ_BIT), "needs one of"),
    ((vk.VK_PIPELINE_STAGE_ALL_GRAPHICS_BIT, vk.VK_ACCESS_HOST_READ_BIT), "HOST_READ_BIT"),
])
def test_import_rejects_impossible_host_access(host, ctx, access, message):
    buf = host.create_buffer(64)
    with pytest.raises(gc.InvalidArgumentError, match=message):
        ctx.import_buffer(buf, (4,), host_access=access, buffer_size=64)
    with pytest.raises(gc.InvalidArgumentError, match=message):
        gc.HostAccess(*access)


def test_valid_host_access_masks_are_accepted(host, ctx):
    buf = host.create_buffer(N * 4)
    host.write_buffer(buf, np.ones(N, np.float32))
    accepted = [
        (np.uint32(_VERTEX_INPUT), np.int64(vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT)),
        (vk.VK_PIPELINE_STAGE_ALL_GRAPHICS_BIT, vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT),
        (vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT),
        (_VERTEX_INPUT | _FRAGMENT, vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT),
        (vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0),
    ]
    views = [ctx.import_buffer(buf, (N,), host_access=a, buffer_size=N * 4) for a in accepted]
    assert all(type(v.buffer.host_access.stages) is int for v in views)
    host.run(ctx, lambda rec: [rec.scale(v, 2.0, out=v) for v in views])
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, N), np.full(N, 32.0))


def test_hook_rejects_impossible_access_before_recording(host, ctx):
    buf = host.create_buffer(N * 4)
    v = ctx.import_buffer(buf, (N,), host_access="vertex", buffer_size=N * 4)
    x = ctx.tensor(np.ones(N, np.float32))
    called = []
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.scale(x, 2.0, out=v)
        counts = (rec.dispatches, rec.barriers)
        for bad in [dict(access=(-1, 0)), dict(access=(_FRAGMENT, vk.VK_ACCESS_INDEX_READ_BIT)),
                    dict(stages=vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT),     # transfer access in compute
                    dict(stages=0), dict(stages=-5)]:
            with pytest.raises(gc.InvalidArgumentError):
                rec.host(called.append, writes=[v], **bad)
        assert (rec.dispatches, rec.barriers) == counts and not called
    host.submit_and_wait(cmd)            # the exit barrier was recorded: no validation message
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, N), np.full(N, 2.0))
