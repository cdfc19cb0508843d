"""Flux.Losses' loss functions (`Flux/src/losses/functions.jl`) with Flux's exact definitions; the
conventions are in `fluxjax.losses`."""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compiled.pure import concrete
from ..errors import DimensionMismatch
from ..nnlib.axes import axes
from ._utils import _default_float, xlogx, xlogy

Agg = Callable[[jax.Array], Any]
Dims = int | tuple[int, ...]


# ---------------------------------------------------------------------------------------------
# shared plumbing


def _shape_str(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _check_sizes(yhat: Any, y: Any) -> None:
    """Flux's `_check_sizes`: raise `DimensionMismatch` (a `ValueError`) unless `yhat` and `y`
    have the same size.

    Scalars (Python numbers and 0-d arrays) pass, as Flux's constant labels. Sizes are compared
    Julia-style, with missing trailing dims read as 1.
    """
    s1, s2 = tuple(np.shape(yhat)), tuple(np.shape(y))
    if len(s1) == 0 or len(s2) == 0:
        return
    n = max(len(s1), len(s2))
    if s1 + (1,) * (n - len(s1)) != s2 + (1,) * (n - len(s2)):
        raise DimensionMismatch(f"loss function expects size(ŷ) = {_shape_str(s1)} to match size(y) = {_shape_str(s2)}")


def _numeric(what: str, v: Any) -> jax.Array:
    """`v` as a numeric array, or a `TypeError` saying which argument of the loss is not."""
    if v is None or isinstance(v, (str, bytes, dict, set)) or getattr(getattr(v, "dtype", None), "kind", "") in ("O", "U", "S"):
        raise TypeError(f"loss function expects {what} to be a numeric array or number, got {type(v).__name__} {v!r:.60}")
    try:
        return jnp.asarray(v)
    except (TypeError, ValueError) as e:
        raise TypeError(f"loss function expects {what} to be a numeric array or number, got {type(v).__name__}: {e}") from None


def _prep(yhat: Any, y: Any) -> tuple[jax.Array, Any]:
    """Convert, check sizes, and align ranks so numpy broadcasting equals Julia's."""
    yhat = _numeric("ŷ", yhat)
    if not jnp.issubdtype(yhat.dtype, jnp.inexact):
        yhat = yhat.astype(_default_float())
    _check_sizes(yhat, y)
    if not isinstance(y, (int, float, complex)) or isinstance(y, bool):
        y = _numeric("y", y)
        if not jnp.issubdtype(y.dtype, jnp.inexact):
            y = y.astype(yhat.dtype)
        if y.ndim and yhat.ndim and y.ndim != yhat.ndim:
            if y.ndim < yhat.ndim:
                y = y.reshape(yhat.shape)
            else:
                yhat = yhat.reshape(y.shape)
    return yhat, y


def _eps(yhat: jax.Array, eps: Any) -> Any:
    if eps is None:
        return float(jnp.finfo(yhat.dtype).eps)
    if isinstance(eps, (int, float)):
        return float(eps)
    return jnp.asarray(eps, dtype=jnp.finfo(yhat.dtype).dtype)


def _agg(agg: Agg) -> Agg:
    if agg is builtins.sum:
        return jnp.sum
    if agg is None:
        return lambda x: x
    if not callable(agg):
        raise TypeError(f"loss function: agg must be a function such as jnp.mean or jnp.sum, got {agg!r}")
    return agg


def _cast(yhat: jax.Array, v: Any) -> Any:
    """Flux's `ofeltype(ŷ, v)`: a Python number stays weakly typed; an array takes ŷ's dtype."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return jnp.asarray(v, dtype=jnp.finfo(yhat.dtype).dtype)


def _sum(x: jax.Array, dims: Dims) -> jax.Array:
    return jnp.sum(x, axis=dims, keepdims=True)


@jax.custom_jvp
def _abs(x: jax.Array) -> jax.Array:
    """`abs` with ChainRules' derivative, as Zygote differentiates it (issue 1529): `sign(x)` for a real
    `x`, `Re(conj(z) dz) / |z|` for a complex one, and 0 at the origin, where JAX's `jnp.abs` gives 1
    (NaN for a complex zero): `mae(ŷ, y)` where `ŷ == y` has gradient 0, as Flux's."""
    return jnp.abs(x)


@_abs.defjvp
def _abs_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = jnp.abs(x)
    if jnp.iscomplexobj(x):
        zero = y == 0
        return y, jnp.where(zero, 0, jnp.real(jnp.conj(x) * t) / jnp.where(zero, 1, y))
    return y, jnp.sign(x) * t


def _abs2(x: jax.Array) -> jax.Array:
    if jnp.iscomplexobj(x):
        return jnp.real(x) ** 2 + jnp.imag(x) ** 2
    return x * x


# Each loss's elementwise part is one jitted kernel (the user's `agg` is applied outside), so an
# eager call or an eager gradient compiles one program per shape instead of one per primitive.
def _kernel(fn: Callable) -> Callable:
    params = inspect.signature(fn).parameters
    return jax.jit(fn, static_argnames=tuple(n for n in ("dims", "gint") if n in params))


def _pow(x: jax.Array, g: Any, gint: int | None) -> jax.Array:
    return x**gint if gint is not None else x**g


# ---------------------------------------------------------------------------------------------
# regression losses


def mae(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Mean absolute error: `agg(abs(ŷ - y))`.

    >>> mae(jnp.array([1.1, 1.9, 3.1]), jnp.array([1.0, 2.0, 3.0]))   # 0.1
    Array(0.1000, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_mae(yhat, y))


def mse(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Mean squared error: `agg(abs2(ŷ - y))` (works on complex values).

    >>> mse(jnp.array([1.1, 1.9, 3.1]), jnp.array([1.0, 2.0, 3.0]))   # 0.01
    Array(0.01, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_mse(yhat, y))


def msle(yhat: Any, y: Any, *, agg: Agg = jnp.mean, eps: Any = None) -> jax.Array:
    """Mean squared logarithmic error: `agg(log((ŷ + eps) / (y + eps))^2)`.

    >>> msle(jnp.array([1.1, 2.2, 3.3]), jnp.array([1.0, 2.0, 3.0]))  # 0.009084041
    Array(0.0091, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    e = _eps(yhat, eps)
    return _agg(agg)(_k_msle(yhat, y, e))


def huber_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean, delta: float = 1.0) -> jax.Array:
    """Huber loss: with `e = abs(ŷ - y)`, `0.5 e^2` where `e < delta`, else `delta (e - 0.5 delta)`.

    The branch mask carries no gradient, as in Flux.

    >>> huber_loss(jnp.array([0.9, 0.1]), jnp.array([1.0, 1.0]))   # mean(0.5 * [0.01, 0.81])
    Array(0.2050, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_huber(yhat, y, _cast(yhat, delta)))


# ---------------------------------------------------------------------------------------------
# classification losses


def label_smoothing(y: Any, alpha: float, *, dims: int | None = 0) -> Any:
    """Smoothed labels, as `Flux.label_smoothing`; `0 < alpha < 1`.

    - `dims=0` (Flux's `dims=1`, one-hot along the class axis): `y * (1 - alpha) + alpha / size(y, 0)`.
    - `dims=None` (Flux's `dims=0`, binary labels in one number): `y * (1 - alpha) + alpha / 2`.

    Porting note: Flux's `dims=0` (binary) is `dims=None` here, because `dims=0` is the first axis.

    >>> label_smoothing(jnp.array([[0.0], [1.0]]), 0.2)    # [[0.1], [0.9]]
    Array([[0.1       ],
           [0.9000]], dtype=float32)
    """
    if concrete(alpha) and not (0 < alpha < 1):
        raise ValueError(f"label_smoothing: α must be between 0 and 1, got {alpha}")
    if not isinstance(y, (int, float)) or isinstance(y, bool):
        y = jnp.asarray(y)
        if not jnp.issubdtype(y.dtype, jnp.inexact):
            y = y.astype(_default_float())
    if dims is None:
        return y * (1 - alpha) + alpha / 2
    ndim = np.ndim(y)
    if dims == 0 or (ndim and dims == -ndim):
        n = np.shape(y)[0] if ndim else 1
        return y * (1 - alpha) + alpha / n
    raise ValueError(
        f"label_smoothing: `dims` should be 0 (the class axis, Flux's dims=1) or None (binary labels, Flux's dims=0), got {dims!r}"
    )


def crossentropy(yhat: Any, y: Any, *, dims: Dims = 0, agg: Agg = jnp.mean, eps: Any = None) -> jax.Array:
    """Cross entropy: `agg(-sum(xlogy(y, ŷ + eps); dims))`, with the class axis `dims` (default 0).

    `ŷ` should be probabilities (softmax output); prefer :func:`logitcrossentropy` on logits.

    >>> crossentropy(jnp.array([[0.1, 0.9], [0.9, 0.1]]), jnp.array([[0.0, 1.0], [1.0, 0.0]]))
    Array(0.1054, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    axes("crossentropy", dims, yhat.shape, "ŷ")
    e = _eps(yhat, eps)
    return _agg(agg)(_k_crossentropy(yhat, y, e, dims=dims))


def logitcrossentropy(yhat: Any, y: Any, *, dims: Dims = 0, agg: Agg = jnp.mean) -> jax.Array:
    """Cross entropy on logits: `agg(-sum(y * logsoftmax(ŷ; dims); dims))`. No eps.

    Equals `crossentropy(softmax(ŷ), y)`, more stably.

    >>> logitcrossentropy(jnp.zeros((3, 2)), jnp.eye(3)[:, :2])   # log(3)
    Array(1.0986, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    axes("logitcrossentropy", dims, yhat.shape, "ŷ")
    return _agg(agg)(_k_logitcrossentropy(yhat, y, dims=dims))


def binarycrossentropy(yhat: Any, y: Any, *, agg: Agg = jnp.mean, eps: Any = None) -> jax.Array:
    """Binary cross entropy: `agg(-xlogy(y, ŷ + eps) - xlogy(1 - y, 1 - ŷ + eps))`.

    `y` may be a scalar label. Prefer :func:`logitbinarycrossentropy` on logits.

    >>> binarycrossentropy(jnp.array([0.1, 0.2, 0.9]), 1)   # -mean(log([0.1, 0.2, 0.9]))
    Array(1.3391, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    e = _eps(yhat, eps)
    return _agg(agg)(_k_binarycrossentropy(yhat, y, e))


def logitbinarycrossentropy(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Binary cross entropy on logits: `agg((1 - y) * ŷ - logσ(ŷ))`.

    Equals `binarycrossentropy(sigmoid(ŷ), y, eps=0)`, more stably.

    >>> logitbinarycrossentropy(jnp.array([2.0, -1.0, 3.14159]), jnp.array([1, 0, 1]))  # 0.160832
    Array(0.1608, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_logitbinarycrossentropy(yhat, y))


def kldivergence(yhat: Any, y: Any, *, dims: Dims = 0, agg: Agg = jnp.mean, eps: Any = None) -> jax.Array:
    """Kullback-Leibler divergence of `ŷ` from `y` along the class axis `dims`:
    `agg(sum(xlogx(y); dims)) + crossentropy(ŷ, y; dims, agg, eps)`.

    >>> kldivergence(jnp.full((2, 2), 0.5), jnp.eye(2))     # log(2)
    Array(0.6931, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    axes("kldivergence", dims, yhat.shape, "ŷ")
    if jnp.ndim(y) == 0:  # Flux: a 0-d y fails _check_sizes, a number has no sum(...; dims)
        raise DimensionMismatch(f"kldivergence expects y of size(ŷ) = {_shape_str(tuple(yhat.shape))}, the class "
                                "probabilities whose entropy it sums along dims, but got a scalar; for the same "
                                "distribution everywhere pass jnp.broadcast_to(y, ŷ.shape)")
    a = _agg(agg)
    entropy = a(_k_entropy(y, dims=dims))
    return entropy + crossentropy(yhat, y, dims=dims, agg=a, eps=eps)


def poisson_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Poisson loss: `agg(ŷ - xlogy(y, ŷ))`.

    >>> poisson_loss(jnp.array([0.4, 0.5, 0.6]), jnp.array([0.1, 0.2, 0.3]))  # 0.6278354
    Array(0.6278, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_poisson(yhat, y))


def hinge_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Hinge loss for labels in {-1, 1}: `agg(max(0, 1 - ŷ * y))`.

    >>> hinge_loss(jnp.array([0.1, 0.3, 1.0, 1.5]), jnp.array([1, -1, 1, 1]))   # 0.55
    Array(0.5500, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_hinge(yhat, y))


def squared_hinge_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean) -> jax.Array:
    """Squared hinge loss: `agg(max(0, 1 - ŷ * y)^2)`.

    >>> squared_hinge_loss(jnp.array([0.1, 0.3, 1.0, 1.5]), jnp.array([1, -1, 1, 1]))  # 0.625
    Array(0.6250, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _agg(agg)(_k_squared_hinge(yhat, y))


def dice_coeff_loss(yhat: Any, y: Any, *, smooth: float = 1.0) -> jax.Array:
    """Dice coefficient loss (V-Net): `1 - (2 sum(y ŷ) + smooth) / (sum(y^2) + sum(ŷ^2) + smooth)`.

    No `agg`, as in Flux.

    >>> dice_coeff_loss(jnp.array([1.1, 2.1, 3.1]), jnp.array([1.0, 2.0, 3.0]))  # 0.000992
    Array(0.0010, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _k_dice(yhat, y, _cast(yhat, smooth))


def tversky_loss(yhat: Any, y: Any, *, beta: float = 0.7) -> jax.Array:
    """Tversky loss, Flux's code (its tests agree; its docstring swaps β and 1-β):

        1 - (sum(y ŷ) + 1) / (sum(y ŷ + β (1 - y) ŷ + (1 - β) y (1 - ŷ)) + 1)

    No `agg`, as in Flux.

    >>> tversky_loss(jnp.array([0.0, 1.4, 0.5, 1.2]), jnp.array([1.0, 0.5, 0.3, 2.4]))  # -0.0677
    Array(-0.0677, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    return _k_tversky(yhat, y, _cast(yhat, beta))


def _gamma(yhat: jax.Array, gamma: Any) -> tuple[Any, int | None]:
    if isinstance(gamma, (int, np.integer)) and not isinstance(gamma, bool):
        return 0.0, int(gamma)  # integer power, as Flux keeps an Integer γ
    return _cast(yhat, gamma), None


def binary_focal_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean, gamma: float = 2, eps: Any = None) -> jax.Array:
    """Binary focal loss (Lin et al. 2017). With `ŷϵ = ŷ + eps` and
    `p_t = y ŷϵ + (1 - y)(1 - ŷϵ)`: `agg((1 - p_t)^γ * -log(p_t))`. `gamma=0` is binarycrossentropy.

    >>> binary_focal_loss(jnp.array([[0.6, 0.3], [0.4, 0.7]]), jnp.array([[1, 0], [0, 1]]))  # 0.0569
    Array(0.0569, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    g, gint = _gamma(yhat, gamma)
    return _agg(agg)(_k_binary_focal(yhat, y, _eps(yhat, eps), g, gint=gint))


def focal_loss(yhat: Any, y: Any, *, dims: Dims = 0, agg: Agg = jnp.mean, gamma: float = 2, eps: Any = None) -> jax.Array:
    """Multi-class focal loss on probabilities `ŷ` (softmax output), class axis `dims`:
    `agg(sum(-y (1 - ŷϵ)^γ log(ŷϵ); dims))` with `ŷϵ = ŷ + eps`. `gamma=0` is crossentropy.

    >>> focal_loss(jnp.array([[0.4, 0.2], [0.5, 0.5], [0.1, 0.3]]),
    ...            jnp.array([[1, 0], [0, 0], [0, 1]]))                  # 0.4599
    Array(0.4599, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    axes("focal_loss", dims, yhat.shape, "ŷ")
    g, gint = _gamma(yhat, gamma)
    return _agg(agg)(_k_focal(yhat, y, _eps(yhat, eps), g, dims=dims, gint=gint))


def siamese_contrastive_loss(yhat: Any, y: Any, *, agg: Agg = jnp.mean, margin: float = 1.0) -> jax.Array:
    """Contrastive loss (Hadsell et al. 2006): `agg((1 - y) ŷ^2 + y max(0, margin - ŷ)^2)`.

    A negative `margin` raises `ValueError` (Flux throws `DomainError`).

    >>> siamese_contrastive_loss(jnp.array([0.6, 0.4, 0.1, 0.2, 0.7]), jnp.array([1, 0, 0, 1, 1]))  # 0.212
    Array(0.2120, dtype=float32)
    """
    yhat, y = _prep(yhat, y)
    if concrete(margin) and np.any(np.asarray(margin) < 0):
        raise ValueError(f"siamese_contrastive_loss: Margin must be non-negative, got {margin}")
    return _agg(agg)(_k_siamese(yhat, y, _cast(yhat, margin)))


# ---------------------------------------------------------------------------------------------
# kernels (Flux's formulas, unreduced)


@_kernel
def _k_mae(yhat, y):
    return _abs(yhat - y)


@_kernel
def _k_mse(yhat, y):
    return _abs2(yhat - y)


@_kernel
def _k_msle(yhat, y, e):
    return jnp.log((yhat + e) / (y + e)) ** 2


@_kernel
def _k_huber(yhat, y, d):
    e = jnp.abs(yhat - y)
    temp = jax.lax.stop_gradient((e < d).astype(e.dtype))
    x = 0.5
    return ((e * e) * temp) * x + d * (e - x * d) * (1 - temp)


@_kernel
def _k_crossentropy(yhat, y, e, *, dims):
    return -_sum(xlogy(y, yhat + e), dims)


@_kernel
def _k_logitcrossentropy(yhat, y, *, dims):
    return -_sum(y * jax.nn.log_softmax(yhat, axis=dims), dims)


@_kernel
def _k_binarycrossentropy(yhat, y, e):
    return -xlogy(y, yhat + e) - xlogy(1 - y, 1 - yhat + e)


@_kernel
def _k_logitbinarycrossentropy(yhat, y):
    return (1 - y) * yhat - jax.nn.log_sigmoid(yhat)


@_kernel
def _k_entropy(y, *, dims):
    return _sum(xlogx(y), dims)


@_kernel
def _k_poisson(yhat, y):
    return yhat - xlogy(y, yhat)


@_kernel
def _k_hinge(yhat, y):
    return jnp.maximum(0, 1 - yhat * y)


@_kernel
def _k_squared_hinge(yhat, y):
    return jnp.maximum(0, 1 - yhat * y) ** 2


@_kernel
def _k_dice(yhat, y, s):
    return 1 - (2 * jnp.sum(y * yhat) + s) / (jnp.sum(y**2) + jnp.sum(yhat**2) + s)


@_kernel
def _k_tversky(yhat, y, b):
    num = jnp.sum(y * yhat) + 1
    den = jnp.sum(y * yhat + b * (1 - y) * yhat + (1 - b) * y * (1 - yhat)) + 1
    return 1 - num / den


@_kernel
def _k_binary_focal(yhat, y, e, g, *, gint):
    ye = yhat + e
    p_t = y * ye + (1 - y) * (1 - ye)
    return _pow(1 - p_t, g, gint) * -jnp.log(p_t)


@_kernel
def _k_focal(yhat, y, e, g, *, dims, gint):
    ye = yhat + e
    return _sum(-y * _pow(1 - ye, g, gint) * jnp.log(ye), dims)


@_kernel
def _k_siamese(yhat, y, m):
    return (1 - y) * yhat**2 + y * jnp.maximum(0, m - yhat) ** 2
