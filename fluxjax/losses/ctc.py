"""`ctc_loss` (`NNlib/src/ctc.jl`, re-exported by Flux.Losses)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compiled.pure import concrete
from ._utils import _default_float


def ctc_loss(yhat: Any, y: Any) -> jax.Array:
    """Connectionist temporal classification loss (Graves et al. 2006), as `NNlib.ctc_loss`.

    `yhat` is a `(classes, time)` array of raw logits (`logsoftmax` is applied over axis 0).
    `y` is the label sequence, **0-based** class indices in `0 .. classes-2`; the blank is the
    **last** class, index `classes - 1` (NNlib: `size(ŷ, 1)`). Returns the negative
    log-likelihood, a scalar (`inf` when `y` cannot fit in the time steps, with a NaN gradient, as
    NNlib's). A label out of range raises; under `jax.jit`/`jax.vmap`, where the labels have no values
    yet, it gives a NaN loss and gradient instead (NNlib: a BoundsError). One sequence per call,
    as NNlib; `jax.vmap` it for batches of equal-length sequences.

    >>> ctc_loss(jnp.array([[1., 2, 3], [2, 1, 1], [3, 3, 2]]), [0, 1])   # 3.6990738
    Array(3.6991, dtype=float32)
    """
    yhat = jnp.asarray(yhat)
    if not jnp.issubdtype(yhat.dtype, jnp.floating):
        yhat = yhat.astype(_default_float())
    if yhat.ndim != 2:
        raise ValueError(f"ctc_loss expects ŷ of shape (classes, time), got shape {yhat.shape}")
    C, T = yhat.shape
    blank = C - 1
    y = jnp.asarray(y).reshape(-1)
    if concrete(y):
        yn = np.asarray(y)
        if yn.size and (not np.issubdtype(yn.dtype, np.integer) or yn.min() < 0 or yn.max() >= blank):
            raise ValueError(
                f"ctc_loss: labels must be integers in 0..{blank - 1} (0-based; the blank is the last "
                f"class, {blank}), got {yn.tolist()}"
            )
    # labels seen only as traced values (under jit or vmap) cannot raise: a bad one (out of range, the
    # blank, a fraction) gives a NaN loss and gradient, where a gather would read some other class
    bad = jnp.any((y < 0) | (y >= blank) | (y != jnp.round(y))) if y.size else jnp.bool_(False)
    y = y.astype(jnp.int32)
    # A label sequence that cannot fit in T steps (each repeat needs a blank between) has loss inf and,
    # as NNlib's ∇ctc_loss (exp.(ŷ) .- exp.(accum .+ Inf)), a NaN gradient, never a quiet zero one.
    infeasible = T < y.shape[0] + jnp.sum(y[1:] == y[:-1])
    loss = _ctc_nll(_grad_times(yhat, jnp.where(infeasible | bad, jnp.nan, 1.0).astype(yhat.dtype)), y)
    return jnp.where(bad, jnp.nan, loss)


@jax.custom_vjp
def _grad_times(x: jax.Array, m: jax.Array) -> jax.Array:
    """`x`, whose cotangent is multiplied by `m` (a scalar)."""
    return x


def _grad_times_fwd(x, m):
    return x, m


def _grad_times_bwd(m, g):
    return g * m, jnp.zeros_like(m)


_grad_times.defvjp(_grad_times_fwd, _grad_times_bwd)


@jax.jit
def _ctc_nll(yhat: jax.Array, y: jax.Array) -> jax.Array:
    """Forward (alpha) recursion in log space over the blank-extended label sequence."""
    C, T = yhat.shape
    blank = C - 1
    L = y.shape[0]
    U = 2 * L + 1
    lp = jax.nn.log_softmax(yhat, axis=0)
    z = jnp.full((U,), blank, jnp.int32).at[1::2].set(y)
    skip = jnp.zeros((U,), bool)
    if U > 2:
        skip = skip.at[2:].set((z[2:] != blank) & (z[2:] != z[:-2]))
    lpz = lp[z, :]  # (U, T)
    neg = jnp.asarray(-1e30, lp.dtype)  # finite log(0): keeps every gradient finite
    alpha = jnp.full((U,), neg).at[0].set(lpz[0, 0])
    if U > 1:
        alpha = alpha.at[1].set(lpz[1, 0])

    def step(a, lpt):
        a1 = jnp.concatenate([neg[None], a[:-1]])
        s = jnp.logaddexp(a, a1)
        if U > 2:
            a2 = jnp.concatenate([jnp.stack([neg, neg]), a[:-2]])
            s = jnp.where(skip, jnp.logaddexp(s, a2), s)
        return s + lpt, None

    alpha, _ = jax.lax.scan(step, alpha, lpz[:, 1:].T)
    ll = jnp.logaddexp(alpha[-1], alpha[-2]) if U > 1 else alpha[-1]
    return jnp.where(ll < neg / 2, jnp.inf, -ll)
