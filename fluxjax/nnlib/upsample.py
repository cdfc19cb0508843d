"""NNlib's upsampling: `upsample_nearest`, `upsample_linear`/`bilinear`/`trilinear`, `pixel_shuffle`.

Layout `(spatial..., C, N)`. Linear interpolation uses NNlib's source-index formula, with
`align_corners=True` by default (PyTorch and `jax.image.resize` default to half-pixel centres,
which give other values). `pixel_shuffle` reproduces NNlib's column-major reshapes exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import ints

Scale = float | Sequence[float]


def _reshape_f(x: jax.Array, shape: Sequence[int]) -> jax.Array:
    """Julia's (column-major) `reshape(x, shape)` on the same logical shape."""
    return jnp.reshape(x, tuple(shape), order="F")


def upsample_nearest(
    x: jax.typing.ArrayLike, scale: int | Sequence[int] | None = None, *, size: Sequence[int] | None = None
) -> jax.Array:
    """Repeat each element `scale[d]` times along each of the first `len(scale)` dims.

    An int `scale` applies to every spatial dim (all but the last two). Give `size=` instead of
    `scale` for an output size that is a multiple of the input size.
    `upsample_nearest(jnp.ones((2, 3, 1, 1)), (2, 3)).shape == (4, 9, 1, 1)`.

    ```python
    >>> upsample_nearest(jnp.array([[1.0, 2.0], [3.0, 4.0]]), (2, 3))
    Array([[1., 1., 1., 2., 2., 2.],
           [1., 1., 1., 2., 2., 2.],
           [3., 3., 3., 4., 4., 4.],
           [3., 3., 3., 4., 4., 4.]], dtype=float32)

    ```
    """
    x = jnp.asarray(x)
    if (scale is None) == (size is None):
        raise ValueError("upsample_nearest: give exactly one of `scale` or `size=`")
    if size is not None:
        size = ints("upsample_nearest", "size", size)
        if any(o % i for o, i in zip(size, x.shape, strict=False)):
            raise ValueError(f"expected output size {size} divisible by input size {x.shape[: len(size)]}")
        scale = tuple(o // i for o, i in zip(size, x.shape, strict=False))
    else:
        one = isinstance(scale, Integral)
        scale = ints("upsample_nearest", "scale", scale)
        if one:
            scale = scale * (x.ndim - 2)
    if not 1 <= len(scale) <= x.ndim:
        raise ValueError(f"can't upsample ndims(x)={x.ndim} with scale={scale}")
    for d, s in enumerate(scale):
        if s != 1:
            x = jnp.repeat(x, s, axis=d)
    return x


def _source_index(n_in: int, n_out: int, align_corners: bool, dtype) -> tuple[np.ndarray, ...]:
    """NNlib's `source_idx_and_λ` for every output index, in `dtype` arithmetic (0-based)."""
    T = np.dtype(dtype).type
    o = np.arange(n_out)
    if align_corners:
        ratio = T((n_in - 1) / (n_out - 1)) if n_out > 1 else T(0)
        real = ratio * o.astype(dtype)
    else:
        ratio = T(n_in / n_out)
        real = np.maximum(T(0), ratio * (o.astype(dtype) + T(0.5)) - T(0.5))
    i0 = np.floor(real).astype(np.int64)
    i1 = i0 + (i0 < n_in - 1)
    lam1 = (real - i0.astype(dtype)).astype(dtype)
    return i0, i1, (T(1) - lam1).astype(dtype), lam1


def _interp_axis(x: jax.Array, axis: int, n_out: int, align_corners: bool) -> jax.Array:
    i0, i1, lam0, lam1 = _source_index(x.shape[axis], n_out, align_corners, x.dtype)
    shape = [1] * x.ndim
    shape[axis] = n_out
    lam0, lam1 = jnp.asarray(lam0).reshape(shape), jnp.asarray(lam1).reshape(shape)
    return lam0 * jnp.take(x, i0, axis=axis) + lam1 * jnp.take(x, i1, axis=axis)


def upsample_linear(
    x: jax.typing.ArrayLike, scale: Scale | None = None, *, size: int | Sequence[int] | None = None,
    align_corners: bool = True,
) -> jax.Array:
    """(Multi)linear upsampling of all spatial dims (all but the last two) of `x`.

    Output size `floor(scale * n)` per dim, or `size=`. With `align_corners=True` output index `o`
    reads source position `o * (n_in-1)/(n_out-1)`; else `max(0, (o + 0.5) * n_in/n_out - 0.5)`.
    `upsample_linear(jnp.ones((4, 3, 1)), 2.5).shape == (10, 3, 1)`. A complex `x` has its real and
    imaginary parts upsampled separately (the weights are real), as in NNlib.

    ```python
    >>> upsample_linear(jnp.array([1.0, 2.0, 4.0]).reshape(3, 1, 1), 2)[:, 0, 0]   # (W, C, N), corners aligned
    Array([1.       , 1.4000001, 1.8      , 2.4      , 3.2      , 4.       ],      dtype=float32)

    ```
    """
    x = jnp.asarray(x)
    n = x.ndim - 2
    if (scale is None) == (size is None):
        raise ValueError("upsample_linear: give exactly one of `scale` or `size=`")
    if size is None:
        scales = (scale,) * n if isinstance(scale, Real) else tuple(scale)
        if len(scales) != n:
            raise ValueError(f"The scale argument should have length {n}, but it has length {len(scales)}.")
        size = tuple(math.floor(s * i) for s, i in zip(scales, x.shape, strict=False))
    size = ints("upsample_linear", "size", size)
    if len(size) != n:
        raise ValueError(f"The size argument should have length {n}, but it has length {len(size)}.")
    if jnp.iscomplexobj(x):  # real weights: each part on its own, exactly as NNlib's test asks
        return jax.lax.complex(upsample_linear(jnp.real(x), size=size, align_corners=align_corners),
                               upsample_linear(jnp.imag(x), size=size, align_corners=align_corners))
    out_dtype = x.dtype
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    for d, s in enumerate(size):
        if s != x.shape[d]:
            x = _interp_axis(x, d, s, align_corners)
    if x.dtype != out_dtype:  # integer input: NNlib rounds back to the input type
        x = jnp.round(x).astype(out_dtype)
    return x


def upsample_bilinear(
    x: jax.typing.ArrayLike, scale: Scale | None = None, *, size: Sequence[int] | None = None,
    align_corners: bool = True,
) -> jax.Array:
    """Bilinear upsampling of a WHCN array, `(W, H, C, N) -> (floor(sW*W), floor(sH*H), C, N)`.

    `upsample_bilinear(jnp.ones((2, 3, 1, 1)), (2, 3)).shape == (4, 9, 1, 1)`.

    ```python
    >>> x = jnp.array([[1.0, 2.0], [3.0, 4.0]]).reshape(2, 2, 1, 1)   # WHCN
    >>> upsample_bilinear(x, size=(3, 3))[:, :, 0, 0]
    Array([[1. , 1.5, 2. ],
           [2. , 2.5, 3. ],
           [3. , 3.5, 4. ]], dtype=float32)

    ```
    """
    if jnp.ndim(x) != 4:
        raise ValueError(f"upsample_bilinear expects a 4-d (W, H, C, N) array, got shape {jnp.shape(x)}")
    return upsample_linear(x, scale, size=size, align_corners=align_corners)


def upsample_trilinear(
    x: jax.typing.ArrayLike, scale: Scale | None = None, *, size: Sequence[int] | None = None,
    align_corners: bool = True,
) -> jax.Array:
    """Trilinear upsampling of a WHDCN array, `(W, H, D, C, N) -> (sW*W, sH*H, sD*D, C, N)`.

    ```python
    >>> upsample_trilinear(jnp.ones((2, 2, 2, 1, 1)), (2, 2, 2)).shape   # WHDCN
    (4, 4, 4, 1, 1)

    ```
    """
    if jnp.ndim(x) != 5:
        raise ValueError(f"upsample_trilinear expects a 5-d (W, H, D, C, N) array, got shape {jnp.shape(x)}")
    return upsample_linear(x, scale, size=size, align_corners=align_corners)


def pixel_shuffle(x: jax.typing.ArrayLike, r: int) -> jax.Array:
    """Sub-pixel shuffle: `(W, H, C*r^2, N) -> (W*r, H*r, C, N)` (and likewise in 1-D and 3-D).

    Exactly NNlib's column-major `reshape(x, (W, H, r, r, C, N))`, `permutedims(·, (3, 1, 4, 2, 5, 6))`,
    `reshape(·, (W*r, H*r, C, N))`: output `[r*w + i, r*h + j, c, n]` reads channel `c*r^2 + j*r + i`.

    ```python
    >>> x = jnp.arange(8.0).reshape(1, 2, 4, 1)   # (W, H, C·r², N) with r = 2
    >>> pixel_shuffle(x, 2).shape
    (2, 4, 1, 1)

    ```
    """
    x = jnp.asarray(x)
    if x.ndim <= 2:
        raise ValueError("expected x with at least 3 dimensions")
    d = x.ndim - 2
    sizein, cin, nb = x.shape[:d], x.shape[d], x.shape[d + 1]
    if cin % r**d:
        raise ValueError(
            f"expected channel dimension to be divisible by r^d = {r**d}, where d={d} is the number "
            f"of spatial dimensions. Given r={r}, input size(x) = {x.shape}"
        )
    cout = cin // r**d
    x = _reshape_f(x, (*sizein, *(r,) * d, cout, nb))
    perm = [p for i in range(d) for p in (d + i, i)] + [2 * d, 2 * d + 1]
    x = jnp.transpose(x, perm)
    return _reshape_f(x, (*(s * r for s in sizein), cout, nb))


__all__ = [
    "upsample_nearest", "upsample_linear", "upsample_bilinear", "upsample_trilinear", "pixel_shuffle",
]
