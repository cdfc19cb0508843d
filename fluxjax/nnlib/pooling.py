"""NNlib's pooling (`maxpool`, `meanpool`, `lpnormpool`) in Flux's layout, on `lax.reduce_window`.

`x` is `(spatial..., C, N)`; the window `k` covers the spatial dims only. `stride` defaults to
`k`; `pad` is an int, an N-tuple or a 2N-tuple `(lo1, hi1, ...)` as for `conv`. The output size
is `fld(n + lo + hi - k, s) + 1` per spatial dim.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._layout import from_last, to_last
from .conv import IntOrTuple, expand, pad_pairs


def _window(x: jax.Array, k: IntOrTuple, stride: IntOrTuple | None, pad: IntOrTuple, what: str):
    if x.ndim < 3:
        raise ValueError(
            f"DimensionMismatch: {what} expects x of rank >= 3 (spatial..., C, N), got {x.shape}"
        )
    n = x.ndim - 2
    ks = expand(k, n, "kernel size")
    ss = ks if stride is None else expand(stride, n, "stride")
    # for the channels-last `to_last(x)` (see `_layout.py`)
    return (1, *ks, 1), (1, *ss, 1), ((0, 0), *pad_pairs(pad, n), (0, 0))


def maxpool(
    x: jax.typing.ArrayLike, k: IntOrTuple, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None
) -> jax.Array:
    """Maximum over each window `k` (padding counts as `-Inf`).

    `maxpool(jnp.ones((10, 10, 3, 2)), (2, 2)).shape == (5, 5, 3, 2)`.
    """
    x = jnp.asarray(x)
    dims, strides, padding = _window(x, k, stride, pad, "maxpool")
    # The init value must be a concrete scalar for JAX to use its differentiable max-window rule.
    init = np.array(-np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min, x.dtype)
    return from_last(lax.reduce_window(to_last(x), init, lax.max, dims, strides, padding))


def meanpool(
    x: jax.typing.ArrayLike, k: IntOrTuple, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None,
    count_include_pad: bool = True,
) -> jax.Array:
    """Mean over each window: `sum(window) / prod(k)`, padded zeros included (NNlib's default).

    With `count_include_pad=False` the divisor is the number of in-bounds elements.
    `meanpool(jnp.ones((10, 10, 3, 2)), (2, 2)).shape == (5, 5, 3, 2)`.
    """
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    dims, strides, padding = _window(x, k, stride, pad, "meanpool")
    total = lax.reduce_window(to_last(x), np.array(0, x.dtype), lax.add, dims, strides, padding)
    if count_include_pad:
        return from_last(total / math.prod(dims))
    ones = jnp.ones((1, *x.shape[:-2], 1), x.dtype)
    count = lax.reduce_window(ones, np.array(0, x.dtype), lax.add, dims, strides, padding)
    return from_last(total / jnp.maximum(count, 1))


def lpnormpool(
    x: jax.typing.ArrayLike, p: float, k: IntOrTuple, *, pad: IntOrTuple = 0,
    stride: IntOrTuple | None = None,
) -> jax.Array:
    """Lp pooling: `(Σ_window x^p)^(1/p)` for `0 < p < Inf` (NNlib's `lpnormpool`, PyTorch's LPPool).

    `lpnormpool(x, 1, k) / prod(k) ≈ meanpool(x, k)`; shapes as `meanpool`.
    """
    if not 0 < p < math.inf:
        raise ValueError(f"p value of Lp norm pool expects `0 < p < Inf`, but p is {p} now.")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    dims, strides, padding = _window(x, k, stride, pad, "lpnormpool")
    total = lax.reduce_window(to_last(x) ** p, np.array(0, x.dtype), lax.add, dims, strides, padding)
    return from_last(total ** (1 / p))


__all__ = ["maxpool", "meanpool", "lpnormpool"]
