"""Structural gradients: `Tangent`, the gradient of a layer (a pytree, one attribute per field), and
`_rebuild`, which puts per-leaf gradients back into the shape of the arguments (`Tangent` for layers,
`None` where Zygote gives `nothing`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.layer import LAYER_TYPES, bump, is_array
from ..core.walk import NUMBER_TYPES, OPAQUE_TYPES, SAFE_NODES, is_visited


class Tangent:
    """The gradient of a layer: one attribute per field of the layer, `None` where Zygote gives
    `nothing`. `g.layers[0].weight` reads as in Zygote. It is a pytree (`jax.tree.map` works)."""

    __slots__ = ("primal_type", "fields")

    def __init__(self, primal_type: type, fields: dict[str, Any]):
        object.__setattr__(self, "primal_type", primal_type)
        object.__setattr__(self, "fields", fields)

    def __getattr__(self, name):
        if name in Tangent.__slots__:  # not yet set (a half-built object): never recurse through self.fields
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"gradient of {self.primal_type.__name__} has no field {name!r}") from None

    def __getitem__(self, k):
        return self.fields[k]

    def __setattr__(self, name, value):
        self.fields[name] = value
        bump()

    def __eq__(self, other):
        return isinstance(other, Tangent) and self.primal_type is other.primal_type and all(
            _tree_eq(a, b) for a, b in zip(self.fields.values(), other.fields.values())
        )

    __hash__ = None

    def __reduce__(self):
        """pickle / copy.deepcopy / cloudpickle: rebuilt from the primal type and the fields."""
        return Tangent, (self.primal_type, self.fields)

    def __repr__(self):
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self.fields.items())
        return f"Tangent[{self.primal_type.__name__}]({inner})"


def _short(v):
    if is_array(v):
        return f"{v.dtype}{list(v.shape)}"
    return repr(v)


def _tree_eq(a, b):
    if a is None or b is None:
        return a is b
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(bool(jnp.array_equal(x, y)) for x, y in zip(la, lb))


jax.tree_util.register_pytree_with_keys(
    Tangent,
    lambda t: ([(jax.tree_util.GetAttrKey(k), v) for k, v in t.fields.items()], (t.primal_type, tuple(t.fields))),
    lambda aux, ch: Tangent(aux[0], dict(zip(aux[1], ch))),
    lambda t: (list(t.fields.values()), (t.primal_type, tuple(t.fields))),
)
SAFE_NODES.add(Tangent)  # its fields change only through __setattr__, which bumps the structure version


def _rebuild(box: list, grads_by_leaf: list) -> tuple:
    """Mirror `walk(box)`: put each leaf's gradient where the leaf was, `Tangent` for layers."""
    it = iter(grads_by_leaf)
    memo: dict[int, Tangent | None] = {}

    def build(v, numbers):
        t = type(v)
        if t in LAYER_TYPES:
            if id(v) in memo:
                return memo[id(v)]
            fields: dict[str, Any] = {}
            memo[id(v)] = tan = Tangent(t, fields)
            for name, e in v.__dict__.items():
                fields[name] = build(e, False) if is_visited(e) else None
            if all(g is None for g in fields.values()):  # no gradient reached it: Zygote's `nothing`
                memo[id(v)] = tan = None
            return tan
        if isinstance(v, (jax.Array, np.ndarray)) or (numbers and isinstance(v, NUMBER_TYPES)):
            return next(it)
        if v is None:
            return None
        if t is list:
            items = [build(e, numbers) for e in v]
            return None if all(g is None for g in items) else items
        if t is dict:
            res = {k: build(v[k], numbers) for k in sorted(v)}
            return None if all(g is None for g in res.values()) else {k: res[k] for k in v}
        if isinstance(v, tuple):
            items = [build(e, numbers) for e in v]
            if all(g is None for g in items):
                return None
            return t(*items) if hasattr(v, "_fields") else tuple(items)
        if isinstance(v, NUMBER_TYPES) or isinstance(v, OPAQUE_TYPES):
            return None
        sub, treedef = jax.tree_util.tree_flatten(v, is_leaf=lambda z: type(z) in LAYER_TYPES)
        if treedef.num_leaves == 1 and treedef.num_nodes == 1 and sub and sub[0] is v:
            return None
        return treedef.unflatten([build(e, numbers) for e in sub])

    return tuple(build(v, True) for v in box)
