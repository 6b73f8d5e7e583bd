"""Arguments of tensor views, programs and warm-up that are wrong raise a
GuestComputeError subclass saying what to pass, never a bare IndexError,
ValueError or TypeError from deep inside; numpy ints work wherever ints do."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops import all_specs


def _raises(error, hint, fn):
    with pytest.raises(error, match=hint) as info:
        fn()
    assert isinstance(info.value, gc.GuestComputeError)


# -- tensor views ---------------------------------------------------------------------------------

def test_transpose_axes(ctx):
    t = ctx.empty((2, 3, 4))
    assert t.transpose(0, 2).shape == (4, 3, 2)
    assert t.transpose(np.int64(-1), np.int32(0)).shape == (4, 3, 2)
    _raises(gc.ShapeError, r"axis 3 is out of range for a 3-d tensor; use -3\.\.2", lambda: t.transpose(3, 0))
    _raises(gc.ShapeError, r"out of range", lambda: ctx.empty((2, 3)).transpose(2, 0))
    _raises(gc.ShapeError, r"0-d tensor has no axes", lambda: ctx.empty(()).transpose())
    _raises(gc.InvalidArgumentError, r"axis 'a' is not an int", lambda: t.transpose("a", 0))
    _raises(gc.InvalidArgumentError, r"not an int", lambda: t.transpose(True, 0))


def test_permute_axes(ctx):
    t = ctx.empty((2, 3))
    assert t.permute(np.int64(1), 0).shape == (3, 2)
    _raises(gc.InvalidArgumentError, r"axis 0\.0 is not an int; give each of 0\.\.1 once",
            lambda: t.permute(0.0, 1))
    _raises(gc.InvalidArgumentError, r"not an int", lambda: t.permute(True, False))
    _raises(gc.ShapeError, r"give each of 0\.\.1 once", lambda: t.permute(0, 0))
    _raises(gc.ShapeError, r"give each of", lambda: t.permute(0, 1, 2))


def test_slicing(ctx):
    t = ctx.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert t[::2, np.int64(1)].shape == (2,)
    assert t[np.int32(1):, ::-1].shape == (2, 4)
    _raises(gc.InvalidArgumentError, r"step cannot be zero", lambda: t[::0])
    _raises(gc.InvalidArgumentError, r"ints or None", lambda: t[1.5:])
    _raises(gc.InvalidArgumentError, r"ints or None", lambda: t["a":])
    _raises(gc.InvalidArgumentError, r"boolean \(mask\) indexing is not supported", lambda: t[True])
    _raises(gc.InvalidArgumentError, r"unsupported index", lambda: t[np.array([0, 1])])
    _raises(gc.InvalidArgumentError, r"unsupported index", lambda: t[[0, 1]])
    _raises(gc.InvalidArgumentError, r"unsupported index", lambda: t[0.5])


def test_reshape_shapes(ctx):
    t = ctx.empty((8,))
    assert t.reshape(np.int64(4), 2).shape == (4, 2)
    assert t.reshape((2, -1)).shape == (2, 4)
    for bad in ((4.0, 2), (-2, -4), (True, 8), ("a",), (None,)):
        _raises(gc.ShapeError, r"must be ints >= 0 \(one of them may be -1\)", lambda: t.reshape(*bad))
    _raises(gc.ShapeError, r"as many elements", lambda: t.reshape(3, 3))


# -- programs -----------------------------------------------------------------------------------

def test_program_function_of_the_wrong_arity(ctx):
    _raises(gc.InvalidArgumentError, r"called as fn\(rec\); give it one parameter",
            lambda: ctx.program(lambda: None))
    _raises(gc.InvalidArgumentError, r"called as fn\(rec\)", lambda: ctx.program(lambda rec, params: None))
    _raises(gc.InvalidArgumentError, r"called as fn\(rec, params\) because params= was given",
            lambda: ctx.program(lambda rec: None, params={"dt": "float32"}))
    assert ctx.program(lambda rec, params=None: None).value is None     # defaults are fine
    assert ctx.program(lambda *args: len(args), params={"dt": "float32"}).value == 2


def test_program_body_errors_still_propagate(ctx):
    def body(rec):
        raise TypeError("a bug inside the function")
    with pytest.raises(TypeError, match="a bug inside the function"):
        ctx.program(body)


# -- warm-up ------------------------------------------------------------------------------------

def test_warmup_arguments(ctx):
    spec = next(s for s in all_specs() if s.family == "map" and not s.features)
    for specs in (42, b"all", "nonsense", [None], object()):
        _raises(gc.InvalidArgumentError, r"warmup\(\)", lambda: ctx.warmup(specs))
    for threads in (True, 0, 2.0, "4"):
        _raises(gc.InvalidArgumentError, r"threads must be a positive int", lambda: ctx.warmup([spec], threads=threads))
    _raises(gc.InvalidArgumentError, r"progress must be callable", lambda: ctx.warmup([spec], progress=5))
    _raises(gc.InvalidArgumentError, r"cannot be called as progress\(done, total\)",
            lambda: ctx.warmup([spec], progress=lambda: None))
    assert ctx.cache_stats()["pipelines_created"] == 0      # every refusal came before any work
    seen = []
    report = ctx.warmup(spec, progress=lambda done, total: seen.append((done, total)))   # one spec, unlisted
    assert report.total == 1 and seen[-1] == (1, 1)


def test_warmup_on_several_threads_reports_progress_and_errors(ctx):
    specs = [s for s in all_specs() if s.family == "map" and not s.features][:6]
    seen = []
    report = ctx.warmup(specs, threads=3, progress=lambda done, total: seen.append(done))
    assert report.created == len(specs) and seen == list(range(len(specs) + 1))

    def stop(done, total):
        if done == 1:
            raise KeyboardInterrupt
    more = [s for s in all_specs() if s.family == "map" and not s.features][6:12]
    with pytest.raises(KeyboardInterrupt):
        ctx.warmup(more, threads=3, progress=stop)
