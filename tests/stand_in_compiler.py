"""A stand-in for the compilers that build the benchmark suite's reference
programs (nvcc, c++): it answers ``--version``, and "builds" a program that
prints a canned output, counting its builds."""
from pathlib import Path


def stand_in_compiler(folder: Path, output: str, name: str = "nvcc") -> tuple:
    """(the folder holding the compiler, to put first on PATH; the file
    that gets a line "built" per build)."""
    canned = folder / "canned.json"
    canned.write_text(output)
    builds = folder / "builds"
    exe = folder / "bin" / name
    exe.parent.mkdir()
    exe.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "{name} stand-in 1.0"; exit 0; fi
while [ "$1" != "-o" ]; do shift; done
printf '#!/bin/sh\\ncat {canned}\\n' > "$2" && chmod +x "$2" && echo built >> {builds}
""")
    exe.chmod(0o755)
    return exe.parent, builds
