"""Functors.jl's API over layers: `functor`, `fmap`, `modules`, and the layer system's public names.

The layer system itself (`@layer`, pytree registration, which fields are children) is in
`fluxjax.core.layer`; this module re-exports its public names for `fluxjax.functors.X`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core.layer import children, has_dynamic, is_array, is_float_array, is_layer, layer, state_fields, trainable, with_fields
from .core.region import original
from .core.walk import copy_layer, rebuild, walk


def functor(x: Any) -> Any:
    """Functors' `functor`, and its `@functor`.

    Given a class, marks it as a layer (`@functor MyLayer`, the older spelling of `@layer`) and returns it.
    Given a value, returns `(children, re)`: for a layer its `children` and `re(new_children)`, a copy with
    those fields replaced; for a tuple, list or dict the container itself and `re(y) = y`; for anything
    else (an array, a number) `((), re)` with `re(_)` giving it back.

    ```python
    >>> ch, re = functor(Dense(2, 3))
    >>> sorted(ch)
    ['bias', 'weight']
    >>> re({**ch, "bias": jnp.ones(3)}).bias
    Array([1., 1., 1.], dtype=float32)

    ```
    """
    if isinstance(x, type):
        return layer(x)
    if is_layer(x):
        def re(new: dict) -> Any:
            unknown = set(new) - set(vars(x))
            if unknown:
                raise ValueError(f"functor: {type(x).__name__} has no fields {sorted(unknown)}")
            return with_fields(x, new)

        return children(x), re
    if isinstance(x, (tuple, list, dict)):
        return x, lambda y: y
    return (), lambda _: x


def fmap(f: Callable[[Any], Any], x: Any, *, exclude: Callable[[Any], bool] | None = None) -> Any:
    """Structure-preserving map over the arrays of `x` (Functors' `fmap`); returns new layers.

    Shared (tied) arrays and layers are mapped once, so ties survive: `fmap(f32, m)`.
    `exclude(node)` marks extra leaves to hand to `f` (default: arrays).

    Without `exclude` this is the walk's `rebuild` (`fluxjax.core.walk`): what `fluxjax.jit` and `gradient`
    see of `x` is what is mapped, also arrays inside other pytrees (a structural gradient, an optax state).
    With `exclude`, a leaf may be any node (a layer, a tuple), which the walk, whose leaves are arrays,
    does not express: `fmap` then goes through layers, lists, tuples and dicts itself, by the walk's rules
    for ties (a layer or leaf reached twice is mapped once), dicts (insertion order kept) and namedtuples.

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> m2 = fmap(lambda x: x.astype(jnp.float16), m)   # what f16(m) does
    >>> m2[0].weight.dtype, m[0].weight.dtype
    (dtype('float16'), dtype('float32'))
    >>> fmap(jnp.sum, {'a': jnp.ones(3), 'b': (jnp.ones(2), 1)})
    {'a': Array(3., dtype=float32), 'b': (Array(2., dtype=float32), 1)}

    ```
    """
    if exclude is None:
        done: dict[int, Any] = {}  # a tied array is mapped once

        def mapped(a):
            if not is_array(a):
                return a  # a number the walk reads at the top
            if id(a) not in done:
                done[id(a)] = f(a)
            return done[id(a)]

        return rebuild([x], [mapped(a) for a in walk([x]).leaves])[0]
    cache: dict[int, Any] = {}

    def go(v):
        if exclude(v):
            if id(v) not in cache:
                cache[id(v)] = (v, f(v))
            return cache[id(v)][1]
        if is_layer(v):
            if id(v) in cache:
                return cache[id(v)][1]
            new, fields = copy_layer(v)
            cache[id(v)] = (v, new)
            for k, e in v.__dict__.items():
                fields[k] = go(e)
            return new
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*(go(e) for e in v))
        if isinstance(v, (list, tuple)):
            return type(v)(go(e) for e in v)
        if isinstance(v, dict):
            return {k: go(e) for k, e in v.items()}
        return v

    return go(x)


def all_layers(x: Any) -> list[Any]:
    """Depth-first list of every layer in `x`, each once: layers only, no containers (the walk that
    `trainmode_`/`testmode_` and the recurrent layers use)."""
    return [v for v in modules(x) if is_layer(v)]


def _leaflike(v) -> bool:
    """Flux's `isleaflike`: a tuple of only numbers / arrays is a leaf, not a module."""
    return isinstance(v, tuple) and all(is_array(e) or isinstance(e, (int, float, complex, np.number)) for e in v)


def modules(x: Any) -> list[Any]:
    """Depth-first list of every layer and every container of layers or arrays in `x`, each once
    (Flux's `modules`, Functors' `fcollect` minus the leaves): `Chain(Dense(2, 3), Dense(3, 1))` gives
    the Chain, its `layers` tuple, then the two Dense layers. Tuples of only arrays or numbers count
    as leaves, as in Flux. For layers only, filter: `[m for m in modules(model) if is_layer(m)]`.

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> [type(x).__name__ for x in modules(m)]
    ['Chain', 'tuple', 'Dense', 'Dense']

    ```
    """
    out, seen = [], set()

    def go(v):
        if is_layer(v):
            if id(original(v)) in seen:  # a tied layer once, also inside gradient (which copies it per place)
                return
            seen.add(id(original(v)))
            out.append(v)
            for e in v.__dict__.values():
                go(e)
        elif isinstance(v, (list, tuple, dict)):
            if _leaflike(v) or not has_dynamic(v):
                return
            if id(v) in seen:
                return
            seen.add(id(v))
            out.append(v)
            for e in v.values() if isinstance(v, dict) else v:
                go(e)

    go(x)
    return out


__all__ = ["functor", "fmap", "modules", "all_layers", "children", "trainable", "layer", "is_layer", "is_array",
           "is_float_array", "state_fields"]
