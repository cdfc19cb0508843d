"""Flux-style printing of models: one line per layer with its parameter count, and a total.

The text is Flux's (`Flux.jl/src/layers/show.jl`): a top-level layer's comment starts at column 20,
a layer inside a container has its comment at column 40, both at least two spaces after the text;
counts are written `50_240`; the total of a container with more than two trainable arrays follows
its closing bracket at column 20, with the arrays' size written as Julia's `Base.format_bytes`.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from .core.layer import is_array, is_float_array, is_layer, trainable, use_layer_repr
from .core.trainables import trainable_arrays
from .core.walk import walk
from .random import is_key

_TOP_COL, _INNER_COL = 20, 39


def _dedup(xs):
    seen, out = set(), []
    for x in xs:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def counts(m: Any) -> tuple[list, list]:
    """(trainable arrays, other numeric arrays) of a layer tree, each array once: the trainable view
    (`core.trainables`), and every other array the walk reaches."""
    train = _dedup([a for _, a in trainable_arrays(m)])
    ids = {id(x) for x in train}
    other = [x for x in _dedup(walk([m]).leaves) if is_array(x) and id(x) not in ids and _is_numeric(x)]
    return train, other


def _is_numeric(x) -> bool:
    """Julia's `AbstractArray{<:Number}`, which Flux's `_childarray_sum` counts: float, integer and bool
    arrays (integer ones are never trainable, so they count as non-trainable). Not PRNG keys: Flux's
    random layers hold an `AbstractRNG`, not an array."""
    return (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == jnp.bool_) and not is_key(x)


def _underscorise(n: int) -> str:
    """Flux's `underscorise`: `50240` -> `"50_240"`."""
    return f"{n:_}"


def _n_params(arrays: list) -> str:
    """How many numbers `arrays` hold, underscorised."""
    return _underscorise(sum(int(x.size) for x in arrays))


def _format_bytes(n: int) -> str:
    """Julia's `Base.format_bytes`: `"200 bytes"` below 1 KiB, else three decimals of the unit."""
    units = ("byte", "KiB", "MiB", "GiB", "TiB", "PiB")
    unit = 1 if n in (0, 1) else min(len(units), math.ceil(math.log(n) / math.log(1024)))
    if unit == 1:
        return f"{n} byte" + ("" if n == 1 else "s")
    return f"{n / 1024 ** (unit - 1):.3f} {units[unit - 1]}"


def _nan_note(arrays: list) -> str:
    """Flux's `_nan_show`: flags parameters that are all zero, or hold a NaN or an Inf."""
    if any(isinstance(x, jax.core.Tracer) or not getattr(x, "is_fully_addressable", True) for x in arrays):
        return ""  # traced, or spread over other processes: not readable here
    if all(bool(jnp.all(x == 0)) for x in arrays):
        return "  (all zero)"
    if any(bool(jnp.any(jnp.isnan(x))) for x in arrays):
        return "  (some NaN)"
    if any(bool(jnp.any(jnp.isinf(x))) for x in arrays):
        return "  (some Inf)"
    return ""


def _count_comment(train: list, other: list, top: bool) -> str:
    """Flux's `_layer_show` comment for a layer (or an array) holding the arrays `train` and `other`:
    empty without trainable arrays."""
    if not train:
        return ""
    s = f"# {_n_params(train)} parameters"
    if other:
        s += f", plus {_n_params(other)}" + (" non-trainable" if top else "")
    return s + _nan_note(train)


def sublayers(m) -> list[tuple[str | None, Any]]:
    """(label, child) pairs to print expanded; containers override `_show_children`.

    As Flux's `_big_show`: a layer is expanded when one of its trainable fields is a layer; then each
    trainable layer and float array is listed (lists and tuples flattened), in field order."""
    if hasattr(m, "_show_children"):
        return m._show_children()
    out = []
    for v in trainable(m).values():
        for e in v if isinstance(v, (list, tuple)) else (v,):
            if is_layer(e) or is_float_array(e):
                out.append((None, e))
    return out if any(is_layer(e) for _, e in out) else []


def _array_string(a) -> str:
    """Flux's `_layer_string` of an array: Julia's size and short type, `3×4 Matrix{float32}`."""
    dims = f"{a.shape[0]}-element" if a.ndim == 1 else "×".join(map(str, a.shape)) or "0-dimensional"
    kind = {1: "Vector", 2: "Matrix"}.get(a.ndim)
    return f"{dims} {kind}{{{a.dtype}}}" if kind else f"{dims} Array{{{a.dtype},...}}"


def one_line(m) -> str:
    if hasattr(m, "_show"):
        return m._show()
    parts = []
    for k, v in m.__dict__.items():
        if is_array(v):
            parts.append(f"{k}={v.dtype}{list(v.shape)}")
        elif callable(v) and not is_layer(v):
            parts.append(f"{k}={getattr(v, '__name__', repr(v))}")
        elif isinstance(v, (int, float, bool, str, tuple)) or v is None:
            parts.append(f"{k}={v!r}")
    return f"{type(m).__name__}({', '.join(parts)})"


def _with_comment(text: str, indent: int, comment: str, top: bool) -> str:
    """`text` (already indented, with its trailing comma inside a container) and `comment` at Flux's column."""
    if not comment:
        return text
    width = len(text) - indent - (0 if top else 1)  # Flux measures the layer's own string
    return text + " " * max(2, (_TOP_COL if top else _INNER_COL) - indent - width) + comment


def _lines(m, indent: int, label: str | None, top: bool) -> list[str]:
    pre = " " * indent + (f"{label} = " if label else "")
    comma = "" if top else ","
    if is_array(m):
        return [_with_comment(pre + _array_string(m) + comma, indent, _count_comment([m], [], top), top)]
    if not is_layer(m):
        return [pre + getattr(m, "__name__", repr(m)) + comma]
    subs = sublayers(m)
    if not subs:
        return [_with_comment(pre + one_line(m) + comma, indent, _count_comment(*counts(m), top), top)]
    lines = [pre + getattr(m, "_show_head", lambda: f"{type(m).__name__}(")()]
    for lab, c in subs:
        lines.extend(_lines(c, indent + 2, lab, False))
    lines.append(" " * indent + getattr(m, "_show_tail", lambda: ")")() + comma)
    return lines


def _total(m, tail: str) -> str:
    """Flux's `_big_finale`: the closing line of the outermost container, with a total when it holds
    more than 2 trainable arrays."""
    train, other = counts(m)
    if len(train) <= 2:
        return tail
    pars = _n_params(train)
    size = _format_bytes(sum(int(x.nbytes) for x in train + other))
    tail = tail.ljust(2)
    if not other:
        return f"{tail}{' ' * 18}# Total: {len(train)} arrays, {pars} parameters, {size}."
    nonparam = _n_params(other)
    return (f"{tail}{' ' * 8}# Total: {len(train)} trainable arrays, {pars} parameters,\n"
            f"{' ' * 10}# plus {len(other)} non-trainable, {nonparam} parameters, summarysize {size}.")


def layer_repr(m) -> str:
    lines = _lines(m, 0, None, True)
    if len(lines) > 1:
        lines[-1] = _total(m, lines[-1])
    return "\n".join(lines)


use_layer_repr(layer_repr)
