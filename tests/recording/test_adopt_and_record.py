"""Adopt, tensors, import, cached pipelines, barriers, errors: one op from host to dispatch."""
import numpy as np
import pytest
from vulkan import ffi

import guestcompute as gc
from guestcompute.testing import HeadlessHost


def test_add_sub_mul_scale_fill_copy_match_numpy(host, ctx):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(1000).astype(np.float32)
    b_np = rng.standard_normal(1000).astype(np.float32)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)

    def work(rec):
        return (rec.add(a, b), rec.sub(a, b), rec.mul(a, b), rec.scale(a, 2.5), rec.copy(b),
                rec.fill(ctx.empty((7, 3)), 4.0))
    add, sub, mul, scl, cpy, filled = host.run(ctx, work)
    np.testing.assert_allclose(add.numpy(), a_np + b_np, rtol=1e-6)
    np.testing.assert_allclose(sub.numpy(), a_np - b_np, rtol=1e-6)
    np.testing.assert_allclose(mul.numpy(), a_np * b_np, rtol=1e-6)
    np.testing.assert_allclose(scl.numpy(), 2.5 * a_np, rtol=1e-6)
    np.testing.assert_array_equal(cpy.numpy(), b_np)
    np.testing.assert_array_equal(filled.numpy(), np.full((7, 3), 4.0, np.float32))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_ops(host, ctx, dtype):
    a_np = np.arange(1, 38, dtype=dtype)
    b_np = (np.arange(37, dtype=dtype) * 3 % 11).astype(dtype)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    add, mul, scl = host.run(ctx, lambda rec: (rec.add(a, b), rec.mul(a, b), rec.scale(a, 3)))
    np.testing.assert_array_equal(add.numpy(), a_np + b_np)
    np.testing.assert_array_equal(mul.numpy(), a_np * b_np)
    np.testing.assert_array_equal(scl.numpy(), a_np * 3)


def test_chained_ops_get_barriers_and_are_correct(host, ctx):
    x_np = np.linspace(-1, 1, 4096, dtype=np.float32)
    x = ctx.tensor(x_np)
    y = ctx.empty(x.shape)

    def work(rec):
        rec.add(x, x, out=y)          # y = 2x
        rec.mul(y, x, out=y)          # RAW on y, in place
        rec.scale(y, 0.5, out=x)      # WAR on x
        return rec
    rec = host.run(ctx, work)
    assert rec.barriers >= 2
    np.testing.assert_allclose(x.numpy(), x_np * x_np, rtol=1e-6)


def test_two_hundred_buffer_sets_make_one_pipeline(host):
    ctx = host.adopt()
    try:
        sets = [(ctx.tensor(np.full(n, i, np.float32)), ctx.tensor(np.ones(n, np.float32)), ctx.empty((n,)))
                for i, n in enumerate(range(64, 264))]
        host.run(ctx, lambda rec: [rec.add(a, b, out=c) for a, b, c in sets])
        stats = ctx.cache_stats()
        # sizes vary: vec4, vec2 and scalar widths are three distinct kernels
        assert stats["pipelines_created"] == 3
        assert stats["pipeline_hits"] >= 197
        before = ctx.cache_stats()["pipelines_created"]
        host.run(ctx, lambda rec: [rec.add(a, b, out=c) for a, b, c in sets])
        assert ctx.cache_stats()["pipelines_created"] == before
        for i, (a, b, c) in enumerate(sets):
            assert c.numpy()[0] == i + 1
        fresh = host.adopt()
        try:
            same = [(fresh.tensor(np.full(256, i, np.float32)), fresh.empty((256,))) for i in range(200)]
            host.run(fresh, lambda rec: [rec.add(a, a, out=c) for a, c in same])
            assert fresh.cache_stats()["pipelines_created"] == 1
            assert fresh.cache_stats()["modules_created"] == 1
            assert [c.numpy()[5] for a, c in same[:3]] == [0, 2, 4]
        finally:
            del same
            fresh.close()
    finally:
        ctx.close()


