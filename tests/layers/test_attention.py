"""Tests for MultiHeadAttention (fluxjax/layers/attention.py) and NNlib's dot_product_attention /
make_causal_mask (fluxjax/nnlib/attention.py).

Cases marked "Flux attention.jl" port `Flux.jl/test/layers/attention.jl` (research/flux-tests.md E2).
The reference is a float64 NumPy loop over heads written from NNlib's definition: head `h` owns the
contiguous feature block `h*d : (h+1)*d` (Julia's column-major `reshape(x, d, nheads, ...)`), scores
`alpha[j, i] = softmax_j(k_j . q_i / sqrt(d) + bias)`, masked entries `-Inf`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import trainmode_
from fluxjax.errors import DimensionMismatch
from fluxjax.layers.attention import MultiHeadAttention
from fluxjax.layers.basic import Chain, Dense
from fluxjax.nnlib.attention import dot_product_attention, dot_product_attention_scores, make_causal_mask

RNG = np.random.default_rng(2)
DIM, NHEADS, LEN, BATCH = 4, 2, 3, 5  # Flux attention.jl


def _f32(*shape):
    return RNG.random(shape).astype(np.float32)


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=rtol, atol=atol)


def _jl4(a, shape):
    """Julia broadcast of `a` (aligned on its leading dims) to the 4-D `shape`."""
    a = np.asarray(a)
    return np.broadcast_to(a.reshape(a.shape + (1,) * (4 - a.ndim)), shape)


def _np_attention(q, k, v, nheads, bias=None, mask=None):
    """NNlib's dot_product_attention on 3-D inputs, as explicit loops over batch and heads."""
    dq, lq, B = q.shape
    dv, lk = v.shape[0], k.shape[1]
    hq, hv = dq // nheads, dv // nheads
    shape = (lk, lq, nheads, B)
    alpha, y = np.zeros(shape), np.zeros((dv, lq, B))
    for b in range(B):
        for h in range(nheads):
            qh, kh = q[h * hq:(h + 1) * hq, :, b], k[h * hq:(h + 1) * hq, :, b]
            vh = v[h * hv:(h + 1) * hv, :, b]
            s = kh.T @ qh / np.sqrt(hq)  # (kv, q)
            if bias is not None:
                s = s + _jl4(bias, shape)[:, :, h, b]
            if mask is not None:
                s = np.where(_jl4(mask, shape)[:, :, h, b], s, -np.inf)
            e = np.exp(s - s.max(axis=0, keepdims=True))
            a = e / e.sum(axis=0, keepdims=True)
            alpha[:, :, h, b] = a
            y[h * hv:(h + 1) * hv, :, b] = vh @ a
    return y, alpha


def _np_mha(m, q, k, v, **kw):
    P = lambda d: np.asarray(d.weight, np.float64)
    proj = lambda d, x: np.einsum("oi,i...->o...", P(d), x)
    y, a = _np_attention(proj(m.q_proj, q), proj(m.k_proj, k), proj(m.v_proj, v), m.nheads, **kw)
    return proj(m.out_proj, y), a


@pytest.fixture(scope="module")
def mha():
    return MultiHeadAttention(DIM, nheads=NHEADS, rng=0)


@pytest.fixture(scope="module")
def qkv():
    return _f32(DIM, LEN, BATCH), _f32(DIM, LEN, BATCH), _f32(DIM, LEN, BATCH)


def test_flux_shapes_self_attention_and_kv(mha, qkv):
    # Flux attention.jl: shapes, "self-attention", "key and value are the same"
    q, k, v = qkv
    y, a = mha(q, k, v)
    assert y.dtype == jnp.float32 and y.shape == (DIM, LEN, BATCH)
    assert a.dtype == jnp.float32 and a.shape == (LEN, LEN, NHEADS, BATCH)
    y1, a1 = mha(q)
    y2, a2 = mha(q, q, q)
    _close(y1, np.asarray(y2))
    _close(a1, np.asarray(a2))
    y1, a1 = mha(q, k)
    y2, a2 = mha(q, k, k)
    _close(y1, np.asarray(y2))
    _close(a1, np.asarray(a2))


def test_flux_change_dims(qkv):
    # Flux attention.jl "change dims": 4 => 10 => 5
    q, k, v = qkv
    m = MultiHeadAttention((4, 10, 5), nheads=NHEADS)
    y, _ = m(q, k, v)
    assert y.shape == (5, LEN, BATCH)
    assert m._show() == "MultiHeadAttention(4 => 10 => 5; nheads=2)"
    assert MultiHeadAttention(4, 10, 5, nheads=2)._show() == m._show()


def test_flux_mask(mha, qkv):
    # Flux attention.jl "mask"
    q = qkv[0]
    mask = make_causal_mask(q)
    np.testing.assert_array_equal(mask, np.triu(np.ones((LEN, LEN), bool)))
    y, a = mha(q, mask=mask)
    assert bool(jnp.all(a[1, 0] == 0))
    _close(a[:, :, 0, 0], np.triu(np.asarray(a[:, :, 0, 0])))
    _close(y, _np_mha(mha, *(np.float64(q),) * 3, mask=np.asarray(mask))[0])


