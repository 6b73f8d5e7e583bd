"""rec.fft and its family against numpy.fft computed in float64: accuracy
over lengths of every kind the kernels take (each radix, their products,
primes through Bluestein's algorithm), numpy's semantics for n / s / axis /
axes / norm and Hermitian shapes on strided views, and the typed errors
raised before anything is recorded."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import fft_kernels
from refusals import assert_refused

# Rows up to 4,096 points are transformed in shared memory (32 KB, every
# device here): the lengths below cover every radix, their products and
# primes, direct and through Bluestein's algorithm (primes up to 2,039).
LENGTHS = sorted(set(range(1, 65)) | {2 ** k for k in range(7, 13)} | {3 ** 5, 3 ** 7, 5 ** 4, 5 ** 5, 7 ** 3, 7 ** 4}
                 | {6 * 7 * 9, 2 * 3 * 5 * 7, 1000, 1536, 2520, 4000} | {97, 101, 257, 509, 1009, 2039})


def accuracy_bound(n: int) -> float:
    """The relative RMS error allowed against float64: 1e-6 * log2(n)."""
    return 1e-6 * max(1.0, np.log2(n))


def errors(got: np.ndarray, ref: np.ndarray) -> tuple:
    """(RMS error, largest error), both relative to the reference's RMS."""
    scale = max(np.sqrt(np.mean(np.abs(ref) ** 2)), 1e-30)
    diff = np.abs(got.astype(np.complex128) - ref)
    return np.sqrt(np.mean(diff ** 2)) / scale, diff.max() / scale


def random_complex(rng, shape) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def check_close(got, ref, n: int):
    rms, worst = errors(np.asarray(got), np.asarray(ref))
    assert rms <= accuracy_bound(n), (n, rms)
    assert worst <= 10 * accuracy_bound(n), (n, worst)


@pytest.mark.parametrize("direction", ["fft", "ifft"])
def test_every_kind_of_length_is_accurate_to_numpy_in_float64(modern_host, modern_ctx, direction):
    rng = np.random.default_rng(1)
    rows = [random_complex(rng, (2, n)) for n in LENGTHS]
    tensors = [modern_ctx.tensor(r) for r in rows]
    outs = modern_host.run(modern_ctx, lambda rec: [getattr(rec, direction)(t) for t in tensors])
    for n, x, out in zip(LENGTHS, rows, outs):
        ref = getattr(np.fft, direction)(x.astype(np.complex128))
        check_close(out.numpy(), ref, n)


@pytest.mark.parametrize("n", [12, 97, 256])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_norm_scales_as_numpy_does(host, ctx, n, norm):
    x = random_complex(np.random.default_rng(n), (3, n))
    t = ctx.tensor(x)
    f, i = host.run(ctx, lambda rec: (rec.fft(t, norm=norm), rec.ifft(t, norm=norm)))
    check_close(f.numpy(), np.fft.fft(x.astype(np.complex128), norm=norm), n)
    check_close(i.numpy(), np.fft.ifft(x.astype(np.complex128), norm=norm), n)


@pytest.mark.parametrize("n", [1, 5, 8, 13, 16, 40])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_n_crops_or_zero_pads_along_any_axis_of_a_strided_view(modern_host, modern_ctx, n, axis):
    rng = np.random.default_rng(n)
    base = random_complex(rng, (9, 20, 3))
    view_np = base[::2, 3:17:1, 1]                   # (5, 14), strided in both axes
    view = modern_ctx.tensor(base)[::2, 3:17:1, 1]
    real_np = base.real[1:8, 16:2:-1, 2]             # (7, 14), reversed along axis 1
    real = modern_ctx.tensor(base.real.copy())[1:8, 16:2:-1, 2]
    got, got_real = modern_host.run(modern_ctx, lambda rec: (rec.fft(view, n=n, axis=axis),
                                                             rec.ifft(real, n=n, axis=axis)))
    check_close(got.numpy(), np.fft.fft(view_np.astype(np.complex128), n=n, axis=axis), n)
    check_close(got_real.numpy(), np.fft.ifft(real_np.astype(np.float64), n=n, axis=axis), n)


