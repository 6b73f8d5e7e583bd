"""Every op declares, where it is registered, how it runs on tensors one
kernel binding cannot reach (``@op(name, windows=...)``); ops/windows.py
keeps no list of names of its own."""
import re
from pathlib import Path

import pytest

import guestcompute.ops  # noqa: F401  (registers every op)
from guestcompute.ops.base import op, op_windows, registered_ops
from guestcompute.ops.windows import POINTWISE

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integration.md"


def test_registering_an_op_without_its_windows_trait_is_an_error():
    with pytest.raises(TypeError):
        op("an_op_that_forgot")
    with pytest.raises(TypeError, match="windows"):
        op("an_op_with_a_name_for_a_trait", windows="pointwise")
    assert "an_op_that_forgot" not in registered_ops()


def test_every_registered_op_declared_its_trait():
    ops = registered_ops()
    assert len(ops) > 50
    for name in ops:
        trait = op_windows(name)                  # KeyError for an op registered without one
        assert trait is None or callable(trait), name


def test_the_ops_that_run_in_windows_are_those_the_docs_list():
    text = DOCS.read_text()
    table = text[text.index("What runs in windows:"):text.index("Everything else —")]
    documented = {w for cell in re.findall(r"`([^`]+)`", table) for w in cell.split()} & set(registered_ops())
    declared = {name for name in registered_ops() if op_windows(name) is not None}
    assert declared == documented
    assert op_windows("add") is POINTWISE and op_windows("sort") is None
