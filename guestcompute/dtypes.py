"""The element types guestcompute knows, what each needs from the device, and
how numbers from the host convert to them."""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .errors import DTypeError, InvalidArgumentError


@dataclass(frozen=True)
class DType:
    name: str          # numpy name, also the public name
    numpy: np.dtype
    glsl: str          # GLSL scalar type in buffers
    size: int          # bytes
    kind: str          # "float" | "int" | "uint" | "complex"
    feature: str = ""  # capability the host must have enabled ("" = always)

    def vec(self, width: int) -> str:
        """GLSL type of a `width`-wide vector of this dtype (1 → the scalar)."""
        if width == 1:
            return self.glsl
        prefix = {"float": "vec", "int": "ivec", "uint": "uvec"}[self.kind]
        if self.name == "float16":
            prefix = "f16vec"
        elif self.name == "uint8":
            prefix = "u8vec"
        return f"{prefix}{width}"

    def __str__(self) -> str:
        return self.name


float32 = DType("float32", np.dtype(np.float32), "float", 4, "float")
float16 = DType("float16", np.dtype(np.float16), "float16_t", 2, "float", "float16")
int32 = DType("int32", np.dtype(np.int32), "int", 4, "int")
uint32 = DType("uint32", np.dtype(np.uint32), "uint", 4, "uint")
uint8 = DType("uint8", np.dtype(np.uint8), "uint8_t", 1, "uint", "int8")

# 64-bit unsigned integers are stored, not computed with: a uint64 tensor is
# made, written, viewed and read back like any other, bound to user kernels,
# and sorted (its keys ranked through their two 32-bit halves, so no shader
# does 64-bit arithmetic and the host need not enable shaderInt64); every
# other op refuses it before recording (see ``check_storage_only``).
uint64 = DType("uint64", np.dtype(np.uint64), "uint64_t", 8, "uint")

