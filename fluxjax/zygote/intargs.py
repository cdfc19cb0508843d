"""Integer arguments: Zygote differentiates `Int` numbers and arrays as reals, so `gradient` traces them as
floats; one used as an index, a size or an axis (an index error then, or a different result, as
`Embedding` reading float input as one-hot) is held as it is and gets `None`, as Zygote's indexing
rules give `nothing`. `traced_with` runs a plan with that decision, kept per function."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..compiled.pure import tracing
from ..core.undo import RunAgain
from .plan import _check_scalar, _plan, _run_vjp


def _traced(f, args, name, first_only):
    """`jax.vjp` of the plan for `f(*args)`: `(plan, (y, back, full, aux))`; see `traced_with`."""
    return traced_with(f, args, name, lambda plan: _run_vjp(plan, first_only))


# What `f` may raise because an integer is traced as a float: under Zygote an `Int` stays an `Int` in the
# forward pass, so a float in its place is fluxjax's doing, and it fails in more ways than any list of
# messages can name (an index or a size: TracerIntegerConversionError; an axis: "iteration over a 0-d
# array", ConcretizationTypeError; a static argument: "unhashable type" or ValueError "Non-hashable
# static"; `range(d)`, `[0] * d`, a dict key, an int-only method, `assert isinstance(d, int)`). Any of
# these makes `f` run again with the ints held as they are: an error that remains then is `f`'s own,
# and is raised as that run raised it; one that goes away was the float's. Exceptions outside this set
# (fluxjax's own control flow, as `IntsUndecided`; RuntimeError, ...) pass through at once.
_INT_ERRORS = (TypeError, ValueError, LookupError, AttributeError, NotImplementedError, AssertionError)
_DECIDED: dict[Any, frozenset] = {}  # (f's code, the ints) -> the ints held static: decided once
_MAX_DECIDED = 4096


def _attempt(run, plan) -> tuple[Any, bool]:
    """`(run(plan), True)`, or `(None, False)` when it raises one of `_INT_ERRORS`: an error that may be
    the float's in an int's place (see `_search`, which reruns `f` with the ints held to tell)."""
    try:
        return run(plan), True
    except _INT_ERRORS:
        return None, False


def _code_of(f) -> Any:
    while hasattr(f, "func") and callable(getattr(f, "func", None)) and hasattr(f, "args"):  # functools.partial
        f = f.func
    f = getattr(f, "__func__", f)  # a bound method
    code = getattr(f, "__code__", None)
    if code is None:
        return type(f)  # a layer or another callable object: its class decides what it does
    return code, tuple(_cell_type(c) for c in (f.__closure__ or ()))


def _cell_type(c) -> type:
    try:
        return type(c.cell_contents)
    except ValueError:  # an empty cell
        return type(None)


class IntsUndecided(RunAgain):
    """Raised in the trace of an eager `gradient` that fluxjax compiles on its own when it has not yet
    decided which integers `f` can take as floats: that needs concrete values (see `_search`), so the
    call runs op by op once, decides, and the next call compiles."""


def _same_output(a, b, concrete: bool) -> bool:
    """Whether `f` returned the same with an integer traced as a float (`a`) as with it held (`b`):
    the same structure and shapes, and where the values are known, the same values."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    if ta != tb or [np.shape(v) for v in la] != [np.shape(v) for v in lb]:
        return False
    if not concrete:
        return True
    for u, v in zip(la, lb):
        try:
            if not np.allclose(np.asarray(u, np.complex128), np.asarray(v, np.complex128), rtol=1e-5, equal_nan=True):
                return False
        except (TypeError, ValueError):  # not numbers (a string beside the loss)
            if u is not v and not (type(u) is type(v) and u == v):
                return False
    return True


