"""Elementwise predicates: numpy's comparisons (``greater``, ``less``,
``equal``...), logical ops (``logical_and``...) and classification
(``isnan``, ``isinf``, ``isfinite``), each giving a mask of 1s and 0s.

numpy gives bool arrays; guestcompute's bool is uint8 (``ctx.tensor`` of a
bool array makes one), the result here: it needs the host's 8-bit storage
(``gc.requirements`` lists it; a DTypeError says so where it is off). A
mask is what ``rec.where``, ``rec.compact`` and ``rec.nonzero`` take.

Semantics are numpy's: a comparison involving NaN is false except
``not_equal``, which is true; the logical ops read any nonzero value as
true, NaN included (``-0.0`` is false); ``isnan`` and friends are 0 for
integers. The float tests read the operands' bits for NaN and zero rather
than trusting the driver's comparisons with NaN, which Vulkan leaves loose
without the float controls' NaN preservation.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..errors import DTypeError
from ..kernels.catalogue import variants
from ..tensor import Tensor
from .base import check_tensor, op, same_dtype
from .elementwise import COMPUTE_TYPE, NUMERIC, elementwise, map_variants
from .math import Helper, entry_expr, table_entry
from .windows import POINTWISE

MASK = "uint8"                      # the dtype a predicate writes
OPERANDS = NUMERIC + ("uint8",)     # the dtypes it reads: numbers, and masks

# GLSL: ``v`` is NaN / is zero (either sign), by its bits.
_NAN = "((floatBitsToUint({v}) & 0x7fffffffu) > 0x7f800000u)"
_ZERO = "((floatBitsToUint({v}) & 0x7fffffffu) == 0u)"


def _compare(name: str, glsl_op: str) -> dict:
    """The helper of comparison ``name`` per compute type: ``a op b``, and
    for floats false (true for !=) when either is NaN."""
    nan = f"{_NAN.format(v='a')} || {_NAN.format(v='b')}"
    unordered = "1u" if glsl_op == "!=" else "0u"
    table = {"float": Helper(f"gc_{name}", "uint", ("float", "float"),
                             f"  return ({nan}) ? {unordered} : (a {glsl_op} b ? 1u : 0u);")}
    for kind in ("int", "uint"):
        table[kind] = Helper(f"gc_{name}", "uint", (kind, kind), f"  return a {glsl_op} b ? 1u : 0u;")
    return table


COMPARISONS = {name: _compare(name, glsl_op) for name, glsl_op in (
    ("greater", ">"), ("greater_equal", ">="), ("less", "<"), ("less_equal", "<="), ("equal", "=="),
    ("not_equal", "!="))}


def _truth(kind: str, v: str) -> str:
    """GLSL bool: ``v`` is nonzero (a float's NaN too, -0.0 not)."""
    return f"!{_ZERO.format(v=v)}" if kind == "float" else f"({v} != {kind}(0))"


def _logical(name: str, combine: str) -> dict:
    table = {}
    for kind in ("float", "int", "uint"):
        body = combine.format(a=_truth(kind, "a"), b=_truth(kind, "b"))
        table[kind] = Helper(f"gc_{name}", "uint", (kind, kind), f"  return ({body}) ? 1u : 0u;")
    return table


LOGICAL = {"logical_and": _logical("logical_and", "{a} && {b}"), "logical_or": _logical("logical_or", "{a} || {b}"),
           "logical_xor": _logical("logical_xor", "{a} != {b}")}
LOGICAL_NOT = {kind: Helper("gc_logical_not", "uint", (kind,), f"  return {_truth(kind, 'a')} ? 0u : 1u;")
               for kind in ("float", "int", "uint")}

_FLOAT_CLASSES = {
    "isnan": f"{_NAN.format(v='a')}",
    "isinf": "((floatBitsToUint(a) & 0x7fffffffu) == 0x7f800000u)",
    "isfinite": "((floatBitsToUint(a) & 0x7fffffffu) < 0x7f800000u)",
}
# An integer is never NaN or infinite, and always finite.
CLASSES = {name: {"float": Helper(f"gc_{name}", "uint", ("float",), f"  return {test} ? 1u : 0u;"),
                  "int": "0u" if name != "isfinite" else "1u", "uint": "0u" if name != "isfinite" else "1u"}
           for name, test in _FLOAT_CLASSES.items()}


def _mask_dtype(out, what: str):
    """The mask dtype, uint8; ``out`` must be one."""
    if isinstance(out, Tensor) and out.dtype.name != MASK:
        raise DTypeError(f"{what}: out must be a uint8 tensor (a mask of 1s and 0s), got {out.dtype}")
    return as_dtype(MASK)


def _binary_predicate(name: str, table: dict, takes_scalar: bool):
    def predicate(ctx, a, b, *, out=None):
        a = check_tensor(ctx, a, f"{name} a")
        scalar = None
        if isinstance(b, Tensor) or not takes_scalar:
            operands = [a, check_tensor(ctx, b, f"{name} b")]
            dtype = same_dtype(operands, name)
            names = ("x0", "x1")
        else:
            operands, dtype, scalar, names = [a], a.dtype, b, ("x0", "s")
        mask = _mask_dtype(out, name)
        entry = table_entry(table, dtype, name)
        expr, helpers = entry_expr(entry, names, uniform=(1,) if scalar is not None else ())
        return elementwise(ctx, expr, operands, out, out_dtype=mask, scalar=scalar, allowed=OPERANDS, name=name,
                           helpers=helpers)
    predicate.__name__ = name
    return predicate


def _unary_predicate(name: str, table: dict):
    def predicate(ctx, x, *, out=None):
        x = check_tensor(ctx, x, f"{name} x")
        mask = _mask_dtype(out, name)
        expr, helpers = entry_expr(table_entry(table, x.dtype, name), ("x0",))
        return elementwise(ctx, expr, [x], out, out_dtype=mask, allowed=OPERANDS, name=name, helpers=helpers)
    predicate.__name__ = name
    return predicate


_COMPARE_DOC = ("numpy's ``{sym}`` elementwise with broadcasting: 1 where it holds, else 0 (false where "
                "either is NaN{nan_note}); ``b`` may be a Python number. A uint8 mask.")
_SYMBOLS = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<=", "equal": "==",
            "not_equal": "!="}
