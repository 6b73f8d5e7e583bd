"""Discrete Fourier transforms with numpy.fft's signatures and results:
``rec.fft ifft rfft irfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn``.

Each transform along one axis is one dispatch: every row along the axis,
over any strided view and batched over all the other axes, is read
(cropped or zero-padded to ``n``), transformed in shared memory and
written, scaled by the ``norm`` factor, into the output. Powers of two up
to 4,096 take their own fixed-length kernel (ops/fft_fixed.py: the plan
unrolled, the row in registers, a layout for rows along memory and one for
columns; real rows along memory through a transform of half their length,
ops/fft_halves.py); every other length the generic ``fft_rows`` kernel
(ops/fft_kernels.py: the plan in push constants). An n-dimensional transform is one such pass per axis, in
numpy's order; a pass that keeps its axis's length works in place on the
output, one that changes it writes a new intermediate tensor.

Inputs are float32, float16 or complex64 tensors (complex64 for the
``irfft`` family; real ones, as numpy, are complex with zero imaginary
parts for ``fft``); outputs are complex64 (float32 for the ``irfft``
family), new tensors or ``out=``. float16 is storage only (where the host
enabled 16-bit storage): the row kernels widen float16 rows to float32 as
they read them ("half" rows, fft_kernels.LOADS) and compute in float32,
and the ``irfft`` family rounds to float16 as it writes a float16 ``out=``;
without ``out=`` a float16 input gives complex64 (the ``fft`` and ``rfft``
families), as numpy 2 does (it too transforms float16 in float32; numpy 1.x
gives complex128). A complex result refuses a float16
``out=``. The n-dimensional forward transforms also read an image's
pixels (as float32, whatever its format), and ``irfft2`` / ``irfftn``
write into an image ``out=`` (ops/fft_images.py).

Lengths whose prime factors are 2, 3, 5 and 7 are transformed directly up
to the device's shared memory (4,096 points where it has 32 KB for a
workgroup); others go through Bluestein's algorithm, whose power-of-two
convolution (>= 2n - 1 points) must fit the same memory. Longer rows that
are the product of two such lengths take the four-step FFT, other long
rows Bluestein's algorithm around it (ops/fft_long.py), up to half the
square of the longest row a workgroup holds (2^23 points with 32 KB);
longer ones are refused (UnsupportedError) before anything is recorded.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from ..dtypes import complex64, float16, float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.spec import groups_for
from .base import Dispatch, OpResult, check_out, check_tensor, coalesce, normalize_axis, op
from . import fft_fixed, fft_kernels as fk
from . import fft_images, fft_long
from .fft_images import LAST_TWO, ImageRows

NORMS = ("backward", "ortho", "forward")
REAL = ("float32", "float16")                  # the real dtypes a transform reads, and irfft's family writes
LOAD_KINDS = {"float32": "real", "float16": "half", "complex64": "complex"}    # a pass's rows by input dtype


@dataclass(frozen=True)
class Pass:
    """A transform along one axis: its length ``n``, how rows are read and
    written (fft_kernels.KINDS), its direction (-1 forward, +1 inverse)."""
    axis: int
    n: int
    load: str             # "auto" (real, half or complex, from the tensor), or "hermitian"
    store: str            # "complex" or "real" (float32 or float16, from the output tensor)
    sign: int
    out_len: int


def _norm(norm) -> str:
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise InvalidArgumentError(f"norm must be one of {NORMS} or None, got {norm!r}")
    return norm


def _scale(norm: str, n: int, sign: int) -> float:
    """numpy.fft's factor for one axis: ``backward`` scales the inverse by
    1/n, ``forward`` the forward, ``ortho`` both by 1/sqrt(n)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    scaled = (norm == "backward") == (sign > 0)
    return 1.0 / n if scaled else 1.0


