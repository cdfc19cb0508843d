"""`train_` and `trainstep_` on a model whose arrays have no owner to rebind: a bare array, or arrays in
a tuple (Optimisers.jl's `train!(loss, x::Array, data, state)` mutates `x`). A NumPy array is written
in place after the steps; a JAX array cannot change in place, so that raises instead of a silent no-op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.layer import is_float_array
from ..core.walk import walk


def unowned_arrays(model: Any, fn: str) -> list[int]:
    """The leaf indices (in `walk([model])`) of the float arrays of `model` that nothing can rebind: the
    model itself when it is an array, or arrays reached from it only through tuples. Raises `TypeError`
    when one is a JAX array (immutable); returns `[]` for the usual models (layers, lists, dicts)."""
    if not (isinstance(model, (tuple, np.ndarray)) or is_float_array(model)):
        return []
    box = [model]
    w = walk(box)
    found = [i for i, (v, s) in enumerate(zip(w.leaves, w.slots)) if s.owner is box and is_float_array(v)]
    for i in found:
        v = w.leaves[i]
        if not (isinstance(v, np.ndarray) and v.flags.writeable):
            where = "is a JAX array" if v is model else "holds a JAX array in a tuple"
            raise TypeError(
                f"{fn}: the model {where}, which cannot change in place (JAX arrays are immutable), so "
                "training it would change nothing you can see. Hold the arrays in a list, a dict or a "
                "layer (`m = [W]`, then read `m[0]`), or write the loop with "
                "`opt_state, W = update(opt_state, W, grad)`, which returns the new array."
            )
    return found


def boxed(loss: Callable) -> Callable:
    """`loss` for the model held in a one-element list."""

    def loss_of_box(box, *d):
        return loss(box[0], *d)

    return loss_of_box


def copy_back(model: Any, box: list, found: list[int]) -> None:
    """Write the trained values in `box` into the NumPy arrays of `model` (in place)."""
    before, after = walk([model]), walk(box)
    for i in found:
        np.copyto(before.leaves[i], np.asarray(after.leaves[i]), casting="same_kind")
