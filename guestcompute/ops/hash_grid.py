"""The parameters of a multiresolution hash-grid encoding (Instant-NGP's):
``ctx.hash_grid(...)`` makes a :class:`HashGrid`, ``rec.hash_grid_encode``
(ops/hash_grid_encode.py) reads it.

Level l has the scale ``s_l = base_resolution * per_level_scale**l - 1``
(computed in float64, rounded to float32), the resolution
``r_l = ceil(s_l) + 1`` and a table of ``T_l = min(r_l**d rounded up to a
multiple of 8, 2**log2_hashmap_size)`` entries of ``n_features_per_level``
values. A level whose dense grid fits (``r_l**d <= T_l``) is indexed
densely, the others through the spatial hash. All tables live in one guest
tensor, ``grid.params``, level after level, each entry's features
together: feature f of entry i of level l is
``params[(level_offsets[l] + i) * n_features_per_level + f]`` — the layout
of tiny-cuda-nn's hash grid, so its parameters load as they are.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from ..dtypes import as_dtype, float16, float32
from ..errors import DTypeError, InvalidArgumentError, PastBindingRangeError, ShapeError

PRIMES = (1, 2654435761, 805459861)     # the spatial hash's, one per coordinate
FEATURES = (1, 2, 4, 8)
MAX_LEVELS = 64
MAX_LOG2_SIZE = 28
MAX_RESOLUTION = 1 << 24                # resolutions stay exact in float32


@dataclass(frozen=True)
class Level:
    """One level: its float32 scale, resolution, table size and first entry."""
    scale: float
    resolution: int
    size: int
    offset: int
    dense: bool


def _int(value, what: str, lo: int, hi: int, allowed=None) -> int:
    try:
        n = None if isinstance(value, (bool, np.bool_)) else operator.index(value)
    except TypeError:
        n = None
    ok = n is not None and (n in allowed if allowed else lo <= n <= hi)
    if not ok:
        want = f"one of {allowed}" if allowed else f"an int in {lo}..{hi}"
        raise InvalidArgumentError(f"hash_grid {what} must be {want}, got {value!r}")
    return n


def grid_levels(d: int, n_levels: int, log2_size: int, base: int, per_level_scale: float) -> tuple:
    """The :class:`Level` s of a grid (arguments checked already)."""
    levels, offset = [], 0
    for lvl in range(n_levels):
        scale = float(np.float32(base * per_level_scale ** lvl - 1.0))
        res = math.ceil(scale) + 1
        dense_size = res ** d
        size = min(-(-dense_size // 8) * 8, 1 << log2_size)
        levels.append(Level(scale, res, size, offset, dense_size <= size))
        offset += size
    return tuple(levels)


class HashGrid:
    """A hash-grid encoding's configuration and parameters (see the module
    notes for the layout). ``params`` is a 1-D guest tensor of ``n_params``
    values of ``dtype``: ops may read and write it (an optimiser step with
    ``out=grid.params``), ``params.numpy()`` reads it back and
    :meth:`set_params` replaces it from host data. ``levels`` lists each
    level's :class:`Level`; ``output_dims`` is ``n_levels *
    n_features_per_level``."""

    def __init__(self, ctx, n_input_dims=3, n_levels=16, n_features_per_level=2, log2_hashmap_size=19,
                 base_resolution=16, per_level_scale=2.0, dtype="float32", params=None, seed=0):
        self.ctx = ctx
        self.n_input_dims = _int(n_input_dims, "n_input_dims", 2, 3)
        self.n_levels = _int(n_levels, "n_levels", 1, MAX_LEVELS)
        self.n_features_per_level = _int(n_features_per_level, "n_features_per_level", 0, 0, FEATURES)
        self.log2_hashmap_size = _int(log2_hashmap_size, "log2_hashmap_size", 3, MAX_LOG2_SIZE)
        self.base_resolution = _int(base_resolution, "base_resolution", 1, MAX_RESOLUTION)
        self.per_level_scale = _scale(per_level_scale)
        top = self.base_resolution * self.per_level_scale ** (self.n_levels - 1)
        if not top < MAX_RESOLUTION:
            raise InvalidArgumentError(f"hash_grid: the finest level's scale {top:.6g} is past 2**24 (where "
                                       "float32 positions lose their fraction); use fewer levels or a smaller scale")
        d = as_dtype(dtype)
        if d not in (float32, float16):
            raise DTypeError(f"hash_grid dtype must be 'float32' or 'float16', got {dtype!r}")
        ctx.device.check_dtype_enabled(d)
        self.dtype = d
        self.levels = grid_levels(self.n_input_dims, self.n_levels, self.log2_hashmap_size,
                                  self.base_resolution, self.per_level_scale)
        self.n_params = (self.levels[-1].offset + self.levels[-1].size) * self.n_features_per_level
        if self.n_params * d.size > ctx.limits.max_storage_buffer_range:
            raise PastBindingRangeError(f"hash_grid: {self.n_params * d.size} bytes of parameters are past the "
                                        f"device's maxStorageBufferRange ({ctx.limits.max_storage_buffer_range}); "
                                        "use a smaller log2_hashmap_size or fewer levels")
        values = self._checked(params) if params is not None else self._initial(seed)
        table = np.array([(np.float32(lv.scale).view(np.uint32), lv.resolution if lv.dense else 0, lv.size,
                           lv.offset) for lv in self.levels], np.uint32)
        self.level_table = ctx.tensor(table)         # (n_levels, 4): scale bits, dense resolution or 0, size, offset
        self.params = ctx.tensor(values)

    @property
    def output_dims(self) -> int:
        return self.n_levels * self.n_features_per_level

    def _initial(self, seed) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return rng.uniform(-1e-4, 1e-4, self.n_params).astype(self.dtype.numpy)

    def _checked(self, params) -> np.ndarray:
        arr = np.asarray(params)
        if arr.dtype.kind not in "fiu":
            raise DTypeError(f"hash_grid params must be real numbers, got an array of {arr.dtype}")
        entries = self.n_params // self.n_features_per_level
        if arr.shape not in ((self.n_params,), (entries, self.n_features_per_level)):
            raise ShapeError(f"hash_grid params must have shape ({self.n_params},) or ({entries}, "
                             f"{self.n_features_per_level}), got {arr.shape}")
        with np.errstate(over="ignore"):
            out = arr.reshape(-1).astype(self.dtype.numpy)
        if not np.array_equal(np.isfinite(out), np.isfinite(arr.reshape(-1))):
            raise InvalidArgumentError(f"hash_grid params hold values {self.dtype} cannot hold")
        return out

    def set_params(self, params) -> None:
        """Overwrite every parameter from host data: shape (n_params,) or
        (n_params / n_features_per_level, n_features_per_level), converted
        to the grid's dtype (outside any recording; wait for GPU work that
        uses the grid first)."""
        self.params.write(self._checked(params))

    def __repr__(self):
        return (f"HashGrid(n_input_dims={self.n_input_dims}, n_levels={self.n_levels}, "
                f"n_features_per_level={self.n_features_per_level}, log2_hashmap_size={self.log2_hashmap_size}, "
                f"base_resolution={self.base_resolution}, per_level_scale={self.per_level_scale}, "
                f"dtype={self.dtype})")


def _scale(value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"hash_grid per_level_scale must be a number >= 1, got {value!r}")
    s = float(value)
    if not (math.isfinite(s) and s >= 1.0):
        raise InvalidArgumentError(f"hash_grid per_level_scale must be a finite number >= 1, got {s}")
    return s
