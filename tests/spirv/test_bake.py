"""Baked SPIR-V: every built-in kernel ships precompiled, and the files are
exactly what the current sources compile to (a stale bake fails here: run
`make bake`)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from guestcompute.spirv import baked_files
from guestcompute.spirv.baked_files import BAKED_DIR
from guestcompute.spirv.compiler import compile_glsl, compile_source, glslc_path, needs_glslang, source_key
from guestcompute.errors import CompilerNotFoundError
from guestcompute import bake
from guestcompute.ops import all_specs

STALE = "the baked SPIR-V is stale: run `make bake` (or `guestcompute bake`)"


@pytest.fixture(scope="module")
def catalogue():
    return list(all_specs())


def test_every_catalogue_spec_has_baked_spirv(catalogue):
    missing = [f"{s.family} {s.key}" for s in catalogue
               if not baked_files.path(source_key(s.render(), s.target_env)).is_file()]
    assert not missing, f"{STALE}; {len(missing)} of {len(catalogue)} specs missing, e.g. {missing[:5]}"


def test_no_unused_baked_files_and_index_matches(catalogue):
    state = bake.stale()
    assert state == {"missing": [], "unused": []}, STALE
    index = bake.read_index()
    assert index.get("format") == bake.INDEX_FORMAT, STALE
    expected = {s.key: f"{source_key(s.render(), s.target_env)}.spvz" for s in catalogue}
    assert {k: v["file"] for k, v in index["kernels"].items()} == expected, STALE


def _sample(catalogue, per_family=3):
    """A few specs of every family (first, middle, last): a stale file
    anywhere in a family's templates shows up in all of its variants."""
    by_family = {}
    for s in catalogue:
        by_family.setdefault(s.family, []).append(s)
    picked = []
    for specs in by_family.values():
        idx = sorted({0, len(specs) // 2, len(specs) - 1})[:per_family]
        picked += [specs[i] for i in idx]
    return picked


def test_baked_spirv_equals_a_fresh_compile(catalogue):
    if shutil.which("glslc") is None:
        pytest.skip("glslc is not installed: cannot recompile to compare")
    baked_with = bake.read_index().get("compiler")
    if baked_with and baked_with != bake.glslc_version():
        pytest.skip(f"baked with {baked_with}, this machine has {bake.glslc_version()}: "
                    "byte equality only holds for one compiler version")
    specs = catalogue if os.environ.get("GUESTCOMPUTE_CHECK_ALL_BAKED") else _sample(catalogue)
    # Kernels that only glslangValidator 13+ compiles (the bake extra) are
    # compared where it is installed; their SPIR-V must still be baked.
    glslang = shutil.which("glslangValidator") is not None
    # Slang kernels are compared where the slangc release that baked them is installed.
    same_slangc = bake.read_index().get("slangc") not in (None, "unknown") and \
        bake.slangc_version() == bake.read_index().get("slangc")
    for s in specs:
        glsl = s.render()
        if s.language == "slang":
            path = baked_files.path(source_key(glsl, s.target_env))
            assert path.is_file(), STALE
            if same_slangc:
                assert baked_files.decode(path.read_bytes()) == compile_source(glsl, s.target_env), \
                    f"{s.family} {s.key}: baked SPIR-V differs from its source; {STALE}"
            continue
        if needs_glslang(glsl) and not glslang:
            assert baked_files.path(source_key(glsl, s.target_env)).is_file(), STALE
            continue
        path = baked_files.path(source_key(glsl, s.target_env))
        assert path.is_file(), STALE
        assert baked_files.decode(path.read_bytes()) == compile_source(glsl, s.target_env), \
            f"{s.family} {s.key}: baked SPIR-V differs from its source; {STALE}"


def test_bake_is_incremental_and_removes_unused(tmp_path, catalogue):
    specs = catalogue[:3]
    unused = "0" * 64 + baked_files.SUFFIX
    (tmp_path / unused).write_bytes(baked_files.encode(b"\x03\x02\x23\x07" + bytes(20)))   # no spec needs it
    (tmp_path / ("1" * 64 + ".spv")).write_bytes(b"\x03\x02\x23\x07" + bytes(20))   # index format 1's kind
    calls = []
    first = bake.bake(tmp_path, specs=specs, jobs=2, progress=lambda d, t: calls.append((d, t)))
    assert first.compiled == first.sources > 0 and first.kept == 0
    assert first.removed == [unused, "1" * 64 + ".spv"]
    assert calls[-1] == (first.sources, first.sources)
    for s in specs:
        path = baked_files.path(source_key(s.render(), s.target_env), tmp_path)
        assert len(path.read_bytes()) < len(baked_files.decode(path.read_bytes()))      # compressed
        assert baked_files.decode(path.read_bytes()) == compile_source(s.render(), s.target_env)
    index = json.loads((tmp_path / bake.INDEX_NAME).read_text())
    assert set(index["kernels"]) == {s.key for s in specs}
    assert index["kernels"][specs[0].key]["family"] == specs[0].family

    second = bake.bake(tmp_path, specs=specs)
    assert second.compiled == 0 and second.kept == first.sources and second.removed == []
    assert bake.stale(tmp_path, specs) == {"missing": [], "unused": []}

    # A damaged file is not "present": it is compiled again.
    victim = next(tmp_path.glob(f"*{baked_files.SUFFIX}"))
    victim.write_bytes(b"junk")
    assert bake.bake(tmp_path, specs=specs).compiled == 1
    assert baked_files.decode(victim.read_bytes())[:4] == b"\x03\x02\x23\x07"


def test_a_damaged_baked_file_holds_no_spirv():
    spirv = b"\x03\x02\x23\x07" + bytes(20)
    packed = baked_files.encode(spirv)
    assert baked_files.decode(packed) == spirv
    assert baked_files.decode(packed[:-3]) is None                    # truncated
    assert baked_files.decode(b"junk") is None                        # not zlib
    assert baked_files.decode(baked_files.encode(b"not spir-v at all")) is None
    assert baked_files.decode(packed + b"x") is None                  # something after the stream
    huge = baked_files.encode(b"\x03\x02\x23\x07" + bytes(baked_files.MAX_SPIRV_BYTES))
    assert baked_files.decode(huge) is None                           # past the size it decompresses


def test_missing_glslc_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))          # an empty directory: no glslc anywhere
    with pytest.raises(CompilerNotFoundError, match="apt-get install glslc"):
        glslc_path()
    with pytest.raises(CompilerNotFoundError, match="glslc"):
        compile_glsl("#version 450\nvoid main() {}\n")
    with pytest.raises(CompilerNotFoundError):
        bake.bake(tmp_path / "out", specs=[])


