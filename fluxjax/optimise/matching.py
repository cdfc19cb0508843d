"""How `update_` matches an optimiser state tree, a model and a gradient: `_collect` finds every
`Leaf` with the arrays it stands for, their summed gradients and the places that hold them; state,
model and gradient that do not fit raise `StructureMismatch` naming the first path where they differ.
`_rebuild` makes a new model around positions that cannot be rebound in place (`_Root`)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ..core.layer import is_array, is_layer
from ..core.walk import Slot
from ..errors import DimensionMismatch, StructureMismatch
from ..zygote import Tangent
from ._rule_base import check_real
from .leaf import Leaf
from .wholetree import Part


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
                check_real("update_", f"the gradient {_where(path)}", m, g)
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
            for k, v in m.__dict__.items():
                if st.fields.get(k) is None:  # outside the state tree: an array here may be a parameter too
                    _scan(v, Slot(m, k, True), others, scanned)
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

    others: list[tuple[Slot, Any]] = []
    scanned: set[int] = set()
    go(opt_state, model, grads, _Root(), "")
    if others:  # Flux steps a parameter in place: a non-trainable field holding the same array sees it move
        by_array = {id(e[1]): e for e in acc.values()}
        for slot, v in others:
            e = by_array.get(id(v))
            if e is not None and slot.ident() not in e[4]:
                e[4].add(slot.ident())
                e[3].append(slot)
    return [e[:4] for e in acc.values() if keep_none or e[2] is not None]


def _scan(v: Any, slot: Slot, out: list, seen: set[int]) -> None:
    """Every array under `v` (a field outside the optimiser state tree) with its slot, into `out`."""
    if is_array(v):
        out.append((slot, v))
    elif is_layer(v):
        if id(v) not in seen:
            seen.add(id(v))
            for k, e in v.__dict__.items():
                _scan(e, Slot(v, k, True), out, seen)
    elif isinstance(v, (tuple, list, dict)):
        for k, e in (v.items() if isinstance(v, dict) else enumerate(v)):
            _scan(e, _sub(slot, v, k), out, seen)


def _sub(slot, container, k):
    if isinstance(container, (list, dict)):
        return Slot(container, k, False)
    if isinstance(slot, _Root):
        return _Root(slot.path + (k,))
    return Slot(slot.owner, slot.key, slot.attr, slot.path + (k,))


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
