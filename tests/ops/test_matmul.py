"""matmul: numpy parity for every kernel, batching and 1-D operands,
selection logic (including the GPU-only cooperative-matrix kernel), typed
errors."""
import dataclasses
import itertools
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan import ffi

import guestcompute as gc
from guestcompute.device import caps
from guestcompute.ops import matmul as mm
from guestcompute.ops import matmul_coopmat as mc
from guestcompute.ops import matmul_kernels as mk

RNG = np.random.default_rng(7)


def _data(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _check(out, a, b, dtype=np.float32):
    ref = np.matmul(a.astype(np.float32), b.astype(np.float32))
    got = out.numpy().astype(np.float32)
    assert got.shape == ref.shape
    k = a.shape[-1]
    if dtype == np.float16:
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2 * np.sqrt(max(k, 1)))
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)))


@pytest.mark.parametrize("sa,sb", [
    ((5, 7), (7, 3)),              # smaller than a tile
    ((70, 33), (33, 45)),          # odd sizes, several tiles
    ((64, 64), (64, 64)),
    ((130, 68), (68, 132)),        # vec4 path past one 64-tile in both dims
    ((3, 1, 9, 17), (2, 17, 5)),   # batch broadcasting
    ((17,), (17, 5)),              # 1-D a
    ((9, 17), (17,)),              # 1-D b
    ((17,), (17,)),                # dot product -> 0-d
    ((4, 17), (3, 17, 1)),         # N == 1 batched GEMV
    ((1, 200), (200, 300)),        # row vector: GEMV over columns
    ((300, 200), (200, 1)),        # column vector: GEMV over rows
    ((6, 0), (0, 4)),              # K == 0 gives zeros
    ((0, 5), (5, 3)),              # empty result
])
def test_matmul_matches_numpy(host, ctx, sa, sb):
    a_np, b_np = _data(sa), _data(sb)
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    out = host.run(ctx, lambda rec: rec.matmul(a, b))
    _check(out, a_np, b_np)


VEC4_CASES = [(a, b, n) for a in ("mk", "km") for b in ("kn", "nk") for n in (44, 42)]


@pytest.mark.parametrize("tile", ["64", "128"])
@pytest.mark.parametrize("a_lay,b_lay,n", VEC4_CASES)
def test_vec4_kernel_every_layout(host, ctx, tile, a_lay, b_lay, n):
    """Transposed operands are read in place; N=42 stores scalars, N=44 vec4
    (B contiguous along N needs N % 4 == 0; along K it does not)."""
    m, k = 132, 36
    a_np, b_np = _data((m, k)), _data((k, n))
    a = ctx.tensor(a_np) if a_lay == "mk" else ctx.tensor(np.ascontiguousarray(a_np.T)).T
    b = ctx.tensor(b_np) if b_lay == "kn" else ctx.tensor(np.ascontiguousarray(b_np.T)).T
    if b_lay == "kn" and n % 4:
        # B contiguous along N needs N % 4 == 0: the vec4 kernel must refuse.
        with pytest.raises(gc.UnsupportedError):
            host.run(ctx, lambda rec: rec.matmul(a, b, kernel=f"vec4_{tile}"))
        return
    p = mm.problem_for(a, b, ctx.empty((m, n)))
    assert (mm.a_layout(p), mm.b_layout(p)) == (a_lay, b_lay)
    out = host.run(ctx, lambda rec: rec.matmul(a, b, kernel=f"vec4_{tile}"))
    _check(out, a_np, b_np)


@pytest.mark.parametrize("kernel", ["tiled", "tiled_8", "vec4_64"])
def test_forced_kernels_batched_and_strided(host, ctx, kernel):
    a_np, b_np = _data((2, 3, 20, 36)), _data((3, 36, 24))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    out = host.run(ctx, lambda rec: rec.matmul(a, b, kernel=kernel))
    _check(out, a_np, b_np)
    # every-other-row views: strided rows for the tiled kernels
    if kernel.startswith("tiled"):
        big = _data((41, 36))
        t = ctx.tensor(big)
        out = host.run(ctx, lambda rec: rec.matmul(t[::2], b[1], kernel=kernel))
        _check(out, big[::2], b_np[1])


