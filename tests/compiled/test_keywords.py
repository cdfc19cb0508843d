"""Class 6: `jax.jit`'s own keywords refer to the user's arguments; `@fluxjax.jit` works on methods."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux

X = jnp.arange(6.0).reshape(2, 3)


def test_static_argnums_and_argnames():
    m = Flux.Dense(2, 3)
    f = Flux.jit(lambda m, x, n: m(x) * n if isinstance(n, int) else None, static_argnums=2)
    for n in (1, 3, 1):
        np.testing.assert_allclose(f(m, X, n), m(X) * n, rtol=1e-6)
    g = Flux.jit(lambda m, x, *, act: act(m(x)), static_argnames="act")
    for act in (jnp.tanh, Flux.relu):
        np.testing.assert_allclose(g(m, X, act=act), act(m(X)), rtol=1e-6)
    with pytest.raises(TypeError, match="static_argnums"):
        Flux.jit(lambda x: x, static_argnums=3)(X)


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
def test_donate_argnums_refers_to_the_argument():
    m = Flux.Dense(2, 3)
    f = Flux.jit(lambda m, x: m(x) + 1.0, donate_argnums=1)
    for _ in range(2):
        np.testing.assert_allclose(f(m, X + 0.0), m(X) + 1.0, rtol=1e-6)
    assert f._cache[next(iter(f._cache))].split is not None  # the batch's array is the donated input
    with pytest.raises(TypeError, match="donate_argnums"):
        Flux.jit(lambda x: x, donate_argnums=2)(X)


def test_sharding_keywords_are_refused_with_advice():
    with pytest.raises(TypeError, match="device_put"):
        Flux.jit(lambda x: x, in_shardings=None)


@Flux.layer
class Twice:
    def __init__(self):
        self.d = Flux.Dense(2, 2)

    @Flux.jit
    def __call__(self, x):
        return self.d(self.d(x))


def test_jit_on_a_method_is_a_descriptor():
    a, b = Twice(), Twice()
    for lay in (a, b, a):
        np.testing.assert_allclose(lay(X), lay.d(lay.d(X)), rtol=1e-6)
    g = Flux.gradient(lambda m: jnp.sum(m(X)), a)[0]
    assert g.d.weight.shape == (2, 2)
    assert Twice.__call__.cache_size() == 2  # one program outside gradient, one inside (the mode is in the key)


def _step(m, o, x):
    val, g = Flux.withgradient(lambda m: jnp.sum(m(x) ** 2), m)
    Flux.update_(o, m, g[0])
    return val


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
@pytest.mark.parametrize("rule", [Flux.Descent(0.01), Flux.Momentum(0.01), Flux.Adam(0.01)], ids=str)
@pytest.mark.parametrize("donate", [(0, 1), (1,), (0,)])
def test_donated_arguments_stay_whole(rule, donate):
    """Donating the model or its optimiser state: arrays the step leaves as they are (a rule's
    hyperparameters, a frozen weight) come back too, so nothing the caller holds is a deleted buffer,
    and every step computes what the undonated step does."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    runs = []
    for kw in ({"donate_argnums": donate}, {}):
        Flux.seed_(0)
        m = Flux.Chain(Flux.Dense(3, 3), Flux.Dense(3, 2))
        o = Flux.setup(rule, m)
        Flux.freeze_(o.layers[1])
        f = Flux.jit(_step, **kw)
        runs.append(([float(f(m, o, x)) for _ in range(3)], m, o))
    (la, ma, oa), (lb, mb, ob) = runs
    np.testing.assert_allclose(la, lb, rtol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves((ma, oa)), jax.tree_util.tree_leaves((mb, ob)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)  # readable: not donated away
