"""The elementwise complex product the FFT paths share: ``out = a * b`` on
complex64 tensors (``b`` broadcast), one ``map`` dispatch. The four-step
and Bluestein paths of long rows multiply by their twiddle factors and
chirps with it, and the unfused convolution by its kernel spectrum.

It is ``rec.mul``'s complex64 kernel (ops/complex_exprs.py: each product
rounded on its own), so its pipelines are the ones ops/complex_math.py
bakes for complex64 times complex64: one product kernel in the package.
"""
from __future__ import annotations

from ..dtypes import complex64
from .base import Dispatch
from .complex_exprs import binary_expr
from .elementwise import plan_map

EXPR, HELPERS = binary_expr("mul", complex64, complex64)


def plan_product(ctx, a, b, out) -> Dispatch:
    """The dispatch writing ``a * b`` into ``out`` (``a``'s shape; ``b``
    broadcast to it; ``out`` may be ``a`` itself), all complex64 views
    already checked."""
    return plan_map(ctx, EXPR, [a, b], out, complex64, helpers=HELPERS)