def test_flux_bias_as_causal_mask(mha, qkv):
    # Flux attention.jl "bias": typemax(Float32) = +Inf on and above the diagonal
    q, k, v = qkv
    b = np.zeros((LEN, LEN), np.float32)
    for i in range(LEN):
        b[i, i:] = np.inf
    y, a = mha(q, k, v, b)
    assert bool(jnp.all(a[1, 0] == 0))
    _close(a[:, :, 0, 0], np.triu(np.asarray(a[:, :, 0, 0])))
    assert not bool(jnp.any(jnp.isnan(y)))


def test_values_against_numpy(mha, qkv):
    q, k, v = qkv
    k2, v2 = _f32(DIM, 2, BATCH), _f32(DIM, 2, BATCH)  # kv_len != q_len
    y, a = mha(q, k2, v2)
    ry, ra = _np_mha(mha, *map(np.float64, (q, k2, v2)))
    assert a.shape == (2, LEN, NHEADS, BATCH)
    _close(a, ra)
    _close(y, ry)
    _close(jnp.sum(a, axis=0), np.ones((LEN, NHEADS, BATCH)))
    # a finite additive bias, broadcast over heads and batch from the leading dims
    bias = RNG.standard_normal((2, LEN)).astype(np.float32)
    y, a = mha(q, k2, v2, bias)
    ry, ra = _np_mha(mha, *map(np.float64, (q, k2, v2)), bias=np.float64(bias))
    _close(a, ra)
    _close(y, ry)


def test_general_dims_and_bias_projections():
    m = MultiHeadAttention(((3, 4, 5), (6, 4), 7), nheads=2, bias=True, rng=1)
    assert m.q_proj.weight.shape == (6, 3) and m.k_proj.weight.shape == (6, 4)
    assert m.v_proj.weight.shape == (4, 5) and m.out_proj.weight.shape == (7, 4)
    assert m.q_proj.bias.shape == (6,)
    q, k, v = _f32(3, 2, 1), _f32(4, 3, 1), _f32(5, 3, 1)
    y, a = m(q, k, v)
    assert y.shape == (7, 2, 1) and a.shape == (3, 2, 2, 1)

    def proj(d, x):
        return np.einsum("oi,i...->o...", np.float64(d.weight), x) + np.float64(d.bias)[:, None, None]

    ry, ra = _np_attention(proj(m.q_proj, q), proj(m.k_proj, k), proj(m.v_proj, v), 2)
    _close(a, ra)
    _close(y, proj(m.out_proj, ry))


def test_gradient_against_finite_differences():
    # Flux attention.jl "gradient": loss = sum(y.^2) + sum(α.^2), here against central differences
    m = MultiHeadAttention((2, 4, 2), nheads=2, rng=3)
    q = _f32(2, 3, 1)
    Ws = [np.float64(d.weight) for d in (m.q_proj, m.k_proj, m.v_proj, m.out_proj)]

    def ref(Wq, Wk, Wv, Wo, x):
        y, a = _np_attention(np.einsum("oi,i...->o...", Wq, x), np.einsum("oi,i...->o...", Wk, x),
                             np.einsum("oi,i...->o...", Wv, x), 2)
        return np.sum(np.einsum("oi,i...->o...", Wo, y) ** 2) + np.sum(a**2)

    def loss(m, x):
        y, a = m(x)
        return jnp.sum(y**2) + jnp.sum(a**2)

    gm, gx = jax.jit(lambda m, q: fluxjax.gradient(loss, m, q))(m, q)  # jit: one compilation
    args = Ws + [np.float64(q)]
    eps = 1e-6
    for got, i in zip([gm.q_proj.weight, gm.k_proj.weight, gm.v_proj.weight, gm.out_proj.weight, gx], range(5)):
        fd = np.zeros_like(args[i])
        for idx in np.ndindex(args[i].shape):
            hi = [a.copy() for a in args]
            lo = [a.copy() for a in args]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            fd[idx] = (ref(*hi) - ref(*lo)) / (2 * eps)
        _close(got, fd, rtol=2e-3, atol=2e-4)
    assert gm.nheads is None and gm.q_proj.bias is None


