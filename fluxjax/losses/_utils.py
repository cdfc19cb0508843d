"""Flux.Losses' `xlogy` and `xlogx` (`Flux/src/losses/utils.jl`), and the float helpers the losses share."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero


def _default_float() -> Any:
    # float32, or float64 when the user has enabled jax_enable_x64 (Julia's float(Int) is Float64)
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _as_float(*xs: Any) -> list[jax.Array]:
    arrs = [jnp.asarray(x) for x in xs]
    dt = jnp.result_type(*xs)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = _default_float()
    return [a.astype(dt) for a in arrs]


@jax.custom_jvp
def _xlogy(x: jax.Array, y: jax.Array) -> jax.Array:
    safe_y = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x * safe_y), x * jnp.log(safe_y))


def _xlogy_jvp(primals, tangents):
    # Flux's rule: ∂x = log(y), ∂y = x / y; the ∂y coefficient is 0 where x == 0 (the limit along
    # x = 0) rather than 0/0, and a tangent that is symbolically zero contributes nothing, so a
    # constant label x = 0 never multiplies log(0) = -inf.
    x, y = primals
    dx, dy = tangents
    out = _xlogy(x, y)
    tan = jnp.zeros_like(out)
    if not isinstance(dx, SymbolicZero):
        tan = tan + dx * jnp.log(y)
    if not isinstance(dy, SymbolicZero):
        safe_y = jnp.where(x == 0, jnp.ones_like(y), y)
        tan = tan + dy * jnp.where(x == 0, jnp.zeros_like(x * y), x / safe_y)
    return out, tan


_xlogy.defjvp(_xlogy_jvp, symbolic_zeros=True)


@jax.jit
def xlogy(x: Any, y: Any) -> jax.Array:
    """`x * log(y)`, and `0` where `x == 0` (even if `y == 0`), as `Flux.Losses.xlogy`.

    >>> xlogy(0.0, 0.0), xlogy(2.0, 3.0)   # (0.0, 2 log 3)
    (Array(0., dtype=float32), Array(2.1972, dtype=float32))
    """
    x, y = _as_float(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    return _xlogy(x, y)


@jax.custom_jvp
def _xlogx(x: jax.Array) -> jax.Array:
    safe = jnp.where(x == 0, jnp.ones_like(x), x)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(safe))


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _xlogx(x), dx * (jnp.log(x) + 1)


@jax.jit
def xlogx(x: Any) -> jax.Array:
    """`x * log(x)`, and `0` at `x == 0` (the limit from above), as `Flux.Losses.xlogx`.

    >>> xlogx(0.0), xlogx(2.0)             # (0.0, 2 log 2)
    (Array(0., dtype=float32), Array(1.3863, dtype=float32))
    """
    (x,) = _as_float(x)
    return _xlogx(x)
