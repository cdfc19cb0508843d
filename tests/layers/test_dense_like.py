"""Tests for Bilinear, Scale and Embedding (fluxjax/layers/dense_like.py).

Cases marked "Flux basic.jl" port `Flux.jl/test/layers/basic.jl` (research/flux-tests.md C4, C9);
"Flux docstring" cases port the examples in `Flux.jl/src/layers/basic.jl`. Indices are 0-based here
(Flux's `m(2)` is `m(1)`). Values are checked against float64 NumPy computations of Flux's definitions,
gradients against central finite differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grads as _fd

import fluxjax
from fluxjax.data import onehot, onehotbatch
from fluxjax.errors import DimensionMismatch
from fluxjax.init import identity_init, randn32, zeros32
from fluxjax.layers.basic import Chain, Dense
from fluxjax.layers.containers import SkipConnection
from fluxjax.layers.dense_like import Bilinear, Embedding, Scale

RNG = np.random.default_rng(1)


def abs2(x):  # Julia's abs2, so that printing shows Flux's name
    return x * x


def _jgrad(f, *args):
    """`fluxjax.gradient` under `jax.jit`: one compilation instead of one per primitive (keeps tests fast)."""
    return jax.jit(lambda *a: fluxjax.gradient(f, *a))(*args)


def _close(a, b, rtol=1e-3, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=rtol, atol=atol)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


# --------------------------------------------------------------------------------------------- Bilinear


def _np_bilinear(W, b, x, y, sigma=lambda z: z):
    z = np.einsum("oij,i...,j...->o...", W, x, y)
    return sigma(z + (b if z.ndim == 1 else b[:, None]))


def test_bilinear_docstring():
    # Flux docstring (sizes of the SkipConnection example shrunk)
    x, y = _f32(5, 3), _f32(5, 3)
    B = Bilinear((5, 5), 7)
    assert repr(B).startswith("Bilinear(5 => 7)") and repr(B).endswith("# 182 parameters")
    assert B(x).shape == (7, 3)
    assert jnp.array_equal(B(x, y), B((x, y)))
    sc = SkipConnection(Chain(Dense(5, 4, jnp.tanh), Dense(4, 3, jnp.tanh)), Bilinear((3, 5), 2, bias=False))
    assert sc(x).shape == (2, 3)
    b = Bilinear(RNG.random((4, 8, 16)), False, jnp.tanh)
    assert b._show() == "Bilinear((8, 16) => 4, tanh; bias=false)"
    assert repr(b).endswith("# 512 parameters")


def test_bilinear_flux_cases():
    # Flux basic.jl "Bilinear" (sizes shrunk from 10)
    sc = SkipConnection(Dense(3, 3), Bilinear(3, 3, 2))  # "SkipConnection recombinator"
    assert sc(_f32(3, 4)).shape == (2, 4)
    b = Bilinear(3, 2, 3)  # "Two-streams zero sum"
    z = b(jnp.zeros((3, 4)), jnp.zeros((2, 4)))
    assert z.shape == (3, 4) and float(jnp.sum(z**2)) == 0.0
    assert Bilinear(4, 4, 3)(_f32(4, 5)).shape == (3, 5)  # "Inner interactions"
    # "constructors"
    b1 = Bilinear(RNG.standard_normal((3, 4, 5)))
    assert b1.bias.shape == (3,) and b1.sigma is fluxjax.layers.basic.identity
    assert Bilinear(RNG.standard_normal((3, 4, 5)), False).bias is False
    b3 = Bilinear(RNG.standard_normal((3, 4, 5)), True, jnp.tanh)
    assert b3.sigma is jnp.tanh and b3(_f32(4), _f32(5)).shape == (3,)
    b4 = Bilinear(3, 3, 7, bias=np.arange(7), init=zeros32)
    assert b4.bias.dtype == jnp.float32 and b4.weight.shape == (7, 3, 3)
    with pytest.raises(ValueError, match="3-array"):
        Bilinear(RNG.random(3))
    with pytest.raises(ValueError, match="3-array"):
        Bilinear(RNG.random((3, 4)), False, jnp.tanh)
    with pytest.raises(ValueError, match="bias"):
        Bilinear(RNG.random((3, 4, 5)), RNG.random(6), jnp.tanh)  # wrong length bias


def test_bilinear_spellings_and_print():
    assert Bilinear(((4, 5), 3))._show() == "Bilinear((4, 5) => 3)"
    assert Bilinear((4, 5), 3, jnp.tanh)._show() == "Bilinear((4, 5) => 3, tanh)"
    assert Bilinear((4, 3))._show() == "Bilinear(4 => 3)"
    assert Bilinear(4, 3, bias=False)._show() == "Bilinear(4 => 3; bias=false)"
    assert Bilinear(4, 5, 3, jnp.tanh).weight.shape == (3, 4, 5)
    assert [tuple(p.shape) for p in fluxjax.params(Bilinear((4, 5), 3))] == [(3, 4, 5), (3,)]
    assert len(fluxjax.params(Bilinear((4, 5), 3, bias=False))) == 1
    with pytest.raises(ValueError, match="positive"):
        Bilinear((0, 5), 3)


def test_bilinear_values_and_gradient():
    W, b = _f32(3, 2, 4), _f32(3)
    B = Bilinear(W, b, jnp.tanh)
    x, y = _f32(2, 5), _f32(4, 5)
    ref = lambda W, b, x, y: _np_bilinear(W, b, x, y, np.tanh)
    _close(B(x, y), ref(*_f64(W, b, x, y)))
    _close(B(x[:, 0], y[:, 0]), ref(*_f64(W, b, x[:, 0], y[:, 0])))  # vectors
    gB, gx, gy = fluxjax.gradient(lambda B, x, y: jnp.sum(B(x, y) ** 2), B, x, y)
    fd = _fd(lambda *a: np.sum(ref(*a) ** 2), [W, b, x, y])
    for g, r in zip([gB.weight, gB.bias, gx, gy], fd):
        _close(g, r)
    assert gB.sigma is None
    # B(x) == B(x, x)
    Bs = Bilinear(_f32(2, 3, 3), _f32(2))
    xs = _f32(3, 2)
    _close(Bs(xs), _np_bilinear(*_f64(Bs.weight, Bs.bias, xs, xs)))
    gs = _jgrad(lambda B, x: jnp.sum(B(x) ** 2), Bs, xs)
    fd = _fd(lambda W, b, x: np.sum(_np_bilinear(W, b, x, x) ** 2), [Bs.weight, Bs.bias, xs])
    for g, r in zip([gs[0].weight, gs[0].bias, gs[1]], fd):
        _close(g, r)


def test_bilinear_errors():
    B = Bilinear((2, 4), 3)
    with pytest.raises(DimensionMismatch, match=r"Bilinear\(\(2, 4\) => 3\).*size\(x, 1\) == 2.*3×5"):
        B(jnp.ones((3, 5)), jnp.ones((4, 5)))
    with pytest.raises(DimensionMismatch, match=r"size\(y, 1\) == 4"):
        B(jnp.ones((2, 5)), jnp.ones((3, 5)))
    with pytest.raises(DimensionMismatch, match="columns"):
        B(jnp.ones((2, 5)), jnp.ones((4, 6)))
    with pytest.raises(DimensionMismatch, match="columns"):
        B(jnp.ones(2), jnp.ones((4, 1)))
    with pytest.raises(DimensionMismatch):
        B(jnp.ones((2, 5, 1)), jnp.ones((4, 5, 1)))
    with pytest.raises(DimensionMismatch):
        B(jnp.ones((2, 5)))  # B(x) == B(x, x) needs in1 == in2
    with pytest.raises(ValueError, match="tuple of 2"):
        B((jnp.ones(2), jnp.ones(4), jnp.ones(4)))


# --------------------------------------------------------------------------------------------- Scale


def test_scale_flux_cases():
    # Flux basic.jl "Scale" (10 shrunk to 3)
    assert Scale(3)(_f32(3)).shape == (3,)
    assert Scale(3)(_f32(1)).shape == (3,)
    assert Scale(3, bias=False)(_f32(3)).shape == (3,)
    assert Scale(3, jnp.tanh)(_f32(3)).shape == (3,)
    with pytest.raises(DimensionMismatch, match=r"Scale\(3\).*\(3,\).*2 Vector"):
        Scale(3)(_f32(2))
    np.testing.assert_array_equal(Scale(2)(jnp.array([[1, 2]])), [[1, 2], [1, 2]])
    np.testing.assert_array_equal(Scale(2)(jnp.array([1, 2])), [1, 2])
    assert not np.array_equal(Scale(2, init=randn32)(jnp.array([1, 2])), [1, 2])
    np.testing.assert_array_equal(Scale(2, bias=False)(jnp.array([[1, 2], [3, 4]])), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(Scale(2, abs2, bias=False)(jnp.array([[1, 2], [3, 4]])), [[1, 4], [9, 16]])
    x = RNG.random((2, 3, 4)).astype(np.float32)
    assert Scale(2)(x).shape == (2, 3, 4)
    assert Scale(2, 3)(x).shape == (2, 3, 4)
    assert Scale(2, 3, 4, bias=False)(x).shape == (2, 3, 4)
    x1 = RNG.random((2, 1, 4)).astype(np.float32)
    assert Scale(2, 3, bias=False)(x1).shape == (2, 3, 4)
    np.testing.assert_array_equal(Scale(2, 3, jnp.tanh, bias=False, init=zeros32)(x1),
                                  np.zeros((2, 3, 4)))
    with pytest.raises(ValueError):
        Scale(1.0)
    with pytest.raises(ValueError):
        Scale(1.0, 2.0)
    with pytest.raises(TypeError):
        Scale()
    with pytest.raises(TypeError):
        Scale(jnp.sin)


def test_scale_docstring_and_print():
    # Flux docstring
    a = Scale(2)
    assert repr(a).startswith("Scale(2)") and repr(a).endswith("# 4 parameters")
    ps = fluxjax.params(a)
    assert len(ps) == 2
    np.testing.assert_array_equal(ps[0], [1, 1])
    np.testing.assert_array_equal(ps[1], [0, 0])
    np.testing.assert_array_equal(a(jnp.array([[1, 2, 3]])), [[1, 2, 3], [1, 2, 3]])
    b = Scale(np.array([[1, 2, 3, 4]], np.float32), False, abs2)
    assert b._show() == "Scale(1, 4, abs2; bias=false)"
    assert repr(b).endswith("# 4 parameters")
    out = b(jnp.array([1, 10]))
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(out, [[1, 4, 9, 16], [100, 400, 900, 1600]])
    assert len(fluxjax.params(b)) == 1
    assert Scale(2, 3, jnp.tanh)._show() == "Scale(2, 3, tanh)"
    assert Scale(np.ones(2, np.float32), np.zeros(2, np.float32), jnp.tanh)._show() == "Scale(2, tanh)"


def test_scale_float64_input_warns_and_stays_float32():
    # Flux: Float64 input to a Float32 layer warns (once per layer type) and computes in Float32
    import fluxjax._checks as checks

    checks._warned.discard("Scale")
    with pytest.warns(UserWarning, match="float64"):
        y = Scale(2)(np.ones((2, 3)))
    assert y.dtype == jnp.float32


def test_scale_values_and_gradient():
    s, b = _f32(2, 3), _f32(2, 3)
    m = Scale(s, b, jnp.tanh)
    x = _f32(2, 3, 2)
    ref = lambda s, b, x: np.tanh(s[..., None] * x + b[..., None])  # Julia: scale aligned to first dims
    _close(m(x), ref(*_f64(s, b, x)))
    gm, gx = _jgrad(lambda m, x: jnp.sum(m(x) ** 2), m, x)
    fd = _fd(lambda *a: np.sum(ref(*a) ** 2), [s, b, x])
    for g, r in zip([gm.scale, gm.bias, gx], fd):
        _close(g, r)
    # broadcasting input dims of size 1 against the scale: (2, 1) -> (2, 3)
    x1 = _f32(2, 1)
    gx1 = _jgrad(lambda x: jnp.sum(m(x) ** 2), x1)[0]
    _close(gx1, _fd(lambda x: np.sum(np.tanh(np.float64(s) * x + np.float64(b)) ** 2), [x1])[0])


# --------------------------------------------------------------------------------------------- Embedding


def test_embedding_flux_cases():
    # Flux basic.jl "Embedding" (1-based indices shifted to 0-based)
    vocab, emb = 10, 4
    m = Embedding(vocab, emb)
    assert m.weight.shape == (emb, vocab)
    y0 = m(0)
    assert y0.shape == (emb,) and y0.dtype == jnp.float32
    np.testing.assert_array_equal(m(1), m.weight[:, 1])
    np.testing.assert_allclose(m(onehot(2, range(vocab))), m.weight[:, 2])
    with pytest.raises(DimensionMismatch, match=r"Embedding\(10 => 4\).*== 10"):
        m(onehot(2, range(12)))
    np.testing.assert_allclose(m(3), m(jnp.arange(vocab) == 3))
    x = jnp.array([3, 0, 9])
    y = m(x)
    assert y.shape == (emb, 3)
    np.testing.assert_array_equal(y, m.weight[:, x])
    np.testing.assert_allclose(m(onehotbatch(x, range(vocab))), y, rtol=1e-6)
    with pytest.raises(DimensionMismatch):
        m(onehotbatch(x, range(12)))
    np.testing.assert_allclose(m(x[None, :] == jnp.arange(vocab)[:, None]), y, rtol=1e-6)
    x = jnp.asarray(RNG.integers(0, vocab, (3, 4)))
    y = m(x)
    assert y.shape == (emb, 3, 4)
    x3 = onehotbatch(x, range(vocab))
    assert x3.shape == (vocab, 3, 4)
    y3 = m(x3)
    assert y3.shape == (emb, 3, 4)
    np.testing.assert_allclose(y3, y, rtol=1e-6)


def test_embedding_padding_idx():
    # Flux basic.jl "padding_idx" (pad = 2 there, 1 here: 0-based)
    vocab, emb, pad = 10, 4, 1
    m = Embedding((vocab, emb), padding_idx=pad)
    assert m.padding_idx == pad
    assert bool(jnp.all(m.weight[:, pad] == 0))
    assert "padding_idx=1" in repr(m)
    with pytest.raises(ValueError, match="padding_idx"):
        Embedding((vocab, emb), padding_idx=-1)
    with pytest.raises(ValueError, match="padding_idx"):
        Embedding((vocab, emb), padding_idx=vocab)
    m = Embedding(jnp.asarray(_f32(emb, vocab)), padding_idx=pad)  # nonzero padding column: masking shows
    assert bool(jnp.all(m(pad) == 0))
    x = jnp.array([0, pad, 2, pad, 3])
    y = m(x)
    assert bool(jnp.all(y[:, jnp.array([1, 3])] == 0))
    np.testing.assert_allclose(m(onehotbatch(x, range(vocab))), y, rtol=1e-6)
    assert bool(jnp.all(m(onehot(pad, range(vocab))) == 0))
    xnd = jnp.array([[0, pad], [2, pad]])
    assert bool(jnp.all(m(xnd)[:, :, 1] == 0))
    m0 = Embedding(m.weight)  # no padding_idx
    others = np.array([i for i in range(vocab) if i != pad])
    for inp in (x, onehotbatch(x, range(vocab))):
        g = fluxjax.gradient(lambda m, inp=inp: jnp.sum(m(inp)), m)[0].weight
        g0 = fluxjax.gradient(lambda m, inp=inp: jnp.sum(m(inp)), m0)[0].weight
        assert bool(jnp.all(g[:, pad] == 0))
        assert bool(jnp.any(g0[:, pad] != 0))
        np.testing.assert_array_equal(g[:, others], g0[:, others])
    assert bool(jnp.all(fluxjax.gradient(lambda m: jnp.sum(m(pad)), m)[0].weight == 0))
    # the padding column stays fixed under gradient descent steps
    m = Embedding((vocab, emb), padding_idx=pad)
    for _ in range(2):
        g = fluxjax.gradient(lambda m: jnp.sum((m(x) - 1) ** 2), m)[0].weight
        m.weight = m.weight - 0.1 * g
    assert bool(jnp.all(m.weight[:, pad] == 0))
    # Flux docstring
    assert bool(jnp.all(Embedding(5, 2, padding_idx=0)(0) == 0))


def test_embedding_docstring_and_print():
    # Flux docstring
    emb = Embedding((26, 4), init=identity_init(gain=22))
    assert repr(emb).startswith("Embedding(26 => 4)") and repr(emb).endswith("# 104 parameters")
    np.testing.assert_array_equal(emb(1), [0, 22, 0, 0])
    y = emb(jnp.array([2, 0, 19, 13, 3, 14, 6]))  # Flux: [3, 1, 20, 14, 4, 15, 7]
    expected = np.zeros((4, 7))
    expected[2, 0] = expected[0, 1] = expected[3, 4] = 22
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(emb(onehotbatch("cat&dog", "abcdefghijklmnopqrstuvwxyz", "n")), y)
    assert emb(jnp.asarray(RNG.integers(0, 26, (3, 1, 2)))).shape == (4, 3, 1, 2)
    assert Embedding(5, 2, padding_idx=1)._show() == "Embedding(5 => 2, padding_idx=1)"
    ps = fluxjax.params(emb)
    assert len(ps) == 1 and ps[0] is emb.weight
    assert list(fluxjax.trainable(Embedding(3, 2, padding_idx=0))) == ["weight"]


def test_embedding_values_gradient():
    W = _f32(3, 5)
    m = Embedding(jnp.asarray(W))
    x = np.array([[4, 0, 4], [1, 2, 0]])
    ref = lambda W: np.sum(np.tanh(W[:, x]) ** 2)
    np.testing.assert_array_equal(m(x), W[:, x])
    g = fluxjax.gradient(lambda m: jnp.sum(jnp.tanh(m(x)) ** 2), m)[0]
    _close(g.weight, _fd(ref, [W])[0])
    # an integer input gets no gradient (Zygote's nothing)
    assert _jgrad(lambda m, x: jnp.sum(m(x)), m, jnp.asarray(x))[1] is None
    # a bool one-hot input is W @ x, differentiable in W; float input is refused, as Flux's gather refuses it
    xb = np.eye(5, dtype=bool)[:, [4, 1]]
    np.testing.assert_array_equal(m(xb), W[:, [4, 1]])
    gm = _jgrad(lambda m: jnp.sum(jnp.tanh(m(xb)) ** 2), m)[0]
    _close(gm.weight, _fd(lambda W: np.sum(np.tanh(W[:, [4, 1]]) ** 2), [W])[0])
    with pytest.raises(TypeError, match=r"Embedding\(5 => 3\) takes integer indices.*x.astype\(int\)"):
        m(RNG.random((5, 2)).astype(np.float32))
    # jit works, as a pytree
    np.testing.assert_array_equal(jax.jit(lambda m, i: m(i))(m, jnp.asarray(x)), W[:, x])


def test_embedding_errors():
    m = Embedding(5, 3)
    with pytest.raises(IndexError, match=r"Embedding\(5 => 3\).*index 5.*0:4"):
        m(5)
    with pytest.raises(IndexError, match="index -1"):
        m(-1)
    with pytest.raises(IndexError, match="index 7"):
        m(jnp.array([[0, 7]]))
    with pytest.raises(DimensionMismatch):
        m(jnp.ones((4, 2), bool))  # one-hot of the wrong length
    with pytest.raises(ValueError, match="matrix"):
        Embedding(jnp.ones(3))
    with pytest.raises(ValueError, match="positive"):
        Embedding(0, 3)
    # inside jit the range cannot be checked: out-of-range (and negative) indices give NaN columns
    out = jax.jit(lambda i: m(i))(jnp.array([1, 5, -1]))
    assert not bool(jnp.any(jnp.isnan(out[:, 0])))
    assert bool(jnp.all(jnp.isnan(out[:, 1:])))


def test_embedding_onehot_product_is_full_precision():
    # A one-hot product only picks columns, so it must not be rounded (a GPU's default float32 product is
    # TF32): the dot asks for HIGHEST precision whatever jax_default_matmul_precision says.
    m = Embedding(10, 4)
    x = onehotbatch(jnp.array([3, 0, 9]), range(10))
    with jax.default_matmul_precision("bfloat16"):
        text = str(jax.make_jaxpr(m)(x))
    assert "dot_general" in text and "precision=(Precision.HIGHEST, Precision.HIGHEST)" in text
    np.testing.assert_array_equal(m(x), m.weight[:, jnp.array([3, 0, 9])])
