"""The registry of built-in kernel variants, for baking SPIR-V ahead of time and warm-up.

Each op module registers the generators of its specs with ``@variants(family)``
when it is imported; this module imports no op, so it stays pure data. The
complete list is ``guestcompute.ops.all_specs()``: importing ``ops`` is what
registers every generator.
"""
_generators: dict = {}


def variants(family: str):
    """Decorator: ``fn()`` yields the KernelSpecs of one family's built-in variants."""
    def register(fn):
        _generators.setdefault(family, []).append(fn)
        return fn
    return register


def registered_specs():
    """Every spec the generators registered so far yield, each once, in registration order."""
    seen = set()
    for gens in _generators.values():
        for gen in gens:
            for spec in gen():
                if spec not in seen:
                    seen.add(spec)
                    yield spec
