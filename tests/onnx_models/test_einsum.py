"""Einsum against numpy.einsum: matmuls with batch dims, broadcasting
ellipses, diagonals, sums, transposes, outer and inner products, implicit
outputs; and the typed refusal of three operands."""
import numpy as np
import pytest

pytest.importorskip("onnx")

import guestcompute as gc  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import builders  # noqa: E402

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),        # ellipses broadcast (2, 1) with (3,)
    ("ij,jk", [(3, 4), (4, 2)]),                               # implicit output: ik
    ("ba,ab", [(3, 4), (4, 3)]),                               # implicit output: the empty sum
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("bn,anm->bam", [(2, 3), (4, 3, 5)]),
    ("ij,jk,->ik", None),                                       # placeholder, replaced below
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),                                           # the trace
    ("bii->bi", [(2, 3, 3)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ij->", [(3, 4)]),
    ("ijk->j", [(2, 3, 4)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),                        # a diagonal, then a contraction
]
CASES = [c for c in CASES if c[1] is not None]


def model(equation, shapes):
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    return builders.make_model([node], [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s))
                                        for n, s in zip(names, shapes)],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], {}, 12)


@pytest.mark.parametrize("equation, shapes", CASES)
def test_einsum_matches_numpy(ctx, equation, shapes):
    rng = np.random.default_rng(len(equation))
    xs = [rng.normal(size=s).astype(np.float32) for s in shapes]
    got = gc.onnx.load(model(equation, shapes)).bind(ctx).run(**{f"x{k}": x for k, x in enumerate(xs)})["y"]
    want = np.einsum(equation, *[x.astype(np.float64) for x in xs])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_three_operands_are_refused_at_bind(ctx):
    with pytest.raises(gc.UnsupportedError, match="3 operands"):
        gc.onnx.load(model("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)])).bind(ctx)
