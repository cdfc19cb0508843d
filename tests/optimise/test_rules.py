"""fluxjax.optimise.rules against Optimisers.jl v0.4.8's formulas and against optax.

Each rule takes three steps next to a NumPy float64 reference written from the rule table in
`src/rules.jl` (research/flux-api.md section (d), in tests/optimise/reference.py); rules with an optax
counterpart are run next to it. The ports of Optimisers.jl's own tests are in test_rules_runtests.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fluxjax.optimise.rules import (
    AdaBelief,
    AdaDelta,
    AdaGrad,
    Adam,
    AdaMax,
    AdamW,
    AMSGrad,
    ClipGrad,
    ClipNorm,
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
    SignDecay,
    WeightDecay,
)
from tests.optimise.reference import GRADS, X0, np_run, run_rule

# (rule, [(name, hp), ...]) with hp the rule's values, so the reference reads like the table.
CASES = [
    (Descent(), [("Descent", {"eta": 0.1})]),
    (Descent(0.3), [("Descent", {"eta": 0.3})]),
    (Momentum(), [("Momentum", {"eta": 0.01, "rho": 0.9})]),
    (Momentum(0.1, 0.5), [("Momentum", {"eta": 0.1, "rho": 0.5})]),
    (Nesterov(), [("Nesterov", {"eta": 0.001, "rho": 0.9})]),
    (Nesterov(0.1, 0.8), [("Nesterov", {"eta": 0.1, "rho": 0.8})]),
    (RMSProp(), [("RMSProp", {"eta": 0.001, "rho": 0.9, "epsilon": 1e-8})]),
    (RMSProp(0.01, centred=True), [("RMSProp", {"eta": 0.01, "rho": 0.9, "epsilon": 1e-8, "centred": True})]),
    (Rprop(), [("Rprop", {"eta": 1e-3, "ell": (0.5, 1.2), "gamma": (1e-6, 50.0)})]),
    (Rprop(0.1, (0.4, 1.5), (0.05, 0.12)), [("Rprop", {"eta": 0.1, "ell": (0.4, 1.5), "gamma": (0.05, 0.12)})]),
    (Adam(), [("Adam", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8})]),
    (Adam(0.05, (0.8, 0.9), 1e-3), [("Adam", {"eta": 0.05, "beta": (0.8, 0.9), "epsilon": 1e-3})]),
    (AdamW(), [("AdamW", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8, "lambda_": 0.0})]),
    (AdamW(0.01, lambda_=0.3), [("AdamW", {"eta": 0.01, "beta": (0.9, 0.999), "epsilon": 1e-8, "lambda_": 0.3})]),
    (
        AdamW(0.01, lambda_=0.3, couple=False),
        [("AdamW", {"eta": 0.01, "beta": (0.9, 0.999), "epsilon": 1e-8, "lambda_": 0.3, "couple": False})],
    ),
    (RAdam(), [("RAdam", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8})]),
    # β₂ = 0.7: ρ∞ = 5.67, the unrectified branch (ρ ≤ 4) for these first steps.
    (RAdam(0.01, (0.9, 0.7)), [("RAdam", {"eta": 0.01, "beta": (0.9, 0.7), "epsilon": 1e-8})]),
    (AdaMax(), [("AdaMax", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8})]),
    (OAdam(), [("OAdam", {"eta": 0.001, "beta": (0.5, 0.9), "epsilon": 1e-8})]),
    (AdaGrad(), [("AdaGrad", {"eta": 0.1, "epsilon": 1e-8})]),
    (AdaGrad(0.1, 0.5), [("AdaGrad", {"eta": 0.1, "epsilon": 0.5})]),
    (AdaDelta(), [("AdaDelta", {"rho": 0.9, "epsilon": 1e-8})]),
    (AdaDelta(0.5, 1e-3), [("AdaDelta", {"rho": 0.5, "epsilon": 1e-3})]),
    (AMSGrad(), [("AMSGrad", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8})]),
    (AMSGrad(0.01, (0.5, 0.6), 0.1), [("AMSGrad", {"eta": 0.01, "beta": (0.5, 0.6), "epsilon": 0.1})]),
    (NAdam(), [("NAdam", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-8})]),
    (AdaBelief(), [("AdaBelief", {"eta": 0.001, "beta": (0.9, 0.999), "epsilon": 1e-16})]),
    (AdaBelief(0.01, (0.8, 0.9), 1e-4), [("AdaBelief", {"eta": 0.01, "beta": (0.8, 0.9), "epsilon": 1e-4})]),
    (Lion(), [("Lion", {"eta": 0.001, "beta": (0.9, 0.999)})]),
    (Lion(0.01, (0.3, 0.6)), [("Lion", {"eta": 0.01, "beta": (0.3, 0.6)})]),
    (WeightDecay(), [("WeightDecay", {"lambda_": 5e-4})]),
    (WeightDecay(0.1), [("WeightDecay", {"lambda_": 0.1})]),
    (SignDecay(), [("SignDecay", {"lambda_": 1e-3})]),
    (SignDecay(0.2), [("SignDecay", {"lambda_": 0.2})]),
    (ClipGrad(), [("ClipGrad", {"delta": 10.0})]),
    (ClipGrad(0.5), [("ClipGrad", {"delta": 0.5})]),
    (ClipNorm(), [("ClipNorm", {"omega": 10.0, "p": 2})]),
    (ClipNorm(1.0), [("ClipNorm", {"omega": 1.0, "p": 2})]),
    (ClipNorm(1.0, 1), [("ClipNorm", {"omega": 1.0, "p": 1})]),
    (ClipNorm(1.0, math.inf), [("ClipNorm", {"omega": 1.0, "p": np.inf})]),
    (ClipNorm(2.0, 3), [("ClipNorm", {"omega": 2.0, "p": 3})]),
    (OptimiserChain(), []),
    (
        OptimiserChain(WeightDecay(0.1), Adam(0.01)),
        [("WeightDecay", {"lambda_": 0.1}), ("Adam", {"eta": 0.01, "beta": (0.9, 0.999), "epsilon": 1e-8})],
    ),
    (
        OptimiserChain(SignDecay(0.001), ClipNorm(1.0), Momentum(0.1)),
        [("SignDecay", {"lambda_": 0.001}), ("ClipNorm", {"omega": 1.0, "p": 2}),
         ("Momentum", {"eta": 0.1, "rho": 0.9})],
    ),  # fmt: skip
    (
        OptimiserChain(WeightDecay(), OAdam(), ClipGrad(1)),
        [("WeightDecay", {"lambda_": 5e-4}), ("OAdam", {"eta": 0.001, "beta": (0.5, 0.9), "epsilon": 1e-8}),
         ("ClipGrad", {"delta": 1.0})],
    ),  # fmt: skip
]


def _case_id(case):
    return repr(case[0])


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_three_steps_match_numpy_reference(case):
    rule, parts = case
    x = jnp.asarray(X0, jnp.float32)
    want = np_run(parts, X0, GRADS)
    got, _ = run_rule(rule, x, GRADS, jit=True)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", [CASES[i] for i in (7, 38, 44)], ids=_case_id)
def test_eager_equals_jit(case):
    rule = case[0]
    x = jnp.asarray(X0, jnp.float32)
    eager, s1 = run_rule(rule, x, GRADS)
    jitted, s2 = run_rule(rule, x, GRADS, jit=True)
    np.testing.assert_allclose(eager[-1], jitted[-1], rtol=1e-6)
    assert jax.tree.structure(s1) == jax.tree.structure(s2)


def test_radam_rectifies_after_warmup():
    # With β₂ = 0.7 (ρ∞ = 5.67) the unrectified branch is taken for t ≤ 2 and the rectified one later.
    rule = RAdam(0.01, (0.9, 0.7))
    grads = GRADS * 3
    want = np_run([("RAdam", {"eta": 0.01, "beta": (0.9, 0.7), "epsilon": 1e-8})], X0, grads)
    got, state = run_rule(rule, jnp.asarray(X0, jnp.float32), grads, jit=True)
    np.testing.assert_allclose(np.asarray(got[-1]), want[-1], rtol=1e-5)
    assert int(state.t) == len(grads) + 1


# --------------------------------------------------------------------------------------------
# optax counterparts


def _optax_run(tx, x, grads):
    s = tx.init(x)
    out = []
    for g in grads:
        u, s = tx.update(jnp.asarray(g, jnp.float32), s, x)
        x = optax.apply_updates(x, u)
        out.append(x)
    return out


OPTAX_PAIRS = [
    (Descent(0.1), optax.sgd(0.1)),
    (Momentum(0.1, 0.9), optax.sgd(0.1, momentum=0.9)),  # v_jl = η·trace_optax while η is constant
    (Nesterov(0.1, 0.9), optax.sgd(0.1, momentum=0.9, nesterov=True)),
    (Adam(0.01, (0.8, 0.99), 1e-6), optax.adam(0.01, 0.8, 0.99, eps=1e-6)),
    (RMSProp(0.01, 0.8, 1e-6), optax.rmsprop(0.01, 0.8, 1e-6, eps_in_sqrt=False)),
    (RMSProp(0.01, 0.8, 1e-6, centred=True), optax.rmsprop(0.01, 0.8, 1e-6, eps_in_sqrt=False, centered=True)),
    (AdaBelief(0.01, (0.8, 0.99), 1e-8), optax.adabelief(0.01, 0.8, 0.99, eps=1e-8, eps_root=1e-8)),
    (AdamW(0.01, lambda_=0.3), optax.adamw(0.01, weight_decay=0.3)),  # couple=True: η(a + λx)
    (OptimiserChain(ClipGrad(0.5), Descent(0.1)), optax.chain(optax.clip(0.5), optax.sgd(0.1))),
    # optax puts ϵ inside the root (g/√(acc+ϵ)); Optimisers.jl outside: equal to ~1e-8 for these grads.
    (AdaGrad(0.1, 1e-8), optax.adagrad(0.1, initial_accumulator_value=1e-8, eps=0.0)),
]


@pytest.mark.parametrize("pair", OPTAX_PAIRS, ids=lambda p: repr(p[0]))
def test_matches_optax(pair):
    ours, theirs = pair
    x = jnp.asarray(X0, jnp.float32)
    got, _ = run_rule(ours, x, GRADS, jit=True)
    want = _optax_run(theirs, x, GRADS)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_lion_vs_optax():
    # Optimisers.jl's Lion updates m ← β₂g + (1-β₂)m (optax: β₂m + (1-β₂)g): same first step, and
    # the same steps while each coordinate keeps its sign; different in general.
    x = jnp.asarray(X0, jnp.float32)
    same = [GRADS[0], 2 * GRADS[0], 0.5 * GRADS[0]]
    got, _ = run_rule(Lion(0.01), x, same)
    want = _optax_run(optax.lion(0.01, 0.9, 0.999, weight_decay=0.0), x, same)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-6)
    # β = (0.9, 0.9), grads 1, 1, -0.5 from 0: Optimisers.jl's m = 0.9g + 0.1m turns at once, optax's not.
    seq = [np.array([1.0]), np.array([1.0]), np.array([-0.5])]
    got, _ = run_rule(Lion(0.1, (0.9, 0.9)), jnp.zeros(1), seq)
    want = _optax_run(optax.lion(0.1, 0.9, 0.9, weight_decay=0.0), jnp.zeros(1), seq)
    ref = np_run([("Lion", {"eta": 0.1, "beta": (0.9, 0.9)})], np.zeros(1), seq)
    np.testing.assert_allclose(np.concatenate(got), [-0.1, -0.2, -0.1], rtol=1e-6)
    np.testing.assert_allclose(np.concatenate(ref), [-0.1, -0.2, -0.1], rtol=1e-12)
    np.testing.assert_allclose(np.concatenate(want), [-0.1, -0.2, -0.3], rtol=1e-6)


def test_chain_with_foreign_optax_transforms():
    x = jnp.asarray(X0, jnp.float32)
    ref, _ = run_rule(OptimiserChain(ClipGrad(1.0), Descent(0.1)), x, GRADS, jit=True)
    for chain in (
        OptimiserChain(ClipGrad(1.0), optax.sgd(0.1)),  # foreign last: its updates are the result
        OptimiserChain(optax.clip(1.0), Descent(0.1)),  # foreign in the middle: a gradient transform
        OptimiserChain(optax.clip(1.0), optax.sgd(0.1)),
    ):
        got, _ = run_rule(chain, x, GRADS, jit=True)
        np.testing.assert_allclose(got[-1], ref[-1], rtol=1e-6)
    # Our rules inside optax.chain act as complete optimisers (last place) ...
    got = _optax_run(optax.chain(optax.clip(1.0), Descent(0.1)), x, GRADS)
    np.testing.assert_allclose(got[-1], ref[-1], rtol=1e-6)
    # ... and optax.inject_hyperparams's learning rate follows adjust_state(eta=...).
    chain = OptimiserChain(ClipGrad(1.0), optax.inject_hyperparams(optax.sgd)(learning_rate=0.1))
    s = chain.adjust_state(chain.init(x), eta=0.5)
    np.testing.assert_allclose(s[1].hyperparams["learning_rate"], 0.5)
    u, _ = chain.update(jnp.ones_like(x), s, x)
    np.testing.assert_allclose(u, -0.5 * np.ones(5), rtol=1e-6)


def test_pytree_equals_per_array_and_skips_none():
    params = {"a": jnp.asarray(X0, jnp.float32), "b": (jnp.ones((2, 2)), None)}
    grads = {"a": jnp.asarray(GRADS[0], jnp.float32), "b": (jnp.full((2, 2), 0.5), None)}
    rule = OptimiserChain(WeightDecay(0.1), Adam(0.01))
    u, s = jax.jit(rule.update)(grads, rule.init(params), params)
    ua, _ = rule.update(grads["a"], rule.init(params["a"]), params["a"])
    np.testing.assert_allclose(u["a"], ua, rtol=1e-6)
    assert u["b"][1] is None
    # A None gradient for an existing array leaves that array's state alone (Optimisers.jl skips it).
    g2 = {"a": None, "b": (jnp.ones((2, 2)), None)}
    u2, s2 = rule.update(g2, s, params)
    assert u2["a"] is None
    np.testing.assert_array_equal(s2[1].mt["a"], s[1].mt["a"])
