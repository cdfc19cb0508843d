"""NNlib's `unfold` (im2col) and `fold` (col2im, its adjoint), in Flux's layout."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import DimensionMismatch
from .conv import IntOrTuple, _conv
from .gradients import _transpose


def _kernel(kernel_size: tuple, channels: int, n: int, what: str) -> tuple[int, ...]:
    ks = tuple(kernel_size)
    if len(ks) == n + 2:  # NNlib passes size(w) = (k..., Cin, Cout)
        if ks[n] != channels:
            raise DimensionMismatch(f"{what}: kernel_size {ks} has {ks[n]} input channels, the array has {channels}")
        ks = ks[:n]
    if len(ks) != n or not all(isinstance(k, int) and k > 0 for k in ks):
        raise ValueError(
            f"{what}: kernel_size must be the kernel's spatial size ({n} positive ints) or the weight's size "
            f"(k..., Cin, Cout), got {tuple(kernel_size)}"
        )
    return ks


def _windows(what: str, x: jax.Array, ks: tuple, kw: dict) -> jax.Array:
    """conv with one one-hot kernel per window element: output channel j is element j of each window,
    elements numbered column-major over (k..., Cin), so that `unfold(x) ⊠ vec(w) == conv(x, w)`; the
    windows are checked as `conv`'s (errors name `what`)."""
    n, cin = x.ndim - 2, x.shape[-2]
    size = math.prod(ks) * cin
    onehot = np.eye(size, dtype=np.float32).reshape(*ks, cin, size, order="F")
    y = _conv(what, x, jnp.asarray(onehot, x.dtype), **kw)  # (out..., size, N)
    return jnp.reshape(y, (-1, size, x.shape[-1]), order="F") if n > 1 else y


def unfold(
    x: jax.typing.ArrayLike, kernel_size: tuple, *, stride: IntOrTuple = 1, pad: IntOrTuple = 0,
    dilation: IntOrTuple = 1, flipped: bool = True,
) -> jax.Array:
    """NNlib's `unfold`: the sliding windows of `x` `(spatial..., C, N)` as `(windows, prod(k)*C, N)`.

    The windows are `conv`'s for the same keywords (windows and window elements numbered column-major,
    as Julia), so `batched_mul(unfold(x, w.shape, **kw), w.reshape(-1, Cout, order="F"))` is
    `conv(x, w, **kw)` flattened. `kernel_size` is `w.shape` (or just the spatial kernel). `unfold` does not
    flip the kernel by default (`flipped=True`), where `conv` does.

    ```python
    >>> x = jnp.asarray([100, 2, 3, 40, 5, 6, 700.0]).reshape(7, 1, 1)
    >>> unfold(x, (3, 1, 1), pad=1, stride=2)[:, :, 0]   # Julia: [0 100 2; 2 3 40; 40 5 6; 6 700 0]
    Array([[  0., 100.,   2.],
           [  2.,   3.,  40.],
           [ 40.,   5.,   6.],
           [  6., 700.,   0.]], dtype=float32)

    ```
    """
    x = jnp.asarray(x)
    if x.ndim < 3:
        raise DimensionMismatch(f"unfold expects x of rank >= 3 (spatial..., C, N), got shape {x.shape}")
    ks = _kernel(kernel_size, x.shape[-2], x.ndim - 2, "unfold")
    return _windows("unfold", x, ks, dict(stride=stride, pad=pad, dilation=dilation, flipped=flipped))


def fold(
    y: jax.typing.ArrayLike, output_size: tuple, kernel_size: tuple, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = True,
) -> jax.Array:
    """NNlib's `fold`: the adjoint of `unfold`, summing windows `(windows, prod(k)*C, N)` back into an
    array of shape `output_size` `(spatial..., C, N)`. Where windows overlap it adds them up, so
    `fold(unfold(x)) / fold(unfold(ones))` recovers `x` where every element is in some window."""
    y = jnp.asarray(y)
    output_size = tuple(output_size)
    if len(output_size) < 3:
        raise ValueError(f"fold: output_size is the shape of x, (spatial..., C, N), got {output_size}")
    ks = _kernel(kernel_size, output_size[-2], len(output_size) - 2, "fold")
    kw = dict(stride=stride, pad=pad, dilation=dilation, flipped=flipped)
    return _transpose(lambda x: _windows("fold", x, ks, kw), output_size, y, lambda want: (
        f"fold into {output_size} with kernel {ks} expects y of shape {want} "
        f"(windows, window size, N), got {y.shape}"
    ))


__all__ = ["unfold", "fold"]
