"""Plain objects (no `@layer`) among a model's values: which of them hold layers or float arrays.

Flux walks any struct; fluxjax walks layers, so the walk keeps a plain object static. `fluxjax.jit`
walks a plain object that a function reads and that holds layers (a trainer's `.model`); `gradient`,
`params`, `setup` and `trainables` refuse one that holds parameters, rather than leave its arrays
silently without a gradient or an update.
"""

from __future__ import annotations

import types
from typing import Any

import jax
import numpy as np

from .layer import LAYER_TYPES, is_float_array

PLAIN_DEPTH = 3  # plain objects inside plain objects searched for layers (a trainer's config's model)


def _fields(v) -> dict | None:
    """The fields of a plain object (an instance `__dict__`; fluxjax's own classes and classes keyed by
    `__fluxjax_key__` excepted), else None."""
    d = getattr(v, "__dict__", None)
    t = type(v)
    if (type(d) is not dict or isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType))
            or hasattr(t, "__fluxjax_key__") or t.__module__.partition(".")[0] == "fluxjax"):
        return None
    return d


def _plain_holding_layer(v, depth: int = PLAIN_DEPTH) -> bool:
    """A plain object with a layer among its fields (or in a plain object among them, `depth` levels
    down): a `types.SimpleNamespace`, a trainer."""
    d = _fields(v)
    return d is not None and any(_holds_layer(e, depth - 1) for e in d.values())


def _user_fields(v) -> dict | None:
    """The fields of a user's plain object (an instance `__dict__`, no `@layer`; the classes of fluxjax,
    JAX, optax and NumPy, and classes keyed by `__fluxjax_key__`, excepted), else None."""
    d = getattr(v, "__dict__", None)
    t = type(v)
    if type(d) is not dict or isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType)):
        return None
    if hasattr(t, "__fluxjax_key__") or t.__module__.partition(".")[0] in ("fluxjax", "jax", "optax", "numpy"):
        return None
    return d


def plain_with_parameters(v) -> bool:
    """A plain object (`_user_fields`) with a float array or a layer among its fields (or in a
    list/tuple/dict field). Flux walks any struct; fluxjax walks layers only, so such an object is
    refused where it would silently get no gradient."""
    d = _user_fields(v)
    return d is not None and any(_holds_param(e, 2) for e in d.values())


def plain_with_numbers(v) -> list[str]:
    """The fields of a plain object (`_user_fields`) that hold a Python float or complex number (not a
    bool or int: sizes and counts), which Zygote would differentiate as a struct's fields."""
    d = _user_fields(v)
    return [] if d is None else [k for k, e in d.items() if isinstance(e, (float, complex, np.floating, np.complexfloating))]


def find_plain(v, pytrees: bool = False) -> Any:
    """The first `plain_with_parameters` object in `v` or in its lists, tuples and dicts (not inside
    layers), or None. With `pytrees`, also a pytree node of another library (a `flax.nnx.Module`) with
    float arrays among its leaves."""
    t = type(v)
    if t in (list, tuple, dict) or isinstance(v, tuple):
        for e in (v.values() if t is dict else v):
            found = find_plain(e, pytrees)
            if found is not None:
                return found
        return None
    if t in LAYER_TYPES or v is None or isinstance(v, (jax.Array, np.ndarray)):
        return None
    if plain_with_parameters(v):
        return v
    if pytrees and t.__module__.partition(".")[0] != "fluxjax":
        leaves = jax.tree_util.tree_leaves(v)
        if not (len(leaves) == 1 and leaves[0] is v) and any(is_float_array(e) for e in leaves):
            return v
    return None


def _holds_param(v, depth) -> bool:
    t = type(v)
    if t in LAYER_TYPES or is_float_array(v):
        return True
    if depth and t in (list, tuple, dict):
        return any(_holds_param(e, depth - 1) for e in (v.values() if t is dict else v))
    return False


def _holds_layer(v, depth: int = PLAIN_DEPTH) -> bool:
    """A layer, or a list/tuple/dict, one of fluxjax's pytree nodes (an optimiser state tree's
    `Tangent`) or (up to `depth` levels) a plain object holding one."""
    t = type(v)
    if t in LAYER_TYPES:
        return True
    if t in (list, tuple, dict) or isinstance(v, tuple):
        return any(_holds_layer(e, depth) for e in (v.values() if t is dict else v))
    if t.__module__.partition(".")[0] == "fluxjax" and not isinstance(v, type):
        children, _ = jax.tree_util.tree_flatten(v, is_leaf=lambda z: z is not v)
        return not (len(children) == 1 and children[0] is v) and any(_holds_layer(e, depth) for e in children)
    return depth > 0 and _plain_holding_layer(v, depth)
