"""Recording cost per dispatch: a cached op recorded through the library vs
a hand-written raw-cffi loop issuing the same Vulkan calls.

The raw loop is what a careful host author would write by hand: every
struct built ahead of time, device-level function pointers, no Python
wrappers. It issues exactly the commands the library records for the same
work (one pipeline bind, entry and exit barriers, then per dispatch: push
descriptors when the buffer set changes, push constants, dispatch, and a
barrier where the next dispatch depends on the previous one), so the ratio
is the library's own overhead: validation, planning, hazard tracking and
bookkeeping.

Three workloads, each a "frame" recorded into a fresh host command buffer:

- ``distinct``: ``rec.add(a_i, b_i, out=c_i)`` over 64 buffer sets whose
  outputs are ranges of one host vertex buffer (imported), repeated every
  frame (the steady state of a renderer's frame loop);
- ``chained``: ``rec.add(x, y, out=x)`` 64 times — every dispatch needs a
  barrier, descriptors stay bound;
- ``dispatch``: the same 64 distinct dispatches, already planned, through
  ``rec.dispatch`` (the path programs and custom ops take).
"""
from __future__ import annotations

import vulkan as vk
from vulkan import ffi

from .results import Result, interleaved

N_SETS = 64
N_ELEMS = 1024
_BIND = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_STAGE = vk.VK_SHADER_STAGE_COMPUTE_BIT
_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_RW = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT


class _RawDispatch:
    """Everything one hand-written dispatch needs, built before the loop."""

    def __init__(self, ctx, d):
        pipe = ctx.device.pipelines.resolve(d.spec, d.spirv, d.spec_constants)
        n = len(d.bindings)
        self.pipe = pipe.handle
        self.layout = pipe.layout
        self.infos = ffi.new("VkDescriptorBufferInfo[]", n)
        self.writes = ffi.new("VkWriteDescriptorSet[]", n)
        for i, b in enumerate(d.bindings):
            self.infos[i].buffer = b.handle
            self.infos[i].offset = 0
            self.infos[i].range = b.size
            w = self.writes[i]
            w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
            w.dstBinding = i
            w.descriptorCount = 1
            w.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
            w.pBufferInfo = self.infos + i
        self.n = n
        self.push = ffi.new("char[]", d.push)
        self.push_size = len(d.push)
        self.groups = d.groups


def _barrier(src_access, dst_access):
    bar = ffi.new("VkMemoryBarrier *")
    bar.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
    bar.srcAccessMask = src_access
    bar.dstAccessMask = dst_access
    return bar


