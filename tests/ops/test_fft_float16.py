"""float16 storage in the FFTs: every forward transform reads float16 rows
(widened to float32, computed in float32), the real-output transforms and
rec.fft_convolve write a float16 ``out=`` (rounded from float32). The
reference is numpy.fft in float64 of the float16 values (cast to float16
for float16 outputs); results stay within the float32 FFT's bound
(test_fft.accuracy_bound) plus, for float16 outputs, float16's rounding.
Fixed-kernel lengths in both layouts, generic and Bluestein lengths,
strided views, long rows, and the typed errors before recording."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs, fft_fixed, fft_kernels
from guestcompute.ops.base import registered_ops
from refusals import assert_refused
from test_fft import accuracy_bound, check_close, random_complex

HALF_EPS = 2.0 ** -11            # float16's unit roundoff (round to nearest)
HALF_TINY = 2.0 ** -25           # half its smallest subnormal spacing


@pytest.fixture
def half_ctx(modern_ctx):
    if not modern_ctx.caps.float16_storage:
        pytest.skip("float16 tensors need 16-bit storage")
    return modern_ctx


def half_data(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float16)


def check_half(got: np.ndarray, ref: np.ndarray, n: int):
    """A float16 result against float64 ``ref``: each value within the
    float32 FFT's worst error (10x its RMS bound, relative to the
    reference's RMS) and then float16's rounding of that value."""
    assert got.dtype == np.float16
    fft_error = 10 * accuracy_bound(n) * max(np.sqrt(np.mean(ref ** 2)), 1e-30)
    allowed = HALF_EPS * (np.abs(ref) + fft_error) + fft_error + HALF_TINY
    worst = np.abs(got.astype(np.float64) - ref) - allowed
    assert worst.max() <= 0, (n, worst.max())


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_every_fixed_length_reads_and_writes_float16(modern_host, half_ctx, layout):
    """rfft and fft of float16 rows, irfft into float16 rows, at every
    power of two the fixed-length kernels take, in both layouts."""
    rng = np.random.default_rng(21)
    cases = []
    for n in fft_fixed.LENGTHS:
        shape, axis = ((3, n), 1) if layout == "rows" else ((n, 5), 0)
        x = half_data(rng, shape)
        spec = np.fft.rfft(rng.standard_normal(shape), axis=axis).astype(np.complex64)
        out = half_ctx.empty(shape, "float16")
        cases.append((n, axis, x, spec, half_ctx.tensor(x), half_ctx.tensor(spec), out))

    def record(rec):
        return [(rec.rfft(t, axis=axis), rec.fft(t, axis=axis, norm="ortho"),
                 rec.irfft(s, n=n, axis=axis, out=out)) for n, axis, _, _, t, s, out in cases]

    results = modern_host.run(half_ctx, record)
    for (n, axis, x, spec, _, _, out), (r, f, ir) in zip(cases, results):
        x64 = x.astype(np.float64)
        assert r.dtype == f.dtype == gc.complex64 and ir is out
        check_close(r.numpy(), np.fft.rfft(x64, axis=axis), n)
        check_close(f.numpy(), np.fft.fft(x64, axis=axis, norm="ortho"), n)
        check_half(out.numpy(), np.fft.irfft(spec.astype(np.complex128), n=n, axis=axis), n)


@pytest.mark.parametrize("n", [12, 48, 97, 1000, 2039])
@pytest.mark.parametrize("axis", [0, 1])
def test_generic_and_bluestein_lengths(modern_host, half_ctx, n, axis):
    rng = np.random.default_rng(n + axis)
    shape = (n, 3) if axis == 0 else (3, n)
    x = half_data(rng, shape)
    spec = np.fft.rfft(rng.standard_normal(shape), axis=axis).astype(np.complex64)
    t, s, out = half_ctx.tensor(x), half_ctx.tensor(spec), half_ctx.empty(shape, "float16")
    r, f, i = modern_host.run(half_ctx, lambda rec: (rec.rfft(t, axis=axis), rec.fft(t, axis=axis),
                                                     rec.irfft(s, n=n, axis=axis, out=out)))
    x64 = x.astype(np.float64)
    check_close(r.numpy(), np.fft.rfft(x64, axis=axis), n)
    check_close(f.numpy(), np.fft.fft(x64, axis=axis), n)
    check_half(out.numpy(), np.fft.irfft(spec.astype(np.complex128), n=n, axis=axis), n)


@pytest.mark.parametrize("n", [5, 16, 40])
def test_strided_views_crops_and_padding(modern_host, half_ctx, n):
    rng = np.random.default_rng(n)
    base = half_data(rng, (9, 20, 3))
    view_np = base[::2, 16:2:-1, 1]                 # (5, 14): strided, reversed along axis 1
    view = half_ctx.tensor(base)[::2, 16:2:-1, 1]
    spec = np.fft.rfft(rng.standard_normal((5, 14)), axis=1).astype(np.complex64)
    out_base = half_ctx.tensor(np.zeros((5, 2 * n + 1), np.float16))
    out_view = out_base[:, ::2]                     # every other element of each row
    st = half_ctx.tensor(spec)
    r, f0, f1 = modern_host.run(half_ctx, lambda rec: (rec.rfft(view, n=n), rec.fft(view, n=n, axis=0),
                                                       rec.irfft(st, n=n + 1, out=out_view)))
    v64 = view_np.astype(np.float64)
    check_close(r.numpy(), np.fft.rfft(v64, n=n), n)
    check_close(f0.numpy(), np.fft.fft(v64, n=n, axis=0), n)
    check_half(out_view.numpy(), np.fft.irfft(spec.astype(np.complex128), n=n + 1), n + 1)
    assert not out_base.numpy()[:, 1::2].any()     # the elements between are untouched


NDIM_CASES = [
    ("rfft2", {}), ("rfftn", {"s": (4, 10)}), ("rfftn", {"axes": (0, 2), "norm": "ortho"}),
    ("fft2", {}), ("fftn", {"axes": (2, 0)}), ("fftn", {"s": (3, 7, 16)}),
]


@pytest.mark.parametrize("name,kwargs", NDIM_CASES)
def test_n_dimensional_forward_transforms_read_float16(modern_host, half_ctx, name, kwargs):
    x = half_data(np.random.default_rng(len(name) + len(kwargs)), (6, 5, 8))
    t = half_ctx.tensor(x)
    out = modern_host.run(half_ctx, lambda rec: getattr(rec, name)(t, **kwargs))
    ref_kwargs = dict(kwargs)
    if "s" in kwargs and "axes" not in kwargs:
        ref_kwargs["axes"] = tuple(range(x.ndim - len(kwargs["s"]), x.ndim))
    ref = getattr(np.fft, name)(x.astype(np.float64), **ref_kwargs)
    assert out.shape == ref.shape and out.dtype == gc.complex64
    check_close(out.numpy(), ref, max(ref.shape))


@pytest.mark.parametrize("name,kwargs", [("irfft2", {}), ("irfftn", {"s": (5, 6, 11)}),
                                         ("irfftn", {"axes": (2, 0), "norm": "forward"})])
def test_n_dimensional_inverses_write_a_float16_out(modern_host, half_ctx, name, kwargs):
    spec = random_complex(np.random.default_rng(len(kwargs)), (6, 5, 8))
    ref_kwargs = dict(kwargs)
    if "s" in kwargs and "axes" not in kwargs:
        ref_kwargs["axes"] = tuple(range(spec.ndim - len(kwargs["s"]), spec.ndim))
    ref = getattr(np.fft, name)(spec.astype(np.complex128), **ref_kwargs)
    t, out = half_ctx.tensor(spec), half_ctx.empty(ref.shape, "float16")
    got = modern_host.run(half_ctx, lambda rec: getattr(rec, name)(t, out=out, **kwargs))
    assert got is out
    check_half(out.numpy(), ref, max(ref.shape))


@pytest.mark.parametrize("n", [8192, 4099])
def test_long_rows_read_and_write_float16(modern_host, half_ctx, n):
    """Rows past one workgroup: the four-step FFT, and Bluestein's
    algorithm around it for a prime."""
    if fft_kernels.largest_points(half_ctx) >= n and fft_kernels.radix_plan(n) is not None:
        pytest.skip("this device transforms the row in one workgroup")
    rng = np.random.default_rng(n)
    x = half_data(rng, (2, n + 3))
    spec = np.fft.rfft(rng.standard_normal((2, n))).astype(np.complex64)
    t, s, out = half_ctx.tensor(x), half_ctx.tensor(spec), half_ctx.empty((2, n), "float16")
    r, f, _ = modern_host.run(half_ctx, lambda rec: (rec.rfft(t, n=n), rec.fft(t[:, :n]),
                                                     rec.irfft(s, n=n, out=out)))
    check_close(r.numpy(), np.fft.rfft(x.astype(np.float64), n=n), n)
    check_close(f.numpy(), np.fft.fft(x[:, :n].astype(np.float64)), n)
    check_half(out.numpy(), np.fft.irfft(spec.astype(np.complex128), n=n), n)


@pytest.mark.parametrize("shape,axes", [((3, 64, 128), (-2, -1)),   # fused columns
                                        ((24, 40), (-2, -1)),       # transform, product, inverse
                                        ((17, 64), (0, 1))])        # columns through Bluestein
def test_fft_convolve_reads_and_writes_float16(modern_host, half_ctx, shape, axes):
    rng = np.random.default_rng(shape[0])
    x = half_data(rng, shape)
    h, w = shape[axes[0]], shape[axes[1]]
    spectrum = np.fft.rfft2(rng.standard_normal((h, w))).astype(np.complex64)
    xt, kt = half_ctx.tensor(x), half_ctx.tensor(spectrum)
    out = half_ctx.empty(shape, "float16")
    new, into, inplace = modern_host.run(half_ctx, lambda rec: (
        rec.fft_convolve(xt, kt, axes=axes), rec.fft_convolve(xt, kt, axes=axes, out=out),
        rec.fft_convolve(xt, kt, axes=axes, out=xt)))
    ref = np.fft.irfft2(np.fft.rfft2(x.astype(np.float64), axes=axes) * spectrum.astype(np.complex128),
                        s=(h, w), axes=axes)
    assert new.dtype == gc.float32 and into is out and inplace is xt
    scale = np.sqrt(np.mean(ref ** 2))
    assert np.abs(new.numpy() - ref).max() / scale <= 10 * accuracy_bound(h * w)
    check_half(out.numpy(), ref, h * w)
    check_half(xt.numpy(), ref, h * w)


def test_new_batches_and_views_make_no_pipeline(modern_host, half_ctx):
    """float16 rows take their own pipelines (made once); after them no
    other batch or view of the same lengths and layouts makes one."""
    rng = np.random.default_rng(13)
    x = half_ctx.tensor(half_data(rng, (6, 40, 64)))
    spec = half_ctx.tensor(random_complex(rng, (6, 40, 33)))
    outs = half_ctx.empty((6, 40, 64), "float16")
    modern_host.run(half_ctx, lambda rec: [rec.rfft(x), rec.rfft(x, n=64, axis=1), rec.fft(x, n=40),
                                           rec.irfft(spec, n=64, out=outs), rec.fft(x, n=1009)])
    before = half_ctx.cache_stats()["pipelines_created"]
    modern_host.run(half_ctx, lambda rec: [rec.rfft(x[::2, 3:]), rec.rfft(x[1:, :, ::2], n=64, axis=1),
                                           rec.fft(x[..., 5:], n=40), rec.fft(x[2], n=1009),
                                           rec.irfft(spec[1:], n=64, out=outs[1:]),
                                           rec.irfft(spec[:, ::2], n=64, out=outs[:, ::2])])
    assert half_ctx.cache_stats()["pipelines_created"] == before


def test_typed_errors_before_anything_is_recorded(modern_host, half_ctx):
    x = half_ctx.tensor(np.ones((4, 8), np.float16))
    c = half_ctx.tensor(np.ones((4, 8), np.complex64))
    half_out = half_ctx.empty((4, 8), "float16")
    cases = [
        (gc.DTypeError, lambda rec: rec.fft(x, out=half_out), "complex64"),       # complex results
        (gc.DTypeError, lambda rec: rec.rfft(x, out=half_ctx.empty((4, 5), "float16")), "complex64"),
        (gc.DTypeError, lambda rec: rec.fft2(c, out=half_out), "complex64"),
        (gc.DTypeError, lambda rec: rec.ifft(x, out=half_ctx.empty((4, 8), "float32")), "complex64"),
        (gc.DTypeError, lambda rec: rec.irfft(x), "complex64"),                   # complex input only
        (gc.DTypeError, lambda rec: rec.irfft2(c, out=half_ctx.empty((4, 14), "int32")), "float32 or float16"),
        (gc.DTypeError, lambda rec: rec.fft_convolve(x, x), "complex64"),
        (gc.DTypeError, lambda rec: rec.fft_convolve(x, half_ctx.tensor(np.ones((4, 5), np.complex64)),
                                                     out=half_ctx.empty((4, 8), "complex64")), "float16"),
    ]
    for error, fn, match in cases:
        assert_refused(modern_host, half_ctx, error, fn, match)


def test_float16_is_refused_where_the_host_did_not_enable_it(bare_host):
    """A context without 16-bit storage makes no float16 tensor; a float16
    view of its memory is refused by every transform before recording."""
    ctx = bare_host.adopt()
    try:
        if ctx.caps.float16_storage:
            pytest.skip("this host enabled 16-bit storage")
        with pytest.raises(gc.UnsupportedError):
            ctx.empty((4, 8), "float16")
        words = ctx.empty((4, 8), "float32")
        half = gc.Tensor(words.buffer, (4, 16), "float16")
        spec = ctx.tensor(np.ones((4, 9), np.complex64))
        for fn in (lambda rec: rec.rfft(half), lambda rec: rec.fft(half), lambda rec: rec.rfftn(half),
                   lambda rec: rec.irfft(spec, out=half), lambda rec: rec.fft_convolve(half, spec)):
            assert_refused(bare_host, ctx, gc.UnsupportedError, fn, "16bit_storage")
    finally:
        ctx.close()


def test_planned_kernels_are_in_the_bake_catalogue(half_ctx):
    """Every pipeline the float16 paths plan is baked: fixed-length rows and
    columns, generic and Bluestein rows, the long paths and the
    convolution's routes."""
    ctx, ops, catalogue = half_ctx, registered_ops(), set(all_specs())
    real = ctx.tensor(np.ones((24, 40), np.float16))
    cplx = ctx.tensor(np.ones((6, 40), np.complex64))
    calls = [("fft_convolve", (real, ctx.tensor(np.ones((24, 21), np.complex64)))),
             ("fft_convolve", (ctx.tensor(np.ones((32, 64), np.float16)), ctx.tensor(np.ones((32, 33), np.complex64)),
                               (-2, -1), ctx.empty((32, 64), "float16"))),
             ("rfft2", (real,)), ("fft2", (real,)), ("rfft", (real, 17)), ("rfft", (real, 64, 0)),
             ("irfft2", (cplx, None, (-2, -1), None, ctx.empty((6, 78), "float16"))),
             ("irfft", (cplx, 64, 0, None, ctx.empty((64, 40), "float16"))),
             ("rfft", (real, 8192)), ("fft", (real, 4099)),
             ("irfft", (cplx, 8192, -1, None, ctx.empty((6, 8192), "float16")))]
    planned = [d for name, args in calls for d in ops[name](ctx, *args).dispatches]
    missing = {d.spec.family + str(d.spec.params)[:120] for d in planned if d.spec not in catalogue}
    assert not missing
