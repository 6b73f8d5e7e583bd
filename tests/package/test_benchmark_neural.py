"""The neural section's rows run end to end on a small frame: each checks
its result against the numpy reference before it is timed; the encodings are
timed against a copy of their output's bytes, the hash grid + MLP against the
hash grid alone."""
import numpy as np
import pytest

from benchmarks.gpu_ops import Timer
from benchmarks.neural_encodings import BASELINE, FREQ_ROW, GRID_MLP_ROW, HASH_ROW, encoding_rows
from rebuilt_spirv import assert_rebuilds_alike


def test_the_encoding_rows_check_and_time_against_a_copy(modern_ctx):
    if not modern_ctx.caps.float16_storage:
        pytest.skip("the rows encode into float16")
    rows = encoding_rows(modern_ctx, 48, 27, Timer(modern_ctx, reps=1, rounds=1), goals=True)
    assert [r.name for r in rows] == [row.replace("1920x1080", "48x27") for row in (HASH_ROW, FREQ_ROW, GRID_MLP_ROW)]
    for r in rows:
        assert r.value > 0 and r.baseline_value > 0 and r.goal and not r.skipped
    assert [r.baseline for r in rows[:2]] == [BASELINE, BASELINE]


# -- the cooperative-vector reference ---------------------------------------------------------

def _coopvec_builds():
    from benchmarks import neural_coopvec as cv
    return [(layout, 0) for layout in cv.LAYOUTS] + [(cv.STEP_LAYOUT, step) for step in cv.STEPS]


def test_the_cooperative_vector_reference_spirv_is_the_network_the_row_claims():
    """Every committed module (both layouts, every step): the four buffers
    and the 56-byte push block that reference_seconds binds, 64
    invocations, the CooperativeVectorNV capability; no two are alike."""
    from guestcompute.spirv.reflect import reflect
    from benchmarks import neural_coopvec as cv
    blobs = [cv.spirv_path(layout, step=step).read_bytes() for layout, step in _coopvec_builds()]
    assert len(set(blobs)) == len(blobs) == 2 + len(cv.STEPS)
    for blob in blobs:
        r = reflect(blob)
        assert [b.name for b in r.bindings] == ["x_in", "weights", "biases", "y_out"]
        assert [b.kind for b in r.bindings] == ["storage_buffer"] * 4
        assert r.push_constant_size == 4 * (1 + 2 * 5 + 3) and r.local_size == (cv.WORKGROUP, 1, 1)
        assert 5394 in r.capabilities          # CooperativeVectorNV


def test_the_committed_reference_spirv_is_what_its_slang_source_compiles_to(tmp_path):
    """Rebuilt from coopvec_mlp.slang where slangc exists: the same interface
    and capabilities as the committed modules (their bytes may differ
    between slangc versions)."""
    from guestcompute.errors import CompilerNotFoundError
    from guestcompute.spirv.reflect import reflect
    from guestcompute.spirv.slang import slangc_path
    from benchmarks import neural_coopvec as cv
    try:
        slangc_path()
    except CompilerNotFoundError:
        pytest.skip("no slangc")
    cv.build(tmp_path)
    for layout, step in _coopvec_builds():
        assert reflect(cv.spirv_path(layout, tmp_path, step).read_bytes()) == \
            reflect(cv.spirv_path(layout, step=step).read_bytes())


def test_the_reference_weights_are_packed_at_the_extension_alignments():
    from benchmarks import neural_coopvec as cv
    rng = np.random.default_rng(0)
    shapes = [(64, 32), (64, 64), (16, 64), (8, 3)]
    matrices = [rng.standard_normal(s).astype(np.float16) for s in shapes]
    biases = [rng.standard_normal(s[0]).astype(np.float16) for s in shapes]
    weights, bias_bytes, w_off, b_off = cv.pack(matrices, biases, codes=[1, 1, 2, 0], slopes=[0, 0, 0.25, 0])
    assert all(o % cv.MATRIX_ALIGN == 0 for o in w_off) and all(o % cv.BIAS_ALIGN == 0 for o in b_off)
    assert len(weights) % 16 == 0 and len(bias_bytes) % 16 == 0
    for m, b, wo, bo in zip(matrices, biases, w_off, b_off):
        got = np.frombuffer(weights, np.float16, m.size, wo).reshape(m.shape)
        np.testing.assert_array_equal(got, m)                       # row-major: a row per output
        np.testing.assert_array_equal(np.frombuffer(bias_bytes, np.float16, b.size, bo), b)
    # The table the steps read: per layer matrix offset, bias offset, code, slope bits; then the biases.
    table = np.frombuffer(bias_bytes, np.uint32, 4 * len(shapes)).reshape(len(shapes), 4)
    assert table[:, :3].tolist() == [[w, b, c] for w, b, c in zip(w_off, b_off, [1, 1, 2, 0])]
    assert table[2, 3] == np.array(0.25, np.float32).view(np.uint32) and min(b_off) >= table.nbytes
    converted, _, w_off2, _ = cv.pack(matrices, biases, convert=lambda m: m[::-1].tobytes())
    assert w_off2 == w_off
    np.testing.assert_array_equal(np.frombuffer(converted, np.float16, 64 * 32, 0).reshape(64, 32), matrices[0][::-1])


