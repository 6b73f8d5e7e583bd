"""The recorder's op surface is static: every registered op is a method of
the Recorder class from import on, with the planner's signature (less
``ctx``) and docstring, and the checked-in stub says the same."""
import inspect
from pathlib import Path

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from guestcompute.recording import op_methods

STUB = Path(op_methods.__file__).with_suffix(".pyi")


def test_the_checked_in_stub_matches_the_registry():
    assert STUB.read_text() == op_methods.stub_source(), (
        "the op surface changed: regenerate the stub with `python -m guestcompute.recording.op_methods`")


def test_every_op_is_a_class_method_with_its_real_signature():
    ops = registered_ops()
    assert len(ops) > 40
    for name, planner in ops.items():
        method = gc.Recorder.__dict__.get(name) or op_methods.OpMethods.__dict__.get(name)
        assert method is not None, f"rec.{name} is not defined on the class"
        params = list(inspect.signature(method).parameters.values())
        expected = list(inspect.signature(planner).parameters.values())[1:]
        assert [p.name for p in params] == ["self"] + [p.name for p in expected], name
        assert [p.kind for p in params[1:]] == [p.kind for p in expected], name
        assert [p.default for p in params[1:]] == [p.default for p in expected], name
        assert method.__doc__.startswith((planner.__doc__ or "").rstrip()), name
        assert f"    def {name}(self" in STUB.read_text(), name


def test_help_shows_the_signature_and_docstring():
    text = inspect.getdoc(gc.Recorder.add)
    assert "a + b" in text
    assert str(inspect.signature(gc.Recorder.add)) == "(self, a, b, *, out=None)"


def test_a_misspelt_op_suggests_the_name(host, ctx):
    a = ctx.tensor([1.0, 2.0])
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        try:
            rec.ad(a, a)
        except gc.UnknownOperationError as e:
            assert "did you mean add" in str(e)
        else:
            raise AssertionError("rec.ad recorded something")
        assert not hasattr(rec, "no_such_op")
    host.submit_and_wait(cmd)
