"""``rec.mlp(x, net)``: a whole network (ops/mlp.py) in one dispatch, every
intermediate in registers and shared memory, with the kernel chosen from
variants-as-data like matmul's.

Preference order (:func:`explain` says why each is skipped):

0. ``nv_coopvec`` float16 weights, the host enabled VK_NV_cooperative_vector
               (what ``HostCaps.cooperative_vector`` lists: ``gc.requirements()``
               recommends it where the device has it), the device multiplies
               fp16 vectors by fp16 matrices with the network's accumulator
               type, and tensor operands (an image input or output takes
               the next kernel). One query per invocation, each layer one
               matrix-vector product on the tensor cores (ops/mlp_coopvec.py);
               activations rounded to fp16 between layers, as below.
1. ``khr_coopmat`` float16 weights, the host enabled VK_KHR_cooperative_matrix
               (with shaderFloat16 and vulkanMemoryModel), the device has
               16x16x16 fp16 fragments with the network's accumulator,
               32-wide subgroups, and one of the kernel's tilings fits its
               shared memory and invocations. Activations are rounded to
               fp16 between layers (and the input on entry). bfloat16
               weights likewise, where the host also enabled
               VK_KHR_shader_bfloat16's type and cooperative matrices and
               the device has 16x16x16 bfloat16 fragments with float32
               accumulators; activations are then rounded to bfloat16.
2. ``fma``     every device, every weight type: 16 queries per workgroup
               of 64, fp32 activations and accumulators.

Operands: ``x`` is a float16/float32 tensor (..., in) — leading dims as
numpy's matmul batch — or an image, standing for the float32 (H, W, C)
array ``rec.copy(img)`` gives; the network reads its first ``in`` channels
(``in`` must not exceed C). The result is (..., out): by default a new
tensor of x's dtype (float32 for an image). ``out`` may be a float16 or
float32 tensor of that shape, or an image of x's size with at least
``out`` channels: the network's outputs are its first channels, the others
are written as (0, 0, 0, 1)'s (alpha 1). Sampled images are read directly,
others through a float32 copy; rgba16f, rgba32f and rgba8 storage images
are written directly, others through a float32 tensor and a copy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..dtypes import float16, float32
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ..kernels.spec import groups_for
from ..tensor import Tensor
from . import mlp_coopvec as coopvec
from . import mlp_kernels as kernels
from . import pixels as px
from .base import Dispatch, OpResult, check_out, check_tensor, op, registered_ops
from .candidates import Candidate, choose, khr_fragments_why_not
from .matmul import MatmulDevice
from .mlp import check_network

FLOATS = ("float16", "float32")


@dataclass(frozen=True)
class Problem:
    """What selection reads: the weights' dtype, the accumulator, the
    widest padded layer, the operand layouts, the cooperative-vector
    kernel's width classes (None: they do not fit) and whether an operand
    reaches past 4 GiB (its byte addresses are 32-bit)."""
    dtype: str
    acc: str
    wmax: int
    x: str
    o: str
    classes: tuple = None
    huge: bool = False


def khr_tiling(p: Problem, d: MatmulDevice):
    """The first tiling (best first) that takes the widths and fits the device."""
    for t in kernels.KHR_TILINGS:
        if t.wmax >= p.wmax and t.shared_bytes <= d.max_shared_memory and t.threads <= d.max_invocations:
            return t
    return None


def _khr_why_not(p: Problem, d: MatmulDevice):
    if p.dtype == "float32":
        return "cooperative matrices are used for float16 and bfloat16 weights only"
    if p.dtype == "bfloat16":
        if p.acc != "float32":
            return "bfloat16 fragments take float32 accumulators"
        if not d.coopmat_khr_bf16_shapes:
            return ("the host did not enable VK_KHR_shader_bfloat16 with bfloat16 cooperative matrices "
                    "(see gc.requirements())")
        if (16, 16, 16, p.acc) not in d.coopmat_khr_bf16_shapes:
            return f"the device reports no 16x16x16 bfloat16 fragment with a {p.acc} accumulator"
    reason = khr_fragments_why_not(p.acc, d, kernels.SUBGROUP)
    if reason is not None:
        return reason
    if khr_tiling(p, d) is None:
        return "not enough shared memory or invocations for a tiling of its widths"
    return None


def _coopvec_why_not(p: Problem, d: MatmulDevice):
    if p.dtype != "float16":
        return "cooperative vectors are used for float16 weights only"
    if not d.coopvec_types:
        return ("the host did not enable VK_NV_cooperative_vector with what its kernel needs (see "
                "gc.requirements())")
    if ("float16", "float16", "float16", p.acc) not in d.coopvec_types:
        return f"the device has no fp16 matrix-vector product with {p.acc} results"
    if p.x not in ("f16", "f32") or p.o not in ("f16", "f32"):
        return "it takes tensor operands (an image is read or written by the next kernel)"
    if p.classes is None:
        return "a width does not fit its width classes"
    if p.huge:
        return "an operand reaches past 4 GiB of its buffer (the kernel's byte addresses are 32-bit)"
    return None


CANDIDATES = (
    Candidate("nv_coopvec", _coopvec_why_not, lambda p, d: coopvec.coopvec_spec(*p.classes, p.acc)),
    Candidate("khr_coopmat", _khr_why_not,
              lambda p, d: kernels.khr_spec(khr_tiling(p, d), p.acc, p.x, p.o, p.dtype)),
    # Every device runs it: 64 invocations and 16 KiB of shared memory.
    Candidate("fma", lambda p, d: None, lambda p, d: kernels.fma_spec(p.dtype, p.x, p.o)),
)


def explain(p: Problem, d: MatmulDevice) -> list:
    """[(candidate name, None if it would be chosen else why not)] in preference order."""
    return [(c.name, c.why_not(p, d) or c.unwise(p, d)) for c in CANDIDATES]


def select(p: Problem, d: MatmulDevice, kernel: str = None) -> tuple:
    """(candidate name, KernelSpec): the preferred applicable kernel, or the
    one named ``kernel`` (UnsupportedError when it does not apply)."""
    return choose("mlp", CANDIDATES, p, d, kernel)


# -- operands ------------------------------------------------------------------------------

def _row_stride(t: Tensor):
    """The element stride between consecutive rows of ``t``'s leading dims
    (one query per row), or None when they do not collapse into one."""
    stride = None
    expect = None
    for n, s in reversed(list(zip(t.shape[:-1], t.strides[:-1]))):
        if n == 1:
            continue
        if stride is None:
            stride, expect = s, s * n
        elif s != expect:
            return None
        else:
            expect = s * n
    return stride if stride is not None else 0


def _x_operand(ctx, x, net, pre: list):
    """(layout, resource, push values, leading shape) of the input;
    copies it needs first go to ``pre``."""
    ops = registered_ops()
    if not isinstance(x, Tensor):
        level = px.as_level(ctx, x, "mlp x")
        (w, h), c = level.extent, level.image.format.channels
        if c < net.in_width:
            raise ShapeError(f"mlp x: the image has {c} channels, the network takes {net.in_width} inputs")
        src = px.read_pixels(ctx, level, "mlp x")
        if src.layout == "tex":
            return "tex", src.resource, {"img_w": w, "x_off": 0, "x_sr": 0, "x_sc": 0}, (h, w)
        made = ops["copy"](ctx, level)          # a storage image only: through a float32 copy
        pre += made.dispatches
        x = made.value.reshape(h, w, c)[..., :net.in_width]
    x = check_tensor(ctx, x, "mlp x")
    if x.dtype.name not in FLOATS:
        raise DTypeError(f"mlp x: dtype {x.dtype}; the network takes float16 or float32 (cast with rec.cast)")
    if x.ndim < 1 or x.shape[-1] != net.in_width:
        raise ShapeError(f"mlp x: shape {x.shape}, the network takes (..., {net.in_width})")
    if _row_stride(x) is None:
        made = ops["copy"](ctx, x)
        pre += made.dispatches
        x = made.value
    push = {"img_w": 1, "x_off": x.offset, "x_sr": _row_stride(x), "x_sc": x.strides[-1]}
    return ("f16" if x.dtype == float16 else "f32"), x.buffer, push, x.shape[:-1]


def _check_image_out(ctx, out, x, lead: tuple, net):
    """``out`` as a writable image operand of the input's size."""
    o = px.write_pixels(ctx, out, "mlp out")
    if not isinstance(x, Tensor) and o.same_image_level(px.read_pixels(ctx, x, "mlp x")):
        raise InvalidArgumentError("mlp out is the input image; write another image (or a tensor) and copy")
    if lead != (o.h, o.w):
        raise ShapeError(f"mlp out: a {o.h}x{o.w} image; the input is {lead} queries, not (H, W) of its pixels")
    if o.channels < net.out_width:
        raise ShapeError(f"mlp out: the image has {o.channels} channels, the network gives {net.out_width}")
    return o


