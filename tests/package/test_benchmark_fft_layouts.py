"""The layout probe of the 1,024-point FFT kernels: a variant changes the
layout it names and nothing else, and main's layout measures on the test
device with every 2-D result checked against numpy."""
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


def test_main_layout_measures_every_case(ctx):
    result = fft_layouts.measure(ctx, 1, references=False, quick=True)
    assert set(result["us"]) == set(fft_layouts.CASES)
    assert all(t > 0 for t in result["us"].values())
    assert all(e <= 1e-5 for e in result["errors"].values())
    row = fft_layouts.table([{"variant": "main", **result}]).splitlines()[-1]
    assert row.startswith("| main | ") and row.count("|") == len(fft_layouts.CASES) + 2
