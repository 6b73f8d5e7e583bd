"""The particles in back-to-front order, sorted on the GPU every frame.

The simulation writes each particle's nearness to the viewer into z of the
host's position buffer (the renderer ignores it). :meth:`DepthSort.record`,
recorded into the renderer's command buffer after the simulation and before
the render pass, argsorts those depths — ascending, so the farthest particle
comes first — straight into the renderer's index buffer, which the host draws
with ``vkCmdDrawIndexed`` and "over" blending: nearer particles cover
farther ones, as transparent things must be drawn.

The index buffer is imported with ``host_access="index"``: the guest waits
for the previous frame's index reads before writing it and hands its writes
to the index-input stage afterwards; the host adds no barrier. The sort's
GPU time comes from a timing scope, read when the frame's epoch retires.
"""
from __future__ import annotations

import numpy as np

SCOPE = "depth sort"


class DepthSort:
    def __init__(self, ctx, positions, index_buffer, count: int):
        self.ctx = ctx
        self.count = count
        self.depths = positions[:, 2]          # a strided view: z of each vec4
        self.order = ctx.import_buffer(index_buffer, (count,), "uint32", host_access="index",
                                       buffer_size=count * 4)
        # Timestamps are optional in Vulkan: without them the sort runs untimed.
        self.timed = ctx.timestamps.supported

    def record(self, rec) -> None:
        if not self.timed:
            rec.argsort(self.depths, out=self.order)
            return
        with rec.timing(SCOPE):
            rec.argsort(self.depths, out=self.order)

    def check(self) -> str:
        """Read back the last frame's depths and draw order (call once the
        GPU is idle): "" if the order is numpy's stable argsort of the
        depths, else what is wrong."""
        return order_error(self.order.numpy(), self.depths.numpy())


def order_error(order: np.ndarray, depths: np.ndarray) -> str:
    """"" if ``order`` draws ``depths`` back to front, exactly as
    ``np.argsort(depths, kind="stable")`` does; else what differs."""
    if order.shape != depths.shape:
        return f"order has shape {order.shape}, depths {depths.shape}"
    if not np.array_equal(np.sort(order), np.arange(order.size)):
        return "the order is not a permutation of the particles"
    drawn = depths[order]
    if (drawn[1:] < drawn[:-1]).any():
        return f"{int((drawn[1:] < drawn[:-1]).sum())} particles drawn before a farther one"
    if not np.array_equal(order, np.argsort(depths, kind="stable")):
        return "equal depths out of index order (not numpy's stable argsort)"
    return ""
