"""Containers from Flux's `src/layers/basic.jl`: `Parallel`, `SkipConnection`, `PairwiseFusion`, `Maxout`."""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import reduce
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._checks import check_callable, is_int
from ..core.layer import is_layer, layer
from ..errors import DimensionMismatch, describe
from ..show import one_line

__all__ = ["Parallel", "SkipConnection", "PairwiseFusion", "Maxout"]

# How Flux prints the usual connections (`Parallel(+, ...)`): Julia's operator names.
_JULIA_NAMES = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.matmul: "*",
    jnp.add: "+",
    jnp.subtract: "-",
    jnp.multiply: "*",
    jnp.divide: "/",
    jnp.maximum: "max",
    jnp.minimum: "min",
}


def fn_name(f: Any) -> str:
    """Flux's printed name of a connection or layer: `+` for `operator.add`, one line for layers."""
    if is_layer(f):
        return one_line(f)
    try:
        name = _JULIA_NAMES.get(f)
    except TypeError:  # unhashable callable
        name = None
    return name or getattr(f, "__name__", repr(f))


# Julia's `+`, `*`, `max`, `min` take any number of arguments (`Parallel(+, a, b, c)`); Python's are
# binary, so these connections are folded over the outputs when given more (or fewer) than two.
_NARY = (operator.add, operator.mul, operator.matmul, jnp.add, jnp.multiply, jnp.maximum, jnp.minimum)


def _check_connection(kind: str, connection: Any) -> None:
    if connection is None:
        raise TypeError(f"{kind}: the connection must be a function (e.g. operator.add or jnp.concatenate), got None")
    check_callable(kind, "the connection", connection)


_ELEMENTWISE = tuple(f for f in _JULIA_NAMES if f is not operator.matmul)


def _julia_aligned(owner: Any, connection: Callable, outs) -> list:
    """The outputs for an elementwise connection (`+`, `*`, `max`, ...), aligned on their first dims as
    Julia broadcasts them: numpy aligns the last dims, so `(4,) + (4, 1)` would be `(4, 4)` where Flux
    gives `(4, 1)`. A `DimensionMismatch` naming the layer when the arrays cannot broadcast, instead of
    JAX's bare broadcasting error."""
    outs = list(outs)
    if not any(connection is f for f in _ELEMENTWISE) or not all(hasattr(o, "shape") for o in outs):
        return outs
    n = max(len(o.shape) for o in outs)
    outs = [o if len(o.shape) == n else jnp.reshape(o, (*o.shape, *(1,) * (n - len(o.shape)))) for o in outs]
    try:
        jnp.broadcast_shapes(*(tuple(o.shape) for o in outs))
    except ValueError:
        got = ", ".join(describe(o) for o in outs)
        raise DimensionMismatch(
            f"layer {one_line(owner)}: the connection {fn_name(connection)} cannot combine arrays of sizes {got}"
        ) from None
    return outs


# NumPy's joining functions take ONE sequence (`jnp.concatenate((a, b))`) where Julia's `vcat`, `hcat` and
# `cat` take the arrays as arguments: called with the outputs as arguments they would read the second as an
# axis or a dtype.
_SEQUENCE_ARG = tuple(
    f for m in (jnp, np) for n in ("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack")
    if (f := getattr(m, n, None)) is not None
)


def _connect(connection: Callable, outs: list, owner: Any):
    """`connection(*outs)` for a container `owner`; a `TypeError` that says what to write when the
    connection takes one sequence (`jnp.concatenate`)."""
    if len(outs) > 1 and any(connection is f for f in _SEQUENCE_ARG):
        fn = f"{'np' if connection.__module__.startswith('numpy') else 'jnp'}.{connection.__name__}"
        raise TypeError(
            f"{type(owner).__name__}: the connection {fn} takes one sequence of arrays, but it is called with "
            f"{len(outs)} arrays as separate arguments (it would read the second as its axis). Use "
            f"lambda *ys: {fn}(ys), with the axis= you mean (Flux's vcat is jnp.concatenate(ys, axis=0): "
            "axis 0 holds the features)"
        )
    outs = _julia_aligned(owner, connection, outs)
    if len(outs) != 2 and any(connection is f for f in _NARY):
        return reduce(connection, outs)
    return connection(*outs)


class _Label:
    """A printed-only stand-in for a function child in the expanded (multi-line) form."""

    def __init__(self, name: str):
        self.__name__ = name


def _child(f: Any):
    return f if is_layer(f) else _Label(fn_name(f))


