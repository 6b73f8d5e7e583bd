"""The Einsum ONNX node for one or two operands, as numpy.einsum computes it.

The equation is worked out at bind: ``...`` becomes letters of its own
(aligned to the right, broadcasting like numpy), and each letter is sorted
into what the recording does with it. A letter repeated in one operand
takes the diagonal (the two axes moved last and merged, then one
``index_select`` of the diagonal's positions). A letter only one operand
has and the output lacks is summed there first. With two operands the
letters both share and the output keeps are the batch dims of one
``matmul``, those both share and the output lacks its inner dimension,
and each operand's remaining letters its rows or columns; a final
``permute`` puts the output's letters in order."""
from __future__ import annotations

import math
import string

import numpy as np

from .table import Const, Plan, Sym, attr, require_dtype, rule, unsupported

EINSUM_DTYPES = ("float32", "float16", "int32")


def _parse(node, equation: str, shapes: list) -> tuple:
    """(operand letter strings, output letters, {letter: size}) with every
    ``...`` spelled out in letters the equation does not use."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise unsupported(node, f"equation {equation!r} names {len(terms)} operands, the node has {len(shapes)}")
    spare = [c for c in string.ascii_letters if c not in eq]
    ell_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t), default=0)
    ell = "".join(spare[:ell_rank])
    out_terms, sizes = [], {}
    for t, shape in zip(terms, shapes):
        if "..." in t:
            t = t.replace("...", ell[ell_rank - (len(shape) - len(t.replace("...", ""))):])
        if len(t) != len(shape) or not t.isalpha():
            raise unsupported(node, f"term {t!r} of {equation!r} for an operand of shape {tuple(shape)}")
        for c, n in zip(t, shape):
            if sizes.get(c, 1) != 1 and n != 1 and sizes[c] != n:
                raise unsupported(node, f"letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:   # implicit output: the ellipsis, then the letters used once, in order
        counts = "".join(out_terms)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    if len(set(out)) != len(out) or any(c not in sizes for c in out):
        raise unsupported(node, f"output {rhs!r} of {equation!r}")
    return out_terms, out, sizes


class _Steps:
    """The recording of one Einsum: a list of (kind, args) steps over
    numbered values (0, 1: the operands), with the scratch each needs."""

    def __init__(self, dtype: str):
        self.dtype, self.steps, self.scratch = dtype, [], []

    def new(self, shape) -> int:
        self.scratch.append((tuple(shape), self.dtype))
        return len(self.scratch) + 1          # values 0, 1 are the operands; scratch k is value k + 2

    def permute(self, v, term: str, shape: tuple, order: str):
        if term == order:
            return v, term, shape
        perm = tuple(term.index(c) for c in order)
        shape = tuple(shape[p] for p in perm)
        out = self.new(shape)
        self.steps.append(("permute", (v, perm, out)))
        return out, order, shape

    def diagonal(self, v, term: str, shape: tuple, sizes: dict, uploads: list):
        """Each repeated letter: its two axes moved last, merged, the diagonal gathered."""
        while len(set(term)) != len(term):
            c = next(c for c in term if term.count(c) > 1)
            i = term.index(c)
            j = term.index(c, i + 1)
            others = [k for k in range(len(term)) if k not in (i, j)]
            rest = "".join(term[k] for k in others)
            perm = tuple(others) + (i, j)             # by position: the letter is there twice
            if perm != tuple(range(len(term))):
                shape = tuple(shape[p] for p in perm)
                moved = self.new(shape)
                self.steps.append(("permute", (v, perm, moved)))
                v = moved
            n = sizes[c]
            out = self.new(shape[:-2] + (n,))
            uploads.append(np.arange(n, dtype=np.int32) * (n + 1))
            self.steps.append(("diagonal", (v, shape[:-2] + (n * n,), len(uploads) - 1, out)))
            v, term, shape = out, rest + c, shape[:-2] + (n,)
        return v, term, shape

    def sum_out(self, v, term: str, shape: tuple, letters: str):
        axes = tuple(k for k, c in enumerate(term) if c in letters)
        if not axes:
            return v, term, shape
        keep = "".join(c for c in term if c not in letters)
        shape = tuple(n for k, n in enumerate(shape) if k not in axes)
        out = self.new(shape)
        self.steps.append(("sum", (v, axes, out)))
        return out, keep, shape


def _record(steps: list):
    """Runs ``steps``; the last copies its value into the node's output."""
    def record(rec, t):
        values = {0: t.ins[0], 1: t.ins[1] if len(t.ins) > 1 else None, -1: t.outs[0]}
        for k, s in enumerate(t.scratch):
            values[k + 2] = s
        for kind, args in steps:
            if kind == "permute":
                v, perm, out = args
                rec.permute(values[v], perm, out=values[out])
            elif kind == "diagonal":
                v, flat, upload, out = args
                rec.index_select(values[v].reshape(flat), t.consts[upload], len(flat) - 1, out=values[out])
            elif kind == "sum":
                v, axes, out = args
                rec.sum(values[v], axes, out=values[out])
            elif kind == "matmul":
                a, a3, b, b3, out, o3 = args
                rec.matmul(values[a].reshape(a3), values[b].reshape(b3), out=values[out].reshape(o3))
            else:   # the final copy into the output
                rec.copy(values[args[0]], out=values[-1])
    return record


