"""The implicit (Flux 0.13) style of `update_(rule, params(m), gs)`: the optimiser state is kept
per `Params`, and remembered by the rule per parameter."""

from __future__ import annotations

import weakref
from typing import Any

import jax

from ..core.layer import bump, layer
from ..core.region import commit, current_region
from ..core.sharing import sharing
from ..core.static_writes import note_write, tracing_program
from ..core.walk import Slot, same_arrays_tree
from ..zygote import Grads, Params
from ._rule_base import IMPLICIT_MEMORY, check_real
from .rulestep import _rules_step, cached_step_view
from .wholetree import as_transform, is_whole_tree


@layer(trainable=())
class ImplicitState:
    """Optimiser states for the entries of a `Params`, kept with the `Params` (one per rule).

    `previous`: for each entry, the state that the same rule kept for the same parameter under an earlier
    `Params` (Flux 0.13 keeps a rule's state in an `IdDict` keyed by the array; here by where the array
    lives, since every update makes a new array), or `None` for a fresh one."""

    def __init__(self, rule, ps: Params, previous: list | None = None):
        self.rule = rule
        self.n = len(ps)
        self.statedef = None
        with sharing():
            if is_whole_tree(rule):  # one optax state for the tuple of the arrays of `ps`, kept flat
                if previous is not None and previous[0] is not None:
                    self.states, self.statedef = [previous[0][0]], previous[0][1]
                else:
                    leaves, self.statedef = jax.tree_util.tree_flatten(as_transform(rule).init(tuple(ps)))
                    self.states = [tuple(leaves)]
            else:
                prev = previous or [None] * self.n
                self.states = [rule.init(x) if p is None else p for x, p in zip(ps, prev)]


def _entry_key(e) -> tuple:
    """Where a parameter lives (its first slot), which outlasts the array: an update makes a new array
    and rebinds it there. A parameter that no slot holds is known by the array itself."""
    if e.slots:
        return e.slots[0].ident()
    return ("array", id(e.array))


def _anchor(e) -> Any:
    """The object that `_entry_key` names by id, kept (weakly when it can be) so that a key whose object
    is gone, and whose id is reused, is not mistaken for it."""
    owner = _owner(e)
    try:
        return weakref.ref(owner)
    except TypeError:  # lists, dicts, jax arrays: held
        return lambda: owner


def _owner(e) -> Any:
    """The object a parameter's `_entry_key` names by id."""
    return e.slots[0].owner if e.slots else e.array


def _hit(memory: dict, e) -> tuple | None:
    """The rule's memory `(anchor, holder, index, (shape, dtype))` for the parameter `e`: for its very place,
    holding an array of its shape and type; else None."""
    hit = memory.get(_entry_key(e))
    x = e.value()
    return hit if hit is not None and hit[0]() is _owner(e) and hit[3] == (x.shape, x.dtype) else None


def _whole_hit(memory: dict, entries: list) -> tuple | None:
    """A whole-tree rule's memory `([anchors], holder)` for exactly these parameters, else None."""
    hit = memory.get(tuple(_entry_key(e) for e in entries))
    return hit if hit is not None and all(a() is _owner(e) for a, e in zip(hit[0], entries)) else None


def _remembered(rule, ps: Params) -> list | None:
    """The states `rule` kept for the parameters of `ps` under earlier `Params`, as `ImplicitState`'s
    `previous`; `None` when the rule cannot hold a memory or remembers none of them."""
    memory = getattr(rule, "__dict__", {}).get(IMPLICIT_MEMORY)
    if not memory:
        return None
    if is_whole_tree(rule):
        hit = _whole_hit(memory, ps._entries)
        return None if hit is None else [(hit[1].states[0], hit[1].statedef)]
    hits = [_hit(memory, e) for e in ps._entries]
    if all(h is None for h in hits):
        return None
    return [None if h is None else h[1].states[h[2]] for h in hits]


def _kept_holder(rule, ps: Params) -> ImplicitState | None:
    """The `ImplicitState` that `rule` keeps for exactly the parameters of `ps`, in its order (made for an
    earlier `Params` of the same model: `params(m)` made at every step, inside a compiled step too), or
    None. Taking it makes no new state."""
    memory = getattr(rule, "__dict__", {}).get(IMPLICIT_MEMORY)
    entries = ps._entries
    if not memory or not entries:
        return None
    if is_whole_tree(rule):
        hit = _whole_hit(memory, entries)
        holder = None if hit is None else hit[1]
    else:
        hits = [_hit(memory, e) for e in entries]
        holder = hits[0][1] if hits[0] is not None else None
        if any(h is None or h[1] is not holder or h[2] != i for i, h in enumerate(hits)):
            return None
    return holder if holder is not None and holder.rule is rule and holder.n == len(entries) else None


