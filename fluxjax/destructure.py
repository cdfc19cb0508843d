"""Optimisers.jl's `trainables` and `destructure` (re-exported by Flux).

`trainables(m)` lists the trainable arrays of `m` depth-first, each once (tied arrays once), as
`params` does but as a plain list that works inside `gradient` of a function of `m`.
`flat, re = destructure(m)` concatenates them into one vector, each array in Julia's column-major
order, and `re(v)` rebuilds a copy of `m` with its trainable arrays taken from `v` (ties stay tied,
everything else is what `m` holds then, and the state the copy updates is updated in `m`). Both are
made of `jax.numpy` operations, so `gradient` goes through them.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .core.layer import is_array, is_layer, trainable
from .core.plain import find_plain
from .core.region import original, share_state
from .core.trainables import trainable_arrays
from .core.walk import copy_layer, rebuild, walk
from .errors import DimensionMismatch
from .keypath import KeyPath
from .zygote import Tangent
from .zygote.implicit import raise_plain


def _gradient_fields(v: Any) -> dict | None:
    """A gradient (`Tangent`) is walked like its layer, every field (a gradient has no `trainable`)."""
    return v.fields if isinstance(v, Tangent) else None


def _refuse_plain(v: Any) -> None:
    plain = find_plain(v, pytrees=True)
    if plain is not None:
        raise_plain(plain, "trainables")


def trainables(model: Any, path: bool = False) -> list:
    """Every trainable array of `model`, depth-first, each once (Optimisers.jl's `trainables`); a
    structural gradient (`Tangent`) is accepted too and gives its arrays. With `path=True`, a list of
    `(KeyPath, array)` pairs, the path where each array is first reached (Optimisers.jl's
    `trainables(x; path=true)`).

    ```python
    >>> [p.shape for p in trainables(Dense(10, 5))]
    [(5, 10), (5,)]
    >>> [(kp, p.shape) for kp, p in trainables(Chain(Dense(2, 1)), path=True)]
    [(KeyPath('layers', 0, 'weight'), (1, 2)), (KeyPath('layers', 0, 'bias'), (1,))]
    >>> model = Dense(jnp.ones((1, 2)))
    >>> gradient(lambda m: sum(jnp.sum(p**2) for p in trainables(m)), model)[0].weight  # differentiable
    Array([[2., 2.]], dtype=float32)

    ```
    """
    out: dict[int, Any] = {}
    for keys, a in trainable_arrays(model, _gradient_fields, _refuse_plain):
        out.setdefault(id(original(a)), (KeyPath(*keys), a) if path else a)  # a tied array once, also inside gradient
    return list(out.values())


def _vec(a):
    """Julia's `vec`: column-major."""
    return jnp.ravel(jnp.transpose(a)) if a.ndim > 1 else jnp.reshape(a, (-1,))


def _unvec(v, shape):
    return jnp.transpose(jnp.reshape(v, tuple(reversed(shape)))) if len(shape) > 1 else jnp.reshape(v, shape)


def _trainable_places(root: list) -> tuple[set, set]:
    """Where `trainables` finds arrays in `walk(root)`'s terms: `(exact, whole)`, the `Slot.ident()`s of
    the arrays reached through trainable fields, and the places under which everything is (a gradient's
    `Tangent`, every field of which counts). An array held both there and in a non-trainable field is
    one object; `re` replaces it only at the first kind of place, as Optimisers.jl's `Restructure`."""
    exact: set = set()
    whole: set = set()
    seen: set[int] = set()

    def go(v, owner, key, path):
        if is_layer(v):
            if id(v) not in seen:
                seen.add(id(v))
                for k, e in trainable(v).items():
                    go(e, v, k, ())
        elif isinstance(v, Tangent):
            whole.add((id(owner), key, path))
        elif is_array(v):
            exact.add((id(owner), key, path))
        elif isinstance(v, tuple):
            for i, e in enumerate(v):
                go(e, owner, key, path + (i,))
        elif isinstance(v, (list, dict)):
            for k, e in (v.items() if isinstance(v, dict) else enumerate(v)):
                go(e, v, k, ())

    go(root[0], root, 0, ())
    return exact, whole


def _is_trainable_place(slot: Any, exact: set, whole: set) -> bool:
    o, k, path = slot.ident()
    return (o, k, path) in exact or any((o, k, path[:j]) in whole for j in range(len(path) + 1))


class Restructure:
    """The `re` of `flat, re = destructure(model)`: `re(v)` is a copy of `model` with its trainable
    arrays read from the vector `v` (Optimisers.jl's `Restructure`). As there, `re` holds the model
    itself: the rest of the copy is what the model holds when `re(v)` is called (its mode, its
    BatchNorm statistics), and the state the copy updates (BatchNorm statistics in train mode, a
    Dropout key) is updated in the model too, as Flux's BatchNorm updates the arrays they share.

    ```python
    >>> flat, re = destructure(Dense(jnp.ones((1, 2))))   # weight [1 1], bias [0]
    >>> re
    Restructure(Dense, ..., 3)
    >>> m = re(jnp.array([1.0, 2.0, 3.0]))
    >>> m.weight, m.bias
    (Array([[1., 2.]], dtype=float32), Array([3.], dtype=float32))

    ```
    """

    def __init__(self, model: Any, arrays: list):
        root = [model]
        w = walk(root)
        exact, whole = _trainable_places(root)
        offsets: dict[int, tuple[int, tuple, Any]] = {}
        off = 0
        for a in arrays:
            offsets[id(original(a))] = (off, tuple(a.shape), a.dtype)
            off += int(np.prod(a.shape, dtype=np.int64))
        self.model = model
        self.length = off
        # per leaf of the walk: (offset, shape, dtype) of a trainable array (a tied one: one offset), or None
        self.places = tuple(offsets.get(id(original(a))) if is_array(a) and _is_trainable_place(slot, exact, whole)
                            else None for a, slot in zip(w.leaves, w.slots))

    def __call__(self, flat) -> Any:
        flat = jnp.asarray(flat)
        if flat.ndim != 1 or flat.shape[0] != self.length:
            raise DimensionMismatch(
                f"Restructure: expected a vector of length {self.length}, got an array of shape {tuple(flat.shape)}"
            )
        root = [self.model]
        leaves = walk(root).leaves
        if len(leaves) != len(self.places) or any(
                p is not None and tuple(np.shape(a)) != p[1] for a, p in zip(leaves, self.places)):
            raise ValueError(f"Restructure: the {type(self.model).__name__} given to destructure has changed its "
                             "structure or the shapes of its arrays since; destructure it again")
        new: dict[int, Any] = {}

        def value(a, place):
            if place is None:
                return a  # not trainable: what the model holds now
            off, shape, dtype = place
            if off not in new:
                v = flat[off:off + int(np.prod(shape, dtype=np.int64))]
                if not jnp.issubdtype(dtype, jnp.complexfloating) and jnp.issubdtype(v.dtype, jnp.complexfloating):
                    v = jnp.real(v)
                new[off] = _unvec(v, shape).astype(dtype)
            return new[off]

        def layer(obj):  # a copy whose state writes reach the model's layer (see `share_state`)
            copy, fields = copy_layer(obj)
            share_state(copy, obj)
            return copy, fields

        # the walk's rebuild: layers copied (a tie stays one object), the destructure of a gradient
        # (`Tangent`) rebuilds a gradient
        return rebuild(root, [value(a, p) for a, p in zip(leaves, self.places)], layer=layer)[0]

    def __repr__(self):
        return f"Restructure({type(self.model).__name__}, ..., {self.length})"


def destructure(model: Any) -> tuple[Any, Restructure]:
    """`flat, re = destructure(model)` (Optimisers.jl's `destructure`): `flat` is one vector of every
    trainable array (column-major, tied arrays once) and `re(flat)` rebuilds the model.

    ```python
    >>> flat, re = destructure(Chain(Dense(2, 3), Dense(3, 1)))
    >>> flat.shape
    (13,)
    >>> x = jnp.ones((2, 4))
    >>> re(flat * 0)(x)                       # the same model with zero weights
    Array([[0., 0., 0., 0.]], dtype=float32)
    >>> gradient(lambda v: jnp.sum(re(v)(x)), flat)[0].shape   # gradients flow through re
    (13,)

    ```
    """
    arrays = trainables(model)
    if arrays:
        flat = jnp.concatenate([_vec(a) for a in arrays])
    else:
        flat = jnp.zeros((0,), jnp.float32)
    return flat, Restructure(model, arrays)
