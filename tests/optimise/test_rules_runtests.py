"""Ports of Optimisers.jl/test/runtests.jl and test/rules.jl (research/flux-tests.md section G); a
comment names the testset each test ports."""

from __future__ import annotations

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from backend import ON_CPU

from fluxjax.optimise import rules as R
from fluxjax.optimise.rules import (
    AccumGrad,
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
from tests.optimise.reference import GRADS, X0, run_rule


def _step(rule, x, g):
    """One compiled step from a fresh state: (new x, new state)."""

    @jax.jit
    def step(x, g):
        u, state = rule.update(g, rule.init(x), x)
        return optax.apply_updates(x, u), state

    return step(jnp.asarray(x, jnp.float32), jnp.asarray(g, jnp.float32))


def test_descent_and_momentum_basics():
    # "very basics": Descent(0.1) on [1,2] with grad [25,33]; Momentum(0.1)'s state after one step.
    x1, _ = _step(Descent(0.1), [1.0, 2.0], [25, 33])
    np.testing.assert_allclose(x1, [-1.5, -1.3], rtol=1e-6)
    _, s = _step(Momentum(0.1), [1.0, 2.0], [25, 33])
    np.testing.assert_allclose(s.velocity, [2.5, 3.3], rtol=1e-6)


def test_optimiser_chain_order():
    # "OptimiserChain": x = [1,10,100], dx = [1,2,3]
    x, dx = [1.0, 10.0, 100.0], [1.0, 2.0, 3.0]

    def upd(rule, x=x, dx=dx):
        return np.asarray(_step(rule, x, dx)[0])

    np.testing.assert_allclose(upd(WeightDecay(0.1)), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 3], rtol=1e-6)
    np.testing.assert_allclose(upd(SignDecay(0.1)), [1 - 0.1 - 1, 10 - 0.1 - 2, 100 - 0.1 - 3], rtol=1e-6)
    np.testing.assert_allclose(upd(ClipGrad(2)), [1 - 1, 10 - 2, 100 - 2], rtol=1e-6)
    o2 = OptimiserChain(ClipGrad(2), WeightDecay(0.1))
    np.testing.assert_allclose(upd(o2), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2], rtol=1e-6)
    np.testing.assert_allclose(upd(OptimiserChain(o2)), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2], rtol=1e-6)
    assert not np.allclose(upd(OptimiserChain(WeightDecay(0.1), ClipGrad(2))), upd(o2))
    np.testing.assert_allclose(upd(OptimiserChain(Descent(0.1))), [0.9, 9.8, 99.7], rtol=1e-6)
    np.testing.assert_allclose(upd(OptimiserChain()), [0.0, 8.0, 97.0], rtol=1e-6)  # Descent(1)
    xm, dxm = [1.0, -10.0, 100.0], [3.0, 2.0, -1.0]
    np.testing.assert_allclose(
        upd(SignDecay(0.1), xm, dxm), [1 - 0.1 - 3, -10 + 0.1 - 2, 100 - 0.1 + 1], rtol=1e-6
    )


def test_chain_docstring_clips_before_discounting():
    # OptimiserChain docstring: update of zeros(3) with [0.3, 1, 7] gives [-0.03, -0.1, -0.1].
    x1, _ = _step(OptimiserChain(ClipGrad(1.0), Descent(0.1)), np.zeros(3), [0.3, 1, 7])
    np.testing.assert_allclose(x1, [-0.03, -0.1, -0.1], rtol=1e-6)


