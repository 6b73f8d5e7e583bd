"""The fused MLP against a cooperative-vector kernel on the same GPU.

Row (a GPU's goal): "fused mlp vs cooperative-vector sample": the math rate
(TFLOP/s) of ``rec.mlp`` on the 32 -> 4x64 -> 16 ReLU fp16 network over
3840 x 2160 queries (the network, queries and kernel choice of
benchmarks/neural_mlp.py), against a kernel that runs each layer as one
``coopVecMatMulAdd`` of VK_NV_cooperative_vector — NVIDIA's route for
exactly such networks. Goal: at least half its rate.

The reference is the library's own minimal cooperative-vector MLP
(``baselines/coopvec_mlp.slang``, one query per invocation, compiled by
slangc to ``baselines/coopvec_mlp_<layout>[_step<n>].spv``, which are
committed: a GPU host needs no Slang compiler). NVIDIA's
``vk_cooperative_vector_perf`` sample is the reference the goal names; it
needs its repository and a build of its own, which this suite does not
fetch, so the row's baseline says which reference ran. Both weight layouts run —
row-major, and the device's inferencing-optimal one converted on the host
with ``vkConvertCooperativeVectorMatrixNV`` — and the faster counts.

Beside it the row's note gives the steps of :data:`STEPS`: the same source
built with one more of the run-time ways a kernel serving any network has
at each step (offsets from a table, the hidden layers in a loop, activation
codes, operand modes), then with each of three of them alone (activation
codes, operand modes, a test of the depth before each hidden layer), with
inferencing-optimal weights, so that a run shows what each costs the
reference. (On an H100 each alone but the modes took it from about 470 to
210-250 TFLOP/s: why ``rec.mlp``'s kernel has the depth and activations as
specialization constants.) Every result is checked against numpy, over outputs
filled with NaNs first; one that fails is named in the note.

Both run on one device this module creates with what ``gc.requirements``
lists — where the device has them, that includes VK_NV_cooperative_vector,
VK_EXT_shader_replicated_composites and ``uniformAndStorageBuffer16BitAccess``,
which the reference's SPIR-V (like ``rec.mlp``'s own cooperative-vector
kernel) declares — adopted with ``gc.Context.adopt``. The row is skipped,
saying why, where the device lacks any of them, and on a CPU device. The
reference's SPIR-V is slangc's, committed with its source, and names
capabilities newer than Debian 12's spirv-val (2023.1) knows: it is loaded
with ``ctx.kernel(..., validate=False)``.

Every result is checked against numpy (a slice) before its time counts.
Run alone: ``python -m benchmarks.neural_coopvec [--quick] [--device NAME]``;
``--build`` recompiles the SPIR-V from the Slang source (needs slangc).
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np

from .results import Result, standalone_main

SECTION = "neural"
ROW = "fused mlp vs cooperative-vector sample"
GOAL = "ratio>=0.5"
BASELINES = Path(__file__).resolve().parent / "baselines"
SOURCE = BASELINES / "coopvec_mlp.slang"
LAYOUTS = ("RowMajor", "InferencingOptimal")
# Step -> (what it adds, the source's STEP and ALONE defines): steps 1-4 add
# one run-time way after another to the reference, 5-7 one way each alone.
STEPS = {1: ("offsets from the table", 1, 0), 2: ("+ the hidden layers in a loop", 2, 0),
         3: ("+ activation codes", 3, 0), 4: ("+ operand modes", 4, 0), 5: ("activation codes alone", 0, 3),
         6: ("operand modes alone", 0, 4), 7: ("depth tests alone", 0, 5)}
STEP_LAYOUT = "InferencingOptimal"
TABLE_BYTES = 16                  # a layer's entry in the table: matrix offset, bias offset, code, slope bits
EXTENSIONS = ("VK_NV_cooperative_vector", "VK_EXT_shader_replicated_composites")
WORKGROUP = 64                    # the Slang kernel's numthreads
MATRIX_ALIGN, BIAS_ALIGN = 64, 16     # VK_NV_cooperative_vector's offset alignments (bytes)

FEATURES = ("cooperativeVector", "shaderReplicatedComposites", "uniformAndStorageBuffer16BitAccess")


class Unavailable(Exception):
    """Why the reference cannot run on this device (the row's skip reason)."""


def spirv_path(layout: str, folder: Path = BASELINES, step: int = 0) -> Path:
    return folder / (f"coopvec_mlp_{layout}.spv" if step == 0 else f"coopvec_mlp_{layout}_step{step}.spv")


def build(folder: Path = BASELINES) -> None:
    """Compile the Slang source with slangc into ``folder``'s SPIR-V files
    (by default the committed ones): both layouts, then the steps."""
    from guestcompute.spirv.slang import slangc_path, strip_debug
    builds = [(layout, 0) for layout in LAYOUTS] + [(STEP_LAYOUT, step) for step in STEPS]
    for layout, step in builds:
        out = spirv_path(layout, folder, step)
        source_step, alone = STEPS[step][1:] if step else (0, 0)
        subprocess.run([slangc_path(), str(SOURCE), "-target", "spirv", "-entry", "main", "-stage", "compute",
                        f"-DLAYOUT={layout}", f"-DSTEP={source_step}", f"-DALONE={alone}", "-O0", "-g0",
                        "-o", str(out)], check=True)
        out.write_bytes(strip_debug(out.read_bytes()))


def pack(matrices, biases, convert=None, codes=None, slopes=None) -> tuple:
    """(weights bytes, biases bytes, matrix offsets, bias offsets): each
    layer's (N, K) fp16 matrix at a 64-byte aligned offset, row-major or as
    ``convert(matrix)`` returns it. The biases buffer starts with the table
    the later steps read (TABLE_BYTES a layer: matrix offset, bias offset,
    activation code (``codes``, default 0), slope bits), then each bias
    (N fp16) at a 16-byte aligned offset."""
    n = len(matrices)
    codes = [0] * n if codes is None else list(codes)
    slopes = [0.0] * n if slopes is None else list(slopes)
    weights, bias_bytes, w_offsets, b_offsets = bytearray(), bytearray(n * TABLE_BYTES), [], []
    for m, b in zip(matrices, biases):
        m = np.ascontiguousarray(m, np.float16)
        weights += bytes(-len(weights) % MATRIX_ALIGN)
        w_offsets.append(len(weights))
        weights += m.tobytes() if convert is None else convert(m)
        bias_bytes += bytes(-len(bias_bytes) % BIAS_ALIGN)
        b_offsets.append(len(bias_bytes))
        bias_bytes += np.asarray(b, np.float16).tobytes()
    weights += bytes(-len(weights) % 16)
    bias_bytes += bytes(-len(bias_bytes) % 16)
    slope_bits = np.asarray(slopes, np.float32).view(np.uint32)
    table = np.array([[w, b, c, sb] for w, b, c, sb in zip(w_offsets, b_offsets, codes, slope_bits)], np.uint32)
    bias_bytes[:n * TABLE_BYTES] = table.tobytes()
    return bytes(weights), bytes(bias_bytes), w_offsets, b_offsets


class CoopVecDevice:
    """A device with cooperative vectors enabled, adopted as ``self.ctx``;
    :meth:`close` destroys what it made."""

    def __init__(self, device_name=None):
        from vulkan import ffi, lib

        import guestcompute as gc
        from guestcompute.host.requirements import supported_extensions
        from guestcompute.vk import bootstrap
        self._lib, self._ffi = lib, ffi
        self.instance, self._messenger, api = bootstrap.create_instance((1, 3), False)
        self.device = None
        try:
            pd = bootstrap.pick_physical_device(self.instance, device_name)
            missing = [e for e in EXTENSIONS if e not in supported_extensions(pd)]
            if missing:
                raise Unavailable(f"the device has no {' or '.join(missing)}")
            req = gc.requirements(pd, api)
            lacking = [f for f in FEATURES if f not in req.features]
            if lacking or any(e not in req.device_extensions for e in EXTENSIONS):
                raise Unavailable(f"gc.requirements() does not enable {', '.join(lacking or EXTENSIONS)} here")
            self._keep = chain = req.feature_chain()
            qf = bootstrap.compute_queue_family(pd)
            exts = list(req.device_extensions)
            try:
                self.device = bootstrap.create_device(pd, qf, exts, chain, req.core_feature_struct())
            except Exception as e:    # noqa: BLE001 (a feature it lacks: the row says so)
                raise Unavailable(f"vkCreateDevice with cooperative vectors enabled failed: {e}") from None
            queue = ffi.new("VkQueue *")
            lib.vkGetDeviceQueue(self.device, qf, 0, queue)
            features = {f: True for f in req.features + req.core_features}
            self.ctx = gc.Context.adopt(instance=self.instance, physical_device=pd, device=self.device,
                                        queue_family_index=qf, api_version=req.api_version, enabled_extensions=exts,
                                        features=features, queue=queue[0])
        except BaseException:
            self._destroy()
            raise

    def convert(self, matrix: np.ndarray) -> bytes:
        """A row-major fp16 (N, K) matrix in the device's inferencing-optimal layout."""
        from guestcompute.vk.cooperative_vector import to_inferencing_optimal
        try:
            return to_inferencing_optimal(self.device, matrix)
        except RuntimeError as e:
            raise Unavailable(str(e)) from None

    def close(self) -> None:
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            ctx.close()
        self._destroy()

    def _destroy(self) -> None:
        if self.device is not None:
            self._lib.vkDestroyDevice(self.device, self._ffi.NULL)
            self.device = None
        if self._messenger:
            self._messenger.close()
            self._messenger = None
        if self.instance is not None:
            self._lib.vkDestroyInstance(self.instance, self._ffi.NULL)
            self.instance = None


def network_buffers(host: CoopVecDevice, layers, layout: str) -> tuple:
    """(weights tensor, biases tensor, matrix offsets, bias offsets) of
    :func:`pack` for ``layers`` with ``layout``'s matrices, on the device."""
    from guestcompute.ops.mlp_kernels import ACTIVATIONS
    matrices = [layer.weight.T for layer in layers]                  # (N, K): a row per output
    weights, biases, w_off, b_off = pack(matrices, [layer.bias for layer in layers],
                                         None if layout == "RowMajor" else host.convert,
                                         [ACTIVATIONS.index(layer.activation) for layer in layers],
                                         [layer.slope for layer in layers])
    ctx = host.ctx
    return (ctx.tensor(np.frombuffer(weights, np.uint32).copy()), ctx.tensor(np.frombuffer(biases, np.uint32).copy()),
            w_off, b_off)


def reference_seconds(host: CoopVecDevice, network: tuple, x, y, timer, layout: str, step: int = 0) -> float:
    """GPU seconds of one reference dispatch over the queries ``x`` (their
    fp16 values as uint32 words, 16 a query) through ``network`` (from
    :func:`network_buffers`), writing ``y`` (8 words a query), which is
    first filled with NaNs."""
    from .gpu_ops import fill_with_nans
    ctx = host.ctx
    wt, bt, w_off, b_off = network
    kernel = ctx.kernel(spirv_path(layout, step=step).read_bytes(), name=f"coopvec_mlp_{layout}_{step}",
                        validate=False)
    rows = x.shape[0] // 16
    push = np.array([rows] + w_off + b_off + [len(w_off), 0, 0], np.uint32).tobytes()

    def body(rec):
        rec.run_kernel(kernel, [x, wt, bt, y], push=push, groups=(math.ceil(rows / WORKGROUP), 1, 1))
    fill_with_nans(ctx, y)
    ctx.run(body)
    return timer.gpu_seconds(body)


def gpu_rows(env, quick: bool) -> list:
    from guestcompute.ops.mlp_op import kernel_for

    from . import neural_mlp as mlp
    from .gpu_ops import Timer, warm_up
    try:
        host = CoopVecDevice(env.device)
    except Unavailable as e:
        return [Result(SECTION, ROW, goal=GOAL, skipped=str(e))]
    try:
        ctx = host.ctx
        timer = Timer(ctx, 3 if quick else 10, rounds=3)
        net, layers = mlp.network(ctx)
        x_np = np.random.default_rng(42).standard_normal((mlp.QUERIES, mlp.WIDTHS[0])).astype(np.float16)
        x, out = ctx.tensor(x_np), ctx.empty((mlp.QUERIES, mlp.WIDTHS[-1]), "float16")
        flops = mlp.QUERIES * mlp.FLOPS_PER_QUERY
        ctx.run(lambda rec: rec.mlp(x, net, out=out))
        mlp.check_against_numpy(out.numpy(), net, x_np.astype(np.float32), "rec.mlp")
        warm_up(ctx, 1.0)
        mine = timer.gpu_seconds(lambda rec: rec.mlp(x, net, out=out))
        kernel = kernel_for(ctx, net)
        rates, steps, failures = {}, {}, []
        x_words = ctx.tensor(x_np.view(np.uint32).reshape(-1))
        y_words = ctx.empty((mlp.QUERIES * mlp.WIDTHS[-1] // 2,), "uint32")
        networks = {}                  # layout -> its buffers, packed once
        for layout, step in [(layout, 0) for layout in LAYOUTS] + [(STEP_LAYOUT, step) for step in STEPS]:
            what = f"{layout}, step {step}"
            try:
                if layout not in networks:
                    networks[layout] = network_buffers(host, layers, layout)
                s = reference_seconds(host, networks[layout], x_words, y_words, timer, layout, step)
                got = y_words.numpy().view(np.float16).reshape(mlp.QUERIES, mlp.WIDTHS[-1])
                mlp.check_against_numpy(got, net, x_np, f"cooperative-vector reference ({what})")
            except Exception as e:     # noqa: BLE001 (one failing leaves the others)
                failures.append(f"{what}: {type(e).__name__}: {str(e)[:300]}")
                continue
            if step == 0:
                rates[layout] = flops / s / 1e12
            else:
                steps[step] = flops / s / 1e12
        if not rates:
            return [Result(SECTION, ROW, goal=GOAL, skipped="the reference did not run: " + "; ".join(failures))]
        best = max(rates, key=rates.get)
        note = (f"rec.mlp ({kernel}) {mine * 1e3:.3f} ms; reference "
                + ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in rates.items())
                + (f"; the reference with run-time ways ({STEP_LAYOUT}): "
                   + ", ".join(f"step {k} ({STEPS[k][0]}) {v:.0f} TFLOP/s" for k, v in steps.items()) if steps else "")
                + (f"; failed: {'; '.join(failures)}" if failures else ""))
        return [Result(SECTION, ROW, flops / mine / 1e12, "TFLOP/s",
                       f"own minimal VK_NV_cooperative_vector MLP ({best} weights), same GPU; NVIDIA's "
                       "vk_cooperative_vector_perf sample not built here", rates[best], GOAL, note=note)]
    finally:
        host.close()


def run(env) -> list:
    from .gpu_ops import runs_on_cpu
    if runs_on_cpu(env.device):
        return [Result(SECTION, ROW, goal=GOAL, skipped="a GPU's goal: this device runs on the CPU")]
    return gpu_rows(env, env.quick)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run], build=build))
