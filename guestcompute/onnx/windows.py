"""Sliding windows of Conv, ConvTranspose and the pools, worked out on the
CPU at bind time.

Conv, MaxPool and AveragePool all start by gathering every window of the
input into a column tensor (im2col) with one ``rec.index_select``: the
flattened spatial positions each window reads form an index table computed
here once. A window position in the padding gets an index past the end,
which ``index_select`` (mode "zero") reads as 0 — the zero padding Conv and
AveragePool need; MaxPool adds -inf there through a mask. ConvTranspose's
table is the same gather seen from the output: a window position no input
lands on reads 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .table import attr, unsupported


@dataclass
class Windows:
    kernel: tuple         # spatial kernel shape
    out: tuple            # spatial output shape
    index: np.ndarray     # int32 (K, prod(out)): flat input position, or prod(input) in the padding
    inside: np.ndarray    # bool (K, prod(out)): the position lies in the input
    padded: np.ndarray    # bool (K, prod(out)): the position lies in the input or its padding


def _pads(node, spatial, kernel, strides, dilations, ceil_mode):
    """(pads_begin, pads_end, out) per ONNX's auto_pad / pads / ceil_mode."""
    r = len(spatial)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto = attr(node, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(n / s) for n, s in zip(spatial, strides)]
        total = [max((o - 1) * s + e - n, 0) for o, s, e, n in zip(out, strides, extent, spatial)]
        small = [t // 2 for t in total]
        begin = small if auto == "SAME_UPPER" else [t - m for t, m in zip(total, small)]
        return begin, [t - b for t, b in zip(total, begin)], out
    if auto not in ("NOTSET", "VALID"):
        raise unsupported(node, f"attribute auto_pad={auto!r} is not supported")
    pads = [0] * (2 * r) if auto == "VALID" else list(attr(node, "pads", [0] * (2 * r)))
    begin, end = pads[:r], pads[r:]
    out = []
    for n, b, e, ext, s in zip(spatial, begin, end, extent, strides):
        span = n + b + e - ext
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + b:     # the last window must start inside
            o -= 1
        out.append(max(o, 0))
    return begin, end, out


def _steps(node, kernel: tuple, r: int) -> tuple:
    """(strides, dilations) of a Conv, ConvTranspose or pool over ``r`` spatial dims."""
    strides = list(attr(node, "strides", [1] * r))
    dilations = list(attr(node, "dilations", [1] * r))
    if len(kernel) != r or len(strides) != r or len(dilations) != r:
        raise unsupported(node, f"kernel {kernel}, strides {strides} or dilations {dilations} do not "
                                f"match {r} spatial dims")
    return strides, dilations


def windows(node, spatial: tuple, kernel: tuple, ceil_mode: bool = False) -> Windows:
    """The windows of ``node`` (Conv or a pool) over an input of spatial shape ``spatial``."""
    r = len(spatial)
    strides, dilations = _steps(node, kernel, r)
    begin, end, out = _pads(node, spatial, kernel, strides, dilations, ceil_mode)
    k_grid = np.indices(kernel).reshape(r, -1)                   # (r, K)
    o_grid = np.indices(out).reshape(r, -1)                      # (r, O)
    col = lambda v: np.asarray(v).reshape(r, 1, 1)               # noqa: E731
    pos = o_grid[:, None, :] * col(strides) - col(begin) + k_grid[:, :, None] * col(dilations)
    size = col(spatial)
    inside = np.all((pos >= 0) & (pos < size), axis=0)
    padded = np.all((pos >= -col(begin)) & (pos < size + col(end)), axis=0)
    return Windows(tuple(kernel), tuple(out), _index_table(node, pos, inside, spatial), inside, padded)


def _index_table(node, pos, inside, spatial) -> np.ndarray:
    """int32 (K, O): the flattened input position of each (kernel offset,
    output position) ``pos`` (r, K, O) where ``inside``, else the
    past-the-end index that ``index_select`` reads as 0."""
    flat = np.zeros(inside.shape, np.int64)
    for d in range(len(spatial)):
        flat = flat * spatial[d] + pos[d]
    n = math.prod(spatial)
    if n >= 2 ** 31 - 1:
        raise unsupported(node, f"an input of {n} spatial positions (at most 2**31 - 2)")
    return np.where(inside, flat, n).astype(np.int32)


def _transposed_pads(node, spatial, kernel, strides, dilations):
    """(pads_begin, pads_end, out) of ConvTranspose: ``output_shape`` or
    ``auto_pad`` give the output and the pads follow, else the pads do."""
    r = len(spatial)
    extra = list(attr(node, "output_padding", [0] * r))
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full = [s * (n - 1) + p + e for s, n, p, e in zip(strides, spatial, extra, extent)]
    auto = attr(node, "auto_pad", "NOTSET")
    target = attr(node, "output_shape")
    if target is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [n * s for n, s in zip(spatial, strides)]
    if target is not None:
        target = list(target)[-r:]
        # A negative total (an output_shape past the full result) pads with zeros.
        total = [f - t for f, t in zip(full, target)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        return begin, [t - b for t, b in zip(total, begin)], target
    if auto not in ("NOTSET", "VALID"):
        raise unsupported(node, f"attribute auto_pad={auto!r} is not supported")
    pads = [0] * (2 * r) if auto == "VALID" else list(attr(node, "pads", [0] * (2 * r)))
    begin, end = pads[:r], pads[r:]
    return begin, end, [f - b - e for f, b, e in zip(full, begin, end)]


def transposed_windows(node, spatial: tuple, kernel: tuple) -> Windows:
    """ConvTranspose as a gather: output position ``o`` takes input ``i``
    through kernel offset ``k`` where ``o = i * stride - pad + k * dilation``;
    the (K, O) table holds that ``i`` (flattened), or the past-the-end
    index (read as 0) where no input position lands there."""
    r = len(spatial)
    strides, dilations = _steps(node, kernel, r)
    begin, _, out = _transposed_pads(node, spatial, kernel, strides, dilations)
    if min(out, default=1) < 1:
        raise unsupported(node, f"an empty output {tuple(out)}")
    k_grid = np.indices(kernel).reshape(r, -1)
    o_grid = np.indices(out).reshape(r, -1)
    col = lambda v: np.asarray(v).reshape(r, 1, 1)               # noqa: E731
    num = o_grid[:, None, :] + col(begin) - k_grid[:, :, None] * col(dilations)
    pos = num // col(strides)
    inside = np.all((num % col(strides) == 0) & (pos >= 0) & (pos < col(spatial)), axis=0)
    return Windows(tuple(kernel), tuple(out), _index_table(node, pos, inside, spatial), inside, inside)
