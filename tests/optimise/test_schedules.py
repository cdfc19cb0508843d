"""optax schedules as `eta` of every fluxjax rule: step `t` (0 first) uses `η_t = schedule(t)`, as optax's
`scale_by_learning_rate`. Checked against the same rule with a constant `eta` adjusted to `schedule(t)`
before each step (Optimisers.jl's `adjust!` in a loop, the upstream way to schedule), and against optax
directly on a plain pytree where optax has the same rule.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.optimise import (
    AdaBelief,
    AdaGrad,
    Adam,
    AdaMax,
    AdamW,
    AMSGrad,
    Descent,
    Lion,
    Momentum,
    NAdam,
    Nesterov,
    OAdam,
    OptimiserChain,
    RAdam,
    RMSProp,
    Rprop,
    ScheduleState,
    WeightDecay,
    adjust_,
    setup,
    train_,
    update_,
)

SCHED = optax.linear_schedule(0.1, 0.01, 4)  # 0.1, 0.0775, 0.055, 0.0325, 0.01, 0.01, ...
RULES = [Descent, Momentum, Nesterov, RMSProp, AdaGrad, Adam, AdamW, RAdam, AdaMax, OAdam, AMSGrad, NAdam, AdaBelief, Lion]


def params():
    return {"w": jnp.asarray([[0.5, -1.0], [2.0, 0.3]]), "b": jnp.asarray([0.1, -0.2])}


def grads(t, x):
    return jax.tree.map(lambda v: jnp.sin(3.0 * v + t) + 0.1 * t, x)


def run(rule, steps=7, eta_at=None):
    """`rule` through its optax interface on a plain pytree; with `eta_at`, `adjust_state(eta=η_t)`
    before step `t`."""
    x = params()
    st = rule.init(x)
    for t in range(steps):
        if eta_at is not None:
            st = rule.adjust_state(st, eta=float(eta_at(t)))
        u, st = rule.update(grads(t, x), st, x)
        x = optax.apply_updates(x, u)
    return x


def close(a, b, rtol=2e-5, atol=1e-6):
    for k in a:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=rtol, atol=atol)


@pytest.mark.parametrize("cls", RULES, ids=lambda c: c.__name__)
def test_schedule_equals_adjusting_eta_every_step(cls):
    got = run(cls(SCHED))
    want = run(cls(), eta_at=SCHED)
    close(got, want)
    const = run(cls(0.1))  # a schedule that changes must give something else than its first value
    assert not all(np.allclose(got[k], const[k]) for k in got)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (Descent(SCHED), optax.sgd(SCHED)),
        (Adam(SCHED), optax.adam(SCHED)),
        (AdamW(SCHED, lambda_=0.3), optax.adamw(SCHED, weight_decay=0.3)),
        (RMSProp(SCHED, 0.8, 1e-6), optax.rmsprop(SCHED, 0.8, 1e-6, eps_in_sqrt=False)),
        (OptimiserChain(WeightDecay(0.01), Descent(SCHED)), optax.chain(optax.add_decayed_weights(0.01), optax.sgd(SCHED))),
    ],
    ids=["Descent", "Adam", "AdamW", "RMSProp", "chain"],
)
def test_schedule_equals_optax(ours, theirs):
    # (Lion is not here: Optimisers.jl's Lion differs from optax.lion, see test_rules.test_lion_vs_optax.)
    close(run(ours), run(theirs), rtol=1e-4, atol=1e-5)


def test_state_counts_the_updates():
    rule = Adam(SCHED)
    x = params()
    st = rule.init(x)
    assert isinstance(st, ScheduleState) and int(st.count) == 0
    for t in range(3):
        _, st = rule.update(grads(t, x), st, x)
    assert int(st.count) == 3
    assert type(st.state) is Adam.State  # the rule's usual state inside


def test_rules_with_different_schedules_differ():
    assert Descent(SCHED) == Descent(SCHED)
    other = optax.constant_schedule(0.1)
    assert Descent(SCHED) != Descent(other)
    assert Descent(SCHED).static_key() != Descent(other).static_key()  # fluxjax.jit compiles each
    with pytest.raises(TypeError, match="schedule"):
        Rprop(SCHED)  # Rprop's eta seeds its step sizes; it is not a learning rate


def _model():
    Flux.seed_(2)
    return Flux.Chain(Flux.Dense(2, 3, Flux.tanh), Flux.Dense(3, 1))


X = jnp.asarray(np.random.default_rng(0).normal(size=(2, 6)), jnp.float32)
Y = jnp.asarray(np.random.default_rng(1).normal(size=(1, 6)), jnp.float32)


def _loss(m):
    return jnp.mean((m(X) - Y) ** 2)


@pytest.mark.parametrize("jit", [True, False])
def test_train_with_a_scheduled_rule_equals_adjust_in_a_loop(jit):
    m1, m2 = _model(), _model()
    s1, s2 = setup(Adam(SCHED), m1), setup(Adam(), m2)
    train_(_loss, m1, [()] * 6, s1, jit=jit)
    for t in range(6):
        adjust_(s2, float(SCHED(t)))
        (g,) = Flux.gradient(_loss, m2)
        update_(s2, m2, g)
    for a, b in zip(jax.tree.leaves(m1), jax.tree.leaves(m2)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    assert int(s1.layers[0].weight.state.count) == 6


def test_adjust_to_a_schedule_and_back():
    m = _model()
    s = setup(Descent(0.1), m)
    adjust_(s, SCHED)  # from now on η_t = SCHED(t), t counting from here
    W = m[0].weight
    (g,) = Flux.gradient(_loss, m)
    update_(s, m, g)
    np.testing.assert_allclose(m[0].weight, W - SCHED(0) * g.layers[0].weight, rtol=1e-6)
    W = m[0].weight
    (g,) = Flux.gradient(_loss, m)
    update_(s, m, g)
    np.testing.assert_allclose(m[0].weight, W - SCHED(1) * g.layers[0].weight, rtol=1e-6)
    adjust_(s, 0.5)
    W = m[0].weight
    (g,) = Flux.gradient(_loss, m)
    update_(s, m, g)
    np.testing.assert_allclose(m[0].weight, W - 0.5 * g.layers[0].weight, rtol=1e-6)
