"""Tests for fluxjax.nnlib.normalise: NNlib's `normalise(x; dims=ndims(x), eps=1f-5)`, 0-based `dims`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax.nnlib import normalise
from tests.numgrad import fd_grad


def _np_normalise(x, axis, eps=1e-5):
    m = x.mean(axis=axis, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axis, keepdims=True) + eps)


def test_docstring_value_and_integer_input():
    # Flux.jl src/layers/stateless.jl: normalise([90, 100, 110, 130, 70]) ≈ [-0.5, 0, 0.5, 1.5, -1.5]
    y = normalise(jnp.array([90, 100, 110, 130, 70]))
    assert y.dtype == jnp.float32
    np.testing.assert_allclose(y, [-0.5, 0.0, 0.5, 1.5, -1.5], rtol=1e-6, atol=1e-7)
    assert fluxjax.normalise is normalise


@pytest.mark.parametrize("dims, axis", [(-1, -1), (None, None), ((0, 1), (0, 1)), (0, 0)])
def test_dims_default_last_axis_tuple_and_all(dims, axis):
    x = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32)
    got = normalise(x) if dims == -1 else normalise(x, dims=dims)
    assert got.shape == (3, 4, 5)
    np.testing.assert_allclose(got, _np_normalise(x.astype(np.float64), axis), rtol=1e-5, atol=1e-6)


def test_eps_enters_under_the_square_root():
    # a constant slice has σ² = 0: the result is 0 / sqrt(eps), finite, and eps is not squared
    np.testing.assert_allclose(normalise(jnp.array([1.0, 3.0]), eps=1.0), [-1 / np.sqrt(2), 1 / np.sqrt(2)], rtol=1e-6)
    assert np.all(normalise(jnp.ones((2, 3)), dims=0) == 0)


def test_gradient_matches_finite_differences():
    x = np.random.default_rng(1).normal(size=(4, 3))
    w = np.random.default_rng(2).normal(size=(4, 3))
    with jax.enable_x64(True):
        g = jax.grad(lambda a: jnp.sum(normalise(a, dims=0) * w))(jnp.asarray(x))
    np.testing.assert_allclose(g, fd_grad(lambda a: np.sum(_np_normalise(a, 0) * w), x), rtol=1e-6, atol=1e-8)


def test_layernorm_is_normalise_over_its_feature_axes():
    # Flux's test/layers/normalisation.jl: LayerNorm(2)(x) ≈ Flux.normalise(x, dims=1) (dims=0 here)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(2, 3, 4)), jnp.float32)
    np.testing.assert_allclose(fluxjax.LayerNorm(2)(x), normalise(x, dims=0), rtol=1e-6)
    np.testing.assert_allclose(fluxjax.LayerNorm((2, 3))(x), normalise(x, dims=(0, 1)), rtol=1e-6)


def test_a_number_is_a_clear_error():
    with pytest.raises(TypeError, match=r"normalise\(x\) expects an array"):
        normalise(3.0)
