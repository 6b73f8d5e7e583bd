"""Sort, scan and compaction against CUB on the same GPU, in the same run.

Rows (the goals of the sort/scan work, judged on a GPU):

- "sort keys uint32 2^25 vs CUB": ``rec.sort(keys)``, Gkeys/s, >= 50 % of
  ``cub::DeviceRadixSort::SortKeys``;
- "sort pairs uint32 2^25 vs CUB": ``rec.sort(keys, values)``, >= 50 % of
  ``SortPairs``;
- "sort 4M pairs, GPU count": ``rec.sort(keys, values, count=c)`` with ``c``
  a 1-element uint32 tensor holding 4,194,304 over buffers twice that size,
  <= 0.4 ms of GPU time (CUB's SortPairs of as many pairs, whose count the
  host passes, is shown beside it);
- "cumsum uint32 2^25 vs CUB": ``rec.cumsum(x)``, GB/s (bytes read +
  written), >= 90 % of ``cub::DeviceScan::InclusiveSum``;
- "compact 2^25 float32": ``rec.compact(x, mask)`` with half of a random
  mask set, the bytes it moves (values and mask read, kept values and the
  count written) per second, >= 70 % of the copy bandwidth of a
  device-to-device ``cudaMemcpy`` (the shader copy of this run where CUB is
  missing). ``cub::DeviceSelect::Flagged`` is shown in the note.

And one row without a goal that explains the single-pass kernels' misses:
"look-back scan skeleton 2^25, Vulkan vs CUDA": the library's decoupled
look-back reduced to a scan (``benchmarks/lookback_skeleton.py``) against
the same skeleton compiled by nvcc (in the CUB program), GB/s; the note
gives both without their look-back, so the tile work and the waiting are
seen apart.

Timing: GPU timestamps around ``reps`` calls (benchmarks.gpu_ops.Timer),
median over several command buffers. Every op runs out of place, so each
repetition reads the same unsorted input — what a fresh copy per iteration
gives, which is how the CUB program runs too; no copy is timed or
subtracted. Each result is checked against numpy before its time counts.
The CUB program (``benchmarks/cub_baseline.py``) is built with nvcc when it
is on PATH; without it the rows that need it are skipped, never guessed.
``torch.sort`` / ``torch.cumsum`` / boolean indexing, where torch has CUDA,
are secondary references in the notes.

On a CPU Vulkan device (lavapipe) the 2^25 rows are skipped, and the same
ops at a small size are timed against numpy instead (no goal).

Run alone: ``python -m benchmarks.sort [--quick] [--device NAME]``.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass

import numpy as np

from . import cub_baseline, lookback_skeleton
from .gpu_ops import Timer, compute_copy_seconds, numpy_seconds, run_on_device, torch_available, torch_seconds, warm_up
from .results import Result, skipped, standalone_main

SECTION = "sort"
N = 1 << 25
SMALL_PAIRS = 4_194_304
KEYS_ROW = "sort keys uint32 2^25 vs CUB"
PAIRS_ROW = "sort pairs uint32 2^25 vs CUB"
COUNT_ROW = "sort 4M pairs, GPU count"
CUMSUM_ROW = "cumsum uint32 2^25 vs CUB"
COMPACT_ROW = "compact 2^25 float32"
SKELETON_ROW = "look-back scan skeleton 2^25, Vulkan vs CUDA"
# Every row carries its goal, skipped or not, so that goal tables list all five.
GOALS = {KEYS_ROW: "ratio>=0.5", PAIRS_ROW: "ratio>=0.5", COUNT_ROW: "value<=0.4", CUMSUM_ROW: "ratio>=0.9",
         COMPACT_ROW: "ratio>=0.7"}
ROWS = tuple(GOALS)
OUT_OF_PLACE = "out of place: every repetition sorts the same unsorted input, no copy timed"


@dataclass
class Measured:
    """guestcompute's side of one row: GPU seconds per call, or why there is none."""
    seconds: float | None = None
    error: str = ""
    note: str = ""
    extra: dict | None = None


