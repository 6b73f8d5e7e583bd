"""Where on-disk caches live: GUESTCOMPUTE_CACHE_DIR, else the XDG cache dir."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root(override=None) -> Path:
    if override:
        return Path(override)
    env = os.environ.get("GUESTCOMPUTE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "guestcompute"


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a unique temp file + rename: readers never see a torn file and
    two concurrent writers each leave a complete one (last rename wins)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(data):x}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
