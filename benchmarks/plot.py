"""A bar chart of ratios to baselines, drawn with numpy into an RGB array
and written as PNG — no plotting library needed on a benchmark machine.

Two panels on log axes. Rows with a goal show how many times better than
the goal they are, whichever way the goal points ("≤ 1.3×" and "≥ 0.9×"
rows alike: right of the 1× line is better), green where met and red where
missed, with the measured number and the goal written beside the bar. Rows
with a baseline but no goal show their plain ratio to it, in grey.
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
_ALIASES = {"µ": "U", "—": "-", "–": "-", "→": ">", "…": "."}
SCALE = 2
CHAR_W = 4 * SCALE          # 3 pixels + 1 gap
CHAR_H = 5 * SCALE

_MASKS = {ch: np.array([[c == "1" for c in row] for row in rows.split()], dtype=bool)
          for ch, rows in _GLYPHS.items()}


def draw_text(img: np.ndarray, x: int, y: int, text: str, color) -> None:
    for ch in text.replace("≤", "<=").replace("≥", ">="):
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
LABEL_CHARS = 70
ROW_H = CHAR_H + 10


class Bar:
    """One row of a panel: a bar from 1 to ``value`` on the panel's log axis."""

    def __init__(self, label: str, value: float, color, text: str):
        self.label, self.value, self.color, self.text = label, value, color, text


def goal_bars(results: list) -> list:
    """Rows with a goal, as their margin: measured ÷ goal where more is
    better, goal ÷ measured where less is, so right of 1 is always better."""
    bars = []
    for r in results:
        if r.margin is None:
            continue
        got, op, target = r.judged()
        unit = "×" if r.goal.strip().startswith("ratio") else f" {r.unit}"
        sign = "≤" if op == "<=" else "≥"
        bars.append(Bar(f"{r.section}: {r.name}", r.margin, GREEN if r.met else RED,
                        f"{got:.3g}{unit} (goal {sign} {target:g}{unit})"))
    return bars


def ratio_bars(results: list) -> list:
    """Rows with a baseline but no goal, as guestcompute ÷ baseline."""
    return [Bar(f"{r.section}: {r.name}", r.ratio, GREY, f"{r.ratio:.3g}×") for r in results
            if r.margin is None and r.ratio is not None and r.ratio > 0]


def _panel_height(bars: list) -> int:
    return ROW_H * (2 + max(1, len(bars)) + 4)   # heading, rows, ticks, note, gap


def draw_panel(img: np.ndarray, top: int, heading: str, bars: list, axis_note: str) -> None:
    """A heading, one row per bar on a log axis around 1, the decade ticks."""
    width = img.shape[1]
    left, right = 12 + LABEL_CHARS * CHAR_W + 12, width - 240
    draw_text(img, 12, top, heading, INK)
    top += 2 * ROW_H
    values = [b.value for b in bars] or [1.0]
    lo = math.floor(math.log10(min(min(values), 1.0) / 1.5))
    hi = math.ceil(math.log10(max(max(values), 1.0) * 1.5))
    if hi - lo < 2:
        hi = lo + 2

    def x_of(v: float) -> int:
        return int(left + (math.log10(v) - lo) / (hi - lo) * (right - left))
    axis_y = top + ROW_H * max(1, len(bars)) + 4
    for e in range(lo, hi + 1):
        x = x_of(10.0 ** e)
        img[top - 4:axis_y, x] = FAINT if e != 0 else INK
        tick = f"{10.0 ** e:g}×"
        draw_text(img, x - len(tick) * CHAR_W // 2, axis_y + 6, tick, INK)
    draw_text(img, left, axis_y + 6 + ROW_H, axis_note, GREY)
    one = x_of(1.0)
    for i, b in enumerate(bars):
        y = top + i * ROW_H
        label = b.label if len(b.label) <= LABEL_CHARS else b.label[:LABEL_CHARS - 1] + "…"
        draw_text(img, 12, y + 3, label, INK)
        x0, x1 = sorted((one, x_of(b.value)))
        img[y + 2:y + ROW_H - 4, x0:max(x1, x0 + 2)] = b.color
        draw_text(img, min(x1 + 6, width - len(b.text) * CHAR_W - 4), y + 3, b.text, INK)


def ratio_chart(title: str, results: list, width: int = 1400) -> np.ndarray:
    """Two panels: rows with a goal as their margin over it (green met, red
    missed; the goal is the 1× line whichever way it points), then rows
    without a goal as their plain ratio to the baseline (grey)."""
    goals, others = goal_bars(results), ratio_bars(results)
    height = 2 * ROW_H + _panel_height(goals) + (_panel_height(others) if others else 0)
    img = np.full((height, width, 3), WHITE, dtype=np.uint8)
    draw_text(img, 12, 10, title[:(width - 24) // CHAR_W], INK)
    top = 10 + 2 * ROW_H
    draw_panel(img, top, "Goals: how many times better than the goal (right of 1: met, green; left: missed, red)",
               goals, "margin = measured / goal where more is better, goal / measured where less is; log scale")
    if others:
        draw_panel(img, top + _panel_height(goals), "No goal: guestcompute / baseline measured in the same run",
                   others, "ratio, log scale; which side is better depends on the row (see its unit)")
    return img


def write_chart(path, title: str, results: list) -> None:
    with open(path, "wb") as f:
        f.write(encode_png(ratio_chart(title, results)))
