"""``einsum``: Paddle 2.x's Einstein summation op (what ``paddle.einsum`` writes into a saved
program: one op per pair of operands, the equation always explicit, e.g. ``"ij,jk->ik"``).

``Out[out labels] = sum over the other labels of prod_k Operands[k][labels of k]``. A label
repeated within one operand takes its diagonal (``"ii->i"``); ``...`` stands for the same
broadcast dims in every operand (right-aligned, numpy's rule: a dim of 1 stretches); without
``->`` the output is the ``...`` dims then the labels seen once, in alphabetical order. Labelled
dims must agree exactly (Paddle refuses a 1 against another size for a label). All operands
share one dtype, which ``Out`` keeps.

The gradient of operand k is an einsum of ``dOut`` and the other operands onto k's labels,
repeated along the labels only k has (it summed them), summed over the ``...`` dims k
broadcast, and written onto the diagonal for a repeated label. ``InnerCache`` and ``XShape``
(outputs Paddle keeps for its own backward, pruned from inference programs) hold the operands;
``einsum_grad`` here reads ``Operands`` (a Paddle *training* program's ``einsum_grad``, which
reads ``XShape`` / ``InnerCache``, is not loaded: docs/compatibility.md).
"""
from __future__ import annotations

import string
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.dtypes import convert_dtype
from ..core.registry import Binding, OpDef, VarSpec, register

_LETTERS = frozenset(string.ascii_letters)


def parse(equation: str, ranks: Sequence[int]) -> Tuple[List[str], str, str]:
    """The equation with ``...`` spelled out: per operand its labels (one per dim), the
    output's labels, and the labels standing for ``...``. The broadcast dims get letters the
    equation does not use, the same letter for the same (right-aligned) dim in every operand.

    Raises:
        ValueError: a character that is not a letter / ``,`` / ``->`` / ``...``, an operand count
            or rank that does not match, or an output label no operand has.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"einsum: the equation '{equation}' names {len(terms)} operand(s) but "
                         f"{len(ranks)} were given")
    for t in terms + ([rhs] if arrow else []):
        bad = set(t.replace("...", "")) - _LETTERS
        if bad or t.count("...") > 1:
            raise ValueError(f"einsum: invalid subscripts '{t}' in equation '{equation}': "
                             f"use letters, at most one '...' per term, ',' and '->'")
    used = set(eq) & _LETTERS
    spare = [c for c in string.ascii_letters if c not in used]
    wide = 0
    for t, rank in zip(terms, ranks):
        named = len(t.replace("...", ""))
        if ("..." not in t and named != rank) or named > rank:
            raise ValueError(f"einsum: operand '{t}' of equation '{equation}' has rank {rank}, "
                             f"which its {named} label(s) do not match")
        if "..." in t:
            wide = max(wide, rank - named)
    dots = "".join(spare[:wide])
    subs = []
    for t, rank in zip(terms, ranks):
        n = rank - len(t.replace("...", ""))
        subs.append(t.replace("...", dots[wide - n:]) if "..." in t else t)
    if arrow:
        out = rhs.replace("...", dots)
        seen = set("".join(subs))
        missing = [c for c in out if c not in seen]
        if missing or len(set(out)) != len(out):
            raise ValueError(f"einsum: the output '{rhs}' of equation '{equation}' must name "
                             f"each label once, and only labels of the operands")
    else:
        joined = "".join(t.replace("...", "") for t in terms)
        out = dots + "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    return subs, out, dots


def _sizes(equation: str, subs: List[str], shapes: Sequence[Sequence[int]],
           broadcast: str) -> Dict[str, int]:
    """Each label's size (-1 unknown); labels of ``...`` (``broadcast``) stretch from 1."""
    sizes: Dict[str, int] = {}
    for t, shape in zip(subs, shapes):
        for c, d in zip(t, shape):
            d = int(d)
            have = sizes.get(c)
            if have is None or have == -1 or (c in broadcast and have == 1):
                sizes[c] = d
            elif d != -1 and d != have and not (c in broadcast and d == 1):
                raise ValueError(f"einsum: label '{c}' of equation '{equation}' has size {have} "
                                 f"in one operand and {d} in another; the sizes of a label must "
                                 f"be equal")
    return sizes


