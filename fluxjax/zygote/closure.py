"""What a function reads from its globals and closure cells (`_referenced`, following the plain functions it
calls), used to find bare `Params` arrays, and the check that `f` did not leak a tracer into one of them."""

from __future__ import annotations

import types

import jax

from ..core.keys import code_names
from ..core.walk import Slot


def _snapshot(f) -> dict:
    return {(where, var): id(v) for where, var, v, _ in _referenced(f)}


def _check_leaks(f, name, before: dict):
    """Raise if `f` stored a new tracer in a global or closure variable it references."""
    for where, var, v, _ in _referenced(f):
        if isinstance(v, jax.core.Tracer) and before.get((where, var)) != id(v):
            raise RuntimeError(
                f"{name}: f stored a traced value in {where} {var!r}; after {name} returns it is "
                "invalid. Return the value from f instead (use withgradient for extra outputs), or wrap "
                "the store in fluxjax.ignore."
            )


def _referenced(f, depth=2):
    """(kind, name, value, Slot) for each global and closure cell `f` reads, following the plain
    functions it calls up to `depth` levels."""
    seen: set[int] = set()
    out = []

    def go(fn, d):
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        found = []
        for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                found.append(("closure variable", var, cell.cell_contents, Slot(cell, "cell_contents", "cell")))
            except ValueError:  # an empty cell
                continue
        g = fn.__globals__
        found += [("global", var, g[var], Slot(g, var, False)) for var in code_names(code) if var in g]
        out.extend(found)
        for item in found:
            if d and isinstance(item[2], types.FunctionType):
                go(item[2], d - 1)

    go(f, depth)
    return out