def _o_operand(ctx, out, x, lead: tuple, net, post: list):
    """(result, layout, resource, push values, fill dispatches) of the
    output; a copy it needs afterwards goes to ``post``."""
    ops = registered_ops()
    shape = tuple(lead) + (net.out_width,)
    if out is not None and not isinstance(out, Tensor):
        o = _check_image_out(ctx, out, x, tuple(lead), net)
        if o.layout in kernels.O_LAYOUTS:
            return o.value, o.layout, o.resource, {"o_off": 0, "o_sr": 0, "o_sc": 0}, []
        # Any other format: a float32 tensor of its pixels (the channels the
        # network does not write are (0, 0, 0, 1)'s), then one copy.
        h, w, c = o.h, o.w, o.channels
        scratch = ctx.empty((h, w, c), float32)
        fills = ops["fill"](ctx, scratch, 0.0).dispatches
        if c == 4 and net.out_width < 4:
            fills += ops["fill"](ctx, scratch[..., 3], 1.0).dispatches
        post += ops["copy"](ctx, scratch if c > 1 else scratch.reshape(h, w), out=out).dispatches
        target = scratch[..., :net.out_width]
        return out, "f32", target.buffer, _tensor_push(target), fills
    if out is None:
        out = ctx.empty(shape, x.dtype if isinstance(x, Tensor) else float32)
    else:
        out = check_out(ctx, out, shape, (float16, float32), [x], "mlp out", in_place=False)
    target = out
    if _row_stride(out) is None:
        target = ctx.empty(shape, out.dtype)
        post += ops["copy"](ctx, target, out=out).dispatches
    return out, ("f16" if out.dtype == float16 else "f32"), target.buffer, _tensor_push(target), []


