"""numpy references of the input encodings (rec.frequency_encoding,
rec.hash_grid_encode), in float64."""
import numpy as np

PRIMES = (1, 2654435761, 805459861)


def ref_frequency(x: np.ndarray, n: int, include_input: bool = True) -> np.ndarray:
    """NeRF's layout: [x, sin(2^0 pi x), cos(2^0 pi x), sin(2^1 pi x), ...],
    each block the d coordinates. ``2**k x`` is reduced modulo 2 exactly
    (in float64, where ``2**k x`` of a float32 x is exact) before pi
    multiplies it, so this is sin(2^k pi x) of the exact argument (and its
    zeros are exact)."""
    x = x.astype(np.float64)
    blocks = [x] if include_input else []
    for k in range(n):
        t = np.ldexp(x, k)
        with np.errstate(invalid="ignore"):
            r = np.where(np.isfinite(t), t - 2.0 * np.round(t / 2.0), np.nan)
        quarter_turns = 2 * r == np.round(2 * r)         # exact zeros and ones, which float64's pi misses
        blocks += [np.where(quarter_turns, np.round(f(np.pi * r)), f(np.pi * r)) for f in (np.sin, np.cos)]
    return np.concatenate(blocks, axis=-1) if blocks else np.zeros(x.shape[:-1] + (0,))


def grid_indices(cell: np.ndarray, corner: tuple, level) -> np.ndarray:
    """Table indices (within the level) of ``corner`` of each point's cell."""
    coords = [(cell[..., k] + c).astype(np.uint64) for k, c in enumerate(corner)]
    if level.dense:
        index = sum(coords[k] * np.uint64(level.resolution ** k) for k in range(len(coords)))
        return (index % np.uint64(level.size)).astype(np.int64)
    index = np.zeros(cell.shape[:-1], np.uint64)
    for k, c in enumerate(coords):
        index ^= (c * np.uint64(PRIMES[k])) & np.uint64(0xFFFFFFFF)
    return (index & np.uint64(level.size - 1)).astype(np.int64)


def ref_hash_grid(x: np.ndarray, grid, params: np.ndarray) -> np.ndarray:
    """Instant-NGP's encoding of ``x`` (..., d) through ``grid`` (its levels)
    with the parameters ``params`` (flat, the grid's layout), in float64
    from the float32 positions the kernel computes."""
    d, f = grid.n_input_dims, grid.n_features_per_level
    table = params.astype(np.float64).reshape(-1, f)
    x = np.where(x >= 0, np.minimum(x, 1), 0).astype(np.float32)
    out = []
    for level in grid.levels:
        pos = (x * np.float32(level.scale)).astype(np.float32) + np.float32(0.5)
        cell = np.floor(pos)
        w = (pos - cell).astype(np.float64)
        feats = np.zeros(x.shape[:-1] + (f,))
        for corner in np.ndindex(*(2,) * d):
            weight = np.prod([w[..., k] if c else 1.0 - w[..., k] for k, c in enumerate(corner)], axis=0)
            feats += weight[..., None] * table[level.offset + grid_indices(cell.astype(np.int64), corner, level)]
        out.append(feats)
    return np.concatenate(out, axis=-1)