def test_import_host_vertex_buffer_zero_copy(host, ctx):
    n = 256
    buf = host.create_buffer(n * 16)
    start = np.random.default_rng(1).standard_normal((n, 4)).astype(np.float32)
    host.write_buffer(buf, start)
    pos = ctx.import_buffer(buf, (n, 4), "float32", host_access="vertex|transfer", buffer_size=n * 16)
    vel = ctx.tensor(np.full((n, 4), 0.25, np.float32))
    cmd = host.begin()
    host.fill_buffer(cmd, buf, 0, 16)  # host transfer write before the guest's work
    with ctx.record(cmd) as rec:
        rec.add(pos, vel, out=pos)
    host.fill_buffer(cmd, buf, 0, 16, offset=16)  # host work after the guest's exit barrier
    host.submit_and_wait(cmd)
    expect = start + 0.25
    expect[0] = 0.25
    expect[1] = 0.0
    np.testing.assert_allclose(host.read_buffer(buf, np.float32, n * 4).reshape(n, 4), expect, rtol=1e-6)


def test_import_with_offset_and_strided_view(host, ctx):
    buf = host.create_buffer(4096)
    host.write_buffer(buf, np.arange(1024, dtype=np.float32))
    view = ctx.import_buffer(buf, (10, 8), "float32", offset=64, buffer_size=4096)
    out = host.run(ctx, lambda rec: rec.scale(view[:, ::2], 2.0))
    expect = (np.arange(16, 96, dtype=np.float32).reshape(10, 8)[:, ::2]) * 2
    np.testing.assert_array_equal(out.numpy(), expect)


@pytest.mark.parametrize("profile", ["bare", "modern"])
def test_missing_barrier_is_caught_by_sync_validation(profile):
    with HeadlessHost(profile) as h:
        ctx = h.adopt()
        t = ctx.empty((1024,))
        cmd = h.begin()
        with ctx.record(cmd) as rec:
            rec.fill(t, 1.0)
            rec.flush()              # the walker tracked fill's write...
            rec.encoder.state.hazards.after_barrier()      # sabotage: ...and forgets it, with no barrier
            rec.add(t, t)            # reads what fill wrote: needs the missing barrier
        h.submit_and_wait(cmd)
        assert any("SYNC-HAZARD-READ-AFTER-WRITE" in m for m in h.messages), h.messages
        ctx.close()


def test_broadcasting_and_views(host, ctx):
    a_np = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b_np = np.array([10, 20, 30], np.float32).reshape(3, 1)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    r1, r2, r3 = host.run(ctx, lambda rec: (rec.add(a, b), rec.mul(a.T, 2), rec.sub(a[1], a[0, :, ::-1][:, :4])))
    np.testing.assert_array_equal(r1.numpy(), a_np + b_np)
    np.testing.assert_array_equal(r2.numpy(), a_np.T * 2)
    np.testing.assert_array_equal(r3.numpy(), a_np[1] - a_np[0, :, ::-1])


def test_failed_op_leaves_host_buffer_usable(host, ctx):
    """An error raised inside record() must leave nothing half-recorded."""
    buf = host.create_buffer(64)
    host.write_buffer(buf, np.zeros(16, np.float32))
    a = ctx.tensor(np.ones(8, np.float32))
    b = ctx.tensor(np.ones(9, np.float32))
    cmd = host.begin()
    host.fill_buffer(cmd, buf, 0x3F800000, 64)   # host's own work: fill with 1.0f
    with pytest.raises(gc.ShapeError):
        with ctx.record(cmd) as rec:
            rec.add(a, b)
    with pytest.raises(gc.DTypeError):
        with ctx.record(cmd) as rec:
            rec.add(a, ctx.tensor(np.ones(8, np.int32)))
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(host.read_buffer(buf, np.float32, 16), np.ones(16, np.float32))


