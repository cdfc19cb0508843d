"""Python code that sets a field of a model (or of a custom rule) while it runs: a compiled program runs
none of that code, so a program whose trace set a field is used for that call only, and the next call
runs the code again, as the eager call does. Every test compares with the same code op by op
(`fluxjax.eager()`): `fluxjax.jit`, the fused eager loop, `train_` (one step per call, held steps,
the scan of many steps), the compiled `update_`, and traces that fail (they must leave no field set)."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from tests.optimise.models import ActNorm, assert_same_arrays


@Flux.layer
class LastBatch:
    """Remembers the size of the last batch it saw (a static field that follows the data's shape)."""

    def __init__(self, n: int):
        self.weight = jnp.full((n, 1), 0.5)
        self.last = None

    def __call__(self, x):
        self.last = x.shape[-1]
        return self.weight * x


def _model(norm=ActNorm):
    """Without a bias before the normalisation, whose gradient is rounding noise that Adam scales up,
    the compiled and the op-by-op step agree closely."""
    Flux.seed_(1)
    return Flux.Chain(Flux.Dense(3, 4, bias=False), norm(4), Flux.Dense(4, 2))


def _loss(m, x, y):
    return Flux.mse(m(x), y)


def _data(n, seed=0, sizes=(8,)):
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.normal(size=(3, sizes[i % len(sizes)])) + 0.1 * i, jnp.float32),
             jnp.asarray(rng.normal(size=(2, sizes[i % len(sizes)])), jnp.float32)) for i in range(n)]


def _eager(f):
    with Flux.eager():
        return f()


_step = Flux.jit(lambda m, o, x, y: _explicit_step(m, o, x, y))


def _explicit_step(m, o, x, y):
    loss, g = Flux.withgradient(_loss, m, x, y)
    Flux.update_(o, m, g[0])
    return loss


def _loop(kind, data, norm=ActNorm):
    """Train a fresh model on `data`; returns `(losses, model)`."""
    m = _model(norm)
    o = Flux.setup(Flux.Adam(0.01), m)
    if kind == "train_":
        return Flux.train_(_loss, m, data, o).losses, m
    if kind == "train_ generator":
        return Flux.train_(_loss, m, (d for d in data), o).losses, m
    step = _step if kind == "jit" else _explicit_step
    return [float(step(m, o, x, y)) for x, y in data], m


@pytest.mark.parametrize(("kind", "n"), [("jit", 5), ("fused", 5), ("train_", 5), ("train_ generator", 5),
                                         ("train_", 70)])  # 70 batches: two scans of 32 steps, 6 held steps
def test_data_dependent_initialisation_happens_once_per_model(kind, n):
    data = _data(n)
    want, ref = _eager(lambda: _loop("fused", data))
    for _ in range(2):  # the second model finds the first one's programs
        got, m = _loop(kind, data)
        assert m[1].initialized
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)
        assert_same_arrays(m, ref, rtol=2e-4)


@pytest.mark.parametrize("kind", ["jit", "fused", "train_", "train_ generator"])
def test_a_field_that_follows_the_batch_shape(kind):
    data = _data(5, seed=1, sizes=(8, 8, 5))
    want, ref = _eager(lambda: _loop("fused", data, LastBatch))
    got, m = _loop(kind, data, LastBatch)
    assert m[1].last == ref[1].last == 8
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert_same_arrays(m, ref)


def test_forward_calls_see_a_field_set_by_the_first():
    f = Flux.jit(lambda m, x: m(x))
    a, b = _model(), _model()
    for x, _ in _data(4, seed=2):
        np.testing.assert_allclose(f(a, x), _eager(lambda x=x: b(x)), rtol=1e-5, atol=1e-6)
    assert a[1].initialized and b[1].initialized
    assert_same_arrays(a, b)


P = 0.5


def _dropout_at_p(m, x):
    m[1].p = P  # a hyperparameter set inside the function from a global
    return m(x)


