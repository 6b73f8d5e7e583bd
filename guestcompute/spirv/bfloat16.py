"""bfloat16 cooperative matrices from GLSL that no compiler here can write.

VK_KHR_shader_bfloat16 gives SPIR-V a 16-bit float with bfloat16's
encoding (SPV_KHR_bfloat16: ``OpTypeFloat 16 BFloat16KHR``), and tensor
cores multiply such matrices at float16's rate with float32's range. The
glslang that bakes the kernels (13) has no GLSL name for it, so a kernel
that wants bfloat16 fragments is written with float16_t ones, holds the
line :data:`MARK`, and its SPIR-V is rewritten by :func:`retype`: every
cooperative-matrix type of the 16-bit float takes a new bfloat16 scalar
instead, while the 16-bit float itself stays (float16 tensors, read and
written as before, keep their type). Loads, stores, products and
conversions of those matrices then mean bfloat16; a kernel so written must
not touch their elements (SPV_KHR_bfloat16 has no bfloat16 arithmetic
outside cooperative matrices) and must lay their bits out as bfloat16
where it packs them by hand.
"""
from __future__ import annotations

import struct

from .module import HEADER_WORDS, OP_CAPABILITY, OP_TYPE_FLOAT, SpirvError, decode_words

MARK = "// float16_t cooperative matrices below are bfloat16 (spirv/bfloat16.py)"

_OP_EXTENSION, _OP_TYPE_COOPMAT_KHR = 10, 4456
BFLOAT16_TYPE, BFLOAT16_COOPERATIVE_MATRIX = 5116, 5118     # SPIR-V capabilities of SPV_KHR_bfloat16
_BFLOAT16_ENCODING = 0                                      # FPEncoding BFloat16KHR
EXTENSION = "SPV_KHR_bfloat16"


def _words(text: str) -> list:
    raw = text.encode() + b"\0"
    raw += bytes(-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def _instruction(opcode: int, operands: list) -> list:
    return [((1 + len(operands)) << 16) | opcode] + operands


def retype(spirv: bytes) -> bytes:
    """``spirv`` with its 16-bit-float cooperative matrices made bfloat16
    ones: a bfloat16 scalar type declared after the 16-bit float, the
    matrices' component type pointed at it, and the two capabilities and
    the extension declared. SpirvError (a ValueError) for bytes that are
    no module, ValueError for a module with no such matrix (then the
    kernel did not need this)."""
    try:
        words = list(decode_words(spirv))
    except SpirvError as e:
        raise SpirvError(f"not a SPIR-V module: {e}") from None
    bound = words[3]
    new_id = bound
    out, half, retyped, declared = words[:HEADER_WORDS], None, 0, False
    i = HEADER_WORDS
    while i < len(words):
        opcode, count = words[i] & 0xFFFF, words[i] >> 16
        ins = words[i:i + count]
        if not declared and opcode != OP_CAPABILITY:
            for capability in (BFLOAT16_TYPE, BFLOAT16_COOPERATIVE_MATRIX):
                out += _instruction(OP_CAPABILITY, [capability])
            out += _instruction(_OP_EXTENSION, _words(EXTENSION))
            declared = True
        if opcode == _OP_TYPE_COOPMAT_KHR and ins[2] == half:
            ins = ins[:2] + [new_id] + ins[3:]
            retyped += 1
        out += ins
        if opcode == OP_TYPE_FLOAT and count == 3 and ins[2] == 16:
            half = ins[1]
            out += _instruction(OP_TYPE_FLOAT, [new_id, 16, _BFLOAT16_ENCODING])
        i += count
    if not retyped:
        raise ValueError("the module has no cooperative matrix of 16-bit floats to make bfloat16")
    out[3] = bound + 1
    return struct.pack(f"<{len(out)}I", *out)
