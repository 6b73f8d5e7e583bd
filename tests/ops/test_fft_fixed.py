"""The fixed-length FFT kernels (ops/fft_fixed.py): every power of two they
are built for, in both layouts (rows along memory, and columns: neighbouring
rows neighbours in memory), for each kind of row they read and write,
against numpy.fft in float64."""
import dataclasses

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


def test_a_butterfly_computes_two_twiddles_at_most():
    """Each stage after the first computes w and w^4 a butterfly (w alone
    below radix 8; the others are squares and products of them), and no
    fixed kernel reads a table of roots."""
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
            assert "roots" not in source and "sin(" not in source and "cos(" not in source


def test_twiddles_are_the_roots_of_unity_to_float32_rounding(modern_host, modern_ctx):
    """The transform of a unit impulse at position one is the n-th roots
    themselves, each passing through every stage's twiddles: they stay
    within a few float32 roundings of float64's, forward and inverse,
    whatever the driver's sin and cos (the kernel does not use them)."""
    impulses = []
    for n in fft_fixed.LENGTHS:
        x = np.zeros(n, np.complex64)
        x[1] = 1
        impulses.append((n, modern_ctx.tensor(x)))
    outs = modern_host.run(modern_ctx, lambda rec: [(rec.fft(t), rec.ifft(t, norm="forward")) for _, t in impulses])
    for (n, _), (f, i) in zip(impulses, outs):
        roots = np.exp(-2j * np.pi * np.arange(n) / n)
        # ~4 units in the last place of 1.0: lavapipe's worst was 1.2e-7; the 2^-11 that
        # Vulkan allows a driver's sin and cos would be 5e-4.
        assert np.abs(f.numpy() - roots).max() <= 5e-7, n
        assert np.abs(i.numpy() - roots.conj()).max() <= 5e-7, n


@pytest.mark.parametrize("width", [2, 512, fft_fixed.NARROW_ROWS, fft_fixed.NARROW_ROWS + 3])
def test_few_columns_of_512_points_take_the_narrow_layout(modern_host, modern_ctx, width):
    """A column pass of 512 points over at most NARROW_ROWS columns runs
    four columns a workgroup of eight points an invocation; more columns
    keep the usual layout. Both match numpy, forward and inverse."""
    plans = [d.spec for d in registered_ops()["fft"](modern_ctx, modern_ctx.empty((512, width), "complex64"),
                                                     axis=0).dispatches]
    narrow = width <= fft_fixed.NARROW_ROWS
    assert [(s.family, s.param("form", "")) for s in plans] == [("fft_fixed", "narrow" if narrow else "")]
    assert fft_fixed.shape(plans[0])[1:3] == ((8, 4) if narrow else (16, 8))
    x = random_complex(np.random.default_rng(width), (512, width))
    t = modern_ctx.tensor(x)
    f, i = modern_host.run(modern_ctx, lambda rec: (rec.fft(t, axis=0), rec.ifft(t, axis=0)))
    check_close(f.numpy(), np.fft.fft(x.astype(np.complex128), axis=0), 512)
    check_close(i.numpy(), np.fft.ifft(x.astype(np.complex128), axis=0), 512)


def test_narrow_columns_cropped_padded_and_spaced_match_numpy(modern_host, modern_ctx):
    """The narrow layout's bounds-free paths take whole columns at any
    step; columns cut short or zero-padded to 512 points, and an output
    spaced apart, go through the bounds tests, and leave the elements
    between the spaced output's untouched."""
    rng = np.random.default_rng(11)
    short, long_ = random_complex(rng, (400, 6)), random_complex(rng, (600, 6))
    ts, tl = modern_ctx.tensor(short), modern_ctx.tensor(long_)
    spaced = modern_ctx.tensor(np.full((512, 12), 3 - 3j, np.complex64))
    padded, cropped, _ = modern_host.run(modern_ctx, lambda rec: (
        rec.fft(ts, n=512, axis=0), rec.ifft(tl, n=512, axis=0), rec.fft(tl[:512], axis=0, out=spaced[:, ::2])))
    check_close(padded.numpy(), np.fft.fft(short.astype(np.complex128), n=512, axis=0), 512)
    check_close(cropped.numpy(), np.fft.ifft(long_.astype(np.complex128), n=512, axis=0), 512)
    got = spaced.numpy()
    check_close(got[:, ::2], np.fft.fft(long_[:512].astype(np.complex128), axis=0), 512)
    assert (got[:, 1::2] == 3 - 3j).all()
    glsl = fft_fixed.fixed_spec(512, "complex", "complex", True, form="narrow").render()
    assert "shared vec2 sh[" in glsl and "if (pc.out_len >= N) {" in glsl


