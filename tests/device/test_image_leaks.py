"""Images over many frames: views, samplers, descriptors and memory stay
constant after warm-up — imported and guest images, per-frame temporary
images, and a rebind now and then (swapchain re-creation)."""
import numpy as np
import pytest
import vulkan as vk

FRAMES = 10_000
CHECK_EVERY = 1000
W, H = 16, 8


def _counts(ctx) -> dict:
    state = dict(ctx.live_objects())
    state.update(descriptor_entries=ctx.device.descriptors.cached_entries,
                 descriptor_owners=ctx.device.descriptors.referenced_buffers)
    return state


@pytest.mark.slow
def test_image_frames_keep_every_count_flat(modern_host):
    host = modern_host
    ctx = host.adopt()
    try:
        usage = vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT
        targets = [host.create_image(W, H, vk.VK_FORMAT_R8G8B8A8_UNORM, usage) for _ in range(2)]
        hdr = ctx.image_from(np.random.default_rng(0).uniform(0, 4, (H, W, 4)).astype(np.float16), "rgba16f")
        out = ctx.import_image(targets[0], "rgba8_unorm", (W, H), layout="undefined", exit_layout="general",
                               usage="sampled|storage")
        seen = None
        for frame in range(FRAMES):
            if frame % 2500 == 1250:
                out.rebind(targets[(frame // 2500) % 2])         # the "swapchain" was re-created
            cmd = host.begin()
            with ctx.record(cmd) as rec:
                small = rec.resize(hdr, size=(W // 2, H // 2), filter="box")   # a per-frame temporary image
                rec.gaussian_blur(small, 1.0, out=small)
                exposure = rec.luminance(small)
                rec.tonemap(hdr, out, exposure=exposure, srgb=True)
            host.submit(cmd)
            del small, exposure
            ctx.retire(ctx.advance_epoch())
            if frame and frame % CHECK_EVERY == 0:
                now = _counts(ctx)
                if seen is None:
                    seen = now
                assert now == seen, (frame, now, seen)
        assert host.messages == []
    finally:
        ctx.close()