def test_float16_matches_numpy(modern_host, modern_ctx):
    ctx, host = modern_ctx, modern_host
    for sa, sb, kernel in [((33, 20), (20, 17), None), ((64, 32), (32, 48), None),
                           ((64, 32), (32, 48), "tiled"), ((1, 40), (40, 70), None),
                           ((50, 40), (40,), None), ((2, 130, 64), (64, 132), "vec4_128")]:
        a_np, b_np = _data(sa, np.float16), _data(sb, np.float16)
        a, b = ctx.tensor(a_np), ctx.tensor(b_np)
        out = host.run(ctx, lambda rec: rec.matmul(a, b, kernel=kernel))
        assert out.dtype == gc.float16
        _check(out, a_np, b_np, np.float16)
        # accepting fp16 accumulation changes nothing without cooperative matrices
        out = host.run(ctx, lambda rec: rec.matmul(a, b, kernel=kernel, accumulate="float16"))
        _check(out, a_np, b_np, np.float16)


def test_out_views_and_reuse(host, ctx):
    a_np, b_np = _data((20, 12)), _data((12, 16))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    big = ctx.zeros((20, 40))
    view = big[:, 3:35:2]                       # strided output view
    host.run(ctx, lambda rec: rec.matmul(a, b, out=view))
    expect = np.zeros((20, 40), np.float32)
    expect[:, 3:35:2] = a_np @ b_np
    np.testing.assert_allclose(big.numpy(), expect, rtol=1e-4, atol=1e-4)


def test_batch_dims_beyond_two_loop_dispatches(host, ctx):
    # three batch dims that cannot be merged: the op loops over the first
    a_np, b_np = _data((2, 1, 3, 5, 8)), _data((1, 4, 1, 8, 6))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    p = mm.problem_for(a, b, ctx.empty((2, 4, 3, 5, 6)))
    assert len(p.batch) == 3
    out = host.run(ctx, lambda rec: rec.matmul(a, b))
    _check(out, a_np, b_np)


def test_grid_larger_than_device_limit_is_split(host, ctx):
    a_np, b_np = _data((70, 20)), _data((3, 20, 92))
    a, b = ctx.tensor(a_np), ctx.tensor(b_np)
    object.__setattr__(ctx.limits, "max_workgroup_count", (2, 3, 2))
    for kernel in ("tiled", "vec4_64"):
        rec_holder = []
        out = host.run(ctx, lambda rec: (rec.matmul(a, b, kernel=kernel), rec_holder.append(rec))[0])
        assert rec_holder[0].dispatches > 1
        _check(out, a_np, b_np)
    v_np = _data((92,))
    v = ctx.tensor(v_np)
    out = host.run(ctx, lambda rec: rec.matmul(b, v))     # GEMV rows split over x and z
    _check(out, b_np, v_np)


def test_one_pipeline_per_spec_across_sizes(host):
    ctx = host.adopt()
    try:
        sizes = [(40, 36, 44), (72, 20, 16), (8, 100, 12)]
        pairs = [(ctx.tensor(_data((m, k))), ctx.tensor(_data((k, n)))) for m, k, n in sizes]
        host.run(ctx, lambda rec: [rec.matmul(a, b, kernel="vec4_64") for a, b in pairs])
        assert ctx.cache_stats()["pipelines_created"] == 1
        host.run(ctx, lambda rec: [rec.matmul(a, b, kernel="vec4_64") for a, b in pairs])
        assert ctx.cache_stats()["pipelines_created"] == 1
    finally:
        ctx.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(0, 70),
       batch_a=st.sampled_from([(), (1,), (3,), (2, 1), (2, 3)]),
       batch_b=st.sampled_from([(), (1,), (3,), (1, 3)]),
       vec=st.sampled_from(["none", "a", "b"]),
       trans_a=st.booleans(), trans_b=st.booleans())
