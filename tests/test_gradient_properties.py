"""Property tests: every gradient entry point on a small Dense/Chain loss, for random shapes and data,
against central finite differences of a float64 NumPy re-implementation of the same function.
"""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numgrad import fd_grad

import fluxjax
from fluxjax import Chain, Dense, Params, gradient, jacobian, params, pullback, withgradient

SETTINGS = settings(max_examples=15, deadline=None)
dims = st.integers(1, 4)
seeds = st.integers(0, 2**32 - 1)
RTOL, ATOL = 1e-2, 1e-3


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=ATOL)


def make(seed, n_in, n_hid, n_out, batch):
    """A Chain(Dense(n_in => n_hid, tanh), Dense(n_hid => n_out)) from seeded float32 arrays, and an input."""
    rng = np.random.default_rng(seed)
    a = lambda *s: (0.6 * rng.standard_normal(s)).astype(np.float32)
    W1, b1, W2, b2, x = a(n_hid, n_in), a(n_hid), a(n_out, n_hid), a(n_out), a(n_in, batch)
    m = Chain(Dense(jnp.asarray(W1), jnp.asarray(b1), jnp.tanh), Dense(jnp.asarray(W2), jnp.asarray(b2)))
    return m, jnp.asarray(x), [v.astype(np.float64) for v in (W1, b1, W2, b2, x)]


def np_forward(W1, b1, W2, b2, x):
    h = np.tanh(W1 @ x + b1[:, None])
    return W2 @ h + b2[:, None]


def np_loss(W1, b1, W2, b2, x):
    return np.sum(np_forward(W1, b1, W2, b2, x) ** 2) / x.shape[1]


def loss(m, x):
    return jnp.sum(m(x) ** 2) / x.shape[1]


def fd(f, args, k):
    """d f(*args) / d args[k] by central differences (float64)."""
    return fd_grad(lambda xk: f(*args[:k], xk, *args[k + 1 :]), args[k])


def check_model_grad(g, ref):
    close(g.layers[0].weight, fd(np_loss, ref, 0))
    close(g.layers[0].bias, fd(np_loss, ref, 1))
    close(g.layers[1].weight, fd(np_loss, ref, 2))
    close(g.layers[1].bias, fd(np_loss, ref, 3))
    assert g.layers[0].sigma is None


@SETTINGS
@given(seeds, dims, dims, dims, dims)
def test_gradient_matches_finite_differences(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    gm, gx = gradient(loss, m, x)
    check_model_grad(gm, ref)
    close(gx, fd(np_loss, ref, 4))


@SETTINGS
@given(seeds, dims, dims, dims, dims)
def test_withgradient_matches_finite_differences(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    val, (gm,) = withgradient(lambda m: (loss(m, x), m(x)), m)
    close(val[0], np_loss(*ref))
    close(val[1], np_forward(*ref))
    check_model_grad(gm, ref)


@SETTINGS
@given(seeds, dims, dims, dims, dims)
def test_pullback_with_random_seed(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    dy = np.random.default_rng(seed + 1).standard_normal((n_out, batch))
    y, back = pullback(lambda m, x: m(x), m, x)
    close(y, np_forward(*ref))
    gm, gx = back(jnp.asarray(dy, jnp.float32))
    weighted = lambda *a: np.sum(dy * np_forward(*a))
    close(gm.layers[0].weight, fd(weighted, ref, 0))
    close(gm.layers[0].bias, fd(weighted, ref, 1))
    close(gm.layers[1].weight, fd(weighted, ref, 2))
    close(gm.layers[1].bias, fd(weighted, ref, 3))
    close(gx, fd(weighted, ref, 4))


@SETTINGS
@given(seeds, dims, dims, dims, dims)
def test_implicit_gradient_matches_finite_differences(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    ps = params(m)
    assert isinstance(ps, Params) and len(ps) == 4
    gs = gradient(lambda: loss(m, x), ps)
    for k, p in enumerate((m[0].weight, m[0].bias, m[1].weight, m[1].bias)):
        close(gs[p], fd(np_loss, ref, k))


@settings(max_examples=10, deadline=None)  # eager jacrev compiles per shape: the slowest entry point here
@given(seeds, dims, dims, dims, dims)
def test_jacobian_is_column_major_finite_differences(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    (J,) = jacobian(lambda x: m(x), x)
    assert J.shape == (n_out * batch, n_in * batch)
    xs = ref[4]
    want = np.zeros((n_out * batch, n_in * batch))
    h = 1e-6
    for j in range(n_in * batch):  # column j perturbs vec(x)[j], Julia's column-major order
        e = np.zeros(n_in * batch)
        e[j] = h
        de = e.reshape((n_in, batch), order="F")
        diff = np_forward(*ref[:4], xs + de) - np_forward(*ref[:4], xs - de)
        want[:, j] = diff.reshape(-1, order="F") / (2 * h)
    close(J, want)


@SETTINGS
@given(seeds, dims, dims, dims, dims)
def test_jit_of_gradient_matches_finite_differences(seed, n_in, n_hid, n_out, batch):
    m, x, ref = make(seed, n_in, n_hid, n_out, batch)
    step = fluxjax.jit(lambda m, x: gradient(loss, m, x))
    gm, gx = step(m, x)
    check_model_grad(gm, ref)
    close(gx, fd(np_loss, ref, 4))
    gm2, _ = step(m, x)  # warm call: same answer, one compiled structure
    close(gm2.layers[1].weight, np.asarray(gm.layers[1].weight, np.float64))
    assert step.cache_size() == 1
