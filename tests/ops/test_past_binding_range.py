"""Tensors larger than one storage-buffer binding reaches
(maxStorageBufferRange; 128 MiB on lavapipe): point-wise ops, reductions,
casts, copies, concat, index_select and matmul run in windows and give
numpy's result; other ops refuse with a typed error before recording.

Most cases run on a context that acts as if its range were a few hundred
bytes (``testing.limit_binding_range``), so that shapes and broadcasting
can be property-tested with small tensors; the cases the issue names run
at a range of 128 MiB (lavapipe's real one, a GPU's limited to it)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import guestcompute as gc
from guestcompute.testing import limit_binding_range
from strided_views import shapes

RANGE = 1 << 27        # the range the large cases are sized for (lavapipe's own)
SMALL = 256            # the simulated range: 64 float32s
HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def big_ctx(modern_host):
    """A context whose bindings reach RANGE bytes: a device with a larger
    range (a GPU's is 4 GiB) is limited to it, so the large cases run there too."""
    c = modern_host.adopt()
    if c.limits.max_storage_buffer_range < RANGE:
        c.close()
        pytest.skip(f"the device's maxStorageBufferRange is below {RANGE} bytes")
    limit_binding_range(c, RANGE)
    yield c
    c.close()


def _limited(host):
    """A context of ``host`` whose bindings reach SMALL bytes."""
    c = host.adopt()
    limit_binding_range(c, SMALL)
    yield c
    c.close()


@pytest.fixture
def small_ctx(modern_host):
    yield from _limited(modern_host)


# -- at the real range --------------------------------------------------------------

def test_broadcast_output_past_the_range_gives_numpys_result(modern_host, big_ctx):
    a_host = np.arange(6000, dtype=np.float32).reshape(1, 6000)
    b_host = (np.arange(6000, dtype=np.float32) * 0.5).reshape(6000, 1)
    a, b = big_ctx.tensor(a_host), big_ctx.tensor(b_host)
    assert 6000 * 6000 * 4 > RANGE                         # 144 MB of output
    out = modern_host.run(big_ctx, lambda rec: rec.add(a, b))
    np.testing.assert_array_equal(out.numpy(), a_host + b_host)


def test_a_200_mb_cast_gives_numpys_result(modern_host, big_ctx):
    x_host = np.random.default_rng(1).uniform(-1e4, 1e4, 50_000_000).astype(np.float32)   # 200 MB
    x = big_ctx.tensor(x_host)
    cmd = modern_host.begin()
    with big_ctx.record(cmd) as rec:
        as_int = rec.cast(x, "int32")
        as_half = rec.cast(x, "float16")
        total = rec.sum(as_int)           # reads what the casts wrote: barriers between pieces
    modern_host.submit_and_wait(cmd)
    np.testing.assert_array_equal(as_int.numpy(), x_host.astype(np.int32))
    np.testing.assert_array_equal(as_half.numpy(), x_host.astype(np.float16))
    assert int(total.numpy()) == int(x_host.astype(np.int32).sum(dtype=np.int64).astype(np.int32))


def test_matmul_past_the_range_in_rows_and_along_k(modern_host, big_ctx):
    rng = np.random.default_rng(2)
    a_host = rng.integers(-3, 4, (6000, 2)).astype(np.float32)
    b_host = rng.integers(-3, 4, (2, 6000)).astype(np.float32)
    a, b = big_ctx.tensor(a_host), big_ctx.tensor(b_host)
    out = modern_host.run(big_ctx, lambda rec: rec.matmul(a, b))                 # out of 144 MB
    np.testing.assert_array_equal(out.numpy(), a_host @ b_host)
    # b of 154 MB, cut along K.
    k = 600_000
    a_host = rng.integers(-2, 3, (2, k)).astype(np.float32)
    b_host = rng.integers(-2, 3, (k, 64)).astype(np.float32)
    a, b = big_ctx.tensor(a_host), big_ctx.tensor(b_host)
    out = modern_host.run(big_ctx, lambda rec: rec.matmul(a, b))
    np.testing.assert_array_equal(out.numpy(), a_host.astype(np.float64) @ b_host)


def test_an_op_that_does_not_run_in_windows_refuses_before_recording(modern_host, big_ctx):
    keys = big_ctx.empty((RANGE // 4 + 1024,), "uint32")
    small = big_ctx.tensor(np.arange(4, dtype=np.float32))
    cmd = modern_host.begin()
    with big_ctx.record(cmd) as rec:
        with pytest.raises(gc.UnsupportedError, match="maxStorageBufferRange.*rec.sort|rec.sort.*maxStorage"):
            rec.sort(keys)
        assert rec.dispatches == rec.barriers == 0
        after = rec.add(small, small)
    modern_host.submit_and_wait(cmd)
    np.testing.assert_array_equal(after.numpy(), np.arange(4) * 2)


# -- at a simulated range of 256 bytes ----------------------------------------------------

def _run(host, ctx, fn):
    return host.run(ctx, fn)


@HYP
@given(data=st.data())
def test_broadcast_binary_ops_in_windows(modern_host, small_ctx, data):
    out_shape = data.draw(shapes(1, 3, 40))
    a_shape = tuple(n if data.draw(st.booleans()) else 1 for n in out_shape)
    b_shape = tuple(n if data.draw(st.booleans()) else 1 for n in out_shape)[data.draw(st.integers(0, 1)):]
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    a_host = rng.integers(-9, 9, a_shape).astype(np.float32)
    b_host = rng.integers(-9, 9, b_shape).astype(np.float32)
    a, b = small_ctx.tensor(a_host), small_ctx.tensor(b_host)
    op = data.draw(st.sampled_from(["add", "sub", "mul", "maximum"]))
    out = _run(modern_host, small_ctx, lambda rec: getattr(rec, op)(a, b))
    np.testing.assert_array_equal(out.numpy(), getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply",
                                                             "maximum": "maximum"}[op])(a_host, b_host))


def test_unary_cast_copy_where_clamp_fill_in_windows(modern_host, small_ctx):
    x_host = np.linspace(-3, 3, 30 * 17, dtype=np.float32).reshape(30, 17)
    x = small_ctx.tensor(x_host)
    cond = small_ctx.tensor((np.arange(17) % 3 == 0).astype(np.float32))
    filled = small_ctx.empty((500,))
    cmd = modern_host.begin()
    with small_ctx.record(cmd) as rec:
        relu = rec.relu(x)
        half = rec.cast(x, "float16")
        copied = rec.copy(x[::-1, ::2])                 # a strided view, backwards
        picked = rec.where(cond, x, 0.0)
        clamped = rec.clamp(x, -1.0, 2.0)
        rec.fill(filled, 7.0)
        rec.mul(x, 2.0, out=x)                          # in place
    modern_host.submit_and_wait(cmd)
    np.testing.assert_array_equal(relu.numpy(), np.maximum(x_host, 0))
    np.testing.assert_array_equal(half.numpy(), x_host.astype(np.float16))
    np.testing.assert_array_equal(copied.numpy(), x_host[::-1, ::2])
    np.testing.assert_array_equal(picked.numpy(), np.where(np.arange(17) % 3 == 0, x_host, 0))
    np.testing.assert_array_equal(clamped.numpy(), np.clip(x_host, -1, 2))
    np.testing.assert_array_equal(filled.numpy(), np.full(500, 7, np.float32))
    np.testing.assert_array_equal(x.numpy(), x_host * 2)


@HYP
@given(shape=shapes(1, 3, 30), data=st.data())
def test_reductions_in_windows(modern_host, small_ctx, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    x_host = rng.integers(-50, 50, shape).astype(np.float32)
    x = small_ctx.tensor(x_host)
    op = data.draw(st.sampled_from(["sum", "max", "min", "mean"]))
    axes = data.draw(st.one_of(st.none(), st.sets(st.integers(0, len(shape) - 1), min_size=1).map(tuple)))
    keepdims = data.draw(st.booleans())
    # Reductions over axes run in windows of rows along axis 0, and need at
    # least two rows per binding (see test_reducing_axis_0_of_huge_rows_refuses).
    assume(axes is None or len(shape) == 1 or 2 * 4 * np.prod(shape[1:]) <= SMALL - 16)
    got = _run(modern_host, small_ctx, lambda rec: getattr(rec, op)(x, axis=axes, keepdims=keepdims)).numpy()
    want = getattr(np, op)(x_host.astype(np.float64), axis=axes, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_reducing_axis_0_of_huge_rows_refuses(modern_host, small_ctx):
    x = small_ctx.empty((4, 50))           # one row is 200 of the 256 bytes
    cmd = modern_host.begin()
    with small_ctx.record(cmd) as rec:
        with pytest.raises(gc.UnsupportedError, match="rec.sum .*maxStorageBufferRange"):
            rec.sum(x, axis=0)
        assert rec.dispatches == 0
        whole = rec.sum(x, axis=None)      # everything at once still runs: as one long row
    modern_host.submit_and_wait(cmd)
    assert whole.shape == ()


def test_row_ops_in_windows(modern_host, small_ctx):
    rng = np.random.default_rng(3)
    x_host = rng.uniform(-2, 2, (40, 12)).astype(np.float32)
    x = small_ctx.tensor(x_host)
    cmd = modern_host.begin()
    with small_ctx.record(cmd) as rec:
        soft = rec.softmax(x, axis=-1)
        arg = rec.argmax(x, axis=1)
        run = rec.cumsum(x, axis=1)
        norm = rec.rms_norm(x)
    modern_host.submit_and_wait(cmd)
    e = np.exp(x_host - x_host.max(1, keepdims=True))
    np.testing.assert_allclose(soft.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(arg.numpy(), x_host.argmax(1))
    np.testing.assert_allclose(run.numpy(), np.cumsum(x_host, 1), rtol=1e-5, atol=1e-5)
    rms = x_host / np.sqrt((x_host ** 2).mean(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(norm.numpy(), rms, rtol=1e-4, atol=1e-5)


def test_concat_index_select_and_matmul_in_windows(modern_host, small_ctx):
    rng = np.random.default_rng(4)
    parts = [rng.integers(-5, 5, (n, 6)).astype(np.float32) for n in (7, 30, 1)]
    tensors = [small_ctx.tensor(p) for p in parts]
    src = rng.integers(-5, 5, (9, 4)).astype(np.float32)
    idx = rng.integers(0, 9, 50)
    a_host = rng.integers(-3, 3, (30, 5)).astype(np.float32)
    b_host = rng.integers(-3, 3, (5, 20)).astype(np.float32)
    tall = rng.integers(-3, 3, (90, 3)).astype(np.float32)          # b too long: cut along K
    wide = rng.integers(-3, 3, (2, 90)).astype(np.float32)
    cmd = modern_host.begin()
    with small_ctx.record(cmd) as rec:
        joined = rec.concat(tensors, axis=0)
        side = rec.concat([small_ctx.tensor(np.ones((40, 2), np.float32)),
                           small_ctx.tensor(np.zeros((40, 3), np.float32))], axis=1)
        picked = rec.index_select(small_ctx.tensor(src), idx, axis=0)
        product = rec.matmul(small_ctx.tensor(a_host), small_ctx.tensor(b_host))
        along_k = rec.matmul(small_ctx.tensor(wide), small_ctx.tensor(tall))
    modern_host.submit_and_wait(cmd)
    np.testing.assert_array_equal(joined.numpy(), np.concatenate(parts, 0))
    np.testing.assert_array_equal(side.numpy(), np.concatenate([np.ones((40, 2)), np.zeros((40, 3))], 1))
    np.testing.assert_array_equal(picked.numpy(), src[idx])
    np.testing.assert_array_equal(product.numpy(), a_host @ b_host)
    np.testing.assert_array_equal(along_k.numpy(), wide @ tall)


def test_a_view_past_the_range_binds_through_a_window(modern_host, small_ctx):
    """A small view far into a large buffer: one window, no cutting."""
    x_host = np.arange(1000, dtype=np.float32)
    x = small_ctx.tensor(x_host)
    out = _run(modern_host, small_ctx, lambda rec: rec.add(x[900:910], 1.0))
    np.testing.assert_array_equal(out.numpy(), x_host[900:910] + 1)
    _run(modern_host, small_ctx, lambda rec: rec.add(x[990:], x[:10], out=x[990:]))
    np.testing.assert_array_equal(x.numpy()[990:], x_host[990:] + x_host[:10])


def test_windowed_ops_check_their_arguments_first(modern_host, small_ctx):
    x = small_ctx.tensor(np.zeros((40, 4), np.float32))
    cmd = modern_host.begin()
    with small_ctx.record(cmd) as rec:
        with pytest.raises(gc.ShapeError):
            rec.add(x, small_ctx.tensor(np.zeros((3,), np.float32)))
        with pytest.raises(gc.InvalidArgumentError, match="overlaps"):
            rec.add(x[1:], 1.0, out=x[:-1])
        with pytest.raises(gc.ShapeError):
            rec.add(x, 1.0, out=small_ctx.empty((40, 5)))
        assert rec.dispatches == rec.barriers == 0
    modern_host.submit_and_wait(cmd)


@pytest.fixture
def small_bare_ctx(bare_host):
    yield from _limited(bare_host)


def test_windows_on_descriptor_sets_of_a_vulkan_1_0_host(bare_host, small_bare_ctx):
    """Without push descriptors each window is its own cached descriptor set,
    bound at its offset; sets go when the buffer does."""
    ctx = small_bare_ctx
    a_host = np.arange(300, dtype=np.float32).reshape(30, 10)
    a = ctx.tensor(a_host)
    out = _run(bare_host, ctx, lambda rec: rec.add(a, a[:1]))
    np.testing.assert_array_equal(out.numpy(), a_host + a_host[:1])
    total = _run(bare_host, ctx, lambda rec: rec.sum(a))
    assert float(total.numpy()) == a_host.sum()
    sets = ctx.live_objects()["descriptor_sets"]
    assert sets > 2                      # one per window and buffer set
    del a, out, total
    ctx.retire()
    assert ctx.live_objects()["descriptor_sets"] < sets


def test_a_program_replays_windowed_ops(modern_host, small_ctx):
    """A program captures the pieces (and keeps their windows alive);
    every replay with new params gives numpy's result."""
    x_host = np.linspace(-1, 1, 40 * 9, dtype=np.float32).reshape(40, 9)
    x = small_ctx.tensor(x_host)
    out = small_ctx.empty((40, 9))
    prog = small_ctx.program(lambda rec, p: rec.mul(rec.add(x, p.k), 2.0, out=out), params={"k": "float32"})
    for k in (0.5, -3.0):
        cmd = modern_host.begin()
        with small_ctx.record(cmd) as rec:
            rec.execute(prog, params={"k": k})
        modern_host.submit_and_wait(cmd)
        np.testing.assert_allclose(out.numpy(), (x_host + np.float32(k)) * 2, rtol=1e-6)