def compact_bytes(n: int, kept: int, mask_itemsize: int) -> int:
    """Bytes a compaction must move at least: the values and the mask read
    once, the kept values and a 4-byte count written once."""
    return n * 4 + n * mask_itemsize + kept * 4 + 4


# -- the rows, from numbers (pure: no device) ---------------------------------------

def _notes(*parts) -> str:
    return "; ".join(p for p in parts if p)


def skipped_row(name: str, why: str) -> Result:
    r = skipped(SECTION, name, why)
    r.goal = GOALS[name]
    return r


def _row(name, ours: Measured, value, unit, baseline, baseline_value, missing: str, note: str) -> Result:
    """A judged row, or a skipped one that still carries guestcompute's
    number when only the baseline is missing."""
    if ours.error:
        return skipped_row(name, ours.error)
    notes = _notes(note, ours.note)
    if baseline_value is None:
        r = skipped_row(name, f"{missing}; guestcompute measured {value:.4g} {unit}")
        r.value, r.unit, r.note, r.extra = value, unit, notes, ours.extra or {}
        return r
    return Result(SECTION, name, value, unit, baseline, baseline_value, GOALS[name], note=notes,
                  extra=ours.extra or {})


def rows_from(n: int, small: int, ours: dict, cub, missing: str, copy_bw_fallback: float | None = None,
              torch_notes: dict | None = None) -> list:
    """The five rows from guestcompute's measurements (``ours``: row name ->
    Measured; the compaction's ``extra["bytes_moved"]`` gives its bytes) and
    the CUB run (a CubBaseline, or None with ``missing`` saying why).
    ``copy_bw_fallback`` (bytes/s of this run's shader copy) judges the
    compaction where CUB is missing."""
    torch_notes = torch_notes or {}
    label = cub.label if cub else ""
    rows = []

    def rate(m: Measured, items: float) -> float | None:
        return None if m.seconds is None else items / m.seconds / 1e9

    for name, key, what in ((KEYS_ROW, "sort_keys", "SortKeys"), (PAIRS_ROW, "sort_pairs", "SortPairs")):
        m = ours[name]
        base = n / (cub.ms[key] / 1e3) / 1e9 if cub else None
        rows.append(_row(name, m, rate(m, n), "Gkeys/s", f"cub::DeviceRadixSort::{what} ({label}, same GPU)",
                         base, missing, _notes(OUT_OF_PLACE, torch_notes.get(name))))

    m = ours[COUNT_ROW]
    if m.error:
        rows.append(skipped_row(COUNT_ROW, m.error))
    else:   # an absolute goal: judged with or without CUB beside it
        rows.append(Result(SECTION, COUNT_ROW, m.seconds * 1e3, "ms",
                           f"cub::DeviceRadixSort::SortPairs of {small:,} pairs, count from the host ({label})"
                           if cub else missing, cub.ms["sort_pairs_small"] if cub else None, GOALS[COUNT_ROW],
                           note=_notes(f"{small:,} of {2 * small:,} pairs", m.note),
                           extra=m.extra or {}))

    m = ours[CUMSUM_ROW]
    scan_bytes = 8 * n
    base = scan_bytes / (cub.ms["inclusive_sum"] / 1e3) / 1e9 if cub else None
    rows.append(_row(CUMSUM_ROW, m, rate(m, scan_bytes), "GB/s", f"cub::DeviceScan::InclusiveSum ({label}, same GPU)",
                     base, missing, _notes("bytes read + written", torch_notes.get(CUMSUM_ROW))))

    m = ours[COMPACT_ROW]
    if cub:
        copy_name, copy_bw = f"cudaMemcpy device to device, {cub.copy_bytes >> 20} MiB ({label})", cub.copy_bandwidth
        flagged = compact_bytes(n, cub.selected, 1) / (cub.ms["select_flagged"] / 1e3)
        cub_note = f"cub::DeviceSelect::Flagged: {flagged / 1e9:.0f} GB/s ({flagged / copy_bw:.0%} of the copy)"
    else:
        copy_name, copy_bw, cub_note = "compute-shader copy (same run)", copy_bw_fallback, ""
    moved = (m.extra or {}).get("bytes_moved", 0)
    rows.append(_row(COMPACT_ROW, m, rate(m, moved), "GB/s", copy_name,
                     copy_bw / 1e9 if copy_bw else None, missing,
                     _notes("bytes moved vs copy bandwidth (read + written)", cub_note,
                            torch_notes.get(COMPACT_ROW))))
    return rows


