"""GLSL building blocks shared by the scans (ops/scan.py, ops/scan_chained.py)
and the sort: a shared-memory tile scan, row addressing through push
constants, and where one scanned operand lives (:class:`Operand`)."""
from __future__ import annotations

from ..kernels.spec import Push

ROW_RANK = 4              # coalesced non-axis dims addressed by push constants

SUBGROUP_EXTENSIONS = ("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_arithmetic")

# The 16-byte vector of each scanned GLSL element type.
VEC4 = {"float": "vec4", "int": "ivec4", "uint": "uvec4"}


def blelloch(arr: str, n: int, T: str, t: str = "t") -> str:
    """GLSL statements: exclusive scan of shared ``arr[0..n)`` (element type
    ``T``) in place by ``n`` threads (``n`` a power of two), work-efficient
    (up-sweep then down-sweep). Starts and ends with a barrier."""
    return f"""
  for (uint d = 1u; d < {n}u; d <<= 1) {{
    barrier();
    uint i = ({t} + 1u) * (d << 1) - 1u;
    if (i < {n}u) {arr}[i] += {arr}[i - d];
  }}
  barrier();
  if ({t} == 0u) {arr}[{n - 1}u] = {T}(0);
  for (uint d = {n // 2}u; d > 0u; d >>= 1) {{
    barrier();
    uint i = ({t} + 1u) * (d << 1) - 1u;
    if (i < {n}u) {{ {T} left = {arr}[i - d]; {arr}[i - d] = {arr}[i]; {arr}[i] += left; }}
  }}
  barrier();"""


def row_base(names) -> str:
    """GLSL: decompose the row index into the coalesced row dims and
    accumulate each operand's base offset ``<name>b`` (push fields
    ``<name>_off`` and ``<name>_rs``)."""
    lines = [f"  int {n}b = int(pc.{n}_off);" for n in names]
    lines.append("  uint rem = row;")
    lines.append(f"  for (int d = {ROW_RANK - 1}; d >= 0; --d) {{")
    lines.append("    uint c = rem % pc.row_shape[d]; rem /= pc.row_shape[d];")
    for n in names:
        lines.append(f"    {n}b += int(c) * pc.{n}_rs[d];")
    lines.append("  }")
    return "\n".join(lines)


def operand_push(name: str) -> tuple:
    return (Push(f"{name}_off", "uint"), Push(f"{name}_step", "int"), Push(f"{name}_rs", "int", ROW_RANK))


def thread_rank(wg: int, subgroup: bool) -> str:
    """GLSL: ``q``, the thread's rank in the workgroup for :func:`group_scan`
    (subgroup order where subgroups are used and full, else the local id
    ``t``), and ``full``."""
    if not subgroup:
        return "  uint q = t;"
    # Full subgroups (checked) make (subgroup id, lane) a bijection onto
    # 0..WG-1, so threads can be ranked in subgroup order.
    return (f"  bool full = gl_NumSubgroups * gl_SubgroupSize == {wg}u;\n"
            "  uint q = full ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID : t;")


def group_scan(T: str, wg: int, subgroup: bool) -> str:
    """GLSL: ``prefix``, the exclusive sum of ``acc`` over the threads ranked
    before ``q`` (:func:`thread_rank`), through the shared ``part[wg]``."""
    if not subgroup:
        return f"""
  {T} prefix;
  part[q] = acc;{blelloch("part", wg, T)}
  prefix = part[q];"""
    return f"""
  {T} prefix;
  if (full) {{
    {T} ex = subgroupExclusiveAdd(acc);
    if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) part[gl_SubgroupID] = ex + acc;
    barrier();
    {T} base = {T}(0);
    for (uint s = 0u; s < gl_SubgroupID; ++s) base += part[s];
    prefix = base + ex;
  }} else {{
    part[q] = acc;{blelloch("part", wg, T)}
    prefix = part[q];
  }}"""


def _vector_load(T: str, wg: int, items: int) -> str:
    """GLSL: the tile into ``data`` with 16-byte loads through ``src4`` (a
    vec4 view of ``src``; the planner checked that the row starts on a
    16-byte boundary and is contiguous) and scalar ones for a partial last
    group of four."""
    T4 = VEC4[T]
    return f"""  for (uint j = 0u; j < {items // 4}u; ++j) {{
    uint i = t + j * {wg}u, k = start + 4u * i;
    {T4} v = {T4}(0);
    if (k + 4u <= n) v = src4[(uint(srcb) + k) >> 2];
    else for (uint c = 0u; c < 4u; ++c) if (k + c < n) v[c] = src[srcb + int(k + c)];
    for (uint c = 0u; c < 4u; ++c) data[P(4u * i + c)] = v[c];
  }}"""