@pytest.mark.parametrize("n", [None, 1, 2, 7, 8, 15, 16, 30, 97])
def test_rfft_and_irfft_follow_numpys_hermitian_shapes(modern_host, modern_ctx, n):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    spec = random_complex(rng, (4, 9))
    xt, st_ = modern_ctx.tensor(x), modern_ctx.tensor(spec)
    r, ir = modern_host.run(modern_ctx, lambda rec: (rec.rfft(xt, n=n), rec.irfft(st_, n=n)))
    ref_r = np.fft.rfft(x.astype(np.float64), n=n)
    ref_ir = np.fft.irfft(spec.astype(np.complex128), n=n)
    assert r.shape == ref_r.shape and r.dtype == gc.complex64
    assert ir.shape == ref_ir.shape and ir.dtype == gc.float32
    length = n or 16
    check_close(r.numpy(), ref_r, length)
    check_close(ir.numpy(), ref_ir, length)


def test_irfft_ignores_the_imaginary_parts_numpy_ignores(modern_host, modern_ctx):
    spec = random_complex(np.random.default_rng(3), (9,))     # DC and Nyquist carry imaginary parts
    t = modern_ctx.tensor(spec)
    out = modern_host.run(modern_ctx, lambda rec: rec.irfft(t))
    check_close(out.numpy(), np.fft.irfft(spec.astype(np.complex128)), 16)


NDIM_CASES = [
    ("fft2", {}), ("ifft2", {}), ("fft2", {"s": (5, 12)}), ("ifft2", {"axes": (0, 2)}),
    ("fftn", {}), ("ifftn", {"s": (3, 4, 9)}), ("fftn", {"axes": (1,)}), ("fftn", {"s": (7, 6), "axes": (2, 0)}),
    ("fftn", {"axes": (1, 1)}), ("fftn", {"s": (8,)}),
    ("rfft2", {}), ("rfftn", {}), ("rfftn", {"s": (4, 10)}), ("rfftn", {"axes": (0, 1), "norm": "ortho"}),
    ("irfft2", {}), ("irfft2", {"s": (6, 8)}), ("irfftn", {}), ("irfftn", {"s": (5, 6, 11)}), ("irfftn", {"axes": (2, 0), "norm": "forward"}),
]


@pytest.mark.parametrize("name,kwargs", NDIM_CASES)
def test_n_dimensional_transforms_match_numpy(modern_host, modern_ctx, name, kwargs):
    rng = np.random.default_rng(len(name) + len(kwargs))
    x = random_complex(rng, (6, 5, 8))
    if name.startswith("rfft"):
        x = x.real.copy()
    t = modern_ctx.tensor(x)
    out = modern_host.run(modern_ctx, lambda rec: getattr(rec, name)(t, **kwargs))
    ref_kwargs = dict(kwargs)
    if "s" in kwargs and "axes" not in kwargs:     # ours takes the last len(s) axes, as numpy did before 2.0
        ref_kwargs["axes"] = tuple(range(x.ndim - len(kwargs["s"]), x.ndim))
    ref = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype == np.complex64 else np.float64), **ref_kwargs)
    assert out.shape == ref.shape
    check_close(out.numpy(), ref, max(ref.shape))


def test_batches_over_more_axes_than_one_dispatch_walks(modern_host, modern_ctx):
    # Five batch axes that no two merge (every one strided): the leading ones
    # become separate dispatches.
    x = random_complex(np.random.default_rng(5), (4, 3, 4, 3, 4, 12))
    view_np = x[::2, :, ::2, :, ::2, ::2]
    view = modern_ctx.tensor(x)[::2, :, ::2, :, ::2, ::2]
    out = modern_host.run(modern_ctx, lambda rec: rec.fft(view))
    check_close(out.numpy(), np.fft.fft(view_np.astype(np.complex128)), 6)


