"""One pass over a SPIR-V module's instruction stream: the numbers of the
opcodes, decorations and storage classes the reflection reads, the word
decoding (either byte order), and :class:`SpirvModule`, the tables the
pass builds (names, entry point, execution modes, capabilities, types,
constants, variables, decorations) with their lookups.

Anything malformed that the reflection has to look at raises
:class:`SpirvError`; parts of the module it does not need are skipped
without being validated (run ``spirv-val`` for that).
"""
from __future__ import annotations

import struct

from ..errors import KernelError


# A KernelError so callers can catch every bad-kernel failure in one place;
# also a ValueError because malformed bytecode is a bad argument value.
class SpirvError(KernelError, ValueError):
    """The bytes are not a SPIR-V module this reflection can read."""


MAGIC = 0x07230203
HEADER_WORDS = 5

# Opcodes
OP_NAME = 5
OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_CAPABILITY = 17
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_MATRIX = 24
OP_TYPE_IMAGE = 25
OP_TYPE_SAMPLER = 26
OP_TYPE_SAMPLED_IMAGE = 27
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_CONSTANT_TRUE = 41
OP_CONSTANT_FALSE = 42
OP_CONSTANT = 43
OP_CONSTANT_COMPOSITE = 44
OP_SPEC_CONSTANT_TRUE = 48
OP_SPEC_CONSTANT_FALSE = 49
OP_SPEC_CONSTANT = 50
OP_SPEC_CONSTANT_COMPOSITE = 51
OP_SPEC_CONSTANT_OP = 52
OP_VARIABLE = 59
OP_COMPOSITE_EXTRACT = 81
OP_DECORATE = 71
OP_MEMBER_DECORATE = 72
OP_DECORATION_GROUP = 73
OP_GROUP_DECORATE = 74
OP_GROUP_MEMBER_DECORATE = 75
OP_EXECUTION_MODE_ID = 331
OP_TYPE_ACCELERATION_STRUCTURE = 5341

TYPE_OPS = {
    OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR,
    OP_TYPE_MATRIX, OP_TYPE_IMAGE, OP_TYPE_SAMPLER, OP_TYPE_SAMPLED_IMAGE,
    OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER,
    OP_TYPE_ACCELERATION_STRUCTURE,
}
CONSTANT_OPS = {
    OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT, OP_CONSTANT_COMPOSITE,
    OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT,
    OP_SPEC_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_OP,
}

# Fewest operand words (after the opcode word) each handled opcode must have,
# so the handlers below can index operands without further checks.
MIN_OPERANDS = {
    OP_NAME: 2, OP_ENTRY_POINT: 3, OP_EXECUTION_MODE: 2, OP_CAPABILITY: 1,
    OP_TYPE_BOOL: 1, OP_TYPE_INT: 3, OP_TYPE_FLOAT: 2, OP_TYPE_VECTOR: 3,
    OP_TYPE_MATRIX: 3, OP_TYPE_IMAGE: 8, OP_TYPE_SAMPLER: 1,
    OP_TYPE_SAMPLED_IMAGE: 2, OP_TYPE_ARRAY: 3, OP_TYPE_RUNTIME_ARRAY: 2,
    OP_TYPE_STRUCT: 1, OP_TYPE_POINTER: 3, OP_CONSTANT_TRUE: 2,
    OP_CONSTANT_FALSE: 2, OP_CONSTANT: 3, OP_CONSTANT_COMPOSITE: 2,
    OP_SPEC_CONSTANT_TRUE: 2, OP_SPEC_CONSTANT_FALSE: 2, OP_SPEC_CONSTANT: 3,
    OP_SPEC_CONSTANT_COMPOSITE: 2, OP_SPEC_CONSTANT_OP: 3, OP_VARIABLE: 3,
    OP_DECORATE: 2, OP_MEMBER_DECORATE: 3, OP_DECORATION_GROUP: 1,
    OP_GROUP_DECORATE: 1, OP_GROUP_MEMBER_DECORATE: 1,
    OP_EXECUTION_MODE_ID: 2, OP_TYPE_ACCELERATION_STRUCTURE: 1,
}

