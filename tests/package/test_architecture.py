"""The package stays layered (docs/architecture.md): imports only go down,
no import loop, no function-level import outside the documented lazy
modules, no module reads another module's private names, only
``recording/`` records into a command buffer the package did not allocate,
and planners read only what ops/base.PlanContext lists of their ``ctx``."""
import warnings
from pathlib import Path

import pytest

from layering import LAYERS, analyse, command_buffer_writes, layer_of, private_reads_in

PACKAGE = Path(__file__).resolve().parents[2] / "guestcompute"
REPORT = analyse(PACKAGE)


def test_every_module_belongs_to_a_layer():
    unplaced = [m for m in REPORT.modules if layer_of(m, "guestcompute") is None]
    assert not unplaced, f"add these modules to a layer in tests/layering.py LAYERS: {unplaced}"


def test_imports_form_no_loop():
    assert REPORT.loops == []


def test_imports_only_go_down():
    assert REPORT.upward == []


def test_no_function_level_imports():
    assert REPORT.function_imports == []


def test_no_module_reads_another_modules_private_names():
    assert REPORT.private_reads == []


def test_planners_read_only_what_plan_context_lists():
    assert REPORT.plan_context_reads == []


def test_the_plan_context_counter_sees_a_read_it_does_not_list(tmp_path):
    ops = tmp_path / "guestcompute" / "ops"
    ops.mkdir(parents=True)
    (ops.parent / "__init__.py").write_text("")
    (ops / "__init__.py").write_text("")
    (ops / "base.py").write_text("from typing import Protocol\n\n\nclass PlanDevice(Protocol):\n"
                                 "    def check_open(self): ...\n\n\nclass PlanContext(Protocol):\n"
                                 "    limits: object\n    device: PlanDevice\n\n    def empty(self, shape): ...\n")
    (ops / "plan.py").write_text("def plan(ctx, x):\n    n = ctx.limits.max_workgroup_count\n"
                                 "    ctx.device.check_open()\n    ctx.device.transfers.upload(x)\n"
                                 "    return ctx.empty(x), ctx.submitter, (lambda: ctx.queue)\n")
    reads = analyse(ops.parent).plan_context_reads
    assert [(attr, line) for _, attr, line in reads] == [("device.transfers", 4), ("queue", 5), ("submitter", 5)]


@pytest.mark.parametrize("folder", ["tests", "benchmarks", "demos"])
def test_code_outside_the_package_uses_public_seams(folder):
    assert private_reads_in(PACKAGE.parent / folder) == []


@pytest.mark.parametrize("source,expected", [
    ("import guestcompute.ops\n", {"loops": 1}),
    ("def f():\n    from . import ops\n", {"function_imports": 1}),
    ("def f(x):\n    return x._hidden\n", {"private_reads": 1}),
])
def test_the_counter_sees_each_kind_of_breach(tmp_path, source, expected):
    """A tiny package with one breach of each rule: the counter must see it
    (so the zero counts above are not a counter that sees nothing)."""
    pkg = tmp_path / "guestcompute"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("from .. import errors\n")
    target = pkg / "ops" / "plan.py"
    target.write_text("from ..errors import *\n")
    if "loops" in expected:
        (pkg / "errors.py").write_text(source)       # errors -> ops -> errors
    else:
        target.write_text(source)
    report = analyse(pkg)
    counts = {"loops": len(report.loops), "function_imports": len(report.function_imports),
              "private_reads": len(report.private_reads)}
    for key, value in expected.items():
        assert counts[key] == value, (key, report)
    if "loops" in expected:
        assert ("guestcompute.errors", "guestcompute.ops") in report.upward
    assert LAYERS[0][0] == "errors"


def test_the_outside_counter_sees_a_private_read(tmp_path):
    (tmp_path / "test_x.py").write_text("from guestcompute.ops import _hidden\n\ndef f(ctx):\n"
                                        "    return ctx._fns\n")
    assert [(name, line) for _, name, line in private_reads_in(tmp_path)] == [("_hidden", 1), ("_fns", 4)]


def test_only_recording_writes_into_command_buffers_it_did_not_allocate():
    writes, unused = command_buffer_writes(PACKAGE)
    if unused:
        warnings.warn(f"allowlisted in tests/layering.py OWN_COMMAND_BUFFERS but recording nothing now "
                      f"(drop them): {unused}", stacklevel=1)
    assert writes == [], ("record into the host's command buffer only from recording/; a function that "
                          "records into a command buffer it allocated goes into OWN_COMMAND_BUFFERS")


def test_the_command_counter_sees_each_way_of_recording(tmp_path):
    """vkCmd* calls (direct, through the vulkan module or getattr) and
    ``.command_buffer`` reads outside recording/ are seen; the same inside
    recording/ or vk/command_stream.py are not."""
    pkg = tmp_path / "guestcompute"
    for folder in ("ops", "recording", "vk"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    body = ("def plan(rec, fns, vk):\n    fns.vkCmdDispatch(rec.command_buffer, 1, 1, 1)\n"
            "    vk.vkCmdFillBuffer(None, 0, 0, 4, 0)\n    getattr(fns, 'vkCmdCopyBuffer')(None)\n")
    for where in ("ops/plan.py", "recording/encoder.py", "vk/command_stream.py"):
        (pkg / where).write_text(body)
    writes, _ = command_buffer_writes(pkg)
    assert sorted((m, f, what) for m, f, what, _ in writes) == [
        ("guestcompute.ops.plan", "plan", w) for w in
        (".command_buffer", "vkCmdCopyBuffer", "vkCmdDispatch", "vkCmdFillBuffer")]