def test_out_and_in_place(modern_host, modern_ctx):
    x = random_complex(np.random.default_rng(9), (3, 24))
    t, out = modern_ctx.tensor(x), modern_ctx.empty((3, 24), "complex64")
    r = modern_host.run(modern_ctx, lambda rec: rec.fft(t, out=out))
    assert r is out
    check_close(out.numpy(), np.fft.fft(x.astype(np.complex128)), 24)
    modern_host.run(modern_ctx, lambda rec: rec.ifft(out, out=out))       # in place
    check_close(out.numpy(), x.astype(np.complex128), 24)
    real = modern_ctx.empty((3, 46), "float32")
    spec = modern_ctx.tensor(np.fft.rfft(np.arange(46.0)).astype(np.complex64)[None].repeat(3, 0))
    modern_host.run(modern_ctx, lambda rec: rec.irfft(spec, n=46, out=real))
    check_close(real.numpy(), np.arange(46.0)[None].repeat(3, 0), 46)


def test_empty_batches_record_nothing(modern_host, modern_ctx):
    t = modern_ctx.empty((0, 8), "complex64")
    cmd = modern_host.begin()
    with modern_ctx.record(cmd) as rec:
        out = rec.fft(t)
        assert out.shape == (0, 8) and rec.dispatches == 0
    modern_host.submit_and_wait(cmd)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), data=st.data())
def test_any_shape_axis_length_and_norm(modern_host, modern_ctx, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 24)))
    norm = data.draw(st.sampled_from([None, "ortho", "forward"]))
    real = data.draw(st.booleans())
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32) if real else random_complex(rng, tuple(shape))
    t = modern_ctx.tensor(x)
    out = modern_host.run(modern_ctx, lambda rec: rec.fft(t, n=n, axis=axis, norm=norm))
    ref = np.fft.fft(x.astype(np.float64 if real else np.complex128), n=n, axis=axis, norm=norm)
    assert out.shape == ref.shape
    check_close(out.numpy(), ref, n or shape[axis])


# -- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, -3, 2.5, True])
def test_a_bad_length_is_refused(modern_host, modern_ctx, n):
    t = modern_ctx.tensor(np.ones(8, np.complex64))
    assert_refused(modern_host, modern_ctx, gc.InvalidArgumentError, lambda rec: rec.fft(t, n=n))


def test_typed_errors_before_anything_is_recorded(modern_host, modern_ctx):
    c = modern_ctx.tensor(np.ones((4, 8), np.complex64))
    f = modern_ctx.tensor(np.ones((4, 8), np.float32))
    i = modern_ctx.tensor(np.ones((4, 8), np.int32))
    cases = [
        (gc.InvalidArgumentError, lambda rec: rec.fft(c, norm="unitary"), "norm"),
        (gc.DTypeError, lambda rec: rec.fft(i), "float32, float16 or complex64"),
        (gc.DTypeError, lambda rec: rec.rfft(c), "float32"),
        (gc.DTypeError, lambda rec: rec.irfft(f), "complex64"),
        (gc.ShapeError, lambda rec: rec.fft(c, axis=2), "out of range"),
        (gc.ShapeError, lambda rec: rec.fft2(c, s=(4,), axes=(0, 1)), "same length"),
        (gc.ShapeError, lambda rec: rec.fftn(c, s=(2, 2, 2)), "axes"),
        (gc.ShapeError, lambda rec: rec.fft(modern_ctx.tensor(np.complex64(1))), "0-d"),
        (gc.DTypeError, lambda rec: rec.exp(c), "t.real and t.imag"),
    ]
    for error, fn, match in cases:
        assert_refused(modern_host, modern_ctx, error, fn, match)


def _prime_above(n: int) -> int:
    p = n + 1
    while any(p % d == 0 for d in range(2, int(p ** 0.5) + 1)):
        p += 1
    return p


