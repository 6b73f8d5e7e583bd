"""A small fully connected network as one guest object: ``ctx.mlp(layers)``.

``Dense(weight, bias=None, activation="relu")`` is one layer, ``y =
act(x @ weight + bias)`` with ``weight`` shaped (in, out) as numpy's
``x @ W`` (``transposed=True`` takes the (out, in) layout of torch's
``nn.Linear`` and ONNX's Gemm with transB). :class:`Network` checks the
chain of layers, packs every weight and bias once into one guest buffer
(:func:`pack`) and is what ``rec.mlp(x, net)`` evaluates in one dispatch
(ops/mlp_op.py).

Widths: the input up to :data:`MAX_INPUT` features (a wider input is
refused: project it with ``rec.matmul`` first, or give the first layer to
``rec.matmul`` and the rest to the network), every other layer up to
:data:`MAX_WIDTH`; any depth of at least one layer. Every width is padded
with zeros to a multiple of 16 (one cooperative-matrix fragment), which
changes no result: a padded unit's weights into the next layer are zero.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, InvalidArgumentError, ShapeError, WrongContextError
from ..tensor import Tensor
from ..vk.cooperative_vector import to_inferencing_optimal
from .mlp_coopvec import offsets as coopvec_offsets
from .mlp_coopvec import pack as coopvec_pack
from .mlp_coopvec import spec_constants as coopvec_constants
from .mlp_kernels import ACTIVATIONS, PAD, TABLE_WORDS, WEIGHT_DTYPES, activation_words, khr_spec_constants

MAX_INPUT = 64
MAX_WIDTH = 128
ACCUMULATORS = ("float32", "float16")


def padded(width: int) -> int:
    return -(-width // PAD) * PAD


def host_weights(a, what: str) -> np.ndarray:
    """Weights as a numpy array: a guest tensor (read back); a torch tensor,
    or anything with ``detach()`` then ``cpu()`` and ``numpy()`` (detached:
    a parameter has no numpy view while it requires grad; a GPU tensor is
    copied to the host; bfloat16, which numpy lacks, is widened to float32
    first, exactly); anything numpy takes (``__array__``, nested lists)."""
    if isinstance(a, Tensor):
        return a.numpy()
    try:
        if callable(getattr(a, "detach", None)):
            a = a.detach()
            if "bfloat16" in str(getattr(a, "dtype", "")):
                a = a.float()
            a = (a.cpu() if callable(getattr(a, "cpu", None)) else a).numpy()
        return np.asarray(a)
    except Exception as e:     # ragged lists, a tensor type numpy cannot take, and the like
        raise InvalidArgumentError(f"{what}: not an array ({type(e).__name__}: {e})") from None


def _host_matrix(a, what: str, ndim: int) -> np.ndarray:
    """A float64 copy of host data, a torch tensor or a guest tensor."""
    arr = host_weights(a, what)
    if arr.dtype.kind not in "fiub":
        raise DTypeError(f"{what}: expected real numbers, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ShapeError(f"{what}: expected a {ndim}-d array, got shape {arr.shape}")
    return arr.astype(np.float64)


class Dense:
    """One layer: ``act(x @ weight + bias)``. ``weight`` (in, out), or
    (out, in) with ``transposed=True``; ``bias`` (out,) or None (zeros);
    numpy arrays, nested lists, torch tensors or guest tensors (read when
    the layer is made: :func:`host_weights`). ``activation``: one of :data:`ACTIVATIONS`; ``slope`` is
    leaky_relu's negative slope."""

    def __init__(self, weight, bias=None, activation: str = "relu", *, slope: float = 0.01,
                 transposed: bool = False):
        w = _host_matrix(weight, "Dense weight", 2)
        self.weight = w.T.copy() if transposed else w
        n_in, n_out = self.weight.shape
        if n_in < 1 or n_out < 1:
            raise ShapeError(f"Dense weight: shape {self.weight.shape} has an empty dimension")
        if bias is None:
            self.bias = np.zeros(n_out)
        else:
            self.bias = _host_matrix(bias, "Dense bias", 1)
            if self.bias.shape != (n_out,):
                raise ShapeError(f"Dense bias: shape {self.bias.shape}, the layer has {n_out} outputs; pass "
                                 f"a ({n_out},) bias (with transposed=True the weight is (out, in))")
        if activation not in ACTIVATIONS:
            raise InvalidArgumentError(f"Dense activation {activation!r}; use one of {list(ACTIVATIONS)}")
        if isinstance(slope, bool) or not isinstance(slope, (int, float, np.integer, np.floating)) \
                or not math.isfinite(slope):
            raise InvalidArgumentError(f"Dense slope must be a finite number, got {slope!r}")
        self.activation, self.slope = activation, float(slope)

    @property
    def shape(self) -> tuple:
        """(in, out)."""
        return self.weight.shape

    def __repr__(self):
        return f"Dense({self.shape[0]} -> {self.shape[1]}, {self.activation})"


