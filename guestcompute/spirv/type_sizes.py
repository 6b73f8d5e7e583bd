"""Byte sizes of SPIR-V types: push-constant blocks (explicit Offset,
ArrayStride and MatrixStride layout) and ``Workgroup`` storage (GLSL
``shared``), whose array lengths may be specialization constants or
integer operations on them."""
from __future__ import annotations

from . import module as spv
from .module import SpirvModule


class TypeSizer:
    """Byte extents of types laid out with explicit Offset/ArrayStride/
    MatrixStride decorations (as in push constant blocks)."""

    def __init__(self, module: SpirvModule, array_length=None):
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
            raise spv.SpirvError(f"type %{tid} contains itself")
        self._active.add(tid)
        try:
            self._known[key] = self._size(tid, matrix_stride, row_major)
        finally:
            self._active.discard(tid)
        return self._known[key]

    def _size(self, tid, matrix_stride, row_major) -> int:
        op, ops = self.m.type(tid)
        if op in (spv.OP_TYPE_INT, spv.OP_TYPE_FLOAT):
            width = ops[0]
            if width == 0 or width % 8:
                raise spv.SpirvError(f"scalar type %{tid} has width {width}")
            return width // 8
        if op == spv.OP_TYPE_BOOL:
            return 4  # not allowed in explicitly laid out blocks; assume 32-bit
        if op == spv.OP_TYPE_VECTOR:
            return ops[1] * self.size(ops[0])
        if op == spv.OP_TYPE_MATRIX:
            column_type, columns = ops[0], ops[1]
            if matrix_stride is None:
                return columns * self.size(column_type)
            col_op, col_ops = self.m.type(column_type)
            if col_op != spv.OP_TYPE_VECTOR:
                raise spv.SpirvError(f"matrix type %{tid} has a non-vector column type")
            # The stride steps between columns, or between rows if row-major.
            return (col_ops[1] if row_major else columns) * matrix_stride
        if op == spv.OP_TYPE_ARRAY:
            length = self._length(ops[1])
            if length is None:
                raise spv.SpirvError(f"length of array type %{tid} is not a plain constant")
            stride = self.m.deco(tid, spv.DEC_ARRAY_STRIDE)
            if stride is None:
                stride = self.size(ops[0], matrix_stride, row_major)
            return length * stride
        if op == spv.OP_TYPE_RUNTIME_ARRAY:
            return 0
        if op == spv.OP_TYPE_STRUCT:
            return self.struct_size(tid, ops)
        if op == spv.OP_TYPE_POINTER:
            return 8  # physical storage buffer address (buffer_reference)
        raise spv.SpirvError(f"type %{tid} (opcode {op}) has no size in a block")

    def struct_size(self, tid: int, members: tuple[int, ...]) -> int:
        # Extent of the last byte used, not rounded up to the struct's
        # alignment: that is the range the kernel can actually touch.
        end = cursor = 0
        for index, member in enumerate(members):
            offset = self.m.deco(tid, spv.DEC_OFFSET, index)
            if offset is None:
                offset = cursor  # no explicit layout: pack tightly
            cursor = offset + self.size(
                member,
                self.m.deco(tid, spv.DEC_MATRIX_STRIDE, index),
                self.m.has_deco(tid, spv.DEC_ROW_MAJOR, index),
            )
            end = max(end, cursor)
        return end


def push_constant_size(module: SpirvModule, variables) -> int:
    size = 0
    sizer = TypeSizer(module)
    for var_id, ptr_type, _ in variables:
        ptr_op, ptr_ops = module.type(ptr_type)
        if ptr_op != spv.OP_TYPE_POINTER:
            raise spv.SpirvError(f"variable %{var_id} does not have a pointer type")
        size = max(size, sizer.size(ptr_ops[1]))
    # VkPushConstantRange sizes must be multiples of 4.
    return (size + 3) & ~3


class UnknownLength(Exception):
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


class SpecValues:
    """Integer values of (specialization) constants under chosen SpecId
    values, e.g. ``shared float s[gl_WorkGroupSize.x * 2]``."""

    def __init__(self, module: SpirvModule, spec_values: dict):
        self.m = module
        self.values = spec_values
        self._active: set[int] = set()
        # Memoized: a constant used by many others (or twice by one) is
        # evaluated once, so a chain of n operations costs n steps.
        self._known: dict[int, int | None] = {}

    def length(self, cid: int) -> int:
        value = self.value(cid)
        if value is None:
            raise UnknownLength
        return value

    def value(self, cid: int) -> int | None:
        if cid in self._known:
            return self._known[cid]
        if cid in self._active:
            raise spv.SpirvError(f"constant %{cid} is defined in terms of itself")
        self._active.add(cid)
        try:
            self._known[cid] = self._value(cid)
        finally:
            self._active.discard(cid)
        return self._known[cid]

    def _value(self, cid: int) -> int | None:
        op, ops = self.m.constant(cid)
        if op == spv.OP_SPEC_CONSTANT:
            spec_id = self.m.deco(cid, spv.DEC_SPEC_ID)
            if spec_id in self.values:
                return int(self.values[spec_id])
        if op in (spv.OP_CONSTANT, spv.OP_SPEC_CONSTANT):
            return self.m.scalar_value(cid)
        if op != spv.OP_SPEC_CONSTANT_OP or len(ops) < 4:
            return None
        inner, args = ops[2], ops[3:]
        if inner == spv.OP_COMPOSITE_EXTRACT and len(args) == 2:
            c_op, c_ops = self.m.constant(args[0])
            if c_op in (spv.OP_CONSTANT_COMPOSITE, spv.OP_SPEC_CONSTANT_COMPOSITE) and args[1] < len(c_ops) - 2:
                return self.value(c_ops[2 + args[1]])
            return None
        if inner in _SPEC_BINARY_OPS and len(args) == 2:
            a, b = self.value(args[0]), self.value(args[1])
            if a is None or b is None:
                return None
            result = _SPEC_BINARY_OPS[inner](a, b)
            return None if result is None else result & _MASK64
        return None


def workgroup_bytes(module: SpirvModule, spec_values: dict) -> int:
    sizer = TypeSizer(module, SpecValues(module, spec_values).length)
    aliased = spv.CAP_WORKGROUP_EXPLICIT_LAYOUT in module.capabilities
    total = largest_block = 0
    for var_id, ptr_type, storage in module.variables:
        if storage != spv.SC_WORKGROUP:
            continue
        ptr_op, ptr_ops = module.type(ptr_type)
        if ptr_op != spv.OP_TYPE_POINTER:
            raise spv.SpirvError(f"variable %{var_id} does not have a pointer type")
        try:
            size = sizer.size(ptr_ops[1])
        except UnknownLength:
            continue
        if aliased and module.has_deco(ptr_ops[1], spv.DEC_BLOCK):
            largest_block = max(largest_block, size)   # explicit-layout blocks share memory
        else:
            total += size
    return total + largest_block
