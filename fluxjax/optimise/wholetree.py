"""Plain optax transformations see the whole tree of trainable arrays at once, as optax means them.

Optimisers.jl's rules (`Rule`) act on one array at a time, so `setup` gives them one `Leaf` per array.
A plain optax `GradientTransformation` (or a rule that holds one, such as
`OptimiserChain(optax.clip_by_global_norm(1.0), Adam())`) is applied to every trainable array
together: `optax.clip_by_global_norm(c)` scales all gradients by `min(1, c / ‖g‖)` with the global norm
`‖g‖ = √(Σ_arrays Σ g²)`, `optax.MultiSteps` accumulates every gradient and steps them all on the
same call, masks and `optax.multi_transform` labels see the tree.

The tree optax sees (the *view*) is shaped like the model's gradient: a `Tangent` per layer with its
fields (`view.layers[0].weight`), `None` where a field is not trainable, each tied array once (at its
first place in `jax.tree` order; the gradients of its other places are added to it). A mask or label
function receives this view, e.g. `optax.masked(tx, lambda p: jax.tree.map(lambda x: x.ndim > 1, p))`.
An array without a gradient (Zygote's `nothing`) takes part with a zero gradient, as `jax.grad` would
give it; a step where no array has a gradient changes nothing. Implicit mode (`update_(tx, ps, gs)`)
gives optax the tuple of the arrays of `ps`.

`setup(tx, model)` returns a `TreeState`, which keeps one optax state for the view and the layout that
maps the view onto the model (`opt_state.layers[0].weight` reads the layout's `Part`, a position in
the view). `freeze_`/`thaw_` act on the whole `TreeState` only; `adjust_` changes a fluxjax rule's
hyperparameters, or an `optax.inject_hyperparams` hyperparameter (`eta` is its `learning_rate`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core.layer import layer
from ._composite import MixedPrecision, OptimiserChain
from ._rule_base import Rule, check_hyper, check_real, kind_of

__all__ = ["Part", "TreeState", "is_whole_tree", "as_transform", "tree_update", "adjust_tree", "check_no_parts"]


class Part:
    """A position in the view of a whole-tree optax transformation: the `index`-th array of the view
    (`jax.tree` order). Tied arrays share one `Part`."""

    __slots__ = ("index",)

    def __init__(self, index: int = -1):
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Part) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Part", self.index))

    def __repr__(self) -> str:
        return f"Part({self.index})"


jax.tree_util.register_pytree_node(Part, lambda p: ((), p.index), lambda i, _: Part(i))


def is_part(v: Any) -> bool:
    return isinstance(v, Part)


def as_transform(rule: Any) -> Any:
    """`rule` as an optax `GradientTransformation`: `optax.MultiSteps` (a class of its own) becomes its
    `gradient_transformation()`; anything else is returned as it is."""
    if isinstance(rule, optax.MultiSteps):
        return rule.gradient_transformation()
    return rule


def is_whole_tree(rule: Any) -> bool:
    """Whether `rule` is applied to the whole tree at once: a plain optax transformation, or a rule
    composed with one (`OptimiserChain`, `MixedPrecision`). Optimisers.jl's rules are per array."""
    if isinstance(rule, OptimiserChain):
        return any(is_whole_tree(o) for o in rule.opts)
    if isinstance(rule, MixedPrecision):
        return is_whole_tree(rule.rule)
    return not isinstance(rule, Rule)


class _Layout:
    """The mirror of the model with `Part`s (static: it never changes, so it is compared by identity
    first) and the treedef of the view."""

    __slots__ = ("mirror", "treedef", "n")

    def __init__(self, mirror: Any, treedef: Any, n: int):
        self.mirror, self.treedef, self.n = mirror, treedef, n

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Layout) and self.treedef == other.treedef and self.mirror == other.mirror)

    def __hash__(self) -> int:
        return hash(self.treedef)

    def __repr__(self) -> str:
        return f"<{self.n} arrays>"


class _StateDict(dict):
    """A dict in `TreeState.state`: setting an item sets it in the `TreeState` too (`set_in_state`).
    It flattens as a dict and unflattens as a plain one. Removing items raises: optax's states have
    fixed keys."""

    __slots__ = ("_owner", "_path")

    def __init__(self, items: dict, owner: Any, path: tuple):
        super().__init__(items)
        self._owner, self._path = owner, path

    def __setitem__(self, key: Any, value: Any) -> None:
        self._owner.set_in_state(self._path, key, value)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kw: Any) -> None:
        for k, v in dict(*args, **kw).items():
            self[k] = v

    def __ior__(self, other: Any) -> _StateDict:
        self.update(other)
        return self

    def _fixed(self, *_: Any, **__: Any) -> Any:
        raise TypeError("opt_state.state: the optax state's dicts have fixed keys; set items, or assign "
                        "opt_state.state = new_state")

    __delitem__ = pop = popitem = clear = setdefault = _fixed


