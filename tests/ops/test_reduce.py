"""Reductions (sum mean max min argmax argmin) against numpy on both host
profiles: axes, keepdims, strided views, every kernel shape (cols, rows,
two-pass chunked rows), NaN and tie rules, typed errors."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import reduce as R
from guestcompute.ops.base import registered_ops
from strided_views import draw_view, need, random, shapes

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
OPS = ["sum", "mean", "max", "min", "argmax", "argmin"]


def reference(op, x: np.ndarray, axis, keepdims):
    """numpy's answer: float sums in float64, int sums wrapping in their dtype."""
    if op == "sum":
        if x.dtype.kind == "f":
            return np.sum(x.astype(np.float64), axis=axis, keepdims=keepdims)
        return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    if op == "mean":
        return np.mean(x.astype(np.float64), axis=axis, keepdims=keepdims)
    return getattr(np, op)(x, axis=axis, keepdims=keepdims)


def check(op, got, x: np.ndarray, axis, keepdims):
    ref = np.asarray(reference(op, x, axis, keepdims))
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if op in ("argmax", "argmin"):
        assert got.dtype == gc.uint32
        np.testing.assert_array_equal(got.numpy(), ref)
    elif op in ("sum", "mean") and x.dtype.kind == "f":
        # tree-ordered fp32 sums: error within a few roundings of the sum of magnitudes
        mag = np.asarray(reference(op, np.abs(x.astype(np.float64)), axis, keepdims))
        tol = (2e-3 if x.dtype == np.float16 else 2e-6) * mag + 1e-30
        err = np.abs(got.numpy().astype(np.float64) - ref)
        assert np.all(err <= tol), f"max error {err.max()}"
    else:
        np.testing.assert_array_equal(got.numpy(), ref.astype(x.dtype))


