"""softmax, logsoftmax and logsumexp along Flux's `dims`, written 0-based.

Flux's default `dims=1` (the first, feature axis) is `dims=0` here; `dims` may be an int, a
tuple of ints, or `None` for all axes (Julia's `dims=:`). Results keep the reduced axes, as
Julia's do. An axis `x` does not have raises a `ValueError` (`softmax(x, dims=2)` on a matrix;
Julia's `dims=2` is `dims=1` here), never wraps round to another axis. Like NNlib, a slice whose
maximum is `+Inf` gives probability shared equally by its `+Inf` entries (`softmax([Inf, 1.0]) ==
[1, 0]`), never NaN.

Example: `softmax(jnp.ones((10, 32)))` has shape `(10, 32)` and each column sums to 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from .activations import _float
from .axes import axes

Dims = int | Sequence[int] | None

_NUMBER_ERROR = (
    "`{f}(x)` called with a number, but it expects an array. Usually this is because a layer "
    "like `Dense(3, 4, softmax)` is broadcasting it like an activation function; `softmax` needs "
    "to be outside the layer: `Chain(Dense(3, 4), softmax)`."
)


def _prepare(f: str, x, dims: Dims) -> tuple[jax.Array, tuple[int, ...]]:
    """`x` as a float array and the distinct axes `dims` names in it (an axis it lacks raises)."""
    x = _float(x)
    if x.ndim == 0:
        raise TypeError(_NUMBER_ERROR.format(f=f))
    return x, tuple(sorted(set(axes(f, dims, x.shape))))


def _shifted(x: jax.Array, axes: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
    """`x - max(x)` made safe: slices with max `+Inf` map `+Inf -> 0` and the rest to `-Inf`.

    Returns the shifted array and a mask of the slices whose maximum was `+Inf`.
    """
    m = jax.lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    inf_slice = m == jnp.inf
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))
    z = jnp.where(inf_slice, jnp.zeros_like(x), x) - m
    z_inf = jnp.where(x == jnp.inf, jnp.zeros_like(x), jnp.full_like(x, -jnp.inf))
    return jnp.where(inf_slice, z_inf, z), inf_slice


def softmax(x: jax.typing.ArrayLike, dims: Dims = 0) -> jax.Array:
    """`softmax(x; dims) = exp.(x) ./ sum(exp.(x); dims)`, computed as `exp(x - max)`.

    `softmax(jnp.array([1., 2., 3.]))` is `[0.0900306, 0.2447285, 0.6652410]`.

    ```python
    >>> softmax(jnp.array([1.0, 2.0, 3.0]))   # NNlib's docs: [0.0900306, 0.244728, 0.665241]
    Array([0.09003057, 0.24472848, 0.66524094], dtype=float32)
    >>> softmax(jnp.array([[1.0, 2.0], [3.0, 3.0]]), dims=1)   # Julia's dims=2: along each row
    Array([[0.26894143, 0.7310586 ],
           [0.5       , 0.5       ]], dtype=float32)

    ```
    """
    x, axes = _prepare("softmax", x, dims)
    e = jnp.exp(_shifted(x, axes)[0])
    return e / jnp.sum(e, axis=axes, keepdims=True)


def logsoftmax(x: jax.typing.ArrayLike, dims: Dims = 0) -> jax.Array:
    """`logsoftmax(x; dims) = x .- log.(sum(exp.(x); dims))`, computed stably; `(m, n) -> (m, n)`.

    ```python
    >>> logsoftmax(jnp.array([1.0, 2.0, 3.0]))
    Array([-2.407606  , -1.4076059 , -0.40760595], dtype=float32)

    ```
    """
    x, axes = _prepare("logsoftmax", x, dims)
    z = _shifted(x, axes)[0]
    return z - jnp.log(jnp.sum(jnp.exp(z), axis=axes, keepdims=True))


def grad_softmax(dy: jax.typing.ArrayLike, y: jax.typing.ArrayLike, dims: Dims = 0) -> jax.Array:
    """NNlib's `∇softmax(dy, y; dims)`: the gradient of `softmax` at its output `y = softmax(x, dims)`
    for the cotangent `dy`, `y .* (dy .- sum(dy .* y; dims))`; `(m, n), (m, n) -> (m, n)`.

    ```python
    >>> x = jnp.array([1.0, 2.0, 3.0])
    >>> dy = jnp.array([1.0, 0.0, 0.0])
    >>> grad_softmax(dy, softmax(x))   # as jax.vjp(softmax, x)[1](dy)[0]
    Array([ 0.08192507, -0.02203305, -0.05989202], dtype=float32)

    ```
    """
    dy, y = jnp.asarray(dy), jnp.asarray(y)
    axes = _prepare("grad_softmax", y, dims)[1]
    dx = dy * y
    return dx - y * jnp.sum(dx, axis=axes, keepdims=True)


def grad_logsoftmax(dy: jax.typing.ArrayLike, y: jax.typing.ArrayLike, dims: Dims = 0) -> jax.Array:
    """NNlib's `∇logsoftmax(dy, y; dims)`: the gradient of `logsoftmax` at its output
    `y = logsoftmax(x, dims)` for the cotangent `dy`, `dy .- sum(dy; dims) .* exp.(y)`.

    ```python
    >>> x = jnp.array([1.0, 2.0, 3.0])
    >>> dy = jnp.array([1.0, 0.0, 0.0])
    >>> grad_logsoftmax(dy, logsoftmax(x))   # as jax.vjp(logsoftmax, x)[1](dy)[0]
    Array([ 0.90996945, -0.24472849, -0.66524094], dtype=float32)

    ```
    """
    dy, y = jnp.asarray(dy), jnp.asarray(y)
    axes = _prepare("grad_logsoftmax", y, dims)[1]
    return dy - jnp.sum(dy, axis=axes, keepdims=True) * jnp.exp(y)


def logsumexp(x: jax.typing.ArrayLike, dims: Dims = None) -> jax.Array:
    """`logsumexp(x; dims) = log.(sum(exp.(x); dims))`, stable; `dims=None` returns a scalar.

    With `dims` the reduced axes are kept (size 1), as NNlib. A slice containing `+Inf` gives
    `+Inf` (NNlib gives NaN there).

    ```python
    >>> logsumexp(jnp.array([1.0, 2.0, 3.0]))
    Array(3.407606, dtype=float32)
    >>> logsumexp(jnp.array([[1.0, 2.0], [3.0, 4.0]]), dims=0)   # keeps the reduced axis, as Julia
    Array([[3.126928, 4.126928]], dtype=float32)

    ```
    """
    x, axes = _prepare("logsumexp", x, dims)
    m = jax.lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))
    y = m + jnp.log(jnp.sum(jnp.exp(x - m), axis=axes, keepdims=True))
    return y.reshape(()) if dims is None else y


__all__ = ["softmax", "logsoftmax", "logsumexp"]
