"""Tensors: typed, shaped views of a guest-owned or host-imported VkBuffer."""
from __future__ import annotations

import importlib
import math
from typing import Protocol

import numpy as np

from .device.shared_memory import ExportedMemory
from .dtypes import DType, as_dtype, host_array
from .errors import DTypeError, GuestComputeError, InvalidArgumentError, ShapeError
from .interop.cuda_memory import CudaView, cuda_memory_for
from .vk.memory import next_uid
from .vk.sync import buffer_hazard_key, handle_value


class Binding(Protocol):
    """What a dispatch binds, as the recorder sees it: a :class:`Buffer`, a
    :class:`BufferWindow`, or an image subresource or sampler
    (``image.ImageBinding``, ``image.SamplerBinding``). ``uid``: changes
    when the memory behind it does (descriptor caches key on it);
    ``hazard_keys``: the memory it reaches, for the hazard tracker (none
    for a sampler); ``alloc``: its guest allocation (None for a host's
    buffer and for images, which own their memory elsewhere);
    ``host_access``: what the host declared for an import, else None;
    ``last_epoch``: the last epoch that used it (nothing is destroyed before
    that epoch retires)."""
    uid: int
    hazard_keys: tuple
    alloc: object
    host_access: object
    last_epoch: int


class Buffer:
    """One VkBuffer as the guest sees it. ``uid`` changes whenever memory is
    (re)allocated; caches and programs key on it, never on handle values.

    ``host_access`` is None for guest-owned buffers; for imported ones it is
    the :class:`~guestcompute.host.HostAccess` the host declared, and
    ``usage`` the VkBufferUsageFlags it declared (None: not said).

    ``hazard_keys`` name the memory the buffer covers, for the hazard
    tracker: a guest-owned buffer is its own VkBuffer, whose key
    (``vk/sync.buffer_hazard_key``) imports of that VkBuffer list too; an
    import has the key of its byte range of the host's VkBuffer (shared by
    every import of the same range) followed by the keys of the earlier
    imports whose ranges overlap it (see ``device/imported_ranges.py``).
    """
    __slots__ = ("uid", "handle", "hazard_keys", "size", "alloc", "ctx", "host_access", "usage", "last_epoch",
                 "window_offset", "__weakref__")

    # Where this buffer's bytes start in its VkBuffer: 0, but for a
    # BufferWindow. Descriptors bind at it; host reads and writes add it.
    root = None

    def __init__(self, ctx, handle, size, alloc=None, host_access=None, usage=None, hazard_keys=None):
        self.window_offset = 0
        self.uid = next_uid()
        self.handle = handle
        self.hazard_keys = hazard_keys if hazard_keys is not None else (buffer_hazard_key(handle_value(handle)),)
        self.size = size
        self.alloc = alloc
        self.ctx = ctx
        self.host_access = host_access
        self.usage = usage
        self.last_epoch = 0    # 0 = never recorded

    @property
    def imported(self) -> bool:
        return self.host_access is not None

    def __del__(self):
        ctx = self.ctx
        if self.alloc is not None and ctx is not None and not ctx.closed:
            ctx.device.epochs.release(self.alloc, self.uid, self.last_epoch)


class BufferWindow(Buffer):
    """``size`` bytes of ``root`` from byte ``window_offset`` on: what one
    storage-buffer binding of a buffer larger than maxStorageBufferRange
    reaches (ops on such buffers run in windows, see ops/windows.py).

    It shares the root's VkBuffer, memory, hazard keys and last epoch, and
    frees nothing. Its uid, ``(root uid, offset, size)``, names the same
    descriptor entry for every window of that range, and the entry goes
    when the root does."""
    __slots__ = ("_root",)

    def __init__(self, root: Buffer, offset: int, size: int):
        self._root = root
        self.uid = (root.uid, offset, size)
        self.handle = root.handle
        self.hazard_keys = root.hazard_keys
        self.size = size
        self.alloc = root.alloc
        self.ctx = root.ctx
        self.host_access = root.host_access
        self.usage = root.usage
        self.window_offset = offset

    @property
    def root(self) -> Buffer:
        return self._root

    @property
    def last_epoch(self) -> int:
        return self._root.last_epoch

    @last_epoch.setter
    def last_epoch(self, epoch: int) -> None:
        self._root.last_epoch = epoch

    def __del__(self):
        pass        # the root frees the memory


def contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def as_shape(shape) -> tuple:
    """``shape`` as a tuple of ints >= 0, from an int or a sequence of ints
    (numpy integers too); ShapeError otherwise."""
    if shape.__class__ is tuple and all(s.__class__ is int and s >= 0 for s in shape):
        return shape            # the common case, checked without building anything
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in dims):
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    shape = tuple(int(s) for s in dims)
    if any(s < 0 for s in shape):
        raise ShapeError(f"negative dimension in shape {shape}; dimensions must be >= 0")
    return shape