def test_matmul_hypothesis(host, ctx, m, n, k, batch_a, batch_b, vec, trans_a, trans_b):
    try:
        np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        batch_b = ()
    a_np = _data(batch_a + (m, k)) if vec != "a" else _data((k,))
    b_np = _data(batch_b + (k, n)) if vec != "b" else _data((k,))

    def put(x, trans):
        if trans and x.ndim >= 2:
            return ctx.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).transpose(-1, -2)
        return ctx.tensor(x)
    a, b = put(a_np, trans_a), put(b_np, trans_b)
    out = host.run(ctx, lambda rec: rec.matmul(a, b))
    _check(out, a_np, b_np)


# -- selection logic -------------------------------------------------------------------

NV = mm.MatmulDevice(subgroup_size=32, subgroup_arithmetic=True, max_shared_memory=49152,
                     max_invocations=1024,
                     coopmat_shapes=(mm.CoopShape(16, 8, 16, "float16"), mm.CoopShape(16, 8, 16, "float32"),
                                     mm.CoopShape(16, 8, 8, "float32"), mm.CoopShape(32, 8, 16, "float32")))
PLAIN = mm.MatmulDevice(subgroup_size=8, subgroup_arithmetic=True, max_shared_memory=32768,
                        max_invocations=1024)
TINY = mm.MatmulDevice(subgroup_size=1, subgroup_arithmetic=False, max_shared_memory=16384,
                       max_invocations=128)


def _problem(ctx, sa, sb, dtype="float32", trans_a=False, trans_b=False, acc="float32"):
    a = ctx.empty(sa[::-1] if trans_a else sa, dtype)
    b = ctx.empty(sb[::-1] if trans_b else sb, dtype)
    a, b = (a.T if trans_a else a), (b.T if trans_b else b)
    return mm.problem_for(a, b, ctx.empty(sa[:-1] + sb[-1:], dtype), acc)


def test_selection_prefers_coopmat_on_a_coopmat_device(modern_ctx):
    ctx = modern_ctx
    # fp32 accumulators (the default): the vec4 kernel measured faster
    p = _problem(ctx, (256, 128), (128, 256), "float16")
    assert mm.select(p, NV)[0] == "vec4_64"
    assert "fp32 accumulators" in dict(mm.explain(p, NV))["coopmat"]
    # forced, it still accumulates in fp32
    assert mm.select(p, NV, "coopmat")[1].param("acc") == "float32"
    # fp16 accumulation accepted: coopmat with an fp16 fragment; shapes the
    # kernel does not know are ignored
    p = _problem(ctx, (256, 128), (128, 256), "float16", acc="float16")
    name, spec = mm.select(p, NV)
    assert name == "coopmat"
    assert spec.param("shape") == (16, 8, 16) and spec.param("acc") == "float16"
    assert spec.workgroup == (mc.COOPMAT_TILINGS[0].threads, 1, 1)
    assert "cooperative_matrix" in spec.features
    # operands 8-element aligned: 16-byte staging loads
    assert spec.param("vec") == 8 and spec.bindings[0].type == "uvec4"
    # transposed (column-major) operands are still coopmat-able
    p = _problem(ctx, (256, 128), (128, 256), "float16", trans_a=True, trans_b=True, acc="float16")
    name, spec = mm.select(p, NV)
    assert name == "coopmat" and (spec.param("a"), spec.param("b")) == ("km", "nk")
    # N = 36 is a multiple of 4 but not of 8: 8-byte staging loads
    p = _problem(ctx, (64, 32), (32, 36), "float16", acc="float16")
    assert mm.select(p, NV)[1].param("vec") == 4
    # too little shared memory for every tiling: the vec4 kernel instead
    small = mm.MatmulDevice(**{**NV.__dict__, "max_shared_memory": 16384})
    p = _problem(ctx, (256, 128), (128, 256), "float16", acc="float16")
    assert mm.select(p, small)[0] == "vec4_64"
    assert "shared memory" in dict(mm.explain(p, small))["coopmat"]