def test_gradient_clipping_per_array():
    # "gradient clipping": m = (α = ([0.0], sin), γ = rand(3)); nothing gradients are skipped.
    rng = np.random.default_rng(0)
    m = {"alpha": (jnp.zeros(1), None), "gamma": jnp.asarray(rng.random(3), jnp.float32)}
    rule = ClipGrad(13)
    g = {"alpha": (None, None), "gamma": jnp.array([1.0, 10.0, 100.0])}
    u, _ = rule.update(g, rule.init(m), m)
    np.testing.assert_allclose(-u["gamma"], [1, 10, 13], rtol=1e-6)
    assert u["alpha"] == (None, None)

    rule = ClipNorm(10)
    s = rule.init(m)
    g = {"alpha": (jnp.array([0.1]), None), "gamma": jnp.array([1.0, 10.0, 100.0])}
    u, _ = rule.update(g, s, m)
    np.testing.assert_allclose(-u["alpha"][0], [0.1], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(u["gamma"]), 10, rtol=1e-6)  # per-array norm
    with pytest.raises(ValueError, match="norm"):
        rule.update({"alpha": (jnp.array([0.1]), None), "gamma": jnp.array([1.0, 10.0, np.nan])}, s, m)

    rule = ClipNorm(5, 1, throw=False)
    s = rule.init(m)
    u, _ = rule.update(g, s, m)
    np.testing.assert_allclose(-u["alpha"][0], [0.1], rtol=1e-6)
    np.testing.assert_allclose(np.abs(np.asarray(u["gamma"])).sum(), 5, rtol=1e-6)
    u, _ = rule.update({"alpha": (None, None), "gamma": jnp.array([1.0, 10.0, np.inf])}, s, m)
    assert np.isnan(np.asarray(m["gamma"] + u["gamma"])[2])


def test_clipnorm_throw_under_jit_gives_nan():
    rule = ClipNorm(10)
    x = jnp.ones(3)
    u, _ = jax.jit(rule.update)(jnp.array([1.0, np.inf, 2.0]), rule.init(x), x)
    assert np.isnan(np.asarray(u)).all()
    u, _ = jax.jit(rule.update)(jnp.array([3.0, 4.0, 0.0]), rule.init(x), x)
    np.testing.assert_allclose(u, [-3.0, -4.0, 0.0])


def test_momentum_adjust_keeps_state():
    # "adjusting parameters": Momentum(0.1, 0.9), grad γ = [1, 10, 100], params Float32[4, 3, 2].
    rule = Momentum(0.1, 0.9)
    x = jnp.array([4.0, 3.0, 2.0])
    s0 = rule.init(x)
    u, s1 = rule.update(jnp.array([1.0, 10.0, 100.0]), s0, x)
    np.testing.assert_allclose(-u, [0.1, 1, 10], rtol=1e-6)
    np.testing.assert_allclose(s1.velocity, [0.1, 1, 10], rtol=1e-6)

    r2, s2 = rule.adjust(0.2), rule.adjust_state(s1, 0.2)
    assert (r2.eta, r2.rho) == (0.2, 0.9)
    np.testing.assert_allclose(s2.hyper["eta"], 0.2)
    np.testing.assert_allclose(s2.hyper["rho"], 0.9)
    np.testing.assert_array_equal(s2.velocity, s1.velocity)  # state kept

    r3, s3 = rule.adjust(eta=0.3, rho=0.7), rule.adjust_state(s1, eta=0.3, rho=0.7)
    assert (r3.eta, r3.rho) == (0.3, 0.7)
    np.testing.assert_allclose(s3.hyper["rho"], 0.7)
    u3, _ = rule.update(jnp.zeros(3), s3, x)  # v ← 0.7·v
    np.testing.assert_allclose(-u3, 0.7 * np.array([0.1, 1, 10]), rtol=1e-6)

    assert rule.adjust(zeta="this does nothing") == rule
    with pytest.raises(ValueError):
        rule.adjust()

    chain = OptimiserChain(ClipGrad(2), Adam())
    c2 = chain.adjust(delta=2.5)
    assert c2.opts[0] == ClipGrad(2.5) and c2.opts[1] == Adam()
    c3 = chain.adjust(0.2)
    assert c3.opts[0] == ClipGrad(2) and c3.opts[1] == Adam(0.2)
    cs = chain.adjust_state(chain.init(x), delta=2.5)
    np.testing.assert_allclose(cs[0].hyper["delta"], 2.5)
    np.testing.assert_allclose(cs[1].hyper["eta"], 0.001)