class RecordBench:
    """Builds the three workloads once; each ``*_frame`` method records one
    frame into a fresh command buffer and returns the seconds spent recording."""

    def __init__(self, host, ctx):
        import numpy as np
        self.host, self.ctx = host, ctx
        fns = self.fns = ctx.device.fns
        if not ctx.device.descriptors.push:
            raise RuntimeError("the record benchmark needs VK_KHR_push_descriptor")
        self.push_desc = fns.vkCmdPushDescriptorSetKHR
        rng = np.random.default_rng(1)
        size = N_SETS * N_ELEMS * 4
        self.vbuf = host.create_buffer(size)
        self.sets = []
        for i in range(N_SETS):
            a = ctx.tensor(rng.standard_normal(N_ELEMS).astype(np.float32))
            b = ctx.tensor(rng.standard_normal(N_ELEMS).astype(np.float32))
            c = ctx.import_buffer(self.vbuf, (N_ELEMS,), "float32", offset=i * N_ELEMS * 4,
                                  host_access="vertex", buffer_size=size)
            self.sets.append((a, b, c))
        self.x = ctx.tensor(np.zeros(N_ELEMS, np.float32))
        self.y = ctx.tensor(np.ones(N_ELEMS, np.float32))
        add = _op("add")
        self.planned = [add(ctx, a, b, out=c).dispatches[0] for a, b, c in self.sets]
        self.raw_sets = [_RawDispatch(ctx, d) for d in self.planned]
        self.raw_chain = _RawDispatch(ctx, add(ctx, self.x, self.y, out=self.x).dispatches[0])
        vertex = vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT
        attr = vk.VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT
        # The barriers the library records for this work (entry: earlier guest
        # work and the host's vertex reads; exit: guest writes → vertex input).
        self.entry_src = _COMPUTE | _TRANSFER | vertex
        self.entry = _barrier(vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | attr, _RW)
        self.exit = _barrier(vk.VK_ACCESS_SHADER_WRITE_BIT, attr)
        self.chain_entry = _barrier(vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT, _RW)
        self.chain_bar = _barrier(vk.VK_ACCESS_SHADER_WRITE_BIT, _RW)
        # Guest memory the host can map gets an exit barrier to host reads.
        self.chain_exit = _barrier(vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        self.chain_mapped = self.x.buffer.alloc.mapped is not None

    # -- command buffers ---------------------------------------------------
    def _frame(self, record):
        host, fns = self.host, self.fns
        cmd = host.begin()
        t0 = _now()
        record(cmd)
        dt = _now() - t0
        fns.vkEndCommandBuffer(cmd)
        fns.vkFreeCommandBuffers(host.device, host.command_pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))
        self.ctx.retire(self.ctx.advance_epoch())
        return dt

    # -- guestcompute --------------------------------------------------------
    def lib_distinct(self):
        def record(cmd):
            with self.ctx.record(cmd) as rec:
                add = rec.add
                for a, b, c in self.sets:
                    add(a, b, out=c)
        return self._frame(record)

    def lib_chained(self):
        x, y = self.x, self.y

        def record(cmd):
            with self.ctx.record(cmd) as rec:
                add = rec.add
                for _ in range(N_SETS):
                    add(x, y, out=x)
        return self._frame(record)

    def lib_dispatch(self):
        def record(cmd):
            with self.ctx.record(cmd) as rec:
                dispatch = rec.dispatch
                for d in self.planned:
                    dispatch(d)
        return self._frame(record)

    # -- the hand-written loops ------------------------------------------------
    def raw_distinct(self):
        fns, push_desc = self.fns, self.push_desc
        bind, pushc, disp, barrier = (fns.vkCmdBindPipeline, fns.vkCmdPushConstants, fns.vkCmdDispatch,
                                      fns.vkCmdPipelineBarrier)
        sets, entry, exit_, src = self.raw_sets, self.entry, self.exit, self.entry_src

        def record(cmd):
            barrier(cmd, src, _COMPUTE, 0, 1, entry, 0, ffi.NULL, 0, ffi.NULL)
            bind(cmd, _BIND, sets[0].pipe)
            for r in sets:
                push_desc(cmd, _BIND, r.layout, 0, r.n, r.writes)
                pushc(cmd, r.layout, _STAGE, 0, r.push_size, r.push)
                gx, gy, gz = r.groups
                disp(cmd, gx, gy, gz)
            barrier(cmd, _COMPUTE, vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, 0, 1, exit_, 0, ffi.NULL, 0, ffi.NULL)
        return self._frame(record)

    def raw_chained(self):
        fns, push_desc = self.fns, self.push_desc
        bind, pushc, disp, barrier = (fns.vkCmdBindPipeline, fns.vkCmdPushConstants, fns.vkCmdDispatch,
                                      fns.vkCmdPipelineBarrier)
        r, entry, bar = self.raw_chain, self.chain_entry, self.chain_bar
        exit_, mapped = self.chain_exit, self.chain_mapped

        def record(cmd):
            barrier(cmd, _COMPUTE | _TRANSFER, _COMPUTE, 0, 1, entry, 0, ffi.NULL, 0, ffi.NULL)
            bind(cmd, _BIND, r.pipe)
            push_desc(cmd, _BIND, r.layout, 0, r.n, r.writes)
            for i in range(N_SETS):
                if i:
                    barrier(cmd, _COMPUTE, _COMPUTE, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)
                pushc(cmd, r.layout, _STAGE, 0, r.push_size, r.push)
                gx, gy, gz = r.groups
                disp(cmd, gx, gy, gz)
            if mapped:
                barrier(cmd, _COMPUTE, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, exit_, 0, ffi.NULL, 0, ffi.NULL)
        return self._frame(record)


