"""MLUtils' splitting of data: `group_counts`, `group_indices`, `splitobs`, `kfolds`, `leavepout` (0-based)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..core.layer import is_array
from ..random import resolve_key
from .observations import getobs, numobs

__all__ = ["group_counts", "group_indices", "splitobs", "kfolds", "leavepout"]


def group_counts(x: Any) -> dict:
    """How many times each value of `x` occurs, as a dict in order of first appearance (MLUtils'
    `group_counts`). `group_counts("abb") == {"a": 1, "b": 2}`.

    ```python
    >>> group_counts(['a', 'b', 'b', 'c', 'a', 'b'])
    {'a': 2, 'b': 3, 'c': 1}

    ```
    """
    out: dict = {}
    for v in _values(x):
        out[v] = out.get(v, 0) + 1
    return out


def group_indices(x: Any) -> dict:
    """The 0-based positions of each distinct value of `x` (MLUtils' `group_indices`), in order of first
    appearance. `group_indices(["yes", "no", "maybe", "yes"]) == {"yes": [0, 3], "no": [1], "maybe": [2]}`.

    ```python
    >>> group_indices([1, 0, 1, 1])
    {1: [0, 2, 3], 0: [1]}

    ```
    """
    out: dict = {}
    for i, v in enumerate(_values(x)):
        out.setdefault(v, []).append(i)
    return out


def _values(x: Any) -> list:
    return np.asarray(x).reshape(-1).tolist() if is_array(x) else list(x)


def _split_sizes(n: int, at: Any) -> list[range]:
    """MLUtils' `splitobs(n; at)`, 0-based: the consecutive ranges of `range(n)`."""
    if isinstance(at, tuple) and not at:
        return [range(n)]
    if isinstance(at, (int, np.integer)) and not isinstance(at, bool):
        at = at / n
    elif isinstance(at, (tuple, list)) and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in at):
        at = tuple(a / n for a in at)
    if isinstance(at, (float, np.floating)):
        if not 0 <= at <= 1:
            raise ValueError('splitobs: the parameter "at" must be in interval (0, 1)')
        n1 = int(np.round(n * at))  # Julia's round: half to even, as numpy's
        return [range(n1), range(n1, n)]
    at = tuple(at)
    first, second = _split_sizes(n, at[0])
    n1, n2 = first.stop, second.stop
    rest = _split_sizes(n2 - n1, tuple(a * n / (n2 - n1) for a in at[1:])) if n2 > n1 else \
        [range(0) for _ in at[1:]] + [range(0)]
    return [first, *(range(n1 + r.start, n1 + r.stop) for r in rest)]


def splitobs(data: Any, at: Any, *, shuffle: bool = False, rng: Any = None, stratified: Any = None) -> tuple:
    """Split `data` into consecutive parts (MLUtils' `splitobs`). `at` is a fraction in `[0, 1]` or a count
    for the first part, or a tuple of them for several parts; the last part holds the rest, so there are
    `len(at) + 1` parts. An int `data` is `n`: the parts are 0-based `range`s of `range(n)`.

    - `shuffle=True` permutes the observations first (`rng` as in `shuffleobs`);
    - `stratified`: a label per observation; each label's observations are split in the same proportions.

    ```python
    >>> splitobs(100, at=0.7)              # (range(0, 70), range(70, 100))
    (range(0, 70), range(70, 100))
    >>> X, Y = jnp.arange(20.0).reshape(2, 10), jnp.arange(10)
    >>> (xtr, ytr), (xte, yte) = splitobs((X, Y), at=0.8, shuffle=True)
    >>> xtr.shape, yte.shape
    ((2, 8), (2,))

    ```
    """
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        return tuple(_split_sizes(int(data), at))
    n = numobs(data)
    if isinstance(at, (int, np.integer)) and not isinstance(at, bool):
        at = at / n
    elif isinstance(at, (tuple, list)) and at and all(isinstance(a, (int, np.integer)) for a in at):
        at = tuple(a / n for a in at)
    order = np.arange(n)
    if shuffle:
        order = np.asarray(jax.random.permutation(resolve_key(rng), n))
    if stratified is not None:
        labels = _values(stratified)
        if len(labels) != n:
            raise ValueError(f"splitobs: stratified has {len(labels)} labels for {n} observations")
        labels = [labels[i] for i in order]
        nparts = (len(at) if isinstance(at, tuple) else 1) + 1
        parts: list[list[int]] = [[] for _ in range(nparts)]
        for idxs in group_indices(labels).values():
            for k, r in enumerate(_split_sizes(len(idxs), at)):
                parts[k].extend(int(order[idxs[j]]) for j in r)
        return tuple(getobs(data, np.asarray(p, dtype=np.int64)) for p in parts)
    return tuple(getobs(data, order[r.start:r.stop] if shuffle else slice(r.start, r.stop))
                 for r in _split_sizes(n, at))


def _kfold_indices(n: int, k: int) -> tuple[list[list[int]], list[range]]:
    if not 2 <= k <= n:
        raise ValueError(f"kfolds: n must be positive and k must be within 2:{max(2, n)}, got n={n}, k={k}")
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    val = [range(o, o + s) for o, s in zip(offsets, sizes, strict=True)]
    train = [[*range(0, o), *range(o + s, n)] for o, s in zip(offsets, sizes, strict=True)]
    return train, val


def kfolds(data: Any, k: int = 5, *, shuffle: bool = False, rng: Any = None) -> Any:
    """MLUtils' `kfolds`. With an int `n`: `(train_indices, val_indices)`, `k` lists of 0-based training
    indices and `k` validation ranges; each index is in exactly one validation range, the first `n % k`
    folds one larger. With a data container: a list of `(train, val)` subsets, one pair per fold
    (`shuffle=True` permutes the observations first, `rng` as in `shuffleobs`).

    ```python
    >>> kfolds(10, 5)[1]       # [range(0, 2), range(2, 4), range(4, 6), range(6, 8), range(8, 10)]
    [range(0, 2), range(2, 4), range(4, 6), range(6, 8), range(8, 10)]

    ```
    """
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        return _kfold_indices(int(data), int(k))
    n = numobs(data)
    order = np.asarray(jax.random.permutation(resolve_key(rng), n)) if shuffle else np.arange(n)
    train, val = _kfold_indices(n, int(k))
    return [(getobs(data, order[np.asarray(t, dtype=np.int64)]), getobs(data, order[v.start:v.stop]))
            for t, v in zip(train, val, strict=True)]


def leavepout(data: Any, p: int = 1, **kw: Any) -> Any:
    """MLUtils' `leavepout`: `kfolds` with `k = n // p` folds, so that each validation part holds about `p`
    observations (`p = 1` is leave-one-out); `1 <= p <= n // 2`. An int `data` is `n`, as in `kfolds`.

    ```python
    >>> train, val = leavepout(6, 2)   # 6 // 2 = 3 folds, 2 held out in each
    >>> val
    [range(0, 2), range(2, 4), range(4, 6)]
    >>> train[0]
    [2, 3, 4, 5]

    ```
    """
    n = int(data) if isinstance(data, (int, np.integer)) and not isinstance(data, bool) else numobs(data)
    if not 1 <= p <= n // 2:
        raise ValueError(f"leavepout: p must be within 1:{n // 2}, got {p}")
    return kfolds(data, n // p, **kw)