# Decorations
DEC_SPEC_ID = 1
DEC_BLOCK = 2
DEC_BUFFER_BLOCK = 3
DEC_ROW_MAJOR = 4
DEC_ARRAY_STRIDE = 6
DEC_MATRIX_STRIDE = 7
DEC_BUILTIN = 11
DEC_NON_WRITABLE = 24
DEC_NON_READABLE = 25
DEC_BINDING = 33
DEC_DESCRIPTOR_SET = 34
DEC_OFFSET = 35

BUILTIN_WORKGROUP_SIZE = 25

# Storage classes
SC_UNIFORM_CONSTANT = 0
SC_UNIFORM = 2
SC_WORKGROUP = 4
SC_PUSH_CONSTANT = 9
SC_STORAGE_BUFFER = 12
SC_PHYSICAL_STORAGE_BUFFER = 5349

CAP_WORKGROUP_EXPLICIT_LAYOUT = 4428

MODEL_GLCOMPUTE = 5
MODE_LOCAL_SIZE = 17
MODE_LOCAL_SIZE_ID = 38

DIM_BUFFER = 5
# SPIR-V ImageFormat -> the GLSL layout qualifier (the ones guestcompute's formats use).
IMAGE_FORMATS = {0: "", 1: "rgba32f", 2: "rgba16f", 3: "r32f", 4: "rgba8", 7: "rg16f", 8: "r11f_g11f_b10f",
                  11: "rgb10_a2", 15: "r8", 33: "r32ui"}
DIM_SUBPASS_DATA = 6


def decode_words(spirv) -> tuple[int, ...]:
    data = bytes(memoryview(spirv))
    if len(data) % 4:
        raise SpirvError(f"length {len(data)} bytes is not a multiple of 4")
    if len(data) < HEADER_WORDS * 4:
        raise SpirvError(
            f"module is {len(data)} bytes, shorter than the {HEADER_WORDS * 4}-byte header")
    # The magic number tells the byte order the module was written in.
    for order in "<>":
        if struct.unpack_from(order + "I", data)[0] == MAGIC:
            return struct.unpack(f"{order}{len(data) // 4}I", data)
    raise SpirvError(
        f"bad magic number 0x{struct.unpack_from('<I', data)[0]:08x} "
        f"(expected 0x{MAGIC:08x} in either byte order)")


def literal_string(words, what: str, strict: bool = False) -> str:
    """A nul-terminated literal string packed little-end-first into words."""
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    end = raw.find(b"\0")
    if end < 0:
        raise SpirvError(f"unterminated string in {what}")
    try:
        return raw[:end].decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise SpirvError(f"{what} string is not valid UTF-8") from exc