def _named_layers(kind: str, layers: tuple, named: dict) -> tuple | dict:
    if layers and named:
        raise ValueError(
            f"{kind}: give either positional layers or named layers, not both (got keyword {', '.join(named)})"
        )
    for reserved in ("connection", "layers"):
        if reserved in named:
            raise ValueError(f"a {kind} layer cannot have a named sub-layer called `{reserved}`")
    if len(layers) == 1 and isinstance(layers[0], list):
        layers = tuple(layers[0])
    for key, lay in named.items() if named else enumerate(layers):
        if not callable(lay):
            raise TypeError(f"{kind}: every layer must be callable, got {type(lay).__name__} for {key!r}")
    return dict(named) if named else tuple(layers)


class _Indexed:
    """Indexing shared by `Parallel` and `PairwiseFusion`: `m[0]`, `m["name"]`, `m.name`, `m[0:2]`."""

    layers: tuple | dict
    connection: Callable

    def _seq(self) -> tuple:
        return tuple(self.layers.values()) if isinstance(self.layers, dict) else self.layers

    def __getitem__(self, i):
        if isinstance(i, str):
            if not isinstance(self.layers, dict):
                raise KeyError(f"{type(self).__name__} has no named layers; index it with an int (got {i!r})")
            return self.layers[i]
        if isinstance(i, (slice, list)):
            if isinstance(self.layers, dict):
                items = list(self.layers.items())
                picked = items[i] if isinstance(i, slice) else [items[j] for j in i]
                return type(self)(self.connection, **dict(picked))
            picked = self.layers[i] if isinstance(i, slice) else [self.layers[j] for j in i]
            return type(self)(self.connection, *picked)
        return self._seq()[i]

    def __getattr__(self, name):
        layers = self.__dict__.get("layers")
        if isinstance(layers, dict) and name in layers:
            return layers[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def keys(self):
        """The layer names (Flux's `keys(m)`), or indices `0..n-1` for unnamed layers."""
        return tuple(self.layers) if isinstance(self.layers, dict) else tuple(range(len(self.layers)))

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self._seq())

    def _show(self) -> str:
        if isinstance(self.layers, dict):
            inner = ", ".join(f"{k} = {fn_name(v)}" for k, v in self.layers.items())
        else:
            inner = ", ".join(fn_name(v) for v in self.layers)
        return f"{type(self).__name__}({fn_name(self.connection)}, {inner})"

    def _show_children(self):
        # Flux expands the container only when some child is not leaf-like (i.e. is a layer).
        if not is_layer(self.connection) and not any(is_layer(v) for v in self._seq()):
            return []
        named = self.layers.items() if isinstance(self.layers, dict) else ((None, v) for v in self.layers)
        return [(None, _child(self.connection))] + [(k, _child(v)) for k, v in named]


@layer
class Parallel(_Indexed):
    """Pass the input(s) through every layer and combine the outputs with `connection`.

    `Parallel(connection, layers...)` or `Parallel(connection, name=layer, ...)` (names index it:
    `m["name"]`, `m.name`; `m[0]` is the first layer). With one input `x` it computes
    `connection(*(l(x) for l in layers))`; with `N` inputs and `N` layers, `connection(l_i(x_i)...)`;
    with several inputs and one layer, that layer applied to each input. A tuple input is splatted.
    `connection` is called exactly once; `operator.add`/`mul`, `jnp.add`/`multiply`/`maximum`/`minimum`
    are folded over any number of outputs, as Julia's n-ary `+`, `*`, `max`, `min`. Mismatched input
    counts, no inputs and no layers raise `ValueError` (Flux's `ArgumentError`). A connection that takes
    one sequence raises `TypeError`: Flux's `vcat` is `lambda *ys: jnp.concatenate(ys)`, not `jnp.concatenate`.

    ```python
    >>> p = Parallel(operator.add, Dense(10, 2, jnp.tanh), Dense(5, 2))
    >>> p(jnp.ones(10), jnp.ones(5)).shape
    (2,)

    ```
    """

    def __init__(self, connection: Callable, /, *layers: Callable, **named: Callable):
        _check_connection("Parallel", connection)
        self.connection = connection
        self.layers = _named_layers("Parallel", layers, named)
        if not self.layers:
            raise ValueError("cannot construct a Parallel layer with no sub-layers")

    def __call__(self, *xs) -> Any:
        if len(xs) == 1 and isinstance(xs[0], tuple):
            xs = xs[0]  # a tuple is always splatted
        if not xs:
            raise ValueError("Parallel layer cannot take 0 inputs")
        layers = self._seq()
        if len(xs) == 1:
            outs = [lay(xs[0]) for lay in layers]
        elif len(layers) == 1:
            outs = [layers[0](x) for x in xs]
        elif len(layers) == len(xs):
            outs = [lay(x) for lay, x in zip(layers, xs, strict=True)]
        else:
            raise ValueError(
                f"Parallel with {len(layers)} > 1 sub-layers can take one input or {len(layers)} inputs, "
                f"but got {len(xs)} inputs"
            )
        return _connect(self.connection, outs, self)