jax.tree_util.register_pytree_with_keys(
    _StateDict,
    lambda d: ([(jax.tree_util.DictKey(k), d[k]) for k in sorted(d)], tuple(sorted(d))),
    lambda keys, values: dict(zip(keys, values)),
    lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))),
)


def _live(v: Any, owner: TreeState, path: tuple) -> Any:
    """`v` (optax's state, or part of it at `path`) with its dicts as `_StateDict`s of `owner`."""
    t = type(v)
    if t is dict:
        return _StateDict({k: _live(e, owner, (*path, k)) for k, e in v.items()}, owner, path)
    if t is tuple or (isinstance(v, tuple) and hasattr(t, "_fields")):
        items = [_live(e, owner, (*path, i)) for i, e in enumerate(v)]
        return t(items) if t is tuple else t(*items)
    return v


@layer(trainable=())
class TreeState:
    """The optimiser state of a whole-tree optax transformation (see the module docstring): `rule`,
    `state` (optax's, for the view), `frozen`, and `layout`. Attribute access falls through to the
    layout's mirror, so `opt_state.layers[0].weight` is that array's `Part`.

    The optax state is kept flat, as the tuple `leaves` and the static `statedef` (its treedef), so
    that `fluxjax.jit` passes its arrays in and out whatever containers optax built it from."""

    def __init__(self, rule: Any, state: Any, layout: _Layout, frozen: bool = False):
        self.rule = rule
        self.state = state
        self.layout = layout
        self.frozen = frozen

    @property
    def state(self) -> Any:
        """optax's state, for the view. Its dicts write through: setting an item of one sets it in the
        optimiser state too, as optax's `opt_state.hyperparams["learning_rate"] = 0.01` does for an
        `optax.inject_hyperparams` state (a number is stored as an array of the old item's dtype)."""
        return _live(self.optax_state(), self, ())

    @state.setter
    def state(self, value: Any) -> None:
        leaves, treedef = jax.tree_util.tree_flatten(value)
        # a view's dicts unflatten as plain dicts: the stored structure is optax's own
        self.statedef = jax.tree_util.tree_structure(treedef.unflatten(leaves))
        self.leaves = tuple(leaves)

    def optax_state(self) -> Any:
        """optax's state, as its own containers (no view)."""
        return self.statedef.unflatten(self.leaves)

    def set_in_state(self, path: tuple, key: Any, value: Any) -> None:
        """`state[path...][key] = value`, on the state as it is now (a view may be older than a step)."""
        state = self.optax_state()
        d = state
        try:
            for p in path:
                d = d[p]
            old = d[key]
        except (KeyError, IndexError, TypeError):
            raise KeyError(
                f"TreeState: the optimiser state has no item {key!r} at {path!r} (any more); set an existing "
                "hyperparameter, or take opt_state.state again after the state was made anew"
            ) from None
        if isinstance(old, jax.Array) and old.ndim == 0 and np.ndim(value) == 0:
            value = jnp.asarray(value, old.dtype)  # as optax's `inject_hyperparams` casts it at each step
        d[key] = value
        self.state = state

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "layout" not in self.__dict__:
            raise AttributeError(name)
        mirror = self.__dict__["layout"].mirror
        try:
            return getattr(mirror, name) if not isinstance(mirror, dict) else mirror[name]
        except (AttributeError, KeyError):
            raise AttributeError(f"TreeState has no field {name!r} (the optax state is opt_state.state)") from None

    def __getitem__(self, k: Any) -> Any:
        return self.layout.mirror[k]

    def __repr__(self) -> str:
        return f"TreeState({self.rule!r}, {self.layout!r}{', frozen' if self.frozen else ''})"


def new_tree_state(rule: Any, mirror: Any, arrays: dict[int, Any]) -> TreeState:
    """The `TreeState` for `rule` over `mirror` (the model's shape with one fresh `Part` per distinct
    trainable array, `arrays[id(part)]` its array): numbers the parts in `jax.tree` order, builds the
    view and `rule.init(view)`."""
    parts = list({id(p): p for p in jax.tree_util.tree_leaves(mirror, is_leaf=is_part)}.values())
    xs = []
    for i, p in enumerate(parts):
        xs.append(arrays[id(p)])
        p.index = i
    seen: set[int] = set()

    def first(p: Part) -> Any:
        if p.index in seen:
            return None
        seen.add(p.index)
        return 0

    treedef = jax.tree_util.tree_structure(jax.tree_util.tree_map(first, mirror, is_leaf=is_part))
    layout = _Layout(mirror, treedef, len(parts))
    return TreeState(rule, as_transform(rule).init(treedef.unflatten(xs)), layout)


