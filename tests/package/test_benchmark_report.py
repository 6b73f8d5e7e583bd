"""BENCHMARKS.md's goal tables come from a run's JSON report: the page table
names the run (date and commit) and lists each judged row once."""
from benchmarks.report import page_table
from benchmarks.results import Result


def test_the_page_table_names_its_run_and_lists_only_judged_rows():
    meta = {"device": "Some GPU", "date": "2026-01-01 00:00 UTC", "commit": "abc1234"}
    rows = [Result("record", "judged", 3.0, "µs", "raw loop", 2.0, "ratio<=1.3"),
            Result("programs", "by value", 16.0, "µs", "recording", 8000.0, "value<=20"),
            Result("handoff", "no goal", 5.0, "µs", "injected", 4.0)]
    table = page_table(meta, rows).splitlines()
    assert table[0] == "### Some GPU — 2026-01-01 00:00 UTC, commit abc1234"
    body = [line for line in table if line.startswith("| record") or line.startswith("| programs")
            or line.startswith("| handoff")]
    assert body == ["| record: judged | ≤ 1.3× | 1.50× (3.00 vs 2.00 µs) | raw loop | **missed** |",
                    "| programs: by value | ≤ 20 | 16.0 µs | recording | met |"]


def test_the_report_says_whether_a_cuda_context_held_the_clocks_up():
    from benchmarks.report import to_markdown
    meta = {"device": "Some GPU", "date": "2026-01-01 00:00 UTC", "commit": "abc1234"}
    assert "CUDA context held" not in to_markdown(meta, [])
    assert "a CUDA context held throughout" in to_markdown(dict(meta, cuda_context_held=True), [])
