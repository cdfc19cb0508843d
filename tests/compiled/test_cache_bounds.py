"""Class 7: caches are bounded, and equal functions share a program."""

import functools
import gc
import weakref

import jax.numpy as jnp
import numpy as np

import fluxjax as Flux
from fluxjax.compiled import call

X = jnp.ones((2, 3))


def test_models_with_lambda_activations_share_one_program():
    f = Flux.jit(lambda m, x: m(x))
    for _ in range(5):
        f(Flux.Dense(2, 2, lambda z: z * 2), X)  # a new, equal lambda every time
    assert f.cache_size() == 1


def test_the_cache_keeps_the_most_recent_programs_only(monkeypatch):
    monkeypatch.setattr(call, "MAX_PROGRAMS", 3)
    f = Flux.jit(lambda m, x: m(x))
    for k in range(6):
        f(Flux.Dense(2, 2, lambda z, k=k: z * k), X)  # a different default each time: a different program
    assert f.cache_size() == 3


def test_equal_partials_share_one_program():
    def scaled(x, w):
        return x * w

    f = Flux.jit(lambda fn, x: fn(x))
    for _ in range(4):
        f(functools.partial(scaled, w=2.0), X)
    assert f.cache_size() == 1
    assert float(f(functools.partial(scaled, w=3.0), X)[0, 0]) == 3.0


def test_a_dropped_model_is_freed_once_other_calls_have_replaced_its_plan():
    """The compiled call keeps the walks of its latest models (a GAN steps two in turn), but a plan no
    call used for `SPARE_AGE` calls is dropped with the model it holds."""
    x = jnp.ones((3, 4))
    f = Flux.jit(lambda m, x: jnp.sum(m(x)))
    a = Flux.Chain(Flux.Dense(3, 3), Flux.Dense(3, 2))
    gone = weakref.ref(a.layers[0])
    for _ in range(3):
        f(a, x)
    del a
    b = Flux.Chain(Flux.Dense(3, 3), Flux.Dense(3, 2))
    for _ in range(3):
        f(b, x)
    gc.collect()
    assert gone() is not None  # a spare plan, for a while
    for _ in range(2 * call.SPARE_AGE):
        f(b, x)
    gc.collect()
    assert gone() is None
    np.testing.assert_allclose(f(b, x), jnp.sum(b(x)), rtol=1e-6)
