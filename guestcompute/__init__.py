"""guestcompute: GPU compute recorded into a host renderer's own Vulkan
command buffer. See docs/integration.md for the host contract."""
from . import ops as _ops  # noqa: F401  (registers every operation)
from .context import Context, DeviceLimits
from .dtypes import float16, float32, int32, uint8, uint32
from .errors import (BufferRangeError, CompilerNotFoundError, ContextClosedError, DeviceLostError,
                     DTypeError, GuestComputeError, InvalidArgumentError, KernelError,
                     OutOfMemoryError, RecordingError, ShapeError, UnknownOperationError, UnsupportedError,
                     VulkanError, WrongContextError)
from .host import HostAccess, Requirements, requirements
from .record import Recorder
from .tensor import Tensor

__version__ = "0.1.0"


def __getattr__(name):
    if name == "testing":   # imported on demand: it pulls in the validation layer helpers
        from . import testing
        return testing
    raise AttributeError(name)
