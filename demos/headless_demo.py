"""A host in a box adopts guestcompute, shares a vertex buffer with it, and
the guest's work is recorded into the host's command buffer; one submit."""
import numpy as np

import guestcompute as gc
from guestcompute.testing import HeadlessHost


def main():
    with HeadlessHost("modern") as host:
        ctx = gc.Context.adopt(**host.adopt_kwargs(queue=host.queue))
        n = 100_000
        rng = np.random.default_rng(7)
        start = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
        vbuf = host.create_buffer(start.nbytes)              # the host's own vertex buffer
        host.write_buffer(vbuf, start)
        pos = ctx.import_buffer(vbuf, (n, 4), "float32", host_access="vertex", buffer_size=start.nbytes)
        vel = ctx.tensor(rng.uniform(-0.01, 0.01, (n, 4)).astype(np.float32))
        gravity = ctx.tensor(np.array([0, -0.001, 0, 0], np.float32))

        cmd = host.begin()                                   # host is recording its frame
        with ctx.record(cmd) as rec:
            rec.add(vel, gravity, out=vel)                   # broadcast (4,) over (n, 4)
            rec.add(pos, vel, out=pos)
        host.submit_and_wait(cmd)                            # one submit for host + guest

        got = host.read_buffer(vbuf, np.float32, n * 4).reshape(n, 4)
        want = start + (vel.numpy())
        ok = np.allclose(got, want, atol=1e-6)
        print(f"device: {ctx.limits.device_name}")
        print(f"particles: {n}, max |error| vs numpy: {np.abs(got - want).max():.2e} -> {'OK' if ok else 'MISMATCH'}")
        print(f"validation messages: {len(host.messages)}; cache: {ctx.cache_stats()['pipelines_created']} pipelines")
        ctx.close()
        if not ok or host.messages:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