def test_adjust_state_does_not_retrace():
    rule = Adam(0.1)
    x = jnp.ones(3)
    traces = []

    @jax.jit
    def step(g, s, x):
        traces.append(1)
        return rule.update(g, s, x)

    s = rule.init(x)
    u1, _ = step(jnp.ones(3), s, x)
    u2, _ = step(jnp.ones(3), rule.adjust_state(s, eta=0.01), x)
    assert len(traces) == 1
    np.testing.assert_allclose(u1, -0.1 * np.ones(3), rtol=1e-5)
    np.testing.assert_allclose(u2, -0.01 * np.ones(3), rtol=1e-5)


def test_adamw_first_step_is_eta():
    # "Dict support": AdamW(0.1), loss sum(abs2, a), a = [1, 2] → [0.9, 1.9].
    x = jnp.array([1.0, 2.0])
    x1, _ = _step(AdamW(0.1), x, 2 * x)
    np.testing.assert_allclose(x1, [0.9, 1.9], rtol=1e-5)


def test_accumgrad_docstring_and_runtests():
    # AccumGrad docstring: OptimiserChain(AccumGrad(2), WeightDecay(0.01), Descent(0.1)).
    rule = OptimiserChain(AccumGrad(2), WeightDecay(0.01), Descent(0.1))
    m = {"x": jnp.array([1.0]), "y": jnp.array([2.0])}
    s = rule.init(m)
    u, s = rule.update({"x": jnp.array([33.0]), "y": jnp.array([0.0])}, s, m)
    m = optax.apply_updates(m, u)
    np.testing.assert_array_equal(m["x"], [1.0])
    np.testing.assert_array_equal(m["y"], [2.0])
    u, s = rule.update({"x": jnp.array([0.0]), "y": jnp.array([444.0])}, s, m)
    m = optax.apply_updates(m, u)
    np.testing.assert_allclose(m["x"], [-0.651], rtol=1e-5)
    np.testing.assert_allclose(m["y"], [-20.202002], rtol=1e-6)

    # runtests.jl "AccumGrad": OptimiserChain(AccumGrad(3), Descent(0.01)), under jit.
    rng = np.random.default_rng(1)
    x0 = jnp.asarray(rng.random(5), jnp.float32)
    gs = [jnp.asarray(rng.random(5), jnp.float32) for _ in range(4)]
    rule = OptimiserChain(AccumGrad(3), Descent(0.01))
    upd = jax.jit(rule.update)
    s, x = rule.init(x0), x0
    xs = []
    for g in gs:
        u, s = upd(g, s, x)
        x = optax.apply_updates(x, u)
        xs.append(x)
    np.testing.assert_array_equal(xs[0], x0)
    np.testing.assert_array_equal(xs[1], x0)
    np.testing.assert_allclose(xs[2], x0 - 0.01 * (gs[0] + gs[1] + gs[2]) / 3, rtol=1e-6)
    np.testing.assert_array_equal(xs[3], xs[2])


def test_accumgrad_holds_later_state():
    # Adam after AccumGrad(2) must see exactly one (mean) gradient per two steps.
    x = jnp.asarray(X0, jnp.float32)
    rule = OptimiserChain(AccumGrad(2), Adam(0.1))
    s = rule.init(x)
    upd = jax.jit(rule.update)
    u1, s = upd(jnp.asarray(GRADS[0], jnp.float32), s, x)
    np.testing.assert_array_equal(u1, 0.0)
    np.testing.assert_array_equal(s[1].mt, 0.0)
    np.testing.assert_allclose(s[1].beta_t[0], 0.9)
    u2, s = upd(jnp.asarray(GRADS[1], jnp.float32), s, x)
    mean = (GRADS[0] + GRADS[1]) / 2
    ref, _ = _step(Adam(0.1), x, mean)
    np.testing.assert_allclose(optax.apply_updates(x, u2), ref, rtol=1e-6)
    # AccumGrad alone is Descent(1) on the mean every n steps.
    alone = AccumGrad(2)
    s = alone.init(x)
    u, s = alone.update(jnp.asarray(GRADS[0], jnp.float32), s, x)
    np.testing.assert_array_equal(u, 0.0)
    u, s = alone.update(jnp.asarray(GRADS[1], jnp.float32), s, x)
    np.testing.assert_allclose(-u, mean, rtol=1e-6)
    with pytest.raises(ValueError):
        AccumGrad(0)


