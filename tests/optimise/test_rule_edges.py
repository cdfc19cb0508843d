"""Edges of the rules that Optimisers.jl's own tests do not reach:

- a rule used optax-style on a pytree (`rule.init(tree)`, `rule.update(grads, state, tree)`) keeps one
  state per array, as Optimisers.jl: an array with a `None` gradient keeps its moments, its RAdam step
  and its AccumGrad counter (NumPy references, run array by array);
- a state reused for an array of another shape raises `DimensionMismatch` before anything is written,
  eagerly, compiled (`update`, `fluxjax.jit`, `train_`) and optax-style, where JAX would broadcast;
- `leaf.rule = rule` is what the next step uses (Optimisers.jl's mutable `Leaf`): a rule of the same
  kind brings its hyperparameters into the state; one of another kind raises `TypeError`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import DimensionMismatch
from fluxjax.optimise import (
    AccumGrad,
    AdaGrad,
    Adam,
    AdamW,
    ClipGrad,
    Descent,
    MixedPrecision,
    Momentum,
    OptimiserChain,
    RAdam,
    RMSProp,
    Rprop,
    WeightDecay,
    adjust_,
    eagerstep,
    setup,
    update,
    update_,
)
from tests.optimise.models import DecayDescent, arrays, assert_same_arrays, mse
from tests.optimise.reference import np_rule

RNG = np.random.default_rng(7)
X = jnp.asarray(RNG.normal(size=(3, 8)), jnp.float32)
Y = jnp.asarray(RNG.normal(size=(2, 8)), jnp.float32)


def _loss(m):
    return mse(m, X, Y)


# ------------------------------------------------------------------------------------------------
# 1. one state per array, optax-style too


def np_chain(parts: list, x: np.ndarray, grads: list) -> np.ndarray:
    """Optimisers.jl's `OptimiserChain(parts...)` on one array, in float64: a `None` gradient leaves
    the array and its state alone; `("AccumGrad", {"n": n})` passes on the mean of `n` gradients
    every `n`-th step and zero in between, without calling the rules after it."""
    rules = [None if name == "AccumGrad" else np_rule(name, hp) for name, hp in parts]
    states = [{"acc": np.zeros_like(x), "counter": 1} if r is None else r[0](x) for r in rules]
    for g in grads:
        if g is None:
            continue
        d = np.asarray(g, np.float64)
        for (_, hp), r, st in zip(parts, rules, states):
            if r is None:
                n = hp["n"]
                st["acc"] = d / n if st["counter"] == 1 else st["acc"] + d / n
                if st["counter"] < n:
                    st["counter"] += 1
                    d = np.zeros_like(x)
                    break
                st["counter"], d = 1, st["acc"]
            else:
                d = r[1](st, x, d)
        x = x - d
    return x


RADAM = ("RAdam", {"eta": 0.1, "beta": (0.9, 0.7), "epsilon": 1e-8})  # rectified from its 6th step
ADAM = ("Adam", {"eta": 0.1, "beta": (0.9, 0.999), "epsilon": 1e-8})
CHAINS = {
    "RAdam": (RAdam(0.1, (0.9, 0.7)), [RADAM]),
    "Adam": (Adam(0.1), [ADAM]),
    "AccumGrad-Descent": (OptimiserChain(AccumGrad(2), Descent(1.0)), [("AccumGrad", {"n": 2}), ("Descent", {"eta": 1.0})]),
    "AccumGrad-Adam": (OptimiserChain(AccumGrad(3), Adam(0.1)), [("AccumGrad", {"n": 3}), ADAM]),
    "AccumGrad-RAdam": (OptimiserChain(AccumGrad(2), RAdam(0.1, (0.9, 0.7))), [("AccumGrad", {"n": 2}), RADAM]),
    "Clip-AccumGrad-Momentum": (
        OptimiserChain(ClipGrad(1.0), AccumGrad(2), Momentum(0.1)),
        [("ClipGrad", {"delta": 1.0}), ("AccumGrad", {"n": 2}), ("Momentum", {"eta": 0.1, "rho": 0.9})],
    ),
    "AccumGrad-AccumGrad-Descent": (
        OptimiserChain(AccumGrad(2), AccumGrad(2), Descent(0.5)),
        [("AccumGrad", {"n": 2}), ("AccumGrad", {"n": 2}), ("Descent", {"eta": 0.5})],
    ),
    "MixedPrecision-AccumGrad-Adam": (
        MixedPrecision(OptimiserChain(AccumGrad(2), Adam(0.1))), [("AccumGrad", {"n": 2}), ADAM]
    ),
}

# A nested tree; each array misses its gradient on other steps (a, never; b and d, on some).
SHAPES = {"a": (2,), "b": [(2, 3), {"d": (3,)}]}
MISSING = {"a": (), "b": [(1, 2, 6), {"d": (0, 4, 5)}]}
STEPS = 12


def _tree(f):
    return {"a": f("a", SHAPES["a"]), "b": [f("b", SHAPES["b"][0]), {"d": f("d", SHAPES["b"][1]["d"])}]}


def _missing(name):
    return {"a": MISSING["a"], "b": MISSING["b"][0], "d": MISSING["b"][1]["d"]}[name]


X0 = _tree(lambda n, s: RNG.normal(size=s))
GRADS = [_tree(lambda n, s, t=t: None if t in _missing(n) else RNG.normal(size=s)) for t in range(STEPS)]


def _flat(tree):
    return {"a": tree["a"], "b": tree["b"][0], "d": tree["b"][1]["d"]}


def _want(parts):
    return {k: np_chain(parts, _flat(X0)[k], [_flat(g)[k] for g in GRADS]) for k in ("a", "b", "d")}


def _f32(tree):
    return jax.tree.map(lambda v: None if v is None else jnp.asarray(v, jnp.float32), tree, is_leaf=lambda v: v is None)


def _optax_run(rule, jit):
    x = _f32(X0)
    state = rule.init(x)
    step = jax.jit(rule.update) if jit else rule.update
    for g in GRADS:
        u, state = step(_f32(g), state, x)
        x = jax.tree.map(lambda a, b: a if b is None else a + b, x, u, is_leaf=lambda v: v is None)
    return x


def _close(got, want):
    for k in want:
        np.testing.assert_allclose(np.asarray(_flat(got)[k]), want[k], rtol=2e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", list(CHAINS))
def test_optax_style_update_keeps_one_state_per_array(name, jit):
    rule, parts = CHAINS[name]
    _close(_optax_run(rule, jit), _want(parts))


@pytest.mark.parametrize("name", list(CHAINS))
def test_setup_and_update_agree_with_the_reference(name):
    rule, parts = CHAINS[name]
    m = _f32(X0)
    st = setup(rule, m)
    for g in GRADS:
        st, m = update_(st, m, _f32(g))
    _close(m, _want(parts))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_a_custom_rule_after_accumgrad_keeps_one_state_per_array(jit):
    """`DecayDescent` counts its own steps (`eta/√t`), which an AccumGrad before it delays, array by
    array: the optax-style run equals setup/update_, whose leaves are one array each."""
    rule = OptimiserChain(AccumGrad(2), DecayDescent(0.5))
    m = _f32(X0)
    st = setup(rule, m)
    for g in GRADS:
        st, m = update_(st, m, _f32(g))
    got = _optax_run(rule, jit)
    assert_same_arrays(got, m, rtol=1e-6)
    assert not np.allclose(np.asarray(m["a"]), X0["a"])


def test_counters_of_a_tree_are_per_array():
    x = _f32(X0)
    s = RAdam().init(x)
    assert jax.tree.structure(s.t) == jax.tree.structure(x) and int(s.t["a"]) == 1
    s = OptimiserChain(AccumGrad(2), Adam()).init(x)
    assert jax.tree.structure(s[0].counter) == jax.tree.structure(x)
    g = {"a": jnp.ones(2), "b": [None, {"d": jnp.ones(3)}]}
    _, s = OptimiserChain(AccumGrad(2), Adam()).update(g, s, x)
    assert [int(c) for c in jax.tree.leaves(s[0].counter)] == [2, 1, 2]  # a, b (no gradient), d


def test_tied_arrays_count_one_step_when_either_place_has_a_gradient():
    """One array at two places is one array: its gradients are summed and it steps once, also when
    only one place has a gradient (setup / update_); its counters move once per step."""
    rule, parts = CHAINS["AccumGrad-RAdam"]
    w, v = jnp.asarray(X0["b"][0], jnp.float32), jnp.asarray(X0["a"], jnp.float32)
    m = {"p": w, "q": [w], "v": v}
    st = setup(rule, m)
    gs_p = [RNG.normal(size=w.shape) if t % 3 else None for t in range(STEPS)]
    gs_q = [RNG.normal(size=w.shape) if t % 4 else None for t in range(STEPS)]
    gs_v = [None if t in (2, 3) else RNG.normal(size=v.shape) for t in range(STEPS)]
    for gp, gq, gv in zip(gs_p, gs_q, gs_v):
        g = {"p": gp, "q": [gq], "v": gv}
        st, m = update_(st, m, _f32(g))
    summed = [None if a is None and b is None else (0 if a is None else a) + (0 if b is None else b)
              for a, b in zip(gs_p, gs_q)]
    np.testing.assert_allclose(np.asarray(m["p"]), np_chain(parts, X0["b"][0], summed), rtol=2e-5, atol=1e-6)
    assert m["q"][0] is m["p"]
    np.testing.assert_allclose(np.asarray(m["v"]), np_chain(parts, X0["a"], gs_v), rtol=2e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# 2. a state set up for an array of another shape


STALE = [  # (rule, the rule whose state does not fit)
    (Adam(0.1), "Adam"),
    (Momentum(0.1), "Momentum"),
    (RAdam(), "RAdam"),
    (AdaGrad(), "AdaGrad"),
    (Rprop(), "Rprop"),
    (RMSProp(centred=True), "RMSProp"),
    (OptimiserChain(WeightDecay(0.1), AdamW(0.1)), "AdamW"),
    (OptimiserChain(AccumGrad(2), Descent(0.1)), "AccumGrad"),
    (MixedPrecision(Descent(0.1)), "MixedPrecision"),
]


def _stale(rule):
    """A state set up for a 1×3 array, and a model and gradient with a 2×3 one beside a fitting one."""
    st = setup(rule, {"w": jnp.zeros((1, 3)), "v": jnp.zeros(2)})
    return st, {"w": jnp.zeros((2, 3)), "v": jnp.ones(2)}, {"w": jnp.ones((2, 3)), "v": jnp.ones(2)}


@pytest.mark.parametrize("rule, name", STALE, ids=[type(r).__name__ for r, _ in STALE])
def test_a_state_for_another_shape_raises_before_anything_is_written(rule, name):
    st, m, g = _stale(rule)
    before_m, before_states = dict(m), {k: leaf.state for k, leaf in st.items()}
    for call in (update_, update):
        with pytest.raises(DimensionMismatch) as e:
            call(st, m, g)
        msg = str(e.value)
        assert f"{name}(" in msg and "(1, 3)" in msg and "(2, 3)" in msg and "setup(rule, model)" in msg, msg
        assert all(m[k] is before_m[k] for k in m)
        assert all(st[k].state is before_states[k] for k in st)


@pytest.mark.parametrize("rule", [Adam(0.1), OptimiserChain(AccumGrad(2), Momentum(0.1))], ids=["Adam", "chain"])
def test_optax_style_update_with_a_stale_state_raises(rule):
    s = rule.init({"w": jnp.zeros((1, 3))})
    for step in (rule.update, jax.jit(rule.update)):
        with pytest.raises(DimensionMismatch, match=r"\(1, 3\).*\(2, 3\)"):
            step({"w": jnp.ones((2, 3))}, s, {"w": jnp.zeros((2, 3))})


def test_a_stale_state_raises_in_compiled_steps_and_leaves_the_model_alone():
    m1 = Flux.Chain(Flux.Dense(3, 4), Flux.Dense(4, 2))
    st = setup(Adam(0.01), m1)
    m2 = Flux.Chain(Flux.Dense(3, 5), Flux.Dense(5, 2))  # only the last bias fits
    before, states = arrays(m2), [leaf.state for leaf in jax.tree.leaves(st, is_leaf=lambda v: isinstance(v, Flux.optimise.Leaf))]

    @Flux.jit
    def step(m, st, x, y):
        _, (g, _, _) = Flux.withgradient(mse, m, x, y)
        update_(st, m, g)

    with pytest.raises(DimensionMismatch, match="setup"):
        step(m2, st, X, Y)
    with pytest.raises(DimensionMismatch, match="setup"):
        Flux.train_(mse, m2, [(X, Y)], st)
    with pytest.raises(DimensionMismatch, match="setup"):
        Flux.trainstep_(mse, m2, (X, Y), st)
    assert all(np.array_equal(a, b) for a, b in zip(arrays(m2), before, strict=True))
    now = [leaf.state for leaf in jax.tree.leaves(st, is_leaf=lambda v: isinstance(v, Flux.optimise.Leaf))]
    assert all(a is b for a, b in zip(now, states, strict=True))


def test_a_stale_state_raises_in_the_eager_loop():
    eagerstep.clear()
    st = setup(Momentum(0.1), Flux.Dense(3, 2))
    m = Flux.Dense(3, 4)
    w = m.weight
    for _ in range(3):  # linked by the first update_; the fused step cannot be made either
        _, (g,) = Flux.withgradient(lambda m: mse(m, X, jnp.zeros((4, 8))), m)
        with pytest.raises(DimensionMismatch, match="velocity"):
            update_(st, m, g)
    assert m.weight is w
    eagerstep.clear()


class _Velocity(Flux.optimise.AbstractRule):
    """A custom rule with a state of the array's shape: nothing of fluxjax's checks it, but a step
    that would grow the array raises (Optimisers.jl's `subtract!`)."""

    def __init__(self, eta=0.1):
        self.eta = eta

    def init(self, x):
        return jnp.zeros_like(x)

    def apply_(self, state, x, dx):
        v = 0.9 * state + self.eta * dx
        return v, v


def test_a_custom_rule_whose_step_would_grow_the_array_raises():
    st = setup(_Velocity(), {"w": jnp.zeros((2, 3))})
    m = {"w": jnp.zeros((1, 3))}
    with pytest.raises(DimensionMismatch, match=r"_Velocity.*\(2, 3\).*\(1, 3\)"):
        update_(st, m, {"w": jnp.ones((1, 3))})
    assert m["w"].shape == (1, 3)


def test_fitting_steps_compile_once():
    """The shape checks run while the step is traced: steps that fit reuse the program."""
    from fluxjax.compiled import pure

    m = Flux.Chain(Flux.Dense(3, 4), Flux.Dense(4, 2))
    st = setup(OptimiserChain(AccumGrad(2), RAdam()), m)
    (g,) = Flux.gradient(_loss, m)
    update_(st, m, g)
    n = pure.stats["compiles"]
    for _ in range(3):
        (g,) = Flux.gradient(_loss, m)
        update_(st, m, g)
    assert pure.stats["compiles"] == n


# ------------------------------------------------------------------------------------------------
# 3. leaf.rule = ...


def _np_switch(name, hp, new_hp, x, grads, at):
    """Optimisers.jl: `leaf.rule = Rule(new_hp...)` before step `at` (the state goes on)."""
    hp = dict(hp)
    init, step = np_rule(name, hp)
    st = init(x)
    for t, g in enumerate(grads):
        if t == at:
            hp.update(new_hp)
        x = x - step(st, x, g)
    return x


SWITCHES = [
    ("Adam", Adam(0.1), Adam(0.0), {"eta": 0.1, "beta": (0.9, 0.999), "epsilon": 1e-8}, {"eta": 0.0}),
    ("Adam", Adam(0.1), Adam(0.02, (0.8, 0.99)), {"eta": 0.1, "beta": (0.9, 0.999), "epsilon": 1e-8},
     {"eta": 0.02, "beta": (0.8, 0.99)}),
    ("Momentum", Momentum(0.1), Momentum(0.3, 0.5), {"eta": 0.1, "rho": 0.9}, {"eta": 0.3, "rho": 0.5}),
    ("RAdam", RAdam(0.1, (0.9, 0.7)), RAdam(0.05, (0.9, 0.7)), RADAM[1], {"eta": 0.05}),
]
G5 = [RNG.normal(size=4) for _ in range(5)]


@pytest.mark.parametrize("name, old, new, hp, new_hp", SWITCHES, ids=lambda v: repr(v) if isinstance(v, dict) else None)
def test_assigning_leaf_rule_is_what_the_next_step_uses(name, old, new, hp, new_hp):
    x0 = RNG.normal(size=4)
    m = {"w": jnp.asarray(x0, jnp.float32)}
    st = setup(old, m)
    for t, g in enumerate(G5):
        if t == 2:
            st["w"].rule = new
            assert st["w"].rule == new
        st, m = update_(st, m, {"w": jnp.asarray(g, jnp.float32)})
    np.testing.assert_allclose(np.asarray(m["w"]), _np_switch(name, hp, new_hp, x0, G5, 2), rtol=2e-5, atol=1e-6)


def test_assigning_a_chain_sets_each_rules_own_hyperparameters():
    """`OptimiserChain(WeightDecay(λ), AdamW(η, λ=λ'))`: two `lambda_`s, each to its own rule."""
    adamw = {"eta": 0.1, "beta": (0.9, 0.999), "epsilon": 1e-8, "lambda_": 0.2}
    parts = [("WeightDecay", {"lambda_": 0.1}), ("AdamW", adamw)]
    news = [{"lambda_": 0.3}, {"eta": 0.05, "lambda_": 0.01}]
    x0 = RNG.normal(size=4)
    refs = [np_rule(n, hp) for n, hp in parts]  # read their `hp` at every step
    states, x = [r[0](x0) for r in refs], x0
    m = {"w": jnp.asarray(x0, jnp.float32)}
    st = setup(OptimiserChain(WeightDecay(0.1), AdamW(0.1, lambda_=0.2)), m)
    for t, g in enumerate(G5):
        if t == 2:
            st["w"].rule = OptimiserChain(WeightDecay(0.3), AdamW(0.05, lambda_=0.01))
            for (_, hp), new in zip(parts, news):
                hp.update(new)
        d = g
        for r, s in zip(refs, states):
            d = r[1](s, x, d)
        x = x - d
        st, m = update_(st, m, {"w": jnp.asarray(g, jnp.float32)})
    np.testing.assert_allclose(np.asarray(m["w"]), x, rtol=2e-5, atol=1e-6)
    hyper = [s.hyper for s in st["w"].state]
    assert float(hyper[0]["lambda_"]) == pytest.approx(0.3) and float(hyper[1]["lambda_"]) == pytest.approx(0.01)


@pytest.mark.parametrize(
    "old, new",
    [
        (Adam(0.1), Momentum(0.1)),
        (RMSProp(), RMSProp(centred=True)),
        (OptimiserChain(WeightDecay(), Adam()), OptimiserChain(Adam())),
        (OptimiserChain(AccumGrad(2), Adam()), OptimiserChain(AccumGrad(2), RAdam())),
        (MixedPrecision(Adam()), MixedPrecision(jnp.float64, Adam())),
    ],
    ids=["Adam-Momentum", "centred", "chain-length", "chain-inner", "MixedPrecision-T"],
)
def test_assigning_a_rule_of_another_kind_raises(old, new):
    st = setup(old, {"w": jnp.ones(2)})
    leaf = st["w"]
    state = leaf.state
    with pytest.raises(TypeError, match=r"set up for .* setup\("):
        leaf.rule = new
    assert leaf.rule is old and leaf.state is state


def test_assigning_an_equal_rule_changes_nothing():
    st = setup(Adam(0.1), {"w": jnp.ones(2)})
    state = st["w"].state
    st["w"].rule = Adam(0.1)
    assert st["w"].state is state


def _model():
    Flux.seed_(3)
    return Flux.Chain(Flux.Dense(3, 4, Flux.tanh), Flux.Dense(4, 2))


NEW = Adam(0.003, (0.8, 0.99))


def _switch(st):
    for leaf in jax.tree.leaves(st, is_leaf=lambda v: isinstance(v, Flux.optimise.Leaf)):
        leaf.rule = NEW


def _switched_loop(run_step):
    """Six steps of Adam(0.01) on a fresh model; in the 4th, between the gradient and the update where
    a step has one, every leaf's rule is set to `NEW`. `run_step(m, st, switch)` calls `switch()`."""
    m = _model()
    st = setup(Adam(0.01), m)
    for t in range(6):
        run_step(m, st, (lambda: _switch(st)) if t == 3 else (lambda: None))
    return m, st


def _eager_step(m, st, switch=lambda: None):
    (g,) = Flux.gradient(_loss, m)
    switch()
    update_(st, m, g)


def test_assigned_rule_in_update_train_jit_and_the_fused_loop():
    with Flux.eager():
        want, want_st = _switched_loop(_eager_step)
    plain = _switched_loop(lambda m, st, switch: switch())[0]
    assert not np.allclose(arrays(want)[0], arrays(plain)[0])  # it did train
    hyper = want_st.layers[0].weight.state.hyper
    assert float(hyper["eta"]) == pytest.approx(0.003) and float(hyper["beta"][0]) == pytest.approx(0.8)
    with Flux.eager():
        unswitched = _switched_loop(lambda m, st, switch: _eager_step(m, st))[0]
    assert not np.allclose(arrays(want)[0], arrays(unswitched)[0], rtol=1e-4)  # the new rule stepped

    @Flux.jit
    def jitted(m, st):
        _eager_step(m, st)

    def fused(m, st, switch):
        _, (g,) = Flux.withgradient(_loss, m)
        switch()  # the step held back was computed with the old rule: update_ must not commit it
        update_(st, m, g)

    def before(step):
        def run(m, st, switch):
            switch()
            step(m, st)
        return run

    eagerstep.clear()
    counts = dict(eagerstep.stats)
    steps = {
        "eager update_": _eager_step,
        "train_": before(lambda m, st: Flux.train_(mse, m, [(X, Y)], st)),
        "Flux.jit": before(jitted),
        "fused eager loop": fused,
    }
    for name, step in steps.items():
        got, got_st = _switched_loop(step)
        assert_same_arrays(got, want, rtol=2e-5)
        assert_same_arrays(got_st, want_st, rtol=2e-5)
        assert got_st.layers[0].weight.rule == NEW, name
    counts = {k: eagerstep.stats[k] - counts[k] for k in counts}
    assert counts["committed"] >= 4 and counts["missed"] >= 1, counts  # fused, and the stale step dropped
    eagerstep.clear()


def test_adjust_and_assigning_agree():
    m1, m2 = _model(), _model()
    st1, st2 = setup(OptimiserChain(AccumGrad(2), Adam(0.01)), m1), setup(OptimiserChain(AccumGrad(2), Adam(0.01)), m2)
    for t in range(5):
        if t == 2:
            adjust_(st1, 0.002, n=3)
            for leaf in jax.tree.leaves(st2, is_leaf=lambda v: isinstance(v, Flux.optimise.Leaf)):
                leaf.rule = OptimiserChain(AccumGrad(3), Adam(0.002))
        for m, st in ((m1, st1), (m2, st2)):
            _eager_step(m, st)
    assert_same_arrays(m1, m2, rtol=1e-6)
    assert_same_arrays(st1, st2, rtol=1e-6)
    assert st1.layers[0].weight.rule == OptimiserChain(AccumGrad(3), Adam(0.002))
