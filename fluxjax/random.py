"""The global default RNG, as Flux's `Random.default_rng()`: `seed_(n)` makes runs reproducible.

Keys are raw `uint32[2]` JAX keys (`jax.random.PRNGKey`), so they are ordinary integer arrays:
never differentiated, trivially saved and loaded.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


class DefaultRNG:
    """The holder of the global default key, `default_rng.key`. It is walked as a layer with one state
    field, so `fluxjax.jit` passes the key into every compiled program and takes the advanced key back:
    random draws inside compiled code (`randn32()`, `next_key()`, a layer built inside a step) differ
    from call to call, as Flux's default RNG."""

    __fluxjax_state__ = ("key",)

    def __init__(self):
        self.key: jax.Array | None = None


default_rng = DefaultRNG()

# The state thread (fluxjax.core.region) installs these when it is imported: `current_region()` and
# `rebind(obj, name, value)`. This module imports nothing of fluxjax, so every module can use it.
_thread: dict = {}


def use_state_thread(current_region, rebind) -> None:
    """Called by fluxjax.core.region: random draws inside a region advance the key through it."""
    _thread.update(current_region=current_region, rebind=rebind)


def seed_(n: int) -> None:
    """Reset the global default key to `PRNGKey(n)` (Flux's `Random.seed!(n)`).

    ```python
    >>> seed_(42)
    >>> a = glorot_uniform(2, 2)
    >>> seed_(42)
    >>> bool(jnp.all(glorot_uniform(2, 2) == a))   # the same numbers again
    True

    ```
    """
    with jax.ensure_compile_time_eval():  # a concrete key, also when called inside a transformation
        default_rng.key = jax.random.PRNGKey(n)


def default_key() -> jax.Array:
    """The global key as it is now (seeded with 0 on first use)."""
    if default_rng.key is None:
        seed_(0)
    return default_rng.key


def next_key() -> jax.Array:
    """Split the global key and return a fresh subkey. Inside one of fluxjax's regions (`gradient`,
    `fluxjax.jit`, `train_`'s step) the advanced key goes through the state thread, so a compiled
    program returns it and the next call draws anew. Under a plain jax transformation the split happens
    now, on the concrete key (the subkey is then a constant of that traced program)."""
    key = default_key()
    if _thread and _thread["current_region"]() is not None:
        key, sub = jax.random.split(key)
        _thread["rebind"](default_rng, "key", key)
        return sub
    with jax.ensure_compile_time_eval():
        default_rng.key, sub = jax.random.split(key)
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
