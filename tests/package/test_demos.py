"""The demos run headless for a few frames under the validation layer (with
synchronization validation): zero messages, and the screenshot shows
particles — judged by pixel statistics, not against a stored image."""
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the demos live next to the package, not in it

from demos import depth_sort, fft_bloom, grade, hdr, kernels, neural, ocean, particles  # noqa: E402
from demos.host import __main__ as host_check  # noqa: E402

SMALL = ["--headless", "--validation", "--size", "160", "120", "--particles", "6000"]


def read_png(path: Path) -> np.ndarray:
    """Decode the demos' PNGs (8-bit RGBA, unfiltered scanlines)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type = header[:4]
    assert (depth, colour_type) == (8, 6), "expected 8-bit RGBA"
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * 4)
    assert not rows[:, 0].any(), "expected unfiltered scanlines"
    return rows[:, 1:].reshape(height, width, 4)


def assert_shows_particles(rgba: np.ndarray):
    rgb = rgba[..., :3].astype(np.float32)
    lum = rgb.mean(axis=2)
    lit = (lum > 24).mean()
    # Particles cover part of the image — not nothing, not everything.
    assert 0.01 < lit < 0.8, f"{lit:.1%} of the pixels are lit"
    # Not a flat image: bright and dark regions, and more than one colour.
    assert lum.std() > 8, f"luminance std {lum.std():.1f}"
    assert np.percentile(lum, 99) > 80
    assert np.ptp(rgb[lum > 24].mean(axis=0)) > 5 or rgb[lum > 24].std(axis=0).max() > 10
    # Opaque output.
    assert (rgba[..., 3] == 255).all()


@pytest.fixture
def screenshot(tmp_path):
    return tmp_path / "shot.png"


def test_particles_headless_under_validation(screenshot, capsys):
    rc = particles.main(SMALL + ["--frames", "4", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "particles: 6,000" in out
    # The default: an HDR scene resolved by the guest into the output, and
    # a guest-simulated backdrop the host samples, checked against numpy.
    assert "post-process: HdrPostProcess, into the output" in out
    assert "max |ripple heights - numpy| over 40x30 cells" in out
    assert "validation messages (incl. synchronization validation): 0" in out
    assert_shows_particles(read_png(screenshot))


@pytest.mark.parametrize("route, name", [("image", "ImageBloom"), ("buffer", "BufferBloom")])
def test_particles_8_bit_post_process_routes(screenshot, capsys, route, name):
    rc = particles.main(SMALL + ["--frames", "3", "--bloom-route", route, "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"post-process: {name}" in out
    assert_shows_particles(read_png(screenshot))


def test_particles_hdr_through_the_scene_when_the_output_takes_no_shader_writes(screenshot, capsys, monkeypatch):
    # An sRGB swapchain (or one without STORAGE) cannot be written by the
    # tone map: it goes back into the scene, and the host's blit resolves.
    monkeypatch.setattr(hdr.HdrPostProcess, "output_writable", staticmethod(lambda ctx, renderer: False))
    rc = particles.main(SMALL + ["--frames", "3", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "post-process: HdrPostProcess, through the scene and a host blit" in out
    assert_shows_particles(read_png(screenshot))


@pytest.mark.parametrize("flags", [["--hdr"], ["--backdrop"], ["--hdr", "--backdrop"]])
def test_host_renderer_hdr_scene_and_backdrop_without_guestcompute(flags, capsys):
    # The renderer's own paths: the default blit resolve, and a backdrop
    # written by a host transfer and sampled in the pass.
    assert host_check.main(["--size", "96", "64", "--points", "500"] + flags) == 0, capsys.readouterr().out
    assert "validation messages (incl. synchronization validation): 0" in capsys.readouterr().out


def test_particles_move_between_frames():
    args = particles.parse_args(SMALL + ["--frames", "2"])
    first = particles.run(args).last_frame
    args = particles.parse_args(SMALL + ["--frames", "6"])
    later = particles.run(args)
    assert not later.validation_messages
    changed = (np.abs(first.astype(int) - later.last_frame.astype(int)).max(axis=2) > 16).mean()
    assert changed > 0.01, f"only {changed:.2%} of the pixels changed between frames 2 and 6"


def test_particles_direct_recording_matches_program_replay():
    # The bloom recorded op by op each frame and replayed as a program give
    # the same frame.
    replayed = particles.run(particles.parse_args(SMALL + ["--frames", "3"]))
    direct = particles.run(particles.parse_args(SMALL + ["--frames", "3", "--direct"]))
    assert not replayed.validation_messages and not direct.validation_messages
    np.testing.assert_array_equal(replayed.last_frame, direct.last_frame)


def test_particles_sorted_back_to_front_under_validation(screenshot, capsys, monkeypatch):
    # Read back the last frame's index buffer and the depths it was sorted
    # by (while the demo's context is open) and compare with numpy here.
    seen = {}

    def read_back(sort, ms):
        seen.update(order=sort.order.numpy(), depths=sort.depths.numpy(), timed=sort.timed, ms=ms)
    monkeypatch.setattr(particles, "report_depth_sort", read_back)
    rc = particles.main(SMALL + ["--frames", "4", "--sorted", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "validation messages (incl. synchronization validation): 0" in out
    order, depths = seen["order"], seen["depths"]
    assert order.shape == depths.shape == (6000,)
    # z of the position buffer is the simulation's nearness to the viewer
    # (checked against numpy by the demo with the rest of the positions).
    assert np.ptp(depths) > 1.0, "the depths are all alike: nothing to sort"
    np.testing.assert_array_equal(order, np.argsort(depths, kind="stable"))
    assert (np.diff(depths[order]) >= 0).all()          # farthest first: back to front
    if seen["timed"]:
        assert seen["ms"] > 0
    assert_shows_particles(read_png(screenshot))


def test_particles_sorted_mode_reports_its_sort_time_and_order(capsys):
    rc = particles.main(SMALL + ["--frames", "3", "--sorted", "--no-ripples"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "depth sort: 6,000 particles back to front every frame, GPU" in out
    assert "draw order of the last frame: back to front, equal to numpy's stable argsort" in out


@pytest.mark.parametrize("change, why", [
    (lambda order, depths: order[::-1], "drawn before a farther one"),
    (lambda order, depths: np.where(order == order[0], order[1], order), "not a permutation"),
    (lambda order, depths: np.concatenate([order[:2][::-1], order[2:]]), "not numpy's stable argsort"),
])
def test_the_draw_order_check_sees_a_wrong_order(change, why):
    depths = np.array([3.0, 3.0, -1.0, 7.5, 0.25], np.float32)
    depths[1] = depths[0] = -2.0            # a tie: its input order must be kept
    order = np.argsort(depths, kind="stable")
    assert depth_sort.order_error(order, depths) == ""
    assert why in depth_sort.order_error(change(order, depths), depths)


def test_neural_headless_under_validation(screenshot, capsys):
    # The demo itself checks the GPU's colours against numpy (exit status 1
    # if they differ).
    rc = neural.main(SMALL + ["--frames", "3", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "max |GPU colour - numpy|" in out and "(one rec.mlp, " in out
    assert "validation messages (incl. synchronization validation): 0" in out
    assert_shows_particles(read_png(screenshot))


@pytest.mark.parametrize("flags, how", [(["--direct"], "one rec.mlp"), (["--layered"], "layer by layer"),
                                        (["--layered", "--direct"], "layer by layer")])
def test_neural_recorded_every_frame_and_layer_by_layer(capsys, flags, how):
    rc = neural.main(SMALL + ["--frames", "2"] + flags)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "max |GPU colour - numpy| over 6,000 particles" in out and f"({how}, " in out
    assert "validation messages (incl. synchronization validation): 0" in out


def test_neural_fused_and_layered_paths_colour_alike():
    # One rec.mlp and the layer-by-layer ops draw nearly the same frame (fp16
    # weights may move a colour by a code or two).
    fused = neural.run(neural.parse_args(SMALL + ["--frames", "2"]))[0]
    layered = neural.run(neural.parse_args(SMALL + ["--frames", "2", "--layered"]))[0]
    assert not fused.validation_messages and not layered.validation_messages
    diff = np.abs(fused.last_frame.astype(int) - layered.last_frame.astype(int))
    assert np.percentile(diff, 99) <= 3 and diff.max() <= 16, (np.percentile(diff, 99), diff.max())


def test_the_colour_grade_trains_to_its_target_look():
    params, rmse, seconds = grade.train()
    assert rmse < 0.03 and seconds > 0
    colours = grade.training_colours(500, seed=42)
    want = grade.target_grade(colours)
    assert want.min() >= 0 and want.max() <= 1
    assert np.sqrt(np.mean((grade.forward(params, colours) - want) ** 2)) < 0.03
    # The look: black lifted towards teal (blue and green over red), white warmed (red over blue).
    black, white = grade.target_grade(np.array([[0.0, 0, 0], [1, 1, 1]]))
    assert black[2] > black[0] and black[1] > black[0] and white[0] > white[2]


@pytest.mark.parametrize("route, name", [("hdr", "HdrPostProcess"), ("fft", "FftBloomPostProcess")])
def test_particles_colour_grade_under_validation(screenshot, capsys, route, name):
    # The demo checks the graded output against numpy evaluating the net on
    # the tone-mapped pixels it read (exit status 1 if they differ).
    rc = particles.main(SMALL + ["--frames", "3", "--grade", "--bloom-route", route, "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "colour grade: 3 → 16 → 16 → 3 MLP trained in" in out
    assert f"post-process: {name}, into the output" in out
    assert "max |graded output - numpy| over 160x120 pixels" in out
    assert "validation messages (incl. synchronization validation): 0" in out
    assert_shows_particles(read_png(screenshot))


def test_particles_colour_grade_through_the_scene(capsys, monkeypatch):
    # No shader writes to the output: the grade writes the scene image, and
    # the host's blit carries it out (and is what the check reads).
    monkeypatch.setattr(hdr.HdrPostProcess, "output_writable", staticmethod(lambda ctx, renderer: False))
    rc = particles.main(SMALL + ["--frames", "2", "--grade", "--direct"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "post-process: HdrPostProcess, through the scene and a host blit" in out
    assert "max |graded output - numpy| over 160x120 pixels" in out


def test_particles_colour_grade_needs_an_hdr_route():
    with pytest.raises(SystemExit, match="--grade grades the HDR routes"):
        particles.run(particles.parse_args(SMALL + ["--grade", "--bloom-route", "image"]))


def test_particles_fft_bloom_route_under_validation(screenshot, capsys):
    # The HDR route with its bloom a convolution through rfft2 / irfft2.
    rc = particles.main(SMALL + ["--frames", "3", "--bloom-route", "fft", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "post-process: FftBloomPostProcess, into the output" in out
    assert "validation messages (incl. synchronization validation): 0" in out
    assert_shows_particles(read_png(screenshot))


def test_the_fft_bloom_kernel_is_a_normalised_centred_glow():
    k = fft_bloom.glow_kernel(30, 40)
    assert k.shape == (30, 40) and abs(float(k.sum()) - 1) < 1e-5
    assert k[0, 0] == k.max()                                   # the core at pixel (0, 0)
    np.testing.assert_allclose(k[1:, :], k[1:, :][::-1, :], rtol=1e-6)   # symmetric across the wrap
    np.testing.assert_allclose(k[:, 1:], k[:, 1:][:, ::-1], rtol=1e-6)


def test_ocean_headless_under_validation(screenshot, capsys):
    # The spectrum kernel, one irfft2 of three half spectra and the vertex
    # kernel each frame; the demo checks the last fields against numpy.fft
    # (exit status 1 if they differ).
    rc = ocean.main(["--headless", "--validation", "--size", "160", "120", "--grid", "32", "--frames", "3",
                     "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "max |GPU fields - numpy.fft.irfft2| / max |field| over 32x32" in out
    assert "validation messages (incl. synchronization validation): 0" in out
    rgba = read_png(screenshot)
    lit = (rgba[..., :3].mean(axis=2) > 24).mean()
    assert 0.02 < lit < 0.9, f"{lit:.1%} of the pixels show the ocean"


def test_the_ocean_spectrum_is_hermitian_and_its_fields_real():
    """numpy's reference for the demo's kernels: the half spectra describe
    real fields (the full transform of the Hermitian extension is real),
    and the amplitudes give the heights the RMS asked."""
    h0 = ocean.initial_amplitudes(16)
    fields = ocean.fields_at(h0, 0.7)
    assert fields.shape == (3, 16, 16)
    np.testing.assert_allclose(np.sqrt(np.mean(ocean.fields_at(h0, 0.0)[0] ** 2)), ocean.RMS_HEIGHT)
    half = ocean.spectra_at(h0, 0.7)[0]
    full = np.zeros((16, 16), complex)
    full[:, :9] = half
    full[:, 9:] = np.conj(half[(-np.arange(16)) % 16][:, 1:8][:, ::-1])
    assert np.abs(np.fft.ifft2(full, norm="forward").imag).max() < 1e-9 * np.abs(full).max()


@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="needs xvfb-run")
@pytest.mark.parametrize("flags", [["--bloom-route", "hdr"], ["--bloom-route", "buffer"], ["--grade"]])
def test_particles_in_a_window_under_xvfb(flags):
    # The swapchain paths: the HDR resolve writing the swapchain image (or
    # the colour grade's rec.mlp writing it), and copies in and out of it;
    # then present.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = ["xvfb-run", "-a", sys.executable, "-m", "demos.particles", "--frames", "5", "--validation",
           "--size", "160", "120", "--particles", "6000"] + flags
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "window 160x120" in done.stdout
    assert "particles: 5 frames" in done.stdout
    assert "validation messages (incl. synchronization validation): 0" in done.stdout
    if "--grade" in flags:
        assert "max |rec.mlp of the last tone-mapped frame - numpy|" in done.stdout


@pytest.mark.skipif(shutil.which("glslc") is None, reason="needs glslc")
@pytest.mark.parametrize("name", kernels.NAMES)
def test_shipped_spirv_is_current(name):
    # Machines without glslc run the shipped SPIR-V: it must be what the
    # source compiles to (regenerate with `python -m demos.kernels`).
    assert kernels.shipped_spirv(name) == kernels.compile_glsl(name)


@pytest.mark.skipif(shutil.which("glslc") is None, reason="--watch compiles the demo's kernels")
def test_particles_watch_mode_reloads_an_edited_kernel(tmp_path, screenshot, capsys, monkeypatch):
    """--watch: a broken edit of the ripple kernel is reported at its line and
    the demo keeps running; the fixed edit is used from the next frame."""
    for name in ("lorenz", "ripples"):
        shutil.copy(kernels.KERNEL_DIR / f"{name}.comp", tmp_path / f"{name}.comp")
    monkeypatch.setattr(kernels, "KERNEL_DIR", tmp_path)
    path = tmp_path / "ripples.comp"
    good = path.read_text()
    step = particles.Ripples.record

    def wait_for(kernel, done, what):
        deadline = time.monotonic() + 120
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done(), f"the watcher did not {what}"

    def record(self, rec, frame):
        if frame == 1:          # during the demo's frame loop: save a broken edit, then a good one
            path.write_text(good.replace("void main()", "void main() { undefined_thing; }\nvoid unused()"))
            wait_for(self.kernel, lambda: self.kernel.last_error is not None, "report the broken edit")
            path.write_text(good + "\n// edited\n")
            wait_for(self.kernel, lambda: self.kernel.version == 1, "reload the fixed kernel")
        step(self, rec, frame)
    monkeypatch.setattr(particles.Ripples, "record", record)
    rc = particles.main(SMALL + ["--frames", "4", "--watch", "--screenshot", str(screenshot)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ripples: the edit did not compile; still running the last good version" in out
    assert f"{path.as_posix()}:" in out and "undefined_thing" in out
    assert "reloaded ripples (version 1)" in out
    assert "not compared with numpy: ripples changed while running (--watch)" in out
    assert "validation messages (incl. synchronization validation): 0" in out
    assert_shows_particles(read_png(screenshot))
