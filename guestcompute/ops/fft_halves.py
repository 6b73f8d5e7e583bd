"""Real rows through a transform of half their length, for the
fixed-length FFT kernels (ops/fft_fixed.py).

A real row x of n points is read as the complex row z[j] = x[2j] +
i x[2j+1] of m = n/2 points ("r2c"). Its m-point transform Z gives the
real row's spectrum:

    X[k] = E[k] + w^k O[k],  E[k] = (Z[k] + conj Z[m-k]) / 2,
                             O[k] = (Z[k] - conj Z[m-k]) / 2i,  w = exp(-2 pi i / n)

(Z[m] is Z[0]; X[m] = Re Z[0] - Im Z[0]). The inverse ("c2r") runs the
other way: from the Hermitian half X[0..m], Z[k] = A[k] + i B[k] with

    A[k] = X[k] + conj X[m-k],  B[k] = (X[k] - conj X[m-k]) w^-k,

whose m-point inverse transform z holds x[2j] = Re z[j] and x[2j+1] =
Im z[j]. Half the butterflies, registers and shared memory a row takes in
the full-length transform of a real row (which cuFFT avoids the same way);
the price is one more trip through shared memory (r2c: Z[m-k] is in another
invocation's registers) or a second read of each input element (c2r: X[m-k],
from the same row, so mostly from the cache).

The functions write GLSL into the code object of fft_fixed's generator:
``let(expr)`` declares a vec2 temporary and returns its name, ``lines``
collects statements, ``count`` numbers fresh names. An invocation holds
row positions ``j + T*e`` (``threads`` = T); ``where(p)`` is the
shared-memory slot of position p of its row.
"""
from __future__ import annotations

import math

import numpy as np

from .pixels import is_image_layout

SMALLEST = 8        # rows shorter than this take the full-length transform


def halves(n: int, load: str, store: str, columns: bool, convolve: bool) -> str:
    """"r2c", "c2r", or "" (the full-length transform) for a fixed kernel
    of length ``n`` reading ``load`` rows and writing ``store`` ones. Rows
    along memory only: a column workgroup's pairs of neighbouring points
    would lie a whole row apart."""
    if columns or convolve or n < SMALLEST:
        return ""
    if (load in ("real", "half") or is_image_layout(load)) and store == "complex":
        return "r2c"
    if load == "hermitian" and store in ("real", "half"):
        return "c2r"
    return ""


def _turned(code, w: str, num: int, n: int) -> str:
    """``w`` times exp(sg * 2*pi*i * num / n), a float32-rounded constant."""
    if num % n == 0:
        return w
    angle = 2.0 * math.pi * num / n
    c, s = float(np.float32(math.cos(angle))), float(np.float32(math.sin(angle)))
    return code.let(f"cmul({w}, vec2({c!r}, sg * {s!r}))")


def _root_powers(code, per: int, threads: int, n: int) -> list:
    """Names of w^p for the invocation's positions p = j + T*e: one root
    computed (w^j, fft_fixed's ``twiddle()``), the rest products with
    constants."""
    wj = code.let("twiddle(j)")
    return [_turned(code, wj, threads * e, n) for e in range(per)]


def r2c_loads(code, per: int, threads: int, load: str = "load") -> list:
    """Names of z at the invocation's positions: pairs of real points, read
    by the GLSL function ``load``."""
    return [code.let(f"live ? vec2({load}(2u * (j + {e * threads}u), ib).x, "
                     f"{load}(2u * (j + {e * threads}u) + 1u, ib).x) : vec2(0.0)") for e in range(per)]


