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
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ..compiled.pure import NOT_RUN, cached_pure
from ..core.layer import is_array, is_float_array, is_layer, layer, trainable
from ..core.region import commit, current_region
from ..core.sharing import sharing
from ..core.walk import Slot, find_plain
from ..errors import DimensionMismatch, StructureMismatch
from ..zygote import Grads, Params, Tangent
from ..zygote.implicit import raise_plain
from .wholetree import (
    Part,
    TreeState,
    adjust_tree,
    as_transform,
    check_no_parts,
    is_whole_tree,
    new_tree_state,
    step_view,
    tree_update,
)


@layer(trainable=())
class Leaf:
    """The optimiser state of one array: its `rule` (an optax transformation), `state`, `frozen`."""

    # Leaves share arrays of equal value in their states for speed (fluxjax/_sharing.py); loading
    # treats those as separate arrays, not as tied ones.
    __fluxjax_untied__ = ("state",)

    def __init__(self, rule: optax.GradientTransformation, state: Any, frozen: bool = False):
        self.rule = rule
        self.state = state
        self.frozen = frozen

    def __repr__(self):
        return f"Leaf({self.rule!r}{', frozen' if self.frozen else ''})"


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
    return tree


def _refuse_plain(v) -> None:
    """`setup` of a plain object (no `@layer`) holding arrays raises: it would be silently frozen."""
    plain = find_plain(v, pytrees=True)
    if plain is not None:
        raise_plain(plain, "setup")


def _is_namedtuple(v) -> bool:
    return isinstance(v, tuple) and hasattr(v, "_fields")


def _where(path: str) -> str:
    return f"at {path}" if path else "at the top"


def _kind(v) -> str:
    if is_array(v):
        return f"an array of shape {tuple(v.shape)}"
    if isinstance(v, Tangent):
        return f"a gradient of a {v.primal_type.__name__}"
    return f"a {type(v).__name__}"


def _field(g, name: str, layer_obj, path: str):
    """The gradient of field `name` of `layer_obj` from `g`: a structural gradient (`Tangent`), a dict
    or a namedtuple (Optimisers.jl's `(weight=..., bias=nothing)`), `None`, or the layer itself."""
    if g is None:
        return None
    if isinstance(g, Tangent):
        return g.fields.get(name)
    if isinstance(g, dict):
        return g.get(name)
    if _is_namedtuple(g):
        return getattr(g, name, None)
    if is_layer(g):
        return g.__dict__.get(name)
    raise StructureMismatch(
        f"update_: the gradient {_where(path)} is {_kind(g)}, but the model has a {type(layer_obj).__name__} there: "
        "give its gradient as the structural gradient from gradient(), a dict or a namedtuple of its fields"
    )


def _check_layer_grad(g, m, path: str) -> None:
    """A gradient for layer `m` that names a field `m` does not have (or is a gradient of another
    type of layer) does not fit the model."""
    if g is None:
        return
    if isinstance(g, Tangent):
        if not isinstance(m, g.primal_type):
            raise StructureMismatch(
                f"update_: the gradient {_where(path)} is {_kind(g)}, but the model has a {type(m).__name__} there"
            )
        names = [k for k, v in g.fields.items() if v is not None]
    elif isinstance(g, dict):
        names = list(g)
    elif _is_namedtuple(g):
        names = list(g._fields)
    else:
        names = []
    extra = [k for k in names if k not in m.__dict__]
    if extra:
        raise StructureMismatch(
            f"update_: the gradient {_where(path)} has field {extra[0]!r}, which the model's {type(m).__name__} "
            f"there does not have (its fields: {', '.join(m.__dict__)})"
        )


class _Root:
    """A position in a model that cannot be rebound in place: the model itself (a bare array) or an
    entry of a tuple that is the model (`((w, b),)`). `update_` builds the new model around it."""

    __slots__ = ("path",)

    def __init__(self, path: tuple = ()):
        self.path = path

    def ident(self):
        return ("root", self.path)


