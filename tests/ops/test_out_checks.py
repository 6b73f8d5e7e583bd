"""Every op that takes an output tensor checks it alike (ops/base.check_out):
an ``out`` of the wrong dtype raises DTypeError, one of the wrong shape
ShapeError, before anything is recorded — for small tensors and, where the
op runs in windows, for tensors past one binding's range."""
import inspect

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops.base import op_windows, registered_ops
from guestcompute.testing import limit_binding_range
from refusals import assert_all_refused

SMALL_ROWS = 2
BIG_ROWS = 48                 # rows of 8 float32s: 1536 bytes, past the simulated range
RANGE = 256


def _x(ctx, rows, dtype="float32"):
    return ctx.tensor((np.arange(rows * 8).reshape(rows, 8) % 7 + 1).astype(dtype))


def _img(ctx, rows):
    return ctx.tensor(np.linspace(0, 1, 8 * 8 * 4, dtype=np.float32).reshape(8, 8, 4))


def _binary(ctx, rows):
    return (_x(ctx, rows), _x(ctx, rows)), {}


def _unary(ctx, rows):
    return (_x(ctx, rows),), {}


def _indices(ctx, rows):
    return (_x(ctx, 4), ctx.tensor(np.arange(rows, dtype=np.uint32) % 4)), {}


# name -> (ctx, rows) -> (args, kwargs): a valid call; the output parameter
# is added (or replaced) by the test.
CALLS = {
    **{name: _binary for name in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "greater",
                                  "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and",
                                  "logical_or", "logical_xor")},
    **{name: _unary for name in ("floor", "ceil", "trunc", "rint", "sign", "logical_not", "isnan", "isinf",
                                 "isfinite")},
    **{name: _unary for name in ("abs", "cos", "exp", "log", "neg", "relu", "rsqrt", "sigmoid", "silu", "sin",
                                 "sqrt", "tanh", "gelu", "copy", "contiguous", "transpose", "sum", "mean", "max",
                                 "min", "softmax", "log_softmax", "cumsum", "layer_norm", "rms_norm")},
    **{name: lambda c, r: ((c.tensor(np.ones((r, 8), np.complex64)),), {}) for name in ("conj", "angle")},
    "floordiv": lambda c, r: ((_x(c, r, "int32"), _x(c, r, "int32")), {}),
    "cast": lambda c, r: ((_x(c, r), "int32"), {}),
    "clamp": lambda c, r: ((_x(c, r), 2.0, 5.0), {}),
    "scale": lambda c, r: ((_x(c, r), 2.0), {}),
    "where": lambda c, r: ((_x(c, r), _x(c, r), 0.0), {}),
    "argmax": lambda c, r: ((_x(c, r),), {"axis": 1}),
    "argmin": lambda c, r: ((_x(c, r),), {"axis": 1}),
    "concat": lambda c, r: (([_x(c, r), _x(c, r)],), {}),
    "index_select": _indices,
    "gather": lambda c, r: ((_x(c, 4), c.tensor(np.arange(r * 8, dtype=np.uint32).reshape(r, 8) % 4)), {}),
    "matmul": lambda c, r: ((_x(c, r), _x(c, 8)[:, :4]), {}),
    "mlp": lambda c, r: ((_x(c, r), c.mlp([gc.Dense(np.ones((8, 16)) / 8), gc.Dense(np.ones((16, 4)))])), {}),
    "permute": lambda c, r: ((_x(c, r), (1, 0)), {}),
    "slice": lambda c, r: ((_x(c, r), (slice(None), slice(0, 4))), {}),
    "sort": lambda c, r: ((_x(c, r, "uint32").reshape(-1),), {}),
    "argsort": lambda c, r: ((_x(c, r, "uint32"),), {}),
    "compact": lambda c, r: ((_x(c, r), c.tensor(np.arange(r * 8, dtype=np.uint32).reshape(r, 8) % 2)), {}),
    "nonzero": lambda c, r: ((_x(c, r, "uint32"),), {}),
    "segmented_cumsum": lambda c, r: ((_x(c, r).reshape(-1), _x(c, r, "uint32").reshape(-1)), {}),
    "histogram": lambda c, r: ((_x(c, r), 16, (0.0, 8.0)), {}),
    "groups_from_count": lambda c, r: ((c.tensor(np.array([100], np.uint32)), 64), {}),
    "bloom": lambda c, r: ((_img(c, r),), {"levels": 1}),
    "gaussian_blur": lambda c, r: ((_img(c, r), 1.0), {}),
    "conv2d": lambda c, r: ((_img(c, r), c.tensor(np.full((3, 3), 1 / 9, np.float32))), {}),
    "colour_lut": lambda c, r: ((_img(c, r), c.tensor(np.linspace(0, 1, 2 * 2 * 2 * 4, dtype=np.float32)
                                                      .reshape(2, 2, 2, 4))), {}),
    "colour_matrix": lambda c, r: ((_img(c, r), np.eye(4)), {}),
    "luminance": lambda c, r: ((_img(c, r),), {}),
    **{name: _unary for name in ("fft", "ifft", "rfft", "fft2", "ifft2", "rfft2", "fftn", "ifftn", "rfftn")},
    **{name: lambda c, r: ((c.tensor(np.ones((r, 8), np.complex64)),), {}) for name in ("irfft", "irfft2", "irfftn")},
    "fft_convolve": lambda c, r: ((_x(c, r), c.tensor(np.ones((r, 5), np.complex64))), {}),
    "frequency_encoding": lambda c, r: ((_x(c, r)[:, :3], 2), {}),
    "hash_grid_encode": lambda c, r: ((c.tensor(np.full((r, 3), 0.5, np.float32)),
                                       c.hash_grid(3, n_levels=2, log2_hashmap_size=6)), {}),
    # Ops whose output's size is what they write: the valid call names one.
    "tonemap": lambda c, r: ((_img(c, r),), {"out": c.empty((8, 8, 4), "float32")}),
    "resize": lambda c, r: ((c.image_from(_img(c, r).numpy(), "rgba32f"),), {"out": c.empty((4, 4, 4), "float32")}),
}
# fill writes its value into out in out's own dtype and shape: no result for
# out to disagree with. (resize writes out at out's size: the wrong shape is
# one no pixel tensor has.)
NO_RESULT = {"fill"}


