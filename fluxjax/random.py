"""The global default RNG, as Flux's `Random.default_rng()`: `seed_(n)` makes runs reproducible.

Keys are raw `uint32[2]` JAX keys (`jax.random.PRNGKey`), so they are ordinary integer arrays:
never differentiated, trivially saved and loaded.
"""

from __future__ import annotations

import numbers
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core  # the trace now under way: no public API
from jax._src.interpreters.partial_eval import DynamicJaxprTrace


class DefaultRNG:
    """The holder of the global default key, `default_rng.key`. It is walked as a layer with one state
    field, so `fluxjax.jit` passes the key into every compiled program and takes the advanced key back:
    random draws inside compiled code (`randn32()`, `next_key()`, a layer built inside a step) differ
    from call to call, as Flux's default RNG."""

    __fluxjax_state__ = ("key",)

    def __init__(self):
        self.key: jax.Array | None = None


default_rng = DefaultRNG()

# The state thread (fluxjax.core.region) installs these when it is imported: `current_region()` and
# `rebind(obj, name, value)`. This module imports nothing of fluxjax, so every module can use it.
_thread: dict = {}


def use_state_thread(current_region, rebind, region_key) -> None:
    """Called by fluxjax.core.region: random draws inside a region advance the key through it, or take
    the region's own (`region_key()`: a key from the `rng` a region was given, else None)."""
    _thread.update(current_region=current_region, rebind=rebind, region_key=region_key)


def seed_(n: int) -> None:
    """Reset the global default key to `PRNGKey(n)` (Flux's `Random.seed!(n)`). `n` is any integer
    (a Python int, `np.int64(3)`, a 0-d integer array; not a bool); anything else raises `TypeError`.

    ```python
    >>> seed_(42)
    >>> a = glorot_uniform(2, 2)
    >>> seed_(42)
    >>> bool(jnp.all(glorot_uniform(2, 2) == a))   # the same numbers again
    True

    ```
    """
    if not is_int_seed(n):
        raise TypeError(f"seed_: got {_describe(n)}; expected an int seed (a Python int, a NumPy integer such as "
                        "np.int64(3), or a 0-d integer array; not a bool)")
    with jax.ensure_compile_time_eval():  # a concrete key, also when called inside a transformation
        default_rng.key = _seed_key(n, "seed_")


def default_key() -> jax.Array:
    """The global key as it is now (seeded with 0 on first use)."""
    if default_rng.key is None:
        seed_(0)
    return default_rng.key


def next_key() -> jax.Array:
    """Split the global key and return a fresh subkey. Inside one of fluxjax's regions (`gradient`,
    `fluxjax.jit`, `train_`'s step) the advanced key goes through the state thread, so a compiled
    program returns it and the next call draws anew. Under a plain jax transformation the split happens
    now, on the concrete key (the subkey is then a constant of that traced program)."""
    key = default_key()
    if _thread and _thread["current_region"]() is not None:
        given = _thread["region_key"]()  # (functional's apply: its rng; without one this raises)
        if given is not None:
            return given
        key, sub = jax.random.split(key)
        _thread["rebind"](default_rng, "key", key)
        return sub
    with jax.ensure_compile_time_eval():
        default_rng.key, sub = jax.random.split(key)
    return sub


def _staged() -> bool:
    """Whether a JAX transformation that stages a program (`jax.jit`, `lax.scan`, `lax.fori_loop`,
    `jax.eval_shape`) is tracing now, also beneath a `jax.grad` or `jax.vmap` of it."""
    ctx = getattr(jax_core, "trace_ctx", None)
    t = None if ctx is None else ctx.trace
    for _ in range(64):
        if t is None:
            return False
        if isinstance(t, DynamicJaxprTrace):
            return True
        t = getattr(t, "parent_trace", None)
    return False


def _shapes_only() -> bool:
    """Whether the trace under way is `jax.eval_shape`'s (whose values nobody reads): its frame is on
    the stack (the trace itself is the same kind as `jax.jit`'s)."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if code.co_name == "eval_shape" and os.path.join("jax", "_src") in code.co_filename:
            return True
        f = f.f_back
    return False


class GlobalKeyUnderTrace(RuntimeError):
    """`draw_key`'s error: a draw from the global key under a plain staging trace (see there)."""


