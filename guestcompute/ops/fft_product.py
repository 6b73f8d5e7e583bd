"""The elementwise complex product the FFT paths share: ``out = a * b`` on
complex64 tensors (``b`` broadcast), one ``map`` dispatch. The four-step
and Bluestein paths of long rows multiply by their twiddle factors and
chirps with it, and the unfused convolution by its kernel spectrum.

It is ``rec.mul``'s complex64 kernel (ops/complex_exprs.py: each product
rounded on its own, GLSL ``precise``), so its pipelines are the ones
ops/complex_math.py bakes for complex64 times complex64: the one
elementwise product kernel in the package. The row kernels multiply inside
the transform with their own ``cmul`` (fft_kernels.CMUL: twiddles, chirps,
and the fused convolution's spectrum product), which is not ``precise``: a
compiler may contract it into fused multiply-adds. So the fused and the
unfused convolution (ops/fft_convolve.py) may round a product differently
in the last bit; both are within the transforms' bounds.
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
