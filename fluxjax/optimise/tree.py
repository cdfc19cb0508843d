"""Optimisers.jl's state tree: `setup`, `update_`, `update`, `adjust_`, `freeze_`, `thaw_`.

`setup(rule, model)` mirrors the model: a `Tangent`-shaped tree with a `Leaf(rule, state)` at every
trainable array and `None` elsewhere (`opt_state.layers[0].weight`). Tied arrays share one `Leaf`, and
their gradients are summed. `update_` rebinds the model's arrays and the leaves' states through the
state thread, so it works eagerly and inside `fluxjax.jit`. Optimisers.jl's rules act on one array at a
time; any other optax `GradientTransformation` sees the whole tree of trainable arrays at once, as optax
means it (`setup` then returns a `TreeState`, see `wholetree.py`).
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import optax

from ..core.layer import is_array, is_float_array, is_layer, trainable
from ..core.plain import find_plain
from ..core.region import commit, current_region
from ..core.sharing import sharing
from ..core.walk import Slot, same_arrays_tree
from ..zygote import Grads, Params, Tangent
from ..zygote.implicit import raise_plain
from .implicit import _implicit_holder, implicit_update_
from .leaf import Leaf
from .matching import _collect, _is_namedtuple, _rebuild, _Root
from .rulestep import _rules_step, cached_step_view
from .wholetree import (
    Part,
    TreeState,
    adjust_tree,
    as_transform,
    check_no_parts,
    is_whole_tree,
    new_tree_state,
    tree_update,
)


def _check_rule(rule, fn):
    if not isinstance(as_transform(rule), optax.GradientTransformation):
        raise TypeError(
            f"{fn}: expected an optimisation rule (e.g. Adam(), or any optax GradientTransformation), "
            f"got {type(rule).__name__}"
        )


def setup(rule: optax.GradientTransformation, model: Any) -> Any:
    """The optimiser state tree for `model` (Optimisers.jl's `setup`).

    ```python
    >>> model = Chain(Dense(2, 3))
    >>> opt_state = setup(Adam(0.01), model)
    >>> opt_state.layers[0].weight
    Leaf(Adam(eta=0.01, beta=(0.9, 0.999), epsilon=1e-08))

    ```
    A plain optax transformation (`optax.clip_by_global_norm`, `optax.MultiSteps`, `optax.masked`, ...,
    or a rule chained with one) gets a `TreeState`: one optax state for the whole tree of trainable
    arrays, which it sees at once (see `fluxjax.optimise.wholetree`).
    """
    _check_rule(rule, "setup")
    if isinstance(model, Params):
        raise TypeError("setup: pass the model, not params(model); or use update_(rule, ps, gs) in implicit mode")
    whole = is_whole_tree(rule)
    leaves: dict[int, Any] = {}
    arrays: dict[int, Any] = {}  # Part -> its array, for a whole-tree rule
    memo: dict[int, Any] = {}

    def build(v):
        if is_layer(v):
            if id(v) in memo:
                return memo[id(v)]
            fields: dict[str, Any] = {}
            memo[id(v)] = t = Tangent(type(v), fields)
            tr = trainable(v)
            for k, e in v.__dict__.items():
                fields[k] = build(e) if k in tr else _refuse_plain(e)
            return t
        if is_float_array(v):
            if id(v) not in leaves:
                leaves[id(v)] = Part() if whole else Leaf(rule, rule.init(v))
                arrays[id(leaves[id(v)])] = v
            return leaves[id(v)]
        if isinstance(v, list):
            return [build(e) for e in v]
        if isinstance(v, tuple):
            items = [build(e) for e in v]
            return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
        if isinstance(v, dict):
            return {k: build(e) for k, e in v.items()}
        return _refuse_plain(v)

    with sharing():  # leaves set up together hold one βt, one array per hyperparameter
        tree = build(model)
        if whole:
            tree = new_tree_state(rule, tree, arrays)
    if not leaves:
        warnings.warn(f"setup: model has no trainable parameters: {type(model).__name__}", stacklevel=2)
    elif _STEP_FUSION:
        _STEP_FUSION[1](model, tree)  # the eager loop's first step may run fused (optimise/eagerstep.py)
    return tree


def _refuse_plain(v) -> None:
    """`setup` of a plain object (no `@layer`) holding arrays raises: it would be silently frozen."""
    plain = find_plain(v, pytrees=True)
    if plain is not None:
        raise_plain(plain, "setup")

def _apply(leaf: Leaf, new_state, new_x, slots, roots: dict, write, same: bool):
    if same:
        leaf.__dict__["state"] = new_state  # new arrays in the same containers: walks of it stay valid
    else:
        write(Slot(leaf, "state", True), new_state)
    for s in slots:
        if isinstance(s, _Root):
            roots[s.path] = new_x
        else:
            write(s, new_x)


_STEP_FUSION: list = []  # fluxjax.optimise.eagerstep's `commit_update` and `link`, once it is imported


def use_step_fusion(commit: Any, link: Any) -> None:
    """Called by fluxjax.optimise.eagerstep: `update_` first asks `commit(opt_state, model, grads)`
    whether it is a step already computed, fused with the gradient; `setup` tells `link(model,
    opt_state)` which state a model is stepped with."""
    _STEP_FUSION[:] = [commit, link]


def _commit(slot: Slot, value: Any) -> None:
    """`update_`'s write: through the state thread, with an error that says what to use instead
    when a plain jax transformation traces it (the caller's model must not keep a tracer)."""
    if isinstance(value, jax.core.Tracer) and current_region() is None:
        raise RuntimeError(
            "update_ rebinds the model's arrays in place, which cannot happen under a plain jax "
            "transformation (jax.jit, jax.grad, ...). Use the pure form, "
            "opt_state, model = update(opt_state, model, grads), which returns new ones, or "
            "compile the step with fluxjax.jit."
        )
    commit(slot, value)


def _set(slot: Slot, value: Any) -> None:
    """`update`'s write: straight into its own copies, which no one else holds."""
    slot.set(value)


_NO_GRADS: Any = object()  # `update_(x, dx)`: Flux.Optimise's old two-argument form


def update_(opt_state: Any, model: Any, grads: Any = _NO_GRADS) -> tuple[Any, Any]:
    """Apply one optimiser step in place (Optimisers.jl's `update!`): rebinds the model's arrays and
    the states, and returns `(opt_state, model)`. `None` gradients skip their arrays; frozen leaves
    are skipped.

    A model that is a bare array, or a tuple holding arrays directly, cannot be changed in place (JAX
    arrays and tuples are immutable): use the returned model, `opt_state, x = update_(opt_state, x, g)`,
    as with Optimisers.jl's `update!`, which also returns the new model. Layers, lists and dicts
    inside such a tuple are still updated in place.

    Also the implicit Flux 0.13 form `update_(rule, params(m), grads)` with `Grads` from
    `gradient(() -> loss, ps)`.

    >>> m = Dense(jnp.ones((1, 2)))
    >>> s = setup(Descent(0.1), m)
    >>> g = gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0]
    >>> _ = update_(s, m, g)
    >>> m.weight                                     # 1 - 0.1 * [1, 2]
    Array([[0.9, 0.8]], dtype=float32)
    """
    if grads is _NO_GRADS:
        raise TypeError(
            "update_ takes (opt_state, model, grads), the state from setup(rule, model) first. The two-argument "
            "update!(x, x̄) of Flux.Optimise (x .-= x̄, Flux 0.14 and before) is not a fluxjax form, as JAX arrays "
            "cannot change in place: write x = x - x̄, or step with a rule: update_(setup(Descent(eta), x), x, x̄) "
            "returns (state, new x)"
        )
    if _STEP_FUSION and _STEP_FUSION[0](opt_state, model, grads):
        return opt_state, model  # the step computed with the gradient (fluxjax/optimise/eagerstep.py)
    if isinstance(model, Params):
        _check_rule(opt_state, "update_")
        if not isinstance(grads, Grads):
            raise TypeError(f"update_(rule, ps, gs): gs must be the Grads from gradient(f, ps), got {type(grads).__name__}")
        implicit_update_(_implicit_holder(opt_state, model), model, grads)
        return opt_state, model
    _check_explicit(opt_state, model, grads, "update_")
    return _step(opt_state, model, grads, _commit)


def _check_state(opt_state: Any, call: str) -> None:
    """A TypeError naming `call` when a rule was passed where `setup`'s state belongs."""
    if isinstance(as_transform(opt_state), optax.GradientTransformation) and not isinstance(opt_state, Leaf):
        raise TypeError(f"{call}: got a rule where the state belongs. Call opt_state = setup(rule, model) once and pass opt_state.")


def _check_explicit(opt_state: Any, model: Any, grads: Any, fn: str) -> None:
    _check_state(opt_state, f"{fn}(opt_state, model, grads)")
    if isinstance(grads, tuple) and len(grads) == 1 and not _is_namedtuple(grads) and not isinstance(model, tuple):
        raise TypeError(
            f"{fn}: grads is a 1-tuple, as gradient() returns; you probably want grads[0]"
        )


def _step(opt_state: Any, model: Any, grads: Any, write) -> tuple[Any, Any]:
    # every rule runs before anything is rebound, so a rule that raises leaves the model as it was;
    # leaves stepped together keep sharing their step counters (see fluxjax/_sharing.py)
    if isinstance(opt_state, TreeState):
        return _tree_step(opt_state, model, grads, write)
    found = _collect(opt_state, model, grads)
    old = [f[0].state for f in found]
    states, xs = _rules_step([f[0].rule for f in found], old, [f[1] for f in found], [f[2] for f in found])
    same = current_region() is None and same_arrays_tree(old, states)  # one check for every leaf
    roots: dict[tuple, Any] = {}
    for (leaf, _, _, slots), st, x in zip(found, states, xs):
        _apply(leaf, st, x, slots, roots, write, same)
    return opt_state, (_rebuild(model, roots) if roots else model)


def _tree_step(ts: TreeState, model: Any, grads: Any, write) -> tuple[Any, Any]:
    """`_step` for a whole-tree optax transformation: one optax update of the view (`wholetree.py`)."""
    res = tree_update(ts, _collect(ts.layout.mirror, model, grads, keep_none=True), step=cached_step_view)
    if res is None:
        return ts, model
    (leaves, statedef), news = res
    write(Slot(ts, "leaves", True), leaves)
    if statedef != ts.statedef:  # optax changed its state's containers (a static field)
        write(Slot(ts, "statedef", True), statedef)
    roots: dict[tuple, Any] = {}
    for new_x, slots in news:
        for s in slots:
            if isinstance(s, _Root):
                roots[s.path] = new_x
            else:
                write(s, new_x)
    return ts, (_rebuild(model, roots) if roots else model)


def _copy(v, memo):
    """A copy of `v` for the pure `update`: layers, `Tangent`s, lists and dicts new, tuples new where
    they hold those; arrays, static values and other tuples shared; ties kept through `memo`. Not the
    walk's `rebuild`: this runs at every eager step of an Optimisers.jl-style loop, and sharing the
    immutable tuples of the optimiser states (without the walk's signature) keeps it several times
    cheaper."""
    if id(v) in memo:
        return memo[id(v)]
    if is_layer(v):
        new = object.__new__(type(v))
        memo[id(v)] = new
        for k, e in v.__dict__.items():
            new.__dict__[k] = _copy(e, memo)
        return new
    if isinstance(v, Tangent):
        fields: dict[str, Any] = {}
        memo[id(v)] = t = Tangent(v.primal_type, fields)
        for k, e in v.fields.items():
            fields[k] = _copy(e, memo)
        return t
    if isinstance(v, list):
        return [_copy(e, memo) for e in v]
    if isinstance(v, dict):
        return {k: _copy(e, memo) for k, e in v.items()}
    if isinstance(v, tuple) and any(is_layer(e) or isinstance(e, (Tangent, list, dict, tuple)) for e in v):
        items = [_copy(e, memo) for e in v]
        return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
    return v


def update(opt_state: Any, model: Any, grads: Any) -> tuple[Any, Any]:
    """The pure form of `update_`: returns `(new_opt_state, new_model)`; the inputs are unchanged.
    Works for any model `setup` accepts, a bare array included: `s, x = update(s, x, g)`, and under
    any jax transformation: `jax.jit(lambda s, m, g: update(s, m, g))`.

    >>> m = Dense(jnp.ones((1, 2)))
    >>> s = setup(Descent(0.1), m)
    >>> g = gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0]
    >>> s2, m2 = update(s, m, g)
    >>> m2.weight, m.weight                          # m itself is unchanged
    (Array([[0.9, 0.8]], dtype=float32), Array([[1., 1.]], dtype=float32))
    """
    if isinstance(model, Params):
        return update_(opt_state, model, grads)
    _check_explicit(opt_state, model, grads, "update")
    memo: dict[int, Any] = {}
    new_state, new_model = _copy(opt_state, memo), _copy(model, memo)
    return _step(new_state, new_model, grads, _set)


def _leaves(tree, fn: str = "") -> list[Leaf]:
    """Every `Leaf` under a state tree (or subtree), each once (tied arrays share one). With `fn`, an
    array outside any `Leaf` (that is, a model passed where the state belongs) raises TypeError,
    as Optimisers.jl's ArgumentError."""
    found = jax.tree_util.tree_leaves(tree, is_leaf=lambda z: isinstance(z, Leaf))
    if fn and any(is_array(v) for v in found):
        raise TypeError(
            f"{fn} must be called on the optimiser state from opt_state = setup(rule, model) "
            f"(or a part of it, e.g. opt_state.layers[0]), not on the model"
        )
    return list({id(v): v for v in found if isinstance(v, Leaf)}.values())


def adjust_(opt_state: Any, eta: float | None = None, **kw) -> Any:
    """Change hyperparameters in place, keeping the moments (Optimisers.jl's `adjust!`):
    `adjust_(opt_state, 0.001)` or `adjust_(opt_state, beta=(0.8, 0.99))`; acts on a subtree too.

    Optimisers.jl's example:

    ```python
    >>> m = {'vec': jnp.array([0.5, 0.5]), 'fun': jnp.sin}
    >>> st = setup(Nesterov(), m)                 # the stored momentum starts at zero
    >>> st, m = update(st, m, {'vec': jnp.array([16.0, 88.0]), 'fun': None})   # a fake gradient
    >>> st, st['vec'].state.velocity.tolist()
    ({'vec': Leaf(Nesterov(eta=0.001, rho=0.9)), 'fun': None}, [-0.016, -0.088])
    >>> _ = adjust_(st, 0.123)                    # a new learning rate; the momentum is untouched
    >>> st, st['vec'].state.velocity.tolist()
    ({'vec': Leaf(Nesterov(eta=0.123, rho=0.9)), 'fun': None}, [-0.016, -0.088])

    ```
    """
    if isinstance(opt_state, TreeState):
        adjust_tree(opt_state, eta, kw)
        return opt_state
    if is_layer(opt_state) and not isinstance(opt_state, Leaf) or is_array(opt_state):
        raise TypeError("adjust_ acts on the optimiser state from setup(), not on the model")
    check_no_parts(opt_state, "adjust_")
    leaves, new = _leaves(opt_state, "adjust_"), []
    for leaf in leaves:  # every new rule is made, its hyperparameters checked, before any leaf takes one
        if not hasattr(leaf.rule, "adjust"):
            raise TypeError(
                f"adjust_: {type(leaf.rule).__name__} is a plain optax transformation; it has no hyperparameters to adjust"
            )
        new.append(leaf.rule.adjust(*(() if eta is None else (eta,)), **kw))
    with sharing():
        for leaf, rule in zip(leaves, new):
            leaf.rule = rule  # the leaf's state takes the new rule's hyperparameters with it (`Leaf.__setattr__`)
    return opt_state


def adjust(tree: Any, eta: float | None = None, **kw) -> Any:
    """The copying form of `adjust_` (Optimisers.jl's `adjust`): a new state tree with changed
    hyperparameters and the same moments, the original left as it was; ties stay tied.
    Given a rule, returns the adjusted rule: `adjust(Adam(), 0.01) == Adam(0.01)`.

    ```python
    >>> st = setup(Momentum(), {'x': jnp.ones(2)})
    >>> adjust(st, 0.5), st                      # a new tree; st keeps eta = 0.01
    ({'x': Leaf(Momentum(eta=0.5, rho=0.9))}, {'x': Leaf(Momentum(eta=0.01, rho=0.9))})
    >>> adjust(Adam(), 0.01)
    Adam(eta=0.01, beta=(0.9, 0.999), epsilon=1e-08)

    ```
    """
    if isinstance(tree, optax.GradientTransformation) and not isinstance(tree, Leaf):
        if not hasattr(tree, "adjust"):
            raise TypeError(f"adjust: {type(tree).__name__} is a plain optax transformation; it has no hyperparameters to adjust")
        return tree.adjust(*(() if eta is None else (eta,)), **kw)
    if isinstance(tree, TreeState):
        new = _copy(tree, {})
        adjust_tree(new, eta, kw, "adjust")
        return new
    if is_layer(tree) and not isinstance(tree, Leaf) or is_array(tree):
        raise TypeError("adjust acts on the optimiser state from setup() (or on a rule), not on the model")
    _leaves(tree, "adjust")
    return adjust_(_copy(tree, {}), eta, **kw)


def freeze_(opt_state: Any) -> Any:
    """Mark every leaf under `opt_state` frozen: `update_` skips them (Optimisers.jl's `freeze!`).
    A whole-tree optax transformation's `TreeState` is frozen as a whole.

    Optimisers.jl's example (a number, such as `2.0`, is not trainable: its state is `None`):

    ```python
    >>> m = {'x': (jnp.array([1.0]), 2.0), 'y': jnp.array([3.0])}
    >>> s = setup(Momentum(), m)
    >>> _ = freeze_(s['x'])
    >>> s, m = update_(s, m, {'x': (jnp.array([np.pi]), 10 * np.pi), 'y': jnp.array([100 * np.pi])})
    >>> m                                        # x is left as it was
    {'x': (Array([1.], dtype=float32), 2.0), 'y': Array([-0.14159], dtype=float32)}
    >>> s
    {'x': (Leaf(Momentum(eta=0.01, rho=0.9), frozen), None), 'y': Leaf(Momentum(eta=0.01, rho=0.9))}

    ```
    """
    if isinstance(opt_state, TreeState):
        opt_state.frozen = True
        return opt_state
    check_no_parts(opt_state, "freeze_")
    for leaf in _leaves(opt_state, "freeze_"):
        leaf.frozen = True
    return opt_state


def thaw_(opt_state: Any) -> Any:
    """Undo `freeze_` (Optimisers.jl's `thaw!`): every leaf under `opt_state` is updated again.

    ```python
    >>> s = freeze_(setup(Momentum(), {'x': jnp.array([1.0]), 'y': jnp.array([3.0])}))
    >>> s
    {'x': Leaf(Momentum(eta=0.01, rho=0.9), frozen), 'y': Leaf(Momentum(eta=0.01, rho=0.9), frozen)}
    >>> thaw_(s)
    {'x': Leaf(Momentum(eta=0.01, rho=0.9)), 'y': Leaf(Momentum(eta=0.01, rho=0.9))}

    ```
    """
    if isinstance(opt_state, TreeState):
        opt_state.frozen = False
        return opt_state
    check_no_parts(opt_state, "thaw_")
    for leaf in _leaves(opt_state, "thaw_"):
        leaf.frozen = False
    return opt_state
