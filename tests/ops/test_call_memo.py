"""Op calls remembered for repeats on the same tensors and images: same
results, same validation, no memory kept alive."""
import gc as pygc
import struct

import numpy as np
import pytest

from guestcompute.errors import InvalidArgumentError, ShapeError
from guestcompute.ops.base import OpResult
from guestcompute.ops.memo import CallMemo, scalar_key


def _hits(ctx) -> int:
    """Repeats answered by the context's call memo."""
    return ctx.call_memo.hits


def test_repeat_calls_reuse_the_plan_and_stay_correct(host, ctx):
    a_np = np.arange(100, dtype=np.float32)
    a, b, c = ctx.tensor(a_np), ctx.tensor(np.ones(100, np.float32)), ctx.empty((100,))
    for i in range(3):
        host.run(ctx, lambda rec: rec.add(a, b, out=c))
        np.testing.assert_array_equal(c.numpy(), a_np + 1)
        host.run(ctx, lambda rec: rec.add(c, 2.5, out=c))     # in place with a scalar
        np.testing.assert_array_equal(c.numpy(), a_np + 3.5)
    assert _hits(ctx) >= 4


def test_ops_with_glsl_helpers_reuse_their_plans(host, ctx):
    """relu, tanh, clamp, pow... render helper functions; their repeats hit
    the memo too, and two helpers never share a plan."""
    x_np = np.linspace(-3, 3, 64, dtype=np.float32)
    x, out = ctx.tensor(x_np), ctx.empty((64,))
    hits = _hits(ctx)
    calls = [(lambda rec: rec.relu(x, out=out), np.maximum(x_np, 0)),
             (lambda rec: rec.tanh(x, out=out), np.tanh(x_np)),
             (lambda rec: rec.clamp(x, -1, 1, out=out), np.clip(x_np, -1, 1)),
             (lambda rec: rec.pow(x, 2.0, out=out), x_np ** 2)]
    for _ in range(2):
        for call, want in calls:
            host.run(ctx, call)
            np.testing.assert_allclose(out.numpy(), want, rtol=2e-6, atol=1e-7)
    assert _hits(ctx) - hits == len(calls)


def test_a_resized_tensor_is_validated_again(host, ctx):
    a, b, c = ctx.zeros((64,)), ctx.zeros((64,)), ctx.empty((64,))
    host.run(ctx, lambda rec: rec.add(a, b, out=c))
    a.resize((65,))
    with pytest.raises(ShapeError):
        host.run(ctx, lambda rec: rec.add(a, b, out=c))
    c.resize((32,))
    b.resize((32,))
    a.resize((32,))
    a.write(np.full(32, 2, np.float32))
    b.write(np.full(32, 3, np.float32))
    host.run(ctx, lambda rec: rec.add(a, b, out=c))
    np.testing.assert_array_equal(c.numpy(), np.full(32, 5, np.float32))


def test_equal_scalars_of_other_types_are_validated_again(host, ctx):
    x, y = ctx.tensor(np.arange(8, dtype=np.int32)), ctx.empty((8,), "int32")
    host.run(ctx, lambda rec: rec.add(x, 1, out=y))
    with pytest.raises(InvalidArgumentError):
        host.run(ctx, lambda rec: rec.add(x, True, out=y))      # bool is not a number here
    host.run(ctx, lambda rec: rec.add(x, 1.0, out=y))
    np.testing.assert_array_equal(y.numpy(), np.arange(8) + 1)


def test_signed_zeros_are_different_scalars(host, ctx):
    """0.0 == -0.0, but x / -0.0 is -inf: a repeat with the other zero is a new plan."""
    x, y = ctx.tensor(np.ones(8, np.float32)), ctx.empty((8,))
    for zero in (0.0, -0.0, 0.0):
        host.run(ctx, lambda rec: rec.div(x, zero, out=y))
        with np.errstate(divide="ignore"):          # numpy's ±inf is the expectation
            np.testing.assert_array_equal(y.numpy(), np.float32(1) / np.float32(zero))
    for zero in (-0.0, 0.0):
        host.run(ctx, lambda rec: rec.fill(y, zero))
        assert np.signbit(y.numpy()).tolist() == [np.signbit(zero)] * 8


def test_scalar_keys_follow_the_bits_of_floats():
    quiet, payload = (struct.unpack("<d", struct.pack("<Q", bits))[0]
                      for bits in (0x7FF8000000000000, 0x7FF8000000000001))
    assert scalar_key(0.0) != scalar_key(-0.0)
    assert scalar_key(np.float32(0.0)) != scalar_key(np.float32(-0.0))
    assert scalar_key(quiet) != scalar_key(payload)
    assert scalar_key(quiet) == scalar_key(struct.unpack("<d", struct.pack("<d", quiet))[0])   # a repeat hits
    assert scalar_key((1.0, -0.0)) != scalar_key((1.0, 0.0))
    assert scalar_key(1) != scalar_key(1.0) != scalar_key(True)


def test_contexts_share_no_plans(host, ctx):
    """Two contexts of one process: one's remembered calls (and resizes) never reach the other."""
    other = host.adopt()
    try:
        a, b, negative_zero = ctx.empty((8,)), other.empty((8,)), -0.0

        def fill_a(rec):
            rec.fill(a, negative_zero)
        host.run(ctx, fill_a)
        host.run(other, lambda rec: rec.fill(b, 0.0))
        assert not np.signbit(b.numpy()).any()
        assert np.signbit(a.numpy()).all()
        # A resize in the other context leaves this one's remembered calls valid.
        hits = ctx.call_memo.hits
        host.run(ctx, fill_a)
        other.empty((4,)).resize((5,))
        host.run(ctx, fill_a)
        assert ctx.call_memo.hits == hits + 2
    finally:
        other.close()


