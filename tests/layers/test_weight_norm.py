"""WeightNorm and remove_weight_norms: Flux.jl test/test_common/normalization.jl ("WeightNorm")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import Chain, Conv, Dense, WeightNorm, remove_weight_norms

X = jax.random.uniform(jax.random.PRNGKey(0), (1, 3))


def test_forward_errors_and_gradients_as_flux():
    Flux.seed_(0)
    mn = WeightNorm(Dense(1, 2))
    m = remove_weight_norms(mn)
    np.testing.assert_allclose(m(X), mn(X), rtol=1e-6)
    with pytest.raises(ValueError, match="does not have field `weights`"):
        WeightNorm(m, "weights")
    with pytest.raises(ValueError, match="is all zero"):
        WeightNorm(m, "bias")

    (og,) = Flux.gradient(lambda m: jnp.sum(m(X)), m)
    (g,) = Flux.gradient(lambda mn: jnp.sum(mn(X)), mn)
    assert g.layer.weight is not None and g.layer.bias is not None and g.g is not None
    v = mn.layer.weight
    v = v / jnp.sqrt(jnp.sum(v**2, axis=1, keepdims=True) + jnp.finfo(jnp.float32).eps)
    np.testing.assert_allclose(og.weight * v, g.g, rtol=1e-5)
    np.testing.assert_allclose(og.weight * mn.g - mn.g * g.g * v, g.layer.weight, atol=1e-6)

    om = remove_weight_norms(mn)
    assert isinstance(om, Dense)
    np.testing.assert_allclose(om.weight, m.weight, rtol=1e-6)
    np.testing.assert_allclose(om.bias, m.bias)


def test_in_a_chain_and_removed():
    c = Chain(
        WeightNorm(Conv((3,), (1, 2))),
        Conv((3,), (2, 2)),
        WeightNorm(Conv((3,), (2, 3))),
        lambda x: x.reshape(18, -1),
        WeightNorm(Dense(18, 4)),
        Dense(4, 1),
    )
    assert [type(lay).__name__ for lay in c] == ["WeightNorm", "Conv", "WeightNorm", "function", "WeightNorm", "Dense"]
    oc = remove_weight_norms(c)
    assert [type(lay).__name__ for lay in oc] == ["Conv", "Conv", "Conv", "function", "Dense", "Dense"]
    x = jax.random.uniform(jax.random.PRNGKey(1), (12, 1, 1))
    np.testing.assert_allclose(c(x), oc(x), rtol=1e-5, atol=1e-6)
    assert c[0].g.shape == (3, 1, 1)  # Flux's docstring: the norm sums over the last axis


def test_dims_and_training_moves_g_and_v():
    wn = WeightNorm(Dense(3, 2), dims=None)
    assert wn.g.shape == (1, 1)
    np.testing.assert_allclose(wn.g[0, 0], jnp.sqrt(jnp.sum(wn.layer.weight**2)), rtol=1e-6)
    x = jax.random.normal(jax.random.PRNGKey(2), (3, 16))
    y = jnp.ones((2, 16))
    loss = lambda m, x, y: jnp.mean((m(x) - y) ** 2)
    st = Flux.setup(Flux.Adam(0.05), wn)
    g0, l0 = wn.g, float(loss(wn, x, y))
    Flux.train_(loss, wn, [(x, y)] * 50, st)
    assert float(loss(wn, x, y)) < l0 / 4
    assert not np.allclose(wn.g, g0)
    assert "WeightNorm(Dense(3 => 2), 'weight'; dims=None)" == wn._show()


def test_a_stateful_layer_is_a_clear_error():
    with pytest.raises(TypeError, match="BatchNorm has state fields"):
        WeightNorm(Flux.BatchNorm(3), "gamma")
