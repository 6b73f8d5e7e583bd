"""One benchmark result, always next to the baseline it was measured against
in the same run, plus the small timing helpers every benchmark shares."""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field


@dataclass
class Result:
    """``value`` (in ``unit``) of guestcompute next to ``baseline_value`` of
    ``baseline``. ``ratio`` is value / baseline_value; ``goal`` says which
    number is judged (``"ratio<=1.3"``, ``"value>=100"``...) so the report can
    say met / missed without knowing the benchmark."""
    section: str
    name: str
    value: float = None
    unit: str = ""
    baseline: str = ""
    baseline_value: float = None
    goal: str = ""
    note: str = ""
    skipped: str = ""          # why it did not run (op not present, no device feature...)
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self):
        if self.value is None or not self.baseline_value:
            return None
        return self.value / self.baseline_value

    def judged(self):
        """(measured number, "<=" or ">=", target) of the goal, or None when
        there is no goal or nothing to judge."""
        if not self.goal or self.skipped:
            return None
        for op in ("<=", ">="):
            if op in self.goal:
                what, target = self.goal.split(op)
                got = self.ratio if what.strip() == "ratio" else self.value
                return None if got is None else (got, op, float(target))
        raise ValueError(f"goal {self.goal!r} must look like 'ratio<=1.3' or 'value>=100'")

    @property
    def met(self):
        """True/False when the goal can be judged, else None."""
        judged = self.judged()
        if judged is None:
            return None
        got, op, target = judged
        return got <= target if op == "<=" else got >= target

    @property
    def margin(self):
        """How many times better than its goal the row is, whichever way the
        goal points: > 1 met, < 1 missed (a "≤ 1.3×" row at 1.95× reads
        0.67). None when there is no goal to judge or a side is zero."""
        judged = self.judged()
        if judged is None:
            return None
        got, op, target = judged
        better, worse = (target, got) if op == "<=" else (got, target)
        return better / worse if better > 0 and worse > 0 else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["met"] = self.met
        d["margin"] = self.margin
        return d


def skipped(section: str, name: str, why: str) -> Result:
    return Result(section, name, skipped=why)


def median_time(fn, repeat: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved(fns: dict, repeat: int, warmup: int = 1) -> dict:
    """Median seconds of each ``fns[name]()``, run in turns so that drift on a
    shared machine (other processes, clock changes) hits every variant alike.
    A callable may return its own measured seconds (to leave setup out);
    otherwise its whole call is timed."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            own = fn()
            times[name].append(own if isinstance(own, float) else time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def standalone_main(description: str, runners, argv=None, build=None) -> int:
    """``python -m benchmarks.<name>``: run one section's ``run(env)``
    functions outside the suite and print their results as JSON. A CUDA
    context is held throughout, as in the suite (gpu_ops.hold_cuda_context
    says why). A reference that commits its compiled kernels passes their
    ``build()``: ``--build`` then rebuilds them and runs nothing."""
    import argparse
    import json
    import types

    from .gpu_ops import hold_cuda_context
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device")
    p.add_argument("--quick", action="store_true")
    if build is not None:
        p.add_argument("--build", action="store_true", help="rebuild the committed SPIR-V, run nothing")
    args = p.parse_args(argv)
    if build is not None and args.build:
        build()
        return 0
    env = types.SimpleNamespace(quick=args.quick, device=args.device, out=None)
    cuda_context = hold_cuda_context()
    try:
        print(json.dumps([r.as_dict() for run in runners for r in run(env)], indent=2))
    finally:
        del cuda_context                    # held until every row is measured
    return 0
