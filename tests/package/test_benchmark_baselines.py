"""The benchmark suite's baselines run: each is a number other rows are
judged against, so one that crashes takes its section down with it."""
import pytest

from benchmarks.gpu_ops import COPY_ROW, Timer, copy_rows, copy_seconds, compute_copy_seconds


def test_the_vkcmdcopybuffer_baseline_records_into_the_recorders_buffer(host, ctx):
    # It records its own commands through rec.command_buffer (it once read a
    # private attribute that the recorder no longer had).
    seconds = copy_seconds(ctx, Timer(ctx, reps=2, rounds=1), 1 << 16)
    assert seconds > 0


def test_the_compute_copy_baseline_is_timed_on_the_device(host, ctx):
    seconds = compute_copy_seconds(ctx, Timer(ctx, reps=2, rounds=1), 1 << 14)
    assert seconds > 0


def test_bandwidth_rows_are_judged_against_the_compute_copy_not_vkcmdcopybuffer(host, ctx):
    n = 1 << 14
    rows, copy_bw, torch_bw = copy_rows(ctx, Timer(ctx, reps=2, rounds=1), n, 16, on_cpu=True, use_torch=False)
    by_name = {r.name: r for r in rows}
    assert by_name[COPY_ROW].value == pytest.approx(copy_bw / 1e9) and torch_bw is None
    vk_row = by_name["vkCmdCopyBuffer (informational)"]
    assert vk_row.baseline_value == pytest.approx(copy_bw / 1e9) and not vk_row.goal
