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


def fmap(f: Callable[..., Any], x: Any, *ys: Any, exclude: Callable[[Any], bool] | None = None) -> Any:
    """Structure-preserving map over the leaves of `x` (Functors' `fmap`); returns new layers.

    The leaves are what `jax.tree_util.tree_map` hands a function: the arrays, and the numbers in
    lists, tuples and dicts. A layer's fields that are not arrays or layers (an activation function,
    `eps`, `stride`) are its configuration and stay as they are (Functors hands them to `f` too,
    which is why Flux code guards with `x isa AbstractArray`). Shared (tied) arrays and layers are
    mapped once, so ties survive: `fmap(f32, m)`. `exclude(node)` says which nodes are the leaves
    handed to `f` instead (a whole layer, say).

    With more trees, `f` takes the matching leaf of each: `fmap(lambda x, dx: x - 0.1 * dx, m, grad)`
    (a structural gradient; where it has `None`, `f` gets `None`). They must have `x`'s structure.

    Without `exclude` and other trees this is the walk's `rebuild` (`fluxjax.core.walk`): what
    `fluxjax.jit` and `gradient` see of `x` is what is mapped, also arrays inside other pytrees (a
    structural gradient, an optax state). Otherwise `fmap` goes through layers, lists, tuples and dicts
    itself, by the walk's rules for ties, dicts (insertion order kept) and namedtuples.

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> m2 = fmap(lambda x: x.astype(jnp.float16), m)   # what f16(m) does
    >>> m2[0].weight.dtype, m[0].weight.dtype
    (dtype('float16'), dtype('float32'))
    >>> fmap(lambda x: x + 1, {'a': 1, 'b': (2.0, jnp.ones(2))})
    {'a': 2, 'b': (3.0, Array([2., 2.], dtype=float32))}
    >>> g = gradient(lambda m: jnp.sum(m(jnp.ones((2, 1)))), m)[0]
    >>> stepped = fmap(lambda x, dx: x if dx is None else x - 0.1 * dx, m, g)
    >>> bool(jnp.allclose(stepped[1].bias, m[1].bias - 0.1))
    True

    ```
    """
    if ys:
        return _fmap_trees(f, x, ys, exclude or _is_leaf)
    if exclude is None:
        done: dict[int, Any] = {}  # a tied array is mapped once

        def mapped(a):
            if not is_array(a):
                return f(a)  # a number in a container
            if id(a) not in done:
                done[id(a)] = f(a)
            return done[id(a)]

        return rebuild([x], [mapped(a) for a in walk([x]).leaves])[0]
    return _fmap_trees(f, x, (), exclude)


def _is_leaf(v: Any) -> bool:
    return is_array(v) or isinstance(v, _NUMBERS)


_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _part(tree: Any, key: Any, where: str) -> Any:
    """The child `key` of another tree of `fmap` (a structural gradient, a state): None where it has None."""
    if tree is None:
        return None
    try:
        if isinstance(tree, dict) or isinstance(key, int):
            return tree[key]
        return getattr(tree, key)
    except (KeyError, IndexError, AttributeError, TypeError):
        raise ValueError(f"fmap: the trees differ at {where or 'the top'}: the first has {key!r} there, another "
                         f"a {type(tree).__name__} without it; they must have the first one's structure") from None


def _fmap_trees(f: Callable[..., Any], x: Any, ys: tuple, leaf: Callable[[Any], bool], layers: bool = True) -> Any:
    """`fmap` by going through layers (their child fields), lists, tuples and dicts, with the trees `ys`
    alongside; `layers=False`: each layer becomes a dict of its child fields (`fmapstructure`)."""
    cache: dict[int, Any] = {}  # a tied array or layer is mapped once (Functors: keyed by the first tree)

    def go(v, ws, path):
        def sub(e, k, at):
            return go(e, [_part(w, k, path) for w in ws], path + at)

        if leaf(v):
            if isinstance(v, _NUMBERS):
                return f(v, *ws)
            if id(v) not in cache:
                cache[id(v)] = (v, f(v, *ws))
            return cache[id(v)][1]
        if is_layer(v):
            if id(v) in cache:
                return cache[id(v)][1]
            kids = children(v)
            if not layers:
                cache[id(v)] = (v, {k: sub(e, k, f".{k}") for k, e in kids.items()})
                return cache[id(v)][1]
            new, fields = copy_layer(v)
            cache[id(v)] = (v, new)
            for k, e in v.__dict__.items():
                fields[k] = sub(e, k, f".{k}") if k in kids else e
            return new
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*(sub(e, k, f".{k}") for k, e in zip(v._fields, v)))
        if isinstance(v, (list, tuple)):
            return type(v)(sub(e, i, f"[{i}]") for i, e in enumerate(v))
        if isinstance(v, dict):
            return {k: sub(e, k, f"[{k!r}]") for k, e in v.items()}
        return v

    return go(x, list(ys), "")


def fmapstructure(f: Callable[..., Any], x: Any, *ys: Any, exclude: Callable[[Any], bool] | None = None) -> Any:
    """`f` over the leaves of `x` (and of `ys`, as `fmap`), without rebuilding layers (Functors'
    `fmapstructure`): each layer becomes a dict of its child fields (arrays and layers); lists, tuples
    and dicts stay as they are. `fmapstructure(jnp.shape, m)` gives the shapes of a model's arrays.

    ```python
    >>> fmapstructure(jnp.shape, Chain(Dense(2, 3), Dense(3, 1, bias=False)))
    {'layers': ({'weight': (3, 2), 'bias': (3,)}, {'weight': (1, 3)})}

    ```
    """
    return _fmap_trees(f, x, ys, exclude or _is_leaf, layers=False)


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


__all__ = ["functor", "fmap", "fmapstructure", "modules", "all_layers", "children", "trainable", "layer", "is_layer", "is_array",
           "is_float_array", "state_fields"]
