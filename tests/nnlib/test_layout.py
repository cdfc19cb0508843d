"""Spatial operations compute channels-last and transpose back (fluxjax/nnlib/_layout.py): the
transposes between two of them cancel in a compiled program, and the numbers are those of the
direct WHCN computation."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend import cpu_only
from jax import lax

import fluxjax as Flux
from fluxjax.nnlib import conv, maxpool, meanpool
from fluxjax.nnlib._layout import from_last, to_last


@pytest.mark.parametrize("shape", [(5, 2, 3), (5, 4, 2, 3), (5, 4, 3, 2, 3)])
def test_to_last_and_back(shape):
    x = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
    y = to_last(x)
    assert y.shape == (shape[-1], *shape[:-2], shape[-2])
    np.testing.assert_array_equal(y[1, ..., 0], x[..., 0, 1])  # sample 1, channel 0
    np.testing.assert_array_equal(from_last(y), x)


def test_conv_and_pools_equal_the_direct_whcn_computation():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    x, w = jax.random.normal(k1, (9, 8, 3, 2)), jax.random.normal(k2, (3, 2, 3, 4))
    direct = lax.conv_general_dilated(x, lax.rev(w, (0, 1)), (2, 1), ((1, 1), (0, 0)),
                                      dimension_numbers=("01CN", "01IO", "01CN"))
    np.testing.assert_allclose(conv(x, w, stride=(2, 1), pad=(1, 0)), direct, rtol=1e-5, atol=1e-5)
    win = ((2, 2, 1, 1), (2, 2, 1, 1), "VALID")
    np.testing.assert_array_equal(maxpool(x, (2, 2)), lax.reduce_window(x, -jnp.inf, lax.max, *win))
    np.testing.assert_allclose(meanpool(x, (2, 2)), lax.reduce_window(x, 0.0, lax.add, *win) / 4, rtol=1e-6)


@cpu_only
def test_transposes_between_spatial_layers_cancel_when_compiled():
    """Conv → BatchNorm → MaxPool → Conv → MeanPool compiles with two transposes: the input's to
    channels-last and the output's back (without the cancelling, one more pair per layer)."""
    Flux.seed_(0)
    m = Flux.Chain(Flux.Conv((3, 3), (2, 4), Flux.relu), Flux.BatchNorm(4, Flux.relu), Flux.MaxPool((2, 2)),
                   Flux.Conv((3, 3), (4, 5)), Flux.MeanPool((2, 2)))
    params, state, apply = Flux.functional(m)
    x = jnp.ones((12, 12, 2, 3))
    f = jax.jit(lambda p, s, x: apply(p, s, x, train=True)[0])
    text = f.lower(params, state, x).compile().as_text()
    assert len(re.findall(r"\btranspose\(", text)) == 2
    assert f(params, state, x).shape == (1, 1, 5, 3)


def test_batchnorm_on_images_matches_its_formula_channel_by_channel():
    x = jax.random.normal(jax.random.PRNGKey(3), (4, 3, 2, 5)) * 2 + 1
    bn = Flux.BatchNorm(2)
    Flux.trainmode_(bn)
    y = bn(x)
    xs = np.asarray(x)
    for c in range(2):
        v = xs[:, :, c, :]
        np.testing.assert_allclose(np.asarray(y)[:, :, c, :], (v - v.mean()) / np.sqrt(v.var() + 1e-5), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(float(bn.mu[c]), 0.1 * v.mean(), rtol=1e-5)
        np.testing.assert_allclose(float(bn.sigma2[c]), 0.9 + 0.1 * v.var() * v.size / (v.size - 1), rtol=1e-5)
