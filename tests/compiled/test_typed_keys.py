"""New-style typed PRNG keys (`jax.random.key`, JAX's recommended API) through the compiled paths: an
argument, a `Dropout(rng=key)`, `fluxjax.jit`, `train_`. Each is checked against the op-by-op call and
against the same computation with the raw `PRNGKey` of the same seed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux

X = jnp.arange(12.0).reshape(3, 4) / 10


def _f(m, k):
    return jnp.sum(m(X)) * jnp.sum(jax.random.normal(k, (2,)))


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey])
def test_key_argument_compiled_equals_op_by_op(make_key):
    Flux.seed_(0)
    m = Flux.Dense(3, 2)
    k = make_key(0)
    want = Flux.gradient(_f, m, k, jit=False)[0].weight
    np.testing.assert_allclose(Flux.gradient(_f, m, k)[0].weight, want, rtol=1e-6)
    np.testing.assert_allclose(Flux.jit(_f)(m, k), _f(m, k), rtol=1e-6)
    # a typed and a raw key of the same seed draw the same numbers
    np.testing.assert_allclose(want, Flux.gradient(_f, m, jax.random.PRNGKey(0), jit=False)[0].weight, rtol=1e-6)


def _dropout_chain(key):
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(3, 5), Flux.Dropout(0.5, rng=key), Flux.Dense(5, 2))
    return Flux.trainmode_(m)


def _masks(jit, key):
    m = _dropout_chain(key)
    loss = lambda m: jnp.sum(m(X) ** 2)  # noqa: E731
    return [np.asarray(Flux.gradient(loss, m, jit=jit)[0].layers[0].weight) for _ in range(3)], m


def test_dropout_with_typed_key_advances_as_op_by_op():
    compiled, mc = _masks(True, jax.random.key(1))
    eager, me = _masks(False, jax.random.key(1))
    raw, _ = _masks(False, jax.random.PRNGKey(1))
    for c, e, r in zip(compiled, eager, raw):
        np.testing.assert_allclose(c, e, rtol=1e-5)
        np.testing.assert_allclose(e, r, rtol=1e-5)
    assert not np.allclose(compiled[0], compiled[1])  # the key moved between calls
    np.testing.assert_array_equal(jax.random.key_data(mc.layers[1].rng), jax.random.key_data(me.layers[1].rng))


def test_train_with_typed_key_equals_eager_loop():
    y = jnp.ones((2, 4))
    loss = lambda m, x, y: Flux.mse(m(x), y)  # noqa: E731
    m1 = _dropout_chain(jax.random.key(2))
    Flux.train_(loss, m1, [(X, y)] * 3, Flux.setup(Flux.Adam(0.01), m1))
    m2 = _dropout_chain(jax.random.key(2))
    st = Flux.setup(Flux.Adam(0.01), m2)
    with Flux.eager():
        for _ in range(3):
            g = Flux.gradient(lambda m: loss(m, X, y), m2, jit=False)[0]
            Flux.update_(st, m2, g)
    np.testing.assert_allclose(m1.layers[0].weight, m2.layers[0].weight, rtol=1e-5, atol=1e-6)
