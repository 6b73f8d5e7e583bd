"""A reference for the fp16 matmul goal (``rec.matmul`` with fp16
accumulators, 4096³, at least 380 TFLOP/s): a minimal
VK_KHR_cooperative_matrix GEMM of the library's own
(``baselines/address_gemm.comp``), timed beside ``rec.matmul`` in the same
run, so that the goal's miss is measured against a kernel on the same
device and driver rather than against a figure from elsewhere.

Row (no goal): "matmul float16, fp16 accumulators vs own
cooperative-matrix reference", in TFLOP/s. The reference has the library
kernel's tiling, staging and loop order and differs from it in two ways:
every size and stride is compiled in (the library kernel specializes K and
the row strides, but takes M, N, offsets and batch strides from push
constants), and (the ``addresses`` build) its buffers are reached
through device addresses in push constants instead of descriptors. Its
``bindings`` build runs through ``ctx.kernel`` on the run's context; the
``addresses`` build needs ``bufferDeviceAddress``, which guestcompute does
not use, so it runs on a device of the benchmark's own
(:mod:`.address_device`) on the same GPU. The ``tile_*`` builds are the
bindings build with other tilings (:data:`TILINGS`): what the tiling is
worth. The row's baseline is the fastest build; the note gives each. Every
result is checked against numpy over an output filled with NaNs first.

Skipped, saying why, on a CPU device and wherever ``rec.matmul`` does not
take its KHR cooperative-matrix kernel. The SPIR-V is compiled by
glslangValidator 13 or later (``pip install 'guestcompute[bake]'``) and
committed; ``--build`` rebuilds it.

Run alone: ``python -m benchmarks.matmul_reference [--quick] [--device NAME]``.
"""
from __future__ import annotations

import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .results import Result, standalone_main

SECTION = "gpu-ops"
ROW = "matmul float16, fp16 accumulators vs own cooperative-matrix reference"
BASELINES = Path(__file__).resolve().parent / "baselines"
SOURCE = BASELINES / "address_gemm.comp"
SIZE = 4096
# Tilings of the source: (block M, block N, K step, subgroups along M, along N).
# "bindings" and "addresses" have the library kernel's; the others are the
# bindings build with another tiling, to say what the tiling is worth.
LIBRARY_TILING = (256, 256, 32, 2, 4)
TILINGS = {"bindings": LIBRARY_TILING, "addresses": LIBRARY_TILING,
           "tile_256x128_k32": (256, 128, 32, 4, 2), "tile_128x256_k32": (128, 256, 32, 2, 4),
           "tile_128x128_k32": (128, 128, 32, 2, 2), "tile_128x128_k64": (128, 128, 64, 2, 2),
           "tile_256x256_k16": (256, 256, 16, 2, 4)}
BUILDS = tuple(TILINGS)
TARGET_ENV = "vulkan1.2"           # device addresses are core from 1.2
CHECKED_ROWS = 16


def spirv_path(build: str, folder: Path = BASELINES) -> Path:
    return folder / f"address_gemm_{build}.spv"


def defines(build: str, size: int = SIZE) -> dict:
    tile = dict(zip(("TILE_M", "TILE_N", "TILE_K", "ALONG_M", "ALONG_N"), TILINGS[build]))
    return {"M": size, "N": size, "K": size, "ADDRESSES": int(build == "addresses"), **tile}


def build(folder: Path = BASELINES) -> None:
    """Compile every build with glslangValidator into ``folder`` (by
    default the committed files)."""
    from guestcompute.spirv.compiler import glslang_path
    for name in BUILDS:
        flags = [f"-D{k}={v}" for k, v in defines(name).items()]
        subprocess.run([glslang_path(), "-V", "--target-env", TARGET_ENV, *flags, "-S", "comp", str(SOURCE),
                        "-o", str(spirv_path(name, folder))], check=True, capture_output=True)