def check_layers(layers) -> tuple:
    """``layers`` as a tuple of chained Dense layers within the widths."""
    if isinstance(layers, Dense):
        layers = (layers,)
    if not isinstance(layers, (list, tuple)) or not layers:
        raise InvalidArgumentError("mlp: layers must be a non-empty list of gc.Dense layers")
    for i, layer in enumerate(layers):
        if not isinstance(layer, Dense):
            raise InvalidArgumentError(f"mlp: layer {i} is a {type(layer).__name__}; wrap it as "
                                       "gc.Dense(weight, bias, activation=...)")
    for i, (a, b) in enumerate(zip(layers, layers[1:])):
        if a.shape[1] != b.shape[0]:
            raise ShapeError(f"mlp: layer {i} has {a.shape[1]} outputs but layer {i + 1} takes {b.shape[0]} "
                             "inputs")
    if layers[0].shape[0] > MAX_INPUT:
        raise ShapeError(f"mlp: {layers[0].shape[0]} input features, the fused network takes at most "
                         f"{MAX_INPUT}; run the first layer with rec.matmul (then its bias and activation) "
                         "and give the network the rest")
    for i, layer in enumerate(layers):
        if layer.shape[1] > MAX_WIDTH:
            raise ShapeError(f"mlp: layer {i} has {layer.shape[1]} outputs, at most {MAX_WIDTH} fit the "
                             "fused network; split the network around the wide layer and run it with rec.matmul")
    return tuple(layers)


def bfloat16_bits(a) -> np.ndarray:
    """float32 values as bfloat16 bits (uint16), rounded to nearest even,
    as the kernels round (numpy has no bfloat16)."""
    f = np.asarray(a, np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), rounded)


def rounded_to(a, dtype: str) -> np.ndarray:
    """``a`` rounded to ``dtype`` ("float16", "float32" or "bfloat16"), as float32."""
    if dtype == "bfloat16":
        return (bfloat16_bits(a).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a).astype(dtype).astype(np.float32)


