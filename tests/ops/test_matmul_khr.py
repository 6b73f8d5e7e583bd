"""rec.matmul's VK_KHR_cooperative_matrix GEMM: its specialization to each
shape, and its products on a device that has the extension (a GPU with
tensor cores; lavapipe has none, so there the product test skips)."""
import numpy as np
import pytest

from guestcompute.ops import matmul as mm
from guestcompute.ops import matmul_coopmat as mc
from test_matmul import KHR


def _views(ctx, batch=()):
    """A (…, 256, 64) with rows 96 apart, B (64, 256), and C the right half
    of a (…, 256, 512) tensor: row strides that are not the widths."""
    a = ctx.empty(batch + (256, 96), "float16")[..., :64]
    b = ctx.empty((64, 256), "float16")
    c_whole = ctx.empty(batch + (256, 512), "float16")
    return a, b, c_whole, c_whole[..., 256:]


def test_k_and_the_row_strides_are_specialization_constants(modern_ctx):
    """Neither the K loop nor an address reads a push constant: each shape
    is a pipeline of its own."""
    a, b, _, c = _views(modern_ctx)
    for acc in ("float16", "float32"):
        p = mm.problem_for(a, b, c, acc)
        name, spec = mm.select(p, KHR)
        assert name == "coopmat_khr"
        (dispatch,) = mm.plan(modern_ctx, p, spec, a, b, c)
        assert dict(dispatch.spec_constants) == dict(zip(mc.KHR_SHAPE_IDS, (64, 96, 256, 512)))
        glsl = spec.render()
        assert not any(f"pc.{name}" in glsl for name in ("K", "sam", "sbk", "scm"))
        for i in mc.KHR_SHAPE_IDS:
            assert f"layout(constant_id = {i})" in glsl


@pytest.mark.parametrize("acc", ["float16", "float32"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_the_khr_kernel_matches_numpy_on_strided_views(modern_host, modern_ctx, acc, batch):
    """Small integers, so that fp16 sums are exact: the product equals
    numpy's, and the left half of C's tensor keeps its sentinel."""
    ctx = modern_ctx
    a, b, c_whole, c = _views(ctx, batch)
    p = mm.problem_for(a, b, c, acc)
    name = mm.select(p, mm.MatmulDevice.of(ctx))[0]
    if name != "coopmat_khr":
        pytest.skip(f"rec.matmul takes {name} here, not its KHR cooperative-matrix kernel")
    rng = np.random.default_rng(11)
    a_np = rng.integers(-3, 4, a.shape).astype(np.float16)
    b_np = rng.integers(-3, 4, b.shape).astype(np.float16)
    modern_host.run(ctx, lambda rec: (rec.copy(ctx.tensor(a_np), out=a), rec.copy(ctx.tensor(b_np), out=b),
                                      rec.fill(c_whole, 7.0)))
    modern_host.run(ctx, lambda rec: rec.matmul(a, b, out=c, accumulate=acc))
    got = c_whole.numpy()
    np.testing.assert_array_equal(got[..., 256:], a_np.astype(np.float32) @ b_np.astype(np.float32))
    assert (got[..., :256] == 7).all()
