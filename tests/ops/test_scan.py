"""Prefix scan (rec.cumsum) against numpy, on both host profiles."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from guestcompute.ops.scan import BLOCK, use_subgroups
from guestcompute.ops.scan_chained import TILE, use_chained
from guestcompute.ops.scan_vector import TILE as VECTOR_TILE
from guestcompute.ops.scan_vector import plan_offsets, tile_sums
from partial_subgroups import as_if_subgroups_were_partial
from single_pass import forced_single_pass, full_range as data, skip_first_tickets

HYP = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def reference(x: np.ndarray, axis: int, exclusive: bool) -> np.ndarray:
    """numpy's scan in the input dtype (integers wrap); float in float64."""
    acc = np.float64 if x.dtype == np.float32 else x.dtype
    inc = np.cumsum(x.astype(acc), axis=axis, dtype=acc)
    if not exclusive:
        return inc
    return inc - x.astype(acc)   # exact for wrapping integers, float64 for floats


def check(got: np.ndarray, x: np.ndarray, axis: int, exclusive: bool):
    ref = reference(x, axis, exclusive)
    if x.dtype == np.float32:
        # Tree-shaped float32 sums: error bounded by a few dozen roundings of
        # the running sum of magnitudes.
        bound = 4e-6 * np.cumsum(np.abs(x.astype(np.float64)), axis=axis) + 1e-30
        err = np.abs(got.astype(np.float64) - ref)
        assert np.all(err <= bound), f"max error {err.max()} (bound {bound[err > bound][:3]})"
    else:
        np.testing.assert_array_equal(got, ref.astype(x.dtype))


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1023, 1024, 1025, 2048, 5000, 65537])
@pytest.mark.parametrize("exclusive", [False, True])
def test_1d_sizes_across_block_and_level_boundaries(host, ctx, n, exclusive):
    rng = np.random.default_rng(n)
    x_np = data(rng, n, "float32")
    x = ctx.tensor(x_np)
    y = host.run(ctx, lambda rec: rec.cumsum(x, exclusive=exclusive))
    assert y.shape == (n,) and y.dtype == gc.float32
    check(y.numpy(), x_np, -1, exclusive)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("exclusive", [False, True])
def test_integers_wrap_like_numpy(host, ctx, dtype, exclusive):
    rng = np.random.default_rng(1)
    x_np = data(rng, (3, 3001), dtype)
    x = ctx.tensor(x_np)
    y = host.run(ctx, lambda rec: rec.cumsum(x, exclusive=exclusive))
    assert y.dtype.name == dtype
    check(y.numpy(), x_np, -1, exclusive)


def spaced(ctx, x_np: np.ndarray):
    """``x_np`` as a view with a stride of 2 along its last axis: the scans
    for strided rows (the vector scan needs contiguous ones)."""
    return ctx.tensor(np.repeat(x_np, 2, axis=-1))[..., ::2]


def test_three_levels(host, ctx):
    # > BLOCK**2 elements: block totals of block totals still span two blocks.
    n = BLOCK * BLOCK + 5
    x_np = (np.arange(n) % 7 - 3).astype(np.int32)
    y, rec = host.run(ctx, lambda rec: (rec.cumsum(spaced(ctx, x_np)), rec))
    if use_chained(ctx, False):
        assert rec.dispatches == 2      # setup, one single-pass scan
    else:
        assert rec.dispatches == 5      # 3 block scans + 2 add-backs
    check(y.numpy(), x_np, -1, False)
    y, rec = host.run(ctx, lambda rec: (rec.cumsum(ctx.tensor(x_np)), rec))
    if use_subgroups(ctx):
        assert rec.dispatches == 3      # tile sums, their scan (one workgroup), tile scans
    check(y.numpy(), x_np, -1, False)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_axes_of_a_3d_tensor(host, ctx, axis):
    rng = np.random.default_rng(axis + 10)
    x_np = data(rng, (5, 1100, 3), "int32")
    x = ctx.tensor(x_np)
    y = host.run(ctx, lambda rec: rec.cumsum(x, axis=axis))
    check(y.numpy(), x_np, axis, False)