def test_float16_epsilon():
    # "Float16 epsilon" (Optimisers.jl issue #167): Adam(1e-4) on Float16 gives these values.
    x = jnp.array([0.579, -0.729, 0.5493], jnp.float16)
    dx = jnp.array([-0.001497, 0.0001875, -0.013176], jnp.float16)
    (x1,), _ = run_rule(Adam(1e-4), x, [dx])  # eager: every op rounds to Float16, as Julia's broadcast
    assert x1.dtype == jnp.float16
    np.testing.assert_allclose(np.asarray(x1, np.float32), [1.835, -0.886, 0.5493], rtol=1e-3)
    # Under jit, XLA's CPU backend may keep fused Float16 intermediates in float32, so v = 0.001·g²
    # need not underflow and the step is Adam's intended ≈ η·sign(g): either answer is acceptable.
    # (A GPU flushes Float16 subnormals to zero, ϵ = nextfloat(0) among them, so m/(√v + ϵ) is ±Inf.)
    if not ON_CPU:
        return
    (x2,), _ = run_rule(Adam(1e-4), x, [dx], jit=True)
    assert x2.dtype == jnp.float16
    x2 = np.asarray(x2, np.float32)
    intended = np.asarray(x, np.float32) - 1e-4 * np.sign(np.asarray(dx, np.float32))
    assert np.allclose(x2, [1.835, -0.886, 0.5493], rtol=1e-3) or np.allclose(x2, intended, rtol=1e-3)


ALL_DEFAULTS = [
    Descent(), Adam(), Momentum(), Nesterov(), Rprop(), RMSProp(), AdaGrad(), AdaMax(), AdaDelta(),
    AMSGrad(), NAdam(), AdamW(), RAdam(), OAdam(), AdaBelief(), Lion(),
    OptimiserChain(SignDecay(0.001), Adam(0.001)), OptimiserChain(ClipNorm(), Adam(0.001)),
    OptimiserChain(ClipGrad(0.5), Momentum()), OptimiserChain(WeightDecay(), OAdam(), ClipGrad(1)),
    RMSProp(centred=True), AdamW(couple=False),
]  # fmt: skip


def test_element_types_preserved():
    # rules.jl "element types": one state for (Float32, Float16, bfloat16) params; each keeps its type.
    # (bfloat16 is computed in float32: bfloat16(0.999) == 1 would make Adam's bias correction 1/0.)
    m = (jnp.array([1.0, 2.0], jnp.float32), jnp.array([5.0, 6.0], jnp.float16), jnp.array([3, 4], jnp.bfloat16))

    for rule in ALL_DEFAULTS:
        u, s = jax.jit(rule.update)(m, rule.init(m), m)
        new = optax.apply_updates(m, u)
        assert tuple(a.dtype for a in new) == (jnp.float32, jnp.float16, jnp.bfloat16), rule
        assert all(bool(jnp.all(jnp.isfinite(a))) for a in new), rule
        hyper = s.hyper if hasattr(s, "hyper") else s[-1].hyper
        assert all(a.dtype == jnp.float32 for a in jax.tree.leaves(hyper)), rule


