"""Input checks shared by layers: Flux's `_match_eltype` and size checks."""

from __future__ import annotations

import numbers
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


def is_int(v) -> bool:
    """An integral number, as Julia's `Integer`: a Python or NumPy integer (any `numbers.Integral`), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def is_real(v) -> bool:
    """A real number, as Julia's `Real`: an int, a float, a NumPy integer or float (any `numbers.Real`), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def as_size(v):
    """A concrete 0-d integer array (`jnp.array(3)`) as a Python int, so that it reads as a size;
    anything else unchanged."""
    if (isinstance(v, (jax.Array, np.ndarray)) and not isinstance(v, jax.core.Tracer) and v.ndim == 0
            and np.issubdtype(v.dtype, np.integer)):
        return int(v)
    return v


def positive_ints(owner: str, *sizes, what: str = "sizes") -> tuple[int, ...]:
    """`sizes` as Python ints, each an integral number (`3`, `np.int64(3)`, `jnp.array(3)`) above 0;
    otherwise a `ValueError` naming `owner` (a layer's name)."""
    vals = tuple(as_size(s) for s in sizes)
    if not all(is_int(v) and v > 0 for v in vals):
        raise ValueError(f"{owner}: {what} must be positive integers, got {sizes}")
    return tuple(int(v) for v in vals)


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


def _arrays_in(seq) -> list:
    """The arrays of one or more dimensions in a (nested) list or tuple."""
    found = []
    for v in seq:
        if isinstance(v, (list, tuple)):
            found += _arrays_in(v)
        elif not isinstance(v, np.generic) and len(getattr(v, "shape", None) or ()) > 0:
            found.append(v)
    return found


_BATCH_HINT = ("for a batch of samples, stack them on the last axis, Flux's batch axis: jnp.stack(xs, axis=-1); "
               "to join features, jnp.concatenate(xs, axis=0)")


def _one_array(layer, x, hint: str) -> None:
    """A `TypeError` naming the layer when `x` is a tuple, or a list holding arrays, where one array is
    expected: numpy would stack them on axis 0, which a layer reads as the feature axis (Flux has no
    method for a tuple, and a list of arrays is no numeric array there either)."""
    if isinstance(x, tuple):
        why = ("a tuple is several inputs (Chain(x, y) passes the tuple (x, y) on; Parallel with a "
               "tuple-returning connection and PairwiseFusion return one), which a layer does not join for you")
    elif isinstance(x, list):
        why = "stacking them would put the list on axis 0, which the layer reads as the feature axis"
    else:
        return
    arrays = _arrays_in(x)
    if not arrays and isinstance(x, list):
        return  # a list of numbers: a literal array
    what = f"a {type(x).__name__} of {len(x)} items"
    if arrays:
        shapes = ", ".join(str(tuple(np.shape(a))) for a in arrays[:3]) + (", ..." if len(arrays) > 3 else "")
        what += f" holding arrays of shapes {shapes}"
    else:
        hint = "pass jnp.asarray(x), or a list"
    raise TypeError(f"Layer {name(layer)} expects one array, got {what}: {why}. Instead, {hint}.")


def as_array(layer, x, hint: str = _BATCH_HINT):
    """`x` as an array, or a `TypeError` naming the layer when it is not numeric data (a string,
    `None`, a ragged list, ...), or is several arrays: a tuple, or a list of arrays (`hint` says how to
    join them; by default into a batch)."""
    _one_array(layer, x, hint)
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
    vals = (value,) * n if is_int(value) else value
    if not isinstance(vals, (tuple, list)) or not all(is_int(v) for v in vals):
        raise TypeError(f"{owner}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    if len(vals) != n:
        raise ValueError(f"{owner}: {what} {tuple(vals)} should have {n} entries, one per spatial dim")
    if any(v < minimum for v in vals):
        raise ValueError(f"{owner}: {what} must be {'positive' if minimum == 1 else f'>= {minimum}'}, got {value!r}")
    return tuple(int(v) for v in vals)


def ints(owner: str, what: str, value) -> tuple[int, ...]:
    """`value`, an int or a tuple (list) of ints (`np.int64`, a 0-d integer array), as a tuple of Python
    ints; a float anywhere is a `TypeError` naming `owner` (NNlib's methods take `Integer`s only: a
    size or padding of `1.5` is a `MethodError` there, never rounded)."""
    v = as_size(value)
    vals = (v,) if is_int(v) else tuple(as_size(e) for e in v) if isinstance(v, (tuple, list)) else None
    if vals is None or not all(is_int(e) for e in vals):
        raise TypeError(f"{owner}: {what} must be an int or a tuple of ints, got {value!r}")
    return tuple(int(e) for e in vals)


def check_callable(owner: str, what: str, f) -> None:
    """A `TypeError` naming `owner` unless `f` is None or callable (an activation, a connection)."""
    if f is not None and not callable(f):
        hint = " (pass the function itself, e.g. relu, not its name)" if isinstance(f, str) else ""
        raise TypeError(f"{owner}: {what} must be a function, got {type(f).__name__} {f!r}{hint}")
