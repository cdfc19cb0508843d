"""fluxjax.nnlib.glu: NNlib's gated linear unit, `a .* sigmoid.(b)` over the two halves of an axis."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax.nnlib import glu


def test_halves_along_the_axis():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    sig = lambda v: 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(glu(x), x[:2] * sig(x[2:]), rtol=1e-6)
    np.testing.assert_allclose(glu(x, dims=1), x[:, :3] * sig(x[:, 3:]), rtol=1e-6)
    np.testing.assert_allclose(glu(x, dims=-1), glu(x, dims=1))
    assert glu(jnp.ones((2, 3, 8)), dims=2).shape == (2, 3, 4)
    assert fluxjax.glu is glu


def test_odd_axis_and_numbers_are_clear_errors():
    with pytest.raises(ValueError, match=r"glu: axis 1 of x \(shape \(4, 3\)\) has odd length 3"):
        glu(jnp.ones((4, 3)), dims=1)
    with pytest.raises(TypeError, match="must be an array"):
        glu(2.0)
