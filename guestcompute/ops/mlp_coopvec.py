"""The fused MLP's VK_NV_cooperative_vector kernel: one query per
invocation, each layer one matrix-vector multiply-add that the driver runs
on the tensor cores (NVIDIA's route for exactly such networks), with the
weights in the device's inferencing-optimal layout.

Written in Slang (kernels/spec.py's Slang families): the GLSL compilers
baking uses here predate GL_NV_cooperative_vector, slangc knows it. The
vector lengths are compile-time, so a variant is a width class for the
input (IN), the hidden layers (W, all padded to it) and the output (OUT),
and the accumulator (the matrix-vector result's type); widths within the
classes are data, depth and activations specialization constants — one
module serves every network of its classes.

The network buffer (:func:`pack`): a table of four words per layer (the
matrix's and the bias's byte offsets, activation code, slope bits), then
each layer's matrix (N x K, converted by the caller, at 64-byte offsets)
and bias (N fp16, at 16-byte offsets), each padded with zeros to its class.
The kernel takes the offsets of the first layer, the last and the first
:data:`PUSHED_HIDDEN` hidden layers from push constants (:func:`offsets`),
and the depth and those layers' activations (code and slope) as
specialization constants (:func:`spec_constants`): the hidden layers are
written out one after another, each behind a test of the depth that the
driver folds away with the constants, so that the chain of products it
compiles is straight-line code with its offsets in push constants. That is
what lets it run the products at full rate: the minimal reference,
benchmarks/baselines/coopvec_mlp.slang, ran 472 TFLOP/s on an H100 with its
five layers written out and their offsets in push constants, about 205
reading the offsets from a table, 212 with each activation picked by a
code read from the table and 247 with each hidden layer behind a test of
a pushed depth (each alone; this kernel with all three ran 207, and with
the depth and activations specialized 465). Deeper layers read their
offsets and activations from the table in a loop. A network's pipeline is
therefore made per depth and activations.

Operands are float16/float32 tensors (byte-address buffers: the element
type is a mode in the push constants): ``x_mode`` 0 loads a query's
inputs as one vector (fp16, contiguous, 16-byte aligned, exactly IN of
them), 1 element by element from fp16, 2 from fp32; ``o_mode`` 0 stores
one fp16 vector (the same conditions), 1 fp16 elements, 2 fp32 elements.
``groups_x``, ``groups_y``: the dispatch's grid (a large one folds into y
and z, as :func:`~guestcompute.kernels.spec.groups_for` says).
"""
from __future__ import annotations

import numpy as np

from ..kernels.catalogue import variants
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family
from .mlp_kernels import activation_words

IN_CLASSES = (16, 32, 64)
WIDTH_CLASSES = (16, 32, 64, 128)
ACCUMULATORS = {"float16": "half", "float32": "float"}
THREADS = 64
MATRIX_ALIGN, BIAS_ALIGN = 64, 16         # VK_NV_cooperative_vector's offset alignments (bytes)
VECTOR_ALIGN = 16                         # what a vector load or store of the operands is given
TABLE_BYTES = 16                          # one layer's entry

PUSHED_HIDDEN = 7                         # hidden layers whose offsets are push constants (124 bytes in all)
OFFSET_PUSH = ("w_first", "b_first", "w_last", "b_last") + tuple(
    f"{kind}{layer}" for layer in range(1, PUSHED_HIDDEN + 1) for kind in "wb")
# Specialization constant ids (0-2 are the workgroup size's): the depth, then
# an activation code and a slope for each slot: the first layer, the pushed
# hidden layers, the last layer.
SLOTS = PUSHED_HIDDEN + 2
DEPTH_ID, CODE_ID, SLOPE_ID = 3, 4, 4 + SLOTS
PUSH = (Push("rows", "uint"), Push("in_w", "uint"), Push("out_w", "uint"),
        Push("x_off", "uint"), Push("x_sr", "int"), Push("x_sc", "int"), Push("x_mode", "uint"),
        Push("o_off", "uint"), Push("o_sr", "int"), Push("o_sc", "int"), Push("o_mode", "uint"),
        Push("groups_x", "uint"), Push("groups_y", "uint")) + tuple(Push(name, "uint") for name in OFFSET_PUSH)


def width_class(width: int, classes=WIDTH_CLASSES):
    """The smallest class holding ``width``, or None."""
    return next((c for c in classes if c >= width), None)


def classes_of(widths: tuple):
    """(IN, W, OUT) of a network's widths (in, hidden..., out), or None
    when one does not fit a class."""
    hidden = widths[1:-1]
    classes = (width_class(widths[0], IN_CLASSES), width_class(max(hidden)) if hidden else IN_CLASSES[0],
               width_class(widths[-1]))
    return None if None in classes else classes


