"""Kernel keys: one frozen spec is the input to both the source and the key,
identical specs share a pipeline, different specs never collide."""
import dataclasses

import numpy as np

from guestcompute.ops import all_specs
from guestcompute.ops.elementwise import map_spec
from guestcompute.dtypes import float32, int32


def test_identical_specs_are_one_key_and_one_pipeline(host, ctx):
    s1 = map_spec("x0 + x1", [float32, float32], float32, "contig", 4)
    s2 = dataclasses.replace(s1)                     # equal value, distinct object
    assert s1 is not s2 and s1 == s2 and hash(s1) == hash(s2) and s1.key == s2.key
    assert s1.render() == s2.render()
    p1 = ctx.device.pipelines.resolve(s1)
    created = ctx.cache_stats()["pipelines_created"]
    assert ctx.device.pipelines.resolve(s2) is p1
    assert ctx.cache_stats()["pipelines_created"] == created
    other = map_spec("x0 + x1", [int32, int32], int32, "contig", 4)
    assert other != s1 and other.key != s1.key and other.render() != s1.render()


def test_catalogue_keys_never_collide():
    specs = list(all_specs())
    assert len(specs) > 500
    keys = {}
    for spec in specs:
        assert keys.setdefault(spec.key, spec) == spec, f"two specs share key {spec.key}"
    # Two different specs may render the same source only when they differ in
    # workgroup size, which is a specialization constant (one module, two pipelines).
    by_source = {}
    for spec in specs[:: max(1, len(specs) // 300)]:
        twin = by_source.setdefault(spec.render(), spec)
        assert twin == spec or twin.workgroup != spec.workgroup, (twin, spec)

def test_one_pipeline_per_distinct_spec_over_a_mixed_workload(host, ctx):
    seen = []
    original = ctx.device.pipelines.resolve

    def spy(spec, *args, **kwargs):
        seen.append(spec)
        return original(spec, *args, **kwargs)
    ctx.device.pipelines.resolve = spy
    rng = np.random.default_rng(3)
    x = ctx.tensor(rng.standard_normal((33, 70)).astype(np.float32))
    y = ctx.tensor(rng.standard_normal((70, 9)).astype(np.float32))
    keys = ctx.tensor(rng.integers(0, 1000, 500).astype(np.uint32))

    def work(rec):
        return [rec.add(x, 1.0), rec.mul(x, x), rec.exp(x), rec.sum(x, axis=1), rec.softmax(x),
                rec.matmul(x, y), rec.cumsum(x, axis=0), rec.sort(keys), rec.max(x),
                rec.transpose(x)]
    first = host.run(ctx, work)
    created = ctx.cache_stats()["pipelines_created"]
    assert created <= len(set(seen)), (created, len(set(seen)))
    host.run(ctx, work)                              # same ops, same sizes: nothing new
    x2 = ctx.tensor(rng.standard_normal((5, 70)).astype(np.float32))
    host.run(ctx, lambda rec: [rec.add(x2, 1.0), rec.exp(x2), rec.softmax(x2)])  # new sizes
    assert ctx.cache_stats()["pipelines_created"] == created
    np.testing.assert_allclose(first[5].numpy(), x.numpy() @ y.numpy(), rtol=1e-4, atol=1e-4)
