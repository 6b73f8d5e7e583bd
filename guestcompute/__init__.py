"""guestcompute: GPU compute recorded into a host renderer's own Vulkan
command buffer. See docs/integration.md for the host contract.

Public names are imported on first use: importing the ``vulkan`` package
loads the Vulkan loader, and ``guestcompute doctor`` must still run — and
say what to install — on a machine where that fails.
"""
import importlib
from typing import TYPE_CHECKING

from .version import __version__

if TYPE_CHECKING:   # the same names, eagerly, for type checkers and IDEs
    from . import onnx, testing
    from .context import Context, DeviceLimits
    from .device.shared_memory import ExportedMemory
    from .device.shared_timeline import SharedTimeline
    from .dtypes import complex64, float16, float32, int32, uint8, uint32, uint64
    from .errors import (BufferRangeError, CompilerNotFoundError, ContextClosedError, DeviceLostError,
                         DTypeError, GuestComputeError, IndexOutOfRangeError, InvalidArgumentError,
                         KernelCompileError, KernelError, MissingDependencyError, OutOfMemoryError,
                         RecordingError, ShapeError,
                         UnknownOperationError, UnsupportedError, VulkanError, WrongContextError)
    from .host import HostAccess, Requirements, requirements
    from .image import Image, ImageLevel
    from .interop.cuda_memory import CudaView
    from .interop.cuda_timeline import CudaTimeline
    from .kernels.spec import KernelSpec
    from .ops.mlp import Dense, Network
    from .ops.user_kernel import UserKernel
    from .recording.handoff import Submission
    from .recording.program import Params, Program
    from .recording.recorder import Recorder
    from .tensor import Tensor
    from .warmup import WarmupReport
    from .weights.dense_layers import dense_layers
    from .weights.safetensors import load_safetensors

_EXPORTS = {
    "Context": "context", "DeviceLimits": "context",
    "HostAccess": "host", "Requirements": "host", "requirements": "host",
    "Recorder": "recording.recorder", "Tensor": "tensor", "Image": "image", "ImageLevel": "image",
    "Program": "recording.program", "Params": "recording.program",
    "Submission": "recording.handoff", "UserKernel": "ops.user_kernel",
    "Dense": "ops.mlp", "Network": "ops.mlp",
    "dense_layers": "weights.dense_layers", "load_safetensors": "weights.safetensors",
    "KernelSpec": "kernels.spec", "WarmupReport": "warmup",
    "ExportedMemory": "device.shared_memory", "SharedTimeline": "device.shared_timeline",
    "CudaTimeline": "interop.cuda_timeline", "CudaView": "interop.cuda_memory",
    **{name: "dtypes" for name in ("complex64", "float16", "float32", "int32", "uint8", "uint32", "uint64")},
    **{name: "errors" for name in (
        "BufferRangeError", "CompilerNotFoundError", "ContextClosedError", "DeviceLostError",
        "DTypeError", "GuestComputeError", "IndexOutOfRangeError", "InvalidArgumentError", "KernelCompileError",
        "KernelError", "MissingDependencyError", "OutOfMemoryError", "RecordingError", "ShapeError",
        "UnknownOperationError", "UnsupportedError", "VulkanError",
        "WrongContextError")},
}
# Subpackages imported on first use: ``gc.onnx`` imports the onnx package
# only when a model is loaded (it is an optional extra).
_SUBPACKAGES = ("testing", "onnx")
__all__ = sorted(_EXPORTS) + list(_SUBPACKAGES)


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'guestcompute' has no attribute {name!r}")
    if module not in ("errors", "dtypes", "weights.safetensors"):     # these need no Vulkan
        importlib.import_module(".ops", __name__)      # registers every operation on the Recorder
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
