"""Drivers that stop an invocation's loops after a number of iterations
(lavapipe: 65,535) must still get whole rows: the planners of the row
kernels (normalizations, reductions) cut a row one workgroup cannot sweep
within the cap into chunks. With the cap lowered on the context's limits
short rows cross it (the numerics of the chunked path); on a driver with a
real cap, rows long enough to cross it run once per kernel family."""
import dataclasses

import numpy as np
import pytest

from strided_views import need
from test_norm import close, layer_norm_ref, rms_norm_ref, softmax_ref

from guestcompute.ops.base import registered_ops
from guestcompute.ops.rows import loop_budget

CAP = 64        # a cap small rows cross: the row kernels' sweeps get 32 iterations


@pytest.fixture
def capped(ctx):
    ctx.device.limits = dataclasses.replace(ctx.device.limits, loop_iteration_cap=CAP)
    return ctx


def _dispatches(host, ctx, fn) -> tuple:
    """(dispatches recorded, what ``fn`` returned), run."""
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        result = fn(rec)
    host.submit_and_wait(cmd)
    return rec.dispatches, result


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_normalizations_cut_long_rows_into_chunks(host, capped, dtype):
    ctx = capped
    need(ctx, dtype)
    rng = np.random.default_rng(1)
    n = 10_000                  # 79 sweeps of 128: past a budget of 32
    x_np = (rng.standard_normal((3, n)) * 3 + 1e4).astype(dtype)    # a large common offset too
    w_np, b_np = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    x, w, b = ctx.tensor(x_np), ctx.tensor(w_np), ctx.tensor(b_np)
    count, got = _dispatches(host, ctx, lambda rec: (
        rec.layer_norm(x, w, b), rec.rms_norm(x, w), rec.softmax(x), rec.log_softmax(x)))
    assert count == 8                      # two dispatches each
    close(got[0], layer_norm_ref(x_np, w_np, b_np), dtype, atol=2e-5)
    close(got[1], rms_norm_ref(x_np, w_np), dtype)
    close(got[2], softmax_ref(x_np, -1), dtype)
    close(got[3], softmax_ref(x_np, -1, log=True), dtype, atol=2e-5)


def test_chunked_rows_take_strided_views_in_place_and_special_values(host, capped):
    ctx = capped
    rng = np.random.default_rng(2)
    base_np = rng.standard_normal((9000, 4)).astype(np.float32)
    base_np[17, 1] = -np.inf
    view_np = base_np[:, 1]                # a strided row of 9000
    x_np = np.stack([view_np, view_np + 5])
    view = ctx.tensor(base_np)[:, 1]
    x = ctx.tensor(x_np)
    y = ctx.tensor(x_np)
    count, got = _dispatches(host, ctx, lambda rec: (rec.softmax(view, 0), rec.log_softmax(view, 0),
                                                     rec.layer_norm(x, out=x), rec.rms_norm(y, out=y)))
    assert count == 8                      # two dispatches each
    close(got[0], softmax_ref(view_np, 0), "float32")
    assert got[1].numpy()[17] == -np.inf
    finite = np.isfinite(view_np)
    np.testing.assert_allclose(got[1].numpy()[finite], softmax_ref(view_np, 0, log=True)[finite],
                               rtol=2e-5, atol=2e-5)
    with np.errstate(invalid="ignore"):              # the references' NaN rows are the expectation
        close(x, layer_norm_ref(x_np), "float32")       # NaN rows: -inf minus the mean
        close(y, rms_norm_ref(x_np), "float32")


def test_reductions_keep_their_loops_within_the_cap(host, capped):
    ctx = capped
    rng = np.random.default_rng(3)
    cols_np = rng.integers(-5, 6, (1000, 300)).astype(np.float32)    # neighbour rows: one per invocation
    rows_np = rng.integers(-5, 6, (1500, 9000)).astype(np.float32)   # many long rows: one workgroup each
    cols, rows = ctx.tensor(cols_np), ctx.tensor(rows_np)
    count, got = _dispatches(host, ctx, lambda rec: (rec.sum(cols, 0), rec.max(cols, 0), rec.argmax(cols, 0),
                                                     rec.sum(rows, 1), rec.argmin(rows, 1), rec.mean(rows, 1)))
    assert count == 3 + 3 * 2              # the long rows in two passes
    planned = registered_ops()["sum"](ctx, cols, 0).dispatches
    assert [d.spec.param("mode") for d in planned] == ["rows"]     # not a 1000-long loop per invocation
    np.testing.assert_array_equal(got[0].numpy(), cols_np.sum(0))
    np.testing.assert_array_equal(got[1].numpy(), cols_np.max(0))
    np.testing.assert_array_equal(got[2].numpy(), cols_np.argmax(0))
    np.testing.assert_array_equal(got[3].numpy(), rows_np.sum(1))
    np.testing.assert_array_equal(got[4].numpy(), rows_np.argmin(1))
    np.testing.assert_allclose(got[5].numpy(), rows_np.mean(1), rtol=1e-6)


@pytest.fixture
def real_cap(ctx):
    if not ctx.limits.loop_iteration_cap:
        pytest.skip("the driver caps no shader loops")
    return ctx


def _long_row(ctx, sweeps: int) -> int:
    """A row length one 128-wide workgroup could not sweep ``sweeps`` times within the cap."""
    return (ctx.limits.loop_iteration_cap // sweeps + 1) * 128 + 5


def test_a_layer_norm_row_past_the_drivers_cap(host, real_cap):
    n = _long_row(real_cap, 3)
    x_np = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    x = real_cap.tensor(x_np)
    _, (ln, rms) = _dispatches(host, real_cap, lambda rec: (rec.layer_norm(x), rec.rms_norm(x)))
    close(ln, layer_norm_ref(x_np), "float32", atol=2e-5)
    close(rms, rms_norm_ref(x_np), "float32", atol=2e-5)


def test_a_log_softmax_row_past_the_drivers_cap(host, real_cap):
    n = _long_row(real_cap, 2)
    x_np = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    x = real_cap.tensor(x_np)
    _, got = _dispatches(host, real_cap, lambda rec: rec.log_softmax(x))
    close(got, softmax_ref(x_np, -1, log=True), "float32", atol=2e-5)


def test_the_loop_budget_leaves_room_under_the_cap(ctx):
    budget = loop_budget(ctx.limits)
    cap = ctx.limits.loop_iteration_cap
    assert (budget == 0) if not cap else (0 < budget < cap)