def test_typed_errors(host, ctx):
    a = ctx.tensor(np.ones(8, np.float32))
    buf = host.create_buffer(64)
    with pytest.raises(gc.DTypeError):
        ctx.empty((4,), "complex128")
    with pytest.raises(gc.BufferRangeError):
        ctx.import_buffer(buf, (32,), "float32", buffer_size=64)
    with pytest.raises(gc.BufferRangeError):
        ctx.import_buffer(buf, (4,), "float32", offset=6, buffer_size=64)
    with pytest.raises(gc.InvalidArgumentError):
        ctx.import_buffer(buf, (4,), "float32", host_access="bogus")
    with pytest.raises(gc.InvalidArgumentError):
        ctx.record("not a handle")
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.ShapeError):
            rec.add(a, a, out=ctx.empty((9,)))
        with pytest.raises(gc.InvalidArgumentError):
            rec.add(a, np.ones(8))
        with pytest.raises(gc.InvalidArgumentError):
            rec.add(a[1:], a[:-1], out=a[1:].reshape(7) if False else a[:-1])  # partial overlap
    host.submit_and_wait(cmd)
    with pytest.raises(gc.RecordingError):
        rec.add(a, a)
    other = host.adopt()
    try:
        with pytest.raises(gc.WrongContextError):
            host.run(other, lambda r: r.add(a, a))
    finally:
        other.close()


def test_closed_context_raises(host):
    ctx = host.adopt()
    a = ctx.tensor(np.ones(4, np.float32))
    ctx.close()
    with pytest.raises(gc.ContextClosedError):
        ctx.empty((4,))
    with pytest.raises(gc.ContextClosedError):
        a.numpy()
    with pytest.raises(gc.ContextClosedError):
        ctx.record(host.allocate())


def test_float16_needs_enabled_feature(bare_host, modern_host):
    bare = bare_host.adopt()
    try:
        with pytest.raises(gc.UnsupportedError):
            bare.empty((4,), "float16")
    finally:
        bare.close()
    ctx = modern_host.adopt()
    try:
        x = np.linspace(0, 2, 64).astype(np.float16)
        t = ctx.tensor(x)
        out = modern_host.run(ctx, lambda rec: rec.add(t, t))
        np.testing.assert_array_equal(out.numpy(), x + x)
    finally:
        ctx.close()


def test_requirements_and_adopt_declares_only_what_host_enabled(host):
    req = gc.requirements(host.physical_device, instance_api_version=host.api_version)
    # Vulkan 1.0 without VK_KHR_get_physical_device_properties2 on the
    # instance may not enable push descriptors: the instance extension is named
    if host.api_version < (1, 1):
        assert "VK_KHR_push_descriptor" not in req.device_extensions
        assert req.instance_extensions == ["VK_KHR_get_physical_device_properties2"]
    else:
        assert "VK_KHR_push_descriptor" in req.device_extensions
    assert req.required_extensions == []
    ctx = host.adopt()
    try:
        assert ctx.cache_stats()["push_descriptors"] == (host.profile == "modern")
    finally:
        ctx.close()


def test_adopt_accepts_int_handles(host):
    from vulkan import ffi
    kw = host.adopt_kwargs()
    for k in ("instance", "physical_device", "device"):
        kw[k] = int(ffi.cast("uintptr_t", kw[k]))
    ctx = gc.Context.adopt(**kw)
    try:
        a = ctx.tensor(np.arange(4, dtype=np.float32))
        cmd = host.begin()
        with ctx.record(int(ffi.cast("uintptr_t", cmd))) as rec:
            out = rec.add(a, a)
        host.submit_and_wait(cmd)
        np.testing.assert_array_equal(out.numpy(), [0, 2, 4, 6])
    finally:
        ctx.close()


def test_large_dispatch_folds_grid(host, ctx, monkeypatch):
    n = 70_000
    x = ctx.tensor(np.arange(n, dtype=np.float32))
    limits = ctx.limits
    object.__setattr__(limits, "max_workgroup_count", (64, 65535, 65535))  # force a 2-D grid
    out = host.run(ctx, lambda rec: rec.add(x[::1], 1.0))
    np.testing.assert_array_equal(out.numpy(), np.arange(n, dtype=np.float32) + 1)


def test_standalone_context_run():
    with gc.Context.create(validation=True) as ctx:
        a = ctx.tensor(np.arange(10, dtype=np.float32))
        out = ctx.run(lambda rec: rec.scale(a, 3.0))
        np.testing.assert_array_equal(out.numpy(), np.arange(10) * 3.0)
        assert ctx.messenger.messages == []


def test_ctx_device_handle_is_the_adopted_vkdevice(host, ctx):
    """As documented: ctx.device is guestcompute's object, its handle the VkDevice."""
    assert int(ffi.cast("uintptr_t", ctx.device.handle)) == int(ffi.cast("uintptr_t", host.device))
