"""Test helpers for the single-pass (chained) kernels: a context that
claims forward progress, and tiles that never publish."""
import dataclasses

import numpy as np

from guestcompute.ops.base import registered_ops


def forced_single_pass(host):
    """A fresh context of ``host`` whose device claims forward progress, so
    the single-pass kernels run (lavapipe runs started workgroups to
    completion, so the ticket-ordered look-back terminates there too).
    Close it after use."""
    c = host.adopt()
    c.device.limits = dataclasses.replace(c.limits, forward_progress=True)
    return c


def skip_first_tickets(monkeypatch, module, skipped: int):
    """Make ``module``'s chained kernels start handing out tickets at
    ``skipped``: tiles 0..skipped-1 never run, so every later tile waits on
    them in vain and must take the fallback (reduce them from the input)."""
    from guestcompute.ops import scan_chained
    setup = scan_chained.plan_setup

    def late_setup(ctx, *args, **kw):
        state, grid, dispatches = setup(ctx, *args, **kw)
        return state, grid, dispatches + registered_ops()["fill"](ctx, state[0:1], skipped).dispatches
    monkeypatch.setattr(module, "plan_setup", late_setup)
    monkeypatch.setattr(module, "spin_budget", lambda ctx, in_place: 2)


def full_range(rng, shape, dtype: str):
    """Random values of a scan dtype over its whole range (integers wrap
    when summed), standard normal floats."""
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "int32":
        return rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    return rng.integers(0, 2 ** 32, shape, dtype=np.uint64).astype(np.uint32)
