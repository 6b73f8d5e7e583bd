"""KernelSpec: one frozen value that is the only input both to a kernel's
rendered GLSL and to its cache key, so the two cannot drift apart (ratchet
computed its key apart from its source generator and they drifted).

A kernel *family* is a function ``spec -> GLSL body`` registered with
:func:`family`. The body sees the bindings by name, the push constants as
``pc.<field>``, and the helpers from :mod:`.glsl_lib`. Everything the body
may depend on must be in the spec: its bindings, push layout and ``params``.

A family registered with ``language="slang"`` renders Slang instead
(compiled by slangc when baking: what GLSL compilers here cannot express,
such as VK_NV_cooperative_vector): its buffers are byte-address buffers,
its push constants ``pc.<field>`` too, its entry point ``main`` with its
own ``[numthreads]`` (the spec's workgroup must match it).
"""
from __future__ import annotations

import hashlib
import struct as _struct
from dataclasses import dataclass, field
from typing import Callable

from ..errors import InvalidArgumentError
from ..spirv.slang import SLANG_FIRST_LINE

READ, WRITE, READWRITE = "read", "write", "readwrite"
# Spec features a Vulkan 1.0 device can have (core features, no SPIR-V 1.3 needed).
VULKAN_1_0_FEATURES = frozenset({"image_write_without_format"})

_families: dict = {}
_slang_families: set = set()
_SLANG_TYPES = {"uint": "uint", "int": "int", "float": "float", "uvec2": "uint2", "ivec2": "int2", "vec2": "float2",
                "uvec4": "uint4", "ivec4": "int4", "vec4": "float4"}


def family(name: str, language: str = "glsl"):
    """Register ``fn(spec) -> str`` as the body of kernel family ``name``,
    written in ``language`` ("glsl" or "slang")."""
    if language not in ("glsl", "slang"):
        raise ValueError(f"kernel family {name!r}: language {language!r}")

    def register(fn: Callable):
        if name in _families and _families[name] is not fn:
            raise ValueError(f"kernel family {name!r} registered twice")
        _families[name] = fn
        if language == "slang":
            _slang_families.add(name)
        return fn
    return register


def families() -> dict:
    return dict(_families)


@dataclass(frozen=True)
class Binding:
    """A resource the kernel binds. ``kind`` "buffer": a storage buffer of
    GLSL element ``type``. ``kind`` "storage": a storage image of GLSL type
    ``type`` (``image2D``/``uimage2D``) with format ``qualifier`` ("" for a
    write-only image without one). ``kind`` "sampled": a combined image
    sampler of ``type`` ``sampler2D``/``usampler2D``. A buffer's ``qualifier``
    is added to its declaration (e.g. ``volatile`` for words other
    workgroups poll: glslang decorates it Coherent too, so naming both
    would decorate Coherent twice, which SPIR-V validation rejects)."""
    name: str
    type: str
    access: str = READ
    kind: str = "buffer"
    qualifier: str = ""

    @property
    def reads(self) -> bool:
        return self.access in (READ, READWRITE)

    @property
    def writes(self) -> bool:
        return self.access in (WRITE, READWRITE)


# std430 scalar and vector types allowed in push constants: (struct code, size, align)
_PUSH_TYPES = {
    "uint": ("I", 4, 4), "int": ("i", 4, 4), "float": ("f", 4, 4),
    "uvec2": ("2I", 8, 8), "ivec2": ("2i", 8, 8), "vec2": ("2f", 8, 8),
    "uvec4": ("4I", 16, 16), "ivec4": ("4i", 16, 16), "vec4": ("4f", 16, 16),
}


@dataclass(frozen=True)
class Push:
    """One push-constant field; ``count`` > 1 makes it an array (std430:
    scalar arrays have a 4-byte stride)."""
    name: str
    type: str
    count: int = 1


def push_layout(fields) -> tuple:
    """[(field, offset)] with std430 alignment, and the total size."""
    offset, out = 0, []
    for f in fields:
        code, size, align = _PUSH_TYPES[f.type]
        offset = (offset + align - 1) // align * align
        out.append((f, offset))
        offset += size * f.count
    return out, (offset + 3) // 4 * 4