def _is_int(value) -> bool:
    """A Python or numpy integer, not a bool (True is an int to Python, a mask to numpy)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _slice_indices(index: slice, n: int) -> tuple:
    """``index.indices(n)``, with its ValueError / TypeError as typed errors."""
    for part in (index.start, index.stop, index.step):
        if part is not None and not _is_int(part):
            raise InvalidArgumentError(f"slice {index!r}: start, stop and step must be ints or None")
    if index.step == 0:
        raise InvalidArgumentError(f"slice {index!r}: the step cannot be zero; use a positive step, "
                                   "or a negative one to go backwards")
    return index.indices(n)


class Tensor:
    """A strided view of a :class:`Buffer`.

    ``offset`` and ``strides`` are in elements. ``buffer`` (and its ``uid``)
    changes when the tensor's memory is reallocated (:meth:`resize`), which
    invalidates programs that captured it.

    Thread-safety: a tensor may be read by many recording threads; resizing
    it while another thread records with it is a race the caller must avoid.
    """

    def __init__(self, buffer: Buffer, shape, dtype, strides=None, offset: int = 0, base=None):
        # A plain attribute, read on every op: the Buffer this tensor views
        # (replaced only by resize(), through _swap_buffer).
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.dtype: DType = as_dtype(dtype)
        self.strides = tuple(strides) if strides is not None else contiguous_strides(self.shape)
        self.offset = int(offset)
        self._base = base

    # -- facts -------------------------------------------------------------
    @property
    def ctx(self):
        return self.buffer.ctx

    @property
    def base(self):
        """The tensor this one is a view of, or None."""
        return self._base

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.size

    @property
    def is_contiguous(self) -> bool:
        return all(s == c for s, c, n in zip(self.strides, contiguous_strides(self.shape), self.shape)
                   if n != 1)

    @property
    def span(self) -> tuple:
        """(first, last+1) element touched, relative to the buffer start."""
        if self.size == 0:
            return (self.offset, self.offset)
        lo = self.offset + sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        hi = self.offset + sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides)) + 1
        return (lo, hi)

    def __repr__(self):
        kind = "imported" if self.buffer.imported else "owned"
        return f"<Tensor {self.shape} {self.dtype} {kind}>"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- host data -----------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """Copy to a new ndarray. The GPU work that wrote this tensor must have
        completed (the host waited on its fence, or ``ctx.run`` returned).

        Thread-safety: any thread, once that work completed."""
        ctx = self.ctx
        ctx.device.check_open()
        lo, hi = self.span
        raw = ctx.read_bytes(self.buffer, lo * self.dtype.size, (hi - lo) * self.dtype.size)
        flat = np.frombuffer(raw, dtype=self.dtype.numpy)
        if self.size == 0:
            return np.zeros(self.shape, self.dtype.numpy)
        view = np.lib.stride_tricks.as_strided(
            flat[self.offset - lo:], self.shape, tuple(s * self.dtype.size for s in self.strides))
        return np.array(view, copy=True)

    def write(self, array) -> None:
        """Overwrite a contiguous tensor's contents from host data (outside
        any recording; for per-frame values use programs' params). Values
        convert as in ``ctx.tensor``: one the dtype cannot hold raises.

        Thread-safety: any thread, but not while submitted GPU work that
        reads or writes this tensor may still run (wait for its fence)."""
        ctx = self.ctx
        ctx.device.check_open()
        arr = host_array(array, self.dtype, "write()")
        if arr.size == 1 and arr.shape != self.shape:
            arr = np.full(self.shape, arr.reshape(()), dtype=self.dtype.numpy)
        if arr.shape != self.shape:
            raise ShapeError(f"cannot write an array of shape {arr.shape} into a tensor of shape {self.shape}; "
                             "reshape the data (or pass a single value to fill it)")
        if not self.is_contiguous:
            raise InvalidArgumentError("write() needs a contiguous tensor; write the base tensor instead")
        ctx.device.transfers.write(self.buffer, self.offset * self.dtype.size, arr.tobytes())

    # -- sharing with another device, CUDA and PyTorch ----------------------------
    @property
    def exportable(self) -> bool:
        """True when the memory can be shared (made with ``exportable=True``,
        or imported with ``ctx.import_memory``)."""
        alloc = self.buffer.alloc
        return alloc is not None and alloc.shareable

    def export(self) -> ExportedMemory:
        """This tensor's memory as an opaque fd, with where the view lives in
        it: hand it to ``ctx.import_memory`` of another context on the same
        physical device (or to CUDA). Each call makes a new fd, which the
        caller owns (see :class:`~guestcompute.device.shared_memory.ExportedMemory`).
        Thread-safety: any thread."""
        ctx = self.ctx
        ctx.device.check_open()
        nbytes = max(0, self.span[1] - self.offset) * self.dtype.size
        return ctx.device.shared_memory.export(self.buffer.alloc, offset=self._first_byte, nbytes=nbytes,
                                               shape=self.shape, dtype=self.dtype.name, strides=self.strides)

    def cuda_view(self) -> CudaView:
        """This view of an exportable tensor as CUDA sees it, on the CUDA
        device whose UUID is the Vulkan device's (the memory is imported
        into CUDA once, on first use). What :meth:`to_torch`, DLPack and
        ``__cuda_array_interface__`` hand out; it keeps the memory alive."""
        if not self.exportable:
            raise InvalidArgumentError("only exportable tensors can be shared with CUDA: make it with "
                                       "ctx.empty(..., exportable=True) (or ctx.tensor / ctx.zeros likewise)")
        ctx = self.ctx
        ctx.device.check_open()
        memory = cuda_memory_for(self.buffer.alloc, ctx.device.shared_memory)
        return CudaView(memory, self.buffer, offset=self._first_byte, shape=self.shape, dtype=self.dtype.name,
                        strides=self.strides)

    @property
    def _first_byte(self) -> int:
        """Where the first element lives in the VkBuffer's memory, in bytes."""
        return self.buffer.window_offset + self.offset * self.dtype.size

    def to_torch(self):
        """A ``torch.Tensor`` on the matching CUDA device sharing this
        tensor's memory (no copy): same shape, dtype and strides. Guest work
        and torch work on it are ordered by a shared timeline (see
        "Interop with PyTorch" in docs/integration.md), never implicitly.
        Needs torch; the tensor must be exportable."""
        torch = importlib.import_module("torch")
        return torch.as_tensor(self.cuda_view())

    @property
    def __cuda_array_interface__(self) -> dict:
        # Absent (AttributeError) for tensors CUDA cannot see, so libraries
        # probing for it fall back to other routes.
        if not self.exportable:
            raise AttributeError("only exportable tensors have a __cuda_array_interface__")
        try:
            view = self.cuda_view()
        except GuestComputeError as e:      # no CUDA driver or device, a dtype CUDA lacks...
            raise AttributeError(f"no __cuda_array_interface__: {e}") from e
        return view.__cuda_array_interface__

    def __dlpack__(self, *, stream=None, **kwargs):
        """DLPack capsule of the CUDA view (``torch.from_dlpack(t)``).
        ``stream`` is accepted and not waited on: guest and CUDA work are
        ordered by a shared timeline."""
        return self.cuda_view().dlpack_capsule()

    def __dlpack_device__(self) -> tuple:
        return self.cuda_view().dlpack_device()

    # -- views -----------------------------------------------------------------
    def _view(self, shape, strides, offset) -> "Tensor":
        return Tensor(self.buffer, shape, self.dtype, strides, offset, base=self._base if self._base is not None else self)

    @property
    def real(self) -> "Tensor":
        """A complex64 tensor's real parts as a float32 view of the same
        memory (writing it writes them); a real tensor itself."""
        return self._part(0) if self.dtype.kind == "complex" else self

    @property
    def imag(self) -> "Tensor":
        """A complex64 tensor's imaginary parts as a float32 view of the same
        memory. Real tensors have none to view (DTypeError)."""
        if self.dtype.kind != "complex":
            raise DTypeError(f"imag: a {self.dtype} tensor has no imaginary parts to view")
        return self._part(1)

    def _part(self, which: int) -> "Tensor":
        # A complex element is two float32 words: strides and offset double.
        return Tensor(self.buffer, self.shape, "float32", tuple(2 * s for s in self.strides),
                      2 * self.offset + which, base=self._base if self._base is not None else self)

    def reshape(self, *shape) -> "Tensor":
        """A view with another shape (contiguous tensors only); one
        dimension may be -1. Views are plain host-side objects: any thread."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not all(_is_int(s) and s >= -1 for s in shape):
            raise ShapeError(f"reshape: the shape must be ints >= 0 (one of them may be -1), got {shape!r}")
        shape = [int(s) for s in shape]
        if shape.count(-1) > 1:
            raise ShapeError("reshape: only one dimension may be -1")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or self.size % known:
                raise ShapeError(f"cannot reshape {self.shape} into {tuple(shape)}")
            shape[shape.index(-1)] = self.size // known
        if math.prod(shape) != self.size:
            raise ShapeError(f"cannot reshape a tensor of {self.size} elements into {tuple(shape)}; "
                             "the new shape must hold as many elements")
        if not self.is_contiguous:
            raise ShapeError("reshape of a non-contiguous view; copy it first (rec.copy / rec.contiguous)")
        return self._view(tuple(shape), None, self.offset)

    def permute(self, *axes) -> "Tensor":
        """A view with its axes reordered (numpy's ``transpose(axes)``).
        Thread-safety: any thread."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        hint = f"give each of 0..{self.ndim - 1} once" if self.ndim else "a 0-d tensor takes no axes"
        for a in axes:
            if not _is_int(a):
                raise InvalidArgumentError(f"permute: axis {a!r} is not an int; {hint}")
        if not all(-self.ndim <= a < self.ndim for a in axes):
            raise ShapeError(f"permute: axes {axes} out of range for a {self.ndim}-d tensor; {hint}")
        axes = tuple(int(a) % self.ndim for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ShapeError(f"permute: {axes} is not a permutation of {self.ndim} axes; {hint}")
        return self._view(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes),
                          self.offset)

    def transpose(self, a: int = -2, b: int = -1) -> "Tensor":
        """A view with axes ``a`` and ``b`` swapped (negative axes count from
        the end). Thread-safety: any thread."""
        axes = list(range(self.ndim))
        a, b = self._axis(a, "transpose"), self._axis(b, "transpose")
        axes[a], axes[b] = axes[b], axes[a]
        return self.permute(axes)

    def _axis(self, axis, what: str) -> int:
        """``axis`` as an index in 0..ndim-1, or a typed error saying what fits."""
        if not _is_int(axis):
            raise InvalidArgumentError(f"{what}: axis {axis!r} is not an int; pass an axis number such as 0 or -1")
        if not -self.ndim <= axis < self.ndim:
            valid = f"use {-self.ndim}..{self.ndim - 1}" if self.ndim else "a 0-d tensor has no axes"
            raise ShapeError(f"{what}: axis {axis} is out of range for a {self.ndim}-d tensor; {valid}")
        return int(axis) % self.ndim

    @property
    def T(self) -> "Tensor":
        """A view with all axes reversed. Thread-safety: any thread."""
        return self.permute(tuple(reversed(range(self.ndim))))

    def __getitem__(self, index) -> "Tensor":
        """Basic slicing (ints, slices with steps, Ellipsis, None) → a view.
        Thread-safety: any thread."""
        if not isinstance(index, tuple):
            index = (index,)
        # Identity tests only: `==` against an ndarray in the index would compare elementwise.
        ellipses = [k for k, i in enumerate(index) if i is Ellipsis]
        if len(ellipses) > 1:
            raise ShapeError("only one Ellipsis allowed")
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if n_real > self.ndim:
            raise ShapeError(f"too many indices for a {self.ndim}-d tensor")
        if ellipses:
            k = ellipses[0]
            index = index[:k] + (slice(None),) * (self.ndim - n_real) + index[k + 1:]
        index = index + (slice(None),) * (self.ndim - sum(1 for i in index if i is not None))
        shape, strides, offset, dim = [], [], self.offset, 0
        for i in index:
            if i is None:
                shape.append(1); strides.append(0)
                continue
            n, s = self.shape[dim], self.strides[dim]
            if isinstance(i, slice):
                start, stop, step = _slice_indices(i, n)
                count = len(range(start, stop, step))
                shape.append(count); strides.append(s * step)
                if count:
                    offset += start * s
            elif _is_int(i):
                i = int(i)
                if not -n <= i < n:
                    raise ShapeError(f"index {i} out of range for axis {dim} of size {n}; use {-n}..{n - 1}")
                offset += (i % n) * s
            elif isinstance(i, (bool, np.bool_)):
                raise InvalidArgumentError("boolean (mask) indexing is not supported; index with ints and slices, "
                                           "or select on the host with numpy")
            else:
                raise InvalidArgumentError(f"unsupported index {i!r}; use ints, slices, None, ...")
            dim += 1
        return self._view(tuple(shape), tuple(strides), offset)

    # Code that swaps a tensor's memory must go through _swap_buffer: the
    # context's swap count tells programs and remembered calls to look at
    # their tensors again.
    def _swap_buffer(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.ctx.count_swap()

    def resize(self, shape) -> None:
        """Reallocate this tensor with a new shape (contents are undefined).
        Gives it a new Buffer (a new ``buffer.uid``); programs that captured it re-record lazily.
        An exportable tensor stays exportable; earlier exports keep naming the old memory.

        Thread-safety: not while another thread records with this tensor."""
        ctx = self.ctx
        ctx.device.check_open()
        if self._base is not None:
            raise InvalidArgumentError("resize() a base tensor, not a view")
        new = ctx.empty(shape, self.dtype, exportable=self.exportable)
        self._swap_buffer(new.buffer)
        self.shape = new.shape
        self.strides = new.strides
        self.offset = 0
