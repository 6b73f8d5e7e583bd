"""``rec.cast``: numpy's ``astype`` between the dtypes ops compute in, and
into complex64.

- Floats truncate toward zero into integers; int32<->uint32 keep the bit
  pattern; values out of the target's range (NaN or a float too big for an
  int) are unspecified, as in C.
- Any of them into complex64 gives the value (rounded to float32) with
  imaginary part +0; complex64 into complex64 copies.
- complex64 into a real dtype raises a DTypeError: numpy drops the
  imaginary parts with a ComplexWarning, which is seldom what was meant.
  ``x.real`` (a float32 view) is that value; cast it if another dtype is wanted.
"""
from __future__ import annotations

from ..dtypes import ALL, complex64
from ..errors import DTypeError
from ..kernels.catalogue import variants
from .complex_exprs import as_complex
from .base import check_dtype, check_tensor, op
from .elementwise import elementwise, map_variants
from .windows import POINTWISE

TARGETS = tuple(ALL) + ("complex64",)


def _expr(src, dst) -> str:
    return as_complex("x0", src) if dst.kind == "complex" else "x0"


@op("cast", windows=POINTWISE)
def cast(ctx, x, dtype, *, out=None):
    """Convert to ``dtype`` like numpy's ``astype`` (see ops/cast.py): any
    compute dtype into any other or into complex64 (imaginary parts +0);
    complex64 into complex64 only (take ``x.real`` for the real parts)."""
    x = check_tensor(ctx, x, "cast x")
    d = check_dtype(ctx, dtype, TARGETS, "cast")
    if x.dtype.kind == "complex" and d.kind != "complex":
        raise DTypeError(f"cast: complex64 to {d} would drop the imaginary parts; take x.real (a float32 "
                         "view of the real parts) and cast that")
    return elementwise(ctx, _expr(x.dtype, d), [x], out, out_dtype=d, name="cast")


@variants("map")
def _cast_variants():
    for src in ALL.values():
        for dst in [*ALL.values(), complex64]:
            yield from map_variants(_expr(src, dst), [src], dst)
    yield from map_variants("x0", [complex64], complex64)
