"""Zygote's forward mode, `pushforward(f, x...)(dx...)` (Zygote.jl test/forward/forward.jl)."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.zygote import pushforward


def D(f, x):
    return pushforward(f, x)(1)


def test_scalar_and_nested():
    np.testing.assert_allclose(D(lambda x: jnp.sin(jnp.cos(x)), 0.5), -np.cos(np.cos(0.5)) * np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(D(lambda x: D(jnp.cos, x), 0.5), -np.cos(0.5), rtol=1e-6)
    assert float(D(lambda x: x * D(lambda y: x * y, 1), 4)) == 8.0  # integer points work as floats


def test_arrays_several_arguments_and_none_tangent():
    x = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(pushforward(lambda x: x**2, x)(jnp.array([1.0, 0, 1])), [2, 0, 6])
    np.testing.assert_allclose(pushforward(lambda x, y: x * y, 2.0, 3.0)(1.0, None), 3.0)
    np.testing.assert_allclose(pushforward(lambda x, y: x * y, 2.0, 3.0)(0.0, 1.0), 2.0)
    with pytest.raises(TypeError, match="tangent"):
        pushforward(lambda x, y: x * y, 2.0, 3.0)(1.0)


def test_matches_jacobian_through_a_layer_and_nests_in_gradient():
    m = Flux.Dense(3, 2, jnp.tanh)
    x = jnp.array([0.1, -0.2, 0.3])
    v = jnp.array([1.0, 0.5, -1.0])
    J = Flux.jacobian(m, x)[0]
    np.testing.assert_allclose(pushforward(m, x)(v), J @ v, rtol=1e-5)
    (g,) = Flux.gradient(lambda x: D(jnp.sin, x), 0.5)
    np.testing.assert_allclose(g, -np.sin(0.5), rtol=1e-6)
    assert Flux.pushforward is pushforward