def _out_parameter(fn):
    names = [p for p in inspect.signature(fn).parameters if p == "out" or p.startswith("out_")]
    return names[0] if names else None


OPS_WITH_OUT = sorted(name for name, fn in registered_ops().items() if _out_parameter(fn))


def test_every_op_with_an_out_parameter_has_a_case():
    assert set(OPS_WITH_OUT) - NO_RESULT == set(CALLS)


def _wrong_dtype(dtype) -> str:
    return "uint8" if dtype.kind == "float" else "float32"


def _wrong_shape(shape) -> tuple:
    return shape[:-1] + (shape[-1] + 1,) if shape else (2,)


def _check(host, ctx, name, rows):
    args, kwargs = CALLS[name](ctx, rows)
    out_name = _out_parameter(registered_ops()[name])
    result = host.run(ctx, lambda rec: getattr(rec, name)(*args, **kwargs))
    if isinstance(result, tuple):           # (values, count): out is the first
        result = result[0]
    assert isinstance(result, gc.Tensor), name
    wrong = {gc.DTypeError: ctx.empty(result.shape, _wrong_dtype(result.dtype)),
             gc.ShapeError: ctx.empty(_wrong_shape(result.shape), result.dtype)}
    def call_with(out):
        return lambda rec: getattr(rec, name)(*args, **dict(kwargs, **{out_name: out}))
    assert_all_refused(host, ctx, [(error, call_with(out)) for error, out in wrong.items()])


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_wrong_out_raises_one_error_type(modern_host, name):
    ctx = modern_host.adopt()
    try:
        _check(modern_host, ctx, name, SMALL_ROWS)
    finally:
        ctx.close()


@pytest.mark.parametrize("name", sorted(n for n in CALLS if op_windows(n) is not None))
def test_a_wrong_out_past_one_bindings_range_raises_the_same(modern_host, name):
    ctx = modern_host.adopt()
    limit_binding_range(ctx, RANGE)
    try:
        _check(modern_host, ctx, name, BIG_ROWS)
    finally:
        ctx.close()