KHR = mm.MatmulDevice(**{**NV.__dict__, "coopmat_khr_shapes": ((16, 16, 16, "float16"), (16, 16, 16, "float32"),
                                                              (16, 8, 16, "float32"))})


def test_selection_prefers_the_khr_kernel_for_whole_blocks(modern_ctx):
    ctx = modern_ctx
    # fp32 accumulators: 128x128x16 blocks; fp16 ones: 256x256x32
    p = _problem(ctx, (256, 128), (128, 256), "float16")
    name, spec = mm.select(p, KHR)
    assert name == "coopmat_khr" and spec.param("acc") == "float32" and spec.param("block") == (128, 128)
    assert spec.param("peel") is True           # the last K step after the loop (fp32 accumulators)
    assert "cooperative_matrix_khr" in spec.features and spec.workgroup == (128, 1, 1)
    p = _problem(ctx, (512, 64), (64, 256), "float16", acc="float16")
    name, spec = mm.select(p, KHR)
    assert name == "coopmat_khr" and spec.param("block") == (256, 256) and spec.workgroup == (256, 1, 1)
    # batched, when every batch starts 16-byte aligned
    p = _problem(ctx, (3, 256, 64), (3, 64, 256), "float16", acc="float16")
    assert mm.select(p, KHR)[0] == "coopmat_khr"
    # not whole blocks (no bounds checks in it): the next kernel down
    p = _problem(ctx, (256, 128), (128, 264), "float16", acc="float16")
    assert mm.select(p, KHR)[0] == "coopmat"
    assert "multiples" in dict(mm.explain(p, KHR))["coopmat_khr"]
    # column-major operands, float32, or no KHR extension: never
    p = _problem(ctx, (256, 128), (128, 256), "float16", trans_a=True)
    assert "row-major" in dict(mm.explain(p, KHR))["coopmat_khr"]
    p = _problem(ctx, (256, 128), (128, 256), "float32")
    assert "float16 only" in dict(mm.explain(p, KHR))["coopmat_khr"]
    p = _problem(ctx, (256, 128), (128, 256), "float16")
    assert "VK_KHR_cooperative_matrix" in dict(mm.explain(p, NV))["coopmat_khr"]
    # a device without 16x16x16 fragments for the accumulator
    only16 = mm.MatmulDevice(**{**NV.__dict__, "coopmat_khr_shapes": ((16, 16, 16, "float16"),)})
    assert "no 16x16x16" in dict(mm.explain(p, only16))["coopmat_khr"]
    # K = 0: whole blocks in name only; the kernel reads a first tile before its loop
    p = _problem(ctx, (256, 0), (0, 256), "float16", acc="float16")
    assert "K is 0" in dict(mm.explain(p, KHR))["coopmat_khr"] and mm.select(p, KHR)[0] != "coopmat_khr"


def test_khr_tilings_fit_a_48_kib_device():
    for acc, t in mc.KHR_TILINGS.items():
        (bm, bn), (sgx, sgy), bk = t.block, t.subgroups, t.bk
        assert t.shared_bytes <= 49152 and t.threads <= 1024
        assert bm % (16 * sgy) == 0 and bn % (16 * sgx) == 0 and bk % 16 == 0
        assert (bm * bk) % (8 * t.threads) == 0 and (bk * bn) % (8 * t.threads) == 0   # whole uvec4s each


def test_coopmat_tilings_fit_and_divide():
    """Every tiling stays within the 48 KiB of shared memory NVIDIA devices
    offer by default, and its tiles split evenly over its threads."""
    for t in mc.COOPMAT_TILINGS + mc.COOPMAT_SWEEP:
        for a in mk.A_LAYOUTS:
            for b in mk.B_LAYOUTS:
                assert mc.coopmat_shared_bytes(t, a, b) <= 49152, t
        bm, bn = t.block
        assert (bm * t.bk) % (8 * t.threads) == 0 and (bn * t.bk) % (8 * t.threads) == 0, t
        assert t.warp_tile[0] % 16 == 0 and t.warp_tile[1] % 16 == 0 and t.bk % 16 == 0, t
    # the first tiling is the one selected; a device with less shared memory
    # gets the first that fits
    assert mm.coopmat_tiling(NV) == mc.COOPMAT_TILINGS[0]


