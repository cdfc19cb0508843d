"""NNlib's `normalise`: zero mean and unit variance along `dims`, the core of `LayerNorm`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .softmax import Dims, _prepare


def normalise(x: jax.typing.ArrayLike, dims: Dims = -1, eps: float = 1e-5) -> jax.Array:
    """`(x .- μ) ./ sqrt.(σ² .+ eps)` with the mean `μ` and biased variance `σ²` over `dims`.

    NNlib's `normalise(x; dims=ndims(x), eps=1f-5)`, which `Flux.normalise` forwards to. `dims` is
    0-based and defaults to the last axis, as Flux's does; it may be a tuple, or `None` for all axes (an
    axis `x` does not have raises).
    Integer input is promoted to float. `normalise(jnp.array([90, 100, 110, 130, 70]))` is
    `[-0.5, 0, 0.5, 1.5, -1.5]` (shape `(5,)`).

    ```python
    >>> normalise(jnp.array([1.0, 2.0, 3.0]))
    Array([-1.2247356,  0.       ,  1.2247356], dtype=float32)
    >>> normalise(jnp.array([[1.0, 2.0], [3.0, 6.0]]), dims=0)   # each column
    Array([[-0.999995  , -0.99999875],
           [ 0.999995  ,  0.99999875]], dtype=float32)

    ```
    """
    if jnp.ndim(x) == 0:
        raise TypeError(f"normalise(x) expects an array to normalise along dims, got the number {x!r}")
    x, axes = _prepare("normalise", x, dims)
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps)