@dataclass(frozen=True, eq=True)
class KernelSpec:
    family: str
    bindings: tuple = ()
    push: tuple = ()
    params: tuple = ()                 # sorted (name, hashable value) pairs
    workgroup: tuple = (64, 1, 1)      # becomes specialization constants 0..2
    glsl_extensions: tuple = ()        # e.g. "GL_EXT_shader_16bit_storage"
    features: tuple = ()               # host features needed: "float16", "uint8", ...
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self):
        if self.family not in _families:
            raise InvalidArgumentError(f"unknown kernel family {self.family!r}")
        object.__setattr__(self, "params", tuple(sorted(self.params)))
        object.__setattr__(self, "_hash", hash((self.family, self.bindings, self.push, self.params,
                                                self.workgroup, self.glsl_extensions, self.features)))

    def __hash__(self):
        return self._hash

    def param(self, name: str, default=None):
        for k, v in self.params:
            if k == name:
                return v
        return default

    @property
    def key(self) -> str:
        """Stable text key (same across processes) for logs and disk caches."""
        return hashlib.sha256(repr((self.family, self.bindings, self.push, self.params,
                                    self.workgroup, self.glsl_extensions,
                                    self.features)).encode()).hexdigest()[:24]

    @property
    def language(self) -> str:
        return "slang" if self.family in _slang_families else "glsl"

    @property
    def target_env(self) -> str:
        """SPIR-V target: 1.0 where possible (runs on Vulkan 1.0 devices);
        16/8-bit storage and subgroup ops need the StorageBuffer storage
        class / SPIR-V 1.3, i.e. a Vulkan 1.1 device. Slang kernels are
        SPIR-V 1.5 (slangc's cooperative-vector code needs it): Vulkan 1.2."""
        if self.language == "slang":
            return "vulkan1.2"
        return "vulkan1.1" if set(self.features) - VULKAN_1_0_FEATURES else "vulkan1.0"

    @property
    def push_size(self) -> int:
        return push_layout(self.push)[1]

    def pack(self, values: dict) -> bytes:
        """Push-constant bytes for ``values`` (a dict keyed by field name)."""
        layout, size = push_layout(self.push)
        out = bytearray(size)
        for f, offset in layout:
            code, fsize, _ = _PUSH_TYPES[f.type]
            v = values[f.name]
            if f.count == 1:
                if isinstance(v, complex):          # a vec2 scalar of complex ops
                    v = (v.real, v.imag)
                v = v if isinstance(v, (tuple, list)) else (v,)
                _struct.pack_into("<" + code, out, offset, *v)
            else:
                for i, item in enumerate(v):
                    item = item if isinstance(item, (tuple, list)) else (item,)
                    _struct.pack_into("<" + code, out, offset + i * fsize, *item)
        return bytes(out)

    def render(self) -> str:
        """The complete compute shader of this spec (GLSL, or Slang for a
        Slang family)."""
        if self.language == "slang":
            return self._render_slang()
        lines = ["#version 450"]
        for ext in self.glsl_extensions:
            lines.append(f"#extension {ext} : require")
        lines.append("layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;")
        for i, b in enumerate(self.bindings):
            qual = {READ: "readonly ", WRITE: "writeonly ", READWRITE: ""}[b.access]
            if b.kind == "sampled":
                lines.append(f"layout(set = 0, binding = {i}) uniform {b.type} {b.name};")
            elif b.kind == "storage":
                fmt = f", {b.qualifier}" if b.qualifier else ""
                lines.append(f"layout(set = 0, binding = {i}{fmt}) uniform {qual}{b.type} {b.name};")
            else:
                # qualifier: e.g. "volatile" for words other workgroups poll
                extra = f"{b.qualifier} " if b.qualifier else ""
                lines.append(f"layout(std430, set = 0, binding = {i}) {extra}{qual}buffer B{i} "
                             f"{{ {b.type} {b.name}[]; }};")
        if self.push:
            fields = " ".join(f"{f.type} {f.name}{f'[{f.count}]' if f.count > 1 else ''};"
                              for f in self.push)
            lines.append(f"layout(push_constant, std430) uniform Push {{ {fields} }} pc;")
        lines.append(_families[self.family](self))
        return "\n".join(lines) + "\n"


    def _render_slang(self) -> str:
        lines = [SLANG_FIRST_LINE]
        for i, b in enumerate(self.bindings):
            kind = "ByteAddressBuffer" if b.access == READ else "RWByteAddressBuffer"
            lines.append(f"[[vk::binding({i}, 0)]] {kind} {b.name};")
        if self.push:
            # Arrays are left out: Slang may lay a push-constant array out
            # with another stride than push_layout's std430.
            if any(f.count > 1 for f in self.push):
                raise ValueError(f"kernel family {self.family!r}: a Slang family takes no push-constant arrays")
            fields = " ".join(f"{_SLANG_TYPES[f.type]} {f.name};" for f in self.push)
            lines.append(f"struct Push {{ {fields} }};")
            lines.append("[[vk::push_constant]] ConstantBuffer<Push> pc;")
        lines.append(_families[self.family](self))
        return "\n".join(lines) + "\n"


def groups_for(invocations: int, local_x: int, max_count: tuple) -> tuple:
    """Workgroup counts covering ``invocations`` threads in x; past
    maxComputeWorkGroupCount[0] the grid folds into y (then z). The kernel
    rebuilds the linear index with :data:`glsl_lib.LINEAR_INDEX`."""
    groups = max(1, -(-invocations // local_x))
    gx = min(groups, max_count[0])
    rest = -(-groups // gx)
    gy = min(rest, max_count[1])
    gz = -(-rest // gy)
    if gz > max_count[2]:
        raise InvalidArgumentError(f"{invocations} invocations exceed the device's workgroup grid")
    return (gx, gy, gz)
