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


# ----------------------------------------------------------------------------------------------
# f16 / bf16 and MLDataDevices' cpu_device / gpu_device


def test_f16_converts_floats_and_is_differentiable():
    m = Flux.Chain(Flux.Dense(3, 2), Flux.Embedding(4, 2))
    h = Flux.f16(m)
    assert h[0].weight.dtype == jnp.float16 and h[1].weight.dtype == jnp.float16
    assert h[0](jnp.ones(3, jnp.float16)).dtype == jnp.float16
    assert Flux.f32(h)[0].weight.dtype == jnp.float32
    (g,) = Flux.gradient(lambda x: jnp.sum(Flux.f16(x)), jnp.ones(3))
    assert g.dtype == jnp.float32


def test_bf16_conversion_and_f32_back():
    from fluxjax.devices import bf16

    m = bf16(Flux.Dense(3, 2))
    assert m.weight.dtype == jnp.bfloat16
    assert Flux.f32(m).weight.dtype == jnp.float32  # f32 also converts bfloat16 arrays back
    i = np.arange(3)
    assert bf16(i) is i


def test_cpu_device_moves_models_and_arrays():
    dev = Flux.cpu_device()
    assert isinstance(dev, Flux.CPUDevice) and dev == Flux.CPUDevice()
    m = dev(Flux.Chain(Flux.Dense(2, 3)))
    assert m[0].weight.devices() == {jax.devices("cpu")[0]}
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(dev(x), x)


@pytest.mark.skipif(any(d.platform != "cpu" for d in jax.devices()), reason="checks the no-accelerator fallback")
def test_gpu_device_falls_back_to_cpu_with_a_warning():
    with pytest.warns(UserWarning, match="no GPU"):
        dev = Flux.gpu_device()
    assert isinstance(dev, Flux.CPUDevice)
    with pytest.raises(RuntimeError):
        Flux.gpu_device(force=True)
