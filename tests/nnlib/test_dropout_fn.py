"""NNlib's functional dropout(rng, x, p; dims, active)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.nnlib import dropout


def test_dropout_values_and_scaling():
    x = jnp.ones((100, 50))
    y = np.asarray(dropout(jax.random.PRNGKey(0), x, 0.3))
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.7)}
    assert 0.2 < (y == 0).mean() < 0.4
    np.testing.assert_array_equal(dropout(jax.random.PRNGKey(0), x, 0.0), x)
    np.testing.assert_array_equal(dropout(jax.random.PRNGKey(0), x, 1.0), np.zeros((100, 50)))
    np.testing.assert_array_equal(dropout(jax.random.PRNGKey(0), x, 0.9, active=False), x)


def test_dropout_dims_and_default_rng():
    x = jnp.ones((4, 6, 3, 2))
    y = np.asarray(dropout(jax.random.PRNGKey(1), x, 0.5, dims=2))  # whole channels (WHCN)
    assert all(len(np.unique(y[:, :, c, n])) == 1 for c in range(3) for n in range(2))
    y = np.asarray(dropout(jax.random.PRNGKey(1), x, 0.5, dims=(0, -1)))
    assert all(len(np.unique(y[i, :, :, n])) == 1 for i in range(4) for n in range(2))
    Flux.seed_(3)
    a = dropout(x, 0.5)
    Flux.seed_(3)
    np.testing.assert_array_equal(a, dropout(x, 0.5))  # dropout(x, p) draws from the global RNG
    assert dropout(jax.random.PRNGKey(0), jnp.arange(4), 0.5).dtype == jnp.float32


def test_dropout_gradient_and_jit():
    k = jax.random.PRNGKey(2)
    x = jnp.arange(1.0, 7.0)
    (g,) = Flux.gradient(lambda x: jnp.sum(dropout(k, x, 0.5)), x)
    y = dropout(k, x, 0.5)
    np.testing.assert_allclose(g, np.where(np.asarray(y) == 0, 0.0, 2.0))
    np.testing.assert_array_equal(jax.jit(lambda k, x: dropout(k, x, 0.5))(k, x), y)


def test_dropout_bad_arguments():
    with pytest.raises(ValueError):
        dropout(jax.random.PRNGKey(0), jnp.ones(3), 1.5)
    with pytest.raises(TypeError):
        dropout(jnp.ones(3))
    with pytest.raises(TypeError):
        dropout(jax.random.PRNGKey(0), jnp.ones(3), 0.5, dims=1.5)


def test_dropout_dims_out_of_range_raises():
    # dims=4 on a WHCN array (Flux's 1-based batch axis, translated without the -1) used to wrap round
    # to axis 0 and drop whole rows of the width axis; it names no axis of the array, so it raises.
    x = jnp.ones((2, 2, 3, 4))
    with pytest.raises(ValueError, match="dims=4"):
        dropout(jax.random.PRNGKey(0), x, 0.5, dims=4)
    with pytest.raises(ValueError, match="dims"):
        dropout(jax.random.PRNGKey(0), x, 0.5, dims=(2, -5))
    y = np.asarray(dropout(jax.random.PRNGKey(0), x, 0.5, dims=-1))  # the batch axis: one mask value per sample
    assert np.all(y == y[:1, :1, :1, :])
    layer = Flux.trainmode_(Flux.Dropout(0.5, dims=4))
    with pytest.raises(Flux.DimensionMismatch, match=r"layer Dropout\(0\.5, dims=4.*2×2×3×4"):
        layer(x)
    np.testing.assert_array_equal(Flux.testmode_(layer)(x), x)  # test mode: the identity, as Flux


def test_dropout_of_everything_has_a_zero_gradient():
    """NNlib's test/dropout.jl: `gradient(x -> sum(dropout(x, 1)), x)[1] == zeros(3, 4)` (an array of
    zeros, not `nothing`), op by op and compiled."""
    x = jnp.ones((3, 4))
    for jit in (False, True):
        g = Flux.gradient(lambda x: jnp.sum(dropout(jax.random.PRNGKey(1), x, 1)), x, jit=jit)[0]
        np.testing.assert_array_equal(g, np.zeros((3, 4)))
