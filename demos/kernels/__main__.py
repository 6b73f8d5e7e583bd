"""Regenerate the shipped SPIR-V: ``python -m demos.kernels``."""
import argparse
import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/kernels) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "demos.kernels"

from . import regenerate

if __name__ == "__main__":
    argparse.ArgumentParser(prog="python -m demos.kernels", description=__doc__).parse_args()
    for path in regenerate():
        print(f"wrote {path.name} ({path.stat().st_size} bytes)")
