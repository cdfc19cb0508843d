"""NNlib's ConvDims objects: every function that takes them gives what its keyword form gives, and a
dims object that does not fit the arrays, or that comes with keywords as well, is refused."""

import jax
import numpy as np
import pytest

from fluxjax import nnlib as N
from fluxjax.errors import DimensionMismatch

RNG = np.random.default_rng(0)
X = RNG.standard_normal((7, 6, 4, 2)).astype(np.float32)
W = RNG.standard_normal((3, 2, 2, 6)).astype(np.float32)  # groups=2: Cin/2 = 2, Cout = 6
KW = dict(stride=(2, 1), pad=(1, 0, 2, 1), dilation=(1, 2), flipped=True, groups=2)
CDIMS = N.DenseConvDims(X, W, stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), flipkernel=True, groups=2)


def test_dense_conv_dims_match_keywords():
    y = N.conv(X, W, **KW)
    np.testing.assert_array_equal(N.conv(X, W, CDIMS), y)
    assert y.shape[:2] == CDIMS.output_size and y.shape[2] == CDIMS.channels_out
    np.testing.assert_array_equal(N.grad_conv_data(y, W, CDIMS), N.grad_conv_data(y, W, X.shape, **KW))
    np.testing.assert_array_equal(N.grad_conv_filter(X, y, CDIMS), N.grad_conv_filter(X, y, W.shape, **KW))
    b = RNG.standard_normal(6).astype(np.float32)
    np.testing.assert_allclose(N.conv_bias_act(X, W, CDIMS, b, jax.nn.relu), N.conv_bias_act(X, W, b, jax.nn.relu, **KW))
    np.testing.assert_allclose(N.conv_bias_act(X, W, CDIMS, b), y + b[:, None])


def test_depthwise_conv_dims_match_keywords():
    w = RNG.standard_normal((2, 3, 2, 4)).astype(np.float32)  # NNlib's (k..., mult, Cin)
    c = N.DepthwiseConvDims(X, w, stride=2, padding=1)
    y = N.depthwiseconv(X, w, stride=2, pad=1)
    np.testing.assert_array_equal(N.depthwiseconv(X, w, c), y)
    assert y.shape == (*c.output_size, c.channels_out, 2) == (4, 3, 8, 2)
    np.testing.assert_array_equal(N.grad_depthwiseconv_data(y, w, c), N.grad_depthwiseconv_data(y, w, X.shape, stride=2, pad=1))
    np.testing.assert_array_equal(N.grad_depthwiseconv_filter(X, y, c), N.grad_depthwiseconv_filter(X, y, w.shape, stride=2, pad=1))


def test_pool_dims_match_keywords():
    p = N.PoolDims(X, (3, 2), stride=(2, 1), padding=1)
    for pool, grad in ((N.maxpool, N.grad_maxpool), (N.meanpool, N.grad_meanpool)):
        y = pool(X, (3, 2), stride=(2, 1), pad=1)
        np.testing.assert_array_equal(pool(X, p), y)
        assert y.shape == (*p.output_size, 4, 2)
        np.testing.assert_array_equal(grad(y, y, X, p), grad(y, y, X, (3, 2), stride=(2, 1), pad=1))
    y = N.lpnormpool(np.abs(X), 3.0, (3, 2), stride=(2, 1), pad=1)
    np.testing.assert_array_equal(N.lpnormpool(np.abs(X), p, p=3.0), y)
    np.testing.assert_array_equal(N.lpnormpool(np.abs(X), p=3.0, k=(3, 2), stride=(2, 1), pad=1), y)
    np.testing.assert_array_equal(N.grad_lpnormpool(y, y, np.abs(X), p, p=3.0),
                                  N.grad_lpnormpool(y, y, np.abs(X), 3.0, (3, 2), stride=(2, 1), pad=1))


