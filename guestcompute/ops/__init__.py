"""Operations. Importing this package registers every op on the op registry
and every built-in kernel variant on the kernel catalogue."""
from . import elementwise  # noqa: F401
from . import math  # noqa: F401
from . import predicates  # noqa: F401  (comparisons, logical ops, isnan/isinf/isfinite: uint8 masks)
from . import cast  # noqa: F401  (rec.cast)
from . import complex_math  # noqa: F401  (complex64 in add sub mul div neg abs; conj, angle)
from . import reduce  # noqa: F401
from . import normalize  # noqa: F401
from . import scan  # noqa: F401
from . import compact  # noqa: F401  (rec.compact, rec.nonzero)
from . import segmented  # noqa: F401  (rec.segmented_cumsum)
from . import sort  # noqa: F401
from . import matmul  # noqa: F401
from . import filters  # noqa: F401  (image filters: gaussian_blur, conv2d, histogram)
from . import image_copy  # noqa: F401
from . import tonemap  # noqa: F401
from . import grading  # noqa: F401
from . import colour_lut  # noqa: F401
from . import bloom  # noqa: F401
from . import copy  # noqa: F401  (rec.copy: tensors and images)
from . import indirect  # noqa: F401
from . import shape  # noqa: F401
from . import user_kernel  # noqa: F401  (rec.run_kernel)
from . import fft  # noqa: F401  (rec.fft, rec.rfft2, ...)
from . import fft_convolve  # noqa: F401  (rec.fft_convolve)
from . import encodings  # noqa: F401  (rec.frequency_encoding)
from . import hash_grid_encode  # noqa: F401  (rec.hash_grid_encode)
from . import mlp_op  # noqa: F401  (rec.mlp; ctx.mlp builds its networks, ops/mlp.py)
from ..kernels.catalogue import registered_specs


def all_specs():
    """Every built-in kernel spec (what ``guestcompute bake`` compiles and
    ``ctx.warmup("all")`` creates), each once."""
    return registered_specs()