@pytest.mark.parametrize("why,problem,device,expect", [
    ("float32 never uses coopmat", dict(sa=(256, 128), sb=(128, 256)), NV, "vec4_64"),
    ("no coopmat on the device", dict(sa=(256, 128), sb=(128, 256), dtype="float16"), PLAIN, "vec4_64"),
    ("large fp32", dict(sa=(600, 512), sb=(512, 600)), NV, "vec4_128"),
    ("small problems", dict(sa=(8, 128), sb=(128, 256), dtype="float16"), NV, "vec4_64"),
    ("unaligned K", dict(sa=(64, 33), sb=(33, 64), dtype="float16"), NV, "tiled"),
    ("vector operand", dict(sa=(1, 64), sb=(64, 64), dtype="float16"), NV, "gemv"),
    ("N == 1", dict(sa=(64, 64), sb=(64, 1)), PLAIN, "gemv"),
    ("mid-size fp32", dict(sa=(100, 64), sb=(64, 100)), PLAIN, "vec4_64"),
    ("128 invocations only", dict(sa=(100, 64), sb=(64, 100)), TINY, "tiled_8"),
])
def test_selection_table(modern_ctx, why, problem, device, expect):
    p = _problem(modern_ctx, **problem)
    assert mm.select(p, device)[0] == expect, (why, mm.explain(p, device))


def test_selection_uses_device_properties(modern_ctx):
    p = _problem(modern_ctx, (300, 64), (64, 1))
    # GEMV workgroup follows the subgroup size; reduction uses subgroup ops when present
    assert mm.select(p, NV)[1].workgroup == (128, 1, 1)
    assert mm.select(p, NV)[1].param("reduce") == "subgroup"
    assert mm.select(p, TINY)[1].param("reduce") == "shared"
    assert mm.select(p, TINY)[1].workgroup == (64, 1, 1)
    # a row vector times a row-major matrix: one thread per output column
    p = _problem(modern_ctx, (1, 64), (64, 300))
    assert mm.select(p, PLAIN)[1].param("mode") == "cols"
    # too little shared memory for the 128-tile kernel
    small_smem = mm.MatmulDevice(subgroup_size=32, max_shared_memory=12288, max_invocations=1024)
    p = _problem(modern_ctx, (600, 512), (512, 600))
    assert mm.select(p, PLAIN)[0] == "vec4_128"
    assert mm.select(p, small_smem)[0] == "vec4_64"
    reasons = dict(mm.explain(p, small_smem))
    assert "shared memory" in reasons["vec4_128"]
    # every problem has a kernel: the last candidate always applies
    assert mm.explain(p, TINY)[-1] == ("tiled_8", None)


def test_forcing_an_inapplicable_kernel_is_a_typed_error(host, ctx):
    a, b = ctx.tensor(_data((8, 6))), ctx.tensor(_data((6, 8)))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.UnsupportedError):
            rec.matmul(a, b, kernel="coopmat")
        with pytest.raises(gc.UnsupportedError):
            rec.matmul(a, b, kernel="vec4_64")          # K = 6 is not a multiple of 4
        with pytest.raises(gc.InvalidArgumentError):
            rec.matmul(a, b, kernel="fastest")
    host.submit_and_wait(cmd)


class _FakeCaps:
    cooperative_matrix = True
    cooperative_matrix_khr = True
    api_version = (1, 3)

    def feature(self, name):
        return True


class _FakeCtx:
    caps = _FakeCaps()
    instance = None
    physical_device = None


def _fake_property_query(entries, fields):
    """A vkGetPhysicalDeviceCooperativeMatrixProperties* stand-in: the
    count, then each entry's values written to ``fields`` of the structs."""

    def fake_query(pd, count, props):
        if props == ffi.NULL:
            count[0] = len(entries)
            return 0
        for i, values in enumerate(entries):
            for name, value in zip(fields, values):
                setattr(props[i], name, value)
        return 0
    return fake_query


