"""Segmented prefix sums (rec.segmented_cumsum) against numpy's cumsum of
each segment, on both host profiles and both variants (multi-level, and
the single pass forced on a fresh context claiming forward progress)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from guestcompute.ops.scan_chained import use_chained
from guestcompute.ops.segmented import ITEMS, PORTABLE_WG
from single_pass import forced_single_pass, full_range as data, skip_first_tickets
from strided_views import draw_view

BLOCK = PORTABLE_WG * ITEMS


def reference(x, starts, exclusive):
    """numpy's cumsum of each segment (float32 accumulated in float64)."""
    acc = np.float64 if x.dtype == np.float32 else x.dtype
    bounds = np.flatnonzero(starts)
    bounds = np.concatenate([[0], bounds[bounds > 0], [x.size]])
    out = np.empty(x.size, acc)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        seg = x[lo:hi].astype(acc)
        out[lo:hi] = np.cumsum(seg, dtype=acc) - (seg if exclusive else 0)
    return out


def check(got, x, starts, exclusive):
    ref = reference(x, starts, exclusive)
    if x.dtype == np.float32:
        seg_abs = reference(np.abs(x), starts, False)
        bound = 4e-6 * seg_abs + 1e-30
        err = np.abs(got.astype(np.float64) - ref)
        assert np.all(err <= bound), f"max error {err.max()}"
    else:
        np.testing.assert_array_equal(got, ref.astype(x.dtype))


def starts_of(rng, n, density, dtype="uint32"):
    flags = rng.random(n) < density
    return np.where(flags, rng.integers(1, 200, n), 0).astype(dtype)


@pytest.mark.parametrize("n", [1, 2, 7, BLOCK - 1, BLOCK, BLOCK + 1, 4097, 65537, 99991])
@pytest.mark.parametrize("density", [0.0, 0.001, 0.05, 1.0])
def test_sizes_and_segment_densities(host, either_ctx, n, density):
    rng = np.random.default_rng(n)
    x_np, s_np = data(rng, n, "int32"), starts_of(rng, n, density)
    x, s = either_ctx.tensor(x_np), either_ctx.tensor(s_np)
    for exclusive in (False, True):
        y = host.run(either_ctx, lambda rec: rec.segmented_cumsum(x, s, exclusive=exclusive))
        check(y.numpy(), x_np, s_np, exclusive)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("starts_dtype", ["uint8", "uint32", "int32"])
def test_dtypes(host, either_ctx, dtype, starts_dtype):
    if starts_dtype == "uint8" and not either_ctx.caps.uint8_storage:
        pytest.skip("the host did not enable 8-bit storage")
    rng = np.random.default_rng(2)
    n = 3 * 2048 + 77
    x_np, s_np = data(rng, n, dtype), starts_of(rng, n, 0.002, starts_dtype)
    x, s = either_ctx.tensor(x_np), either_ctx.tensor(s_np)
    y = host.run(either_ctx, lambda rec: rec.segmented_cumsum(x, s))
    assert y.dtype.name == dtype
    check(y.numpy(), x_np, s_np, False)


def test_long_segments_spanning_many_tiles_and_all_equal(host, either_ctx):
    n = 40 * 2048 + 5
    x_np = np.full(n, 3, np.uint32)
    s_np = np.zeros(n, np.uint32)
    s_np[[5, 2048 * 7 + 1, 2048 * 30]] = 1
    x, s = either_ctx.tensor(x_np), either_ctx.tensor(s_np)
    y = host.run(either_ctx, lambda rec: rec.segmented_cumsum(x, s))
    check(y.numpy(), x_np, s_np, False)


def test_strided_views_and_in_place(host, either_ctx):
    rng = np.random.default_rng(4)
    base_np = data(rng, 3 * 9000, "float32")
    s_np = starts_of(rng, 9000, 0.01)
    base = either_ctx.tensor(base_np)
    s = either_ctx.tensor(s_np)
    out_base = either_ctx.tensor(np.full(2 * 9000, 5, np.float32))
    host.run(either_ctx, lambda rec: rec.segmented_cumsum(base[::-3], s, out=out_base[::2]))
    check(out_base.numpy()[::2], base_np[::-3], s_np, False)
    assert (out_base.numpy()[1::2] == 5).all()
    x_np = data(rng, 9000, "int32")
    x = either_ctx.tensor(x_np)
    host.run(either_ctx, lambda rec: rec.segmented_cumsum(x, s, exclusive=True, out=x))
    check(x.numpy(), x_np, s_np, True)


