"""MLUtils' lazy views of a data container, 0-based: `ObsView` (a subset of observations), `BatchView`
(the container as batches, `batchsize`) and `slidingwindow` (overlapping windows of observations).

```python
>>> x = jnp.arange(12.0).reshape(2, 6)          # 6 observations of 2 features
>>> [b.shape for b in BatchView(x, batchsize=4)]
[(2, 4), (2, 2)]

```
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .observations import getobs, numobs

__all__ = ["ObsView", "BatchView", "batchsize", "SlidingWindow", "slidingwindow"]


def _index(i: Any, n: int, what: str) -> int:
    """A Python index into `n` items (negative from the end), or IndexError naming `what`."""
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
        raise TypeError(f"{what}: an index is an int, a slice or a list of ints, got {type(i).__name__}")
    if not -n <= i < n:
        raise IndexError(f"{what}: index {i} is out of range for {n} items (0-based)")
    return int(i) % n


def _positions(idx: Any, n: int, what: str) -> list[int]:
    if isinstance(idx, slice):
        return list(range(n))[idx]
    return [_index(int(i), n, what) for i in np.asarray(idx).reshape(-1)]


class ObsView:
    """MLUtils' `ObsView(data, indices)`: the observations `indices` (0-based; all of them when `None`) of
    `data`, drawn when indexed. `len(v)` observations; `v[i]` is one observation (`getobs(data, j)`), `v[a:b]`
    or `v[[i, j]]` another `ObsView`; `getobs(v)` all of them, keeping the observation axis.

    ```python
    >>> v = ObsView(jnp.arange(12).reshape(3, 4), [3, 1])   # observations 3 and 1
    >>> len(v), v[0]
    (2, Array([ 3,  7, 11], dtype=int32))
    >>> getobs(v)
    Array([[ 3,  1],
           [ 7,  5],
           [11,  9]], dtype=int32)

    ```
    """

    def __init__(self, data: Any, indices: Any = None):
        n = numobs(data)
        if indices is None:
            indices = range(n)
        elif isinstance(indices, slice):
            indices = range(n)[indices]
        elif isinstance(indices, (int, np.integer)):
            indices = [indices]
        self.data = data
        self.indices = [_index(int(i), n, "ObsView") for i in np.asarray(list(indices), dtype=np.int64).reshape(-1)]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, (int, np.integer)):
            return getobs(self.data, self.indices[_index(idx, len(self), "ObsView")])
        return ObsView(self.data, [self.indices[j] for j in _positions(idx, len(self), "ObsView")])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def getobs(self, idx: Any = None) -> Any:
        """The observations `idx` of this view (all of them without `idx`), as `getobs` gives them."""
        if idx is None:
            return getobs(self.data, np.asarray(self.indices, dtype=np.int64))
        if isinstance(idx, (int, np.integer)):
            return self[idx]
        return getobs(self.data, np.asarray([self.indices[j] for j in _positions(idx, len(self), "ObsView")], dtype=np.int64))

    def __repr__(self) -> str:
        return f"ObsView({type(self.data).__name__}, {len(self)} observations)"


class BatchView:
    """MLUtils' `BatchView(data; batchsize=1, partial=true)`: `data` as consecutive batches of `batchsize`
    observations (the last one smaller unless `partial=False`, which drops it). `bv[i]` (0-based) is batch
    `i`, keeping the observation axis; `len(bv)` batches; a `batchsize` larger than the data is the data's
    size. A container whose parts hold different numbers of observations is a `DimensionMismatch`.

    ```python
    >>> bv = BatchView(jnp.arange(10), batchsize=4)
    >>> len(bv), bv[0], bv[2]
    (3, Array([0, 1, 2, 3], dtype=int32), Array([8, 9], dtype=int32))
    >>> len(BatchView(jnp.arange(10), batchsize=4, partial=False))
    2

    ```
    """

    def __init__(self, data: Any, batchsize: int = 1, *, partial: bool = True):
        n = numobs(data)
        if not isinstance(batchsize, (int, np.integer)) or batchsize < 1:
            raise ValueError(f"BatchView: batchsize must be a positive int, got {batchsize!r}")
        self.data, self.partial, self.n = data, bool(partial), n
        self.batchsize = int(min(batchsize, n)) if n else int(batchsize)
        self.count = (math.ceil if partial else math.floor)(n / self.batchsize) if n else 0

    def __len__(self) -> int:
        return self.count

    def _range(self, i: int) -> slice:
        return slice(i * self.batchsize, min((i + 1) * self.batchsize, self.n))

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, (int, np.integer)):
            return getobs(self.data, self._range(_index(idx, len(self), "BatchView")))
        rows = [j for i in _positions(idx, len(self), "BatchView") for j in range(self.n)[self._range(i)]]
        return ObsView(self.data, rows)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def getobs(self, idx: Any = None) -> Any:
        """Batch `idx`; a list of them gives their observations together; without `idx`, the whole data."""
        if idx is None:
            return getobs(self.data, slice(0, self.count * self.batchsize if not self.partial else self.n))
        if isinstance(idx, (int, np.integer)):
            return self[idx]
        return self[idx].getobs()

    def __repr__(self) -> str:
        return f"BatchView({type(self.data).__name__}, batchsize={self.batchsize}, {len(self)} batches)"


def batchsize(x: Any) -> int:
    """The number of observations per batch of a `BatchView` or a `DataLoader` (MLUtils' `batchsize`).

    ```python
    >>> batchsize(BatchView(jnp.arange(10), batchsize=4))
    4
    >>> batchsize(DataLoader(jnp.zeros((2, 100)), batchsize=32))
    32

    ```
    """
    b = getattr(x, "batchsize", None)
    if not isinstance(b, (int, np.integer)):
        raise TypeError(f"batchsize: expected a BatchView or a DataLoader, got {type(x).__name__}")
    return int(b)


class SlidingWindow:
    """`slidingwindow(data, size, stride=1)`: window `i` (0-based) is the observations
    `i*stride : i*stride + size` of `data`, keeping the observation axis."""

    def __init__(self, data: Any, size: int, stride: int = 1):
        n = numobs(data)
        if size < 1 or stride < 1:
            raise ValueError(f"slidingwindow: size and stride must be positive, got size={size}, stride={stride}")
        if size > n:
            raise ValueError(f"slidingwindow: size={size} is larger than the data's {n} observations")
        self.data, self.size, self.stride = data, int(size), int(stride)
        self.count = (n - self.size) // self.stride + 1

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, (int, np.integer)):
            i = _index(idx, len(self), "slidingwindow")
            return getobs(self.data, slice(i * self.stride, i * self.stride + self.size))
        return [self[i] for i in _positions(idx, len(self), "slidingwindow")]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def getobs(self, idx: Any = None) -> Any:
        """Window `idx`; a slice or list of them gives a list of windows; without `idx`, this container."""
        return self if idx is None else self[idx]

    def __repr__(self) -> str:
        return f"slidingwindow({type(self.data).__name__}, size={self.size}, stride={self.stride})"


def slidingwindow(data: Any, size: int, stride: int = 1) -> SlidingWindow:
    """MLUtils' `slidingwindow(data; size, stride=1)`: the overlapping windows of `size` consecutive
    observations, starting every `stride` observations (0-based).

    ```python
    >>> s = slidingwindow(range(20), size=5, stride=3)
    >>> len(s), list(s[1])
    (6, [3, 4, 5, 6, 7])

    ```
    """
    return SlidingWindow(data, size, stride)
