"""The whole eager training loop (`withgradient` then `update_`, both compiled when eager) against the
same loop op by op (`with fluxjax.eager():`): the same losses and weights (rtol 1e-6) for an RNN, and
for random short sequences of steps, batch-size changes, `adjust_`, `freeze_`/`thaw_` and a layer
replaced between steps."""

import copy

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxjax as F

RTOL = 1e-6


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=1e-6)


def _same(m1, m2):
    p1, p2 = list(F.params(m1)), list(F.params(m2))
    assert len(p1) == len(p2)
    for a, b in zip(p1, p2):
        assert a.shape == b.shape
        _close(a, b)


def _rnn_model():
    F.seed_(3)
    return F.Chain(F.RNN(3, 4), lambda h: h[:, -1, :], F.Dense(4, 2))


def _rnn_loop(model, compiled):
    st_ = F.setup(F.Momentum(0.05, 0.9), model)
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(3):
        x = jnp.asarray(rng.normal(size=(3, 5, 2)), jnp.float32)
        y = jnp.asarray(rng.normal(size=(2, 2)), jnp.float32)

        def step():
            loss, g = F.withgradient(lambda m: F.mse(m(x), y), model)  # noqa: B023
            F.update_(st_, model, g[0])
            return float(loss)

        if compiled:
            losses.append(step())
        else:
            with F.eager():
                losses.append(step())
    return losses


def test_rnn_loop_matches_op_by_op():
    m1 = _rnn_model()
    m2 = copy.deepcopy(m1)
    l1 = _rnn_loop(m1, True)
    l2 = _rnn_loop(m2, False)
    _close(l1, l2)
    _same(m1, m2)
    assert l1[0] != l1[1]  # it trained


_XS = {k: jnp.asarray(np.random.default_rng(k).normal(size=(4, k)), jnp.float32) for k in (2, 3)}
_YS = {k: jnp.asarray(np.random.default_rng(10 + k).normal(size=(3, k)), jnp.float32) for k in (2, 3)}
ACTIONS = st.sampled_from(["step2", "step3", "adjust", "freeze", "thaw", "replace"])


@F.layer
class _Two:
    """Two layers in plain attributes, so that a step can replace one."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return self.b(self.a(x))


def _mlp():
    F.seed_(0)
    return _Two(F.Dense(4, 5, F.tanh), F.Dense(5, 3))


def _play(model, actions):
    opt = F.setup(F.Adam(0.05), model)
    losses = []
    for a in actions:
        if a.startswith("step"):
            x, y = _XS[int(a[-1])], _YS[int(a[-1])]
            loss, g = F.withgradient(lambda m: F.mse(m(x), y), model)  # noqa: B023
            F.update_(opt, model, g[0])
            losses.append(float(loss))
        elif a == "adjust":
            F.adjust_(opt, 0.02)
        elif a == "freeze":
            F.freeze_(opt.a)
        elif a == "thaw":
            F.thaw_(opt)
        elif a == "replace":  # a new last layer, same shapes: the old moments go on with it
            F.seed_(len(losses))
            model.b = F.Dense(5, 3)
    return losses


def _check(actions):
    m1 = _mlp()
    m2 = copy.deepcopy(m1)
    l1 = _play(m1, actions)
    with F.eager():
        l2 = _play(m2, actions)
    _close(l1, l2)
    _same(m1, m2)


def test_a_loop_with_every_edit_matches_op_by_op():
    _check(["step2", "adjust", "freeze", "step3", "replace", "thaw", "step3"])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=4))
def test_random_loops_match_op_by_op(actions):
    _check(actions)
