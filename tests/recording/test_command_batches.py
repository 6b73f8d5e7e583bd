"""Batched recording: ops queue their commands in the recorder, and the C
command interpreter (or its Python twin) records them in one call.

What must hold whichever walker runs: work reaches the command buffer in
the order it was recorded, collaborators that record commands of their own
(host hooks, timing scopes, program replays) land between the right guest
commands, an op that raises queues nothing, and a command's structs stay
alive until recorded even when the op's tensors die first.
"""
import gc as pygc

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.errors import UnsupportedError
from guestcompute.ops.base import registered_ops
from guestcompute.recording.dispatch_plan import plan_for
from guestcompute.testing import HeadlessHost
from guestcompute.vk import command_stream, native_build, sync
from guestcompute.vk.command_stream import CommandInterpreter, DispatchCommand


def _check_clean(host):
    assert not host.messages, "validation layer reported:\n" + "\n\n".join(host.messages)

WALKERS = ["python"] + (["native"] if command_stream.native_library_path() is not None else [])


@pytest.fixture(params=WALKERS)
def walker_ctx(request, monkeypatch):
    """A modern host and a context whose recorders use one walker."""
    monkeypatch.setenv(command_stream.ENV, "off" if request.param == "python" else "require")
    with HeadlessHost("modern") as host:
        ctx = host.adopt()
        assert ctx.device.interpreter.kind == request.param
        yield host, ctx
        ctx.close()
        _check_clean(host)


class CommandLog:
    """Device functions that log the name of every vkCmd* call, then call it."""

    def __init__(self, fns):
        self._fns = fns
        self.calls = []

    def __getattr__(self, name):
        fn = getattr(self._fns, name)
        if not name.startswith("vkCmd") or fn is None:
            return fn

        def logged(*args):
            self.calls.append(name)
            return fn(*args)
        return logged


def _logged(ctx):
    """Route every command of ``ctx`` (recorder, collaborators, Python
    walker) through a CommandLog."""
    log = CommandLog(ctx.device.fns)
    ctx.device.fns = log
    ctx.device.interpreter = CommandInterpreter(log, mode="off")
    return log


def test_collaborators_land_between_the_right_guest_commands(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    a, b, c = (ctx.tensor(np.full(256, v, np.float32)) for v in (1, 2, 3))
    log = _logged(ctx)
    marks = []
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.add(a, b, out=c)
        with rec.timing("scope"):
            rec.mul(a, b, out=c)
        rec.host(lambda _cmd: marks.append(len(log.calls)), reads=[c])
        rec.sub(a, b, out=c)
        log.calls.append("-- last op queued")
    host.submit_and_wait(cmd)
    calls = log.calls
    dispatches = [i for i, n in enumerate(calls) if n == "vkCmdDispatch"]
    stamps = [i for i, n in enumerate(calls) if n == "vkCmdWriteTimestamp"]
    assert len(dispatches) == 3 and len(stamps) == 2
    # The scope's timestamps bracket its op, and only its op.
    assert dispatches[0] < stamps[0] < dispatches[1] < stamps[1] < dispatches[2]
    # The hook ran after the scope's op was recorded and before the last op.
    assert stamps[1] < marks[0] <= dispatches[2] - 1
    # The last op was queued, not recorded, until the block ended; the exit barrier follows it.
    last = calls.index("-- last op queued")
    assert dispatches[2] > last and calls[-1] == "vkCmdPipelineBarrier"
    np.testing.assert_array_equal(c.numpy(), np.full(256, -1, np.float32))


def test_an_op_that_raises_queues_nothing(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    a = ctx.tensor(np.arange(64, dtype=np.float32))
    out = ctx.empty((64,))
    log = _logged(ctx)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.scale(a, 2.0, out=out)
        with pytest.raises(gc.ShapeError):
            rec.add(a, ctx.empty((3,)), out=out)
        rec.add(out, 1.0, out=out)
    host.submit_and_wait(cmd)
    assert log.calls.count("vkCmdDispatch") == 2
    np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) * 2 + 1)


def test_host_hook_copy_sees_batched_work_in_both_walkers(walker_ctx):
    """A host copy between guest ops reads what the op before it wrote and
    is read by the op after it — data, not only command order."""
    from guestcompute.vk.structs import new
    host, ctx = walker_ctx
    n = 4096
    x = ctx.tensor(np.arange(n, dtype=np.float32))
    y, z = ctx.empty((n,)), ctx.empty((n,))

    def copy(cmd):
        region = new("VkBufferCopy", srcOffset=0, dstOffset=0, size=n * 4)
        host.fns.vkCmdCopyBuffer(cmd, y.buffer.handle, z.buffer.handle, 1, region)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for _ in range(3):
            rec.scale(x, 2.0, out=y)
            rec.host(copy, reads=[y], writes=[z])
            rec.add(z, 1.0, out=x)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(x.numpy(), ((np.arange(n) * 2 + 1) * 2 + 1) * 2 + 1)


def test_commands_outlive_the_tensors_of_their_ops(walker_ctx):
    """Temporaries die before the batch is recorded: the queued commands
    keep their structs (push constants, descriptor writes) alive."""
    host, ctx = walker_ctx
    rng = np.random.default_rng(3)
    a_np, b_np = rng.standard_normal((2, 1000)).astype(np.float32)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    outs = [ctx.empty((1000,)) for _ in range(40)]
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for i, out in enumerate(outs):
            rec.add(rec.mul(a, b), float(i), out=out)      # the product dies at once
            if i % 8 == 0:
                pygc.collect()
    host.submit_and_wait(cmd)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.numpy(), a_np * b_np + i, rtol=1e-6)


