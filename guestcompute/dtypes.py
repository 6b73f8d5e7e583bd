"""The element types guestcompute knows, and what each needs from the device."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True)
class DType:
    name: str          # numpy name, also the public name
    numpy: np.dtype
    glsl: str          # GLSL scalar type in buffers
    size: int          # bytes
    kind: str          # "float" | "int" | "uint"
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

ALL = {d.name: d for d in (float32, float16, int32, uint32, uint8)}


def as_dtype(value) -> DType:
    """Accept a DType, a name, a numpy dtype or a numpy scalar type."""
    if isinstance(value, DType):
        return value
    try:
        name = np.dtype(value).name
    except TypeError:
        raise DTypeError(f"unknown dtype {value!r}; use one of {sorted(ALL)}") from None
    if name not in ALL:
        raise DTypeError(f"dtype {name} is not supported; use one of {sorted(ALL)}")
    return ALL[name]
