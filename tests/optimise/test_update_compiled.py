"""An eager `update_`/`update` runs as one cached compiled program (fluxjax.compiled.pure): the same
numbers as the rules op by op (`fluxjax.eager()`), one compile for a loop of steps, the same sharing
and dict order in the states, and the eager fallback for a rule that branches on values in Python."""

import contextlib
import copy

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxjax as Flux
from fluxjax.compiled import pure
from fluxjax.optimise import (
    AbstractRule,
    Adam,
    ClipGrad,
    Momentum,
    OptimiserChain,
    WeightDecay,
    adjust_,
    freeze_,
    setup,
    update,
    update_,
)
from tests.optimise.regression import X, Y, mse
from tests.optimise.regression import mlp as _mlp


def _arrays(tree):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


def _close(a, b):
    la, lb = _arrays(a), _arrays(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


_G0 = {}


def _grads(m, k):
    """A gradient tree for `m`: the true gradient at the start, scaled by step `k` (cheap: the point
    is the update, not the differentiation)."""
    key = tuple(a.shape for a in jax.tree_util.tree_leaves(m))
    if key not in _G0:
        _G0[key] = Flux.gradient(lambda m: mse(m, X, Y), m)[0]
    return jax.tree_util.tree_map(lambda a: a * (1.0 + 0.1 * k), _G0[key])


def _update_(compiled, *args):
    """`update_(*args)` as a cached compiled program, or op by op (`fluxjax.eager()`)."""
    with contextlib.nullcontext() if compiled else Flux.eager():
        return update_(*args)


def _run(rule, steps=3, edit=None, model=None, compiled=True):
    m = _mlp() if model is None else copy.deepcopy(model)
    s = setup(rule, m)
    if edit is not None:
        edit(s, m)
    for k in range(steps):
        g = _grads(m, k)
        _update_(compiled, s, m, g)
    return s, m


RULES = {
    "adam": lambda: Adam(0.01),
    "momentum": lambda: Momentum(0.05, 0.8),
    "chain": lambda: OptimiserChain(ClipGrad(0.05), WeightDecay(0.01), Adam(0.02)),
    "optax_whole_tree": lambda: optax.chain(optax.clip_by_global_norm(0.1), optax.adam(0.02)),
}


@pytest.mark.parametrize("name", list(RULES))
def test_compiled_update_matches_eager_and_compiles_once(name):
    pure.clear()
    before = pure.stats["compiles"]
    s1, m1 = _run(RULES[name](), steps=4)
    assert pure.stats["compiles"] - before == 1  # four steps, one program
    s2, m2 = _run(RULES[name](), steps=4, compiled=False)
    assert pure.stats["compiles"] - before == 1  # fluxjax.eager() compiles nothing
    _close(m1, m2)
    _close(s1, s2)
    assert not np.allclose(np.asarray(m1[0].weight), np.asarray(_mlp()[0].weight))  # it did move


def test_frozen_none_and_adjust_match_eager():
    def edit(s, m):
        freeze_(s.layers[0].bias)

    s1, m1 = _run(Adam(0.01), edit=edit)
    s2, m2 = _run(Adam(0.01), edit=edit, compiled=False)
    _close(m1, m2)
    np.testing.assert_array_equal(np.asarray(m1[0].bias), np.asarray(_mlp()[0].bias))  # frozen stays
    for s, m, eager in ((s1, m1, False), (s2, m2, True)):
        adjust_(s, 0.1)
        g = _grads(m, 5)
        g.layers[1].weight = None  # a None gradient skips its array
        w1 = m[1].weight
        _update_(not eager, s, m, g)
        assert m[1].weight is w1
    _close(m1, m2)
    _close(s1, s2)


def test_tied_weights_and_pure_update_match_eager():
    d = Flux.Dense(3, 3, jnp.tanh)
    Flux.seed_(1)
    tied = Flux.Chain(Flux.Dense(2, 3), d, d, Flux.Dense(3, 1))
    s1, m1 = _run(Momentum(0.05), model=tied, steps=2)
    s2, m2 = _run(Momentum(0.05), model=tied, steps=2, compiled=False)
    assert m1[1] is m1[2] and m1[1].weight is m1[2].weight
    _close(m1, m2)
    # the pure form: new ones back, the inputs untouched, the numbers those of the eager step
    s = setup(Adam(0.01), tied)
    w0 = tied[1].weight
    g = Flux.gradient(lambda m: mse(m, X, Y), tied)[0]
    ns, nm = update(s, tied, g)
    with Flux.eager():
        es, em = update(s, tied, g)
    assert tied[1].weight is w0 and nm[1] is nm[2]
    _close(nm, em)
    _close(ns, es)


def test_states_keep_sharing_and_dict_order():
    s, m = _run(Adam(0.01), steps=2)
    a, b = s.layers[0].weight.state, s.layers[1].bias.state
    assert a.beta_t is b.beta_t  # one step counter for all leaves, as eagerly
    assert list(a.hyper) == ["eta", "beta", "epsilon"]


def test_implicit_update_matches_eager():
    out = []
    for compiled in (True, False):
        m = _mlp()
        ps = Flux.params(m)
        opt = Adam(0.02)
        for k in range(3):
            x = X * (1.0 + 0.1 * k)
            gs = Flux.gradient(lambda m=m, x=x: mse(m, x, Y), ps)
            _update_(compiled, opt, ps, gs)
        out.append(m)
    _close(*out)


class _Branchy(AbstractRule):
    """A custom rule that decides in Python on a value: it cannot be traced, so it runs eagerly."""

    def __init__(self, eta=0.1):
        self.eta = eta

    def init(self, x):
        return None

    def apply_(self, state, x, dx):
        if float(jnp.sum(dx)) > 0:
            return state, self.eta * dx
        return state, 2 * self.eta * dx


def test_a_rule_that_branches_on_values_falls_back_to_eager():
    pure.clear()
    before = dict(pure.stats)
    s1, m1 = _run(_Branchy(0.1), steps=3)
    assert pure.stats["eager"] - before.get("eager", 0) == 3  # tried once, then remembered
    s2, m2 = _run(_Branchy(0.1), steps=3, compiled=False)
    _close(m1, m2)


def test_shape_mismatch_raises_before_anything_changes():
    m = _mlp()
    s = setup(Adam(0.01), m)
    g = _grads(m, 0)
    g.layers[0].weight = jnp.ones((5, 5))
    w, st = m[1].weight, s.layers[1].weight.state
    with pytest.raises((TypeError, ValueError)):
        update_(s, m, g)
    assert m[1].weight is w and s.layers[1].weight.state is st


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["adam", "momentum", "chain"]), st.integers(0, 3)), min_size=1, max_size=3))
def test_random_sequences_match_eager(seq):
    """A random short sequence of steps (rule, which gradient scale), sometimes adjusting the rate,
    run compiled and eagerly: the same model."""
    m0 = _mlp()
    models = []
    for compiled in (True, False):
        m = copy.deepcopy(m0)
        states = {}
        for name, k in seq:
            s = states.setdefault(name, setup(RULES[name](), m))
            if k == 3:
                adjust_(s, 0.005)
            g = _grads(m, k)
            _update_(compiled, s, m, g)
        models.append(m)
    _close(*models)
