"""Both radix sort kernel sets against numpy, and GPU-side counts (``count=``).

The single-pass kernels run where the device says started workgroups keep
running; here they are also forced on by a context whose limits claim it.
That is safe on any device for the variant with fallback (chosen wherever
loops are capped, as on lavapipe): a workgroup that waits too long counts
the late tile itself instead of waiting for it.
"""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import radix_onesweep as onesweep
from single_pass import forced_single_pass

SIZES = [1, 2, 3, 127, 255, 256, 257, 1023, 1025, 4093, 9973]


@pytest.fixture(params=["device", "single-pass"])
def sort_ctx(request, modern_host):
    """A context sorting with the kernels the device chose, or one whose
    limits claim forward progress (the single-pass kernels)."""
    c = forced_single_pass(modern_host) if request.param == "single-pass" else modern_host.adopt()
    if request.param == "single-pass":
        lim = c.limits
        if not (lim.subgroup_ballot and lim.subgroup_size in onesweep.SUBGROUP_SIZES):
            c.close()
            pytest.skip(f"the single-pass sort is built for subgroup ballots of {onesweep.SUBGROUP_SIZES}")
        assert onesweep.usable(c, 1000, "values")
    yield c
    c.close()


def keys_of(rng, n, dtype):
    if dtype == "float32":
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        pick = rng.random(n) < 0.3
        x[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64).astype(dtype)


def same_bits(a, b):
    np.testing.assert_array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["uint32", "int32", "float32"])
def test_sort_pairs_and_argsort(modern_host, sort_ctx, n, dtype):
    rng = np.random.default_rng(n)
    k_np = keys_of(rng, n, dtype)
    v_np = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    k, v = sort_ctx.tensor(k_np), sort_ctx.tensor(v_np)
    (sk, sv), idx = modern_host.run(sort_ctx, lambda rec: (rec.sort(k, v), rec.argsort(k)))
    order = np.argsort(k_np, kind="stable")
    same_bits(sk.numpy(), k_np[order])
    np.testing.assert_array_equal(sv.numpy(), v_np[order])
    np.testing.assert_array_equal(idx.numpy(), order)


@pytest.mark.parametrize("keys", ["all equal", "two values", "descending"])
def test_sort_degenerate_keys(modern_host, sort_ctx, keys):
    n = 5000
    k_np = {"all equal": np.full(n, 7, np.uint32),
            "two values": (np.arange(n) % 2).astype(np.uint32),
            "descending": np.arange(n, 0, -1).astype(np.uint32)}[keys]
    k = sort_ctx.tensor(k_np)
    idx = modern_host.run(sort_ctx, lambda rec: rec.argsort(k))
    np.testing.assert_array_equal(idx.numpy(), np.argsort(k_np, kind="stable"))


@pytest.mark.parametrize("key_bits", [3, 8, 12, 32])
def test_sort_in_place_with_key_bits(modern_host, sort_ctx, key_bits):
    rng = np.random.default_rng(key_bits)
    n = 3001
    k_np = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    v_np = np.arange(n, dtype=np.float32)
    k, v = sort_ctx.tensor(k_np), sort_ctx.tensor(v_np)
    modern_host.run(sort_ctx, lambda rec: rec.sort(k, v, out_keys=k, out_values=v, key_bits=key_bits))
    ranked = k_np & np.uint32((1 << key_bits) - 1) if key_bits < 32 else k_np
    order = np.argsort(ranked, kind="stable")          # higher bits are ignored, kept in the keys
    np.testing.assert_array_equal(k.numpy(), k_np[order])
    np.testing.assert_array_equal(v.numpy(), v_np[order])


def test_sort_strided_views(modern_host, sort_ctx):
    rng = np.random.default_rng(3)
    base_np = rng.standard_normal((4000, 3)).astype(np.float32)
    base = sort_ctx.tensor(base_np)
    column = base[:, 2]
    out = sort_ctx.empty((8000,), "uint32")[::2]
    modern_host.run(sort_ctx, lambda rec: rec.argsort(column, out=out))
    np.testing.assert_array_equal(out.numpy(), np.argsort(base_np[:, 2], kind="stable"))


