"""`update_`/`update` with gradients given as dicts or namedtuples, and trees that do not fit.

Optimisers.jl takes NamedTuple gradients for any struct (`(weight=..., bias=nothing)`); a gradient or a
state whose structure differs from the model is an error there too. Here it is `StructureMismatch`,
naming the first path where they differ, raised before anything is rebound.
"""

from collections import namedtuple

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.errors import DimensionMismatch, StructureMismatch
from fluxjax.optimise import Descent, Momentum, setup, update, update_


def _dense():
    w = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    return Flux.Dense(w, jnp.array([0.5, -0.5]))


def test_namedtuple_gradient_for_a_layer():
    """Optimisers.jl test/runtests.jl, "trainable subset": `gf = (x = nothing, y = (a = nothing, b = [1,1],
    c = 1))`, `update(sf, mf, gf)` moves `b` by -0.1 and leaves the rest; here on a Dense with
    `(weight=..., bias=None)`."""
    m = _dense()
    w0, b0 = np.asarray(m.weight), np.asarray(m.bias)
    G = namedtuple("G", ["weight", "bias"])
    gw = jnp.array([[1.0, 0.0, -1.0], [2.0, 2.0, 2.0]])
    st = setup(Descent(0.1), m)
    update_(st, m, G(weight=gw, bias=None))
    np.testing.assert_allclose(m.weight, w0 - 0.1 * np.asarray(gw), rtol=1e-6)
    np.testing.assert_array_equal(m.bias, b0)


def test_dict_gradient_matches_structural_gradient():
    x = jnp.array([[1.0], [-1.0], [2.0]])
    m1, m2 = _dense(), _dense()
    (g,) = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m1)
    s1, s2 = setup(Momentum(0.1, 0.9), m1), setup(Momentum(0.1, 0.9), m2)
    for _ in range(2):
        update_(s1, m1, g)
        update_(s2, m2, {"weight": g.weight, "bias": g.bias})
    np.testing.assert_allclose(m2.weight, m1.weight, rtol=1e-6)
    np.testing.assert_allclose(m2.bias, m1.bias, rtol=1e-6)
    # the reference: Momentum v = rho*v + eta*g, x -= v, twice with the same g
    v = 0.1 * np.asarray(g.weight)
    v = 0.9 * v + 0.1 * np.asarray(g.weight)
    np.testing.assert_allclose(m1.weight, np.asarray(_dense().weight) - 0.1 * np.asarray(g.weight) - v, rtol=1e-5)


def test_nested_dict_gradient_for_a_chain_and_pure_update():
    m = Flux.Chain(_dense(), Flux.Dense(2, 1))
    st = setup(Descent(1.0), m)
    gw = jnp.ones((2, 3))
    st2, m2 = update(st, m, {"layers": [{"weight": gw}, None]})
    np.testing.assert_allclose(m2[0].weight, np.asarray(m[0].weight) - 1.0, rtol=1e-6)
    np.testing.assert_array_equal(m2[1].weight, m[1].weight)


def _unchanged(m, w0, b0):
    np.testing.assert_array_equal(m.weight, w0)
    np.testing.assert_array_equal(m.bias, b0)


@pytest.mark.parametrize(
    "grad, match",
    [
        ({"weigth": jnp.ones((2, 3))}, r"at the top has field 'weigth'.*Dense"),
        (namedtuple("G", ["w"])(jnp.ones((2, 3))), r"field 'w'"),
        ((jnp.ones((2, 3)), None), r"gradient at the top is a tuple.*Dense"),
        ({"weight": {"a": 1}}, r"gradient at \.weight is a dict.*array of shape \(2, 3\)"),
    ],
)
def test_gradient_that_does_not_fit_raises_naming_the_path(grad, match):
    m = _dense()
    w0, b0 = np.asarray(m.weight), np.asarray(m.bias)
    st = setup(Descent(0.1), m)
    with pytest.raises(StructureMismatch, match=match):
        update_(st, m, grad)
    _unchanged(m, w0, b0)


def test_gradient_of_wrong_shape_is_dimension_mismatch():
    m = _dense()
    st = setup(Descent(0.1), m)
    with pytest.raises(DimensionMismatch, match=r"at \.bias has shape \(3,\), the parameter there has shape \(2,\)"):
        update_(st, m, {"weight": jnp.ones((2, 3)), "bias": jnp.ones(3)})
    np.testing.assert_array_equal(m.weight, _dense().weight)  # the weight's step did not happen either


def test_state_for_another_model_raises_before_anything_changes():
    m = Flux.Chain(_dense(), Flux.Dense(2, 1))
    other = Flux.Chain(_dense(), Flux.Dense(2, 1), Flux.Dense(1, 1))
    st = setup(Descent(0.1), other)
    (g,) = Flux.gradient(lambda m: jnp.sum(m(jnp.ones((3, 1)))), m)
    before = [np.asarray(a) for a in Flux.params(m)]
    with pytest.raises(StructureMismatch, match=r"length 3 at \.layers, the model has a tuple of length 2"):
        update_(st, m, g)
    st_d = setup(Descent(0.1), Flux.Chain(Flux.Dense(3, 2), Flux.Dense(2, 1, bias=False), Flux.Dense(1, 1)))
    with pytest.raises(StructureMismatch):
        update_(st_d, m, g)
    st_c = setup(Descent(0.1), Flux.Chain(_dense(), Flux.LayerNorm(2)))
    with pytest.raises(StructureMismatch, match=r"expects a LayerNorm at \.layers\[1\], the model has a Dense"):
        update_(st_c, m, g)
    for a, b in zip(before, Flux.params(m)):
        np.testing.assert_array_equal(a, b)


def test_swapped_arguments_raise():
    m = _dense()
    st = setup(Descent(0.1), m)
    (g,) = Flux.gradient(lambda m: jnp.sum(m(jnp.ones((3, 1)))), m)
    with pytest.raises(StructureMismatch, match=r"opt_state is a Dense.*update_\(opt_state, model, grads\)"):
        update_(m, st, g)
    with pytest.raises(StructureMismatch, match=r"expects a Dense at the top, the model has a gradient of a Dense"):
        update_(st, g, m)
    with pytest.raises(StructureMismatch, match="opt_state is a Dense"):
        update(m, st, g)
    _unchanged(m, np.asarray(_dense().weight), np.asarray(_dense().bias))
