"""Every error guestcompute raises on purpose derives from GuestComputeError.

Errors are raised *before* any command is recorded, so a host that catches
one can still submit its command buffer: nothing of the failed call is in it.
"""
from __future__ import annotations


class GuestComputeError(Exception):
    """Base class of all guestcompute errors."""


class InvalidArgumentError(GuestComputeError, ValueError):
    """An argument has the wrong type, value or shape."""


class DTypeError(InvalidArgumentError, TypeError):
    """A dtype is unknown, mismatched, or not valid for the operation."""


class ShapeError(InvalidArgumentError):
    """Shapes do not match or do not broadcast."""


class IndexOutOfRangeError(InvalidArgumentError, IndexError):
    """An index given as host data lies outside the axis it indexes (still
    an IndexError, as numpy raises)."""


class BufferRangeError(InvalidArgumentError):
    """A buffer is too small, or an offset/size lies outside a buffer."""


class UnsupportedError(GuestComputeError):
    """The device, or what the host enabled on it, cannot do this."""


class MissingDependencyError(UnsupportedError, ImportError):
    """An optional dependency is not installed; the message names the extra
    to install (``pip install guestcompute[onnx]``). Still an ImportError."""


class PastBindingRangeError(UnsupportedError):
    """A tensor lies (partly) past what one storage-buffer binding reaches
    (maxStorageBufferRange) from the start of its buffer. Ops that run in
    windows catch it (see ops/windows.py); the others let it through."""


class ContextClosedError(GuestComputeError):
    """The context (or the tensor's context) was closed."""


class WrongContextError(InvalidArgumentError):
    """A tensor or program belongs to another context."""


class RecordingError(GuestComputeError):
    """A recorder was used outside its ``with`` block, or nested wrongly."""


class UnknownOperationError(InvalidArgumentError, AttributeError):
    """``rec.<name>`` names no registered operation (still an AttributeError,
    so ``hasattr`` and ``getattr(rec, name, default)`` keep working)."""


class KernelError(GuestComputeError):
    """A user kernel failed to compile, or its SPIR-V is malformed."""


class KernelCompileError(KernelError):
    """A user kernel's GLSL did not compile. ``diagnostics``: the compiler's
    messages, each with ``file``, ``line``, ``column`` (or None),
    ``severity``, ``message`` and the offending ``source_line``; ``output``:
    what the compiler printed, ``tool``: which compiler it was."""

    def __init__(self, message: str, diagnostics=(), output: str = "", tool: str = ""):
        super().__init__(message)
        self.diagnostics, self.output, self.tool = list(diagnostics), output, tool


class CompilerNotFoundError(KernelError):
    """glslc is missing (only needed for user GLSL; built-ins ship as SPIR-V)."""


class VulkanError(GuestComputeError):
    """A Vulkan call failed. ``result`` holds the VkResult code."""

    def __init__(self, call: str, result: int, hint: str = ""):
        self.call = call
        self.result = result
        name = _RESULT_NAMES.get(result, str(result))
        msg = f"{call} failed with {name}"
        super().__init__(msg + (f": {hint}" if hint else ""))


class OutOfMemoryError(VulkanError):
    """VK_ERROR_OUT_OF_DEVICE_MEMORY / OUT_OF_HOST_MEMORY. The context stays usable."""


class DeviceLostError(VulkanError):
    """VK_ERROR_DEVICE_LOST: the device must be recreated by its owner."""


# The `vulkan` package defines VK_ERROR_OUT_OF_POOL_MEMORY as +1000069000 (the
# sign is lost from the extension enum); the spec's value is negative.
VK_ERROR_OUT_OF_POOL_MEMORY = -1000069000
VK_ERROR_FRAGMENTED_POOL = -12

_RESULT_NAMES = {
    1: "VK_NOT_READY", 2: "VK_TIMEOUT", 3: "VK_EVENT_SET", 4: "VK_EVENT_RESET", 5: "VK_INCOMPLETE",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST", -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT", -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT", -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    -10: "VK_ERROR_TOO_MANY_OBJECTS", -11: "VK_ERROR_FORMAT_NOT_SUPPORTED",
    -12: "VK_ERROR_FRAGMENTED_POOL", -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY", -1000072003: "VK_ERROR_INVALID_EXTERNAL_HANDLE",
}


def check(call: str, result: int, hint: str = "") -> None:
    """Raise the typed error for a failed VkResult (negative codes)."""
    if result >= 0:
        return
    if result in (-1, -2):
        raise OutOfMemoryError(call, result, hint or "free tensors or retire epochs, then retry")
    if result == -4:
        raise DeviceLostError(call, result, hint or "the device is lost; the host must recreate it")
    raise VulkanError(call, result, hint)
