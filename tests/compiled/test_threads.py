"""Class 4: threads calling one compiled function, each with its own model, get their eager answers."""

import threading

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax as Flux

_f = Flux.jit(lambda m, x: m(x))


def test_threads_on_one_compiled_function():
    n = 6
    models = [Flux.Chain(Flux.Dense(2, 3, Flux.relu), Flux.BatchNorm(3)) for _ in range(n)]
    for m in models:
        Flux.testmode_(m)
    xs = [jnp.full((2, 5), float(i + 1)) for i in range(n)]
    want = [m(x) for m, x in zip(models, xs)]
    errors: list = []

    def run(i):
        try:
            for _ in range(15):
                np.testing.assert_allclose(_f(models[i], xs[i]), want[i], rtol=1e-6)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    for m in models:
        assert not any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(m))


def test_threads_training_their_own_models():
    n = 4
    Flux.seed_(0)
    models = [Flux.Dense(3, 2) for _ in range(n)]
    refs = [Flux.fmap(lambda v: v, m) for m in models]
    x, y = jnp.ones((3, 4)), jnp.zeros((2, 4))
    loss = lambda m, x, y: jnp.mean((m(x) - y) ** 2)  # noqa: E731

    def run(i):
        Flux.train_(loss, models[i], [(x, y)] * 10, Flux.setup(Flux.Descent(0.1), models[i]))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for m, r in zip(models, refs):
        Flux.train_(loss, r, [(x, y)] * 10, Flux.setup(Flux.Descent(0.1), r), jit=False)
        np.testing.assert_allclose(m.weight, r.weight, rtol=1e-5)
