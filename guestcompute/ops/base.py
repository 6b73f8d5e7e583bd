"""What every operation shares: the Dispatch record, the op registry, and
argument checks. An op is a function ``fn(ctx, *args, **kw) -> OpResult``
(of ``ctx`` it uses what :class:`PlanContext` lists) that validates
everything, allocates its output last, and returns the dispatches to record.
The recorder records them only after the op returned, so a raised error
leaves the host's command buffer untouched.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..device.caps import DeviceLimits
from ..device.pipelines import Pipelines
from ..dtypes import DType, as_dtype
from ..errors import (BufferRangeError, DTypeError, InvalidArgumentError, PastBindingRangeError, ShapeError,
                      WrongContextError)
from ..host import HostCaps
from ..image import Image
from ..spirv.cache import SpirvCache
from ..tensor import Tensor


class PlanDevice(Protocol):
    """What a planner may use of ``ctx.device``: checks and facts, and the
    pipeline and SPIR-V caches (which compile, never submit)."""
    format_features: dict       # format name -> VkFormatFeatureFlags
    pipelines: Pipelines
    spirv: SpirvCache

    def check_open(self) -> None:
        """ContextClosedError once the context is closed."""

    def check_dtype_enabled(self, d) -> None:
        """UnsupportedError for a dtype whose storage feature the host did not enable."""


class PlanContext(Protocol):
    """What a planner may use of the context it plans for: its first
    parameter, ``ctx``, is a Context, but planners (and the helpers they
    pass ``ctx`` to) read only these. They read the device's facts and
    allocate what they write; nothing here records or submits (``empty``
    and ``image`` during a recording leave their first layout to the
    recording), which is what lets a raised error leave the host's command
    buffer untouched. ``tests/layering.py`` counts reads of anything else on
    ``ctx`` (and on ``ctx.device``, of what :class:`PlanDevice` does not
    list) in ``ops/``."""
    limits: DeviceLimits        # the device's facts (ranges, workgroup counts, loop cap)
    caps: HostCaps              # what the host enabled (features, API version)
    device: PlanDevice          # open and dtype checks, format features, pipelines, SPIR-V
    print_logs: object          # recording.print_log.PrintLogs: the epoch's log a printing user kernel binds
    kernel_watcher: object      # ops.kernel_watch.KernelWatcher: reloads user kernels made with watch=True

    def empty(self, shape, dtype="float32", *, exportable: bool = False) -> Tensor:
        """A new tensor (the op's output or a scratch one)."""

    def image(self, extent, format="rgba8_unorm", *, mips: int = 1, layers: int = 1, usage=None) -> Image:
        """A new guest image (an image op's output or scratch)."""

    def tensor(self, data, dtype=None, *, exportable: bool = False) -> Tensor:
        """A new tensor holding host data: a constant table an op builds once
        per context (the FFT's roots of unity). During a recording its
        upload waits and is recorded before the recording's next work, so
        a planner makes its tables only once every check has passed."""


@dataclass
class Dispatch:
    """One compute dispatch: kernel spec, one :class:`~guestcompute.tensor.Binding`
    per kernel binding (buffers, image subresources, samplers), push bytes
    and workgroup counts (or an indirect (Buffer, byte offset))."""
    spec: object
    bindings: tuple
    push: bytes
    groups: tuple
    indirect: tuple = None
    spec_constants: tuple = ()
    spirv: bytes = None          # user kernels bring their own SPIR-V
    # The recorder's resolved plan (pipeline, descriptors, hazard keys), kept
    # on the Dispatch so a memoized one records with no lookups.
    resolved: object = field(default=None, compare=False, repr=False)


@dataclass
class OpResult:
    value: object
    dispatches: list = field(default_factory=list)
    # The same arguments (the same tensor objects, none resized since) give
    # the same dispatches and value: the recorder may remember the call
    # (ops/memo.CallMemo). Only for plans that read nothing but their
    # arguments and return None or one of them.
    reusable: bool = False


_ops: dict = {}
_windows: dict = {}


def op(name: str, *, windows):
    """Register an operation ``fn(ctx: PlanContext, *args, **kw) ->
    OpResult``; it becomes ``Recorder.<name>``.

    ``windows`` (required, so that no op forgets it) says how the op runs
    on tensors one kernel binding cannot reach: one of the traits of
    ops/windows.py (``POINTWISE``, ``rowwise(...)``, ``CONCAT``,
    ``INDEX_SELECT``, ``MATMUL``), or None: it refuses with
    UnsupportedError past one binding's range."""
    if windows is not None and not callable(windows):
        raise TypeError(f"op {name!r}: windows must be a trait of ops/windows.py or None, got {windows!r}")

    def register(fn):
        if name in _ops:
            raise ValueError(f"op {name!r} registered twice")
        _ops[name] = fn
        _windows[name] = windows
        return fn
    return register


def registered_ops() -> dict:
    """Every registered op by name (importing ``guestcompute.ops`` registers them all)."""
    return dict(_ops)


def op_windows(name: str):
    """The windows trait op ``name`` declared (None: it refuses past one binding's range)."""
    return _windows[name]


# -- argument checks ---------------------------------------------------------

def check_tensor(ctx: PlanContext, t, what: str) -> Tensor:
    check_ours(ctx, t, what)
    return _check_reach(ctx, t, what)


def check_ours(ctx: PlanContext, t, what: str) -> None:
    """``t`` is a Tensor of this context (wherever it lies)."""
    if not isinstance(t, Tensor):
        raise InvalidArgumentError(f"{what} must be a guestcompute Tensor, got {type(t).__name__}; "
                                   "wrap host data with ctx.tensor(...) first")
    if t.ctx is not ctx:
        raise WrongContextError(f"{what} belongs to another context; use tensors of this context "
                                "(copy across with ctx.tensor(t.numpy()))")


def _check_reach(ctx: PlanContext, t: Tensor, what: str) -> Tensor:
    ctx.device.check_open()
    lo, hi = t.span
    if t.size and (lo < 0 or hi * t.dtype.size > t.buffer.size):   # empty views touch nothing
        raise BufferRangeError(f"{what} view reaches past its buffer ({hi * t.dtype.size} > {t.buffer.size} bytes)")
    if hi * t.dtype.size > ctx.limits.max_storage_buffer_range:
        raise PastBindingRangeError(f"{what} reaches byte {hi * t.dtype.size} of its buffer, past the "
                                    f"device's maxStorageBufferRange ({ctx.limits.max_storage_buffer_range}) "
                                    "that one kernel binding reaches")
    ctx.device.check_dtype_enabled(t.dtype)
    return t


def check_out(ctx: PlanContext, out, shape, dtype, inputs=(), what: str = "out", *, in_place: bool = True,
              reach: bool = True) -> Tensor:
    """Check an ``out=`` tensor against the result it is to hold; every op
    checks its ``out`` here, so each mistake has one error type:
    InvalidArgumentError / WrongContextError for what is not a tensor of
    this context (as :func:`check_tensor`), DTypeError for the dtype (a
    DType, or a tuple of the dtypes allowed), ShapeError for the shape,
    InvalidArgumentError for an overlap with one of ``inputs`` (a list, or
    a dict by name for messages that name it; what is not a Tensor skipped): ``in_place`` allows the very same view as an input.
    These come before the checks of where ``out`` lies (so a wrong ``out``
    past one binding's range gets the same error as a small one);
    ``reach=False`` skips those (ops/windows.py binds ``out`` in pieces).
    ``shape`` None: the op checks the shape itself."""
    check_ours(ctx, out, what)
    if shape is not None and out.shape != tuple(shape):
        raise ShapeError(f"{what} has shape {out.shape}, the result has shape {tuple(shape)}; pass an out "
                         "of the result's shape, or none")
    allowed = tuple(as_dtype(d) for d in (dtype if isinstance(dtype, tuple) else (dtype,)))
    if out.dtype not in allowed:
        result = " or ".join(str(d) for d in allowed)
        raise DTypeError(f"{what} has dtype {out.dtype}, the result is {result}; pass an out of dtype "
                         f"{result}, or none")
    named = inputs.items() if isinstance(inputs, dict) else (("an input", t) for t in inputs)
    for name, t in named:
        if isinstance(t, Tensor) and overlaps(t, out) and not (in_place and same_view(t, out)):
            if in_place:
                raise InvalidArgumentError(f"{what} overlaps {name} without being the same view; pass "
                                           f"{'the input' if name == 'an input' else name} itself (in place) "
                                           "or use a separate output tensor")
            raise InvalidArgumentError(f"{what} overlaps {name}; use a separate output tensor")
    return _check_reach(ctx, out, what) if reach else out


def check_dtype(ctx: PlanContext, dtype, allowed, what: str) -> DType:
    d = as_dtype(dtype)
    if allowed is not None and d.name not in allowed:
        raise DTypeError(f"{what}: dtype {d} not supported here; use one of {sorted(allowed)}")
    ctx.device.check_dtype_enabled(d)
    return d


# -- axis arguments ------------------------------------------------------------
# Every op that takes ``axis``/``axes`` reads it through these two helpers, so
# all of them accept the same values (Python ints, numpy integers, 0-d
# integer arrays: anything with ``__index__`` except bools) and refuse the
# rest with one ShapeError message: out of range, not an integer, a bool, or
# repeated. numpy raises AxisError/TypeError/ValueError for these; one typed
# error with one wording is easier to handle and to read.

def _axis_error(what: str, axis, ndim: int, problem: str, tuples: bool) -> ShapeError:
    if ndim == 0:
        advice = "a 0-d tensor has no axes" + ("; use None or ()" if tuples else "")
    else:
        advice = f"use an int in {-ndim}..{ndim - 1}"
        if tuples:
            advice += ", a tuple of distinct such ints, or None"
    return ShapeError(f"{what}: axis {axis!r} is {problem} for a {ndim}-d tensor; {advice}")


def _one_axis(a, ndim: int, what: str, shown, tuples: bool) -> int:
    if isinstance(a, (bool, np.bool_)):
        raise _axis_error(what, shown, ndim, "a bool, not an integer", tuples)
    try:
        i = operator.index(a)
    except TypeError:
        raise _axis_error(what, shown, ndim, "not an integer", tuples) from None
    if not -ndim <= i < ndim:
        raise _axis_error(what, shown, ndim, "out of range", tuples)
    return i % ndim


def normalize_axis(axis, ndim: int, what: str) -> int:
    """One ``axis`` argument (negative counts from the end) → ``0..ndim-1``."""
    return _one_axis(axis, ndim, what, axis, tuples=False)


def normalize_axes(axes, ndim: int, what: str, *, allow_none: bool = True) -> tuple:
    """An ``axis`` argument that may be an int, a tuple/list of ints or
    (``allow_none``) None = every axis → non-negative axes, in the order
    given (callers sort when order does not matter). Repeats are refused."""
    if axes is None and allow_none:
        return tuple(range(ndim))
    items = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    out = tuple(_one_axis(a, ndim, what, axes, tuples=True) for a in items)
    if len(set(out)) != len(out):
        raise _axis_error(what, axes, ndim, "repeated", tuples=True)
    return out


def broadcast_shapes(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(dims) > 1:
            raise ShapeError(f"shapes {' and '.join(map(str, shapes))} do not broadcast; "
                             "each dimension must match or be 1 (numpy rules)")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(t: Tensor, shape: tuple) -> tuple:
    """Element strides of ``t`` viewed with broadcast ``shape`` (0 where broadcast)."""
    pad = len(shape) - t.ndim
    return tuple(0 if (i < pad or t.shape[i - pad] == 1) else t.strides[i - pad]
                 for i in range(len(shape)))


def coalesce(shape: tuple, strides_list: list) -> tuple:
    """Merge adjacent dims that are contiguous in every operand and drop
    size-1 dims, so most strided ops run with rank 1 or 2."""
    dims = [(n, [s[i] for s in strides_list]) for i, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), [[0] for _ in strides_list]
    merged = [dims[0]]
    for n, st in dims[1:]:
        pn, pst = merged[-1]
        if all(ps == s * n for ps, s in zip(pst, st)):
            merged[-1] = (pn * n, st)
        else:
            merged.append((n, st))
    return tuple(n for n, _ in merged), [[st[k] for _, st in merged] for k in range(len(strides_list))]


def same_dtype(tensors, what: str) -> DType:
    dts = {t.dtype.name for t in tensors}
    if len(dts) > 1:
        raise DTypeError(f"{what}: operands have different dtypes {sorted(dts)}; cast one first (rec.cast)")
    return tensors[0].dtype


def byte_span(t: Tensor) -> tuple:
    """(root buffer, first byte, last byte + 1) that ``t`` touches, counted
    from the start of the buffer its window (if any) belongs to."""
    lo, hi = t.span
    buf = t.buffer
    root = buf.root or buf
    return root, lo * t.dtype.size + buf.window_offset, hi * t.dtype.size + buf.window_offset


def overlaps(a: Tensor, b: Tensor) -> bool:
    if a.buffer is not b.buffer and (a.buffer.root or a.buffer) is not (b.buffer.root or b.buffer):
        return False
    (_, alo, ahi), (_, blo, bhi) = byte_span(a), byte_span(b)
    return alo < bhi and blo < ahi


def same_view(a: Tensor, b: Tensor) -> bool:
    """The same elements in the same order (windows of one buffer included)."""
    if a.buffer is b.buffer:
        return a.offset == b.offset and a.strides == b.strides and a.shape == b.shape
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and (a.buffer.root or a.buffer) is (b.buffer.root or b.buffer)
            and a.offset * a.dtype.size + a.buffer.window_offset == b.offset * b.dtype.size + b.buffer.window_offset)
