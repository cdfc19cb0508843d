"""Checksums of checkpoint arrays, computed where the arrays live (no host copy of a device array)."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def digest(a: np.ndarray) -> str:
    """sha256 of a host array's bytes: the per-array check of format versions 1 and 2."""
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).tobytes()).hexdigest()


def _sums(u: Any, xp: Any) -> Any:
    """Three wrapping uint32 sums of the words `u` (order-sensitive: a moved, flipped or zeroed word changes them)."""
    i = xp.arange(u.shape[0], dtype=xp.uint32)
    mixed = ((u ^ (u >> xp.uint32(16))) * xp.uint32(0x45D9F3B)) ^ (i * xp.uint32(0x9E3779B9))
    return xp.stack([xp.sum(u, dtype=xp.uint32), xp.sum(u * (i * xp.uint32(2) + xp.uint32(1)), dtype=xp.uint32),
                     xp.sum(mixed, dtype=xp.uint32)])


def _host_words(a: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return np.concatenate([b, np.zeros(-b.size % 4, np.uint8)]).view("<u4")


@functools.partial(jax.jit, static_argnums=1)
def _device_sums(a: jax.Array, itemsize: int) -> jax.Array:
    """`_sums` of the array's little-endian bytes as uint32 words, computed where `a` lives (any sharding)."""
    if jnp.issubdtype(a.dtype, jnp.complexfloating):
        a = jnp.stack([a.real, a.imag], axis=-1)
        itemsize //= 2
    if a.dtype == jnp.bool_:
        a = a.astype(jnp.uint8)
    a = a.reshape(-1)
    if itemsize >= 4:
        u = jax.lax.bitcast_convert_type(a, jnp.uint32).reshape(-1)
    else:
        bits = 8 * itemsize
        u = jax.lax.bitcast_convert_type(a, jnp.uint8 if itemsize == 1 else jnp.uint16).astype(jnp.uint32)
        per = 4 // itemsize
        u = jnp.concatenate([u, jnp.zeros(-u.shape[0] % per, jnp.uint32)]).reshape(-1, per)
        u = sum(u[:, j] << jnp.uint32(bits * j) for j in range(per))
    return _sums(u, jnp)


def checksum(a: Any) -> str:
    """Checksum of an array's dtype, shape and bytes: a jax array's is computed by XLA where it lives (a
    sharded array's on its devices; no host copy), a numpy array's on the host. Both give the same value."""
    dt = np.dtype(a.dtype)
    if isinstance(a, jax.Array) and dt.itemsize in (1, 2, 4, 8, 16) and dt.kind in "biufc":
        s = _device_sums(a, dt.itemsize)
        s = np.asarray(s.addressable_data(0))
    else:
        s = _sums(_host_words(np.asarray(a)), np)
    return "".join(f"{int(x):08x}" for x in s)
