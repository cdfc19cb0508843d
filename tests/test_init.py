"""Initialisers. Cases follow `Flux.jl/test/utils.jl` (testset "Initialization")."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
import fluxjax.init as I
from fluxjax.errors import DimensionMismatch
from fluxjax.random import seed_

ALL_INITS = [
    I.glorot_uniform,
    I.glorot_normal,
    I.kaiming_uniform,
    I.kaiming_normal,
    I.orthogonal,
    I.truncated_normal,
    I.lecun_normal,
    I.identity_init,
    I.rand32,
    I.randn32,
]


# Flux.jl/test/utils.jl "Fan in/out"
def test_nfan():
    assert I.nfan() == (1, 1)
    assert I.nfan(100) == (1, 100)
    assert I.nfan(100, 200) == (200, 100) == I.nfan((100, 200))
    assert I.nfan(2, 30, 40) == (2 * 30, 2 * 40)
    assert I.nfan(2, 3, 40, 50) == (2 * 3 * 40, 2 * 3 * 50)
    assert I.nfan(2, 3, 4, 50, 60) == (2 * 3 * 4 * 50, 2 * 3 * 4 * 60)


# Flux.jl/test/utils.jl "Basics: $init"
@pytest.mark.parametrize("init", ALL_INITS + [lambda *a, **k: I.sparse_init(*a, sparsity=0.5, **k)])
def test_basics(init):
    if init not in ALL_INITS:  # sparse_init: matrices only
        with pytest.raises(ValueError):
            init(3)
    else:
        assert init(3).shape == (3,)
        assert init(3, 4, 5).shape == (3, 4, 5)
    w = init(3, 4)
    assert w.shape == (3, 4)
    assert w.dtype == jnp.float32
    assert init(jax.random.PRNGKey(1), 3, 4).shape == (3, 4)  # Flux's init(rng, dims...)
    assert init(3, 4, rng=jax.random.PRNGKey(1)).shape == (3, 4)
    # no gradient flows into an initialiser's output, and it composes with jax.grad
    g = jax.grad(lambda x: jnp.sum(x * init(3, 4, rng=0)))(5.0)
    assert np.isfinite(float(g))


@pytest.mark.parametrize("init", ALL_INITS + [I.sparse_init])
def test_closure_form(init):
    kw = {"sparsity": 0.5} if init is I.sparse_init else {}
    closure = init(rng=jax.random.PRNGKey(1), **kw)
    assert callable(closure)
    a, b = closure(3, 4), closure(3, 4)
    assert a.shape == (3, 4) and a.dtype == jnp.float32
    if init is not I.identity_init:
        # the closure advances its own key, like Flux's closure over a mutable RNG ...
        assert not np.array_equal(a, b)
        # ... and the sequence is reproducible
        again = init(rng=jax.random.PRNGKey(1), **kw)
        np.testing.assert_array_equal(again(3, 4), a)


def test_seed_reproducible_and_rng_keys():
    for init in ALL_INITS:
        seed_(123)
        a = init(4, 5)
        seed_(123)
        b = init(4, 5)
        np.testing.assert_array_equal(a, b)  # bit-identical
    # successive draws from the global key differ
    seed_(0)
    assert not np.array_equal(I.glorot_uniform(4, 5), I.glorot_uniform(4, 5))
    # explicit keys and int seeds
    k = jax.random.PRNGKey(7)
    np.testing.assert_array_equal(I.glorot_normal(4, 5, rng=k), I.glorot_normal(4, 5, rng=k))
    np.testing.assert_array_equal(I.glorot_normal(4, 5, rng=7), I.glorot_normal(4, 5, rng=k))
    np.testing.assert_array_equal(I.glorot_normal(k, 4, 5), I.glorot_normal(4, 5, rng=k))


# Flux.jl/test/utils.jl "glorot: $init"
@pytest.mark.parametrize("init", [I.glorot_uniform, I.glorot_normal])
def test_glorot_variance(init):
    for dims in [(1000,), (100, 100), (100, 400), (2, 3, 32, 64), (2, 3, 4, 32, 64)]:
        v = np.asarray(init(*dims, rng=0))
        fan_in, fan_out = I.nfan(*dims)
        s2 = 2 / (fan_in + fan_out)
        assert 0.9 * s2 < v.var() < 1.1 * s2
    assert init(3, 4, gain=1.5).dtype == jnp.float32


def test_glorot_uniform_bounds_and_gain():
    a = math.sqrt(6 / (100 + 400))
    v = np.asarray(I.glorot_uniform(100, 400, rng=1))
    assert np.all(np.abs(v) <= a)
    assert v.max() > 0.99 * a and v.min() < -0.99 * a
    assert abs(v.var() - a**2 / 3) < 0.05 * a**2 / 3
    v2 = np.asarray(I.glorot_uniform(100, 400, rng=1, gain=2.0))
    np.testing.assert_allclose(v2, 2 * v, rtol=1e-6)


# Flux.jl/test/utils.jl "kaiming": fan_in is the SECOND dim (Dense weights are (out, in))
def test_kaiming():
    for n_in, n_out in [(100, 100), (100, 400)]:
        v = np.asarray(I.kaiming_uniform(n_in, n_out, rng=2))
        s = math.sqrt(6 / n_out)
        assert -s < v.min() < -0.9 * s
        assert 0.9 * s < v.max() < s
        v = np.asarray(I.kaiming_normal(n_in, n_out, rng=3))
        s = math.sqrt(2 / n_out)
        assert 0.9 * s < v.std() < 1.1 * s
    assert I.kaiming_uniform(3, 4, gain=1.5).dtype == jnp.float32
    assert I.kaiming_normal(3, 4, gain=1.5).dtype == jnp.float32


# Flux.jl/test/utils.jl "Partial application"
def test_partial_application():
    ku = I.kaiming_uniform(gain=1e9)
    assert float(ku(8, 8).max()) > 1e9 / 2
    assert float(ku(8, 8, gain=1).max()) < 1e9 / 2
    kn = I.kaiming_normal(gain=1e9)
    assert float(kn(8, 8).max()) > 1e9 / 2
    assert float(kn(8, 8, gain=1).max()) < 1e9 / 2
    si = I.sparse_init(sparsity=1)
    assert float(si(8, 8).max()) == 0
    assert float(jnp.abs(si(8, 8, sparsity=0)).max()) > 0
    assert "gain=" in repr(ku)


# Flux.jl/test/utils.jl "orthogonal"
def test_orthogonal():
    for rows, cols in [(5, 3), (3, 5)]:
        v = np.asarray(I.orthogonal(rows, cols, rng=4), np.float64)
        if rows < cols:
            np.testing.assert_allclose(v @ v.T, np.eye(rows), atol=1e-5)
        else:
            np.testing.assert_allclose(v.T @ v, np.eye(cols), atol=1e-5)
    for dims in [(3, 4, 5), (2, 2, 5)]:
        v = np.asarray(I.orthogonal(*dims, rng=5), np.float64)
        cols = dims[-1]
        rows = math.prod(dims) // cols
        m = v.reshape((rows, cols), order="F")  # Julia's reshape
        if rows < cols:
            np.testing.assert_allclose(m @ m.T, np.eye(rows), atol=1e-5)
        else:
            np.testing.assert_allclose(m.T @ m, np.eye(cols), atol=1e-5)
    # gain scales: Q^T Q = gain^2 I
    v = np.asarray(I.orthogonal(6, 4, rng=6, gain=1.5), np.float64)
    np.testing.assert_allclose(v.T @ v, 2.25 * np.eye(4), atol=1e-5)
    assert I.orthogonal(3, 4, gain=1.5).dtype == jnp.float32
    # a single dim follows Flux's code: a unit vector
    np.testing.assert_allclose(np.linalg.norm(np.asarray(I.orthogonal(7, rng=1))), 1.0, rtol=1e-6)


def test_orthogonal_column_major_reshape():
    # the N-D result is the 2-D orthogonal matrix (built from the same key) reshaped column-major
    key = jax.random.PRNGKey(9)
    m = np.asarray(I.orthogonal(12, 5, rng=key))
    v = np.asarray(I.orthogonal(3, 4, 5, rng=key))
    np.testing.assert_array_equal(v, m.reshape((3, 4, 5), order="F"))


# Flux.jl/test/utils.jl "sparse_init"
def test_sparse_init():
    with pytest.raises(ValueError):
        I.sparse_init(100, 100, 100, sparsity=0.1)
    with pytest.raises(TypeError):
        I.sparse_init(10, 10)
    v = np.asarray(I.sparse_init(100, 100, sparsity=-0.1, rng=0))
    assert np.sum(v == 0) == 0
    v = np.asarray(I.sparse_init(100, 100, sparsity=1.1, rng=0))
    assert np.sum(v == 0) == v.size
    for n_in, n_out, sparsity, std in [(100, 100, 0.25, 0.1), (100, 400, 0.75, 0.01)]:
        expected = math.ceil(n_in * sparsity)
        v = np.asarray(I.sparse_init(n_in, n_out, sparsity=sparsity, std=std, rng=1))
        assert all(np.sum(v[:, c] == 0) == expected for c in range(n_out))
        assert 0.9 * std < v[v != 0].std() < 1.1 * std
        # zeros are shuffled within each column, not all in the first rows
        assert not np.all(v[:expected] == 0)
    assert I.sparse_init(3, 4, std=1.5, sparsity=0.5).dtype == jnp.float32


# Flux.jl/test/utils.jl "truncated_normal"
def test_truncated_normal():
    m = np.asarray(I.truncated_normal(100, 100, rng=0))
    assert abs(m.min() + 2) < 0.05 and abs(m.max() - 2) < 0.05
    assert abs(m.mean()) < 0.1
    for mu, s, lo, hi in [(0.0, 1, -2, 3), (1, 2, -4.0, 5.0)]:
        v = np.asarray(I.truncated_normal(100, 100, 100, rng=1, mean=mu, std=s, lo=lo, hi=hi))
        assert abs(v.mean() - mu) < 0.1
        assert abs(v.min() - lo) < 0.01 and abs(v.max() - hi) < 0.01
        assert v.dtype == np.float32
    for mu, s, lo, hi in [(6, 2, -100.0, 100), (-7.0, 10, -100, 100)]:
        v = np.asarray(I.truncated_normal(100, 100, 100, rng=2, mean=mu, std=s, lo=lo, hi=hi))
        assert abs(v.mean() - mu) < 0.1
        assert abs(v.std() - s) < 0.1
    with pytest.warns(UserWarning, match="more than 2 std"):
        I.truncated_normal(3, 3, mean=10.0)


# Flux.jl/test/utils.jl "lecun_normal"
def test_lecun_normal():
    assert float(I.lecun_normal(10, 1000, rng=0).std()) == pytest.approx(0.032, rel=0.1)
    assert float(I.lecun_normal(1000, 10, rng=0).std()) == pytest.approx(0.317, rel=0.1)


# Flux.jl/test/utils.jl "identity_init"
def test_identity_init():
    partial = I.identity_init(gain=3)
    expected = np.array([[3, 0, 0], [0, 3, 0], [0, 0, 3]], np.float32)
    np.testing.assert_array_equal(partial(3, 3), expected)
    np.testing.assert_array_equal(I.identity_init(3, 3, gain=3), expected)
    assert I.identity_init(3, 4, gain=1.5).dtype == jnp.float32
    np.testing.assert_array_equal(I.identity_init(4), np.zeros(4))
    # "Non-identity sizes" (Julia indices -> 0-based; `end` -> -1)
    np.testing.assert_array_equal(I.identity_init(2, 3)[:, -1], np.zeros(2))
    np.testing.assert_array_equal(I.identity_init(3, 2, shift=1)[0, :], np.zeros(2))
    np.testing.assert_array_equal(I.identity_init(1, 1, 3, 4)[:, :, :, -1], np.zeros((1, 1, 3)))
    np.testing.assert_array_equal(I.identity_init(2, 1, 3, 3)[-1, :, :, :], np.zeros((1, 3, 3)))
    np.testing.assert_array_equal(I.identity_init(1, 2, 3, 3)[:, -1, :, :], np.zeros((1, 3, 3)))
    # circshift semantics: an int shifts the first dim
    np.testing.assert_array_equal(I.identity_init(3, 2, shift=1), np.roll(np.eye(3, 2), 1, axis=0))
    # docstring: identity_init(3, 3, 2; gain=100) has centre taps at [2, 1, 1] and [2, 2, 2] (1-based)
    w = np.asarray(I.identity_init(3, 3, 2, gain=100))
    assert w.shape == (3, 3, 2)
    assert w[1, 0, 0] == 100 and w[1, 1, 1] == 100 and np.count_nonzero(w) == 2
    # conv kernel (k1, k2, cin, cout): centre tap at ceil(k/2) (1-based)
    w = np.asarray(I.identity_init(3, 5, 2, 2))
    assert w[1, 2, 0, 0] == 1 and w[1, 2, 1, 1] == 1 and np.count_nonzero(w) == 2
    # tuple shift along the channel dim, as the "Inception identity" testset
    w = np.asarray(I.identity_init(3, 5, 7, 3, shift=(0, 0, 2, 0)))
    assert w[1, 2, 2, 0] == 1 and w[1, 2, 3, 1] == 1 and w[1, 2, 4, 2] == 1


def test_identity_dense_mapping():
    # Flux.jl/test/utils.jl "Dense ID mapping": W x == x
    W = I.identity_init(3, 3)
    x = np.arange(1, 10, dtype=np.float32).reshape((3, 3), order="F")
    np.testing.assert_array_equal(W @ x, x)


def test_constructors():
    assert I.zeros32(2, 3).dtype == jnp.float32 and I.zeros32(2, 3).shape == (2, 3)
    assert I.ones32((2, 3)).shape == (2, 3)
    assert float(I.ones32(2, 3).sum()) == 6
    r = np.asarray(I.rand32(1000, rng=0))
    assert r.min() >= 0 and r.max() < 1
    f = I.randn32(rng=jax.random.PRNGKey(0))
    assert f(2, 3).shape == (2, 3) and f(2, 3).dtype == jnp.float32
    with pytest.raises(TypeError):
        I.glorot_uniform(2.5, 3)


def test_create_bias():
    w = jnp.ones((3, 2), jnp.float32)
    b = I.create_bias(w, True, 3)
    assert b.shape == (3,) and b.dtype == jnp.float32 and float(jnp.abs(b).sum()) == 0
    assert I.create_bias(w, False, 3) is False
    b = I.create_bias(w, np.arange(3.0), 3)
    assert b.dtype == jnp.float32
    np.testing.assert_array_equal(b, [0, 1, 2])
    with pytest.raises(DimensionMismatch, match=r"expected bias of size \(3,\), got size \(5,\)"):
        I.create_bias(w, np.zeros(5), 3)


def test_a_traced_size_is_refused_with_what_to_do():
    """A size given to a compiled function is traced: the error says to make it static (as jax.jit's own)."""
    step = Flux.jit(lambda x, n: x + Flux.randn32(2, n))
    with pytest.raises(TypeError, match="static_argnums"):
        step(jnp.ones((2, 3)), 3)
    out = Flux.jit(lambda x, n: x + Flux.randn32(2, n), static_argnums=1)(jnp.ones((2, 3)), 3)
    assert out.shape == (2, 3)