def skeleton_row(ctx, timer: Timer, n: int, cub, missing: str) -> Result:
    """The look-back skeleton in GLSL against its CUDA twin (no goal)."""
    if cub is None:
        return skipped(SECTION, SKELETON_ROW, missing)
    try:
        warm_up(ctx, 0.4)
        ours = lookback_skeleton.measure(ctx, timer, n)
    except Exception as e:
        return skipped(SECTION, SKELETON_ROW, f"{type(e).__name__}: {e}")
    gbs = {name: 8 * n / seconds / 1e9 for name, seconds in ours.items()}
    cuda = {name: 8 * n / (cub.ms[f"skeleton_{name}"] / 1e3) / 1e9 for name in ours}
    return Result(SECTION, SKELETON_ROW, gbs["lookback_scan"], "GB/s", f"the same skeleton compiled by nvcc ({cub.label})",
                  cuda["lookback_scan"], note=_notes(
                      f"without the look-back: Vulkan {gbs['tile_scan']:.0f}, CUDA {cuda['tile_scan']:.0f} GB/s",
                      "bytes read + written; each time includes clearing the status words"))


# -- guestcompute's measurements ------------------------------------------------------

def has_op(name: str) -> bool:
    from guestcompute.ops.base import registered_ops
    return name in registered_ops()


def sort_takes_count() -> bool:
    from guestcompute.ops.base import registered_ops
    fn = registered_ops().get("sort")
    return fn is not None and "count" in inspect.signature(fn).parameters


def _timed(timer: Timer, body, check) -> Measured:
    """GPU seconds of ``body(rec)``, kept only if ``check()`` (run after the
    timing, on what the last call wrote) returns "" (else what was wrong).
    The GPU is kept busy first: the numpy checks between rows leave it idle
    long enough to clock down, and CUB's timings are taken warm."""
    try:
        warm_up(timer.ctx, 0.4)
        t = timer.gpu_seconds(body)
        wrong = check()
    except Exception as e:          # one row failing must not lose the others
        return Measured(error=f"{type(e).__name__}: {e}")
    return Measured(error=f"wrong result: {wrong}") if wrong else Measured(t)


def _pairs_wrong(keys: np.ndarray, values: np.ndarray, out_k: np.ndarray, out_v: np.ndarray) -> str:
    """"" when (out_k, out_v) is the stable sort of ``keys`` carrying
    ``values = arange`` (checked in O(n): sorted, the payload points at its
    key, ties in input order)."""
    if not np.array_equal(out_k, np.sort(keys)):
        return "keys differ from np.sort"
    if values is not None:
        if out_v.max(initial=0) >= keys.size or not np.array_equal(keys[out_v], out_k):
            return "values do not follow their keys"
        ties = out_k[1:] == out_k[:-1]
        if (out_v[1:][ties] < out_v[:-1][ties]).any():
            return "equal keys out of input order (not stable)"
    return ""


def measure_sorts(ctx, timer: Timer, n: int, small: int, rng) -> dict:
    keys_np = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    iota = np.arange(n, dtype=np.uint32)
    keys, values = ctx.tensor(keys_np), ctx.tensor(iota)
    out_k, out_v = ctx.empty((n,), "uint32"), ctx.empty((n,), "uint32")
    got = {KEYS_ROW: _timed(timer, lambda rec: rec.sort(keys, out_keys=out_k),
                            lambda: _pairs_wrong(keys_np, None, out_k.numpy(), None))}
    got[PAIRS_ROW] = _timed(timer, lambda rec: rec.sort(keys, values, out_keys=out_k, out_values=out_v),
                            lambda: _pairs_wrong(keys_np, iota, out_k.numpy(), out_v.numpy()))
    got[COUNT_ROW] = measure_counted(ctx, timer, keys, values, keys_np, small)
    return got


