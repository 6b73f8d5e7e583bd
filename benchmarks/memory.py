"""Host time of new tensors: suballocated vs one device-memory allocation
each, and kernel reuse in steady state on buffer sets never seen before.

- **create + first use**: make a small tensor and record its first op
  (``rec.add(a, a, out=t)``: a new buffer set, so a new descriptor entry).
  guestcompute's path (a VkBuffer bound in a shared block, or a recycled
  one) against the same library with one ``vkAllocateMemory`` per tensor
  (what every tensor cost before suballocation, and what Kompute does),
  the tensors kept alive so nothing is recycled, then in a steady loop
  that drops them (recycled). The VkBuffer calls per tensor
  (create, requirements, bind, destroy) are timed on their own too: what a
  tensor-per-VkBuffer design pays over handing out sub-ranges of one
  VkBuffer per block.
- **kernel reuse, steady state** (the performance issue's row): one
  context with its pipelines warm, 1,000 uses of one kernel, each on three
  fresh tensors, against the Kompute pattern in the same run — module, set
  layout, descriptor pool and set, pipeline layout and pipeline created per
  use, and one allocation per buffer — everything destroyed after use.
"""
from __future__ import annotations

import time

import numpy as np
from vulkan import ffi

from .kernel_reuse import KomputePattern
from .results import Result

N = 256            # float32s per tensor: 1 KiB
CREATES = 2000
USES = 1000


def _dedicated_tensor(ctx, shape):
    """A tensor with memory of its own, made as before suballocation."""
    from guestcompute.tensor import Buffer, Tensor
    alloc = ctx.device.memory.create(int(np.prod(shape)) * 4)
    return Tensor(Buffer(ctx, alloc.buffer, alloc.size, alloc), shape, "float32"), alloc


def _create_and_use(host, ctx, count: int, dedicated: bool, keep: bool) -> tuple:
    """(create µs, first-use µs) per tensor for ``count`` tensors recorded
    into one command buffer."""
    a = ctx.tensor(np.ones(N, np.float32))
    made, allocs = [], []
    create = use = 0.0
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for _ in range(count):
            t0 = time.perf_counter()
            if dedicated:
                t, alloc = _dedicated_tensor(ctx, (N,))
                allocs.append(alloc)
            else:
                t = ctx.empty((N,))
            t1 = time.perf_counter()
            rec.add(a, a, out=t)
            create += t1 - t0
            use += time.perf_counter() - t1
            if keep or dedicated:
                made.append(t)
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(t.numpy(), np.full(N, 2, np.float32))      # the last tensor made
    del made, t
    ctx.retire()
    for alloc in allocs:
        ctx.device.memory.destroy(alloc)
    return create / count * 1e6, use / count * 1e6


def _vk_buffer_calls(ctx, count: int) -> float:
    """µs per VkBuffer created, its requirements read, bound and destroyed."""
    keep = ctx.empty((N,))          # a block to bind into
    alloc = keep.buffer.alloc
    mem, fns, dev = ctx.device.memory, ctx.device.fns, ctx.device.handle
    t0 = time.perf_counter()
    for _ in range(count):
        buffer, _reqs = mem.new_buffer(N * 4, alloc.usage)
        fns.vkBindBufferMemory(dev, buffer, alloc.memory, alloc.offset)
        fns.vkDestroyBuffer(dev, buffer, ffi.NULL)
    del keep
    return (time.perf_counter() - t0) / count * 1e6


def _library_uses(host, ctx, uses: int) -> float:
    """µs per use: three fresh tensors and one add, recorded and submitted."""
    x = ctx.tensor(np.ones(N, np.float32))
    t0 = time.perf_counter()
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for _ in range(uses):
            a, b, c = ctx.empty((N,)), ctx.empty((N,)), ctx.empty((N,))
            rec.add(x, x, out=a)
            rec.add(a, x, out=b)
            rec.add(a, b, out=c)
    host.submit_and_wait(cmd)
    ctx.retire()
    return (time.perf_counter() - t0) / uses * 1e6