def _tensor_push(t: Tensor) -> dict:
    return {"o_off": t.offset, "o_sr": _row_stride(t), "o_sc": t.strides[-1]}


def _problem(ctx, net, x_layout: str, o_layout: str, huge: bool = False) -> Problem:
    return Problem(net.dtype, net.accumulate, max(net.padded_widths), x_layout, o_layout,
                   coopvec.classes_of(net.widths), huge)


def _reach(push: dict, rows: int, width: int, prefix: str) -> int:
    """Elements from the buffer's start to one past the operand's last (an
    upper bound), for the 4 GiB check."""
    return push[prefix + "off"] + abs(push[prefix + "sr"]) * rows + abs(push[prefix + "sc"]) * width + 1


def _vector_mode(elem_push: dict, prefix: str, dtype: str, width: int, cls: int) -> int:
    """The kernel's x_mode/o_mode (ops/mlp_coopvec.py) of a tensor operand."""
    if dtype == "f32":
        return 2
    aligned = all((elem_push[prefix + k] * 2) % coopvec.VECTOR_ALIGN == 0 for k in ("off", "sr"))
    return 0 if elem_push[prefix + "sc"] == 1 and width == cls and aligned else 1


def kernel_for(ctx, net, kernel: str = None) -> str:
    """The name of the kernel ``rec.mlp`` runs ``net`` with on ``ctx`` (for
    tensor operands): its accuracy bound follows from it (docs/integration.md
    §18). ``kernel`` names one to check it applies (UnsupportedError if not)."""
    return select(_problem(ctx, check_network(ctx, net), "f32", "f32"), MatmulDevice.of(ctx), kernel)[0]


