"""Compaction (rec.compact, rec.nonzero) against numpy's boolean indexing
and flatnonzero, on both host profiles and every variant: the vector one
for inputs on 16-byte boundaries where the device has subgroups (layout
"aligned"), and for inputs one element later (layout "offset") the
multi-pass one wherever the device does not promise forward progress and
the single-pass one forced on a fresh context that claims it."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from guestcompute.ops.compact import ITEMS
from guestcompute.ops.compact_vector import use_vector_compact
from guestcompute.ops.scan_vector import TILE as VECTOR_TILE
from guestcompute.ops.scan_chained import WG as CHAINED_WG
from guestcompute.ops.scan_chained import use_chained
from partial_subgroups import as_if_subgroups_were_partial
from single_pass import forced_single_pass, skip_first_tickets
from strided_views import draw_view, shapes

TILE = CHAINED_WG * ITEMS
LAYOUTS = pytest.mark.parametrize("layout", ["aligned", "offset"])


def put(ctx, arr, layout="aligned"):
    """``arr`` as a tensor: "aligned" where a new tensor starts (the vector
    kernels run where the device has subgroups), "offset" as a view one
    element into a larger tensor (the tile kernels run)."""
    if layout == "aligned":
        return ctx.tensor(arr)
    flat = arr.reshape(-1)
    return ctx.tensor(np.concatenate([flat[:1], flat]))[1:].reshape(arr.shape)


def mask_of(rng, shape, dtype, density=0.5):
    keep = rng.random(shape) < density
    if dtype == "float32":
        # every kind of float: nonzero values, NaN and infinities are true, ±0 false
        vals = rng.choice(np.array([1.5, -2.0, np.nan, np.inf, -np.inf, 1e-38], np.float32), shape)
        zeros = rng.choice(np.array([0.0, -0.0], np.float32), shape)
        return np.where(keep, vals, zeros).astype(np.float32)
    if dtype == "uint8":
        return np.where(keep, rng.integers(1, 256, shape), 0).astype(np.uint8)
    vals = rng.integers(1, 2 ** 31, shape) * rng.choice([-1, 1], shape) if dtype == "int32" \
        else rng.integers(1, 2 ** 32, shape)
    return np.where(keep, vals, 0).astype(dtype)


def values_of(rng, shape, dtype):
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "float16":
        return rng.standard_normal(shape).astype(np.float16)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(dtype)


def usable(ctx, *dtypes) -> bool:
    return all({"uint8": ctx.caps.uint8_storage, "float16": ctx.caps.float16_storage}.get(d, True) for d in dtypes)


def check_compact(got, n, x_np, mask_np, limit=None):
    flat_x, flat_m = x_np.reshape(-1), mask_np.reshape(-1).astype(bool)
    if limit is not None:
        flat_x, flat_m = flat_x[:limit], flat_m[:limit]
    ref = flat_x[flat_m]
    assert n.numpy().tolist() == [ref.size]
    assert got.shape == (x_np.size,) and got.dtype.name == x_np.dtype.name
    np.testing.assert_array_equal(got.numpy()[:ref.size].view(f"u{x_np.dtype.itemsize}"),
                                  ref.view(f"u{x_np.dtype.itemsize}"))      # bit-exact, NaN included


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191,
                                  3 * 4096 + 2, 65537, 99991])
@LAYOUTS
def test_compact_sizes(host, either_ctx, size, layout):
    rng = np.random.default_rng(size)
    x_np = values_of(rng, size, "float32")
    m_np = mask_of(rng, size, "uint32")
    x, m = put(either_ctx, x_np, layout), put(either_ctx, m_np, layout)
    got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
    check_compact(got, n, x_np, m_np)


@pytest.mark.parametrize("mask_dtype", ["uint8", "uint32", "int32", "float32"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "uint8", "float16"])
@LAYOUTS
def test_compact_dtypes(host, either_ctx, dtype, mask_dtype, layout):
    if not usable(either_ctx, dtype, mask_dtype):
        pytest.skip("the host did not enable this storage type")
    rng = np.random.default_rng(3)
    x_np, m_np = values_of(rng, 5 * TILE + 3, dtype), mask_of(rng, 5 * TILE + 3, mask_dtype, 0.3)
    x, m = put(either_ctx, x_np, layout), put(either_ctx, m_np, layout)
    got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
    check_compact(got, n, x_np, m_np)


@pytest.mark.parametrize("density", [0.0, 1.0])
@LAYOUTS
def test_compact_none_and_all_kept(host, either_ctx, density, layout):
    rng = np.random.default_rng(4)
    x_np = np.full(3 * TILE + 1, 7, np.int32)         # all equal too
    m_np = mask_of(rng, x_np.size, "uint32", density)
    x, m = put(either_ctx, x_np, layout), put(either_ctx, m_np, layout)
    got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
    check_compact(got, n, x_np, m_np)


@LAYOUTS
def test_nonzero(host, either_ctx, layout):
    rng = np.random.default_rng(5)
    for size in (1, 9, 3 * TILE + 17):
        m_np = mask_of(rng, size, "float32", 0.4)
        m = put(either_ctx, m_np, layout)
        idx, n = host.run(either_ctx, lambda rec: rec.nonzero(m))
        ref = np.flatnonzero(m_np)
        assert idx.dtype == gc.uint32 and idx.shape == (size,)
        assert n.numpy().tolist() == [ref.size]
        np.testing.assert_array_equal(idx.numpy()[:ref.size], ref)


def test_n_dimensional_and_strided_inputs(host, either_ctx):
    rng = np.random.default_rng(6)
    base_np = values_of(rng, (7, 900), "int32")
    mbase_np = mask_of(rng, (7, 900), "uint32")
    x_np, m_np = base_np[1::2, ::-3], mbase_np[1::2, ::-3]
    x, m = either_ctx.tensor(base_np)[1::2, ::-3], either_ctx.tensor(mbase_np)[1::2, ::-3]
    got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
    check_compact(got, n, x_np, m_np)
    full = either_ctx.tensor(mbase_np)
    idx, n2 = host.run(either_ctx, lambda rec: rec.nonzero(full))
    ref = np.flatnonzero(mbase_np)
    np.testing.assert_array_equal(idx.numpy()[:ref.size], ref)


def test_outputs_given_and_int32_indices(host, either_ctx):
    rng = np.random.default_rng(7)
    m_np = mask_of(rng, 2 * TILE + 5, "uint8" if either_ctx.caps.uint8_storage else "uint32")
    m = either_ctx.tensor(m_np)
    base = either_ctx.tensor(np.full(2 * m_np.size, -1, np.int32))
    counts = either_ctx.tensor(np.array([99, 99], np.uint32))
    idx, n = host.run(either_ctx, lambda rec: rec.nonzero(m, out=base[::2], out_count=counts[1:]))
    ref = np.flatnonzero(m_np)
    got = base.numpy()
    np.testing.assert_array_equal(got[::2][:ref.size], ref)
    assert (got[::2][ref.size:] == -1).all() and (got[1::2] == -1).all()     # left as they were
    assert counts.numpy().tolist() == [99, ref.size]


@pytest.mark.parametrize("count", [0, 1, 1000, 5000, "size", "beyond"])
@pytest.mark.parametrize("count_dtype", ["uint32", "int32"])
@LAYOUTS
def test_gpu_side_count(host, either_ctx, count, count_dtype, layout):
    rng = np.random.default_rng(8)
    size = 3 * TILE + 11
    limit = {"size": size, "beyond": size + 5000}.get(count, count)
    x_np, m_np = values_of(rng, size, "uint32"), mask_of(rng, size, "int32")
    x, m = put(either_ctx, x_np, layout), put(either_ctx, m_np, layout)
    c = either_ctx.tensor(np.array([limit], count_dtype))
    out = either_ctx.tensor(np.full(size, 12345, np.uint32))

    def record(rec):
        rec.add(c, 0, out=c)               # the count is written on the GPU first
        return rec.compact(x, m, count=c, out=out)
    got, n = host.run(either_ctx, record)
    check_compact(got, n, x_np, m_np, limit)
    kept = int(n.numpy()[0])
    assert (got.numpy()[kept:] == 12345).all()


def test_negative_int32_count_is_zero(host, either_ctx):
    m = either_ctx.tensor(np.ones(100, np.uint32))
    c = either_ctx.tensor(np.array([-5], np.int32))
    _, n = host.run(either_ctx, lambda rec: rec.nonzero(m, count=c))
    assert n.numpy().tolist() == [0]


def test_count_feeds_a_later_dispatch(host, either_ctx):
    m_np = (np.arange(5000) % 3 == 0).astype(np.uint32)
    m = either_ctx.tensor(m_np)
    out = either_ctx.tensor(np.zeros(5000, np.float32))

    def record(rec):
        idx, n = rec.nonzero(m)
        rec.dispatch_count(n, "fill", out, 1.0)
        return n
    n = host.run(either_ctx, record)
    kept = int(m_np.sum())
    assert n.numpy().tolist() == [kept]
    assert (out.numpy()[:kept] == 1.0).all()


def test_empty_input(host, either_ctx):
    e = either_ctx.empty((0, 4), "float32")
    got, n = host.run(either_ctx, lambda rec: rec.compact(e, either_ctx.empty((0, 4), "uint32")))
    assert got.shape == (0,) and n.numpy().tolist() == [0]


def test_variant_follows_the_device(host, either_ctx):
    ops = registered_ops()
    for layout in ("aligned", "offset"):
        m = put(either_ctx, np.ones(5000, np.uint32), layout)
        families = {d.spec.family for d in ops["nonzero"](either_ctx, m).dispatches}
        modes = {d.spec.param("mode") for d in ops["nonzero"](either_ctx, m).dispatches if d.spec.family == "compact"}
        if layout == "aligned" and either_ctx.limits.subgroup_arithmetic:
            assert use_vector_compact(either_ctx, m, None, "word", None)
            assert {"compact_vector_count", "compact_vector_scatter"} <= families and not modes
        else:
            assert modes == ({"chained"} if use_chained(either_ctx, False) else {"count", "scatter"})


def test_uint8_masks_take_the_vector_kernels_on_16_byte_boundaries(host, either_ctx):
    """A uint8 mask is read 16 bytes at a time: a view 16 elements in is
    vectorised, one 4 elements in is not; both give numpy's answer."""
    if not usable(either_ctx, "uint8"):
        pytest.skip("the host did not enable 8-bit storage")
    rng = np.random.default_rng(31)
    size = 2 * VECTOR_TILE + 5
    base_np = mask_of(rng, size + 16, "uint8")
    x_np = values_of(rng, size, "int32")
    base, x = either_ctx.tensor(base_np), either_ctx.tensor(x_np)
    for start in (16, 4):
        m_np = base_np[start:start + size]
        m = base[start:start + size]
        vector = either_ctx.limits.subgroup_arithmetic and either_ctx.limits.subgroup_ballot and start % 16 == 0
        assert use_vector_compact(either_ctx, m, x, "uint8", None) == vector
        got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
        check_compact(got, n, x_np, m_np)


