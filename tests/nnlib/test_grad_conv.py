"""Tests for fluxjax.nnlib.grad_conv_data / grad_conv_filter (NNlib's ∇conv_data / ∇conv_filter): the VJP of
`conv` with respect to its input / weights, in Flux's kernel-flip convention, for every conv keyword."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax.nnlib import (
    DenseConvDims,
    conv,
    conv_transpose,
    depthwiseconv,
    grad_conv_data,
    grad_conv_filter,
    grad_depthwiseconv_data,
    grad_depthwiseconv_filter,
)

SETTINGS = [
    dict(),
    dict(stride=2),
    dict(pad=1),
    dict(dilation=2),
    dict(flipped=True),
    dict(groups=2),
    dict(stride=(2, 1), pad=(1, 0, 2, 1), dilation=(1, 2)),
    dict(stride=3, pad=2, dilation=2, groups=2, flipped=True),
]


@pytest.mark.parametrize("kw", SETTINGS, ids=str)
def test_matches_jax_vjp_of_conv_2d(kw):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 8, 4, 2)).astype(np.float32)
    w = rng.normal(size=(3, 2, 4 // kw.get("groups", 1), 6)).astype(np.float32)
    y, back = jax.vjp(lambda x, w: conv(x, w, **kw), x, w)
    dy = rng.normal(size=y.shape).astype(np.float32)
    dx, dw = back(dy)
    np.testing.assert_allclose(grad_conv_data(dy, w, x.shape, **kw), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_conv_data(dy, w, x.shape[:2], **kw), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_conv_filter(x, dy, w.shape, **kw), dw, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(grad_conv_filter(x, dy, w.shape[:2], **kw), dw, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [1, 3])
def test_matches_jax_vjp_other_ranks(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(*(6,) * n, 2, 3)).astype(np.float32)
    w = rng.normal(size=(*(2,) * n, 2, 4)).astype(np.float32)
    y, back = jax.vjp(lambda x, w: conv(x, w, pad=1), x, w)
    dy = rng.normal(size=y.shape).astype(np.float32)
    dx, dw = back(dy)
    np.testing.assert_allclose(grad_conv_data(dy, w, pad=1), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_conv_filter(x, dy, pad=1), dw, rtol=1e-5, atol=1e-4)


def test_flip_convention_direct_loop():
    # ∇conv_filter of the true convolution y[o] = Σ_k x[o+k] w[K-1-k] is dw[K-1-k] = Σ_o dy[o] x[o+k]
    x = np.arange(1.0, 6.0, dtype=np.float32).reshape(5, 1, 1)
    dy = np.array([1.0, -2.0, 0.5, 3.0], np.float32).reshape(4, 1, 1)
    want = np.array([sum(dy[o, 0, 0] * x[o + k, 0, 0] for o in range(4)) for k in range(2)])
    np.testing.assert_allclose(grad_conv_filter(x, dy, (2,))[:, 0, 0], want[::-1])
    np.testing.assert_allclose(grad_conv_filter(x, dy, (2,), flipped=True)[:, 0, 0], want)


def test_default_sizes():
    w = jnp.ones((3, 3, 2, 4))
    dy = jnp.ones((5, 5, 4, 1))
    assert grad_conv_data(dy, w).shape == (7, 7, 2, 1)
    assert grad_conv_data(dy, w, stride=2).shape == (11, 11, 2, 1)  # the smallest input, as conv_transpose
    assert grad_conv_data(dy, w, (12, 12), stride=2).shape == (12, 12, 2, 1)
    x = jnp.ones((7, 7, 2, 1))
    assert grad_conv_filter(x, dy).shape == (3, 3, 2, 4)
    with pytest.raises(ValueError, match="ambiguous"):
        grad_conv_filter(jnp.ones((12, 12, 2, 1)), dy, stride=2)
    assert grad_conv_filter(jnp.ones((12, 12, 2, 1)), dy, (3, 3), stride=2).shape == (3, 3, 2, 4)


def test_shape_errors():
    w = jnp.ones((3, 3, 2, 4))
    with pytest.raises(fluxjax.DimensionMismatch):
        grad_conv_data(jnp.ones((5, 5, 4, 1)), w, (8, 8))
    with pytest.raises(fluxjax.DimensionMismatch):
        grad_conv_data(jnp.ones((5, 5, 3, 1)), w)
    with pytest.raises(fluxjax.DimensionMismatch):
        grad_conv_filter(jnp.ones((7, 7, 2, 1)), jnp.ones((5, 5, 4, 1)), (3, 3, 3, 4))


def test_differentiable_and_jittable():
    rng = np.random.default_rng(3)
    w = jnp.asarray(rng.normal(size=(3, 2, 2, 4)), jnp.float32)
    dy = jnp.asarray(rng.normal(size=(5, 5, 4, 2)), jnp.float32)
    f = jax.jit(lambda dy, w: grad_conv_data(dy, w, (9, 8), stride=2, pad=1))
    assert f(dy, w).shape == (9, 8, 2, 2)
    # grad_conv_data is bilinear in (dy, w): its gradient wrt w is grad_conv_filter of (its cotangent, dy)
    for a, b in itertools.product([0, 1], [0, 2]):
        c = jnp.zeros((9, 8, 2, 2)).at[a, b, 0, 0].set(1.0)
        gw = jax.grad(lambda w, c=c: jnp.sum(c * f(dy, w)))(w)
        np.testing.assert_allclose(gw, grad_conv_filter(c, dy, w.shape, stride=2, pad=1), rtol=1e-5, atol=1e-5)


# --- complex arrays: NNlib's ∇conv_* are adjoints (gemm with 'C'), so x / w enter conjugated ------


def _cplx(rng, shape):
    return jnp.asarray(rng.normal(size=shape) + 1j * rng.normal(size=shape), jnp.complex64)


def test_complex_nnlib_known_answers():
    # NNlib.jl test/conv.jl, "Complex Dense Convolution": a 1x1 kernel over 4 channels.
    a = np.arange(1.0, 5.0)
    x = jnp.asarray((a + 1j * (a + 1)).reshape(1, 4, 1), jnp.complex64)  # exact in float32
    w = jnp.asarray(((a + 2) + 1j * (a + 3)).reshape(1, 4, 1), jnp.complex64)  # exact in float32
    cdims = DenseConvDims(x, w)
    dy = conv(x, w, cdims)
    np.testing.assert_allclose(np.ravel(dy), [np.transpose(np.ravel(w)) @ np.ravel(x)], rtol=1e-7)  # -32+128im
    want_dw = np.conj(x) * dy  # [224+192im, 320+352im, 416+512im, 512+672im]
    want_dx = dy * np.conj(w)  # [416+512im, 512+672im, 608+832im, 704+992im]
    np.testing.assert_allclose(np.ravel(want_dw), [224 + 192j, 320 + 352j, 416 + 512j, 512 + 672j])
    np.testing.assert_allclose(np.ravel(want_dx), [416 + 512j, 512 + 672j, 608 + 832j, 704 + 992j])
    np.testing.assert_allclose(grad_conv_filter(x, dy, cdims), want_dw, rtol=1e-7)
    np.testing.assert_allclose(grad_conv_data(dy, w, cdims), want_dx, rtol=1e-7)
    # Flux's ConvTranspose forward is ∇conv_data(x, weight, cdims)
    np.testing.assert_allclose(conv_transpose(dy, w), want_dx, rtol=1e-7)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, pad=1, flipped=True, groups=2)], ids=str)
def test_complex_matches_zygote_pullback_of_conv(kw):
    rng = np.random.default_rng(7)
    x, w = _cplx(rng, (5, 4, 2, 1)), _cplx(rng, (3, 2, 2 // kw.get("groups", 1), 2))
    y, back = fluxjax.pullback(lambda x, w: conv(x, w, **kw), x, w)
    dy = _cplx(rng, y.shape)
    dx, dw = back(dy)
    np.testing.assert_allclose(grad_conv_data(dy, w, x.shape, **kw), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_conv_filter(x, dy, w.shape, **kw), dw, rtol=1e-5, atol=1e-5)
    # <conv(x, w), dy> == <x, grad_conv_data(dy, w)>, the adjoint identity with the complex inner product
    np.testing.assert_allclose(np.vdot(dy, y), np.vdot(grad_conv_data(dy, w, x.shape, **kw), x), rtol=1e-4)
    if "stride" not in kw:  # conv_transpose (outpad 0) is ∇conv_data at the smallest x
        np.testing.assert_allclose(conv_transpose(dy, w, **kw), dx, rtol=1e-5, atol=1e-5)


def test_complex_depthwise_matches_zygote_pullback():
    rng = np.random.default_rng(8)
    x, w = _cplx(rng, (5, 4, 2, 1)), _cplx(rng, (3, 2, 2, 2))  # NNlib's (k..., mult, Cin)
    y, back = fluxjax.pullback(lambda x, w: depthwiseconv(x, w, pad=1), x, w)
    dy = _cplx(rng, y.shape)
    dx, dw = back(dy)
    np.testing.assert_allclose(grad_depthwiseconv_data(dy, w, x.shape, pad=1), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_depthwiseconv_filter(x, dy, w.shape, pad=1), dw, rtol=1e-5, atol=1e-5)