# Complex numbers are numpy's complex64: interleaved float32 (real, imaginary)
# pairs, a vec2 in shaders. The FFTs and the elementwise arithmetic of
# COMPLEX_OPS compute with them; ``Tensor.real`` and ``Tensor.imag`` are
# float32 views of their parts, which every float32 op takes; other ops
# refuse complex tensors before recording.
complex64 = DType("complex64", np.dtype(np.complex64), "vec2", 8, "complex")
FFT_OPS = ("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "fft_convolve")
COMPLEX_OPS = ("add", "sub", "mul", "div", "neg", "conj", "abs", "angle", "cast", "copy")

ALL = {d.name: d for d in (float32, float16, int32, uint32, uint8)}   # the dtypes ops compute in
STORAGE_ONLY = {"uint64": ("sort", "argsort", "run_kernel"),          # dtype -> the ops that take it
                "complex64": COMPLEX_OPS + FFT_OPS + ("run_kernel",)}
# What the refusal adds, per storage-only dtype, about using it anyway.
STORAGE_HINTS = {"complex64": " (for the others, their parts t.real and t.imag are float32 views every op takes)"}
KNOWN = {**ALL, "uint64": uint64, "complex64": complex64}


def as_dtype(value) -> DType:
    """Accept a DType, a name, a numpy dtype or a numpy scalar type."""
    if value.__class__ is DType:
        return value
    try:
        known = _KNOWN.get(value)     # every tensor creation passes here: skip numpy's parsing
    except TypeError:                 # unhashable: let numpy say what it is
        known = None
    if known is not None:
        return known
    if isinstance(value, DType):
        return value
    try:
        name = np.dtype(value).name
    except TypeError:
        raise DTypeError(f"unknown dtype {value!r}; use one of {sorted(KNOWN)}") from None
    if name not in KNOWN:
        raise DTypeError(f"dtype {name} is not supported; use one of {sorted(KNOWN)}")
    if isinstance(value, (str, np.dtype, type)) and len(_KNOWN) < 256:
        _KNOWN[value] = KNOWN[name]
    return KNOWN[name]


_KNOWN: dict = {}      # str / numpy dtype / scalar type -> DType, once numpy parsed it


# -- numbers from the host -------------------------------------------------------
#
# Every way numbers enter guestcompute goes through host_array / host_scalar:
# ctx.tensor, Tensor.write, program params (rec.execute(prog, params=...)) and
# the scalar operands of ops. The rule (docs/integration.md, "Host data and
# dtypes") is numpy 2's rule for Python numbers, np.asarray(values, dtype=...),
# applied to arrays too, with no silent loss of a value:
#
# - numpy casts ndarrays unsafely (arr.astype wraps -1 to 4294967295 and cuts
#   1.5 to 1) but refuses out-of-range Python ints; a list and the array made
#   from it must not give different tensors, so both are checked by value.
# - rounding to the target's precision is accepted (float64 -> float32, a
#   large int -> the nearest float32): that is what a narrower float means.
#   Losing the value itself is refused: a finite value beyond the float range
#   (numpy: inf and a warning), an integer out of range, a float with a
#   fraction (or NaN/inf) into an integer dtype, a complex number.

def default_dtype(source: np.dtype, what: str = "data") -> DType:
    """The dtype data of numpy dtype ``source`` gets when none is named: the
    same kind at the width guestcompute computes in (float64 -> float32,
    int64 -> int32, uint16/uint64 -> uint32: a uint64 tensor, which only
    sorts, is made by naming ``dtype="uint64"``); bool has no number kind
    of its own."""
    kind = source.kind
    if kind == "f":
        return float16 if source == np.float16 else float32
    if kind == "i":
        return int32
    if kind == "u":
        return uint8 if source.itemsize == 1 else uint32
    if kind == "c":
        return complex64
    if kind == "b":
        raise DTypeError(f"{what}: bool data has no guestcompute dtype of its own; name one, "
                         "e.g. dtype='uint8' or dtype='int32' (True becomes 1)")
    raise DTypeError(f"{what}: {source} data has no guestcompute dtype; use one of {sorted(ALL)}")


def host_array(data, dtype=None, what: str = "data") -> np.ndarray:
    """``data`` (an ndarray, a nested list or a number) as a C-contiguous
    array of ``dtype`` (default: :func:`default_dtype` of the data), by the
    rule above. Raises :class:`DTypeError` for data that is not real numbers
    and :class:`InvalidArgumentError` for a value the dtype cannot hold."""
    target = as_dtype(dtype) if dtype is not None else None
    source = _real_numbers(data, target, what)
    if target is None:
        target = default_dtype(source.dtype, what)
    if source.dtype == target.numpy:             # nothing to convert: no copy, no checks
        return np.asarray(source, order="C")
    if target.kind == "complex":
        converted = _to_complex(source, target, what)
    elif target.kind == "float":
        converted = _to_float(source, target, what)
    else:
        converted = _to_integer(source, target, what)
    return np.asarray(converted, order="C")      # keeps 0-d shapes (ascontiguousarray would not)


def host_scalar(value, dtype, what: str):
    """One number (Python or numpy, not bool) as the Python int or float
    that ``dtype`` stores for it, by the same rule as :func:`host_array`."""
    cls = value.__class__
    if cls is float or cls is int:
        # Every op scalar and program parameter passes here: the common
        # cases without numpy. A value they cannot take (out of range, a
        # float into an integer type) goes the long way for its error.
        fast = _FAST_SCALARS.get((cls, as_dtype(dtype)))
        if fast is not None:
            try:
                return fast(value)
            except (OverflowError, struct.error):
                pass
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"{what} must be a number (int or float), got {type(value).__name__}")
    return host_array(value, dtype, what).item()


def _int_in(lo: int, hi: int):
    def check(v: int) -> int:
        if lo <= v < hi:
            return v
        raise OverflowError
    return check


def _rounded(fmt: str):
    # struct rounds to the nearest value of the format, as numpy's cast does,
    # and raises OverflowError where the rounded value would be infinite.
    packer = struct.Struct(fmt)
    return lambda v: packer.unpack(packer.pack(v))[0]


_FAST_SCALARS = {
    (float, float32): _rounded("<f"), (int, float32): _rounded("<f"),
    (float, float16): _rounded("<e"), (int, float16): _rounded("<e"),
    (int, int32): _int_in(-2 ** 31, 2 ** 31), (int, uint32): _int_in(0, 2 ** 32), (int, uint8): _int_in(0, 256),
}


def _real_numbers(data, target, what: str) -> np.ndarray:
    """``data`` as an ndarray of bool, int, uint or float kind (never converted yet)."""
    if isinstance(data, np.ndarray):
        arr = data
    else:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError, OverflowError) as e:
            raise InvalidArgumentError(f"{what}: cannot make an array of {type(data).__name__} ({e}); "
                                       "pass a numpy array or a rectangular nested list of numbers") from None
    if arr.dtype.kind == "O":
        arr = _from_objects(arr, target, what)
    if arr.dtype.kind == "c" and target is not None and target.kind != "complex":
        raise DTypeError(f"{what}: complex data does not convert to {target}; pass its .real or .imag "
                         "part, or make a complex64 tensor")
    if arr.dtype.kind not in "biufc":
        raise DTypeError(f"{what}: {arr.dtype} data cannot be converted to numbers; convert it first "
                         "(pass numbers shaped like the tensor)")
    return arr


