"""Normalisation and regularisation layers: Flux's `src/layers/normalise.jl`, mutation-free.

Running statistics and RNG keys are state fields. In train mode a layer computes their next values
and hands them to the state thread (`fluxjax.core.region.rebind`): written at once when called eagerly,
returned as auxiliary outputs and committed afterwards inside `gradient`, `fluxjax.jit` and
`functional`. The mode is Flux's: `active=None` (automatic: train inside `gradient`), `True`, `False`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import (
    as_array,
    as_size,
    check_callable,
    in_python_terms,
    is_int,
    is_real,
    match_eltype,
    name,
    param_dtype,
    positive_ints,
)
from ..core.layer import layer
from ..core.region import is_active, layer_key, rebind
from ..errors import DimensionMismatch, describe
from ..init import ones32, zeros32
from ..nnlib._layout import from_last, to_last
from ..nnlib.dropout import check_unmapped, dropout
from ..nnlib.normalise import normalise
from ..random import resolve_key
from .basic import act_name, identity
from .dense_like import Scale


def _check_mode(name, active) -> bool | None:
    """`active` as Flux's `Union{Bool, Nothing}`: None, True or False (a NumPy bool too), as a Python bool."""
    if active is not None and not isinstance(active, (bool, np.bool_)):
        raise ValueError(
            f"{name}: active must be None (automatic, Flux's nothing), True or False, got {active!r}"
        )
    return None if active is None else bool(active)


def _check_momentum_eps(name, momentum, eps):
    for what, v in (("momentum", momentum), ("eps", eps)):
        if not is_real(v):
            raise TypeError(f"{name}: {what} must be a number, got {v!r}")
    if not 0 <= momentum <= 1:
        raise ValueError(f"{name}: momentum must lie in [0, 1], got {momentum}")
    if eps <= 0:
        raise ValueError(f"{name}: eps must be positive, got {eps}")


def _init_norm(lay, name, chs, sigma, init_beta, init_gamma, affine, track_stats, active, eps, momentum):
    """The fields BatchNorm and InstanceNorm share, checked; running stats start at μ = 0, σ² = 1."""
    chs = as_size(chs)
    if not is_int(chs) or chs <= 0:
        raise ValueError(f"{name}: the number of channels must be a positive integer, got {chs!r}")
    chs = int(chs)
    active = _check_mode(name, active)
    _check_momentum_eps(name, momentum, eps)
    check_callable(name, "the activation λ", sigma)
    lay.sigma = sigma
    lay.beta = init_beta(chs) if affine else False
    lay.gamma = init_gamma(chs) if affine else False
    lay.mu = zeros32(chs) if track_stats else False
    lay.sigma2 = ones32(chs) if track_stats else False
    lay.eps = eps
    lay.momentum = momentum
    lay.affine = affine
    lay.track_stats = track_stats
    lay.active = active
    lay.chs = chs


def _channels(lay, x, chs):
    if np.ndim(x) < 2 or x.shape[-2] != chs:
        raise DimensionMismatch(
            f"layer {name(lay)} expects size(input, ndims - 1) == {chs} (channels, the second-to-last axis), "
            f"but got {describe(x)}"
            + (in_python_terms(lay, x, np.ndim(x) - 2, chs, "channels second-to-last, batch last", "channels")
               if np.ndim(x) >= 2 else "")
        )


def _bcast(v, ndim, axis):
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def _norm_show(name, lay, extra=""):
    s = f"{name}({lay.chs}{extra}"
    if lay.sigma is not identity:
        s += f", {act_name(lay.sigma)}"
    if not lay.affine:
        s += ", affine=false"
    if getattr(lay, "active", None) is not None:
        s += f", active={str(lay.active).lower()}"
    return s + ")"


def _mixed_precision(call: Callable) -> Callable:
    """Half-precision data (float16, bfloat16) into a layer whose arrays are float32, as `f16`/`bf16`
    leave the normalisation layers (Flux's mixed precision): normalise in float32 (statistics included)
    and hand the result back in the data's type. Any other input goes through `match_eltype`."""

    @functools.wraps(call)
    def wrapped(self, x):
        x = match_eltype(self, x)
        if x.dtype in _HALF and param_dtype(self) == jnp.float32:
            return call(self, x.astype(jnp.float32)).astype(x.dtype)
        return call(self, x)

    return wrapped


_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


