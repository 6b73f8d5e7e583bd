"""The public surface type-checks: the package ships ``py.typed``, every
name in ``guestcompute.__all__`` is visible to a type checker (the lazy
face imports them eagerly under TYPE_CHECKING), and mypy reports a
misspelt op, a wrong keyword and a misspelt Context method in user code.

mypy runs with ``--follow-imports=silent``: what a user's mypy does with an
installed package — their code is checked against our signatures, our own
internals are not re-checked."""
import textwrap
from pathlib import Path

import pytest

import guestcompute as gc

mypy_api = pytest.importorskip("mypy.api", reason="mypy is part of the test extra")

ROOT = Path(__file__).resolve().parents[2]

GOOD = '''
import numpy as np
import guestcompute as gc

def frame(ctx: gc.Context, cmd: object) -> np.ndarray:
    a: gc.Tensor = ctx.tensor(np.ones(8, np.float32))
    b = ctx.empty((8,), "float32")
    with ctx.record(cmd) as rec:
        rec.add(a, a, out=b)
        rec.softmax(b, axis=-1)
    prog: gc.Program = ctx.program(lambda r: r.copy(a, out=b))
    kernel: gc.UserKernel = ctx.kernel("void main() {}")
    report: gc.WarmupReport = ctx.warmup(["map"])
    handed: gc.Submission = ctx.submit(lambda r: r.fill(b, 0.0))
    spec: gc.KernelSpec = kernel.spec
    access: gc.HostAccess = gc.HostAccess(stages=1, access=1)
    return b.numpy()
'''

BAD = '''
import guestcompute as gc

def frame(ctx: gc.Context, cmd: object) -> None:
    a = ctx.tensr([1.0])
    with ctx.record(cmd) as rec:
        rec.ad(a, a)
        rec.add(a, a, ot=a)
'''


def _mypy(tmp_path, source: str):
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent(source))
    out, err, status = mypy_api.run([
        "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
        "--cache-dir", str(tmp_path / "mypy-cache"), str(script)])
    return out + err, status


def test_the_package_ships_py_typed():
    assert (Path(gc.__file__).parent / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject


def test_correct_user_code_passes_mypy(tmp_path):
    out, status = _mypy(tmp_path, GOOD)
    assert status == 0, out


def test_mypy_reports_mistakes_against_the_public_surface(tmp_path):
    out, status = _mypy(tmp_path, BAD)
    assert status == 1, out
    assert '"Context" has no attribute "tensr"' in out
    assert '"Recorder" has no attribute "ad"' in out
    assert 'Unexpected keyword argument "ot" for "add"' in out


def test_every_public_name_is_visible_to_type_checkers():
    source = (Path(gc.__file__)).read_text()
    block = source.split("if TYPE_CHECKING:", 1)[1].split("\n\n", 1)[0]
    for name in gc.__all__:
        assert name in block, f"{name} is exported but not imported under TYPE_CHECKING"
