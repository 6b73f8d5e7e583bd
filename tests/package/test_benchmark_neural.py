"""The neural section's rows run end to end on a small frame: each checks
its result against the numpy reference before it is timed; the encodings are
timed against a copy of their output's bytes, the hash grid + MLP against the
hash grid alone."""
import pytest

from benchmarks.gpu_ops import Timer
from benchmarks.neural_encodings import BASELINE, FREQ_ROW, GRID_MLP_ROW, HASH_ROW, encoding_rows


def test_the_encoding_rows_check_and_time_against_a_copy(modern_ctx):
    if not modern_ctx.caps.float16_storage:
        pytest.skip("the rows encode into float16")
    rows = encoding_rows(modern_ctx, 48, 27, Timer(modern_ctx, reps=1, rounds=1), goals=True)
    assert [r.name for r in rows] == [row.replace("1920x1080", "48x27") for row in (HASH_ROW, FREQ_ROW, GRID_MLP_ROW)]
    for r in rows:
        assert r.value > 0 and r.baseline_value > 0 and r.goal and not r.skipped
    assert [r.baseline for r in rows[:2]] == [BASELINE, BASELINE]
