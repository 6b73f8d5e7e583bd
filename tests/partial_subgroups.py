"""Test helper: run the vector scan and compaction kernels down the path a
device takes when a workgroup's subgroups are not all full (each kernel
checks at run time and falls back to shared memory and barriers). No
device here splits a 256-wide workgroup that way, so the check is
replaced by ``false`` in kernels of families of their own."""
import dataclasses

from guestcompute.kernels.spec import families, family

FULL_CHECK = "bool full = gl_NumSubgroups * gl_SubgroupSize == 256u;"
VECTOR_FAMILIES = ("scan_vector_sums", "scan_vector_offsets", "scan_vector_tiles",
                   "compact_vector_count", "compact_vector_scatter")


def _renderer(name: str):
    original = families()[name]

    def render(spec):
        text = original(dataclasses.replace(spec, family=name))
        assert FULL_CHECK in text, f"{name} no longer checks for full subgroups this way"
        return text.replace(FULL_CHECK, "bool full = false;")
    return render


def as_if_subgroups_were_partial(dispatches) -> list:
    """``dispatches`` with every vector kernel taking its partial-subgroup
    path; asserts that there was one to change."""
    out, changed = [], 0
    for d in dispatches:
        if d.spec.family in VECTOR_FAMILIES:
            forced = f"partial_subgroups_{d.spec.family}"
            if forced not in families():
                family(forced)(_renderer(d.spec.family))
            d = dataclasses.replace(d, spec=dataclasses.replace(d.spec, family=forced))
            changed += 1
        out.append(d)
    assert changed, "no vector kernel in the plan"
    return out
