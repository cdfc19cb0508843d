# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib audio cases (NNlib.jl test/testsuite/spectral.jl, src/audio/mel.jl), as re-exported by Flux."""


import jax
import jax.numpy as jnp
import numpy as np

from compat._case import case, close
from fluxjax import nnlib as N


def _isapprox(got, want, rtol=3.5e-4):
    """Julia's `≈` on arrays: `norm(got - want) <= rtol * max(norm(got), norm(want))`."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
    assert np.linalg.norm(g - w) <= rtol * max(np.linalg.norm(g), np.linalg.norm(w)), np.abs(g - w).max()


@case(
    names=("hann_window", "hamming_window", "stft", "istft", "spectrogram"),
    source="NNlib.jl test/testsuite/spectral.jl",
    julia="""
    @testset "Window functions" begin
        for window_fn in (hann_window, hamming_window)
            w = window_fn(10)
            @test length(w) == 10
            @test eltype(w) == Float32
            wp = window_fn(10; periodic=false)
            @test wp[1:5] ≈ reverse(wp[6:10])
            @test window_fn(10; periodic=true) ≈ window_fn(10 + 1; periodic=false)[1:10]
        end
    end
    @testset "STFT" for batch in ((), (3,))
        x = device(ones(Float32, 16, batch...))
        y = stft(x; n_fft=16)
        @test size(y) == (9, 5, batch...)
        @test all(real(cpu(y))[1, :, bd...] .≈ 16)
        xx = istft(y; n_fft=16)
        @test size(xx) == (16, batch...)
        @test cpu(x) ≈ cpu(xx)
        x = device(rand(Float32, 2048, batch...)); y = stft(x; n_fft=1024); xx = istft(y; n_fft=1024)
        @test cpu(x) ≈ cpu(xx)
        x = device(rand(Float32, 1111, batch...)); y = stft(x; n_fft=256)
        xx = istft(y; n_fft=256, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        xx = istft(y; n_fft=256)
        @test length(xx) < length(x)
        @test cpu(x)[[1:s for s in size(xx)]...] ≈ cpu(xx)
        x = device(rand(Float32, 1234, batch...))
        y = stft(x; n_fft=512, normalized=true)
        xx = istft(y; n_fft=512, normalized=true, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        window = device(hann_window(512))
        y = stft(x; n_fft=512, window)
        xx = istft(y; n_fft=512, window, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        for hop_length in (32, 33, 255, 256, 511, 512) ... @test cpu(x) ≈ cpu(xx)
        for n_fft in (32, 33, 64, 65, 128, 129, 512) ... @test cpu(x) ≈ cpu(xx)
    end
    @testset "Spectrogram" begin
        x = device(rand(Float32, 1024)); window = device(hann_window(1024))
        y = stft(x; n_fft=1024, hop_length=128, window, center=true, normalized=false)
        spec = spectrogram(x; n_fft=1024, hop_length=128, window, center=true, normalized=false)
        @test abs.(y).^2 ≈ spec
        x = device(ones(Float32, 1024))
        g = Zygote.gradient(x) do x
            sum(spectrogram(x; n_fft=1024, hop_length=128, window, center=true, normalized=false))
        end
        @test !any(isnan.(g[1]))
        x = device(rand(Float32, 1024, 3))       # batched: each column is its own spectrogram
    end
    @testset "Power to dB" begin
        spec = spectrogram(x; pad=0, n_fft=1024, hop_length=128, window)
        @test spec ≈ NNlib.db_to_power(NNlib.power_to_db(spec))
    end
    """,
)
def case_spectral():
    for window_fn in (N.hann_window, N.hamming_window):
        w = window_fn(10)
        assert w.shape == (10,) and w.dtype == jnp.float32
        wp = window_fn(10, periodic=False)
        close(wp[:5], wp[5:][::-1])
        close(window_fn(10, periodic=True), window_fn(11, periodic=False)[:10])
    r = np.random.default_rng(0)
    for batch in ((), (3,)):
        x = jnp.ones((16, *batch), jnp.float32)
        y = N.stft(x, n_fft=16)
        assert y.shape == (9, 5, *batch)
        close(jnp.real(y)[0], np.full((5, *batch), 16.0))
        xx = N.istft(y, n_fft=16)
        assert xx.shape == (16, *batch)
        _isapprox(xx, x)
        x = jnp.asarray(r.random((2048, *batch)), jnp.float32)
        _isapprox(N.istft(N.stft(x, n_fft=1024), n_fft=1024), x)
        x = jnp.asarray(r.random((1111, *batch)), jnp.float32)
        y = N.stft(x, n_fft=256)
        _isapprox(N.istft(y, n_fft=256, original_length=1111), x)
        xx = N.istft(y, n_fft=256)
        assert xx.size < x.size
        _isapprox(xx, x[: xx.shape[0]])
        x = jnp.asarray(r.random((1234, *batch)), jnp.float32)
        y = N.stft(x, n_fft=512, normalized=True)
        _isapprox(N.istft(y, n_fft=512, normalized=True, original_length=1234), x)
        window = N.hann_window(512)
        _isapprox(N.istft(N.stft(x, n_fft=512, window=window), n_fft=512, window=window, original_length=1234), x)
        for hop in (32, 33, 255, 256, 511, 512):
            _isapprox(N.istft(N.stft(x, n_fft=512, hop_length=hop), n_fft=512, hop_length=hop, original_length=1234), x)
        for n_fft in (32, 33, 64, 65, 128, 129, 512):
            _isapprox(N.istft(N.stft(x, n_fft=n_fft), n_fft=n_fft, original_length=1234), x)

    x = jnp.asarray(r.random(1024), jnp.float32)
    window = N.hann_window(1024)
    kw = dict(n_fft=1024, hop_length=128, window=window, center=True, normalized=False)
    _isapprox(jnp.abs(N.stft(x, **kw)) ** 2, N.spectrogram(x, **kw))
    g = jax.grad(lambda x: jnp.sum(N.spectrogram(x, **kw)))(jnp.ones(1024, jnp.float32))
    assert not np.any(np.isnan(g))
    xb = jnp.asarray(r.random((1024, 3)), jnp.float32)
    spec = N.spectrogram(xb, **kw)
    for i in range(3):
        _isapprox(jnp.abs(N.stft(xb[:, i], **kw)) ** 2, spec[:, :, i])
    spec = N.spectrogram(x, pad=0, **kw)
    _isapprox(N.db_to_power(N.power_to_db(spec)), spec)


@case(
    names=("melscale_filterbanks",),
    source="NNlib.jl src/audio/mel.jl (docstring)",
    julia="""
    julia> n_mels = 8;
    julia> fb = melscale_filterbanks(; n_freqs=200, n_mels, sample_rate=16000);
    julia> plot = lineplot(fb[:, 1]);   # each column a triangle: 0 up to (nearly) 1 at its own mel point, back to 0
    mel_points = range(_hz_to_mel(fmin), _hz_to_mel(fmax); length=n_mels + 2)
    _hz_to_mel(freq::T) where T = T(2595) * log10(T(1) + (freq / T(700)))
    """,
)
def case_melscale_filterbanks():
    fb = np.asarray(N.melscale_filterbanks(n_freqs=200, n_mels=8, sample_rate=16000))
    assert fb.shape == (200, 8) and fb.dtype == np.float32
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    points = 700 * (10 ** (np.linspace(mel(0), mel(8000), 10) / 2595) - 1)
    freqs = np.linspace(0, 8000, 200)
    for j in range(8):
        lo, mid, hi = points[j : j + 3]
        close(fb[:, j], np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None), atol=1e-4)
        assert np.all(fb[(freqs <= lo) | (freqs >= hi), j] == 0) and 0.9 < fb[:, j].max() <= 1
