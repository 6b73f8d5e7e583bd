"""The ONNX package's own node test cases run through guestcompute.onnx.

The onnx wheel ships the generators of its node tests
(``onnx.backend.test.case.node``), not their .pb data: collecting them
builds each case's model and its expected outputs (computed by onnx's
reference code). Every case whose op types all have a rule is bound and run;
a case that binds to a typed UnsupportedError (an attribute, a dtype...)
is skipped with that reason. Cases that feed shape-like inputs at run time
run with those inputs made initializers (see run_case).

Tolerance: float32 outputs within rtol 1e-3 (or the case's own, if
looser) and atol 1e-5; float16 within rtol 1e-2 and atol 1e-3; integers
exactly.

``python tests/onnx_models/node_cases.py`` prints the report.
"""
from __future__ import annotations

import collections
import re
import warnings

import numpy as np

from guestcompute.errors import GuestComputeError, UnsupportedError


def collect():
    """Every node test case the installed onnx package generates."""
    from onnx.backend.test.case import node
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(node.collect_testcases())


def reason_of(error: Exception) -> str:
    """A short reason to group skips by (the attribute or dtype named)."""
    text = str(error)
    for pattern, key in ((r"attribute (\w+)", "attribute {}"), (r"dtype (\w+)", "dtype {}"),
                         (r"(computed on the GPU)", "{}"), (r"(outputs? (?:is|are) not supported)", "{}")):
        m = re.search(pattern, text)
        if m:
            return key.format(m.group(1))
    return text.split(": ", 1)[-1][:60]


def _close(got: np.ndarray, want: np.ndarray, case) -> bool:
    if want.dtype.kind in "iub":
        return got.shape == want.shape and np.array_equal(got.astype(np.int64), want.astype(np.int64))
    if want.dtype == np.float16:
        rtol, atol = 1e-2, 1e-3
    else:
        rtol, atol = max(case.rtol, 1e-3), 1e-5
    return got.shape == want.shape and np.allclose(got.astype(np.float64), want.astype(np.float64),
                                                   rtol=rtol, atol=atol, equal_nan=True)


def _array(value):
    # Cases of dtypes numpy lacks (float8, int4...) hold TensorProtos.
    if isinstance(value, np.ndarray):
        return value
    from onnx import numpy_helper
    return numpy_helper.to_array(value) if hasattr(value, "data_type") else np.asarray(value)


def _constant_inputs(proto, inputs):
    """The case's model with every input after the first made an initializer
    (shapes, axes, scales: what guestcompute needs known at bind time)."""
    from onnx import numpy_helper
    model = type(proto)()
    model.CopyFrom(proto)
    graph = model.graph
    moved = list(graph.input)[1:]
    for info, value in zip(moved, inputs[1:]):
        graph.initializer.append(numpy_helper.from_array(value, info.name))
    del graph.input[1:]
    return model, inputs[:1]


def _bind(ctx, proto, inputs):
    import guestcompute.onnx as gonnx
    model = gonnx.load(proto)
    names = [i.name for i in model.inputs]
    return model, names, model.bind(ctx, **{n: np.shape(a) for n, a in zip(names, inputs)})


def run_case(ctx, case):
    """("passed" | "failed" | "skipped" | "no rule", detail). A case whose
    shape-like inputs are graph inputs (the node tests feed Reshape's shape,
    Slice's starts, Resize's scales... at run time) runs again with them
    made constants, as exported models have them."""
    import guestcompute.onnx as gonnx
    ops = {n.op_type for n in case.model.graph.node}
    missing = sorted(ops - set(gonnx.supported_ops()))
    if missing:
        return "no rule", ",".join(missing)
    inputs, outputs = (list(map(_array, arrays)) for arrays in case.data_sets[0])
    try:
        try:
            model, names, bound = _bind(ctx, case.model, inputs)
        except UnsupportedError as e:
            if "computed on the GPU" not in str(e):
                raise
            proto, inputs = _constant_inputs(case.model, inputs)
            model, names, bound = _bind(ctx, proto, inputs)
    except UnsupportedError as e:
        return "skipped", reason_of(e)
    except GuestComputeError as e:
        return "failed", f"bind: {type(e).__name__}: {e}"
    try:
        got = bound.run(**dict(zip(names, inputs)))
    except GuestComputeError as e:
        return "failed", f"run: {type(e).__name__}: {e}"
    for info, want in zip(model.outputs, outputs):
        if not _close(got[info.name], np.asarray(want), case):
            return "failed", f"output {info.name!r} differs"
    return "passed", ""


def run_all(ctx, cases=None) -> dict:
    """{"passed": [...], "failed": [(name, detail)], "skipped": Counter(reason), "no rule": n}."""
    report = {"passed": [], "failed": [], "skipped": collections.Counter(), "skipped_cases": [],
              "no rule": 0}
    for case in cases if cases is not None else collect():
        status, detail = run_case(ctx, case)
        if status == "passed":
            report["passed"].append(case.name)
        elif status == "failed":
            report["failed"].append((case.name, detail))
        elif status == "skipped":
            report["skipped"][detail] += 1
            report["skipped_cases"].append((case.name, detail))
        else:
            report["no rule"] += 1
        ctx.retire()
    return report


def format_report(report: dict) -> str:
    run = len(report["passed"]) + len(report["failed"])
    lines = [f"ONNX node test cases: {run} run, {len(report['passed'])} passed, "
             f"{len(report['failed'])} failed, {sum(report['skipped'].values())} skipped "
             f"(supported op types, unsupported attribute/dtype), "
             f"{report['no rule']} not attempted (an op type without a rule)"]
    for reason, n in report["skipped"].most_common():
        lines.append(f"  skipped {n:4d}: {reason}")
    for name, detail in report["failed"]:
        lines.append(f"  FAILED {name}: {detail}")
    return "\n".join(lines)


if __name__ == "__main__":
    import guestcompute as gc
    with gc.Context.create() as context:
        print(format_report(run_all(context)))
