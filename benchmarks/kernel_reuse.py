"""200 uses of one kernel on 200 distinct buffer sets, cold start (a fresh
context per round; the steady state is measured in ``benchmarks/memory.py``):
pipelines created and host time per use, guestcompute vs the pattern Kompute users hit (an
"algorithm" object per buffer set: shader module, set layout, descriptor
pool and set, pipeline layout and pipeline created for each use, destroyed
after it — Kompute #442), reproduced here with raw Vulkan calls.

Both sides record all 200 uses into one command buffer, submit it once and
wait, so the GPU work is identical; the time per use includes creating (and,
for the raw pattern, destroying) what each use needs. guestcompute runs in a
fresh context each round without its persisted pipeline cache, so the one
pipeline it needs is created cold too (the persisted cache is measured on
its own elsewhere).
"""
from __future__ import annotations

import struct
import time

import numpy as np
import vulkan as vk
from vulkan import ffi

from .results import Result

USES = 200
N = 1024
_STORAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
_COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT


def _check(what, res):
    if res != vk.VK_SUCCESS:
        raise RuntimeError(f"{what} failed: VkResult {res}")


class KomputePattern:
    """One use = every object an algorithm needs, created for its buffers."""

    def __init__(self, host, spirv: bytes, push_size: int, workgroup: tuple):
        self.host, self.fns, self.dev = host, host.fns, host.device
        self.code = ffi.new("char[]", spirv)
        self.code_size = len(spirv)
        self.push_size = push_size
        self.consts = struct.pack("<3I", *workgroup)

    def use(self, cmd, buffers, push: bytes, groups) -> list:
        fns, dev = self.fns, self.dev
        made = []
        info = ffi.new("VkShaderModuleCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                     "codeSize": self.code_size,
                                                     "pCode": ffi.cast("uint32_t *", self.code)})
        module = ffi.new("VkShaderModule *")
        _check("vkCreateShaderModule", fns.vkCreateShaderModule(dev, info, ffi.NULL, module))
        made.append(("module", module[0]))
        n = len(buffers)
        binds = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": i, "descriptorType": _STORAGE, "descriptorCount": 1, "stageFlags": _COMPUTE}
            for i in range(n)])
        sl_info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": n, "pBindings": binds})
        set_layout = ffi.new("VkDescriptorSetLayout *")
        _check("vkCreateDescriptorSetLayout", fns.vkCreateDescriptorSetLayout(dev, sl_info, ffi.NULL, set_layout))
        made.append(("set_layout", set_layout[0]))
        size = ffi.new("VkDescriptorPoolSize *", {"type": _STORAGE, "descriptorCount": n})
        pool_info = ffi.new("VkDescriptorPoolCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": 1, "poolSizeCount": 1,
            "pPoolSizes": size})
        pool = ffi.new("VkDescriptorPool *")
        _check("vkCreateDescriptorPool", fns.vkCreateDescriptorPool(dev, pool_info, ffi.NULL, pool))
        made.append(("pool", pool[0]))
        alloc = ffi.new("VkDescriptorSetAllocateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool[0],
            "descriptorSetCount": 1, "pSetLayouts": set_layout})
        dset = ffi.new("VkDescriptorSet *")
        _check("vkAllocateDescriptorSets", fns.vkAllocateDescriptorSets(dev, alloc, dset))
        infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": b.handle, "offset": 0, "range": b.size}
                                                     for b in buffers])
        writes = ffi.new("VkWriteDescriptorSet[]", [
            {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": dset[0], "dstBinding": i,
             "descriptorCount": 1, "descriptorType": _STORAGE, "pBufferInfo": infos + i} for i in range(n)])
        fns.vkUpdateDescriptorSets(dev, n, writes, 0, ffi.NULL)
        prange = ffi.new("VkPushConstantRange *", {"stageFlags": _COMPUTE, "offset": 0, "size": self.push_size})
        pl_info = ffi.new("VkPipelineLayoutCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
            "pSetLayouts": set_layout, "pushConstantRangeCount": 1, "pPushConstantRanges": prange})
        layout = ffi.new("VkPipelineLayout *")
        _check("vkCreatePipelineLayout", fns.vkCreatePipelineLayout(dev, pl_info, ffi.NULL, layout))
        made.append(("layout", layout[0]))
        entries = ffi.new("VkSpecializationMapEntry[]", [{"constantID": i, "offset": 4 * i, "size": 4}
                                                         for i in range(3)])
        data = ffi.new("char[]", self.consts)
        spec = ffi.new("VkSpecializationInfo *", {"mapEntryCount": 3, "pMapEntries": entries,
                                                  "dataSize": len(self.consts), "pData": data})
        name = ffi.new("char[]", b"main")
        pinfo = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": _COMPUTE,
                      "module": module[0], "pName": name, "pSpecializationInfo": spec},
            "layout": layout[0], "basePipelineIndex": -1})
        pipe = ffi.new("VkPipeline *")
        _check("vkCreateComputePipelines", fns.vkCreateComputePipelines(dev, ffi.NULL, 1, pinfo, ffi.NULL, pipe))
        made.append(("pipeline", pipe[0]))
        bind = vk.VK_PIPELINE_BIND_POINT_COMPUTE
        fns.vkCmdBindPipeline(cmd, bind, pipe[0])
        fns.vkCmdBindDescriptorSets(cmd, bind, layout[0], 0, 1, dset, 0, ffi.NULL)
        fns.vkCmdPushConstants(cmd, layout[0], _COMPUTE, 0, len(push), push)
        fns.vkCmdDispatch(cmd, *groups)
        return made

    def destroy(self, made) -> None:
        fns, dev = self.fns, self.dev
        kill = {"module": fns.vkDestroyShaderModule, "set_layout": fns.vkDestroyDescriptorSetLayout,
                "pool": fns.vkDestroyDescriptorPool, "layout": fns.vkDestroyPipelineLayout,
                "pipeline": fns.vkDestroyPipeline}
        for kind, handle in reversed(made):
            kill[kind](dev, handle, ffi.NULL)


