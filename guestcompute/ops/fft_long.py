"""Rows longer than a workgroup's shared memory holds: the four-step FFT.

A row of n = n1 * n2 points is read as an (n1, n2) matrix (element a * n2 + b
at [a][b]):

1. every column is transformed (length n1, one ``fft_rows`` pass over a
   view of the row: no copy);
2. element [k1][b] is multiplied by the twiddle factor W_n^(k1 * b) (a table
   made once per length; one complex-product dispatch, ops/fft_product.py);
3. every row is transformed (length n2), written through a transposed view
   of the output row, so that [k1][k2] lands at k1 + n1 * k2 — numpy's order.

Inputs that the first pass cannot view as the matrix (cropped or padded
rows, real rows of float32 or float16, the Hermitian half rows of
``irfft``) are first laid out as full complex rows in a scratch tensor;
outputs shorter than n (``rfft``) or real (``irfft``, float32 or float16)
go through one too. Both factors must be lengths a
workgroup transforms (ops/fft_kernels.py).

A long length with no such factors (a large prime) takes Bluestein's
algorithm around two four-step transforms of a power of two m >= 2n - 1:
the row times the chirp, zero-padded to m, transformed, times the chirp's
spectrum, transformed back, times the chirp again (the same tables as the
kernel's own Bluestein variant).
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import complex64
from ..tensor import Tensor
from . import fft_kernels as fk
from .base import registered_ops
from .fft_product import plan_product


def split(ctx, n: int):
    """(n1, n2) with n1 * n2 = n and n1 <= n2, both transformed by one
    workgroup, as equal as possible and preferring factors the radix
    stages take directly; None when there is no such pair."""
    best = None
    for n1 in range(2, math.isqrt(n) + 1):
        if n % n1:
            continue
        methods = (fk.workgroup_method(ctx, n1), fk.workgroup_method(ctx, n // n1))
        if None in methods:
            continue
        score = (any(m[0] != "direct" for m in methods), abs(math.log(n1 / (n // n1))))
        if best is None or score < best[0]:
            best = (score, (n1, n // n1))
    return None if best is None else best[1]


def bluestein_split(ctx, n: int):
    """(m, (m1, m2)): the power of two Bluestein's convolution of a long
    length-``n`` row takes, and its four-step factors; None if it has none."""
    m = fk.bluestein_size(n)
    factors = split(ctx, m)
    return None if factors is None else (m, factors)


def _last(t: Tensor, axis: int) -> Tensor:
    """``t`` with ``axis`` moved to the end (a view)."""
    order = [i for i in range(t.ndim) if i != axis] + [axis]
    return t.permute(*order)


def _matrix(row: Tensor, n1: int, n2: int, transposed: bool = False) -> Tensor:
    """A view of the last axis (n points, stride s) as (n1, n2): element
    a * n2 + b at [a][b]; ``transposed``: element k1 + n1 * k2 at [k1][k2]."""
    s = row.strides[-1]
    inner = (s, n1 * s) if transposed else (n2 * s, s)
    return Tensor(row.buffer, row.shape[:-1] + (n1, n2), row.dtype, row.strides[:-1] + inner, row.offset)


def _twiddles(ctx, n: int, n1: int, n2: int, sign: int) -> Tensor:
    """W_n^(k1 * b) for k1 < n1, b < n2, the exponent reduced exactly."""
    def make():
        e = (np.arange(n1, dtype=np.int64)[:, None] * np.arange(n2, dtype=np.int64)[None, :]) % n
        return np.exp(sign * 2j * np.pi * e / n)
    return fk.table(ctx, ("twiddles", n, n1, sign), make)


def _full_rows(ctx, src: Tensor, n: int, load: str, len_in: int, out: Tensor = None) -> tuple:
    """(tensor, dispatches): the complex length-``n`` rows the transform
    reads — ``src`` itself where it already is that and no ``out`` is
    given, else ``out`` (or a new scratch tensor) filled from it: cropped or
    zero-padded, real rows with zero imaginary parts, Hermitian half rows
    completed with their conjugates."""
    if out is None and load == "complex" and len_in == n == src.shape[-1]:
        return src, []
    ops = registered_ops()
    full = out if out is not None else ctx.empty(src.shape[:-1] + (n,), complex64)

    def run(name, *args, **kw):
        return list(ops[name](ctx, *args, **kw).dispatches)
    # Each element written once: the input's values, zeros past them (the
    # Hermitian mirror is written over its zeros).
    steps = run("fill", full.real[..., len_in:], 0.0)
    if load in ("real", "half"):     # float16 rows widen to float32 on the way
        return full, steps + run("fill", full.imag, 0.0) + run("cast", src[..., :len_in], "float32",
                                                              out=full.real[..., :len_in])
    steps += run("fill", full.imag[..., len_in:], 0.0)
    steps += run("copy", src.real[..., :len_in], out=full.real[..., :len_in])
    steps += run("copy", src.imag[..., :len_in], out=full.imag[..., :len_in])
    if load == "hermitian":
        k = min(len_in - 1, (n - 1) // 2)          # the conjugates of values 1..k, at n - 1 down to n - k
        if k > 0:
            mirror = slice(n - 1, n - k - 1, -1)
            steps += run("copy", src.real[..., 1:k + 1], out=full.real[..., mirror])
            steps += run("neg", src.imag[..., 1:k + 1], out=full.imag[..., mirror])
    return full, steps


def _copy_out(ctx, result: Tensor, out_rows: Tensor, store: str, out_len: int) -> list:
    """Dispatches copying the first ``out_len`` values of complex ``result``
    rows into ``out_rows`` (their real parts for a real ``store``, rounded
    to float16 for a "half" one)."""
    ops = registered_ops()
    copy = ops["copy"]
    if store in ("real", "half"):
        return list(ops["cast"](ctx, result.real[..., :out_len], out_rows.dtype, out=out_rows).dispatches)
    return list(copy(ctx, result.real[..., :out_len], out=out_rows.real).dispatches) + \
        list(copy(ctx, result.imag[..., :out_len], out=out_rows.imag).dispatches)


def plan_bluestein_pass(ctx, src, dst, axis: int, n: int, bluestein: tuple, load: str, store: str, sign: int,
                        out_len: int, len_in: int, scale: float, plan_rows) -> list:
    """A pass of length ``n`` by Bluestein's algorithm over two four-step
    transforms of ``bluestein = (m, (m1, m2))`` points."""
    m, factors = bluestein
    rows = _last(src, axis)
    ops = registered_ops()
    padded = ctx.empty(rows.shape[:-1] + (m,), complex64)
    steps = list(ops["fill"](ctx, padded.real[..., n:], 0.0).dispatches)
    steps += list(ops["fill"](ctx, padded.imag[..., n:], 0.0).dispatches)
    steps += _full_rows(ctx, rows, n, load, len_in, out=padded[..., :n])[1]
    chirp = fk.chirp(ctx, n, sign)
    steps.append(plan_product(ctx, padded[..., :n], chirp, padded[..., :n]))
    spectrum = ctx.empty(padded.shape, complex64)
    last = padded.ndim - 1
    steps += plan_long_pass(ctx, padded, spectrum, last, m, factors, "complex", "complex", -1, m, m, 1.0, plan_rows)
    steps.append(plan_product(ctx, spectrum, fk.chirp_spectrum(ctx, n, m, sign), spectrum))
    result = ctx.empty(padded.shape, complex64)
    steps += plan_long_pass(ctx, spectrum, result, last, m, factors, "complex", "complex", 1, m, m, scale,
                            plan_rows)
    steps.append(plan_product(ctx, result[..., :n], chirp, result[..., :n]))
    return steps + _copy_out(ctx, result, _last(dst, axis), store, out_len)


def plan_long_pass(ctx, src, dst, axis: int, n: int, factors: tuple, load: str, store: str, sign: int,
                   out_len: int, len_in: int, scale: float, plan_rows) -> list:
    """The dispatches of one pass along ``axis`` of length ``n`` (too long
    for one workgroup) from ``src`` into ``dst``. ``plan_rows(src, dst,
    axis, n, load, store, sign, out_len, len_in, scale)`` plans a pass a
    workgroup does (ops/fft.py)."""
    n1, n2 = factors
    full, steps = _full_rows(ctx, _last(src, axis), n, load, len_in)
    columns = ctx.empty(full.shape[:-1] + (n1, n2), complex64)
    last = columns.ndim - 1
    steps += plan_rows(_matrix(full, n1, n2), columns, last - 1, n1, "complex", "complex", sign, n1, n1, 1.0)
    steps.append(plan_product(ctx, columns, _twiddles(ctx, n, n1, n2, sign), columns))
    out_rows = _last(dst, axis)
    if store == "complex" and out_len == n:
        return steps + plan_rows(columns, _matrix(out_rows, n1, n2, transposed=True), last, n2,
                                 "complex", "complex", sign, n2, n2, scale)
    result = ctx.empty(full.shape, complex64)
    steps += plan_rows(columns, _matrix(result, n1, n2, transposed=True), last, n2, "complex", "complex",
                       sign, n2, n2, scale)
    return steps + _copy_out(ctx, result, out_rows, store, out_len)
