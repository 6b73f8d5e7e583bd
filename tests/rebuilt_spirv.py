"""The check that a benchmark reference's committed SPIR-V is what its
source compiles to, for the references built with glslangValidator."""
import pytest


def assert_rebuilds_alike(build, committed: list, folder) -> None:
    """Where glslangValidator 13+ exists, ``build(folder)`` writes modules
    with the interface and shared memory of the ``committed`` files of the
    same names (the bytes may differ between compiler versions)."""
    from guestcompute.errors import CompilerNotFoundError
    from guestcompute.spirv.compiler import glslang_path
    from guestcompute.spirv.reflect import reflect, workgroup_memory_size
    try:
        glslang_path()
    except CompilerNotFoundError:
        pytest.skip("no glslangValidator")
    build(folder)
    for path in committed:
        fresh, old = (folder / path.name).read_bytes(), path.read_bytes()
        assert reflect(fresh) == reflect(old), path.name
        assert workgroup_memory_size(fresh, {}) == workgroup_memory_size(old, {}), path.name
