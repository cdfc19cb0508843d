"""MLUtils' class rebalancing and grouping: `oversample`, `undersample` (by a label per observation) and
`groupobs` (by a function of each observation). 0-based; observations on the last axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..random import resolve_key
from .observations import getobs, numobs, obsview
from .splits import group_indices

__all__ = ["oversample", "undersample", "groupobs"]


def _classes(data: Any, classes: Any, what: str) -> Any:
    if classes is not None:
        return classes
    if isinstance(data, tuple) and data:
        return data[-1]  # MLUtils: the targets are the last part of the tuple
    raise TypeError(f"{what}(data, classes): give the labels, or a tuple data whose last part is the labels")


def _result(data: Any, classes: Any, inds: list[int]) -> Any:
    """MLUtils: `(obsview(data, inds), obsview(classes, inds))` when the labels are given apart, else the
    tuple `data` (labels last) with those observations."""
    at = np.asarray(inds, dtype=np.int64)
    if classes is None:
        return obsview(data, at)
    return obsview(data, at), obsview(classes, at)


def oversample(data: Any, classes: Any = None, *, fraction: float = 1, shuffle: bool = True, rng: Any = None) -> Any:
    """MLUtils' `oversample`: repeat observations of the smaller classes until each class has
    `round(fraction * largest class)` of them. All original observations come first, then the extra
    ones of each class (in order of first appearance; the first ones of the class, repeated as needed,
    with `shuffle=False`, a random draw otherwise); `shuffle=True` also permutes the result.
    `classes`: a label per observation, by default the last part of a tuple `data`. Returns the tuple
    `data` with those observations, or `(data_part, classes_part)` when `classes` is given apart.

    ```python
    >>> x, y = jnp.arange(5.0)[None], ["a", "c", "c", "a", "b"]
    >>> oversample((x, y), shuffle=False)[1]
    ['a', 'c', 'c', 'a', 'b', 'b']

    ```
    """
    labels = list(np.asarray(_classes(data, classes, "oversample")).reshape(-1).tolist())
    if len(labels) != numobs(data):
        raise ValueError(f"oversample: {len(labels)} labels for {numobs(data)} observations")
    groups = group_indices(labels)
    want = int(np.round(fraction * max(len(v) for v in groups.values())))
    key = resolve_key(rng) if shuffle else None
    inds = list(range(len(labels)))
    for members in groups.values():
        extra = want - len(members)
        while extra > len(members):
            inds.extend(members)
            extra -= len(members)
        if extra > 0:
            if shuffle:
                key, sub = jax.random.split(key)
                inds.extend(np.asarray(members)[np.asarray(jax.random.permutation(sub, len(members)))[:extra]].tolist())
            else:
                inds.extend(members[:extra])
    if shuffle:
        key, sub = jax.random.split(key)
        inds = np.asarray(inds)[np.asarray(jax.random.permutation(sub, len(inds)))].tolist()
    return _result(data, classes, inds)


def undersample(data: Any, classes: Any = None, *, shuffle: bool = True, rng: Any = None) -> Any:
    """MLUtils' `undersample`: keep as many observations of each class as the smallest class has. With
    `shuffle=False` the first ones of each class, in their original order; otherwise a random draw in a
    random order. `classes` and the result as in `oversample`.

    ```python
    >>> x, y = jnp.arange(5.0)[None], ["a", "c", "c", "a", "b"]
    >>> undersample((x, y), shuffle=False)[1]
    ['a', 'c', 'b']

    ```
    """
    labels = list(np.asarray(_classes(data, classes, "undersample")).reshape(-1).tolist())
    if len(labels) != numobs(data):
        raise ValueError(f"undersample: {len(labels)} labels for {numobs(data)} observations")
    groups = group_indices(labels)
    least = min(len(v) for v in groups.values())
    inds: list[int] = []
    key = resolve_key(rng) if shuffle else None
    for members in groups.values():
        if shuffle:
            key, sub = jax.random.split(key)
            inds.extend(np.asarray(members)[np.asarray(jax.random.permutation(sub, len(members)))[:least]].tolist())
        else:
            inds.extend(members[:least])
    if shuffle:
        key, sub = jax.random.split(key)
        inds = np.asarray(inds)[np.asarray(jax.random.permutation(sub, len(inds)))].tolist()
    else:
        inds.sort()
    return _result(data, classes, inds)


def groupobs(f: Callable, data: Any) -> tuple:
    """MLUtils' `groupobs(f, data)`: one subset of `data` per distinct value of `f(observation)`, in
    sorted order of those values, each keeping the observations' order.

    ```python
    >>> [list(g) for g in groupobs(lambda v: v > 0, range(-2, 3))]
    [[-2, -1, 0], [1, 2]]

    ```
    """
    groups: dict = {}
    for i in range(numobs(data)):
        groups.setdefault(f(getobs(data, i)), []).append(i)
    try:
        keys = sorted(groups)
    except TypeError:  # values that do not order: first appearance
        keys = list(groups)
    return tuple(obsview(data, np.asarray(groups[k], dtype=np.int64)) for k in keys)