def _now():
    import time
    return time.perf_counter()


def _op(name):
    from guestcompute.ops.base import registered_ops
    return registered_ops()[name]


def check_same_commands(bench) -> None:
    """The raw loops must issue what the library issues: compare the
    recorder's own dispatch and barrier counts with the raw loop's."""
    ctx, host = bench.ctx, bench.host
    for work, want_barriers in ((bench.sets, 2), (None, N_SETS + bench.chain_mapped)):
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            if work is None:
                for _ in range(N_SETS):
                    rec.add(bench.x, bench.y, out=bench.x)
            else:
                for a, b, c in work:
                    rec.add(a, b, out=c)
        host.fns.vkEndCommandBuffer(cmd)
        host.fns.vkFreeCommandBuffers(host.device, host.command_pool, 1, ffi.new("VkCommandBuffer[1]", [cmd]))
        if rec.dispatches != N_SETS or rec.barriers != want_barriers:
            raise AssertionError(f"recorder issued {rec.dispatches} dispatches / {rec.barriers} barriers; "
                                 f"the raw loop issues {N_SETS} / {want_barriers}")


def run(env) -> list:
    from guestcompute.testing import HeadlessHost
    host = HeadlessHost("modern", validation=False, device=env.device)
    ctx = host.adopt()
    try:
        bench = RecordBench(host, ctx)
        check_same_commands(bench)
        repeat = 15 if env.quick else 60
        t = interleaved({
            "lib_distinct": bench.lib_distinct, "raw_distinct": bench.raw_distinct,
            "lib_chained": bench.lib_chained, "raw_chained": bench.raw_chained,
            "lib_dispatch": bench.lib_dispatch,
        }, repeat=repeat, warmup=3)
        us = {k: v / N_SETS * 1e6 for k, v in t.items()}
        walker = {"native": "C command interpreter", "python": "Python walker"}[ctx.device.interpreter.kind]
        raw_note = (f"raw cffi: prebuilt structs, device function pointers, same commands; "
                    f"guestcompute batches through its {walker}")
        return [
            Result("record", "op into a host buffer, distinct buffer sets (rec.add)", us["lib_distinct"],
                   "µs/dispatch", "raw cffi loop", us["raw_distinct"], "ratio<=1.3",
                   note=f"{N_SETS} dispatches per frame, steady state; {raw_note}"),
            Result("record", "op chained in place, barrier per dispatch (rec.add)", us["lib_chained"],
                   "µs/dispatch", "raw cffi loop", us["raw_chained"], "ratio<=1.3",
                   note=f"{N_SETS} dispatches per frame; {raw_note}"),
            Result("record", "planned dispatch, distinct buffer sets (rec.dispatch)", us["lib_dispatch"],
                   "µs/dispatch", "raw cffi loop", us["raw_distinct"], "ratio<=1.3",
                   note=f"no op planning: the path programs and custom ops take; {walker}"),
        ]
    finally:
        ctx.close()
        host.close()


def main(argv=None) -> int:
    """``python -m benchmarks.record_cost [--profile]``: the three workloads,
    and with ``--profile`` where the library's time goes (cProfile)."""
    import argparse
    import cProfile
    import pstats
    import types
    p = argparse.ArgumentParser(description="recording cost per dispatch vs a raw cffi loop")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--device")
    args = p.parse_args(argv)
    env = types.SimpleNamespace(quick=False, device=args.device, out=None)
    for r in run(env):
        print(f"{r.name:58s} {r.value:7.2f} {r.unit} vs {r.baseline_value:6.2f}  ratio {r.ratio:5.2f}")
    if args.profile:
        from guestcompute.testing import HeadlessHost
        host = HeadlessHost("modern", validation=False, device=args.device)
        ctx = host.adopt()
        try:
            bench = RecordBench(host, ctx)
            for name in ("lib_distinct", "lib_chained"):
                fn = getattr(bench, name)
                fn()
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(50):
                    fn()
                prof.disable()
                print(f"\n--- {name}: 50 frames of {N_SETS} dispatches")
                pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        finally:
            ctx.close()
            host.close()
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
