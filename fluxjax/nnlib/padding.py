"""NNlib's padding functions: `pad_zeros`, `pad_constant`, `pad_repeat`, `pad_reflect`,
`pad_symmetric`, `pad_circular`.

`dims` are 0-based axes (Flux's `dims=1` is `dims=0`; `-1` is the last), each named once; an axis the
array does not have raises. `pad` is an int, a tuple with one entry per padded dim (symmetric), or
`(lo1, hi1, lo2, hi2, ...)`, every entry >= 0. As NNlib, `pad_reflect` pads at most `n - 1` and
`pad_symmetric`/`pad_circular` at most `n` on each side of an axis of length `n`.

Defaults follow NNlib: `pad_constant`/`pad_zeros` pad every dim; the other modes pad the first
`len(pad) // 2` dims for a tuple, and the spatial dims (all but the last two) for an int.
Example: `pad_zeros(jnp.ones((2, 2)), 1).shape == (4, 4)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import jax
import jax.numpy as jnp

from .._checks import as_size, ints, is_int
from .axes import axes

PadSpec = int | Sequence[int]
DimSpec = int | Sequence[int] | None


def _dims(fn: str, dims: DimSpec, shape: tuple[int, ...], default: Sequence[int]) -> tuple[int, ...]:
    if dims is None:
        return tuple(default)
    ds = axes(fn, dims, shape)
    if len(set(ds)) < len(ds):
        raise ValueError(f"{fn}: dims={dims!r} names an axis twice; give each axis once, with its padding")
    return ds


def _pairs(fn: str, pad: PadSpec, dims: tuple[int, ...], ndim: int, allow_symmetric: bool) -> list[tuple[int, int]]:
    """Per-axis `(lo, hi)` for all `ndim` axes, zero on axes not in `dims` (NNlib's `gen_pad`)."""
    if is_int(as_size(pad)):
        flat = [int(as_size(pad))] * (2 * len(dims))
    else:
        pad = ints(fn, "pad", pad)
        if allow_symmetric and len(pad) == len(dims):
            flat = [p for p in pad for _ in range(2)]
        elif len(pad) == 2 * len(dims):
            flat = list(pad)
        else:
            each = "one entry (both sides) or two (lo, hi)" if allow_symmetric else "two entries (lo, hi)"
            raise ValueError(f"{fn}: Could not parse padding {pad} and dims {dims}: give {each} per padded axis")
    if any(p < 0 for p in flat):
        raise ValueError(f"{fn}: padding must be >= 0, got {pad!r}; to crop, index the array instead (x[1:-1])")
    pairs = [(0, 0)] * ndim
    for i, d in enumerate(dims):
        pairs[d] = (flat[2 * i], flat[2 * i + 1])
    return pairs


def pad_constant(x: jax.typing.ArrayLike, pad: PadSpec, val: float = 0, *, dims: DimSpec = None) -> jax.Array:
    """Pad `x` with the constant `val`; by default on every dim.

    `pad_constant(jnp.ones((2, 2)), (1, 2, 3, 4), 8).shape == (5, 9)`.

    ```python
    >>> pad_constant(jnp.array([1.0, 2.0, 3.0]), (2, 1), 9)
    Array([9., 9., 1., 2., 3., 9.], dtype=float32)
    >>> pad_constant(jnp.ones((2, 2)), 1, dims=0).shape   # 1 on both sides of axis 0 only
    (4, 2)

    ```
    """
    return _pad_constant("pad_constant", x, pad, val, dims)


def _pad_constant(fn: str, x, pad: PadSpec, val, dims: DimSpec) -> jax.Array:
    x = jnp.asarray(x)
    dims_ = _dims(fn, dims, x.shape, range(x.ndim))
    return jnp.pad(x, _pairs(fn, pad, dims_, x.ndim, True), constant_values=val)


def pad_zeros(x: jax.typing.ArrayLike, pad: PadSpec, *, dims: DimSpec = None) -> jax.Array:
    """Pad `x` with zeros: `pad_constant(x, pad, 0; dims)`.

    ```python
    >>> pad_zeros(jnp.array([1.0, 2.0, 3.0]), (2, 1))
    Array([0., 0., 1., 2., 3., 0.], dtype=float32)
    >>> pad_zeros(jnp.ones((2, 2, 1, 1)), 1).shape   # every axis
    (4, 4, 3, 3)

    ```
    """
    return _pad_constant("pad_zeros", x, pad, 0, dims)


def _pad_mode(x, pad: PadSpec, dims: DimSpec, mode: str, fn: str) -> jax.Array:
    x = jnp.asarray(x)
    if isinstance(pad, Integral):
        default = range(x.ndim - 2)
    else:
        pad = ints(fn, "pad", pad)
        if len(pad) % 2:
            raise ValueError(f"{fn}: padding {tuple(pad)} must have an even length (lo1, hi1, lo2, hi2, ...)")
        default = range(len(pad) // 2)
    dims_ = _dims(fn, dims, x.shape, default)
    pairs = _pairs(fn, pad, dims_, x.ndim, False)
    for d, (lo, hi) in enumerate(pairs):  # NNlib copies slices of x itself: at most this much per side
        most = {"reflect": x.shape[d] - 1, "symmetric": x.shape[d], "wrap": x.shape[d]}.get(mode)
        if most is not None and max(lo, hi) > most:
            raise ValueError(f"{fn}: padding {(lo, hi)} on axis {d} of x with shape {tuple(x.shape)} is more than "
                             f"its {most} available values (NNlib's BoundsError); pad with a smaller amount")
    return jnp.pad(x, pairs, mode=mode)


def pad_repeat(x: jax.typing.ArrayLike, pad: PadSpec, *, dims: DimSpec = None) -> jax.Array:
    """Pad by repeating the border values (`[1,2,3]` with `(2,1)` gives `[1,1,1,2,3,3]`).

    ```python
    >>> pad_repeat(jnp.array([1.0, 2.0, 3.0]), (2, 1))
    Array([1., 1., 1., 2., 3., 3.], dtype=float32)

    ```
    """
    return _pad_mode(x, pad, dims, "edge", "pad_repeat")


def pad_reflect(x: jax.typing.ArrayLike, pad: PadSpec, *, dims: DimSpec = None) -> jax.Array:
    """Pad by reflecting across the border, excluding it (`[1,2,3]` with `(2,1)` gives `[3,2,1,2,3,2]`).

    ```python
    >>> pad_reflect(jnp.array([1.0, 2.0, 3.0]), (2, 1))
    Array([3., 2., 1., 2., 3., 2.], dtype=float32)

    ```
    """
    return _pad_mode(x, pad, dims, "reflect", "pad_reflect")


def pad_symmetric(x: jax.typing.ArrayLike, pad: PadSpec, *, dims: DimSpec = None) -> jax.Array:
    """Pad by reflecting including the border (`[1,2,3]` with `(2,1)` gives `[2,1,1,2,3,3]`).

    ```python
    >>> pad_symmetric(jnp.array([1.0, 2.0, 3.0]), (2, 1))
    Array([2., 1., 1., 2., 3., 3.], dtype=float32)

    ```
    """
    return _pad_mode(x, pad, dims, "symmetric", "pad_symmetric")


def pad_circular(x: jax.typing.ArrayLike, pad: PadSpec, *, dims: DimSpec = None) -> jax.Array:
    """Pad by wrapping around (`[1,2,3]` with `(2,1)` gives `[2,3,1,2,3,1]`).

    ```python
    >>> pad_circular(jnp.array([1.0, 2.0, 3.0]), (2, 1))
    Array([2., 3., 1., 2., 3., 1.], dtype=float32)

    ```
    """
    return _pad_mode(x, pad, dims, "wrap", "pad_circular")


__all__ = ["pad_zeros", "pad_constant", "pad_repeat", "pad_reflect", "pad_symmetric", "pad_circular"]