@pytest.mark.parametrize("invocations", [None, 128])
def test_complex_rows_of_256_points_take_eight_a_workgroup(modern_host, modern_ctx, invocations):
    """Complex 256-point rows along memory run eight a workgroup (the wide
    form); real ones, and every row on a device that runs fewer than 256
    invocations a workgroup, keep the usual four. All match numpy."""
    if invocations is not None:
        modern_ctx.device.limits = dataclasses.replace(modern_ctx.device.limits,
                                                       max_workgroup_invocations=invocations)
    x = random_complex(np.random.default_rng(256), (13, 256))
    t, r = modern_ctx.tensor(x), modern_ctx.tensor(x.real.copy())
    wide = invocations is None
    plans = [d.spec for d in registered_ops()["fft"](modern_ctx, t).dispatches]
    assert [(s.family, s.param("form", "")) for s in plans] == [("fft_fixed", "wide" if wide else "")]
    assert fft_fixed.shape(plans[0])[1:3] == ((8, 8) if wide else (8, 4))
    real = [d.spec for d in registered_ops()["fft"](modern_ctx, r).dispatches]
    assert [s.param("form", "") for s in real] == [""]
    f, i, fr = modern_host.run(modern_ctx, lambda rec: (rec.fft(t), rec.ifft(t, norm="ortho"), rec.fft(r)))
    x64 = x.astype(np.complex128)
    check_close(f.numpy(), np.fft.fft(x64), 256)
    check_close(i.numpy(), np.fft.ifft(x64, norm="ortho"), 256)
    check_close(fr.numpy(), np.fft.fft(x.real.astype(np.float64)), 256)


@pytest.mark.parametrize("width, start, aligned", [(8, 0, True), (12, 4, True), (513, 0, False), (8, 1, False),
                                                   (6, 0, False)])
def test_sector_aligned_columns_of_1024_points_take_four_a_workgroup(modern_host, modern_ctx, width, start, aligned):
    """A column pass of 1,024 complex points whose columns sit four to a
    32-byte sector (the width, the view's start and its steps multiples of
    four values) runs four columns a workgroup; others keep eight. Both
    match numpy, forward and inverse, in place and out of place."""
    x = random_complex(np.random.default_rng(width + start), (1024, width + start))
    t = modern_ctx.tensor(x)[:, start:]
    plans = [d.spec for d in registered_ops()["fft"](modern_ctx, t, axis=0).dispatches]
    assert [(s.family, s.param("form", "")) for s in plans] == [("fft_fixed", "aligned" if aligned else "")]
    assert fft_fixed.shape(plans[0])[1:3] == ((16, 4) if aligned else (16, 8))
    inverse = modern_ctx.tensor(x[:, start:])
    f, _ = modern_host.run(modern_ctx, lambda rec: (rec.fft(t, axis=0), rec.ifft(inverse, axis=0, out=inverse)))
    x64 = x[:, start:].astype(np.complex128)
    check_close(f.numpy(), np.fft.fft(x64, axis=0), 1024)
    check_close(inverse.numpy(), np.fft.ifft(x64, axis=0), 1024)


@pytest.mark.parametrize("n, columns, rows, load, on_sectors, form", [
    (1024, True, 2048, "complex", True, "aligned"),
    (1024, True, 2048, "complex", False, ""),       # columns not on sector boundaries
    (1024, False, 2048, "complex", True, ""),       # rows along memory
    (2048, True, 2048, "complex", True, ""),        # a length without the aligned form
    (1024, True, 2048, "real", True, ""),           # real columns
    (512, True, 512, "complex", True, "narrow"),
    (512, True, 512, "real", False, "narrow"),
    (512, False, 512, "complex", True, ""),
    (512, True, fft_fixed.NARROW_ROWS + 1, "complex", True, ""),
    (256, False, 4096, "complex", False, "wide"),
    (256, False, 4096, "real", False, ""),          # real rows (and so half-length ones)
    (256, True, 4096, "complex", False, ""),        # columns
    (512, False, 4096, "complex", False, ""),       # a length without the wide form
])
def test_the_forms_are_for_their_lengths_and_views(n, columns, rows, load, on_sectors, form):
    assert fft_fixed.pass_form(n, columns, rows, load, "complex", on_sectors) == form


def test_the_column_forms_lay_out_whole_columns_within_the_shared_budget():
    assert fft_fixed.layout(1024, True, "aligned") == (16, fft_fixed.SECTOR_VALUES, [16, 16, 4])
    forms = [(n, "narrow") for n in fft_fixed.NARROW_LENGTHS] + [(n, "aligned") for n in fft_fixed.ALIGNED_LENGTHS]
    for n, form in forms:
        per, rows, radices = fft_fixed.layout(n, True, form)
        assert int(np.prod(radices)) == n and all(per % r == 0 for r in radices)
        assert rows * n * fft_fixed.word_bytes(n, rows, form) <= fft_fixed.SHARED_BUDGET and rows >= 4


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
