"""One piece of memory reached through two guest objects: a VkImage imported
twice, a guest tensor's own VkBuffer imported with ``import_buffer``. The
hazard tracker and the layout bookkeeping must see one resource (the
validation layer's synchronization checks fail the test otherwise), and an
imported image cannot be pointed elsewhere while a recording still uses it."""
import numpy as np
import pytest

import guestcompute as gc

from test_image_imports import H, SHADER_READ, W, host_image_cleared, host_reuses


def test_an_image_imported_twice_is_one_image(host, ctx):
    """Writes through one import, reads through the other: one entry
    transition, a barrier between them, one exit transition."""
    himg = host_image_cleared(host, (1.0, 0.5, 0.25, 1.0))
    first = ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only", host_access="fragment_read",
                             usage="sampled|storage")
    second = ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only",
                              host_access="fragment_read", usage="sampled|storage")
    src = ctx.tensor(np.full((H, W, 4), 0.5, np.float32))
    out = ctx.empty((H, W, 4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.copy(second, out=out)             # the host's picture, through the second import
        rec.copy(src, out=first)              # overwritten through the first
        rec.copy(second, out=out)             # and read back through the second
    host_reuses(host, cmd, himg, SHADER_READ)
    host.submit_and_wait(cmd)
    np.testing.assert_allclose(out.numpy(), 0.5, atol=3e-3)


def test_a_tensors_own_buffer_imported_is_ordered_against_the_tensor(host, ctx):
    t = ctx.tensor(np.zeros(64, np.float32))
    alias = ctx.import_buffer(t.buffer.handle, (64,), buffer_size=t.buffer.size, host_access="compute")
    part = ctx.import_buffer(t.buffer.handle, (16,), offset=128, buffer_size=t.buffer.size,
                             host_access="compute")
    out = ctx.empty((64,))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.fill(alias, 3.0)                  # written through the import...
        rec.add(t, 1.0, out=out)              # ...read through the tensor
        rec.fill(t, 5.0)                      # written through the tensor...
        rec.scale(part, 2.0, out=out[:16])    # ...read through an import of part of it
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(out.numpy(), [10.0] * 16 + [4.0] * 48)


def test_rebind_refuses_while_an_open_recording_uses_the_image(host, ctx):
    himg, other = host_image_cleared(host, (1, 0, 0, 1)), host_image_cleared(host, (0, 1, 0, 1))
    img = ctx.import_image(himg, "rgba8_unorm", (W, H), layout="shader_read_only", usage="sampled|storage")
    out = ctx.empty((H, W, 4))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        img.rebind(other)                     # not used yet in this recording: fine
        img.rebind(himg)
        rec.copy(img, out=out)
        with pytest.raises(gc.RecordingError, match="rebind"):
            img.rebind(other)
    host_reuses(host, cmd, himg, SHADER_READ)   # left in its exit layout, not GENERAL
    host.submit_and_wait(cmd)
    np.testing.assert_allclose(out.numpy()[0, 0], (1, 0, 0, 1))
    img.rebind(other)                         # the recording is over