def test_variant_follows_the_device(host, either_ctx):
    x = either_ctx.tensor(np.ones(5000, np.float32))
    s = either_ctx.tensor(np.zeros(5000, np.uint32))
    modes = {d.spec.param("mode") for d in registered_ops()["segmented_cumsum"](either_ctx, x, s).dispatches
             if d.spec.family == "segscan"}
    assert modes == ({"chained"} if use_chained(either_ctx, False) else {"block"})


def test_planned_kernels_are_in_the_bake_catalogue(host, either_ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    planned = []
    for dtype in ("float32", "int32", "uint32"):
        for sdt in ("uint32", "int32") + (("uint8",) if either_ctx.caps.uint8_storage else ()):
            for n in (100, 5000, BLOCK * BLOCK + 1):
                for exclusive in (False, True):
                    planned += registered_ops()["segmented_cumsum"](
                        either_ctx, either_ctx.empty((n,), dtype), either_ctx.empty((n,), sdt), exclusive=exclusive).dispatches
    assert all(d.spec in catalogue for d in planned)


def test_empty_and_typed_errors(host, ctx):
    e = host.run(ctx, lambda rec: rec.segmented_cumsum(ctx.empty((0,)), ctx.empty((0,), "uint32")))
    assert e.shape == (0,)
    x = ctx.tensor(np.ones(10, np.float32))
    s = ctx.tensor(np.zeros(10, np.uint32))
    cases = [
        (gc.ShapeError, lambda rec: rec.segmented_cumsum(x, ctx.tensor(np.zeros(11, np.uint32)))),
        (gc.ShapeError, lambda rec: rec.segmented_cumsum(ctx.empty((2, 5)), ctx.empty((2, 5), "uint32"))),
        (gc.DTypeError, lambda rec: rec.segmented_cumsum(x, ctx.tensor(np.zeros(10, np.float32)))),
        (gc.DTypeError, lambda rec: rec.segmented_cumsum(s, x)),
        (gc.InvalidArgumentError, lambda rec: rec.segmented_cumsum(x, s, exclusive=1)),
        (gc.InvalidArgumentError, lambda rec: rec.segmented_cumsum(np.ones(10), s)),
        (gc.ShapeError, lambda rec: rec.segmented_cumsum(x, s, out=ctx.empty((9,)))),
        (gc.DTypeError, lambda rec: rec.segmented_cumsum(x, s, out=ctx.empty((10,), "int32"))),
        (gc.InvalidArgumentError, lambda rec: rec.segmented_cumsum(s, s, out=s)),      # out overlaps starts
    ]
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for error, call in cases:
            with pytest.raises(error):
                call(rec)
            assert rec.dispatches == 0
    host.submit_and_wait(cmd)


@pytest.mark.parametrize("starts_at", [[], [100], [2048 + 5, 2048 + 900]])
def test_single_pass_fallback_over_tiles_that_never_publish(host, monkeypatch, starts_at):
    # Tiles 0-2 never run: tile 3 reduces them itself, stopping at the
    # first one that holds a segment start.
    from guestcompute.ops import segmented
    skip_first_tickets(monkeypatch, segmented, 3)
    ctx = forced_single_pass(host)
    try:
        n = 6 * 2048 + 3
        x_np = data(np.random.default_rng(13), n, "int32")
        s_np = np.zeros(n, np.uint32)
        s_np[starts_at + [4 * 2048 + 7]] = 1
        x, s = ctx.tensor(x_np), ctx.tensor(s_np)
        out = ctx.tensor(np.zeros(n, np.int32))
        host.run(ctx, lambda rec: rec.segmented_cumsum(x, s, out=out))
        ref = reference(x_np, s_np, False).astype(np.int32)
        np.testing.assert_array_equal(out.numpy()[3 * 2048:], ref[3 * 2048:])
    finally:
        ctx.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(draw=st.data(), n=st.integers(0, 5000), density=st.sampled_from([0.0, 0.01, 0.3, 1.0]),
       dtype=st.sampled_from(["float32", "int32", "uint32"]), exclusive=st.booleans())
def test_any_strided_views_match_numpy(host, ctx, draw, n, density, dtype, exclusive):
    """x and starts are separate 1-D views (steps, reversal, offsets)."""
    starts_dtype = draw.draw(st.sampled_from(["uint32", "int32"] + (["uint8"] if ctx.caps.uint8_storage else [])))
    rng = np.random.default_rng(draw.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(draw, ctx, (n,), lambda s: data(rng, s, dtype))
    s, s_np = draw_view(draw, ctx, (n,), lambda s: starts_of(rng, s, density, starts_dtype))
    y = host.run(ctx, lambda rec: rec.segmented_cumsum(x, s, exclusive=exclusive))
    assert y.shape == (n,) and y.dtype.name == dtype
    check(y.numpy(), x_np, s_np, exclusive)
