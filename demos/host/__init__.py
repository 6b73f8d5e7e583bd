"""A small Vulkan host renderer (points from vertex buffers), offscreen or in
a GLFW window, whose frame loop lets other code record GPU work into each
frame's command buffer. See :mod:`demos.host.renderer`.

Run ``python -m demos.host --help`` for the self-check.
"""
from .png import encode_png, write_png
from .renderer import HostRenderer, VertexBuffers

__all__ = ["HostRenderer", "VertexBuffers", "encode_png", "write_png"]