def test_strided_views_in_and_out(host, ctx):
    rng = np.random.default_rng(3)
    base_np = data(rng, (9, 2100), "float32")
    base = ctx.tensor(base_np)
    view = base[1::2, ::-3]                       # negative and non-unit strides
    view_np = base_np[1::2, ::-3]
    out_base = ctx.tensor(np.full((4, 2 * view_np.shape[1]), 99, np.float32))
    out = out_base[:, ::2]
    host.run(ctx, lambda rec: rec.cumsum(view, exclusive=True, out=out))
    got = out_base.numpy()
    check(got[:, ::2], view_np, -1, True)
    np.testing.assert_array_equal(got[:, 1::2], 99)   # untouched gaps


def test_in_place(host, ctx):
    x_np = np.arange(3000, dtype=np.uint32)
    x = ctx.tensor(x_np)
    host.run(ctx, lambda rec: rec.cumsum(x, out=x))
    check(x.numpy(), x_np, -1, False)


def test_empty_and_singleton(host, ctx):
    e = ctx.empty((0, 5))
    s_np = np.array([[4.5]], np.float32)
    s = ctx.tensor(s_np)
    ye, ys = host.run(ctx, lambda rec: (rec.cumsum(e), rec.cumsum(s, axis=0, exclusive=True)))
    assert ye.shape == (0, 5)
    np.testing.assert_array_equal(ys.numpy(), [[0.0]])


@HYP
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
       long=st.sampled_from([1, 255, 256, 257, 1024, 1025, 3000]),
       dtype=st.sampled_from(["float32", "int32", "uint32"]),
       exclusive=st.booleans(), data_=st.data())
def test_hypothesis_shapes_axes_dtypes(host, ctx, shape, long, dtype, exclusive, data_):
    axis = data_.draw(st.integers(-len(shape), len(shape) - 1))
    shape = list(shape)
    shape[axis] = long                    # make the scanned axis cross block boundaries
    if np.prod(shape) > 200_000:
        shape = [s if i == axis % len(shape) else 1 for i, s in enumerate(shape)]
    x_np = data(np.random.default_rng(long), tuple(shape), dtype)
    x = ctx.tensor(x_np)
    y = host.run(ctx, lambda rec: rec.cumsum(x, axis=axis, exclusive=exclusive))
    check(y.numpy(), x_np, axis, exclusive)


def test_kernel_choice_follows_host_caps(host, ctx):
    x = ctx.tensor(np.ones(5000, np.float32))
    res = registered_ops()["cumsum"](ctx, x)
    specs = [d.spec for d in res.dispatches]
    subgroup = use_subgroups(ctx)
    if host.profile == "bare":
        assert not subgroup
    if subgroup:      # a contiguous row: the reduce-then-scan over vectors, three dispatches
        assert [s.family for s in specs] == ["scan_vector_sums", "scan_vector_offsets", "scan_vector_tiles"]
    else:
        assert {s.param("subgroup") for s in specs if s.family in ("scan_block", "scan_chained")} == {False}
    assert all(s.target_env == ("vulkan1.1" if "subgroup" in s.features else "vulkan1.0") for s in specs)
    # a second identical scan creates no pipeline
    host.run(ctx, lambda rec: rec.cumsum(x))
    before = ctx.cache_stats()["pipelines_created"]
    other = ctx.tensor(np.ones(7000, np.float32))
    host.run(ctx, lambda rec: rec.cumsum(other))
    assert ctx.cache_stats()["pipelines_created"] == before


def test_typed_errors(host, ctx):
    x = ctx.tensor(np.ones((4, 6), np.float32))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.cumsum(x, axis=2))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.cumsum(x[0, 0]))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.cumsum(np.ones(4, np.float32)))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.cumsum(x, exclusive="yes"))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.cumsum(x, out=ctx.empty((6, 4))))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.cumsum(x, out=ctx.empty((4, 6), "int32")))
    with pytest.raises(gc.InvalidArgumentError):     # partial overlap with the input
        big = ctx.empty((5, 6))
        host.run(ctx, lambda rec: rec.cumsum(big[:4], out=big[1:]))
    if ctx.caps.float16_storage:
        with pytest.raises(gc.DTypeError):
            host.run(ctx, lambda rec: rec.cumsum(ctx.empty((8,), "float16")))


