"""Real rows through a transform of half their length (ops/fft_halves.py):
which fixed-length kernels take it, and numpy.fft's results through it at
the edges of the method — the DC and Nyquist terms, a forward transform's
mirrored half, cropped and zero-padded rows, every norm."""
import numpy as np
import pytest

from guestcompute.ops import fft_fixed, fft_halves
from test_fft import check_close, random_complex

LENGTHS = [8, 16, 32, 128, 512, 2048, 4096]


def test_rows_along_memory_of_eight_points_or_more_take_the_half_length_transform():
    for n in fft_fixed.LENGTHS:
        for columns in (False, True):
            forward = fft_fixed.fixed_spec(n, "real", "complex", columns).param("halves")
            inverse = fft_fixed.fixed_spec(n, "hermitian", "real", columns).param("halves")
            halved = n >= fft_halves.SMALLEST and not columns
            assert (forward, inverse) == (("r2c", "c2r") if halved else (None, None)), (n, columns)
            assert fft_fixed.fixed_spec(n, "complex", "complex", columns).param("halves") is None
    # Its workgroup transforms rows of n/2 points.
    assert fft_fixed.shape(fft_fixed.fixed_spec(1024, "real", "complex", False))[0] == 512
    assert fft_halves.halves(1024, "tex", "complex", False, False) == "r2c"
    assert fft_halves.halves(1024, "hermitian", "half", False, False) == "c2r"
    assert fft_halves.halves(1024, "complex", "complex", False, True) == ""


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_real_rows_forward_match_numpy(modern_host, modern_ctx, norm):
    """rfft gives n/2 + 1 values, fft of the same real rows all n (the
    upper half the conjugates of the lower, written by the same kernel)."""
    rng = np.random.default_rng(11)
    rows = [rng.standard_normal((3, n)).astype(np.float32) for n in LENGTHS]
    tensors = [modern_ctx.tensor(r) for r in rows]
    outs = modern_host.run(modern_ctx, lambda rec: [(rec.rfft(t, norm=norm), rec.fft(t, norm=norm))
                                                    for t in tensors])
    for n, x, (half, full) in zip(LENGTHS, rows, outs):
        check_close(half.numpy(), np.fft.rfft(x.astype(np.float64), norm=norm), n)
        check_close(full.numpy(), np.fft.fft(x.astype(np.float64), norm=norm), n)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hermitian_rows_inverse_match_numpy_ignoring_dc_and_nyquist_imaginary_parts(modern_host, modern_ctx, norm):
    """numpy's irfft uses only the real parts of the first and (for even n)
    the last value; the half-length method must drop them itself."""
    rng = np.random.default_rng(12)
    rows = [random_complex(rng, (3, n // 2 + 1)) for n in LENGTHS]       # imaginary parts everywhere
    tensors = [modern_ctx.tensor(r) for r in rows]
    outs = modern_host.run(modern_ctx, lambda rec: [rec.irfft(t, n=n, norm=norm) for n, t in zip(LENGTHS, tensors)])
    for n, x, out in zip(LENGTHS, rows, outs):
        check_close(out.numpy(), np.fft.irfft(x.astype(np.complex128), n=n, norm=norm), n)


def test_cropped_and_zero_padded_rows_match_numpy(modern_host, modern_ctx):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 700)).astype(np.float32)
    spec = random_complex(rng, (2, 300))
    t, s = modern_ctx.tensor(x), modern_ctx.tensor(spec)
    cases = [("rfft", t, 512), ("rfft", t, 1024), ("irfft", s, 512), ("irfft", s, 1024), ("irfft", s, 64)]
    outs = modern_host.run(modern_ctx, lambda rec: [getattr(rec, name)(v, n=n) for name, v, n in cases])
    for (name, _, n), out in zip(cases, outs):
        src = x.astype(np.float64) if name == "rfft" else spec.astype(np.complex128)
        check_close(out.numpy(), getattr(np.fft, name)(src, n=n), n)


def test_rows_of_an_irfft2_and_rfft2_round_trip(modern_host, modern_ctx):
    """The 2-D pair the benchmarks and the ocean run: columns of the full
    length, rows through the half-length kernels."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((4, 64, 256)).astype(np.float32)
    t = modern_ctx.tensor(x)

    def record(rec):
        spectrum = rec.rfft2(t)
        return spectrum, rec.irfft2(spectrum, s=(64, 256))
    spectrum, back = modern_host.run(modern_ctx, record)
    check_close(spectrum.numpy(), np.fft.rfft2(x.astype(np.float64)), 64 * 256)
    check_close(back.numpy(), x.astype(np.float64), 64 * 256)
