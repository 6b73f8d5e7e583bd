"""HDR bloom by FFT convolution (``--bloom-route fft``): the scene's light
above a threshold convolved with a wide glow kernel through the FFT, the way
convolution bloom is done in engines that cache the kernel's spectrum.

Per frame, recorded once per (scene, output) pair as a program like the
other HDR route (demos/hdr.py): the scene image copied into a float32 pixel
tensor, its light above ``THRESHOLD`` made a field of its own and
convolved by ``rec.fft_convolve`` over the image axes of its (H, W, 3)
view (no copy) with the kernel's spectrum (made once, when the frame size
is set, and broadcast over the colour channels), the glow added to the
scene; exposure and tone curve as in hdr.py.
The convolution is circular: light near an edge glows across it.
"""
from __future__ import annotations

import numpy as np

from .hdr import HdrPostProcess

THRESHOLD = 1.0
INTENSITY = 0.5
RADII = (0.006, 0.025, 0.1)   # the glow's three exponential falloffs, in frame heights
WEIGHTS = (0.5, 0.3, 0.2)


def glow_kernel(height: int, width: int) -> np.ndarray:
    """The (height, width) kernel, centred on pixel (0, 0) with wrap-around
    and summing to 1: a blend of exponential falloffs, a wide soft glow
    around a bright core."""
    y = np.minimum(np.arange(height), height - np.arange(height))[:, None]
    x = np.minimum(np.arange(width), width - np.arange(width))[None, :]
    r = np.hypot(y, x)
    k = sum(w * np.exp(-r / (f * height)) / (f * height) ** 2 for w, f in zip(WEIGHTS, RADII))
    return (k / k.sum()).astype(np.float32)


class FftBloomPostProcess(HdrPostProcess):
    """The HDR post-process with the bloom done by FFT convolution."""

    def __init__(self, ctx, renderer, direct: bool = False, grade=None):
        super().__init__(ctx, renderer, direct, grade)
        width, height = self.extent
        self.pixels = ctx.empty((height, width, 4))
        kernel = ctx.tensor(glow_kernel(height, width))
        # The kernel's spectrum once; this also makes the transforms' tables
        # for this frame size before any program is recorded.
        self.kernel_spectrum = ctx.run(lambda rec: rec.rfft2(kernel)).reshape(height, width // 2 + 1, 1)
        ctx.run(lambda rec: rec.fft_convolve(self.pixels[..., :3], self.kernel_spectrum, axes=(0, 1)))

    def record_glow(self, rec, scene) -> None:
        width, height = self.extent
        rec.copy(scene, out=self.pixels)
        rgb = self.pixels[..., :3]
        bright = rec.relu(rec.sub(rgb, THRESHOLD))
        glow = rec.fft_convolve(bright, self.kernel_spectrum, axes=(0, 1))
        rec.add(rgb, rec.scale(glow, INTENSITY), out=rgb)
        rec.copy(self.pixels, out=self.glow)
