"""Regenerate the precompiled SPIR-V: ``python -m demos.host.shaders``."""
from . import regenerate

if __name__ == "__main__":
    for path in regenerate():
        print(f"wrote {path.name} ({path.stat().st_size} bytes)")
