"""`f32`, `f64`, `cpu`, `gpu`: precision and placement of a whole model (Flux's `f32`/`gpu`)."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .functors import fmap, is_array


def _cast(dtype):
    def f(x):
        if is_array(x) and np.issubdtype(x.dtype, np.floating) and x.dtype != dtype:
            return jnp.asarray(x, dtype)
        return x

    return f


def f32(m: Any) -> Any:
    """Convert every float array in `m` to float32 (integer arrays and RNG keys are left alone)."""
    return fmap(_cast(jnp.float32), m)


def f64(m: Any) -> Any:
    """Convert every float array in `m` to float64. Needs `jax.config.update("jax_enable_x64", True)`."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError("f64: float64 needs jax_enable_x64; call jax.config.update('jax_enable_x64', True) first")
    return fmap(_cast(jnp.float64), m)


def cpu(m: Any) -> Any:
    """Move every array in `m` to the first CPU device."""
    dev = jax.devices("cpu")[0]
    return fmap(lambda x: jax.device_put(x, dev) if is_array(x) else x, m)


def gpu(m: Any) -> Any:
    """Move every array in `m` to the first accelerator (GPU or TPU); without one, warn once and
    return `m` unchanged, as Flux does."""
    try:
        dev = next(d for d in jax.devices() if d.platform != "cpu")
    except StopIteration:
        warnings.warn("gpu: no GPU or TPU is visible to JAX; the model stays on the CPU", stacklevel=2)
        return m
    return fmap(lambda x: jax.device_put(x, dev) if is_array(x) else x, m)
