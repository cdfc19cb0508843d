"""Each hyperparameter is checked against its field's kind (Optimisers.jl's `@def`, `_def_check_type`),
when a rule is made and in every form of `adjust_`/`adjust`, before anything is stored: a number, a pair of
numbers, a flag; a string is never read as a number. A refused `adjust_` leaves the state as it was."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.optimise import (
    AbstractRule,
    AccumGrad,
    AdaBelief,
    Adam,
    AdamW,
    ClipGrad,
    ClipNorm,
    Descent,
    Lion,
    MixedPrecision,
    Momentum,
    NAdam,
    Nesterov,
    OptimiserChain,
    RMSProp,
    Rprop,
    SignDecay,
    WeightDecay,
    adjust,
    adjust_,
    setup,
    update_,
)

NUM = r"must be a real number \(a float or an int\)"
RATE = NUM + r" or a schedule \(a function of the step count\)"
STR = r"a string is not read as a number: pass the number itself"

REFUSED = [
    # the bug hunt's cases
    (lambda: Adam(0.001, 0.9), r"^Adam: beta must be a pair of numbers, got 0\.9 \(a float\); pass both: beta=\(a, b\)$"),
    (lambda: Descent((0.1, 0.5)), rf"^Descent: eta {RATE}, got \(0\.1, 0\.5\) \(a tuple\); it takes one number, not a tuple$"),
    (lambda: Momentum(0.1, (0.9, 0.5)), rf"^Momentum: rho {NUM}, got \(0\.9, 0\.5\) \(a tuple\)"),
    (lambda: ClipGrad((0.1, 0.2)), rf"^ClipGrad: delta {NUM}, got \(0\.1, 0\.2\) \(a tuple\)"),
    (lambda: Adam("0.1"), rf"^Adam: eta {RATE}, got '0\.1' \(a str\); {STR}$"),
    (lambda: ClipNorm("2"), rf"^ClipNorm: omega {NUM}, got '2' \(a str\); {STR}$"),
    (lambda: Momentum(0.1, (0.9,)), rf"^Momentum: rho {NUM}, got \(0\.9,\) \(a tuple\); it takes one number, not a tuple$"),
    # beyond them: every kind of field, several rules
    (lambda: Adam(beta=(0.9, "0.999")), rf"^Adam: beta\[1\] {NUM}, got '0\.999' \(a str\)"),
    (lambda: NAdam(beta=(0.9, 0.99, 0.9)), r"^NAdam: beta must be a pair of numbers, got \(0\.9, 0\.99, 0\.9\) \(a tuple\)"),
    (lambda: Lion(beta=[0.9]), r"^Lion: beta must be a pair of numbers, got \[0\.9\] \(a list\)"),
    (lambda: AdaBelief(epsilon=(1e-8, 1e-8)), rf"^AdaBelief: epsilon {NUM}"),
    (lambda: Rprop(ell=0.5), r"^Rprop: ell must be a pair of numbers, got 0\.5 \(a float\)"),
    (lambda: Rprop(gamma=(1e-6, "50")), rf"^Rprop: gamma\[1\] {NUM}, got '50' \(a str\)"),
    (lambda: AdamW(lambda_="0.1"), rf"^AdamW: lambda_ {NUM}, got '0\.1' \(a str\)"),
    (lambda: AdamW(couple="no"), r"^AdamW: couple must be True or False, got 'no' \(a str\)$"),
    (lambda: RMSProp(centred="yes"), r"^RMSProp: centred must be True or False, got 'yes' \(a str\)$"),
    (lambda: ClipNorm(throw=None), r"^ClipNorm: throw must be True or False, got None$"),
    (lambda: ClipNorm(1.0, "2"), rf"^ClipNorm: p {NUM}, got '2' \(a str\)"),
    (lambda: WeightDecay("1e-4"), rf"^WeightDecay: lambda_ {NUM}, got '1e-4' \(a str\)"),
    (lambda: SignDecay(lambd=(1, 2)), rf"^SignDecay: lambda_ {NUM}"),
    (lambda: Nesterov(1 + 2j), rf"^Nesterov: eta {RATE}, got \(1\+2j\) \(a complex\); cannot convert complex to real"),
    (lambda: Descent(jnp.ones(2)), rf"^Descent: eta {RATE}, got an array of shape \(2,\); it takes one number, not an array$"),
    (lambda: Adam(None), rf"^Adam: eta {RATE}, got None$"),
    (lambda: AccumGrad(2.5), r"^AccumGrad: n must be a whole number \(an int\), got 2\.5 \(a float\)$"),
    (lambda: AccumGrad("2"), rf"^AccumGrad: n must be a whole number \(an int\), got '2' \(a str\); {STR}$"),
    (lambda: OptimiserChain(WeightDecay(), Adam(0.01, 0.9)), r"^Adam: beta must be a pair of numbers"),
    (lambda: MixedPrecision(Adam()).adjust(beta=0.9), r"^Adam: beta must be a pair of numbers"),
]


@pytest.mark.parametrize("make, message", REFUSED, ids=[f"case{i}" for i in range(len(REFUSED))])
def test_a_value_of_the_wrong_kind_is_refused_when_the_rule_is_made(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_numbers_of_every_python_numpy_and_jax_type_are_accepted_and_normalised():
    # what a field of each kind takes, stored as floats (tuples of floats), bools and ints as before
    assert Adam(np.float32(0.5), [np.float64(0.8), 1], jnp.asarray(0.0)) == Adam(0.5, (0.8, 1.0), 0.0)
    assert Adam(1, (0.9, 0.999)).static_key() == Adam(1.0, (0.9, 0.999)).static_key()  # one compiled program
    assert Adam(jnp.float32(0.25)).eta == 0.25 and type(Adam(jnp.float32(0.25)).eta) is float
    assert AdamW(couple=np.bool_(False)).couple is False and RMSProp(centered=True).centred is True
    assert ClipNorm(2.0, np.inf).p == np.inf and AccumGrad(np.int64(3)).n == 3 and AccumGrad(4.0).n == 4
    sched = optax.constant_schedule(0.1)
    assert Descent(sched).eta is sched  # a schedule stays a schedule
    with pytest.raises(TypeError, match="eta is not a learning rate here; it cannot be a schedule"):
        Rprop(sched)  # (Rprop's eta seeds its step sizes)
    with pytest.raises(TypeError, match=rf"^Descent: eta {RATE}, got '0\.1'"):
        Descent("0.1")  # old: parsed with float()
    with pytest.raises(ValueError, match="AccumGrad must accumulate at least one gradient"):
        AccumGrad(0)


def _model():
    Flux.seed_(3)
    return Flux.Chain(Flux.Dense(2, 3, Flux.tanh), Flux.Dense(3, 1))


X = jnp.asarray(np.random.default_rng(0).normal(size=(2, 5)), jnp.float32)


def _grad(m):
    return Flux.gradient(lambda m: jnp.sum(m(X) ** 2), m)[0]


def _leaves(st):
    return [v for v in jax.tree_util.tree_leaves(st, is_leaf=lambda v: isinstance(v, Flux.optimise.Leaf))
            if isinstance(v, Flux.optimise.Leaf)]


def _snapshot(st):
    """Every leaf's rule and the arrays of its state (including `state.hyper`), or a TreeState's."""
    if isinstance(st, Flux.optimise.TreeState):
        return [(repr(st.rule), [np.asarray(a) for a in st.leaves])]
    return [(repr(leaf.rule), [np.asarray(a) for a in jax.tree_util.tree_leaves(leaf.state)]) for leaf in _leaves(st)]


def _same(a, b, rules=True):
    assert len(a) == len(b)
    for (ra, xa), (rb, xb) in zip(a, b):
        assert ra == rb or not rules
        assert len(xa) == len(xb) and all(np.array_equal(u, v) for u, v in zip(xa, xb))


CHAIN = lambda: OptimiserChain(ClipGrad(1.0), OptimiserChain(WeightDecay(1e-3), Adam(0.01)))  # noqa: E731
ADJUSTS = [
    # (rule, which part of the state, keywords, message)
    (Adam, "all", {"beta": 0.9}, r"^Adam: beta must be a pair of numbers, got 0\.9 \(a float\)"),
    (Adam, "leaf", {"beta": 0.9}, r"^Adam: beta must be a pair of numbers"),
    (Adam, "layer", {"eta": "0.1"}, rf"^Adam: eta {RATE}, got '0\.1' \(a str\)"),
    (Adam, "all", {"beta": (0.9,)}, r"^Adam: beta must be a pair of numbers, got \(0\.9,\) \(a tuple\)"),
    (Momentum, "all", {"rho": (0.9, 0.5)}, rf"^Momentum: rho {NUM}, got \(0\.9, 0\.5\) \(a tuple\)"),
    (AdamW, "all", {"lambda_": "1e-2"}, rf"^AdamW: lambda_ {NUM}"),
    (AdamW, "leaf", {"couple": "no"}, r"^AdamW: couple must be True or False"),
    (ClipNorm, "all", {"omega": "2"}, rf"^ClipNorm: omega {NUM}, got '2' \(a str\)"),
    (CHAIN, "all", {"beta": 0.9}, r"^Adam: beta must be a pair of numbers"),
    (CHAIN, "leaf", {"delta": (1, 2)}, rf"^ClipGrad: delta {NUM}, got \(1, 2\) \(a tuple\)"),
    (CHAIN, "all", {"eta": 0.5, "lambda_": "0"}, rf"^WeightDecay: lambda_ {NUM}"),  # nothing, not eta alone
    (lambda: OptimiserChain(AccumGrad(2), Descent()), "all", {"n": 1.5}, r"^AccumGrad: n must be a whole number"),
    (lambda: OptimiserChain(optax.clip_by_global_norm(1.0), Adam()), "all", {"beta": 0.9},
     r"^Adam: beta must be a pair of numbers"),  # a whole-tree TreeState
    (lambda: optax.inject_hyperparams(optax.adam)(learning_rate=0.01), "all", {"eta": "0.1"},
     rf"^adjust_: optax.inject_hyperparams: learning_rate {NUM}, got '0\.1' \(a str\)"),
]


@pytest.mark.parametrize("form", ["adjust_", "adjust"])
@pytest.mark.parametrize("make, where, kw, message", ADJUSTS, ids=[f"case{i}" for i in range(len(ADJUSTS))])
def test_a_refused_adjust_stores_nothing_and_later_steps_work(make, where, kw, message, form):
    m = _model()
    st = setup(make(), m)
    update_(st, m, _grad(m))  # moments that must survive
    part = {"all": st, "layer": st.layers[0], "leaf": st.layers[1].weight}[where]
    if isinstance(st, Flux.optimise.TreeState) and where != "all":
        pytest.skip("a TreeState is adjusted as a whole")
    before = _snapshot(st)
    with pytest.raises(TypeError, match=message.replace("^adjust_", f"^{form}") if form == "adjust" else message):
        (adjust_ if form == "adjust_" else adjust)(part, **kw)
    _same(_snapshot(st), before)
    # the state still steps (old: after adjust_(st, beta=0.9) every update_ raised "iteration over a 0-d array")
    m2 = _model()
    st2 = setup(make(), m2)
    update_(st2, m2, _grad(m2))
    update_(st, m, _grad(m))
    update_(st2, m2, _grad(m2))
    _same(_snapshot(st), _snapshot(st2), rules=False)  # (two optax transformations print apart)
    for a, b in zip(jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(m2)):
        np.testing.assert_array_equal(a, b)


def test_adjust_of_a_rule_and_adjust_state_check_the_same_way():
    with pytest.raises(TypeError, match=r"^Adam: beta must be a pair of numbers, got 0\.9"):
        adjust(Adam(), beta=0.9)
    with pytest.raises(TypeError, match=r"^Adam: beta must be a pair of numbers, got 0\.9"):
        Adam().adjust(beta=0.9)
    x = jnp.ones(3)
    rule = OptimiserChain(ClipGrad(1.0), Adam())
    s = rule.init(x)
    with pytest.raises(TypeError, match=r"^Adam: beta must be a pair of numbers, got 0\.9"):
        rule.adjust_state(s, beta=0.9)
    with pytest.raises(TypeError, match=rf"^ClipGrad: delta {NUM}, got '1' \(a str\)"):
        rule.adjust_state(s, delta="1")
    # good values still go through, a list for a pair included
    s2 = rule.adjust_state(s, 0.01, beta=[0.8, 0.99])
    assert [float(b) for b in s2[1].hyper["beta"]] == pytest.approx([0.8, 0.99])
    assert adjust(Adam(), beta=[0.8, 0.99]) == Adam(beta=(0.8, 0.99))


class _Scaled(AbstractRule):
    def __init__(self, eta=0.1, beta=(0.9, 0.99), nesterov=False, fn=jnp.sign):
        self.eta, self.beta, self.nesterov, self.fn = eta, beta, nesterov, fn

    def apply_(self, state, x, dx):
        return state, self.eta * self.fn(dx)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"eta": "0.1"}, rf"^_Scaled: eta {NUM}, got '0\.1' \(a str\); {STR}$"),
        ({"eta": (0.1, 0.2)}, rf"^_Scaled: eta {NUM}, got \(0\.1, 0\.2\) \(a tuple\)"),
        ({"beta": 0.9}, r"^_Scaled: beta must be a pair of numbers, got 0\.9 \(a float\)"),
        ({"nesterov": "yes"}, r"^_Scaled: nesterov must be True or False, got 'yes' \(a str\)"),
    ],
)
def test_a_custom_rule_field_takes_a_value_of_the_kind_it_holds(kw, message):
    m = _model()
    st = setup(_Scaled(), m)
    before = _snapshot(st)
    with pytest.raises(TypeError, match=message):
        adjust_(st, **kw)
    _same(_snapshot(st), before)
    # a number for a number (an int too, kept as given), a pair for a pair; other fields anything
    adjust_(st, eta=1, beta=[0.5, 0.6], fn=jnp.tanh)
    assert st.layers[0].weight.rule.eta == 1 and st.layers[0].weight.rule.fn is jnp.tanh
    update_(st, m, _grad(m))


def test_the_old_two_argument_update_says_what_to_write():
    """Flux.Optimise's `update!(x, x̄)` (`x .-= x̄`, the 60-minute blitz) has no fluxjax form: it raises a
    TypeError that says what to write, not Python's "missing 1 required positional argument"."""
    x = jnp.ones(3)
    with pytest.raises(TypeError, match=r"^update_ takes \(opt_state, model, grads\).* write x = x - x̄"):
        update_(x, 0.1 * x)
    _, y = update_(setup(Descent(0.5), x), x, x)  # the form the message gives
    np.testing.assert_allclose(y, [0.5, 0.5, 0.5])