def test_planned_kernels_are_in_the_bake_catalogue(host, ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    cumsum = registered_ops()["cumsum"]
    planned = []
    for dtype in ("float32", "int32", "uint32"):
        x = ctx.empty((3, BLOCK + 1), dtype)
        for exclusive in (False, True):
            planned += cumsum(ctx, x, 1, exclusive).dispatches + cumsum(ctx, x[:, :5], 1, exclusive).dispatches
    assert planned and all(d.spec in catalogue for d in planned)


# -- the single-pass (chained) scan ------------------------------------------------

@pytest.fixture
def chained_ctx(host):
    """A fresh context whose device claims forward progress, so the
    single-pass scan runs (lavapipe runs started workgroups to completion,
    so the ticket-ordered look-back terminates there too)."""
    c = forced_single_pass(host)
    yield c
    c.close()


def families(ctx, x, **kw) -> list:
    return [d.spec.family for d in registered_ops()["cumsum"](ctx, x, **kw).dispatches]


def test_single_pass_only_where_the_device_promises_forward_progress(host, ctx, chained_ctx):
    x = spaced(ctx, np.ones(3 * BLOCK, np.float32))
    chained = "scan_chained" in families(ctx, x)
    assert chained == (ctx.limits.forward_progress and use_chained(ctx, False))
    y = spaced(chained_ctx, np.ones(3 * BLOCK, np.float32))
    assert "scan_chained" in families(chained_ctx, y)
    assert "scan_chained" not in families(chained_ctx, y[:BLOCK])     # one block: one dispatch already


@pytest.mark.parametrize("n", [BLOCK + 1, TILE - 1, TILE, TILE + 1, 3 * TILE, 40 * TILE + 13, 65537, 99991])
@pytest.mark.parametrize("exclusive", [False, True])
def test_single_pass_sizes(host, chained_ctx, n, exclusive):
    rng = np.random.default_rng(n)
    for dtype in ("float32", "int32", "uint32"):
        x_np = data(rng, n, dtype)
        x = spaced(chained_ctx, x_np)
        y, rec = host.run(chained_ctx, lambda rec: (rec.cumsum(x, exclusive=exclusive), rec))
        assert rec.dispatches == 2                      # clear + one pass
        check(y.numpy(), x_np, -1, exclusive)


def test_single_pass_rows_views_and_all_equal(host, chained_ctx):
    rng = np.random.default_rng(5)
    base_np = data(rng, (5, 3 * TILE + 7), "int32")
    base = chained_ctx.tensor(base_np)
    out_base = chained_ctx.tensor(np.zeros((5, 2 * base_np.shape[1]), np.int32))
    out = out_base[:, ::2]
    host.run(chained_ctx, lambda rec: rec.cumsum(base[::2], exclusive=True, out=out[::2]))
    check(out_base.numpy()[::2, ::2], base_np[::2], -1, True)
    assert not out_base.numpy()[1::2].any() and not out_base.numpy()[:, 1::2].any()
    same = spaced(chained_ctx, np.full((3, 5 * TILE), 3, np.uint32))
    y = host.run(chained_ctx, lambda rec: rec.cumsum(same, axis=1))
    check(y.numpy(), np.full((3, 5 * TILE), 3, np.uint32), 1, False)


def test_single_pass_in_place(host, chained_ctx):
    x_np = np.arange(4 * TILE + 3, dtype=np.uint32)
    x = spaced(chained_ctx, x_np)
    chained = use_chained(chained_ctx, True)
    assert ("scan_chained" in families(chained_ctx, x, out=x)) == chained
    host.run(chained_ctx, lambda rec: rec.cumsum(x, out=x))
    check(x.numpy(), x_np, -1, False)



def test_single_pass_kernels_are_in_the_bake_catalogue(host, chained_ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    cumsum = registered_ops()["cumsum"]
    planned = []
    for dtype in ("float32", "int32", "uint32"):
        x = chained_ctx.empty((2, TILE + 1), dtype)
        for exclusive in (False, True):
            planned += cumsum(chained_ctx, x, 1, exclusive).dispatches
    assert {d.spec.family for d in planned} >= {"scan_chained"}
    assert all(d.spec in catalogue for d in planned)


# -- the reduce-then-scan over vectors (contiguous rows) ---------------------------

def vector_scan(ctx) -> bool:
    return use_subgroups(ctx)


@pytest.mark.parametrize("n", [BLOCK + 1, VECTOR_TILE - 1, VECTOR_TILE, VECTOR_TILE + 1, VECTOR_TILE + 4,
                               3 * VECTOR_TILE + 2, 40 * VECTOR_TILE + 13, 99991])
@pytest.mark.parametrize("exclusive", [False, True])
def test_vector_scan_sizes(host, ctx, n, exclusive):
    rng = np.random.default_rng(n + 3)
    for dtype in ("float32", "int32", "uint32"):
        x_np = data(rng, n, dtype)
        x = ctx.tensor(x_np)
        assert ("scan_vector_tiles" in families(ctx, x)) == vector_scan(ctx)
        y = host.run(ctx, lambda rec: rec.cumsum(x, exclusive=exclusive))
        check(y.numpy(), x_np, -1, exclusive)


def test_vector_scan_rows_offsets_and_in_place(host, ctx):
    rng = np.random.default_rng(11)
    # Rows of 4k + 8 elements start on 16-byte boundaries: each row is scanned on its own.
    base_np = data(rng, (3, 2 * VECTOR_TILE + 8), "uint32")
    base = ctx.tensor(base_np)
    assert ("scan_vector_tiles" in families(ctx, base, axis=1)) == vector_scan(ctx)
    check(host.run(ctx, lambda rec: rec.cumsum(base, axis=1)).numpy(), base_np, 1, False)
    # A view starting 4 elements in stays vectorised; one starting 1 element in does not.
    for start in (4, 1):
        view = base[1, start:]
        assert ("scan_vector_tiles" in families(ctx, view)) == (vector_scan(ctx) and start % 4 == 0)
        out = ctx.tensor(np.full(base_np.shape[1] + 4, 9, np.uint32))
        host.run(ctx, lambda rec: rec.cumsum(view, exclusive=True, out=out[4:4 + view.shape[0]]))
        check(out.numpy()[4:4 + view.shape[0]], base_np[1, start:], -1, True)
        assert (out.numpy()[:4] == 9).all()
    x_np = data(rng, 5 * VECTOR_TILE + 3, "float32")
    x = ctx.tensor(x_np)
    host.run(ctx, lambda rec: rec.cumsum(x, out=x))
    check(x.numpy(), x_np, -1, False)
    same = ctx.tensor(np.full((2, 3 * VECTOR_TILE), 3, np.int32))
    check(host.run(ctx, lambda rec: rec.cumsum(same, axis=1)).numpy(), np.full((2, 3 * VECTOR_TILE), 3, np.int32),
          1, False)


@pytest.mark.parametrize("exclusive", [False, True])
def test_vector_scan_with_partial_subgroups(host, ctx, exclusive):
    """The kernels' shared-memory path (workgroups of subgroups that are
    not all full) gives numpy's answers too."""
    if not vector_scan(ctx):
        pytest.skip("the vector scan needs subgroup arithmetic")
    rng = np.random.default_rng(23)
    for dtype in ("int32", "float32"):
        x_np = data(rng, (2, 3 * VECTOR_TILE + 12), dtype)      # rows on 16-byte boundaries
        x, out = ctx.tensor(x_np), ctx.empty(x_np.shape, dtype)
        plan = registered_ops()["cumsum"](ctx, x, 1, exclusive, out=out).dispatches
        host.run(ctx, lambda rec: rec.dispatch(as_if_subgroups_were_partial(plan)))
        check(out.numpy(), x_np, 1, exclusive)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_vector_tile_offsets_walk_rows_of_several_tiles(host, ctx, dtype, partial):
    """The tile sums' scan (one workgroup a row, a tile of sums at a time)
    on rows longer than one tile: what a 2^24-element row needs, without
    scanning one."""
    if not vector_scan(ctx):
        pytest.skip("the vector scan needs subgroup arithmetic")
    rows, n = 2, 2 * VECTOR_TILE + 5
    sums, stride = tile_sums(ctx, rows, n, dtype)
    sums_np = data(np.random.default_rng(17), (rows, stride), dtype)
    if dtype == "float32":
        sums_np = np.round(sums_np * 64)            # small integers: every order of adding is exact
    ctx.run(lambda rec: rec.copy(ctx.tensor(sums_np), out=sums))
    offsets = ctx.tensor(np.full(sums.shape, 7, dtype))
    plan = plan_offsets(ctx, sums, offsets, rows, n, stride, dtype)
    host.run(ctx, lambda rec: rec.dispatch(as_if_subgroups_were_partial(plan) if partial else plan))
    ref = np.cumsum(sums_np[:, :n], axis=1, dtype=dtype) - sums_np[:, :n]
    np.testing.assert_array_equal(offsets.numpy()[:, :n], ref)
    assert (offsets.numpy()[:, n:] == 7).all()              # the padding is left alone


# -- GPU-side counts -----------------------------------------------------------------

@pytest.mark.parametrize("size", [5, BLOCK + 3, 3 * TILE + 7])
@pytest.mark.parametrize("count", [0, 1, "half", "size", "beyond"])
def test_count_from_the_gpu(host, either_ctx, size, count):
    ctx = either_ctx
    limit = {"half": size // 2, "size": size, "beyond": size + 10 ** 6}.get(count, count)
    rng = np.random.default_rng(size)
    for dtype, cdt, exclusive in (("uint32", "uint32", False), ("float32", "int32", True)):
        x_np = data(rng, size, dtype)
        x = ctx.tensor(x_np)
        c = ctx.tensor(np.array([limit // 2], cdt))
        out = ctx.tensor(np.full(size, 7, dtype))

        def record(rec):
            rec.add(c, c, out=c)                      # the count is written on the GPU first
            return rec.cumsum(x, exclusive=exclusive, out=out, count=c)
        host.run(ctx, record)
        got, kept = out.numpy(), min(2 * (limit // 2), size)
        check(got[:kept], x_np[:kept], -1, exclusive)
        assert (got[kept:] == 7).all()


def test_negative_int32_count_scans_nothing(host, either_ctx):
    x = either_ctx.tensor(np.ones(3 * TILE, np.int32))
    out = either_ctx.tensor(np.full(3 * TILE, 5, np.int32))
    host.run(either_ctx, lambda rec: rec.cumsum(x, out=out, count=either_ctx.tensor(np.array([-3], np.int32))))
    assert (out.numpy() == 5).all()


def test_count_errors(host, ctx):
    x = ctx.tensor(np.ones((4, 6), np.float32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for error, kw in ((gc.ShapeError, {"count": ctx.tensor(np.array([3], np.uint32))}),
                          (gc.DTypeError, {"count": ctx.tensor(np.array([3], np.float32))})):
            with pytest.raises(error):
                rec.cumsum(x, **kw)
        with pytest.raises(gc.ShapeError):
            rec.cumsum(x[0], count=ctx.tensor(np.array([3, 4], np.uint32)))
        assert rec.dispatches == 0
    host.submit_and_wait(cmd)


def test_counted_kernels_are_in_the_bake_catalogue(host, either_ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    cumsum = registered_ops()["cumsum"]
    planned = []
    for cdt in ("uint32", "int32"):
        c = either_ctx.tensor(np.array([3], cdt))
        for dtype in ("float32", "int32", "uint32"):
            for n in (7, 3 * TILE):
                planned += cumsum(either_ctx, either_ctx.empty((n,), dtype), count=c).dispatches
    assert planned and all(d.spec in catalogue for d in planned)


@pytest.mark.parametrize("first", [0, 1, 4])
def test_single_pass_vector_access_where_aligned(host, chained_ctx, first):
    ctx = chained_ctx
    n = 5 * TILE + 6
    x_np = data(np.random.default_rng(first), n, "int32")
    base = ctx.tensor(x_np)
    x = base[first:]
    c = ctx.tensor(np.array([n], np.uint32))      # a GPU count: contiguous rows take the chained scan too
    specs = [d.spec for d in registered_ops()["cumsum"](ctx, x, count=c).dispatches
             if d.spec.family == "scan_chained"]
    wide = 6 <= ctx.limits.max_storage_buffers and first % 4 == 0
    assert [s.param("vector") for s in specs] == [wide]
    y = host.run(ctx, lambda rec: rec.cumsum(x, count=c))
    check(y.numpy(), x_np[first:], -1, False)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_single_pass_fallback_reduces_tiles_that_never_publish(host, chained_ctx, monkeypatch, dtype):
    from guestcompute.ops import scan_chained
    skip_first_tickets(monkeypatch, scan_chained, 3)
    n = 7 * TILE + 5
    x_np = data(np.random.default_rng(11), n, dtype)
    x = spaced(chained_ctx, x_np)
    out = chained_ctx.tensor(np.zeros(n, dtype))
    host.run(chained_ctx, lambda rec: rec.cumsum(x, out=out))
    ref_from = 3 * TILE
    got = out.numpy()
    full = np.empty(n, got.dtype)
    full[:ref_from] = reference(x_np, -1, False)[:ref_from].astype(got.dtype)   # tiles that never ran
    full[ref_from:] = got[ref_from:]
    check(full, x_np, -1, False)
    assert not got[:ref_from].any()
