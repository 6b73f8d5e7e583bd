"""Every built-in kernel spec, for baking SPIR-V ahead of time and warm-up."""
_generators: dict = {}


def variants(family: str):
    def register(fn):
        _generators.setdefault(family, []).append(fn)
        return fn
    return register


def all_specs():
    from .. import ops  # noqa: F401  (importing the ops registers every generator)
    seen = set()
    for gens in _generators.values():
        for gen in gens:
            for spec in gen():
                if spec not in seen:
                    seen.add(spec)
                    yield spec
