"""What the hazard decision costs per dispatch: in Python at append time
(the recorder's hazard sets, then an untracked command) against inside the
C walker (a command with hazard keys), for 1000 dispatches appended and
flushed through the C walker, whose device functions are no-ops compiled
here (so only the stream's own cost is measured).

    python -m benchmarks.stream_hazards

Workloads: ``distinct`` (each dispatch reads two keys and writes a third,
none shared: no barriers) and ``chained`` (each reads and writes one key:
a barrier before every dispatch after the first). ``floor`` appends the
same commands without any hazard work.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vulkan import ffi

from guestcompute.vk import command_stream, sync
from guestcompute.vk.command_stream import CommandInterpreter, DispatchCommand
from guestcompute.vk.native_build import find_compiler

N = 1000
_NOOPS = "".join(f"void noop{i}(void) {{}}\n" for i in range(7))
_NAMES = ("vkCmdBindPipeline", "vkCmdPushDescriptorSetKHR", "vkCmdBindDescriptorSets", "vkCmdPushConstants",
          "vkCmdDispatch", "vkCmdDispatchIndirect", "vkCmdPipelineBarrier")


class _Pipe:
    handle = ffi.cast("VkPipeline", 0x1000)
    layout = ffi.cast("VkPipelineLayout", 0x2000)


class _Descriptors:
    count, pset = 2, None
    writes = ffi.new("VkWriteDescriptorSet[2]")


def _noop_functions(folder: Path):
    """An object whose vkCmd* attributes are addresses of C functions that do nothing."""
    compiler = find_compiler()
    if compiler is None or command_stream.native_library_path() is None:
        sys.exit("needs a C compiler and the built command interpreter (guestcompute build-native)")
    (folder / "noop.c").write_text(_NOOPS)
    subprocess.run([*compiler, "-O2", "-shared", "-fPIC", "-o", str(folder / "noop.so"), str(folder / "noop.c")],
                   check=True)
    lib = ctypes.CDLL(str(folder / "noop.so"))
    fns = type("NoopFunctions", (), {})()
    fns.library = lib
    for i, name in enumerate(_NAMES):
        setattr(fns, name, ctypes.cast(getattr(lib, f"noop{i}"), ctypes.c_void_p).value)
    return fns


def _keys(workload: str):
    """(reads, writes, both as a frozenset: what the plan keeps) per dispatch."""
    if workload == "chained":
        pairs = [((1,), (1,))] * N
    else:
        pairs = [((3 * i, 3 * i + 1), (3 * i + 2,)) for i in range(N)]
    return [(r, w, frozenset(r + w)) for r, w in pairs]


def _python_decisions(stream, commands, keys) -> None:
    """The recorder's hot path today: the hazard sets in Python, then an untracked command."""
    hz = sync.HazardTracker()        # one per recording, as BarrierState makes it
    written, read = hz.written, hz.read
    for command, (reads, writes, touched) in zip(commands, keys):
        if not (written.isdisjoint(touched) and read.isdisjoint(writes)):
            stream.barrier(sync.COMPUTE | hz.stages, sync.GUEST_STAGES, sync.SHADER_WRITE | hz.access,
                           sync.GUEST_ACCESS)
            written.clear()
            read.clear()
            hz.stages = hz.access = 0
        read.update(reads)
        if writes:
            written.update(writes)
            hz.access |= sync.SHADER_WRITE
        hz.stages |= sync.COMPUTE
        stream.append(command)
    stream.flush()


def _appends(stream, commands, keys) -> None:
    append = stream.append
    for command in commands:
        append(command)
    stream.flush()


def _time(fn, stream, commands, keys, repeats: int = 200) -> float:
    """Best µs per dispatch over ``repeats`` runs of ``N`` dispatches (the
    machine's noise only adds)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(stream, commands, keys)
        times.append(time.perf_counter() - start)
    return min(times) / N * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        fns = _noop_functions(Path(folder))
        native = CommandInterpreter(fns, mode="require")
        cmd, bar = ffi.cast("VkCommandBuffer", 0x5000), ffi.new("VkMemoryBarrier *")
        print(f"µs per dispatch, best of 200 runs of {N} appended and flushed")
        print(f"{'workload':10} {'floor':>8} {'python':>8} {'in C':>8}")
        for workload in ("distinct", "chained"):
            keys = _keys(workload)
            plain = [DispatchCommand(_Pipe, _Descriptors, b"\0" * 8, (1, 1, 1), None) for _ in keys]
            tracked = [DispatchCommand(_Pipe, _Descriptors, b"\0" * 8, (1, 1, 1), None, r, w) for r, w, _ in keys]
            floor = _time(_appends, native.stream(cmd, bar), plain, keys)
            python = _time(_python_decisions, native.stream(cmd, bar), plain, keys)
            in_c = _time(_appends, native.stream(cmd, bar), tracked, keys)
            print(f"{workload:10} {floor:8.3f} {python:8.3f} {in_c:8.3f}")


if __name__ == "__main__":
    main()
