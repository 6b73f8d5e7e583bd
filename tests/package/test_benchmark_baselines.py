"""The benchmark suite's baselines run: each is a number other rows are
judged against, so one that crashes takes its section down with it."""
from benchmarks.gpu_ops import Timer, copy_seconds


def test_the_vkcmdcopybuffer_baseline_records_into_the_recorders_buffer(host, ctx):
    # It records its own commands through rec.command_buffer (it once read a
    # private attribute that the recorder no longer had).
    seconds = copy_seconds(ctx, Timer(ctx, reps=2, rounds=1), 1 << 16)
    assert seconds > 0
