"""Flux's `EmbeddingBag` (`src/layers/basic.jl`): an `Embedding` that reduces each bag of indices to one vector."""

from __future__ import annotations

import builtins
import statistics
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_int, positive_ints
from ..compiled.pure import concrete
from ..core.layer import is_array, layer
from ..errors import DimensionMismatch, describe
from ..init import randn32
from .dense_like import Embedding

__all__ = ["EmbeddingBag"]

# Flux's reductions (any `f(x; dims=2)`), as `f(y, axis=1)` here; Julia's names and Python's builtins map to jnp's.
_REDUCTIONS = {
    "mean": jnp.mean, statistics.mean: jnp.mean, np.mean: jnp.mean, jnp.mean: jnp.mean,
    "sum": jnp.sum, builtins.sum: jnp.sum, np.sum: jnp.sum, jnp.sum: jnp.sum,
    "maximum": jnp.max, "max": jnp.max, builtins.max: jnp.max, np.max: jnp.max, jnp.max: jnp.max,
    "minimum": jnp.min, "min": jnp.min, builtins.min: jnp.min, np.min: jnp.min, jnp.min: jnp.min,
}


def _reduction(f) -> Callable:
    try:
        g = _REDUCTIONS.get(f)
    except TypeError:
        g = None
    if g is not None:
        return g
    if isinstance(f, str) or not callable(f):
        raise TypeError(f"EmbeddingBag: reduction must be mean, sum, maximum or a function f(x, axis=1), got {f!r}")
    return f


def _concrete(x) -> bool:
    return concrete(x)  # (in a compiled eager call: the call goes op by op, where the check runs)


