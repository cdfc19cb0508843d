"""Convolution layers (fluxjax/layers/conv.py) against Flux's semantics.

Ported cases cite `Flux.jl/test/layers/conv.jl`, `Flux.jl/test/outputsize.jl` and `NNlib.jl/test/conv.jl`
(see research/flux-tests.md, section D). Values are checked against a float64 NumPy loop of NNlib's
definitions (true convolution flips the kernel; `ConvTranspose` is the adjoint, `∇conv_data`), gradients
against central finite differences of that loop.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad as _fd

import fluxjax
from fluxjax.errors import DimensionMismatch
from fluxjax.layers.basic import Chain, Dense
from fluxjax.layers.conv import Conv, ConvTranspose, CrossCor, DepthwiseConv, SamePad
from fluxjax.layers.pooling import MaxPool
from fluxjax.nnlib import conv as nn_conv
from fluxjax.nnlib import conv_transpose, relu, sigmoid, softmax
from fluxjax.outputsize import outputsize

try:
    from fluxjax.data import flatten
except ImportError:  # pragma: no cover - data.py is written by another helper
    def flatten(x):
        return x.T.reshape(x.shape[-1], -1).T


# ---------------------------------------------------------------------------------------------
# float64 NumPy reference of NNlib's conv / ∇conv_data (Flux's layout: (spatial..., C, N))


def _tup(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


def _pairs(pad, n):
    if isinstance(pad, int):
        return [(pad, pad)] * n
    pad = tuple(pad)
    if len(pad) == n:
        return [(p, p) for p in pad]
    return [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]


def np_conv(x, w, *, stride=1, pad=0, dilation=1, groups=1, flipped=False):
    """`y[o, co] = Σ_{k, ci} x[o*s + k*d - lo, g*cin_g + ci] * w[K-1-k, ci, co]` (kernel index K-1-k:
    true convolution; `flipped=True` reads `w[k]`, cross-correlation). Group `g = co ÷ cout_g`.
    A loop over kernel taps and groups; each tap reads a strided window of every output position."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = x.ndim - 2
    s, d, p = _tup(stride, n), _tup(dilation, n), _pairs(pad, n)
    k = w.shape[:n]
    xp = np.pad(x, p + [(0, 0), (0, 0)])
    out = tuple((xp.shape[i] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(n))
    cin_g, cout = w.shape[-2], w.shape[-1]
    cout_g = cout // groups
    y = np.zeros(out + (cout, x.shape[-1]))
    for kk in np.ndindex(*k):
        win = tuple(slice(kk[i] * d[i], kk[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(n))
        wk = kk if flipped else tuple(k[i] - 1 - kk[i] for i in range(n))
        for g in range(groups):
            xs = xp[win + (slice(g * cin_g, (g + 1) * cin_g),)]  # (out..., cin_g, N)
            ws = w[wk + (slice(None), slice(g * cout_g, (g + 1) * cout_g))]  # (cin_g, cout_g)
            y[(...,) + (slice(g * cout_g, (g + 1) * cout_g), slice(None))] += np.einsum("...cb,co->...ob", xs, ws)
    return y


def np_conv_transpose(x, w, *, stride=1, pad=0, dilation=1, groups=1, outpad=0):
    """NNlib's `∇conv_data`: scatter `x[o, ci] * w[K-1-k, c, ci]` to `y[o*s + k*d - lo, g*cout_g + c]`,
    the transpose of `np_conv(·, w)`; `w` is `(k..., cout_g, cin)`. Written on an uncropped canvas
    (offset by `lo`, wide enough for every tap), then cropped to the output size."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = x.ndim - 2
    s, d, p, op = _tup(stride, n), _tup(dilation, n), _pairs(pad, n), _tup(outpad, n)
    k = w.shape[:n]
    cout_g, cin = w.shape[-2], w.shape[-1]
    cin_g = cin // groups
    out = tuple((x.shape[i] - 1) * s[i] + 1 + (k[i] - 1) * d[i] - p[i][0] - p[i][1] + op[i] for i in range(n))
    full = tuple((x.shape[i] - 1) * s[i] + 1 + (k[i] - 1) * d[i] + max(op[i] - p[i][1], 0) for i in range(n))
    canvas = np.zeros(full + (cout_g * groups, x.shape[-1]))
    for kk in np.ndindex(*k):
        win = tuple(slice(kk[i] * d[i], kk[i] * d[i] + (x.shape[i] - 1) * s[i] + 1, s[i]) for i in range(n))
        wk = tuple(k[i] - 1 - kk[i] for i in range(n))
        for g in range(groups):
            ws = w[wk + (slice(None), slice(g * cin_g, (g + 1) * cin_g))]  # (cout_g, cin_g)
            xs = x[(...,) + (slice(g * cin_g, (g + 1) * cin_g), slice(None))]  # (n..., cin_g, N)
            canvas[win + (slice(g * cout_g, (g + 1) * cout_g),)] += np.einsum("...cb,oc->...ob", xs, ws)
    # canvas index q is output position q - lo; negative lo pads zeros at the start
    lo = [p[i][0] for i in range(n)]
    canvas = np.pad(canvas, [(max(-l, 0), 0) for l in lo] + [(0, 0), (0, 0)])
    crop = tuple(slice(max(l, 0), max(l, 0) + out[i]) for i, l in enumerate(lo))
    return canvas[crop]


def _bias(y, b):
    return y + np.asarray(b, np.float64).reshape((1,) * (y.ndim - 2) + (-1, 1))


def _jl(flat, shape):
    """Julia's `reshape(collect(Float32, flat), shape)` (column-major)."""
    return np.reshape(np.asarray(flat, np.float32), shape, order="F")


rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Known answers: a weight "trained in Flux" loaded as is gives Flux's output


def test_nnlib_known_answer_1d():
    # NNlib.jl/test/conv.jl: x = reshape(1.0:5, 5,1,1), w = reshape(1.0:2, 2,1,1)
    x, w = _jl(range(1, 6), (5, 1, 1)), _jl([1, 2], (2, 1, 1))
    assert np.allclose(Conv(w, [0.0], pad=1)(x)[:, 0, 0], [1, 4, 7, 10, 13, 10])
    assert np.allclose(Conv(w, [0.0])(x)[:, 0, 0], [4, 7, 10, 13])
    assert np.allclose(Conv(w, [0.0], dilation=2)(x)[:, 0, 0], [5, 8, 11])
    assert np.allclose(CrossCor(w, [0.0])(x)[:, 0, 0], [5, 8, 11, 14])


def test_nnlib_known_answer_2d():
    # NNlib.jl/test/conv.jl: x = reshape(1.0:20, 5,4,1,1), w = reshape(1.0:4, 2,2,1,1)
    x, w = _jl(range(1, 21), (5, 4, 1, 1)), _jl(range(1, 5), (2, 2, 1, 1))
    expected = np.array([[1, 9, 29, 49, 48], [4, 29, 79, 129, 115], [7, 39, 89, 139, 122],
                         [10, 49, 99, 149, 129], [13, 59, 109, 159, 136], [10, 40, 70, 100, 80]])
    assert np.allclose(Conv(w, [0.0], pad=1)(x)[:, :, 0, 0], expected)
    expected_cc = np.array([[51, 101, 151], [61, 111, 161], [71, 121, 171], [81, 131, 181]])
    assert np.allclose(CrossCor(w, [0.0])(x)[:, :, 0, 0], expected_cc)


def test_flux_weight_loads_as_is():
    # a fixed (k1, k2, cin, cout) kernel and bias, as Flux stores them, give NNlib's output
    w = _jl(np.arange(1, 3 * 2 * 2 * 3 + 1) / 10 - 1.5, (3, 2, 2, 3)).astype(np.float32)
    b = np.array([0.5, -1.0, 2.0], np.float32)
    x = _jl(np.sin(np.arange(6 * 5 * 2 * 2)), (6, 5, 2, 2)).astype(np.float32)
    m = Conv(w, b, stride=(2, 1), pad=(1, 0, 0, 1))
    expected = _bias(np_conv(x, w, stride=(2, 1), pad=(1, 0, 0, 1)), b)
    y = m(x)
    assert y.shape == expected.shape == (3, 5, 3, 2)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kw",
    [dict(), dict(stride=2), dict(pad=1), dict(pad=(1, 2)), dict(pad=(0, 1, 2, 0), stride=(1, 2)),
     dict(dilation=2, pad=1), dict(groups=2)],
)
def test_conv_values(kw):
    x = _r(7, 6, 4, 2)
    w = _r(3, 2, 4 // kw.get("groups", 1), 6)
    b = _r(6)
    m = Conv(w, b, jnp.tanh, **kw)
    np.testing.assert_allclose(m(x), np.tanh(_bias(np_conv(x, w, **kw), b)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, pad=(1, 0, 2, 1), dilation=(1, 2))])
def test_crosscor_values_and_flip(kw):
    # Flux.jl/test/layers/conv.jl "CrossCor"
    x, w = _r(8, 7, 2, 2), _r(3, 2, 2, 4)
    np.testing.assert_allclose(CrossCor(w, False, **kw)(x), np_conv(x, w, flipped=True, **kw), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(CrossCor(w[::-1, ::-1], False, **kw)(x), Conv(w, False, **kw)(x), rtol=1e-6, atol=1e-6)
    assert not np.allclose(CrossCor(w, False, **kw)(x), Conv(w, False, **kw)(x))
    w1 = _r(2, 2, 1, 1)
    x1 = _r(28, 28, 1, 1)
    assert np.isclose(CrossCor(w1, [0.0])(x1)[0, 0, 0, 0], np.sum(w1 * x1[0:2, 0:2]), rtol=1e-5)


def test_conv_3d_and_1d_values():
    x, w = _r(5, 4, 4, 2, 1), _r(2, 3, 2, 2, 3)
    np.testing.assert_allclose(Conv(w, False, pad=(1, 0, 1))(x), np_conv(x, w, pad=(1, 0, 1)), rtol=1e-5, atol=1e-5)
    x, w = _r(9, 3, 2), _r(4, 3, 2)
    np.testing.assert_allclose(Conv(w, False, stride=2)(x), np_conv(x, w, stride=2), rtol=1e-5, atol=1e-5)


def test_delta_gives_unflipped_weight():
    # Flux.jl/test/layers/conv.jl "Conv with non quadratic window #700"
    data = np.zeros((7, 7, 1, 1), np.float32)
    data[3, 3, 0, 0] = 1
    m = Conv((3, 3), (1, 1))
    expected = np.zeros((5, 5, 1, 1), np.float32)
    expected[1:-1, 1:-1] = m.weight
    np.testing.assert_allclose(m(data), expected, atol=1e-7)
    m = Conv((3, 1), (1, 1))
    expected = np.zeros((5, 7, 1, 1), np.float32)
    expected[1:-1, 3:4] = m.weight
    np.testing.assert_allclose(m(data), expected, atol=1e-7)
    m = Conv((1, 3), (1, 1))
    expected = np.zeros((7, 5, 1, 1), np.float32)
    expected[3:4, 1:-1] = m.weight
    np.testing.assert_allclose(m(data), expected, atol=1e-7)
    assert Conv((6, 1), (1, 1), sigmoid)(_r(10, 10, 1, 1)).shape == (5, 10, 1, 1)


def test_asymmetric_padding():
    # Flux.jl/test/layers/conv.jl "asymmetric padding"
    m = Conv(np.ones((3, 3, 1, 1), np.float32), np.zeros(1, np.float32), relu, pad=(0, 1, 1, 2))
    y = np.asarray(m(np.ones((28, 28, 1, 1), np.float32)))[:, :, 0, 0]
    assert y.shape == (27, 29)
    assert (y[0, 0], y[1, 1], y[-1, 0], y[0, -1], y[0, -2], y[-1, -1]) == (6, 9, 4, 3, 6, 2)


def test_bias_only_and_no_bias():
    # Flux.jl/test/layers/conv.jl "CNN": bias switch, "No bias"
    op = Conv(np.ones((2, 2, 1, 3), np.float32), np.ones(3, np.float32))(np.zeros((28, 28, 1, 1), np.float32))
    assert float(jnp.sum(op)) == op.size
    m = Conv((2, 2), (1, 3), bias=False)
    ip = jnp.zeros((28, 28, 1, 1))
    assert float(jnp.sum(m(ip))) == 0.0
    (g,) = fluxjax.gradient(lambda m: jnp.sum(m(ip)), m)
    assert g.bias is None
    assert g.weight.shape == (2, 2, 1, 3)


def test_grouped_conv_shapes():
    # Flux.jl/test/layers/conv.jl "Grouped Conv"
    c = Conv((3,), (100, 25), groups=5)
    assert c.weight.shape == (3, 20, 25)
    assert outputsize(c, (28, 100, 2)) == (26, 25, 2)
    c = Conv((3, 3), (100, 25), groups=5)
    assert c.weight.shape == (3, 3, 20, 25)
    assert c(jnp.ones((28, 28, 100, 2))).shape == (26, 26, 25, 2)
    c = Conv((3, 4, 5), (100, 25), groups=5)
    assert c.weight.shape == (3, 4, 5, 20, 25)
    assert outputsize(c, (10, 11, 12, 100, 2)) == (8, 8, 8, 25, 2)
    with pytest.raises(ValueError):
        Conv((2, 2), (3, 10), groups=2)
    with pytest.raises(ValueError):
        Conv((2, 2), (2, 9), groups=2)
    with pytest.raises(DimensionMismatch):
        Conv((3, 3), (1, 1), init=lambda *s: np.random.rand(3, 3, 1))


def test_depthwise():
    # Flux.jl/test/layers/conv.jl "Depthwise Conv"
    r = jnp.zeros((28, 28, 3, 5))
    m1 = DepthwiseConv((2, 2), (3, 15))
    assert isinstance(m1, Conv) and m1.groups == 3 and m1.weight.shape == (2, 2, 1, 15)
    assert m1(r).shape[2] == 15
    assert DepthwiseConv((2, 3), (3, 9))(r).shape[2] == 9
    assert DepthwiseConv((2, 3), (3, 9), bias=False).bias is False
    with pytest.raises(ValueError):
        DepthwiseConv((2, 2), (3, 10))
    # grouped values: output channel co reads input channel co ÷ (cout/cin)
    x, w = _r(6, 5, 3, 2), _r(3, 3, 1, 6)
    np.testing.assert_allclose(Conv(w, False, groups=3)(x), np_conv(x, w, groups=3), rtol=1e-5, atol=1e-5)
    # the array form reshapes (k..., a, b) column-major to (k..., 1, a*b) with groups = a (Flux's code)
    w3 = _r(2, 2, 3, 2)
    m = DepthwiseConv(w3)
    assert m.groups == 3 and m.weight.shape == (2, 2, 1, 6)
    np.testing.assert_array_equal(m.weight, np.reshape(w3, (2, 2, 1, 6), order="F"))


def test_constructors():
    # Flux.jl/test/layers/conv.jl "constructors"
    for fun in (Conv, CrossCor, ConvTranspose, DepthwiseConv):
        assert fun(np.random.rand(2, 3, 4)).bias.dtype == fun(np.random.rand(2, 3, 4)).weight.dtype
        assert fun(np.random.rand(2, 3, 4, 5), False).bias is False
        with pytest.raises(DimensionMismatch):
            fun(np.random.rand(2, 3, 4), np.random.rand(6))
    assert Conv(np.random.rand(2, 3, 4, 5, 6), np.random.rand(6)).bias.shape == (6,)
    assert DepthwiseConv(np.random.rand(2, 3, 4, 5, 6), np.random.rand(30)).bias.shape == (30,)
    # σ as the second argument, and the `bias=` keyword in the array form
    w = _r(3, 2, 4)
    assert Conv(w, relu).sigma is relu
    assert Conv(w, bias=False).bias is False
    # sizes as cin, cout (the tuple spelling is Flux's in => out)
    assert Conv((3,), 2, 4, relu).weight.shape == (3, 2, 4)
    m = Conv((3, 3), (2, 4), stride=2, pad=1, dilation=(1, 2))
    assert (m.stride, m.pad, m.dilation, m.groups) == ((2, 2), (1, 1, 1, 1), (1, 2), 1)
    assert Conv((3, 3), (2, 4), pad=(1, 2)).pad == (1, 2)
    with pytest.raises(TypeError):
        Conv(3, (2, 4))


def test_channels_in_out():
    # Flux.jl/test/layers/conv.jl "_channels_in, _channels_out" (read from the printed `in => out`)
    for k in ((3,), (5, 6), (1, 2, 3)):
        assert "2 => 4" in repr(Conv(k, (2, 4)))
    assert ConvTranspose((6,), (8, 4), groups=4).weight.shape == (6, 1, 8)
    assert "8 => 4" in repr(ConvTranspose((6,), (8, 4), groups=4))
    assert "10 => 15" in repr(ConvTranspose((3, 2), (10, 15), groups=5))
    for groups, k, cin, cout in ((3, (2,), 6, 9), (2, (1, 3), 4, 2), (4, (2, 2, 1), 8, 12)):
        for Layer in (Conv, ConvTranspose):
            assert f"{cin} => {cout}" in repr(Layer(k, (cin, cout), groups=groups))


def test_convtranspose_shapes():
    # Flux.jl/test/layers/conv.jl "ConvTranspose"
    x = jnp.zeros((5, 5, 1, 1))
    y = Conv((3, 3), (1, 1))(x)
    assert ConvTranspose((3, 3), (1, 1))(y).shape == ConvTranspose((3, 3), (1, 1), bias=False)(y).shape == x.shape
    x = _r(10, 10, 2, 3)
    m1 = ConvTranspose((3, 3), (2, 4), pad=SamePad())
    assert m1.weight.shape == (3, 3, 4, 2)
    assert m1(x).shape == (10, 10, 4, 3)
    m2 = ConvTranspose((3, 3), (2, 4), groups=2, pad=SamePad())
    assert m2.weight.shape == (3, 3, 2, 2)
    assert m2(x).shape == (10, 10, 4, 3)
    (g,) = fluxjax.gradient(lambda m: jnp.sum(m(x)), m2)
    assert g.weight.shape == (3, 3, 2, 2)
    m = ConvTranspose((3,), (2, 4), pad=SamePad(), groups=2)
    assert outputsize(m, (10, 2, 1)) == (10, 4, 1) and m.weight.size == 3 * 2 * 4 // 2
    m = ConvTranspose((3, 5), (4, 4), pad=SamePad(), groups=4)
    assert outputsize(m, (10, 11, 4, 2)) == (10, 11, 4, 2) and m.weight.size == 3 * 5 * 4 * 4 // 4
    m = ConvTranspose((3, 5, 3), (3, 6), pad=SamePad(), groups=3)
    assert outputsize(m, (10, 11, 12, 3, 2)) == (10, 11, 12, 6, 2)
    assert "groups=2" in repr(ConvTranspose((3, 3), (2, 4), groups=2))
    assert "2 => 4" in repr(ConvTranspose((3, 3), (2, 4), groups=2))
    s1 = outputsize(ConvTranspose((3, 5), (3, 6), stride=3), (10, 11, 3, 2))
    s2 = outputsize(ConvTranspose((3, 5), (3, 6), stride=3, outpad=(1, 0)), (10, 11, 3, 2))
    assert s2[:2] == (s1[0] + 1, s1[1])
    m1 = ConvTranspose((3, 5, 3), (3, 6), stride=3)
    m2 = ConvTranspose((3, 5, 3), (3, 6), stride=3, outpad=(1, 0, 1))
    o1, o2 = outputsize(m1, (10, 11, 12, 3, 2)), outputsize(m2, (10, 11, 12, 3, 2))
    assert o2[:3] == (o1[0] + 1, o1[1], o1[2] + 1)
    # Flux's docstring
    xs = jnp.ones((100, 100, 3, 50))
    assert outputsize(ConvTranspose((5, 5), (3, 7), relu), xs.shape) == (104, 104, 7, 50)
    assert outputsize(ConvTranspose((5, 5), (3, 7), stride=2), xs.shape) == (203, 203, 7, 50)
    assert outputsize(ConvTranspose((5, 5), (3, 7), stride=2, outpad=1), xs.shape) == (204, 204, 7, 50)
    assert outputsize(ConvTranspose((5, 5), (3, 7), stride=3, pad=SamePad()), xs.shape) == (300, 300, 7, 50)


@pytest.mark.parametrize(
    "kw",
    [dict(), dict(stride=2), dict(stride=(2, 3), pad=(1, 0, 2, 1)), dict(dilation=2, pad=1),
     dict(stride=2, outpad=1, pad=1), dict(groups=2, stride=2)],
)
def test_convtranspose_values_and_adjoint(kw):
    cin, cout = 4, 6
    g = kw.get("groups", 1)
    w, b, x = _r(3, 2, cout // g, cin), _r(cout), _r(4, 5, cin, 2)
    m = ConvTranspose(w, b, **kw)
    y = m(x)
    n = x.shape[:2]
    s, d = _tup(kw.get("stride", 1), 2), _tup(kw.get("dilation", 1), 2)
    p, op = _pairs(kw.get("pad", 0), 2), _tup(kw.get("outpad", 0), 2)
    size = tuple((n[i] - 1) * s[i] + 1 + (w.shape[i] - 1) * d[i] - sum(p[i]) + op[i] for i in range(2))
    assert y.shape == (*size, cout, 2)
    ref = _bias(np_conv_transpose(x, w, **kw), b)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    # the adjoint of Conv(w): vjp of conv at an input of the output's size, with cotangent x
    ckw = {k: v for k, v in kw.items() if k != "outpad"}
    z = jnp.zeros(y.shape)
    out, back = jax.vjp(lambda z: nn_conv(z, jnp.asarray(w), **ckw), z)
    assert out.shape == x.shape
    (adj,) = back(jnp.asarray(x))
    np.testing.assert_allclose(ConvTranspose(w, False, **kw)(x), adj, rtol=1e-5, atol=1e-5)


def test_convtranspose_outpad_must_be_below_stride():
    # NNlib's ∇conv_data checks that a convolution maps the output back onto the input
    # (check_dims: "Data output spatial size"), which holds only for outpad < stride: Flux errors
    # for ConvTranspose((3,), 1 => 1, stride=2, outpad=2); fluxjax gave an 11-long output padded with zeros.
    x = _jl(range(1, 5), (4, 1, 1))
    m = ConvTranspose(_jl([1, 1, 1], (3, 1, 1)), False, stride=2, outpad=1)
    np.testing.assert_allclose(m(x)[:, 0, 0], [1, 1, 3, 2, 5, 3, 7, 4, 4, 0])  # the largest allowed outpad
    for kw in (dict(stride=2, outpad=2), dict(stride=1, outpad=1), dict(stride=(2, 3), outpad=(1, 3))):
        with pytest.raises(ValueError, match="outpad must be smaller than stride"):
            ConvTranspose((3, 3), (1, 1), **kw)
    with pytest.raises(ValueError, match="outpad < stride"):
        conv_transpose(jnp.ones((4, 1, 1)), jnp.ones((3, 1, 1)), stride=2, outpad=2)


# ---------------------------------------------------------------------------------------------
# SamePad


def test_samepad_extra_pixel_at_start():
    x = _jl(range(1, 6), (5, 1, 1))
    w = _jl([1, 2], (2, 1, 1))
    m = Conv(w, [0.0], pad=SamePad())
    assert m.pad == (1, 0)
    np.testing.assert_allclose(m(x)[:, 0, 0], [1, 4, 7, 10, 13])  # padded at the start; "SAME" gives [4,...,10]
    assert Conv((4, 3), (1, 1), pad=SamePad()).pad == (2, 1, 1, 1)
    assert Conv((4, 3), (1, 1), pad=SamePad(), dilation=(2, 3)).pad == (3, 3, 3, 3)
    assert repr(Conv((2, 2), (3, 7), pad=SamePad())).startswith("Conv((2, 2), 3 => 7, pad=(1, 0, 1, 0))")


@pytest.mark.parametrize(
    "k,stride,dilation", [((2, 2), 1, 1), ((4, 3), 1, 1), ((3, 4), 2, 1), ((2, 3), 3, 2), ((5, 4), 2, (2, 1))]
)
def test_samepad_values(k, stride, dilation):
    x, w = _r(9, 8, 2, 1), _r(*k, 2, 3)
    keff = [(kk - 1) * dd + 1 for kk, dd in zip(k, _tup(dilation, 2))]
    pad = []
    for ke in keff:
        pad += [-(-(ke - 1) // 2), (ke - 1) // 2]  # cld, fld: more at the start
    for L, ref in ((Conv, np_conv(x, w, stride=stride, pad=pad, dilation=dilation)),
                   (CrossCor, np_conv(x, w, stride=stride, pad=pad, dilation=dilation, flipped=True))):
        y = L(w, False, stride=stride, pad=SamePad(), dilation=dilation)(x)
        assert y.shape[:2] == tuple(-(-n // s) for n, s in zip((9, 8), _tup(stride, 2)))
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,stride", [((3,), 2), ((2,), 3), ((4,), 2), ((5,), 1), ((1,), 3)])
def test_samepad_convtranspose_values(k, stride):
    x, w = _r(6, 2, 1), _r(*k, 3, 2)
    m = ConvTranspose(w, False, stride=stride, pad=SamePad())
    t = k[0] - stride  # Flux: SamePad of the kernel k - stride + 1
    assert m.pad == (-(-t // 2), t // 2)
    y = m(x)
    assert y.shape == (6 * stride, 3, 1)
    np.testing.assert_allclose(y, np_conv_transpose(x, w, stride=stride, pad=m.pad), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [(1,), (2,), (3,), (4, 5), (6, 7, 8)])
@pytest.mark.parametrize("L", [Conv, ConvTranspose, DepthwiseConv, CrossCor])
def test_samepad_all_kernel_sizes(L, k):
    # Flux.jl/test/layers/conv.jl "$ltype SamePad kernelsize $k"
    size = tuple(kk + 3 for kk in k) + (1, 1)
    assert outputsize(L(k, (1, 1), pad=SamePad()), size) == size
    assert outputsize(L(k, (1, 1), pad=SamePad(), dilation=tuple(kk // 2 for kk in k)), size) == size
    out = outputsize(L(k, (1, 1), pad=SamePad(), stride=3), size)
    if L is ConvTranspose:
        assert out[:-2] == tuple(3 * n for n in size[:-2])
    else:
        assert out[:-2] == tuple(-(-n // 3) for n in size[:-2])
    if len(k) <= 2:  # and really run, not only traced
        assert L(k, (1, 1), pad=SamePad())(jnp.ones(size)).shape == size


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("L", [Conv, ConvTranspose, DepthwiseConv, CrossCor])
def test_symmetric_nonconstant_padding(L, nd):
    # Flux.jl/test/layers/conv.jl "$ltype $(nd)D symmetric non-constant padding"
    kernel = (3,) * nd
    size = tuple(k + 5 for k in kernel) + (1, 1)
    pad = tuple(range(1, nd + 1))
    expanded = tuple(pad[i // 2] for i in range(2 * nd))
    assert outputsize(L(kernel, (1, 1), pad=pad), size) == outputsize(L(kernel, (1, 1), pad=expanded), size)


# ---------------------------------------------------------------------------------------------
# Gradients vs central finite differences of the float64 NumPy reference (tiny: 5x5x2x2)


@pytest.mark.parametrize(
    "L,kw",
    [(Conv, dict(pad=1, stride=2)), (Conv, dict(groups=2, dilation=(1, 2), pad=(1, 0, 1, 1))),
     (CrossCor, dict(pad=(0, 1, 1, 0))), (ConvTranspose, dict(stride=2, pad=1)), (ConvTranspose, dict(groups=2))],
)
def test_gradients_vs_finite_differences(L, kw):
    x = _r(5, 5, 2, 2)
    g_ = kw.get("groups", 1)
    wshape = (3, 2, 2 // g_, 4) if L is not ConvTranspose else (3, 2, 4 // g_, 2)
    w, b = _r(*wshape) * 0.5, _r(4)
    m = L(w, b, jnp.tanh, **kw)
    y0 = m(x)
    c = _r(*y0.shape)

    def ref(x, w, b):
        f = np_conv_transpose if L is ConvTranspose else np_conv
        extra = dict(flipped=True) if L is CrossCor else {}
        return float(np.sum(c * np.tanh(_bias(f(x, w, **kw, **extra), b))))

    gm, gx = fluxjax.gradient(lambda m, x: jnp.sum(c * m(x)), m, jnp.asarray(x))
    np.testing.assert_allclose(gx, _fd(lambda a: ref(a, w, b), x), rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(gm.weight, _fd(lambda a: ref(x, a, b), w), rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(gm.bias, _fd(lambda a: ref(x, w, a), b), rtol=2e-3, atol=2e-4)
    assert gm.stride is None and gm.sigma is None


# ---------------------------------------------------------------------------------------------
# params, printing, errors, dtypes, jit


def test_params_counts():
    assert [p.shape for p in fluxjax.params(Conv((3, 3), (2, 4)))] == [(3, 3, 2, 4), (4,)]
    assert len(fluxjax.params(Conv((3, 3), (2, 4), bias=False))) == 1
    assert sum(p.size for p in fluxjax.params(ConvTranspose((5, 5), (3, 7)))) == 532
    assert sum(p.size for p in fluxjax.params(DepthwiseConv((5, 5), (3, 6), bias=False))) == 150
    assert sum(p.size for p in fluxjax.params(CrossCor((5, 5), (3, 6)))) == 456


def test_printing():
    # Flux's docstrings in src/layers/conv.jl
    assert repr(Conv((5, 5), (3, 7), relu, bias=False)) == "Conv((5, 5), 3 => 7, relu, bias=false)  # 525 parameters"
    assert repr(Conv((2, 2), (3, 7))).startswith("Conv((2, 2), 3 => 7)")
    assert repr(Conv((5, 5), (3, 7), stride=2, pad=SamePad())).startswith("Conv((5, 5), 3 => 7, pad=2, stride=2)")
    assert repr(Conv(_r(3, 4, 5), np.zeros(5, np.float32), jnp.tanh)).startswith("Conv((3,), 4 => 5, tanh)")
    assert repr(Conv((3, 3), (2, 4), dilation=(1, 2), groups=2)).startswith("Conv((3, 3), 2 => 4, dilation=(1, 2), groups=2)")
    assert repr(ConvTranspose((5, 5), (3, 7), relu)).startswith("ConvTranspose((5, 5), 3 => 7, relu)")
    assert repr(ConvTranspose(_r(3, 4, 5), np.zeros(4, np.float32))).startswith("ConvTranspose((3,), 5 => 4)")
    assert repr(ConvTranspose((3, 3), (2, 4), stride=2, outpad=(1, 0))).startswith(
        "ConvTranspose((3, 3), 2 => 4, stride=2, outpad=(1, 0))"
    )
    assert repr(DepthwiseConv((5, 5), (3, 6), relu, bias=False)).startswith("Conv((5, 5), 3 => 6, relu, groups=3, bias=false)")
    assert repr(CrossCor((5, 5), (3, 6), relu, bias=False)).startswith("CrossCor((5, 5), 3 => 6, relu, bias=false)")
    assert repr(SamePad()) == "SamePad()"
    assert "# 91 parameters" in repr(Conv((2, 2), (3, 7), pad=SamePad()))


def test_dimension_mismatch_messages():
    m = Conv((3, 3), (1, 16))
    with pytest.raises(DimensionMismatch) as e:
        m(jnp.ones((28, 28, 3, 2)))
    assert str(e.value) == (
        "layer Conv((3, 3), 1 => 16) expects size(input, 3) == 1, but got 28×28×3×2 Array{float32}. In Python terms: "
        "Conv((3, 3), 1 => 16) expects x.shape[2] == 1 (width, height, ..., channels, batch), got x.shape == (28, 28, 3, 2)"
    )
    with pytest.raises(DimensionMismatch, match=r"expects ndims\(input\) == 4, but got 28×28×1 Array"):
        m(jnp.ones((28, 28, 1)))
    with pytest.raises(DimensionMismatch, match=r"layer ConvTranspose\(\(3,\), 2 => 4\) expects size\(input, 2\) == 2"):
        ConvTranspose((3,), (2, 4))(jnp.ones((5, 4, 1)))
    with pytest.raises(DimensionMismatch, match=r"layer CrossCor"):
        CrossCor((3,), (2, 4))(jnp.ones((5, 3, 1)))
    with pytest.raises(DimensionMismatch, match=r"groups=2\) expects size\(input, 3\) == 4"):
        Conv((3, 3), (4, 2), groups=2)(jnp.ones((5, 5, 2, 1)))
    assert isinstance(DimensionMismatch("x"), ValueError)


def test_type_matching():
    # Flux.jl/test/layers/conv.jl "type matching": Float64 and Int input give Float32 output
    x = np.random.rand(10, 2, 5)
    xi = np.random.randint(-3, 4, (10, 2, 5))
    for m in (Conv((3,), (2, 4), relu), CrossCor((3,), (2, 1), relu), ConvTranspose((3,), (2, 4), relu)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert m(x).dtype == jnp.float32
        assert m(xi).dtype == jnp.float32


def test_jit_and_pytree():
    m = Conv((3, 3), (2, 3), relu, stride=2, pad=SamePad())
    x = _r(8, 8, 2, 2)
    y = jax.jit(lambda m, x: m(x))(m, x)
    np.testing.assert_allclose(y, m(x), rtol=1e-5)
    leaves, tree = jax.tree_util.tree_flatten(m)
    assert len(leaves) == 2
    m2 = jax.tree_util.tree_unflatten(tree, leaves)
    assert m2.pad == m.pad and m2.stride == (2, 2)


# ---------------------------------------------------------------------------------------------
# Models: Flux's CNN test and LeNet-5


def test_cnn_shape():
    # Flux.jl/test/layers/conv.jl "CNN" and "CrossCor"
    r = jnp.zeros((28, 28, 1, 5))
    for C in (Conv, CrossCor):
        m = Chain(C((2, 2), (1, 16), relu), MaxPool((2, 2)), C((2, 2), (16, 8), relu, bias=False), MaxPool((2, 2)),
                  flatten, Dense(288, 10), softmax)
        assert (m(r).shape if C is Conv else outputsize(m, r.shape)) == (10, 5)


def _lenet():
    return Chain(
        Conv((5, 5), (1, 6), relu), MaxPool((2, 2)), Conv((5, 5), (6, 16), relu), MaxPool((2, 2)),
        flatten, Dense(256, 120, relu), Dense(120, 84, relu), Dense(84, 10),
    )


@pytest.mark.slow  # (long; the default run keeps its smaller siblings)
def test_lenet_forward_backward():
    m = _lenet()
    assert outputsize(m, (28, 28, 1, 1)) == (10, 1)
    x = jnp.asarray(_r(28, 28, 1, 4))
    labels = np.array([3, 1, 4, 1])
    y = jax.nn.one_hot(labels, 10).T  # (10, 4), classes along axis 0

    def loss(m, x, y):
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(m(x), axis=0), axis=0))

    assert m(x).shape == (10, 4)
    val, (g,) = fluxjax.withgradient(lambda m: loss(m, x, y), m)
    assert np.isfinite(float(val))
    shapes = [(5, 5, 1, 6), (6,), (5, 5, 6, 16), (16,), (120, 256), (120,), (84, 120), (84,), (10, 84), (10,)]
    got = []
    for i, lay in enumerate(m):
        if hasattr(lay, "weight"):
            got += [g.layers[i].weight.shape, g.layers[i].bias.shape]
    assert got == shapes
    # the same numbers as jax.grad of the pure function
    jg = jax.grad(lambda m: loss(m, x, y))(m)
    for i in (0, 2, 5, 7):
        np.testing.assert_allclose(g.layers[i].weight, jg.layers[i].weight, rtol=1e-5, atol=1e-7)
    assert sum(p.size for p in fluxjax.params(m)) == 156 + 2416 + 30840 + 10164 + 850


def test_negative_padding_crops_as_flux():
    """Flux's `calc_padding` keeps a negative pad and NNlib crops by it: the model zoo's diffusion_mnist
    builds `ConvTranspose((3, 3), 2c => c, pad=(0, -1, 0, -1), stride=2)`, whose numbers are those of
    `pad=0, outpad=1`; a `Conv` with `pad=-1` is the `Conv` of the input cropped by one on each side."""
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((5, 6, 4, 2)), jnp.float32)
    up = fluxjax.ConvTranspose((3, 3), (4, 2), pad=(0, -1, 0, -1), stride=2, bias=False)
    ref = fluxjax.ConvTranspose((3, 3), (4, 2), stride=2, outpad=1, bias=False)
    ref.weight = up.weight
    assert up(x).shape == ((5 - 1) * 2 + 3 + 1, (6 - 1) * 2 + 3 + 1, 2, 2)
    np.testing.assert_allclose(up(x), ref(x), rtol=1e-6, atol=1e-6)
    gu, gr = (fluxjax.gradient(lambda m: jnp.sum(m(x) ** 2), m)[0].weight for m in (up, ref))
    np.testing.assert_allclose(gu, gr, rtol=1e-5, atol=1e-5)
    for layer in (fluxjax.Conv, fluxjax.CrossCor):
        c = layer((3, 3), (4, 2), pad=(-1, 0, 0, -2))
        d = layer((3, 3), (4, 2))
        d.weight, d.bias = c.weight, c.bias
        np.testing.assert_allclose(c(x), d(x[1:, :-2]), rtol=1e-6, atol=1e-6)
    assert fluxjax.MaxPool((2, 2), pad=-1)(x).shape == (1, 2, 4, 2)
    np.testing.assert_array_equal(fluxjax.MaxPool((2, 2), pad=-1)(x), fluxjax.MaxPool((2, 2))(x[1:-1, 1:-1]))
    with pytest.raises(DimensionMismatch, match=r"Conv\(\(3, 3\), 4 => 2, pad=-2\) needs a \(padded\) spatial size of at least 3"):
        fluxjax.Conv((3, 3), (4, 2), pad=-2)(x)
