"""numpy references of the image filters, shared by the op tests and the
executed integration guide."""
import numpy as np


def ref_correlate(img: np.ndarray, k: np.ndarray) -> np.ndarray:
    """out[y, x] = sum k[i, j] * img[clamp(y + i - kh//2), clamp(x + j - kw//2)], per channel, float64."""
    img = img.astype(np.float64)
    if img.ndim == 2:
        return ref_correlate(img[..., None], k)[..., 0]
    kh, kw = k.shape
    ay, ax = kh // 2, kw // 2
    padded = np.pad(img, ((ay, kh - 1 - ay), (ax, kw - 1 - ax), (0, 0)), mode="edge")
    h, w = img.shape[:2]
    out = np.zeros_like(img)
    for i in range(kh):
        for j in range(kw):
            out += float(k[i, j]) * padded[i:i + h, j:j + w]
    return out


def ref_blur(img: np.ndarray, sigma: float, radius: int) -> np.ndarray:
    i = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-i ** 2 / (2 * sigma ** 2)) if sigma > 0 else (i == 0).astype(np.float64)
    w /= w.sum()
    return ref_correlate(ref_correlate(img, w[None, :]), w[:, None])