def plan(ctx, op, x, axis=None, **kw):
    """The dispatches an op would record (without recording them)."""
    return registered_ops()[op](ctx, x, axis, **kw).dispatches


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_every_op_and_axis(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(1)
    x_np = random(rng, (3, 5, 70), dtype, 0 if dtype == "uint32" else -50, 50)
    x = ctx.tensor(x_np)
    cases = [(op, axis, keep) for op in OPS for axis in (None, 0, 1, -1, (0, 2), (1, 2))
             for keep in (False, True)
             if not (op == "mean" and dtype in ("int32", "uint32"))
             and not (op.startswith("arg") and isinstance(axis, tuple))]
    got = host.run(ctx, lambda rec: [getattr(rec, op)(x, axis, keepdims=keep) for op, axis, keep in cases])
    for (op, axis, keep), g in zip(cases, got):
        check(op, g, x_np, axis, keep)


@pytest.mark.parametrize("shape,axis,mode,passes", [
    ((1000, 5), 1, "cols", 1),          # many short rows: one invocation per row
    ((40, 300), 0, "cols", 1),          # neighbouring outputs read neighbouring inputs
    ((7, 3000), 1, "rows", 1),          # a workgroup per row, rows past 1024 elements
    ((40, 129), 1, "rows", 1),          # just past one workgroup's width
    ((2, 20000), 1, "rows", 2),         # few long rows: chunks, then a second pass
    ((9000,), None, "rows", 2),
    ((3, 4, 3000), (0, 2), "rows", 2),  # several reduced axes, then chunked
])
def test_kernel_choice_and_results(host, ctx, shape, axis, mode, passes):
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal(shape).astype(np.float32)
    x = ctx.tensor(x_np)
    dispatches = plan(ctx, "sum", x, axis)
    assert len(dispatches) == passes
    assert dispatches[0].spec.param("mode") == mode
    ops = [op for op in OPS if not (op.startswith("arg") and isinstance(axis, tuple))]
    got = host.run(ctx, lambda rec: [getattr(rec, op)(x, axis) for op in ops])
    for op, g in zip(ops, got):
        check(op, g, x_np, axis, False)


def test_int_sums_wrap_and_float16_accumulates_in_fp32(host, ctx):
    big = np.full((4, 3000), 2**30, np.int32)
    u = np.full(20000, 2**31 + 5, np.uint32)                  # chunked path too
    b, ut = ctx.tensor(big), ctx.tensor(u)
    s, us = host.run(ctx, lambda rec: (rec.sum(b, 1), rec.sum(ut)))
    np.testing.assert_array_equal(s.numpy(), big.sum(1, dtype=np.int32))
    np.testing.assert_array_equal(us.numpy(), u.sum(dtype=np.uint32))
    if ctx.caps.float16_storage:
        ones = ctx.tensor(np.ones((2, 3000), np.float16))
        h, hm = host.run(ctx, lambda rec: (rec.sum(ones, 1), rec.mean(ones, 1)))
        # an fp16 accumulator would stall at 2048; fp32 reaches 3000 (representable in fp16)
        np.testing.assert_array_equal(h.numpy(), [3000, 3000])
        np.testing.assert_array_equal(hm.numpy(), [1, 1])


@pytest.mark.parametrize("n", [50, 52, 20000])           # single pass (scalar, vec4) and chunked
def test_nan_and_tie_rules(host, ctx, n):
    x_np = np.zeros((3, n), np.float32)
    x_np[0, [5, n - 7, n - 2]] = 4.0                      # ties: the first one wins
    x_np[0, [3, n - 1]] = -2.0
    x_np[1, [n // 2, n - 3]] = np.nan                     # NaN wins max and argmax, first NaN
    x_np[1, 0] = 9.0
    x_np[2] = -1.0                                        # all equal: index 0
    x = ctx.tensor(x_np)
    got = host.run(ctx, lambda rec: [getattr(rec, op)(x, 1) for op in ("max", "min", "argmax", "argmin")])
    for op, g in zip(("max", "min", "argmax", "argmin"), got):
        np.testing.assert_array_equal(g.numpy(), getattr(np, op)(x_np, 1), err_msg=op)
    col_np = np.ascontiguousarray(x_np.T)                 # the same along axis 0 (cols kernel when n is large)
    col = ctx.tensor(col_np)
    got = host.run(ctx, lambda rec: [rec.argmax(col, 0), rec.argmin(col, 0), rec.max(col, 0)])
    for op, g in zip(("argmax", "argmin", "max"), got):
        np.testing.assert_array_equal(g.numpy(), getattr(np, op)(col_np, 0), err_msg=op)


def test_argmax_ties_across_chunks(host, ctx):
    x_np = np.zeros(30000, np.int32)
    x_np[[29000, 12000, 4100, 20000]] = 7                 # every copy lies in a different chunk
    x = ctx.tensor(x_np)
    assert len(plan(ctx, "argmax", x)) == 2
    i, j = host.run(ctx, lambda rec: (rec.argmax(x), rec.argmin(x[::-1])))
    assert i.numpy() == 4100 and j.numpy() == np.argmin(x_np[::-1])


def test_keepdims_into_strided_out(host, ctx):
    x_np = np.random.default_rng(4).standard_normal((6, 50)).astype(np.float32)
    x = ctx.tensor(x_np)
    big = ctx.zeros((6, 3))
    idx = ctx.zeros((2, 6), "uint32")
    host.run(ctx, lambda rec: (rec.max(x, 1, keepdims=True, out=big[:, 1:2]), rec.argmin(x, 1, out=idx[1])))
    expect = np.zeros((6, 3), np.float32)
    expect[:, 1] = x_np.max(1)
    np.testing.assert_array_equal(big.numpy(), expect)
    np.testing.assert_array_equal(idx.numpy()[1], x_np.argmin(1))
    np.testing.assert_array_equal(idx.numpy()[0], 0)


def test_empty_reductions(host, ctx):
    e = ctx.empty((3, 0))
    s, m, z = host.run(ctx, lambda rec: (rec.sum(e, 1), rec.mean(e, 1), rec.max(e, 0)))
    np.testing.assert_array_equal(s.numpy(), [0, 0, 0])
    assert np.isnan(m.numpy()).all() and m.shape == (3,)
    assert z.shape == (0,)
    for op in ("max", "min", "argmax", "argmin"):
        with pytest.raises(gc.ShapeError):
            host.run(ctx, lambda rec: getattr(rec, op)(e, 1))


def test_typed_errors(host, ctx):
    x = ctx.tensor(np.ones((4, 5), np.float32))
    i = ctx.tensor(np.ones((4, 5), np.int32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.InvalidArgumentError, match="out of range"):
            rec.sum(x, 2)
        with pytest.raises(gc.InvalidArgumentError, match="repeated"):
            rec.max(x, (0, -2))
        with pytest.raises(gc.InvalidArgumentError):
            rec.argmax(x, (0, 1))                           # numpy: one axis or None
        with pytest.raises(gc.InvalidArgumentError):
            rec.min(x, 1.0)
        with pytest.raises(gc.DTypeError, match="cast"):
            rec.mean(i)
        with pytest.raises(gc.ShapeError):
            rec.sum(x, 1, out=ctx.empty((5,)))
        with pytest.raises(gc.DTypeError):
            rec.argmax(x, 1, out=ctx.empty((4,)))           # indices are uint32
        with pytest.raises(gc.InvalidArgumentError, match="overlaps"):
            rec.sum(x, 0, out=x[0])
        with pytest.raises(gc.InvalidArgumentError):
            rec.sum(np.ones(3))
    host.submit_and_wait(cmd)
    if not ctx.caps.uint8_storage:
        with pytest.raises(gc.UnsupportedError):
            ctx.empty((4,), "uint8")
    else:
        with pytest.raises(gc.DTypeError):
            host.run(ctx, lambda rec: rec.sum(ctx.tensor(np.ones(4, np.uint8))))


def test_folded_grid(host, ctx):
    """More rows than maxComputeWorkGroupCount[0]: the grid folds into y."""
    x_np = np.random.default_rng(6).standard_normal((300, 200)).astype(np.float32)
    x = ctx.tensor(x_np)
    object.__setattr__(ctx.limits, "max_workgroup_count", (64, 65535, 65535))
    assert plan(ctx, "sum", x, 1)[0].groups == (64, 5, 1)
    s, a, c = host.run(ctx, lambda rec: (rec.sum(x, 1), rec.argmax(x, 1), rec.min(x, 0)))
    check("sum", s, x_np, 1, False)
    check("argmax", a, x_np, 1, False)
    check("min", c, x_np, 0, False)


def test_one_pipeline_per_kernel_across_shapes(host, ctx):
    xs = [ctx.tensor(np.ones(shape, np.float32)) for shape in ((4, 300), (9, 129), (2, 3, 1000), (50, 2000))]
    host.run(ctx, lambda rec: [rec.sum(x, -1) for x in xs] + [rec.mean(x, -1) for x in xs])
    specs = {d.spec for x in xs for d in plan(ctx, "sum", x, -1)}
    assert {sp.param("vec", 1) for sp in specs} == {1, 4}       # aligned rows load vec4s
    assert ctx.cache_stats()["pipelines_created"] == len(specs) == 2   # mean is sum with a scale
    host.run(ctx, lambda rec: [rec.max(x.T, 0) for x in xs])   # strided views: the same two kernels
    assert ctx.cache_stats()["pipelines_created"] == 4


@pytest.mark.parametrize("n,offset,vec,passes", [
    (4612, 0, 4, 1),        # single pass: unrolled vec4 loop plus single-vec4 remainder
    (4610, 0, 1, 1),        # length not a multiple of 4: scalar loads
    (8192, 0, 4, 2),        # just long enough to split in chunks
    (8193, 0, 1, 2),
    (100004, 4, 4, 2),      # aligned view: vec4 chunks, a short last chunk
    (100004, 1, 1, 2),      # misaligned start: scalar loads
])
def test_full_reduction_vec4_and_chunks(host, ctx, n, offset, vec, passes):
    rng = np.random.default_rng(n + offset)
    base_np = rng.integers(-1000, 1000, n + offset).astype(np.float32)
    base_np[offset + np.array([7, n // 2, n - 3])] = 5000.0       # ties for the first maximum
    base_np[offset + np.array([n - 1, 11])] = -5000.0
    base = ctx.tensor(base_np)
    x, x_np = base[offset:], base_np[offset:]
    for op in OPS:
        d = plan(ctx, op, x)
        assert len(d) == passes and d[0].spec.param("vec", 1) == vec, op
    got = host.run(ctx, lambda rec: [getattr(rec, op)(x) for op in OPS])
    for op, g in zip(OPS, got):
        check(op, g, x_np, None, False)
    groups = R.chunking(R.split_rows(x.shape, (0,), [x.strides, (0,)], "sum"))[0]
    assert groups <= R.TARGET_GROUPS and (passes == 1) == (groups == 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_rows_vec4_aligned_and_not(host, ctx, dtype):
    need(ctx, dtype)
    rng = np.random.default_rng(9)
    x_np = random(rng, (6, 1032), dtype, 0 if dtype == "uint32" else -50, 50)
    x = ctx.tensor(x_np)
    views = [(x, x_np), (x[:, 4:1028], x_np[:, 4:1028]), (x[:, 1:1029], x_np[:, 1:1029]),
             (x[:, :1030], x_np[:, :1030])]
    expect_vec = [4, 4, 1, 1]
    for (v, _), vec in zip(views, expect_vec):
        assert plan(ctx, "max", v, 1)[0].spec.param("vec", 1) == vec
    ops = [op for op in OPS if not (op == "mean" and dtype in ("int32", "uint32"))]
    got = host.run(ctx, lambda rec: [getattr(rec, op)(v, 1) for v, _ in views for op in ops])
    it = iter(got)
    for _, v_np in views:
        for op in ops:
            check(op, next(it), v_np, 1, False)


def test_selection_covers_every_layout():
    """Every (rows, row_len, layout) picks a kernel; chunks cover each row exactly."""
    for rows in (1, 2, 100, 128, 129, 256, 5000):
        for row_len in (0, 1, 31, 33, 8191, 8192, 100000):
            for inner in (1, 7):
                L = R.Rows(rows, row_len, (1, 1, 1, rows), ((0, 0, 0, inner), (0, 0, 0, 1)),
                           (row_len,), ((1,), (0,)))
                mode = R.choose_kernel(L)
                assert mode in ("rows", "cols")
                chunks, chunk_len = R.chunking(L)
                assert chunk_len % R.WORKGROUP == 0 or chunks == 1
                assert (chunks - 1) * chunk_len < max(row_len, 1) <= chunks * chunk_len
                assert chunks <= R.TARGET_GROUPS


@HYP
@given(data=st.data())
def test_random_views_axes_and_ops(host, ctx, data):
    op = data.draw(st.sampled_from(OPS))
    dtype = data.draw(st.sampled_from(["float32"] if op == "mean" else ["float32", "int32", "uint32"]))
    shape = data.draw(shapes(max_dims=4, max_side=8) | st.sampled_from([(3, 1030), (2, 150, 3), (9000,)]))
    nd = len(shape)
    if op.startswith("arg"):
        axis = data.draw(st.none() | st.integers(-nd, nd - 1))
    else:
        axis = data.draw(st.none() | st.integers(-nd, nd - 1)
                         | st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple))
    keepdims = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    lo = 0 if dtype == "uint32" else -9
    x, x_np = draw_view(data, ctx, shape, lambda s: random(rng, s, dtype, lo, 10))
    got = host.run(ctx, lambda rec: getattr(rec, op)(x, axis, keepdims=keepdims))
    check(op, got, x_np, axis, keepdims)


def test_planned_specs_are_in_the_bake_catalogue(modern_ctx):
    from guestcompute.ops import all_specs
    ctx, catalogue, planned = modern_ctx, set(all_specs()), []
    for dtype in ("float32", "float16", "int32", "uint32"):
        layouts = [(ctx.empty((400, 5), dtype), 1), (ctx.empty((7, 300), dtype), 1),
                   (ctx.empty((9000,), dtype), None), (ctx.empty((2, 20, 30), dtype).T, None),
                   (ctx.empty((30, 40, 9), dtype).permute(2, 0, 1), None)]
        for x, axis in layouts:
            for op in OPS:
                if op == "mean" and not dtype.startswith("float"):
                    continue
                planned += plan(ctx, op, x, axis)
    modes = {(d.spec.param("mode"), d.spec.param("rrank"), d.spec.param("stage")) for d in planned}
    assert {("cols", 1, "single"), ("rows", 1, "single"), ("rows", 4, "single"), ("rows", 4, "partial"),
            ("rows", 1, "final")} <= modes
    missing = {d.spec.key for d in planned if d.spec not in catalogue}
    assert not missing, f"{len(missing)} planned specs missing from the catalogue"
