"""Bake: compile every built-in kernel variant to SPIR-V shipped in the package.

Files are named by :func:`~guestcompute.spirv.compiler.source_key` of the
rendered GLSL (and target environment), exactly the key the runtime looks up
first, and hold the module compressed (spirv/baked_files.py); so a kernel
whose source changed simply has no baked file until the next bake — it can
never load stale code. ``index.json`` maps each spec's key to its file, for
people and for the staleness test.

Incremental: files already present are kept (their name is the hash of their
source, so they cannot be out of date); files no spec needs are removed.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .paths import atomic_write
from .spirv import baked_files
from .spirv.baked_files import BAKED_DIR
from .spirv.compiler import compile_source, glslc_path, source_key
from .spirv.slang import slangc_path
from .errors import CompilerNotFoundError, InvalidArgumentError, KernelError
from .ops import all_specs

INDEX_NAME = "index.json"
INDEX_FORMAT = 2         # 2: compressed files (baked_files.SUFFIX)


@dataclass
class BakeReport:
    out_dir: str
    specs: int            # catalogue specs
    sources: int          # distinct rendered sources (specs differing only in workgroup share one)
    compiled: int
    kept: int
    removed: list = field(default_factory=list)
    seconds: float = 0.0
    compiler: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def glslc_version() -> str:
    """First line of ``glslc --version`` (the shaderc release)."""
    proc = subprocess.run([glslc_path(), "--version"], capture_output=True, text=True)
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "unknown"


def slangc_version():
    """``slangc -v`` (the Slang release), or None without slangc."""
    try:
        exe = slangc_path()
    except CompilerNotFoundError:
        return None
    proc = subprocess.run([exe, "-v"], capture_output=True, text=True)
    said = (proc.stdout + proc.stderr).strip()
    return said.splitlines()[0] if said else "unknown"


def plan(specs) -> dict:
    """source key -> (glsl, target_env, [specs]) for every spec."""
    sources: dict = {}
    for spec in specs:
        glsl = spec.render()
        key = source_key(glsl, spec.target_env)
        sources.setdefault(key, (glsl, spec.target_env, []))[2].append(spec)
    return sources


def index_for(sources: dict, compiler: str, slangc: str = None) -> dict:
    """``slangc``: the Slang release that compiled the Slang kernels."""
    kernels = {}
    for key, (_, env, specs) in sources.items():
        for spec in specs:
            kernels[spec.key] = {"file": baked_files.path(key).name, "family": spec.family, "target_env": env}
    return {"format": INDEX_FORMAT, "compiler": compiler, "slangc": slangc,
            "kernels": dict(sorted(kernels.items()))}


def read_index(out_dir=None) -> dict:
    """The bake index, or {} when there is none (or it is unreadable)."""
    try:
        return json.loads((Path(out_dir or BAKED_DIR) / INDEX_NAME).read_text())
    except (OSError, ValueError):
        return {}


def stale(out_dir=None, specs=None) -> dict:
    """What a bake would change, without compiling: {"missing": [spec keys],
    "unused": [file names]}. Empty lists mean the bake is up to date."""
    out = Path(out_dir or BAKED_DIR)
    sources = plan(catalogue() if specs is None else specs)
    missing = sorted(s.key for key, (_, _, ss) in sources.items()
                     if not baked_files.path(key, out).is_file() for s in ss)
    present = baked_files.keys(out)
    return {"missing": missing, "unused": sorted(baked_files.path(k, out).name for k in present - set(sources))}


def bake(out_dir=None, specs=None, jobs=None, clean=True, force=False, progress=None) -> BakeReport:
    """Compile what is missing into ``out_dir`` (default: the package's
    kernels/baked), drop unused files when ``clean``, write the index.
    ``progress(done, total)`` follows the compiles. Needs glslc."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidArgumentError(f"jobs={jobs!r}: give a whole number of parallel compiles, at least 1 "
                                   "(or None for one per CPU)")
    t0 = time.perf_counter()
    out = Path(out_dir or BAKED_DIR)
    specs = list(catalogue() if specs is None else specs)
    sources = plan(specs)
    compiler = glslc_version()          # also fails early, naming the package, without glslc
    todo = [k for k in sources if force or not _valid(baked_files.path(k, out))]
    out.mkdir(parents=True, exist_ok=True)

    def build(key):
        glsl, env, family_specs = sources[key]
        try:
            data = compile_source(glsl, env)
        except KernelError as e:
            raise KernelError(f"baking {family_specs[0].family} kernel {family_specs[0].key}: {e}") from e
        atomic_write(baked_files.path(key, out), baked_files.encode(data))

    done = 0
    if progress is not None:
        progress(0, len(todo))
    # glslc runs as a subprocess, so threads compile in parallel.
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for _ in pool.map(build, todo):
            done += 1
            if progress is not None:
                progress(done, len(todo))
    removed = []
    if clean:
        unused = [baked_files.path(k, out) for k in sorted(baked_files.keys(out) - set(sources))]
        for path in unused + sorted(out.glob("*.spv")):      # *.spv: uncompressed files of index format 1
            path.unlink()
            removed.append(path.name)
    # The Slang release is recorded when it compiled something (else the
    # one recorded before stays: the files are still its output).
    slang_todo = any(sources[k][2][0].language == "slang" for k in todo)
    slangc = slangc_version() if slang_todo else read_index(out).get("slangc")
    atomic_write(out / INDEX_NAME, _index_text(index_for(sources, compiler, slangc)).encode())
    return BakeReport(out_dir=str(out), specs=len(specs), sources=len(sources), compiled=len(todo),
                      kept=len(sources) - len(todo), removed=removed,
                      seconds=time.perf_counter() - t0, compiler=compiler)


def _index_text(index: dict) -> str:
    """JSON with one kernel per line: stable, diff-friendly, no timestamps."""
    lines = [f'{{"format": {index["format"]}, "compiler": {json.dumps(index["compiler"])}, '
             f'"slangc": {json.dumps(index.get("slangc"))}, "kernels": {{']
    items = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in index["kernels"].items()]
    lines.append(",\n".join(items))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def _valid(path: Path) -> bool:
    try:
        return baked_files.decode(path.read_bytes()) is not None
    except OSError:
        return False


def catalogue():
    """The specs a full bake compiles (every built-in; a seam tests narrow)."""
    return all_specs()