BUILTINS_WITHOUT_GLSLC = r"""
import json
import numpy as np
import guestcompute as gc
with gc.Context.create(validation=True) as ctx:
    a = np.arange(100, dtype=np.float32)
    ta, tb = ctx.tensor(a), ctx.tensor(a)
    out = ctx.run(lambda rec: rec.add(ta, tb)).numpy()
    stats = ctx.cache_stats()
    msgs = list(ctx.messenger.messages)
print(json.dumps({"ok": bool(np.array_equal(out, 2 * a)), "compiles": stats["spirv_compiles"],
                  "baked": stats["spirv_baked_hits"], "messages": msgs}))
"""


def test_builtins_need_no_compiler_at_runtime(tmp_path):
    if not baked_files.keys():
        pytest.fail(STALE)
    env = dict(os.environ, PATH=str(tmp_path), GUESTCOMPUTE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", BUILTINS_WITHOUT_GLSLC], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] and not result["messages"]
    assert result["compiles"] == 0 and result["baked"] >= 1


def _repeated_decorations(words) -> list:
    """(target, member, decoration) named twice by OpDecorate /
    OpMemberDecorate in one SPIR-V module (list of 32-bit words)."""
    seen, repeated, i = set(), [], 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == 71:        # OpDecorate target decoration ...
            key = (words[i + 1], None, words[i + 2])
        elif opcode == 72:      # OpMemberDecorate struct member decoration ...
            key = (words[i + 1], words[i + 2], words[i + 3])
        else:
            key = None
        if key is not None:
            if key in seen:
                repeated.append(key)
            seen.add(key)
        i += max(count, 1)
    return repeated


def test_no_baked_kernel_repeats_a_decoration():
    """Newer SPIR-V validators reject a member decorated twice (e.g. Coherent
    from both ``coherent`` and ``volatile``); older ones, as on some test
    machines, do not, so the baked files are checked here."""
    import array
    bad = []
    for path in sorted(BAKED_DIR.glob(f"*{baked_files.SUFFIX}")):
        words = array.array("I", baked_files.decode(path.read_bytes()))
        if words[0] != 0x07230203:
            continue
        if _repeated_decorations(words):
            bad.append(path.name)
    assert not bad, f"{len(bad)} baked kernels repeat a decoration, e.g. {bad[:3]}"