def test_a_hyperparameter_set_inside_the_function():
    global P
    f = Flux.jit(_dropout_at_p)

    def model():
        Flux.seed_(3)
        return Flux.trainmode_(Flux.Chain(Flux.Dense(3, 6), Flux.Dropout(0.5)))

    a, b = model(), model()
    x = jnp.ones((3, 16))
    try:
        for p in [0.5, 0.9, 0.9, 0.0, 0.2]:
            P = p
            got, want = f(a, x), _eager(lambda: _dropout_at_p(b, x))
            np.testing.assert_allclose(got, want, rtol=1e-6)
            assert a[1].p == p
    finally:
        P = 0.5


@Flux.layer
class Seen:
    """Keeps the batch size of every call in a list of the model."""

    def __init__(self):
        self.weight = jnp.ones((2, 1))
        self.sizes = []

    def __call__(self, x):
        self.sizes.append(x.shape[1])
        return self.weight * x


def test_a_list_of_the_model_appended_to_at_every_call():
    f = Flux.jit(lambda m, x: m(x))
    a, b = Seen(), Seen()
    for n in [3, 3, 4, 3]:
        x = jnp.ones((2, n))
        np.testing.assert_allclose(f(a, x), _eager(lambda x=x: b(x)))
    assert a.sizes == b.sizes == [3, 3, 4, 3]


class Counting(Flux.optimise.AbstractRule):
    """Descent whose step shrinks with a count the rule keeps on itself (`self.t += 1` per array)."""

    def __init__(self, eta=0.1):
        self.eta = eta
        self.t = 0

    def init(self, x):
        return None

    def apply_(self, state, x, dx):
        self.t += 1
        return state, self.eta / self.t * dx


def _rule_loop(kind, data):
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(3, 4, Flux.tanh), Flux.Dense(4, 2))
    rule = Counting()
    o = Flux.setup(rule, m)
    if kind == "train_":
        Flux.train_(_loss, m, data, o)
    elif kind == "update_ alone":
        for x, y in data:
            g = Flux.gradient(_loss, m, x, y)[0]
            Flux.update_(o, m, g)
    else:
        step = _step if kind == "jit" else _explicit_step
        for x, y in data:
            step(m, o, x, y)
    return rule.t, m


@pytest.mark.parametrize("kind", ["jit", "fused", "train_", "update_ alone"])
def test_a_rule_that_counts_on_itself(kind):
    data = _data(5, seed=4)
    t, ref = _eager(lambda: _rule_loop("fused", data))
    assert t == 4 * 5  # four arrays, five steps
    got_t, m = _rule_loop(kind, data)
    assert got_t == t
    assert_same_arrays(m, ref)


@Flux.layer
class Fragile:
    """Counts its calls, then branches in Python on the value of its input: that cannot be compiled."""

    def __init__(self):
        self.weight = jnp.ones((2, 1))
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        if float(jnp.sum(x)) > 0:
            return self.weight * x
        return -self.weight * x


def test_a_trace_that_fails_leaves_no_field_set():
    m = Fragile()
    f = Flux.jit(lambda m, x: m(x))
    with pytest.raises(jax.errors.ConcretizationTypeError):
        f(m, jnp.ones((2, 3)))
    assert m.calls == 0


@pytest.mark.parametrize("eager", [False, True])
def test_a_gradient_that_falls_back_to_op_by_op_sets_the_field_once(eager):
    m = Fragile()
    ctx = Flux.eager() if eager else contextlib.nullcontext()
    with ctx:
        for n in range(1, 4):
            (g,) = Flux.gradient(lambda m: jnp.sum(m(jnp.ones((2, 3)))), m)
            assert m.calls == n
            np.testing.assert_allclose(g.weight, [[3.0], [3.0]])


@Flux.layer
class ArrayCount:
    """Counts its calls in an array field: a write the program returns, so one program serves all."""

    def __init__(self):
        self.weight = jnp.ones((2, 1))
        self.count = jnp.zeros((), jnp.int32)

    def __call__(self, x):
        self.count = self.count + 1
        return self.weight * x


def test_a_count_kept_in_an_array_field_compiles_once():
    f = Flux.jit(lambda m, x: m(x))
    m = ArrayCount()
    for _ in range(4):
        f(m, jnp.ones((2, 3)))
    assert int(m.count) == 4 and f.compilations == 1