@pytest.mark.parametrize("count", [0, 1, 700, 2999, 3000, 5000, -4])
@pytest.mark.parametrize("count_dtype", ["uint32", "int32"])
def test_sort_first_count_keys(modern_host, sort_ctx, count, count_dtype):
    """Only the first min(count, size) keys are sorted (negatives count 0);
    the outputs past them keep what they held."""
    if count < 0 and count_dtype == "uint32":
        pytest.skip("a uint32 count cannot be negative")
    rng = np.random.default_rng(abs(count))
    n = 3000
    k_np = keys_of(rng, n, "float32")
    v_np = np.arange(n, dtype=np.int32)
    k, v = sort_ctx.tensor(k_np), sort_ctx.tensor(v_np)
    ok, ov, idx = (sort_ctx.tensor(np.full(n, 99, np.float32)), sort_ctx.tensor(np.full(n, -5, np.int32)),
                   sort_ctx.tensor(np.full(n, 77, np.uint32)))
    c = sort_ctx.tensor(np.array([count], count_dtype))
    modern_host.run(sort_ctx, lambda rec: (rec.sort(k, v, out_keys=ok, out_values=ov, count=c),
                                           rec.argsort(k, out=idx, count=c)))
    m = min(max(count, 0), n)
    order = np.argsort(k_np[:m], kind="stable")
    same_bits(ok.numpy()[:m], k_np[:m][order])
    np.testing.assert_array_equal(ov.numpy()[:m], v_np[:m][order])
    np.testing.assert_array_equal(idx.numpy()[:m], order)
    assert np.all(ok.numpy()[m:] == 99) and np.all(ov.numpy()[m:] == -5) and np.all(idx.numpy()[m:] == 77)


def test_count_written_by_an_earlier_op(modern_host, sort_ctx):
    """The count comes from the same recording (no read-back in between)."""
    rng = np.random.default_rng(9)
    k_np = rng.integers(0, 1000, 4000).astype(np.uint32)
    k = sort_ctx.tensor(k_np)
    a, b = sort_ctx.tensor(np.array([1000], np.uint32)), sort_ctx.tensor(np.array([234], np.uint32))
    out = modern_host.run(sort_ctx, lambda rec: rec.sort(k, count=rec.add(a, b)))
    np.testing.assert_array_equal(out.numpy()[:1234], np.sort(k_np[:1234], kind="stable"))


def test_count_checks(ctx):
    k = ctx.empty((10,), "uint32")
    with pytest.raises(gc.DTypeError):
        ctx.run(lambda rec: rec.sort(k, count=ctx.empty((1,), "float32")))
    with pytest.raises(gc.ShapeError):
        ctx.run(lambda rec: rec.sort(k, count=ctx.empty((2,), "uint32")))
    with pytest.raises(gc.ShapeError):
        ctx.run(lambda rec: rec.argsort(ctx.empty((3, 4), "uint32"), count=ctx.empty((1,), "uint32")))


def test_variant_follows_device_facts(ctx):
    """The single-pass kernels only where the device says started
    workgroups keep running, and never past 2**30 keys."""
    lim = ctx.limits
    facts = (lim.forward_progress and lim.subgroup_ballot and lim.subgroup_size in onesweep.SUBGROUP_SIZES
             and ctx.caps.api_version >= (1, 1))
    if not facts:
        assert not onesweep.usable(ctx, 1000, "none")
    assert not onesweep.usable(ctx, onesweep.MAX_N, "none")


