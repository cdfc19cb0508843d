"""Input checks shared by layers: Flux's `_match_eltype` and size checks."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .errors import DimensionMismatch, describe


def name(layer) -> str:
    """The one-line Flux form of a layer (`Dense(2 => 3)`), for messages."""
    from .show import one_line

    return one_line(layer)

_warned: set[str] = set()


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def param_dtype(layer):
    """The dtype of the layer's first float array field, or None when it has none."""
    for v in getattr(layer, "__dict__", {}).values():
        d = getattr(v, "dtype", None)
        if d is not None and getattr(v, "shape", None) is not None and jnp.issubdtype(d, jnp.floating):
            return np.dtype(d)
    return None


def _foreign(layer, x):
    """Another library's array (a `torch.Tensor`, a CuPy array, ...) as a JAX array: through
    `__jax_array__`/`__array__` (`jnp.asarray`), or `__dlpack__`; otherwise a `TypeError` that says how."""
    try:
        return jnp.asarray(x)
    except Exception as first:  # noqa: BLE001 - any failure of the other library's conversion
        if hasattr(x, "__dlpack__"):
            try:
                return jax.dlpack.from_dlpack(x)
            except Exception:  # noqa: BLE001
                pass
        raise TypeError(
            f"Layer {name(layer)} cannot read a {type(x).__module__}.{type(x).__name__} as an array ({first}); "
            "convert it first, e.g. jnp.asarray(x.detach().cpu().numpy()) for a torch.Tensor"
        ) from None


def as_array(layer, x):
    """`x` as an array, or a `TypeError` naming the layer when it is not numeric data (a string,
    `None`, a ragged list, ...)."""
    if not isinstance(x, (jax.Array, np.ndarray, np.generic)) and (
        hasattr(x, "__array__") or hasattr(x, "__dlpack__") or hasattr(x, "__jax_array__")
    ):
        x = _foreign(layer, x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        # bfloat16 (an ml_dtypes type) has NumPy kind "V" but is a float to JAX
        if getattr(x.dtype, "kind", None) in ("O", "U", "S", "V") and not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"Layer {name(layer)} expects numeric array input, got {describe(x)}")
        return x
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise TypeError(f"Layer {name(layer)} expects numeric array input, got {type(x).__name__} {x!r:.60}")
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Layer {name(layer)} expects numeric array input, got {type(x).__name__}: {e}") from None


def match_eltype(layer, x, dtype=None):
    """Convert `x` to the layer's float type, as Flux: Float64 into a Float32 layer warns once (per
    layer type) and computes in Float32; a wider float into a float16 layer warns once too, with
    Flux's other advice (an earlier layer or the data was not converted with `f16`); integer and
    Bool input converts silently, and so does any input to a bfloat16 layer. `dtype=None` means the
    dtype of the layer's own float arrays (float32 for integer input to a layer without any)."""
    x = as_array(layer, x)
    xd = x.dtype
    if dtype is None:
        dtype = param_dtype(layer)
        if dtype is None:
            dtype = xd if jnp.issubdtype(xd, jnp.floating) else jnp.float32
    if xd == dtype:
        return x
    if jnp.issubdtype(xd, jnp.floating):
        if dtype == jnp.bfloat16:  # Flux converts any input for a BFloat16 layer silently
            return jnp.asarray(x, dtype)
        if np.dtype(xd).itemsize > np.dtype(dtype).itemsize:
            pd = np.dtype(dtype)
            # Flux warns (once each) in two cases, with different advice (src/layers/stateless.jl):
            # Float64 data into a Float32 model is slow; Float32 into a Float16 layer is a bug upstream
            key = type(layer).__name__ if pd == np.float32 else f"{type(layer).__name__}:{pd.name}"
            if key not in _warned:
                _warned.add(key)
                head = f"Layer {name(layer)} with {pd.name} parameters got {describe(x)} input; converting it to {pd.name}"
                if pd == np.float32:
                    msg = (f"{head}, which is slow and may be a mistake. "
                           "Convert the data with fluxjax.f32(x) (or the model with f64) to silence this.")
                else:
                    fn = {"float16": "f16"}.get(pd.name, pd.name)
                    msg = (f"{head}, but this may indicate a problem in earlier layers: one may still compute in "
                           f"{np.dtype(xd).name} (convert the whole model with fluxjax.{fn}), or the data was not "
                           f"converted (use fluxjax.{fn}(x)).")
                warnings.warn(msg, stacklevel=3)
            return jnp.asarray(x, dtype)
        return x
    if np.issubdtype(xd, np.integer) or np.issubdtype(xd, np.bool_):
        return jnp.asarray(x, dtype)
    if np.issubdtype(xd, np.complexfloating):
        return x
    raise TypeError(f"Layer {name(layer)} expects numeric input, got {describe(x)}")


