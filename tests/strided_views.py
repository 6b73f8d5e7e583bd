"""Test helpers: the same strided view of host data as a numpy array and as
a guestcompute tensor, and dtype-aware random data."""
import numpy as np
import pytest
from hypothesis import strategies as st


def need(ctx, dtype: str) -> None:
    """Skip a float16 case on a host that did not enable 16-bit storage."""
    if dtype == "float16" and not ctx.caps.float16_storage:
        pytest.skip("float16 needs 16-bit storage, which only the modern profile enables")


def random(rng, shape, dtype: str, lo=-4.0, hi=4.0) -> np.ndarray:
    """Uniform data in [lo, hi) (integers: whole numbers in that range)."""
    if dtype in ("float32", "float16"):
        return rng.uniform(lo, hi, shape).astype(dtype)
    return rng.integers(int(lo), int(hi), shape, endpoint=False).astype(dtype)


def view_of(ctx, base: np.ndarray, shape, perm, steps, offset: int):
    """(tensor, ndarray) with ``shape``, cut out of ``base`` (which must be big
    enough: see :func:`base_shape`) by stepping axis i of the base with
    ``steps[i]`` (negative steps walk backwards) from ``offset`` elements in,
    then ordering the axes so that view axis ``perm[i]`` is base axis i."""
    t = ctx.tensor(base)
    index = []
    for i, s in enumerate(steps):
        n = shape[perm[i]]
        lo = offset if i == len(steps) - 1 else 0
        index.append(slice(lo, lo + n * s, s) if s > 0 else slice(lo + n * -s - 1, lo - 1 if lo else None, s))
    inv = tuple(int(i) for i in np.argsort(perm))
    tv, nv = t[tuple(index)].permute(inv), np.transpose(base[tuple(index)], inv)
    assert tv.shape == nv.shape == tuple(shape)
    return tv, nv


def base_shape(shape, perm, steps, offset: int) -> tuple:
    out = [shape[perm[i]] * abs(s) for i, s in enumerate(steps)]
    if out:
        out[-1] += offset
    return tuple(out)


def draw_view(data, ctx, shape, make):
    """Draw a random layout (permutation, steps incl. -1 and 2, offset) and
    return (tensor, ndarray) views of ``make(base_shape)``."""
    nd = len(shape)
    perm = data.draw(st.permutations(range(nd))) if nd else []
    steps = [data.draw(st.sampled_from([1, 1, 2, -1])) for _ in range(nd)]
    offset = data.draw(st.integers(0, 3)) if nd else 0
    base = make(base_shape(shape, perm, steps, offset))
    if nd == 0:     # ctx.tensor() of a 0-d array gives shape (1,): view it as 0-d
        return ctx.tensor(base.reshape(1)).reshape(()), base
    return view_of(ctx, base, shape, perm, steps, offset)


def shapes(min_dims=1, max_dims=4, max_side=9):
    return st.lists(st.integers(1, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcast_to_operand(data, shape) -> tuple:
    """A shape that broadcasts to ``shape``: leading dims dropped, some set to 1."""
    drop = data.draw(st.integers(0, len(shape)))
    return tuple(1 if data.draw(st.booleans()) and data.draw(st.booleans()) else n
                 for n in shape[drop:])
