"""`grid_sample` and `imrotate` against NumPy references (NNlib's own cases are compat/cases_nnlib_sampling.py
`case_grid_sample` and `case_imrotate`)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

from fluxjax import nnlib as N

R = np.random.default_rng(7)


def _grid_sample_numpy(x, grid, border):
    """Bilinear / trilinear interpolation by loops, 0-based: -1 → 0, 1 → size - 1."""
    d = x.ndim - 2
    out = np.zeros(grid.shape[1:-1] + x.shape[-2:])
    for pos in np.ndindex(grid.shape[1:]):
        *o, n = pos
        c = [(grid[(k, *pos)] + 1) / 2 * (x.shape[k] - 1) for k in range(d)]
        if border:
            c = [min(max(ck, 0), x.shape[k] - 1) for k, ck in enumerate(c)]
        lo = [math.floor(ck) for ck in c]
        for corner in itertools.product((0, 1), repeat=d):
            idx = [lo[k] + b for k, b in enumerate(corner)]
            if all(0 <= i < x.shape[k] for k, i in enumerate(idx)):
                w = np.prod([c[k] - lo[k] if b else lo[k] + 1 - c[k] for k, b in enumerate(corner)])
                out[(*o, slice(None), n)] += w * x[(*idx, slice(None), n)]
    return out


@pytest.mark.parametrize("mode", ["zeros", "border"])
@pytest.mark.parametrize("d", [2, 3])
def test_grid_sample_is_bilinear_interpolation(mode, d):
    x = R.standard_normal((4, 3, 5)[:d] + (2, 2))
    grid = R.uniform(-1.3, 1.3, (d,) + (3, 2, 2)[:d] + (2,))
    got = N.grid_sample(jnp.asarray(x, jnp.float32), jnp.asarray(grid, jnp.float32), padding_mode=mode)
    np.testing.assert_allclose(got, _grid_sample_numpy(x, grid, mode == "border"), rtol=1e-5, atol=1e-5)


def test_grid_sample_gradients_match_finite_differences():
    x = R.standard_normal((4, 3, 1, 1))
    grid = R.uniform(-0.9, 0.9, (2, 3, 2, 1))
    dy = R.standard_normal((3, 2, 1, 1))
    with jax.enable_x64(True):
        dx, dg = N.grad_grid_sample(jnp.asarray(dy), jnp.asarray(x), jnp.asarray(grid))
        loss = lambda x, g: float(np.sum(np.asarray(N.grid_sample(jnp.asarray(x), jnp.asarray(g))) * dy))
        np.testing.assert_allclose(dx, fd_grad(lambda v: loss(v, grid), x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(dg, fd_grad(lambda v: loss(x, v), grid), rtol=1e-5, atol=1e-7)


def test_imrotate_back_and_forth_and_integers():
    x = np.zeros((9, 9, 1, 1), np.float32)
    x[3:6, 3:6] = R.random((3, 3, 1, 1))
    there = N.imrotate(jnp.asarray(x), 0.3, method="nearest")
    back = N.imrotate(there, -0.3, method="nearest")
    np.testing.assert_array_equal(back[4, 4], x[4, 4])  # the centre pixel is fixed
    ints = jnp.asarray(np.arange(16).reshape(4, 4, 1, 1))
    assert N.imrotate(ints, math.pi, method="nearest").dtype == ints.dtype
    np.testing.assert_array_equal(N.imrotate(ints, math.pi, method="nearest", rotation_center=(2.5, 2.5)), ints[::-1, ::-1])
    with pytest.raises(ValueError, match="only method='nearest'"):
        N.imrotate(ints, 0.3)


def test_imrotate_quarter_turn_is_exact_within_float32_tolerance():
    x = jnp.asarray(R.random((6, 6, 1, 1)), jnp.float32)
    turned = N.imrotate(x, math.radians(-90.0123), rotation_center=(3.5, 3.5))  # ≈ 3π/2 in Float32's √ϵ
    np.testing.assert_array_equal(turned, jnp.swapaxes(x, 0, 1)[::-1])


def test_errors():
    x = jnp.ones((4, 4, 1, 2))
    with pytest.raises(ValueError, match=r"expects grid of shape \(2, out..., 2\), got \(2, 3, 3, 1\)"):
        N.grid_sample(x, jnp.zeros((2, 3, 3, 1)))
    with pytest.raises(ValueError, match="padding_mode must be 'zeros' or 'border'"):
        N.grid_sample(x, jnp.zeros((2, 3, 3, 2)), padding_mode="reflection")
    with pytest.raises(ValueError, match="only supported for 4D and 5D"):
        N.grid_sample(jnp.ones((4, 1, 2)), jnp.zeros((1, 3, 2)))
    with pytest.raises(ValueError, match="No interpolation method such as 'cubic'"):
        N.imrotate(x, 0.1, method="cubic")
    with pytest.raises(ValueError, match=r"dy has shape \(3, 3, 1, 2\), x \(4, 4, 1, 2\)"):
        N.grad_imrotate(jnp.ones((3, 3, 1, 2)), x, 0.1)
