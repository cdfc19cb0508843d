"""`gradient(f, adtype, args...)`: ADTypes backends (Flux's docstring cases are compat/cases_zygote.py
`case_adtypes`)."""

import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

import fluxjax as Flux
from fluxjax import AutoFiniteDifferences, AutoZygote, gradient, withgradient


def test_finite_differences_agree_with_reverse_mode_on_a_model():
    Flux.seed_(2)
    m = Flux.Chain(Flux.Dense(3, 4, Flux.tanh), Flux.Dense(4, 2))
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 5)), jnp.float32)
    loss = lambda m, x: jnp.mean(m(x) ** 2)
    (ad_m, ad_x) = gradient(loss, AutoZygote(), m, x)
    (fd_m, fd_x) = gradient(loss, AutoFiniteDifferences(), m, x)
    for a, f in [(ad_m.layers[0].weight, fd_m.layers[0].weight), (ad_m.layers[1].bias, fd_m.layers[1].bias), (ad_x, fd_x)]:
        np.testing.assert_allclose(f, a, rtol=2e-3, atol=1e-5)
    assert fd_m.layers[0].sigma is None


def test_finite_differences_of_a_numpy_function_match_the_reference():
    x = np.asarray([0.3, -1.2, 2.0])
    f = lambda x: float(np.sum(np.sin(x) * x**2))
    (g,) = gradient(lambda x: jnp.sum(jnp.sin(x) * x**2), AutoFiniteDifferences(), jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-3)


def test_finite_differences_leave_state_alone_and_see_test_mode():
    bn = Flux.BatchNorm(2)
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 6)), jnp.float32)
    (g,) = gradient(lambda x: jnp.sum(bn(x) ** 2), AutoFiniteDifferences(), x)
    np.testing.assert_allclose(g, 2 * x / np.sqrt(1 + 1e-5), rtol=1e-3)  # test mode: y = x / √(1 + ϵ)
    np.testing.assert_array_equal(bn.mu, np.zeros(2))


def test_backends_are_values_and_errors_are_gradients():
    assert AutoZygote() == AutoZygote() and AutoZygote() != AutoFiniteDifferences()
    assert repr(AutoFiniteDifferences()) == "AutoFiniteDifferences()"
    with pytest.raises(TypeError, match="needs a real scalar"):
        gradient(lambda x: x * 2, AutoFiniteDifferences(), jnp.ones(2))
    val, (g,) = withgradient(lambda x: (jnp.sum(x), "aux"), AutoFiniteDifferences(), jnp.ones(2))
    assert val[1] == "aux"
    np.testing.assert_allclose(g, [1.0, 1.0], rtol=1e-5)
