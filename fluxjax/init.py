"""Flux's weight initialisers (`Flux/src/utils.jl`), with Flux's exact formulas and dims.

Every initialiser takes Flux's dims, in Flux's order, and returns a float32 `jax.Array` of exactly
that shape: `glorot_uniform(out, in)` for a Dense weight `(out, in)`, `glorot_uniform(k1, k2, cin, cout)`
for a Conv kernel. Fans come from :func:`nfan`, which reads dims the way Flux does.

Randomness: `rng=None` draws a fresh subkey from the global key (`fluxjax.seed_(n)` makes runs
reproducible), `rng=<int>` seeds a key, `rng=<key>` uses that key. As in Flux, a key may also be
given as the first positional argument: `glorot_uniform(key, 3, 4)`.

Partial form: called with no dims, an initialiser returns a function of dims, as Flux's
`glorot_uniform(rng; gain=2)`::

    init = glorot_uniform(gain=2.0)
    w = init(3, 4)                  # same as glorot_uniform(3, 4, gain=2.0)
    w = init(3, 4, gain=1.0)        # keywords given at the call win

A partial built with an explicit `rng` advances its own key on every call (Flux's closure holds a
mutable RNG), so two calls give different arrays, and the whole sequence is reproducible.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfinv

from .errors import DimensionMismatch
from .random import is_key, resolve_key

__all__ = [
    "nfan",
    "glorot_uniform",
    "glorot_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "truncated_normal",
    "lecun_normal",
    "orthogonal",
    "sparse_init",
    "identity_init",
    "zeros32",
    "ones32",
    "rand32",
    "randn32",
    "create_bias",
]

RNG = Any  # None | int | jax.Array (a PRNG key)
InitResult = Any  # jax.Array, or a partial initialiser when called without dims

_F32 = jnp.float32


# ---------------------------------------------------------------------------------------------
# helpers


def _dims_of(args: tuple) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    try:
        dims = tuple(operator.index(d) for d in args)
    except TypeError:
        hint = ""
        if any(isinstance(d, jax.core.Tracer) for d in args):
            hint = (": a size passed into a compiled function is traced; make that argument static "
                    "(Flux.jit(f, static_argnums=...)) or take the size from an array's .shape")
        raise TypeError(f"initialiser dims must be integers, got {args!r}{hint}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"initialiser dims must be non-negative, got {dims}")
    return dims


def _split_args(args: tuple, rng: RNG) -> tuple[tuple, RNG]:
    """Accept Flux's `init(rng, dims...)`: a key as the first positional argument."""
    if args and is_key(args[0]):
        if rng is not None:
            raise TypeError("rng given both positionally and as rng=")
        return args[1:], args[0]
    return args, rng


def _reshape_colmajor(x: jax.Array, dims: tuple[int, ...]) -> jax.Array:
    """Julia's `reshape(x, dims)` (column-major) on a JAX array."""
    return x.T.reshape(dims[::-1]).T


# Sampling. Every distinct shape would otherwise compile its own threefry program (slow: about a
# second each on a busy CPU), so random bits are drawn for a bucketed flat length, compiled once per
# bucket, and one small jitted program per shape slices, reshapes and scales them.


