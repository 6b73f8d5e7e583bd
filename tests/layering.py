"""Counts what keeps the package layered (docs/architecture.md): import
loops, imports that run up a layer, function-level imports, reads of
another module's private names, commands recorded outside ``recording/``
into a command buffer the package did not allocate, and reads on a
planner's ``ctx`` of what ``ops/base.PlanContext`` does not list.

    python tests/layering.py [guestcompute] [-v]

It also counts private reads of the package's names in tests/, benchmarks/
and demos/, which must use public seams.

It reads the source with ``ast`` and imports nothing. An import edge is a
module-level ``import``/``from ... import`` of a package module (importing
``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``). A private read is
``x._name`` or ``from m import _name`` where ``_name`` (not a dunder) is
not defined in the reading module itself.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

# The layers, lowest first: a module may import its own layer and the ones
# below it. A package's modules share its layer.
LAYERS = (
    ("errors", "dtypes", "paths", "log", "version"),
    ("vk",),
    ("host",),
    ("spirv",),
    ("kernels",),
    ("device",),
    ("tensor", "tensor_imports", "image", "interop"),
    ("ops",),
    ("weights",),
    ("recording",),
    ("warmup", "context"),
    ("onnx",),
    ("testing", "bake", "cli", "__main__", ""),
)

# Function-level imports that are part of the design, not loop dodges: the
# lazy public face (importing the ``vulkan`` package loads the Vulkan
# loader, and ``guestcompute doctor`` must run without one) and the CLI,
# which imports a command's implementation only when that command runs.
LAZY_MODULES = ("guestcompute", "guestcompute.cli")


@dataclass
class Report:
    modules: dict = field(default_factory=dict)       # dotted name -> path
    edges: dict = field(default_factory=dict)         # dotted name -> set of dotted names
    loops: list = field(default_factory=list)
    upward: list = field(default_factory=list)        # (module, imported)
    function_imports: list = field(default_factory=list)   # (module, line, imported)
    private_reads: list = field(default_factory=list)      # (module, name, line)
    plan_context_reads: list = field(default_factory=list)  # (module, attribute, line)


def layer_of(module: str, top: str):
    parts = module.split(".")
    first = parts[1] if len(parts) > 1 else ""
    for i, names in enumerate(LAYERS):
        if first in names:
            return i
    return None


def _modules(pkg: Path) -> dict:
    out = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _defined_names(tree: ast.AST) -> set:
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            names.update(a.arg for a in n.args.args + n.args.kwonlyargs) if not isinstance(n, ast.ClassDef) else None
        targets = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
            targets = [n.target]
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Attribute):
                    names.add(x.attr)
                elif isinstance(x, ast.Name):
                    names.add(x.id)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            names.add(n.value)      # __slots__ entries
    return names


def protocol_names(pkg: Path, name: str) -> frozenset:
    """What protocol class ``name`` in ops/base.py lists (PlanContext,
    PlanDevice): its annotated attributes and its methods."""
    base = pkg / "ops" / "base.py"
    tree = ast.parse(base.read_text(), str(base)) if base.exists() else ast.Module(body=[], type_ignores=[])
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    names.add(item.name)
    return frozenset(names)


def _unlisted(n: ast.AST, context: frozenset, device: frozenset):
    """``ctx.x`` with x not in ``context``, or ``ctx.device.y`` with y not
    in ``device``: the name read, else None."""
    if not isinstance(n, ast.Attribute):
        return None
    if isinstance(n.value, ast.Name) and n.value.id == "ctx":
        return None if n.attr in context else n.attr
    inner = n.value
    if (isinstance(inner, ast.Attribute) and inner.attr == "device" and isinstance(inner.value, ast.Name)
            and inner.value.id == "ctx" and n.attr not in device):
        return f"device.{n.attr}"
    return None


def plan_context_reads(module: str, tree: ast.AST, context: frozenset, device: frozenset) -> list:
    """(module, attribute, line) for every read on ``ctx`` that PlanContext
    (or on ``ctx.device`` that PlanDevice) does not list, in a function
    whose first parameter is ``ctx`` (planners and the helpers they pass it
    to), nested functions included."""
    found = set()
    for fn in ast.walk(tree):
        params = getattr(getattr(fn, "args", None), "args", None)
        if not isinstance(fn, (ast.FunctionDef, ast.Lambda)) or not params or params[0].arg != "ctx":
            continue
        for n in ast.walk(fn):
            name = _unlisted(n, context, device)
            if name:
                found.add((module, name, n.lineno))
    return sorted(found)


def analyse(pkg_dir) -> Report:
    pkg = Path(pkg_dir)
    top = pkg.name
    report = Report()
    mods = _modules(pkg)
    report.modules = {m: p for m, (p, _) in mods.items()}
    report.edges = {m: set() for m in mods}
    plan_context = protocol_names(pkg, "PlanContext"), protocol_names(pkg, "PlanDevice")
    for module, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        defined = _defined_names(tree)
        if module.startswith(f"{top}.ops."):
            report.plan_context_reads += plan_context_reads(module, tree, *plan_context)

        def visit(node, in_function: bool):
            for child in ast.iter_child_nodes(node):
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    targets = []
                    if isinstance(child, ast.ImportFrom):
                        base = _resolve(module, is_pkg, child)
                        for alias in child.names:
                            full = f"{base}.{alias.name}"
                            targets.append(full if full in mods else base)
                            if alias.name.startswith("_") and not alias.name.startswith("__"):
                                report.private_reads.append((module, alias.name, child.lineno))
                    else:
                        targets = [a.name for a in child.names]
                    targets = [t for t in targets if t.split(".")[0] == top]
                    if targets and in_function:
                        report.function_imports.append((module, child.lineno, tuple(targets)))
                    elif not in_function:
                        report.edges[module].update(t for t in targets if t in mods and t != module)
                visit(child, inner)
        visit(tree, False)
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                    and n.attr not in defined):
                report.private_reads.append((module, n.attr, n.lineno))
    for module in list(report.edges):
        for target in list(report.edges[module]):
            parts = target.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent in mods and parent != module and not module.startswith(parent + "."):
                    report.edges[module].add(parent)
    report.loops = _strongly_connected(report.edges)
    for module, targets in report.edges.items():
        mine = layer_of(module, top)
        for target in targets:
            theirs = layer_of(target, top)
            if mine is not None and theirs is not None and theirs > mine:
                report.upward.append((module, target))
            elif module != top and (mine is None or theirs is None) and target != top:
                report.upward.append((module, target))      # a module no layer names
    report.function_imports = [f for f in report.function_imports if f[0] not in LAZY_MODULES]
    return report


def private_reads_in(folder) -> list:
    """(file, name, line) for every read of a private name (``x._name`` not
    defined in the same file, ``from any_module import _name``) in the code
    that only uses the package: tests, benchmarks, demos. A helper one test
    module shares with another is public (tests/refusals.py)."""
    found = []
    for path in sorted(Path(folder).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        defined = _defined_names(tree)
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                    and n.attr not in defined):
                found.append((str(path), n.attr, n.lineno))
            elif isinstance(n, ast.ImportFrom) and n.module != "__future__":
                found += [(str(path), a.name, n.lineno) for a in n.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


# Rule 9: only recording/ writes into a command buffer it did not allocate.
# vkCmd* calls and reads of ``.command_buffer`` (the host's buffer, through
# a recorder) belong in these places; elsewhere only in the functions named
# below, each recording into a command buffer allocated for it.
RECORDING_PLACES = ("recording", "vk.command_stream")
OWN_COMMAND_BUFFERS = {
    "device.transfers:Transfers.init_images_now": "first image layouts, in a one-time buffer of submit_and_wait",
    "device.transfers:Transfers.read.copy": "a buffer read-back, in a one-time buffer of submit_and_wait",
    "device.transfers:Transfers.read_image.copy": "an image read-back, in a one-time buffer of submit_and_wait",
    "device.transfers:Transfers._copy_uploads": "uploads, in a one-time buffer of submit_and_wait",
    "device.transfers:Transfers._barrier": "a barrier of those one-time buffers",
    "device.transfers:Transfers._transition": "an image transition of those one-time buffers",
    "testing:HeadlessHost.fill_buffer": "the test host's own work, in its own command buffer",
    "testing:HeadlessHost.transition_image": "the test host's own work, in its own command buffer",
    "testing:HeadlessHost.clear_image": "the test host's own work, in its own command buffer",
}


def _records_commands(node: ast.AST):
    """What ``node`` does to a command buffer, if anything: the vkCmd* it
    calls (directly or through ``getattr``), or a ``.command_buffer`` read."""
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            name = str(node.args[1].value)
        return name if name.startswith("vkCmd") else None
    if isinstance(node, ast.Attribute) and node.attr == "command_buffer" and isinstance(node.ctx, ast.Load):
        return ".command_buffer"
    return None


def command_buffer_writes(pkg_dir) -> tuple:
    """([(module, function, what, line)] recorded outside the recording
    places and the allowlist, [allowlist entries that record nothing now])."""
    pkg = Path(pkg_dir)
    found, used = [], set()
    for module, (path, _) in _modules(pkg).items():
        inner = module.split(".", 1)[1] if "." in module else ""
        if any(inner == p or inner.startswith(p + ".") for p in RECORDING_PLACES):
            continue

        def visit(node, where):
            for child in ast.iter_child_nodes(node):
                what = _records_commands(child)
                if what is not None:
                    key = f"{inner}:{where}"
                    if key in OWN_COMMAND_BUFFERS:
                        used.add(key)
                    else:
                        found.append((module, where or "<module>", what, child.lineno))
                named = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                visit(child, (f"{where}.{child.name}" if where else child.name) if named else where)
        visit(ast.parse(path.read_text(), str(path)), "")
    return found, sorted(set(OWN_COMMAND_BUFFERS) - used)


def _strongly_connected(edges: dict) -> list:
    """Tarjan's algorithm: every cycle of imports, as a sorted list of modules."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            strong(v)
    return found


def main(argv) -> int:
    args = [a for a in argv if not a.startswith("-")]
    report = analyse(args[0] if args else Path(__file__).resolve().parents[1] / "guestcompute")
    verbose = "-v" in argv
    for title, items in (("import loops", report.loops), ("upward imports", report.upward),
                         ("function-level imports", report.function_imports),
                         ("cross-module private reads", report.private_reads),
                         ("planner reads outside PlanContext", report.plan_context_reads)):
        print(f"{title}: {len(items)}")
        if verbose:
            for item in items:
                print("   ", item)
    writes, unused = command_buffer_writes(args[0] if args else Path(__file__).resolve().parents[1] / "guestcompute")
    print(f"commands recorded outside recording/: {len(writes)} "
          f"(allowlisted functions: {len(OWN_COMMAND_BUFFERS) - len(unused)})")
    if verbose:
        for item in writes:
            print("   ", item)
        for key in unused:
            print("    allowlisted but records nothing now (drop it):", key)
    root = Path(__file__).resolve().parents[1]
    for folder in ("tests", "benchmarks", "demos"):
        reads = private_reads_in(root / folder)
        print(f"private reads in {folder}/: {len(reads)}")
        if verbose:
            for item in reads:
                print("   ", item)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