def _rows_on_this_cpu_device(module, ctx, monkeypatch) -> list:
    """``module.run`` with ``ctx`` (a CPU device) as the device it creates."""
    import types

    import vulkan as vk

    import guestcompute
    if ctx.limits.device_type != vk.VK_PHYSICAL_DEVICE_TYPE_CPU:
        pytest.skip("the CPU path of the row")
    monkeypatch.setattr(guestcompute.context.Context, "create", staticmethod(lambda device=None: ctx))
    monkeypatch.setattr(ctx, "close", lambda: None)
    return module.run(types.SimpleNamespace(quick=True, device=None, out=None))


def test_the_cooperative_vector_row_is_skipped_on_a_cpu_device(ctx, monkeypatch):
    from benchmarks import neural_coopvec as cv
    rows = _rows_on_this_cpu_device(cv, ctx, monkeypatch)
    assert [(r.name, r.goal) for r in rows] == [(cv.ROW, cv.GOAL)]
    assert rows[0].skipped == "a GPU's goal: this device runs on the CPU"


def test_the_reference_device_adopts_with_its_extra_features(monkeypatch):
    """The device the row creates, without the cooperative-vector extensions
    themselves (any device has the rest): its pNext chain enables
    uniformAndStorageBuffer16BitAccess beside requirements()' features,
    adoption declares it, ops run, and close destroys it."""
    from benchmarks import neural_coopvec as cv
    monkeypatch.setattr(cv, "EXTENSIONS", ())
    try:
        host = cv.CoopVecDevice(None)
    except cv.Unavailable as e:
        pytest.skip(str(e))
    try:
        assert host.ctx.caps.feature("uniformAndStorageBuffer16BitAccess") and host.ctx.caps.float16_storage
        t = host.ctx.tensor(np.arange(6, dtype=np.float16))
        np.testing.assert_array_equal(host.ctx.run(lambda rec: rec.add(t, t)).numpy(), np.arange(6) * 2)
    finally:
        host.close()
    assert host.device is None and host.instance is None


# -- the cooperative-matrix reference ---------------------------------------------------------

def test_every_cooperative_matrix_reference_variant_is_committed_with_its_interface():
    """The committed modules: four storage buffers, no push constants, the
    variant's workgroup and shared memory (its activation tiles, plus the
    weights where they are staged), the CooperativeMatrixKHR capability."""
    from guestcompute.spirv.reflect import reflect, workgroup_memory_size
    from benchmarks import neural_coopmat as cm
    blobs = set()
    for variant in cm.VARIANTS:
        subgroups, row_frags, shared = variant[:3]
        for acc in cm.ACCUMULATORS:
            blob = cm.spirv_path(variant, acc).read_bytes()
            blobs.add(blob)
            r = reflect(blob)
            assert [b.name for b in r.bindings] == ["X", "Wt", "Bt", "Y"]
            assert [b.kind for b in r.bindings] == ["storage_buffer"] * 4
            assert r.push_constant_size == 0 and r.local_size == (subgroups * cm.SUBGROUP, 1, 1)
            tiles = subgroups * row_frags * 16 * 9 * 16              # rows x 9 uvec4s
            weights = sum(k * n for k, n in zip(cm.WIDTHS, cm.WIDTHS[1:])) * 2 if shared else 0
            assert workgroup_memory_size(blob, {}) == tiles + weights
            assert 6022 in r.capabilities                            # CooperativeMatrixKHR
    assert len(blobs) == len(cm.VARIANTS) * len(cm.ACCUMULATORS)


def test_the_committed_cooperative_matrix_spirv_is_what_its_source_compiles_to(tmp_path):
    """Rebuilt where glslangValidator 13+ exists: the same interface and
    shared memory as the committed modules (bytes may differ between
    compiler versions)."""
    from benchmarks import neural_coopmat as cm
    assert_rebuilds_alike(cm.build, [cm.spirv_path(v, acc) for v in cm.VARIANTS for acc in cm.ACCUMULATORS],
                          tmp_path)