def _params_after(rule: Any, x: Any, upd: Any, new_state: Any) -> Any:
    after = getattr(rule, "params_after", None)
    if after is not None:
        return after(x, new_state)
    return jax.tree_util.tree_map(lambda a, u: (a + u).astype(a.dtype), x, upd)


def step_view(rule: Any, state: Any, treedef: Any, xs: list, gs: list) -> tuple[Any, list] | None:
    """One optax step on the view: `(new_state, new arrays)`, or None when no array has a gradient.
    `x ← x + u` with `(u, state) = rule.update(g, state, x)`; a missing gradient is zero."""
    if all(g is None for g in gs):
        return None
    gs = [jnp.zeros_like(x) if g is None else jnp.asarray(g).astype(jnp.result_type(x)) for x, g in zip(xs, gs)]
    view_x, view_g = treedef.unflatten(xs), treedef.unflatten(gs)
    upd, new_state = optax.with_extra_args_support(as_transform(rule)).update(view_g, state, view_x)
    for x, u in zip(xs, treedef.flatten_up_to(upd)):
        check_real("update_", f"the update of {type(rule).__name__}", x, u, "make its update real for a real parameter")
    return new_state, treedef.flatten_up_to(_params_after(rule, view_x, upd, new_state))


def tree_update(ts: TreeState, entries: list, step: Any = step_view) -> tuple[Any, list] | None:
    """The step of a `TreeState` from `entries` `[(part, x, g, slots)]` (one per distinct array, as
    `matching._collect` gives them; `step` is `step_view` or a compiled form of it):
    `((leaves, statedef), [(new_x, slots)])`, the new flat optax state
    and arrays, or None when nothing changes."""
    if ts.frozen:
        return None
    n = ts.layout.n
    xs: list[Any] = [None] * n
    gs: list[Any] = [None] * n
    slots: list[Any] = [None] * n
    for part, x, g, sl in entries:
        xs[part.index], gs[part.index], slots[part.index] = x, g, sl
    missing = [i for i, x in enumerate(xs) if x is None]
    if missing:
        raise TypeError(
            f"update_: the model does not have the {len(missing)} trainable array(s) that setup() saw "
            f"(first: view position {missing[0]}); was opt_state set up for another model?"
        )
    res = step(ts.rule, ts.optax_state(), ts.layout.treedef, xs, gs)
    if res is None:
        return None
    new_state, new_xs = res
    leaves, statedef = jax.tree_util.tree_flatten(new_state)
    return (tuple(leaves), statedef), list(zip(new_xs, slots))


def _no_hyper(rule: Any, fn: str) -> TypeError:
    return TypeError(
        f"{fn}: {type(rule).__name__} is a plain optax transformation; it has no hyperparameters to adjust. "
        "Wrap it in optax.inject_hyperparams (e.g. optax.inject_hyperparams(optax.adam)(learning_rate=0.01)) "
        "to adjust its learning rate, or set it up again."
    )


def adjust_tree(ts: TreeState, eta: Any, kw: dict, fn: str = "adjust_") -> None:
    """`adjust_` of a `TreeState`, in place: a fluxjax rule's `adjust`/`adjust_state`; for a plain
    optax transformation, the hyperparameters of an `optax.inject_hyperparams` state (`eta` is
    `learning_rate`), else a TypeError."""
    rule = ts.rule
    if isinstance(rule, Rule):
        args = () if eta is None else (eta,)
        new_rule = rule.adjust(*args, **kw)  # (both checked before either is stored)
        ts.state = rule.adjust_state(ts.optax_state(), *args, **kw)
        ts.rule = new_rule
        return
    state = ts.optax_state()
    hp = getattr(state, "hyperparams", None)
    if not isinstance(hp, dict):
        raise _no_hyper(rule, fn)
    want = dict(kw)
    if eta is not None:
        want["learning_rate"] = eta
    unknown = sorted(k for k in want if k not in hp)
    if unknown:
        raise TypeError(f"{fn}: the optax state has hyperparameters {sorted(hp)}, not {unknown}")
    new = dict(hp)
    for k, v in want.items():
        v = check_hyper(f"{fn}: optax.inject_hyperparams", k, v, kind_of(hp[k]))
        new[k] = jnp.asarray(v, jnp.result_type(hp[k]))
    ts.state = state._replace(hyperparams=new)


def check_no_parts(tree: Any, fn: str) -> None:
    """A TypeError when `fn` is given a part of a `TreeState` (a whole-tree transformation cannot be
    frozen or adjusted for some arrays only)."""
    if any(is_part(v) for v in jax.tree_util.tree_leaves(tree, is_leaf=is_part)):
        raise TypeError(
            f"{fn}: this is part of the state of a whole-tree optax transformation, which sees every array "
            f"at once; {fn} acts on the whole opt_state only. To treat some arrays differently, set up "
            "optax.masked or optax.multi_transform (e.g. with optax.set_to_zero() to freeze)."
        )
