"""NNlib's audio functions: window functions, `stft` / `istft`, `spectrogram`, dB conversion and mel
filter banks. Time is the first axis, as NNlib: a signal is `(L,)` or `(L, batch...)`."""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def hamming_window(window_length: int, dtype: Any = jnp.float32, *, periodic: bool = True,
                   alpha: float = 0.54, beta: float = 0.46) -> jax.Array:
    """`w[n] = α - β·cos(2πn/N)` for `n = 0 … window_length-1`, with `N = window_length` (periodic, the
    default) or `window_length - 1` (symmetric, `periodic=False`).

    ```python
    >>> hamming_window(4)
    Array([0.08, 0.54, 1.  , 0.54], dtype=float32)

    ```
    """
    if not isinstance(window_length, int) or window_length < 1:
        raise ValueError(f"`window_length` must be > 0, instead: `{window_length}`.")
    n = window_length if periodic else window_length - 1
    k = np.arange(window_length)
    w = alpha - beta * np.cos(2 * np.pi * k / n) if n > 0 else np.full(1, alpha - beta)
    return jnp.asarray(w, dtype)


def hann_window(window_length: int, dtype: Any = jnp.float32, *, periodic: bool = True) -> jax.Array:
    """`w[n] = (1 - cos(2πn/N))/2`: `hamming_window` with `α = β = 0.5`.

    ```python
    >>> hann_window(4)
    Array([0. , 0.5, 1. , 0.5], dtype=float32)
    >>> hann_window(4, periodic=False)
    Array([0.  , 0.75, 0.75, 0.  ], dtype=float32)

    ```
    """
    return hamming_window(window_length, dtype, periodic=periodic, alpha=0.5, beta=0.5)


def _full_window(window: Any, n_fft: int) -> jax.Array:
    window = jnp.asarray(window)
    if window.ndim != 1 or not 0 < window.shape[0] <= n_fft:
        raise ValueError(f"Expected `0 < length(window) ≤ n_fft={n_fft}`, but got a window of shape {window.shape}.")
    left = (n_fft - window.shape[0]) // 2  # a shorter window is centred, zeros on both sides
    return jnp.pad(window, (left, n_fft - window.shape[0] - left))


def _hop(n_fft: int, hop_length: int | None) -> int:
    if not isinstance(n_fft, int) or n_fft < 1:
        raise ValueError(f"Expected a positive int `n_fft`, got {n_fft!r}.")
    hop = n_fft // 4 if hop_length is None else hop_length
    if not isinstance(hop, int) or hop < 1:
        raise ValueError(f"Expected `hop_length > 0`, but got `hop_length={hop}`.")
    return hop