def c2r_loads(code, per: int, threads: int, n: int, load: str = "load") -> list:
    """Names of Z at the invocation's positions, from the Hermitian half
    read by the GLSL function ``load``."""
    m, turns, out = n // 2, _root_powers(code, per, threads, n), []
    for e in range(per):
        p = f"(j + {e * threads}u)"
        a = code.let(f"live ? {load}({p}, ib) : vec2(0.0)")
        b = code.let(f"live ? {load}({m}u - {p}, ib) : vec2(0.0)")
        if e == 0:
            # X[0] and X[m] count by their real parts, as in numpy's irfft.
            code.lines.append(f"if (j == 0u) {{ {a}.y = 0.0; {b}.y = 0.0; }}")
        bc = code.let(f"vec2({b}.x, -{b}.y)")
        total, diff = code.let(f"{a} + {bc}"), code.let(f"cmul({a} - {bc}, {turns[e]})")
        out.append(code.let(f"vec2({total}.x - {diff}.y, {total}.y + {diff}.x)"))
    return out


def _exchange(code, regs: list, own: list, wanted: list, split: bool) -> list:
    """Names of the values at slots ``wanted`` once every invocation wrote
    ``regs`` to slots ``own`` (whole values, or real then imaginary parts)."""
    if not split:
        code.lines += [f"sh[{at}] = {r};" for at, r in zip(own, regs)] + ["barrier();"]
        return [code.let(f"sh[{at}]") for at in wanted]
    parts = []
    for part in "xy":
        names = [f"f{code.count}_{e}" for e in range(len(regs))]
        code.count += 1
        code.lines += [f"sh[{at}] = {r}.{part};" for at, r in zip(own, regs)] + ["barrier();"]
        code.lines += [f"float {nm} = sh[{at}];" for nm, at in zip(names, wanted)] + ["barrier();"]
        parts.append(names)
    return [code.let(f"vec2({x}, {y})") for x, y in zip(*parts)]


def r2c_spectrum(code, regs: list, threads: int, where, split: bool, n: int) -> list:
    """Names of X at the invocation's positions, from Z in ``regs``."""
    m, per = n // 2, len(regs)
    own = [where(f"j + {e * threads}u") for e in range(per)]
    mirrored = [where(f"(({m}u - j - {e * threads}u) % {m}u)") for e in range(per)]
    mirrors = _exchange(code, regs, own, mirrored, split)
    turns, out = _root_powers(code, per, threads, n), []
    for e in range(per):
        zc = code.let(f"vec2({mirrors[e]}.x, -{mirrors[e]}.y)")
        even, d = code.let(f"0.5 * ({regs[e]} + {zc})"), code.let(f"{regs[e]} - {zc}")
        out.append(code.let(f"{even} + cmul({turns[e]}, vec2(0.5 * {d}.y, -0.5 * {d}.x))"))
    return out


def r2c_stores(spectrum: list, z0: str, threads: int, n: int) -> str:
    """GLSL writing X[p] (and, for a full-length output, X[n-p] = conj X[p])
    and X[m], scaled, up to ``pc.out_len``."""
    m = n // 2
    lines = [f"{{ uint p = j + {e * threads}u; vec2 v = {x} * pc.scale; "
             f"if (p < pc.out_len) dst[ob + int(p) * pc.out_step] = v; "
             f"if (p > 0u && {n}u - p < pc.out_len) dst[ob + int({n}u - p) * pc.out_step] = vec2(v.x, -v.y); }}"
             for e, x in enumerate(spectrum)]
    lines.append(f"if (j == 0u && {m}u < pc.out_len) "
                 f"dst[ob + {m} * pc.out_step] = vec2({z0}.x - {z0}.y, 0.0) * pc.scale;")
    return "\n    ".join(lines)


def c2r_stores(regs: list, threads: int, stored) -> str:
    """GLSL writing x[2p] = Re z[p] and x[2p+1] = Im z[p], scaled, up to
    ``pc.out_len``; ``stored(v)``: the GLSL of the value written for the
    real part of vec2 ``v`` (fft_kernels.STORED)."""
    return "\n    ".join(
        f"{{ uint p = 2u * (j + {e * threads}u); vec2 v = {z} * pc.scale; "
        f"if (p < pc.out_len) dst[ob + int(p) * pc.out_step] = {stored('v')}; "
        f"if (p + 1u < pc.out_len) dst[ob + int(p + 1u) * pc.out_step] = {stored('v.yx')}; }}"
        for e, z in enumerate(regs))