@rule("Einsum")
def einsum(node, args, opset):
    ops = [a for a in args if a is not None]
    equation = attr(node, "equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    if all(isinstance(a, Const) for a in ops):
        return [Const(np.asarray(np.einsum(equation, *[a.value for a in ops])))]
    if len(ops) not in (1, 2):
        raise unsupported(node, f"{len(ops)} operands (one or two are supported)")
    dtypes = {require_dtype(node, a, EINSUM_DTYPES) for a in ops}
    if len(dtypes) > 1:
        raise unsupported(node, f"mixed input dtypes {sorted(dtypes)}")
    d = dtypes.pop()
    terms, out, sizes = _parse(node, equation, [tuple(a.shape) for a in ops])
    st, uploads = _Steps(d), []
    vals = []
    for k, (a, term) in enumerate(zip(ops, terms)):
        v, term, shape = st.diagonal(k, term, tuple(a.shape), sizes, uploads)
        others = "".join(terms[j] for j in range(len(terms)) if j != k)
        v, term, shape = st.sum_out(v, term, shape, "".join(c for c in term if c not in out and c not in others))
        vals.append((v, term, shape))
    v, term, shape = vals[0] if len(vals) == 1 else _contract(node, st, vals, out)
    v, term, shape = st.permute(v, term, shape, out)
    out_shape = tuple(sizes[c] for c in out)
    if shape != out_shape:            # a broadcast operand's size-1 letter survived to the output
        raise unsupported(node, f"equation {equation!r} broadcasts a letter of size 1 into the output")
    st.steps.append(("copy", (v,)))
    uses = tuple(k for k, a in enumerate(args) if a is not None)
    return Plan([Sym(out_shape, d)], _record(st.steps), uses=uses, uploads=uploads,
                scratch=st.scratch)


def _contract(node, st: _Steps, vals: list, out: str):
    """The two operands as one batched matmul: (batch, rows, inner) @ (batch, inner, cols)."""
    (va, ta, sa), (vb, tb, sb) = vals
    batch = "".join(c for c in out if c in ta and c in tb)
    inner = "".join(c for c in ta if c in tb and c not in out)
    rows = "".join(c for c in ta if c not in tb)
    cols = "".join(c for c in tb if c not in ta)
    va, ta, sa = st.permute(va, ta, sa, batch + rows + inner)
    vb, tb, sb = st.permute(vb, tb, sb, batch + inner + cols)
    nb = len(batch)
    size_a, size_b = dict(zip(ta, sa)), dict(zip(tb, sb))
    size = {**size_a, **size_b}
    for c in inner:
        if size_a[c] != size_b[c]:
            raise unsupported(node, f"inner letter {c!r} has sizes {size_a[c]} and {size_b[c]}")
    r, k, cl = (math.prod(size[c] for c in g) for g in (rows, inner, cols))
    a3, b3 = sa[:nb] + (r, k), sb[:nb] + (k, cl)
    bshape = tuple(max(x, y) for x, y in zip(sa[:nb], sb[:nb]))
    shape = bshape + tuple(size[c] for c in rows) + tuple(size[c] for c in cols)
    o = st.new(shape)
    st.steps.append(("matmul", (va, a3, vb, b3, o, bshape + (r, cl))))
    return o, batch + rows + cols, shape
