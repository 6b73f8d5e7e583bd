"""Regenerate the precompiled SPIR-V: ``python -m demos.host.shaders``."""
import argparse
import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/host/shaders) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    __package__ = "demos.host.shaders"

from . import regenerate

if __name__ == "__main__":
    argparse.ArgumentParser(prog="python -m demos.host.shaders", description=__doc__).parse_args()
    for path in regenerate():
        print(f"wrote {path.name} ({path.stat().st_size} bytes)")