@layer(trainable=("weight",))
class EmbeddingBag:
    """Flux's `EmbeddingBag(in => out, reduction=mean; init=randn32)`: an `Embedding` table (`weight` of
    shape `(out, in)`) that maps a "bag" of indices to the `reduction` (`mean`, `sum`, `maximum`, or any
    `f(x, axis=1)`) of their embedding vectors. Written `EmbeddingBag(in, out)`, `EmbeddingBag((in, out), jnp.sum)`
    or `EmbeddingBag(W)` / `EmbeddingBag(W, reduction)`. Indices are 0-based, as `Embedding`'s:

    - one bag: a 1-D integer array or a list of ints gives `(out,)`;
    - an integer array of shape `(n, rest...)` is a bag along its first axis per column, giving `(out, rest...)`
      (Flux's `mapslices(eb, x; dims=1)`); so a matrix holds one bag per column;
    - a list of bags (lists/arrays of possibly different lengths; nested lists nest) gives `(out, len(bags), ...)`;
    - `eb(data, offsets)`: a vector of indices split into bags starting at `offsets` (PyTorch's input/offsets,
      Flux's `eb(data, at)`), 0-based: `offsets[0] == 0`, strictly increasing, each `< len(data)`;
    - a bool one-hot matrix `(in, n)` (`onehotbatch`) is one bag; `(in, n, rest...)` a bag per column.

    A single index (or a one-hot vector) is not a bag and raises `TypeError`, as Flux's error.

    ```python
    >>> eb = EmbeddingBag(26, 3, init=identity_init(gain=100))
    >>> eb([[2, 0, 2], [1, 0]])      # two bags: [[33.33, 50], [0, 50], [66.67, 0]]
    Array([[33.3333, 50.      ],
           [ 0.      , 50.      ],
           [66.6667 ,  0.      ]], dtype=float32)

    ```
    """

    def __init__(self, a, b=None, reduction=None, *, init: Callable = randn32, rng=None):
        if is_array(a):
            if reduction is not None:
                raise TypeError("EmbeddingBag(W, reduction) takes two positional arguments")
            reduction = b
            weight = jnp.asarray(a)
            if weight.ndim != 2:
                raise ValueError(f"EmbeddingBag(W): W must be a matrix (out, in), got shape {weight.shape}")
        else:
            if isinstance(a, tuple):
                if reduction is not None:
                    raise TypeError("EmbeddingBag((in, out), reduction) takes two positional arguments")
                (n_in, n_out), reduction = a, b
            else:
                n_in, n_out = a, b
            if not (is_int(n_in) and is_int(n_out)):
                raise TypeError(f"EmbeddingBag needs integer sizes in => out, got {n_in!r} => {n_out!r}")
            n_in, n_out = positive_ints("EmbeddingBag", n_in, n_out)
            weight = init(n_out, n_in, rng=rng) if rng is not None else init(n_out, n_in)
        self.weight = weight
        self.reduction = _reduction(jnp.mean if reduction is None else reduction)

    # ------------------------------------------------------------------------------------------

    def _reduce(self, y: jax.Array) -> jax.Array:
        return self.reduction(y, axis=1)

    def __call__(self, x, offsets=None) -> jax.Array:
        if offsets is not None:
            return self._split(x, offsets)
        if is_int(x) or isinstance(x, bool):
            raise TypeError("EmbeddingBag expects an array of indices, not just one")
        if isinstance(x, (list, tuple)):
            if all(is_int(v) for v in x):
                return self._bag(np.asarray(x, dtype=np.int64).reshape(len(x)))
            return jnp.stack([self(v) for v in x], axis=1) if x else self._empty()
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"Layer {self._show()} expects bags of integer indices, got {type(x).__name__} {x!r:.60}")
        return self._bag(x)

    def _empty(self) -> jax.Array:
        return jnp.zeros((self.weight.shape[0], 0), self.weight.dtype)

    def _bag(self, x) -> jax.Array:
        if x.ndim == 0:
            raise TypeError("EmbeddingBag expects an array of indices, not just one")
        if x.dtype == bool or jnp.issubdtype(x.dtype, jnp.bool_):
            if x.ndim == 1:
                raise TypeError("EmbeddingBag not defined for a one-hot vector")
            n_in = self.weight.shape[1]
            if x.shape[0] != n_in:
                raise DimensionMismatch(
                    f"layer {self._show()} expects one-hot input with size(input, 1) == {n_in}, but got {describe(x)}"
                )
        elif not jnp.issubdtype(x.dtype, jnp.integer):
            raise TypeError(f"Layer {self._show()} expects integer indices (0-based) or one-hot bools, got {describe(x)}")
        return self._reduce(Embedding(self.weight)(x))

    def _split(self, data, offsets) -> jax.Array:
        """Flux's `eb(data, at)` = `eb(_splitat(data, at))`, with 0-based offsets."""
        def vec(v):
            if is_array(v):
                return v
            v = np.asarray(v)
            return v.astype(np.int64) if v.size == 0 else v

        data, at = vec(data), vec(offsets)
        ints = jnp.issubdtype(at.dtype, jnp.integer) and jnp.issubdtype(data.dtype, jnp.integer)
        if data.ndim != 1 or at.ndim != 1 or not ints:
            raise TypeError(
                f"EmbeddingBag(data, offsets) expects two integer vectors, got shapes {data.shape} and {at.shape}"
            )
        if _concrete(at):
            a = np.asarray(at)
            if a.size == 0 or a[0] != 0:
                raise ValueError("EmbeddingBag: the first element in offsets must be 0 (0-based; Flux's at[1] == 1)")
            if a[-1] > data.shape[0] - 1:
                raise ValueError(f"EmbeddingBag: the last element in offsets must be at most {data.shape[0] - 1}, len(data) - 1")
            if np.any(np.diff(a) <= 0):
                raise ValueError("EmbeddingBag: offsets must be monotonically increasing with no duplicates")
            if self.reduction not in (jnp.mean, jnp.sum, jnp.max, jnp.min) and _concrete(data):
                bounds = [*a.tolist(), data.shape[0]]
                return jnp.stack([self._bag(data[bounds[i]:bounds[i + 1]]) for i in range(len(a))], axis=1)
        if self.reduction not in (jnp.mean, jnp.sum, jnp.max, jnp.min):
            raise TypeError("EmbeddingBag(data, offsets) inside jit needs reduction mean, sum, maximum or minimum")
        # segment reduction: bag b holds data[at[b] : at[b+1]]
        nbags = at.shape[0]
        seg = jnp.searchsorted(at, jnp.arange(data.shape[0]), side="right") - 1
        y = Embedding(self.weight)(data).T  # (n, out)
        if self.reduction is jnp.max:
            out = jax.ops.segment_max(y, seg, nbags)
        elif self.reduction is jnp.min:
            out = jax.ops.segment_min(y, seg, nbags)
        else:
            out = jax.ops.segment_sum(y, seg, nbags)
            if self.reduction is jnp.mean:
                out = out / jax.ops.segment_sum(jnp.ones_like(seg, y.dtype), seg, nbags)[:, None]
        return out.T

    def _show(self) -> str:
        return f"EmbeddingBag({self.weight.shape[1]} => {self.weight.shape[0]})"
