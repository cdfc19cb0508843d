"""NNlib's `dot_product_attention`, `dot_product_attention_scores` and `make_causal_mask`.

Layout is NNlib's: `q` is `(qk_dim, q_len, batch...)`, `k` is `(qk_dim, kv_len, batch...)`, `v` is
`(v_dim, kv_len, batch...)`; any number of batch dims (or none). The scores `alpha` are
`(kv_len, q_len, nheads, batch...)`, softmax-normalised over axis 0 (the kv axis). Heads are contiguous
blocks of features: head `h` (0-based) owns features `h*d : (h+1)*d` with `d = dim // nheads`, which is
Julia's column-major `reshape(x, d, nheads, ...)`.

`bias` and `mask` broadcast as in Julia: their dims align with the FIRST dims of the scores, so a
`(kv_len, q_len)` mask applies to every head and batch. Masked entries (`mask == False`) become `-Inf`
before the softmax.

```python
>>> q, k, v = jnp.ones((8, 5, 2)), jnp.ones((8, 7, 2)), jnp.ones((6, 7, 2))
>>> y, a = dot_product_attention(q, k, v, nheads=2)
>>> y.shape, a.shape
((6, 5, 2), (7, 5, 2, 2))

```
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import DimensionMismatch
from .activations import _float
from .axes import axis
from .softmax import softmax

__all__ = ["dot_product_attention", "dot_product_attention_scores", "make_causal_mask"]


def _jl_pad(a: jax.Array, ndim: int) -> jax.Array:
    """Append singleton dims so that numpy broadcasting aligns `a` with the FIRST dims, as Julia does."""
    if a.ndim > ndim:
        raise DimensionMismatch(f"array of size {a.shape} has more dims than the attention scores ({ndim})")
    return a.reshape(a.shape + (1,) * (ndim - a.ndim))


def _shapes(q, k, v) -> str:
    return f"size(q) = {tuple(q.shape)}, size(k) = {tuple(k.shape)}, size(v) = {tuple(v.shape)}"


def _check(q, k, v, nheads: int) -> None:
    if not isinstance(nheads, (int, np.integer)) or isinstance(nheads, bool) or nheads <= 0:
        raise ValueError(f"dot_product_attention: nheads must be a positive integer, got {nheads!r}")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise DimensionMismatch(
            "dot_product_attention: q, k, v need at least 2 dims (features, length, batch...); "
            + _shapes(q, k, v)
        )
    if not q.ndim == k.ndim == v.ndim or not q.shape[2:] == k.shape[2:] == v.shape[2:]:
        raise DimensionMismatch(
            f"dot_product_attention: batch dimensions have to be the same; {_shapes(q, k, v)}"
        )
    if any(x.shape[0] % nheads for x in (q, k, v)):
        raise DimensionMismatch(
            f"dot_product_attention: first dimension of q, k and v must be divisible by nheads = {nheads}; "
            f"{_shapes(q, k, v)}"
        )
    if q.shape[0] != k.shape[0]:
        raise DimensionMismatch(
            f"dot_product_attention: first dimension of q and k has to be the same; {_shapes(q, k, v)}"
        )
    if k.shape[1] != v.shape[1]:
        raise DimensionMismatch(
            f"dot_product_attention: second dimension of k and v has to be the same; {_shapes(q, k, v)}"
        )


def _split_heads(x: jax.Array, nheads: int) -> jax.Array:
    """`(dim, len, batch...) -> (nheads, dim // nheads, len, batch...)`: head-major, i.e. Julia's
    column-major `reshape(x, dim ÷ nheads, nheads, ...)` with the two head axes swapped."""
    return x.reshape((nheads, x.shape[0] // nheads) + x.shape[1:])


def dot_product_attention_scores(
    q: jax.Array,
    k: jax.Array,
    bias: jax.Array | None = None,
    *,
    fdrop: Callable | None = None,
    mask: jax.Array | None = None,
) -> jax.Array:
    """NNlib's `dot_product_attention_scores(q, k, [bias]; fdrop, mask)` on head-split inputs in NNlib's
    layout: `q` `(d, nheads, q_len, batch...)`, `k` `(d, nheads, kv_len, batch...)`.

    Returns `alpha` of shape `(kv_len, q_len, nheads, batch...)`: `softmax(k'q / sqrt(d) + bias)` over
    axis 0, with `mask == False` entries set to `-Inf` first, then `fdrop` applied.

    ```python
    >>> q = k = jnp.ones((4, 2, 5, 2))   # (d, nheads, length, batch)
    >>> alpha = dot_product_attention_scores(q, k)
    >>> alpha.shape   # (kv_len, q_len, nheads, batch)
    (5, 5, 2, 2)
    >>> alpha[:, 0, 0, 0]   # equal keys: uniform weights
    Array([0.2, 0.2, 0.2, 0.2, 0.2], dtype=float32)

    ```
    """
    q, k = _float(q), _float(k)
    d = q.shape[0]
    q = q / jnp.sqrt(jnp.asarray(d, q.dtype))
    logits = jnp.einsum("dhi...,dhj...->jih...", q, k)
    if bias is not None:
        logits = logits + _jl_pad(jnp.asarray(bias), logits.ndim)
    if mask is not None:
        m = _jl_pad(jnp.asarray(mask).astype(bool), logits.ndim)
        logits = jnp.where(m, logits, jnp.asarray(-jnp.inf, logits.dtype))
    alpha = softmax(logits, dims=0)
    return alpha if fdrop is None else fdrop(alpha)


def dot_product_attention(
    q: jax.typing.ArrayLike,
    k: jax.typing.ArrayLike,
    v: jax.typing.ArrayLike,
    bias: jax.typing.ArrayLike | None = None,
    *,
    fdrop: Callable | None = None,
    mask: jax.typing.ArrayLike | None = None,
    nheads: int = 1,
) -> tuple[jax.Array, jax.Array]:
    """Multi-head attention, NNlib's `dot_product_attention(q, k, v, [bias]; fdrop, mask, nheads)`.

    - `q`: `(qk_dim, q_len, batch...)`, `k`: `(qk_dim, kv_len, batch...)`, `v`: `(v_dim, kv_len, batch...)`.
    - `bias`: `None` or an array broadcastable (Julia-style, leading dims) to
      `(kv_len, q_len, nheads, batch...)`, added to the scores before the softmax.
    - `mask`: `None` or a bool array broadcastable the same way; `False` entries get score `-Inf`.
    - `fdrop`: applied to the scores after the softmax (a dropout function); default none.
    - `nheads`: number of heads; every first dimension must be divisible by it.

    Returns `(y, alpha)` with `y` of size `(v_dim, q_len, batch...)` and `alpha` of size
    `(kv_len, q_len, nheads, batch...)`. Size mismatches raise `DimensionMismatch` (a `ValueError`).

    ```python
    >>> q = k = v = jnp.ones((8, 5, 2))   # (dim, length, batch)
    >>> y, alpha = dot_product_attention(q, k, v, nheads=2)
    >>> y.shape, alpha.shape   # alpha: (kv_len, q_len, nheads, batch)
    ((8, 5, 2), (5, 5, 2, 2))
    >>> float(alpha[0, 0, 0, 0])   # equal keys: uniform weights 1/5
    0.2

    ```
    """
    q, k, v = _float(q), _float(k), _float(v)
    _check(q, k, v, nheads)
    qh, kh, vh = (_split_heads(x, nheads) for x in (q, k, v))
    alpha = dot_product_attention_scores(
        jnp.swapaxes(qh, 0, 1), jnp.swapaxes(kh, 0, 1), bias, fdrop=fdrop, mask=mask
    )
    y = jnp.einsum("jih...,hdj...->hdi...", alpha, vh)
    return y.reshape((v.shape[0],) + y.shape[2:]), alpha


def make_causal_mask(x: jax.typing.ArrayLike, dims: int = 1) -> jax.Array:
    """A bool `(len, len)` matrix `m` with `m[i, j] == (i <= j)`, `len = x.shape[dims]` (NNlib's
    `make_causal_mask(x; dims=2)`, 0-based here; `x` must have that axis, so a 1-D `x` needs `dims=0`).
    As a mask on scores `(kv_len, q_len, ...)` it lets query `j` see keys `i <= j` only.

    >>> make_causal_mask(jnp.ones((4, 3, 2)))   # 3x3, upper triangular
    Array([[ True,  True,  True],
           [False,  True,  True],
           [False, False,  True]], dtype=bool)
    """
    shape = np.shape(x)
    n = shape[axis("make_causal_mask", dims, shape)]
    return jnp.triu(jnp.ones((n, n), dtype=bool))
