"""`train_` on parameters held as NumPy arrays (a custom layer's field, a global in implicit mode): they
are trained and their owner's attribute (or the global) is rebound to the new array, a bare NumPy array (or a tuple of
them) as the model is written in place, a bare JAX array raises; `train_` given a
rule warns that its state is discarded only when the rule has a state to lose (not for Descent)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.optimise import Adam, ClipGrad, Descent, OptimiserChain, WeightDecay

X = jnp.array([[1.0, 2.0, -1.0], [0.5, -0.5, 1.0]])
Y = jnp.array([[1.0, 0.0, 2.0]])


@Flux.layer
class Lin:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return self.w @ x


def _descent_reference(w, steps, eta=0.1):
    w = np.asarray(w, np.float64)
    x, y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    for _ in range(steps):
        r = w @ x - y
        w = w - eta * 2 * r @ x.T / r.size
    return w


def test_numpy_field_of_a_layer_is_trained_and_rebound():
    w0 = np.array([[0.2, -0.3]], np.float32)
    m = Lin(w0.copy())
    Flux.train_(lambda m, x, y: jnp.mean((m(x) - y) ** 2), m, [(X, Y)] * 3, Flux.setup(Descent(0.1), m))
    assert isinstance(m.w, jax.Array)
    np.testing.assert_allclose(m.w, _descent_reference(w0, 3), rtol=1e-5)


W = np.array([[0.2, -0.3]], np.float32)


def _loss(x, y):
    return jnp.mean((W @ x - y) ** 2)


def test_numpy_global_in_implicit_mode_is_trained_and_rebound():
    global W
    w0 = W.copy()
    try:
        Flux.train_(_loss, Flux.params([W]), [(X, Y)] * 3, Descent(0.1))
        np.testing.assert_allclose(W, _descent_reference(w0, 3), rtol=1e-5)
    finally:
        W = w0


@pytest.mark.parametrize("rule", [Descent(0.1), WeightDecay(0.0), OptimiserChain(ClipGrad(10.0), Descent(0.1))])
def test_stateless_rule_does_not_warn(rule):
    m = Flux.Dense(2, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Flux.train_(lambda m, x, y: jnp.mean((m(x) - y) ** 2), m, [(X, Y)], rule)


def test_stateful_rule_warns_that_its_state_is_discarded():
    m = Flux.Dense(2, 1)
    with pytest.warns(UserWarning, match="state is discarded"):
        Flux.train_(lambda m, x, y: jnp.mean((m(x) - y) ** 2), m, [(X, Y)], Adam(0.01))


def _mse(w, x, y):
    return jnp.mean((w @ x - y) ** 2)


@pytest.mark.parametrize("jit", [True, False])
def test_bare_numpy_array_model_is_trained_in_place(jit):
    # Optimisers.jl's train!(loss, x::Array, data, state) mutates x; a NumPy array is written in place
    w = np.array([[0.2, -0.3]], np.float32)
    w0 = w.copy()
    st = Flux.setup(Descent(0.1), w)
    Flux.train_(_mse, w, [(X, Y)] * 3, st, jit=jit)
    np.testing.assert_allclose(w, _descent_reference(w0, 3), rtol=1e-5)
    Flux.trainstep_(_mse, w, (X, Y), st, jit=jit)
    np.testing.assert_allclose(w, _descent_reference(w0, 4), rtol=1e-5)


def test_bare_numpy_array_keeps_its_optimiser_state():
    # Momentum's velocity carries over from one train_ call to the next, as for a layer
    w = np.array([[0.2, -0.3]], np.float32)
    st = Flux.setup(Flux.Momentum(0.1), w)
    Flux.train_(_mse, w, [(X, Y)] * 2, st)
    Flux.train_(_mse, w, [(X, Y)], st)
    ref, s2 = jnp.array([[0.2, -0.3]]), Flux.setup(Flux.Momentum(0.1), jnp.array([[0.2, -0.3]]))
    for _ in range(3):
        s2, ref = Flux.update(s2, ref, Flux.gradient(lambda v: _mse(v, X, Y), ref)[0])
    np.testing.assert_allclose(w, ref, rtol=1e-5)


def test_tuple_of_numpy_arrays_is_trained_in_place():
    m = (np.array([[0.2, -0.3]], np.float32), np.zeros(1, np.float32))
    Flux.train_(lambda m, x, y: jnp.mean((m[0] @ x + m[1] - y) ** 2), m, [(X, Y)], Flux.setup(Descent(0.1), m))
    r = np.asarray(X.T @ np.array([0.2, -0.3]) - Y[0], np.float64)  # the residual before the step
    np.testing.assert_allclose(m[0], [[0.2, -0.3]] - 0.1 * 2 * (r @ np.asarray(X).T) / r.size, rtol=1e-5)
    np.testing.assert_allclose(m[1], -0.1 * 2 * r.mean(keepdims=True), rtol=1e-5)


def test_bare_jax_array_model_raises():
    w = jnp.array([[0.2, -0.3]])
    with pytest.raises(TypeError, match="cannot change in place"):
        Flux.train_(_mse, w, [(X, Y)], Flux.setup(Descent(0.1), w))
    with pytest.raises(TypeError, match="cannot change in place"):
        Flux.trainstep_(_mse, (w,), (X, Y), Flux.setup(Descent(0.1), (w,)))
    np.testing.assert_array_equal(w, np.array([[0.2, -0.3]], np.float32))
