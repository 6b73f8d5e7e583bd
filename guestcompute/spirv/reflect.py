"""Minimal SPIR-V reflection for compute kernels.

Reads just enough of a SPIR-V module to build descriptor set layouts, push
constant ranges and specialization info for a compute pipeline:

* the first ``GLCompute`` entry point,
* every descriptor variable (``Uniform``, ``StorageBuffer`` and
  ``UniformConstant`` storage classes) with its set, binding and access
  decorations,
* the size of the push constant block,
* the workgroup size, whether literal or driven by specialization constants,
* the specialization constants and their scalar types,
* the declared capabilities,
* the bytes of ``Workgroup`` storage (GLSL ``shared``) the kernel declares.

Descriptor variables are taken from the whole module rather than from the
entry point's interface list: before SPIR-V 1.4 that list only names
``Input``/``Output`` variables, and a layout that is a superset of what the
kernel uses is still valid.

Anything malformed that the reflection has to look at raises
:class:`SpirvError`; parts of the module it does not need are skipped
without being validated (run ``spirv-val`` for that).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import KernelError

__all__ = ["SpirvError", "ReflectedBinding", "ReflectedImage", "ReflectedShader", "reflect",
           "workgroup_memory_size"]


# A KernelError so callers can catch every bad-kernel failure in one place;
# also a ValueError because malformed bytecode is a bad argument value.
class SpirvError(KernelError, ValueError):
    """The bytes are not a SPIR-V module this reflection can read."""


@dataclass(frozen=True)
class ReflectedBinding:
    set: int
    binding: int
    # "storage_buffer", "uniform_buffer", "storage_image", "sampled_image",
    # "combined_image_sampler", "sampler", "uniform_texel_buffer",
    # "storage_texel_buffer", "input_attachment", "acceleration_structure"
    # or "unknown"; callers reject the kinds they do not support.
    kind: str
    readonly: bool   # NonWritable on the variable or on every block member
    writeonly: bool  # NonReadable on the variable or on every block member
    name: str        # OpName of the variable, else of its block type, else ""
    # Images (storage, sampled, combined with a sampler): the SPIR-V Dim
    # (1 = 2D), Arrayed and MS operands, the format (GLSL qualifier name, ""
    # for Unknown) and the sampled component type ("float", "int", "uint").
    image: "ReflectedImage" = None


@dataclass(frozen=True)
class ReflectedImage:
    dim: int
    arrayed: bool
    multisampled: bool
    format: str
    component: str

    @property
    def is_2d(self) -> bool:
        return self.dim == 1 and not self.arrayed and not self.multisampled


@dataclass(frozen=True)
class ReflectedShader:
    entry_point: str
    bindings: tuple[ReflectedBinding, ...]  # sorted by (set, binding)
    push_constant_size: int
    # Literal workgroup size, or None when any component has a SpecId (the
    # real size is only known once the pipeline is specialized).
    local_size: tuple[int, int, int] | None
    # SpecId per component, None for components that are not specializable.
    local_size_spec_ids: tuple[int | None, int | None, int | None]
    spec_constants: dict[int, str]  # SpecId -> "int", "uint", "float", "bool", ...
    capabilities: tuple[int, ...]   # in declaration order, without repeats
    # The workgroup size if no specialization is applied (spec constants at
    # their defaults), so components that are not spec-driven stay known
    # even when ``local_size`` is None. None if a component is computed by
    # OpSpecConstantOp.
    local_size_default: tuple[int, int, int] | None = None
    # Bytes of Workgroup storage with specialization constants at their
    # defaults (see workgroup_memory_size for how it is counted).
    workgroup_memory_size: int = 0


MAGIC = 0x07230203
_HEADER_WORDS = 5

# Opcodes
_OP_NAME = 5
_OP_ENTRY_POINT = 15
_OP_EXECUTION_MODE = 16
_OP_CAPABILITY = 17
_OP_TYPE_BOOL = 20
_OP_TYPE_INT = 21
_OP_TYPE_FLOAT = 22
_OP_TYPE_VECTOR = 23
_OP_TYPE_MATRIX = 24
_OP_TYPE_IMAGE = 25
_OP_TYPE_SAMPLER = 26
_OP_TYPE_SAMPLED_IMAGE = 27
_OP_TYPE_ARRAY = 28
_OP_TYPE_RUNTIME_ARRAY = 29
_OP_TYPE_STRUCT = 30
_OP_TYPE_POINTER = 32
_OP_CONSTANT_TRUE = 41
_OP_CONSTANT_FALSE = 42
_OP_CONSTANT = 43
_OP_CONSTANT_COMPOSITE = 44
_OP_SPEC_CONSTANT_TRUE = 48
_OP_SPEC_CONSTANT_FALSE = 49
_OP_SPEC_CONSTANT = 50
_OP_SPEC_CONSTANT_COMPOSITE = 51
_OP_SPEC_CONSTANT_OP = 52
_OP_VARIABLE = 59
_OP_COMPOSITE_EXTRACT = 81
_OP_DECORATE = 71
_OP_MEMBER_DECORATE = 72
_OP_DECORATION_GROUP = 73
_OP_GROUP_DECORATE = 74
_OP_GROUP_MEMBER_DECORATE = 75
_OP_EXECUTION_MODE_ID = 331
_OP_TYPE_ACCELERATION_STRUCTURE = 5341

_TYPE_OPS = {
    _OP_TYPE_BOOL, _OP_TYPE_INT, _OP_TYPE_FLOAT, _OP_TYPE_VECTOR,
    _OP_TYPE_MATRIX, _OP_TYPE_IMAGE, _OP_TYPE_SAMPLER, _OP_TYPE_SAMPLED_IMAGE,
    _OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY, _OP_TYPE_STRUCT, _OP_TYPE_POINTER,
    _OP_TYPE_ACCELERATION_STRUCTURE,
}
_CONSTANT_OPS = {
    _OP_CONSTANT_TRUE, _OP_CONSTANT_FALSE, _OP_CONSTANT, _OP_CONSTANT_COMPOSITE,
    _OP_SPEC_CONSTANT_TRUE, _OP_SPEC_CONSTANT_FALSE, _OP_SPEC_CONSTANT,
    _OP_SPEC_CONSTANT_COMPOSITE, _OP_SPEC_CONSTANT_OP,
}

# Fewest operand words (after the opcode word) each handled opcode must have,
# so the handlers below can index operands without further checks.
_MIN_OPERANDS = {
    _OP_NAME: 2, _OP_ENTRY_POINT: 3, _OP_EXECUTION_MODE: 2, _OP_CAPABILITY: 1,
    _OP_TYPE_BOOL: 1, _OP_TYPE_INT: 3, _OP_TYPE_FLOAT: 2, _OP_TYPE_VECTOR: 3,
    _OP_TYPE_MATRIX: 3, _OP_TYPE_IMAGE: 8, _OP_TYPE_SAMPLER: 1,
    _OP_TYPE_SAMPLED_IMAGE: 2, _OP_TYPE_ARRAY: 3, _OP_TYPE_RUNTIME_ARRAY: 2,
    _OP_TYPE_STRUCT: 1, _OP_TYPE_POINTER: 3, _OP_CONSTANT_TRUE: 2,
    _OP_CONSTANT_FALSE: 2, _OP_CONSTANT: 3, _OP_CONSTANT_COMPOSITE: 2,
    _OP_SPEC_CONSTANT_TRUE: 2, _OP_SPEC_CONSTANT_FALSE: 2, _OP_SPEC_CONSTANT: 3,
    _OP_SPEC_CONSTANT_COMPOSITE: 2, _OP_SPEC_CONSTANT_OP: 3, _OP_VARIABLE: 3,
    _OP_DECORATE: 2, _OP_MEMBER_DECORATE: 3, _OP_DECORATION_GROUP: 1,
    _OP_GROUP_DECORATE: 1, _OP_GROUP_MEMBER_DECORATE: 1,
    _OP_EXECUTION_MODE_ID: 2, _OP_TYPE_ACCELERATION_STRUCTURE: 1,
}

# Decorations
_DEC_SPEC_ID = 1
_DEC_BLOCK = 2
_DEC_BUFFER_BLOCK = 3
_DEC_ROW_MAJOR = 4
_DEC_ARRAY_STRIDE = 6
_DEC_MATRIX_STRIDE = 7
_DEC_BUILTIN = 11
_DEC_NON_WRITABLE = 24
_DEC_NON_READABLE = 25
_DEC_BINDING = 33
_DEC_DESCRIPTOR_SET = 34
_DEC_OFFSET = 35

_BUILTIN_WORKGROUP_SIZE = 25

# Storage classes
_SC_UNIFORM_CONSTANT = 0
_SC_UNIFORM = 2
_SC_WORKGROUP = 4
_SC_PUSH_CONSTANT = 9
_SC_STORAGE_BUFFER = 12
_SC_PHYSICAL_STORAGE_BUFFER = 5349

_CAP_WORKGROUP_EXPLICIT_LAYOUT = 4428

_MODEL_GLCOMPUTE = 5
_MODE_LOCAL_SIZE = 17
_MODE_LOCAL_SIZE_ID = 38

_DIM_BUFFER = 5
# SPIR-V ImageFormat -> the GLSL layout qualifier (the ones guestcompute's formats use).
_IMAGE_FORMATS = {0: "", 1: "rgba32f", 2: "rgba16f", 3: "r32f", 4: "rgba8", 7: "rg16f", 8: "r11f_g11f_b10f",
                  11: "rgb10_a2", 15: "r8", 33: "r32ui"}
_DIM_SUBPASS_DATA = 6


def _decode_words(spirv) -> tuple[int, ...]:
    data = bytes(memoryview(spirv))
    if len(data) % 4:
        raise SpirvError(f"length {len(data)} bytes is not a multiple of 4")
    if len(data) < _HEADER_WORDS * 4:
        raise SpirvError(
            f"module is {len(data)} bytes, shorter than the {_HEADER_WORDS * 4}-byte header")
    # The magic number tells the byte order the module was written in.
    for order in "<>":
        if struct.unpack_from(order + "I", data)[0] == MAGIC:
            return struct.unpack(f"{order}{len(data) // 4}I", data)
    raise SpirvError(
        f"bad magic number 0x{struct.unpack_from('<I', data)[0]:08x} "
        f"(expected 0x{MAGIC:08x} in either byte order)")


def _string(words, what: str, strict: bool = False) -> str:
    """A nul-terminated literal string packed little-end-first into words."""
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    end = raw.find(b"\0")
    if end < 0:
        raise SpirvError(f"unterminated string in {what}")
    try:
        return raw[:end].decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise SpirvError(f"{what} string is not valid UTF-8") from exc


class _Module:
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
        pos, end = _HEADER_WORDS, len(words)
        while pos < end:
            count, op = words[pos] >> 16, words[pos] & 0xFFFF
            if count == 0:
                raise SpirvError(f"instruction at word {pos} has a word count of 0")
            if pos + count > end:
                raise SpirvError(
                    f"instruction (opcode {op}) at word {pos} has word count {count}, "
                    f"overflowing the module's {end} words")
            ops = words[pos + 1:pos + count]
            need = _MIN_OPERANDS.get(op)
            if need is not None and len(ops) < need:
                raise SpirvError(
                    f"instruction (opcode {op}) at word {pos} has {len(ops)} operand "
                    f"words, needs at least {need}")
            self._handle(op, ops)
            pos += count

    def _handle(self, op, ops):
        if op == _OP_NAME:
            self.names[ops[0]] = _string(ops[1:], "OpName")
        elif op == _OP_ENTRY_POINT:
            # The first GLCompute entry point is the kernel; others are ignored.
            if ops[0] == _MODEL_GLCOMPUTE and self.entry is None:
                self.entry = (ops[1], _string(ops[2:], "OpEntryPoint", strict=True))
        elif op in (_OP_EXECUTION_MODE, _OP_EXECUTION_MODE_ID):
            self.modes.append((ops[0], ops[1], ops[2:]))
        elif op == _OP_CAPABILITY:
            if ops[0] not in self.capabilities:
                self.capabilities.append(ops[0])
        elif op in _TYPE_OPS:
            self.types[ops[0]] = (op, ops[1:])
        elif op in _CONSTANT_OPS:
            self.constants[ops[1]] = (op, ops)
        elif op == _OP_VARIABLE:
            self.variables.append((ops[1], ops[0], ops[2]))
        elif op == _OP_DECORATE:
            self.decorations.setdefault(ops[0], {})[ops[1]] = ops[2:]
        elif op == _OP_MEMBER_DECORATE:
            members = self.member_decorations.setdefault(ops[0], {})
            members.setdefault(ops[1], {})[ops[2]] = ops[3:]
        elif op == _OP_GROUP_DECORATE:
            self._group_targets.extend((ops[0], t, None) for t in ops[1:])
        elif op == _OP_GROUP_MEMBER_DECORATE:
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
        if op in (_OP_CONSTANT, _OP_SPEC_CONSTANT):
            value = ops[2]
            if len(ops) > 3:  # 64-bit literals are low word first
                value |= ops[3] << 32
            return value
        if op == _OP_SPEC_CONSTANT_OP:
            return None
        raise SpirvError(f"%{cid} is not an integer constant")

    def strip_arrays(self, tid: int) -> tuple[int, tuple[int, ...], int]:
        """Element type of (nested) arrays of descriptors."""
        seen = set()
        op, ops = self.type(tid)
        while op in (_OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY):
            if tid in seen:
                raise SpirvError(f"array type %{tid} contains itself")
            seen.add(tid)
            tid = ops[0]
            op, ops = self.type(tid)
        return op, ops, tid


def _scalar_name(module: _Module, tid: int) -> str:
    op, ops = module.type(tid)
    if op == _OP_TYPE_BOOL:
        return "bool"
    if op == _OP_TYPE_INT:
        width, signed = ops[0], ops[1]
        base = "int" if signed else "uint"
        return base if width == 32 else f"{base}{width}"
    if op == _OP_TYPE_FLOAT:
        return {32: "float", 64: "double"}.get(ops[0], f"float{ops[0]}")
    raise SpirvError(f"spec constant type %{tid} is not a scalar")


def _spec_constants(module: _Module) -> dict[int, str]:
    found = {}
    for cid, (op, ops) in module.constants.items():
        if op not in (_OP_SPEC_CONSTANT, _OP_SPEC_CONSTANT_TRUE, _OP_SPEC_CONSTANT_FALSE):
            continue
        spec_id = module.deco(cid, _DEC_SPEC_ID)
        if spec_id is not None:
            found[spec_id] = _scalar_name(module, ops[0])
    return dict(sorted(found.items()))


def _local_size(module: _Module, entry_id: int):
    """(local_size, spec ids, default size) of the entry point."""
    # A WorkgroupSize built-in takes precedence over the execution modes;
    # glslang emits one for local_size_*_id when targeting SPIR-V < 1.6.
    builtin = [cid for cid, (op, _) in module.constants.items()
               if op in (_OP_CONSTANT_COMPOSITE, _OP_SPEC_CONSTANT_COMPOSITE)
               and module.deco(cid, _DEC_BUILTIN) == _BUILTIN_WORKGROUP_SIZE]
    modes = {mode: operands for entry, mode, operands in module.modes if entry == entry_id}
    if builtin:
        component_ids = module.constants[builtin[0]][1][2:]
        what = "WorkgroupSize built-in"
    elif _MODE_LOCAL_SIZE_ID in modes:
        component_ids = modes[_MODE_LOCAL_SIZE_ID]
        what = "LocalSizeId"
    elif _MODE_LOCAL_SIZE in modes:
        sizes = modes[_MODE_LOCAL_SIZE]
        if len(sizes) < 3:
            raise SpirvError("LocalSize execution mode needs 3 literals")
        size = tuple(sizes[:3])
        return size, (None, None, None), size
    else:
        raise SpirvError("compute entry point declares no workgroup size")

    if len(component_ids) < 3:
        raise SpirvError(f"{what} needs 3 components")
    spec_ids, defaults = [], []
    for cid in component_ids[:3]:
        op, _ = module.constant(cid)
        spec_id = module.deco(cid, _DEC_SPEC_ID) if op == _OP_SPEC_CONSTANT else None
        spec_ids.append(spec_id)
        defaults.append(module.scalar_value(cid))
    default = None if None in defaults else tuple(defaults)
    spec_driven = any(s is not None for s in spec_ids)
    return (None if spec_driven else default), tuple(spec_ids), default


def _all_members(module: _Module, struct_id: int, n_members: int, deco: int) -> bool:
    return n_members > 0 and all(
        module.has_deco(struct_id, deco, m) for m in range(n_members))


def _binding(module: _Module, var_id: int, ptr_type: int, storage: int) -> ReflectedBinding:
    ptr_op, ptr_ops = module.type(ptr_type)
    if ptr_op != _OP_TYPE_POINTER:
        raise SpirvError(f"variable %{var_id} does not have a pointer type")
    op, ops, inner = module.strip_arrays(ptr_ops[1])

    readonly = module.has_deco(var_id, _DEC_NON_WRITABLE)
    writeonly = module.has_deco(var_id, _DEC_NON_READABLE)
    type_name = ""
    if op == _OP_TYPE_STRUCT:
        type_name = module.names.get(inner, "")
        # glslang puts readonly/writeonly of a buffer on each member.
        readonly = readonly or _all_members(module, inner, len(ops), _DEC_NON_WRITABLE)
        writeonly = writeonly or _all_members(module, inner, len(ops), _DEC_NON_READABLE)

    kind = "unknown"
    if storage == _SC_STORAGE_BUFFER:
        kind = "storage_buffer"
    elif storage == _SC_UNIFORM and op == _OP_TYPE_STRUCT:
        # SPIR-V before 1.3 spells storage buffers as Uniform + BufferBlock.
        if module.has_deco(inner, _DEC_BUFFER_BLOCK):
            kind = "storage_buffer"
        elif module.has_deco(inner, _DEC_BLOCK):
            kind = "uniform_buffer"
    elif storage == _SC_UNIFORM_CONSTANT:
        if op == _OP_TYPE_IMAGE:
            dim, sampled = ops[1], ops[5]
            if dim == _DIM_BUFFER:
                kind = {1: "uniform_texel_buffer", 2: "storage_texel_buffer"}.get(sampled, kind)
            elif dim == _DIM_SUBPASS_DATA:
                kind = "input_attachment"
            else:
                kind = {1: "sampled_image", 2: "storage_image"}.get(sampled, kind)
        elif op == _OP_TYPE_SAMPLER:
            kind = "sampler"
        elif op == _OP_TYPE_SAMPLED_IMAGE:
            # GLSL's samplerBuffer is a sampled buffer image, which Vulkan
            # binds as a uniform texel buffer rather than an image + sampler.
            image_op, image_ops = module.type(ops[0])
            if image_op == _OP_TYPE_IMAGE and image_ops[1] == _DIM_BUFFER:
                kind = "uniform_texel_buffer"
            else:
                kind = "combined_image_sampler"
        elif op == _OP_TYPE_ACCELERATION_STRUCTURE:
            kind = "acceleration_structure"

    image = None
    if storage == _SC_UNIFORM_CONSTANT and op in (_OP_TYPE_IMAGE, _OP_TYPE_SAMPLED_IMAGE):
        image_op, image_ops = (op, ops) if op == _OP_TYPE_IMAGE else module.type(ops[0])
        if image_op == _OP_TYPE_IMAGE and len(image_ops) >= 7:
            component = _scalar_name(module, image_ops[0])
            image = ReflectedImage(dim=image_ops[1], arrayed=bool(image_ops[3]), multisampled=bool(image_ops[4]),
                                   format=_IMAGE_FORMATS.get(image_ops[6], f"format{image_ops[6]}"),
                                   component={"float": "float", "int": "int", "uint": "uint"}.get(component,
                                                                                                  component))

    binding = module.deco(var_id, _DEC_BINDING)
    if binding is None:
        raise SpirvError(f"descriptor variable %{var_id} has no Binding decoration")
    desc_set = module.deco(var_id, _DEC_DESCRIPTOR_SET)
    return ReflectedBinding(
        set=0 if desc_set is None else desc_set,  # GLSL's default set
        binding=binding,
        kind=kind,
        readonly=readonly,
        writeonly=writeonly,
        name=module.names.get(var_id) or type_name,
        image=image,
    )


class _Sizer:
    """Byte extents of types laid out with explicit Offset/ArrayStride/
    MatrixStride decorations (as in push constant blocks)."""

    def __init__(self, module: _Module, array_length=None):
        self.m = module
        # How an array type's length id becomes a number: the plain constant
        # (push constants), or a specialization-aware evaluation (shared memory).
        self._length = array_length or module.scalar_value
        self._active: set[int] = set()  # guards against self-referencing types
        # Memoized so a type reused many times over is sized only once.
        self._known: dict[tuple[int, int | None, bool], int] = {}

    def size(self, tid: int, matrix_stride: int | None = None, row_major: bool = False) -> int:
        key = (tid, matrix_stride, row_major)
        if key in self._known:
            return self._known[key]
        if tid in self._active:
            raise SpirvError(f"type %{tid} contains itself")
        self._active.add(tid)
        try:
            self._known[key] = self._size(tid, matrix_stride, row_major)
        finally:
            self._active.discard(tid)
        return self._known[key]

    def _size(self, tid, matrix_stride, row_major) -> int:
        op, ops = self.m.type(tid)
        if op in (_OP_TYPE_INT, _OP_TYPE_FLOAT):
            width = ops[0]
            if width == 0 or width % 8:
                raise SpirvError(f"scalar type %{tid} has width {width}")
            return width // 8
        if op == _OP_TYPE_BOOL:
            return 4  # not allowed in explicitly laid out blocks; assume 32-bit
        if op == _OP_TYPE_VECTOR:
            return ops[1] * self.size(ops[0])
        if op == _OP_TYPE_MATRIX:
            column_type, columns = ops[0], ops[1]
            if matrix_stride is None:
                return columns * self.size(column_type)
            col_op, col_ops = self.m.type(column_type)
            if col_op != _OP_TYPE_VECTOR:
                raise SpirvError(f"matrix type %{tid} has a non-vector column type")
            # The stride steps between columns, or between rows if row-major.
            return (col_ops[1] if row_major else columns) * matrix_stride
        if op == _OP_TYPE_ARRAY:
            length = self._length(ops[1])
            if length is None:
                raise SpirvError(f"length of array type %{tid} is not a plain constant")
            stride = self.m.deco(tid, _DEC_ARRAY_STRIDE)
            if stride is None:
                stride = self.size(ops[0], matrix_stride, row_major)
            return length * stride
        if op == _OP_TYPE_RUNTIME_ARRAY:
            return 0
        if op == _OP_TYPE_STRUCT:
            return self.struct_size(tid, ops)
        if op == _OP_TYPE_POINTER:
            return 8  # physical storage buffer address (buffer_reference)
        raise SpirvError(f"type %{tid} (opcode {op}) has no size in a block")

    def struct_size(self, tid: int, members: tuple[int, ...]) -> int:
        # Extent of the last byte used, not rounded up to the struct's
        # alignment: that is the range the kernel can actually touch.
        end = cursor = 0
        for index, member in enumerate(members):
            offset = self.m.deco(tid, _DEC_OFFSET, index)
            if offset is None:
                offset = cursor  # no explicit layout: pack tightly
            cursor = offset + self.size(
                member,
                self.m.deco(tid, _DEC_MATRIX_STRIDE, index),
                self.m.has_deco(tid, _DEC_ROW_MAJOR, index),
            )
            end = max(end, cursor)
        return end


def _push_constant_size(module: _Module, variables) -> int:
    size = 0
    sizer = _Sizer(module)
    for var_id, ptr_type, _ in variables:
        ptr_op, ptr_ops = module.type(ptr_type)
        if ptr_op != _OP_TYPE_POINTER:
            raise SpirvError(f"variable %{var_id} does not have a pointer type")
        size = max(size, sizer.size(ptr_ops[1]))
    # VkPushConstantRange sizes must be multiples of 4.
    return (size + 3) & ~3


def reflect(spirv: bytes) -> ReflectedShader:
    """Reflect a SPIR-V compute module (bytes in either byte order)."""
    module = _Module(_decode_words(spirv))
    if module.entry is None:
        raise SpirvError("module has no GLCompute entry point")
    entry_id, entry_name = module.entry

    try:
        bindings = [
            _binding(module, var_id, ptr_type, storage)
            for var_id, ptr_type, storage in module.variables
            if storage in (_SC_UNIFORM, _SC_STORAGE_BUFFER, _SC_UNIFORM_CONSTANT)
        ]
        push_size = _push_constant_size(
            module, [v for v in module.variables if v[2] == _SC_PUSH_CONSTANT])
        local_size, spec_ids, default_size = _local_size(module, entry_id)
        spec_constants = _spec_constants(module)
        shared = _workgroup_bytes(module, {})
    except RecursionError:
        # Only a pathologically deep (but acyclic) type graph gets here.
        raise SpirvError("type nesting too deep") from None

    return ReflectedShader(
        entry_point=entry_name,
        bindings=tuple(sorted(bindings, key=lambda b: (b.set, b.binding))),
        push_constant_size=push_size,
        local_size=local_size,
        local_size_spec_ids=spec_ids,
        spec_constants=spec_constants,
        capabilities=tuple(module.capabilities),
        local_size_default=default_size,
        workgroup_memory_size=shared,
    )


def workgroup_memory_size(spirv: bytes, spec_values: dict | None = None) -> int:
    """Bytes of ``Workgroup`` storage (GLSL ``shared``) the module declares,
    with specialization constants set to ``spec_values`` ({SpecId: value};
    others at their defaults), for checking against
    ``maxComputeSharedMemorySize``.

    A lower bound: members are packed without padding (drivers may round
    up), Block-decorated variables of an explicit workgroup layout alias and
    count once at the largest, and an array whose length needs a
    specialization-constant operation other than the workgroup size's
    components and integer arithmetic counts as empty."""
    module = _Module(_decode_words(spirv))
    try:
        return _workgroup_bytes(module, dict(spec_values or {}))
    except RecursionError:
        raise SpirvError("type nesting too deep") from None


class _UnknownLength(Exception):
    """An array length this reflection cannot evaluate statically."""


# OpSpecConstantOp integer operations evaluated for shared-array lengths.
# Results wrap at 64 bits like the shader's integers, which also keeps a
# hostile chain of multiplications or shifts from growing without bound.
_MASK64 = (1 << 64) - 1
_SPEC_BINARY_OPS = {
    128: lambda a, b: a + b,                          # OpIAdd
    130: lambda a, b: a - b,                          # OpISub
    132: lambda a, b: a * b,                          # OpIMul
    134: lambda a, b: a // b if b else None,          # OpUDiv
    135: lambda a, b: a // b if b else None,          # OpSDiv (lengths are positive)
    137: lambda a, b: a % b if b else None,           # OpUMod
    194: lambda a, b: a >> (b & 63),                  # OpShiftRightLogical
    196: lambda a, b: a << (b & 63),                  # OpShiftLeftLogical
}


class _SpecValues:
    """Integer values of (specialization) constants under chosen SpecId
    values, e.g. ``shared float s[gl_WorkGroupSize.x * 2]``."""

    def __init__(self, module: _Module, spec_values: dict):
        self.m = module
        self.values = spec_values
        self._active: set[int] = set()
        # Memoized: a constant used by many others (or twice by one) is
        # evaluated once, so a chain of n operations costs n steps.
        self._known: dict[int, int | None] = {}

    def length(self, cid: int) -> int:
        value = self.value(cid)
        if value is None:
            raise _UnknownLength
        return value

    def value(self, cid: int) -> int | None:
        if cid in self._known:
            return self._known[cid]
        if cid in self._active:
            raise SpirvError(f"constant %{cid} is defined in terms of itself")
        self._active.add(cid)
        try:
            self._known[cid] = self._value(cid)
        finally:
            self._active.discard(cid)
        return self._known[cid]

    def _value(self, cid: int) -> int | None:
        op, ops = self.m.constant(cid)
        if op == _OP_SPEC_CONSTANT:
            spec_id = self.m.deco(cid, _DEC_SPEC_ID)
            if spec_id in self.values:
                return int(self.values[spec_id])
        if op in (_OP_CONSTANT, _OP_SPEC_CONSTANT):
            return self.m.scalar_value(cid)
        if op != _OP_SPEC_CONSTANT_OP or len(ops) < 4:
            return None
        inner, args = ops[2], ops[3:]
        if inner == _OP_COMPOSITE_EXTRACT and len(args) == 2:
            c_op, c_ops = self.m.constant(args[0])
            if c_op in (_OP_CONSTANT_COMPOSITE, _OP_SPEC_CONSTANT_COMPOSITE) and args[1] < len(c_ops) - 2:
                return self.value(c_ops[2 + args[1]])
            return None
        if inner in _SPEC_BINARY_OPS and len(args) == 2:
            a, b = self.value(args[0]), self.value(args[1])
            if a is None or b is None:
                return None
            result = _SPEC_BINARY_OPS[inner](a, b)
            return None if result is None else result & _MASK64
        return None


def _workgroup_bytes(module: _Module, spec_values: dict) -> int:
    sizer = _Sizer(module, _SpecValues(module, spec_values).length)
    aliased = _CAP_WORKGROUP_EXPLICIT_LAYOUT in module.capabilities
    total = largest_block = 0
    for var_id, ptr_type, storage in module.variables:
        if storage != _SC_WORKGROUP:
            continue
        ptr_op, ptr_ops = module.type(ptr_type)
        if ptr_op != _OP_TYPE_POINTER:
            raise SpirvError(f"variable %{var_id} does not have a pointer type")
        try:
            size = sizer.size(ptr_ops[1])
        except _UnknownLength:
            continue
        if aliased and module.has_deco(ptr_ops[1], _DEC_BLOCK):
            largest_block = max(largest_block, size)   # explicit-layout blocks share memory
        else:
            total += size
    return total + largest_block
