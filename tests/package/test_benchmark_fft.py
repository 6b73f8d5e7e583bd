"""The fft section's GPU path, shrunk to run here: every goal row is
reported (measured, or skipped with the reason), each result checked
against numpy before its time counts."""
import pytest

from benchmarks import fft


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
