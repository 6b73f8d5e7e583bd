"""GPU timestamps per guest scope and debug labels, under validation."""
import numpy as np
import pytest

from guestcompute.errors import RecordingError, UnsupportedError
from guestcompute.recording.timing import BLOCK, Timestamps


def _work(ctx, n=1 << 16):
    a = ctx.tensor(np.arange(n, dtype=np.float32))
    b = ctx.tensor(np.ones(n, np.float32))
    return a, b, ctx.empty((n,))


def test_scopes_time_work_and_match_numpy(host, ctx):
    a, b, c = _work(ctx)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with rec.timing("frame"):
            with rec.timing("add"):
                rec.add(a, b, out=c)
            with rec.timing("scale"):
                rec.scale(c, 2.0, out=c)
        with pytest.raises(RecordingError):
            rec.timings            # still recording
    host.submit_and_wait(cmd)
    t = rec.timings
    assert set(t) == {"frame", "add", "scale"}
    assert all(v >= 0 for v in t.values())
    # nested scopes: the outer one spans both inner ones
    assert t["frame"] >= max(t["add"], t["scale"])
    np.testing.assert_array_equal(c.numpy(), 2 * (np.arange(1 << 16, dtype=np.float32) + 1))


def test_heavy_scope_takes_longer_than_empty_one(modern_host, modern_ctx):
    ctx = modern_ctx
    a, b, c = _work(ctx, 1 << 20)
    cmd = modern_host.begin()
    with ctx.record(cmd) as rec:
        with rec.timing("empty"):
            pass
        with rec.timing("heavy"):
            for _ in range(8):
                rec.add(a, b, out=c)
    modern_host.submit_and_wait(cmd)
    t = rec.timings
    assert t["heavy"] > t["empty"]
    assert t["heavy"] > 0


def test_repeated_name_adds_up_and_many_scopes_span_blocks(modern_host, modern_ctx):
    ctx = modern_ctx
    a, b, c = _work(ctx, 1024)
    n = BLOCK // 2       # 2 queries per scope: fills one block; "last" needs a second
    cmd = modern_host.begin()
    with ctx.record(cmd) as rec:
        for i in range(n):
            with rec.timing(f"op{i % 3}"):
                rec.add(a, b, out=c)
        with rec.timing("last"):
            rec.scale(c, 3.0, out=c)
    modern_host.submit_and_wait(cmd)
    t = rec.timings
    assert set(t) == {"op0", "op1", "op2", "last"}
    assert ctx.timestamps.query_pools == 2
    np.testing.assert_array_equal(c.numpy(), 3 * (np.arange(1024, dtype=np.float32) + 1))


def test_ctx_timings_per_retired_epoch_and_pools_are_reused(host, ctx):
    a, b, c = _work(ctx, 4096)
    for frame in range(12):
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            with rec.timing("step"):
                rec.add(a, b, out=c)
        with ctx.record(cmd) as rec2:           # a second recording in the same epoch
            with rec2.timing("post"):
                rec2.scale(c, 0.5, out=c)
        host.submit_and_wait(cmd)
        epoch = ctx.advance_epoch()
        ctx.retire(epoch)
        got = ctx.timings()
        assert set(got) == {"step", "post"}
        assert ctx.timings(epoch) == got
        # the recorder still answers after its queries went back to the pool
        assert set(rec.timings) == {"step"}
    # every frame's queries were recycled: two blocks at most (one per recording)
    assert ctx.timestamps.query_pools <= 2
    assert ctx.timings(10 ** 9) == {}


def test_timestamps_wrap_at_the_valid_bits(modern_ctx):
    ts = Timestamps(modern_ctx)
    ts.valid_bits, ts.period_ns = 32, 2.0
    assert ts.ticks_to_ms(2 ** 32 - 10, 5) == pytest.approx(15 * 2.0 / 1e6)
    ts.valid_bits = 64
    assert ts.ticks_to_ms(100, 1100) == pytest.approx(1000 * 2.0 / 1e6)


def test_no_timestamps_on_the_queue_is_a_clear_error(modern_host, modern_ctx):
    modern_ctx.timestamps.valid_bits = 0
    cmd = modern_host.begin()
    with modern_ctx.record(cmd) as rec:
        with pytest.raises(UnsupportedError, match="timestampValidBits"):
            rec.timing("x")
    modern_host.submit_and_wait(cmd)


def test_timing_outside_a_recording_is_an_error(modern_host, modern_ctx):
    rec = modern_ctx.record(modern_host.begin())
    with pytest.raises(RecordingError):
        rec.timing("x")
    assert rec.timings == {}


def _spy(labels, calls):
    begin, end = labels.begin, labels.end
    labels.begin = lambda cmd, info: (calls.append("begin"), begin(cmd, info))
    labels.end = lambda cmd: (calls.append("end"), end(cmd))


def test_debug_labels_when_the_host_enabled_debug_utils(host):
    ctx = host.adopt(debug_utils=True)     # the test host's instance has VK_EXT_debug_utils
    try:
        labels = ctx.debug_labels
        assert labels.enabled
        calls = []
        _spy(labels, calls)
        a, b, c = _work(ctx, 256)
        ctx.op_labels = True
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            with rec.label("guest pass", color=(1, 0, 0, 1)):
                rec.add(a, b, out=c)       # labelled "add" inside the pass
                with rec.timing("t"):
                    rec.scale(c, 2.0, out=c)
        host.submit_and_wait(cmd)
        assert calls == ["begin", "begin", "end", "begin", "end", "end"]
        np.testing.assert_array_equal(c.numpy(), 2 * (np.arange(256, dtype=np.float32) + 1))
    finally:
        ctx.close()


def test_labels_record_nothing_without_debug_utils(host, ctx):
    assert not ctx.debug_labels.enabled
    ctx.op_labels = True                   # ignored: nothing to label with
    a, b, c = _work(ctx, 256)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        assert rec.op_labels is None
        with rec.label("pass"):
            rec.add(a, b, out=c)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(c.numpy(), np.arange(256, dtype=np.float32) + 1)


def test_timing_inside_a_program_is_refused_and_around_a_replay_works(modern_host, modern_ctx):
    ctx = modern_ctx
    a, b, c = _work(ctx, 1024)
    with pytest.raises(UnsupportedError, match="program"):
        ctx.program(lambda rec: rec.timing("inside"))
    prog = ctx.program(lambda rec: rec.add(a, b, out=c))
    cmd = modern_host.begin()
    with ctx.record(cmd) as rec:
        with rec.timing("replay"):
            rec.execute(prog)
    modern_host.submit_and_wait(cmd)
    assert set(rec.timings) == {"replay"}
    np.testing.assert_array_equal(c.numpy(), np.arange(1024, dtype=np.float32) + 1)