@register
class Einsum(OpDef):
    """``Out = einsum(equation, *Operands)`` (see the module docstring)."""
    type, inputs, outputs = "einsum", ("Operands*",), ("Out", "InnerCache*?", "XShape*?")
    grad_uses = ("Operands",)

    @staticmethod
    def _plan(equation: str, specs: Sequence[VarSpec]) -> Tuple[List[str], str, Dict[str, int]]:
        subs, out, dots = parse(equation, [len(s.shape) for s in specs])
        return subs, out, _sizes(equation, subs, [s.shape for s in specs], dots)

    def infer(self, Operands, *, equation=""):
        if not Operands:
            raise ValueError("einsum: at least one operand is needed")
        dtype = Operands[0].dtype
        for k, s in enumerate(Operands):
            if s.dtype != dtype:
                raise ValueError(f"einsum: all operands must have one dtype; operand 0 is "
                                 f"{convert_dtype(dtype)}, operand {k} {convert_dtype(s.dtype)}")
        _, out, sizes = self._plan(equation, Operands)
        return {"Out": VarSpec(tuple(sizes[c] for c in out), dtype),
                "InnerCache": list(Operands), "XShape": list(Operands)}

    def bind(self, in_specs, attrs, outputs_present):
        # InnerCache / XShape only when the program has them (inference exports drop them)
        # (as many entries as the program declares: one per operand in Paddle's programs)
        kw = self.kernel_attrs(attrs)
        count = getattr(in_specs, "output_count", None)
        keep = {s: count(s) if count is not None else None
                for s in ("InnerCache", "XShape") if s in outputs_present}

        def run(Operands: Sequence[np.ndarray]) -> Dict[str, object]:
            res = self.forward(Operands, **kw)
            return dict({s: res[s][:n] for s, n in keep.items()}, Out=res["Out"])
        return Binding(run, False)

    def forward(self, Operands, *, equation=""):
        arrays = [np.asarray(a) for a in Operands]
        subs, out, dots = parse(equation, [a.ndim for a in arrays])
        _sizes(equation, subs, [a.shape for a in arrays], dots)
        res = np.einsum(f"{','.join(subs)}->{out}", *arrays, optimize=len(arrays) > 1)
        res = np.asarray(res).astype(arrays[0].dtype, copy=False)
        return {"Out": res, "InnerCache": list(arrays), "XShape": list(arrays)}

    def backward(self, Operands, dOut, dInnerCache=None, dXShape=None, *, equation=""):
        arrays = [np.asarray(a) for a in Operands]
        subs, out, _ = parse(equation, [a.ndim for a in arrays])
        g = np.asarray(dOut)
        return {"Operands": [_operand_grad(k, subs, out, arrays, g) for k in range(len(arrays))]}


def _operand_grad(k: int, subs: List[str], out: str, arrays: List[np.ndarray],
                  dout: np.ndarray) -> np.ndarray:
    """d(sum(dOut * einsum(...)))/d Operands[k] (see the module docstring)."""
    x, sk = arrays[k], subs[k]
    labels = list(dict.fromkeys(sk))                       # k's labels, each once
    others = [(subs[j], arrays[j]) for j in range(len(arrays)) if j != k]
    reach = set(out).union(*(set(s) for s, _ in others))
    kept = "".join(c for c in labels if c in reach)
    terms = ",".join([out] + [s for s, _ in others])
    g = np.einsum(f"{terms}->{kept}", dout, *[a for _, a in others],
                  optimize=len(others) > 0)
    size = {c: x.shape[sk.index(c)] for c in labels}
    # a dim k broadcast (size 1 against a larger one): the gradient sums over it
    axes = tuple(i for i, c in enumerate(kept) if size[c] == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    # labels only k has were summed by the forward: their gradient is the same along them
    full = np.broadcast_to(np.expand_dims(g, [labels.index(c) for c in labels if c not in kept]
                                          ) if len(kept) < len(labels) else g,
                           [size[c] for c in labels])
    grad = np.zeros(x.shape, np.result_type(x.dtype, dout.dtype))
    diag: Optional[np.ndarray] = np.einsum(f"{sk}->{''.join(labels)}", grad) \
        if len(labels) < len(sk) else None
    if diag is None:
        grad[...] = full
    else:                   # a repeated label: the forward read the diagonal, a writable view
        diag[...] = full
    return grad.astype(x.dtype, copy=False)
