"""A bar chart of ratios to baselines, drawn with numpy into an RGB array
and written as PNG — no plotting library needed on a benchmark machine.

One row per result that has a baseline: a bar from 1 to the ratio on a log
scale (left of the 1× line: smaller than the baseline, right: larger), green
where the goal is met, red where it is missed, grey where there is no goal.
Text uses a 3×5 pixel font defined below, drawn at twice its size.
"""
from __future__ import annotations

import math
import struct
import zlib

import numpy as np

# 3×5 glyphs, rows top to bottom; lower case is drawn as upper case.
_GLYPHS = {
    "0": "111 101 101 101 111", "1": "010 110 010 010 111", "2": "111 001 111 100 111",
    "3": "111 001 111 001 111", "4": "101 101 111 001 001", "5": "111 100 111 001 111",
    "6": "111 100 111 101 111", "7": "111 001 001 010 010", "8": "111 101 111 101 111",
    "9": "111 101 111 001 111", "A": "010 101 111 101 101", "B": "110 101 110 101 110",
    "C": "011 100 100 100 011", "D": "110 101 101 101 110", "E": "111 100 110 100 111",
    "F": "111 100 110 100 100", "G": "011 100 101 101 011", "H": "101 101 111 101 101",
    "I": "111 010 010 010 111", "J": "001 001 001 101 010", "K": "101 101 110 101 101",
    "L": "100 100 100 100 111", "M": "101 111 111 101 101", "N": "110 101 101 101 101",
    "O": "010 101 101 101 010", "P": "110 101 110 100 100", "Q": "010 101 101 110 011",
    "R": "110 101 110 101 101", "S": "011 100 010 001 110", "T": "111 010 010 010 010",
    "U": "101 101 101 101 111", "V": "101 101 101 101 010", "W": "101 101 111 111 101",
    "X": "101 101 010 101 101", "Y": "101 101 010 010 010", "Z": "111 001 010 100 111",
    " ": "000 000 000 000 000", ".": "000 000 000 000 010", ",": "000 000 000 010 100",
    ":": "000 010 000 010 000", "-": "000 000 111 000 000", "+": "000 010 111 010 000",
    "/": "001 001 010 100 100", "(": "010 100 100 100 010", ")": "010 001 001 001 010",
    "%": "101 001 010 100 101", "=": "000 111 000 111 000", "×": "000 101 010 101 000",
    "<": "001 010 100 010 001", ">": "100 010 001 010 100", "_": "000 000 000 000 111",
    "'": "010 010 000 000 000", "?": "111 001 010 000 010", "[": "110 100 100 100 110",
    "]": "011 001 001 001 011", ";": "000 010 000 010 100", "*": "000 101 010 101 000", "#": "101 111 101 111 101",
}
_ALIASES = {"≤": "<", "≥": ">", "µ": "U", "—": "-", "–": "-", "→": ">", "…": "."}
SCALE = 2
CHAR_W = 4 * SCALE          # 3 pixels + 1 gap
CHAR_H = 5 * SCALE

_MASKS = {ch: np.array([[c == "1" for c in row] for row in rows.split()], dtype=bool)
          for ch, rows in _GLYPHS.items()}


def draw_text(img: np.ndarray, x: int, y: int, text: str, color) -> None:
    for ch in text:
        ch = _ALIASES.get(ch, ch)
        mask = _MASKS.get(ch.upper(), _MASKS["?"])
        big = np.kron(mask, np.ones((SCALE, SCALE), dtype=bool))
        h, w = big.shape
        if x + w > img.shape[1] or y + h > img.shape[0] or x < 0 or y < 0:
            return
        img[y:y + h, x:x + w][big] = color
        x += CHAR_W


def encode_png(rgb: np.ndarray) -> bytes:
    """8-bit RGB PNG: filter byte 0 per row, one zlib stream."""
    h, w, _ = rgb.shape
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)
    raw[:, 1:] = rgb.reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 9))
            + chunk(b"IEND", b""))


GREEN, RED, GREY = (46, 160, 67), (207, 34, 46), (140, 140, 140)
INK, FAINT, WHITE = (30, 30, 30), (225, 225, 225), (255, 255, 255)


def ratio_chart(title: str, results: list, width: int = 1200) -> np.ndarray:
    """Rows of (label, ratio, met) bars on a log axis from 10^lo to 10^hi."""
    rows = [r for r in results if r.ratio is not None and r.ratio > 0]
    label_chars = 70
    left = 12 + label_chars * CHAR_W + 12
    right = width - 90
    row_h = CHAR_H + 10
    top = 3 * row_h
    height = top + row_h * max(1, len(rows)) + 2 * row_h
    img = np.full((height, width, 3), WHITE, dtype=np.uint8)
    draw_text(img, 12, 10, title[:(width - 24) // CHAR_W], INK)
    draw_text(img, 12, 10 + row_h, "guestcompute / baseline measured in the same run (log scale; "
              "green: goal met, red: missed, grey: no goal)", GREY)
    ratios = [r.ratio for r in rows] or [1.0]
    lo = math.floor(math.log10(min(min(ratios), 1.0) / 1.5))
    hi = math.ceil(math.log10(max(max(ratios), 1.0) * 1.5))
    if hi - lo < 2:
        hi = lo + 2

    def x_of(v: float) -> int:
        return int(left + (math.log10(v) - lo) / (hi - lo) * (right - left))
    axis_y = top + row_h * len(rows) + 4
    for e in range(lo, hi + 1):
        x = x_of(10.0 ** e)
        img[top - 4:axis_y, x] = FAINT if e != 0 else INK
        tick = f"{10.0 ** e:g}×"
        draw_text(img, x - len(tick) * CHAR_W // 2, axis_y + 6, tick, INK)
    one = x_of(1.0)
    for i, r in enumerate(rows):
        y = top + i * row_h
        label = r.name if len(r.name) <= label_chars else r.name[:label_chars - 1] + "…"
        draw_text(img, 12, y + 3, label, INK)
        x = x_of(r.ratio)
        color = {True: GREEN, False: RED, None: GREY}[r.met]
        x0, x1 = sorted((one, x))
        img[y + 2:y + row_h - 4, x0:max(x1, x0 + 2)] = color
        text = f"{r.ratio:.3g}×"
        draw_text(img, min(max(x, one) + 6, width - len(text) * CHAR_W - 4), y + 3, text, INK)
    return img


def write_chart(path, title: str, results: list) -> None:
    with open(path, "wb") as f:
        f.write(encode_png(ratio_chart(title, results)))
