"""NNlib's ∇ functions for pooling, upsampling and depthwise conv (NNlib's own cases are
compat/cases_nnlib_pool.py `case_pool_gradients` and compat/cases_nnlib_sampling.py `case_upsample_gradients`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

from fluxjax import nnlib as N

R = np.random.default_rng(5)


@pytest.mark.parametrize(
    ("pool", "grad", "extra"),
    [(N.maxpool, N.grad_maxpool, ()), (N.meanpool, N.grad_meanpool, ()), (N.lpnormpool, N.grad_lpnormpool, (3.0,))],
    ids=["max", "mean", "lpnorm"],
)
def test_pool_gradients_are_finite_difference_gradients(pool, grad, extra):
    x = np.abs(R.standard_normal((5, 4, 2, 1))) + 0.1
    dy = R.standard_normal((3, 2, 2, 1))
    kw = dict(pad=(1, 0, 0, 0), stride=(2, 2))
    with jax.enable_x64(True):
        y = pool(jnp.asarray(x), *extra, (2, 2), **kw)
        got = grad(jnp.asarray(dy), y, jnp.asarray(x), *extra, (2, 2), **kw)
        want = fd_grad(lambda v: float(np.sum(np.asarray(pool(jnp.asarray(v), *extra, (2, 2), **kw)) * dy)), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_depthwise_gradients_are_finite_difference_gradients():
    x = R.standard_normal((6, 5, 2, 1))
    w = R.standard_normal((3, 2, 2, 2))  # NNlib's (k..., mult, Cin)
    kw = dict(pad=1, stride=(2, 1))
    with jax.enable_x64(True):
        y = N.depthwiseconv(jnp.asarray(x), jnp.asarray(w), **kw)
        dy = R.standard_normal(y.shape)
        dx = N.grad_depthwiseconv_data(jnp.asarray(dy), jnp.asarray(w), x.shape, **kw)
        dw = N.grad_depthwiseconv_filter(jnp.asarray(x), jnp.asarray(dy), (3, 2), **kw)
        loss = lambda x, w: float(np.sum(np.asarray(N.depthwiseconv(jnp.asarray(x), jnp.asarray(w), **kw)) * dy))
        np.testing.assert_allclose(dx, fd_grad(lambda v: loss(v, w), x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(dw, fd_grad(lambda v: loss(x, v), w), rtol=1e-6, atol=1e-8)
    assert N.grad_depthwiseconv_data(jnp.ones(y.shape), jnp.ones(w.shape), **kw).shape == (5, 5, 2, 1)  # smallest x


def test_errors():
    x = jnp.ones((4, 4, 1, 1))
    y = N.maxpool(x, (2, 2))
    with pytest.raises(ValueError, match=r"grad_maxpool: dy has shape \(3, 2, 1, 1\), but pooling x of shape \(4, 4, 1, 1\)"):
        N.grad_maxpool(jnp.ones((3, 2, 1, 1)), y, x, (2, 2))
    with pytest.raises(ValueError, match=r"sizes \(4, 6, 1, 1\) of dy are not multiples of the scale \(2, 4\)"):
        N.grad_upsample_nearest(jnp.ones((4, 6, 1, 1)), (2, 4))
    with pytest.raises(ValueError, match="grad_upsample_bilinear: expected dy of rank 4 and size= the 2 spatial sizes"):
        N.grad_upsample_bilinear(jnp.ones((4, 6, 1, 1)), size=(2,))
    with pytest.raises(ValueError, match="3 output channels for 2 input channels"):
        N.grad_depthwiseconv_filter(jnp.ones((5, 5, 2, 1)), jnp.ones((3, 3, 3, 1)), (3, 3))


@pytest.mark.parametrize(
    ("grad", "shape", "size", "ac"),
    [(N.grad_upsample_linear, (5, 2, 1), 3, False), (N.grad_upsample_bilinear, (4, 5, 1, 1), (2, 3), True),
     (N.grad_upsample_trilinear, (3, 4, 3, 1, 1), (2, 2, 2), False)],
    ids=["linear", "bilinear", "trilinear"],
)
def test_complex_upsample_gradients_are_real_and_imag_parts(grad, shape, size, ac):
    # the weights are real, so the adjoint acts on each part alone (NNlib's "Complex-valued upsample")
    dy = jnp.asarray(R.standard_normal(shape) + 1j * R.standard_normal(shape), jnp.complex64)
    got = grad(dy, size=size, align_corners=ac)
    assert got.shape == (*np.atleast_1d(size), *shape[-2:]) and got.dtype == jnp.complex64
    np.testing.assert_allclose(np.real(got), grad(jnp.real(dy), size=size, align_corners=ac), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.imag(got), grad(jnp.imag(dy), size=size, align_corners=ac), rtol=1e-6, atol=1e-6)
