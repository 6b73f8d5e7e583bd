"""The fft section's GPU path, shrunk to run here: every goal row is
reported (measured, or skipped with the reason), each result checked
against numpy before its time counts."""
import pytest

from benchmarks import fft, vkfft_baseline
from benchmarks.results import Result
from stand_in_compiler import stand_in_compiler


def test_the_gpu_path_reports_every_row(ctx, monkeypatch):
    monkeypatch.setattr(fft, "BATCHED", 1 << 14)
    monkeypatch.setattr(fft, "warm_up", lambda ctx, seconds: None)
    monkeypatch.setattr(fft, "compute_copy_seconds", lambda ctx, timer, n: 1e-3)
    monkeypatch.setattr(fft, "torch_available", lambda: False)
    rows = {r.name: r for r in fft.gpu_rows(ctx, quick=True)}
    assert set(rows) == set(fft.ROWS)
    for name, row in rows.items():
        assert row.goal == fft.GOALS[name]
        if "vs copy" in name:
            assert row.value > 0 and row.met is not None, row
        else:
            assert row.skipped.startswith("torch with CUDA"), row


def test_a_wrong_result_is_not_timed():
    import numpy as np
    with pytest.raises(AssertionError, match="relative RMS error"):
        fft.check_close(np.ones(4) * 1.01, np.ones(4), "x")


def vkfft_output(**changes) -> str:
    import json
    doc = {"device": "NVIDIA H200", "backend": "vulkan", "vkfft_version": 10304, "rounds": 5,
           "us": {case: 10.0 + i for i, case in enumerate(vkfft_baseline.CASES)}, "checks": {}, "ok": True,
           "errors": []}
    doc.update(changes)
    return "planning...\n" + json.dumps(doc) + "\n"


def test_the_vkfft_program_output_is_parsed_and_checked():
    ref = vkfft_baseline.parse(vkfft_output())
    assert ref.label == "VkFFT 1.3.4 (Vulkan)" and ref.us["c2c_2d_1024x1024x32"] == 10.0
    with pytest.raises(vkfft_baseline.VkfftError, match="checks failed"):
        vkfft_baseline.parse(vkfft_output(ok=False, errors=["c2c_1d_256: round trip 0.3"]))
    with pytest.raises(vkfft_baseline.VkfftError, match="no valid time"):
        vkfft_baseline.parse(vkfft_output(us={"c2c_1d_256": 1.0}))
    with pytest.raises(vkfft_baseline.VkfftError, match="no JSON"):
        vkfft_baseline.parse("segfault")


def test_without_headers_or_nvcc_there_is_no_reference_and_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv(vkfft_baseline.INCLUDE_ENV, raising=False)
    assert vkfft_baseline.prepare("cuda") == (None, f"VkFFT (cuda) reference not run: "
                                                    f"{vkfft_baseline.INCLUDE_ENV} names no VkFFT headers")
    monkeypatch.setenv(vkfft_baseline.INCLUDE_ENV, str(tmp_path))
    assert "no vkFFT.h" in vkfft_baseline.prepare("vulkan")[1]
    (tmp_path / "vkFFT.h").write_text("/* headers */")
    monkeypatch.setattr(vkfft_baseline.shutil, "which", lambda name: None)
    assert vkfft_baseline.prepare("cuda")[1].endswith("nvcc not on PATH")
    monkeypatch.delenv("CXX", raising=False)
    assert vkfft_baseline.prepare("vulkan")[1].endswith(": c++ not on PATH")


@pytest.mark.parametrize("backend", ["cuda", "vulkan"])
def test_the_program_is_built_once_per_headers(tmp_path, monkeypatch, backend):
    compiler, builds = stand_in_compiler(tmp_path, vkfft_output(), "nvcc" if backend == "cuda" else "c++")
    include = tmp_path / "vkfft"
    include.mkdir()
    (include / "vkFFT.h").write_text("/* version 1 */")
    monkeypatch.setenv("PATH", f"{compiler}:/usr/bin:/bin")
    monkeypatch.setenv("GUESTCOMPUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(vkfft_baseline.INCLUDE_ENV, str(include))
    monkeypatch.delenv("CXX", raising=False)
    for _ in range(2):
        exe, why = vkfft_baseline.prepare(backend)
        assert why == ""
        ref, why = vkfft_baseline.run(exe, backend, 1, "H200")
        assert why == "" and ref.us["c2r_2d_512x6"] == 17.0
    (include / "vkFFT.h").write_text("/* version 2 */")
    assert vkfft_baseline.prepare(backend)[1] == ""
    assert builds.read_text().split() == ["built", "built"]


def test_each_goal_row_vkfft_ran_gets_a_row_beside_it():
    ref = vkfft_baseline.parse(vkfft_output())
    goal_rows = [Result(fft.SECTION, "rfft2 1024x1024x32 vs cuFFT", 1.0, extra=fft.times(250e-6, 225e-6)),
                 Result(fft.SECTION, "fft c2c 1-D 4096 batched vs copy", 1.0, extra=fft.times(200e-6, 180e-6)),
                 Result(fft.SECTION, "fft bloom 1024x2048", 1.0, extra=fft.times(110e-6, 130e-6)),
                 Result(fft.SECTION, "fft 512x512 single", skipped="no torch")]
    rows = fft.vkfft_rows(goal_rows, "vulkan", ref, "")
    assert [r.name for r in rows] == ["rfft2 1024x1024x32 vs VkFFT (Vulkan)", "fft c2c 1-D 4096 batched vs VkFFT (Vulkan)"]
    rfft2, batched = rows
    assert rfft2.value == pytest.approx(250) and rfft2.baseline_value == ref.us["r2c_2d_1024x1024x32"] == 11.0
    assert "VkFFT at 20.45x the speed of cuFFT" in rfft2.note and not rfft2.goal
    assert "the speed of copy (180.0 µs)" in batched.note
    [skipped] = fft.vkfft_rows(goal_rows, "cuda", None, "VkFFT (cuda) reference not run: nvcc not on PATH")
    assert skipped.name == "fft vs VkFFT (CUDA)" and skipped.skipped.endswith("nvcc not on PATH")


def test_vkfft_compiles_while_ours_is_timed_and_runs_after(monkeypatch):
    events = []

    def prepare(backend):
        events.append(f"build {backend}")
        return (None, "VkFFT (cuda) reference not run: nvcc not on PATH") if backend == "cuda" else ("exe", "")

    def run(exe, backend, rounds, device):
        events.append(f"run {backend} on {device}")
        return vkfft_baseline.parse(vkfft_output()), ""

    def ours():
        events.append("ours")
        return [Result(fft.SECTION, "fft 512x512 single", 10.0, extra=fft.times(10e-6, 6e-6))]
    monkeypatch.setattr(vkfft_baseline, "prepare", prepare)
    monkeypatch.setattr(vkfft_baseline, "run", run)
    rows = fft.with_vkfft(ours, 5, "NVIDIA H200")
    assert [r.name for r in rows] == ["fft 512x512 single", "fft 512x512 single vs VkFFT (Vulkan)",
                                      "fft vs VkFFT (CUDA)"]
    assert rows[1].baseline_value == 16.0 and rows[2].skipped.endswith("nvcc not on PATH")
    assert sorted(events[:3]) == ["build cuda", "build vulkan", "ours"]
    assert events[3:] == ["run vulkan on NVIDIA H200"]
