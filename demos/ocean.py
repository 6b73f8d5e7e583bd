"""An ocean inside the frame: a Tessendorf wave spectrum evolved every frame,
turned into heights and displacements by one inverse FFT, and written into
the renderer's vertex buffers — all in the renderer's command buffer.

Per frame the guest records

1. ``demos/kernels/ocean_spectrum.comp`` (a user kernel): the height
   spectrum h(k, t) = h0(k) e^{iwt} + conj(h0(-k)) e^{-iwt} (deep water,
   w = sqrt(g |k|)) and the two choppy-displacement spectra, as the half
   spectra an rfft2 keeps: one (3, N, N/2 + 1) complex64 tensor;
2. ``rec.irfft2`` of that tensor: the three real (N, N) fields at once;
3. ``demos/kernels/ocean_points.comp``: each grid point displaced, lifted,
   projected by an orbiting camera and coloured, straight into the host's
   position and colour buffers.

The initial amplitudes h0 come from a Phillips spectrum (seeded numpy
noise, made once). At exit the fields of the last frame are checked
against numpy.fft.irfft2 of the same spectrum computed in float64.

Run ``python -m demos.ocean`` (a window; headless without a display).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/ocean.py) rather than as a module: import the demos
    # package from the repository root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "demos"

import numpy as np  # noqa: E402

from . import kernels  # noqa: E402
from .app import GuestApp, parser, report_checked, resolve_mode  # noqa: E402

GRAVITY = 9.81
EXTENT = 250.0             # patch size, metres
WIND = (12.0, 4.0)         # metres per second
RMS_HEIGHT = 1.2           # metres: the amplitudes are scaled to it
CHOPPY = 1.3
DT = 1.0 / 30.0            # simulated seconds per frame
ORBIT = 0.003              # camera radians per frame
GPU_GRID, CPU_GRID = 256, 64
WORKGROUP = 128
SPECTRUM_PUSH = [("n", "uint"), ("time", "float"), ("wave", "float")]
POINTS_PUSH = [("n", "uint"), ("extent", "float"), ("choppy", "float"), ("point_size", "float"),
               ("view", "vec4"), ("look", "vec4")]


def wave_numbers(n: int) -> tuple:
    """(ky, kx) of the half spectrum, shape (n, n // 2 + 1) each, in rad/m."""
    step = 2 * math.pi / EXTENT
    ky = np.fft.fftfreq(n, 1.0 / n)[:, None] * step
    kx = np.arange(n // 2 + 1)[None, :] * step
    return np.broadcast_to(ky, (n, n // 2 + 1)), np.broadcast_to(kx, (n, n // 2 + 1))


def initial_amplitudes(n: int, seed: int = 5) -> np.ndarray:
    """h0(k) on the full (n, n) grid, [ky][kx]: Phillips spectrum times
    complex Gaussian noise, scaled so the heights' RMS is RMS_HEIGHT."""
    step = 2 * math.pi / EXTENT
    ky, kx = np.meshgrid(np.fft.fftfreq(n, 1.0 / n) * step, np.fft.fftfreq(n, 1.0 / n) * step, indexing="ij")
    k2 = kx * kx + ky * ky
    k2[0, 0] = 1.0
    speed = math.hypot(*WIND)
    longest = speed * speed / GRAVITY
    along = (kx * WIND[0] + ky * WIND[1]) / (np.sqrt(k2) * speed)
    phillips = np.exp(-1.0 / (k2 * longest * longest)) / (k2 * k2) * along ** 2
    phillips[0, 0] = 0.0
    rng = np.random.default_rng(seed)
    noise = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) / math.sqrt(2)
    h0 = noise * np.sqrt(phillips)
    heights = fields_at(h0, 0.0)[0]
    return h0 * (RMS_HEIGHT / np.sqrt(np.mean(heights ** 2)))


def spectra_at(h0: np.ndarray, time: float) -> np.ndarray:
    """What ocean_spectrum.comp computes, in float64: (3, n, n // 2 + 1)."""
    n = h0.shape[0]
    ky, kx = wave_numbers(n)
    omega = np.sqrt(GRAVITY * np.hypot(kx, ky))
    rows = (-np.arange(n)) % n
    cols = (-np.arange(n // 2 + 1)) % n
    a = h0[:, :n // 2 + 1]
    b = h0[rows][:, cols]
    e = np.exp(1j * omega * time)
    h = a * e + np.conj(b * e)
    k = np.hypot(kx, ky)
    safe = np.where(k > 0, k, 1.0)
    return np.stack([h, np.where(k > 0, -1j * h * kx / safe, 0), np.where(k > 0, -1j * h * ky / safe, 0)])


def fields_at(h0: np.ndarray, time: float) -> np.ndarray:
    """Heights and x, z displacements at ``time``: (3, n, n) float64."""
    n = h0.shape[0]
    return np.fft.irfft2(spectra_at(h0, time), s=(n, n), norm="forward")


class Ocean:
    """The spectrum, the fields and the two kernels, recorded each frame."""

    def __init__(self, ctx, n: int, positions_buffer, colors_buffer, extent):
        self.n = n
        count = n * n
        self.positions = ctx.import_buffer(positions_buffer, (count, 4), "float32", host_access="vertex",
                                           buffer_size=count * 16)
        self.colors = ctx.import_buffer(colors_buffer, (count, 4), "float32", host_access="vertex",
                                        buffer_size=count * 16)
        self.h0 = initial_amplitudes(n)
        ky, kx = wave_numbers(n)
        self.omega = ctx.tensor(np.sqrt(GRAVITY * np.hypot(kx, ky)).astype(np.float32))
        self.amplitudes = ctx.tensor(self.h0.astype(np.complex64))
        self.spectra = ctx.empty((3, n, n // 2 + 1), "complex64")
        self.fields = ctx.empty((3, n, n), "float32")
        self.spectrum_kernel = ctx.kernel(kernels.source("ocean_spectrum"), workgroup=WORKGROUP,
                                          name="ocean_spectrum", push_layout=SPECTRUM_PUSH)
        self.points_kernel = ctx.kernel(kernels.source("ocean_points"), workgroup=WORKGROUP,
                                        name="ocean_points", push_layout=POINTS_PUSH)
        self.extent = extent
        self.point_size = 2.0 if count < 100_000 else 1.5

    def record(self, rec, frame: int) -> None:
        n = self.n
        self.spectrum_kernel(rec, self.amplitudes, self.omega, self.spectra,
                             push={"n": n, "time": frame * DT, "wave": 2 * math.pi / EXTENT},
                             groups=(-(-n * (n // 2 + 1) // WORKGROUP), 1, 1))
        rec.irfft2(self.spectra, s=(n, n), norm="forward", out=self.fields)
        width, height = self.extent
        angle = ORBIT * frame
        scale = 1.6 / EXTENT
        push = {"n": n, "extent": EXTENT, "choppy": CHOPPY, "point_size": self.point_size,
                "view": (math.cos(angle), math.sin(angle), scale * height / width, -scale),
                "look": (4.0, 0.45, 0.25, 0.35)}
        self.points_kernel(rec, self.fields, self.positions, self.colors, push=push,
                           groups=(-(-n * n // WORKGROUP), 1, 1))

    def error(self, frame: int) -> float:
        """Largest difference of the last fields from numpy's, over the largest field value."""
        want = fields_at(self.h0.astype(np.complex64).astype(np.complex128), frame * DT)
        got = self.fields.numpy()
        return float(np.abs(got - want).max() / np.abs(want).max())


def run(args):
    resolve_mode(args)
    app = GuestApp(args, "guestcompute ocean")
    try:
        renderer = app.renderer
        n = args.grid or (CPU_GRID if app.on_cpu else GPU_GRID)
        if n < 2 or n & (n - 1):
            raise SystemExit("--grid must be a power of two")
        print(f"device: {renderer.device_name}; ocean grid {n}x{n}; "
              f"{'offscreen' if renderer.headless else 'window'} {renderer.extent[0]}x{renderer.extent[1]}")
        buffers = renderer.create_vertex_buffers(n * n)
        ocean = Ocean(app.ctx, n, buffers.positions, buffers.colors, renderer.extent)

        def before_pass(cmd, frame):
            ocean.extent = renderer.extent
            app.record(cmd, lambda rec: ocean.record(rec, frame))

        frames = app.run(args.frames, before_pass, status=lambda: f"ocean {n}x{n}")
        renderer.wait_idle()
        error = None
        if frames:
            error = ocean.error(frames - 1)
            print(f"max |GPU fields - numpy.fft.irfft2| / max |field| over {n}x{n}: {error:.2e}")
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot), error


def parse_args(argv=None):
    p = parser("demos.ocean", __doc__)
    p.add_argument("--grid", type=int, default=None,
                   help=f"ocean grid size, a power of two (default: {GPU_GRID} on a GPU, {CPU_GRID} on a CPU device)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result, error = run(args)
    return report_checked("ocean", result, args, error, "ocean fields")


if __name__ == "__main__":
    sys.exit(main())
