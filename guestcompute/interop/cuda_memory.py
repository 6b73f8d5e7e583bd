"""Guest memory as CUDA sees it: an exportable allocation imported into
CUDA once, and strided views of it handed to torch (or any CUDA array
library) through ``__cuda_array_interface__`` and DLPack.

Lifetimes: a :class:`CudaMemory` is cached on the guest allocation and
unmapped from CUDA when that allocation goes. Every view handed out keeps
the guest buffer (so the allocation) and the CudaMemory alive until the
consumer drops it, so neither side frees memory the other still uses;
CUDA's import also holds the memory itself, so it stays valid even past the
context's close while a torch tensor still views it.
"""
from __future__ import annotations

import ctypes
import threading

from ..errors import InvalidArgumentError, UnsupportedError
from ..vk import external
from .cuda_driver import driver

_TYPESTR = {"float32": "<f4", "float16": "<f2", "int32": "<i4", "uint32": "<u4", "uint8": "|u1", "complex64": "<c8"}
# DLDataType (code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLComplex 5.
_DL_DTYPE = {"float32": (2, 32), "float16": (2, 16), "int32": (0, 32), "uint32": (1, 32), "uint8": (1, 8),
             "complex64": (5, 64)}
_DL_CUDA = 2


class CudaMemory:
    """One guest allocation mapped into CUDA on device ``ordinal``: ``ptr``
    is the device address of its byte 0."""

    def __init__(self, exported, ordinal: int):
        cuda = driver()
        self.ordinal = ordinal
        with cuda.current(ordinal):
            fd = exported.take_fd()
            close_on_failure = external.closer(fd)
            try:
                self._memory = cuda.import_memory(fd, exported.allocation_size)
            except BaseException:
                close_on_failure()      # CUDA owns it only on success
                raise
            self.ptr = cuda.map_buffer(self._memory, 0, exported.allocation_size)

    def __del__(self):
        memory = getattr(self, "_memory", None)
        if memory is None:
            return
        self._memory = None
        try:
            cuda = driver()
            with cuda.current(self.ordinal):
                cuda.release_memory(self.ptr, memory)
        except Exception:       # interpreter shutdown: CUDA may be gone already, and frees it all anyway
            pass


_mapping_lock = threading.Lock()


def cuda_memory_for(alloc, shared_memory) -> CudaMemory:
    """``alloc``'s CUDA mapping, made on first use and cached on it, on the
    CUDA device whose UUID is the Vulkan device's."""
    with _mapping_lock:
        if alloc.cuda is None:
            ordinal = driver().ordinal_for_uuid(shared_memory.uuids[0])
            exported = shared_memory.export(alloc, offset=0, nbytes=alloc.size, shape=(alloc.size,),
                                            dtype="uint8", strides=(1,))
            try:
                alloc.cuda = CudaMemory(exported, ordinal)
            finally:
                exported.close()        # still ours if the import failed early
        return alloc.cuda


class CudaView:
    """A strided view of a CudaMemory that CUDA array libraries accept
    (``torch.as_tensor(view)``, CuPy, Numba). It holds ``owner`` (the guest
    buffer) for as long as it lives."""

    def __init__(self, memory: CudaMemory, owner, *, offset: int, shape, dtype: str, strides):
        if dtype not in _TYPESTR:
            raise UnsupportedError(f"{dtype} tensors have no CUDA array type here")
        if any(s < 0 for s in strides):
            raise InvalidArgumentError("a view with negative strides cannot be handed to CUDA libraries "
                                       "(torch has none); copy it into a contiguous tensor first")
        self.memory = memory
        self.owner = owner
        self.offset = offset            # bytes from the allocation's start
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides = tuple(strides)   # elements
        self.itemsize = int(_TYPESTR[dtype][2:])

    @property
    def __cuda_array_interface__(self) -> dict:
        # Version 3; "stream": None tells the consumer no synchronisation is
        # needed here: guest and CUDA work are ordered by a shared timeline.
        return {"shape": self.shape, "typestr": _TYPESTR[self.dtype],
                "data": (self.memory.ptr + self.offset, False),
                "strides": tuple(s * self.itemsize for s in self.strides), "version": 3, "stream": None}

    def dlpack_capsule(self):
        """A ``dltensor`` PyCapsule of this view (DLPack 0.x, unversioned)."""
        return _dlpack_capsule(self)

    def dlpack_device(self) -> tuple:
        return (_DL_CUDA, self.memory.ordinal)


# -- DLPack ---------------------------------------------------------------------------------
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

# What each DLManagedTensor handed out keeps alive (its arrays and the view),
# by the struct's address, until its deleter runs.
_handed_out: dict = {}


@_DELETER
def _delete(managed):
    _handed_out.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_NAME = b"dltensor"
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # A consumer renames the capsule ("used_dltensor") and calls the
    # deleter itself; an unconsumed capsule still owns the tensor.
    if _pyapi.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        address = _pyapi.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        _delete(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))


def _dlpack_capsule(view: CudaView):
    ndim = len(view.shape)
    shape = (ctypes.c_int64 * max(1, ndim))(*view.shape)
    strides = (ctypes.c_int64 * max(1, ndim))(*view.strides)
    code, bits = _DL_DTYPE[view.dtype]
    managed = _DLManagedTensor()
    t = managed.dl_tensor
    # DLPack wants ``data`` aligned to 256 bytes on CUDA where it can be:
    # the allocation's base is, and the view's offset goes to byte_offset.
    t.data, t.byte_offset = view.memory.ptr, view.offset
    t.device_type, t.device_id, t.ndim = _DL_CUDA, view.memory.ordinal, ndim
    t.code, t.bits, t.lanes = code, bits, 1
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _handed_out[address] = (managed, shape, strides, view)
    return _pyapi.PyCapsule_New(address, _CAPSULE_NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
