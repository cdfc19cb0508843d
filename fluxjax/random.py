"""The global default RNG, as Flux's `Random.default_rng()`: `seed_(n)` makes runs reproducible.

Keys are raw `uint32[2]` JAX keys (`jax.random.PRNGKey`), so they are ordinary integer arrays:
never differentiated, trivially saved and loaded.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_key = None


def seed_(n: int) -> None:
    """Reset the global default key to `PRNGKey(n)` (Flux's `Random.seed!(n)`)."""
    global _key
    with jax.ensure_compile_time_eval():  # a concrete key, also when called inside a transformation
        _key = jax.random.PRNGKey(n)


def next_key() -> jax.Array:
    """Split the global key and return a fresh subkey. Used eagerly (at construction time); under a
    transformation the split still happens now, on concrete keys, so no tracer reaches the global key
    (the subkey is then a constant of the traced program)."""
    global _key
    with jax.ensure_compile_time_eval():
        if _key is None:
            seed_(0)
        _key, sub = jax.random.split(_key)
    return sub


def resolve_key(rng) -> jax.Array:
    """`rng=None` draws from the global key; an int seeds a key; a key array is used as is."""
    if rng is None:
        return next_key()
    if isinstance(rng, int):
        return jax.random.PRNGKey(rng)
    return rng


def is_typed_key(a) -> bool:
    """A typed PRNG key array (`jax.random.key`, dtype `key<impl>`)."""
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jax.dtypes.prng_key)


def is_key(a) -> bool:
    """A PRNG key: a typed key array, or a raw `uint32[2]` key, the form this library keeps its keys in
    (a genuine `uint32[2]` data array is taken for a key too)."""
    if is_typed_key(a):
        return True
    return isinstance(a, (jax.Array, np.ndarray)) and a.dtype == np.uint32 and a.shape == (2,)