def _stored(block: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return bfloat16_bits(block)
    return block.astype(dtype)


def pack(layers, dtype: str) -> np.ndarray:
    """The packed network as uint32 words: the table (TABLE_WORDS per
    layer: K, N padded, activation code, slope bits, weight and bias word
    offsets, two unused), then per layer its K x N row-major weights and
    its bias — for float16 and bfloat16 sixteen identical rows of it (what
    the cooperative-matrix kernel loads as one fragment), for float32 one.
    Every block starts on a 16-byte boundary."""
    bias_rows = 1 if dtype == "float32" else 16
    table = np.zeros((len(layers), TABLE_WORDS), np.uint32)
    blocks, offset = [], len(layers) * TABLE_WORDS
    for i, layer in enumerate(layers):
        (k, n), (kp, np_) = layer.shape, (padded(layer.shape[0]), padded(layer.shape[1]))
        # float64 blocks: each weight is rounded once, to the stored type
        w = np.zeros((kp, np_), np.float64)
        w[:k, :n] = layer.weight
        b = np.zeros((bias_rows, np_), np.float64)
        b[:, :n] = layer.bias
        words = []
        for block in (w, b):
            raw = _stored(block, dtype).tobytes()
            raw += bytes(-len(raw) % 16)
            words.append(np.frombuffer(raw, np.uint32))
        table[i, :6] = (kp, np_, *activation_words(layer), offset, offset + words[0].size)
        offset += words[0].size + words[1].size
        blocks += words
    return np.concatenate([table.ravel()] + blocks)


def _check_range(layers, dtype: str) -> None:
    if dtype == "float32":
        return
    big = max(max(np.abs(layer.weight).max(initial=0), np.abs(layer.bias).max(initial=0)) for layer in layers)
    with np.errstate(over="ignore"):
        fits = np.isfinite(rounded_to(np.float32(big), dtype))
    if not fits:
        raise InvalidArgumentError(f"mlp: a weight or bias of magnitude {big:g} does not fit {dtype} "
                                   "(it rounds to infinity); use dtype='float32'")


class Network:
    """A packed network of one context; made by ``ctx.mlp(layers, dtype=,
    accumulate=)``, evaluated by ``rec.mlp(x, net)``.

    ``dtype``: how the weights are stored ("float16"; "bfloat16", float32's
    range at float16's size, on the tensor cores where the host enabled
    VK_KHR_shader_bfloat16, else read by the portable kernel; or "float32":
    then only the portable kernel runs it). ``accumulate``: the cooperative-
    matrix kernel's accumulator type ("float16" is faster there, with
    about ten times the rounding error; float16 weights only); the portable
    kernel always accumulates in float32. ``weights``: the packed uint32
    guest tensor."""

    def __init__(self, ctx, layers, dtype: str = "float16", accumulate: str = "float32"):
        if dtype not in WEIGHT_DTYPES:
            raise DTypeError(f"mlp: dtype {dtype!r}; the weights are stored as one of {list(WEIGHT_DTYPES)}")
        if accumulate not in ACCUMULATORS:
            raise InvalidArgumentError(f"mlp: accumulate must be one of {list(ACCUMULATORS)}, got {accumulate!r}")
        if dtype != "float16" and accumulate == "float16":
            raise InvalidArgumentError(f"mlp: accumulate='float16' is for float16 weights, not {dtype}; "
                                       "use dtype='float16' or accumulate='float32'")
        layers = check_layers(layers)
        _check_range(layers, dtype)
        self.ctx, self.dtype, self.accumulate = ctx, dtype, accumulate
        self.layers = layers
        self.weights = ctx.tensor(pack(layers, dtype))
        self._khr_constants = None      # the KHR kernel's specialization constants, once made
        # (width classes, weights, offsets, specialization constants) of the cooperative-vector kernel
        self._coopvec = None

    def coopvec_weights(self, classes: tuple) -> tuple:
        """(network buffer, its offset push constants, its specialization
        constants) of the cooperative-vector kernel for width ``classes``
        (ops/mlp_coopvec.py), made on first use, not each time a dispatch is
        recorded: its matrices converted to this device's
        inferencing-optimal layout. The offsets depend on the classes and
        depth only, so new weights keep them."""
        if self._coopvec is None or self._coopvec[0] != classes:
            words = self._coopvec_words(self.layers, classes)
            self._coopvec = (classes, self.ctx.tensor(words), coopvec_offsets(words, self.depth),
                             coopvec_constants(self.layers))
        return self._coopvec[1:]

    def khr_constants(self) -> tuple:
        """The KHR kernel's specialization constants (ops/mlp_kernels.py),
        made once for these layers, not each time a dispatch is recorded."""
        if self._khr_constants is None:
            self._khr_constants = khr_spec_constants(self.layers)
        return self._khr_constants

    def _coopvec_words(self, layers, classes: tuple) -> np.ndarray:
        device = self.ctx.device.handle
        return coopvec_pack(layers, classes, lambda m: to_inferencing_optimal(device, m))

    # -- what the op reads ---------------------------------------------------------------
    @property
    def widths(self) -> tuple:
        """(in, hidden..., out) as given."""
        return (self.layers[0].shape[0],) + tuple(layer.shape[1] for layer in self.layers)

    @property
    def padded_widths(self) -> tuple:
        return tuple(padded(w) for w in self.widths)

    @property
    def in_width(self) -> int:
        return self.widths[0]

    @property
    def out_width(self) -> int:
        return self.widths[-1]

    @property
    def depth(self) -> int:
        return len(self.layers)

    # -- new weights ---------------------------------------------------------------------
    def update(self, layers, *, rec=None) -> None:
        """New layers of the same widths. Without ``rec`` the packed buffer
        is replaced by a new one and activations may change: work recorded
        before keeps reading the old weights (a buffer lives until its last
        epoch retires). With ``rec`` the same buffer is rewritten in place
        by a copy recorded there, ordered after the work recorded before it
        in that recording (and before the work after it); each layer keeps
        its activation, which a recorded dispatch may have compiled into
        its pipeline (the tensor-core kernels' specialization constants)."""
        layers = check_layers(layers)
        if tuple(layer.shape for layer in layers) != tuple(layer.shape for layer in self.layers):
            raise ShapeError(f"mlp update: layers of shapes {[layer.shape for layer in layers]}, the network "
                             f"has {[layer.shape for layer in self.layers]}; make a new network with ctx.mlp")
        _check_range(layers, self.dtype)
        if rec is not None and getattr(rec, "ctx", None) is not self.ctx:
            raise WrongContextError("mlp update: rec records for another context")
        if rec is not None and _activations(layers) != _activations(self.layers):
            raise InvalidArgumentError(
                f"mlp update in place (rec=): activations {_activations(layers)} differ from the network's "
                f"{_activations(self.layers)}; work already recorded may have them compiled in, so an in-place "
                "update keeps them: give new activations with net.update(layers) without rec (a new buffer)")
        packed = pack(layers, self.dtype)
        if rec is None:
            self.weights = self.ctx.tensor(packed)
            self._coopvec = None
        else:
            rec.copy(self.ctx.tensor(packed), out=self.weights)
            if self._coopvec is not None:
                classes, words, offsets, _ = self._coopvec
                rec.copy(self.ctx.tensor(self._coopvec_words(layers, classes)), out=words)
                self._coopvec = (classes, words, offsets, coopvec_constants(layers))
        self.layers = layers
        self._khr_constants = None

    def set_weights(self, weights, biases=None, *, transposed: bool = False, rec=None) -> None:
        """New weights (one per layer), and biases (one per layer, None
        for a layer keeps its bias; ``biases=None`` keeps them all), with
        each layer's activation kept: :meth:`update` with those layers."""
        if not isinstance(weights, (list, tuple)) or len(weights) != self.depth:
            raise InvalidArgumentError(f"mlp set_weights: pass a list of {self.depth} weights, one per layer")
        biases = [None] * self.depth if biases is None else biases
        if not isinstance(biases, (list, tuple)) or len(biases) != self.depth:
            raise InvalidArgumentError(f"mlp set_weights: pass a list of {self.depth} biases (None keeps one)")
        layers = [Dense(w, old.bias if b is None else b, old.activation, slope=old.slope, transposed=transposed)
                  for w, b, old in zip(weights, biases, self.layers)]
        self.update(layers, rec=rec)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        """The network evaluated by numpy in float32 from weights rounded
        to the network's dtype (the reference the kernels are tested
        against)."""
        h = np.asarray(x, np.float32)
        for layer in self.layers:
            w = rounded_to(layer.weight, self.dtype)
            b = rounded_to(layer.bias, self.dtype)
            h = apply_activation(h @ w + b, layer.activation, layer.slope)
        return h

    def __repr__(self):
        return f"Network({' -> '.join(map(str, self.widths))}, {self.dtype}, {self.depth} layers)"


def _activations(layers) -> list:
    """Each layer's activation, with its slope where it has one."""
    return [(layer.activation, layer.slope) if layer.activation == "leaky_relu" else layer.activation
            for layer in layers]


def apply_activation(v: np.ndarray, name: str, slope: float = 0.01) -> np.ndarray:
    """numpy's version of each activation (float32 in, float32 out)."""
    with np.errstate(over="ignore"):
        if name == "relu":
            return np.maximum(v, 0)
        if name == "leaky_relu":
            return np.where(v >= 0, v, v * np.float32(slope))
        if name == "sigmoid":
            return (1 / (1 + np.exp(-v))).astype(np.float32)
        if name == "tanh":
            return np.tanh(v)
        if name == "silu":
            return (v / (1 + np.exp(-v))).astype(np.float32)
    return v


def check_network(ctx, net, what: str = "mlp") -> Network:
    if not isinstance(net, Network):
        raise InvalidArgumentError(f"{what}: net must be a network made by ctx.mlp(layers), got "
                                   f"{type(net).__name__}")
    if net.ctx is not ctx:
        raise WrongContextError(f"{what}: the network belongs to another context; make it with this "
                                "context's ctx.mlp")
    return net
