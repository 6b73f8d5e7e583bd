"""The sort section's pure parts: the CUB program's JSON is checked before
any of its numbers is used, the goals are judged with the right arithmetic,
and a missing baseline skips the rows that need it instead of guessing."""
import json
import types

import numpy as np
import pytest
import vulkan as vk

from benchmarks import cub_baseline, sort
from benchmarks.cub_baseline import BaselineError, parse
from benchmarks.report import page_table
from stand_in_compiler import stand_in_compiler
from benchmarks.sort import (COMPACT_ROW, COUNT_ROW, CUMSUM_ROW, KEYS_ROW, PAIRS_ROW, Measured, compact_bytes,
                             rows_from)

N, SMALL = 1 << 25, 4_194_304
TIMES = {"sort_keys": 0.845, "sort_pairs": 1.003, "sort_pairs_small": 0.207, "inclusive_sum": 0.0931,
         "select_flagged": 0.1, "memcpy": 0.5, "skeleton_tile_scan": 0.072, "skeleton_lookback_scan": 0.127}


def program_output(**changes) -> str:
    doc = {"device": "NVIDIA H200", "cuda_runtime": 13000, "cub_version": 300000, "n": N, "small_pairs": SMALL,
           "reps": 20, "copy_bytes": 1 << 30, "selected": N // 2, "ms": dict(TIMES), "ok": True, "errors": []}
    doc.update(changes)
    return "a line the program printed first\n" + json.dumps(doc) + "\n"


def measured(**seconds) -> dict:
    rows = {KEYS_ROW: 2e-3, PAIRS_ROW: 2e-3, COUNT_ROW: 0.3e-3, CUMSUM_ROW: 1e-4, COMPACT_ROW: 1e-4}
    rows.update({name: s for name, s in seconds.items()})
    ours = {name: Measured(s) for name, s in rows.items()}
    ours[COMPACT_ROW].extra = {"bytes_moved": compact_bytes(N, N // 2, 1)}
    return ours


def by_name(rows):
    return {r.name: r for r in rows}


def test_the_programs_json_becomes_a_baseline():
    base = parse(program_output())
    assert base.n == N and base.small_pairs == SMALL and base.ms == TIMES
    assert base.label == "CUB 3.0.0, CUDA 13.0"
    assert base.copy_bandwidth == pytest.approx(2 * (1 << 30) / 0.5e-3)


@pytest.mark.parametrize("text, why", [
    (program_output(ok=False, errors=["keys: not sorted"]), "wrong"),
    (program_output(ms={**TIMES, "inclusive_sum": 0}), "inclusive_sum"),
    (program_output(ms={k: v for k, v in TIMES.items() if k != "memcpy"}), "memcpy"),
    ("{not json", "invalid JSON"),
    ("nvcc: no GPU found\n", "no JSON"),
])
def test_a_wrong_or_broken_program_output_is_refused(text, why):
    with pytest.raises(BaselineError, match=why):
        parse(text)


def test_without_nvcc_there_is_no_baseline_and_the_reason_says_so(monkeypatch):
    monkeypatch.setattr(cub_baseline.shutil, "which", lambda name: None)
    base, why = cub_baseline.measure(N, SMALL, reps=3)
    assert base is None and "nvcc not on PATH" in why


def test_rows_without_cub_are_skipped_with_the_reason_and_keep_their_number():
    rows = by_name(rows_from(N, SMALL, measured(), None, "CUB baseline missing: nvcc not on PATH",
                             copy_bw_fallback=3e12))
    assert set(rows) == {KEYS_ROW, PAIRS_ROW, COUNT_ROW, CUMSUM_ROW, COMPACT_ROW}
    for name in (KEYS_ROW, PAIRS_ROW, CUMSUM_ROW):
        assert "nvcc not on PATH" in rows[name].skipped and rows[name].met is None
        assert rows[name].baseline_value is None and rows[name].value > 0
    assert all(r.goal for r in rows.values())       # goal tables list every row, skipped or not
    page = page_table({"device": "GPU", "date": "today"}, list(rows.values()))
    assert f"| sort: {KEYS_ROW} | ≥ 0.5× | skipped: CUB baseline missing: nvcc not on PATH" in page
    # An absolute goal needs no CUB; the compaction falls back to this run's shader copy.
    assert rows[COUNT_ROW].met is True and rows[COUNT_ROW].value == pytest.approx(0.3)
    assert rows[COMPACT_ROW].baseline == "compute-shader copy (same run)" and rows[COMPACT_ROW].met is not None


@pytest.mark.parametrize("ours_ms, met", [(0.845 * 2 * 0.99, True), (0.845 * 2 * 1.01, False)])
def test_the_sort_goal_is_half_of_cubs_keys_per_second(ours_ms, met):
    rows = by_name(rows_from(N, SMALL, measured(**{KEYS_ROW: ours_ms / 1e3}), parse(program_output()), ""))
    row = rows[KEYS_ROW]
    assert row.unit == "Gkeys/s" and row.value == pytest.approx(N / (ours_ms / 1e3) / 1e9)
    assert row.baseline_value == pytest.approx(N / 0.845e-3 / 1e9)
    assert row.met is met


def test_the_scan_goal_is_ninety_percent_of_cubs_bandwidth():
    cub = parse(program_output())
    at_goal = 0.0931e-3 / 0.9
    rows = by_name(rows_from(N, SMALL, measured(**{CUMSUM_ROW: at_goal * 0.99}), cub, ""))
    assert rows[CUMSUM_ROW].met is True and rows[CUMSUM_ROW].value == pytest.approx(8 * N / (at_goal * 0.99) / 1e9)
    rows = by_name(rows_from(N, SMALL, measured(**{CUMSUM_ROW: at_goal * 1.01}), cub, ""))
    assert rows[CUMSUM_ROW].met is False


def test_the_gpu_count_goal_is_absolute_with_cub_beside_it():
    rows = by_name(rows_from(N, SMALL, measured(**{COUNT_ROW: 0.45e-3}), parse(program_output()), ""))
    row = rows[COUNT_ROW]
    assert row.value == pytest.approx(0.45) and row.baseline_value == pytest.approx(0.207)
    assert row.met is False and row.goal == "value<=0.4"


def test_the_compaction_is_judged_by_the_bytes_it_moves_against_the_memcpy():
    cub = parse(program_output())
    moved = compact_bytes(N, N // 2, 1)
    assert moved == 4 * N + N + 2 * N + 4
    seconds = moved / (0.7 * cub.copy_bandwidth) * 0.99
    row = by_name(rows_from(N, SMALL, measured(**{COMPACT_ROW: seconds}), cub, ""))[COMPACT_ROW]
    assert row.ratio == pytest.approx(0.7 / 0.99) and row.met is True
    assert "DeviceSelect::Flagged" in row.note


def test_a_row_that_failed_is_skipped_with_its_error_and_the_others_stay():
    ours = measured()
    ours[PAIRS_ROW] = Measured(error="wrong result: keys differ from np.sort")
    ours[COMPACT_ROW] = Measured(error="not available: rec.compact is not in this build")
    rows = by_name(rows_from(N, SMALL, ours, parse(program_output()), ""))
    assert rows[PAIRS_ROW].skipped.startswith("wrong result") and rows[COMPACT_ROW].skipped.startswith("not available")
    assert rows[KEYS_ROW].met is not None and rows[CUMSUM_ROW].met is not None


def test_the_section_on_a_cpu_device_skips_the_gpu_goals_and_times_small_sorts(ctx, monkeypatch):
    import guestcompute
    monkeypatch.setattr(guestcompute.context.Context, "create", staticmethod(lambda device=None: ctx))
    monkeypatch.setattr(ctx, "close", lambda: None)
    if ctx.limits.device_type != vk.VK_PHYSICAL_DEVICE_TYPE_CPU:
        pytest.skip("the CPU path of the section")
    rows = sort.run(types.SimpleNamespace(quick=True, device=None, out=None))
    goal_rows = [r for r in rows if r.name in {KEYS_ROW, PAIRS_ROW, COUNT_ROW, CUMSUM_ROW, COMPACT_ROW}]
    assert len(goal_rows) == 5 and all(r.skipped for r in goal_rows)
    small = by_name(r for r in rows if r not in goal_rows)
    assert small["sort pairs uint32 2^14 time vs numpy"].value > 0, small
    assert small["cumsum uint32 2^14 time vs numpy"].value > 0, small


@pytest.mark.parametrize("with_cub", [True, False])
def test_the_gpu_path_gives_all_rows_at_a_small_size(ctx, monkeypatch, with_cub):
    # The path the H200 runs, shrunk: the sizes small, CUB's numbers from a
    # canned run (or none: the compaction is then judged by this run's copy).
    n, small = 1 << 14, 1 << 12
    monkeypatch.setattr(sort, "N", n)
    monkeypatch.setattr(sort, "SMALL_PAIRS", small)
    monkeypatch.setattr(sort, "warm_up", lambda ctx, seconds: None)
    monkeypatch.setattr(sort, "torch_available", lambda: False)
    canned = (parse(program_output(n=n, small_pairs=small, selected=n // 2)), "") if with_cub \
        else (None, "CUB baseline missing: nvcc not on PATH")
    monkeypatch.setattr(cub_baseline, "measure", lambda *a, **kw: canned)
    rows = by_name(sort.gpu_rows(ctx, quick=True))
    assert list(rows) == list(sort.ROWS) + [sort.SKELETON_ROW]
    skeleton = rows[sort.SKELETON_ROW]
    assert skeleton.skipped or (with_cub and skeleton.value > 0), skeleton
    for name in (KEYS_ROW, PAIRS_ROW, CUMSUM_ROW):
        assert rows[name].value > 0, rows[name]
        assert (rows[name].met is not None) == with_cub, rows[name]
    assert rows[COUNT_ROW].value > 0 and rows[COUNT_ROW].met is not None
    assert rows[KEYS_ROW].extra.get("cub_device") == ("NVIDIA H200" if with_cub else None)
    compact = rows[COMPACT_ROW]
    if sort.has_op("compact"):
        assert compact.value > 0 and compact.met is not None, compact
    else:
        assert compact.skipped.startswith("not available")


def test_the_program_is_built_once_and_its_output_parsed(tmp_path, monkeypatch):
    compiler, builds = stand_in_compiler(tmp_path, program_output())
    monkeypatch.setenv("PATH", f"{compiler}:/usr/bin:/bin")
    monkeypatch.setenv("GUESTCOMPUTE_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        base, why = cub_baseline.measure(N, SMALL, reps=3)
        assert why == "" and base.ms == TIMES
    assert builds.read_text().split() == ["built"]
    assert [p.name.startswith("cub_sort-") for p in (tmp_path / "cache" / "bench").iterdir()] == [True]


@pytest.mark.parametrize("look_back", [False, True])
def test_the_glsl_lookback_skeleton_scans_exactly(modern_ctx, look_back):
    """The skeleton the benchmark times against its CUDA twin is a real scan:
    each tile's own (no look-back) or the whole row's."""
    from benchmarks import lookback_skeleton as skel
    if not (modern_ctx.limits.subgroup_arithmetic and modern_ctx.limits.subgroup_ballot):
        pytest.skip("the skeleton scans with subgroup operations")
    n = 5 * skel.TILE
    x = skel.values(n)
    src, dst = modern_ctx.tensor(x), modern_ctx.empty((n,), "uint32")
    state = modern_ctx.zeros((n // skel.TILE + 1,), "uint32")
    k = skel.kernel(modern_ctx, look_back)
    modern_ctx.run(lambda rec: rec.run_kernel(k, [src, dst, state], groups=(n // skel.TILE, 1, 1)))
    np.testing.assert_array_equal(dst.numpy(), skel.expected(x, look_back))


def test_the_skeleton_accepts_only_sizes_its_status_words_hold():
    from benchmarks import lookback_skeleton as skel
    for n in (0, skel.TILE + 1, skel.MAX_N):
        with pytest.raises(ValueError, match="multiple of"):
            skel.values(n)


def test_the_skeleton_row_sets_vulkan_against_cuda(monkeypatch):
    seconds = {"tile_scan": 0.08e-3, "lookback_scan": 0.25e-3}
    monkeypatch.setattr(sort.lookback_skeleton, "measure", lambda ctx, timer, n: dict(seconds))
    monkeypatch.setattr(sort, "warm_up", lambda ctx, s: None)
    row = sort.skeleton_row(None, None, N, parse(program_output()), "")
    assert row.value == pytest.approx(8 * N / 0.25e-3 / 1e9)
    assert row.baseline_value == pytest.approx(8 * N / 0.127e-3 / 1e9)
    assert not row.goal and "Vulkan 3355, CUDA 3728 GB/s" in row.note
    assert sort.skeleton_row(None, None, N, None, "CUB baseline missing: x").skipped == "CUB baseline missing: x"