def _from_objects(arr: np.ndarray, target, what: str) -> np.ndarray:
    """An object array holds what numpy could not type: Python ints beyond
    64 bits, or things that are not numbers at all."""
    items = arr.ravel().tolist()
    for item in items:
        if isinstance(item, complex) and (target is None or target.kind == "complex"):
            return np.array(items, np.complex128).reshape(arr.shape)
        if isinstance(item, complex):
            raise DTypeError(f"{what}: complex data does not convert to {target}; pass its .real or .imag "
                             "part, or make a complex64 tensor")
        if not isinstance(item, (int, float, np.integer, np.floating)):
            raise DTypeError(f"{what}: {type(item).__name__} values cannot be converted to numbers; convert "
                             "them first (pass numbers shaped like the tensor)")
    has_floats = any(isinstance(i, (float, np.floating)) for i in items)
    if has_floats or (target is not None and target.kind == "float"):
        try:
            return np.array([float(i) for i in items], np.float64).reshape(arr.shape)
        except OverflowError:
            biggest = max(items, key=abs)
            raise InvalidArgumentError(f"{what}: {_show(biggest)} is beyond the range of any float; "
                                       "scale the data") from None
    # Only integers, and numpy gave up on them: one lies beyond 64 bits.
    target = target or int32
    lo, hi = _integer_range(target)
    outside = next(int(i) for i in items if not lo <= int(i) < hi)
    raise InvalidArgumentError(f"{what}: {_show(outside)} does not fit {target}; use a value in [{lo}, {hi})")


def _to_float(source: np.ndarray, target: DType, what: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        out = source.astype(target.numpy)
    overflowed = np.isfinite(source) & ~np.isfinite(out)
    if overflowed.any():
        value = source[overflowed].flat[0].item()
        raise InvalidArgumentError(f"{what}: {_show(value)} is beyond the range of {target} "
                                   f"(±{float(np.finfo(target.numpy).max):.8g}); scale the data, or pass ±inf explicitly")
    return out


def _to_complex(source: np.ndarray, target: DType, what: str) -> np.ndarray:
    """Real or complex data as complex64: each part rounds to float32, and a
    finite part beyond float32's range is refused as in :func:`_to_float`."""
    if source.dtype.kind != "c":
        return _to_float(source, float32, what).astype(target.numpy)
    rounded = _to_float(np.stack([source.real, source.imag]), float32, what)
    out = np.empty(source.shape, target.numpy)
    out.real, out.imag = rounded[0], rounded[1]
    return out


def _to_integer(source: np.ndarray, target: DType, what: str) -> np.ndarray:
    if source.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(source) & (source == np.trunc(source))
        if not integral.all():
            value = source[~integral].flat[0].item()
            raise InvalidArgumentError(f"{what}: {value!r} is not an integer, so it does not convert to {target}; "
                                       "pass an integer (round the data first)")
    lo, hi = _integer_range(target)
    if source.size:
        for value in (source.min().item(), source.max().item()):
            if not lo <= value < hi:
                raise InvalidArgumentError(f"{what}: {_show(value)} does not fit {target}; "
                                           f"use a value in [{lo}, {hi})")
    return source.astype(target.numpy)


def _integer_range(d: DType) -> tuple:
    """[lo, hi) of an integer dtype, as Python ints."""
    info = np.iinfo(d.numpy)
    return int(info.min), int(info.max) + 1


def _show(value) -> str:
    """A value for a message: integral floats as ints, huge ints shortened."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def check_storage_only(op: str, args, kwargs) -> None:
    """DTypeError unless every tensor among an op's arguments (also inside a
    list or tuple) has a dtype ops compute in, or ``op`` is one of the few
    that take its storage-only dtype (``STORAGE_ONLY``)."""
    for arg in (*args, *kwargs.values()):
        for item in arg if isinstance(arg, (list, tuple)) else (arg,):
            d = getattr(item, "dtype", None)           # a Tensor's DType; host arrays have numpy's
            name = d.name if isinstance(d, DType) else None
            if name in STORAGE_ONLY and op not in STORAGE_ONLY[name]:
                takers = ", ".join(f"rec.{o}" for o in STORAGE_ONLY[name])
                raise DTypeError(f"{op}: {name} tensors are stored, not computed with, except by {takers}"
                                 f"{STORAGE_HINTS.get(name, '')}; see \"Host data and dtypes\" in docs/integration.md")
