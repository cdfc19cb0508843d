"""Zygote's `Buffer`: an array written element by element inside `gradient`, then frozen by `copy`."""

from __future__ import annotations

import jax.numpy as jnp


class Buffer:
    """Zygote's `Buffer`: write-then-freeze array building inside `gradient`.

    `buf = Buffer(x)` (same shape and dtype as `x`) or `Buffer(x, 3, 4)` (that shape); `buf[i] = v`
    rebinds functionally (`.at[i].set`), `buf.copy()` (or `copy.copy(buf)`) freezes it and returns
    the array. Unlike Zygote the contents start as zeros, not uninitialised memory.
    """

    def __init__(self, x, *dims: int):
        x = jnp.asarray(x)
        self.data = jnp.zeros(dims if dims else x.shape, x.dtype)
        self.frozen = False

    def __setitem__(self, i, v):
        if self.frozen:
            raise RuntimeError("Buffer is frozen: it was copied; make a new Buffer to write again")
        self.data = self.data.at[i].set(v)

    def __getitem__(self, i):
        return self.data[i]

    def __len__(self):
        return len(self.data)

    @property
    def shape(self):
        return self.data.shape

    def append(self, v):
        """Zygote's `push!` for a vector buffer."""
        if self.frozen:
            raise RuntimeError("Buffer is frozen: it was copied; make a new Buffer to write again")
        self.data = jnp.concatenate([self.data, jnp.reshape(jnp.asarray(v, self.data.dtype), (1,))])

    def copy(self):
        self.frozen = True
        return self.data

    __copy__ = copy

    def __repr__(self):
        return f"Buffer({self.data.dtype}{list(self.data.shape)})"
