"""The integration guide's code cannot rot: every ```python test block of
docs/integration.md runs here, against a test host that plays the renderer
— a real render pass drawing points from the shared vertex buffer — under
the validation layer with synchronization validation (on both host
profiles: a bare Vulkan 1.0 device and a modern one)."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import vulkan as vk
from vulkan import ffi

import guestcompute as gc
from guestcompute.errors import check
from guestcompute.ops.base import registered_ops

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the demo renderer's building blocks live in demos/

from demos.host.offscreen import OffscreenTarget  # noqa: E402
from demos.host.pipeline import PointsPipeline, create_render_pass  # noqa: E402
from image_refs import ref_blur  # noqa: E402
from encoding_refs import ref_frequency, ref_hash_grid  # noqa: E402
from safetensors_files import pack_arrays  # noqa: E402

GUIDE = ROOT / "docs" / "integration.md"
BLOCK = re.compile(r"^```python test\n(.*?)^```", re.S | re.M)


def python_test_blocks():
    return BLOCK.findall(GUIDE.read_text())


def test_guide_has_a_minimal_integration_of_at_most_15_lines():
    blocks = python_test_blocks()
    assert blocks, "docs/integration.md has no ```python test block"
    assert len(blocks[0].strip().splitlines()) <= 15


class PointsHost:
    """What the guide's snippets expect a host to provide: its handles, a
    vertex buffer, command buffers it records once, and its own
    begin / record_draw / end."""

    SIZE = 64

    def __init__(self, host, count: int):
        self.host = host
        self.count = count
        memory = vk.vkGetPhysicalDeviceMemoryProperties(host.physical_device)
        self.target = OffscreenTarget(host.device, memory, self.SIZE, self.SIZE, slots=2,
                                      extra_usage=vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT)
        self.render_pass = create_render_pass(host.device, self.target.format)
        self.target.build(self.render_pass)
        self.pipeline = PointsPipeline(host.device, self.render_pass)
        self.command_buffers = [host.allocate() for _ in range(2)]
        self.slot = {int(ffi.cast("uintptr_t", c)): i for i, c in enumerate(self.command_buffers)}
        # Points on pixel centres moving a whole pixel per frame, so each
        # one lights exactly the pixel the test expects (exact in float32).
        rng = np.random.default_rng(5)
        pixel = 2.0 / self.SIZE
        self.start = np.zeros((count, 4), np.float32)
        self.start[:, :2] = (rng.integers(8, self.SIZE - 8, (count, 2)) + 0.5) * pixel - 1.0
        self.start[:, 3] = 1.0                                    # point size
        self.velocities = np.zeros((count, 4), np.float32)
        self.velocities[:, :2] = rng.integers(-1, 2, (count, 2)) * pixel
        self.vertex_buffer = host.create_buffer(count * 16)
        # For the sorted example: an index buffer and one indexed indirect draw
        # (indexCount, instanceCount 1, firstIndex, vertexOffset, firstInstance).
        draw_usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                      | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        self.index_buffer = host.create_buffer(count * 4, draw_usage | vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT)
        self.draw_args = host.create_buffer(20, draw_usage | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)
        host.write_buffer(self.draw_args, np.array([0, 1, 0, 0, 0], np.uint32))
        self.colour_buffer = host.create_buffer(count * 16)
        host.write_buffer(self.vertex_buffer, self.start)
        host.write_buffer(self.colour_buffer, np.ones((count, 4), np.float32))
        self._fence = ffi.new("VkFence *")
        check("vkCreateFence", host.fns.vkCreateFence(host.device, ffi.new(
            "VkFenceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}), ffi.NULL, self._fence))

    def namespace(self) -> dict:
        h = self.host
        return dict(instance=h.instance, physical_device=h.physical_device, device=h.device,
                    queue_family_index=h.queue_family_index, api_version=h.api_version,
                    enabled_extensions=list(h.extensions), features=dict(h.features), queue=h.queue,
                    vertex_buffer=self.vertex_buffer, count=self.count,
                    initial_velocities=self.velocities, command_buffers=self.command_buffers,
                    begin=self.begin, record_draw=self.record_draw, end=self.end,
                    target_images=[i.handle for i in self.target.images], width=self.SIZE,
                    height=self.SIZE, record_finish=self.record_finish, index_buffer=self.index_buffer,
                    draw_args=self.draw_args, record_sorted_draw=self.record_sorted_draw)

    # -- the host's own recording --------------------------------------------------
    def begin(self, cmd):
        # Submitted again and again: no ONE_TIME_SUBMIT.
        info = ffi.new("VkCommandBufferBeginInfo *",
                       {"sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO})
        check("vkBeginCommandBuffer", self.host.fns.vkBeginCommandBuffer(cmd, info))

    def record_draw(self, cmd):
        """The render pass, then the copy into the readback buffer."""
        self.record_pass(cmd)
        self.record_finish(cmd)

    def record_sorted_draw(self, cmd):
        """The render pass drawing the points of the index buffer, as many as
        the indirect draw's indexCount, then the copy into the readback buffer."""
        self.record_pass(cmd, indexed_indirect=True)
        self.record_finish(cmd)

    def record_pass(self, cmd, indexed_indirect: bool = False):
        slot = self.slot[int(ffi.cast("uintptr_t", cmd))]
        clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0]))
        vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
            renderPass=self.render_pass, framebuffer=self.target.framebuffers[slot],
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0),
                                   extent=vk.VkExtent2D(width=self.SIZE, height=self.SIZE)),
            pClearValues=[clear]), vk.VK_SUBPASS_CONTENTS_INLINE)
        extra = dict(indices=self.index_buffer, indirect=self.draw_args) if indexed_indirect else {}
        self.pipeline.record_draw(cmd, (self.SIZE, self.SIZE), self.vertex_buffer, self.colour_buffer,
                                  self.count, 1.0, **extra)
        vk.vkCmdEndRenderPass(cmd)

    def record_finish(self, cmd):
        """Copy the frame into its readback buffer (the target is expected in
        COLOR_ATTACHMENT_OPTIMAL; the validation layer checks)."""
        self.target.record_finish(cmd, self.slot[int(ffi.cast("uintptr_t", cmd))])

    def end(self, cmd):
        check("vkEndCommandBuffer", self.host.fns.vkEndCommandBuffer(cmd))

    def submit_and_wait(self, cmd):
        fns, dev = self.host.fns, self.host.device
        cmds = ffi.new("VkCommandBuffer[1]", [cmd])
        submit = ffi.new("VkSubmitInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                            "commandBufferCount": 1, "pCommandBuffers": cmds})
        check("vkResetFences", fns.vkResetFences(dev, 1, self._fence))
        check("vkQueueSubmit", fns.vkQueueSubmit(self.host.queue, 1, submit, self._fence[0]))
        check("vkWaitForFences", fns.vkWaitForFences(dev, 1, self._fence, vk.VK_TRUE, 2 ** 63 - 1))

    def close(self):
        h = self.host
        h.fns.vkDeviceWaitIdle(h.device)
        h.fns.vkDestroyFence(h.device, self._fence[0], ffi.NULL)
        h.fns.vkFreeCommandBuffers(h.device, h.command_pool, len(self.command_buffers),
                                   ffi.new("VkCommandBuffer[]", self.command_buffers))
        self.pipeline.destroy()
        vk.vkDestroyRenderPass(h.device, self.render_pass, None)
        self.target.destroy()


@pytest.fixture
def points_host(host):
    ph = PointsHost(host, count=200)
    yield ph
    ph.close()


def test_minimal_integration_runs(points_host):
    ns = points_host.namespace()
    exec(compile(python_test_blocks()[0], str(GUIDE), "exec"), ns)
    ctx = ns["ctx"]
    try:
        expected = points_host.start.copy()
        for frame in range(5):                  # the host only submits from now on
            points_host.submit_and_wait(points_host.command_buffers[frame % 2])
            expected += points_host.velocities
        got = points_host.host.read_buffer(points_host.vertex_buffer, np.float32, 200 * 4).reshape(200, 4)
        np.testing.assert_array_equal(got, expected)
        # The last submit (slot 0) drew the points where they had moved to.
        image = points_host.target.read(0)[..., :3].max(axis=2)
        px = ((expected[:, :2] + 1) * 0.5 * points_host.SIZE).astype(int)
        drawn = np.zeros_like(image, bool)
        drawn[px[:, 1], px[:, 0]] = True
        np.testing.assert_array_equal(image > 0, drawn)
    finally:
        ctx.close()


def image_block():
    blocks = [b for b in python_test_blocks() if "import_image" in b]
    assert len(blocks) == 1, "docs/integration.md should have one images example"
    return blocks[0]


def programs_per_image_block():
    blocks = [b for b in python_test_blocks() if "programs[index]" in b]
    assert len(blocks) == 1, "docs/integration.md should have one program-per-swapchain-image example"
    return blocks[0]


def expected_blurred_frame(points_host) -> np.ndarray:
    """The pass's white points on black, blurred (sigma 1, radius 3), as 8-bit."""
    drawn = np.zeros((points_host.SIZE, points_host.SIZE, 4))
    drawn[..., 3] = 1.0
    px = ((points_host.start[:, :2] + 1) * 0.5 * points_host.SIZE).astype(int)
    drawn[px[:, 1], px[:, 0], :3] = 1.0
    return np.round(ref_blur(drawn, 1.0, 3) * 255)


def test_images_example_post_processes_the_render_target(points_host):
    ns = points_host.namespace()
    ns["record_draw"] = points_host.record_pass       # the images example copies out in record_finish
    exec(compile(image_block(), str(GUIDE), "exec"), ns)
    ctx = ns["ctx"]
    try:
        for slot in (0, 1):
            points_host.submit_and_wait(points_host.command_buffers[slot])
        got = points_host.target.read(1).astype(np.float64)
        np.testing.assert_allclose(got, expected_blurred_frame(points_host), atol=1.0)
    finally:
        ctx.close()


def test_one_program_per_swapchain_image(points_host):
    ns = points_host.namespace()
    ns["record_draw"] = points_host.record_pass
    acquired = iter([0, 1, 1, 0])                  # the order a swapchain might hand images out
    ns.update(acquire=lambda: next(acquired), submit=points_host.submit_and_wait)
    exec(compile(image_block(), str(GUIDE), "exec"), ns)
    ctx = ns["ctx"]
    try:
        before = dict(ctx.cache_stats())
        exec(compile(programs_per_image_block(), str(GUIDE), "exec"), ns)
        after = ctx.cache_stats()
        assert sorted(ns["programs"]) == [0, 1]
        assert after["programs_recorded"] - before["programs_recorded"] == 2
        assert after["program_replays"] - before["program_replays"] == 4
        want = expected_blurred_frame(points_host)
        for slot in (0, 1):
            np.testing.assert_allclose(points_host.target.read(slot).astype(np.float64), want, atol=1.0)
    finally:
        ctx.close()


def test_export_between_two_devices_example_runs(modern_host, second_host):
    """The interop section's two-context example, the second context on a
    VkDevice of its own (validated too)."""
    blocks = [b for b in python_test_blocks() if "import_memory" in b]
    assert len(blocks) == 1, "docs/integration.md should have one export/import example"
    ctx, other = modern_host.adopt(), second_host.adopt()
    try:
        if not ctx.caps.external_memory_fd:
            pytest.skip("the device does not offer VK_KHR_external_memory_fd")
        exec(compile(blocks[0], str(GUIDE), "exec"), {"np": np, "ctx": ctx, "other_ctx": other})
    finally:
        ctx.close()
        other.close()


def test_fft_on_images_example(ctx):
    """The guide's image transforms: rfft2 of an rgba16f image is numpy's
    over its spatial axes, and fft_convolve writes the convolved pixels
    back into the image."""
    blocks = [b for b in python_test_blocks() if "glow_spectrum" in b]
    assert len(blocks) == 1, "docs/integration.md should have one example of FFTs on images"
    rng = np.random.default_rng(17)
    hdr_np = rng.uniform(0, 4, (32, 48, 4)).astype(np.float16)
    kernel_np = np.zeros((32, 48))
    kernel_np[:3, :3] = 1 / 9
    glow = np.fft.rfft2(kernel_np)[:, :, None]
    ns = {"ctx": ctx, "hdr": ctx.image_from(hdr_np, "rgba16f"),
          "glow_spectrum": ctx.tensor(glow.astype(np.complex64))}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    pixels = hdr_np.astype(np.float64)
    spectrum = np.fft.rfft2(pixels, axes=(0, 1))
    np.testing.assert_allclose(ns["spectrum"].numpy(), spectrum, atol=1e-5 * np.abs(spectrum).max())
    ref = np.fft.irfft2(spectrum * glow, s=(32, 48), axes=(0, 1))
    np.testing.assert_allclose(ns["hdr"].numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-3)


def test_the_readmes_op_table_names_every_registered_op():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Operations"):]
    table = table[:table.index("\n\n", table.index("| group |"))]
    named = set(re.findall(r"[a-z_0-9]+", table))
    assert not sorted(set(registered_ops()) - named), "ops missing from README.md's table"


def sorted_draw_block():
    blocks = [b for b in python_test_blocks() if "record_sorted_draw" in b]
    assert len(blocks) == 1, "docs/integration.md should have one culling, compaction and sort example"
    return blocks[0]


def test_cull_compact_sort_draw_example(points_host):
    """The guide's GPU-driven example: the points left of centre are kept
    (compaction, count on the GPU), sorted by their y (count= from the
    compaction) into the host's index buffer, and drawn by an indexed
    indirect draw whose indexCount the guest wrote."""
    ns = points_host.namespace()
    exec(compile(sorted_draw_block(), str(GUIDE), "exec"), ns)
    ctx = ns["ctx"]
    try:
        for slot in (0, 1, 0):
            points_host.submit_and_wait(points_host.command_buffers[slot])
        start = points_host.start
        visible = np.flatnonzero(start[:, 0] < 0)
        order = visible[np.argsort(start[visible, 1], kind="stable")]
        host = points_host.host
        args = host.read_buffer(points_host.draw_args, np.uint32, 5)
        np.testing.assert_array_equal(args, [len(order), 1, 0, 0, 0])
        np.testing.assert_array_equal(host.read_buffer(points_host.index_buffer, np.uint32, len(order)), order)
        image = points_host.target.read(0)[..., :3].max(axis=2)
        px = ((start[visible, :2] + 1) * 0.5 * points_host.SIZE).astype(int)
        drawn = np.zeros_like(image, bool)
        drawn[px[:, 1], px[:, 0]] = True
        np.testing.assert_array_equal(image > 0, drawn)
    finally:
        ctx.close()


def convolution_block():
    blocks = [b for b in python_test_blocks() if "kernel_spectrum" in b]
    assert len(blocks) == 1, "docs/integration.md should have one FFT convolution example"
    return blocks[0]


def test_fft_convolution_example(ctx):
    """The guide's convolution (rfft2 of the kernel, rec.fft_convolve) is
    numpy's circular convolution of the image with the kernel."""
    rng = np.random.default_rng(16)
    image_np = rng.uniform(0, 1, (32, 48)).astype(np.float32)
    kernel_np = np.zeros((32, 48), np.float32)
    kernel_np[:3, :3] = 1 / 9
    ns = {"ctx": ctx, "image": ctx.tensor(image_np), "kernel": ctx.tensor(kernel_np)}
    exec(compile(convolution_block(), str(GUIDE), "exec"), ns)
    ref = np.fft.irfft2(np.fft.rfft2(image_np.astype(np.float64)) * np.fft.rfft2(kernel_np.astype(np.float64)),
                        s=image_np.shape)
    np.testing.assert_allclose(ns["blurred"].numpy(), ref, atol=1e-5)


def test_kernel_files_example(ctx, tmp_path):
    """The guide's hot-reload example: a kernel file with an include and a
    define, run, edited, reloaded and run again with the edit."""
    blocks = [b for b in python_test_blocks() if "watch=True" in b]
    assert len(blocks) == 1, "docs/integration.md should have one hot-reload example"
    (tmp_path / "factor.glsl").write_text("const float FACTOR = 3.0;\n")
    (tmp_path / "scale.comp").write_text(
        '#version 450\n#include "factor.glsl"\nlayout(local_size_x = 64) in;\n'
        "layout(std430, binding = 0) readonly buffer Src { float src[]; };\n"
        "layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };\n"
        "void main() { uint i = gl_GlobalInvocationID.x; if (i < N) dst[i] = src[i] * FACTOR; }\n")
    src_np = np.arange(64, dtype=np.float32)
    ns = {"ctx": ctx, "kernel_dir": tmp_path, "src": ctx.tensor(src_np), "dst": ctx.zeros((64,))}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    assert ns["reloads"] == [None] and ns["k"].version == 1
    np.testing.assert_array_equal(ns["dst"].numpy(), src_np * 6)


def test_kernel_print_example(ctx):
    """The guide's printf example prints the points it should, exactly."""
    blocks = [b for b in python_test_blocks() if "debugPrintfEXT" in b]
    assert len(blocks) == 1, "docs/integration.md should have one printf example"
    points = np.array([[0.25, 1.0], [0.75, -2.5], [0.5, 0.0], [1.5, 3.25]], np.float32)
    ns = {"ctx": ctx, "points": ctx.tensor(points)}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    assert sorted(ns["lines"]) == ["v[1] = 0.750000, -2.500000", "v[3] = 1.500000, 3.250000"]


def test_onnx_loading_example(ctx):
    """The guide's ONNX example: a MatMul + Relu graph built with
    onnx.helper, bound for a batch of 4 and recorded with ctx.run."""
    pytest.importorskip("onnx")
    import guestcompute as gc
    blocks = [b for b in python_test_blocks() if "gc.onnx.load" in b]
    assert len(blocks) == 1, "docs/integration.md should have one example of loading an ONNX model"
    ns = {"ctx": ctx, "np": np, "gc": gc}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    assert ns["outs"]["y"].shape == (4, 3)


def test_input_encodings_example(ctx):
    """The guide's neural-field inputs: the hash grid's features and the
    frequency encoding, side by side, as the numpy references give them."""
    blocks = [b for b in python_test_blocks() if "hash_grid_encode" in b]
    assert len(blocks) == 1, "docs/integration.md should have one input encodings example"
    rng = np.random.default_rng(18)
    uv_np = rng.uniform(0, 1, (64, 2)).astype(np.float32)
    dirs_np = rng.normal(size=(64, 3)).astype(np.float32)
    ns = {"ctx": ctx, "uv": ctx.tensor(uv_np), "directions": ctx.tensor(dirs_np)}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    got = ns["features"].numpy()
    grid = ns["grid"]
    np.testing.assert_allclose(got[:, :16], ref_hash_grid(uv_np, grid, grid.params.numpy()), atol=1e-9)
    np.testing.assert_allclose(got[:, 16:], ref_frequency(dirs_np, 4, include_input=False), atol=4e-7)


def test_neural_network_example(modern_ctx):
    """The guide's per-pixel network: the image it writes is the network
    evaluated by numpy on each pixel (RGB, alpha 1), and a batch of
    feature vectors gives (2, 500, 3) in float16."""
    ctx = modern_ctx
    blocks = [b for b in python_test_blocks() if "pixel_net" in b]
    assert len(blocks) == 1, "docs/integration.md should have one neural network example"
    rng = np.random.default_rng(18)
    frame_np = rng.uniform(0, 1, (12, 20, 4)).astype(np.float16)
    ns = {"ctx": ctx, "gc": gc, "np": np, "frame": ctx.image_from(frame_np, "rgba16f")}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    ref = ns["pixel_net"].numpy(frame_np.astype(np.float32))
    got = ns["graded"].numpy().astype(np.float32)
    # the portable kernel's bound with an fp16 image, or the cooperative-matrix kernel's (docs §18)
    atol = 2e-2 if gc.ops.mlp_op.kernel_for(ctx, ns["pixel_net"]) == "khr_coopmat" else 2e-3
    np.testing.assert_allclose(got[..., :3], ref, atol=atol)
    assert np.all(got[..., 3] == 1)
    decoded = ns["decoded"]
    assert decoded.shape == (2, 500, 3) and decoded.dtype == gc.float16


def test_weights_from_a_file_example(modern_ctx, tmp_path):
    """The guide's safetensors example: an nn.Sequential-style state dict
    written to a file, loaded, and run by the fused op as numpy evaluates
    it."""
    ctx = modern_ctx
    blocks = [b for b in python_test_blocks() if "load_safetensors" in b]
    assert len(blocks) == 1, "docs/integration.md should have one example of weights from a file"
    rng = np.random.default_rng(19)
    widths = [3, 32, 32, 3]
    state = {}
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        state[f"{2 * i}.weight"] = (rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)
        state[f"{2 * i}.bias"] = (rng.standard_normal(b) / 10).astype(np.float32)
    (tmp_path / "mlp.safetensors").write_bytes(pack_arrays(state))
    points_np = rng.uniform(-1, 1, (300, 3)).astype(np.float32)
    ns = {"ctx": ctx, "gc": gc, "path": tmp_path / "mlp.safetensors", "points": ctx.tensor(points_np)}
    exec(compile(blocks[0], str(GUIDE), "exec"), ns)
    net = ns["net"]
    assert [layer.activation for layer in net.layers] == ["relu", "relu", "sigmoid"]
    np.testing.assert_array_equal(net.layers[1].weight, state["2.weight"].T)
    ref = net.numpy(points_np)
    # the portable kernel's bound, or the cooperative-matrix kernel's (docs §18)
    atol = 2e-2 if gc.ops.mlp_op.kernel_for(ctx, net) == "khr_coopmat" else 2e-4
    np.testing.assert_allclose(ns["colours"].numpy(), ref, atol=atol)
