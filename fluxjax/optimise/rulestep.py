"""The step of many rules at once: `(new states, new arrays)` as one cached compiled program when
eager (`fluxjax.compiled.pure`), op by op inside a trace."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ..compiled.pure import NOT_RUN, cached_pure
from ..core import keys
from ..core.sharing import sharing
from ..errors import DimensionMismatch
from ._rule_base import check_real
from .wholetree import step_view


def _rules_step(rules: list, states: list, xs: list, gs: list) -> tuple[list, list]:
    """`(new states, new arrays)` of `rules[i]` stepping `states[i]`, `xs[i]` with `gs[i]`: one cached
    compiled program when eager (`fluxjax.compiled.pure`), else the rules op by op (inside a trace,
    under `fluxjax.eager()`, or for a rule that branches on values in Python)."""
    rules = tuple(rules)

    def run(args):
        new_s, new_x = [], []
        for rule, st, x, g in zip(rules, *args):
            g = jnp.asarray(g).astype(x.dtype)
            upd, new = rule.update(g, st, x)
            check_real("update_", f"the step of {rule!r}", x, upd, _REAL_STEP)  # (a custom rule's; while tracing)
            new_s.append(new)
            new_x.append(_params_after(rule, x, upd, new))
            if new_x[-1].shape != x.shape:  # (while tracing: shapes are static)
                raise DimensionMismatch(
                    f"update_: {rule!r} gives a step of shape {tuple(upd.shape)} for an array of shape "
                    f"{tuple(x.shape)}: its state was set up for another array. Set it up again for this model: "
                    "opt_state = setup(rule, model)"
                )
        return new_s, new_x

    by_id: dict[int, Any] = {}  # (one key per rule object: the arrays of a model mostly share one)
    key = tuple(by_id[id(r)] if id(r) in by_id else by_id.setdefault(id(r), _rule_key(r)) for r in rules)
    out = cached_pure(("rules", key), rules, run, (list(states), list(xs), list(gs)))
    if out is NOT_RUN:
        with sharing():
            out = run((states, xs, gs))
    return out


_REAL_STEP = "make the rule's step real for a real parameter (its type is the parameter's, as Optimisers.jl's)"


def _rule_key(rule: Any) -> Any:
    """A rule in a program's cache key, computed afresh at each step (`core.keys.static_key`): a rule of
    ours by its hyperparameters (`Adam(0.01)` set up twice shares one program) and what its callables
    read now (a schedule reading a global), an optax transformation by its code and what its closures
    hold (the user's schedule in `optax.sgd(schedule)`)."""
    return (type(rule), keys.static_key(rule))


def cached_step_view(rule: Any, state: Any, treedef: Any, xs: list, gs: list) -> tuple[Any, list] | None:
    """`wholetree.step_view` as a cached compiled program when eager (see `_rules_step`)."""
    if all(g is None for g in gs):
        return None
    out = cached_pure(
        ("view", _rule_key(rule), treedef),
        (rule,),
        lambda a: step_view(rule, a[0], treedef, a[1], a[2]),
        (state, list(xs), list(gs)),
    )
    if out is NOT_RUN:
        with sharing():
            out = step_view(rule, state, treedef, xs, gs)
    return out


def _params_after(rule, x, upd, new_state):
    """`x + upd` in `x`'s type; a rule that keeps its own copy of the parameters (`MixedPrecision`)
    says what they become, so that they are its copy exactly, rounded."""
    after = getattr(rule, "params_after", None)
    return after(x, new_state) if after is not None else (x + upd).astype(x.dtype)
