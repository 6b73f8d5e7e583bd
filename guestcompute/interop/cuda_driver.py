"""The few CUDA driver-API calls that share Vulkan memory and timeline
semaphores with CUDA, through ctypes.

Why the driver API (``libcuda.so.1``) and not the runtime or a binding
package: the driver library ships with the NVIDIA driver itself, so it is on
every machine where PyTorch runs on CUDA, whatever CUDA runtime torch
bundles; its external-memory and external-semaphore structs have been
stable since CUDA 10 (timeline semaphores since 11.2); and it adds no
dependency for users who never touch CUDA — nothing here loads until the
first CUDA call. Work runs in the device's primary context, the one the
CUDA runtime (and so torch) uses, so pointers and semaphores made here are
torch's too.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading

from ..errors import GuestComputeError, UnsupportedError

# CUexternalMemoryHandleType / CUexternalSemaphoreHandleType values.
_MEMORY_OPAQUE_FD = 1
_SEMAPHORE_TIMELINE_FD = 9
_DEDICATED = 0x1            # CUDA_EXTERNAL_MEMORY_DEDICATED


class CudaError(GuestComputeError):
    """A CUDA driver call failed: ``call`` and its CUresult ``code``."""

    def __init__(self, call: str, code: int, text: str):
        super().__init__(f"{call} failed with CUresult {code} ({text})")
        self.call = call
        self.code = code


class _HandleFd(ctypes.Union):
    # The handle union of the *_HANDLE_DESC structs: an fd, a win32 pair or
    # an NvSciBuf/NvSciSync pointer; the pair makes it 16 bytes.
    _fields_ = [("fd", ctypes.c_int), ("win32", ctypes.c_void_p * 2), ("nvsci", ctypes.c_void_p)]


class _MemoryHandleDesc(ctypes.Structure):      # CUDA_EXTERNAL_MEMORY_HANDLE_DESC
    _fields_ = [("type", ctypes.c_int), ("handle", _HandleFd), ("size", ctypes.c_ulonglong),
                ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class _BufferDesc(ctypes.Structure):            # CUDA_EXTERNAL_MEMORY_BUFFER_DESC
    _fields_ = [("offset", ctypes.c_ulonglong), ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class _SemaphoreHandleDesc(ctypes.Structure):   # CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC
    _fields_ = [("type", ctypes.c_int), ("handle", _HandleFd), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class _SemaphoreParams(ctypes.Structure):
    # CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and ..._WAIT_PARAMS share this
    # layout: the fence value first, then 64 bytes of members a timeline
    # semaphore leaves zero (nvSciSync, keyed mutex, reserved), the flags
    # and 16 reserved words.
    _fields_ = [("value", ctypes.c_ulonglong), ("unused", ctypes.c_ubyte * 64), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


assert ctypes.sizeof(_MemoryHandleDesc) == 104 and ctypes.sizeof(_BufferDesc) == 88
assert ctypes.sizeof(_SemaphoreHandleDesc) == 96 and ctypes.sizeof(_SemaphoreParams) == 144


class CudaDriver:
    """libcuda, loaded once per process (:func:`driver`)."""

    def __init__(self):
        try:
            self._lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise UnsupportedError("CUDA interop needs the NVIDIA driver's libcuda.so.1, which did not load "
                                   f"({exc})") from None
        self._call("cuInit", 0)
        self._contexts: dict = {}       # ordinal -> retained primary context
        self._lock = threading.Lock()

    def _call(self, name: str, *args) -> None:
        code = getattr(self._lib, name)(*args)
        if code:
            text = ctypes.c_char_p()
            self._lib.cuGetErrorString(code, ctypes.byref(text))
            raise CudaError(name, code, text.value.decode() if text.value else "unknown")

    # -- devices and their primary contexts --------------------------------------------
    def ordinal_for_uuid(self, uuid: bytes) -> int:
        """The CUDA device ordinal whose UUID is ``uuid`` (Vulkan's deviceUUID)."""
        count = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(count))
        seen = []
        for ordinal in range(count.value):
            dev = ctypes.c_int()
            self._call("cuDeviceGet", ctypes.byref(dev), ordinal)
            raw = (ctypes.c_ubyte * 16)()
            self._call("cuDeviceGetUuid", raw, dev)
            if bytes(raw) == uuid:
                return ordinal
            seen.append(bytes(raw).hex())
        raise UnsupportedError(f"no CUDA device has the Vulkan device's UUID {uuid.hex()} (CUDA sees "
                               f"{seen or 'no devices'}); is CUDA_VISIBLE_DEVICES hiding it, or is the "
                               "context on another GPU or on lavapipe?")

    def enter(self, ordinal: int) -> None:
        """Make ``ordinal``'s primary context current on this thread (pair with :meth:`leave`)."""
        with self._lock:
            ctx = self._contexts.get(ordinal)
            if ctx is None:
                dev = ctypes.c_int()
                self._call("cuDeviceGet", ctypes.byref(dev), ordinal)
                ctx = ctypes.c_void_p()
                self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
                self._contexts[ordinal] = ctx
        self._call("cuCtxPushCurrent_v2", ctx)

    def leave(self) -> None:
        self._call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))

    @contextlib.contextmanager
    def current(self, ordinal: int):
        """``with driver.current(ordinal):`` — calls inside run in that device's primary context."""
        self.enter(ordinal)
        try:
            yield self
        finally:
            self.leave()

    # -- memory ------------------------------------------------------------------------
    def import_memory(self, fd: int, size: int) -> int:
        """Import the dedicated opaque-fd allocation ``fd`` of ``size``
        bytes; CUDA owns ``fd`` once this returns. Returns the
        CUexternalMemory."""
        desc = _MemoryHandleDesc(type=_MEMORY_OPAQUE_FD, size=size, flags=_DEDICATED)
        desc.handle.fd = fd
        out = ctypes.c_void_p()
        self._call("cuImportExternalMemory", ctypes.byref(out), ctypes.byref(desc))
        return out.value

    def map_buffer(self, memory: int, offset: int, size: int) -> int:
        """A device pointer to ``size`` bytes at ``offset`` of an imported memory."""
        desc = _BufferDesc(offset=offset, size=size)
        ptr = ctypes.c_ulonglong()
        self._call("cuExternalMemoryGetMappedBuffer", ctypes.byref(ptr), ctypes.c_void_p(memory),
                   ctypes.byref(desc))
        return ptr.value

    def release_memory(self, ptr: int, memory: int) -> None:
        """Unmap ``ptr`` and drop CUDA's import (the memory itself lives on
        while the Vulkan side holds it)."""
        self._call("cuMemFree_v2", ctypes.c_ulonglong(ptr))
        self._call("cuDestroyExternalMemory", ctypes.c_void_p(memory))

    # -- timeline semaphores ------------------------------------------------------------
    def import_timeline(self, fd: int) -> int:
        """Import a Vulkan timeline semaphore's opaque fd (CUDA owns it once
        this returns). Returns the CUexternalSemaphore."""
        desc = _SemaphoreHandleDesc(type=_SEMAPHORE_TIMELINE_FD)
        desc.handle.fd = fd
        out = ctypes.c_void_p()
        self._call("cuImportExternalSemaphore", ctypes.byref(out), ctypes.byref(desc))
        return out.value

    def signal(self, semaphore: int, value: int, stream: int) -> None:
        """Enqueue on ``stream``: set the timeline to ``value`` once the work before it is done."""
        sems = (ctypes.c_void_p * 1)(semaphore)
        params = (_SemaphoreParams * 1)()
        params[0].value = value
        self._call("cuSignalExternalSemaphoresAsync", sems, params, 1, ctypes.c_void_p(stream))

    def wait(self, semaphore: int, value: int, stream: int) -> None:
        """Enqueue on ``stream``: later work waits until the timeline reaches ``value``."""
        sems = (ctypes.c_void_p * 1)(semaphore)
        params = (_SemaphoreParams * 1)()
        params[0].value = value
        self._call("cuWaitExternalSemaphoresAsync", sems, params, 1, ctypes.c_void_p(stream))

    def destroy_semaphore(self, semaphore: int) -> None:
        self._call("cuDestroyExternalSemaphore", ctypes.c_void_p(semaphore))


_driver = None
_driver_lock = threading.Lock()


def driver() -> CudaDriver:
    """The process's CudaDriver (loads libcuda on first use)."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = CudaDriver()
        return _driver
