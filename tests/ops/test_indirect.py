"""Indirect dispatch: workgroup counts computed on the GPU by an earlier op."""
import numpy as np
import pytest

import guestcompute as gc
from guestcompute.ops.base import OpResult
from guestcompute.ops.elementwise import plan_map


def test_dispatch_sized_by_a_gpu_computed_count(host, ctx):
    """The count is a sum computed on the GPU (as a compaction count would
    be); the fill covers exactly the workgroups that count needs."""
    n = 4099                                    # odd: the scalar kernel, 128 items per workgroup
    a = ctx.tensor(np.array([250], np.uint32))
    b = ctx.tensor(np.array([50], np.uint32))
    out = ctx.tensor(np.full(n, -1.0, np.float32))

    def frame(rec):
        count = rec.add(a, b)                   # 300, on the GPU
        groups = rec.groups_from_count(count, 128)
        rec.dispatch_indirect(groups, "fill", out, 7.0)
        return groups
    groups = host.run(ctx, frame)
    np.testing.assert_array_equal(groups.numpy(), [3, 1, 1])
    expect = np.full(n, -1.0, np.float32)
    expect[:384] = 7.0
    np.testing.assert_array_equal(out.numpy(), expect)


def test_dispatch_count_uses_the_kernels_items_per_group(host, ctx):
    n = 4096                                    # vec4 kernel: 512 items per workgroup
    c = ctx.tensor(np.array([1000], np.int32))
    x = ctx.tensor(np.arange(n, dtype=np.float32))
    y = ctx.tensor(np.zeros(n, np.float32))
    host.run(ctx, lambda rec: rec.dispatch_count(rec.add(c, 1), "scale", x, 2.0, out=y))
    expect = np.zeros(n, np.float32)
    expect[:1024] = np.arange(1024) * 2.0
    np.testing.assert_array_equal(y.numpy(), expect)


@pytest.mark.parametrize("count,filled", [(0, 0), (-5, 0), (10_000, 64 * 2 * 128), (70_000, 70_001)])
def test_folded_grids_and_empty_counts(host, ctx, count, filled):
    n = 70_001
    object.__setattr__(ctx.limits, "max_workgroup_count", (64, 65535, 65535))   # force folding into y
    c = ctx.tensor(np.array([count], np.int32))
    out = ctx.tensor(np.zeros(n, np.float32))
    groups = host.run(ctx, lambda rec: (rec.dispatch_count(c, "fill", out, 1.0),
                                        rec.groups_from_count(c, 128))[1])
    g = -(-max(count, 0) // 128)
    if g == 0:
        np.testing.assert_array_equal(groups.numpy(), [0, 1, 1])
    else:
        assert groups.numpy()[0] == min(g, 64) and groups.numpy()[0] * groups.numpy()[1] >= g
    assert int(out.numpy().sum()) == filled


def test_indirect_count_as_a_program_parameter(host, ctx):
    """A count written per frame into a program's params sizes its dispatch:
    no re-record when the count changes."""
    out = ctx.tensor(np.zeros(1000, np.float32))
    x = ctx.tensor(np.ones(1001, np.float32))      # odd sizes: 128 items per workgroup

    def body(rec, p):
        rec.fill(out, 0.0)
        rec.dispatch_count(p.count, "copy", x[:1000][::-1], out=out)
    prog = ctx.program(body, params={"count": "uint32"})
    for count, filled in ((100, 128), (600, 640), (0, 0)):
        host.run(ctx, lambda rec: rec.execute(prog, params={"count": count}))
        assert int(out.numpy().sum()) == filled
    assert prog.stats["records"] == 1


def test_indirect_errors(host, ctx):
    c = ctx.tensor(np.array([3], np.uint32))
    x = ctx.tensor(np.ones(8, np.float32))
    g = ctx.tensor(np.array([1, 1, 1], np.uint32))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.DTypeError):
            rec.groups_from_count(ctx.tensor(np.array([3.0], np.float32)), 64)
        with pytest.raises(gc.ShapeError):
            rec.groups_from_count(ctx.tensor(np.array([3, 4], np.uint32)), 64)
        with pytest.raises(gc.InvalidArgumentError):
            rec.groups_from_count(c, 0)
        with pytest.raises(gc.ShapeError):
            rec.dispatch_indirect(ctx.tensor(np.ones(4, np.uint32)), "fill", x, 1.0)
        with pytest.raises(gc.DTypeError):
            rec.dispatch_indirect(ctx.tensor(np.ones(3, np.int32)), "fill", x, 1.0)
        with pytest.raises(gc.InvalidArgumentError):
            rec.dispatch_indirect(g, "no_such_op", x)
        with pytest.raises(gc.InvalidArgumentError):
            rec.groups_from_count(c, 64, out=c)

        def two(ctx, t):
            d = plan_map(ctx, "s", [], t, t.dtype, 1.0, "float")
            return OpResult(t, [d, d])
        with pytest.raises(gc.UnsupportedError):
            rec.dispatch_count(c, two, x)
        assert rec.dispatches == 0 and rec.barriers == 0
        rec.dispatch_indirect(g, two, x)          # both dispatches take the counts
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(x.numpy(), np.ones(8))
