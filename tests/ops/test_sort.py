"""Radix sort (rec.sort, rec.argsort) against numpy's stable sort, on both host profiles."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import radix_onesweep as onesweep
from guestcompute.ops.radix_portable import TILE

HYP = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def random_keys(rng, n, dtype, distinct=None):
    """Keys of ``dtype``; ``distinct`` limits them to a few values (many duplicates)."""
    if distinct is not None:
        pool = random_keys(rng, distinct, dtype)
        return pool[rng.integers(0, distinct, n)]
    if dtype == "uint32":
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    if dtype == "uint64":
        return rng.integers(0, 2**64, n, dtype=np.uint64)
    if dtype == "int32":
        return rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    return x


@pytest.mark.parametrize("n", [1, 2, 255, 256, 257, 1023, 1024, 1025, 4097, 65537])
def test_sort_keys_with_payload_sizes(host, ctx, n):
    rng = np.random.default_rng(n)
    k_np = random_keys(rng, n, "uint32", distinct=max(2, n // 5))   # duplicates: stability matters
    v_np = rng.standard_normal(n).astype(np.float32)
    k, v = ctx.tensor(k_np), ctx.tensor(v_np)
    sk, sv = host.run(ctx, lambda rec: rec.sort(k, v))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(sk.numpy(), k_np[order])
    np.testing.assert_array_equal(sv.numpy(), v_np[order])


@pytest.mark.parametrize("dtype", ["uint32", "int32", "float32"])
def test_key_dtypes_and_argsort(host, ctx, dtype):
    rng = np.random.default_rng(7)
    n = 20_000
    k_np = random_keys(rng, n, dtype)
    k_np[::7] = k_np[3]        # plenty of ties
    k = ctx.tensor(k_np)
    sk, idx = host.run(ctx, lambda rec: (rec.sort(k), rec.argsort(k)))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(sk.numpy(), np.sort(k_np, kind="stable"))
    assert idx.dtype == gc.uint32
    np.testing.assert_array_equal(idx.numpy(), order)


def test_large_sort(host, ctx):
    rng = np.random.default_rng(11)
    n = 300_000
    k_np = random_keys(rng, n, "uint32", distinct=50_000)
    v_np = np.arange(n, dtype=np.int32)
    k, v = ctx.tensor(k_np), ctx.tensor(v_np)
    sk, sv = host.run(ctx, lambda rec: rec.sort(k, v))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(sk.numpy(), k_np[order])
    np.testing.assert_array_equal(sv.numpy(), order.astype(np.int32))


def test_key_bits_fewer_passes(host, ctx):
    rng = np.random.default_rng(5)
    k_np = rng.integers(0, 1000, 5000).astype(np.uint32)          # < 2**10
    v_np = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    k, v = ctx.tensor(k_np), ctx.tensor(v_np)
    (sk, sv), rec = host.run(ctx, lambda rec: (rec.sort(k, v, key_bits=10), rec))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(sk.numpy(), k_np[order])
    np.testing.assert_array_equal(sv.numpy(), v_np[order])
    if onesweep.usable(ctx, k.size, "values"):
        assert rec.dispatches == 2 + 2      # clear, histogram, 2 passes of 8 bits
    else:
        assert rec.dispatches == 3 * 3      # 3 passes of 4 bits: histogram, scan, scatter
    # higher bits are ignored: the order is by the low bits only, stably
    hi = ctx.tensor(k_np | np.uint32(1 << 20))
    s2 = host.run(ctx, lambda rec: rec.argsort(hi, key_bits=4))
    np.testing.assert_array_equal(s2.numpy(), np.argsort(k_np & 15, kind="stable"))


@pytest.mark.parametrize("key_bits", [4, 32])
def test_in_place_and_strided_views(host, ctx, key_bits):
    rng = np.random.default_rng(9)
    n = 3000
    k_np = rng.integers(0, 16, n).astype(np.uint32)
    v_np = rng.standard_normal(n).astype(np.float32)
    v_np[:3] = np.array([0x7FC01234, 0x00000001, 0x80000000], np.uint32).view(np.float32)  # NaN, denormal, -0
    k, v = ctx.tensor(k_np), ctx.tensor(v_np)
    host.run(ctx, lambda rec: rec.sort(k, v, out_keys=k, out_values=v, key_bits=key_bits))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(k.numpy(), k_np[order])
    np.testing.assert_array_equal(v.numpy().view(np.uint32), v_np[order].view(np.uint32))   # every bit kept
    # reversed / strided inputs and a strided output
    base_np = rng.integers(0, 2 ** min(key_bits, 7), 2 * n).astype(np.uint32)
    base = ctx.tensor(base_np)
    view, view_np = base[::-2], base_np[::-2]
    out_base = ctx.tensor(np.zeros(3 * n, np.uint32))
    idx_out = ctx.empty((n,), "int32")
    host.run(ctx, lambda rec: (rec.sort(view, out_keys=out_base[1::3], key_bits=key_bits),
                               rec.argsort(view, out=idx_out, key_bits=key_bits)))
    got = out_base.numpy()
    np.testing.assert_array_equal(got[1::3], np.sort(view_np, kind="stable"))
    np.testing.assert_array_equal(got[0::3], 0)
    np.testing.assert_array_equal(idx_out.numpy(), np.argsort(view_np, kind="stable"))


@HYP
@given(n=st.one_of(st.sampled_from([1, 255, 256, 257, 1024, 1025, 2049]), st.integers(1, 6000)),
       dtype=st.sampled_from(["uint32", "int32", "float32", "uint64"]), distinct=st.sampled_from([None, 1, 3, 40]),
       payload=st.booleans(), seed=st.integers(0, 2**16))
def test_hypothesis_sizes_duplicates_payloads(host, ctx, n, dtype, distinct, payload, seed):
    rng = np.random.default_rng(seed)
    k_np = random_keys(rng, n, dtype, distinct)
    k = ctx.tensor(k_np, dtype)
    order = np.argsort(k_np, kind="stable")
    if payload:
        v_np = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
        v = ctx.tensor(v_np)
        sk, sv = host.run(ctx, lambda rec: rec.sort(k, v))
        np.testing.assert_array_equal(sv.numpy(), v_np[order])
    else:
        sk = host.run(ctx, lambda rec: rec.sort(k))
    np.testing.assert_array_equal(sk.numpy(), k_np[order])


def test_empty(host, ctx):
    k = ctx.empty((0,), "uint32")
    sk, idx = host.run(ctx, lambda rec: (rec.sort(k), rec.argsort(k)))
    assert sk.shape == (0,) and idx.shape == (0,)


def test_one_pipeline_per_kernel_across_sizes(host, ctx):
    rng = np.random.default_rng(2)
    tensors = [ctx.tensor(random_keys(rng, n, "uint32")) for n in (3 * TILE + 1, 5 * TILE, 7 * TILE + 9)]
    host.run(ctx, lambda rec: rec.sort(tensors[0]))
    before = ctx.cache_stats()["pipelines_created"]
    host.run(ctx, lambda rec: [rec.sort(t) for t in tensors[1:]])
    assert ctx.cache_stats()["pipelines_created"] == before


def test_typed_errors(host, ctx):
    k = ctx.tensor(np.arange(10, dtype=np.uint32))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.sort(ctx.empty((2, 5), "uint32")))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.sort(np.arange(10, dtype=np.uint32)))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.sort(k, ctx.empty((9,))))
    with pytest.raises(gc.ShapeError):
        host.run(ctx, lambda rec: rec.sort(k, out_keys=ctx.empty((11,), "uint32")))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.sort(k, out_keys=ctx.empty((10,), "int32")))
    with pytest.raises(gc.DTypeError):
        host.run(ctx, lambda rec: rec.argsort(k, out=ctx.empty((10,), "float32")))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.sort(k, out_values=ctx.empty((10,))))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.sort(k, key_bits=0))
    with pytest.raises(gc.InvalidArgumentError):
        host.run(ctx, lambda rec: rec.sort(ctx.empty((10,), "int32"), key_bits=8))
    with pytest.raises(gc.InvalidArgumentError):       # partial overlap
        big = ctx.empty((11,), "uint32")
        host.run(ctx, lambda rec: rec.sort(big[:10], out_keys=big[1:]))
    with pytest.raises(gc.InvalidArgumentError):       # outputs overlap each other
        v = ctx.tensor(np.zeros(10, np.uint32))
        both = ctx.empty((10,), "uint32")
        host.run(ctx, lambda rec: rec.sort(k, v, out_keys=both, out_values=both))
    if ctx.caps.uint8_storage:
        with pytest.raises(gc.DTypeError):
            host.run(ctx, lambda rec: rec.sort(ctx.empty((10,), "uint8")))


def test_planned_kernels_are_in_the_bake_catalogue(host, ctx):
    from guestcompute.ops import all_specs
    from guestcompute.ops.base import registered_ops
    catalogue = set(all_specs())
    ops = registered_ops()
    planned = []
    for dtype in ("uint32", "int32", "float32"):
        k = ctx.empty((2 * TILE + 3,), dtype)
        planned += ops["sort"](ctx, k).dispatches + ops["argsort"](ctx, k).dispatches
        planned += ops["sort"](ctx, k, ctx.empty(k.shape, "float32")).dispatches
    k = ctx.empty((100,), "uint32")
    planned += ops["sort"](ctx, k, k, out_keys=k, key_bits=3).dispatches     # single pass + copies
    for dtype in ("uint32", "int32", "float32"):                            # along an axis, into both dtypes
        k2 = ctx.empty((3, 50, 7), dtype)
        planned += ops["argsort"](ctx, k2).dispatches + ops["argsort"](ctx, k2[:, ::2], axis=1).dispatches
        planned += ops["argsort"](ctx, k2, ctx.empty(k2.shape, "int32"), axis=0).dispatches
    assert planned and all(d.spec in catalogue for d in planned)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_argsort_along_an_axis_of_a_2d_tensor(host, ctx, axis):
    rng = np.random.default_rng(7)
    k_np = rng.integers(-4, 4, (37, 300)).astype(np.float32)    # many ties: stability shows
    k_np[3, 5] = np.nan
    k_np[4, :3] = [-0.0, 0.0, -0.0]
    keys = ctx.tensor(k_np)
    idx, into_int = host.run(ctx, lambda rec: (rec.argsort(keys, axis=axis),
                                               rec.argsort(keys, ctx.empty(k_np.shape, "int32"), axis=axis)))
    want = np.argsort(k_np, axis=axis, kind="stable")
    assert idx.dtype.name == "uint32" and idx.shape == k_np.shape
    np.testing.assert_array_equal(idx.numpy(), want)
    np.testing.assert_array_equal(into_int.numpy(), want)


def test_argsort_of_3d_views_and_int_keys(host, ctx):
    rng = np.random.default_rng(8)
    k_np = rng.integers(-1000, 1000, (5, 6, 70), dtype=np.int32)
    keys = ctx.tensor(k_np)
    view = keys[:, ::2, 3:].transpose(0, 2)                   # strided, permuted
    idx = host.run(ctx, lambda rec: rec.argsort(view, axis=1))
    np.testing.assert_array_equal(idx.numpy(), np.argsort(k_np[:, ::2, 3:].transpose(2, 1, 0), axis=1,
                                                          kind="stable"))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.ShapeError):
            rec.argsort(keys, axis=3)
        with pytest.raises(gc.ShapeError):
            rec.argsort(keys, ctx.empty((5, 6), "uint32"))
        with pytest.raises(gc.DTypeError):
            rec.argsort(keys, ctx.empty(k_np.shape, "float32"))
    host.submit_and_wait(cmd)
