"""Flux's `copyto!` as loading uses it: an array loaded into a destination array becomes a new array of
the destination's dtype and placement, exactly or not at all (`InexactError`), and `show_path`, how
loading names a place in a model."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .core.layer import is_array
from .errors import DimensionMismatch
from .random import is_typed_key


def show_path(path: tuple) -> str:
    """`("layers", 0, "weight")` -> `layers[0].weight`, as fluxjax writes attribute paths."""
    s = ""
    for p in path:
        if isinstance(p, int):
            s += f"[{p}]"
        elif isinstance(p, str) and p.isidentifier():
            s += f".{p}" if s else p
        else:
            s += f"[{p!r}]"
    return s or "the top level"


def convert(dst: Any, src: Any, path: tuple) -> Any:
    """The value that replaces array `dst`, from array `src`: always a new array (never `src` itself nor one
    sharing its buffer, as Flux's `copyto!` writes into the destination's own array), in `dst`'s dtype and
    placement. Raises DimensionMismatch on a size mismatch and `InexactError` when a value of `src` cannot
    be represented in `dst`'s dtype."""
    if is_typed_key(dst):
        if is_typed_key(src):
            data = jax.random.key_data(src)
        else:
            data = src
        want = jax.random.key_data(dst)
        if tuple(np.shape(data)) != tuple(want.shape):
            raise DimensionMismatch(f"loadmodel_: {show_path(path)}: tried to load key data of size {tuple(np.shape(data))} "
                                    f"into a key array whose data has size {tuple(want.shape)}")
        _check_exact(data, want.dtype, path)
        new = jax.random.wrap_key_data(jnp.array(data, want.dtype, copy=True), impl=jax.random.key_impl(dst))
        return _place(new, dst)
    if is_typed_key(src):
        src = jax.random.key_data(src)
    if tuple(np.shape(src)) != tuple(dst.shape):
        raise DimensionMismatch(f"loadmodel_: {show_path(path)}: tried to load size {tuple(np.shape(src))} array "
                                f"into size {tuple(dst.shape)}")
    _check_exact(src, dst.dtype, path)
    if _kind(_dtype(src)) == "c" and _kind(dst.dtype) != "c":
        src = src.real  # checked: no imaginary part
    if isinstance(dst, np.ndarray):
        if isinstance(src, jax.core.Tracer):
            raise TypeError(f"loadmodel_: {show_path(path)}: cannot load a traced value into a NumPy array; "
                            "load outside the transformation, or make the destination a jax array")
        with np.errstate(over="ignore"):  # float64 -> float32 may round to ±inf, as Julia's Float32(x)
            return np.array(src, dtype=dst.dtype, copy=True)
    with np.errstate(over="ignore"):
        return _place(jnp.array(src, dtype=dst.dtype, copy=True), dst)


class InexactError(ValueError):
    """`loadmodel_` (and `load`, `import_npz_`, `import_safetensors_`) met a value that the destination's
    dtype cannot hold: a complex number with a non-zero imaginary part into a real array, a fractional,
    non-finite or out-of-range number into an integer array, an integer out of a narrower integer type's
    range, anything but 0 and 1 into a boolean array (Julia's `InexactError` from `copyto!`). Lowering a
    float's precision (float64 into float32) is allowed, as in Flux. A `ValueError`; nothing was loaded."""


def _kind(dt: Any) -> str:
    """'b' bool, 'i' integer (signed or unsigned), 'f' real floating (bfloat16, fp8 too), 'c' complex."""
    dt = jnp.dtype(dt)
    if dt == jnp.bool_:
        return "b"
    if jnp.issubdtype(dt, jnp.complexfloating):
        return "c"
    if jnp.issubdtype(dt, jnp.integer):
        return "i"
    if jnp.issubdtype(dt, jnp.floating):
        return "f"
    return "?"


def _dtype(x: Any) -> Any:
    return jnp.dtype(x.dtype if is_array(x) else np.asarray(x).dtype)


def _check_exact(src: Any, dtype: Any, path: tuple) -> None:
    """Raise `InexactError` (naming the path, both dtypes and an offending value) unless every value of
    `src` can be represented in `dtype`; float precision may drop. Only read when a conversion can lose
    a value; inside a trace, where values are unknown, such a conversion is refused."""
    sdt, ddt = _dtype(src), jnp.dtype(dtype)
    if sdt == ddt:
        return
    sk, dk = _kind(sdt), _kind(ddt)
    if dk == "c" or (dk == "f" and sk != "c") or sk == "b":
        return  # real into complex, real into real float, bool into anything: exact or a precision drop
    here = show_path(path)
    if dk == "?" or sk == "?":
        raise TypeError(f"loadmodel_: {here}: cannot load a {sdt} array into a {ddt} array")
    if dk == "i" and sk == "i":
        si, di = jnp.iinfo(sdt), jnp.iinfo(ddt)
        if di.min <= si.min and si.max <= di.max:
            return
    if isinstance(src, jax.core.Tracer):
        raise TypeError(f"loadmodel_: {here}: loading {sdt} values into a {ddt} array can lose values, and they "
                        "cannot be checked while tracing; convert the source to the destination's dtype first, "
                        "or load outside fluxjax.jit / gradient")
    xp = np if not isinstance(src, jax.Array) else jnp
    v = xp.asarray(src)
    bad = xp.zeros(v.shape, bool)
    if sk == "c":
        bad = bad | (xp.imag(v) != 0)
        v = xp.real(v)
        sk = "f"
    if dk == "b":
        bad = bad | ((v != 0) & (v != 1))
    elif sk == "f" and dk == "i":  # into an integer type: finite, integral, in range (bounds are powers of two: exact)
        if xp is np:
            v = v.astype(np.float64)
        else:
            v = v.astype(jnp.promote_types(v.dtype, jnp.float32))
        di = jnp.iinfo(ddt)
        lo, hi = float(di.min), float(di.max) + 1.0
        bad = bad | ~xp.isfinite(v) | (xp.floor(v) != v) | (v < lo) | (v >= hi)
    elif sk == "i" and dk == "i":
        si, di = jnp.iinfo(v.dtype), jnp.iinfo(ddt)
        if di.max < si.max:
            bad = bad | (v > v.dtype.type(di.max))
        if di.min > si.min:
            bad = bad | (v < v.dtype.type(di.min))
    if not bool(xp.any(bad)):
        return
    flat = np.asarray(src).reshape(-1)
    i = int(np.argmax(np.asarray(bad).reshape(-1)))
    where = f" at index {tuple(int(j) for j in np.unravel_index(i, np.shape(src)))}" if np.ndim(src) else ""
    raise InexactError(f"loadmodel_: {here}: cannot load {sdt} into {ddt} exactly: the source holds "
                       f"{flat[i].item()!r}{where}, which {ddt} cannot represent; nothing was loaded. Convert the "
                       "source explicitly (round, clip, take the real part) if that loss is intended")


def _place(new: Any, dst: Any) -> Any:
    """Put `new` where `dst` lives: same sharding when `dst` is committed to devices (so that compiled
    steps and shardings carry on), left uncommitted on the default device otherwise, as fresh arrays are."""
    if isinstance(dst, jax.core.Tracer) or isinstance(new, jax.core.Tracer):
        return new
    if getattr(dst, "committed", False) or new.sharding != dst.sharding:
        return jax.device_put(new, dst.sharding)
    return new


__all__ = ["InexactError", "convert", "show_path"]
