"""`AbstractRule`, `init`, `apply_`: rules written as Optimisers.jl writes them (the docs' example rule
is compat/cases_optimisers.py `case_custom_rule`)."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax import optimise as Optimisers
from tests.optimise.models import DecayDescent


def _decayed(eta, steps):
    return 1.0 - eta * sum(1 / np.sqrt(t) for t in range(1, steps + 1))


def test_compiled_steps_match_the_formula_and_adjust_recompiles():
    m = Flux.Dense(np.ones((1, 2), np.float32), np.ones(1, np.float32))
    opt_state = Flux.setup(DecayDescent(0.1), m)
    assert isinstance(opt_state.bias.state, jax.Array)  # the Python 1, as an array
    loss = lambda m, x: jnp.sum(m(x))  # d/db = 1
    x = jnp.zeros((2, 1))
    for _ in range(3):
        Flux.trainstep_(loss, m, x, opt_state)
    np.testing.assert_allclose(m.bias, [_decayed(0.1, 3)], rtol=1e-6)
    assert int(opt_state.bias.state) == 4
    Flux.adjust_(opt_state, 1.0)
    assert opt_state.bias.rule == DecayDescent(1.0)
    Flux.trainstep_(loss, m, x, opt_state)
    np.testing.assert_allclose(m.bias, [_decayed(0.1, 3) - 1.0 / 2], rtol=1e-6)


def test_in_a_chain_and_as_an_optax_transformation():
    x, g = jnp.ones(3), jnp.full(3, 2.0)
    chain = Flux.OptimiserChain(Flux.ClipGrad(0.5), DecayDescent(1.0))
    u, _ = chain.update(g, chain.init(x), x)
    np.testing.assert_allclose(u, -0.5 * np.ones(3))  # clipped to 0.5, then 1/√1 of it, subtracted
    tx = optax.chain(optax.scale(0.5), DecayDescent(1.0))
    s = tx.init({"w": x})
    for t in range(1, 3):
        u, s = tx.update({"w": g}, s)
        np.testing.assert_allclose(u["w"], -1.0 / np.sqrt(t) * np.ones(3), rtol=1e-6)


def test_init_and_apply_on_any_rule():
    x, g = jnp.asarray([1.0, -2.0]), jnp.asarray([0.5, -4.0])
    state, delta = Optimisers.apply_(Flux.Adam(0.1), Optimisers.init(Flux.Adam(0.1), x), x, g)
    np.testing.assert_allclose(delta, 0.1 * np.sign(g), rtol=1e-6)  # Adam's first step: η·g/(|g|+ϵ)
    np.testing.assert_allclose(state.mt, 0.1 * g, rtol=1e-6)
    state, delta = Optimisers.apply_(optax.sgd(0.1), optax.sgd(0.1).init(x), x, g)
    np.testing.assert_allclose(delta, 0.1 * g, rtol=1e-6)
    state, delta = Optimisers.apply_(DecayDescent(0.2), Optimisers.init(DecayDescent(0.2), x), x, g)
    np.testing.assert_allclose(delta, 0.2 * g)
    assert int(state) == 2


def test_fields_equality_printing_pickling():
    r = DecayDescent(0.1)
    assert r == DecayDescent(0.1) and r != DecayDescent(0.2) and hash(r) == hash(DecayDescent(0.1))
    assert repr(r) == "DecayDescent(eta=0.1)" and r.hyperparameters == {"eta": 0.1}
    assert pickle.loads(pickle.dumps(r)) == r
    assert Optimisers.adjust(r, 0.3) == DecayDescent(0.3) and r.eta == 0.1
    assert Optimisers.adjust(r, rho=0.3) == r  # a name the rule does not have is ignored, as Optimisers.jl

    class Scaled(Optimisers.AbstractRule):
        def __init__(self, w):
            self.w = w

        def apply_(self, state, x, dx):
            return state, self.w * dx

    a = Scaled(jnp.ones(2))  # an array field: the rule equals only itself
    assert a == a and a != Scaled(jnp.ones(2))
    s = Flux.setup(a, {"x": jnp.ones(2)})
    assert s["x"].state is None


def test_errors():
    class NoApply(Optimisers.AbstractRule):
        pass

    with pytest.raises(NotImplementedError, match=r"NoApply must define apply_\(self, state, x, dx\)"):
        Optimisers.update(Flux.setup(NoApply(), jnp.ones(2)), jnp.ones(2), jnp.ones(2))
    with pytest.raises(ValueError, match="adjust must be given something to act on"):
        DecayDescent().adjust()
