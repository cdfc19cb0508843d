"""MLUtils' arrays like another: `zeros_like`, `ones_like`, `fill_like`, `trues_like`, `falses_like`,
`rand_like`, `randn_like`, each with MLUtils' optional `[dtype], [shape]` arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_int
from ..core.layer import is_array
from ..random import draw_key

__all__ = ["zeros_like", "ones_like", "fill_like", "trues_like", "falses_like", "rand_like", "randn_like"]


def _like(x: Any, args: tuple, what: str) -> tuple[Any, tuple[int, ...]]:
    """MLUtils' optional `[element_type], [dims]` arguments: a dtype, a shape (an int or a tuple), or both."""
    x = jnp.asarray(x) if not is_array(x) else x
    dtype, shape = x.dtype, tuple(x.shape)
    rest = list(args)
    if rest and not isinstance(rest[0], (int, np.integer, tuple, list)):
        dtype = jnp.dtype(rest.pop(0))
    if rest:
        sz = rest.pop(0)
        shape = (sz,) if isinstance(sz, (int, np.integer)) else tuple(sz)
        if not all(is_int(s) and s >= 0 for s in shape):
            raise TypeError(f"{what}(x, [dtype], [shape]): the shape must be non-negative ints, got {sz!r}")
        shape = tuple(int(s) for s in shape)
    if rest:
        raise TypeError(f"{what}(x, [dtype], [shape]): too many arguments")
    return dtype, shape


def zeros_like(x: Any, *args: Any) -> jax.Array:
    """Zeros of `x`'s dtype and shape, or the given ones: `zeros_like(x, [dtype], [shape])` (MLUtils).

    ```python
    >>> zeros_like(jnp.ones((2, 3), dtype=jnp.float16)).dtype
    dtype('float16')
    >>> zeros_like(jnp.ones(3), (2, 2))
    Array([[0., 0.],
           [0., 0.]], dtype=float32)

    ```
    """
    dtype, shape = _like(x, args, "zeros_like")
    return jnp.zeros(shape, dtype)


def ones_like(x: Any, *args: Any) -> jax.Array:
    """Ones of `x`'s dtype and shape, or the given ones: `ones_like(x, [dtype], [shape])` (MLUtils).

    ```python
    >>> ones_like(jnp.zeros(3))
    Array([1., 1., 1.], dtype=float32)
    >>> ones_like(jnp.zeros(3), jnp.int32, (2,))
    Array([1, 1], dtype=int32)

    ```
    """
    dtype, shape = _like(x, args, "ones_like")
    return jnp.ones(shape, dtype)


def fill_like(x: Any, val: Any, *args: Any) -> jax.Array:
    """`val` everywhere, `x`'s dtype and shape or the given ones: `fill_like(x, val, [dtype], [shape])`.

    ```python
    >>> fill_like(jnp.zeros((2, 2)), 7.0)
    Array([[7., 7.],
           [7., 7.]], dtype=float32)
    >>> fill_like(jnp.zeros(3), 1, jnp.int32, (2,))
    Array([1, 1], dtype=int32)

    ```
    """
    dtype, shape = _like(x, args, "fill_like")
    return jnp.full(shape, val, dtype)


def trues_like(x: Any, *shape: Any) -> jax.Array:
    """`fill_like(x, True, bool, [shape])` (MLUtils' `trues_like`).

    ```python
    >>> trues_like(jnp.zeros(3))
    Array([ True,  True,  True], dtype=bool)
    >>> trues_like(jnp.zeros(3), (1, 2))
    Array([[ True,  True]], dtype=bool)

    ```
    """
    return fill_like(x, True, jnp.bool_, *shape)


def falses_like(x: Any, *shape: Any) -> jax.Array:
    """`fill_like(x, False, bool, [shape])` (MLUtils' `falses_like`).

    ```python
    >>> falses_like(jnp.zeros((1, 2)))
    Array([[False, False]], dtype=bool)

    ```
    """
    return fill_like(x, False, jnp.bool_, *shape)


def _random_like(draw: Callable, x: Any, args: tuple, rng: Any, what: str) -> jax.Array:
    dtype, shape = _like(x, args, what)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{what}: draws floats; got dtype {dtype} (pass a float dtype: {what}(x, jnp.float32))")
    return draw(draw_key(rng, what), shape, dtype)


def rand_like(x: Any, *args: Any, rng: Any = None) -> jax.Array:
    """Uniform `[0, 1)` draws of `x`'s dtype and shape, or the given ones: `rand_like(x, [dtype], [shape])`
    (MLUtils). `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key.

    ```python
    >>> r = rand_like(jnp.zeros((2, 3)))
    >>> r.shape, r.dtype, bool(jnp.all((0 <= r) & (r < 1)))
    ((2, 3), dtype('float32'), True)

    ```
    """
    return _random_like(jax.random.uniform, x, args, rng, "rand_like")


def randn_like(x: Any, *args: Any, rng: Any = None) -> jax.Array:
    """Standard normal draws of `x`'s dtype and shape, or the given ones: `randn_like(x, [dtype], [shape])`
    (MLUtils). `rng`: `None` (the global stream, `seed_`), an int seed or a PRNG key.

    ```python
    >>> r = randn_like(jnp.zeros((2, 3)), rng=0)   # an int seed, or a PRNG key
    >>> r.shape, r.dtype
    ((2, 3), dtype('float32'))

    ```
    """
    return _random_like(jax.random.normal, x, args, rng, "randn_like")
