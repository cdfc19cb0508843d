"""MLUtils' data containers and observations: `numobs`, `getobs`, `shuffleobs`, `randobs`, `eachobs`,
`mapobs`/`MappedData`, `obsview`, `filterobs`, `joinobs`.

A data container is an array (observations along the last axis), a tuple, named tuple or dict of them
(all with the same number of observations), a list / range (one observation per element), or an object
with `__len__` and a method `getobs(idx)` (`MappedData`, `ObsView`, `BatchView`, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.layer import is_array
from ..errors import DimensionMismatch
from ..random import resolve_key

__all__ = ["numobs", "getobs", "shuffleobs", "randobs", "eachobs", "MappedData", "mapobs", "obsview", "filterobs", "joinobs"]


def _leaves(data: Any) -> list:
    if isinstance(data, dict):
        return [lf for v in data.values() for lf in _leaves(v)]
    if isinstance(data, tuple):
        return [lf for v in data for lf in _leaves(v)]
    return [data]


def numobs(data: Any) -> int:
    """The number of observations in `data` (MLUtils' `numobs`): the last axis of an array, the length of a
    list or range, the common number of a tuple's / dict's parts.

    ```python
    >>> numobs(jnp.zeros((3, 10)))   # observations are the last axis
    10
    >>> numobs((jnp.zeros((3, 10)), jnp.zeros(10)))
    10
    >>> numobs([1, 2, 3])
    3

    ```
    """
    if is_array(data):
        if np.ndim(data) == 0:
            raise ValueError("numobs: a 0-dimensional array has no observation axis")
        return int(data.shape[-1])
    if isinstance(data, (dict, tuple)):
        counts = {numobs(v) for v in _leaves(data)}
        if len(counts) != 1:
            raise DimensionMismatch(f"numobs: the parts of the container hold different numbers of observations: {sorted(counts)}")
        return counts.pop()
    return len(data)


def getobs(data: Any, idx: Any = None) -> Any:
    """The observation(s) `idx` (0-based: an int, a slice, or an index array) of `data`, in the same
    container type (MLUtils' `getobs`); without `idx`, `data` itself. An int drops the observation axis.

    ```python
    >>> X = jnp.arange(6).reshape(2, 3)   # 3 observations of 2 features
    >>> getobs(X, 1)
    Array([1, 4], dtype=int32)
    >>> getobs(X, [0, 2])
    Array([[0, 2],
           [3, 5]], dtype=int32)
    >>> getobs((X, jnp.array([10, 20, 30])), 2)
    (Array([2, 5], dtype=int32), Array(30, dtype=int32))

    ```
    """
    if callable(getattr(type(data), "getobs", None)):  # a container that knows its observations (ObsView, ...)
        return data.getobs(idx)
    if idx is None:
        return data
    if isinstance(data, dict):
        return type(data)((k, getobs(v, idx)) for k, v in data.items())
    if isinstance(data, tuple):
        parts = [getobs(v, idx) for v in data]
        return type(data)(*parts) if hasattr(data, "_fields") else tuple(parts)
    if is_array(data):
        if isinstance(idx, slice):
            return data[..., idx]
        if isinstance(idx, (int, np.integer)):
            _check_bounds(np.asarray(idx), data)
            return data[..., idx]
        idx = np.asarray(idx)
        _check_bounds(idx, data)
        return data[..., idx]
    if isinstance(idx, (int, np.integer, slice)):
        return data[idx]
    return [data[int(i)] for i in np.asarray(idx).reshape(-1)]


def _check_bounds(idx: np.ndarray, data: Any) -> None:
    """IndexError for an observation index out of range, as MLUtils' BoundsError: indexing a JAX array
    clamps an index out of range to the last observation, silently."""
    if np.ndim(data) == 0:
        raise ValueError("getobs: a 0-dimensional array has no observation axis")
    n = data.shape[-1]
    if idx.dtype.kind in "iu" and idx.size and not (-n <= idx.min() and idx.max() < n):
        bad = idx[(idx < -n) | (idx >= n)].reshape(-1)[0]
        raise IndexError(f"getobs: observation index {int(bad)} is out of range for {n} observations (0-based)")


def shuffleobs(data: Any, *, rng: Any = None) -> Any:
    """`data` with its observations in a random order (MLUtils' `shuffleobs`), the same permutation for
    every part of a container. `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key.

    ```python
    >>> X, y = jnp.arange(10).reshape(2, 5), jnp.arange(5)
    >>> Xs, ys = shuffleobs((X, y))   # one permutation for both parts
    >>> bool(jnp.all(Xs[0] == ys)), sorted(ys.tolist())
    (True, [0, 1, 2, 3, 4])

    ```
    """
    perm = np.asarray(jax.random.permutation(resolve_key(rng), numobs(data)))
    return getobs(data, perm)


def randobs(data: Any, n: int | None = None, *, rng: Any = None) -> Any:
    """One observation of `data` drawn at random (MLUtils' `randobs`), or a batch of `n` drawn with
    replacement (observations along the last axis). `rng` as in `shuffleobs`.

    ```python
    >>> x = randobs(jnp.arange(10))
    >>> x.shape, 0 <= int(x) < 10
    ((), True)

    ```
    """
    key = resolve_key(rng)
    if n is None:
        return getobs(data, int(jax.random.randint(key, (), 0, numobs(data))))
    return getobs(data, np.asarray(jax.random.randint(key, (int(n),), 0, numobs(data))))


def eachobs(data: Any, batchsize: int = -1, *, partial: bool = True, shuffle: bool = False, rng: Any = None) -> Any:
    """Iterate over the observations of `data` one at a time (MLUtils' `eachobs`, `batchsize=-1`), or in
    batches of `batchsize`: `DataLoader(data, batchsize, shuffle=..., partial=..., rng=...)`.

    ```python
    >>> X = jnp.arange(6).reshape(2, 3)
    >>> [x.tolist() for x in eachobs(X)]
    [[0, 3], [1, 4], [2, 5]]
    >>> [x.shape for x in eachobs(X, 2)]
    [(2, 2), (2, 1)]

    ```
    """
    from ..data import DataLoader

    return DataLoader(data, batchsize=batchsize, shuffle=shuffle, partial=partial, rng=rng)


class MappedData:
    """`mapobs(f, data)`: `data` with `f` applied to whatever `getobs` draws from it (one observation or a
    batch, as MLUtils' `MappedData`); `numobs` is that of `data`. Lazy: `f` runs at each `getobs`."""

    def __init__(self, f: Callable, data: Any):
        self.f, self.data = f, data

    def __len__(self) -> int:
        return numobs(self.data)

    def __getitem__(self, idx: Any) -> Any:
        return self.f(getobs(self.data, idx))

    def getobs(self, idx: Any = None) -> Any:
        """The observation(s) `idx` (0-based: an int, a slice, or an index array) of `data`, in the same
    container type (MLUtils' `getobs`); without `idx`, `data` itself. An int drops the observation axis."""
        return self if idx is None else self.f(getobs(self.data, idx))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"mapobs({getattr(self.f, '__name__', self.f)!r}, {type(self.data).__name__} with {len(self)} observations)"


def mapobs(f: Callable, data: Any) -> MappedData:
    """MLUtils' `mapobs(f, data)`: a container whose observations are `f` of those of `data`, computed when
    drawn (`getobs(mapobs(f, X), i) == f(getobs(X, i))`).

    ```python
    >>> d = mapobs(lambda x: 2 * x, jnp.arange(4))
    >>> numobs(d), getobs(d, 3)
    (4, Array(6, dtype=int32))

    ```
    """
    return MappedData(f, data)


def obsview(data: Any, idx: Any = None) -> Any:
    """MLUtils' `obsview(data, idx)`: the observations `idx` (0-based) of `data`, keeping the observation
    axis (a JAX array is immutable, so a copy is as good as a view); without `idx`, `data`.

    ```python
    >>> X = jnp.arange(6).reshape(2, 3)
    >>> obsview(X, 1)   # keeps the observation axis
    Array([[1],
           [4]], dtype=int32)
    >>> obsview(X, slice(1, 3)).shape
    (2, 2)

    ```
    """
    if idx is None:
        return data
    if isinstance(idx, (int, np.integer)):
        idx = [int(idx)]
    return getobs(data, idx if isinstance(idx, slice) else np.asarray(idx, dtype=np.int64).reshape(-1))


def filterobs(f: Callable, data: Any) -> Any:
    """MLUtils' `filterobs(f, data)`: the observations `x` of `data` with `f(x)` true, in order.

    ```python
    >>> filterobs(lambda x: x % 2 == 0, list(range(7)))
    [0, 2, 4, 6]
    >>> X = jnp.array([[1, -2, 3], [4, 5, -6]])
    >>> filterobs(lambda x: bool(x.min() > 0), X)
    Array([[1],
           [4]], dtype=int32)

    ```
    """
    keep = [i for i in range(numobs(data)) if f(getobs(data, i))]
    return obsview(data, np.asarray(keep, dtype=np.int64))


def joinobs(*datas: Any) -> Any:
    """MLUtils' `joinobs(datas...)`: one container with the observations of each in turn (arrays joined
    along the last axis, lists concatenated, tuples and dicts part by part).

    ```python
    >>> joinobs(jnp.zeros((2, 3)), jnp.ones((2, 1))).shape
    (2, 4)
    >>> joinobs([1, 2], [3])
    [1, 2, 3]

    ```
    """
    if not datas:
        raise ValueError("joinobs needs at least one data container")
    d0 = datas[0]
    if isinstance(d0, dict):
        return type(d0)((k, joinobs(*(d[k] for d in datas))) for k in d0)
    if isinstance(d0, tuple):
        parts = [joinobs(*(d[i] for d in datas)) for i in range(len(d0))]
        return type(d0)(*parts) if hasattr(d0, "_fields") else tuple(parts)
    if is_array(d0):
        return jnp.concatenate([jnp.asarray(d) for d in datas], axis=-1)
    return [x for d in datas for x in (d[i] for i in range(numobs(d)))]
