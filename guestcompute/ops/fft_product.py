"""The elementwise complex product the FFT paths share: ``out = a * b`` on
complex64 tensors (``b`` broadcast), one ``map`` dispatch with the FFT
kernels' ``cmul``. The four-step and Bluestein paths of long rows multiply
by their twiddle factors and chirps with it, and the unfused convolution
by its kernel spectrum; its pipelines are baked like every other kernel.
"""
from __future__ import annotations

from ..dtypes import complex64
from ..kernels.catalogue import variants
from .base import Dispatch
from .elementwise import map_spec, plan_map
from .fft_kernels import CMUL

EXPR = "cmul(x0, x1)"


def _cmul(width: int) -> str:
    # The map kernel's helper text (one function object: it is part of the spec's key).
    return CMUL


def plan_product(ctx, a, b, out) -> Dispatch:
    """The dispatch writing ``a * b`` into ``out`` (``a``'s shape; ``b``
    broadcast to it; ``out`` may be ``a`` itself), all complex64 views
    already checked."""
    return plan_map(ctx, EXPR, [a, b], out, complex64, helpers=_cmul)


@variants("map")
def _product_variants():
    """Every layout ``plan_product`` plans: contiguous operands of one
    shape, or strided / broadcast ones (complex elements: one a load)."""
    yield map_spec(EXPR, [complex64, complex64], complex64, "contig", 1, helpers=_cmul)
    for rank in (4, 6):
        yield map_spec(EXPR, [complex64, complex64], complex64, "strided", 1, rank, helpers=_cmul)