def coopvec_spec(in_c: int, w_c: int, out_c: int, acc: str) -> KernelSpec:
    bindings = (Binding("x", "uint", READ), Binding("net", "uint", READ), Binding("o", "uint", WRITE))
    return KernelSpec("mlp_coopvec", bindings, PUSH, (("in", in_c), ("w", w_c), ("out", out_c), ("acc", acc)),
                      (THREADS, 1, 1), (), ("float16", "cooperative_vector"))


# Activation codes are ACTIVATIONS' indices; tanh and the sigmoid saturate
# (exp(-v) overflowing to inf gives 0, not inf/inf).
_BODY = """
static const int IN = %(in)d;
static const int W = %(w)d;
static const int OUT = %(out)d;
typealias Acc = %(acc)s;
%(constants)s

CoopVec<Acc, N> dense<let N : int, let K : int>(CoopVec<half, K> v, uint w_at, uint b_at)
{
    return coopVecMatMulAdd<Acc, N>(v, CoopVecComponentType::Float16, net, w_at,
                                    CoopVecComponentType::Float16, net, b_at,
                                    CoopVecComponentType::Float16, CoopVecMatrixLayout::InferencingOptimal,
                                    false, 0);
}

// The activation of a code and slope: constants for the slots, table words deeper.
CoopVec<Acc, N> apply<let N : int>(CoopVec<Acc, N> v, uint code, float slope)
{
    if (code == 0u) return v;
    CoopVec<Acc, N> zero = CoopVec<Acc, N>(Acc(0));
    if (code == 1u) return max(v, zero);
    if (code == 2u) return max(v, zero) + min(v, zero) * Acc(slope);
    if (code == 4u) return tanh(v);
    CoopVec<Acc, N> one = CoopVec<Acc, N>(Acc(1));
    CoopVec<Acc, N> s = one / (one + exp(-v));
    return code == 3u ? s : v * s;
}

CoopVec<Acc, N> from_table<let N : int>(CoopVec<Acc, N> v, uint layer)
{
    uint at = layer * %(table)du;
    return apply<N>(v, net.Load(at + 8u), asfloat(net.Load(at + 12u)));
}

CoopVec<half, IN> load_x(uint q)
{
    int row = int(pc.x_off) + int(q) * pc.x_sr;
    if (pc.x_mode == 0u) return coopVecLoad<IN, half>(x, uint(row) * 2u);
    CoopVec<half, IN> v = CoopVec<half, IN>(half(0));
    for (int k = 0; k < int(pc.in_w); ++k) {
        uint i = uint(row + k * pc.x_sc);
        v[k] = pc.x_mode == 1u ? x.Load<half>(i * 2u) : half(asfloat(x.Load(i * 4u)));
    }
    return v;
}

void store_o(uint q, CoopVec<Acc, OUT> v)
{
    int row = int(pc.o_off) + int(q) * pc.o_sr;
    if (pc.o_mode == 0u) { CoopVec<half, OUT>(v).store(o, uint(row) * 2u); return; }
    for (int c = 0; c < int(pc.out_w); ++c) {
        uint i = uint(row + c * pc.o_sc);
        if (pc.o_mode == 1u) o.Store<half>(i * 2u, half(v[c]));
        else o.Store(i * 4u, asuint(float(v[c])));
    }
}

[shader("compute")]
[numthreads(%(threads)d, 1, 1)]
void main(uint3 gid: SV_GroupID, uint3 tid: SV_GroupThreadID)
{
    uint q = (gid.x + pc.groups_x * (gid.y + pc.groups_y * gid.z)) * %(threads)du + tid.x;
    if (q >= pc.rows) return;
    CoopVec<half, IN> v = load_x(q);
    if (DEPTH == 1u) { store_o(q, apply<OUT>(dense<OUT, IN>(v, pc.w_last, pc.b_last), CODE%(last)d, SLOPE%(last)d)); return; }
    CoopVec<half, W> h = CoopVec<half, W>(apply<W>(dense<W, IN>(v, pc.w_first, pc.b_first), CODE0, SLOPE0));
%(hidden)s
    for (uint l = %(pushed_end)du; l + 1u < DEPTH; ++l)
        h = CoopVec<half, W>(from_table<W>(dense<W, W>(h, net.Load(l * %(table)du), net.Load(l * %(table)du + 4u)), l));
    store_o(q, apply<OUT>(dense<OUT, W>(h, pc.w_last, pc.b_last), CODE%(last)d, SLOPE%(last)d));
}
"""