def _remember(rule, ps: Params, holder: ImplicitState) -> None:
    d = getattr(rule, "__dict__", None)
    if d is None:
        return
    memory = d.setdefault(IMPLICIT_MEMORY, {})
    if is_whole_tree(rule):
        memory[tuple(_entry_key(e) for e in ps._entries)] = ([_anchor(e) for e in ps._entries], holder)
        return
    for i, e in enumerate(ps._entries):
        x = e.value()
        memory[_entry_key(e)] = (_anchor(e), holder, i, (x.shape, x.dtype))


def _implicit_holder(rule, ps: Params) -> ImplicitState:
    """The optimiser state of `rule` for `ps`: kept with `ps`, and remembered by the rule per parameter,
    so that `update_(rule, params(m), gs)` with `params(m)` built anew at every step (Flux 0.13's
    loops) goes on with the same momentum, as Flux's rules keep theirs in an `IdDict`."""
    holders = ps.__dict__.get("_opt_states", {})
    h = holders.get(id(rule))
    if h is not None and h.rule is rule and h.n == len(ps):
        return h
    h = _kept_holder(rule, ps)
    if h is not None:  # an earlier `Params`' state, whole: no new state, nothing a compiled call must redo
        ps.__dict__["_opt_states"] = {**holders, id(rule): h}
        return h
    if is_whole_tree(rule) and tracing_program() and _state_is_a_constant((), [e.value() for e in ps._entries]):
        raise TypeError(_NOT_CARRIED.format(type(rule).__name__))
    h = ImplicitState(rule, ps, _remembered(rule, ps))
    # A new state is a change that a compiled program must not take as done: `fluxjax.jit` walks a
    # rule's states (`Rule.held_layers`), so its cached walks are redone (`bump`), and a program
    # that made the state while tracing is used for that call only (`note_write`).
    note_write(ps, "_opt_states")
    ps.__dict__["_opt_states"] = {**holders, id(rule): h}
    _remember(rule, ps, h)
    bump()
    return h


_NOT_CARRIED = (
    "update_(rule, ps, gs) with a plain optax transformation ({}) inside fluxjax.jit: its state is kept "
    "with the Params, which the compiled program cannot carry from call to call (every call would start "
    "from the same state). Use the explicit form (opt_state = setup(rule, model); update_(opt_state, "
    "model, grads)), train_, or a fluxjax rule (Adam(...), OptimiserChain(...)), whose implicit state "
    "fluxjax.jit carries.")


def _state_is_a_constant(leaves, xs) -> bool:
    """Whether a traced program reads the state as a constant: the parameters are traced, the state
    is not (a state that is an input of the program, or made by this trace, is traced)."""
    return (any(isinstance(x, jax.core.Tracer) for x in xs)
            and not any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(leaves)))


def implicit_update_(holder: ImplicitState, ps: Params, gs: Grads) -> None:
    rule = holder.rule
    xs_all = [e.value() for e in ps._entries]
    gs_all = gs.gradients_for(ps)
    for i, (x, g) in enumerate(zip(xs_all, gs_all)):
        check_real("update_", f"the gradient of params(...)[{i}] (shape {tuple(x.shape)})", x, g)
    if holder.statedef is not None:  # a whole-tree rule: the view is the tuple of the arrays
        xs = tuple(xs_all)
        if tracing_program() and _state_is_a_constant(holder.states[0], xs):
            raise TypeError(_NOT_CARRIED.format(type(rule).__name__))
        state = holder.statedef.unflatten(holder.states[0])
        res = cached_step_view(rule, state, jax.tree_util.tree_structure(xs), list(xs), gs_all)
        if res is not None:
            leaves, statedef = jax.tree_util.tree_flatten(res[0])
            if statedef != holder.statedef:
                commit(Slot(holder, "statedef", True), statedef)
            commit(Slot(holder.states, 0, False), tuple(leaves))
            for e, new_x in zip(ps._entries, res[1]):
                e.set(new_x)
        return
    todo = [(i, e, g) for i, (e, g) in enumerate(zip(ps._entries, gs_all)) if g is not None]
    xs = [xs_all[i] for i, _, _ in todo]
    old = [holder.states[i] for i, _, _ in todo]
    states, new_xs = _rules_step([rule] * len(todo), old, xs, [g for _, _, g in todo])
    same = current_region() is None and same_arrays_tree(old, states)  # one check for every array
    for (i, e, _), new, new_x in zip(todo, states, new_xs):
        if same:
            holder.states[i] = new  # new arrays in the same containers: walks of it stay valid
        else:
            commit(Slot(holder.states, i, False), new)
        e.set(new_x)
