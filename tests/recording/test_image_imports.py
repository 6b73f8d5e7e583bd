"""The host's images: the layout contract (entry transition from the
declared layout, exit transition back, checked by the validation layer's
layout tracking at submit and by the host's own use afterwards), per-
recording overrides, rebinding after a swapchain re-creation, programs, and
hostile declarations — on both host profiles under synchronization
validation."""
import numpy as np
import pytest
import vulkan as vk

import guestcompute as gc
from guestcompute.ops.base import registered_ops
from guestcompute.vk import formats

W, H = 12, 7
RGBA8 = vk.VK_FORMAT_R8G8B8A8_UNORM
SAMPLED_STORAGE = (vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT
                   | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
TOP, TRANSFER, FRAGMENT = (vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                           vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT)
UNDEFINED, TRANSFER_DST, SHADER_READ = (vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                        vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL)
WRITE, READ = vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_SHADER_READ_BIT


def host_image_cleared(host, rgba, final=SHADER_READ, usage=SAMPLED_STORAGE):
    """A host image cleared to ``rgba`` and left in ``final`` layout, as a
    renderer leaves a target its fragment shaders sample."""
    img = host.create_image(W, H, RGBA8, usage)
    cmd = host.begin()
    host.transition_image(cmd, img, UNDEFINED, TRANSFER_DST, TOP, 0, TRANSFER, WRITE)
    host.clear_image(cmd, img, rgba)
    host.transition_image(cmd, img, TRANSFER_DST, final, TRANSFER, WRITE, FRAGMENT, READ)
    host.submit_and_wait(cmd)
    return img


def host_reuses(host, cmd, img, layout):
    """The host's next use of the image expects ``layout`` (the validation
    layer checks the old layout of this transition at submit)."""
    host.transition_image(cmd, img, layout, TRANSFER_DST, FRAGMENT | TRANSFER, 0, TRANSFER, WRITE)
    host.clear_image(cmd, img, (0, 0, 0, 0))
    host.transition_image(cmd, img, TRANSFER_DST, SHADER_READ, TRANSFER, WRITE, FRAGMENT, READ)


def test_read_and_write_a_host_image_in_the_hosts_frame(host, ctx):
    # The host clears to exact codes, k / 255. A clear to 0.5 (code 127.5) is
    # the host driver's conversion, and Vulkan lets it store either
    # neighbour; the test would then check the driver's tie-breaking, not
    # the library. The guest's own stores round half up in the shader
    # (alpha 0.5 -> 128) and are exact on every driver.
    himg = host_image_cleared(host, (128 / 255, 64 / 255, 32 / 255, 1.0))
    img = ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only",
                           host_access="fragment_read")
    t = ctx.empty((H, W, 4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.copy(img, out=t)
        rec.scale(t, 0.5, out=t)
        rec.copy(t, out=img)                  # back into the host's image
        rec.copy(img, out=t)
    host_reuses(host, cmd, himg, SHADER_READ)  # the image is back in its declared layout
    host.submit_and_wait(cmd)
    np.testing.assert_allclose(t.numpy(), np.broadcast_to(np.array([64, 32, 16, 128]) / 255, (H, W, 4)), rtol=1e-6)


def test_a_wrong_declared_layout_is_reported(host, ctx):
    """Control: the checks above can fail. The host left the image in
    SHADER_READ_ONLY but declares GENERAL: the layer reports it."""
    himg = host_image_cleared(host, (1, 1, 1, 1))
    img = ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="general")
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.copy(img)
    host.submit_and_wait(cmd)
    assert any("layout" in m.lower() for m in host.messages), host.messages
    host.messages.clear()


def test_exit_layout_and_per_recording_override(host, ctx):
    himg = host_image_cleared(host, (0.2, 0.4, 0.6, 0.8), final=TRANSFER_DST)
    img = ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="transfer_dst",
                           exit_layout="shader_read_only")
    out = ctx.empty((H, W, 4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.copy(img, out=out)
    host_reuses(host, cmd, himg, SHADER_READ)          # exit layout, not the entry one
    # Next frame the host hands it over in SHADER_READ_ONLY and wants it back so.
    with ctx.record(cmd) as rec:
        rec.using(img, layout="shader_read_only")
        rec.gaussian_blur(img, 0.0, out=out)
        with pytest.raises(gc.RecordingError, match="already used"):
            rec.using(img, layout="general")
    host_reuses(host, cmd, himg, SHADER_READ)
    host.submit_and_wait(cmd)
    assert np.all(out.numpy() == 0)                     # the host cleared it before the second frame


def test_rebind_re_records_programs_and_stale_dispatches_refuse(host, ctx):
    first = host_image_cleared(host, (1, 0, 0, 1))
    second = host_image_cleared(host, (0, 1, 0, 1))
    img = ctx.import_image(first, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only")
    out = ctx.empty((H, W, 4))
    prog = ctx.program(lambda rec: rec.copy(img, out=out))
    for expected, version in (((1, 0, 0, 1), 0), ((0, 1, 0, 1), 1)):
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            rec.execute(prog)
        host_reuses(host, cmd, second if version else first, SHADER_READ)
        host.submit_and_wait(cmd)
        np.testing.assert_allclose(out.numpy()[0, 0], expected)
        assert prog.version == version
        # refill both images for the next round (the host cleared them)
        for h_img, colour in ((first, (1, 0, 0, 1)), (second, (0, 1, 0, 1))):
            c = host.begin()
            host.transition_image(c, h_img, SHADER_READ, TRANSFER_DST, FRAGMENT, 0, TRANSFER, WRITE)
            host.clear_image(c, h_img, colour)
            host.transition_image(c, h_img, TRANSFER_DST, SHADER_READ, TRANSFER, WRITE, FRAGMENT, READ)
            host.submit_and_wait(c)
        if version == 0:
            img.rebind(second)             # the swapchain was re-created


def test_hostile_image_declarations_raise_typed_errors(host, ctx):
    himg = host_image_cleared(host, (1, 1, 1, 1))
    with pytest.raises(gc.UnsupportedError, match="not a format"):
        ctx.import_image(himg, "rgb9e5", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only")
    with pytest.raises(gc.InvalidArgumentError, match="unknown image layout"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE,
                         layout="color_attachment_optimal_please")
    with pytest.raises(gc.InvalidArgumentError, match="undefined"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="undefined")
    with pytest.raises(gc.UnsupportedError, match="multisampled"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only", samples=4)
    with pytest.raises(gc.UnsupportedError, match="3d"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only",
                         image_type="3d")
    with pytest.raises(gc.InvalidArgumentError, match="aspect"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only",
                         aspect="depth")
    with pytest.raises(gc.InvalidArgumentError, match="mip levels"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only",
                         mip_levels=9)
    with pytest.raises(gc.UnsupportedError, match="MUTABLE_FORMAT"):
        ctx.import_image(himg, "rgba8_srgb", (W, H), layout="shader_read_only", usage="sampled|storage")
    with pytest.raises(gc.InvalidArgumentError, match="neither SAMPLED nor STORAGE"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only", usage="transfer_dst")
    with pytest.raises(gc.InvalidArgumentError, match="VkImage"):
        ctx.import_image(ctx.empty((4,)), "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only")
    read_only = ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only", usage="sampled")
    depth = ctx.image((4, 4), "d32_sfloat")
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.UnsupportedError, match="needs STORAGE usage"):
            rec.copy(ctx.empty((H, W, 4)), out=read_only)
        with pytest.raises(gc.UnsupportedError, match="depth images are read-only"):
            rec.copy(ctx.empty((4, 4)), out=depth)
        assert rec.dispatches == rec.barriers == 0       # nothing reached the host's buffer
    host.submit_and_wait(cmd)


def test_depth_images_are_read_sampled(host, ctx):
    depth = ctx.image((5, 3), "d32_sfloat")
    values = np.random.default_rng(0).random((3, 5), dtype=np.float32)
    depth.write(values)
    out = host.run(ctx, lambda rec: rec.copy(depth))
    np.testing.assert_array_equal(out.numpy(), values)


def test_a_dispatch_planned_before_a_rebind_refuses_to_record(host, ctx):
    first, second = host_image_cleared(host, (1, 0, 0, 1)), host_image_cleared(host, (0, 1, 0, 1))
    img = ctx.import_image(first, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only")
    dispatches = registered_ops()["copy"](ctx, img, out=ctx.empty((H, W, 4))).dispatches
    img.rebind(second)
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.RecordingError, match="rebound"):
            rec.dispatch(dispatches)
        assert rec.barriers == rec.dispatches == 0
    host.submit_and_wait(cmd)


def test_a_remembered_copy_is_validated_again_after_a_rebind(host, ctx):
    """The call memo answers a repeated copy until the image is rebound to
    another extent; then the planner runs again and refuses the old out."""
    img = ctx.import_image(host_image_cleared(host, (1, 0, 0, 1)), "rgba8_unorm", (W, H),
                           usage=SAMPLED_STORAGE, layout="shader_read_only")
    out = ctx.empty((H, W, 4))
    hits = ctx.call_memo.hits
    for _ in range(2):
        host.run(ctx, lambda rec: rec.copy(img, out=out))
    assert ctx.call_memo.hits == hits + 1
    np.testing.assert_allclose(out.numpy()[0, 0], (1, 0, 0, 1))
    img.rebind(host.create_image(W + 1, H, RGBA8, SAMPLED_STORAGE), extent=(W + 1, H))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        with pytest.raises(gc.ShapeError):
            rec.copy(img, out=out)
        assert rec.barriers == rec.dispatches == 0
    host.submit_and_wait(cmd)


def test_hand_off_submissions_take_guest_images_only(host, ctx):
    himg = host_image_cleared(host, (1, 1, 1, 1))
    img = ctx.import_image(himg, "rgba8_unorm", (W, H), usage=SAMPLED_STORAGE, layout="shader_read_only")
    guest = ctx.image((W, H), "rgba8_unorm")
    with pytest.raises(gc.UnsupportedError, match="hand-off"):
        ctx.submit(lambda rec: rec.copy(img, out=guest)).wait(timeout=10)
    ctx.submit(lambda rec: rec.gaussian_blur(guest, 1.0, out=guest)).wait(timeout=10)


def test_usage_is_said_by_the_host_never_guessed(host, ctx):
    """A swapchain made with COLOR_ATTACHMENT only: a guessed SAMPLED|STORAGE
    gave validation errors every frame; now the import is a typed error."""
    himg = host_image_cleared(host, (1, 1, 1, 1))
    with pytest.raises(gc.InvalidArgumentError, match="usage=.*VkImageCreateInfo.usage"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only")
    with pytest.raises(gc.InvalidArgumentError, match="neither SAMPLED nor STORAGE"):
        ctx.import_image(himg, "rgba8_unorm", (W, H), layout="color_attachment",
                         usage=vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT)


MUTABLE_FORMAT, EXTENDED_USAGE = vk.VK_IMAGE_CREATE_MUTABLE_FORMAT_BIT, 0x100   # the latter: Vulkan 1.1


def test_a_mutable_format_srgb_host_image_is_written_through_a_unorm_view(host, ctx):
    """An sRGB swapchain made MUTABLE_FORMAT with SAMPLED|STORAGE: the guest
    writes it through an rgba8_unorm view (encoding sRGB itself) and reads
    it through an sRGB view (decoding), under validation."""
    usage = "sampled|storage|transfer_dst"
    if ctx.caps.api_version < (1, 1):
        with pytest.raises(gc.UnsupportedError, match="Vulkan 1.1"):
            ctx.import_image(host_image_cleared(host, (0, 0, 0, 0)), "rgba8_srgb", (W, H), layout="general",
                             usage=usage, mutable_format=True)
        pytest.skip("an sRGB storage image needs Vulkan 1.1 (EXTENDED_USAGE, view usage)")
    if not ctx.device.format_features["rgba8_unorm"] & formats.STORAGE:
        pytest.skip("rgba8_unorm is no storage format on this device")
    himg = host.create_image(W, H, vk.VK_FORMAT_R8G8B8A8_SRGB, SAMPLED_STORAGE, flags=MUTABLE_FORMAT | EXTENDED_USAGE)
    img = ctx.import_image(himg, "rgba8_srgb", (W, H), layout="undefined", exit_layout="shader_read_only",
                           usage=usage, mutable_format=True)
    linear = np.linspace(0, 1, H * W * 4, dtype=np.float32).reshape(H, W, 4)
    src, back = ctx.tensor(linear), ctx.empty((H, W, 4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.copy(src, out=img)
        rec.copy(img, out=back)
    host.submit_and_wait(cmd)
    # Measured in codes: the guest's encode stores the nearest code (half a
    # code off at most) and the device's decode is its own, within one code
    # (see test_copy_image_to_float_tensor_gives_shader_values). Alpha is UNORM.
    def encode(v):
        return np.where(v <= 0.0031308, v * 12.92, 1.055 * np.maximum(v, 0) ** (1 / 2.4) - 0.055) * 255
    got = back.numpy()
    off_codes = np.abs(encode(got[..., :3]) - encode(linear[..., :3].astype(np.float64)))
    assert off_codes.max() <= 1.5, off_codes.max()
    np.testing.assert_allclose(got[..., 3], linear[..., 3], atol=0.5 / 255 + 1e-6)


def test_storage_writes_without_a_glsl_format_are_checked_at_import(host):
    """A BGRA image with STORAGE usage needs shaderStorageImageWriteWithoutFormat
    enabled at vkCreateDevice and declared at adopt; the import says which
    of the two is missing, not the first frame."""
    feature = "shaderStorageImageWriteWithoutFormat"
    undeclared = host.adopt(features={k: v for k, v in host.features.items() if k != feature})
    try:
        himg = host_image_cleared(host, (1, 1, 1, 1))
        if not undeclared.device.format_features["bgra8_unorm"] & formats.STORAGE:
            missing = "bgra8_unorm has no STORAGE_IMAGE feature"
        elif feature in undeclared.device.limits.supported_core_features:
            missing = f"{feature}; the device supports it but it was not declared at adopt"
        else:
            missing = f"{feature}, which this device does not support"
        with pytest.raises(gc.UnsupportedError, match=missing):
            undeclared.import_image(himg, "bgra8_unorm", (W, H), layout="general", usage="sampled|storage")
        undeclared.import_image(himg, "bgra8_unorm", (W, H), layout="general", usage="sampled")    # reads only
        if missing.endswith("not declared at adopt") and host.features.get(feature):
            declared = host.adopt()             # the test host enabled it at vkCreateDevice and declares it
            declared.import_image(himg, "bgra8_unorm", (W, H), layout="general", usage="sampled|storage")
            declared.close()
    finally:
        undeclared.close()
