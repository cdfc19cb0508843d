"""Input checks shared by layers: Flux's `_match_eltype` and size checks."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from .errors import DimensionMismatch, describe


def name(layer) -> str:
    """The one-line Flux form of a layer (`Dense(2 => 3)`), for messages."""
    from .show import one_line

    return one_line(layer)

_warned: set[str] = set()


def match_eltype(layer, x, dtype=None):
    """Convert `x` to the layer's float type, as Flux: Float64 into a Float32 layer warns once (per
    layer type) and computes in Float32; integer and Bool input converts silently."""
    if dtype is None:
        dtype = jnp.float32
    xd = getattr(x, "dtype", None)
    if xd is None:
        x = jnp.asarray(x)
        xd = x.dtype
    if xd == dtype:
        return x
    if np.issubdtype(xd, np.floating):
        if np.dtype(xd).itemsize > np.dtype(dtype).itemsize:
            kind = type(layer).__name__
            if kind not in _warned:
                _warned.add(kind)
                warnings.warn(
                    f"Layer {name(layer)} with {np.dtype(dtype).name} parameters got {describe(x)} input; "
                    f"converting it to {np.dtype(dtype).name}, which is slow and may be a mistake. "
                    "Convert the data with fluxjax.f32(x) (or the model with f64) to silence this.",
                    stacklevel=3,
                )
            return jnp.asarray(x, dtype)
        return x
    if np.issubdtype(xd, np.integer) or np.issubdtype(xd, np.bool_):
        return jnp.asarray(x, dtype)
    if np.issubdtype(xd, np.complexfloating):
        return x
    raise TypeError(f"Layer {name(layer)} expects numeric input, got {describe(x)}")


def check_size(layer, x, axis: int, expected: int, what: str = "size(input, 1)"):
    if np.ndim(x) == 0 or x.shape[axis] != expected:
        raise DimensionMismatch(
            f"layer {name(layer)} expects {what} == {expected}, but got {describe(x)}"
        )