@layer
class PairwiseFusion(_Indexed):
    """Fuse each layer's output with the next input, returning every layer's output.

    `PairwiseFusion(connection, layers...)` (or named layers). With inputs `x_1..x_N` (N = number of
    layers, given as N arguments or one tuple) it computes, as Flux's code does::

        y_1 = layers[0](x_1)
        y_i = layers[i-1](connection(y_{i-1}, x_i))     for i = 2..N

    and returns the tuple `(y_1, ..., y_N)`. A single non-tuple input `x` is used as every `x_i`.
    A tuple of the wrong length raises `ValueError`.

    ```python
    >>> m = PairwiseFusion(lambda a, b: jnp.concatenate([a, b]), Dense(2, 3), Dense(5, 1))
    >>> [y.shape for y in m(jnp.ones(2), jnp.ones(2))]
    [(3,), (1,)]

    ```
    """

    def __init__(self, connection: Callable, /, *layers: Callable, **named: Callable):
        _check_connection("PairwiseFusion", connection)
        self.connection = connection
        self.layers = _named_layers("PairwiseFusion", layers, named)
        if not self.layers:
            raise ValueError("cannot construct a PairwiseFusion layer with no sub-layers")

    def __call__(self, *xs) -> tuple:
        layers = self._seq()
        n = len(layers)
        if len(xs) == 1 and not isinstance(xs[0], tuple):
            inputs = [xs[0]] * n
        else:
            inputs = list(xs[0] if len(xs) == 1 else xs)
            if len(inputs) != n:
                raise ValueError(
                    f"PairwiseFusion with {n} sub-layers can take one input or {n} inputs, "
                    f"but got {len(inputs)} inputs"
                )
        ys = [layers[0](inputs[0])]
        for lay, x in zip(layers[1:], inputs[1:], strict=True):
            ys.append(lay(_connect(self.connection, [ys[-1], x], self)))
        return tuple(ys)


@layer
class SkipConnection:
    """`connection(layers(x), x)`: a residual block when `connection` is `+` (`operator.add`).

    `SkipConnection(layer, connection)`; `layer` is usually a `Chain`, `connection` a two-argument
    callable taking the layer's output first and the unchanged input second.

    ```python
    >>> m = SkipConnection(Dense(2, 2), operator.add)
    >>> m(jnp.ones((2, 5))).shape
    (2, 5)

    ```
    """

    def __init__(self, layers: Callable, connection: Callable):
        if not callable(layers) or not callable(connection):
            raise TypeError("SkipConnection(layer, connection): both arguments must be callable")
        self.layers = layers
        self.connection = connection

    def __call__(self, x) -> Any:
        return _connect(self.connection, [self.layers(x), x], self)

    def _show(self) -> str:
        return f"SkipConnection({fn_name(self.layers)}, {fn_name(self.connection)})"

    def _show_children(self):
        if not is_layer(self.layers) and not is_layer(self.connection):
            return []
        return [(None, _child(self.layers)), (None, _child(self.connection))]


@layer
class Maxout:
    """The elementwise maximum of several layers applied to the same input (Goodfellow et al. 2013).

    `Maxout(layers...)`, or `Maxout(f, n)` which calls the zero-argument constructor `f` `n` times.

    ```python
    >>> m = Maxout(lambda: Dense(5, 7, jnp.tanh), 3)
    >>> m(jnp.ones((5, 11))).shape
    (7, 11)

    ```
    """

    def __init__(self, *layers: Callable):
        if len(layers) == 2 and callable(layers[0]) and is_int(layers[1]):
            f, n = layers[0], int(layers[1])
            if n <= 0:
                raise ValueError(f"Maxout(f, n): n must be a positive integer, got {n}")
            layers = tuple(f() for _ in range(n))
        if not layers:
            raise ValueError("cannot construct a Maxout layer with no sub-layers")
        for lay in layers:
            if not callable(lay):
                raise TypeError(f"Maxout: every layer must be callable, got {type(lay).__name__}")
        self.layers = tuple(layers)

    def __call__(self, x) -> Any:
        return reduce(jnp.maximum, _julia_aligned(self, jnp.maximum, [lay(x) for lay in self.layers]))

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    def _show(self) -> str:
        return f"Maxout({', '.join(fn_name(v) for v in self.layers)})"

    def _show_children(self):
        if not any(is_layer(v) for v in self.layers):
            return []
        return [(None, _child(v)) for v in self.layers]