@family("mlp_coopvec", language="slang")
def _render(spec: KernelSpec) -> str:
    constants = [f"[vk::constant_id({DEPTH_ID})] const uint DEPTH = 2;"]
    constants += [f"[vk::constant_id({CODE_ID + i})] const uint CODE{i} = 0;" for i in range(SLOTS)]
    constants += [f"[vk::constant_id({SLOPE_ID + i})] const float SLOPE{i} = 0.0;" for i in range(SLOTS)]
    # Hidden layer l runs when the depth exceeds l + 1 (layers 0..depth-2 are all but the last).
    hidden = "\n".join(f"    if (DEPTH > {l + 1}u) h = CoopVec<half, W>(apply<W>(dense<W, W>(h, pc.w{l}, pc.b{l}), "
                       f"CODE{l}, SLOPE{l}));" for l in range(1, PUSHED_HIDDEN + 1))
    return _BODY % {"in": spec.param("in"), "w": spec.param("w"), "out": spec.param("out"),
                    "acc": ACCUMULATORS[spec.param("acc")], "table": TABLE_BYTES, "threads": THREADS,
                    "constants": "\n".join(constants), "hidden": hidden, "pushed_end": PUSHED_HIDDEN + 1,
                    "last": SLOTS - 1}


@variants("mlp_coopvec")
def _coopvec_variants():
    for in_c in IN_CLASSES:
        for w_c in WIDTH_CLASSES:
            for out_c in WIDTH_CLASSES:
                for acc in ACCUMULATORS:
                    yield coopvec_spec(in_c, w_c, out_c, acc)


# -- the network buffer ------------------------------------------------------------------

def _padded_layers(layers, classes: tuple):
    """[(N x K float16 matrix, N float16 bias)] per layer, padded to the classes."""
    in_c, w_c, out_c = classes
    out = []
    for i, layer in enumerate(layers):
        k = in_c if i == 0 else w_c
        n = out_c if i == len(layers) - 1 else w_c
        m = np.zeros((n, k), np.float16)
        m[:layer.shape[1], :layer.shape[0]] = layer.weight.T
        b = np.zeros(n, np.float16)
        b[:layer.shape[1]] = layer.bias
        out.append((m, b))
    return out


def pack(layers, classes: tuple, convert) -> np.ndarray:
    """The network buffer as uint32 words; ``convert(matrix)`` gives a
    padded (N, K) float16 matrix's bytes in the kernel's layout."""
    blob = bytearray(len(layers) * TABLE_BYTES)
    for i, ((m, b), layer) in enumerate(zip(_padded_layers(layers, classes), layers)):
        blob += bytes(-len(blob) % MATRIX_ALIGN)
        w_at = len(blob)
        blob += convert(m)
        blob += bytes(-len(blob) % BIAS_ALIGN)
        b_at = len(blob)
        blob += b.tobytes()
        entry = np.array([w_at, b_at, *activation_words(layer)], np.uint32)
        blob[i * TABLE_BYTES:(i + 1) * TABLE_BYTES] = entry.tobytes()
    blob += bytes(-len(blob) % 16)
    return np.frombuffer(bytes(blob), np.uint32).copy()


def offsets(words: np.ndarray, depth: int) -> dict:
    """The kernel's offset push constants (:data:`OFFSET_PUSH`) of a
    network buffer made by :func:`pack` for ``depth`` layers, from its
    table; the hidden layers past the network's depth get 0 (never read)."""
    table = words[:depth * TABLE_BYTES // 4].reshape(depth, TABLE_BYTES // 4)
    last = depth - 1
    out = {name: 0 for name in OFFSET_PUSH}
    out.update(w_first=int(table[0][0]), b_first=int(table[0][1]), w_last=int(table[last][0]),
               b_last=int(table[last][1]))
    for layer in range(1, min(last, PUSHED_HIDDEN + 1)):
        out[f"w{layer}"], out[f"b{layer}"] = int(table[layer][0]), int(table[layer][1])
    return out


def spec_constants(layers) -> tuple:
    """The kernel's specialization constants for ``layers`` (ops/mlp.Dense),
    as (id, uint value) pairs: the depth, then the code and slope bits of
    the first layer, the pushed hidden layers and the last layer (slots
    of layers the network lacks stay 0)."""
    depth = len(layers)
    slots = {SLOTS - 1: layers[-1]} | {i: layers[i] for i in range(min(depth - 1, PUSHED_HIDDEN + 1))}
    out = [(DEPTH_ID, depth)]
    for slot in range(SLOTS):
        code, slope = activation_words(slots.get(slot))
        out += [(CODE_ID + slot, code), (SLOPE_ID + slot, slope)]
    return tuple(sorted(out))