def _search(f, args, name, run, plan):
    """Which ints `f` can take as floats: all of them, or (when that raises one of `_INT_ERRORS`) none,
    then each one alone where `f` allows it; if `f` fails with none of them as floats, that error is
    raised. An integer that changes what `f` returns when traced as a float
    (a layer that reads integer input as indices and float input as one-hot, as `Embedding`) is held
    static too: that check compares values, so it needs concrete ones (inside a trace that fluxjax
    starts on its own it raises `IntsUndecided`; inside the user's own trace it compares shapes only).
    `(plan, run(plan), static, decided)`; `decided` says whether the values were compared."""
    static: frozenset = frozenset()
    res, ok = _attempt(run, plan)
    if not ok:
        static = frozenset(plan.ints)
        plan = _plan(f, args, name, static)
        res = run(plan)  # still failing with the ints held: not the ints' fault, `f`'s own error is raised
        for i in sorted(static):
            trial = static - {i}
            p2 = _plan(f, args, name, trial)
            r2, ok = _attempt(run, p2)
            if ok:  # all held ran, so an error here is int `i`'s as a float: it stays held
                static, plan, res = trial, p2, r2
    free = [i for i in plan.ints if i not in static]
    if not free:
        return plan, res, static, True
    concrete = not any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(plan.primals))
    if not concrete and tracing():
        raise IntsUndecided(name)
    reference, ok = _attempt(lambda p: p.fx(*p.primals)[0], plan)
    if ok:
        held = [i for i in free if not _same_output(reference, _forward(f, args, name, static | {i}), concrete)]
    else:  # a float that `f` refuses once its value can be read (`ctc_loss`'s labels): each one alone, to tell
        all_held = _forward(f, args, name, static | set(free))
        held = [i for i in free if not _same_output(_forward(f, args, name, static | (set(free) - {i})), all_held,
                                                    concrete)]
    if held:
        static = static | frozenset(held)
        plan = _plan(f, args, name, static)
        res = run(plan)
    return plan, res, static, concrete


def _forward(f, args, name, static):
    """`f`'s output with the ints `static` held, or None when it raises with the others as floats."""
    return _attempt(lambda p: p.fx(*p.primals)[0], _plan(f, args, name, static))[0]


def traced_with(f, args, name, run):
    """`(plan, run(plan))` for the plan of `f(*args)`. Python ints and integer arrays are differentiated
    as numbers, as Zygote does (`gradient(x -> 3x^2 + 2x + 1, 5) == (32,)`, `jacobian(a -> 100*a[1:3].^2,
    1:7)`), which needs a float tracer in their place; when that makes `f` fail (an int used as an index,
    a size or an axis, where Zygote's rules give `nothing`: any error of `_INT_ERRORS` that goes away
    with the ints held, whatever its message; one that does not is `f`'s own and is raised), or
    changes the shape of what `f` returns (`Embedding` reads float input as one-hot), those ints are held static instead and
    get `None` (see `_search`; `f` runs more than once then). The decision is kept per `f`'s code and
    the ints' positions, shapes and dtypes, so a loop decides once; an error under a kept decision
    decides again."""
    plan = _plan(f, args, name)
    if not plan.ints:
        return plan, run(plan)
    key = (_code_of(f), plan.key)
    static = _DECIDED.get(key)
    if static is not None:
        if static == frozenset(plan.ints):  # all held: an error is f's own
            held = _plan(f, args, name, static)
            return held, run(held)
        held = _plan(f, args, name, static) if static else plan
        res, ok = _attempt(run, held)
        if ok:
            return held, res
    plan, res, static, decided = _search(f, args, name, run, plan)
    if decided:
        if len(_DECIDED) >= _MAX_DECIDED:
            _DECIDED.clear()
        _DECIDED[key] = static
    return plan, res


def _vjp(f, args, name, first_only=False, check=True, defer=False):
    """Run `f` under `jax.vjp`. Its state writes (BatchNorm statistics, Dropout keys) are committed at
    once, or with `defer=True` returned as a thunk, so that `gradient` commits them only after the
    backward pass succeeded: `(plan, y, back, full)`, plus the thunk when deferred."""
    plan, (y, back, full, aux) = _traced(f, args, name, first_only)
    if check:
        _check_scalar(y, name)
    if defer:
        return plan, y, back, full, lambda: plan.commit(aux)
    plan.commit(aux)
    return plan, y, back, full
