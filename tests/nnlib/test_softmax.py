"""Tests for fluxjax.nnlib.softmax: softmax, logsoftmax and logsumexp with 0-based `dims`.

Known values from the docstrings and tests of `NNlib.jl/src/softmax.jl` / `NNlib.jl/test/softmax.jl`.
Flux's `dims=1` is `dims=0` here.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax.nnlib import logsoftmax, logsumexp, softmax


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _run(f, *args):
    return jax.tree.map(np.asarray, jax.jit(f)(*args))


def test_softmax_docstring_values():
    # NNlib.jl/src/softmax.jl docstring.
    m = jnp.asarray([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    v, d1, d2 = _run(lambda v, m: (softmax(v), softmax(m), softmax(m, dims=1)), jnp.asarray([1.0, 2.0, 3.0]), m)
    np.testing.assert_allclose(v, [0.09003057317038046, 0.24472847105479764, 0.6652409557748218], rtol=1e-6)
    np.testing.assert_allclose(d1, [[0.268941, 0.5, 0.731059], [0.731059, 0.5, 0.268941]], atol=1e-6)
    np.testing.assert_allclose(d2, [[0.0900306, 0.244728, 0.665241], [1 / 3, 1 / 3, 1 / 3]], atol=1e-6)


@pytest.mark.parametrize("dims", [0, 1, 2, -1, (0, 1), (1, 2), None])
def test_softmax_family_against_numpy(dims):
    x = np.random.default_rng(0).standard_normal((4, 3, 5)) * 3
    axis = None if dims is None else dims
    y, ly, lse = _run(lambda x: (softmax(x, dims), logsoftmax(x, dims), logsumexp(x, dims)), jnp.asarray(x, jnp.float32))
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, _np_softmax(x, axis), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-5)
    np.testing.assert_allclose(ly, np.log(_np_softmax(x, axis)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.exp(ly), y, rtol=1e-5, atol=1e-7)
    ref = np.log(np.exp(x).sum(axis=axis, keepdims=dims is not None))
    assert lse.shape == ref.shape  # dims kept, or a scalar for dims=None (Julia's dims=:)
    np.testing.assert_allclose(lse, ref, rtol=1e-5)


def test_default_dims_is_the_first_axis():
    # Flux's softmax(x) uses dims=1, the feature axis of a (features, batch) matrix.
    x = np.random.default_rng(1).standard_normal((10, 4))
    y, ly = _run(lambda x: (softmax(x), logsoftmax(x)), jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(y.sum(axis=0), np.ones(4), rtol=1e-6)
    np.testing.assert_allclose(y, _np_softmax(x, 0), rtol=1e-5)
    np.testing.assert_allclose(ly, np.log(_np_softmax(x, 0)), rtol=1e-5, atol=1e-6)
    assert np.asarray(logsumexp(jnp.asarray(x))).shape == ()


def test_stability_and_infinities():
    # Large logits do not overflow; NNlib's handling of +Inf: those entries share probability 1.
    big = jnp.asarray([[1000.0, 1001.0], [-1000.0, -1001.0]]).T
    inf = jnp.asarray([[np.inf, 1.0, np.inf], [0.0, 1.0, 2.0]]).T
    y, ly, lse, yi, lyi, lsei = _run(
        lambda b, i: (softmax(b), logsoftmax(b), logsumexp(b, dims=0), softmax(i), logsoftmax(i), logsumexp(i, 0)),
        big,
        inf,
    )
    np.testing.assert_allclose(y[:, 0], _np_softmax(np.array([0.0, 1.0]), 0), rtol=1e-6)
    np.testing.assert_allclose(ly[:, 1], np.log(_np_softmax(np.array([0.0, -1.0]), 0)), rtol=1e-6)
    np.testing.assert_allclose(lse[0], [1001 + np.log1p(np.exp(-1)), -1000 + np.log1p(np.exp(-1))], rtol=1e-6)
    np.testing.assert_allclose(yi[:, 0], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(yi[:, 1], _np_softmax(np.array([0.0, 1.0, 2.0]), 0), rtol=1e-6)
    np.testing.assert_allclose(lyi[:, 0], [-np.log(2), -np.inf, -np.log(2)], rtol=1e-6)
    assert lsei[0, 0] == np.inf


def test_gradients():
    # The Jacobian of softmax is diag(y) - y y'; logsumexp's gradient is softmax.
    x = np.random.default_rng(2).standard_normal((5, 3))
    c = np.random.default_rng(3).standard_normal((5, 3))

    def grads(x, c):
        return (
            jax.grad(lambda x: jnp.sum(softmax(x) * c))(x),
            jax.grad(lambda x: jnp.sum(logsoftmax(x) * c))(x),
            jax.grad(lambda x: jnp.sum(logsumexp(x, dims=0)))(x),
            jax.hessian(lambda x: logsumexp(x))(x[:, 0]),
        )

    gs, gl, glse, hess = _run(grads, jnp.asarray(x, jnp.float32), jnp.asarray(c, jnp.float32))
    y = _np_softmax(x, 0)
    np.testing.assert_allclose(gs, y * c - y * (y * c).sum(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gl, c - y * c.sum(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(glse, y, rtol=1e-5)
    y0 = y[:, 0]
    np.testing.assert_allclose(hess, np.diag(y0) - np.outer(y0, y0), rtol=1e-4, atol=1e-6)
    # Gradients stay finite with an infinite logit.
    g_inf = jax.grad(lambda x: jnp.sum(softmax(x) * jnp.arange(3.0)))(jnp.asarray([np.inf, 1.0, 0.0]))
    assert np.isfinite(np.asarray(g_inf)).all()


def test_number_input_is_an_error():
    # NNlib: softmax(x::Number) errors, suggesting to move softmax out of Dense(3, 4, softmax).
    for f in (softmax, logsoftmax, logsumexp):
        with pytest.raises(TypeError, match="expects an array"):
            f(1.0)


@pytest.mark.parametrize("dims", [0, 1, (0, 1)])
def test_grad_softmax_and_grad_logsoftmax_are_the_pullbacks(dims):
    # NNlib's ∇softmax(dy, y; dims) / ∇logsoftmax(dy, y; dims) equal the vjp at y = softmax(x)
    from fluxjax.nnlib import grad_logsoftmax, grad_softmax

    rng = np.random.default_rng(4)
    x, dy = (jnp.asarray(rng.normal(size=(3, 5)), jnp.float32) for _ in range(2))
    for f, grad_f in ((softmax, grad_softmax), (logsoftmax, grad_logsoftmax)):
        y, back = jax.vjp(lambda z, f=f: f(z, dims=dims), x)
        np.testing.assert_allclose(grad_f(dy, y, dims=dims), back(dy)[0], rtol=1e-5, atol=1e-6)