def _bucket(n: int) -> int:
    if n <= 256:
        return 256
    p = 1 << (n - 1).bit_length()  # next power of two
    if p <= 1 << 16:
        return p
    step = p >> 4  # larger arrays: round up to a multiple of p/16 (< 7% waste)
    return -(-n // step) * step


@functools.partial(jax.jit, static_argnums=(1, 2))
def _flat(key: jax.Array, n: int, kind: str) -> jax.Array:
    if kind == "uniform":
        return jax.random.uniform(key, (n,), _F32)
    return jax.random.normal(key, (n,), _F32)


@functools.partial(jax.jit, static_argnums=(1,))
def _shaped(flat: jax.Array, dims: tuple, c: jax.Array, a: jax.Array) -> jax.Array:
    return (flat[: math.prod(dims)].reshape(dims) + c) * a


def _sample(key: Any, dims: tuple, kind: str, c: float = 0.0, a: float = 1.0) -> jax.Array:
    """`(uniform or normal)(dims) + c) * a` in float32, with compiles shared across shapes."""
    flat = _flat(key, _bucket(math.prod(dims)), kind)
    return _shaped(flat, dims, jnp.float32(c), jnp.float32(a))


@functools.partial(jax.jit, static_argnums=(1,))
def _truncated(flat, dims, mul, add, scale, mean, lo, hi):
    x = flat[: math.prod(dims)].reshape(dims) * mul + add
    return jnp.clip(erfinv(x) * scale + mean, lo, hi)


class _Partial:
    """Flux's partial initialiser `init(rng; kw...)`: a function of dims (and keyword overrides)."""

    def __init__(self, fn: Callable, rng: RNG, kw: dict, random: bool = True):
        self.fn = fn
        self.kw = dict(kw)
        self.random = random
        # A fixed key would give the same array on every call; Flux's closure holds a mutable RNG,
        # so we hold a key and split it per call. `None` keeps drawing from the global key.
        self._key = None if (rng is None or not random) else resolve_key(rng)

    def __call__(self, *dims: Any, rng: RNG = None, **kw: Any) -> jax.Array:
        dims, rng = _split_args(dims, rng)
        if rng is None and self._key is not None:
            self._key, rng = jax.random.split(self._key)
        return self.fn(*dims, rng=rng, **{**self.kw, **kw})

    def __repr__(self) -> str:
        kws = ", ".join(f"{k}={v!r}" for k, v in self.kw.items())
        return f"{self.fn.__name__}({kws})"


# ---------------------------------------------------------------------------------------------
# fans


def nfan(*dims: int) -> tuple[int, int]:
    """`(fan_in, fan_out)` for an array of Flux dims `dims`, exactly as `Flux.nfan`.

    - `nfan() == (1, 1)` (a constant)
    - `nfan(n) == (1, n)` (a vector is an `n x 1` matrix)
    - `nfan(out, in) == (in, out)` (Dense weight `(out, in)`)
    - `nfan(k..., cin, cout) == (prod(k) * cin, prod(k) * cout)` (conv kernel)

    A single tuple is accepted too: `nfan((100, 200)) == (200, 100)`.

    ```python
    >>> nfan(100, 200)   # a Dense weight (out, in)
    (200, 100)
    >>> nfan(3, 3, 16, 32)   # a Conv kernel (k, k, cin, cout)
    (144, 288)
    >>> nfan(5)
    (1, 5)

    ```
    """
    d = _dims_of(dims)
    if len(d) == 0:
        return (1, 1)
    if len(d) == 1:
        return (1, d[0])
    if len(d) == 2:
        return (d[1], d[0])
    k = math.prod(d[:-2])
    return (k * d[-2], k * d[-1])


# ---------------------------------------------------------------------------------------------
# random initialisers


def glorot_uniform(*dims: int, rng: RNG = None, gain: float = 1.0) -> InitResult:
    """Glorot (Xavier) uniform: `U(-a, a)` with `a = gain * sqrt(6 / (fan_in + fan_out))`.

    Flux computes it as `(rand(Float32, dims) .- 0.5) .* (gain * sqrt(24 / (fan_in + fan_out)))`.
    This is the default `init` of Dense, Conv and the recurrent layers.

    >>> w = glorot_uniform(3, 4)          # (3, 4) float32, |w| <= sqrt(6/7)
    >>> w.shape, w.dtype, bool(jnp.all(jnp.abs(w) <= (6 / 7) ** 0.5))
    ((3, 4), dtype('float32'), True)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(glorot_uniform, rng, {"gain": gain})
    dims = _dims_of(dims)
    scale = float(gain) * math.sqrt(24.0 / sum(nfan(*dims)))
    return _sample(resolve_key(rng), dims, "uniform", -0.5, scale)


def glorot_normal(*dims: int, rng: RNG = None, gain: float = 1.0) -> InitResult:
    """Glorot (Xavier) normal: `randn(dims) * gain * sqrt(2 / (fan_in + fan_out))`.

    >>> w = glorot_normal(100, 400)       # std about sqrt(2/500)
    >>> w.shape, round(float(w.std()) / (2 / 500) ** 0.5, 1)
    ((100, 400), 1.0)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(glorot_normal, rng, {"gain": gain})
    dims = _dims_of(dims)
    std = float(gain) * math.sqrt(2.0 / sum(nfan(*dims)))
    return _sample(resolve_key(rng), dims, "normal", 0.0, std)


def kaiming_uniform(*dims: int, rng: RNG = None, gain: float = math.sqrt(2)) -> InitResult:
    """Kaiming (He) uniform: `U(-b, b)` with `b = sqrt(3) * gain / sqrt(fan_in)`.

    For a Dense weight `(out, in)` the fan-in is `in`, the second dim.

    >>> w = kaiming_uniform(100, 400)     # |w| <= sqrt(6/400)
    >>> w.shape, bool(jnp.all(jnp.abs(w) <= (6 / 400) ** 0.5))
    ((100, 400), True)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(kaiming_uniform, rng, {"gain": gain})
    dims = _dims_of(dims)
    bound = math.sqrt(3.0) * float(gain) / math.sqrt(nfan(*dims)[0])
    return _sample(resolve_key(rng), dims, "uniform", -0.5, 2 * bound)


def kaiming_normal(*dims: int, rng: RNG = None, gain: float = math.sqrt(2)) -> InitResult:
    """Kaiming (He) normal: `randn(dims) * gain / sqrt(fan_in)`.

    >>> w = kaiming_normal(100, 400)      # std about sqrt(2/400)
    >>> w.shape, round(float(w.std()) / (2 / 400) ** 0.5, 1)
    ((100, 400), 1.0)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(kaiming_normal, rng, {"gain": gain})
    dims = _dims_of(dims)
    std = float(gain) / math.sqrt(nfan(*dims)[0])
    return _sample(resolve_key(rng), dims, "normal", 0.0, std)


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def truncated_normal(
    *dims: int,
    rng: RNG = None,
    mean: float = 0.0,
    std: float = 1.0,
    lo: float = -2.0,
    hi: float = 2.0,
) -> InitResult:
    """Normal(`mean`, `std`) truncated to `[lo, hi]` (absolute bounds), by inverse-CDF sampling.

    As Flux: `l, u = Φ((lo-mean)/std), Φ((hi-mean)/std)`, `x = rand()`,
    `clamp(erfinv(x * 2(u-l) + 2l - 1) * std * sqrt(2) + mean, lo, hi)`. Warns (as Flux) when
    `mean` lies more than 2 std outside the bounds.

    >>> w = truncated_normal(100, 100)    # values in [-2, 2]
    >>> w.shape, bool(jnp.all(jnp.abs(w) <= 2))
    ((100, 100), True)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(truncated_normal, rng, {"mean": mean, "std": std, "lo": lo, "hi": hi})
    dims = _dims_of(dims)
    mean, std, lo, hi = float(mean), float(std), float(lo), float(hi)
    if mean < lo - 2 * std or mean > hi + 2 * std:
        warnings.warn(
            "Mean is more than 2 std outside the limits in truncated_normal, so the distribution of values may be inaccurate.",
            stacklevel=2,
        )
    lcdf = _norm_cdf((lo - mean) / std)
    ucdf = _norm_cdf((hi - mean) / std)
    flat = _flat(resolve_key(rng), _bucket(math.prod(dims)), "uniform")
    f32 = jnp.float32
    return _truncated(flat, dims, f32(2 * (ucdf - lcdf)), f32(2 * lcdf - 1), f32(std * math.sqrt(2.0)), f32(mean), f32(lo), f32(hi))


def lecun_normal(*dims: int, rng: RNG = None, gain: float = 1.0) -> InitResult:
    """LeCun normal: `truncated_normal(mean=0, std=gain * sqrt(1 / fan_in))`.

    The truncation bounds are Flux's defaults `lo=-2, hi=2`, in absolute units (not in std).

    >>> w = lecun_normal(1000, 10)        # std about sqrt(1/10)
    >>> w.shape, round(float(w.std()) / (1 / 10) ** 0.5, 1)
    ((1000, 10), 1.0)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(lecun_normal, rng, {"gain": gain})
    dims = _dims_of(dims)
    std = float(gain) * math.sqrt(1.0 / nfan(*dims)[0])
    return truncated_normal(*dims, rng=rng, mean=0.0, std=std)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _orthogonal_core(flat: jax.Array, rows: int, cols: int, gain: jax.Array) -> jax.Array:
    if rows < cols:
        return _orthogonal_core(flat, cols, rows, gain).T
    mat = flat[: rows * cols].reshape(rows, cols)
    q, r = jnp.linalg.qr(mat)  # reduced: q is (rows, cols)
    return q * jnp.sign(jnp.diagonal(r)) * gain


def _orthogonal2(key: jax.Array, rows: int, cols: int, gain: jax.Array) -> jax.Array:
    return _orthogonal_core(_flat(key, _bucket(rows * cols), "normal"), rows, cols, gain)


def orthogonal(*dims: int, rng: RNG = None, gain: float = 1.0) -> InitResult:
    """A (semi-)orthogonal matrix (Saxe et al. 2014), as `Flux.orthogonal`.

    For `(rows, cols)`: QR of `randn(rows, cols)`, `Q * sign(diag(R)) * gain`, computed on the
    transpose when `rows < cols`. For more dims, a `prod(dims[:-1]) x dims[-1]` matrix is built
    and reshaped column-major to `dims`. A single dim `n` follows Flux's code: a `1 x n` matrix,
    i.e. a random unit vector times `gain`.

    >>> w = orthogonal(5, 3)              # w.T @ w == I(3)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(orthogonal, rng, {"gain": gain})
    dims = _dims_of(dims)
    key = resolve_key(rng)
    g = jnp.float32(gain)
    if len(dims) == 2:
        return _orthogonal2(key, dims[0], dims[1], g)
    rows, cols = math.prod(dims[:-1]), dims[-1]
    return _reshape_colmajor(_orthogonal2(key, rows, cols, g), dims)


def sparse_init(*dims: int, rng: RNG = None, sparsity: float | None = None, std: float = 0.01) -> InitResult:
    """Sparse initialisation (Martens 2010): `randn(rows, cols) * std` with exactly
    `ceil(min(1, sparsity) * rows)` zeros in every column, at shuffled positions.

    2-D only. `sparsity` is required (a keyword, as in Flux).

    >>> w = sparse_init(10, 3, sparsity=0.5)   # 5 zeros per column
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(sparse_init, rng, {"sparsity": sparsity, "std": std})
    dims = _dims_of(dims)
    if len(dims) != 2:
        raise ValueError("Only 2-dimensional outputs are supported for sparse initialization.")
    if sparsity is None:
        raise TypeError("sparse_init needs the keyword argument `sparsity`")
    rows, cols = dims
    num_zeros = max(0, math.ceil(min(1.0, float(sparsity)) * rows))
    k1, k2 = jax.random.split(resolve_key(rng))
    n = _bucket(rows * cols)
    return _sparse_core(_flat(k1, n, "normal"), _flat(k2, n, "uniform"), dims, num_zeros, jnp.float32(std))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _sparse_core(normal: jax.Array, uniform: jax.Array, dims: tuple, num_zeros: int, std: jax.Array):
    n = math.prod(dims)
    w = normal[:n].reshape(dims) * std
    w = jnp.where(jnp.arange(dims[0])[:, None] < num_zeros, 0.0, w)
    # shuffle every column independently (Flux: mapslices(shuffle, w, dims=1))
    perm = jnp.argsort(uniform[:n].reshape(dims), axis=0)
    return jnp.take_along_axis(w, perm, axis=0)


def identity_init(*dims: int, rng: RNG = None, gain: float = 1.0, shift: int | tuple = 0) -> InitResult:
    """An array that makes most layers an identity map, as `Flux.identity_init`.

    - 1-D: zeros (an identity bias).
    - 2-D: `gain * I`, padded with zeros when not square.
    - N-D (conv kernel `(k..., cin, cout)`): a centre tap `w[c..., i, i] = gain` for
      `i < min(cin, cout)`, where `c = ceil(k/2) - 1` (0-based) in every spatial dim.

    `shift` is Julia's `circshift`: an int rolls the first dim, a tuple rolls each leading dim.
    `rng` is accepted and ignored (the result is not random).

    >>> identity_init(3, 3, gain=3.0)     # 3 * eye(3)
    Array([[3., 0., 0.],
           [0., 3., 0.],
           [0., 0., 3.]], dtype=float32)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(identity_init, None, {"gain": gain, "shift": shift}, random=False)
    dims = _dims_of(dims)
    if len(dims) == 1:
        return jnp.zeros(dims, _F32)
    if len(dims) == 2:
        w = np.eye(dims[0], dims[1], dtype=np.float32) * np.float32(gain)
    else:
        w = np.zeros(dims, np.float32)
        centres = tuple((k + 1) // 2 - 1 for k in dims[:-2])
        for i in range(min(dims[-2], dims[-1])):
            w[centres + (i, i)] = gain
    shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
    if any(shifts):
        w = np.roll(w, shifts, axis=tuple(range(len(shifts))))
    return jnp.asarray(w, _F32)


# ---------------------------------------------------------------------------------------------
# plain constructors


def zeros32(*dims: int) -> jax.Array:
    """`zeros(Float32, dims...)`. `zeros32(2, 3).shape == (2, 3)`.

    ```python
    >>> zeros32(2)
    Array([0., 0.], dtype=float32)
    >>> zeros32(2, 3).dtype
    dtype('float32')

    ```
    """
    return jnp.zeros(_dims_of(dims), _F32)


def ones32(*dims: int) -> jax.Array:
    """`ones(Float32, dims...)`. `ones32(2, 3).shape == (2, 3)`.

    ```python
    >>> ones32(2, 3)
    Array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)

    ```
    """
    return jnp.ones(_dims_of(dims), _F32)


def rand32(*dims: int, rng: RNG = None) -> InitResult:
    """Uniform `[0, 1)` float32 array, as `Flux.rand32`. With no dims, returns a function of dims.

    >>> rand32(2, 3, rng=0).shape
    (2, 3)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(rand32, rng, {})
    return _sample(resolve_key(rng), _dims_of(dims), "uniform")


def randn32(*dims: int, rng: RNG = None) -> InitResult:
    """Standard-normal float32 array, as `Flux.randn32`. With no dims, returns a function of dims.

    >>> randn32(2, 3, rng=0).shape
    (2, 3)
    """
    dims, rng = _split_args(dims, rng)
    if not dims:
        return _Partial(randn32, rng, {})
    return _sample(resolve_key(rng), _dims_of(dims), "normal")


def create_bias(weight: Any, bias: Any, *dims: int) -> Any:
    """A layer's bias from its `bias=` keyword, as `Flux.create_bias`.

    - `True`: zeros of shape `dims`, with the weight's dtype.
    - `False`: `False` (no bias; the layer adds nothing and it gets no gradient).
    - an array: checked to have shape `dims` (else `DimensionMismatch`, a `ValueError`) and cast to the weight's dtype.

    >>> w = jnp.ones((3, 2), dtype=jnp.float16)
    >>> create_bias(w, True, 3)           # zeros(3), in the weight's dtype
    Array([0., 0., 0.], dtype=float16)
    >>> create_bias(w, False, 3)
    False
    """
    shape = _dims_of(dims)
    dtype = jnp.asarray(weight).dtype
    if isinstance(bias, (bool, np.bool_)):
        return jnp.zeros(shape, dtype) if bias else False
    b = jnp.asarray(bias)
    if tuple(b.shape) != shape:
        raise DimensionMismatch(f"expected bias of size {shape}, got size {tuple(b.shape)}")
    return b.astype(dtype)
