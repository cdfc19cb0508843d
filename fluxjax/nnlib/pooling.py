"""NNlib's pooling (`maxpool`, `meanpool`, `lpnormpool`) in Flux's layout, on `lax.reduce_window`.

`x` is `(spatial..., C, N)`; the window `k` covers the spatial dims only. `stride` defaults to
`k`; `pad` is an int, an N-tuple or a 2N-tuple `(lo1, hi1, ...)` as for `conv`; `dilation` spaces
the window's elements (NNlib's `PoolDims(x, k; dilation)`). The output size is
`fld(n + lo + hi - (k-1)*d - 1, s) + 1` per spatial dim. A `PoolDims` may stand in place of `k` and
the keywords. As NNlib's `PoolDims`, the window times the dilation must fit in the padded input
(else `DimensionMismatch`, never an empty result) and `stride` and `dilation` are >= 1; a negative
`pad` crops, as NNlib's.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import DimensionMismatch
from ._layout import from_last, to_last
from .conv import IntOrTuple
from .dims import PoolDims, _check_spdf, expand, pool_keywords

Window = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]


def _window(x: jax.Array, k: IntOrTuple | PoolDims, stride: IntOrTuple | None, pad: IntOrTuple,
            dilation: IntOrTuple, what: str) -> Window:
    """`reduce_window`'s window, strides, padding and window dilation for the channels-last
    `to_last(x)` (see `_layout.py`), from the keywords or from a `PoolDims` in place of `k`."""
    if x.ndim < 3:
        raise DimensionMismatch(f"{what} expects x of rank >= 3 (spatial..., C, N), got {x.shape}")
    if isinstance(k, PoolDims):
        k, kw = pool_keywords(k, what, x.shape, stride=stride, pad=pad, dilation=dilation)
        stride, pad, dilation = kw["stride"], kw["pad"], kw["dilation"]
    n = x.ndim - 2
    ks = expand(k, n, "kernel size", what)
    s, p, d = _check_spdf(what, x.shape, ks, n, ks if stride is None else stride, pad, dilation)
    return (1, *ks, 1), (1, *s, 1), ((0, 0), *zip(p[::2], p[1::2], strict=True), (0, 0)), (1, *d, 1)


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
    w = _window(x, k, stride, pad, dilation, "maxpool")
    if jnp.issubdtype(x.dtype, jnp.floating):
        return from_last(_max_window(to_last(x), w))
    return from_last(_reduce_max(to_last(x), w, np.array(jnp.iinfo(x.dtype).min, x.dtype)))


def _reduce_max(x: jax.Array, w: Window, init: np.ndarray) -> jax.Array:
    dims, strides, padding, dil = w
    return lax.reduce_window(x, init, lax.max, dims, strides, padding, window_dilation=dil)


# NNlib's `∇maxpool` (src/impl/pooling_direct.jl) scans each window with the first spatial dim fastest
# (`for kd, kh, kw`), skipping padded positions, and sends all of `dy` to the first element equal to
# the maximum; a window whose maximum is `-Inf` (all padding or `-Inf`) sends nothing, as NNlib's
# maximum starts at `nextfloat(-Inf)` there. JAX's own rule for `reduce_window` max picks another
# element at ties (and cannot differentiate a window dilation), so the derivative is given here as a
# JVP (forward mode; reverse mode is its transpose): each output's tangent is that one element's.
# Windows of up to `_UNROLLED` elements are read as strided slices of the padded input, one per
# window offset; larger ones (global and adaptive pooling) by a `reduce_window` that carries each
# element's column-major position with its value and keeps the smaller position at ties.
_UNROLLED = 16


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _max_window(x: jax.Array, w: Window) -> jax.Array:
    """`reduce_window` max of the channels-last, floating `x` over the window `w`, padding `-Inf`."""
    return _reduce_max(x, w, np.array(-np.inf, x.dtype))


@_max_window.defjvp
def _max_window_jvp(w: Window, primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    (x,), (t,) = primals, tangents
    y = _max_window(x, w)
    first_max = _first_max_unrolled if math.prod(w[0]) <= _UNROLLED else _first_max_indexed
    return y, first_max(x, t, y, w)


def _offset_slices(x: jax.Array, w: Window, out: tuple[int, ...]) -> list[jax.Array]:
    """The padded `x` seen at each offset of the window, in NNlib's scan order (first spatial dim
    fastest): `out`-shaped strided slices."""
    dims, strides, _, dil = w
    offsets = [o[::-1] for o in itertools.product(*(range(k) for k in dims[::-1]))]
    return [
        lax.slice(x, [o * d for o, d in zip(offset, dil, strict=True)],
                  [o * d + (m - 1) * s + 1 for o, d, m, s in zip(offset, dil, out, strides, strict=True)], strides)
        for offset in offsets
    ]


def _first_max_unrolled(x: jax.Array, t: jax.Array, y: jax.Array, w: Window) -> jax.Array:
    """The tangent `t` at each window's first element equal to its maximum `y` (0 where `y` is `-Inf`
    or NaN): which offset that is, then a `select_n` among the offsets' slices of `t`. Padding
    (`-Inf`) can only equal a `y` of `-Inf`, so it is never chosen."""
    config = [(lo, hi, 0) for lo, hi in w[2]]
    xs = _offset_slices(lax.pad(x, np.array(-np.inf, x.dtype), config), w, y.shape)
    none = np.int32(len(xs))
    which = jnp.full(y.shape, none)
    for j in reversed(range(len(xs))):
        which = jnp.where(xs[j] == y, np.int32(j), which)
    which = jnp.where(y > -np.inf, which, none)
    ts = _offset_slices(lax.pad(t, np.array(0, t.dtype), config), w, y.shape)
    return lax.select_n(which, *ts, jnp.zeros_like(y))


def _first_max_indexed(x: jax.Array, t: jax.Array, y: jax.Array, w: Window) -> jax.Array:
    """As `_first_max_unrolled`, for large windows: a `reduce_window` over `(value, position)` pairs
    finds each window's maximum and, at ties, its smallest column-major position (NNlib's scan order
    within any window; NaN loses to everything, padding has the largest position); the tangent is
    gathered from there."""
    dims, strides, padding, dil = w
    space = x.shape[1:-1]
    col_strides = np.cumprod((1, *space[:-1]))
    iota = [lax.broadcasted_iota(np.int32, (1, *space, 1), a + 1) for a in range(len(space))]
    position = jnp.broadcast_to(sum(i * np.int32(c) for i, c in zip(iota, col_strides, strict=True)), x.shape)

    def first_max(a, b):
        (va, pa), (vb, pb) = a, b
        a_nan, b_nan = jnp.isnan(va), jnp.isnan(vb)
        first = pa < pb
        take_a = jnp.where(a_nan | b_nan, b_nan & (~a_nan | first), (va > vb) | ((va == vb) & first))
        return lax.select(take_a, va, vb), lax.select(take_a, pa, pb)

    init = (np.array(-np.inf, x.dtype), np.int32(np.iinfo(np.int32).max))
    m, pos = lax.reduce_window((x, position), init, first_max, dims, strides, padding, window_dilation=dil)
    found = (m == y) & (y > -np.inf)
    # The row-major position of (spatial...) in `x`, to gather from `t` reshaped to (N, prod(space), C).
    row_strides = np.cumprod((1, *space[:0:-1]))[::-1]
    flat = sum(((pos // np.int32(c)) % np.int32(n)) * np.int32(r)
               for c, n, r in zip(col_strides, space, row_strides, strict=True))
    flat = jnp.where(found, flat, 0).reshape(y.shape[0], -1, y.shape[-1])
    got = jnp.take_along_axis(t.reshape(t.shape[0], -1, t.shape[-1]), flat, axis=1, mode="clip")
    return jnp.where(found, got.reshape(y.shape), 0)


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