def _sets(ctx, rng):
    return [(ctx.tensor(rng.standard_normal(N).astype(np.float32)),
             ctx.tensor(rng.standard_normal(N).astype(np.float32)), ctx.empty((N,))) for _ in range(USES)]


def library_round(host, rng) -> tuple:
    ctx = host.adopt(persist_pipeline_cache=False)
    try:
        sets = _sets(ctx, rng)
        t0 = time.perf_counter()
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            for a, b, c in sets:
                rec.add(a, b, out=c)
        host.submit_and_wait(cmd)
        dt = time.perf_counter() - t0
        a, b, c = sets[-1]
        np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)
        return dt, ctx.cache_stats()["pipelines_created"]
    finally:
        ctx.close()


def kompute_round(host, rng) -> tuple:
    from guestcompute.ops.base import registered_ops
    ctx = host.adopt(persist_pipeline_cache=False)     # only for tensors and the add kernel's SPIR-V
    try:
        sets = _sets(ctx, rng)
        add = registered_ops()["add"]
        planned = [add(ctx, a, b, out=c).dispatches[0] for a, b, c in sets]
        spec = planned[0].spec
        pattern = KomputePattern(host, ctx.device.spirv.get(spec.render(), spec.target_env), spec.push_size,
                                 spec.workgroup)
        t0 = time.perf_counter()
        cmd = host.begin()
        made = [pattern.use(cmd, d.bindings, d.push, d.groups) for d in planned]
        host.submit_and_wait(cmd)
        for m in made:
            pattern.destroy(m)
        dt = time.perf_counter() - t0
        a, b, c = sets[-1]
        np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy(), rtol=1e-6)
        return dt, sum(1 for m in made for kind, _ in m if kind == "pipeline")
    finally:
        ctx.close()


def measure(device, rounds: int) -> dict:
    from guestcompute.testing import HeadlessHost
    host = HeadlessHost("modern", validation=False, device=device)
    try:
        rng = np.random.default_rng(2)
        lib_t, raw_t = [], []
        for _ in range(rounds):           # alternate, so drift hits both
            t, lib_pipes = library_round(host, rng)
            lib_t.append(t)
            t, raw_pipes = kompute_round(host, rng)
            raw_t.append(t)
        return {"lib_us": min(lib_t) / USES * 1e6, "raw_us": min(raw_t) / USES * 1e6,
                "lib_pipes": lib_pipes, "raw_pipes": raw_pipes, "rounds": rounds}
    finally:
        host.close()


# The drivers' own shader disk caches (Mesa's, NVIDIA's) turn the 200 "new"
# pipelines of the raw pattern into cache hits after the first run; a second
# measurement in a child process without them shows the pattern's own cost.
NO_DRIVER_CACHES = {"MESA_SHADER_CACHE_DISABLE": "true", "MESA_GLSL_CACHE_DISABLE": "true",
                    "__GL_SHADER_DISK_CACHE": "0"}


def run(env) -> list:
    import json
    import os
    import subprocess
    import sys
    import tempfile
    rounds = 2 if env.quick else 4
    found = measure(env.device, rounds)
    rows = [
        Result("kernel reuse", f"{USES} uses of one kernel, distinct buffer sets: pipelines created",
               found["lib_pipes"], "pipelines", "new pipeline per use (Kompute pattern, raw Vulkan)",
               found["raw_pipes"], "value<=1"),
        Result("kernel reuse", f"{USES} uses of one kernel, distinct buffer sets, cold start: time per use",
               found["lib_us"], "µs/use", "new pipeline per use (Kompute pattern, raw Vulkan)", found["raw_us"],
               note="create + record + submit/wait (+ destroy), best of "
                    f"{rounds} rounds; a fresh context each round, so its one pipeline is created cold "
                    "(the steady state is the row in benchmarks/memory.py); driver shader caches as found"),
    ]
    with tempfile.TemporaryDirectory(prefix="gc-reuse-") as tmp:
        child_env = dict(os.environ, **NO_DRIVER_CACHES, __GL_SHADER_DISK_CACHE_PATH=tmp)
        cmd = [sys.executable, "-m", "benchmarks.kernel_reuse", "--child", "--rounds", str(rounds)]
        if env.device is not None:
            cmd += ["--device", str(env.device)]
        proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=900,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if proc.returncode == 0:
        cold = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(Result("kernel reuse", f"{USES} uses of one kernel, cold start: time per use, driver shader "
                           "caches off", cold["lib_us"], "µs/use", "new pipeline per use (Kompute pattern, raw Vulkan)",
                           cold["raw_us"], note=f"separate process; best of {rounds} rounds"))
    else:
        rows.append(Result("kernel reuse", f"{USES} uses of one kernel: time per use, driver shader caches off",
                           skipped=f"child process failed: {proc.stderr.strip()[-300:]}"))
    return rows


def main(argv=None) -> int:
    import argparse
    import json
    p = argparse.ArgumentParser(description="pipelines created and time per use: reuse vs Kompute pattern")
    p.add_argument("--child", action="store_true", help="print one JSON line (used by run())")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--device")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.device, args.rounds)))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
