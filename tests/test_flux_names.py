"""Flux's public names reached as `Flux.x` (`import fluxjax as Flux`): the losses, NNlib's re-exported
functions (attention, batched_vec, ...), `reset_`, the deprecated `get_device()` forms, `gpu`'s one warning."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import devices, losses, nnlib

# Flux.jl src/losses/Losses.jl `export`, all public in Flux (src/Flux.jl `@compat(public, ...)`)
LOSSES = """mse mae msle label_smoothing crossentropy logitcrossentropy binarycrossentropy logitbinarycrossentropy
kldivergence huber_loss tversky_loss dice_coeff_loss poisson_loss hinge_loss squared_hinge_loss
binary_focal_loss focal_loss siamese_contrastive_loss""".split()


@pytest.mark.parametrize("name", LOSSES + ["ctc_loss"])
def test_every_loss_is_a_top_level_name(name):
    assert getattr(Flux, name) is getattr(losses, name)


@pytest.mark.parametrize("spelled, module, name", [
    ("Losses", "losses", "logitcrossentropy"), ("Zygote", "zygote", "ignore"), ("Optimisers", "optimise", "Adam"),
    ("Optimise", "optimise", "Descent"), ("NNlib", "nnlib", "softmax"), ("Functors", "functors", "fmapstructure"),
    ("MLUtils", "mlutils", "splitobs")])
def test_the_modules_under_fluxs_names(spelled, module, name):
    """`Flux.Losses.mse`, `Flux.Zygote.ignore`, `Flux.Optimisers.Adam`: a literal port raised AttributeError."""
    assert getattr(Flux, spelled) is getattr(Flux, module)
    assert getattr(getattr(Flux, spelled), name) is getattr(getattr(Flux, module), name)
    np.testing.assert_allclose(Flux.Losses.mse(jnp.array([1.0, 2.0]), jnp.array([0.0, 2.0])), 0.5)


def test_top_level_losses_give_flux_test_values():
    # Flux.jl test/losses.jl, "mse", "mae", "huber_loss", "msle"
    y, yhat = np.array([1, 1, 0, 0.0]), np.array([0.9, 0.1, 0.1, 0.9])
    np.testing.assert_allclose(Flux.mse(yhat, y), (0.1**2 + 0.9**2) / 2, rtol=1e-6)
    np.testing.assert_allclose(Flux.mae(yhat, y), 0.5, rtol=1e-6)
    np.testing.assert_allclose(Flux.huber_loss(yhat, y), 0.20500000000000002, rtol=1e-6)
    np.testing.assert_allclose(Flux.msle(np.array([345.0, 332, 789]), np.array([123.0, 456, 789])),
                               0.38813985859136585, rtol=1e-5)
    # "crossentropy": y = onehotbatch([1, 1, 0, 0], 0:1), ŷ = [.1 .9; .9 .1; .9 .1; .1 .9]', lossvalue
    yoh = Flux.onehotbatch([1, 1, 0, 0], range(2))
    p = np.array([[0.1, 0.9], [0.9, 0.1], [0.9, 0.1], [0.1, 0.9]]).T
    np.testing.assert_allclose(Flux.crossentropy(p, yoh), 1.203972804325936, rtol=1e-5)
    v = np.log(0.1 / 0.9)
    logp = np.array([[v, 0.0], [0.0, v], [0.0, v], [v, 0.0]]).T
    np.testing.assert_allclose(Flux.logitcrossentropy(logp, yoh), 1.203972804325936, rtol=1e-5)


@pytest.mark.parametrize("name", """dot_product_attention dot_product_attention_scores make_causal_mask dropout
    batched_vec grid_sample imrotate conv_bias_act stft istft hann_window spectrogram ctc_loss""".split())
def test_nnlib_exports_are_reached_through_flux(name):
    # Flux does `@reexport using NNlib`: NNlib's exports are Flux.x as well as NNlib.x
    assert getattr(Flux, name) in (getattr(nnlib, name, None), getattr(losses, name, None))


def test_nnlib_attention_specific_results():
    # NNlib.jl test/attention.jl, "specific results"
    q = (np.arange(1, 13, dtype=np.float32) / 12).reshape((4, 3, 1), order="F")
    y, a = nnlib.dot_product_attention(q, q, q, nheads=2)
    ytrue = np.array([0.429754, 0.513087, 0.613791, 0.697125, 0.46431, 0.547644, 0.647876, 0.73121, 0.49773,
                      0.581064, 0.680455, 0.763788]).reshape((4, 3, 1), order="F")
    atrue = np.array([0.313896, 0.332948, 0.353157, 0.264431, 0.328206, 0.407362, 0.219215, 0.31838, 0.462405,
                      0.288691, 0.331243, 0.380066, 0.241239, 0.323893, 0.434868, 0.198438, 0.311761,
                      0.489801]).reshape((3, 3, 2, 1), order="F")
    np.testing.assert_allclose(y, ytrue, atol=1e-5)
    np.testing.assert_allclose(a, atrue, atol=1e-5)
    # "dot_product_attention_scores": head-split inputs give the same scores
    qk = (np.arange(1, 25, dtype=np.float32) / 24).reshape((4, 2, 3, 1), order="F")
    scores = nnlib.dot_product_attention_scores(qk, qk)
    q2 = qk.reshape((8, 3, 1), order="F")
    np.testing.assert_allclose(scores, nnlib.dot_product_attention(q2, q2, q2, nheads=2)[1], rtol=1e-6)
    # "causal": make_causal_mask(x, dims=3) in Julia is dims=2 here; the scores vanish where the mask is false
    x = np.random.default_rng(0).random((4, 2, 3, 1)).astype(np.float32)
    mask = nnlib.make_causal_mask(x, dims=2)
    np.testing.assert_array_equal(mask, np.triu(np.ones((3, 3), bool)))
    a = nnlib.dot_product_attention_scores(x, x, mask=mask)
    np.testing.assert_array_equal(np.asarray(a[:, :, 0, 0]) > 0, mask)
    np.testing.assert_array_equal(np.asarray(a[:, :, 1, 0]) > 0, mask)


def test_batched_vec_raises_dimension_mismatch():
    # NNlib.jl test/batchedmul.jl, "batched_vec: N-D batches"
    rng = np.random.default_rng(1)
    with pytest.raises(Flux.DimensionMismatch, match="batch"):
        nnlib.batched_vec(rng.normal(size=(3, 4, 2)), rng.normal(size=(4, 3)))  # batch 2 vs 3
    with pytest.raises(Flux.DimensionMismatch, match="batch dimensions"):
        nnlib.batched_vec(rng.normal(size=(3, 4, 2, 3)), rng.normal(size=(4, 2, 2)))
    with pytest.raises(Flux.DimensionMismatch, match="ndims"):
        nnlib.batched_vec(rng.normal(size=(3, 4, 2, 3)), rng.normal(size=(4, 6)))
    with pytest.raises(Flux.DimensionMismatch):
        nnlib.batched_vec(rng.normal(size=(3, 4, 2)), rng.normal(size=(5, 2)))  # inner size
    with pytest.raises(Flux.DimensionMismatch):
        nnlib.batched_vec(rng.normal(size=(3, 4, 2)), rng.normal(size=5))
    with pytest.raises(Flux.DimensionMismatch):
        nnlib.batched_mul(jnp.ones((2, 3, 4)), jnp.ones((3, 2, 5)))
    # ... and the values where the sizes fit: C[:, k...] == A[:, :, k...] @ B[:, k...]
    A, B = rng.normal(size=(3, 4, 2, 3)), rng.normal(size=(4, 2, 3))
    np.testing.assert_allclose(Flux.batched_vec(A, B), np.einsum("ijab,jab->iab", A, B), rtol=1e-5)


def test_reset_is_a_deprecated_no_op_that_warns_once(monkeypatch):
    # Flux.jl src/deprecations.jl: reset!(x) = (depwarn(...); x)
    from fluxjax import deprecations

    monkeypatch.setattr(deprecations, "_warned", set())
    m = Flux.RNN(2, 3)
    with pytest.warns(DeprecationWarning, match="reset_"):
        assert Flux.reset_(m) is m
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Flux.reset_(m) is m  # once per session
    x = jnp.ones((2, 5, 1))
    np.testing.assert_array_equal(Flux.reset_(m)(x), m(x))  # nothing to reset: every call starts afresh


def _cpu_only():
    import jax

    return all(d.platform == "cpu" for d in jax.devices())


@pytest.mark.skipif(not _cpu_only(), reason="checks the no-accelerator fallback")
def test_get_device_deprecated_forms(monkeypatch):
    # Flux.jl src/deprecations.jl: get_device() is gpu_device(); get_device("CPU") is cpu_device()
    monkeypatch.setattr(devices, "_warned", set())
    with pytest.warns(DeprecationWarning, match="get_device"):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "gpu_device", UserWarning)
            assert isinstance(Flux.get_device(), Flux.CPUDevice)
    with pytest.warns(DeprecationWarning, match="get_device"):
        dev = Flux.get_device("CPU")
    assert dev == Flux.cpu_device()
    x = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(dev(x), x)
    with pytest.raises(RuntimeError):  # gpu_device(idx+1, force=true) errors without a GPU
        Flux.get_device("CUDA", 0)
    # the MLDataDevices form is unchanged
    assert Flux.get_device(jnp.ones(2)) == Flux.cpu_device() and Flux.get_device({"a": 1}) is None


@pytest.mark.skipif(not _cpu_only(), reason="checks the no-accelerator fallback")
def test_gpu_warns_once_per_session(monkeypatch):
    monkeypatch.setattr(devices, "_warned", set())
    m = Flux.Dense(2, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert Flux.gpu(m) is m
        assert Flux.gpu(m) is m
        assert Flux.gpu(jnp.ones(3)).shape == (3,)
    assert [str(x.message) for x in w] == ["gpu: no GPU or TPU is visible to JAX; the model stays on the CPU"]


@pytest.mark.parametrize("make, greek, ascii_name", [
    (lambda: Flux.Dense(2, 3, Flux.relu), "σ", "sigma"),
    (lambda: Flux.Conv((3,), (1, 2)), "σ", "sigma"),
    (lambda: Flux.BatchNorm(2), "μ", "mu"),
    (lambda: Flux.BatchNorm(2), "σ²", "sigma2"),
    (lambda: Flux.InstanceNorm(2, affine=True), "γ", "gamma"),
    (lambda: Flux.GroupNorm(4, 2), "β", "beta"),
    (lambda: Flux.LayerNorm(2), "ϵ", "eps"),
    (lambda: Flux.BatchNorm(2, Flux.relu), "λ", "sigma"),
])
def test_setting_fluxs_greek_field_name_raises_and_names_the_spelling(make, greek, ascii_name):
    # Flux's fields are σ, μ, σ², ...; fluxjax's are ASCII (DESIGN.md). `bn.μ = z` ported as written
    # used to add an attribute nothing reads: the running mean stayed as it was, silently.
    m = make()
    before = {k: v for k, v in vars(m).items()}
    with pytest.raises(AttributeError, match=f"spells Flux's {greek} as {ascii_name}"):
        setattr(m, greek, jnp.zeros(2))
    assert vars(m).keys() == before.keys() and all(vars(m)[k] is before[k] for k in before)


def test_greek_names_as_python_source_can_write_them_raise_too():
    bn = Flux.BatchNorm(2)
    with pytest.raises(AttributeError, match="sigma2"):
        bn.σ2 = jnp.ones(2)  # `σ²` is not a Python name: a port writes σ2
    with pytest.raises(AttributeError, match="as eps"):
        bn.ϵ = 1e-3  # Python reads ϵ in source as ε (NFKC)
    with pytest.raises(AttributeError, match="its fields are sigma, beta"):
        bn.ζ = 1  # no Flux spelling: the fields are listed


def test_a_users_own_layer_may_have_greek_fields():
    @Flux.layer
    class Mine:
        def __init__(self):
            self.σ = Flux.relu

        def __call__(self, x):
            return self.σ(x)

    m = Mine()
    m.σ, m.μ = Flux.tanh, jnp.zeros(2)
    np.testing.assert_allclose(m(jnp.array([-1.0])), np.tanh([-1.0]), rtol=1e-6)

    class Sub(Flux.Dense):  # a user's subclass of a fluxjax layer: its own business
        pass

    s = Sub(2, 3)
    s.σ = 1
    assert s.σ == 1
