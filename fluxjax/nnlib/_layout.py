"""Flux's `(spatial..., C, N)` arrays computed on as `(N, spatial..., C)`, channels last.

XLA:CPU convolves, pools and normalises images with the channels last in memory, and XLA keeps an
array in the memory order of its axes. So each spatial operation here transposes its input to
channels-last and its result back; where one such operation feeds the next, the two transposes
between them cancel when the program is compiled, and a `Conv → BatchNorm → MaxPool → Conv` chain
is computed channels-last throughout, with copies only where the layout really changes (the
network's input, `flatten`). Measured on the benchmarks' LeNet + BatchNorm training step (2-core
CPU): written in WHCN, pure JAX ran 1.06-1.12x its NHWC twin with 40 copies in the compiled step;
transposing per operation like this, 0.95x with 24 copies, as many as NHWC itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def to_last(x: jax.Array) -> jax.Array:
    """`(spatial..., C, N)` → `(N, spatial..., C)`."""
    r = x.ndim
    return jnp.transpose(x, (r - 1, *range(r - 2), r - 2))


def from_last(y: jax.Array) -> jax.Array:
    """`(N, spatial..., C)` → `(spatial..., C, N)`, the inverse of `to_last`."""
    r = y.ndim
    return jnp.transpose(y, (*range(1, r), 0))