def half_keys(rng, n):
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, 6e-8], np.float16)
    x = (rng.standard_normal(n) * 100).astype(np.float16)
    pick = rng.random(n) < 0.3
    x[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
    return x


@pytest.mark.parametrize("n", [1, 2, 257, 4093])
def test_float16_keys(modern_host, sort_ctx, n):
    """Half keys sort in numpy's order, their bits (NaN payloads, signed
    zeros) carried unchanged; in place too."""
    rng = np.random.default_rng(n)
    k_np = half_keys(rng, n)
    v_np = rng.standard_normal(n).astype(np.float32)
    k, v = sort_ctx.tensor(k_np), sort_ctx.tensor(v_np)
    (sk, sv), idx = modern_host.run(sort_ctx, lambda rec: (rec.sort(k, v), rec.argsort(k)))
    order = np.argsort(k_np, kind="stable")
    np.testing.assert_array_equal(sk.numpy().view(np.uint16), k_np[order].view(np.uint16))
    np.testing.assert_array_equal(sv.numpy().view(np.uint32), v_np[order].view(np.uint32))
    np.testing.assert_array_equal(idx.numpy(), order)
    modern_host.run(sort_ctx, lambda rec: rec.sort(k, v, out_keys=k, out_values=v))
    np.testing.assert_array_equal(k.numpy().view(np.uint16), k_np[order].view(np.uint16))
    np.testing.assert_array_equal(v.numpy().view(np.uint32), v_np[order].view(np.uint32))


def test_float16_argsort_lines_and_count(modern_host, sort_ctx):
    rng = np.random.default_rng(4)
    k_np = half_keys(rng, 600).reshape(20, 30)
    k = sort_ctx.tensor(k_np)
    idx = modern_host.run(sort_ctx, lambda rec: rec.argsort(k, axis=0))
    np.testing.assert_array_equal(idx.numpy(), np.argsort(k_np, axis=0, kind="stable"))
    flat = sort_ctx.tensor(k_np.ravel())
    out = sort_ctx.tensor(np.full(600, 9, np.uint32))
    c = sort_ctx.tensor(np.array([250], np.uint32))
    modern_host.run(sort_ctx, lambda rec: rec.argsort(flat, out=out, count=c))
    np.testing.assert_array_equal(out.numpy()[:250], np.argsort(k_np.ravel()[:250], kind="stable"))
    assert np.all(out.numpy()[250:] == 9)
    with pytest.raises(gc.UnsupportedError):
        sort_ctx.run(lambda rec: rec.sort(flat, count=c))


def wide_keys(rng, n):
    """uint64 keys whose words tie in every way: equal keys, equal high
    words with different low words and the reverse, and both extremes."""
    k = rng.integers(0, 2**64, n, dtype=np.uint64)
    if n > 8:
        k[::5] = k[1]
        k[::7] = (k[::7] & np.uint64(0xFFFFFFFF)) | (k[2] & np.uint64(0xFFFFFFFF00000000))
        k[::11] = (k[::11] & np.uint64(0xFFFFFFFF00000000)) | (k[3] & np.uint64(0xFFFFFFFF))
        k[4], k[5] = 0, 2**64 - 1
    return k


@pytest.mark.parametrize("n", [1, 2, 257, 4093])
def test_uint64_keys(modern_host, sort_ctx, n):
    """uint64 keys sort as numpy sorts them, carrying a payload; argsort into
    both index dtypes; in place and through a strided view."""
    rng = np.random.default_rng(n)
    k_np = wide_keys(rng, 2 * n)
    v_np = rng.integers(0, 2**32, 2 * n, dtype=np.uint64).astype(np.uint32)
    k, v = sort_ctx.tensor(k_np, "uint64"), sort_ctx.tensor(v_np)
    signed = sort_ctx.empty((2 * n,), "int32")
    (sk, sv), idx = modern_host.run(sort_ctx, lambda rec: (rec.sort(k, v), rec.argsort(k),
                                                           rec.argsort(k, out=signed))[:2])
    order = np.argsort(k_np, kind="stable")
    assert sk.dtype.name == "uint64"
    np.testing.assert_array_equal(sk.numpy(), k_np[order])
    np.testing.assert_array_equal(sv.numpy(), v_np[order])
    np.testing.assert_array_equal(idx.numpy(), order)
    np.testing.assert_array_equal(signed.numpy(), order)
    every_other = modern_host.run(sort_ctx, lambda rec: rec.sort(k[::2]))
    np.testing.assert_array_equal(every_other.numpy(), np.sort(k_np[::2], kind="stable"))
    modern_host.run(sort_ctx, lambda rec: rec.sort(k, v, out_keys=k, out_values=v))
    np.testing.assert_array_equal(k.numpy(), k_np[order])
    np.testing.assert_array_equal(v.numpy(), v_np[order])


def test_uint64_key_bits(modern_host, sort_ctx):
    """Fewer key bits rank by fewer words: up to 32 by the low word alone."""
    rng = np.random.default_rng(7)
    for bits in (20, 32, 44, 64):
        k_np = wide_keys(rng, 3000) >> np.uint64(64 - bits)
        k = sort_ctx.tensor(k_np, "uint64")
        idx = modern_host.run(sort_ctx, lambda rec: rec.argsort(k, key_bits=bits))
        np.testing.assert_array_equal(idx.numpy(), np.argsort(k_np, kind="stable"))
    for bad in (0, 65):
        with pytest.raises(gc.InvalidArgumentError):
            sort_ctx.run(lambda rec: rec.sort(k, key_bits=bad))


def test_uint64_tensors_are_stored_not_computed_with(modern_host, sort_ctx):
    """uint64 tensors round-trip, bind to user kernels and sort; every other
    op, count= and N-D argsort refuse them with typed errors."""
    k_np = np.array([2**64 - 1, 0, 2**40 + 5, 7], np.uint64)
    k = sort_ctx.tensor(k_np, "uint64")
    np.testing.assert_array_equal(k.numpy(), k_np)
    assert sort_ctx.tensor(np.arange(3, dtype=np.uint64)).dtype.name == "uint32"   # named, never guessed
    with pytest.raises(gc.DTypeError, match="rec.sort, rec.argsort, rec.run_kernel"):
        sort_ctx.run(lambda rec: rec.add(k, k))
    with pytest.raises(gc.DTypeError):
        sort_ctx.run(lambda rec: rec.concat([k, k]))
    c = sort_ctx.tensor(np.array([2], np.uint32))
    with pytest.raises(gc.UnsupportedError):
        sort_ctx.run(lambda rec: rec.sort(k, count=c))
    with pytest.raises(gc.UnsupportedError):
        sort_ctx.run(lambda rec: rec.argsort(sort_ctx.empty((2, 2), "uint64")))
    swap = sort_ctx.kernel("""#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer K { uvec2 words[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < 4u) words[i] = words[i].yx; }""")
    modern_host.run(sort_ctx, lambda rec: rec.run_kernel(swap, [k], groups=(1, 1, 1)))
    np.testing.assert_array_equal(k.numpy(), (k_np << np.uint64(32)) | (k_np >> np.uint64(32)))


@pytest.mark.parametrize("counted", [0, 1, 700, 2999, 5000])
def test_uint64_argsort_of_a_gpu_count(modern_host, sort_ctx, counted):
    """argsort(keys, count=n) of uint64 keys: the indices of the first n
    keys (n clamped to the size), the rest of the output untouched."""
    rng = np.random.default_rng(counted)
    k_np = wide_keys(rng, 3000)
    k = sort_ctx.tensor(k_np, "uint64")
    out = sort_ctx.tensor(np.full(3000, 12345, np.uint32))
    c = sort_ctx.tensor(np.array([counted], np.int32))
    modern_host.run(sort_ctx, lambda rec: rec.argsort(k, out=out, count=c))
    m = min(counted, 3000)
    np.testing.assert_array_equal(out.numpy()[:m], np.argsort(k_np[:m], kind="stable"))
    assert np.all(out.numpy()[m:] == 12345)
