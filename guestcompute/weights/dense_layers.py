"""``dense_layers(state, activations)``: the fused MLP's layers from a
torch-style state dict — ``{"0.weight": (out, in), "0.bias": (out,),
"2.weight": ...}`` as ``nn.Sequential`` numbers its children — or from
anything with ``state_dict()`` (a torch ``nn.Module``, duck-typed: torch is
never imported).

A function rather than a ``Dense`` constructor: it makes a list of layers
and the activations between them, which no single layer owns.

Which entries are layers: the names under ``prefix`` group by module path
(all but the last dot-separated part); a group of ``weight`` (2-d) and an
optional ``bias`` is one layer. Modules without parameters (activations,
Dropout, Flatten) leave no entries, so nothing of theirs is skipped or
needed. A group with anything else (a norm layer's 1-d weight or running
statistics, a convolution's 4-d weight) is refused, not skipped: the
network would compute something other than the module. ``prefix`` picks a
sub-module (``"decoder."``), ``names`` the layers themselves.

Order: when every module path is numbers (``"0"``, ``"2"``, ``"1.0"``:
``nn.Sequential`` and ``nn.ModuleList``) by those numbers, since a
safetensors file lists ``"10.weight"`` before ``"2.weight"``; otherwise
the mapping's own order (a ``state_dict()`` is in the module's order).
``names`` sets it outright. Consecutive layers must chain (one's outputs
are the next's inputs): a mismatch names both.
"""
from __future__ import annotations

from ..errors import GuestComputeError, InvalidArgumentError, ShapeError
from ..ops.mlp import Dense, host_weights

PARAMS = ("weight", "bias")


def dense_layers(state, activations, *, output=None, prefix: str = "", names=None, transposed: bool = True,
                 slope: float = 0.01) -> list:
    """The ``gc.Dense`` layers of ``state`` (a mapping of names to numpy
    arrays, torch tensors, guest tensors or anything numpy takes; or an
    object with ``state_dict()``), for ``ctx.mlp``.

    ``activations``: one name for every hidden layer, with ``output`` the
    last layer's (default ``"none"``); or a list of one name per layer.
    ``transposed``: weights as torch's ``nn.Linear`` stores them, (out, in)
    (``False``: numpy's (in, out)). ``slope``: leaky_relu's."""
    if callable(getattr(state, "state_dict", None)):
        state = state.state_dict()
    if not callable(getattr(state, "items", None)):
        raise InvalidArgumentError(f"dense_layers: state must be a mapping of names to arrays (a state dict) "
                                   f"or have state_dict(), got {type(state).__name__}")
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"dense_layers: prefix must be a string, got {prefix!r}")
    groups = _named(state, prefix, names) if names is not None else _found(state, prefix)
    acts = _activations(activations, output, len(groups))
    layers = []
    for (name, (weight, bias)), act in zip(groups, acts):
        try:
            layers.append(Dense(weight, bias, act, slope=slope, transposed=transposed))
        except GuestComputeError as e:
            raise type(e)(f"dense_layers: layer {name!r}: {e}") from None
    for i in range(len(layers) - 1):
        if layers[i].shape[1] != layers[i + 1].shape[0]:
            raise ShapeError(f"dense_layers: layer {groups[i][0]!r} has {layers[i].shape[1]} outputs but the "
                             f"next, {groups[i + 1][0]!r}, takes {layers[i + 1].shape[0]} inputs; give the "
                             "order with names=")
    return layers


def _named(state, prefix: str, names) -> list:
    """(name, (weight, bias)) for each of ``names``, in their order."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise InvalidArgumentError("dense_layers: names must be a non-empty list of layer names")
    out = []
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"dense_layers: layer name {name!r} is not a string")
        base = f"{prefix}{name}." if name else prefix
        if f"{base}weight" not in state:
            raise InvalidArgumentError(f"dense_layers: no entry {base + 'weight'!r} for layer {name!r}")
        bias = state[f"{base}bias"] if f"{base}bias" in state else None
        out.append((name, _pair(name, state[f"{base}weight"], bias)))
    return out


def _found(state, prefix: str) -> list:
    """(module path, (weight, bias)) for every layer under ``prefix``."""
    groups = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise InvalidArgumentError(f"dense_layers: state names must be strings, got {key!r}")
        if not key.startswith(prefix):
            continue
        path, _, param = key[len(prefix):].rpartition(".")
        if param not in PARAMS:
            raise InvalidArgumentError(f"dense_layers: entry {key!r} is not a Linear layer's weight or bias; "
                                       "the fused network takes Linear layers only: choose them with "
                                       "prefix= or names=")
        groups.setdefault(path, {})[param] = value
    if not groups:
        raise InvalidArgumentError(f"dense_layers: no entries named {prefix + '*'!r}"
                                   f"{'' if prefix else ' (the state is empty)'}")
    paths = list(groups)
    numbered = [tuple(int(p) for p in path.split(".")) if all(p.isascii() and p.isdecimal()
                                                             for p in path.split(".")) else None
                for path in paths]
    if all(n is not None for n in numbered):
        paths = [path for _, path in sorted(zip(numbered, paths))]
    out = []
    for path in paths:
        if "weight" not in groups[path]:
            raise InvalidArgumentError(f"dense_layers: {prefix + path + '.bias'!r} has no weight beside it")
        out.append((path, _pair(path, groups[path]["weight"], groups[path].get("bias"))))
    return out


def _pair(name: str, weight, bias) -> tuple:
    """The layer's weight and bias as numpy, the weight checked 2-d."""
    weight = host_weights(weight, f"dense_layers: layer {name!r} weight")
    if weight.ndim != 2:
        raise ShapeError(f"dense_layers: layer {name!r} has a {weight.ndim}-d weight {weight.shape}, not a "
                         "Linear layer's 2-d one; the fused network takes Linear layers only: choose them "
                         "with prefix= or names=")
    return weight, None if bias is None else host_weights(bias, f"dense_layers: layer {name!r} bias")


def _activations(activations, output, depth: int) -> list:
    if isinstance(activations, str):
        return [activations] * (depth - 1) + [output if output is not None else "none"]
    if not isinstance(activations, (list, tuple)) or len(activations) != depth:
        raise InvalidArgumentError(f"dense_layers: activations must be one name for the hidden layers or a "
                                   f"list of {depth} names, one per layer; got {activations!r}")
    if output is not None:
        raise InvalidArgumentError("dense_layers: output= is for one hidden activation name; a list names "
                                   "every layer's, the last one included")
    return list(activations)