def _vector_store(T: str, wg: int, items: int) -> str:
    """GLSL: ``data`` to ``dst`` with 16-byte stores through ``dst4`` (see
    :func:`_vector_load`)."""
    T4 = VEC4[T]
    return f"""  for (uint j = 0u; j < {items // 4}u; ++j) {{
    uint i = t + j * {wg}u, k = start + 4u * i;
    {T4} v = {T4}(data[P(4u * i)], data[P(4u * i + 1u)], data[P(4u * i + 2u)], data[P(4u * i + 3u)]);
    if (k + 4u <= n) dst4[(uint(dstb) + k) >> 2] = v;
    else for (uint c = 0u; c < 4u; ++c) if (k + c < n) dst[dstb + int(k + c)] = v[c];
  }}"""


def tile_scan(T: str, wg: int, items: int, exclusive: bool, subgroup: bool, vector: bool = False) -> tuple:
    """GLSL (declarations, statements) scanning one tile of ``items * wg``
    elements in shared memory. The statements expect ``t`` (local id),
    ``n`` (row length), ``start`` (the tile's first element) and ``srcb``;
    they leave each thread's rank ``q``, its ``items`` scanned values
    ``vals`` (inclusive or exclusive within the thread), its total ``acc``
    and the exclusive ``prefix`` of the threads ranked before it. Writing
    ``prefix + vals[j]`` to ``data[P(q * items + j)]`` and storing ``data``
    coalesced completes the tile. ``vector``: 16-byte loads (see
    :func:`_vector_load`)."""
    # Pad shared indices so threads reading ITEMS consecutive values do not
    # all hit the same bank.
    decls = f"""#define P(i) ((i) + ((i) >> 5))
shared {T} data[{items * wg + items * wg // 32}];
shared {T} part[{wg}];"""
    keep = "before" if exclusive else "acc"
    load = _vector_load(T, wg, items) if vector else f"""  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t + j * {wg}u;
    data[P(t + j * {wg}u)] = k < n ? src[srcb + int(k) * pc.src_step] : {T}(0);
  }}"""
    body = f"""{load}
  barrier();
{thread_rank(wg, subgroup)}
  {T} vals[{items}];
  {T} acc = {T}(0);
  for (uint j = 0u; j < {items}u; ++j) {{
    {T} before = acc;
    acc += data[P(q * {items}u + j)];
    vals[j] = {keep};
  }}{group_scan(T, wg, subgroup)}"""
    return decls, body


def tile_store(wg: int, items: int, add: str = "", vector_type: str = "") -> str:
    """GLSL: finish the tile :func:`tile_scan` left (``add``: a value added
    to every element, e.g. the tile's offset) and store it where ``k < n``;
    ``vector_type`` (the GLSL element type): with 16-byte stores."""
    plus = f"{add} + " if add else ""
    store = _vector_store(vector_type, wg, items) if vector_type else f"""  for (uint j = 0u; j < {items}u; ++j) {{
    uint k = start + t + j * {wg}u;
    if (k < n) dst[dstb + int(k) * pc.dst_step] = data[P(t + j * {wg}u)];
  }}"""
    return f"""  for (uint j = 0u; j < {items}u; ++j) data[P(q * {items}u + j)] = {plus}prefix + vals[j];
  barrier();
{store}"""


def use_subgroups(ctx) -> bool:
    """Subgroup arithmetic in compute shaders (a device fact, see
    ``device/caps.py``: a Vulkan 1.1 device as the host declared it)."""
    return ctx.limits.subgroup_arithmetic


class Operand:
    """Where one scanned operand lives: tensor (for its buffer), base
    offset, stride along the axis, strides of the ROW_RANK row dims."""

    def __init__(self, tensor, off, step, row_strides):
        self.tensor, self.off, self.step, self.rs = tensor, off, step, tuple(row_strides)

    @classmethod
    def rows_of(cls, tensor, rows: int, n: int):
        """A contiguous (rows, n) scratch tensor."""
        return cls(tensor, tensor.offset, 1, (0,) * (ROW_RANK - 1) + (n,))

    def push(self, name: str) -> dict:
        return {f"{name}_off": self.off, f"{name}_step": self.step, f"{name}_rs": self.rs}
