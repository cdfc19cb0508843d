"""Flux's `outputsize`: the output size of a model for an input size, computed by tracing the model
on abstract arrays (`jax.eval_shape`), with no arithmetic done."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .core.region import run_in_region


def input_sizes(inputsize: tuple, more: tuple, fn: str = "outputsize") -> list[tuple[int, ...]]:
    sizes = (inputsize, *more)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) and sizes[0] and all(isinstance(s, (tuple, list)) for s in sizes[0]):
        sizes = tuple(sizes[0])  # outputsize(m, ((2,), (3,)))
    out = []
    for s in sizes:
        if not isinstance(s, (tuple, list)) or not all(isinstance(d, int) and d >= 0 for d in s):
            raise TypeError(f"{fn}: input sizes must be tuples of non-negative ints, got {s!r}")
        out.append(tuple(s))
    return out


def trace_abstract(m: Any, sizes: list[tuple[int, ...]]) -> Any:
    """`m` applied to float32 arrays of these sizes (one array, or several as a tuple), abstractly."""

    def run(*args):
        # state writes (BatchNorm statistics, Dropout keys) are recorded, then undone
        return run_in_region(lambda: m(args[0] if len(args) == 1 else tuple(args)))[0]

    return jax.eval_shape(run, *(jax.ShapeDtypeStruct(s, jnp.float32) for s in sizes))


def outputsize(m: Any, inputsize: tuple, *more: tuple, padbatch: bool = False) -> Any:
    """`outputsize(m, inputsize) == m(x).shape` for `x` of shape `inputsize`, without computing `m(x)`.

    `padbatch=True` appends a batch dim of 1 to every input size. A list or tuple of layers is applied in
    sequence like a `Chain`. Several sizes (`outputsize(m, (2,), (3,))`, or one tuple of tuples) mean
    several arrays, passed to `m` as one tuple, as Flux does. A bad size raises the layer's own
    `DimensionMismatch`. Nothing is written into the model (train-mode statistics are discarded).

    ```python
    >>> m = Chain(Conv((3, 3), (3, 16)), Conv((3, 3), (16, 32)))
    >>> outputsize(m, (10, 10, 3), padbatch=True)
    (6, 6, 32, 1)

    ```
    """
    if isinstance(m, (list, tuple)):
        from .layers.basic import Chain

        m = Chain(*m)
    sizes = input_sizes(inputsize, more)
    if padbatch:
        sizes = [(*s, 1) for s in sizes]
    out = trace_abstract(m, sizes)
    if hasattr(out, "shape"):
        return tuple(out.shape)
    return jax.tree_util.tree_map(lambda a: tuple(a.shape), out)


__all__ = ["outputsize"]
