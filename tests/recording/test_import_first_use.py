"""A host-shared buffer first met in the middle of a recording: the entry
barrier it needs (host access -> guest access) must not stand in for the
barrier earlier guest work still needs."""
import numpy as np

import guestcompute as gc


def test_an_import_first_used_mid_recording_keeps_earlier_hazards(host, ctx):
    n = 256
    buf = host.create_buffer(n * 4)
    host.write_buffer(buf, np.zeros(n, np.float32))
    imported = ctx.import_buffer(buf, (n,), "float32", host_access="vertex", buffer_size=n * 4)
    a = ctx.tensor(np.arange(n, dtype=np.float32))
    x, y, z = ctx.empty((n,)), ctx.empty((n,)), ctx.empty((n,))
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.add(a, 1.0, out=x)              # guest write of x
        rec.add(imported, 1.0, out=z)       # first use of the import: its entry barrier
        rec.add(x, 1.0, out=y)              # reads x: still needs the barrier after the first write
    host.submit_and_wait(cmd)
    np.testing.assert_array_equal(y.numpy(), np.arange(n, dtype=np.float32) + 2)
    np.testing.assert_array_equal(z.numpy(), np.ones(n, np.float32))
