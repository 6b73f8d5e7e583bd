"""Warm-up: create pipelines before the first frame needs them.

A renderer that creates a pipeline while recording frame 1 hitches for the
length of a driver compile (milliseconds per pipeline on real drivers), so
``ctx.warmup()`` does them all up front. vkCreateComputePipelines releases
the GIL and may run on several threads with one VkPipelineCache, so a few
worker threads overlap the driver's work (see device/pipelines.py for the
per-key de-duplication that makes this safe). They are plain threads, not a
concurrent.futures pool: that module imports ``logging``, which an
application's own logging.py may shadow (see guestcompute/log.py).
"""
from __future__ import annotations

import inspect
import os
import threading
import time
from dataclasses import asdict, dataclass

from .errors import InvalidArgumentError, UnsupportedError
from .kernels.spec import KernelSpec
from .ops import all_specs
from .ops.mlp import Network
from .ops.mlp_op import network_pipelines


@dataclass
class WarmupReport:
    total: int            # specs asked for (after dropping unsupported ones for "all")
    created: int          # pipelines this call created
    existing: int         # already there before the call
    skipped: int          # built-ins this context cannot run (features the host did not enable)
    seconds: float        # wall time of the call
    threads: int
    saved: bool = False   # the persisted pipeline cache file was (re)written

    def as_dict(self) -> dict:
        return asdict(self)


def _feature_enabled(caps, feature: str) -> bool:
    checks = {
        "float16": lambda: caps.float16_storage,
        "int8": lambda: caps.uint8_storage,
        "uint8": lambda: caps.uint8_storage,
        "subgroup": lambda: caps.api_version >= (1, 1),
        "cooperative_matrix": lambda: caps.cooperative_matrix,
        "cooperative_matrix_khr": lambda: caps.cooperative_matrix_khr,
        "bfloat16_cooperative_matrix": lambda: caps.bfloat16_cooperative_matrix,
        "cooperative_vector": lambda: caps.cooperative_vector,
        "image_write_without_format": lambda: caps.feature("shaderStorageImageWriteWithoutFormat"),
    }
    check = checks.get(feature)
    return bool(check and check())


def supported(ctx, spec: KernelSpec) -> bool:
    """Whether ``ctx`` can create this spec's pipeline with what the host enabled."""
    if spec.target_env != "vulkan1.0" and ctx.caps.api_version < (1, 1):
        return False
    if spec.target_env == "vulkan1.2" and ctx.caps.api_version < (1, 2):
        return False
    return all(_feature_enabled(ctx.caps, f) for f in spec.features)


def resolve(ctx, specs) -> tuple:
    """([(spec, specialization constants)] to create, number of built-ins
    skipped as unsupported)."""
    if specs is None or (isinstance(specs, str) and specs == "all"):
        every = list(all_specs())
        runnable = [(s, ()) for s in every if supported(ctx, s)]
        return runnable, len(every) - len(runnable)
    if isinstance(specs, (str, bytes)):
        raise InvalidArgumentError(f"warmup(): specs must be None, 'all', a list of KernelSpecs and "
                                   f"kernel family names, or a program, got {specs!r}")
    if isinstance(specs, KernelSpec):
        specs = [specs]
    elif hasattr(specs, "specs") and callable(specs.specs):
        specs = specs.specs()
    try:
        items = list(specs)
    except TypeError:
        raise InvalidArgumentError(f"warmup(): cannot iterate over {type(specs).__name__}; pass None, 'all', "
                                   "a list of KernelSpecs and kernel family names, or a program") from None
    specs, skipped = [], 0
    for item in items:
        if isinstance(item, str):              # a kernel family: its built-in variants
            family = _family_specs(item)
            runnable = [(s, ()) for s in family if supported(ctx, s)]
            specs += runnable
            skipped += len(family) - len(runnable)
        elif isinstance(item, KernelSpec):
            specs.append((item, ()))
        elif isinstance(item, Network):        # its pipelines, specialized to its layers
            if item.ctx is not ctx:
                raise InvalidArgumentError("warmup(): the network belongs to another context")
            specs += network_pipelines(ctx, item)
        else:
            raise InvalidArgumentError(f"warmup(): expected KernelSpecs, family names or ctx.mlp networks, "
                                       f"got {type(item).__name__}")
    specs = list(dict.fromkeys(specs))
    for s, _ in specs:
        if not supported(ctx, s):
            raise UnsupportedError(f"warmup(): kernel {s.family} needs {s.features or s.target_env}, "
                                   "which the host did not enable")
    return specs, skipped


