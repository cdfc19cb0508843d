"""Flux 0.13's implicit loop keeps the optimiser's state across steps although `params(m)` is built
anew at every step: Flux's rules keep their state in an `IdDict` keyed by the array (Flux 0.13
src/optimise/optimisers.jl, `Momentum`: `v = get!(() -> zero(x), o.velocity, x)`). Here the rule
remembers it per parameter slot, since each update makes a new array. Checked against NumPy."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax import Dense, gradient, params
from fluxjax.optimise import Momentum, update_

X = jnp.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
Y = jnp.array([[1.0, 0.0, -1.0]])


def _model():
    return Dense(jnp.array([[0.3, -0.2]]), jnp.array([0.1]))


def _np_grads(w, b):
    x, y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    r = w @ x + b[:, None] - y
    return 2 * r @ x.T / r.size, 2 * r.sum(axis=1) / r.size


def _reference(steps, eta=0.01, rho=0.9):
    m0 = _model()
    w, b = np.asarray(m0.weight, np.float64), np.asarray(m0.bias, np.float64)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    for _ in range(steps):
        gw, gb = _np_grads(w, b)
        vw, vb = rho * vw + eta * gw, rho * vb + eta * gb
        w, b = w - vw, b - vb
    return w, b


def _loss(m):
    return jnp.mean((m(X) - Y) ** 2)


def test_momentum_keeps_velocity_when_params_is_rebuilt_every_step():
    m = _model()
    opt = Momentum(0.01)  # rho 0.9
    for _ in range(4):
        ps = params(m)  # a new Params at every step, as Flux 0.13 scripts do
        gs = gradient(lambda: _loss(m), ps)
        update_(opt, ps, gs)
    w, b = _reference(4)
    np.testing.assert_allclose(m.weight, w, rtol=1e-5)
    np.testing.assert_allclose(m.bias, b, rtol=1e-5)
    # a fresh rule object starts from zero velocity, as a fresh Flux rule (a new IdDict)
    m2 = _model()
    for _ in range(2):
        ps = params(m2)
        update_(Momentum(0.01), ps, gradient(lambda: _loss(m2), ps))
    w, b = _reference(2, rho=0.0)  # no velocity carried: two plain steps of eta * g
    np.testing.assert_allclose(m2.weight, w, rtol=1e-5)
    np.testing.assert_allclose(m2.bias, b, rtol=1e-5)


def test_the_same_rule_keeps_separate_states_for_separate_models():
    m1, m2 = _model(), _model()
    opt = Momentum(0.01)
    for _ in range(3):
        for m in (m1, m2):
            ps = params(m)
            update_(opt, ps, gradient(lambda: _loss(m), ps))  # noqa: B023
    w, b = _reference(3)
    for m in (m1, m2):
        np.testing.assert_allclose(m.weight, w, rtol=1e-5)
        np.testing.assert_allclose(m.bias, b, rtol=1e-5)


def test_whole_tree_optax_rule_keeps_its_state_too():
    m = _model()
    opt = optax.chain(optax.clip_by_global_norm(1e6), optax.sgd(0.01, momentum=0.9))
    for _ in range(3):
        ps = params(m)
        update_(opt, ps, gradient(lambda: _loss(m), ps))
    w, b = _reference(3)  # optax's trace t = g + 0.9 t, x -= 0.01 t: the same numbers
    np.testing.assert_allclose(m.weight, w, rtol=1e-5)
    np.testing.assert_allclose(m.bias, b, rtol=1e-5)


def test_train_implicit_then_loop_continues_the_state():
    m = _model()
    opt = Momentum(0.01)
    Flux.train_(lambda x, y: jnp.mean((m(x) - y) ** 2), params(m), [(X, Y)] * 2, opt)
    ps = params(m)
    update_(opt, ps, gradient(lambda: _loss(m), ps))
    w, b = _reference(3)
    np.testing.assert_allclose(m.weight, w, rtol=1e-5)
    np.testing.assert_allclose(m.bias, b, rtol=1e-5)


@pytest.mark.parametrize("eager_steps", [0, 2])
@pytest.mark.parametrize("fresh_params", [False, True])
def test_jit_of_the_implicit_step_carries_the_state(eager_steps, fresh_params):
    """`Flux.jit` of the Flux 0.13 step (`pullback(ps)` then `update_(rule, ps, gs)`) goes on with the
    rule's state from call to call, as the loop without it does: the momentum made by the first traced
    call, or by eager steps before, is an input of the program, not a constant of it (it was: every
    call stepped from the state the trace saw, so the third step went wrong). A `Params` made anew in
    each call finds the state the rule keeps for the same parameters, whole, and makes none: the
    program is reused (it was compiled again at every call, as one whose trace made a state)."""
    m = _model()
    opt = Momentum(0.01, 0.9)
    ps = params(m)

    def step():
        p = params(m) if fresh_params else ps
        loss, back = Flux.pullback(lambda: _loss(m), p)
        update_(opt, p, back(1.0))
        return loss

    jitted = Flux.jit(step)
    for i in range(7):
        (step if i < eager_steps else jitted)()
    w, b = _reference(7)
    np.testing.assert_allclose(np.asarray(m.weight), w, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(m.bias), b, rtol=1e-5)
    # the first traced call makes the state when no eager step did: that program is used for it only
    assert jitted.compilations == (2 if eager_steps == 0 else 1)
