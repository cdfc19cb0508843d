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


def test_cpu_and_gpu_placement(monkeypatch):
    from fluxjax import devices

    monkeypatch.setattr(devices, "_warned", set())  # gpu warns once per session
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


def test_bf16_as_flux_test_utils():
    # Flux.jl test/utils.jl, "BFloat16"
    m = Flux.Chain(Flux.Dense(3, 2, jnp.tanh), Flux.Dense(2, 1))
    x32 = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    h = Flux.bf16(m)
    assert h[0].weight.dtype == Flux.BFloat16 == jnp.bfloat16
    assert h(x32).dtype == jnp.bfloat16  # the input is converted, silently as Flux does
    assert h(Flux.bf16(x32)).dtype == jnp.bfloat16
    assert Flux.f32(h)[0].weight.dtype == jnp.float32  # f32 also converts bfloat16 arrays back
    i = np.arange(3)
    assert Flux.bf16(i) is i  # integers are not converted
    np.testing.assert_array_equal(Flux.bf16(jnp.array([1, 1.5, -2.25, 96], jnp.float32)).astype(jnp.float32),
                                  [1, 1.5, -2.25, 96])  # exact round-to-nearest-even
    (g,) = Flux.gradient(lambda x: jnp.sum(Flux.bf16(x)), x32)
    assert g.dtype == jnp.float32


def test_bfloat16_data_into_a_float32_layer_computes_in_float32():
    x = Flux.bf16(jnp.ones((3, 4)))
    assert Flux.Dense(3, 2)(x).dtype == jnp.float32


@pytest.mark.parametrize("cast, half", [(Flux.f16, jnp.float16), (Flux.bf16, jnp.bfloat16)])
def test_half_precision_keeps_batchnorm_instancenorm_groupnorm_in_float32(cast, half):
    # Flux.jl test/utils.jl, "mixed-precision normalization" (Flux#2700)
    rng = np.random.default_rng(1)
    for lay, chs in ((Flux.BatchNorm(3), 3), (Flux.InstanceNorm(3, affine=True, track_stats=True), 3), (Flux.GroupNorm(4, 2), 4)):
        h = cast(lay)
        arrays = [v for v in jax.tree_util.tree_leaves(h) if hasattr(v, "dtype")]
        assert arrays and all(v.dtype == jnp.float32 for v in arrays)
        x = jnp.asarray(rng.normal(size=(4, 4, chs, 2)), jnp.float32)
        y = h(cast(x))
        assert y.dtype == half  # the data flows in half precision
        np.testing.assert_allclose(y.astype(jnp.float32), Flux.f32(h)(cast(x).astype(jnp.float32)), rtol=0.02, atol=0.02)
    assert all(v.dtype == half for v in jax.tree_util.tree_leaves(cast(Flux.LayerNorm(3))))
    assert cast(Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3)))[1].gamma.dtype == jnp.float32


def test_mixed_precision_batchnorm_trains_its_float32_statistics():
    bn = Flux.f16(Flux.BatchNorm(2))
    x = Flux.f16(jnp.asarray(np.random.default_rng(2).normal(loc=3.0, size=(2, 8)), jnp.float32))
    (g,) = Flux.gradient(lambda m: jnp.sum(m(x).astype(jnp.float32) ** 2), bn)
    assert bn.mu.dtype == jnp.float32
    assert float(bn.mu[0]) == pytest.approx(0.1 * float(jnp.mean(x[0].astype(jnp.float32))), rel=1e-6)
    assert g.gamma.dtype == jnp.float32


def test_get_device_names_the_device_of_a_model_or_array():
    m = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3))
    assert Flux.get_device(m) == Flux.CPUDevice() == Flux.get_device(np.ones(2))
    assert Flux.get_device(Flux.cpu_device()(m)) == Flux.cpu_device()
    assert Flux.get_device((1, "a", None)) is None
    dev = Flux.get_device({"w": jnp.ones(2)})
    assert dev(np.ones(2)).devices() == {jax.devices()[0]}


def test_cpu_device_moves_models_and_arrays():
    dev = Flux.cpu_device()
    assert isinstance(dev, Flux.CPUDevice) and dev == Flux.CPUDevice()
    m = dev(Flux.Chain(Flux.Dense(2, 3)))
    assert m[0].weight.devices() == {jax.devices("cpu")[0]}
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(dev(x), x)


@pytest.mark.skipif(any(d.platform != "cpu" for d in jax.devices()), reason="checks the no-accelerator fallback")
def test_gpu_device_falls_back_to_cpu_with_a_warning(monkeypatch):
    import warnings

    from fluxjax import devices

    monkeypatch.setattr(devices, "_warned", set())
    with pytest.warns(UserWarning, match="no GPU"):
        dev = Flux.gpu_device()
    with warnings.catch_warnings():  # once per session, as Flux's maxlog=1: not again, nor from gpu()
        warnings.simplefilter("error")
        assert isinstance(Flux.gpu_device(), Flux.CPUDevice)
        m = Flux.Dense(2, 2)
        assert Flux.gpu(m) is m
    assert isinstance(dev, Flux.CPUDevice)
    with pytest.raises(RuntimeError):
        Flux.gpu_device(force=True)


def test_get_device_type_and_device_iterator():
    import fluxjax as F

    assert F.get_device_type(jnp.ones(2)) is F.CPUDevice and F.get_device_type({"a": 1}) is None
    loader = F.DataLoader((jnp.arange(20.0).reshape(2, 10), jnp.arange(10.0)), batchsize=4)
    it = F.DeviceIterator(F.cpu_device(), loader)
    batches = list(it)
    assert len(it) == 3 and [x.shape for x, _ in batches] == [(2, 4), (2, 4), (2, 2)]
    np.testing.assert_array_equal(batches[2][1], [8.0, 9.0])
    assert all(F.get_device(b) == F.cpu_device() for b in batches)
    with pytest.raises(TypeError, match="dev must be cpu_device"):
        F.DeviceIterator("cpu", loader)


def test_rng_from_array_and_default_device_rng_draw_from_the_global_stream():
    Flux.seed_(3)
    a, b = Flux.rng_from_array(np.ones(3)), Flux.default_device_rng(Flux.cpu_device())
    Flux.seed_(3)
    assert np.array_equal(Flux.rng_from_array(jnp.ones(3)), a)  # reproducible after seed_
    assert not np.array_equal(a, b)  # consecutive draws differ
    assert a.devices() == {jax.devices("cpu")[0]}
    # the key is what layers and initialisers take as rng=
    assert np.array_equal(Flux.glorot_uniform(3, 4, rng=a), Flux.glorot_uniform(3, 4, rng=a))
    with pytest.raises(TypeError, match="expects a device from cpu_device"):
        Flux.default_device_rng("cuda")