def _collect(opt_state, model, grads, keep_none=False):
    """[(leaf, x, summed grad, slots)] for every Leaf with a gradient, each Leaf once. A slot is a
    `Slot` (rebound through the state thread) or a `_Root` (a position in an immutable model).
    With `keep_none`, every leaf (or `Part`, one per view position) comes, its gradient `None` when
    it has none.

    A Leaf reached along several paths (a tied array, or a tied layer reached through two fields)
    gets the sum of the gradients of every path, once each (Optimisers.jl), since `gradient` gives
    each path its own (Zygote); every place that holds the array is rebound, also a place whose
    gradient is `None`, so a tie never leaves a stale copy behind. State, model and gradient that do
    not fit raise `StructureMismatch` naming the first path where they differ; nothing is changed
    before that."""
    if is_layer(opt_state) and not isinstance(opt_state, (Leaf, Part)) or is_array(opt_state):
        raise StructureMismatch(
            f"update_: opt_state is {_kind(opt_state)}, not the optimiser state from setup(rule, model); "
            "the arguments are update_(opt_state, model, grads)"
        )
    acc: dict[Any, list] = {}

    def go(st, m, g, slot, path):
        if st is None:
            return
        if isinstance(st, (Leaf, Part)):
            if not is_array(m):
                raise StructureMismatch(
                    f"update_: the optimiser state has a leaf {_where(path)}, but the model has {_kind(m)} there; "
                    "was opt_state set up for another model? Call setup(rule, model) for this one"
                )
            if g is not None:
                if not (is_array(g) or isinstance(g, (int, float, complex))) or isinstance(g, bool):
                    raise StructureMismatch(
                        f"update_: the gradient {_where(path)} is {_kind(g)}, but the model has {_kind(m)} there"
                    )
                if jnp.shape(g) != m.shape:
                    raise DimensionMismatch(
                        f"update_: the gradient {_where(path)} has shape {tuple(jnp.shape(g))}, the parameter "
                        f"there has shape {tuple(m.shape)}"
                    )
            if isinstance(st, Leaf) and st.frozen:
                return
            key = ("part", st.index) if isinstance(st, Part) else id(st)
            e = acc.get(key)
            if e is None:
                e = acc[key] = [st, m, None, [], set()]
            ident = slot.ident()
            if ident not in e[4]:  # the same place reached again (a tied layer): rebound once
                e[4].add(ident)
                e[3].append(slot)
            if g is not None:
                e[2] = g if e[2] is None else e[2] + g
            return
        if isinstance(st, Tangent):
            if not is_layer(m) or not isinstance(m, st.primal_type):
                raise StructureMismatch(
                    f"update_: the optimiser state expects a {st.primal_type.__name__} {_where(path)}, the model has "
                    f"{_kind(m)} there; was opt_state set up for another model? Call setup(rule, model) for this one"
                )
            _check_layer_grad(g, m, path)
            for k, sub in st.fields.items():
                if sub is None:
                    continue
                if k not in m.__dict__:
                    raise StructureMismatch(
                        f"update_: the optimiser state has field {k!r} {_where(path)}, which the model's "
                        f"{type(m).__name__} does not have"
                    )
                go(sub, m.__dict__[k], _field(g, k, m, path), Slot(m, k, True), f"{path}.{k}")
            return
        if isinstance(st, (list, tuple)):
            if not isinstance(m, (list, tuple)) or len(m) != len(st):
                raise StructureMismatch(
                    f"update_: the optimiser state has a {type(st).__name__} of length {len(st)} {_where(path)}, "
                    f"the model has {_kind(m)}" + (f" of length {len(m)}" if isinstance(m, (list, tuple)) else "")
                    + " there"
                )
            if g is None:
                gs = [None] * len(st)
            elif isinstance(g, (list, tuple)) and len(g) == len(st):
                gs = g
            else:
                raise StructureMismatch(
                    f"update_: the gradient {_where(path)} is {_kind(g)}"
                    + (f" of length {len(g)}" if isinstance(g, (list, tuple)) else "")
                    + f", the model has a {type(m).__name__} of length {len(m)} there"
                )
            for i, (s, mm, gg) in enumerate(zip(st, m, gs)):
                go(s, mm, gg, _sub(slot, m, i), f"{path}[{i}]")
            return
        if isinstance(st, dict):
            if not isinstance(m, dict) or set(m) != set(st):
                raise StructureMismatch(
                    f"update_: the optimiser state has a dict with keys {sorted(map(str, st))} {_where(path)}, "
                    f"the model has {_kind(m)}" + (f" with keys {sorted(map(str, m))}" if isinstance(m, dict) else "")
                    + " there"
                )
            if g is not None and not isinstance(g, dict):
                raise StructureMismatch(f"update_: the gradient {_where(path)} is {_kind(g)}, the model has a dict there")
            if g is not None and set(g) - set(m):
                raise StructureMismatch(
                    f"update_: the gradient {_where(path)} has key {sorted(map(str, set(g) - set(m)))[0]!r}, "
                    "which the model's dict there does not have"
                )
            for k, s in st.items():
                go(s, m[k], None if g is None else g.get(k), _sub(slot, m, k), f"{path}[{k!r}]")
            return
        raise StructureMismatch(
            f"update_: {_where(path)} the optimiser state holds {_kind(st)}, which setup() never makes; "
            "the arguments are update_(opt_state, model, grads)"
        )

    go(opt_state, model, grads, _Root(), "")
    return [e[:4] for e in acc.values() if keep_none or e[2] is not None]