@pytest.mark.parametrize("profile", ["bare", "modern"])
@pytest.mark.parametrize("walker", WALKERS)
def test_walkers_record_programs_and_bound_sets(profile, walker, monkeypatch):
    """Bound descriptor sets (bare: no push descriptors) and program
    capture through each walker, under validation."""
    monkeypatch.setenv(command_stream.ENV, "off" if walker == "python" else "require")
    with HeadlessHost(profile) as host:
        ctx = host.adopt()
        x = ctx.tensor(np.arange(300, dtype=np.float32))
        y = ctx.empty((300,))
        prog = ctx.program(lambda rec: (rec.scale(x, 3.0, out=y), rec.add(y, x, out=y)))
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            rec.execute(prog)
            rec.add(y, 1.0, out=y)
        host.submit_and_wait(cmd)
        np.testing.assert_array_equal(y.numpy(), np.arange(300) * 4 + 1)
        ctx.close()
        _check_clean(host)


def test_require_without_a_build_raises(monkeypatch, modern_host):
    monkeypatch.setattr(command_stream, "native_library_path", lambda: None)
    with pytest.raises(UnsupportedError, match="build-native"):
        CommandInterpreter(modern_host.fns, mode="require")
    assert CommandInterpreter(modern_host.fns, mode="auto").kind == "python"
    with pytest.raises(UnsupportedError, match="auto, off or require"):
        CommandInterpreter(modern_host.fns, mode="sometimes")


@pytest.mark.skipif(native_build.find_compiler() is None, reason="no C compiler")
def test_build_writes_a_library_the_loader_accepts(tmp_path):
    path = native_build.build(tmp_path)
    assert path.name == command_stream.library_name()
    record = command_stream.load(path)
    assert callable(record)
    # A second build replaces the first and leaves no temporary files behind.
    assert native_build.build(tmp_path) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_library_that_does_not_load_falls_back_in_auto_and_raises_in_require(monkeypatch, modern_host,
                                                                              tmp_path):
    """A broken build (an empty file where the library should be) must not
    stop contexts from being made: auto records through the Python walker,
    require says what is wrong."""
    broken = tmp_path / command_stream.library_name()
    broken.write_bytes(b"")
    monkeypatch.setattr(command_stream, "native_library_path", lambda: broken)
    interpreter = CommandInterpreter(modern_host.fns, mode="auto")
    assert interpreter.kind == "python" and interpreter.library is None
    with pytest.raises(UnsupportedError, match="does not load.*build-native"):
        CommandInterpreter(modern_host.fns, mode="require")


@pytest.mark.skipif(native_build.find_compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("cc, message", [("true", "not a usable command interpreter"),
                                         ("/nonexistent/cc", "cannot run the C compiler")])
def test_a_failed_build_keeps_the_installed_library(tmp_path, monkeypatch, cc, message):
    """A compiler that exits 0 without building (CC=true) or one that does
    not exist is a clear RuntimeError, and the good library stays."""
    path = native_build.build(tmp_path)
    good = path.read_bytes()
    monkeypatch.setenv("CC", cc)
    with pytest.raises(RuntimeError, match=message):
        native_build.build(tmp_path)
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert callable(command_stream.open_library(path))


def test_walkers_order_tracked_dispatches_by_their_hazard_keys(walker_ctx):
    """Dispatches built with hazard keys and appended with no barrier between
    them: the walker records the barriers itself (read-after-write and
    write-after-read here), under synchronization validation, and the data
    shows the order held."""
    host, ctx = walker_ctx
    n = 1024
    a, b = ctx.tensor(np.arange(n, dtype=np.float32)), ctx.tensor(np.full(n, 2, np.float32))
    c, d = ctx.empty((n,)), ctx.empty((n,))
    host.run(ctx, lambda rec: rec.fill(c, 0.0))        # the uploads land before the stream below
    interned: dict = {}

    def command(x, y, out):
        dispatch = registered_ops()["add"](ctx, x, y, out=out).dispatches[0]
        plan = plan_for(ctx, dispatch)
        reads = [interned.setdefault(k, len(interned) + 1) for k in plan.reads]
        writes = [interned.setdefault(k, len(interned) + 1) for k in plan.writes]
        return DispatchCommand(plan.pipe, plan.desc, dispatch.push, dispatch.groups, dispatch.indirect, reads,
                               writes)
    cmd = host.begin()
    barrier = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER})
    stream = ctx.device.interpreter.stream(cmd, barrier)
    for step in (command(a, b, c), command(c, b, a), command(a, c, d)):    # c = a+b; a = c+b; d = a+c
        stream.append(step)
    stream.barrier(sync.COMPUTE, sync.HOST | sync.TRANSFER, sync.SHADER_WRITE, sync.HOST_READ | sync.TRANSFER_READ)
    stream.flush()
    host.submit_and_wait(cmd)
    tracker = stream.tracker
    assert (tracker.hazard_barriers, tracker.barriers) == (2, 3)
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(c.numpy(), x + 2)
    np.testing.assert_array_equal(a.numpy(), x + 4)
    np.testing.assert_array_equal(d.numpy(), 2 * x + 6)