def test_views_made_per_call_work_and_leave_no_entries(host, ctx):
    base = ctx.tensor(np.arange(64, dtype=np.float32))
    out = ctx.empty((32,))
    memo = ctx.call_memo
    before = len(memo)
    for k in range(2):
        host.run(ctx, lambda rec: rec.copy(base[k::2], out=out))
        np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32)[k::2])
    pygc.collect()
    assert len(memo) == before             # each view died, and its entry with it


def test_plans_keep_no_memory_alive(host, ctx):
    memo = ctx.call_memo
    a, b, c = ctx.zeros((256,)), ctx.zeros((256,)), ctx.empty((256,))
    host.run(ctx, lambda rec: rec.add(a, b, out=c))
    assert len(memo) >= 1
    live = ctx.cache_stats()["live_buffers"]
    del a, c
    pygc.collect()
    ctx.retire()
    assert ctx.cache_stats()["live_buffers"] == live - 2
    assert len(memo) == 0


def test_call_memo_remembers_only_calls_it_can_tell_apart(host, ctx):
    """Tensors and plain scalars: remembered (one entry per distinct call);
    a list argument, or a result that is none of the arguments: not."""
    x_np = np.arange(16, dtype=np.float32)
    x, y, out = ctx.tensor(x_np), ctx.tensor(x_np + 1), ctx.empty((32,))
    calls = ctx.call_memo
    before = len(calls)
    for _ in range(3):
        host.run(ctx, lambda rec: rec.add(x, 2.0, out=out[:16]))      # a view made per call: new ids
        host.run(ctx, lambda rec: rec.concat([x, y], out=out))         # a list: never remembered
        host.run(ctx, lambda rec: rec.add(x, y))                       # a fresh output: never remembered
    pygc.collect()
    assert len(calls) == before
    np.testing.assert_array_equal(out.numpy(), np.concatenate([x_np, x_np + 1]))
    hits = ctx.call_memo.hits
    view = out[:16]
    for k in range(3):
        host.run(ctx, lambda rec: rec.add(x, 2.0, out=view))
    assert len(calls) == before + 1 and ctx.call_memo.hits == hits + 2
    np.testing.assert_array_equal(view.numpy(), x_np + 2)


def test_repeat_image_copies_are_remembered(host, ctx):
    """rec.copy with an image returns ``out`` and its repeats skip the planner, both ways."""
    data = np.random.default_rng(3).random((5, 9, 4), dtype=np.float32)
    img, src, back = ctx.image((9, 5), "rgba32f"), ctx.tensor(data), ctx.empty((5, 9, 4))
    hits = ctx.call_memo.hits
    for _ in range(3):
        assert host.run(ctx, lambda rec: rec.copy(src, out=img)) is img
        assert host.run(ctx, lambda rec: rec.copy(img, out=back)) is back
        np.testing.assert_array_equal(back.numpy(), data)
    assert ctx.call_memo.hits == hits + 4


def test_memo_is_bounded():
    memo = CallMemo(limit=4)
    for i in range(10):
        memo.put(("k", i), (i,), {}, OpResult(None, [i], reusable=True), swaps=0)
    assert len(memo) == 4
    assert memo.get(("k", 9))[1] == [9]
    assert memo.get(("k", 0)) is None
    assert memo.get(("k", 9))[0] == 0       # the swap count it was stored at: stale after a resize


def test_one_entry_barrier_covers_every_import_with_the_same_access(host, ctx):
    """Host transfer writes to two buffers, then guest reads of both: a single
    global entry barrier orders both (sync validation checks it)."""
    n = 256
    bufs = [host.create_buffer(n * 4) for _ in range(2)]
    xs = [ctx.import_buffer(b, (n,), "float32", host_access="transfer", buffer_size=n * 4) for b in bufs]
    out = ctx.empty((n,))
    cmd = host.begin()
    host.fill_buffer(cmd, bufs[0], 0x3F800000, n * 4)        # 1.0f
    host.fill_buffer(cmd, bufs[1], 0x40000000, n * 4)        # 2.0f
    with ctx.record(cmd) as rec:
        rec.copy(xs[0], out=out)
        rec.add(out, xs[1], out=out)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(out.numpy(), np.full(n, 3.0, np.float32))
    assert rec.barriers == 3          # entry, RAW on out, exit


def test_a_dispatch_recorded_again_after_changing_buffers_uses_the_new_ones(host, ctx):
    from guestcompute.ops.base import registered_ops
    a, b = ctx.tensor(np.ones(64, np.float32)), ctx.tensor(np.full(64, 2, np.float32))
    c1, c2 = ctx.empty((64,)), ctx.empty((64,))
    d = registered_ops()["add"](ctx, a, b, out=c1).dispatches[0]
    host.run(ctx, lambda rec: rec.dispatch(d))
    d.bindings = (a.buffer, b.buffer, c2.buffer)       # same shapes, another output
    host.run(ctx, lambda rec: rec.dispatch(d))
    np.testing.assert_array_equal(c1.numpy(), np.full(64, 3, np.float32))
    np.testing.assert_array_equal(c2.numpy(), np.full(64, 3, np.float32))