for _name, _table in COMPARISONS.items():
    _fn = _binary_predicate(_name, _table, takes_scalar=True)
    _fn.__doc__ = _COMPARE_DOC.format(sym=f"a {_SYMBOLS[_name]} b",
                                      nan_note=", except not_equal: true" if _name == "not_equal" else "")
    op(_name, windows=POINTWISE)(_fn)
for _name, _table in LOGICAL.items():
    _fn = _binary_predicate(_name, _table, takes_scalar=False)
    _fn.__doc__ = (f"numpy's ``{_name}`` elementwise with broadcasting: nonzero is true (NaN too), the "
                   "result 1 or 0. A uint8 mask.")
    op(_name, windows=POINTWISE)(_fn)
_fn = _unary_predicate("logical_not", LOGICAL_NOT)
_fn.__doc__ = "numpy's ``logical_not``: 1 where x is zero (either sign), else 0. A uint8 mask."
op("logical_not", windows=POINTWISE)(_fn)
for _name, _table in CLASSES.items():
    _fn = _unary_predicate(_name, _table)
    _fn.__doc__ = (f"numpy's ``{_name}``: 1 where it holds (integers: never NaN or infinite), else 0. A uint8 "
                   "mask.")
    op(_name, windows=POINTWISE)(_fn)


@variants("map")
def _predicate_variants():
    for name in OPERANDS:
        d = as_dtype(name)
        kind = COMPUTE_TYPE[d.kind]
        mask = as_dtype(MASK)
        for table in list(COMPARISONS.values()) + list(LOGICAL.values()):
            yield from _variants(table[kind], ("x0", "x1"), [d, d], mask)
        for table in COMPARISONS.values():
            yield from _variants(table[kind], ("x0", "s"), [d], mask, kind, uniform=(1,))
        for table in [LOGICAL_NOT] + list(CLASSES.values()):
            yield from _variants(table[kind], ("x0",), [d], mask)


def _variants(entry, operands, dtypes, mask, scalar=None, uniform=()):
    expr, helpers = entry_expr(entry, operands, uniform)
    yield from map_variants(expr, dtypes, mask, scalar, helpers=helpers)
