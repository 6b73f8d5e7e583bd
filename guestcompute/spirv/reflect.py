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
without being validated (run ``spirv-val`` for that). The instruction
stream is read by :mod:`.module`, type sizes by :mod:`.type_sizes`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import module as spv
from .module import MAGIC, SpirvError, SpirvModule, decode_words
from .type_sizes import push_constant_size, workgroup_bytes

__all__ = ["MAGIC", "SpirvError", "ReflectedBinding", "ReflectedImage", "ReflectedShader", "reflect",
           "workgroup_memory_size"]


@dataclass(frozen=True)
class ReflectedBinding:
    set: int
    binding: int
    # "storage_buffer", "uniform_buffer", "storage_image", "sampled_image",
    # "combined_image_sampler", "sampler", "uniform_texel_buffer",
    # "storage_texel_buffer", "input_attachment", "acceleration_structure"
    # "unknown", or "mixed" (variables of different kinds at one binding);
    # callers reject the kinds they do not support.
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


def _scalar_name(module: SpirvModule, tid: int) -> str:
    op, ops = module.type(tid)
    if op == spv.OP_TYPE_BOOL:
        return "bool"
    if op == spv.OP_TYPE_INT:
        width, signed = ops[0], ops[1]
        base = "int" if signed else "uint"
        return base if width == 32 else f"{base}{width}"
    if op == spv.OP_TYPE_FLOAT:
        return {32: "float", 64: "double"}.get(ops[0], f"float{ops[0]}")
    raise SpirvError(f"spec constant type %{tid} is not a scalar")


def _spec_constants(module: SpirvModule) -> dict[int, str]:
    found = {}
    for cid, (op, ops) in module.constants.items():
        if op not in (spv.OP_SPEC_CONSTANT, spv.OP_SPEC_CONSTANT_TRUE, spv.OP_SPEC_CONSTANT_FALSE):
            continue
        spec_id = module.deco(cid, spv.DEC_SPEC_ID)
        if spec_id is not None:
            found[spec_id] = _scalar_name(module, ops[0])
    return dict(sorted(found.items()))


def _local_size(module: SpirvModule, entry_id: int):
    """(local_size, spec ids, default size) of the entry point."""
    # A WorkgroupSize built-in takes precedence over the execution modes;
    # glslang emits one for local_size_*_id when targeting SPIR-V < 1.6.
    builtin = [cid for cid, (op, _) in module.constants.items()
               if op in (spv.OP_CONSTANT_COMPOSITE, spv.OP_SPEC_CONSTANT_COMPOSITE)
               and module.deco(cid, spv.DEC_BUILTIN) == spv.BUILTIN_WORKGROUP_SIZE]
    modes = {mode: operands for entry, mode, operands in module.modes if entry == entry_id}
    if builtin:
        component_ids = module.constants[builtin[0]][1][2:]
        what = "WorkgroupSize built-in"
    elif spv.MODE_LOCAL_SIZE_ID in modes:
        component_ids = modes[spv.MODE_LOCAL_SIZE_ID]
        what = "LocalSizeId"
    elif spv.MODE_LOCAL_SIZE in modes:
        sizes = modes[spv.MODE_LOCAL_SIZE]
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
        spec_id = module.deco(cid, spv.DEC_SPEC_ID) if op == spv.OP_SPEC_CONSTANT else None
        spec_ids.append(spec_id)
        defaults.append(module.scalar_value(cid))
    default = None if None in defaults else tuple(defaults)
    spec_driven = any(s is not None for s in spec_ids)
    return (None if spec_driven else default), tuple(spec_ids), default


def _all_members(module: SpirvModule, struct_id: int, n_members: int, deco: int) -> bool:
    return n_members > 0 and all(
        module.has_deco(struct_id, deco, m) for m in range(n_members))


def _merge_aliases(bindings: list) -> tuple:
    """One binding per (set, binding). Several storage-buffer variables at
    one binding are views of one buffer (slangc declares a byte-address
    buffer once per element type it loads or stores): they merge, read-only
    or write-only only if every view is. Other kinds sharing a binding make
    one binding of kind "mixed", which callers refuse."""
    merged = []
    for b in bindings:
        prev = merged[-1] if merged else None
        if prev is None or (prev.set, prev.binding) != (b.set, b.binding):
            merged.append(b)
            continue
        if prev.kind != "storage_buffer" or b.kind != "storage_buffer":
            merged[-1] = dataclasses.replace(prev, kind="mixed", image=None)
            continue
        merged[-1] = dataclasses.replace(prev, readonly=prev.readonly and b.readonly,
                                         writeonly=prev.writeonly and b.writeonly, name=prev.name or b.name)
    return tuple(merged)