@layer(trainable=("beta", "gamma"), state=("mu", "sigma2"))
class BatchNorm:
    """Batch normalisation over all axes but the channel axis (second to last: `(C, N)`, `(W, H, C, N)`).

    `BatchNorm(chs, λ=identity; initβ=zeros32, initγ=ones32, affine=True, track_stats=True, active=None,
    eps=1e-5, momentum=0.1)`. Train mode uses the batch mean and biased variance and moves the running
    statistics: `μ ← (1-m)μ + m·μ_b`, `σ² ← (1-m)σ² + m·M/(M-1)·σ²_b` (M elements per channel). Test
    mode uses `mu` and `sigma2` (starting at 0 and 1).

    ```python
    >>> BatchNorm(3)(jnp.ones((4, 4, 3, 2))).shape
    (4, 4, 3, 2)

    ```
    """

    def __init__(self, chs: int, sigma: Callable = identity, *, init_beta=zeros32, init_gamma=ones32,
                 affine: bool = True, track_stats: bool = True, active: bool | None = None,
                 eps: float = 1e-5, momentum: float = 0.1):
        _init_norm(self, "BatchNorm", chs, sigma, init_beta, init_gamma, affine, track_stats, active, eps, momentum)

    @_mixed_precision
    def __call__(self, x):
        _channels(self, x, self.chs)
        if x.ndim > 2:  # images: computed channels-last, as the convolutions (see nnlib/_layout.py)
            return from_last(self._normalise(to_last(x), x.ndim - 1, x))
        return self._normalise(x, 0, x)

    def _normalise(self, x, ax, given):
        axes = tuple(i for i in range(x.ndim) if i != ax)
        if not self.track_stats or is_active(self):
            m = int(np.prod([x.shape[i] for i in axes]))
            mean = jnp.mean(x, axis=axes)
            var = jnp.mean(jnp.square(x - _bcast(mean, x.ndim, ax)), axis=axes)
            if self.track_stats and is_active(self):
                _check_batch(self, m, given, "per channel")
                mom = self.momentum
                mean_s, var_s = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(var)
                rebind(self, "mu", (1 - mom) * self.mu + mom * mean_s)
                rebind(self, "sigma2", (1 - mom) * self.sigma2 + mom * (m / (m - 1)) * var_s)
        else:
            mean, var = self.mu, self.sigma2
        return _affine(self, x, mean, var, ax)

    def _show(self):
        return _norm_show("BatchNorm", self)


def _check_batch(lay, m: int, given, per: str) -> None:
    """Running statistics need at least two elements to average (the variance is corrected by
    m/(m-1)): an empty batch would make them NaN, a single element undefined."""
    if m <= 1:
        what = "an empty batch" if m == 0 else f"one element {per}"
        raise ValueError(
            f"{name(lay)}: training with {what} gives undefined running statistics; got {describe(given)}. "
            "Use a batch larger than 1, or testmode_(layer)."
        )


def _affine(lay, x, mean, var, ax):
    inv = jax.lax.rsqrt(var + lay.eps)
    if lay.affine:
        scale = lay.gamma * inv
        shift = lay.beta - mean * scale
    else:
        scale, shift = inv, -mean * inv
    return lay.sigma(x * _bcast(scale, x.ndim, ax) + _bcast(shift, x.ndim, ax))


@layer(trainable=("beta", "gamma"), state=("mu", "sigma2"))
class InstanceNorm:
    """Instance normalisation: statistics over the spatial axes, per channel and sample.

    `InstanceNorm(chs, λ=identity; affine=False, track_stats=False, active=None, eps=1e-5,
    momentum=0.1)`. With `track_stats`, the running statistics average the per-instance ones over the
    batch, with the variance corrected by `n/(n-1)` (n = spatial size).

    >>> x = jnp.arange(12.0).reshape(3, 2, 2)           # (W, C, N)
    >>> y = InstanceNorm(2)(x)
    >>> y[:, 0, 0]                                      # each channel of each sample normalised
    Array([-1.2247,  0.       ,  1.2247], dtype=float32)
    """

    def __init__(self, chs: int, sigma: Callable = identity, *, init_beta=zeros32, init_gamma=ones32,
                 affine: bool = False, track_stats: bool = False, active: bool | None = None,
                 eps: float = 1e-5, momentum: float = 0.1):
        _init_norm(self, "InstanceNorm", chs, sigma, init_beta, init_gamma, affine, track_stats, active, eps, momentum)

    @_mixed_precision
    def __call__(self, x):
        if x.ndim < 3:
            raise DimensionMismatch(f"layer {name(self)} needs an input with spatial axes (W, ..., C, N), got {describe(x)}")
        _channels(self, x, self.chs)
        ax = x.ndim - 2
        spatial = tuple(range(x.ndim - 2))
        if not self.track_stats or is_active(self):
            mean = jnp.mean(x, axis=spatial, keepdims=True)
            var = jnp.mean(jnp.square(x - mean), axis=spatial, keepdims=True)
            if self.track_stats and is_active(self):
                n = int(np.prod(x.shape[:-2]))
                _check_batch(self, 0 if x.shape[-1] == 0 else n, x, "per channel and sample")
                mom = self.momentum
                mb = jax.lax.stop_gradient(jnp.mean(mean, axis=spatial + (x.ndim - 1,)))
                vb = jax.lax.stop_gradient(jnp.mean(var, axis=spatial + (x.ndim - 1,)))
                rebind(self, "mu", (1 - mom) * self.mu + mom * mb)
                rebind(self, "sigma2", (1 - mom) * self.sigma2 + mom * (n / (n - 1)) * vb)
            y = (x - mean) * jax.lax.rsqrt(var + self.eps)
            if self.affine:
                y = y * _bcast(self.gamma, x.ndim, ax) + _bcast(self.beta, x.ndim, ax)
            return self.sigma(y)
        return _affine(self, x, self.mu, self.sigma2, ax)

    def _show(self):
        return _norm_show("InstanceNorm", self)


