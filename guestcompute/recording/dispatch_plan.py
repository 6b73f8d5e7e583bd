"""DispatchPlan: what recording one :class:`~guestcompute.ops.base.Dispatch`
needs beyond its push bytes and groups, resolved once.

That is the pipeline (created on first use), the hazard keys it reads and
writes (for barriers), the buffers whose last epoch it bumps, the imported
buffers among them, and its descriptor entry. The plan is kept on the
Dispatch (``Dispatch.resolved``), so an op that returns the same Dispatch
again (a memoized plan, see ``ops/memo.py``) records with no lookups.
"""
from __future__ import annotations


class DispatchPlan:
    __slots__ = ("ctx", "spec", "buffer_tuple", "indirect", "pipe", "reads", "writes", "buffers", "imports",
                 "writes_mapped", "desc")

    def __init__(self, ctx, d):
        pipe = ctx.device.pipelines.resolve(d.spec, d.spirv, d.spec_constants)
        reads, writes, imports = [], [], []
        writes_mapped = False
        for b, (r, w) in zip(d.buffers, pipe.bindings):
            if r:
                reads.extend(b.hazard_keys)
            if w:
                writes.extend(b.hazard_keys)
                if b.alloc is not None and b.alloc.mapped is not None:
                    writes_mapped = True
            if b.host_access is not None:
                imports.append((b, w))
        buffers = list(d.buffers)
        if d.indirect is not None:
            reads.extend(d.indirect[0].hazard_keys)
            buffers.append(d.indirect[0])
        self.ctx = ctx
        self.spec = d.spec
        self.buffer_tuple = d.buffers
        self.indirect = d.indirect
        self.pipe = pipe
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.buffers = tuple(buffers)
        self.imports = tuple(imports)
        self.writes_mapped = writes_mapped
        self.desc = ctx.device.descriptors.get(pipe.set_layout, d.buffers)

    def still_fits(self, ctx, d) -> bool:
        """Valid while the Dispatch still names the same spec and buffers (its
        Buffers are alive, so their uids and descriptors are too)."""
        return (self.ctx is ctx and self.spec is d.spec and self.buffer_tuple is d.buffers
                and self.indirect is d.indirect)


def plan_for(ctx, d) -> DispatchPlan:
    """The Dispatch's kept plan if it still fits, else a new one (kept when
    the Dispatch's buffer tuples cannot change under it)."""
    plan = d.resolved
    if plan is not None and plan.still_fits(ctx, d):
        ctx.device.pipelines.count_hit()
        return plan
    plan = DispatchPlan(ctx, d)
    if type(d.buffers) is tuple and (d.indirect is None or type(d.indirect) is tuple):
        d.resolved = plan
    return plan
