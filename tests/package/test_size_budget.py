"""The size budget (docs/architecture.md, rule 15): no module of the package
over 600 lines and no function over 80, read with ``ast`` (nothing is
imported). A file or function over the limit would be listed below with
the most lines it may have (it may shrink, never grow; one that shrank
below its allowance passes, with a warning that says to lower or drop the
number); none is over today. Generated stubs (``.pyi``) are out of
scope."""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "guestcompute"
FILE_LINES = 600
FUNCTION_LINES = 80

# path (relative to the package) -> at most this many lines
FILES_OVER = {}
# "path:qualified name" -> at most this many lines
FUNCTIONS_OVER = {}


def line_count(text: str) -> int:
    """Physical lines, as ``wc -l`` counts them (a last line without a newline counts too)."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def function_lengths(tree: ast.AST) -> dict:
    """Qualified name -> lines from ``def`` to the last line, for every
    function and method (docstring and comments inside included; a nested
    function counts on its own and inside its parent). Decorators are not
    counted."""
    out = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    length = child.end_lineno - child.lineno + 1
                    out[name] = max(length, out.get(name, 0))    # a redefinition: the longer one
                visit(child, name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return out


def measure(package: Path) -> tuple:
    """({path: lines} of every module, {"path:function": lines} of every function)."""
    files, functions = {}, {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        files[rel] = line_count(text)
        for name, length in function_lengths(ast.parse(text, str(path))).items():
            functions[f"{rel}:{name}"] = length
    return files, functions


def over_budget(sizes: dict, limit: int, allowed: dict) -> tuple:
    """(breaches, allowances that can be lowered) of ``sizes`` against
    ``limit`` and the ``allowed`` maxima of the listed offenders."""
    breaches, lower = [], []
    for name, size in sorted(sizes.items()):
        cap = allowed.get(name, limit)
        if size > cap:
            breaches.append(f"{name}: {size} lines (at most {cap})")
    for name, cap in sorted(allowed.items()):
        size = sizes.get(name)
        if size is None or size < cap:
            now = "gone" if size is None else f"{size} lines"
            lower.append(f"{name}: {now}, allowed {cap}")
    return breaches, lower


FILES, FUNCTIONS = measure(PACKAGE)


@pytest.mark.parametrize("sizes,limit,allowed,what", [
    (FILES, FILE_LINES, FILES_OVER, "file"),
    (FUNCTIONS, FUNCTION_LINES, FUNCTIONS_OVER, "function"),
], ids=["files", "functions"])
def test_nothing_grows_past_its_budget(sizes, limit, allowed, what):
    breaches, lower = over_budget(sizes, limit, allowed)
    print(f"{what}s over {limit} lines: {sum(s > limit for s in sizes.values())} "
          f"(allowlisted: {len(allowed)})")
    if lower:
        warnings.warn(f"these {what}s shrank: lower their allowance (or drop the entry) in "
                      f"tests/package/test_size_budget.py: " + "; ".join(lower), stacklevel=1)
    assert not breaches, (f"{what}s over budget (split them; an allowlisted {what} may only shrink): "
                          + "; ".join(breaches))


def test_the_budget_sees_a_long_function_and_a_long_file(tmp_path):
    """A tiny package with one long function in one long file: both
    counted, an allowance that covers them passes, one that is below fails,
    one above is only reported."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    (pkg / "big.py").write_text("class A:\n    @staticmethod\n    def f():\n" + body.replace("    ", "        ")
                                + "\n" * FILE_LINES)
    files, functions = measure(pkg)
    assert functions["big.py:A.f"] == FUNCTION_LINES + 1
    assert files["big.py"] == FUNCTION_LINES + FILE_LINES + 3
    assert len(over_budget(functions, FUNCTION_LINES, {})[0]) == 1
    assert len(over_budget(files, FILE_LINES, {})[0]) == 1
    assert over_budget(functions, FUNCTION_LINES, {"big.py:A.f": FUNCTION_LINES + 1}) == ([], [])
    assert over_budget(functions, FUNCTION_LINES, {"big.py:A.f": FUNCTION_LINES + 5})[1] != []
    assert over_budget(functions, FUNCTION_LINES, {"big.py:A.f": FUNCTION_LINES})[0] != []
