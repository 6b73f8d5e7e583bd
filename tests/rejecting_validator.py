"""A spirv-val that rejects every module, first on PATH: for the tests of
how ctx.kernel reads a validator's refusal, and of validate=False."""
import os


def rejecting_validator(tmp_path, monkeypatch, message: str) -> None:
    """Put a spirv-val that prints ``message`` and fails first on PATH."""
    exe = tmp_path / "spirv-val"
    exe.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