def _family_specs(name: str) -> list:
    found = [s for s in all_specs() if s.family == name]
    if not found:
        raise InvalidArgumentError(f"warmup(): no built-in kernel family {name!r}")
    return found


def _check_progress(progress) -> None:
    """``progress`` must take (done, total): found out here, not from a
    TypeError after the first pipelines were created."""
    if progress is None:
        return
    if not callable(progress):
        raise InvalidArgumentError(f"warmup(): progress must be callable(done, total), got {type(progress).__name__}")
    try:
        signature = inspect.signature(progress)
    except (TypeError, ValueError):      # no introspectable signature: trust it
        return
    try:
        signature.bind(0, 0)
    except TypeError:
        raise InvalidArgumentError(f"warmup(): progress{signature} cannot be called as progress(done, total); "
                                   "give it two parameters") from None


def warm(ctx, specs, progress=None, threads=None) -> WarmupReport:
    t0 = time.perf_counter()
    if threads is None:
        threads = min(8, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidArgumentError(f"warmup(): threads must be a positive int, got {threads!r}")
    _check_progress(progress)
    todo, skipped = resolve(ctx, specs)
    existing = sum(1 for s, c in todo if ctx.device.pipelines.lookup(s, c) is not None)
    missing = [(s, c) for s, c in todo if ctx.device.pipelines.lookup(s, c) is None]
    before = ctx.device.pipelines.stats["pipelines_created"]

    def create(pair):
        ctx.device.pipelines.resolve(pair[0], None, pair[1])

    total = len(todo)
    done = existing
    if progress is not None:
        progress(done, total)
    if threads == 1 or len(missing) <= 1:
        for spec in missing:
            create(spec)
            done += 1
            if progress is not None:
                progress(done, total)
    else:
        def one_done():
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total)
        _create_in_parallel(create, missing, threads, one_done)
    created = ctx.device.pipelines.stats["pipelines_created"] - before
    # Two specs may name one pipeline (kernel parameters that change neither
    # the source nor the layout): the second found it made by the first.
    return WarmupReport(total=total, created=created, existing=total - created, skipped=skipped,
                        seconds=time.perf_counter() - t0, threads=threads)


def _create_in_parallel(create, specs: list, threads: int, one_done) -> None:
    """``create(spec)`` for every spec on up to ``threads`` worker threads;
    ``one_done()`` runs on this thread after each. The first error stops the
    workers (after the pipeline each is creating) and is raised here."""
    pending = iter(specs)
    finished = []                    # None per created pipeline, or the error
    changed = threading.Condition()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with changed:
                spec = next(pending, None)
            if spec is None:
                return
            try:
                create(spec)
                outcome = None
            except BaseException as e:       # handed to the calling thread
                outcome = e
            with changed:
                finished.append(outcome)
                changed.notify()
            if outcome is not None:
                return

    workers = [threading.Thread(target=worker, name=f"guestcompute-warmup-{k}", daemon=True)
               for k in range(min(threads, len(specs)))]
    for w in workers:
        w.start()
    try:
        for k in range(len(specs)):
            with changed:
                changed.wait_for(lambda: len(finished) > k)
                outcome = finished[k]
            if outcome is not None:
                raise outcome
            one_done()
    finally:
        stop.set()
        for w in workers:
            w.join()