def test_a_length_too_long_for_every_method_is_refused(modern_host, modern_ctx):
    # A prime whose Bluestein convolution is longer than the four-step FFT
    # reaches (the square of the longest row a workgroup holds, read from the
    # device), and twice it: neither splits into two lengths a workgroup takes.
    longest = fft_kernels.largest_points(modern_ctx)
    prime = _prime_above(longest * longest // 2)
    t = modern_ctx.tensor(np.ones(8, np.complex64))
    for n in (prime, 2 * prime):
        assert_refused(modern_host, modern_ctx, gc.UnsupportedError,
                                 lambda rec, n=n: rec.fft(t, n=n), "shared memory")
    # Refused before any pass makes its tables: the first axis fits, the second does not.
    c = modern_ctx.tensor(np.ones((4, 4), np.complex64))
    assert_refused(modern_host, modern_ctx, gc.UnsupportedError,
                             lambda rec: rec.fftn(c, s=(prime, 4)), "shared memory")


@pytest.mark.parametrize("n", [8192, 5000, 3 * 2039, 1 << 16, 1 << 20, 2053, 4099, 2 * 4099, 65537])
def test_rows_longer_than_shared_memory_take_the_four_step_fft(modern_host, modern_ctx, n):
    # Primes and their multiples past Bluestein's reach in one workgroup go
    # through Bluestein's algorithm around two four-step transforms.
    if fft_kernels.largest_points(modern_ctx) >= n and fft_kernels.radix_plan(n) is not None:
        pytest.skip("this device transforms the row in one workgroup")
    rng = np.random.default_rng(n)
    x = random_complex(rng, (2, n))
    r = rng.standard_normal((2, n + 3)).astype(np.float32)
    t, rt = modern_ctx.tensor(x), modern_ctx.tensor(r)
    spec = modern_ctx.tensor(random_complex(rng, (2, n // 2 + 1)))
    f, i, rf, ir = modern_host.run(modern_ctx, lambda rec: (
        rec.fft(t), rec.ifft(t.T, axis=0, norm="ortho"), rec.rfft(rt, n=n), rec.irfft(spec, n=n)))
    check_close(f.numpy(), np.fft.fft(x.astype(np.complex128)), n)
    check_close(i.numpy(), np.fft.ifft(x.T.astype(np.complex128), axis=0, norm="ortho"), n)
    check_close(rf.numpy(), np.fft.rfft(r.astype(np.float64), n=n), n)
    check_close(ir.numpy(), np.fft.irfft(spec.numpy().astype(np.complex128), n=n), n)


def test_every_length_the_kernels_take_has_a_plan():
    for n in range(1, 4097):
        plan = fft_kernels.radix_plan(n)
        if plan is not None:
            assert int(np.prod(plan)) == n and len(plan) <= fft_kernels.MAX_STAGES
        assert fft_kernels.radix_plan(fft_kernels.bluestein_size(n)) is not None
        assert fft_kernels.bluestein_size(n) >= 2 * n - 1


@pytest.mark.parametrize("name,shape,axis,n", [
    ("fft", (37, 12), 1, None),       # rows, several a workgroup, the last workgroup partly filled
    ("fft", (40, 37), 0, None),       # columns: workgroups read across neighbouring columns
    ("ifft", (23, 10), 0, None),      # columns through Bluestein's algorithm
    ("rfft", (30, 7), 0, 30),
    ("irfft", (9, 7), 0, 16),         # columns written as real values
])
def test_columns_and_workgroups_of_several_rows(modern_host, modern_ctx, name, shape, axis, n):
    rng = np.random.default_rng(shape[0])
    x = rng.standard_normal(shape).astype(np.float32) if name == "rfft" else random_complex(rng, shape)
    t = modern_ctx.tensor(x)
    out = modern_host.run(modern_ctx, lambda rec: getattr(rec, name)(t, n=n, axis=axis))
    ref = getattr(np.fft, name)(x.astype(np.float64 if name == "rfft" else np.complex128), n=n, axis=axis)
    check_close(out.numpy(), ref, n or shape[axis])


def test_rows_per_workgroup_fill_the_size_class():
    assert fft_kernels.rows_per_group(256, 16, 1000) == (15, 17)
    assert fft_kernels.rows_per_group(256, 16, 4) == (4, 17)
    assert fft_kernels.rows_per_group(256, 16, 1) == (1, 16)
    assert fft_kernels.rows_per_group(4096, 4096, 9) == (1, 4096)
    assert fft_kernels.rows_per_group(4096, 2048, 9) == (1, 2048)     # two rows and their padding do not fit


def test_new_lengths_batches_and_views_make_no_pipeline(modern_host, modern_ctx):
    """The views, the batch and (for the generic kernel) the length and its
    stages are push constants: once the complex-to-complex kernels exist
    (fixed-length ones for the powers of two used, for rows and for
    columns, and generic direct and Bluestein ones of both size classes),
    no other batch, view or non-power-of-two length creates a pipeline."""
    rng = np.random.default_rng(11)
    x = modern_ctx.tensor(random_complex(rng, (6, 40, 64)))
    modern_host.run(modern_ctx, lambda rec: [rec.fft(x, n=n) for n in (16, 64, 40, 1024, 17, 1009, 3000)]
                    + [rec.fft(x, n=64, axis=1)])
    before = modern_ctx.cache_stats()["pipelines_created"]
    modern_host.run(modern_ctx, lambda rec: [rec.fft(x, n=9), rec.ifft(x[::2, 3:], n=250, axis=1),
                                             rec.fft2(x[1], s=(40, 64)), rec.ifftn(x, axes=(0, 2)),
                                             rec.fft(x, n=61), rec.fft(x[..., ::3], n=3000, axis=0),
                                             rec.fft(x[1:, ::2], n=64, axis=1), rec.ifft(x[..., 5], n=16)])
    assert modern_ctx.cache_stats()["pipelines_created"] == before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4), data=st.data())
def test_n_dimensional_shapes_axes_and_lengths_follow_numpy(modern_host, modern_ctx, shape, data):
    kind = data.draw(st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn"]))
    ndim = len(shape)
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda a: a % ndim))
    s = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 12), min_size=len(axes), max_size=len(axes))))
    norm = data.draw(st.sampled_from([None, "ortho", "forward"]))
    rng = np.random.default_rng(sum(shape) + len(axes))
    x = rng.standard_normal(shape).astype(np.float32) if kind == "rfftn" else random_complex(rng, tuple(shape))
    if kind == "irfftn" and s is None and shape[axes[-1] % ndim] == 1:
        s = [2] * len(axes)                          # numpy's default length there would be 0
    t = modern_ctx.tensor(x)
    out = modern_host.run(modern_ctx, lambda rec: getattr(rec, kind)(t, s=s, axes=axes, norm=norm))
    ref = getattr(np.fft, kind)(x.astype(np.float64 if kind == "rfftn" else np.complex128), s=s, axes=axes, norm=norm)
    assert out.shape == ref.shape and out.dtype == (gc.float32 if kind == "irfftn" else gc.complex64)
    check_close(out.numpy(), ref, max(max(ref.shape), 2))


def test_a_long_row_in_place_and_along_a_middle_axis(modern_host, modern_ctx):
    n = 2 * fft_kernels.largest_points(modern_ctx)            # four-step on every device here
    rng = np.random.default_rng(3)
    x = random_complex(rng, (2, n))
    t = modern_ctx.tensor(x)
    modern_host.run(modern_ctx, lambda rec: rec.fft(t, out=t))
    check_close(t.numpy(), np.fft.fft(x.astype(np.complex128)), n)
    y = random_complex(rng, (3, n, 2))
    u = modern_ctx.tensor(y)
    out = modern_host.run(modern_ctx, lambda rec: rec.ifftn(u, axes=(1,), norm="forward"))
    check_close(out.numpy(), np.fft.ifftn(y.astype(np.complex128), axes=(1,), norm="forward"), n)