def draw_key(rng, what: str) -> jax.Array:
    """`resolve_key(rng, what)` for a draw in a forward pass (`dropout(x, p)`, `rrelu`, `rand_like`).
    With `rng=None` under a plain JAX transformation that stages a program (no fluxjax call around it),
    the key split off the global one would be a constant of that program: the same noise at every call
    of a `jax.jit` function and at every step of a `lax.scan`, where Flux draws anew. That raises."""
    if rng is None and not (_thread and _thread["current_region"]() is not None) and _staged() and not _shapes_only():
        raise GlobalKeyUnderTrace(
            f"{what} drew from the global key under a JAX transformation (jax.jit, lax.scan, lax.fori_loop) "
            "outside fluxjax's calls: the key would be a constant of the traced program, the same noise at "
            "every call and every step (Flux draws anew). Pass a key (dropout(key, x, p), rng=key) split from "
            "one you thread through the loop, or trace with fluxjax.jit / gradient / train_, which thread the "
            "global key, or use functional's apply(..., rng=key)")
    return resolve_key(rng, what)


ACCEPTED = ("None (a key drawn from the global RNG, see seed_), an int seed (a Python int, a NumPy integer such as "
            "np.int64(3), or a 0-d integer array; not a bool), a JAX PRNG key (jax.random.PRNGKey(n), a uint32[2] "
            "array, or a typed jax.random.key(n)), or a NumPy Generator (np.random.default_rng(n))")


def _describe(v) -> str:
    t = type(v)
    if isinstance(v, jax.Array):
        kind = "jax.Array"
    else:
        kind = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{kind} of shape {tuple(shape)} and dtype {dtype}"
    return f"{kind} {v!r:.60}"


def is_int_seed(v) -> bool:
    """An integer seed: a Python or NumPy integer, or a 0-d integer array (traced ones too); never a bool."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, numbers.Integral):
        return True
    dtype = getattr(v, "dtype", None)
    return (isinstance(v, (jax.Array, np.ndarray)) and np.ndim(v) == 0 and dtype is not None
            and not is_typed_key(v) and np.dtype(dtype).kind in "iu")


def _raw_key_shape() -> tuple[int, ...]:
    """The shape of a raw key of the default PRNG implementation (`(2,)` for threefry)."""
    with jax.ensure_compile_time_eval():
        return tuple(jax.eval_shape(lambda: jax.random.PRNGKey(0)).shape)


def _is_usable_key(a) -> bool:
    if is_typed_key(a):
        return a.ndim == 0
    return (isinstance(a, (jax.Array, np.ndarray)) and a.dtype == np.uint32
            and tuple(a.shape) in {(2,), _raw_key_shape()})


def check_rng(rng, where: str | None = None) -> None:
    """Raise a `TypeError` naming `where` (the layer or function), what was given
    and what is accepted, when `rng` is none of what `resolve_key` takes. Draws nothing."""
    if rng is None or is_int_seed(rng) or _is_usable_key(rng) or isinstance(rng, np.random.Generator):
        return
    hint = ""
    if is_typed_key(rng):
        hint = " (one key, not a batch of keys: a typed key array of shape ())"
    elif isinstance(rng, (jax.Array, np.ndarray)) and np.ndim(rng) > 0:
        hint = " (an array is taken for a key only as uint32 of shape (2,), as jax.random.PRNGKey(n) makes)"
    raise TypeError(f"{where or 'a random function'}: got rng={_describe(rng)}{hint}; rng must be {ACCEPTED}")


def _seed_key(n, where: str) -> jax.Array:
    if isinstance(n, numbers.Integral) and not isinstance(n, (int, np.integer)):
        n = int(n)  # another library's integer type
    try:
        return jax.random.PRNGKey(n)
    except OverflowError:
        raise ValueError(f"{where}: the int seed {n} is out of range for a JAX seed (a signed 64-bit int); "
                         "use a smaller seed") from None


def resolve_key(rng, where: str | None = None) -> jax.Array:
    """`rng=None` draws from the global key; an int seed (also `np.int64(3)`) seeds a key; a key array
    is used as is; a NumPy Generator gives a key drawn from it (reproducible from its seed). Anything
    else raises a `TypeError` naming `where` (the layer or function) and what is
    accepted."""
    if rng is None:
        return next_key()
    check_rng(rng, where)
    if is_int_seed(rng):
        return _seed_key(rng, where or "rng")
    if isinstance(rng, np.random.Generator):
        with jax.ensure_compile_time_eval():
            return jnp.asarray(rng.integers(0, 2**32, size=_raw_key_shape(), dtype=np.uint32))
    return rng


def is_typed_key(a) -> bool:
    """A typed PRNG key array (`jax.random.key`, dtype `key<impl>`)."""
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jax.dtypes.prng_key)


def is_key(a) -> bool:
    """A PRNG key: a typed key array, or a raw `uint32[2]` key, the form this library keeps its keys in
    (a genuine `uint32[2]` data array is taken for a key too)."""
    if is_typed_key(a):
        return True
    return isinstance(a, (jax.Array, np.ndarray)) and a.dtype == np.uint32 and a.shape == (2,)
