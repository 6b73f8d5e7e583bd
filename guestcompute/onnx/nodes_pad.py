"""The Pad ONNX node: constant, edge, reflect and wrap modes, negative pads
(cropping), the ``axes`` input of opset 18.

Negative pads crop the input first (a view). Constant mode then fills the
output with the value and copies the input into its interior. The other
modes gather along each padded axis in turn with an index table built at
bind — numpy.pad of ``arange(n)`` in the same mode, which is exactly the
source position of every output position."""
from __future__ import annotations

import numpy as np

from .table import Const, Plan, Sym, attr, const_input, norm_axis, rule, unsupported

MODES = ("constant", "edge", "reflect", "wrap")


def _pads(node, args, opset, rank: int) -> list:
    """[(before, after)] per axis."""
    pads = attr(node, "pads") if opset < 11 else const_input(node, args, 1, "pads")
    pads = [int(p) for p in np.reshape(pads if pads is not None else [], -1)]
    axes = const_input(node, args, 3, "axes") if opset >= 18 else None
    axes = list(range(rank)) if axes is None else [norm_axis(node, int(a), rank) for a in np.reshape(axes, -1)]
    if len(pads) != 2 * len(axes):
        raise unsupported(node, f"{len(pads)} pads for {len(axes)} axes")
    result = [(0, 0)] * rank
    for k, a in enumerate(axes):
        result[a] = (pads[k], pads[k + len(axes)])
    return result


def _value(node, args, opset) -> float:
    if opset < 11:
        return float(attr(node, "value", 0.0))
    v = const_input(node, args, 2, "constant_value")
    return 0.0 if v is None or np.size(v) == 0 else np.reshape(v, -1)[0].item()


@rule("Pad")
def pad(node, args, opset):
    x = args[0]
    mode = attr(node, "mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in MODES:
        raise unsupported(node, f"attribute mode={mode!r} is not supported")
    pads, value = _pads(node, args, opset, len(x.shape)), _value(node, args, opset)
    crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for (b, e), n in zip(pads, x.shape))
    grow = [(max(b, 0), max(e, 0)) for b, e in pads]
    inner = np.empty(x.shape, np.bool_)[crop].shape
    shape = tuple(n + b + e for n, (b, e) in zip(inner, grow))
    if isinstance(x, Const):
        v = x.value[crop]
        kw = {"constant_values": value} if mode == "constant" else {}
        return [Const(np.pad(v, grow, mode=mode, **kw).astype(v.dtype))]
    if min(shape, default=1) == 0:
        return Plan([Sym(shape, x.dtype)], lambda rec, t: None)
    if mode != "constant" and any(n == 0 for n, g in zip(inner, grow) if g != (0, 0)):
        raise unsupported(node, f"{mode} padding of an empty axis")
    if mode == "constant" or grow == [(0, 0)] * len(grow):
        interior = tuple(slice(b, b + n) for (b, _), n in zip(grow, inner))

        def fill_and_copy(rec, t):
            rec.fill(t.outs[0], value)
            if t.ins[0][crop].size:
                rec.copy(t.ins[0][crop], out=t.outs[0][interior])
        return Plan([Sym(shape, x.dtype)], fill_and_copy, uses=(0,))
    # One gather per padded axis, through scratch tensors of the growing shape.
    steps, cur = [], list(inner)
    for axis, (b, e) in enumerate(grow):
        if (b, e) != (0, 0):
            steps.append((axis, np.pad(np.arange(cur[axis], dtype=np.int32), (b, e), mode=mode)))
            cur[axis] += b + e
            steps[-1] += (tuple(cur),)

    def gather_axes(rec, t):
        src = t.ins[0][crop]
        for k, (axis, _, _) in enumerate(steps):
            dst = t.outs[0] if k == len(steps) - 1 else t.scratch[k]
            rec.index_select(src, t.consts[k], axis, out=dst)
            src = dst
    return Plan([Sym(shape, x.dtype)], gather_axes, uses=(0,), uploads=[idx for _, idx, _ in steps],
                scratch=[(s, x.dtype) for _, _, s in steps[:-1]])
