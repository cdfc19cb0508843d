"""The small regression problem the optimiser tests share: a 2→3→1 tanh MLP fitting `x₁·x₂`."""

import jax
import jax.numpy as jnp

import fluxjax as Flux


def mlp():
    Flux.seed_(0)
    return Flux.Chain(Flux.Dense(2, 3, jnp.tanh), Flux.Dense(3, 1))


X = jax.random.normal(jax.random.PRNGKey(0), (2, 16))
Y = (X[0] * X[1])[None, :]


def mse(m, x, y):
    return jnp.mean((m(x) - y) ** 2)