def test_params_print_and_jit(mha, qkv):
    ps = fluxjax.params(mha)
    assert [tuple(p.shape) for p in ps] == [(4, 4)] * 4  # no bias by default
    assert len(fluxjax.params(MultiHeadAttention(4, nheads=2, bias=True))) == 8
    assert repr(mha).startswith("MultiHeadAttention(4; nheads=2)") and repr(mha).endswith("# 64 parameters")
    # Flux's printing test cases (src/layers/attention.jl)
    assert MultiHeadAttention(((3, 4, 5), (6, 7), 8), nheads=1)._show() == (
        "MultiHeadAttention((3, 4, 5) => (6, 7) => 8; nheads=1)")
    assert MultiHeadAttention((3, (6, 7), 8), nheads=1)._show() == "MultiHeadAttention(3 => (6, 7) => 8; nheads=1)"
    assert MultiHeadAttention((3, 6, 8), nheads=1)._show() == "MultiHeadAttention(3 => 6 => 8; nheads=1)"
    assert MultiHeadAttention(8, bias=True)._show() == "MultiHeadAttention(8; nheads=8, bias=true)"
    # `@layer :noexpand`: one line inside a Chain too
    lines = repr(Chain(mha, Dense(4, 2))).splitlines()
    assert lines[1].startswith("  MultiHeadAttention(4; nheads=2),") and lines[1].endswith("# 64 parameters")
    q, k, v = qkv
    y, a = jax.jit(lambda m, q, k, v: m(q, k, v))(mha, q, k, v)
    y0, a0 = mha(q, k, v)
    _close(y, np.asarray(y0))
    _close(a, np.asarray(a0))


def test_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(4, nheads=3)
    with pytest.raises(ValueError, match="v_dim = 3"):
        MultiHeadAttention((4, (4, 3), 4), nheads=2)
    with pytest.raises(ValueError, match="dims must be"):
        MultiHeadAttention((4, 4))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        MultiHeadAttention(4, nheads=2, dropout_prob=1.5)
    m = MultiHeadAttention(4, nheads=2)
    with pytest.raises(DimensionMismatch, match=r"MultiHeadAttention\(4; nheads=2\).*size\(q_in, 1\) == 4.*3×3×5"):
        m(jnp.ones((3, 3, 5)))
    with pytest.raises(DimensionMismatch, match="same length"):
        m(jnp.ones((4, 3, 5)), jnp.ones((4, 2, 5)), jnp.ones((4, 3, 5)))
    with pytest.raises(DimensionMismatch, match="batch"):
        m(jnp.ones((4, 3, 5)), jnp.ones((4, 3, 2)))


def test_dot_product_attention_nnlib():
    # NNlib docstring shapes (q, k, v = (10, 20, 2), (10, 30, 2), (20, 30, 2), shrunk), 4-D batch, errors
    q, k, v = _f32(4, 3, 2), _f32(4, 2, 2), _f32(6, 2, 2)
    y, a = dot_product_attention(q, k, v)
    assert y.shape == (6, 3, 2) and a.shape == (2, 3, 1, 2)
    q4, k4, v4 = _f32(4, 3, 2, 1), _f32(4, 2, 2, 1), _f32(6, 2, 2, 1)
    y, a = dot_product_attention(q4, k4, v4, nheads=2)
    assert y.shape == (6, 3, 2, 1) and a.shape == (2, 3, 2, 2, 1)
    ry, ra = _np_attention(np.float64(q4[..., 0]), np.float64(k4[..., 0]), np.float64(v4[..., 0]), 2)
    _close(y[..., 0], ry)
    _close(a[..., 0], ra)
    y2, _ = dot_product_attention(q4[:, :, 0, 0], k4[:, :, 0, 0], v4[:, :, 0, 0], nheads=2)  # no batch dims
    _close(y2, np.asarray(y[:, :, 0, 0]))
    assert make_causal_mask(q4, dims=1).shape == (3, 3)
    # the scores function takes NNlib's head-split layout (d, nheads, len, batch...): Julia's reshape
    split = lambda x: np.reshape(x, (x.shape[0] // 2, 2) + x.shape[1:], order="F")
    _close(dot_product_attention_scores(split(q4), split(k4)), np.asarray(a))
    with pytest.raises(ValueError, match="divisible"):
        dot_product_attention(q4, k4, v4, nheads=3)
    with pytest.raises(ValueError, match="batch"):
        dot_product_attention(q4, k4[..., :1, :], v4)
    with pytest.raises(ValueError, match="q and k"):
        dot_product_attention(q4, q4[:2], v4)
    with pytest.raises(ValueError, match="k and v"):
        dot_product_attention(q4, k4, _f32(6, 3, 2, 1))


def test_dropout_on_scores_in_train_mode_only():
    # Flux: MultiHeadAttention holds Dropout(dropout_prob) applied to the attention scores
    m = MultiHeadAttention(8, nheads=2, dropout_prob=0.5, rng=0)
    x = jnp.ones((8, 3, 2))
    _, a_test = m(x)
    np.testing.assert_allclose(np.asarray(a_test).sum(axis=0), 1.0, rtol=1e-5)  # test mode: no dropout
    trainmode_(m)
    _, a_train = m(x)
    dropped = np.asarray(a_train) == 0
    assert 0.2 < dropped.mean() < 0.8
    kept = ~dropped
    np.testing.assert_allclose(np.asarray(a_train)[kept], 2 * np.asarray(a_test)[kept], rtol=1e-5)