def _perm(p: tuple[int, ...]) -> str:
    return "x.T" if p == (1, 0) else f"x.transpose{p}"


def _hint(shape: tuple, expected: int, kind: str) -> str:
    """A transpose that puts the axis of size `expected` where Flux wants it, when one is plain."""
    nd = len(shape)
    if nd < 2:
        return ""
    if kind == "features":  # wanted at axis 0, batch last
        if shape[-1] == expected:
            return ("batch goes last: try " if nd == 2 else "features go first, batch last: try ") + _perm(
                tuple(range(nd - 1, -1, -1))
            )
        return ""
    # channels, wanted at axis -2: (W, H, ..., C, N)
    if nd == 2:
        return f"batch goes last: try {_perm((1, 0))}" if shape[-1] == expected else ""
    if shape[-1] == expected:  # channels last, NHWC (TensorFlow / JAX's default)
        p = (*range(nd - 2, 0, -1), nd - 1, 0)
        return f"this looks channels-last (N, H, W, C); Flux takes (W, H, C, N): try {_perm(p)}"
    if shape[1] == expected:  # channels first, NCHW (PyTorch)
        return f"this looks channels-first (N, C, H, W); Flux takes (W, H, C, N): try {_perm(tuple(range(nd - 1, -1, -1)))}"
    return ""


def in_python_terms(layer, x, axis: int, expected: int, layout: str, kind: str = "features") -> str:
    """The Python reading of a size error, appended to Flux's text: which `x.shape` entry is wrong,
    and a transpose that fixes it when one is plain (`kind`: "features" wanted first, or "channels"
    wanted second-to-last)."""
    shape = tuple(np.shape(x))
    msg = f". In Python terms: {name(layer)} expects x.shape[{axis}] == {expected} ({layout}), got x.shape == {shape}"
    hint = _hint(shape, expected, kind)
    return msg + (f": {hint}" if hint else "")


def check_size(layer, x, axis: int, expected: int, what: str = "size(input, 1)"):
    if np.ndim(x) == 0 or x.shape[axis] != expected:
        raise DimensionMismatch(
            f"layer {name(layer)} expects {what} == {expected}, but got {describe(x)}"
            + in_python_terms(layer, x, axis, expected, "features first, batch last")
        )


def int_tuple(owner: str, what: str, value, n: int, minimum: int = 1) -> tuple[int, ...]:
    """`value`, an int or an `n`-tuple of ints each `>= minimum`, as an `n`-tuple; otherwise a
    `TypeError`/`ValueError` naming `owner` (a layer's name) and what was expected."""
    vals = (value,) * n if _is_int(value) else value
    if not isinstance(vals, (tuple, list)) or not all(_is_int(v) for v in vals):
        raise TypeError(f"{owner}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    if len(vals) != n:
        raise ValueError(f"{owner}: {what} {tuple(vals)} should have {n} entries, one per spatial dim")
    if any(v < minimum for v in vals):
        raise ValueError(f"{owner}: {what} must be {'positive' if minimum == 1 else f'>= {minimum}'}, got {value!r}")
    return tuple(int(v) for v in vals)


def check_callable(owner: str, what: str, f) -> None:
    """A `TypeError` naming `owner` unless `f` is None or callable (an activation, a connection)."""
    if f is not None and not callable(f):
        hint = " (pass the function itself, e.g. relu, not its name)" if isinstance(f, str) else ""
        raise TypeError(f"{owner}: {what} must be a function, got {type(f).__name__} {f!r}{hint}")
