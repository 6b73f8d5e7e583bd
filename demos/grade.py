"""A learned colour grade: a per-pixel MLP that imitates a teal-and-orange
look, trained in-process with numpy and run every frame by ``rec.mlp``
straight from one image into another.

The target (:func:`target_grade`) is a numpy function of display RGB in
[0, 1]: an S-curve on luminance for contrast, a little more saturation,
shadows pushed towards teal and highlights towards orange. The network
that learns it::

    (r, g, b) → tanh(· W1 + b1) → tanh(· W2 + b2) → sigmoid(· W3 + b3) → (r, g, b)
      3            16               16                 3

is fitted on random colours (half of them squared, so that the dark
colours that fill most of a frame are sampled densely) with Adam, full
batch, for a few hundred steps — a fraction of a second on one core.

The HDR post-process (demos/hdr.py) tone-maps into an rgba16f image and
grades that into its target with one ``rec.mlp(ldr, net, out=target)``:
the network reads each pixel's first three channels and writes its three
outputs as RGB with alpha 1.
"""
from __future__ import annotations

import time

import numpy as np

import guestcompute as gc

from .networks import kernel_tolerance, weights_dtype

HIDDEN = 16
LUMA = np.array([0.2126, 0.7152, 0.0722])
SHADOW_TINT = np.array([-0.05, 0.04, 0.06])       # teal, strongest in black
HIGHLIGHT_TINT = np.array([0.08, 0.02, -0.07])    # orange, strongest in white
SATURATION = 1.2
CONTRAST = 0.5                                     # how far luminance follows the S-curve
ACTIVATIONS = ("tanh", "tanh", "sigmoid")


def target_grade(rgb: np.ndarray) -> np.ndarray:
    """The look the network learns: (..., 3) display RGB in [0, 1] -> (..., 3) in [0, 1]."""
    rgb = np.clip(np.asarray(rgb, np.float64), 0.0, 1.0)
    luma = rgb @ LUMA
    s_curve = luma * luma * (3 - 2 * luma)
    out = luma[..., None] + SATURATION * (rgb - luma[..., None]) + CONTRAST * (s_curve - luma)[..., None]
    out = out + ((1 - luma) ** 2)[..., None] * SHADOW_TINT + (luma ** 2)[..., None] * HIGHLIGHT_TINT
    return np.clip(out, 0.0, 1.0)


def _mm(a, b):
    # einsum stays on one thread: these matrices are far too small for a
    # multi-threaded BLAS, which would only fight the renderer for the CPU.
    return np.einsum("ij,jk->ik", a, b)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def forward(params, x: np.ndarray) -> np.ndarray:
    """The network in numpy (float64): ``params`` is [W1, b1, W2, b2, W3, b3]."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(_mm(x, w1) + b1)
    h2 = np.tanh(_mm(h1, w2) + b2)
    return _sigmoid(_mm(h2, w3) + b3)


def training_colours(count: int = 1024, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u = rng.random((count, 3))
    u[: count // 2] **= 2            # dense in the dark colours a frame is mostly made of
    return u


def train(steps: int = 500, lr: float = 0.03, seed: int = 1):
    """Fit the network to :func:`target_grade` with Adam (mean squared
    error). Returns ``(params, rms error on held-out colours, seconds)``."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    x = training_colours()
    y = target_grade(x)
    params = [rng.normal(0, 1 / np.sqrt(3), (3, HIDDEN)), np.zeros(HIDDEN),
              rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, HIDDEN)), np.zeros(HIDDEN),
              rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, 3)), np.zeros(3)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        w1, b1, w2, b2, w3, b3 = params
        h1 = np.tanh(_mm(x, w1) + b1)
        h2 = np.tanh(_mm(h1, w2) + b2)
        out = _sigmoid(_mm(h2, w3) + b3)
        # Backward pass of mean((out - y)^2).
        d_out = 2 * (out - y) / out.size * out * (1 - out)
        d_h2 = _mm(d_out, w3.T) * (1 - h2 * h2)
        d_h1 = _mm(d_h2, w2.T) * (1 - h1 * h1)
        grads = [_mm(x.T, d_h1), d_h1.sum(0), _mm(h1.T, d_h2), d_h2.sum(0), _mm(h2.T, d_out), d_out.sum(0)]
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            params[i] = params[i] - lr * (m[i] / (1 - beta1 ** t)) / (np.sqrt(v[i] / (1 - beta2 ** t)) + eps)
    held_out = training_colours(2048, seed=seed + 100)
    rmse = float(np.sqrt(np.mean((forward(params, held_out) - target_grade(held_out)) ** 2)))
    return params, rmse, time.perf_counter() - start


class ColourGrade:
    """The trained grade as a network of one context."""

    def __init__(self, ctx, params, dtype: str | None = None):
        dtype = dtype or weights_dtype(ctx)
        w1, b1, w2, b2, w3, b3 = params
        self.net = ctx.mlp([gc.Dense(w, b, act) for (w, b), act in zip(((w1, b1), (w2, b2), (w3, b3)), ACTIVATIONS)],
                           dtype=dtype)

    @property
    def dtype(self) -> str:
        return self.net.dtype

    def record(self, rec, ldr, out) -> None:
        """Grade ``ldr``'s pixels into ``out`` (an image of its size): RGB, alpha 1."""
        rec.mlp(ldr, self.net, out=out)

    def check(self, ctx, ldr, shown: np.ndarray | None, srgb_store: bool) -> float:
        """Max error of the graded frame against numpy evaluating the same
        net on the same pixels of ``ldr`` (read back). ``shown``: the
        target's last frame as uint8 RGBA (None: a window, not read back —
        the net is evaluated on the GPU once more instead); ``srgb_store``:
        the target encodes sRGB as it stores."""
        pixels = ctx.run(lambda rec: rec.copy(ldr)).numpy()[..., :3]
        want = self.net.numpy(pixels)
        if shown is None:
            got = ctx.run(lambda rec: rec.mlp(ldr, self.net)).numpy()
            return float(np.abs(got - want).max())
        if srgb_store:
            want = np.where(want <= 0.0031308, 12.92 * want, 1.055 * np.power(want, 1 / 2.4) - 0.055)
        return float(np.abs(shown[..., :3] / 255.0 - want).max())

    def limit(self, shown: bool) -> float:
        # An 8-bit store rounds to the nearest code (a blit converting from
        # the rgba16f scene may round either way): one code.
        return kernel_tolerance(self.dtype) + (1 / 255 if shown else 0.0)