def test_pool_dilation():
    # windows {x[i], x[i+2]} of 1..7: the max is the later element, the mean the middle value
    x = np.arange(1.0, 8.0, dtype=np.float32).reshape(7, 1, 1)
    p = N.PoolDims(x, 2, stride=1, dilation=2)
    assert p.output_size == (5,)
    np.testing.assert_array_equal(N.maxpool(x, p)[:, 0, 0], [3, 4, 5, 6, 7])
    np.testing.assert_array_equal(N.meanpool(x, 2, stride=1, dilation=2)[:, 0, 0], [2, 3, 4, 5, 6])
    dx = N.grad_maxpool(np.ones((5, 1, 1), np.float32), N.maxpool(x, p), x, p)
    np.testing.assert_array_equal(dx[:, 0, 0], [0, 0, 1, 1, 1, 1, 1])


def test_dims_are_static_arguments():
    c = N.DenseConvDims(X.shape, W.shape, groups=2)
    assert c == N.DenseConvDims(X, W, groups=2) and hash(c) == hash(N.DenseConvDims(X, W, groups=2))
    f = jax.jit(N.conv, static_argnums=2)
    np.testing.assert_allclose(f(X, W, c), N.conv(X, W, groups=2), rtol=1e-6)
    with pytest.raises(AttributeError):
        c.stride = (2, 2)  # frozen: a dims object can be shared


def test_dims_that_do_not_fit_are_refused():
    with pytest.raises(DimensionMismatch, match=r"x has size \(6, 6, 4, 2\).*built for an input of size \(7, 6, 4\)"):
        N.conv(X[:6], W, CDIMS)
    with pytest.raises(DimensionMismatch, match=r"w has size \(2, 2, 2, 6\).*kernel of size \(3, 2\)"):
        N.conv(X, W[:2], CDIMS)
    with pytest.raises(DimensionMismatch, match="built for an input"):
        N.maxpool(X[:, :, :2], N.PoolDims(X, 2))
    with pytest.raises(DimensionMismatch, match="Kernel \\* dilation"):
        N.PoolDims(X, 3, dilation=4)
    with pytest.raises(DimensionMismatch, match=r"ndims\(x\) == length\(k\) \+ 2"):
        N.PoolDims(X, (2,))  # a window of 1 dim for 2 spatial dims (an int k means every dim)
    with pytest.raises(DimensionMismatch, match="Group count"):
        N.DenseConvDims(X, W[..., :5], groups=2)


def test_dims_and_keywords_together_are_refused():
    with pytest.raises(TypeError, match="drop the keywords stride"):
        N.conv(X, W, CDIMS, stride=2)
    with pytest.raises(TypeError, match="drop the keywords pad"):
        N.maxpool(X, N.PoolDims(X, 2), pad=1)
    with pytest.raises(TypeError, match="expected DenseConvDims, got PoolDims"):
        N.conv(X, W, N.PoolDims(X, 2))
    with pytest.raises(TypeError, match="expected DepthwiseConvDims, got DenseConvDims"):
        N.depthwiseconv(X, W, CDIMS)
    with pytest.raises(TypeError, match=r"\(x, p, k\), \(x, p=p, k=k\) or \(x, pdims, p=p\)"):
        N.lpnormpool(X, N.PoolDims(X, 2))
    with pytest.raises(TypeError, match=r"takes \(x, p, k\)"):
        N.lpnormpool(X, 2.0, 2, p=3.0)  # p twice
    with pytest.raises(TypeError, match="bias b is missing"):
        N.conv_bias_act(X, W, CDIMS)
    with pytest.raises(TypeError, match="must be an array or a tuple of sizes"):
        N.PoolDims(3.5, 2)



def test_dilated_maxpool_2d_against_loops():
    x = RNG.standard_normal((6, 5, 2, 1)).astype(np.float32)
    y = N.maxpool(x, N.PoolDims(x, (2, 3), stride=(1, 2), padding=1, dilation=(2, 1)))
    xp = np.pad(x, ((1, 1), (1, 1), (0, 0), (0, 0)), constant_values=-np.inf)
    want = np.array([[[xp[i + 2 * a, 2 * j + b] for a in range(2) for b in range(3)] for j in range(3)] for i in range(6)])
    np.testing.assert_array_equal(y, want.max(axis=2))
