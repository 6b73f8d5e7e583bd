"""The queue promise: while a recording is open on a thread — a `with
ctx.record(cmd)` block, a program's recording — guestcompute reaches no
queue from that thread, even on a context adopted with ``queue=``. An image
an op creates there (an output, a scratch image) gets its first layout from a
barrier in that recording (or, made in a program's fn, after the program's
recording or at its first replay), uploads are copied in the recording, and
``submit_and_wait`` refuses to run.

Every registered op is recorded with sample arguments (tensors and images,
``out=`` given and not), directly and inside a program, with the queue
functions of ``ctx.device.fns`` counting their calls.
"""
import inspect
import shutil
import threading
import types

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.image import Image, ImageLevel
from guestcompute.recording.op_methods import OPS

QUEUE_FUNCTIONS = ("vkQueueSubmit", "vkQueueSubmit2", "vkQueueSubmit2KHR", "vkQueueWaitIdle",
                   "vkWaitForFences", "vkDeviceWaitIdle", "vkWaitSemaphores", "vkWaitSemaphoresKHR")


class QueueCalls:
    """Device functions that count every call reaching a queue (or waiting
    on one), then make it."""

    def __init__(self, fns):
        self._fns = fns
        self.calls = []

    def __getattr__(self, name):
        fn = getattr(self._fns, name)
        if name not in QUEUE_FUNCTIONS or fn is None:
            return fn

        def counted(*args):
            self.calls.append(name)
            return fn(*args)
        return counted


def _counting(ctx) -> QueueCalls:
    """Route ``ctx``'s device functions through a QueueCalls (recorders made
    from now on take them; the walker records vkCmd* only, so it stays)."""
    calls = QueueCalls(ctx.device.fns)
    ctx.device.fns = calls
    return calls


USER_KERNEL = """#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer Acc { float acc[]; };
void main() { acc[gl_GlobalInvocationID.x] += 1.0; }
"""


def _samples(ctx) -> types.SimpleNamespace:
    """The arguments the sample calls take, made (and uploaded) before counting starts."""
    rng = np.random.default_rng(25)
    s = types.SimpleNamespace()
    s.x = ctx.tensor(rng.uniform(0.5, 2.0, (4, 8)).astype(np.float32))
    s.y = ctx.tensor(rng.uniform(0.5, 2.0, (4, 8)).astype(np.float32))
    s.m = ctx.tensor(rng.uniform(-1, 1, (8, 8)).astype(np.float32))
    s.w = ctx.tensor(rng.uniform(0.5, 1.5, (8,)).astype(np.float32))
    s.keys = ctx.tensor(rng.integers(0, 1000, 64).astype(np.uint32))
    s.values = ctx.tensor(np.arange(64, dtype=np.uint32))
    s.ints = ctx.tensor(rng.integers(-50, 50, (4, 8)).astype(np.int32))
    s.idx = ctx.tensor(np.array([3, 0, 2, 1], np.int32))
    s.idx2 = ctx.tensor(rng.integers(0, 4, (4, 8)).astype(np.int32))
    s.count = ctx.tensor(np.array([40], np.uint32))
    s.spec = ctx.tensor((rng.standard_normal((4, 8)) + 1j * rng.standard_normal((4, 8))).astype(np.complex64))
    s.groups = ctx.tensor(np.array([1, 1, 1], np.uint32))
    s.lut = ctx.tensor(rng.uniform(0, 1, (4, 4, 4, 3)).astype(np.float32))
    s.pixels = ctx.tensor(rng.uniform(0, 1, (8, 8, 4)).astype(np.float32))
    s.hdr = ctx.image_from(rng.uniform(0, 4, (16, 16, 4)).astype(np.float16), "rgba16f")
    s.ldr = ctx.image_from(rng.integers(0, 256, (16, 16, 4), dtype=np.uint8), "rgba8_unorm")
    s.mipped = ctx.image((16, 16), "rgba16f", mips=3)
    s.net = ctx.mlp([gc.Dense(rng.uniform(-1, 1, (8, 16))), gc.Dense(rng.uniform(-1, 1, (16, 3)), activation="none")])
    s.pixel_net = ctx.mlp([gc.Dense(rng.uniform(-1, 1, (4, 16))), gc.Dense(rng.uniform(-1, 1, (16, 4)), None, "sigmoid")])
    s.mipped.write(rng.uniform(0, 1, (16, 16, 4)).astype(np.float16))
    s.kernel = ctx.kernel(USER_KERNEL) if shutil.which("glslc") else None
    s.acc = ctx.zeros((64,))
    s.points = ctx.tensor(rng.uniform(0, 1, (16, 3)).astype(np.float32))
    s.grid = ctx.hash_grid(3, n_levels=4, log2_hashmap_size=8)
    return s