@layer(trainable=("beta", "gamma"))
class GroupNorm:
    """Group normalisation: statistics over the spatial axes and each contiguous block of `chs ÷ G`
    channels, per sample. `GroupNorm(chs, G, λ=identity; affine=True, eps=1e-5)`. No running stats.

    >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)        # (W, H, C, N): 4 channels in 2 groups
    >>> y = GroupNorm(4, 2)(x)
    >>> y.shape, round(float(y[..., :2, 0].mean()), 4), round(float(y[..., :2, 0].std()), 4)
    ((1, 1, 4, 4), 0.0, 1.0)
    """

    def __init__(self, chs: int, G: int, sigma: Callable = identity, *, init_beta=zeros32, init_gamma=ones32,
                 affine: bool = True, active: bool | None = None, eps: float = 1e-5, momentum: float = 0.1):
        chs, G = positive_ints("GroupNorm", chs, G, what="chs and G")
        if chs % G != 0:
            raise ValueError(f"GroupNorm: the number of channels {chs} must be divisible by the number of groups {G}")
        active = _check_mode("GroupNorm", active)
        _check_momentum_eps("GroupNorm", momentum, eps)
        check_callable("GroupNorm", "the activation λ", sigma)
        self.sigma = sigma
        self.beta = init_beta(chs) if affine else False
        self.gamma = init_gamma(chs) if affine else False
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.active = active
        self.chs = chs
        self.G = G

    @_mixed_precision
    def __call__(self, x):
        _channels(self, x, self.chs)
        G = self.G
        g = x.reshape(*x.shape[:-2], G, self.chs // G, x.shape[-1])
        axes = tuple(range(x.ndim - 2)) + (x.ndim - 1,)
        mean = jnp.mean(g, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(g - mean), axis=axes, keepdims=True)
        y = ((g - mean) * jax.lax.rsqrt(var + self.eps)).reshape(x.shape)
        if self.affine:
            ax = x.ndim - 2
            y = y * _bcast(self.gamma, x.ndim, ax) + _bcast(self.beta, x.ndim, ax)
        return self.sigma(y)

    def _show(self):
        return _norm_show("GroupNorm", self, f", {self.G}")


@layer
class LayerNorm:
    """Normalise over the first `len(size)` axes (the feature axes), then scale and shift.

    `LayerNorm(size..., λ=identity; affine=True, eps=1e-5)`: `y = λ.(γ .* (x - μ) ./ sqrt(σ² + eps) .+ β)`
    with μ, σ² (biased) over the feature axes. As Flux, γ and β (shape `size`) live in the `diag`
    sub-layer, a `Scale(size..., λ)`: `m.diag.scale`, `m.diag.bias`. With `affine=False`, `diag` is
    the activation λ itself.

    ```python
    >>> m = LayerNorm(4)
    >>> m(jnp.ones((4, 7))).shape, m.diag.scale.shape
    ((4, 7), (4,))

    ```
    """

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    def __init__(self, *size, affine: bool = True, eps: float = 1e-5):
        sigma = identity
        if size and callable(size[-1]):
            size, sigma = size[:-1], size[-1]
        if len(size) == 1 and isinstance(size[0], tuple):
            size = size[0]
        if not size:
            raise ValueError("LayerNorm: size must be positive integers, got ()")
        size = positive_ints("LayerNorm", *size, what="size")
        _check_momentum_eps("LayerNorm", 0.0, eps)
        check_callable("LayerNorm", "the activation λ", sigma)
        self.sigma = sigma
        self.diag = Scale(*size, sigma) if affine else sigma
        self.eps = eps
        self.size = tuple(size)
        self.affine = affine

    def __call__(self, x):
        x = match_eltype(self, x, self.diag.scale.dtype if self.affine else None)
        k = len(self.size)
        if x.ndim < k or tuple(x.shape[:k]) != self.size:
            raise DimensionMismatch(f"layer {name(self)} expects the first {k} axes to be {self.size}, but got {describe(x)}")
        return self.diag(normalise(x, dims=tuple(range(k)), eps=self.eps))

    def _show_children(self):
        return []  # Flux's `@layer :noexpand LayerNorm`: one line, the Scale inside is not listed

    def _show(self):
        s = "LayerNorm(" + ", ".join(str(d) for d in self.size)
        if self.sigma is not identity:
            s += f", {act_name(self.sigma)}"
        if not self.affine:
            s += ", affine=false"
        return s + ")"


def _check_p(name, p):
    if not is_real(p) or not 0 <= p <= 1:
        raise ValueError(f"{name}: the drop probability p must be a number in [0, 1], got {p!r}")


@layer(trainable=(), state=("rng",))
class Dropout:
    """Zero each element with probability `p` and scale the rest by `1/(1-p)`, in train mode.

    `Dropout(p; dims=None, rng=None, active=None)`. `dims` (0-based) are the axes along which the mask
    varies; `dims=2` on WHCN input drops whole channels. `rng` is a key, an int seed (`3`, `np.int64(3)`) or
    a NumPy Generator (a key is drawn from it); by default a key is drawn from the global RNG (`seed_`);
    anything else raises `TypeError`. The key is state: it moves on after each train-mode call.

    ```python
    >>> trainmode_(Dropout(0.5))(jnp.ones((3, 2)))   # entries 0.0 or 2.0
    Array([[2., 2.],
           [0., 2.],
           [2., 2.]], dtype=float32)

    ```
    """

    def __init__(self, p: float, *, dims=None, rng=None, active: bool | None = None):
        _check_p("Dropout", p)
        active = _check_mode("Dropout", active)
        dims = dims if dims is None or isinstance(dims, tuple) else (dims,)
        if dims is not None and not all(is_int(d) for d in dims):
            raise TypeError(f"Dropout: dims must be an int or a tuple of ints (0-based axes), got {dims!r}")
        self.p = p
        self.dims = dims
        self.active = active
        self.rng = resolve_key(rng, "Dropout")

    def __call__(self, x):
        x = as_array(self, x)
        if self.p == 0 or not is_active(self):
            return x
        if self.dims is not None and not all(-x.ndim <= d < x.ndim for d in self.dims):
            raise DimensionMismatch(
                f"layer {name(self)} varies its mask along dims={self._dims_str()} (0-based axes), "
                f"which an input {describe(x)} does not have"
            )
        if self.p == 1:
            return dropout(x, 1.0)  # zeros (floats for integer input), without drawing a key
        check_unmapped(x, f"layer {name(self)}")
        return dropout(layer_key(self), x, self.p, dims=self.dims)

    def _dims_str(self) -> str:
        return str(self.dims[0] if len(self.dims) == 1 else self.dims)

    def _show(self):
        s = f"Dropout({self.p!s}"
        if self.dims is not None:
            s += f", dims={self._dims_str()}"
        if self.active is not None:
            s += f", active={str(self.active).lower()}"
        return s + ")"


_ALPHA_PRIME = -1.7580993408473766


@layer(trainable=(), state=("rng",))
class AlphaDropout:
    """Dropout for SELU networks, keeping mean and variance: `y = A·ifelse(u > p, x, α′) + B` with
    `α′ = -1.7580993408473766`, `A = 1/sqrt((1-p)(1+p·α′²))`, `B = -A·α′·p`. `AlphaDropout(p; rng, active)`.

    >>> d = AlphaDropout(0.5)
    >>> x = jnp.arange(4.0)
    >>> bool(jnp.all(d(x) == x))                       # identity outside a gradient (test mode)
    True
    >>> y = trainmode_(d)(x)
    >>> y.shape
    (4,)
    """

    def __init__(self, p: float, *, rng=None, active: bool | None = None):
        _check_p("AlphaDropout", p)
        active = _check_mode("AlphaDropout", active)
        self.p = p
        self.active = active
        self.rng = resolve_key(rng, "AlphaDropout")

    def __call__(self, x):
        x = as_array(self, x)
        if self.p == 0 or not is_active(self):
            return x
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            x = x.astype(jnp.float32)
        if self.p == 1:
            return jnp.zeros_like(x)
        check_unmapped(x, f"layer {name(self)}")
        p = self.p
        A = 1 / np.sqrt((1 - p) * (1 + p * _ALPHA_PRIME**2))
        B = -A * _ALPHA_PRIME * p
        u = jax.random.uniform(layer_key(self), x.shape, x.dtype)
        return (A * jnp.where(u > p, x, _ALPHA_PRIME) + B).astype(x.dtype)

    def _show(self):
        return f"AlphaDropout({self.p!s})"


KEEP_FLOAT32 = (BatchNorm, InstanceNorm, GroupNorm)  # what `f16`/`bf16` leave in float32 (Flux's mixed precision)