def _length(n, what: str) -> int:
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise InvalidArgumentError(f"{what} must be an integer, got {n!r}")
    n = int(n.__index__())
    if n < 1:
        raise InvalidArgumentError(f"{what}: invalid number of data points ({n}) specified")
    return n


def _listed(names) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def checked_input(ctx, x, what: str, allowed) -> object:
    """The input tensor ``x`` of dtype one of ``allowed`` (a float16 one
    only where the host enabled 16-bit storage: check_tensor says so)."""
    t = check_tensor(ctx, x, f"{what} input")
    if t.dtype.name not in allowed:
        raise DTypeError(f"{what} takes {_listed(allowed)} tensors, got {t.dtype}")
    if t.ndim == 0:
        raise ShapeError(f"{what} needs at least one axis, got a 0-d tensor")
    return t


# -- planning one pass ----------------------------------------------------------------

def pass_method(ctx, n: int, what: str) -> tuple:
    """How a length-``n`` pass runs: ("direct", points, stages) or
    ("bluestein", points, stages) in one workgroup per row, or over rows
    too long for one (ops/fft_long.py): ("four-step", (n1, n2)) or
    ("bluestein four-step", (m, (m1, m2)))."""
    method = fk.workgroup_method(ctx, n)
    if method is not None:
        return method
    factors = fft_long.split(ctx, n)
    if factors is not None:
        return "four-step", factors
    bluestein = fft_long.bluestein_split(ctx, n)
    if bluestein is not None:
        return "bluestein four-step", bluestein
    longest = fk.largest_points(ctx)
    raise UnsupportedError(
        f"{what}: a length-{n} transform is too long for this device's shared memory "
        f"({ctx.limits.max_shared_memory} bytes a workgroup): it transforms every length up to "
        f"{longest * longest // 2:,}, and longer ones up to {longest * longest:,} that are a product of two "
        f"lengths up to {longest:,}")


def _batches(src, dst, axis: int, extra=()):
    """(shape, src strides, dst strides, strides of each ``extra`` view)
    of the batch axes (all but ``axis``, merged where every view allows),
    each list as long as needed. ``extra``: full-rank stride tuples of
    further views walked alongside (a convolution's spectrum)."""
    others = [i for i in range(src.ndim) if i != axis]
    shape = tuple(dst.shape[i] for i in others)
    if shape != tuple(src.shape[i] for i in others):
        raise AssertionError("a pass's input and output differ off its axis")
    if not shape:
        return ((1,), [0], [0]) + tuple([0] for _ in extra)
    lists = [[src.strides[i] for i in others], [dst.strides[i] for i in others]]
    lists += [[strides[i] for i in others] for strides in extra]
    dims, merged = coalesce(shape, lists)
    return (dims, *merged)


