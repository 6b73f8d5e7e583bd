"""``rec.copy``: one op for both resource kinds. Between tensors it is the
elementwise copy (broadcasting, any strides; ops/elementwise.py); as soon
as an image is involved it is a pixel copy (ops/image_copy.py)."""
from __future__ import annotations

from .base import op
from .elementwise import copy_tensor
from .image_copy import copy_pixels, is_pixels_image
from .windows import POINTWISE


@op("copy", windows=POINTWISE)
def copy(ctx, src, *, out=None):
    """Copy ``src`` into ``out``. Tensors: broadcast and any strides.
    Images (an Image or ``img.level(mip, layer)``) to images or tensors and
    back: see ops/image_copy.py for values and channels (uint8 tensors hold
    0..255, float32 tensors 0..1 for UNORM). Allocates ``out`` when omitted
    (for an image source: a float32 tensor)."""
    if is_pixels_image(src) or is_pixels_image(out):
        return copy_pixels(ctx, src, out)
    return copy_tensor(ctx, src, out=out)