def _fragment(words: np.ndarray, at: int, stride: int) -> np.ndarray:
    """A 16 x 16 fp16 fragment as coopMatLoad reads it row-major from a
    uvec4 array: row r starts at uvec4 ``at + r * stride``."""
    halves = words.view(np.float16)
    return np.stack([halves[(at + r * stride) * 8:(at + r * stride) * 8 + 16] for r in range(16)]).astype(np.float32)


def test_the_reference_weights_sit_where_its_fragment_loads_read_them():
    """The kernel's addressing (the offsets of MULTIPLY and LOAD_BIAS in
    coopmat_mlp.comp, with pack() and offsets()) replayed in numpy over 16
    queries gives the network's output."""
    import guestcompute as gc
    from guestcompute.ops.mlp import apply_activation
    from benchmarks import neural_coopmat as cm
    rng = np.random.default_rng(3)
    widths = cm.WIDTHS
    layers = [gc.Dense(rng.standard_normal((a, b)) / np.sqrt(a), rng.standard_normal(b),
                       "relu" if i + 2 < len(widths) else "none") for i, (a, b) in enumerate(zip(widths, widths[1:]))]
    words, biases = cm.pack(layers)
    w_at, b_at = cm.offsets()
    assert words.size * 4 == sum(k * n for k, n in zip(widths, widths[1:])) * 2
    assert len(cm.defines(cm.VARIANTS[0], "float16")) == 8 + 2 * len(layers)
    x = rng.standard_normal((16, widths[0])).astype(np.float16)
    h = x.astype(np.float32)
    for layer, (k, n), wo, bo in zip(layers, zip(widths, widths[1:]), w_at, b_at):
        nf, kf = n // 16, k // 16
        out = np.zeros((16, n), np.float32)
        for j in range(nf):
            acc = _fragment(biases, bo + 2 * j, 2 * nf)
            for kk in range(kf):
                acc = acc + h[:, kk * 16:(kk + 1) * 16] @ _fragment(words, wo + 32 * nf * kk + 2 * j, 2 * nf)
            out[:, j * 16:(j + 1) * 16] = acc
        h = apply_activation(out, layer.activation).astype(np.float16).astype(np.float32)
    want = x.astype(np.float32)
    for layer in layers:
        want = apply_activation(want @ layer.weight.astype(np.float16).astype(np.float32)
                                + layer.bias.astype(np.float16).astype(np.float32), layer.activation)
    np.testing.assert_allclose(h, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


def test_the_reference_table_holds_what_its_steps_read():
    """The table at the head of the bias buffer (STEP 1-4 of
    coopmat_mlp.comp): per layer the offsets of offsets(), the widths, the
    activation code as rec.mlp numbers it and the slope's bits; then the
    depth. The steps are the first variant's, one more each."""
    import guestcompute as gc
    from guestcompute.ops.mlp_kernels import ACTIVATIONS
    from benchmarks import neural_coopmat as cm
    rng = np.random.default_rng(4)
    widths = cm.WIDTHS
    acts = ["relu", "leaky_relu", "relu", "relu", "none"]
    layers = [gc.Dense(rng.standard_normal((a, b)), rng.standard_normal(b), act, slope=0.125)
              for (a, b), act in zip(zip(widths, widths[1:]), acts)]
    _, biases = cm.pack(layers)
    table = biases[:cm.TABLE_UVEC4S * 4].reshape(-1, 4)
    for i, (layer, w_at, b_at) in enumerate(zip(layers, *cm.offsets())):
        assert tuple(table[2 * i]) == (w_at, b_at, layer.shape[0], layer.shape[1])
        assert ACTIVATIONS[table[2 * i + 1, 0]] == layer.activation
        assert table[2 * i + 1, 1:2].view(np.float32)[0] == np.float32(0.125)
    assert table[cm.TABLE_DEPTH_AT, 0] == len(layers) and min(cm.offsets()[1]) == cm.TABLE_UVEC4S
    steps = [v for v in cm.VARIANTS if v[-1]]
    assert steps == [cm.VARIANTS[0][:-1] + (s,) for s in range(1, 5)]


def test_the_cooperative_matrix_row_is_skipped_on_a_cpu_device(ctx, monkeypatch):
    from benchmarks import neural_coopmat as cm
    rows = _rows_on_this_cpu_device(cm, ctx, monkeypatch)
    assert [r.name for r in rows] == [cm.ROW]
    assert rows[0].skipped == "a GPU's reference: this device runs on the CPU"