def _sub(slot, container, k):
    if isinstance(container, (list, dict)):
        return Slot(container, k, False)
    if isinstance(slot, _Root):
        return _Root(slot.path + (k,))
    return Slot(slot.owner, slot.key, slot.attr, slot.path + (k,))


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
            new_s.append(new)
            new_x.append(_params_after(rule, x, upd, new))
        return new_s, new_x

    out = cached_pure(("rules", tuple(map(_rule_key, rules))), rules, run, (list(states), list(xs), list(gs)))
    if out is NOT_RUN:
        with sharing():
            out = run((states, xs, gs))
    return out


def _rule_key(rule: Any) -> Any:
    """A rule in a program's cache key: by value when it is hashable (Optimisers.jl's rules compare
    their type and hyperparameters, so `Adam(0.01)` set up twice shares one program), else by identity."""
    try:
        hash(rule)
    except TypeError:
        return ("id", id(rule))
    return (type(rule), rule)


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


def _apply(leaf: Leaf, new_state, new_x, slots, roots: dict, write):
    write(Slot(leaf, "state", True), new_state)
    for s in slots:
        if isinstance(s, _Root):
            roots[s.path] = new_x
        else:
            write(s, new_x)


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


def _rebuild(v, roots: dict):
    """`v` with the arrays at the `_Root` paths in `roots` replaced; tuples on the way are rebuilt."""
    if () in roots:
        return roots[()]
    sub: dict[int, dict] = {}
    for path, new in roots.items():
        sub.setdefault(path[0], {})[path[1:]] = new
    items = list(v)
    for i, r in sub.items():
        items[i] = _rebuild(items[i], r)
    return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)


