"""Upsampling layers (fluxjax/layers/upsample.py) against Flux's semantics.

Ported cases cite `Flux.jl/test/layers/upsample.jl` (shapes), `NNlib.jl/test/testsuite/upsample.jl`
(known values; bilinear uses `align_corners=true`) and Flux's `PixelShuffle` docstring. Values are also
checked against a float64 NumPy reference of NNlib's interpolation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad as _fd

import fluxjax
from fluxjax.errors import DimensionMismatch
from fluxjax.layers.basic import Chain
from fluxjax.layers.conv import Conv
from fluxjax.layers.upsample import PixelShuffle, Upsample
from fluxjax.outputsize import outputsize

rng = np.random.default_rng(2)


def _r(*shape):
    return rng.random(shape).astype(np.float32)


def _jl(flat, shape):
    return np.reshape(np.asarray(flat, np.float32), shape, order="F")


def np_linear(x, size):
    """NNlib's (multi)linear upsampling with align_corners=true: output `o` reads source position
    `o * (n_in - 1) / (n_out - 1)`, interpolating its two neighbours; dims one at a time."""
    y = np.asarray(x, np.float64)
    for d, n_out in enumerate(size):
        n_in = y.shape[d]
        src = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, n_in - 1)
        lam = (src - i0).reshape((-1,) + (1,) * (y.ndim - d - 1))
        y = (1 - lam) * np.take(y, i0, axis=d) + lam * np.take(y, i1, axis=d)
    return y


def test_shapes():
    # Flux.jl/test/layers/upsample.jl
    x = _r(3, 4, 2, 3)
    for m, shape in [
        (Upsample("bilinear", scale=(2, 3)), (6, 12, 2, 3)),
        (Upsample("bilinear", scale=3), (9, 12, 2, 3)),
        (Upsample("bilinear", size=(4, 6)), (4, 6, 2, 3)),
        (Upsample("nearest", scale=(2, 3)), (6, 12, 2, 3)),
        (Upsample("nearest", scale=(2,)), (6, 4, 2, 3)),
        (Upsample("nearest", scale=2), (6, 8, 2, 3)),
        (Upsample("nearest", size=(6, 8)), (6, 8, 2, 3)),
    ]:
        y = m(x)
        assert y.shape == shape and y.dtype == jnp.float32
    assert Upsample("nearest", scale=(2,))(_r(3, 2, 3)).shape == (6, 2, 3)
    np.testing.assert_allclose(Upsample(2)(x), Upsample("nearest", scale=2)(x))
    x5 = _r(3, 4, 2, 3, 4)
    y5 = Upsample("trilinear", scale=(2, 3, 2))(x5)
    assert y5.shape == (6, 12, 4, 3, 4) and y5.dtype == jnp.float32
    assert outputsize(Upsample("trilinear", scale=3), x5.shape) == (9, 12, 6, 3, 4)
    assert outputsize(Upsample("trilinear", size=(4, 6, 4)), x5.shape) == (4, 6, 4, 3, 4)
    # PixelShuffle
    assert PixelShuffle(2)(_r(3, 18, 3)).shape == (6, 9, 3)
    assert PixelShuffle(3)(_r(3, 4, 18, 3)).shape == (9, 12, 2, 3)


def test_nearest_values():
    # NNlib.jl/test/testsuite/upsample.jl "upsample_nearest"
    x = np.array([[1, 2], [3, 4]], np.float32).reshape(2, 2, 1, 1)
    np.testing.assert_array_equal(Upsample(scale=(3, 3))(x)[0, :, 0, 0], [1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(Upsample(scale=(2, 3))(x), Upsample(size=(4, 6))(x))
    np.testing.assert_array_equal(Upsample(scale=(2, 3))(x)[:, :, 0, 0], np.repeat(np.repeat(x[:, :, 0, 0], 2, 0), 3, 1))


def test_bilinear_values_align_corners():
    # NNlib.jl/test/testsuite/upsample.jl "Bilinear upsampling (2D)" (matches PyTorch align_corners=True)
    x = np.array([[1, 2], [3, 4]], np.float32)[:, :, None, None]
    x = np.concatenate([x, x], axis=2)
    x = np.concatenate([x, x], axis=3)
    y_true = np.array([[1, 4 / 3, 5 / 3, 2], [7 / 5, 26 / 15, 31 / 15, 12 / 5], [9 / 5, 32 / 15, 37 / 15, 14 / 5],
                       [11 / 5, 38 / 15, 43 / 15, 16 / 5], [13 / 5, 44 / 15, 49 / 15, 18 / 5], [3, 10 / 3, 11 / 3, 4]])
    y = Upsample("bilinear", scale=(3, 2))(x)
    assert y.shape == (6, 4, 2, 2) and y.dtype == jnp.float32
    for c in range(2):
        for n in range(2):
            np.testing.assert_allclose(y[:, :, c, n], y_true, rtol=1e-6)
    y_true_2 = np.array([[1, 5 / 4, 6 / 4, 7 / 4, 2], [3 / 2, 7 / 4, 8 / 4, 9 / 4, 5 / 2], [2, 9 / 4, 10 / 4, 11 / 4, 3],
                         [5 / 2, 11 / 4, 12 / 4, 13 / 4, 7 / 2], [3, 13 / 4, 14 / 4, 15 / 4, 4]])
    np.testing.assert_allclose(Upsample("bilinear", scale=2.5)(x)[:, :, 1, 1], y_true_2, rtol=1e-6)
    # against the NumPy reference on random data (not half-pixel centres: jax.image.resize differs)
    xr = _r(4, 3, 2, 2)
    yr = Upsample("bilinear", size=(7, 8))(xr)
    np.testing.assert_allclose(yr, np_linear(xr, (7, 8)), rtol=1e-5, atol=1e-6)
    half = jax.image.resize(jnp.asarray(xr), (7, 8, 2, 2), "linear")
    assert not np.allclose(yr, half, atol=1e-3)


def test_trilinear_values():
    # NNlib.jl/test/testsuite/upsample.jl "Trilinear upsampling (3D)"
    x = np.ones((3, 3, 3, 1, 1), np.float32)
    for i in range(3):
        x[:, :, i] = i + 1
    y = Upsample("trilinear", size=(5, 5, 5))(x)
    for i, v in enumerate([1, 1.5, 2, 2.5, 3]):
        np.testing.assert_allclose(y[:, :, i], v, rtol=1e-6)
    xr = _r(3, 2, 4, 2, 1)
    np.testing.assert_allclose(Upsample("trilinear", scale=(2, 3, 1))(xr), np_linear(xr, (6, 6, 4)), rtol=1e-5, atol=1e-6)


def test_pixel_shuffle_values():
    # NNlib.jl/test/testsuite/upsample.jl "pixel_shuffle"
    x = _jl(range(1, 17), (2, 2, 4, 1))
    y_true = np.array([[1, 9, 3, 11], [5, 13, 7, 15], [2, 10, 4, 12], [6, 14, 8, 16]])
    np.testing.assert_array_equal(PixelShuffle(2)(x)[:, :, 0, 0], y_true)
    # Flux's PixelShuffle docstring: xs = [2row + col + channel/10 for row in 1:2, col in 1:2, channel in 1:4]
    xs = np.array([[[2 * r + c + ch / 10 for ch in range(1, 5)] for c in (1, 2)] for r in (1, 2)], np.float32)[..., None]
    expected = np.array([[3.1, 3.3, 4.1, 4.3], [3.2, 3.4, 4.2, 4.4], [5.1, 5.3, 6.1, 6.3], [5.2, 5.4, 6.2, 6.4]])
    np.testing.assert_allclose(PixelShuffle(2)(xs)[:, :, 0, 0], expected, rtol=1e-6)


def test_printing():
    # Flux's docstring and show method in src/layers/upsample.jl
    assert repr(Upsample(scale=(2, 3))) == "Upsample(:nearest, scale = (2, 3))"
    assert repr(Upsample("bilinear", size=(4, 5))) == "Upsample(:bilinear, size = (4, 5))"
    assert repr(Upsample(2)) == "Upsample(:nearest, scale = 2)"
    assert repr(Upsample(2.5, "bilinear")) == "Upsample(:bilinear, scale = 2.5)"
    assert repr(Upsample(":trilinear", scale=[2, 2, 1])) == "Upsample(:trilinear, scale = (2, 2, 1))"
    assert repr(PixelShuffle(2)) == "PixelShuffle(2)"
    assert "Upsample(:bilinear, scale = 2)," in repr(Chain(Upsample("bilinear", scale=2), Conv((3, 3), (2, 2))))


def test_constructor_errors():
    with pytest.raises(ValueError, match="Either scale or size"):
        Upsample("nearest")
    with pytest.raises(ValueError, match="Either scale or size"):
        Upsample("nearest", scale=2, size=(4, 4))
    with pytest.raises(ValueError, match="mode=:bicubic is not supported"):
        Upsample("bicubic", scale=2)
    with pytest.raises(ValueError):
        PixelShuffle(0)
    u = Upsample(":bilinear", scale=2)
    assert (u.mode, u.scale, u.size) == ("bilinear", 2, None)


def test_dimension_mismatch():
    with pytest.raises(DimensionMismatch) as e:
        Upsample("bilinear", scale=2)(jnp.ones((3, 4, 2)))
    assert str(e.value) == "layer Upsample(:bilinear, scale = 2) expects ndims(input) == 4, but got 3×4×2 Array{float32}"
    with pytest.raises(DimensionMismatch, match="== 5"):
        Upsample("trilinear", scale=2)(jnp.ones((3, 4, 2, 1)))
    with pytest.raises(ValueError):
        PixelShuffle(2)(jnp.ones((3, 4, 6, 1)))  # 6 channels not divisible by r^2


def test_outputsize_and_no_params():
    assert outputsize(Upsample("bilinear", scale=(2, 3)), (3, 4, 2, 3)) == (6, 12, 2, 3)
    assert outputsize(PixelShuffle(3), (3, 4, 18), padbatch=True) == (9, 12, 2, 1)
    for lay in (Upsample(2), PixelShuffle(2)):
        assert len(fluxjax.params(lay)) == 0 and jax.tree_util.tree_leaves(lay) == []
    x = _r(3, 4, 8, 1)
    m = Upsample("bilinear", scale=2)
    np.testing.assert_allclose(jax.jit(lambda m, x: m(x))(m, x), m(x), rtol=1e-6)


@pytest.mark.parametrize(
    "lay,ref",
    [
        (Upsample("bilinear", scale=(2, 3)), lambda a: np_linear(a, (6, 9))),
        (Upsample("nearest", scale=2), lambda a: np.repeat(np.repeat(a, 2, 0), 2, 1)),
        (PixelShuffle(2), None),
    ],
)
def test_gradients_vs_finite_differences(lay, ref):
    x = _r(3, 3, 4, 2)
    c = _r(*lay(x).shape)
    if ref is None:  # pixel_shuffle: out[r*w + i, r*h + j, c] = x[w, h, c*r^2 + j*r + i] (NNlib's reshapes)
        def ref(a):
            W, H, C, N = a.shape
            return np.reshape(np.transpose(np.reshape(a, (W, H, 2, 2, C // 4, N), order="F"), (2, 0, 3, 1, 4, 5)),
                              (2 * W, 2 * H, C // 4, N), order="F")
    np.testing.assert_allclose(lay(x), ref(x), rtol=1e-5, atol=1e-6)
    (gx,) = fluxjax.gradient(lambda x: jnp.sum(c * lay(x)), jnp.asarray(x))
    np.testing.assert_allclose(gx, _fd(lambda a: float(np.sum(c * ref(a))), x), rtol=1e-3, atol=1e-4)
