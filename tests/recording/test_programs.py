"""Reusable programs: record once into a secondary command buffer, replay
with one vkCmdExecuteCommands; per-frame params; invalidation."""
import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc
from guestcompute.vk.structs import new


def _submit_all(host, cmds):
    """End and submit ``cmds`` one after another without waiting in between
    (frames in flight), then wait for the last."""
    host.submit(cmds)


def test_program_replays_like_direct_recording(host, ctx):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(1000).astype(np.float32)
    b_np = rng.standard_normal(1000).astype(np.float32)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    out = ctx.empty((1000,))

    def work(rec):
        t = rec.mul(a, b)
        rec.add(t, a, out=out)          # RAW on t: a barrier inside the secondary
        rec.scale(out, 0.5, out=out)
    prog = ctx.program(work)
    assert prog.stats["dispatches"] == 3 and prog.stats["barriers"] == 2
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_allclose(out.numpy(), (a_np * b_np + a_np) * 0.5, rtol=1e-6)
    direct = ctx.empty((1000,))
    host.run(ctx, lambda rec: rec.scale(rec.add(rec.mul(a, b), a), 0.5, out=direct))
    np.testing.assert_array_equal(direct.numpy(), out.numpy())
    assert prog.stats["replays"] == 1 and prog.stats["rerecords"] == 0


def test_three_frames_in_flight_with_params(host, ctx):
    """One program, three host command buffers in flight at once, each
    setting its own time step; the shared host vertex buffer is handed back
    and forth through entry / exit barriers."""
    n = 512
    buf = host.create_buffer(n * 4)
    x0 = np.linspace(-1, 1, n, dtype=np.float32)
    host.write_buffer(buf, x0)
    pos = ctx.import_buffer(buf, (n,), "float32", host_access="vertex", buffer_size=n * 4)
    vel = ctx.tensor(np.full(n, 0.5, np.float32))

    def step(rec, params):
        rec.add(pos, rec.mul(vel, params.dt), out=pos)
    prog = ctx.program(step, params={"dt": "float32"})
    cmds = []
    for dt in (1.0, 2.0, 4.0):
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            rec.execute(prog, params={"dt": dt})
        cmds.append(cmd)
    _submit_all(host, cmds)
    np.testing.assert_allclose(host.read_buffer(buf, np.float32, n), x0 + 0.5 * 7.0, rtol=1e-6)
    assert prog.stats["replays"] == 3 and prog.stats["records"] == 1
    assert prog.params.values == {"dt": 4.0}


def test_params_keep_values_and_mix_dtypes(host, ctx):
    x = ctx.tensor(np.arange(8, dtype=np.int32))
    y = ctx.empty((8,), "int32")
    f = ctx.tensor(np.ones(8, np.float32))
    g = ctx.empty((8,), "float32")

    def work(rec, p):
        rec.add(x, p.k, out=y)
        rec.mul(f, p.s, out=g)
    prog = ctx.program(work, params={"k": "int32", "s": "float32"})
    host.run(ctx, lambda rec: rec.execute(prog, params={"k": -3, "s": 2.5}))
    np.testing.assert_array_equal(y.numpy(), np.arange(8) - 3)
    host.run(ctx, lambda rec: rec.execute(prog, params={"k": 10}))     # s keeps 2.5
    np.testing.assert_array_equal(y.numpy(), np.arange(8) + 10)
    np.testing.assert_array_equal(g.numpy(), np.full(8, 2.5, np.float32))
    host.run(ctx, lambda rec: rec.execute(prog))                      # no update at all
    np.testing.assert_array_equal(y.numpy(), np.arange(8) + 10)
    assert prog.params.names == ["k", "s"]
    np.testing.assert_array_equal(prog.params.k.numpy(), [10])


def test_two_replays_with_different_params_in_one_buffer(host, ctx):
    """The second parameter update must wait for the first replay's reads."""
    x = ctx.tensor(np.ones(64, np.float32))
    acc = ctx.zeros((64,))
    prog = ctx.program(lambda rec, p: rec.add(acc, rec.mul(x, p.w), out=acc), params={"w": "float32"})

    def frame(rec):
        rec.execute(prog, params={"w": 1.0})
        rec.execute(prog, params={"w": 10.0})
        rec.execute(prog, params={"w": 100.0})
    host.run(ctx, frame)
    np.testing.assert_array_equal(acc.numpy(), np.full(64, 111.0))


def test_rerecord_after_resize_gives_correct_results(host, ctx):
    x = ctx.tensor(np.arange(100, dtype=np.float32))
    prog = ctx.program(lambda rec: rec.scale(x, 3.0, out=x))
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(x.numpy(), np.arange(100) * 3.0)
    before = ctx.cache_stats()["program_rerecords"]
    x.resize((301,))
    x.write(np.arange(301, dtype=np.float32))
    assert prog.stale
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(x.numpy(), np.arange(301) * 3.0)
    assert prog.stats["rerecords"] == 1 and prog.version == 1
    assert ctx.cache_stats()["program_rerecords"] == before + 1
    host.run(ctx, lambda rec: rec.execute(prog))       # no further re-record
    assert prog.stats["rerecords"] == 1
    np.testing.assert_array_equal(x.numpy(), np.arange(301) * 9.0)


def test_resize_of_a_base_rerecords_programs_using_its_views(host, ctx):
    x = ctx.tensor(np.zeros(10, np.float32))
    prog = ctx.program(lambda rec: rec.fill(x[::2], 1.0))
    x.resize((20,))
    x.write(np.zeros(20, np.float32))
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(x.numpy(), np.tile([1.0, 0.0], 10))