def network_pipelines(ctx, net, d: MatmulDevice = None) -> list:
    """[(KernelSpec, specialization constants)] of the pipelines ``rec.mlp``
    records ``net`` with on ``ctx`` for float16 and float32 tensor operands
    (float16 where the host enabled 16-bit storage), without duplicates:
    what ``ctx.warmup([net])`` creates. ``d``: the device facts (default
    the context's)."""
    d = d or MatmulDevice.of(ctx)
    layouts = ("f16", "f32") if ctx.caps.float16_storage else ("f32",)
    out = []
    for x in layouts:
        for o in layouts:
            p = _problem(ctx, net, x, o)
            name, spec = select(p, d)
            if name == "nv_coopvec":
                constants = coopvec.spec_constants(net.layers)
            else:
                constants = net.khr_constants() if spec.family == "mlp_khr" else ()
            out.append((spec, constants))
    return list(dict.fromkeys(out))


def _check_loop_cap(ctx, name: str, net) -> None:
    cap = ctx.limits.loop_iteration_cap
    if name == "fma" and cap and kernels.fma_loop_iterations(net.padded_widths) > cap // 2:
        raise UnsupportedError(f"mlp: {net.depth} layers of these widths run more loop iterations than this "
                               f"driver allows one invocation ({cap}); split the network into two and run "
                               "them one after the other")


@op("mlp", windows=None)
def mlp(ctx, x, net, *, out=None, kernel: str = None):
    """``out = net(x)``: the network of ``ctx.mlp`` over the last axis of
    ``x`` (a float16/float32 tensor (..., in), or an image's pixels), in
    one dispatch. ``out``: a float16/float32 tensor (..., out) or an image
    of x's size (see the module notes); allocated when omitted. ``kernel``
    forces one of :data:`CANDIDATES` by name (benchmarks, tests)."""
    net = check_network(ctx, net)
    if kernel is not None and not isinstance(kernel, str):
        raise InvalidArgumentError(f"mlp: kernel must be a name, got {kernel!r}")
    if isinstance(x, Tensor) and out is not None and not isinstance(out, Tensor) and x.ndim != 3:
        raise ShapeError(f"mlp: writing an image takes an input of its pixels, (H, W, {net.in_width}); got "
                         f"shape {x.shape}")
    pre, post = [], []
    x_layout, x_res, x_push, lead = _x_operand(ctx, x, net, pre)
    result, o_layout, o_res, o_push, fills = _o_operand(ctx, out, x, lead, net, post)
    rows = math.prod(lead)
    huge = x_layout != "tex" and o_layout in ("f16", "f32") and \
        max(_reach(x_push, rows, net.in_width, "x_") * (2 if x_layout == "f16" else 4),
            _reach(o_push, rows, net.out_width, "o_") * (2 if o_layout == "f16" else 4)) >= 1 << 32
    problem = _problem(ctx, net, x_layout, o_layout, huge)
    name, spec = select(problem, MatmulDevice.of(ctx), kernel)
    _check_loop_cap(ctx, name, net)
    if rows == 0:
        return OpResult(result, [])
    if o_layout not in ("f16", "f32"):
        x_push["img_w"] = lead[1]
    values = {"rows": rows, "depth": net.depth, "in_w": net.in_width, "out_w": net.out_width, **x_push, **o_push}
    weights, constants = net.weights, ()
    if name == "nv_coopvec":
        in_c, _, out_c = problem.classes
        values["x_mode"] = _vector_mode(x_push, "x_", x_layout, net.in_width, in_c)
        values["o_mode"] = _vector_mode(o_push, "o_", o_layout, net.out_width, out_c)
        weights, offsets, constants = net.coopvec_weights(problem.classes)
        values.update(offsets)
        per_group = coopvec.THREADS
    elif spec.family == "mlp_khr":
        constants = net.khr_constants()
        per_group = kernels.khr_tiling(spec).rows
    else:
        per_group = kernels.FMA_ROWS
    groups = groups_for(-(-rows // per_group), 1, ctx.limits.max_workgroup_count)
    values["groups_x"], values["groups_y"] = groups[0], groups[1]
    main = Dispatch(spec, (x_res, weights.buffer, o_res), spec.pack(values), groups, spec_constants=constants)
    return OpResult(result, pre + fills + [main] + post)