def test_coopmat_shapes_query_parses_device_properties(monkeypatch, host, ctx):
    # The device's own answer: what the limits hold, fp16 fragments only, and
    # nothing unless the host enabled the NV extension (lavapipe has none).
    real = caps.coopmat_shapes(ctx.instance, ctx.physical_device, ctx.caps)
    assert real == ctx.limits.coopmat_shapes
    assert all(isinstance(s, mm.CoopShape) and s.acc in ("float16", "float32") for s in real)
    if not ctx.caps.cooperative_matrix:
        assert real == ()
    entries = [(16, 8, 16, 0, 0, 1, 1, 3), (16, 8, 8, 0, 0, 0, 0, 3), (8, 8, 32, 4, 4, 6, 6, 3),
               (16, 16, 16, 0, 0, 1, 1, 2)]       # int8 and workgroup-scope entries are skipped
    fake_query = _fake_property_query(entries, ("MSize", "NSize", "KSize", "AType", "BType", "CType", "DType",
                                                "scope"))
    fake = _FakeCtx()
    monkeypatch.setattr(caps, "instance_function", lambda inst, name: fake_query)
    assert caps.coopmat_shapes(fake.instance, fake.physical_device, fake.caps) == (
        mm.CoopShape(16, 8, 16, "float32"), mm.CoopShape(16, 8, 8, "float16"))
    # without the query entry point: the 16x16x16 fp16 fallback
    monkeypatch.setattr(caps, "instance_function", lambda inst, name: None)
    assert caps.coopmat_shapes(fake.instance, fake.physical_device, fake.caps) == (
        mm.CoopShape(16, 16, 16, "float16"),)


def test_khr_coopmat_shapes_query_parses_device_properties(monkeypatch, host, ctx):
    real = caps.coopmat_khr_shapes(ctx.instance, ctx.physical_device, ctx.caps)
    assert real == ctx.limits.coopmat_khr_shapes
    assert all(acc in ("float16", "float32") for *_, acc in real)
    if not ctx.caps.cooperative_matrix_khr:
        assert real == ()
    entries = [(16, 16, 16, 0, 0, 1, 1, 3), (16, 8, 16, 0, 0, 0, 0, 3), (16, 16, 32, 3, 3, 5, 5, 3),
               (16, 16, 16, 0, 0, 1, 0, 3)]       # int8 and mixed C / result types are skipped
    fake_query = _fake_property_query(entries, ("MSize", "NSize", "KSize", "AType", "BType", "CType",
                                                "ResultType", "scope"))
    fake = _FakeCtx()
    monkeypatch.setattr(caps, "instance_function", lambda inst, name: fake_query)
    assert caps.coopmat_khr_shapes(fake.instance, fake.physical_device, fake.caps) == (
        (16, 16, 16, "float32"), (16, 8, 16, "float16"))
    monkeypatch.setattr(caps, "instance_function", lambda inst, name: None)
    assert caps.coopmat_khr_shapes(fake.instance, fake.physical_device, fake.caps) == ()


