"""NNlib's `glu`, the gated linear unit."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .activations import sigmoid
from .axes import axis


def glu(x: jax.typing.ArrayLike, dims: int = 0) -> jax.Array:
    """`a .* sigmoid.(b)` with `a` and `b` the two halves of `x` along axis `dims` (0-based: NNlib's
    default `dim = 1` is `dims=0`; `-1` is the last axis), from "Language Modeling with Gated
    Convolutional Networks". `glu(jnp.ones((4, 3))).shape == (2, 3)`; the axis must exist in `x` and
    have even length.

    ```python
    >>> glu(jnp.array([1.0, 2.0, 0.0, 100.0]))   # [1, 2] .* sigmoid.([0, 100])
    Array([0.5, 2. ], dtype=float32)
    >>> glu(jnp.ones((3, 4)), 1).shape
    (3, 2)

    ```
    """
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise TypeError("glu(x, dims): x must be an array, got a number")
    ax = axis("glu", dims, x.shape)
    n = x.shape[ax]
    if n % 2:
        raise ValueError(f"glu: axis {dims} of x (shape {tuple(x.shape)}) has odd length {n}; it must split into two halves")
    a, b = jnp.split(x, 2, axis=ax)
    return a * sigmoid(b)