@LAYOUTS
@pytest.mark.parametrize("pattern", ["sparse", "runs", "alternate"])
def test_masks_of_every_pattern(host, either_ctx, pattern, layout):
    """Sparse masks leave whole 16-byte chunks unread, runs cross chunk,
    subgroup and tile borders, alternate keeps one of each pair."""
    rng = np.random.default_rng(13)
    size = 3 * VECTOR_TILE + 7
    i = np.arange(size)
    keep = {"sparse": rng.random(size) < 0.01, "runs": (i // 37) % 3 == 1, "alternate": i % 2 == 0}[pattern]
    x_np = values_of(rng, size, "float32")
    for m_np in (keep.astype(np.uint32), keep.astype(np.uint8) * rng.integers(1, 256, size).astype(np.uint8)):
        if not usable(either_ctx, m_np.dtype.name):
            continue
        x, m = put(either_ctx, x_np, layout), put(either_ctx, m_np, layout)
        got, n = host.run(either_ctx, lambda rec: rec.compact(x, m))
        check_compact(got, n, x_np, m_np)
        idx, n = host.run(either_ctx, lambda rec: rec.nonzero(m))
        np.testing.assert_array_equal(idx.numpy()[:int(n.numpy()[0])], np.flatnonzero(m_np))


def test_vector_kernels_with_partial_subgroups(host, either_ctx):
    """The kernels' shared-memory path (workgroups of subgroups that are
    not all full) gives numpy's answers too."""
    rng = np.random.default_rng(29)
    size = 3 * VECTOR_TILE + 7
    x_np = values_of(rng, size, "float32")
    ops = registered_ops()
    ran = 0
    for mask_dtype in ("uint8", "float32"):
        if not usable(either_ctx, mask_dtype):
            continue
        m_np = mask_of(rng, size, mask_dtype, 0.4)
        x, m = either_ctx.tensor(x_np), either_ctx.tensor(m_np)
        if not use_vector_compact(either_ctx, m, x, "uint8" if mask_dtype == "uint8" else "float32", None):
            continue
        for planned, check in ((ops["compact"](either_ctx, x, m), lambda v, n: check_compact(v, n, x_np, m_np)),
                               (ops["nonzero"](either_ctx, m), lambda v, n: np.testing.assert_array_equal(
                                   v.numpy()[:int(n.numpy()[0])], np.flatnonzero(m_np)))):
            host.run(either_ctx, lambda rec: rec.dispatch(as_if_subgroups_were_partial(planned.dispatches)))
            check(*planned.value)
            ran += 1
    if not ran:
        pytest.skip("the vector compaction needs subgroup arithmetic and ballots")


def test_planned_kernels_are_in_the_bake_catalogue(host, either_ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    ops = registered_ops()
    c = either_ctx.tensor(np.array([3], np.int32))
    planned = []
    for dtype in ("float32", "int32", "uint32") + tuple(d for d in ("uint8", "float16") if usable(either_ctx, d)):
        x = either_ctx.empty((3000,), dtype)
        for mask_dtype in ("uint32", "int32", "float32") + (("uint8",) if usable(either_ctx, "uint8") else ()):
            m = either_ctx.empty((3000,), mask_dtype)
            planned += ops["compact"](either_ctx, x, m).dispatches + ops["compact"](either_ctx, x, m, count=c).dispatches
            planned += ops["nonzero"](either_ctx, m).dispatches
    assert all(d.spec in catalogue for d in planned)


def test_typed_errors(host, ctx):
    x = ctx.tensor(np.ones(10, np.float32))
    m = ctx.tensor(np.ones(10, np.uint32))
    cases = [
        (gc.ShapeError, lambda rec: rec.compact(x, ctx.tensor(np.ones(11, np.uint32)))),
        (gc.ShapeError, lambda rec: rec.compact(x, ctx.tensor(np.ones((2, 5), np.uint32)))),
        (gc.InvalidArgumentError, lambda rec: rec.compact(np.ones(10, np.float32), m)),
        (gc.InvalidArgumentError, lambda rec: rec.nonzero(np.ones(10, bool))),
        (gc.ShapeError, lambda rec: rec.nonzero(m, out=ctx.empty((9,), "uint32"))),
        (gc.DTypeError, lambda rec: rec.nonzero(m, out=ctx.empty((10,), "float32"))),
        (gc.DTypeError, lambda rec: rec.compact(x, m, out_count=ctx.empty((1,), "float32"))),
        (gc.ShapeError, lambda rec: rec.compact(x, m, out_count=ctx.empty((2,), "uint32"))),
        (gc.DTypeError, lambda rec: rec.nonzero(m, count=ctx.tensor(np.ones(1, np.float32)))),
        (gc.ShapeError, lambda rec: rec.nonzero(m, count=ctx.tensor(np.ones(2, np.uint32)))),
        (gc.InvalidArgumentError, lambda rec: rec.compact(x, m, out=x)),          # out overlaps x
        (gc.InvalidArgumentError, lambda rec: rec.compact(x, m, out_count=m[:1])),
    ]
    if ctx.caps.float16_storage:
        cases.append((gc.DTypeError, lambda rec: rec.nonzero(ctx.empty((4,), "float16"))))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for error, call in cases:
            with pytest.raises(error):
                call(rec)
            assert rec.dispatches == 0
    host.submit_and_wait(cmd)


def test_single_pass_fallback_counts_tiles_that_never_publish(host, monkeypatch):
    from guestcompute.ops import compact
    skip_first_tickets(monkeypatch, compact, 2)
    ctx = forced_single_pass(host)
    try:
        rng = np.random.default_rng(12)
        size = 6 * TILE + 9
        x_np, m_np = values_of(rng, size, "int32"), mask_of(rng, size, "float32", 0.4)
        x, m = put(ctx, x_np, "offset"), put(ctx, m_np, "offset")
        out = ctx.tensor(np.zeros(size, np.int32))
        _, n = host.run(ctx, lambda rec: rec.compact(x, m, out=out))
        ref = x_np[m_np.astype(bool)]
        skipped = int(m_np[:2 * TILE].astype(bool).sum())       # kept by the tiles that never ran
        assert n.numpy().tolist() == [ref.size]
        np.testing.assert_array_equal(out.numpy()[skipped:ref.size], ref[skipped:])
    finally:
        ctx.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), shape=shapes(0, 3, 30), density=st.sampled_from([0.0, 0.1, 0.5, 1.0]))
def test_compact_and_nonzero_of_any_views_match_numpy(host, ctx, data, shape, density):
    """x and mask are separate views (steps, reversal, permuted axes, offsets)
    of one shape; dtypes drawn from what the host enabled."""
    dtypes = [d for d in ("float32", "int32", "uint32", "uint8", "float16") if usable(ctx, d)]
    dtype = data.draw(st.sampled_from(dtypes))
    mask_dtype = data.draw(st.sampled_from([d for d in ("uint8", "uint32", "int32", "float32") if usable(ctx, d)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, x_np = draw_view(data, ctx, shape, lambda s: values_of(rng, s, dtype))
    m, m_np = draw_view(data, ctx, shape, lambda s: mask_of(rng, s, mask_dtype, density))
    got, n = host.run(ctx, lambda rec: rec.compact(x, m))
    check_compact(got, n, x_np, m_np)
    idx, n2 = host.run(ctx, lambda rec: rec.nonzero(m))
    ref = np.flatnonzero(m_np)
    assert n2.numpy().tolist() == [ref.size] and idx.shape == (m_np.size,)
    np.testing.assert_array_equal(idx.numpy()[:ref.size], ref)
