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


class NonFiniteNorm(ValueError):
    """``ClipNorm``'s refusal of a gradient whose norm is NaN or Inf (Optimisers.jl's ``DomainError``). A
    ``ValueError``.

    ```python
    >>> m = Dense(jnp.zeros((1, 2)), False)
    >>> s = setup(OptimiserChain(ClipNorm(1.0), Descent(0.1)), m)
    >>> g = gradient(lambda m: jnp.sum(jnp.sqrt(m.weight)), m)[0]   # d/dw sqrt(w) is Inf at 0
    >>> update_(s, m, g)
    Traceback (most recent call last):
        ...
    fluxjax.errors.NonFiniteNorm: ClipNorm: gradient has 2.0-norm inf, for array float32[1, 2]
    >>> m.weight                                     # nothing was written
    Array([[0., 0.]], dtype=float32)

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
