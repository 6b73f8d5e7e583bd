"""The layout probe of the fixed FFT kernels: a variant changes the
layouts it names and nothing else, and main's layout (and a grouping of
planes) measures on the test device with every result checked against
numpy."""
import pytest

from benchmarks import fft_layouts
from guestcompute.ops import fft_fixed


def test_a_variant_lays_out_only_the_1024_point_kernels_it_names():
    layout = fft_layouts.patched_layout((16, 4), None)
    assert layout(1024, True) == (16, 4, [16, 16, 4])
    assert layout(1024, False) == fft_fixed.layout(1024, False)
    assert layout(512, True) == fft_fixed.layout(512, True)
    assert layout(512, True, True) == fft_fixed.layout(512, True, True)
    assert fft_fixed.stage_radices(1024, 8) == [8, 8, 8, 2]
    assert fft_fixed.stage_radices(1024, 32) == [32, 32]


def test_a_variant_lays_out_the_rows_of_the_lengths_it_names():
    layout = fft_layouts.patched_layout(None, {256: (16, 4), 4096: (8, 1)})
    assert layout(256, False) == (16, 4, [16, 16])
    assert layout(4096, False) == (8, 1, [8, 8, 8, 8])
    assert layout(256, True) == fft_fixed.layout(256, True)
    assert layout(1024, False) == fft_fixed.layout(1024, False)


@pytest.mark.parametrize("chunk", [None, 1])
def test_main_layout_measures_every_case(ctx, chunk):
    result = fft_layouts.measure(ctx, 2, references=False, quick=True, chunk=chunk)
    assert set(result["us"]) == set(fft_layouts.CASES)
    assert all(t > 0 for t in result["us"].values())
    assert all(e <= 1e-5 for e in result["errors"].values())
    row = fft_layouts.table([{"variant": "main", **result}]).splitlines()[-1]
    assert row.startswith("| main | ") and row.count("|") == len(fft_layouts.CASES) + 2
