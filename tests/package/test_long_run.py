"""Long run: the particle demo for 300 frames headless under the validation
layer (synchronization validation on) — zero messages, the host's vertex
buffer equal to numpy's simulation at the end (the demo checks that itself),
and the guest's live objects and memory the same at the last frame as
after warm-up. Marked ``slow`` (about half a minute on lavapipe); it still
runs in ``make test``."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the demos live next to the package, not in it

from demos import particles  # noqa: E402

FRAMES = 300
WARM = 30


def _run_watched(monkeypatch, argv):
    """Run the demo, snapshotting the guest's bookkeeping at frames WARM and
    FRAMES - 1 (both right after the frame's guest work was recorded, when
    the same frames are in flight)."""
    snapshots = {}

    class WatchedApp(particles.GuestApp):
        def run(self, frames, before_pass, after_pass=None, status=None, resolve=None):
            def watched(cmd, frame):
                before_pass(cmd, frame)
                if frame in (WARM, frames - 1):
                    state = dict(self.ctx.live_objects())
                    state.update(live_bytes=self.ctx.memory.live_bytes,
                                 descriptor_entries=self.ctx.device.descriptors.cached_entries)
                    snapshots[frame] = state
            return super().run(frames, watched, after_pass, status, resolve)

    monkeypatch.setattr(particles, "GuestApp", WatchedApp)
    result = particles.run(particles.parse_args(argv))
    return result, snapshots


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["program", "direct"])
def test_particle_demo_300_frames_under_validation(monkeypatch, capsys, mode):
    # The default demo (program replay for the post-process); op-by-op
    # recording every frame with fewer particles, which records far more.
    argv = ["--headless", "--validation", "--frames", str(FRAMES)]
    if mode == "direct":
        argv += ["--direct", "--particles", "20000", "--size", "320", "240"]
    result, snapshots = _run_watched(monkeypatch, argv)
    out = capsys.readouterr().out
    assert result.frames == FRAMES
    assert result.validation_messages == [], result.validation_messages[:3]
    assert "positions differ" not in out and "max |position buffer - numpy|" in out
    assert "ripple heights differ" not in out and "max |ripple heights - numpy|" in out
    assert snapshots[FRAMES - 1] == snapshots[WARM], snapshots
    print(f"\n{mode}: {FRAMES} frames, objects after warm-up {snapshots[WARM]}, "
          f"at the end {snapshots[FRAMES - 1]}")