def test_invalidate_rerecords_and_old_buffer_retires(host, ctx):
    state = {"factor": 2.0}
    x = ctx.tensor(np.ones(16, np.float32))
    out = ctx.empty((16,))
    prog = ctx.program(lambda rec: rec.scale(x, state["factor"], out=out))
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(out.numpy(), np.full(16, 2.0))
    state["factor"] = 5.0
    host.run(ctx, lambda rec: rec.execute(prog))        # not invalidated: replays the old recording
    np.testing.assert_array_equal(out.numpy(), np.full(16, 2.0))
    prog.invalidate()
    assert prog.stale
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(out.numpy(), np.full(16, 5.0))
    # The replaced secondary waits for its last epoch; retiring frees it.
    assert ctx.live_objects()["command_buffers"] == 2
    ctx.retire()
    assert ctx.live_objects()["command_buffers"] == 1
    del prog
    ctx.retire()
    assert ctx.live_objects()["command_buffers"] == 0


def test_prerecorded_host_buffer_replays_each_submit(host, ctx):
    x = ctx.tensor(np.zeros(64, np.float32))
    prog = ctx.program(lambda rec: rec.add(x, 1.0, out=x))
    cmd = host.allocate()
    begin = new("VkCommandBufferBeginInfo", flags=0)       # reusable, not one-time
    assert host.fns.vkBeginCommandBuffer(cmd, begin) == vk.VK_SUCCESS
    with ctx.record(cmd) as rec:
        rec.execute(prog)
    assert host.fns.vkEndCommandBuffer(cmd) == vk.VK_SUCCESS
    for _ in range(3):
        host.submit(cmd, end=False, free=False)
    host.free(cmd)
    np.testing.assert_array_equal(x.numpy(), np.full(64, 3.0))


def test_program_and_direct_ops_interleave_with_barriers(host, ctx):
    x = ctx.tensor(np.arange(256, dtype=np.float32))
    y = ctx.empty((256,))
    prog = ctx.program(lambda rec: rec.scale(x, 2.0, out=y))

    def frame(rec):
        rec.add(x, 1.0, out=x)      # written before the replay reads it
        rec.execute(prog)
        rec.add(y, x, out=x)        # reads what the replay wrote, writes what it read
        rec.execute(prog)
    host.run(ctx, frame)
    x1 = np.arange(256, dtype=np.float32) + 1
    x2 = 2 * x1 + x1
    np.testing.assert_array_equal(y.numpy(), 2 * x2)
    np.testing.assert_array_equal(x.numpy(), x2)


def test_program_value_and_scratch_outputs_stay_alive(host, ctx):
    a = ctx.tensor(np.arange(32, dtype=np.float32))
    prog = ctx.program(lambda rec: rec.add(rec.mul(a, a), 1.0))   # intermediate dies in Python
    import gc as pygc
    pygc.collect()
    ctx.retire()
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(prog.value.numpy(), np.arange(32) ** 2 + 1.0)
    assert prog.specs()


def test_program_errors(host, ctx):
    x = ctx.tensor(np.ones(4, np.float32))
    with pytest.raises(gc.InvalidArgumentError):
        ctx.program("not callable")
    with pytest.raises(gc.DTypeError):
        ctx.program(lambda rec, p: None, params={"h": "float16"})
    with pytest.raises(gc.InvalidArgumentError):
        ctx.program(lambda rec, p: None, params={"_x": "float32"})
    live = ctx.live_objects()["command_buffers"]
    with pytest.raises(gc.ShapeError):
        ctx.program(lambda rec: rec.add(x, ctx.empty((5,))))
    assert ctx.live_objects()["command_buffers"] == live      # the failed recording was freed
    plain = ctx.program(lambda rec: rec.scale(x, 2.0, out=x))
    withp = ctx.program(lambda rec, p: rec.mul(x, p.s, out=x), params={"s": "float32"})
    with pytest.raises(gc.RecordingError):
        ctx.program(lambda rec: rec.execute(plain))
    other = host.adopt()
    try:
        with pytest.raises(gc.WrongContextError):
            host.run(other, lambda rec: rec.execute(plain))
    finally:
        other.close()
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.InvalidArgumentError):
            rec.execute(plain, params={"s": 1.0})
        with pytest.raises(gc.InvalidArgumentError):
            rec.execute(withp, params={"t": 1.0})
        with pytest.raises(gc.InvalidArgumentError):
            rec.execute(withp, params={"s": "fast"})
        with pytest.raises(gc.InvalidArgumentError):
            rec.execute("program")
    host.submit_and_wait(cmd)
    assert plain.stats["replays"] == 0 and withp.stats["replays"] == 0


def test_glsl_scalar_names_mean_the_32_bit_types_in_params(host, ctx):
    """"float" is float32 in params= as in push_layout and in the shader
    (numpy alone would read it as float64)."""
    prog = ctx.program(lambda rec, p: None, params={"s": "float", "k": "int", "n": "uint"})
    assert [prog.params[n].dtype for n in ("s", "k", "n")] == [gc.float32, gc.int32, gc.uint32]
    host.run(ctx, lambda rec: rec.execute(prog, params={"s": 0.1, "k": -2, "n": 7}))
    np.testing.assert_array_equal(prog.params.s.numpy(), np.float32([0.1]))
    with pytest.raises(gc.DTypeError, match="GLSL's"):
        ctx.program(lambda rec, p: None, params={"s": "float64"})
