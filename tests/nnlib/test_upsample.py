"""Tests for fluxjax.nnlib.upsample: nearest, (bi/tri)linear with align_corners, pixel_shuffle.

Known answers from `NNlib.jl/test/testsuite/upsample.jl` and the docstrings in
`NNlib.jl/src/upsample.jl`; shapes from `Flux.jl/test/layers/upsample.jl` (research/flux-tests.md E3).
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax.nnlib import (
    pixel_shuffle,
    upsample_bilinear,
    upsample_linear,
    upsample_nearest,
    upsample_trilinear,
)


def _jl(flat, shape):
    """A Julia `reshape([...], shape)`: column-major."""
    return np.reshape(np.asarray(flat), shape, order="F")


def _run(f, *args):
    """`jax.jit(f)(*args)` as numpy arrays."""
    return jax.tree.map(np.asarray, jax.jit(f)(*args))


def _shape(f, shape, dtype=jnp.float32):
    return jax.eval_shape(f, jax.ShapeDtypeStruct(shape, dtype)).shape


def _frac(rows):
    return np.array([[float(Fraction(v)) for v in r.split()] for r in rows])


# --- upsample_nearest ---------------------------------------------------------------------------


def test_upsample_nearest_known_answers():
    # NNlib.jl/test/testsuite/upsample.jl, "upsample_nearest, integer scale via reshape".
    x = jnp.asarray(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)[:, :, None, None])

    def f(x):
        y, back = jax.vjp(lambda x: upsample_nearest(x, (2, 3)), x)
        return upsample_nearest(x, (3, 3)), y, upsample_nearest(x, size=(4, 6)), back(y)[0]

    y33, y, y2, dx = _run(f, x)
    np.testing.assert_array_equal(y33[0, :, 0, 0], [1, 1, 1, 2, 2, 2])
    assert y.shape == (4, 6, 1, 1)
    np.testing.assert_array_equal(y, y2)
    # ∇upsample_nearest(y, (2,3)) == [6 12; 18 24]: each input gathers its 6 copies.
    np.testing.assert_array_equal(dx[:, :, 0, 0], [[6, 12], [18, 24]])
    with pytest.raises(ValueError):
        upsample_nearest(x, (1, 2, 3, 4, 5))
    with pytest.raises(ValueError):
        upsample_nearest(x, size=(3, 4))


def test_upsample_nearest_docstring():
    # NNlib.jl/src/upsample.jl docstring: upsample_nearest([1 2 3; 4 5 6], (2, 3)) and (2,).
    m = jnp.asarray([[1, 2, 3], [4, 5, 6]])
    y = np.asarray(upsample_nearest(m, (2, 3)))
    np.testing.assert_array_equal(y, np.repeat(np.repeat([[1, 2, 3], [4, 5, 6]], 2, 0), 3, 1))
    assert y.dtype == m.dtype
    np.testing.assert_array_equal(upsample_nearest(m, size=(4, 9)), y)
    np.testing.assert_array_equal(upsample_nearest(m, (2,)), [[1, 2, 3], [1, 2, 3], [4, 5, 6], [4, 5, 6]])
    # An int scale applies to all spatial dims (research/flux-tests.md E3: (3,2,3) -> (6,2,3)).
    assert _shape(lambda x: upsample_nearest(x, 2), (3, 2, 3)) == (6, 2, 3)
    assert _shape(lambda x: upsample_nearest(x, 2), (3, 4, 2, 3)) == (6, 8, 2, 3)


# --- linear / bilinear / trilinear --------------------------------------------------------------


def test_upsample_linear_1d_known_answer():
    # NNlib.jl/test/testsuite/upsample.jl, "Linear upsampling (1D)": [1,2,3,4] -> 1:1//3:4.
    x = jnp.asarray(np.tile(np.arange(1.0, 5.0, dtype=np.float32)[:, None, None], (1, 3, 1)))
    expected = np.tile(np.linspace(1, 4, 10)[:, None, None], (1, 3, 1))
    y, y2 = _run(lambda x: (upsample_linear(x, 2.5), upsample_linear(x, size=10)), x)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    np.testing.assert_allclose(y2, expected, rtol=1e-6)


def test_upsample_bilinear_known_answers():
    # NNlib.jl/test/testsuite/upsample.jl, "Bilinear upsampling (2D)" (matches PyTorch
    # UpsamplingBilinear2d(scale_factor=(3,2), align_corners=True)).
    x = np.tile(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)[:, :, None, None], (1, 1, 2, 2))
    y_true = _frac([
        "1 4/3 5/3 2", "7/5 26/15 31/15 12/5", "9/5 32/15 37/15 14/5",
        "11/5 38/15 43/15 16/5", "13/5 44/15 49/15 18/5", "3 10/3 11/3 4",
    ])
    y_true_2 = _frac([
        "1 5/4 6/4 7/4 2", "3/2 7/4 8/4 9/4 5/2", "4/2 9/4 10/4 11/4 6/2",
        "5/2 11/4 12/4 13/4 7/2", "3 13/4 14/4 15/4 4",
    ])

    def f(x, o):
        _, back = jax.vjp(lambda x: upsample_bilinear(x, size=(6, 4)), x[:, :, :, :1])
        return upsample_bilinear(x, (3, 2)), upsample_bilinear(x, 2.5), back(o)[0]

    y, y2, grad = _run(f, jnp.asarray(x), jnp.ones((6, 4, 2, 1), jnp.float32))
    assert y.shape == (6, 4, 2, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y, np.broadcast_to(y_true[:, :, None, None], y.shape), rtol=1e-6)
    np.testing.assert_allclose(y2, np.broadcast_to(y_true_2[:, :, None, None], y2.shape), rtol=1e-6)
    # ∇upsample_bilinear(ones(6,4,2,1); size=(2,2)) ≈ 6 .* ones(2,2,2,1).
    np.testing.assert_allclose(grad, 6 * np.ones((2, 2, 2, 1)), rtol=1e-6)
    # Integer input is rounded back: UInt8[1 3; 3 5] with scale 1.5.
    yi = _run(lambda x: upsample_bilinear(x, 1.5), np.array([[1, 3], [3, 5]], np.uint8)[:, :, None, None])
    assert yi.dtype == np.uint8
    np.testing.assert_array_equal(yi[:, :, 0, 0], [[1, 2, 3], [2, 3, 4], [3, 4, 5]])


def test_upsample_bilinear_docstring_fractional_scale():
    # NNlib.jl/src/upsample.jl docstring: upsample_bilinear(Float32[1 2 3; 4 5 6], (2.5, 3.5)) is 5×10.
    x = jnp.asarray(np.array([[1, 2, 3], [4, 5, 6]], np.float32)[:, :, None, None])
    y = _run(lambda x: upsample_bilinear(x, (2.5, 3.5)), x)[:, :, 0, 0]
    assert y.shape == (5, 10)
    np.testing.assert_allclose(y[0, :5], [1.0, 1.22222, 1.44444, 1.66667, 1.88889], atol=1e-5)
    np.testing.assert_allclose(y[0, 6:], [2.33333, 2.55556, 2.77778, 3.0], atol=1e-5)
    np.testing.assert_allclose(y[:, 0], [1.0, 1.75, 2.5, 3.25, 4.0], atol=1e-6)
    np.testing.assert_allclose(y[:, -1], [3.0, 3.75, 4.5, 5.25, 6.0], atol=1e-6)


def _ref_bilinear(x, out_w, out_h, align_corners):
    """Bilinear interpolation by definition, float64 (PyTorch's / NNlib's source-index rule)."""
    W, H = x.shape[:2]

    def src(o, n_in, n_out):
        if align_corners:
            return o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return max(0.0, (o + 0.5) * n_in / n_out - 0.5)

    y = np.zeros((out_w, out_h) + x.shape[2:])
    for i in range(out_w):
        for j in range(out_h):
            a, b = src(i, W, out_w), src(j, H, out_h)
            i0, j0 = int(np.floor(a)), int(np.floor(b))
            i1, j1 = min(i0 + 1, W - 1), min(j0 + 1, H - 1)
            la, lb = a - i0, b - j0
            y[i, j] = ((1 - la) * ((1 - lb) * x[i0, j0] + lb * x[i0, j1])
                       + la * ((1 - lb) * x[i1, j0] + lb * x[i1, j1]))
    return y


@pytest.mark.parametrize("align_corners", [True, False])
def test_upsample_bilinear_matches_numpy(align_corners):
    x = np.random.default_rng(0).standard_normal((4, 3, 2, 2))
    y = _run(lambda x: upsample_bilinear(x, size=(9, 7), align_corners=align_corners), jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(y, _ref_bilinear(x, 9, 7, align_corners), rtol=1e-5, atol=1e-6)


def test_upsample_trilinear_known_answers():
    # NNlib.jl/test/testsuite/upsample.jl, "Trilinear upsampling (3D)": constant in W and H, 1:3 in D.
    x = np.ones((3, 3, 3, 1, 1), np.float32) * np.array([1.0, 2.0, 3.0], np.float32)[None, None, :, None, None]
    expected = np.ones((5, 5, 5, 1, 1)) * np.array([1.0, 1.5, 2.0, 2.5, 3.0])[None, None, :, None, None]

    def f(x, o):
        _, back = jax.vjp(lambda z: upsample_trilinear(z, size=(8, 8, 8), align_corners=False), o[::2, ::2, ::2])
        return upsample_trilinear(x, size=(5, 5, 5)), back(o)[0]

    y, grad = _run(f, jnp.asarray(x), jnp.ones((8, 8, 8, 1, 1), jnp.float32))
    assert y.shape == (5, 5, 5, 1, 1)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    # ∇upsample_trilinear(ones(8,8,8,1,1); size=(4,4,4), align_corners=false) ≈ 8 .* ones(4,4,4,1,1).
    np.testing.assert_allclose(grad, 8 * np.ones((4, 4, 4, 1, 1)), rtol=1e-6)


def test_upsample_shapes_flux():
    # research/flux-tests.md E3 (Flux.jl/test/layers/upsample.jl).
    assert _shape(lambda x: upsample_bilinear(x, (2, 3)), (3, 4, 2, 3)) == (6, 12, 2, 3)
    assert _shape(lambda x: upsample_bilinear(x, 3), (3, 4, 2, 3)) == (9, 12, 2, 3)
    assert _shape(lambda x: upsample_trilinear(x, (2, 2, 2)), (3, 4, 2, 1, 1)) == (6, 8, 4, 1, 1)
    with pytest.raises(ValueError):
        upsample_bilinear(jnp.ones((3, 4, 2)), 2)


# --- pixel_shuffle ------------------------------------------------------------------------------


def _ref_pixel_shuffle(x, r):
    """NNlib's definition with Julia's column-major reshape (numpy order='F') and permutedims."""
    d = x.ndim - 2
    sizein, cin, n = x.shape[:d], x.shape[d], x.shape[d + 1]
    cout = cin // r**d
    y = np.reshape(x, (*sizein, *(r,) * d, cout, n), order="F")
    perm = [p for i in range(d) for p in (d + i, i)] + [2 * d, 2 * d + 1]  # = [d+1, 1, d+2, 2, ...] 1-based
    y = np.transpose(y, perm)
    return np.reshape(y, (*(s * r for s in sizein), cout, n), order="F")


def test_pixel_shuffle_known_answers():
    # NNlib.jl/test/testsuite/upsample.jl, "pixel_shuffle".
    x1 = _jl(np.arange(1, 17), (2, 2, 4, 1))
    x2 = _jl(np.arange(1, 33), (2, 2, 8, 1))
    x3 = _jl(np.arange(1, 4 * 3 * 27 * 2 + 1), (4, 3, 27, 2))
    y1, y2, y3, y3b = _run(
        lambda x1, x2, x3: (pixel_shuffle(x1, 2), pixel_shuffle(x2, 2), pixel_shuffle(x3, 3), pixel_shuffle(x3[..., 1:], 3)),
        x1, x2, x3,
    )
    np.testing.assert_array_equal(y1[:, :, 0, 0], [[1, 9, 3, 11], [5, 13, 7, 15], [2, 10, 4, 12], [6, 14, 8, 16]])
    assert y2.shape == (4, 4, 2, 1)
    np.testing.assert_array_equal(y2[:, :, 0, 0], y1[:, :, 0, 0])
    np.testing.assert_array_equal(y2[:, :, 1, 0], [[17, 25, 19, 27], [21, 29, 23, 31], [18, 26, 20, 28], [22, 30, 24, 32]])
    assert y3.shape == (12, 9, 3, 2)
    np.testing.assert_array_equal(y3[..., 1:], y3b)  # the batch dimension is preserved


def test_pixel_shuffle_docstring():
    # NNlib.jl/src/upsample.jl docstring: x[i,j,c,1] = 10i + j + c/10 (1-based), and a 1-D case
    # y[i,c,1] = i + c/10 with 6 channels -> 3.
    i, j, c = np.meshgrid(np.arange(1, 3), np.arange(1, 4), np.arange(1, 5), indexing="ij")
    x = (10 * i + j + c / 10)[..., None]
    i1, c1 = np.meshgrid(np.arange(1, 4), np.arange(1, 7), indexing="ij")
    y, y1 = _run(lambda x, x1: (pixel_shuffle(x, 2), pixel_shuffle(x1, 2)), x, (i1 + c1 / 10)[..., None])
    np.testing.assert_allclose(y[:, :, 0, 0], [
        [11.1, 11.3, 12.1, 12.3, 13.1, 13.3],
        [11.2, 11.4, 12.2, 12.4, 13.2, 13.4],
        [21.1, 21.3, 22.1, 22.3, 23.1, 23.3],
        [21.2, 21.4, 22.2, 22.4, 23.2, 23.4],
    ], rtol=1e-6)
    np.testing.assert_allclose(y1[:, 0, 0], [1.1, 1.2, 2.1, 2.2, 3.1, 3.2], rtol=1e-6)
    np.testing.assert_allclose(y1[0, :, 0], [1.1, 1.3, 1.5], rtol=1e-6)


@pytest.mark.parametrize("shape,r", [((3, 8, 2), 2), ((2, 3, 18, 2), 3), ((2, 1, 3, 16, 1), 2)])
def test_pixel_shuffle_matches_column_major_reference(shape, r):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    y, dx = _run(lambda x: (pixel_shuffle(x, r), jax.grad(lambda x: jnp.sum(pixel_shuffle(x, r) ** 2))(x)), x)
    np.testing.assert_array_equal(y, _ref_pixel_shuffle(x, r))
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-6)


def test_pixel_shuffle_shapes_flux():
    # research/flux-tests.md E3: PixelShuffle(2) on (3,18,3) gives (6,9,3); PixelShuffle(3) on
    # (3,4,18,3) gives (9,12,2,3).
    assert _shape(lambda x: pixel_shuffle(x, 2), (3, 18, 3)) == (6, 9, 3)
    assert _shape(lambda x: pixel_shuffle(x, 3), (3, 4, 18, 3)) == (9, 12, 2, 3)
    with pytest.raises(ValueError):
        pixel_shuffle(jnp.ones((3, 4, 5, 1)), 2)


# --- complex input ------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3])
def test_complex_upsample_is_real_and_imag_upsampled(d):
    # NNlib.jl/test/testsuite/upsample.jl, "Complex-valued upsample" (smaller sizes): both parts exactly.
    interp = (upsample_linear, upsample_bilinear, upsample_trilinear)[d - 1]
    k = 2
    rng = np.random.default_rng(d)
    shape = (*(2, 3, 2)[:d], 1, 1)
    x = jnp.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), jnp.complex64)
    xup = interp(x, k)
    assert xup.shape == (*(4, 6, 4)[:d], 1, 1) and xup.dtype == jnp.complex64
    np.testing.assert_array_equal(np.real(xup), interp(jnp.real(x), k))
    np.testing.assert_array_equal(np.imag(xup), interp(jnp.imag(x), k))
    upsize = (4, 9, 6)[:d]
    xup = interp(x, size=upsize)
    assert xup.shape == (*upsize, 1, 1) and xup.dtype == jnp.complex64
    np.testing.assert_array_equal(np.real(xup), interp(jnp.real(x), size=upsize))
    np.testing.assert_array_equal(np.imag(xup), interp(jnp.imag(x), size=upsize))
