"""NNlib's `∇` functions for pooling, upsampling and depthwise convolution, spelled `grad_...`: each is the
adjoint (vector-Jacobian product) of the forward function, taken with `jax.vjp` or, for the linear ones,
`jax.linear_transpose`. NNlib's `PoolDims` / `DepthwiseConvDims` are accepted where NNlib takes them, or
become the forward function's keywords (`grad_conv_data` and `grad_conv_filter` live with `conv`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..errors import DimensionMismatch
from .conv import IntOrTuple, _grouped, _size_arg, adjoint, grad_conv_data, grad_conv_filter
from .dims import ConvDims, DepthwiseConvDims, PoolDims, conv_keywords
from .pooling import lpnormpool, maxpool, meanpool
from .upsample import upsample_bilinear, upsample_linear, upsample_nearest, upsample_trilinear


def _pool_grad(pool: Callable, dy, y, x, what: str) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):  # JAX has no cotangents of integers (float0)
        x = x.astype(jnp.result_type(float))
    dy = jnp.asarray(dy)
    out, back = jax.vjp(pool, x)
    for name, v in (("dy", dy), ("y", jnp.asarray(y))):
        if v.shape != out.shape:
            raise DimensionMismatch(
                f"{what}: {name} has shape {v.shape}, but pooling x of shape {x.shape} "
                f"gives {out.shape}"
            )
    (dx,) = back(dy.astype(out.dtype))
    return dx


def grad_maxpool(dy, y, x, k: IntOrTuple | PoolDims, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None,
                 dilation: IntOrTuple = 1) -> jax.Array:
    """NNlib's `∇maxpool(dy, y, x, pdims)`: `dy` sent back to where each window's maximum is in `x`
    (`y = maxpool(x, k, ...)`, checked for its shape); `k` and the keywords as `maxpool`'s.

    ```python
    >>> x = jnp.array([1.0, 3.0, 2.0, 0.0]).reshape(4, 1, 1)   # (W, C, N)
    >>> y = maxpool(x, 2)
    >>> grad_maxpool(jnp.ones_like(y), y, x, 2)[:, 0, 0]   # to each window's maximum
    Array([0., 1., 1., 0.], dtype=float32)

    ```
    """
    return _pool_grad(lambda x: maxpool(x, k, pad=pad, stride=stride, dilation=dilation), dy, y, x, "grad_maxpool")


def grad_meanpool(dy, y, x, k: IntOrTuple | PoolDims, *, pad: IntOrTuple = 0, stride: IntOrTuple | None = None,
                  dilation: IntOrTuple = 1, count_include_pad: bool = True) -> jax.Array:
    """NNlib's `∇meanpool(dy, y, x, pdims)`: `dy` spread evenly over each window of `x`.

    ```python
    >>> x = jnp.arange(4.0).reshape(4, 1, 1)
    >>> y = meanpool(x, 2)
    >>> grad_meanpool(jnp.ones_like(y), y, x, 2)[:, 0, 0]
    Array([0.5, 0.5, 0.5, 0.5], dtype=float32)

    ```
    """
    f = lambda x: meanpool(x, k, pad=pad, stride=stride, dilation=dilation, count_include_pad=count_include_pad)
    return _pool_grad(f, dy, y, x, "grad_meanpool")


def grad_lpnormpool(dy, y, x, *args: Any, p: float | None = None, k: IntOrTuple | None = None, pad: IntOrTuple = 0,
                    stride: IntOrTuple | None = None, dilation: IntOrTuple = 1) -> jax.Array:
    """NNlib's `∇lpnormpool(dy, y, x, pdims; p)`: the gradient of `lpnormpool(x, p, k, ...)`; `(p, k)` or
    `(pdims, p=p)` as `lpnormpool` takes them.

    ```python
    >>> x = jnp.array([3.0, 4.0]).reshape(2, 1, 1)
    >>> y = lpnormpool(x, 2, 2)   # sqrt(3² + 4²) = 5
    >>> grad_lpnormpool(jnp.ones_like(y), y, x, 2, 2)[:, 0, 0]   # x / y
    Array([0.6, 0.8], dtype=float32)

    ```
    """
    f = lambda x: lpnormpool(x, *args, p=p, k=k, pad=pad, stride=stride, dilation=dilation)
    return _pool_grad(f, dy, y, x, "grad_lpnormpool")


def _transpose(f: Callable, shape: tuple, dy, mismatch: Callable[[tuple], str] | None = None) -> jax.Array:
    """The adjoint of the linear `f` at an input of `shape`, applied to `dy`, after checking that `f` maps
    that input to `dy`'s shape (`mismatch(want)` is the error message, if given)."""
    dy = jnp.asarray(dy)
    x = jax.ShapeDtypeStruct(tuple(shape), dy.dtype)
    out = jax.eval_shape(f, x).shape
    if out != dy.shape:
        raise DimensionMismatch(mismatch(out) if mismatch else
                                f"dy has shape {dy.shape}, but an input of shape {tuple(shape)} gives {out}")
    return adjoint(f, shape, dy)


