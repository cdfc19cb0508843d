"""f32 / f64 / cpu / gpu."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux


def test_f32_converts_floats_keeps_ints_and_ties():
    d = Flux.Dense(np.ones((2, 3), np.float64), np.zeros(2, np.float64))
    e = Flux.Embedding(4, 2)
    drop = Flux.Dropout(0.5)
    m = Flux.Chain(d, d, e, drop)
    m32 = Flux.f32(m)
    assert m32[0].weight.dtype == jnp.float32 and m32[0] is m32[1]  # tie preserved
    assert m32[3].rng.dtype == drop.rng.dtype  # keys untouched


def test_f64_requires_x64():
    if not jax.config.jax_enable_x64:
        with pytest.raises(RuntimeError, match="x64"):
            Flux.f64(Flux.Dense(2, 2))


def test_cpu_and_gpu_placement():
    m = Flux.cpu(Flux.Dense(2, 2))
    assert next(iter(m.weight.devices())).platform == "cpu"
    if all(d.platform == "cpu" for d in jax.devices()):
        with pytest.warns(UserWarning, match="no GPU"):
            assert Flux.gpu(m) is m
