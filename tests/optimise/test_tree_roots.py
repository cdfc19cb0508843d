"""setup / update / update_ / freeze_ / thaw_ / adjust on models that are a tuple or a bare array
(Optimisers.jl test/runtests.jl "very basics", "OptimiserChain", "freeze/thaw"), and the copying `adjust`."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import optimise as O


def a(*v):
    return jnp.asarray(v, jnp.float32)


def test_tuple_model_update_and_update_():
    m = (a(1, 2),)
    g = (a(25, 33),)
    s = O.setup(O.Descent(0.1), m)
    s2, m2 = O.update(s, m, g)
    np.testing.assert_array_equal(m[0], [1, 2])  # not mutated
    np.testing.assert_allclose(m2[0], [-1.5, -1.3], rtol=1e-6)
    s3, m3 = O.update_(s, m, g)
    assert s3 is s and isinstance(m3, tuple)
    np.testing.assert_allclose(m3[0], [-1.5, -1.3], rtol=1e-6)


def test_bare_array_model_returns_new_array():
    x = a(1, 10, 100)
    s = O.setup(O.Momentum(0.1), x)
    assert isinstance(s, O.Leaf)
    s, x1 = O.update_(s, x, a(1, 2, 3))
    np.testing.assert_allclose(x1, [0.9, 9.8, 99.7], rtol=1e-6)
    np.testing.assert_array_equal(x, [1, 10, 100])  # a JAX array cannot change in place
    s, x2 = O.update(s, x1, a(1, 2, 3))
    np.testing.assert_allclose(x2, x1 - 0.1 * (0.9 * a(1, 2, 3) + a(1, 2, 3)), rtol=1e-6)


def test_nested_tuple_with_tie_and_namedtuple():
    from collections import namedtuple

    tw = a(1, 2)
    mt = (tw, (a(1, 2), tw))
    st = O.setup(O.Momentum(0.1), mt)
    _, mn = O.update(st, mt, (a(3, 3), (a(10, 10), a(7, 7))))
    np.testing.assert_allclose(mn[0], mn[1][0])  # the tied gradients are summed
    assert mn[1][1] is mn[0]  # and the tie is kept
    P = namedtuple("P", "w b")
    m = P(a(1, 2), a(3))
    _, m2 = O.update_(O.setup(O.Descent(1.0), m), m, P(a(1, 1), None))
    assert type(m2) is P and m2.b is m.b
    np.testing.assert_allclose(m2.w, [0, 1])


def test_tuple_holding_a_layer_updates_the_layer_in_place():
    d = Flux.Dense(2, 3)
    x = jnp.ones(2)
    m = (d, x)
    s = O.setup(O.Descent(0.1), m)
    g = Flux.gradient(lambda m: jnp.sum(m[0](m[1])), m)[0]
    w0 = d.weight
    _, m2 = O.update_(s, m, g)
    assert m2[0] is d and d.weight is not w0  # the layer is rebound in place
    assert m2[1] is not x  # the bare array is replaced in the returned tuple only


def test_update_of_tuple_inside_jit():
    m = (a(1, 2),)
    s = O.setup(O.Descent(0.1), m)
    step = Flux.jit(lambda s, m, g: O.update_(s, m, g)[1])
    m2 = step(s, m, (a(1, 1),))
    np.testing.assert_allclose(m2[0], [0.9, 1.9], rtol=1e-6)


def test_freeze_thaw_on_a_model_raise():
    m = {"x": a(1, 2), "y": (a(3, 4), jnp.sin)}
    for fn in (O.freeze_, O.thaw_):
        with pytest.raises(TypeError, match="setup"):
            fn(m)
    with pytest.raises(TypeError, match="setup"):
        O.freeze_(Flux.Dense(2, 3))
    st = O.setup(O.Descent(0.1), m)
    O.freeze_(st["y"])  # a subtree of the state is fine
    assert st["y"][0].frozen and not st["x"].frozen
    O.thaw_(st)
    assert not st["y"][0].frozen


def test_adjust_copies_and_keeps_ties():
    tw = a(1, 2)
    m = {"p": tw, "q": tw, "r": a(3)}
    st = O.setup(O.Momentum(0.1, 0.9), m)
    st2 = O.adjust(st, 0.5, rho=0.8)
    assert st2["p"] is st2["q"]  # tied arrays still share one Leaf
    assert st2["p"].rule.eta == 0.5 and st2["p"].rule.rho == 0.8
    assert st["p"].rule.eta == 0.1 and st["p"].rule.rho == 0.9  # the original is untouched
    assert O.adjust(O.Adam(), 0.01) == O.Adam(0.01)
    with pytest.raises(TypeError):
        O.adjust(m, 0.1)
    assert Flux.adjust is O.adjust
