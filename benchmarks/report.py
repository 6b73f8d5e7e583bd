"""The report of one run: JSON for machines, a markdown table for people."""
from __future__ import annotations

import json


def _num(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{int(v):,}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _goal(r) -> str:
    if not r.goal:
        return ""
    what, op, target = (r.goal.partition("<=") if "<=" in r.goal else r.goal.partition(">="))
    sign = "≤" if op == "<=" else "≥"
    return f"{sign} {target}×" if what.strip() == "ratio" else f"{sign} {target}"


def _met(r) -> str:
    return {True: "yes", False: "**no**", None: ""}[r.met]


def to_json(meta: dict, results: list) -> str:
    return json.dumps({"meta": meta, "results": [r.as_dict() for r in results]}, indent=2,
                      ensure_ascii=False)


def to_markdown(meta: dict, results: list, image: str = None) -> str:
    lines = [f"### {meta['device']} — {meta['date']}, commit {meta.get('commit', '?')}", ""]
    lines.append(f"Driver {meta.get('driver', '?')}, Vulkan {meta.get('api', '?')}, "
                 f"Python {meta.get('python', '?')}, {meta.get('cpu_count', '?')} CPUs"
                 + (", quick mode" if meta.get("quick") else "")
                 + (", a CUDA context held throughout (the GPU clocks as for the CUDA baselines)"
                    if meta.get("cuda_context_held") else "") + ".")
    lines.append("")
    if image:
        lines += [f"![benchmarks on {meta['device']}]({image})", ""]
    lines.append("| section | benchmark | guestcompute | baseline (same run) | ratio | goal | met | notes |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if r.skipped:
            lines.append(f"| {r.section} | {r.name} | skipped | | | | | {r.skipped} |")
            continue
        base = f"{_num(r.baseline_value)} {r.unit} — {r.baseline}" if r.baseline_value is not None else r.baseline
        ratio = f"{_num(r.ratio)}×" if r.ratio is not None else ""
        lines.append(f"| {r.section} | {r.name} | {_num(r.value)} {r.unit} | {base} | {ratio} | {_goal(r)} | "
                     f"{_met(r)} | {r.note} |")
    return "\n".join(lines) + "\n"


def summary(results: list) -> str:
    """A short plain-text table for the terminal."""
    rows = []
    for r in results:
        if r.skipped:
            rows.append(f"  {r.section:13s} {r.name[:58]:58s} skipped: {r.skipped[:60]}")
            continue
        ratio = f"{r.ratio:8.3g}×" if r.ratio is not None else " " * 9
        met = {True: "met", False: "MISSED", None: ""}[r.met]
        rows.append(f"  {r.section:13s} {r.name[:58]:58s} {_num(r.value):>9s} {r.unit:12s} {ratio} {met}")
    return "\n".join(rows)


def goals_table(runs: list) -> str:
    """One row per judged benchmark, one column per run: ``runs`` is a list
    of (meta, results) from the JSON reports."""
    names, seen = [], set()
    for _, results in runs:
        for r in results:
            if r.goal and r.name not in seen:
                seen.add(r.name)
                names.append((r.section, r.name, _goal(r), r.goal.startswith("ratio")))
    head = "| benchmark | goal | " + " | ".join(m["device"] for m, _ in runs) + " |"
    lines = [head, "| --- | --- | " + " | ".join("---" for _ in runs) + " |"]
    for section, name, goal, is_ratio in names:
        cells = []
        for _, results in runs:
            r = next((x for x in results if x.name == name), None)
            if r is None or r.skipped:
                cells.append("skipped" if r is not None else "—")
                continue
            got = f"{_num(r.ratio)}×" if is_ratio else f"{_num(r.value)} {r.unit}"
            verdict = "no goal here" if r.met is None else ("met" if r.met else "**missed**")
            cells.append(f"{got} ({verdict})")
        lines.append(f"| {section}: {name} | {goal} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def page_table(meta: dict, results: list) -> str:
    """One machine's goal table as BENCHMARKS.md shows it: a heading with
    the run's date and commit, then one row per judged benchmark."""
    lines = [f"### {meta['device']} — {meta['date']}, commit {meta.get('commit', '?')}", "",
             "| benchmark | goal | result | baseline (same run) | met |", "| --- | --- | --- | --- | --- |"]
    for r in results:
        if not r.goal:
            continue
        if r.skipped:
            lines.append(f"| {r.section}: {r.name} | {_goal(r)} | skipped: {r.skipped} | {r.baseline} | |")
            continue
        if r.goal.startswith("ratio") and r.ratio is not None:
            got = f"{_num(r.ratio)}× ({_num(r.value)} vs {_num(r.baseline_value)} {r.unit})"
        else:
            got = f"{_num(r.value)} {r.unit}"
        verdict = {True: "met", False: "**missed**", None: ""}[r.met]
        lines.append(f"| {r.section}: {r.name} | {_goal(r)} | {got} | {r.baseline} | {verdict} |")
    return "\n".join(lines) + "\n"


def load(path) -> tuple:
    """(meta, results) from a JSON report."""
    from .results import Result
    doc = json.loads(open(path).read())
    fields = set(Result.__dataclass_fields__)
    return doc["meta"], [Result(**{k: v for k, v in r.items() if k in fields}) for r in doc["results"]]


if __name__ == "__main__":
    # python -m benchmarks.report A.json [B.json ...]: the goals table of several runs;
    # python -m benchmarks.report --page A.json: one run's table for BENCHMARKS.md
    import sys
    if sys.argv[1:2] == ["--page"]:
        print(page_table(*load(sys.argv[2])))
    else:
        print(goals_table([load(p) for p in sys.argv[1:]]))