def stft(x: jax.typing.ArrayLike, *, n_fft: int, hop_length: int | None = None, window: Any = None,
         center: bool = True, normalized: bool = False) -> jax.Array:
    """Short-time Fourier transform: `Y[ω, m] = Σₖ window[k]·x[m·hop + k]·exp(-2πiωk/n_fft)`.

    `x` is `(L,)` or `(L, batch...)`. `hop_length` defaults to `n_fft ÷ 4`; a `window` shorter than
    `n_fft` is centred with zeros. `center=True` pads `x` by `n_fft ÷ 2` on both sides by reflection, so
    frame `m` is centred at `m·hop`; `normalized=True` multiplies by `n_fft^-½`. A real `x` gives the
    `n_fft ÷ 2 + 1` non-negative frequencies (`rfft`), a complex one all `n_fft`:

    ```python
    >>> stft(jnp.ones(16), n_fft=16).shape
    (9, 5)

    ```
    """
    x = jnp.asarray(x)
    hop = _hop(n_fft, hop_length)
    if x.ndim == 0:
        raise ValueError("stft expects a signal of shape (L,) or (L, batch...), got a scalar")
    n = x.shape[0] + (2 * (n_fft // 2) if center else 0)
    if not 0 < n_fft <= n:
        raise ValueError(f"Expected `0 < n_fft ≤ size(x, 1)={n}`, but got `n_fft={n_fft}`.")
    w = None if window is None else _full_window(window, n_fft)
    return _stft(x, w, n_fft, hop, center, normalized)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _stft(x, window, n_fft, hop, center, normalized):
    if center:
        x = jnp.pad(x, [(n_fft // 2, n_fft // 2)] + [(0, 0)] * (x.ndim - 1), mode="reflect")
    n_frames = 1 + (x.shape[0] - n_fft) // hop
    ids = np.arange(n_fft)[:, None] + hop * np.arange(n_frames)[None, :]
    frames = x[ids]  # (n_fft, n_frames, batch...)
    if window is not None:
        frames = frames * window.reshape((n_fft,) + (1,) * (frames.ndim - 1))
    y = jnp.fft.fft(frames, axis=0) if jnp.iscomplexobj(frames) else jnp.fft.rfft(frames, axis=0)
    return y * (n_fft**-0.5) if normalized else y


def istft(y: jax.typing.ArrayLike, *, n_fft: int, hop_length: int | None = None, window: Any = None,
          center: bool = True, normalized: bool = False, return_complex: bool = False,
          original_length: int | None = None) -> jax.Array:
    """NNlib's inverse of `stft` with the same keywords: each frame is transformed back and divided by the
    window, and every time step is read from the first frame that covers it. Without
    `original_length` the result may be a little shorter than the signal was.

    ```python
    >>> x = jnp.sin(jnp.arange(64.0) / 3)
    >>> y = stft(x, n_fft=16, hop_length=4, window=hann_window(16))
    >>> x2 = istft(y, n_fft=16, hop_length=4, window=hann_window(16), original_length=64)
    >>> x2.shape, bool(jnp.allclose(x2, x, atol=1e-4))
    ((64,), True)

    ```
    """
    y = jnp.asarray(y)
    hop = _hop(n_fft, hop_length)
    if y.ndim < 2:
        raise ValueError(f"istft expects y of shape (frequencies, frames, batch...), got {y.shape}")
    if hop > n_fft:
        raise ValueError(f"istft: hop_length={hop} > n_fft={n_fft} leaves gaps between frames")
    w = None if window is None else _full_window(window, n_fft)
    return _istft(y, w, n_fft, hop, center, normalized, return_complex, original_length)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _istft(y, window, n_fft, hop, center, normalized, return_complex, original_length):
    n_frames = y.shape[1]
    if normalized:
        y = y * (n_fft**0.5)
    x = jnp.fft.ifft(y, axis=0) if return_complex else jnp.fft.irfft(y, n=n_fft, axis=0)
    if window is not None:
        x = x / window.reshape((n_fft,) + (1,) * (x.ndim - 1))
    # frames laid end to end (frame by frame), then each time step from the first frame that has it
    flat = jnp.moveaxis(x, 1, 0).reshape((n_frames * n_fft,) + x.shape[2:])
    keep = [c * n_fft + r for c in range(n_frames) for r in range(n_fft) if c == 0 or r >= n_fft - hop]
    x = flat[np.asarray(keep)]
    left = n_fft // 2 if center else 0
    if original_length is None:
        right = x.shape[0] - n_fft // 2 if center else x.shape[0]
    else:
        right = left + original_length
    return x[left:right]


def spectrogram(waveform: jax.typing.ArrayLike, *, pad: int = 0, n_fft: int, hop_length: int, window: Any,
                center: bool = True, power: float = 2.0, normalized: bool = False,
                window_normalized: bool = False) -> jax.Array:
    """`|stft(waveform)|^power`, of shape `(n_fft ÷ 2 + 1, frames, batch...)`.

    `pad` zeros are added on both sides first; `window_normalized=True` divides by the window's L2 norm;
    `power=0` returns the complex spectrum. The magnitude is taken of `spectrum + eps`, so that the
    gradient at a zero is finite (NNlib's choice).

    ```python
    >>> x = jnp.sin(jnp.arange(256.0))   # one waveform
    >>> spectrogram(x, n_fft=64, hop_length=32, window=hann_window(64)).shape   # (n_fft ÷ 2 + 1, frames)
    (33, 9)

    ```
    """
    waveform = jnp.asarray(waveform)
    if pad > 0:
        waveform = jnp.pad(waveform, [(pad, pad)] + [(0, 0)] * (waveform.ndim - 1))
    spec = stft(waveform, n_fft=n_fft, hop_length=hop_length, window=window, center=center, normalized=normalized)
    if window_normalized:
        spec = spec / jnp.linalg.norm(jnp.asarray(window))
    if power < 0:
        raise ValueError(f"spectrogram: power must be >= 0, got {power}")
    if power > 0:
        eps = jnp.finfo(waveform.dtype if jnp.issubdtype(waveform.dtype, jnp.floating) else jnp.float32).eps
        spec = jnp.abs(spec + eps) ** power
    return spec


def power_to_db(s: jax.typing.ArrayLike, *, ref: float = 1.0, amin: float = 1e-10, top_db: float = 80.0) -> jax.Array:
    """`10·log10(max(amin, s)) - 10·log10(max(amin, ref))`, floored `top_db` below its maximum."""
    s = jnp.asarray(s)
    log_spec = 10 * (jnp.log10(jnp.maximum(amin, s)) - math.log10(max(amin, ref)))
    return jnp.maximum(log_spec, jnp.max(log_spec) - top_db)


def db_to_power(s_db: jax.typing.ArrayLike, *, ref: float = 1.0) -> jax.Array:
    """The inverse of `power_to_db`: `ref·10^(s_db/10)`."""
    return ref * 10 ** (jnp.asarray(s_db) * 0.1)


def _hz_to_mel(f):
    return 2595 * np.log10(1 + f / 700)


def _mel_to_hz(m):
    return 700 * (10 ** (m / 2595) - 1)


def melscale_filterbanks(*, n_freqs: int, n_mels: int, sample_rate: int, fmin: float = 0.0,
                         fmax: float | None = None) -> jax.Array:
    """Triangular mel-scale filter banks, `(n_freqs, n_mels)`: column `j` rises from mel point `j` to 1 at
    point `j+1` and falls to 0 at `j+2`, the `n_mels + 2` points equally spaced in mel
    (`2595·log10(1 + f/700)`) between `fmin` and `fmax` (default `sample_rate ÷ 2`), over `n_freqs`
    frequencies from 0 to `sample_rate ÷ 2`. So `spectrogram(x)ᵀ * fb` is a mel spectrogram.

    ```python
    >>> fb = melscale_filterbanks(n_freqs=201, n_mels=40, sample_rate=16000)
    >>> fb.shape
    (201, 40)

    ```
    """
    f32 = np.float32
    fmax = f32(sample_rate // 2) if fmax is None else f32(fmax)
    mel_points = np.linspace(_hz_to_mel(f32(fmin)), _hz_to_mel(fmax), n_mels + 2, dtype=f32)
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs, dtype=f32)
    freq_points = _mel_to_hz(mel_points).astype(f32)
    diff = freq_points[1:] - freq_points[:-1]
    slopes = (freq_points[:, None] - all_freqs[None, :]).T  # (n_freqs, n_mels + 2)
    down = -(slopes[:, :-2] / diff[:-1])
    up = slopes[:, 2:] / diff[1:]
    fb = np.maximum(f32(0), np.minimum(down, up))
    if np.any(np.isclose(fb.max(axis=0), 0)):
        warnings.warn(
            f"At least one mel filterbank has all zero values. The value for `n_mels={n_mels}` may be set too high, "
            f"or the value for `n_freqs={n_freqs}` too low.",
            stacklevel=2,
        )
    return jnp.asarray(fb)


__all__ = ["hann_window", "hamming_window", "stft", "istft", "spectrogram", "power_to_db", "db_to_power",
           "melscale_filterbanks"]