def measure_counted(ctx, timer: Timer, keys, values, keys_np, small: int) -> Measured:
    """The first ``small`` of ``2 * small`` pairs, the count in a GPU tensor."""
    cap = 2 * small
    k, v = keys[:cap], values[:cap]
    out_k, out_v = ctx.empty((cap,), "uint32"), ctx.empty((cap,), "uint32")
    count = ctx.tensor(np.array([small], np.uint32))
    if sort_takes_count():
        body, note = (lambda rec: rec.sort(k, v, out_keys=out_k, out_values=out_v, count=count)), ""
    else:
        # rec.sort has no count= in this build yet: sort the first `small`
        # pairs with the size known on the host (a lower bound of the real row).
        k, v = keys[:small], values[:small]
        out_k, out_v = out_k[:small], out_v[:small]
        body, note = (lambda rec: rec.sort(k, v, out_keys=out_k, out_values=out_v)), \
            "count= not in this build: the host-sized sort of as many pairs was timed"
    m = _timed(timer, body, lambda: _pairs_wrong(keys_np[:small], np.arange(small, dtype=np.uint32),
                                                 out_k.numpy()[:small], out_v.numpy()[:small]))
    m.note = note
    return m


def measure_cumsum(ctx, timer: Timer, n: int, rng) -> Measured:
    x_np = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    x, out = ctx.tensor(x_np), ctx.empty((n,), "uint32")
    return _timed(timer, lambda rec: rec.cumsum(x, out=out),
                  lambda: "" if np.array_equal(out.numpy(), np.cumsum(x_np, dtype=np.uint32))
                  else "differs from np.cumsum (uint32, wrapping)")


def measure_compact(ctx, timer: Timer, n: int, rng) -> Measured:
    """The compaction, with the bytes it moves in ``extra["bytes_moved"]``.
    The mask is uint8 where the op takes it (CUB's flags are bytes too),
    else uint32."""
    if not has_op("compact"):
        return Measured(error="not available: rec.compact is not in this build")
    x_np = rng.random(n, dtype=np.float32)
    keep = rng.random(n) < 0.5
    x = ctx.tensor(x_np)
    last = {}
    for dtype in ("uint8", "uint32"):
        try:
            mask = ctx.tensor(keep.astype(dtype))
            ctx.run(lambda rec: rec.compact(x, mask))
        except Exception as e:      # this mask dtype refused: try the next
            last["error"] = f"{type(e).__name__}: {e}"
            continue

        def body(rec, mask=mask):
            last["result"] = rec.compact(x, mask)

        def check():
            values, count = last["result"]
            k = int(np.asarray(count.numpy()).reshape(-1)[0])
            if k != int(keep.sum()):
                return f"count {k}, numpy {int(keep.sum())}"
            return "" if np.array_equal(values.numpy()[:k], x_np[keep]) else "values differ from x[mask]"
        m = _timed(timer, body, check)
        m.note = f"{dtype} mask, {int(keep.sum()):,} kept"
        m.extra = {"bytes_moved": compact_bytes(n, int(keep.sum()), np.dtype(dtype).itemsize)}
        return m
    return Measured(error=f"rec.compact refused a uint8 and a uint32 mask: {last.get('error')}")


# -- torch, a secondary reference -----------------------------------------------------

def torch_notes(n: int, reps: int) -> dict:
    """Notes with torch's numbers on the same GPU (int32: torch sorts no uint32)."""
    try:
        import torch
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), device="cuda", dtype=torch.int32, generator=g)
        mask = torch.rand(n, device="cuda", generator=g) < 0.5
        xf = torch.rand(n, device="cuda", generator=g)
        sort_s = torch_seconds(lambda: torch.sort(x, stable=True), reps)
        sum_s = torch_seconds(lambda: torch.cumsum(x, 0, dtype=torch.int32), reps)
        compact_s = torch_seconds(lambda: xf[mask], reps)
        kept = int(mask.sum())
        del x, mask, xf
        torch.cuda.empty_cache()
    except Exception as e:
        return {KEYS_ROW: f"torch: {type(e).__name__}: {e}"}
    sort_note = f"torch.sort int32 stable (values + int64 indices): {n / sort_s / 1e9:.1f} Gkeys/s"
    return {KEYS_ROW: sort_note, PAIRS_ROW: sort_note,
            CUMSUM_ROW: f"torch.cumsum int32: {8 * n / sum_s / 1e9:.0f} GB/s",
            COMPACT_ROW: f"torch x[mask]: {compact_bytes(n, kept, 1) / compact_s / 1e9:.0f} GB/s"}