def _binding(module: SpirvModule, var_id: int, ptr_type: int, storage: int) -> ReflectedBinding:
    ptr_op, ptr_ops = module.type(ptr_type)
    if ptr_op != spv.OP_TYPE_POINTER:
        raise SpirvError(f"variable %{var_id} does not have a pointer type")
    op, ops, inner = module.strip_arrays(ptr_ops[1])

    readonly = module.has_deco(var_id, spv.DEC_NON_WRITABLE)
    writeonly = module.has_deco(var_id, spv.DEC_NON_READABLE)
    type_name = ""
    if op == spv.OP_TYPE_STRUCT:
        type_name = module.names.get(inner, "")
        # glslang puts readonly/writeonly of a buffer on each member.
        readonly = readonly or _all_members(module, inner, len(ops), spv.DEC_NON_WRITABLE)
        writeonly = writeonly or _all_members(module, inner, len(ops), spv.DEC_NON_READABLE)

    kind = "unknown"
    if storage == spv.SC_STORAGE_BUFFER:
        kind = "storage_buffer"
    elif storage == spv.SC_UNIFORM and op == spv.OP_TYPE_STRUCT:
        # SPIR-V before 1.3 spells storage buffers as Uniform + BufferBlock.
        if module.has_deco(inner, spv.DEC_BUFFER_BLOCK):
            kind = "storage_buffer"
        elif module.has_deco(inner, spv.DEC_BLOCK):
            kind = "uniform_buffer"
    elif storage == spv.SC_UNIFORM_CONSTANT:
        if op == spv.OP_TYPE_IMAGE:
            dim, sampled = ops[1], ops[5]
            if dim == spv.DIM_BUFFER:
                kind = {1: "uniform_texel_buffer", 2: "storage_texel_buffer"}.get(sampled, kind)
            elif dim == spv.DIM_SUBPASS_DATA:
                kind = "input_attachment"
            else:
                kind = {1: "sampled_image", 2: "storage_image"}.get(sampled, kind)
        elif op == spv.OP_TYPE_SAMPLER:
            kind = "sampler"
        elif op == spv.OP_TYPE_SAMPLED_IMAGE:
            # GLSL's samplerBuffer is a sampled buffer image, which Vulkan
            # binds as a uniform texel buffer rather than an image + sampler.
            image_op, image_ops = module.type(ops[0])
            if image_op == spv.OP_TYPE_IMAGE and image_ops[1] == spv.DIM_BUFFER:
                kind = "uniform_texel_buffer"
            else:
                kind = "combined_image_sampler"
        elif op == spv.OP_TYPE_ACCELERATION_STRUCTURE:
            kind = "acceleration_structure"

    image = None
    if storage == spv.SC_UNIFORM_CONSTANT and op in (spv.OP_TYPE_IMAGE, spv.OP_TYPE_SAMPLED_IMAGE):
        image_op, image_ops = (op, ops) if op == spv.OP_TYPE_IMAGE else module.type(ops[0])
        if image_op == spv.OP_TYPE_IMAGE and len(image_ops) >= 7:
            component = _scalar_name(module, image_ops[0])
            image = ReflectedImage(dim=image_ops[1], arrayed=bool(image_ops[3]), multisampled=bool(image_ops[4]),
                                   format=spv.IMAGE_FORMATS.get(image_ops[6], f"format{image_ops[6]}"),
                                   component={"float": "float", "int": "int", "uint": "uint"}.get(component,
                                                                                                  component))

    binding = module.deco(var_id, spv.DEC_BINDING)
    if binding is None:
        raise SpirvError(f"descriptor variable %{var_id} has no Binding decoration")
    desc_set = module.deco(var_id, spv.DEC_DESCRIPTOR_SET)
    return ReflectedBinding(
        set=0 if desc_set is None else desc_set,  # GLSL's default set
        binding=binding,
        kind=kind,
        readonly=readonly,
        writeonly=writeonly,
        name=module.names.get(var_id) or type_name,
        image=image,
    )


def reflect(spirv: bytes) -> ReflectedShader:
    """Reflect a SPIR-V compute module (bytes in either byte order)."""
    module = SpirvModule(decode_words(spirv))
    if module.entry is None:
        raise SpirvError("module has no GLCompute entry point")
    entry_id, entry_name = module.entry

    try:
        bindings = [
            _binding(module, var_id, ptr_type, storage)
            for var_id, ptr_type, storage in module.variables
            if storage in (spv.SC_UNIFORM, spv.SC_STORAGE_BUFFER, spv.SC_UNIFORM_CONSTANT)
        ]
        push_size = push_constant_size(
            module, [v for v in module.variables if v[2] == spv.SC_PUSH_CONSTANT])
        local_size, spec_ids, default_size = _local_size(module, entry_id)
        spec_constants = _spec_constants(module)
        shared = workgroup_bytes(module, {})
    except RecursionError:
        # Only a pathologically deep (but acyclic) type graph gets here.
        raise SpirvError("type nesting too deep") from None

    return ReflectedShader(
        entry_point=entry_name,
        bindings=_merge_aliases(sorted(bindings, key=lambda b: (b.set, b.binding))),
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
    module = SpirvModule(decode_words(spirv))
    try:
        return workgroup_bytes(module, dict(spec_values or {}))
    except RecursionError:
        raise SpirvError("type nesting too deep") from None
