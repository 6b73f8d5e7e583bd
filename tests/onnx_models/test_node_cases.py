"""The onnx package's node test cases through guestcompute.onnx on one
context: every case whose op types all have a rule passes, or binds to a
typed UnsupportedError (reported as skipped with its reason). Run with -s
to see the report (node_cases.py also prints it as a script)."""
import pytest

pytest.importorskip("onnx")

from node_cases import format_report, run_all  # noqa: E402


def test_every_supported_node_case_passes_or_is_refused_with_a_typed_error(modern_ctx):
    report = run_all(modern_ctx)
    print("\n" + format_report(report))
    assert not report["failed"], format_report(report)
    assert len(report["passed"]) >= 640     # the cases of the table's ops are found and run
