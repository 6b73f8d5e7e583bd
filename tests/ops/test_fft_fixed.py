"""The fixed-length FFT kernels (ops/fft_fixed.py): every power of two they
are built for, in both layouts (rows along memory, and columns: neighbouring
rows neighbours in memory), for each kind of row they read and write,
against numpy.fft in float64."""
import numpy as np
import pytest

from guestcompute.ops import fft_fixed
from guestcompute.ops.base import registered_ops
from test_fft import check_close, random_complex


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_every_length_and_layout_matches_numpy(modern_host, modern_ctx, layout):
    rng = np.random.default_rng(5)
    cases = []
    for n in fft_fixed.LENGTHS:
        shape, axis = ((3, n), 1) if layout == "rows" else ((n, 5), 0)
        x = random_complex(rng, shape)
        cases.append((n, axis, x, x.real.copy(), modern_ctx.tensor(x), modern_ctx.tensor(x.real.copy())))

    def record(rec):
        return [(rec.fft(t, axis=axis), rec.ifft(t, axis=axis, norm="ortho"), rec.rfft(tr, axis=axis),
                 rec.irfft(t, n=n, axis=axis)) for n, axis, _, _, t, tr in cases]

    results = modern_host.run(modern_ctx, record)
    for (n, axis, x, xr, _, _), (f, i, r, ir) in zip(cases, results):
        x64 = x.astype(np.complex128)
        check_close(f.numpy(), np.fft.fft(x64, axis=axis), n)
        check_close(i.numpy(), np.fft.ifft(x64, axis=axis, norm="ortho"), n)
        check_close(r.numpy(), np.fft.rfft(xr.astype(np.float64), axis=axis), n)
        check_close(ir.numpy(), np.fft.irfft(x64, n=n, axis=axis), n)


def test_layouts_stay_within_their_shared_memory_budget():
    for n in fft_fixed.LENGTHS:
        for columns in (False, True):
            per, rows, radices = fft_fixed.layout(n, columns)
            assert int(np.prod(radices)) == n and all(per % r == 0 for r in radices)
            assert rows * n * fft_fixed.word_bytes(n, rows) <= fft_fixed.SHARED_BUDGET
            if columns:
                assert rows >= (4 if n <= 1024 else 2)   # whole 32-byte sectors for accesses across columns


def test_a_butterfly_reads_two_twiddles_at_most():
    """Each stage after the first reads w and w^4 from the table a
    butterfly (w alone below radix 8; the others are squares and products
    of them): the table reads, not the multiplications, were what the
    twiddles cost on a GPU."""
    for n in fft_fixed.LENGTHS:
        for columns in (False, True):
            per, _, radices = fft_fixed.layout(n, columns)
            reads, span = 0, 1
            for radix in radices:
                if span > 1:
                    reads += (per // radix) * (1 if radix <= 4 else 2)
                span *= radix
            source = fft_fixed.fixed_spec(n, "complex", "complex", columns).render()
            # one more for the function's own definition
            assert source.count("twiddle(") == reads + 1, (n, columns)


@pytest.mark.parametrize("width", [2, 512, fft_fixed.NARROW_ROWS, fft_fixed.NARROW_ROWS + 3])
def test_few_columns_of_512_points_take_the_narrow_layout(modern_host, modern_ctx, width):
    """A column pass of 512 points over at most NARROW_ROWS columns runs
    four columns a workgroup of eight points an invocation; more columns
    keep the usual layout. Both match numpy, forward and inverse."""
    plans = [d.spec for d in registered_ops()["fft"](modern_ctx, modern_ctx.empty((512, width), "complex64"),
                                                     axis=0).dispatches]
    narrow = width <= fft_fixed.NARROW_ROWS
    assert [(s.family, s.param("narrow", False)) for s in plans] == [("fft_fixed", narrow)]
    assert fft_fixed.shape(plans[0])[1:3] == ((8, 4) if narrow else (16, 8))
    x = random_complex(np.random.default_rng(width), (512, width))
    t = modern_ctx.tensor(x)
    f, i = modern_host.run(modern_ctx, lambda rec: (rec.fft(t, axis=0), rec.ifft(t, axis=0)))
    check_close(f.numpy(), np.fft.fft(x.astype(np.complex128), axis=0), 512)
    check_close(i.numpy(), np.fft.ifft(x.astype(np.complex128), axis=0), 512)


def test_the_narrow_layout_is_only_for_columns_of_its_lengths():
    assert fft_fixed.narrow_columns(512, True, 512)
    assert not fft_fixed.narrow_columns(512, False, 512)
    assert not fft_fixed.narrow_columns(1024, True, 512)
    assert not fft_fixed.narrow_columns(512, True, fft_fixed.NARROW_ROWS + 1)
    for n in fft_fixed.NARROW_LENGTHS:
        per, rows, radices = fft_fixed.layout(n, True, narrow=True)
        assert int(np.prod(radices)) == n and all(per % r == 0 for r in radices)
        assert rows * n * fft_fixed.word_bytes(n, rows) <= fft_fixed.SHARED_BUDGET and rows >= 4


def test_rows_are_stored_whole_or_element_by_element(modern_host, modern_ctx):
    """An output whose rows are whole and consecutive takes the store path
    without bounds tests; a spaced view the element-wise one. Both hold
    numpy's values, and the elements between the spaced view's keep theirs."""
    rng = np.random.default_rng(9)
    n = 256
    x = random_complex(rng, (3, n))
    t = modern_ctx.tensor(x)
    whole = modern_ctx.empty((3, n), "complex64")
    spaced = modern_ctx.tensor(np.full((3, 2 * n), 7 + 7j, np.complex64))
    modern_host.run(modern_ctx, lambda rec: (rec.fft(t, out=whole), rec.fft(t, out=spaced[:, ::2])))
    ref = np.fft.fft(x.astype(np.complex128))
    check_close(whole.numpy(), ref, n)
    got = spaced.numpy()
    check_close(got[:, ::2], ref, n)
    assert (got[:, 1::2] == 7 + 7j).all()
    glsl = fft_fixed.fixed_spec(n, "complex", "complex", False).render()
    assert "if (pc.out_step == 1 && pc.out_len >= N) {" in glsl
