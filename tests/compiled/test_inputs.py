"""Class 1 of the compiled-path issue: inputs are read at every call, never from the first one.
Lists, dicts and generators of batches, to `fluxjax.jit`, `trainstep_` and `train_`, each compared
with the eager computation."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.core.region import rebind
from fluxjax.losses import mse

_first = Flux.jit(lambda m, xs: m(xs[0]))
_by_key = Flux.jit(lambda m, d: m(d["x"]) * d["scale"])


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.normal(size=(2, 4)), jnp.float32), jnp.asarray(rng.normal(size=(3, 4)), jnp.float32))
            for _ in range(n)]


def test_a_new_list_each_call_is_read():
    m = Flux.Dense(2, 3)
    for x, _ in _batches(4):
        np.testing.assert_allclose(_first(m, [x]), m(x), rtol=1e-6)


def test_the_same_list_edited_in_place_is_read():
    m = Flux.Dense(2, 3)
    xs = [jnp.ones((2, 4))]
    _first(m, xs)
    for x, _ in _batches(3, 1):
        xs[0] = x
        np.testing.assert_allclose(_first(m, xs), m(x), rtol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_dict_inputs_with_numbers_are_read(scale):
    m = Flux.Dense(2, 3)
    for x, _ in _batches(3, 2):
        np.testing.assert_allclose(_by_key(m, {"x": x, "scale": scale}), m(x) * scale, rtol=1e-6)


def _loss(m, d):  # a list batch is one argument (Flux splats tuples only)
    return mse(m(d[0]), d[1])


def _twins():
    Flux.seed_(3)
    a = Flux.Chain(Flux.Dense(2, 5, Flux.tanh), Flux.Dense(5, 3))
    return a, Flux.fmap(lambda v: v, a)


def _assert_same(a, b):
    for u, v in zip(Flux.trainables(a), Flux.trainables(b)):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_trainstep_with_list_batches_trains_on_each_batch():
    m, ref = _twins()
    o, oref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    for x, y in _batches(5, 4):
        Flux.trainstep_(_loss, m, [x, y], o)
        Flux.trainstep_(_loss, ref, [x, y], oref, jit=False)
    _assert_same(m, ref)


@pytest.mark.parametrize("kind", ["generator", "list of lists", "list of dicts"])
def test_train_over_generators_and_lists_of_lists(kind):
    m, ref = _twins()
    o, oref = Flux.setup(Flux.Descent(0.1), m), Flux.setup(Flux.Descent(0.1), ref)
    data = _batches(6, 5)
    if kind == "list of dicts":
        loss = lambda m, d: mse(m(d["x"]), d["y"])  # noqa: E731
        batches = lambda: [{"x": x, "y": y} for x, y in data]  # noqa: E731
    else:
        loss = _loss
        batches = (lambda: ([x, y] for x, y in data)) if kind == "generator" else (lambda: [[x, y] for x, y in data])
    Flux.train_(loss, m, batches(), o)
    Flux.train_(loss, ref, batches(), oref, jit=False)
    _assert_same(m, ref)


@Flux.layer
class _Holder:
    def __init__(self):
        self.s = ({"w": jnp.zeros(()), "b": jnp.zeros(())},)


@Flux.jit
def _bump_holder(h):
    d = h.s[0]
    rebind(h, "s", ({"w": d["w"] + 1, "b": d["b"] + 10},))  # a new dict in a new tuple


def test_a_field_rebound_to_a_new_container_is_read_by_the_next_call():
    h = _Holder()
    for i in range(1, 5):
        _bump_holder(h)
        assert float(h.s[0]["w"]) == i and float(h.s[0]["b"]) == 10 * i
