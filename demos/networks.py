"""How the demos build their ``ctx.mlp`` networks: the weights' dtype for
the device, and how far ``rec.mlp`` may be from numpy."""
from __future__ import annotations


def weights_dtype(ctx) -> str:
    """fp16 weights where the device has 16-bit storage (the cooperative-
    matrix kernel, where there is one, takes only those); fp32 elsewhere."""
    return "float16" if ctx.caps.float16_storage else "float32"


def kernel_tolerance(dtype: str, largest: float = 1.0) -> float:
    """The largest difference to allow between ``rec.mlp`` and numpy for
    outputs up to ``largest`` in magnitude (docs/integration.md §18): fp16
    weights are rounded, and the cooperative-matrix kernel rounds
    activations to fp16 too; fp32 runs in fp32 throughout."""
    return 2e-2 * max(1.0, largest) if dtype == "float16" else 1e-4 * (1.0 + largest)