# -- the section --------------------------------------------------------------------

def measure_all(ctx, timer: Timer, n: int, small: int) -> dict:
    """Row name -> Measured for the five rows. A step that fails outside
    its timing (an allocation the device refuses, say) fails its rows only."""
    rng = np.random.default_rng(27)
    steps = (((KEYS_ROW, PAIRS_ROW, COUNT_ROW), lambda: measure_sorts(ctx, timer, n, small, rng)),
             ((CUMSUM_ROW,), lambda: {CUMSUM_ROW: measure_cumsum(ctx, timer, n, rng)}),
             ((COMPACT_ROW,), lambda: {COMPACT_ROW: measure_compact(ctx, timer, n, rng)}))
    ours = {}
    for names, step in steps:
        try:
            ours.update(step())
        except Exception as e:
            ours.update({name: Measured(error=f"{type(e).__name__}: {e}") for name in names})
    return ours


def gpu_rows(ctx, quick: bool) -> list:
    reps = 3 if quick else 10
    cub, missing = cub_baseline.measure(N, SMALL_PAIRS, reps=5 if quick else 20)
    notes = torch_notes(N, reps) if torch_available() else {}
    warm_up(ctx, 1.0)
    timer = Timer(ctx, reps, rounds=3)
    ours = measure_all(ctx, timer, N, SMALL_PAIRS)
    copy_bw = None
    if cub is None:
        try:
            copy_bw = 2 * N * 4 / compute_copy_seconds(ctx, timer, N)
        except Exception as e:
            missing += f"; no shader copy either ({type(e).__name__}: {e})"
    rows = rows_from(N, SMALL_PAIRS, ours, cub, missing, copy_bw, notes)
    rows.append(skeleton_row(ctx, timer, N, cub, missing))
    if cub is not None:
        for r in rows:
            r.extra = dict(r.extra or {}, cub_device=cub.device)
    return rows


def cpu_rows(ctx, quick: bool) -> list:
    """lavapipe: the goal rows skipped, the same ops at a small size against numpy."""
    why = "a GPU's goal: this device runs on the CPU (see the small rows against numpy)"
    out = [skipped_row(name, why) for name in ROWS]
    n = 1 << (14 if quick else 16)
    timer = Timer(ctx, reps=2, rounds=1 if quick else 3)
    ours = measure_all(ctx, timer, n, n // 2)
    rng = np.random.default_rng(28)
    keys_np = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    x_np, keep = rng.random(n, dtype=np.float32), rng.random(n) < 0.5
    cases = ((KEYS_ROW, "sort keys uint32", lambda: np.sort(keys_np, kind="stable")),
             (PAIRS_ROW, "sort pairs uint32", lambda: np.argsort(keys_np, kind="stable")),
             (CUMSUM_ROW, "cumsum uint32", lambda: np.cumsum(keys_np, dtype=np.uint32)),
             (COMPACT_ROW, "compact float32", lambda: x_np[keep]))
    for row, label, np_fn in cases:
        m, name = ours[row], f"{label} 2^{n.bit_length() - 1} time vs numpy"
        if m.error:
            out.append(skipped(SECTION, name, m.error))
            continue
        out.append(Result(SECTION, name, m.seconds * 1e3, "ms", "numpy (same CPU)", numpy_seconds(np_fn) * 1e3,
                          note="lavapipe runs on the CPU: lower ratio is better"))
    return out


def run(env) -> list:
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
