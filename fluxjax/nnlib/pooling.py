"""NNlib's pooling (`maxpool`, `meanpool`, `lpnormpool`) in Flux's layout, on `lax.reduce_window`.

`x` is `(spatial..., C, N)`; the window `k` covers the spatial dims only. `stride` defaults to
`k`; `pad` is an int, an N-tuple or a 2N-tuple `(lo1, hi1, ...)` as for `conv`; `dilation` spaces
the window's elements (NNlib's `PoolDims(x, k; dilation)`). The output size is
`fld(n + lo + hi - (k-1)*d - 1, s) + 1` per spatial dim. A `PoolDims` may stand in place of `k` and
the keywords.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._layout import from_last, to_last
from .conv import IntOrTuple, expand, pad_pairs
from .dims import PoolDims, pool_keywords

Window = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]


def _window(x: jax.Array, k: IntOrTuple | PoolDims, stride: IntOrTuple | None, pad: IntOrTuple,
            dilation: IntOrTuple, what: str) -> Window:
    """`reduce_window`'s window, strides, padding and window dilation for the channels-last
    `to_last(x)` (see `_layout.py`), from the keywords or from a `PoolDims` in place of `k`."""
    if x.ndim < 3:
        raise ValueError(
            f"DimensionMismatch: {what} expects x of rank >= 3 (spatial..., C, N), got {x.shape}"
        )
    if isinstance(k, PoolDims):
        k, kw = pool_keywords(k, what, x.shape, stride=stride, pad=pad, dilation=dilation)
        stride, pad, dilation = kw["stride"], kw["pad"], kw["dilation"]
    n = x.ndim - 2
    ks = expand(k, n, "kernel size")
    ss = ks if stride is None else expand(stride, n, "stride")
    return (1, *ks, 1), (1, *ss, 1), ((0, 0), *pad_pairs(pad, n), (0, 0)), (1, *expand(dilation, n, "dilation"), 1)


def _sum(x: jax.Array, w: Window) -> jax.Array:
    dims, strides, padding, dil = w
    return lax.reduce_window(x, np.array(0, x.dtype), lax.add, dims, strides, padding, window_dilation=dil)


def _float(x: jax.typing.ArrayLike) -> jax.Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def maxpool(
    x: jax.typing.ArrayLike, k: IntOrTuple | PoolDims, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None,
    dilation: IntOrTuple = 1,
) -> jax.Array:
    """Maximum over each window `k` (padding counts as `-Inf`); NNlib's `maxpool(x, pdims)` with a
    `PoolDims` in place of `k` and the keywords.

    `maxpool(jnp.ones((10, 10, 3, 2)), (2, 2)).shape == (5, 5, 3, 2)`.

    ```python
    >>> x = jnp.arange(16.0).reshape(4, 4, 1, 1)   # WHCN
    >>> maxpool(x, (2, 2))[:, :, 0, 0]
    Array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    >>> maxpool(x, (3, 3), pad=1, stride=1).shape
    (4, 4, 1, 1)

    ```
    """
    x = jnp.asarray(x)
    dims, strides, padding, dil = _window(x, k, stride, pad, dilation, "maxpool")
    # The init value must be a concrete scalar for JAX to use its differentiable max-window rule.
    init = np.array(-np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min, x.dtype)
    if any(d != 1 for d in dil):
        return from_last(_dilated_max(to_last(x), init, dims, strides, padding, dil))
    return from_last(lax.reduce_window(to_last(x), init, lax.max, dims, strides, padding, window_dilation=dil))


def _dilated_max(x: jax.Array, init: np.ndarray, dims, strides, padding, dil) -> jax.Array:
    """`reduce_window` max with a window dilation, which JAX cannot differentiate: the window's
    elements are strided slices of the padded `x`, stacked, and the first maximum is taken, so the
    gradient goes to that one element, as NNlib's `∇maxpool` sends it."""
    x = lax.pad(x, init, [(lo, hi, 0) for lo, hi in padding])
    out = [(n - (k - 1) * d - 1) // s + 1 for n, k, s, d in zip(x.shape, dims, strides, dil, strict=True)]
    slices = [
        lax.slice(x, [o * d for o, d in zip(offset, dil, strict=True)],
                  [o * d + (m - 1) * s + 1 for o, d, m, s in zip(offset, dil, out, strides, strict=True)], strides)
        for offset in itertools.product(*(range(k) for k in dims))
    ]
    stacked = jnp.stack(slices)
    return jnp.take_along_axis(stacked, jnp.argmax(stacked, axis=0)[None], axis=0)[0]


def meanpool(
    x: jax.typing.ArrayLike, k: IntOrTuple | PoolDims, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None,
    dilation: IntOrTuple = 1, count_include_pad: bool = True,
) -> jax.Array:
    """Mean over each window: `sum(window) / prod(k)`, padded zeros included (NNlib's default); a
    `PoolDims` may stand in place of `k` and the keywords.

    With `count_include_pad=False` the divisor is the number of in-bounds elements.
    `meanpool(jnp.ones((10, 10, 3, 2)), (2, 2)).shape == (5, 5, 3, 2)`.

    ```python
    >>> x = jnp.arange(16.0).reshape(4, 4, 1, 1)   # WHCN
    >>> meanpool(x, (2, 2))[:, :, 0, 0]
    Array([[ 2.5,  4.5],
           [10.5, 12.5]], dtype=float32)

    ```
    """
    x = _float(x)
    w = _window(x, k, stride, pad, dilation, "meanpool")
    total = _sum(to_last(x), w)
    if count_include_pad:
        return from_last(total / math.prod(w[0]))
    count = _sum(jnp.ones((1, *x.shape[:-2], 1), x.dtype), w)
    return from_last(total / jnp.maximum(count, 1))


def lpnormpool(
    x: jax.typing.ArrayLike, *args: Any, p: float | None = None, k: IntOrTuple | None = None, pad: IntOrTuple = 0,
    stride: IntOrTuple | None = None, dilation: IntOrTuple = 1,
) -> jax.Array:
    """Lp pooling: `(Σ_window x^p)^(1/p)` for `0 < p < Inf` (NNlib's `lpnormpool`, PyTorch's LPPool).

    `lpnormpool(x, p, k; pad, stride)` (`p` and `k` positional or by name) or NNlib's
    `lpnormpool(x, pdims, p=p)` with a `PoolDims`.
    `lpnormpool(x, 1, k) / prod(k) ≈ meanpool(x, k)`; shapes as `meanpool`.

    ```python
    >>> x = jnp.arange(16.0).reshape(4, 4, 1, 1)   # WHCN
    >>> lpnormpool(x, 2, (2, 2))[:, :, 0, 0]   # sqrt of the sum of squares per window
    Array([[ 6.4807405,  9.899495 ],
           [21.400934 , 25.337719 ]], dtype=float32)

    ```
    """
    p, k = _p_and_window(args, p, k, "lpnormpool")
    if not 0 < p < math.inf:
        raise ValueError(f"p value of Lp norm pool expects `0 < p < Inf`, but p is {p} now.")
    x = _float(x)
    total = _sum(to_last(x) ** p, _window(x, k, stride, pad, dilation, "lpnormpool"))
    return from_last(total ** (1 / p))


def _p_and_window(args: tuple, p: float | None, k: Any, what: str) -> tuple[float, Any]:
    """`(p, k)` from `(p, k)` given by position or by name, or from `(pdims,)` with the keyword `p`."""
    usage = f"{what} takes (x, p, k), (x, p=p, k=k) or (x, pdims, p=p)"
    if len(args) == 1 and isinstance(args[0], PoolDims):
        if p is None or k is not None:
            raise TypeError(usage)
        return p, args[0]
    if len(args) > 2 or (args and p is not None) or (len(args) == 2 and k is not None):
        raise TypeError(usage)
    p = args[0] if args else p
    k = args[1] if len(args) == 2 else k
    if p is None or k is None:
        raise TypeError(usage)
    return p, k


__all__ = ["maxpool", "meanpool", "lpnormpool"]
