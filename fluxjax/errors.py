"""Errors people see."""

from __future__ import annotations


class DimensionMismatch(ValueError):
    """Julia's `DimensionMismatch`: an input's size does not fit the layer. A `ValueError`.

    ```python
    >>> Dense(2, 3)(jnp.ones((4, 1)))
    Traceback (most recent call last):
        ...
    fluxjax.errors.DimensionMismatch: layer Dense(2 => 3) expects size(input, 1) == 2, but ...
    >>> issubclass(DimensionMismatch, ValueError)
    True

    ```
    """


class StructureMismatch(ValueError):
    """Two trees that must fit do not: `loadmodel_`'s source and destination, or `update_`'s optimiser
    state, model and gradient (missing or extra fields, containers of different lengths, an array
    where the other has none). Flux and Optimisers.jl raise `ArgumentError` / `ErrorException` for
    these. A `ValueError`; the message names the first path where they differ.

    ```python
    >>> loadmodel_(Chain(Dense(2, 3)), Flux.state(Chain(Dense(2, 3), Dense(3, 1))))
    Traceback (most recent call last):
        ...
    fluxjax.errors.StructureMismatch: loadmodel_: layers: tried to load a tuple of length 2 ...
    >>> issubclass(StructureMismatch, ValueError)
    True

    ```
    """


def describe(x) -> str:
    """Julia-style description of an array argument: `3×5 Matrix{float32}`."""
    shape = getattr(x, "shape", None)
    if shape is None:
        return type(x).__name__
    kind = {0: "Scalar", 1: "Vector", 2: "Matrix"}.get(len(shape), "Array")
    dims = "×".join(str(d) for d in shape) if shape else "0-dim"
    return f"{dims} {kind}{{{getattr(x, 'dtype', '?')}}}"