def test_coopmat_selected_end_to_end_when_device_claims_it(monkeypatch, modern_host, modern_ctx):
    """With a (fake) coopmat device the op plans the coopmat kernel: check the
    dispatches it would record without running them on lavapipe."""
    ctx = modern_ctx
    monkeypatch.setattr(mm.MatmulDevice, "of", classmethod(lambda cls, ctx: NV))
    a, b = ctx.empty((200, 64), "float16"), ctx.empty((64, 96), "float16")
    result = mm.matmul(ctx, a, b, accumulate="float16")
    assert [d.spec.family for d in result.dispatches] == ["matmul_coopmat"]
    bm, bn = mc.coopmat_tiling(result.dispatches[0].spec).block
    assert result.dispatches[0].groups == (-(-96 // bn), -(-200 // bm), 1)


@pytest.mark.skipif(shutil.which("glslc") is None or shutil.which("spirv-val") is None,
                    reason="needs glslc and spirv-val")
def test_coopmat_glsl_compiles_and_validates(tmp_path):
    from guestcompute.spirv.compiler import compile_glsl
    specs = list(mc.coopmat_variants())
    assert len(specs) == len(mc.COOPMAT_TILINGS) * len(mc.COOPMAT_SHAPES) * 2 * 2 * 2 * 2 \
        + len(mc.COOPMAT_SWEEP) * 2
    assert {s.param("stages") for s in specs} == {1, 2} and {s.param("vec") for s in specs} == {4, 8}
    for spec in specs:
        src = spec.render()
        assert "fcoopmatNV" in src and "coopMatMulAddNV" in src
        spv = compile_glsl(src, spec.target_env)
        path = tmp_path / f"{spec.key}.spv"
        path.write_bytes(spv)
        r = subprocess.run(["spirv-val", "--target-env", spec.target_env, str(path)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_every_selected_spec_is_in_the_catalogue(modern_ctx):
    from guestcompute.ops import all_specs
    catalogue = set(all_specs())
    for sa, sb, dtype in [((256, 128), (128, 256), "float16"), ((64, 33), (33, 64), "float32"),
                          ((1, 64), (64, 300), "float32"), ((300, 64), (64, 1), "float16"),
                          ((600, 512), (512, 600), "float32"), ((64, 32), (32, 36), "float16"),
                          ((64, 33), (33, 64), "int32"), ((1, 64), (64, 300), "int32"),
                          ((300, 64), (64, 1), "int32")]:
        for acc, device in itertools.product(("float32", "float16"), (NV, PLAIN, TINY)):
            p = _problem(modern_ctx, sa, sb, dtype, acc=acc)
            for c in mm.CANDIDATES:       # every kernel that applies, chosen or forced
                if c.why_not(p, device) is None:
                    spec = mm.select(p, device, c.name)[1]
                    assert spec in catalogue, (c.name, spec)


# -- int32 -------------------------------------------------------------------------

def test_int32_matmul_wraps_like_numpy(host, ctx):
    # numpy's int32 matmul is int32, wrapping mod 2**32; GEMV, tiled, batched
    # and transposed operands, and products that overflow
    rng = np.random.default_rng(11)
    a_np = rng.integers(-1000, 1000, (3, 37, 70), dtype=np.int32)
    b_np = rng.integers(-1000, 1000, (70, 45), dtype=np.int32)
    big = np.full((4, 6), 2 ** 20, np.int32)
    v_np = rng.integers(-50, 50, 70, dtype=np.int32)
    a, b, v, bg = map(ctx.tensor, (a_np, b_np, v_np, big))
    got = host.run(ctx, lambda rec: (rec.matmul(a, b), rec.matmul(a, v), rec.matmul(v, b),
                                     rec.matmul(b.T, a[1].T), rec.matmul(bg, bg.T)))
    with np.errstate(over="ignore"):
        want = (a_np @ b_np, a_np @ v_np, v_np @ b_np, b_np.T @ a_np[1].T, big @ big.T)
    for g, w in zip(got, want):
        assert g.dtype.name == "int32"
        np.testing.assert_array_equal(g.numpy(), w)


# -- typed errors -------------------------------------------------------------------

def test_typed_errors(host, ctx):
    a = ctx.tensor(_data((4, 5)))
    b = ctx.tensor(_data((5, 3)))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.matmul(ctx.tensor(np.ones((4, 5), np.uint32)), ctx.tensor(np.ones((5, 3), np.uint32)))
        with pytest.raises(gc.DTypeError):
            rec.matmul(a, ctx.tensor(np.ones((5, 3), np.int32)))
        with pytest.raises(gc.ShapeError):
            rec.matmul(a, a)                                   # 5 != 4
        with pytest.raises(gc.ShapeError):
            rec.matmul(ctx.tensor(np.ones(1, np.float32)).reshape(()), b)   # 0-d operand
        with pytest.raises(gc.ShapeError):
            rec.matmul(ctx.tensor(_data((2, 4, 5))), ctx.tensor(_data((3, 5, 3))))  # batch 2 vs 3
        with pytest.raises(gc.ShapeError):
            rec.matmul(a, b, out=ctx.empty((4, 4)))
        with pytest.raises(gc.InvalidArgumentError):
            rec.matmul(a, b, out=a[:, :3])                     # overlaps an operand
        with pytest.raises(gc.InvalidArgumentError):
            rec.matmul(a, np.ones((5, 3), np.float32))
        with pytest.raises(gc.InvalidArgumentError):
            rec.matmul(a, b, accumulate="float64")
    host.submit_and_wait(cmd)


@pytest.mark.parametrize("shapes", [((3, 1000), (1000, 5)), ((1000,), (1000, 4)), ((2, 1000), (1000,)),
                                    ((2, 3, 1000), (1000, 2))])
def test_k_is_cut_into_pieces_on_a_driver_that_caps_shader_loops(host, ctx, shapes):
    """Lavapipe ends an invocation's loops after 65,535 iterations; matmul
    then runs K in pieces and adds the partial products (simulated here
    with a cap of 64, so pieces of 256)."""
    ctx.device.limits = dataclasses.replace(ctx.device.limits, loop_iteration_cap=64)
    rng = np.random.default_rng(7)
    a_host = rng.integers(-3, 4, shapes[0]).astype(np.float32)
    b_host = rng.integers(-3, 4, shapes[1]).astype(np.float32)
    a, b = ctx.tensor(a_host), ctx.tensor(b_host)
    out = host.run(ctx, lambda rec: rec.matmul(a, b))
    np.testing.assert_array_equal(out.numpy(), np.matmul(a_host, b_host))


def test_a_k_past_lavapipes_loop_cap_gives_the_full_sum(host, ctx):
    if not ctx.limits.loop_iteration_cap:
        pytest.skip("the driver caps no loops")
    k = 1_500_000                   # the tiled kernel alone would stop at 1,048,560
    a, b = ctx.tensor(np.ones((2, k), np.float32)), ctx.tensor(np.ones((k, 4), np.float32))
    out = host.run(ctx, lambda rec: rec.matmul(a, b))
    np.testing.assert_array_equal(out.numpy(), np.full((2, 4), k, np.float32))


def test_odd_fp16_problems_run_padded_on_the_khr_kernel(modern_ctx):
    ctx = modern_ctx
    p = _problem(ctx, (1000, 600), (600, 520), "float16")
    assert mm.padding_pays(p, KHR) and not mm.padding_pays(p, NV)
    p = _problem(ctx, (1024, 512), (512, 512), "float16", trans_a=True)      # column-major A
    assert mm.padding_pays(p, KHR)
    for whole_or_small in (_problem(ctx, (512, 512), (512, 512), "float16"),
                           _problem(ctx, (300, 600), (600, 520), "float16"),
                           _problem(ctx, (1000, 600), (600, 520), "float32"),
                           _problem(ctx, (2, 600, 600), (2, 600, 520), "float16")):
        assert not mm.padding_pays(whole_or_small, KHR)


@pytest.mark.parametrize("trans_a", [False, True])
def test_the_padded_plan_gives_numpys_result(host, ctx, trans_a):
    """Zero, copy in, multiply, copy out — here with a kernel lavapipe has
    in place of the KHR one (which needs tensor cores)."""
    if not ctx.caps.float16_storage:
        pytest.skip("float16 needs 16-bit storage")
    rng = np.random.default_rng(3)
    a_host = rng.integers(-3, 4, (70, 45)).astype(np.float16)
    b_host = rng.integers(-3, 4, (45, 33)).astype(np.float16)
    a = ctx.tensor(a_host.T.copy()).T if trans_a else ctx.tensor(a_host)
    b, out = ctx.tensor(b_host), ctx.empty((70, 33), "float16")
    dispatches = mm.plan_padded(ctx, a, b, out, "float32", kernel="tiled")
    host.run(ctx, lambda rec: rec.dispatch(dispatches))
    np.testing.assert_array_equal(out.numpy(), a_host.astype(np.float32) @ b_host.astype(np.float32))