def grad_upsample_nearest(dy, scale: int | Sequence[int]) -> jax.Array:
    """NNlib's `∇upsample_nearest(Δ, scale)`: each block of `scale` summed back into one element.

    ```python
    >>> dy = jnp.arange(6.0).reshape(6, 1, 1)
    >>> grad_upsample_nearest(dy, 3)[:, 0, 0]   # each block of 3 summed
    Array([ 3., 12.], dtype=float32)

    ```
    """
    dy = jnp.asarray(dy)
    scale = (scale,) if isinstance(scale, int) else tuple(scale)
    if len(scale) > dy.ndim or any(dy.shape[i] % s for i, s in enumerate(scale)):
        raise ValueError(f"grad_upsample_nearest: the sizes {dy.shape} of dy are not multiples of the scale {scale}")
    shape = tuple(d // scale[i] if i < len(scale) else d for i, d in enumerate(dy.shape))
    return _transpose(lambda x: upsample_nearest(x, scale), shape, dy)


def _spatial(dy, size, n: int, what: str) -> tuple:
    dy = jnp.asarray(dy)
    size = (size,) if isinstance(size, int) else tuple(size)
    if len(size) != n or dy.ndim != n + 2:
        raise ValueError(f"{what}: expected dy of rank {n + 2} and size= the {n} spatial sizes of x, got {dy.shape} and {size}")
    return (*size, *dy.shape[n:])


def _grad_upsample(upsample: Callable, n: int, dy, size, align_corners: bool) -> jax.Array:
    """The adjoint of the `n`-d interpolating `upsample` from an `x` of spatial size `size` to `dy`'s."""
    shape = _spatial(dy, size, n, "grad_" + upsample.__name__)
    out = jnp.shape(dy)[:n]
    return _transpose(lambda x: upsample(x, size=out, align_corners=align_corners), shape, dy)


def grad_upsample_linear(dy, *, size: int | Sequence[int], align_corners: bool = True) -> jax.Array:
    """NNlib's `∇upsample_linear(Δ; size, align_corners)`: the adjoint of `upsample_linear` from an `x`
    whose spatial size is `size` (dy is `(W, C, N)`).

    ```python
    >>> grad_upsample_linear(jnp.ones((6, 1, 1)), size=3)[:, 0, 0]
    Array([1.8      , 2.4      , 1.8000001], dtype=float32)

    ```
    """
    return _grad_upsample(upsample_linear, 1, dy, size, align_corners)


def grad_upsample_bilinear(dy, *, size: Sequence[int], align_corners: bool = True) -> jax.Array:
    """NNlib's `∇upsample_bilinear(Δ; size, align_corners)`: `size` is `x`'s `(W, H)`.

    ```python
    >>> grad_upsample_bilinear(jnp.ones((4, 4, 1, 1)), size=(2, 2))[:, :, 0, 0]
    Array([[4., 4.],
           [4., 4.]], dtype=float32)

    ```
    """
    return _grad_upsample(upsample_bilinear, 2, dy, size, align_corners)


def grad_upsample_trilinear(dy, *, size: Sequence[int], align_corners: bool = True) -> jax.Array:
    """NNlib's `∇upsample_trilinear(Δ; size, align_corners)`: `size` is `x`'s `(W, H, D)`.

    ```python
    >>> grad_upsample_trilinear(jnp.ones((4, 4, 4, 1, 1)), size=(2, 2, 2)).shape
    (2, 2, 2, 1, 1)

    ```
    """
    return _grad_upsample(upsample_trilinear, 3, dy, size, align_corners)


def grad_depthwiseconv_data(dy, w, x_size: IntOrTuple | DepthwiseConvDims | None = None, *, stride: IntOrTuple = 1,
                            pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False) -> jax.Array:
    """NNlib's `∇depthwiseconv_data(dy, w, cdims)`: the gradient of `depthwiseconv(x, w, ...)` with respect
    to `x`, as `grad_conv_data` of the grouped convolution that `depthwiseconv` is. `x_size` as there
    (default: the smallest `x` that gives `dy`), or a `DepthwiseConvDims` in place of it and the keywords.

    ```python
    >>> w = jnp.ones((3, 1, 2))   # (k, multiplier, Cin)
    >>> dy = jnp.ones((3, 2, 1))   # from x of (5, 2, 1)
    >>> grad_depthwiseconv_data(dy, w, (5, 2, 1))[:, 0, 0]
    Array([1., 2., 3., 2., 1.], dtype=float32)

    ```
    """
    w = jnp.asarray(w)
    if isinstance(x_size, ConvDims):
        kw = conv_keywords(x_size, "grad_depthwiseconv_data", None, w.shape, stride=stride, pad=pad,
                           dilation=dilation, flipped=flipped)
        return grad_depthwiseconv_data(dy, w, x_size.input_size, **kw)
    cin = w.shape[-1]  # NNlib's layout (k..., mult, Cin)
    wg = _grouped(w, cin, "grad_depthwiseconv_data expects w of shape (k..., mult, Cin)")
    return grad_conv_data(dy, wg, x_size, stride=stride, pad=pad, dilation=dilation, flipped=flipped, groups=cin)


def grad_depthwiseconv_filter(x, dy, w_size: IntOrTuple | DepthwiseConvDims, *, stride: IntOrTuple = 1,
                              pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False) -> jax.Array:
    """NNlib's `∇depthwiseconv_filter(x, dy, cdims)`: the gradient of `depthwiseconv(x, w, ...)` with respect
    to `w`, in NNlib's layout `(k..., mult, Cin)`; `w_size` is that shape, or just the kernel size `k`, or a
    `DepthwiseConvDims` in place of it and the keywords. It is `grad_conv_filter` of the grouped
    convolution, unmerged.

    ```python
    >>> x = jnp.arange(10.0).reshape(5, 2, 1)   # (W, Cin, N)
    >>> dy = jnp.ones((3, 2, 1))
    >>> grad_depthwiseconv_filter(x, dy, (3, 1, 2))[:, 0, :]
    Array([[18., 21.],
           [12., 15.],
           [ 6.,  9.]], dtype=float32)

    ```
    """
    x, dy = jnp.asarray(x), jnp.asarray(dy)
    if isinstance(w_size, ConvDims):
        kw = conv_keywords(w_size, "grad_depthwiseconv_filter", x.shape, None, stride=stride, pad=pad,
                           dilation=dilation, flipped=flipped)
        return grad_depthwiseconv_filter(x, dy, (*w_size.kernel_size, w_size.channel_multiplier, w_size.channels_in), **kw)
    n = x.ndim - 2
    cin = x.shape[-2]
    if dy.shape[-2] % cin:
        raise DimensionMismatch(f"grad_depthwiseconv_filter: {dy.shape[-2]} output channels for {cin} input channels")
    w_shape = _size_arg(w_size, n, (dy.shape[-2] // cin, cin), "w_size")
    dwg = grad_conv_filter(x, dy, w_shape[:n], stride=stride, pad=pad, dilation=dilation, flipped=flipped, groups=cin)
    return jnp.reshape(dwg, w_shape, order="F")


__all__ = [
    "grad_maxpool", "grad_meanpool", "grad_lpnormpool", "grad_upsample_nearest", "grad_upsample_linear",
    "grad_upsample_bilinear", "grad_upsample_trilinear", "grad_depthwiseconv_data", "grad_depthwiseconv_filter",
]
