"""What a function reads from its globals and closure cells (`_referenced`, following the plain functions it
calls), used to find bare `Params` arrays, the check that `f` did not leak a tracer into one of them, and
the numbers of the values `f` stored into the lists, dicts and objects they hold (`_settle_stores`)."""

from __future__ import annotations

import functools
import types

import jax

from ..compiled.pure import tracing
from ..core.keys import code_names
from ..core.walk import Slot


def _snapshot(f) -> dict:
    """What `f` references before the call: the ids of its globals' and cells' values, and (under `None`)
    of the differentiation tracers already held in them (an outer `gradient`'s, which must stay)."""
    referenced = _referenced(f)
    out: dict = {(where, var): id(v) for where, var, v, _ in referenced}
    out[None] = {id(t) for *_, v, _ in referenced for _, _, t in _stored_tracers(v)}
    return out


def _check_leaks(f, name, before: dict):
    """Raise if `f` stored a new tracer in a global or closure variable it references. A value `f`
    stored into a list, dict or plain object it references (`log["last"] = y`, `history.append(y)`)
    is put there as its number, as Zygote leaves it (see `_settle_stores`)."""
    referenced = _referenced(f)
    for where, var, v, _ in referenced:
        if isinstance(v, jax.core.Tracer) and before.get((where, var)) != id(v):
            raise RuntimeError(
                f"{name}: f stored a traced value in {where} {var!r}; after {name} returns it is "
                "invalid. Return the value from f instead (use withgradient for extra outputs), or wrap "
                "the store in fluxjax.ignore."
            )
    _settle_stores(name, referenced, before[None])


def _settle_stores(name, referenced, held: set) -> None:
    """Each traced value stored during the call (not in `held`) in the lists, dicts and plain objects
    (one level deep) that `f` references, replaced by its number: a value differentiated op by op has
    it (its primal). Where it has none (the call is being compiled), the stored values are taken out
    again and the call raises: in fluxjax's own compiled call, JAX's concretization error, so that it
    runs op by op, where they get their numbers; inside your `fluxjax.jit` or `jax.jit`, a
    RuntimeError that says what to do."""
    unsettled = []
    for where, var, v, _ in referenced:
        for put, take, t in _stored_tracers(v):
            if id(t) in held:  # there before the call: an outer differentiation's value
                continue
            p = t
            while isinstance(p, jax.core.Tracer) and hasattr(p, "primal"):
                p = p.primal
            if isinstance(p, jax.core.Tracer):
                unsettled.append((where, var, take, p))
            else:
                put(p)
    if not unsettled:
        return
    for *_, take, _ in reversed(unsettled):
        take()
    where, var, _, tracer = unsettled[0]
    if tracing():
        raise jax.errors.ConcretizationTypeError(tracer, f"a value stored into {where} {var!r} (fluxjax runs the "
                                                 "call op by op, where the stored value is a number)")
    raise RuntimeError(
        f"{name}: f stored a traced value into {where} {var!r} (an item or field of it) inside a compiled "
        "function, where it has no number; it was taken out again. Return the value instead (withgradient "
        "takes extra outputs, fluxjax.jit any), or run this step op by op (jit=False)."
    )


def _stored_tracers(v):
    """`(put, take, tracer)` for each differentiation tracer (one with a `primal`: the model's arrays
    that a compiled call swaps in are not) held directly in the list, dict or plain object `v`: `put(x)`
    stores `x` in its place, `take()` removes it (a list item, a dict entry, an attribute)."""
    if isinstance(v, list):
        return [(functools.partial(v.__setitem__, i), functools.partial(_remove, v, e), e)
                for i, e in enumerate(v) if _differentiated(e)]
    if isinstance(v, dict):
        return [(functools.partial(v.__setitem__, k), functools.partial(v.pop, k, None), e)
                for k, e in v.items() if _differentiated(e)]
    d = getattr(v, "__dict__", None)
    if type(v).__module__ == "builtins" or not isinstance(d, dict) or isinstance(v, (type, types.ModuleType)):
        return []
    return [(functools.partial(setattr, v, k), functools.partial(delattr, v, k), e)
            for k, e in d.items() if _differentiated(e)]


def _differentiated(e) -> bool:
    return isinstance(e, jax.core.Tracer) and hasattr(e, "primal")


def _remove(lst: list, e) -> None:
    for i, x in enumerate(lst):
        if x is e:
            del lst[i]
            return


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