def groups(build: str, size: int = SIZE) -> tuple:
    """Workgroups along N and M: the sizes are whole blocks."""
    block_m, block_n = TILINGS[build][:2]
    return (size // block_n, size // block_m, 1)


def check_product(got: np.ndarray, an: np.ndarray, bn: np.ndarray, what: str) -> None:
    """``got``'s first rows (fp16, size x size) against float64 numpy, with
    the bound the gpu-ops matmul rows use (1e-2 of the norm: fp16
    accumulators)."""
    ref = an[:CHECKED_ROWS].astype(np.float64) @ bn.astype(np.float64)
    rows = got.reshape(an.shape[0], bn.shape[1])[:CHECKED_ROWS].astype(np.float64)
    err = np.linalg.norm(rows - ref) / np.linalg.norm(ref)
    if not np.isfinite(rows).all() or err > 1e-2:
        raise AssertionError(f"{what}: wrong product (relative error {err:.1e})")


def bindings_seconds(ctx, an, bn, timer, build: str = "bindings") -> float:
    """GPU seconds of a build on bindings (every build but ``addresses``)
    through ``ctx.kernel``."""
    from .gpu_ops import fill_with_nans
    kernel = ctx.kernel(spirv_path(build).read_bytes(), name=f"address_gemm_{build}", validate=False)
    a, b = ctx.tensor(an.view(np.uint32).ravel()), ctx.tensor(bn.view(np.uint32).ravel())
    c = ctx.empty((an.shape[0] * bn.shape[1] // 2,), "uint32")
    fill_with_nans(ctx, c)

    def body(rec):
        rec.run_kernel(kernel, [a, b, c], groups=groups(build, an.shape[0]))
    ctx.run(body)
    check_product(c.numpy().view(np.float16), an, bn, f"reference ({build})")
    return timer.gpu_seconds(body)


def addresses_seconds(device_name: str, an, bn, reps: int, rounds: int = 3) -> float:
    """GPU seconds of the ``addresses`` build on a device of its own (the
    same GPU), after a second of itself to bring the clocks up."""
    from guestcompute.errors import UnsupportedError
    from .address_device import AddressDevice
    from .gpu_ops import NAN_PAIR
    with AddressDevice(device_name) as dev:
        if "cooperativeMatrixKHR" not in dev.features:
            raise UnsupportedError("the device offers no VK_KHR_cooperative_matrix")
        a, b, c = (dev.buffer(x.nbytes) for x in (an, bn, an))
        dev.upload(a, an)
        dev.upload(b, bn)
        dev.upload(c, np.full(an.size // 2, NAN_PAIR, np.uint32))
        kernel = dev.pipeline(spirv_path("addresses").read_bytes(), 24)
        push = struct.pack("<3Q", a.address, b.address, c.address)
        start = time.perf_counter()
        while time.perf_counter() - start < 1.0:
            dev.gpu_seconds(kernel, push, groups("addresses", an.shape[0]), reps)
        check_product(dev.download(c, np.float16), an, bn, "reference (addresses)")
        return statistics.median(dev.gpu_seconds(kernel, push, groups("addresses", an.shape[0]), reps)
                                 for _ in range(rounds))


def library_kernel(ctx, body) -> str:
    """The family of ``body``'s first dispatch (its kernel)."""
    from .gpu_ops import spec_of
    return spec_of(ctx, body).split(" ")[0]


def gpu_rows(ctx, quick: bool) -> list:
    import guestcompute as gc

    from .gpu_ops import Timer, reference_rates, warm_up
    if not ctx.caps.float16_storage:
        return [Result(SECTION, ROW, skipped="device without 16-bit storage")]
    rng = np.random.default_rng(0)
    an, bn = (rng.standard_normal((SIZE, SIZE)).astype(np.float16) for _ in range(2))
    a, b, c = ctx.tensor(an), ctx.tensor(bn), ctx.empty((SIZE, SIZE), "float16")

    def ours(rec):
        rec.matmul(a, b, out=c, accumulate="float16")
    family = library_kernel(ctx, ours)
    if family != "matmul_coopmat_khr":
        return [Result(SECTION, ROW, skipped=f"rec.matmul runs {family or 'no kernel'} here, "
                                           "not its KHR cooperative-matrix kernel")]
    reps = 3 if quick else 10
    timer = Timer(ctx, reps, rounds=3)
    warm_up(ctx, 1.0)
    mine = timer.gpu_seconds(ours)
    check_product(c.numpy(), an, bn, "rec.matmul")
    times, failures = {}, []
    for name in BUILDS:
        try:
            times[name] = (addresses_seconds(ctx.limits.device_name, an, bn, reps) if name == "addresses"
                           else bindings_seconds(ctx, an, bn, timer, name))
        except (gc.GuestComputeError, AssertionError, OSError) as e:
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
    flops = 2 * SIZE ** 3
    if not times:
        return [Result(SECTION, ROW, skipped="no reference build ran: " + "; ".join(failures))]
    best = min(times, key=times.get)
    note = f"{SIZE}³; rec.matmul {mine * 1e3:.3f} ms; reference " + reference_rates(flops, times, failures)
    return [Result(SECTION, ROW, flops / mine / 1e12, "TFLOP/s",
                   f"own minimal VK_KHR_cooperative_matrix GEMM ({best}), same GPU", flops / times[best] / 1e12,
                   note=note)]


def cpu_rows(ctx, quick: bool) -> list:
    return [Result(SECTION, ROW, skipped="a GPU's reference: this device runs on the CPU")]


def run(env) -> list:
    from .gpu_ops import run_on_device
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run], build=build))