def _kompute_uses(host, ctx, uses: int) -> float:
    """µs per use of the Kompute pattern: every object of an algorithm and
    a memory allocation per buffer, made for each use and destroyed after."""
    from guestcompute.ops.base import registered_ops
    x = ctx.tensor(np.ones(N, np.float32))
    add = registered_ops()["add"]
    probe = add(ctx, x, x, out=ctx.empty((N,))).dispatches[0]
    spec = probe.spec
    pattern = KomputePattern(host, ctx.device.spirv.get(spec.render(), spec.target_env), spec.push_size,
                             spec.workgroup)
    t0 = time.perf_counter()
    cmd = host.begin()
    made, allocs = [], []
    # Same shapes every use: the push bytes and groups are planned once, so
    # the pattern pays only for its Vulkan objects and allocations.
    push, groups = probe.push, probe.groups
    for _ in range(uses):
        (a, aa), (b, ba), (c, ca) = (_dedicated_tensor(ctx, (N,)) for _ in range(3))
        allocs += [aa, ba, ca]
        for buffers in ((x.buffer, x.buffer, a.buffer), (a.buffer, x.buffer, b.buffer),
                        (a.buffer, b.buffer, c.buffer)):
            made.append(pattern.use(cmd, buffers, push, groups))
    host.submit_and_wait(cmd)
    for m in made:
        pattern.destroy(m)
    for alloc in allocs:
        ctx.device.memory.destroy(alloc)
    return (time.perf_counter() - t0) / uses * 1e6


def measure(device, rounds: int) -> dict:
    from guestcompute.testing import HeadlessHost
    host = HeadlessHost("modern", validation=False, device=device)
    ctx = host.adopt()
    try:
        found = {k: [] for k in ("sub_create", "sub_use", "rec_create", "rec_use", "ded_create", "ded_use",
                                 "vk_buffer", "lib_uses", "raw_uses")}
        _library_uses(host, ctx, 50)          # pipelines warm, blocks made
        _kompute_uses(host, ctx, 20)
        for _ in range(rounds):               # alternate, so drift hits both
            c, u = _create_and_use(host, ctx, CREATES, dedicated=False, keep=True)
            found["sub_create"].append(c)
            found["sub_use"].append(u)
            c, u = _create_and_use(host, ctx, CREATES, dedicated=False, keep=False)
            found["rec_create"].append(c)
            found["rec_use"].append(u)
            c, u = _create_and_use(host, ctx, CREATES, dedicated=True, keep=True)
            found["ded_create"].append(c)
            found["ded_use"].append(u)
            found["vk_buffer"].append(_vk_buffer_calls(ctx, CREATES))
            found["lib_uses"].append(_library_uses(host, ctx, USES))
            found["raw_uses"].append(_kompute_uses(host, ctx, USES))
        best = {k: min(v) for k, v in found.items()}
        best["allocations"] = ctx.live_objects()["allocations"]
        return best
    finally:
        ctx.close()
        host.close()


def run(env) -> list:
    rounds = 2 if env.quick else 4
    f = measure(env.device, rounds)
    base = "one vkAllocateMemory per tensor (same library, same run)"
    note = f"{CREATES} tensors of {N * 4} B, best of {rounds} rounds"
    return [
        Result("memory", "create a small tensor", f["sub_create"], "µs", base, f["ded_create"], "ratio<=0.1",
               note=note + "; kept alive (carved from a block)"),
        Result("memory", "create + first use of a small tensor", f["sub_create"] + f["sub_use"], "µs", base,
               f["ded_create"] + f["ded_use"], "ratio<=0.1",
               note=note + "; first use = rec.add(a, a, out=t), a new descriptor entry"),
        Result("memory", "create + first use, steady loop (recycled buffers)", f["rec_create"] + f["rec_use"], "µs",
               base, f["ded_create"] + f["ded_use"], "ratio<=0.1",
               note=note + "; tensors dropped as they go, their buffers reused"),
        Result("memory", "VkBuffer per tensor: create + requirements + bind + destroy", f["vk_buffer"], "µs",
               "create a small tensor (suballocated, all of it)", f["sub_create"],
               note="what a VkBuffer per tensor costs over sub-ranges of one VkBuffer per block"),
        Result("kernel reuse", f"{USES} uses of one kernel on fresh tensors, steady state: time per use",
               f["lib_uses"], "µs/use", "Kompute pattern: objects + one allocation per buffer, per use",
               f["raw_uses"], "ratio<=0.05",
               note=f"one warm context; each use makes 3 tensors of {N * 4} B and records 3 adds; "
                    f"best of {rounds} rounds"),
    ]


def main(argv=None) -> int:
    import argparse
    import json
    p = argparse.ArgumentParser(description="host time of new tensors and of kernel reuse on them")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.device, args.rounds)))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
