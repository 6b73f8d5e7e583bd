"""Shared timelines: a second device's guest work waits on the GPU for the
first device's, through one timeline semaphore both import. Needs
VK_KHR_external_semaphore_fd, which lavapipe does not offer (Mesa 22.3 and
25.0 alike); the tests run on drivers that do."""
import os

import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc


@pytest.fixture
def timelines(pair):
    """``pair`` where the driver exports timeline semaphores."""
    if not pair[1].caps.external_timelines:
        with pytest.raises(gc.UnsupportedError, match="VK_KHR_external_semaphore_fd"):
            pair[1].shared_timeline()       # the refusal is typed and says what is missing
        pytest.skip("the driver does not export timeline semaphores (VK_KHR_external_semaphore_fd)")
    return pair


def test_the_second_device_waits_on_the_gpu_for_the_first(timelines):
    _, a, _, b = timelines
    tl = a.shared_timeline()
    tl_b = b.import_timeline(tl)
    x = a.zeros((1 << 16,), exportable=True)
    with x.export() as ex:
        x_b = b.import_memory(ex)
    signal = tl.signal_point()
    # B is submitted first and waits for a value A has not signalled yet.
    done_b = b.submit(lambda rec: rec.add(x_b, 1.0), wait=[tl_b.wait_point(signal[1])])
    a.submit(lambda rec: rec.fill(x, 41.0), signal=[signal])
    done_b.wait()
    np.testing.assert_array_equal(done_b.result.numpy(), np.full(1 << 16, 42, np.float32))
    assert tl.counter() == tl_b.counter() == signal[1]


def test_injected_frames_ping_pong_between_devices(timelines):
    """Each device signals a timeline of its own that the other imports and
    waits on, as two producers would. (One timeline signalled by both devices
    works on the GPU too, but a device's validation layer cannot see the
    signals made through the other device's import: it holds its own
    submissions as never started and reports their signals as going back.)"""
    host_a, a, host_b, b = timelines
    from_a = a.shared_timeline()
    from_a_in_b = b.import_timeline(from_a)
    from_b = b.shared_timeline()
    from_b_in_a = a.import_timeline(from_b)
    x = a.zeros((4096,), "int32", exportable=True)
    with x.export() as ex:
        x_b = b.import_memory(ex)
    compute = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    a_cmds = []
    for frame in range(10):
        # A's host submits its frame (guest work injected) signalling the
        # point the guest gave it; B's host waits on that point, and A's next
        # frame on B's.
        cmd = host_a.begin()
        a_cmds.append(cmd)
        with a.record(cmd) as rec:
            rec.add(x, 1, out=x)
        host_a.submit(cmd, wait_for=[from_b_in_a.wait_point(stages=compute)] if frame else [],
                      signal=[from_a.signal_point()], fence=False, block=False, free=False)
        cmd_b = host_b.begin()
        with b.record(cmd_b) as rec:
            rec.mul(x_b, 2, out=x_b)
        host_b.submit(cmd_b, wait_for=[from_a_in_b.wait_point(stages=compute)], signal=[from_b.signal_point()])
    from_a.wait()
    host_a.free(a_cmds)
    expect = 0
    for _ in range(10):
        expect = (expect + 1) * 2
    np.testing.assert_array_equal(x.numpy(), np.full(4096, expect, np.int32))


def test_points_refuse_values_nobody_will_signal(timelines):
    _, a, _, _ = timelines
    tl = a.shared_timeline()
    assert tl.wait_point() == (tl.semaphore, 0, None)
    with pytest.raises(gc.InvalidArgumentError, match="reserved"):
        tl.wait_point(5)
    fd = tl.export()
    os.close(fd)
    tl.destroy()
    assert a.live_objects()["shared_timelines"] == 0


def test_a_submission_waiting_for_its_own_signal_is_refused(modern_host):
    """Checked before anything is recorded, on any device with timelines (a
    shared timeline is not needed to make the mistake)."""
    ctx = modern_host.adopt()
    try:
        if not ctx.caps.timeline_semaphores:
            pytest.skip("timeline semaphores are not enabled")
        sub = ctx.submit(lambda rec: None)
        with pytest.raises(gc.InvalidArgumentError, match="never run"):
            ctx.submit(lambda rec: None, wait=[(sub.semaphore, 9)], signal=[(sub.semaphore, 9)])
        assert ctx.cache_stats()["submissions"] == 1        # nothing was submitted
        sub.wait()
    finally:
        ctx.close()


def test_a_bad_timeline_fd_is_a_typed_error(timelines):
    _, _, _, b = timelines
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(gc.InvalidArgumentError, match="pipe"):
            b.import_timeline(read_end)
        os.fstat(read_end)                  # still the caller's
    finally:
        os.close(read_end), os.close(write_end)
    with pytest.raises(gc.InvalidArgumentError, match="not an open file descriptor"):
        b.import_timeline(10 ** 6)
    assert b.live_objects()["shared_timelines"] == 0
