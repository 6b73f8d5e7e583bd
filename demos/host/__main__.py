"""Self-check of the host renderer.

Offscreen (default): render a few frames of random points with validation
(including synchronization validation), print the number of validation
messages and the mean brightness, optionally save a PNG::

    python -m demos.host --screenshot points.png

Window mode (needs a display, e.g. under xvfb-run)::

    python -m demos.host --window --frames 30
"""
from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/host) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "demos.host"

import numpy as np
import vulkan as vk

from .renderer import HostRenderer
from .resources import (HOST_COHERENT, HOST_VISIBLE, Buffer, image_barrier, one_time_commands,
                        pipeline_barrier)

FLOAT_ONE_BITS = struct.unpack("<I", struct.pack("<f", 1.0))[0]


def random_points(count: int, seed: int = 1):
    """Positions (xy clip space, w = point size) and colours for ``count`` points."""
    rng = np.random.default_rng(seed)
    positions = np.zeros((count, 4), dtype=np.float32)
    # A few gaussian clusters plus a uniform haze.
    centers = rng.uniform(-0.6, 0.6, size=(5, 2))
    which = rng.integers(0, len(centers), size=count)
    positions[:, :2] = centers[which] + rng.normal(0.0, 0.15, size=(count, 2))
    haze = rng.random(count) < 0.3
    positions[haze, :2] = rng.uniform(-1.0, 1.0, size=(haze.sum(), 2))
    positions[:, 3] = rng.uniform(1.5, 4.5, size=count)

    colors = np.empty((count, 4), dtype=np.float32)
    hue = rng.random(count)
    colors[:, 0] = 0.6 + 0.4 * hue
    colors[:, 1] = 0.3 + 0.4 * (1.0 - hue)
    colors[:, 2] = 0.9 - 0.6 * hue
    colors[:, 3] = rng.uniform(0.25, 0.6, size=count)
    return positions, colors


def highlighter(renderer: HostRenderer, slice_points: int = 256):
    """A stand-in for guest work in ``record_before_pass``: each frame it
    overwrites the colours of a different slice of points with 1.0 (white)
    using a transfer, synchronised against the renderer's vertex reads via
    ``renderer.vertex_buffer_access``."""
    stage, access = renderer.vertex_buffer_access

    def record(cmd):
        buffers = renderer.vertex_buffers
        n = min(slice_points, buffers.count)
        first = (renderer.frame_count * n) % (buffers.count - n + 1)
        offset, size = first * 16, n * 16
        barrier = vk.VkBufferMemoryBarrier(
            srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            buffer=buffers.colors, offset=offset, size=size)
        # Earlier frames (possibly still running) read the buffer: WAR.
        barrier.srcAccessMask, barrier.dstAccessMask = access, vk.VK_ACCESS_TRANSFER_WRITE_BIT
        vk.vkCmdPipelineBarrier(cmd, stage, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                                0, None, 1, [barrier], 0, None)
        vk.vkCmdFillBuffer(cmd, buffers.colors, offset, size, FLOAT_ONE_BITS)
        # This frame's draw reads what we wrote: RAW.
        barrier.srcAccessMask, barrier.dstAccessMask = vk.VK_ACCESS_TRANSFER_WRITE_BIT, access
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, stage, 0,
                                0, None, 1, [barrier], 0, None)

    return record


def fill_backdrop(renderer: HostRenderer, backdrop) -> None:
    """A stand-in for guest work on the backdrop: a dim gradient written
    once by a buffer-to-image copy, leaving the texture in ``backdrop.access``."""
    width, height = backdrop.extent
    y, x = np.mgrid[0:height, 0:width]
    rgba = np.stack([x * 40 // width, y * 40 // height, np.full_like(x, 30), np.full_like(x, 255)], axis=-1)
    pixels = rgba.astype(np.uint8)
    staging = Buffer(renderer.device, renderer.memory_properties, pixels.nbytes,
                     vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, required=HOST_VISIBLE | HOST_COHERENT)
    stage, access, layout = backdrop.access
    try:
        staging.map()[0:pixels.nbytes] = pixels.tobytes()
        with one_time_commands(renderer.device, renderer.command_pool, renderer.queue) as cmd:
            pipeline_barrier(cmd, stage, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, images=[image_barrier(
                backdrop.handle, layout, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 0, vk.VK_ACCESS_TRANSFER_WRITE_BIT)])
            vk.vkCmdCopyBufferToImage(cmd, staging.handle, backdrop.handle, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                      1, [vk.VkBufferImageCopy(
                                          imageSubresource=vk.VkImageSubresourceLayers(
                                              aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, layerCount=1),
                                          imageExtent=vk.VkExtent3D(width=width, height=height, depth=1))])
            pipeline_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, stage, images=[image_barrier(
                backdrop.handle, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, layout, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                access)])
    finally:
        staging.destroy()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demos.host", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", action="store_true", help="render to a GLFW window instead of offscreen")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames to render (default: 3 offscreen, until closed in a window)")
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--size", type=int, nargs=2, default=(640, 480), metavar=("W", "H"))
    parser.add_argument("--device", default=None, help="substring of the device name to use")
    parser.add_argument("--no-validation", action="store_true")
    parser.add_argument("--screenshot", default=None, help="PNG path for the last frame (offscreen only)")
    parser.add_argument("--hdr", action="store_true",
                        help="draw into an rgba16f scene image, blitted into the output after the pass")
    parser.add_argument("--backdrop", action="store_true",
                        help="draw a backdrop texture (a gradient uploaded once) behind the points")
    args = parser.parse_args(argv)

    if args.window and args.screenshot:
        parser.error("--screenshot needs offscreen mode")
    frames = args.frames if args.frames is not None else (None if args.window else 3)
    validation = not args.no_validation

    with HostRenderer(*args.size, title="demos.host", headless=not args.window,
                      device_name=args.device, validation=validation, hdr=args.hdr) as renderer:
        print(f"device: {renderer.device_name}, Vulkan {renderer.api_version[0]}.{renderer.api_version[1]}, "
              f"{'window' if args.window else 'offscreen'} {renderer.extent[0]}x{renderer.extent[1]}, "
              f"extensions: {renderer.enabled_extensions}")
        buffers = renderer.create_vertex_buffers(args.points)
        positions, colors = random_points(args.points)
        renderer.upload(buffers.positions, positions)
        renderer.upload(buffers.colors, colors)
        if args.backdrop:
            fill_backdrop(renderer, renderer.create_backdrop(64, 64))

        before = highlighter(renderer)
        while frames is None or renderer.frame_count < frames:
            if not renderer.frame(record_before_pass=before):
                break
        rendered = renderer.frame_count

        brightness = None
        if not args.window:
            rgba = renderer.last_frame_rgba()
            brightness = float(rgba[..., :3].mean())
            if args.screenshot:
                renderer.save_png(args.screenshot)
        renderer.wait_idle()

    # close() has run: messages from teardown are included.
    messages = renderer.validation_messages
    print(f"frames rendered: {rendered}")
    if validation:
        print(f"validation messages (incl. synchronization validation): {len(messages)}")
    else:
        print("validation messages: n/a (validation off)")
    for message in messages:
        print("  " + message)
    if brightness is not None:
        print(f"mean pixel brightness: {brightness:.2f} / 255")
    if args.screenshot:
        print(f"screenshot: {args.screenshot}")
    return 1 if messages else 0


if __name__ == "__main__":
    sys.exit(main())