def plan_pass(ctx, src, dst, p: Pass, method: tuple, scale: float) -> list:
    """The dispatches of one pass from ``src`` into ``dst`` (their shapes
    equal off ``p.axis``) by ``method`` (:func:`pass_method`), its results
    multiplied by ``scale``."""
    if src.size == 0 or dst.size == 0:
        return []
    load = p.load if p.load != "auto" else row_kind(src)
    store = "half" if p.store == "real" and dst.dtype == float16 else p.store
    avail = src.shape[p.axis]
    len_in = min(avail, p.n // 2 + 1) if load == "hermitian" else min(avail, p.n)
    if method[0] in ("four-step", "bluestein four-step"):
        plan = fft_long.plan_long_pass if method[0] == "four-step" else fft_long.plan_bluestein_pass
        return plan(ctx, src, dst, p.axis, p.n, method[1], load, store, p.sign, p.out_len, len_in, scale,
                    functools.partial(plan_rows, ctx, method=None))
    return plan_rows(ctx, src, dst, p.axis, p.n, load, store, p.sign, p.out_len, len_in, scale, method)


def row_kind(src) -> str:
    """How a pass reads ``src``'s rows: "real", "half", "complex" (by its
    dtype), or an image's load."""
    if isinstance(src, ImageRows):
        assert src.load is not None, "an image's rows are read only after fft_images.readable chose the direct read"
        return src.load
    return LOAD_KINDS[src.dtype.name]


def source_binding(src):
    """What a pass binds to read ``src``: a tensor's buffer or an image's binding."""
    if isinstance(src, ImageRows):
        assert src.load is not None, "an image's rows are bound only after fft_images.readable chose the direct read"
        return src.image_binding
    return src.buffer


def plan_rows(ctx, src, dst, axis, n, load, store, sign, out_len, len_in, scale, method, spectrum=None) -> list:
    """One pass along ``axis`` in which each workgroup transforms whole rows
    (``method``: fft_kernels.workgroup_method's, or None to find it): the
    fixed-length kernel where there is one for ``n``, else ``fft_rows``.
    ``spectrum``: (complex64 tensor, its strides broadcast to ``src``'s
    shape) to convolve with, fused (forward, product, inverse); only the
    fixed-length kernel does (see :func:`fuses`)."""
    kind, points, plan = method or fk.workgroup_method(ctx, n)
    values = {"len_in": len_in, "out_len": out_len, "in_step": src.strides[axis],
              "out_step": dst.strides[axis], "sign": float(sign), "scale": scale}
    if isinstance(src, ImageRows):
        values.update(src.push)
    rows, lead, strides = _walk_rows(src, dst, axis, values, () if spectrum is None else (spectrum[1],))
    # Neighbouring rows side by side in memory (columns of a row-major
    # array): a workgroup reads and writes across its rows first, so each
    # access instruction touches consecutive elements.
    load_fast = int(abs(values["is2"]) == 1 and src.strides[axis] != 1)
    store_fast = int(abs(values["os2"]) == 1 and dst.strides[axis] != 1)
    columns = bool(load_fast or store_fast)
    sectors = columns and _on_sectors(src, dst, axis, values, strides)
    form = "" if spectrum is not None else fft_fixed.pass_form(n, columns, rows, load, store, sectors)
    if form and not fft_fixed.fits(ctx, n, columns, form):
        form = ""
    if spectrum is not None or (kind == "direct" and fft_fixed.fits(ctx, n, columns, form)):
        spec = fft_fixed.fixed_spec(n, load, store, columns, spectrum is not None, form)
        bindings = (source_binding(src), dst.buffer)
        per_group = fft_fixed.shape(spec)[2]
        if spectrum is not None:
            bindings += (spectrum[0].buffer,)
            values.update(k_step=spectrum[1][axis])
    else:
        bluestein = kind == "bluestein"
        size, threads = fk.size_class(ctx, points)
        spec = fk.fft_spec(load, store, bluestein, size, threads)
        bindings = (source_binding(src), dst.buffer, fk.roots(ctx, points).buffer)
        if bluestein:
            bindings += (fk.chirp(ctx, n, sign).buffer, fk.chirp_spectrum(ctx, n, points, sign).buffer)
        plan0, plan1 = fk.packed_plan(plan)
        per_group, stride = fk.rows_per_group(size, points, rows)
        values.update(n=n, points=points, plan0=plan0, plan1=plan1, stages=len(plan), per_group=per_group,
                      stride=stride, load_rows_fast=load_fast, store_rows_fast=store_fast)
    threads = spec.workgroup[0]
    groups = groups_for(-(-rows // per_group) * threads, threads, ctx.limits.max_workgroup_count)
    views = (src, dst) + ((spectrum[0],) if spectrum is not None else ())
    out = []
    for index in itertools.product(*map(range, lead)):
        offsets = [v.offset + sum(i * s for i, s in zip(index, st)) for v, st in zip(views, strides)]
        values.update(zip(("in_off", "out_off", "k_off"), offsets))
        out.append(Dispatch(spec, bindings, spec.pack(values), groups))
    return out


def _on_sectors(src, dst, axis: int, values: dict, lead_strides) -> bool:
    """Whether a column pass's workgroups of four columns (fft_fixed's
    aligned layout) each start on a 32-byte sector in both views: the
    columns ascending side by side, and every offset, step and count that
    places a workgroup's first column a multiple of four values."""
    if values["is2"] != 1 or values["os2"] != 1:
        return False
    places = (src.offset, dst.offset, src.strides[axis], dst.strides[axis], values["b2"],
              values["is0"], values["is1"], values["os0"], values["os1"], *lead_strides[0], *lead_strides[1])
    return all(p % fft_fixed.SECTOR_VALUES == 0 for p in places)


def fuses(ctx, src, axis: int, n: int) -> bool:
    """Whether a convolution along ``axis`` of ``src`` (length ``n``) runs
    fused in one fixed-length pass (else: transform, product, inverse)."""
    return all(fft_fixed.fits(ctx, n, columns) for columns in (False, True)) and src.shape[axis] == n


def _walk_rows(src, dst, axis, values, extra=()) -> tuple:
    """The batch a row kernel walks: sets its sizes and strides in
    ``values`` (``extra`` views' as ks0..ks2); returns (rows it walks, the
    leading batch axes' sizes that take a dispatch per index, and the
    leading axes' strides of src, dst and each extra view)."""
    dims, *strides = _batches(src, dst, axis, extra)
    # The kernel walks the last BATCH_DIMS batch axes; any before them get a dispatch per index.
    lead, walk = dims[:-fk.BATCH_DIMS], dims[-fk.BATCH_DIMS:]
    pad = fk.BATCH_DIMS - len(walk)
    walk = (1,) * pad + tuple(walk)
    values.update(rows=math.prod(walk), b1=walk[1], b2=walk[2])
    for prefix, st in zip(("is", "os", "ks"), strides):
        w = [0] * pad + list(st[len(lead):])
        values.update({f"{prefix}{i}": w[i] for i in range(3)})
    return values["rows"], lead, [st[:len(lead)] for st in strides]


# -- running passes -----------------------------------------------------------------

def _shape_after(shape: tuple, p: Pass) -> tuple:
    return shape[:p.axis] + (p.out_len,) + shape[p.axis + 1:]


def run_passes(ctx, x, passes: list, norm: str, out, what: str) -> OpResult:
    """The passes in order from ``x``; the result in ``out`` (made when None).
    Passes that keep the shape (and stay complex) work in place; the last
    pass that does not (or the first) writes ``out``."""
    shapes = [x.shape]
    for p in passes:
        shapes.append(_shape_after(shapes[-1], p))
    methods = [pass_method(ctx, p.n, what) for p in passes]     # every length checked before any table is made
    final_dtype = float32 if passes[-1].store == "real" else complex64     # float16 only as out=
    # A pass needs a new tensor where its output's shape or dtype is not its input's.
    writes_out = max([0] + [i for i, p in enumerate(passes) if shapes[i + 1] != shapes[i] or p.store == "real"])
    if out is None:
        result = ctx.empty(shapes[-1], final_dtype)
    else:
        # The very input as out is fine: no pass writes a row before reading all of it.
        allowed = (float32, float16) if final_dtype == float32 else complex64
        result = check_out(ctx, out, shapes[-1], allowed, {"the input": x}, f"{what} out")
    dispatches, cur = [], x
    for i, p in enumerate(passes):
        if i == writes_out:
            dst = result
        elif i < writes_out:
            dst = ctx.empty(shapes[i + 1], float32 if p.store == "real" else complex64)
        else:
            dst = cur                                           # in place: every row is read before written
        dispatches += plan_pass(ctx, cur, dst, p, methods[i], _scale(norm, p.n, p.sign))
        cur = dst
    return OpResult(result, dispatches)


def _axes_and_lengths(x, s, axes, what: str):
    """numpy.fft's rules for ``s`` and ``axes``: all axes by default, the
    last len(s) axes when only ``s`` is given; lengths default to the
    input's."""
    if s is not None and not isinstance(s, (tuple, list)):
        raise InvalidArgumentError(f"{what}: s must be a sequence of lengths, got {s!r}")
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
        if len(axes) and axes[0] < 0:
            raise ShapeError(f"{what}: s has {len(s)} lengths, the input only {x.ndim} axes")
    else:
        # numpy transforms a repeated axis once per time it is named
        axes = tuple(normalize_axis(a, x.ndim, what) for a in (axes if isinstance(axes, (tuple, list)) else (axes,)))
    if s is not None and len(s) != len(axes):
        raise ShapeError(f"{what}: s and axes must have the same length ({len(s)} vs {len(axes)})")
    if not axes:
        raise ShapeError(f"{what}: no axes to transform")
    lengths = [None] * len(axes) if s is None else [_length(v, f"{what} s") for v in s]
    return list(axes), lengths


# -- the ops -------------------------------------------------------------------------

def _one(ctx, x, n, axis, norm, out, what, sign, real_in=False, real_out=False):
    allowed = REAL if real_in else ("complex64",) if real_out else REAL + ("complex64",)
    t = checked_input(ctx, x, what, allowed)
    ax = normalize_axis(axis, t.ndim, what)
    m = t.shape[ax]
    if real_out:
        length = _length(n if n is not None else 2 * (m - 1), f"{what} n")
        p = Pass(ax, length, "hermitian", "real", sign, length)
    else:
        length = _length(n if n is not None else m, f"{what} n")
        p = Pass(ax, length, "auto", "complex", sign, length // 2 + 1 if real_in else length)
    return run_passes(ctx, t, [p], _norm(norm), out, what)


@op("fft", windows=None)
def fft(ctx, x, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.fft: the forward DFT of float32, float16 or complex64 ``x`` along ``axis``."""
    return _one(ctx, x, n, axis, norm, out, "fft", -1)


@op("ifft", windows=None)
def ifft(ctx, x, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.ifft: the inverse DFT along ``axis``."""
    return _one(ctx, x, n, axis, norm, out, "ifft", 1)


@op("rfft", windows=None)
def rfft(ctx, x, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.rfft: the DFT of float32 or float16 ``x``, its n // 2 + 1 non-negative frequencies."""
    return _one(ctx, x, n, axis, norm, out, "rfft", -1, real_in=True)


@op("irfft", windows=None)
def irfft(ctx, x, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.irfft: the real length-``n`` (default 2 * (m - 1)) inverse of
    rfft, from complex64 ``x``'s first n // 2 + 1 values along ``axis``
    (float32, or float16 into a float16 ``out``)."""
    return _one(ctx, x, n, axis, norm, out, "irfft", 1, real_out=True)


def _many(ctx, x, s, axes, norm, out, what: str, sign: int, kind: str = "c2c"):
    """An n-dimensional transform; ``kind`` "c2c", "r2c" (rfftn) or "c2r"
    (irfftn). Forward kinds read an image too, c2r writes one as ``out``
    (ops/fft_images.py)."""
    norm = _norm(norm)
    allowed = {"c2c": REAL + ("complex64",), "r2c": REAL, "c2r": ("complex64",)}[kind]
    image = None
    if fft_images.is_image(x):
        if kind == "c2r":
            raise DTypeError(f"{what} reads a complex64 spectrum, and an image holds real pixels; an image can "
                             "take its result instead (out=image)")
        image = fft_images.image_rows(ctx, x, what)
        t, axes = image, fft_images.image_axes(image.ndim, s, axes, what)
    else:
        t = checked_input(ctx, x, what, allowed)
        if kind == "c2r" and fft_images.is_image(out):      # the defaults: the image's spatial axes
            axes = fft_images.image_axes(t.ndim, s, axes, what)
    axes, lengths = _axes_and_lengths(t, s, axes, what)
    shape = list(t.shape)
    passes = []
    if kind == "r2c":       # the real axis first, then the others (numpy's order)
        n = lengths[-1] or shape[axes[-1]]
        passes.append(Pass(axes[-1], n, "auto", "complex", sign, n // 2 + 1))
        shape[axes[-1]] = n // 2 + 1
    todo = range(len(axes) - 1, -1, -1) if kind == "c2c" else range(len(axes) - 2, -1, -1)
    for i in todo:
        n = lengths[i] or shape[axes[i]]
        passes.append(Pass(axes[i], n, "auto", "complex", sign, n))
        shape[axes[i]] = n
    if kind == "c2r":       # the others first, the real axis last
        n = _length(lengths[-1] if lengths[-1] else 2 * (shape[axes[-1]] - 1), f"{what} s")
        passes.append(Pass(axes[-1], n, "hermitian", "real", sign, n))
        shape[axes[-1]] = n
        if fft_images.is_image(out):
            target = fft_images.ImageOut(ctx, out, shape, what)
            return target.finish(run_passes(ctx, t, passes, norm, target.tensor, what))
    prelude = []
    if image is not None:
        t, prelude = fft_images.readable(ctx, image, passes[0].axis, passes[0].n, what)
    result = run_passes(ctx, t, passes, norm, out, what)
    return OpResult(result.value, prelude + result.dispatches)


@op("fftn", windows=None)
def fftn(ctx, x, s=None, axes=None, norm=None, out=None):
    """numpy.fft.fftn over ``axes`` (default all; the last len(s) with ``s``).
    ``x`` may be an image: its pixels, over its spatial axes by default
    (ops/fft_images.py)."""
    return _many(ctx, x, s, axes, norm, out, "fftn", -1)


@op("ifftn", windows=None)
def ifftn(ctx, x, s=None, axes=None, norm=None, out=None):
    """numpy.fft.ifftn (``x`` may be an image, as for fftn)."""
    return _many(ctx, x, s, axes, norm, out, "ifftn", 1)


@op("rfftn", windows=None)
def rfftn(ctx, x, s=None, axes=None, norm=None, out=None):
    """numpy.fft.rfftn: rfft along the last of ``axes``, fft along the others
    (``x`` may be an image, as for fftn)."""
    return _many(ctx, x, s, axes, norm, out, "rfftn", -1, "r2c")


@op("irfftn", windows=None)
def irfftn(ctx, x, s=None, axes=None, norm=None, out=None):
    """numpy.fft.irfftn: ifft along all but the last of ``axes``, irfft along it.
    ``out`` may be an image with STORAGE usage: the result, of its pixels'
    shape, is copied into it (ops/fft_images.py)."""
    return _many(ctx, x, s, axes, norm, out, "irfftn", 1, "c2r")


@op("fft2", windows=None)
def fft2(ctx, x, s=None, axes=LAST_TWO, norm=None, out=None):
    """numpy.fft.fft2: fftn over the last two axes (an image's spatial axes:
    ``x`` may be an image, ops/fft_images.py)."""
    return _many(ctx, x, s, axes, norm, out, "fft2", -1)


@op("ifft2", windows=None)
def ifft2(ctx, x, s=None, axes=LAST_TWO, norm=None, out=None):
    """numpy.fft.ifft2 (``x`` may be an image, as for fft2)."""
    return _many(ctx, x, s, axes, norm, out, "ifft2", 1)


@op("rfft2", windows=None)
def rfft2(ctx, x, s=None, axes=LAST_TWO, norm=None, out=None):
    """numpy.fft.rfft2 (``x`` may be an image, as for fft2)."""
    return _many(ctx, x, s, axes, norm, out, "rfft2", -1, "r2c")


@op("irfft2", windows=None)
def irfft2(ctx, x, s=None, axes=LAST_TWO, norm=None, out=None):
    """numpy.fft.irfft2 (``out`` may be an image, as for irfftn)."""
    return _many(ctx, x, s, axes, norm, out, "irfft2", 1, "c2r")
