"""Regenerate the shipped SPIR-V: ``python -m demos.kernels``."""
from . import regenerate

if __name__ == "__main__":
    for path in regenerate():
        print(f"wrote {path.name} ({path.stat().st_size} bytes)")