# One or more calls per op, each without out= (a second call with a fresh
# out= like the first call's result is made for every op taking ``out``).
SAMPLES = {
    "abs": [lambda rec, s: rec.abs(s.x)],
    "add": [lambda rec, s: rec.add(s.x, s.y)],
    "angle": [lambda rec, s: rec.angle(s.spec), lambda rec, s: rec.angle(s.x)],
    "argmax": [lambda rec, s: rec.argmax(s.x, axis=1)],
    "argmin": [lambda rec, s: rec.argmin(s.x)],
    "argsort": [lambda rec, s: rec.argsort(s.keys)],
    "bloom": [lambda rec, s: rec.bloom(s.hdr, levels=3), lambda rec, s: rec.bloom(s.hdr, out=s.hdr, levels=3)],
    "cast": [lambda rec, s: rec.cast(s.x, "int32"), lambda rec, s: rec.cast(s.x, "complex64")],
    "clamp": [lambda rec, s: rec.clamp(s.x, 0.7, 1.5)],
    "colour_lut": [lambda rec, s: rec.colour_lut(s.hdr, s.lut), lambda rec, s: rec.colour_lut(s.pixels, s.lut)],
    "colour_matrix": [lambda rec, s: rec.colour_matrix(s.hdr, np.eye(4) * 0.5),
                      lambda rec, s: rec.colour_matrix(s.ldr, np.eye(3), out=s.ldr)],
    "concat": [lambda rec, s: rec.concat([s.x, s.y], axis=1)],
    "conj": [lambda rec, s: rec.conj(s.spec)],
    "contiguous": [lambda rec, s: rec.contiguous(s.x)],
    "conv2d": [lambda rec, s: rec.conv2d(s.hdr, np.full((3, 3), 1 / 9, np.float32))],
    "copy": [lambda rec, s: rec.copy(s.x), lambda rec, s: rec.copy(s.ldr), lambda rec, s: rec.copy(s.pixels)],
    "cos": [lambda rec, s: rec.cos(s.x)],
    "compact": [lambda rec, s: rec.compact(s.values, s.keys), lambda rec, s: rec.compact(s.values, s.keys, count=s.count)],
    "cumsum": [lambda rec, s: rec.cumsum(s.x, axis=1)],
    "dispatch_count": [lambda rec, s: rec.dispatch_count(s.count, "scale", s.keys, 2)],
    "dispatch_indirect": [lambda rec, s: rec.dispatch_indirect(s.groups, "add", s.x, 1.0)],
    "div": [lambda rec, s: rec.div(s.x, s.y)],
    "exp": [lambda rec, s: rec.exp(s.x)],
    "fft": [lambda rec, s: rec.fft(s.x), lambda rec, s: rec.fft(s.spec, n=37)],    # 37: through Bluestein
    "fft2": [lambda rec, s: rec.fft2(s.spec)],
    "fft_convolve": [lambda rec, s: rec.fft_convolve(s.x, s.spec[:, :5])],
    "fftn": [lambda rec, s: rec.fftn(s.x, s=(5, 6))],
    "fill": [lambda rec, s: rec.fill(s.acc, 2.0)],
    "frequency_encoding": [lambda rec, s: rec.frequency_encoding(s.points, 4),
                           lambda rec, s: rec.frequency_encoding(s.x, 2, include_input=False)],
    "floordiv": [lambda rec, s: rec.floordiv(s.ints, 3)],
    "gather": [lambda rec, s: rec.gather(s.x, s.idx2, axis=1)],
    "gaussian_blur": [lambda rec, s: rec.gaussian_blur(s.hdr, 1.0), lambda rec, s: rec.gaussian_blur(s.ldr, 1.5)],
    "gelu": [lambda rec, s: rec.gelu(s.x)],
    "generate_mips": [lambda rec, s: rec.generate_mips(s.mipped)],
    "groups_from_count": [lambda rec, s: rec.groups_from_count(s.count, 64)],
    "hash_grid_encode": [lambda rec, s: rec.hash_grid_encode(s.points, s.grid)],
    "histogram": [lambda rec, s: rec.histogram(s.x, 16, range=(0.0, 2.0)),
                  lambda rec, s: rec.histogram(s.ldr, 16)],
    "ifft": [lambda rec, s: rec.ifft(s.spec, axis=0)],
    "ifft2": [lambda rec, s: rec.ifft2(s.spec, norm="ortho")],
    "ifftn": [lambda rec, s: rec.ifftn(s.spec)],
    "irfft": [lambda rec, s: rec.irfft(s.spec)],
    "irfft2": [lambda rec, s: rec.irfft2(s.spec)],
    "irfftn": [lambda rec, s: rec.irfftn(s.spec, s=(4, 9))],
    "index_select": [lambda rec, s: rec.index_select(s.x, s.idx, axis=0)],
    "layer_norm": [lambda rec, s: rec.layer_norm(s.x, s.w, s.w)],
    "log": [lambda rec, s: rec.log(s.x)],
    "log_softmax": [lambda rec, s: rec.log_softmax(s.x)],
    "luminance": [lambda rec, s: rec.luminance(s.hdr)],
    "matmul": [lambda rec, s: rec.matmul(s.x, s.m)],
    "mlp": [lambda rec, s: rec.mlp(s.x, s.net), lambda rec, s: rec.mlp(s.hdr, s.pixel_net)],
    "max": [lambda rec, s: rec.max(s.x, axis=0)],
    "maximum": [lambda rec, s: rec.maximum(s.x, s.y)],
    "mean": [lambda rec, s: rec.mean(s.x)],
    "min": [lambda rec, s: rec.min(s.x, axis=1)],
    "minimum": [lambda rec, s: rec.minimum(s.x, s.y)],
    "mul": [lambda rec, s: rec.mul(s.x, s.y), lambda rec, s: rec.mul(s.spec, 2j), lambda rec, s: rec.mul(s.x, s.spec)],
    "neg": [lambda rec, s: rec.neg(s.x)],
    "permute": [lambda rec, s: rec.permute(s.x, (1, 0))],
    "pow": [lambda rec, s: rec.pow(s.x, s.y)],
    "relu": [lambda rec, s: rec.relu(s.x)],
    "resize": [lambda rec, s: rec.resize(s.hdr, size=(8, 8)), lambda rec, s: rec.resize(s.ldr, size=(24, 20))],
    "rfft": [lambda rec, s: rec.rfft(s.x, n=12)],
    "rfft2": [lambda rec, s: rec.rfft2(s.x)],
    "rfftn": [lambda rec, s: rec.rfftn(s.x)],
    "rms_norm": [lambda rec, s: rec.rms_norm(s.x, s.w)],
    "nonzero": [lambda rec, s: rec.nonzero(s.keys)],
    "rsqrt": [lambda rec, s: rec.rsqrt(s.x)],
    "run_kernel": [lambda rec, s: rec.run_kernel(s.kernel, [s.acc], groups=2)],
    "scale": [lambda rec, s: rec.scale(s.x, 3.0)],
    "segmented_cumsum": [lambda rec, s: rec.segmented_cumsum(s.values, s.keys)],
    "sigmoid": [lambda rec, s: rec.sigmoid(s.x)],
    "silu": [lambda rec, s: rec.silu(s.x)],
    "sin": [lambda rec, s: rec.sin(s.x)],
    "slice": [lambda rec, s: rec.slice(s.x, (slice(None), slice(1, None, 2)))],
    "softmax": [lambda rec, s: rec.softmax(s.x)],
    "sort": [lambda rec, s: rec.sort(s.keys), lambda rec, s: rec.sort(s.keys, s.values),
             lambda rec, s: rec.sort(s.keys, s.values, count=s.count)],
    "sqrt": [lambda rec, s: rec.sqrt(s.x)],
    "sub": [lambda rec, s: rec.sub(s.x, s.y)],
    "sum": [lambda rec, s: rec.sum(s.x, axis=1)],
    "tanh": [lambda rec, s: rec.tanh(s.x)],
    "tonemap": [lambda rec, s: rec.tonemap(s.hdr, srgb=True), lambda rec, s: rec.tonemap(s.hdr, curve="reinhard", srgb=True)],
    "transpose": [lambda rec, s: rec.transpose(s.x)],
    "where": [lambda rec, s: rec.where(s.x, s.y, 0.0)],
    **{name: [lambda rec, s, name=name: getattr(rec, name)(s.x, s.y),
              lambda rec, s, name=name: getattr(rec, name)(s.x, 1.0)]
       for name in ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal")},
    **{name: [lambda rec, s, name=name: getattr(rec, name)(s.x, s.y)]
       for name in ("logical_and", "logical_or", "logical_xor")},
    **{name: [lambda rec, s, name=name: getattr(rec, name)(s.x)]
       for name in ("logical_not", "isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "rint", "sign")},
}


def test_every_registered_op_has_sample_arguments():
    """A new op is covered by the queue test only once it has samples here."""
    assert sorted(set(OPS) - set(SAMPLES)) == [], "add sample calls for these ops to SAMPLES"
    assert sorted(set(SAMPLES) - set(OPS)) == [], "these SAMPLES name no registered op"


def _like(ctx, value):
    """A fresh ``out=`` for a call whose result was ``value`` (None: no out= form)."""
    if isinstance(value, ImageLevel):
        value = value.image
    if isinstance(value, Image):
        return ctx.image(value.extent, value.format.name, mips=value.mip_levels)
    if isinstance(value, gc.Tensor):
        return ctx.empty(value.shape, value.dtype)
    return None


def _calls(ctx, name, s) -> list:
    """The op's sample calls, plus each again with a fresh out= where the op takes one."""
    out_param = inspect.signature(OPS[name]).parameters.get("out")
    # (An op whose out is its required operand, like fill, has no other form.)
    takes_out = out_param is not None and out_param.default is None
    calls = []
    for sample in SAMPLES[name]:
        calls.append(sample)
        if not takes_out:
            continue
        value = ctx.run(lambda rec: sample(rec, s))      # to learn the result's kind
        out = _like(ctx, value)
        if out is not None:
            calls.append(lambda rec, s, sample=sample, out=out: _with_out(rec, sample, out, s))
    return calls


def _with_out(rec, sample, out, s):
    """Call ``sample`` with ``out=out`` added (rebinding the op method)."""
    class WithOut:
        def __getattr__(self, op):
            method = getattr(rec, op)
            def with_out(*a, **k):
                if "out" not in k:
                    k.pop("size", None)         # (resize: out= takes the place of size=)
                    k["out"] = out
                return method(*a, **k)
            return with_out
    return sample(WithOut(), s)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_recording_an_op_reaches_no_queue(modern_host, name):
    host = modern_host
    ctx = host.adopt()
    try:
        s = _samples(ctx)
        if name == "run_kernel" and s.kernel is None:
            pytest.skip("the sample user kernel needs glslc")
        calls = _calls(ctx, name, s)
        queue = _counting(ctx)
        for call in calls:
            cmd = host.begin()
            with ctx.record(cmd) as rec:
                call(rec, s)
            assert queue.calls == [], f"rec.{name} reached the queue inside record(): {queue.calls}"
            host.submit_and_wait(cmd)

            def captured(rec, call=call):
                before = len(queue.calls)
                call(rec, s)
                assert queue.calls[before:] == [], f"rec.{name} reached the queue in a program's recording"
            at_setup = ctx.program(captured)        # (may set first layouts once its recording ended)
            queue.calls.clear()
            cmd = host.begin()
            with ctx.record(cmd) as rec:
                rec.execute(at_setup)
                in_frame = ctx.program(captured)    # inside a recording: its first replay sets them
                rec.execute(in_frame)
            assert queue.calls == [], f"rec.{name} in a program reached the queue: {queue.calls}"
            host.submit_and_wait(cmd)
    finally:
        ctx.close()


def test_submit_and_wait_refuses_while_a_recording_is_open(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    x = ctx.tensor(np.ones(8, np.float32))
    nothing = lambda cmd: None                              # noqa: E731
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.RecordingError):
            ctx.device.transfers.submit_and_wait(nothing)
        with pytest.raises(gc.RecordingError):
            ctx.run(lambda r: r.add(x, 1.0, out=x))
        rec.add(x, 1.0, out=x)
    host.submit_and_wait(cmd)

    def fn(rec):
        with pytest.raises(gc.RecordingError):
            ctx.device.transfers.submit_and_wait(nothing)
        rec.add(x, 1.0, out=x)
    ctx.program(fn)
    ctx.device.transfers.submit_and_wait(nothing)          # outside any recording it submits
    np.testing.assert_array_equal(x.numpy(), np.full(8, 2.0, np.float32))


def test_images_an_op_makes_in_a_recording_hold_the_right_texels(modern_host, modern_ctx):
    """Outputs and scratch images made inside the recording (first layout set
    there) give what the same ops give into images made beforehand, directly
    and through programs made at set-up and inside a recording, replayed twice."""
    host, ctx = modern_host, modern_ctx
    rng = np.random.default_rng(7)
    hdr = ctx.image_from(rng.uniform(0, 8, (12, 20, 4)).astype(np.float16), "rgba16f")
    made_before = {"blur": ctx.image((20, 12), "rgba16f"), "tone": ctx.image((20, 12), "rgba8_unorm"),
                   "bloom": ctx.image((20, 12), "rgba16f")}

    def ops(rec, out=None):
        out = out or {}
        blurred = rec.gaussian_blur(hdr, 1.0, out=out.get("blur"))
        toned = rec.tonemap(blurred, out=out.get("tone"), gamma=2.2)
        bloomed = rec.bloom(hdr, out=out.get("bloom"), levels=3)
        return {"blur": blurred, "tone": toned, "bloom": bloomed}

    def texels(images):
        return {k: (v.image if isinstance(v, ImageLevel) else v).numpy() for k, v in images.items()}

    host.run(ctx, lambda rec: ops(rec, made_before))
    want = texels(made_before)
    queue = _counting(ctx)
    made_inside = host.run(ctx, ops)
    at_setup = ctx.program(ops)             # first layouts submitted once its recording ended
    queue.calls.clear()
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        in_frame = ctx.program(ops)         # first layouts set by its first replay
        rec.execute(in_frame)
    host.submit_and_wait(cmd)
    for _ in range(2):
        host.run(ctx, lambda rec: (rec.execute(at_setup), rec.execute(in_frame)))
    assert queue.calls == []
    for got in (texels(made_inside), texels(at_setup.value), texels(in_frame.value)):
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_uploads_inside_a_recording_are_recorded_in_it(modern_host, modern_ctx):
    """With memory the host cannot map (a staging copy per upload), a tensor
    made or written and an image written inside the recording are copied in
    it, in order with the ops around them; nothing is submitted."""
    host, ctx = modern_host, modern_ctx
    x = ctx.zeros((64,))
    x.buffer.alloc.mapped = None                # as on a GPU whose device-local memory is not mappable
    y1, y2 = ctx.zeros((64,)), ctx.zeros((64,))
    img = ctx.image((4, 4), "rgba32f")
    texels = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
    from_img = ctx.zeros((4, 4, 4))
    first, second = np.arange(64, dtype=np.float32), np.full(64, 5.0, np.float32)
    x.write(first)
    queue = _counting(ctx)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.scale(x, 2.0, out=y1)               # reads the first data...
        x.write(second)                         # ...before this copy overwrites it
        rec.scale(x, 2.0, out=y2)
        img.write(texels)
        rec.copy(img, out=from_img)
        assert len(ctx.device.transfers.pending_uploads) == 0
    assert queue.calls == []
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(y1.numpy(), first * 2)
    np.testing.assert_array_equal(y2.numpy(), second * 2)
    np.testing.assert_array_equal(from_img.numpy(), texels)


def test_an_upload_made_in_a_program_waits_for_the_next_recording(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx
    out = ctx.zeros((16,))
    queue = _counting(ctx)

    def fn(rec):
        t = ctx.empty((16,))
        t.buffer.alloc.mapped = None
        t.write(np.arange(16, dtype=np.float32))     # not copied by every replay: once, before the first
        rec.add(t, 1.0, out=out)
    prog = ctx.program(fn)
    assert queue.calls == [] and len(ctx.device.transfers.pending_uploads) == 1
    host.run(ctx, lambda rec: rec.execute(prog))
    assert queue.calls == [] and len(ctx.device.transfers.pending_uploads) == 0
    np.testing.assert_array_equal(out.numpy(), np.arange(16, dtype=np.float32) + 1)


def test_a_read_sees_an_upload_a_program_made_before_its_first_replay(host, ctx):
    """Device-local memory (the mapped seam removed): the upload a program's
    fn made still waits for a recording, but a read copies it first."""
    made = {}
    want = np.r_[np.full(4, 7.0), np.arange(4, 16)].astype(np.float32)

    def fn(rec):
        t = made["t"] = ctx.empty((16,))
        t.buffer.alloc.mapped = None
        t.write(np.arange(16, dtype=np.float32))
        t.write(want)                              # the same bytes again: copied in order
        rec.add(t, 1.0, out=t)
    prog = ctx.program(fn)
    np.testing.assert_array_equal(made["t"].numpy(), want)        # no replay yet: the uploads only
    assert len(ctx.device.transfers.pending_uploads) == 0
    host.run(ctx, lambda rec: rec.execute(prog))
    np.testing.assert_array_equal(made["t"].numpy(), want + 1)


def test_a_first_layout_leaves_earlier_writes_to_be_waited_for(modern_host, modern_ctx):
    """The barrier that sets a new image's first layout waits for nothing, so
    a write recorded before it still gets its barrier before a later read
    (synchronization validation reports a missed one)."""
    host, ctx = modern_host, modern_ctx
    a = ctx.tensor(np.arange(256, dtype=np.float32))
    x, y = ctx.zeros((256,)), ctx.zeros((256,))
    hdr = ctx.image_from(np.ones((8, 8, 4), np.float16), "rgba16f")

    def work(rec):
        rec.add(a, 1.0, out=x)
        rec.colour_matrix(hdr, np.eye(4))     # one dispatch, into a new image first used here
        rec.add(x, 1.0, out=y)
    host.run(ctx, work)
    np.testing.assert_array_equal(y.numpy(), np.arange(256, dtype=np.float32) + 2)


def test_a_program_made_at_set_up_may_first_run_from_any_command_buffer(modern_host, modern_ctx):
    """Images a program's fn made get their first layout once its recording
    ended (no recording open on the thread): of two command buffers replaying
    it, recorded once, either may be submitted first."""
    host, ctx = modern_host, modern_ctx
    hdr = ctx.image_from(np.full((4, 4, 4), 0.5, np.float16), "rgba16f")
    prog = ctx.program(lambda rec: rec.colour_matrix(hdr, np.eye(4) * 2))
    cmds = []
    for _ in range(2):
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            rec.execute(prog)
        cmds.append(cmd)
    host.submit_and_wait(cmds[1])
    host.submit_and_wait(cmds[0])
    np.testing.assert_array_equal(prog.value.numpy(), np.ones((4, 4, 4), np.float16))


def test_other_threads_still_submit_while_one_records(modern_host, modern_ctx):
    """The promise is per thread: a recording open on one thread does not stop
    another thread's ctx.image / submissions (they take queue_lock)."""
    host, ctx = modern_host, modern_ctx
    done = []

    def other():
        img = ctx.image((4, 4), "rgba8_unorm")                 # its first layout is submitted now
        img.write(np.zeros((4, 4, 4), np.uint8))
        ctx.device.transfers.submit_and_wait(lambda cmd: None)
        done.append(img.numpy())

    x = ctx.zeros((8,))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        rec.add(x, 1.0, out=x)
    host.submit_and_wait(cmd)
    assert len(done) == 1 and not done[0].any()
    np.testing.assert_array_equal(x.numpy(), np.ones(8, np.float32))
