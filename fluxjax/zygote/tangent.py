"""Structural gradients: `Tangent`, the gradient of a layer (a pytree, one attribute per field), and
`_rebuild`, which puts per-leaf gradients back into the shape of the arguments (`Tangent` for layers,
`None` where Zygote gives `nothing`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..core.layer import bump, is_array
from ..core.walk import SAFE_NODES, rebuild


class Tangent:
    """The gradient of a layer: one attribute per field of the layer, `None` where Zygote gives
    `nothing`. `g.layers[0].weight` reads as in Zygote. It is a pytree (`jax.tree.map` works)."""

    __slots__ = ("primal_type", "fields", "__weakref__")  # (weakly held by the fused eager step's links)

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


_new, _set_type, _set_fields = object.__new__, Tangent.primal_type.__set__, Tangent.fields.__set__


def make_tangent(primal_type: type, fields: dict) -> Tangent:
    """`Tangent(primal_type, fields)` without its `__init__` call, for code that makes one per layer at
    every step (unflattening a gradient, the fused eager step's result)."""
    t = _new(Tangent)
    _set_type(t, primal_type)
    _set_fields(t, fields)
    return t


def _unflatten(aux: tuple, children: Any) -> Tangent:
    return make_tangent(aux[0], dict(zip(aux[1], children)))


jax.tree_util.register_pytree_with_keys(
    Tangent,
    lambda t: ([(jax.tree_util.GetAttrKey(k), v) for k, v in t.fields.items()], (t.primal_type, tuple(t.fields))),
    _unflatten,
    lambda t: (t.fields.values(), (t.primal_type, tuple(t.fields))),
)
SAFE_NODES.add(Tangent)  # its fields change only through __setattr__, which bumps the structure version


def _rebuild(box: list, grads_by_leaf: list) -> tuple:
    """Mirror `walk(box)`: put each leaf's gradient where the leaf was, `Tangent` for layers, `None`
    for what the walk keeps static and for a layer or container that no gradient reached (Zygote's
    `nothing`). The walk's own `rebuild`, with Tangents for layers."""
    return tuple(rebuild(box, grads_by_leaf, layer=_tangent_of, static=_nothing, prune=True))


def _tangent_of(obj: Any) -> tuple[Tangent, dict]:
    fields: dict[str, Any] = {}
    return Tangent(type(obj), fields), fields


def _nothing(_: Any) -> None:
    return None
