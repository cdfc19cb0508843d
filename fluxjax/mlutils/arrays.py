"""MLUtils' array helpers, 0-based, observations on the last axis: reshaping (`unsqueeze`, `unstack`,
`chunk`, `rpad_constant`), sequences (`batchseq`, `batch_sequence`), `rescale` and `topk`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.layer import is_array
from ..data import batch
from ..nnlib.axes import axes, axis

__all__ = ["unsqueeze", "unstack", "chunk", "rpad_constant", "batchseq", "batch_sequence", "rescale", "topk"]


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
    ax = axis("unstack", dims, xs.shape)
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
    if is_array(x):
        ax = axis("chunk", dims, np.shape(x))
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
    ax = axes("rpad_constant", dims, x.shape)
    ns = [int(n)] * len(ax) if isinstance(n, (int, np.integer)) else [int(k) for k in n]
    if len(ns) != len(ax):
        raise ValueError(f"rpad_constant: {len(ns)} lengths for {len(ax)} dims")
    pads = [(0, 0)] * x.ndim
    for a, k in zip(ax, ns, strict=True):
        pads[a] = (0, max(k - x.shape[a], 0))
    return jnp.pad(x, pads, constant_values=jnp.asarray(val, x.dtype))


def batchseq(seqs: Sequence[Any], val: Any = 0) -> list[jax.Array]:
    """Turn `N` sequences (observations, i.e. time steps, along the last axis) into one sequence whose
    every element is a batch of `N`, short sequences padded with `val`; MLUtils' `batchseq`.

    ```python
    >>> batchseq([jnp.array([1, 2, 3]), jnp.array([4, 5])], 0)    # [[1, 4], [2, 5], [3, 0]]
    [Array([1, 4], dtype=int32), Array([2, 5], dtype=int32), Array([3, 0], dtype=int32)]

    >>> batchseq([list("hello"), list("hi")], "_")[2]              # characters: lists (char-rnn's getdata)
    ['l', '_']

    ```
    """
    if not seqs:
        raise ValueError("batchseq needs at least one sequence")
    if any(isinstance(x, str) or (isinstance(x, (list, tuple)) and any(isinstance(e, (str, bytes)) for e in x))
           for x in seqs):  # characters or strings: JAX has no such arrays, so lists of the steps
        n = max(len(x) for x in seqs)
        return [[x[i] if i < len(x) else val for x in seqs] for i in range(n)]
    xs = [_as_seq(x) for x in seqs]
    n = max(x.shape[-1] for x in xs)
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
    if isinstance(x, (list, tuple)) and x and is_array(x[0]):
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


def rescale(x: Any, dims: int = -1, eps: float = 1e-5) -> jax.Array:
    """Min-max scaling to `[0, 1]` along `dims` (0-based, default the last axis; a tuple allowed):
    `(x - min) / (max - min + eps)`, MLUtils' `rescale(x; dims, ϵ)`.

    ```python
    >>> rescale(jnp.array([1.0, 3.0, 5.0]))
    Array([0.        , 0.49999875, 0.9999975 ], dtype=float32)
    >>> rescale(jnp.array([[0.0, 10.0], [2.0, 4.0]]), dims=0)   # each column to [0, 1]
    Array([[0.        , 0.99999833],
           [0.999995  , 0.        ]], dtype=float32)

    ```
    """
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
    ax = axis("topk", dims, x.shape)
    if not 1 <= k <= x.shape[ax]:
        raise ValueError(f"topk: k must be within 1:{x.shape[ax]}, got {k}")
    order = jnp.argsort(jax.lax.stop_gradient(x), axis=ax, stable=True, descending=rev)
    inds = jax.lax.slice_in_dim(order, 0, k, axis=ax)
    return jnp.take_along_axis(x, inds, axis=ax), inds
