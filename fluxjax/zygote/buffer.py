"""Zygote's `Buffer`: an array written element by element inside `gradient`, then frozen by `copy`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class Buffer:
    """Zygote's `Buffer`: write-then-freeze array building inside `gradient`.

    `buf = Buffer(x)` (same shape and dtype as `x`) or `Buffer(x, 3, 4)` (that shape); `buf[i] = v`
    rebinds functionally (`.at[i].set`), `buf.copy()` (or `copy.copy(buf)`) freezes it and returns
    the array. Unlike Zygote the contents start as zeros, not uninitialised memory.

    A Buffer of arrays (Julia's `Buffer(Vector{Matrix}(...))`): `Buffer([a, b])` or `Buffer([], n)` holds
    a list whose entries are any values (arrays of any shapes, `None` until written); `copy` returns the
    list. Both kinds support `append` (Zygote's `push!`) and `del buf[i]` (Zygote's `deleteat!`).

    ```python
    >>> def f(x):
    ...     buf = Buffer([], 2)
    ...     buf[0], buf[1] = x, 2 * x
    ...     return sum(jnp.sum(v) for v in buf.copy())
    >>> gradient(f, jnp.ones(3))
    (Array([3., 3., 3.], dtype=float32),)

    ```
    """

    def __init__(self, x: Any, *dims: int):
        if isinstance(x, list):
            if len(dims) > 1:
                raise TypeError(f"Buffer(list, n): a Buffer of arrays is a vector, got the sizes {dims}")
            self.data: Any = [None] * (dims[0] if dims else len(x))
        else:
            x = jnp.asarray(x)
            self.data = jnp.zeros(dims if dims else x.shape, x.dtype)
        self.frozen = False

    def _check(self):
        if self.frozen:
            raise RuntimeError("Buffer is frozen: it was copied; make a new Buffer to write again")

    def __setitem__(self, i, v):
        self._check()
        if isinstance(self.data, list):
            self.data[i] = v
        else:
            self.data = self.data.at[i].set(_exact(v, self.data.dtype))

    def __getitem__(self, i):
        return self.data[i]

    def __delitem__(self, i):
        """Zygote's `deleteat!(buf, i)`: remove entry `i` (an int, or a slice) along the first axis."""
        self._check()
        if isinstance(self.data, list):
            del self.data[i]
        else:
            idx = jnp.arange(len(self.data))[i]
            self.data = jnp.delete(self.data, idx, axis=0, assume_unique_indices=True)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        return iter(list(self.data) if isinstance(self.data, list) else [self.data[i] for i in range(len(self.data))])

    @property
    def shape(self):
        return (len(self.data),) if isinstance(self.data, list) else self.data.shape

    def append(self, v):
        """Zygote's `push!` for a vector buffer."""
        self._check()
        if isinstance(self.data, list):
            self.data.append(v)
        else:
            self.data = jnp.concatenate([self.data, jnp.reshape(jnp.asarray(_exact(v, self.data.dtype), self.data.dtype), (1,))])

    def copy(self):
        self.frozen = True
        return list(self.data) if isinstance(self.data, list) else self.data

    __copy__ = copy

    def __repr__(self):
        if isinstance(self.data, list):
            return f"Buffer(list[{len(self.data)}])"
        return f"Buffer({self.data.dtype}{list(self.data.shape)})"


def _exact(v: Any, dtype) -> Any:
    """`v`, checked to fit a Buffer of `dtype` as Julia's `setindex!` converts it: a float into an integer
    buffer, or a complex number into a real one, must be exact (else Julia's `InexactError`, where JAX
    would silently truncate it and drop its gradient). A traced value cannot be checked, so it must
    have a kind the buffer holds."""
    if isinstance(v, (bool, int)) or jnp.can_cast(jnp.result_type(v), dtype, casting="same_kind"):
        return v
    if isinstance(v, jax.core.Tracer):
        raise TypeError(
            f"Buffer: cannot store a traced {jnp.result_type(v)} value in a Buffer of {dtype} (Julia's "
            "InexactError; its gradient would be lost). Make the Buffer with the value's type: Buffer(x, dims...) "
            "takes the element type of x."
        )
    a = np.asarray(v)
    if np.iscomplexobj(a) and not jnp.issubdtype(dtype, jnp.complexfloating):
        if np.any(a.imag != 0):
            raise TypeError(f"Buffer: InexactError: {a!r} does not fit a Buffer of {dtype}")
        a = a.real
    if not np.array_equal(a.astype(dtype), a):
        raise TypeError(f"Buffer: InexactError: {a!r} does not fit a Buffer of {dtype}")
    return jnp.asarray(a, dtype)
