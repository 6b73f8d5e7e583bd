"""DispatchPlan: what recording one :class:`~guestcompute.ops.base.Dispatch`
needs beyond its push bytes and groups, resolved once.

That is the pipeline (created on first use), the hazard keys it reads and
writes (for barriers), the resources whose last epoch it bumps (``stamped``), the imported
buffers among them, its descriptor entry, and its commands as one struct
for the command interpreter. The plan is kept on the
Dispatch (``Dispatch.resolved``), so an op that returns the same Dispatch
again (a remembered call, see ``ops/memo.py``) records with no lookups.
"""
from __future__ import annotations

from ..errors import RecordingError
from ..image import ImageBinding, SamplerBinding
from ..vk.command_stream import DispatchCommand


def resolve_image_binding(ctx, b: ImageBinding) -> None:
    """Fill in the view (and sampler) an image binding's descriptor needs."""
    if not b.still_current:
        raise RecordingError("an image was rebound after this dispatch was planned; plan the op again "
                             "(programs that captured the image re-record by themselves)")
    views = ctx.device.image_views
    if b.view is None:
        b.view = views.view(b.image, b.vk_format, b.mip, b.layer, b.view_usage)
    if b.kind == "sampled" and b.sampler_handle is None:
        b.sampler_handle = views.sampler(b.sampler)


class DispatchPlan:
    __slots__ = ("ctx", "spec", "bindings", "indirect", "pipe", "reads", "writes", "stamped", "imports",
                 "writes_mapped", "desc", "images", "image_bindings", "command", "epoch",
                 "import_stages", "import_access", "import_written")

    def __init__(self, ctx, d):
        pipe = ctx.device.pipelines.resolve(d.spec, d.spirv, d.spec_constants)
        reads, writes, imports, images, image_bindings = [], [], [], {}, []
        writes_mapped = False
        stamped = []          # what the recorder stamps with the epoch that last used it
        for b, (r, w) in zip(d.bindings, pipe.bindings):
            if r:
                reads.extend(b.hazard_keys)
            if w:
                writes.extend(b.hazard_keys)
                if b.alloc is not None and b.alloc.mapped is not None:
                    writes_mapped = True
            if b.host_access is not None:
                imports.append((b, w))
            if isinstance(b, SamplerBinding):
                if b.sampler_handle is None:
                    b.sampler_handle = ctx.device.image_views.sampler(b.sampler)
                stamped.append(b)
            elif isinstance(b, ImageBinding):
                resolve_image_binding(ctx, b)
                image_bindings.append(b)
                img = b.image
                seen = images.get(img.uid)        # an image bound twice is written if either binding writes
                images[img.uid] = (img, bool(w) or (seen is not None and seen[1]))
                stamped.append(img)
            else:
                stamped.append(b)
        if d.indirect is not None:
            reads.extend(d.indirect[0].hazard_keys)
            stamped.append(d.indirect[0])
        self.ctx = ctx
        self.spec = d.spec
        self.bindings = d.bindings
        self.indirect = d.indirect
        self.pipe = pipe
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.stamped = tuple(stamped)
        self.imports = tuple(imports)
        # The OR of the imports' declared host accesses: the entry barrier
        # waits for them unless the recording's earlier ones covered them.
        self.import_stages = self.import_access = 0
        for b, _ in imports:
            self.import_stages |= b.host_access.stages
            self.import_access |= b.host_access.access
        self.import_written = any(w for _, w in imports)
        # (Image, written) of images that need entry work: imported ones
        # (their layout) and guest ones still waiting for their first layout.
        self.images = tuple(v for v in images.values() if v[0].imported or v[0].pending_init)
        self.image_bindings = tuple(image_bindings)
        self.writes_mapped = writes_mapped
        self.epoch = 0        # the recorder stamps the buffers' last epoch once per epoch
        self.desc = ctx.device.descriptors.get(pipe.set_layout, d.bindings)
        # Its commands as the command interpreter's struct (see vk/command_stream.py).
        # Its hazard keys go with it: the walker decides its barrier.
        self.command = DispatchCommand(pipe, self.desc, d.push, d.groups, d.indirect, self.reads, self.writes)

    def is_current_for(self, ctx, d) -> bool:
        """The one rule for reusing a plan: valid while the Dispatch still
        names the same spec, buffers and indirect arguments (its Buffers are
        alive, so their uids and descriptors are too) in the same context,
        and none of its images was rebound. (The encoder's hot path inlines
        it; tests/recording/test_plan_validity.py holds the two equal.)"""
        return (self.ctx is ctx and self.spec is d.spec and self.bindings is d.bindings
                and self.indirect is d.indirect and self.images_current())

    def images_current(self) -> bool:
        """None of the plan's image bindings was rebound since it was made."""
        return all(b.still_current for b in self.image_bindings)


def plan_for(ctx, d) -> DispatchPlan:
    """The Dispatch's kept plan if it still fits, else a new one (kept when
    the Dispatch's buffer tuples cannot change under it)."""
    plan = d.resolved
    if plan is not None and plan.is_current_for(ctx, d):
        ctx.device.pipelines.count_hit()
        return plan
    plan = DispatchPlan(ctx, d)
    if type(d.bindings) is tuple and (d.indirect is None or type(d.indirect) is tuple):
        d.resolved = plan
    return plan
