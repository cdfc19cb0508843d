"""MLUtils.jl's array and data helpers that Flux scripts reach through Flux (Flux does `using MLUtils`, so
`Flux.chunk`, `Flux.unsqueeze`, `Flux.splitobs` ... work): in Flux's layout, observations along the LAST
axis, and 0-based wherever Python indexes (`dims`, indices, group labels).

- reshaping: `unsqueeze`, `unstack`, `chunk`, `rpad_constant`
- sequences: `batchseq`, `batch_sequence` (`batch`, `unbatch` live in `fluxjax.data`)
- observations: `numobs`, `getobs`, `shuffleobs`, `splitobs`, `group_counts`, `group_indices`
- iteration and folds: `eachobs`, `randobs`, `kfolds`, `leavepout`; containers: `mapobs`, `obsview`,
  `filterobs`, `joinobs`; scaling and selection: `rescale`, `topk`
- arrays like another: `zeros_like`, `ones_like`, `fill_like`, `trues_like`, `falses_like`, `rand_like`,
  `randn_like`

A data container is an array (observations along the last axis), a tuple, named tuple or dict of them
(all with the same number of observations), or a list / range (one observation per element).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .data import batch
from .errors import DimensionMismatch
from .random import resolve_key

__all__ = [
    "unsqueeze", "unstack", "chunk", "rpad_constant", "batchseq", "batch_sequence", "numobs", "getobs",
    "shuffleobs", "splitobs", "group_counts", "group_indices", "zeros_like", "ones_like", "fill_like",
    "trues_like", "falses_like", "rand_like", "randn_like", "eachobs", "randobs", "kfolds", "rescale", "topk",
    "leavepout", "mapobs", "MappedData", "obsview", "filterobs", "joinobs",
]  # fmt: skip


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, jax.Array))


def _axis(dims: int, ndim: int, what: str) -> int:
    if not -ndim <= dims < ndim:
        raise ValueError(f"{what}: dims={dims} is out of range for an array with {ndim} dims (0-based)")
    return dims % ndim


# ---------------------------------------------------------------------------------------------
# reshaping


def unsqueeze(x: Any = None, dims: int | None = None) -> Any:
    """`x` with a new axis of size 1 at position `dims` (0-based, `0 <= dims <= x.ndim`; negative counts
    from the end as in `np.expand_dims`), MLUtils' `unsqueeze(x; dims)` with `dims` one less.
    `unsqueeze(dims=d)` with no array is the function `x -> unsqueeze(x, d)`, for a `Chain`.

    ```python
    >>> unsqueeze(jnp.array([[1, 2], [3, 4]]), dims=1).shape     # Julia's unsqueeze([1 2; 3 4], dims=2)
    (2, 1, 2)

    ```
    """
    if dims is None:
        raise TypeError("unsqueeze needs dims= (0-based): unsqueeze(x, dims=1) or unsqueeze(dims=1)")
    if x is None:
        f = functools.partial(_unsqueeze, dims=dims)
        f.__name__ = f"unsqueeze(dims={dims})"  # type: ignore[attr-defined]
        return f
    return _unsqueeze(x, dims)


def _unsqueeze(x: Any, dims: int) -> jax.Array:
    x = jnp.asarray(x)
    if not -(x.ndim + 1) <= dims <= x.ndim:
        raise ValueError(f"unsqueeze: dims={dims} must lie in 0..{x.ndim} for an array with {x.ndim} dims")
    return jnp.expand_dims(x, dims)


def unstack(xs: Any, dims: int) -> list[jax.Array]:
    """The slices of `xs` along axis `dims` (0-based), MLUtils' `unstack(xs; dims)`; the inverse of
    `jnp.stack(slices, axis=dims)`.

    ```python
    >>> unstack(jnp.array([[1, 3, 5, 7], [2, 4, 6, 8]]), dims=1)   # [[1, 2], [3, 4], [5, 6], [7, 8]]
    [Array([1, 2], dtype=int32), Array([3, 4], dtype=int32), Array([5, 6], dtype=int32), Array([7, 8], dtype=int32)]

    ```
    """
    xs = jnp.asarray(xs)
    ax = _axis(dims, xs.ndim, "unstack")
    return [jnp.take(xs, i, axis=ax) for i in range(xs.shape[ax])]


def _sizes_from_partition(idxs: Any, npartitions: int | None) -> list[int]:
    labels = np.asarray(idxs)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise TypeError("chunk: partition indices must be a vector of integers")
    if labels.size and np.any(np.diff(labels) < 0):
        raise ValueError("chunk: partition_idxs must be sorted")
    if labels.size and labels.min() < 0:
        raise ValueError("chunk: partition indices are 0-based and must be >= 0")
    m = (int(labels.max()) + 1 if labels.size else 0) if npartitions is None else int(npartitions)
    return np.bincount(labels, minlength=m).tolist()


def chunk(x: Any, n: Any = None, *, size: Any = None, dims: int = -1, npartitions: int | None = None) -> list:
    """Split `x` into `n` parts of `ceil(len / n)` elements (the last may be smaller), or into parts of
    `size` elements, or of the sizes in a list `size`; MLUtils' `chunk`. An array is split along `dims`
    (0-based, default the last axis) into slices of it; a list, range or tuple into lists/ranges.
    `chunk(x, labels)` with a sorted vector of 0-based part labels, one per element along `dims`, makes
    part `k` of the elements labelled `k` (MLUtils' `chunk(x, partition_idxs)`, 1-based there).

    ```python
    >>> chunk(range(10), 3)
    [range(0, 4), range(4, 8), range(8, 10)]
    >>> [c.shape for c in chunk(jnp.zeros((5, 4)), 2, dims=0)]
    [(3, 4), (2, 4)]
    >>> chunk(range(6), size=[2, 4])
    [range(0, 2), range(2, 6)]

    ```
    """
    if n is not None and size is not None:
        raise TypeError("chunk: give the number of parts n or size=, not both")
    if n is not None and not isinstance(n, (int, np.integer)):
        size, n = _sizes_from_partition(n, npartitions), None
    if _is_array(x):
        ax = _axis(dims, np.ndim(x), "chunk")
        length = x.shape[ax]
    else:
        if not isinstance(x, (list, tuple, range, str)):
            x = list(x)
        ax, length = None, len(x)
    if n is not None:
        if n <= 0:
            raise ValueError(f"chunk: the number of parts must be positive, got {n}")
        size = max(math.ceil(length / n), 1)
    if size is None:
        raise TypeError("chunk needs a number of parts n, size=, or a vector of partition labels")
    if isinstance(size, (int, np.integer)):
        if size <= 0:
            raise ValueError(f"chunk: size must be positive, got {size}")
        bounds = [(lo, min(lo + int(size), length)) for lo in range(0, length, int(size))]
    else:
        sizes = [int(s) for s in size]
        if sum(sizes) != length:
            raise ValueError(f"chunk: the sum of the sizes must be equal to {length}, the length of the dimension")
        ends = np.cumsum([0, *sizes]).tolist()
        bounds = list(zip(ends[:-1], ends[1:], strict=True))
    if ax is None:
        return [x[lo:hi] for lo, hi in bounds]
    index = [slice(None)] * np.ndim(x)
    out = []
    for lo, hi in bounds:
        index[ax] = slice(lo, hi)
        out.append(x[tuple(index)])
    return out


def rpad_constant(x: Any, n: int | Sequence[int], val: Any = 0, dims: int | Sequence[int] | None = None) -> jax.Array:
    """Pad `x` at the END of each axis in `dims` (0-based; default every axis) with `val` up to length `n`
    (one int for all, or one per axis); an axis already that long is left alone. MLUtils' `rpad_constant`.

    ```python
    >>> rpad_constant(jnp.array([1, 2]), 4, -1)     # [1, 2, -1, -1]
    Array([ 1,  2, -1, -1], dtype=int32)
    >>> rpad_constant(jnp.array([[1, 2], [3, 4]]), 4, dims=0).shape
    (4, 2)

    ```
    """
    x = jnp.asarray(x)
    axes = list(range(x.ndim)) if dims is None else [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    axes = [_axis(a, x.ndim, "rpad_constant") for a in axes]
    ns = [int(n)] * len(axes) if isinstance(n, (int, np.integer)) else [int(k) for k in n]
    if len(ns) != len(axes):
        raise ValueError(f"rpad_constant: {len(ns)} lengths for {len(axes)} dims")
    pads = [(0, 0)] * x.ndim
    for a, k in zip(axes, ns, strict=True):
        pads[a] = (0, max(k - x.shape[a], 0))
    return jnp.pad(x, pads, constant_values=jnp.asarray(val, x.dtype))


# ---------------------------------------------------------------------------------------------
# sequences


def _seq_len(x: Any) -> int:
    return numobs(x)


def batchseq(seqs: Sequence[Any], val: Any = 0) -> list[jax.Array]:
    """Turn `N` sequences (observations, i.e. time steps, along the last axis) into one sequence whose
    every element is a batch of `N`, short sequences padded with `val`; MLUtils' `batchseq`.

    ```python
    >>> batchseq([jnp.array([1, 2, 3]), jnp.array([4, 5])], 0)    # [[1, 4], [2, 5], [3, 0]]
    [Array([1, 4], dtype=int32), Array([2, 5], dtype=int32), Array([3, 0], dtype=int32)]

    ```
    """
    xs = [_as_seq(x) for x in seqs]
    if not xs:
        raise ValueError("batchseq needs at least one sequence")
    n = max(_seq_len(x) for x in xs)
    fill = jnp.asarray(val)
    padded = []
    for x in xs:
        k = n - x.shape[-1]
        if k:  # `val` is one step: a scalar, or an observation such as a vector for a sequence of vectors
            pad = jnp.broadcast_to(jnp.expand_dims(fill, -1).astype(x.dtype), x.shape[:-1] + (k,))
            x = jnp.concatenate([x, pad], axis=-1)
        padded.append(x)
    return [batch([x[..., i] for x in padded]) for i in range(n)]


def _as_seq(x: Any) -> jax.Array:
    """A sequence as one array with time last: a list of step arrays is stacked along a new last axis."""
    if isinstance(x, (list, tuple)) and x and _is_array(x[0]):
        return batch(list(x))
    return jnp.asarray(x)


def batch_sequence(seqs: Sequence[Any], pad: Any = 0) -> jax.Array:
    """Stack `N` sequences of sizes `(..., L_i)` into one array `(..., L_max, N)`, short ones padded with
    `pad` at the end; MLUtils' `batch_sequence`.

    ```python
    >>> batch_sequence([jnp.array([1, 2, 3]), jnp.array([10, 20])])   # [[1, 10], [2, 20], [3, 0]]
    Array([[ 1, 10],
           [ 2, 20],
           [ 3,  0]], dtype=int32)

    ```
    """
    xs = [jnp.asarray(x) for x in seqs]
    if not xs:
        raise ValueError("batch_sequence needs at least one sequence")
    lead = xs[0].shape[:-1]
    if any(x.shape[:-1] != lead for x in xs):
        raise ValueError(f"batch_sequence: array dimensions do not match (all but the last): {[x.shape for x in xs]}")
    lmax = max(x.shape[-1] for x in xs)
    return batch([rpad_constant(x, lmax, pad, dims=x.ndim - 1) for x in xs])


# ---------------------------------------------------------------------------------------------
# observations


def _leaves(data: Any) -> list:
    if isinstance(data, dict):
        return [lf for v in data.values() for lf in _leaves(v)]
    if isinstance(data, tuple):
        return [lf for v in data for lf in _leaves(v)]
    return [data]


def numobs(data: Any) -> int:
    """The number of observations in `data` (MLUtils' `numobs`): the last axis of an array, the length of a
    list or range, the common number of a tuple's / dict's parts."""
    if _is_array(data):
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
    container type (MLUtils' `getobs`); without `idx`, `data` itself. An int drops the observation axis."""
    if idx is None:
        return data
    if isinstance(data, dict):
        return type(data)((k, getobs(v, idx)) for k, v in data.items())
    if isinstance(data, tuple):
        parts = [getobs(v, idx) for v in data]
        return type(data)(*parts) if hasattr(data, "_fields") else tuple(parts)
    if _is_array(data):
        if isinstance(idx, (int, np.integer, slice)):
            return data[..., idx]
        return data[..., np.asarray(idx)]
    if isinstance(idx, (int, np.integer, slice)) or isinstance(data, MappedData):
        return data[idx]
    return [data[int(i)] for i in np.asarray(idx).reshape(-1)]


def shuffleobs(data: Any, *, rng: Any = None) -> Any:
    """`data` with its observations in a random order (MLUtils' `shuffleobs`), the same permutation for
    every part of a container. `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key."""
    perm = np.asarray(jax.random.permutation(resolve_key(rng), numobs(data)))
    return getobs(data, perm)


def group_counts(x: Any) -> dict:
    """How many times each value of `x` occurs, as a dict in order of first appearance (MLUtils'
    `group_counts`). `group_counts("abb") == {"a": 1, "b": 2}`."""
    out: dict = {}
    for v in _values(x):
        out[v] = out.get(v, 0) + 1
    return out


def group_indices(x: Any) -> dict:
    """The 0-based positions of each distinct value of `x` (MLUtils' `group_indices`), in order of first
    appearance. `group_indices(["yes", "no", "maybe", "yes"]) == {"yes": [0, 3], "no": [1], "maybe": [2]}`."""
    out: dict = {}
    for i, v in enumerate(_values(x)):
        out.setdefault(v, []).append(i)
    return out


def _values(x: Any) -> list:
    return np.asarray(x).reshape(-1).tolist() if _is_array(x) else list(x)


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


# ---------------------------------------------------------------------------------------------
# arrays like another


def _like(x: Any, args: tuple, what: str) -> tuple[Any, tuple[int, ...]]:
    """MLUtils' optional `[element_type], [dims]` arguments: a dtype, a shape (an int or a tuple), or both."""
    x = jnp.asarray(x) if not _is_array(x) else x
    dtype, shape = x.dtype, tuple(x.shape)
    rest = list(args)
    if rest and not isinstance(rest[0], (int, np.integer, tuple, list)):
        dtype = jnp.dtype(rest.pop(0))
    if rest:
        sz = rest.pop(0)
        shape = (int(sz),) if isinstance(sz, (int, np.integer)) else tuple(int(s) for s in sz)
    if rest:
        raise TypeError(f"{what}(x, [dtype], [shape]): too many arguments")
    return dtype, shape


def zeros_like(x: Any, *args: Any) -> jax.Array:
    """Zeros of `x`'s dtype and shape, or the given ones: `zeros_like(x, [dtype], [shape])` (MLUtils)."""
    dtype, shape = _like(x, args, "zeros_like")
    return jnp.zeros(shape, dtype)


def ones_like(x: Any, *args: Any) -> jax.Array:
    """Ones of `x`'s dtype and shape, or the given ones: `ones_like(x, [dtype], [shape])` (MLUtils)."""
    dtype, shape = _like(x, args, "ones_like")
    return jnp.ones(shape, dtype)


def fill_like(x: Any, val: Any, *args: Any) -> jax.Array:
    """`val` everywhere, `x`'s dtype and shape or the given ones: `fill_like(x, val, [dtype], [shape])`."""
    dtype, shape = _like(x, args, "fill_like")
    return jnp.full(shape, val, dtype)


def trues_like(x: Any, *shape: Any) -> jax.Array:
    """`fill_like(x, True, bool, [shape])` (MLUtils' `trues_like`)."""
    return fill_like(x, True, jnp.bool_, *shape)


def falses_like(x: Any, *shape: Any) -> jax.Array:
    """`fill_like(x, False, bool, [shape])` (MLUtils' `falses_like`)."""
    return fill_like(x, False, jnp.bool_, *shape)


def _random_like(draw: Callable, x: Any, args: tuple, rng: Any, what: str) -> jax.Array:
    dtype, shape = _like(x, args, what)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{what}: draws floats; got dtype {dtype} (pass a float dtype: {what}(x, jnp.float32))")
    return draw(resolve_key(rng), shape, dtype)


def rand_like(x: Any, *args: Any, rng: Any = None) -> jax.Array:
    """Uniform `[0, 1)` draws of `x`'s dtype and shape, or the given ones: `rand_like(x, [dtype], [shape])`
    (MLUtils). `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key."""
    return _random_like(jax.random.uniform, x, args, rng, "rand_like")


def randn_like(x: Any, *args: Any, rng: Any = None) -> jax.Array:
    """Standard normal draws of `x`'s dtype and shape, or the given ones: `randn_like(x, [dtype], [shape])`
    (MLUtils). `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key."""
    return _random_like(jax.random.normal, x, args, rng, "randn_like")


# ---------------------------------------------------------------------------------------------
# more of MLUtils: iteration, folds, rescaling, top-k


def eachobs(data: Any, batchsize: int = -1, *, partial: bool = True, shuffle: bool = False, rng: Any = None) -> Any:
    """Iterate over the observations of `data` one at a time (MLUtils' `eachobs`, `batchsize=-1`), or in
    batches of `batchsize`: `DataLoader(data, batchsize, shuffle=..., partial=..., rng=...)`."""
    from .data import DataLoader

    return DataLoader(data, batchsize=batchsize, shuffle=shuffle, partial=partial, rng=rng)


def randobs(data: Any, n: int | None = None, *, rng: Any = None) -> Any:
    """One observation of `data` drawn at random (MLUtils' `randobs`), or a batch of `n` drawn with
    replacement (observations along the last axis). `rng` as in `shuffleobs`."""
    key = resolve_key(rng)
    if n is None:
        return getobs(data, int(jax.random.randint(key, (), 0, numobs(data))))
    return getobs(data, np.asarray(jax.random.randint(key, (int(n),), 0, numobs(data))))


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


def rescale(x: Any, dims: int = -1, eps: float = 1e-5) -> jax.Array:
    """Min-max scaling to `[0, 1]` along `dims` (0-based, default the last axis; a tuple allowed):
    `(x - min) / (max - min + eps)`, MLUtils' `rescale(x; dims, ϵ)`."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    lo = jnp.min(x, axis=dims, keepdims=True)
    hi = jnp.max(x, axis=dims, keepdims=True)
    return (x - lo) / (hi - lo + jnp.asarray(eps, x.dtype))


def topk(x: Any, k: int, dims: int = 0, rev: bool = True) -> tuple[jax.Array, jax.Array]:
    """The `k` largest entries of `x` along `dims` (0-based, default the first axis) and their 0-based
    positions along it, largest first; `rev=False` gives the `k` smallest (MLUtils' `topk`). Ties keep
    their order. The gradient flows through the values to the selected entries.

    ```python
    >>> topk(jnp.array([5, 1, 4, 2, 3]), 3)     # ([5, 4, 3], [0, 2, 4])
    (Array([5, 4, 3], dtype=int32), Array([0, 2, 4], dtype=int32))

    ```
    """
    x = jnp.asarray(x)
    ax = _axis(dims, x.ndim, "topk")
    if not 1 <= k <= x.shape[ax]:
        raise ValueError(f"topk: k must be within 1:{x.shape[ax]}, got {k}")
    order = jnp.argsort(jax.lax.stop_gradient(x), axis=ax, stable=True, descending=rev)
    inds = jax.lax.slice_in_dim(order, 0, k, axis=ax)
    return jnp.take_along_axis(x, inds, axis=ax), inds


def leavepout(data: Any, p: int = 1, **kw: Any) -> Any:
    """MLUtils' `leavepout`: `kfolds` with `k = n // p` folds, so that each validation part holds about `p`
    observations (`p = 1` is leave-one-out); `1 <= p <= n // 2`. An int `data` is `n`, as in `kfolds`."""
    n = int(data) if isinstance(data, (int, np.integer)) and not isinstance(data, bool) else numobs(data)
    if not 1 <= p <= n // 2:
        raise ValueError(f"leavepout: p must be within 1:{n // 2}, got {p}")
    return kfolds(data, n // p, **kw)


class MappedData:
    """`mapobs(f, data)`: `data` with `f` applied to whatever `getobs` draws from it (one observation or a
    batch, as MLUtils' `MappedData`); `numobs` is that of `data`. Lazy: `f` runs at each `getobs`."""

    def __init__(self, f: Callable, data: Any):
        self.f, self.data = f, data

    def __len__(self) -> int:
        return numobs(self.data)

    def __getitem__(self, idx: Any) -> Any:
        return self.f(getobs(self.data, idx))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"mapobs({getattr(self.f, '__name__', self.f)!r}, {type(self.data).__name__} with {len(self)} observations)"


def mapobs(f: Callable, data: Any) -> MappedData:
    """MLUtils' `mapobs(f, data)`: a container whose observations are `f` of those of `data`, computed when
    drawn (`getobs(mapobs(f, X), i) == f(getobs(X, i))`)."""
    return MappedData(f, data)


def obsview(data: Any, idx: Any = None) -> Any:
    """MLUtils' `obsview(data, idx)`: the observations `idx` (0-based) of `data`, keeping the observation
    axis (a JAX array is immutable, so a copy is as good as a view); without `idx`, `data`."""
    if idx is None:
        return data
    if isinstance(idx, (int, np.integer)):
        idx = [int(idx)]
    return getobs(data, idx if isinstance(idx, slice) else np.asarray(idx, dtype=np.int64).reshape(-1))


def filterobs(f: Callable, data: Any) -> Any:
    """MLUtils' `filterobs(f, data)`: the observations `x` of `data` with `f(x)` true, in order."""
    keep = [i for i in range(numobs(data)) if f(getobs(data, i))]
    return obsview(data, np.asarray(keep, dtype=np.int64))


def joinobs(*datas: Any) -> Any:
    """MLUtils' `joinobs(datas...)`: one container with the observations of each in turn (arrays joined
    along the last axis, lists concatenated, tuples and dicts part by part)."""
    if not datas:
        raise ValueError("joinobs needs at least one data container")
    d0 = datas[0]
    if isinstance(d0, dict):
        return type(d0)((k, joinobs(*(d[k] for d in datas))) for k in d0)
    if isinstance(d0, tuple):
        parts = [joinobs(*(d[i] for d in datas)) for i in range(len(d0))]
        return type(d0)(*parts) if hasattr(d0, "_fields") else tuple(parts)
    if _is_array(d0):
        return jnp.concatenate([jnp.asarray(d) for d in datas], axis=-1)
    return [x for d in datas for x in (d[i] for i in range(numobs(d)))]
