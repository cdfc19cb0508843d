"""NNlib's audio functions against their formulas (NNlib's own cases are compat/cases_nnlib_audio.py
`case_spectral`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

from fluxjax import nnlib as N


def test_windows():
    np.testing.assert_allclose(N.hann_window(4), [0, 0.5, 1, 0.5], atol=1e-7)
    np.testing.assert_allclose(N.hamming_window(5, periodic=False), [0.08, 0.54, 1.0, 0.54, 0.08], atol=1e-7)
    np.testing.assert_allclose(N.hann_window(9), N.hamming_window(9, alpha=0.5, beta=0.5))
    assert N.hann_window(3, jnp.bfloat16).dtype == jnp.bfloat16


def _dft_stft(x, n_fft, hop, window, center):
    """The formula: Y[ω, m] = Σₖ window[k]·x[m·hop + k]·exp(-2πiωk/n_fft), in float64."""
    if center:
        x = np.pad(x, n_fft // 2, mode="reflect")
    w = np.zeros(n_fft)
    left = (n_fft - len(window)) // 2
    w[left : left + len(window)] = window
    frames = 1 + (len(x) - n_fft) // hop
    k = np.arange(n_fft)
    return np.stack(
        [[np.sum(w * x[m * hop + k] * np.exp(-2j * np.pi * om * k / n_fft)) for m in range(frames)] for om in range(n_fft)]
    )


@pytest.mark.parametrize("center", [True, False])
def test_stft_is_the_windowed_dft(center):
    r = np.random.default_rng(3)
    x = r.standard_normal(40)
    window = np.asarray(N.hann_window(10), np.float64)
    want = _dft_stft(x, 16, 5, window, center)
    got = N.stft(jnp.asarray(x, jnp.float32), n_fft=16, hop_length=5, window=window, center=center)
    np.testing.assert_allclose(got, want[:9], rtol=1e-4, atol=1e-5)  # real input: the 9 non-negative frequencies
    xc = jnp.asarray(x + 1j * r.standard_normal(40), jnp.complex64)
    got = N.stft(xc, n_fft=16, hop_length=5, center=False)
    np.testing.assert_allclose(got, _dft_stft(np.asarray(xc), 16, 5, np.ones(16), False), rtol=1e-4, atol=1e-4)


def test_spectrogram_gradient_matches_finite_differences():
    r = np.random.default_rng(4)
    x = r.standard_normal(24)
    kw = dict(n_fft=8, hop_length=4, window=np.asarray(N.hann_window(8), np.float64))
    with jax.enable_x64(True):
        g = jax.grad(lambda x: jnp.sum(N.spectrogram(x, **kw) ** 0.5))(jnp.asarray(x))
        want = fd_grad(lambda x: float(jnp.sum(N.spectrogram(jnp.asarray(x), **kw) ** 0.5)), x)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def test_melscale_filterbanks_formula():
    fb = np.asarray(N.melscale_filterbanks(n_freqs=101, n_mels=4, sample_rate=1000))
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)
    points = hz(np.linspace(mel(0), mel(500), 6))
    freqs = np.linspace(0, 500, 101)
    for j in range(4):
        lo, mid, hi = points[j : j + 3]
        want = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
        np.testing.assert_allclose(fb[:, j], want, rtol=1e-4, atol=1e-5)
    with pytest.warns(UserWarning, match="At least one mel filterbank has all zero values"):
        N.melscale_filterbanks(n_freqs=4, n_mels=16, sample_rate=1000)


def test_decibels():
    np.testing.assert_allclose(N.power_to_db(jnp.asarray([1.0, 10.0, 100.0])), [0, 10, 20], atol=1e-5)
    np.testing.assert_allclose(N.power_to_db(jnp.asarray([1e-12, 1.0])), [-80, 0], atol=1e-4)  # top_db floor
    np.testing.assert_allclose(N.power_to_db(jnp.asarray([2.0]), ref=2.0), [0], atol=1e-6)
    np.testing.assert_allclose(N.db_to_power(jnp.asarray([0.0, 10.0]), ref=3.0), [3, 30], rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match=r"Expected `0 < length\(window\) ≤ n_fft=8`"):
        N.stft(jnp.ones(32), n_fft=8, window=N.hann_window(9))
    with pytest.raises(ValueError, match="Expected `hop_length > 0`"):
        N.stft(jnp.ones(32), n_fft=8, hop_length=0)
    with pytest.raises(ValueError, match=r"Expected `0 < n_fft ≤ size\(x, 1\)=6`"):
        N.stft(jnp.ones(6), n_fft=8, center=False)
    with pytest.raises(ValueError, match="hop_length=9 > n_fft=8 leaves gaps"):
        N.istft(N.stft(jnp.ones(32), n_fft=8, hop_length=9), n_fft=8, hop_length=9)
    with pytest.raises(ValueError, match="`window_length` must be > 0"):
        N.hann_window(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        N.melscale_filterbanks(n_freqs=201, n_mels=8, sample_rate=16000)