class SpirvModule:
    """The tables of one pass over the instruction stream."""

    def __init__(self, words: tuple[int, ...]):
        self.names: dict[int, str] = {}
        self.entry: tuple[int, str] | None = None  # (function id, name)
        self.modes: list[tuple[int, int, tuple[int, ...]]] = []  # (entry, mode, operands)
        self.capabilities: list[int] = []
        self.types: dict[int, tuple[int, tuple[int, ...]]] = {}  # id -> (opcode, operands)
        self.constants: dict[int, tuple[int, tuple[int, ...]]] = {}
        self.variables: list[tuple[int, int, int]] = []  # (id, pointer type, storage class)
        self.decorations: dict[int, dict[int, tuple[int, ...]]] = {}
        self.member_decorations: dict[int, dict[int, dict[int, tuple[int, ...]]]] = {}
        self._group_targets: list[tuple[int, int, int | None]] = []
        self._parse(words)
        self._apply_groups()

    def _parse(self, words):
        pos, end = HEADER_WORDS, len(words)
        while pos < end:
            count, op = words[pos] >> 16, words[pos] & 0xFFFF
            if count == 0:
                raise SpirvError(f"instruction at word {pos} has a word count of 0")
            if pos + count > end:
                raise SpirvError(
                    f"instruction (opcode {op}) at word {pos} has word count {count}, "
                    f"overflowing the module's {end} words")
            ops = words[pos + 1:pos + count]
            need = MIN_OPERANDS.get(op)
            if need is not None and len(ops) < need:
                raise SpirvError(
                    f"instruction (opcode {op}) at word {pos} has {len(ops)} operand "
                    f"words, needs at least {need}")
            self._handle(op, ops)
            pos += count

    def _handle(self, op, ops):
        if op == OP_NAME:
            self.names[ops[0]] = literal_string(ops[1:], "OpName")
        elif op == OP_ENTRY_POINT:
            # The first GLCompute entry point is the kernel; others are ignored.
            if ops[0] == MODEL_GLCOMPUTE and self.entry is None:
                self.entry = (ops[1], literal_string(ops[2:], "OpEntryPoint", strict=True))
        elif op in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID):
            self.modes.append((ops[0], ops[1], ops[2:]))
        elif op == OP_CAPABILITY:
            if ops[0] not in self.capabilities:
                self.capabilities.append(ops[0])
        elif op in TYPE_OPS:
            self.types[ops[0]] = (op, ops[1:])
        elif op in CONSTANT_OPS:
            self.constants[ops[1]] = (op, ops)
        elif op == OP_VARIABLE:
            self.variables.append((ops[1], ops[0], ops[2]))
        elif op == OP_DECORATE:
            self.decorations.setdefault(ops[0], {})[ops[1]] = ops[2:]
        elif op == OP_MEMBER_DECORATE:
            members = self.member_decorations.setdefault(ops[0], {})
            members.setdefault(ops[1], {})[ops[2]] = ops[3:]
        elif op == OP_GROUP_DECORATE:
            self._group_targets.extend((ops[0], t, None) for t in ops[1:])
        elif op == OP_GROUP_MEMBER_DECORATE:
            pairs = ops[1:]
            if len(pairs) % 2:
                raise SpirvError("OpGroupMemberDecorate has an odd number of target operands")
            self._group_targets.extend(
                (ops[0], pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2))

    def _apply_groups(self):
        # Decoration groups are legacy but legal; fold them into the plain
        # tables so the rest of the reflection never has to know about them.
        for group, target, member in self._group_targets:
            decos = self.decorations.get(group, {})
            if member is None:
                self.decorations.setdefault(target, {}).update(decos)
            else:
                members = self.member_decorations.setdefault(target, {})
                members.setdefault(member, {}).update(decos)

    # -- lookups -----------------------------------------------------------

    def deco(self, target: int, deco: int, member: int | None = None) -> int | None:
        """The first literal of a decoration, None if it is absent."""
        if member is None:
            table = self.decorations.get(target, {})
        else:
            table = self.member_decorations.get(target, {}).get(member, {})
        if deco not in table:
            return None
        if not table[deco]:
            raise SpirvError(f"decoration {deco} on %{target} is missing its literal")
        return table[deco][0]

    def has_deco(self, target: int, deco: int, member: int | None = None) -> bool:
        if member is None:
            return deco in self.decorations.get(target, {})
        return deco in self.member_decorations.get(target, {}).get(member, {})

    def type(self, tid: int) -> tuple[int, tuple[int, ...]]:
        try:
            return self.types[tid]
        except KeyError:
            raise SpirvError(f"%{tid} is used as a type but is not one") from None

    def constant(self, cid: int) -> tuple[int, tuple[int, ...]]:
        try:
            return self.constants[cid]
        except KeyError:
            raise SpirvError(f"%{cid} is used as a constant but is not one") from None

    def scalar_value(self, cid: int) -> int | None:
        """Value (default value for spec constants) of an integer constant;
        None if it is computed by OpSpecConstantOp."""
        op, ops = self.constant(cid)
        if op in (OP_CONSTANT, OP_SPEC_CONSTANT):
            value = ops[2]
            if len(ops) > 3:  # 64-bit literals are low word first
                value |= ops[3] << 32
            return value
        if op == OP_SPEC_CONSTANT_OP:
            return None
        raise SpirvError(f"%{cid} is not an integer constant")

    def strip_arrays(self, tid: int) -> tuple[int, tuple[int, ...], int]:
        """Element type of (nested) arrays of descriptors."""
        seen = set()
        op, ops = self.type(tid)
        while op in (OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY):
            if tid in seen:
                raise SpirvError(f"array type %{tid} contains itself")
            seen.add(tid)
            tid = ops[0]
            op, ops = self.type(tid)
        return op, ops, tid
