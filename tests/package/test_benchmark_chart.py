"""The benchmark chart judges every goal the same way round: right of the 1×
line is better than the goal, whether the goal is an upper or a lower bound."""
from benchmarks.plot import goal_bars, ratio_bars, ratio_chart
from benchmarks.results import Result


def _row(value, baseline, goal=""):
    return Result("section", f"row {goal or 'without goal'}", value, "GB/s", "baseline", baseline, goal)


def test_margin_is_above_one_exactly_when_the_goal_is_met():
    rows = [_row(2.6, 2.0, "ratio<=1.3"),      # at the bound
            _row(3.0, 2.0, "ratio<=1.3"),      # over an upper bound: missed
            _row(1.0, 2.0, "ratio<=1.3"),      # well under it: met
            _row(9.5, 10.0, "ratio>=0.9"),     # over a lower bound: met
            _row(5.0, 10.0, "ratio>=0.9"),     # under it: missed
            _row(16.0, None, "value<=20"),     # a goal on the value itself
            _row(25.0, None, "value<=20")]
    for r in rows:
        assert (r.margin >= 1) == r.met, (r.goal, r.value, r.margin)
    assert abs(rows[0].margin - 1.0) < 1e-12
    assert abs(rows[1].margin - 1.3 / 1.5) < 1e-12
    assert abs(rows[3].margin - 0.95 / 0.9) < 1e-12


def test_rows_without_a_goal_are_drawn_apart_from_judged_rows():
    rows = [_row(3.0, 2.0, "ratio<=1.3"), _row(3.0, 2.0), Result("section", "skipped", skipped="why")]
    assert [b.label for b in goal_bars(rows)] == ["section: row ratio<=1.3"]
    assert [b.label for b in ratio_bars(rows)] == ["section: row without goal"]
    one_panel = ratio_chart("t", rows[:1])
    two_panels = ratio_chart("t", rows)
    assert two_panels.shape[0] > one_panel.shape[0] and two_panels.shape[2] == 3
