"""Class 7: caches are bounded, and equal functions share a program."""

import functools

import jax.numpy as jnp

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
