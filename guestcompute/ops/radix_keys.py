"""What every radix sort kernel shares: the key and payload kinds, and the
order-preserving map from a key's raw bits to an unsigned integer.

Keys are moved as raw 32-bit words and only *ranked* through the map, which
sorts int32 (flip the sign bit) and float32 in numpy's order:
-inf < ... < -0.0 == +0.0 < ... < +inf < NaN. Both zeros rank the same and
every NaN (either sign, any payload) ranks last, so, the sort being stable,
zeros and NaNs keep their input order among themselves, exactly as
``np.sort``/``np.argsort(kind="stable")``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import uint32
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import LINEAR_INDEX
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family, groups_for
from ..tensor import Tensor
from .base import Dispatch

KEY_DTYPES = ("uint32", "int32", "float32")
VALUE_DTYPES = ("uint32", "int32", "float32")
# What a pass moves along with the keys: nothing, a payload, or (argsort's
# first pass) each key's own index.
PAYLOADS = ("none", "values", "iota")

def key_mask(key_bits: int) -> int:
    """The bits of the sortable key that take part (``key_bits`` < 32: the
    caller promises the rest are zero; they are ignored)."""
    return 0xFFFFFFFF if key_bits == 32 else (1 << key_bits) - 1


def payload_io(payload: str) -> tuple:
    """(bindings, push fields) a pass kernel adds, after its own, for what it
    moves along with the keys."""
    bindings, push = (), ()
    if payload == "values":
        bindings += (Binding("vals_in", "uint", READ),)
        push += (Push("vsrc_off", "uint"), Push("vsrc_step", "int"))
    if payload != "none":
        bindings += (Binding("vals_out", "uint", WRITE),)
        push += (Push("vdst_off", "uint"), Push("vdst_step", "int"))
    return bindings, push


@dataclass
class RadixPass:
    """One pass of an LSD radix sort: what it reads and writes."""
    index: int
    payload: str           # what this pass moves besides the keys
    src: Tensor            # keys read
    dst: Tensor            # keys written
    payload_buffers: tuple  # payload_io's buffers, in its order
    push: dict             # src/dst offsets and steps, and the payload's


def radix_passes(ctx, keys, values, out_keys, out_values, payload: str, passes: int):
    """The passes of a sort, ping-ponging between two scratch tensors (of
    keys, and of payload): the first reads the caller's views, the last
    writes the caller's outputs; after argsort's first pass ("iota") the
    indices move as a payload."""
    n = keys.size
    scratch_k = [ctx.empty((n,), keys.dtype) for _ in range(min(passes - 1, 2))]
    scratch_v = [ctx.empty((n,), uint32) for _ in scratch_k] if payload != "none" else []
    src_k, src_v = keys, values
    for p in range(passes):
        last = p == passes - 1
        dst_k = out_keys if last else scratch_k[p % 2]
        dst_v = (out_values if last else scratch_v[p % 2]) if payload != "none" else None
        push = {"src_off": src_k.offset, "src_step": src_k.strides[0],
                "dst_off": dst_k.offset, "dst_step": dst_k.strides[0]}
        buffers = ()
        if payload == "values":
            buffers += (src_v.buffer,)
            push.update(vsrc_off=src_v.offset, vsrc_step=src_v.strides[0])
        if payload != "none":
            buffers += (dst_v.buffer,)
            push.update(vdst_off=dst_v.offset, vdst_step=dst_v.strides[0])
        yield RadixPass(p, payload, src_k, dst_k, buffers, push)
        src_k, src_v = dst_k, dst_v
        payload = "values" if payload == "iota" else payload


# GLSL ``uint sortable(uint k)`` per key dtype.
SORTABLE = {
    "uint32": "uint sortable(uint k) { return k; }",
    "int32": "uint sortable(uint k) { return k ^ 0x80000000u; }",
    "float32": """uint sortable(uint k) {
  if ((k & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;   // any NaN: above +inf (0xff800000)
  if (k == 0x80000000u) k = 0u;                               // -0.0 ranks as +0.0
  return k ^ ((k >> 31) != 0u ? 0xffffffffu : 0x80000000u);   // IEEE bits to unsigned order
}""",
}


@family("radix_clear")
def _render_clear(spec: KernelSpec) -> str:
    count = spec.param("count")
    if count == "uint32":
        n = "min(pc.cap, cnt[pc.count_off])"
    elif count == "int32":
        n = "min(pc.cap, uint(max(cnt[pc.count_off], 0)))"
    else:
        n = "pc.cap"
    return f"""void main() {{
  uint i = {LINEAR_INDEX};
  if (i == pc.n_at) state[i] = {n};
  else if (i < pc.size) state[i] = 0u;
}}"""


def clear_spec(count: str, qualifier: str = "") -> KernelSpec:
    """``count``: "" (n is the push constant ``cap``) or the dtype of a GPU
    count tensor to read it from (clamped to ``cap``, negatives to 0)."""
    bindings = (Binding("state", "uint", READWRITE, qualifier=qualifier),)
    if count:
        bindings += (Binding("cnt", "uint" if count == "uint32" else "int", READ),)
    push = (Push("size", "uint"), Push("cap", "uint"), Push("n_at", "uint"), Push("count_off", "uint"))
    return KernelSpec("radix_clear", bindings, push, (("count", count),), (64, 1, 1))


def plan_clear(ctx, state, size: int, n_at: int, cap: int, count=None, qualifier: str = "") -> Dispatch:
    """Zero ``state[:size]`` (a uint32 scratch tensor) and store the number
    of keys, ``cap`` or ``min(cap, count[0])``, at ``state[n_at]``."""
    spec = clear_spec(count.dtype.name if count is not None else "", qualifier)
    values = {"size": size, "cap": cap, "n_at": n_at, "count_off": count.offset if count is not None else 0}
    buffers = (state.buffer,) + ((count.buffer,) if count is not None else ())
    groups = groups_for(max(size, n_at + 1), 64, ctx.limits.max_workgroup_count)
    return Dispatch(spec, buffers, spec.pack(values), groups)


@variants("radix_clear")
def _clear_variants():
    for count in ("", "uint32", "int32"):
        for qualifier in ("", "volatile"):
            yield clear_spec(count, qualifier)
