"""guestcompute inside real processes the way applications start them.

- An application may keep a module named like a stdlib one beside its
  script (``logging.py`` is the usual one); ``import logging`` then finds
  the application's file in that process. guestcompute must still import,
  record, warm up and warn there.
- The demo entry scripts run as files (``python demos/particles.py``) as
  well as modules (``python -m demos.particles``).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

APPLICATION = r"""
import json, os, pathlib
import numpy as np
import guestcompute as gc
from guestcompute.ops import all_specs

with gc.Context.create(validation=True) as ctx:
    a = ctx.tensor(np.arange(8, dtype=np.float32))
    out = ctx.run(lambda rec: rec.add(a, a)).numpy()
    specs = [s for s in all_specs() if s.family == "map" and not s.features][:4]
    warmed = ctx.warmup(specs, threads=2).total          # also saves the pipeline cache file
    try:
        rec_error = ctx.run(lambda rec: rec.ad(a, a))     # a misspelt op suggests the name
    except gc.UnknownOperationError as e:
        rec_error = str(e)      # with "did you mean add?"
    messages = list(ctx.messenger.messages)
saved = list(pathlib.Path(os.environ["GUESTCOMPUTE_CACHE_DIR"]).rglob("pipelines/*.bin"))
for path in saved:
    path.write_bytes(b"damaged")
with gc.Context.create(validation=True) as ctx:           # warns that it ignores the damaged file
    messages += list(ctx.messenger.messages)
print(json.dumps({"sum_ok": out.tolist() == [2.0 * i for i in range(8)], "warmed": warmed,
                  "saved": len(saved), "suggestion": "did you mean add" in rec_error, "messages": messages}))
"""

# Modules guestcompute itself is the first to import in such a process
# (Python's start-up, numpy and vulkan import the others before it runs).
SHADOWED = ["logging", "random", "heapq", "selectors"]


@pytest.mark.parametrize("name", SHADOWED)
def test_an_application_module_named_like_the_stdlib(tmp_path, name):
    app = tmp_path / "app"
    app.mkdir()
    (app / f"{name}.py").write_text('"""The application\'s own helpers."""\n\ndef info(msg):\n    print(msg)\n')
    (app / "main.py").write_text(APPLICATION)
    env = dict(os.environ, PYTHONPATH=str(ROOT), GUESTCOMPUTE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "main.py"], cwd=app, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # The name of a misspelt op is suggested whatever the application shadows.
    assert result == {"sum_ok": True, "warmed": 4, "saved": 1, "suggestion": True, "messages": []}
    # The warning still reaches the user: through logging when it is the stdlib's, else stderr.
    assert "pipeline cache file" in proc.stderr


DEMO_SCRIPTS = ["demos/particles.py", "demos/neural.py", "demos/host", "demos/host/__main__.py",
                "demos/kernels", "demos/host/shaders"]


@pytest.mark.parametrize("script", DEMO_SCRIPTS)
def test_demo_scripts_run_as_files(tmp_path, script):
    # From another directory, with nothing on PYTHONPATH: the script finds its package itself.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(ROOT / script), "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m demos.")
