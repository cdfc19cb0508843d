"""f32/f64/f16/bf16 on complex arrays (Flux src/functor.jl: `Complex{T}`), and the eltype warning's
advice for a float16 layer (Flux src/layers/stateless.jl `_match_eltype`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as F
from fluxjax import _checks


def test_f32_converts_complex_to_complex64():
    x = np.array([1 + 2j, 0.1 - 3j], np.complex128)
    y = F.f32(x)
    assert y.dtype == jnp.complex64
    np.testing.assert_array_equal(np.asarray(y), x.astype(np.complex64))
    m = F.Dense(2, 3)
    m.weight = np.ones((3, 2), np.complex128)
    m2 = F.f32(m)
    assert m2.weight.dtype == jnp.complex64 and m2.bias.dtype == jnp.float32
    assert F.f32(np.arange(3)).dtype == np.arange(3).dtype  # integers untouched


def test_f64_converts_complex_to_complex128():
    with pytest.raises(RuntimeError, match="f64: float64 needs jax_enable_x64"):
        F.f64(np.ones(2, np.complex64))  # x64 off: the same error as for real arrays
    with jax.enable_x64(True):
        y = F.f64(jnp.asarray([1 + 1j, 2.5j], jnp.complex64))
        assert y.dtype == jnp.complex128 and y.tolist() == [1 + 1j, 2.5j]


@pytest.mark.parametrize("fn,julia", [(F.f16, "ComplexF16"), (F.bf16, "Complex{BFloat16}")])
def test_half_rejects_complex_with_path(fn, julia):
    m = F.Chain(F.Dense(2, 3), F.Dense(3, 2))
    m[1].weight = jnp.ones((2, 3), jnp.complex64)
    name = fn.__name__
    want = (f"{name}: model.layers[1].weight is complex64; Flux would make it {julia}, but JAX has no complex "
            f"{np.dtype(jnp.float16 if name == 'f16' else jnp.bfloat16).name} type. Keep complex arrays in "
            "complex64 (convert the model with fluxjax.f32)")
    with pytest.raises(TypeError) as e:
        fn(m)
    assert str(e.value).startswith(want)
    assert m[1].weight.dtype == jnp.complex64  # the model is not touched
    with pytest.raises(TypeError, match=f"^{name}: the argument is complex128"):
        fn(np.ones(2, np.complex128))


def test_float16_layer_warning_gives_f16_advice(monkeypatch):
    monkeypatch.setattr(_checks, "_warned", set())
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        y = F.f16(F.Dense(2, 3))(np.ones((2, 4), np.float32))
        F.Dense(2, 3)(np.ones((2, 4), np.float64))  # its own once-only warning, as Flux's two maxlog=1 sites
    assert y.dtype == jnp.float16
    assert [str(w.message) for w in rec] == [
        "Layer Dense(2 => 3) with float16 parameters got 2×4 Matrix{float32} input; converting it to float16, "
        "but this may indicate a problem in earlier layers: one may still compute in float32 (convert the whole "
        "model with fluxjax.f16), or the data was not converted (use fluxjax.f16(x)).",
        "Layer Dense(2 => 3) with float32 parameters got 2×4 Matrix{float64} input; converting it to float32, "
        "which is slow and may be a mistake. Convert the data with fluxjax.f32(x) (or the model with f64) to "
        "silence this.",
    ]