def update_(opt_state: Any, model: Any, grads: Any) -> tuple[Any, Any]:
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
    states, xs = _rules_step([f[0].rule for f in found], [f[0].state for f in found], [f[1] for f in found], [f[2] for f in found])
    steps = [(leaf, st, x, slots) for (leaf, _, _, slots), st, x in zip(found, states, xs)]
    roots: dict[tuple, Any] = {}
    for step in steps:
        _apply(*step, roots, write)
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
    `adjust_(opt_state, 0.001)` or `adjust_(opt_state, beta=(0.8, 0.99))`; acts on a subtree too."""
    if isinstance(opt_state, TreeState):
        adjust_tree(opt_state, eta, kw)
        return opt_state
    if is_layer(opt_state) and not isinstance(opt_state, Leaf) or is_array(opt_state):
        raise TypeError("adjust_ acts on the optimiser state from setup(), not on the model")
    check_no_parts(opt_state, "adjust_")
    with sharing():
        for leaf in _leaves(opt_state, "adjust_"):
            rule = leaf.rule
            if not hasattr(rule, "adjust"):
                raise TypeError(
                    f"adjust_: {type(rule).__name__} is a plain optax transformation; it has no hyperparameters to adjust"
                )
            args = () if eta is None else (eta,)
            leaf.state = rule.adjust_state(leaf.state, *args, **kw)
            leaf.rule = rule.adjust(*args, **kw)
    return opt_state


def adjust(tree: Any, eta: float | None = None, **kw) -> Any:
    """The copying form of `adjust_` (Optimisers.jl's `adjust`): a new state tree with changed
    hyperparameters and the same moments, the original left as it was; ties stay tied.
    Given a rule, returns the adjusted rule: `adjust(Adam(), 0.01) == Adam(0.01)`."""
    if isinstance(tree, optax.GradientTransformation) and not isinstance(tree, Leaf):
        if not hasattr(tree, "adjust"):
            raise TypeError(f"adjust: {type(tree).__name__} is a plain optax transformation; it has no hyperparameters to adjust")
        return tree.adjust(*(() if eta is None else (eta,)), **kw)
    if isinstance(tree, TreeState):
        return adjust_(_copy(tree, {}), eta, **kw)
    if is_layer(tree) and not isinstance(tree, Leaf) or is_array(tree):
        raise TypeError("adjust acts on the optimiser state from setup() (or on a rule), not on the model")
    _leaves(tree, "adjust")
    return adjust_(_copy(tree, {}), eta, **kw)


def freeze_(opt_state: Any) -> Any:
    """Mark every leaf under `opt_state` frozen: `update_` skips them (Optimisers.jl's `freeze!`).
    A whole-tree optax transformation's `TreeState` is frozen as a whole."""
    if isinstance(opt_state, TreeState):
        opt_state.frozen = True
        return opt_state
    check_no_parts(opt_state, "freeze_")
    for leaf in _leaves(opt_state, "freeze_"):
        leaf.frozen = True
    return opt_state


def thaw_(opt_state: Any) -> Any:
    """Undo `freeze_`."""
    if isinstance(opt_state, TreeState):
        opt_state.frozen = False
        return opt_state
    check_no_parts(opt_state, "thaw_")
    for leaf in _leaves(opt_state, "thaw_"):
        leaf.frozen = False
    return opt_state


# ----------------------------------------------------------------------------------------------
# Implicit (Flux 0.13) style: the optimiser state is kept per Params


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


_MEMORY = "_fluxjax_implicit_states"  # a rule's memory of its states per parameter, in the rule's __dict__


def _entry_key(e) -> tuple:
    """Where a parameter lives (its first slot), which outlasts the array: an update makes a new array
    and rebinds it there. A parameter that no slot holds is known by the array itself."""
    if e.slots:
        return e.slots[0].ident()
    return ("array", id(e.array))


def _anchor(e) -> Any:
    """The object that `_entry_key` names by id, kept (weakly when it can be) so that a key whose object
    is gone, and whose id is reused, is not mistaken for it."""
    owner = e.slots[0].owner if e.slots else e.array
    try:
        return weakref.ref(owner)
    except TypeError:  # lists, dicts, jax arrays: held
        return lambda: owner


def _remembered(rule, ps: Params) -> list | None:
    """The states `rule` kept for the parameters of `ps` under earlier `Params`, as `ImplicitState`'s
    `previous`; `None` when the rule cannot hold a memory or remembers none of them."""
    memory = getattr(rule, "__dict__", {}).get(_MEMORY)
    if not memory:
        return None
    entries = ps._entries
    if is_whole_tree(rule):
        hit = memory.get(tuple(_entry_key(e) for e in entries))
        if hit is None or any(a() is not (e.slots[0].owner if e.slots else e.array) for a, e in zip(hit[0], entries)):
            return None
        holder = hit[1]
        return [(holder.states[0], holder.statedef)]
    out, found = [], False
    for e in entries:
        hit = memory.get(_entry_key(e))
        x = e.value()
        if hit is not None and hit[0]() is (e.slots[0].owner if e.slots else e.array) and hit[3] == (x.shape, x.dtype):
            out.append(hit[1].states[hit[2]])
            found = True
        else:
            out.append(None)
    return out if found else None


def _remember(rule, ps: Params, holder: ImplicitState) -> None:
    d = getattr(rule, "__dict__", None)
    if d is None:
        return
    memory = d.setdefault(_MEMORY, {})
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
    holders = ps.__dict__.setdefault("_opt_states", {})
    h = holders.get(id(rule))
    if h is None or h.rule is not rule or h.n != len(ps):
        h = holders[id(rule)] = ImplicitState(rule, ps, _remembered(rule, ps))
        _remember(rule, ps, h)
    return h


def implicit_update_(holder: ImplicitState, ps: Params, gs: Grads) -> None:
    rule = holder.rule
    if holder.statedef is not None:  # a whole-tree rule: the view is the tuple of the arrays
        xs = tuple(e.value() for e in ps._entries)
        state = holder.statedef.unflatten(holder.states[0])
        res = cached_step_view(rule, state, jax.tree_util.tree_structure(xs), list(xs), list(gs))
        if res is not None:
            leaves, statedef = jax.tree_util.tree_flatten(res[0])
            if statedef != holder.statedef:
                commit(Slot(holder, "statedef", True), statedef)
            commit(Slot(holder.states, 0, False), tuple(leaves))
            for e, new_x in zip(ps._entries, res[1]):
                e.set(new_x)
        return
    todo = [(i, e, g) for i, (e, g) in enumerate(zip(ps._entries, gs)) if g is not None]
    xs = [e.value() for _, e, _ in todo]
    states, new_xs = _rules_step([rule] * len(todo), [holder.states[i] for i, _, _ in todo], xs, [g for _, _, g in todo])
    for (i, e, _), new, new_x in zip(todo, states, new_xs):
        commit(Slot(holder.states, i, False), new)
        e.set(new_x)

