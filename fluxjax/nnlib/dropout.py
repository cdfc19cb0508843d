"""NNlib's functional `dropout(rng, x, p; dims=:, active=true)` (the `Dropout` layer is in layers/)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..random import resolve_key
from .axes import axes


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
    if dims is None:
        shape = x.shape
    else:
        keep_axes = axes("dropout", dims, x.shape)
        shape = tuple(s if i in keep_axes else 1 for i, s in enumerate(x.shape))
    keep = jax.random.bernoulli(resolve_key(rng), 1 - p, shape)
    return jnp.where(keep, x / (1 - p), jnp.zeros((), x.dtype)).astype(x.dtype)
