"""NNlib's functional `dropout(rng, x, p; dims=:, active=true)` (the `Dropout` layer is in layers/)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters.batching import BatchTracer  # no public API says whether a value is vmapped

from ..core.region import explicit_state
from ..random import draw_key
from .axes import axes


def mapped(x) -> bool:
    """Whether `x` is mapped by an enclosing `jax.vmap` (also through the tracers of a gradient taken
    inside or outside it). A key drawn there is not mapped: each mapped sample gets the same bits."""
    for _ in range(64):
        if not isinstance(x, jax.core.Tracer):
            return False
        if isinstance(x, BatchTracer):
            return x.batch_dim is not None
        x = getattr(x, "primal", None) if hasattr(x, "primal") else getattr(x, "val", None)
    return False


def check_unmapped(x, what: str) -> None:
    """A `ValueError` when `x` is mapped by `jax.vmap`: `what` (a layer, `dropout(x, p)`) would draw its
    key once for every mapped sample, one mask for all of them (Flux draws one per element of the batch).
    Under `functional`'s `apply` the caller passes the keys, mapped or not, as it chooses."""
    if mapped(x) and not explicit_state():
        raise ValueError(
            f"{what} is in train mode under jax.vmap: its key is not mapped, so every mapped sample would be "
            "dropped by the same mask (Flux draws one per entry of the whole batch). Call the model on the whole "
            "batch, map your own keys with dropout(key, x, p) (jax.vmap over the keys too), or put the layer "
            "in test mode (testmode_) where no noise is wanted."
        )


def dropout(*args, dims=None, active: bool = True):
    """`dropout(rng, x, p; dims=None, active=True)`, or `dropout(x, p)` with a key from the global RNG
    (NNlib's `dropout`): zero each entry of `x` with probability `p` and scale the rest by `1/(1-p)`.

    `rng` is a JAX key (or an int seed). `dims` (0-based, an int or a tuple) are the axes along which
    the mask varies, NNlib's `dims`; by default every entry is dropped independently, and `dims=2` on
    WHCN input drops whole channels. `active=False` returns `x` unchanged.

    ```python
    >>> dropout(jax.random.PRNGKey(0), jnp.ones((3, 2)), 0.5)   # entries 0.0 or 2.0
    Array([[0., 0.],
           [2., 2.],
           [0., 2.]], dtype=float32)

    ```
    """
    if len(args) == 3:
        rng, x, p = args
    elif len(args) == 2:
        rng, (x, p) = None, args
    else:
        raise TypeError(f"dropout(rng, x, p) or dropout(x, p): expected 2 or 3 positional arguments, got {len(args)}")
    if isinstance(p, bool) or not isinstance(p, (int, float, np.number)) or not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be a probability between 0 and 1, got {p!r}")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.float32)  # NNlib's result is float for float p; Flux's Dropout does the same
    if not active or p == 0:
        return x
    if p == 1:  # every entry dropped; the gradient is zeros (NNlib's test/dropout.jl), not none
        return x * jnp.zeros((), x.dtype)
    if rng is None:
        check_unmapped(x, "dropout(x, p) with the global key")
    if dims is None:
        shape = x.shape
    else:
        keep_axes = axes("dropout", dims, x.shape)
        shape = tuple(s if i in keep_axes else 1 for i, s in enumerate(x.shape))
    keep = jax.random.bernoulli(draw_key(rng, "dropout(x, p)"), 1 - p, shape)
    return jnp.where(keep, x / (1 - p), jnp.zeros((), x.dtype)).astype(x.dtype)
