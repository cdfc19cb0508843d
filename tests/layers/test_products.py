"""The recurrent product with a transposed copy for the backward pass (fluxjax/layers/_products.py)
gives the plain product's values and derivatives in every mode: reverse, forward, second order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.layers._products import products

W = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
H = jax.random.normal(jax.random.PRNGKey(1), (3, 5))


@pytest.mark.parametrize("h", [H, H[:, 0]], ids=["batch", "vector"])
def test_product_matches_plain_matmul_in_every_mode(h):
    def f(W, h, transposed):
        return jnp.sum(jnp.tanh(products({"Wh": W}, transposed)["Wh"](h)) ** 2)

    for argnums in (0, 1):
        plain = jax.grad(f, argnums)(W, h, False)
        np.testing.assert_allclose(jax.grad(f, argnums)(W, h, True), plain, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(jax.jacfwd(f, argnums)(W, h, True), plain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.hessian(f, 1)(W, h, True), jax.hessian(f, 1)(W, h, False), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU", "GRUv3"])
def test_sequence_gradient_equals_the_unrolled_cells(kind):
    """The layer (one scan, transposed copies) against its cell stepped in Python (plain products)."""
    Flux.seed_(2)
    m = getattr(Flux, kind)(3, 4)
    x = jax.random.normal(jax.random.PRNGKey(3), (3, 6, 2))

    def unrolled(m):
        cell, state, ys = m.cell, None, []
        for t in range(x.shape[1]):
            y, state = cell(x[:, t, :], state)
            ys.append(y)
        return jnp.sum(jnp.stack(ys, axis=1) ** 2)

    (g,) = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m)
    (ref,) = Flux.gradient(unrolled, m)
    for name in ("Wi", "Wh"):
        np.testing.assert_allclose(getattr(g.cell, name), getattr(ref.cell, name), rtol=2e-5, atol=1e-6)
    jf = jax.jacfwd(lambda x: jnp.sum(m(x) ** 2))(x)
    np.testing.assert_allclose(jf, jax.grad(lambda x: jnp.sum(m(x) ** 2))(x), rtol=2e-5, atol=1e-6)
