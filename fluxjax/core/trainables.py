"""The trainable view of a model: Optimisers.jl's `trainable` walk.

`trainable_arrays(x)` follows only the fields that `trainable` names (a frozen field, and every layer
inside it, is not entered), depth-first in field and insertion order, each layer object once, and lists
every float array it reaches. `trainables`/`destructure` and Flux's printed parameter counts use it.

It is not `walk`: the walk visits every field a layer has (with a role per field, which a layer inside
a frozen field does not inherit) and reads dicts in key order, since it is what `fluxjax.jit` and
`gradient` trace; this view is what an optimiser changes, in Optimisers.jl's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .layer import is_array, is_float_array, is_layer, trainable


def trainable_arrays(x: Any, fields: Callable[[Any], dict | None] | None = None,
                     other: Callable[[Any], None] | None = None) -> list[tuple[tuple, Any]]:
    """`[(keys, array)]` for every float array (not integer arrays nor PRNG keys: Optimisers.jl's
    `isnumeric`) reached through the trainable fields of `x`'s layers and through lists, tuples and
    dicts; `keys` is the path where it was reached. An array reached twice comes twice; a layer
    reached twice is entered once. `fields(v)`, for a value that is not a layer, gives named children
    to enter like a layer's (every one of them), or None. `other(v)` sees every field of each layer
    entered and every value that is none of the above (a check that refuses what would be silently
    skipped)."""
    out: list[tuple[tuple, Any]] = []
    seen: set[int] = set()

    def go(v, keys):
        named = fields(v) if fields is not None and not is_layer(v) else None
        if named is not None or is_layer(v):
            if id(v) in seen:
                return
            seen.add(id(v))
            if named is None:
                if other is not None:
                    for e in v.__dict__.values():
                        other(e)
                named = trainable(v)
            for k, e in named.items():
                go(e, keys + (k,))
        elif is_array(v):
            if is_float_array(v):
                out.append((keys, v))
        elif isinstance(v, (list, tuple)):
            for i, e in enumerate(v):
                go(e, keys + (i,))
        elif isinstance(v, dict):
            for k, e in v.items():
                go(e, keys + (k,))
        elif other is not None:
            other(v)

    go(x, ())
    return out