@pytest.mark.slow
def test_original_convergence():
    # rules.jl "original": loss(w) = mean((w.α .* w.β - w′.α .* w′.β)²) < 0.001 after 10⁴ steps, every
    # rule, on a NamedTuple-like pytree; run with lax.fori_loop under jit.
    rng = np.random.default_rng(3)
    wt = {"alpha": rng.random((3, 3)), "beta": rng.random((3, 3))}
    w0 = {"alpha": jnp.asarray(5 * rng.random((3, 3)), jnp.float32), "beta": jnp.asarray(rng.random((3, 3)), jnp.float32)}
    target = jnp.asarray(wt["alpha"] * wt["beta"], jnp.float32)

    def loss(w):
        return jnp.mean((w["alpha"] * w["beta"] - target) ** 2)

    assert loss(w0) > 1
    failed = []
    for rule in ALL_DEFAULTS:

        @jax.jit
        def train(w, rule=rule):
            def body(_, carry):
                w, s = carry
                u, s = rule.update(jax.grad(loss)(w), s, w)
                return optax.apply_updates(w, u), s

            return jax.lax.fori_loop(0, 10_000, body, (w, rule.init(w)))[0]

        if not loss(train(w0)) < 1e-3:
            failed.append(repr(rule))
    assert not failed


def test_keyword_constructors():
    # runtests.jl "keyword arguments"
    assert Nesterov(rho=0.8, eta=0.1) == Nesterov(0.1, 0.8)
    assert AdamW(lambda_=0.3, eta=0.1) == AdamW(0.1, (0.9, 0.999), 0.3, 1.0e-8)
    assert AdamW(lambd=0.3, eta=0.1) == AdamW(**{"lambda": 0.3, "eta": 0.1})
    assert Adam(eta=0.01, beta=(0.8, 0.9), epsilon=1e-6) == Adam(0.01, (0.8, 0.9), 1e-6)
    assert RMSProp(centered=True) == RMSProp(centred=True) != RMSProp()
    assert WeightDecay(lambd=0.1) == WeightDecay(0.1)
    assert hash(Adam(0.1)) == hash(Adam(eta=0.1))
    assert Descent(1) == Descent(1.0) and Descent(1).eta == 1.0
    with pytest.raises(ValueError, match="negative"):
        Adam(-0.1)
    with pytest.raises(TypeError):
        WeightDecay(0.1, lambd=0.2)


def test_repr():
    assert repr(Adam()) == "Adam(eta=0.001, beta=(0.9, 0.999), epsilon=1e-08)"
    assert repr(Descent()) == "Descent(eta=0.1)"
    assert repr(AdamW()) == "AdamW(eta=0.001, beta=(0.9, 0.999), lambda_=0.0, epsilon=1e-08, couple=True)"
    assert repr(RMSProp()) == "RMSProp(eta=0.001, rho=0.9, epsilon=1e-08, centred=False)"
    assert repr(ClipNorm()) == "ClipNorm(omega=10.0, p=2.0, throw=True)"
    assert repr(AccumGrad(3)) == "AccumGrad(n=3)"
    assert repr(OptimiserChain(ClipGrad(1.0), Descent(0.1))) == "OptimiserChain(ClipGrad(delta=1.0), Descent(eta=0.1))"


def test_rule_is_static_pytree_and_picklable():
    r = OptimiserChain(WeightDecay(0.1), Adam(0.01))
    assert isinstance(r, optax.GradientTransformation)
    assert jax.tree.leaves(r) == []
    assert jax.tree.map(lambda v: v, {"rule": r})["rule"] is r
    r2 = pickle.loads(pickle.dumps(r))
    assert r2 == r and repr(r2) == repr(r)
    with pytest.raises(AttributeError):
        r.opts = ()
    assert Adam(0.1).static_key() == Adam(0.2).static_key() != AdamW(0.1).static_key()


def test_deprecations():
    with pytest.warns(DeprecationWarning):
        assert R.ADAM(0.1) == Adam(0.1)
    with pytest.warns(DeprecationWarning):
        r = WeightDecay(0.1).adjust(gamma=0.2)
    assert r == WeightDecay(0.2)
    with pytest.raises(ValueError, match="centred"):
        RMSProp().adjust(centred=True)
