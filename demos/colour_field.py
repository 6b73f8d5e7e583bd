"""A small neural colour field, trained in-process with numpy.

The network maps a particle's position to its colour and intensity::

    (x, y, z, 1) → tanh(· W1) → tanh(· W2 + b2) → sigmoid(· W3 + b3) → (r, g, b, a)
      4             32           32                 4

The first layer's bias is the last row of ``W1`` (the inputs carry a
constant 1), so the whole net is three matmuls, two bias adds and three
activations — and its output is exactly one vec4 per particle, the host's
colour-buffer layout.

The target is an analytic field (a cosine palette along a smooth function
of position); the net is fitted to it on points of the attractor with Adam
for a few hundred full-batch steps, which takes well under a second.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HIDDEN = 32
# Attractor coordinates -> roughly [-1, 1].
INPUT_SCALE = np.array([1 / 20, 1 / 27, 1 / 25], np.float32)
INPUT_SHIFT = np.array([0.0, 0.0, -25.0 / 25.0], np.float32)


def normalised_inputs(points: np.ndarray) -> np.ndarray:
    """(n, 3) attractor positions -> (n, 4) network inputs (x, y, z, 1)."""
    out = np.ones((len(points), 4), np.float32)
    out[:, :3] = points * INPUT_SCALE + INPUT_SHIFT
    return out


def target_field(inputs: np.ndarray) -> np.ndarray:
    """The colour field the net learns: (n, 4) inputs -> (n, 4) rgba in (0, 1)."""
    x, y, z = inputs[:, 0], inputs[:, 1], inputs[:, 2]
    s = 0.55 * x + 0.25 * y + 0.35 * np.sin(2.5 * z)
    phase = np.stack([s, s + 0.33, s + 0.67], axis=1)
    rgb = 0.5 + 0.45 * np.cos(2 * np.pi * phase)
    intensity = 0.35 + 0.3 * np.exp(-4 * (x * x + z * z))
    return np.concatenate([rgb, intensity[:, None]], axis=1).astype(np.float32)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _mm(a, b):
    # einsum stays on one thread: these matrices are far too small for a
    # multi-threaded BLAS, which only fights the renderer for the CPU.
    return np.einsum("ij,jk->ik", a, b)


@dataclass
class Weights:
    w1: np.ndarray   # (4, H), last row = first-layer bias
    w2: np.ndarray   # (H, H)
    b2: np.ndarray   # (H,)
    w3: np.ndarray   # (H, 4)
    b3: np.ndarray   # (4,)

    def forward(self, inputs: np.ndarray) -> np.ndarray:
        """The reference evaluation in numpy (float64)."""
        h1 = np.tanh(_mm(inputs, self.w1))
        h2 = np.tanh(_mm(h1, self.w2) + self.b2)
        return _sigmoid(_mm(h2, self.w3) + self.b3)

    def with_normalisation_folded(self) -> "Weights":
        """The same net taking raw attractor positions (x, y, z, 1): the
        input scaling and shift are folded into the first layer."""
        w1 = self.w1.astype(np.float64).copy()
        w1[3] += INPUT_SHIFT @ w1[:3]
        w1[:3] *= INPUT_SCALE[:, None]
        return Weights(w1.astype(np.float32), self.w2, self.b2, self.w3, self.b3)

    def as_float32(self) -> "Weights":
        return Weights(*(np.asarray(a, np.float32) for a in
                         (self.w1, self.w2, self.b2, self.w3, self.b3)))


def train(inputs: np.ndarray, steps: int = 300, lr: float = 0.02, seed: int = 3):
    """Fit the net to :func:`target_field` on ``inputs`` with Adam (full
    batch, mean squared error). Returns ``(weights, final_rmse)``."""
    rng = np.random.default_rng(seed)
    x = inputs.astype(np.float64)
    y = target_field(inputs).astype(np.float64)
    params = [rng.normal(0, 1 / np.sqrt(4), (4, HIDDEN)),
              rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, HIDDEN)), np.zeros(HIDDEN),
              rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, 4)), np.zeros(4)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    n = len(x)
    for t in range(1, steps + 1):
        w1, w2, c2, w3, c3 = params
        h1 = np.tanh(_mm(x, w1))
        h2 = np.tanh(_mm(h1, w2) + c2)
        out = _sigmoid(_mm(h2, w3) + c3)
        # Backward pass of mean((out - y)^2).
        d_out = 2 * (out - y) / (n * 4) * out * (1 - out)
        d_h2 = _mm(d_out, w3.T) * (1 - h2 * h2)
        d_h1 = _mm(d_h2, w2.T) * (1 - h1 * h1)
        grads = [_mm(x.T, d_h1), _mm(h1.T, d_h2), d_h2.sum(0), _mm(h2.T, d_out), d_out.sum(0)]
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            step = lr * (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
            params[i] = params[i] - step
    weights = Weights(*params)
    rmse = float(np.sqrt(np.mean((weights.forward(x) - y) ** 2)))
    return weights.as_float32(), rmse
