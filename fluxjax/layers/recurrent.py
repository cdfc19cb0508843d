"""Recurrent cells and layers: Flux 0.16's `src/layers/recurrent.jl`, in Flux's layout.

A *cell* does one time step: `cell(x, state) -> (output, new_state)` with `x` of shape `(in,)` or
`(in, batch)` and a state of shape `(out,)` or `(out, batch)` (`(h, c)` for `LSTMCell`); `cell(x)`
starts from `initialstates(cell)`, zeros. A vector state broadcasts over the batch, as Julia's
broadcasting does.

A *layer* (`RNN`, `LSTM`, `GRU`, `GRUv3`, `Recurrence`) runs a cell over a whole sequence: `x` is
`(in, len)` or `(in, len, batch)` (features, time, batch, as Flux 0.15+), the output is
`(out, len)` or `(out, len, batch)`, the per-step outputs stacked on axis 1. With
`return_state=True` it returns `(outputs, last_state)`. The time loop is one `jax.lax.scan` (time
moved to the front inside), so the sequence length does not grow the compiled program; the built-in
cells run batch-major inside it (see `_scan_batch_major`).

Weights and formulas are Flux's, so weights trained in Flux load and give the same outputs:

- `RNNCell`: `Wi (out, in)`, `Wh (out, out)`, `bias (out,)`; `h' = σ.(Wi*x .+ Wh*h .+ bias)`.
- `LSTMCell`: `Wi (4out, in)`, `Wh (4out, out)`, `bias (4out,)`, gate rows `[i; f; g; o]`;
  `c' = σ(f)*c + σ(i)*tanh(g)`, `h' = σ(o)*tanh(c')`, state `(h, c)`.
- `GRUCell`: `Wi (3out, in)`, `Wh (3out, out)`, `b (3out,)`, rows `[r; z; h̃]`; one bias, outside
  the `r` product: `h̃ = tanh(Wi_h*x .+ r .* (Wh_h*h) .+ b_h)`, `h' = (1-z)*h̃ + z*h`.
- `GRUv3Cell`: as `GRUCell` plus `Wh_h` (Flux's `Wh_h̃`, `(out, out)`), and (Flux's code, not its
  docstring) `h̃ = tanh(Wi_h*x .+ Wh_h*(r .* h) .+ b_h)`; the last `out` rows of `Wh` are unused.

Flux's gates use NNlib's fast `sigmoid_fast`/`tanh_fast`; here they are XLA's own `logistic` and
`tanh`, which are the fast versions on XLA, of the same accuracy (see `recurrent_cells._fast_act`).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from .._checks import match_eltype
from ..core.layer import is_layer, layer, state_fields
from ..errors import DimensionMismatch, describe
from ..functors import all_layers
from .recurrent_cells import (
    _BUILTIN_CELLS,
    GRUCell,
    GRUv3Cell,
    LSTMCell,
    RNNCell,
    _as_state,
    _check_input,
    _check_state,
    _col,
    initialstates,
)

__all__ = [
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "GRUv3Cell",
    "RNN",
    "LSTM",
    "GRU",
    "GRUv3",
    "Recurrence",
    "initialstates",
]


# ---------------------------------------------------------------------------------------------
# running a cell over a sequence


def _has_state(cell: Any) -> bool:
    return any(state_fields(m) for m in all_layers(cell))


def _carry_like(step: Callable, x0: Any, state: Any) -> Any:
    """Give the initial state the shapes and dtypes the step returns (a vector state becomes
    `(out, batch)` when the input is batched), so that it can be `lax.scan`'s carry."""
    spec = lambda a: jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a))
    _, new = jax.eval_shape(step, x0, jax.tree_util.tree_map(spec, state))
    leaves, treedef = jax.tree_util.tree_flatten(new)
    old = jax.tree_util.tree_leaves(state)
    if len(old) != len(leaves):
        raise ValueError(
            f"recurrent cell returned a state with {len(leaves)} arrays, but the state given has {len(old)}"
        )
    out = []
    for a, s in zip(old, leaves, strict=True):
        a = jnp.asarray(a, s.dtype)
        if a.shape != s.shape:
            a = jnp.broadcast_to(_col(a, len(s.shape)), s.shape)
        out.append(a)
    return jax.tree_util.tree_unflatten(treedef, out)


def _scan_traced(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    if isinstance(cell, _BUILTIN_CELLS):
        return _scan_batch_major(cell, x, state)
    xs = jnp.moveaxis(x, 1, 0)
    x0 = jax.ShapeDtypeStruct(xs.shape[1:], xs.dtype)
    carry = _carry_like(cell, x0, state)

    def body(s, x_t):
        y, s = cell(x_t, s)
        return s, y

    last, ys = jax.lax.scan(body, carry, xs)
    return jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 0, 1), ys), last


def _scan_batch_major(cell: Any, x: jax.Array, state: Any) -> tuple[jax.Array, Any]:
    """A built-in cell over the sequence, computed batch-major: the time loop carries `(batch, out)`
    states and multiplies `h * Whᵀ`, so that both the product and its gradient `dy * Wh` read the
    row-major weights directly (feature-major, `Wh * h`, the gradient reads `Wh` transposed at every
    step: XLA:CPU's slow kernel, a 32-step LSTM 1.35x slower in pure JAX). The input projection
    `x * Wiᵀ .+ bias` is made inside the loop, step by step, as Flux's and the peers' cells do: on
    XLA:CPU one product for all steps before the loop was 3-20% slower (the benchmarks' LSTM and three
    larger ones), its (len, batch, 4out) buffer and that buffer's gradient costing more than the
    products they save. The layout changes once, at the ends. The cells' formulas are the same, on
    the last axis."""
    xs = jnp.moveaxis(x, 0, -1)  # (len, batch, in) or (len, in)
    Wi_t, bias = cell.Wi.T, cell._bias()
    mm = cell._products(batch_major=True)

    def step(x_t, s):
        g = x_t @ Wi_t
        return cell._recur(g if bias is False else g + bias, s, mm, axis=-1)

    batch = xs.shape[1:-1] or next((a.shape[1:] for a in jax.tree_util.tree_leaves(state) if a.ndim > 1), ())
    if batch and xs.ndim == 2:  # an unbatched sequence from a batched state: Flux broadcasts the input
        xs = jnp.broadcast_to(xs[:, None, :], (xs.shape[0], *batch, xs.shape[1]))
    state = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, batch + a.shape) if a.ndim == 1 else a.T, state)
    carry = _carry_like(step, jax.ShapeDtypeStruct(xs.shape[1:], xs.dtype), state)

    def body(s, x_t):
        y, s = step(x_t, s)
        return s, y

    last, ys = jax.lax.scan(body, carry, xs)
    back = lambda a: jnp.moveaxis(a, -1, 0)
    return back(ys), jax.tree_util.tree_map(back, last)


# A cell that is a layer is a pytree (its configuration static), so the whole loop compiles once per
# structure and shape and is reused by later eager calls; under gradient/jit it is a nested call.
_scan_compiled = jax.jit(_scan_traced)


def _scan(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    """Flux's `scan`: run `cell` over axis 1 of `x`, stacking the outputs on axis 1."""
    state = _as_state(state)
    if _has_state(cell):
        # A cell with state fields (e.g. a Dropout inside) records a state write per step, which
        # must not happen inside a scan body: unroll in Python instead.
        if x.shape[1] == 0:
            raise DimensionMismatch("cannot run a cell with state fields over an empty sequence")
        ys = []
        for t in range(x.shape[1]):
            y, state = cell(x[:, t], state)
            ys.append(y)
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a, axis=1), *ys), state
    if is_layer(cell):
        return _scan_compiled(cell, x, state)
    return _scan_traced(cell, x, state)


class _SequenceLayer:
    """The forward pass shared by `RNN`, `LSTM`, `GRU`, `GRUv3` and `Recurrence`."""

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    cell: Any
    return_state: bool

    def initialstates(self) -> Any:
        return initialstates(self.cell)

    def _prepare(self, x: Any) -> jax.Array:
        cell = self.cell
        if isinstance(cell, _BUILTIN_CELLS):
            x = match_eltype(cell, x, cell.Wi.dtype)
            _check_input(self, x, cell._n_in, (2, 3), "an array (in, len) or (in, len, batch)")
        else:
            x = jnp.asarray(x)
            if x.ndim < 2:
                raise DimensionMismatch(
                    f"layer {self._show()} expects an array (in, len) or (in, len, batch), "
                    f"but got {describe(x)}"
                )
        return x

    def __call__(self, x: Any, state: Any = None) -> Any:
        x = self._prepare(x)
        if state is None:
            state = self.initialstates()
        elif isinstance(self.cell, _BUILTIN_CELLS):
            state = _as_state(state)
            _check_state(self, self.cell, state, x.shape[2:])
        ys, last = _scan(self.cell, x, state)
        return (ys, last) if self.return_state else ys


def _seq_init(self: Any, name: str, cell_type: type, a: Any, b: Any, c: Any, return_state: bool, kw: dict):
    if isinstance(a, cell_type):
        if b is not None or c is not None or kw:
            raise TypeError(f"{name}(cell; return_state) takes no other arguments")
        cell = a
    elif isinstance(a, _BUILTIN_CELLS):
        raise TypeError(f"{name} wraps a {cell_type.__name__}, got {type(a).__name__}; use Recurrence(cell)")
    else:
        known = inspect.signature(cell_type.__init__).parameters
        bad = [k for k in kw if k not in known or k in ("self", "a", "b", "c", "d")]
        if bad:
            raise TypeError(f"{name}() got an unexpected keyword argument {bad[0]!r}")
        args = tuple(v for v in (a, b, c) if v is not None)
        cell = cell_type(*args, **kw)
    self.cell = cell
    self.return_state = bool(return_state)


class _CellSequence(_SequenceLayer):
    """A sequence layer around one built-in cell: printed as the cell, renamed (`LSTM(3 => 5)`)."""

    def _show(self) -> str:
        cell = self.cell._show()
        return type(self).__name__ + cell[len(type(self.cell).__name__):]

    def _show_children(self) -> list:
        return []


@layer
class RNN(_CellSequence):
    """An `RNNCell` run over a whole sequence: `h_t = σ.(Wi*x_t .+ Wh*h_{t-1} .+ bias)`.

    `RNN(in, out, σ=tanh; return_state=False, init_kernel, init_recurrent_kernel, bias, rng)`,
    `RNN((in, out), σ)`, or `RNN(cell::RNNCell; return_state=False)`. Field `cell`.

    `m(x, h=None)`: `x` is `(in, len)` or `(in, len, batch)`, `h` is `(out,)` or `(out, batch)`
    (zeros if omitted). Returns the hidden states `(out, len[, batch])`, or `(outputs, last_h)`
    when `return_state`.

    ```python
    >>> rnn = RNN(4, 6)             # RNN(4 => 6, tanh)  # 66 parameters
    >>> rnn(jnp.ones((4, 3, 5))).shape
    (6, 3, 5)

    ```
    """

    def __init__(
        self, a: Any, b: Any = None, c: Any = None, *, return_state: bool = False, **cell_kwargs: Any
    ):
        _seq_init(self, "RNN", RNNCell, a, b, c, return_state, cell_kwargs)


@layer
class LSTM(_CellSequence):
    """An `LSTMCell` run over a whole sequence; the state is `(h, c)`.

    `LSTM(in, out; return_state=False, init_kernel, init_recurrent_kernel, bias, rng)`,
    `LSTM((in, out))`, or `LSTM(cell::LSTMCell; return_state=False)`. Field `cell`.

    `m(x, (h, c)=None)`: `x` is `(in, len)` or `(in, len, batch)`; `h`, `c` are `(out,)` or
    `(out, batch)` (zeros if omitted). Returns the hidden states `(out, len[, batch])`, or
    `(outputs, (h_last, c_last))` when `return_state`.

    ```python
    >>> lstm = LSTM(2, 3)           # LSTM(2 => 3)  # 72 parameters
    >>> lstm(jnp.ones((2, 4, 5))).shape
    (3, 4, 5)

    ```
    """

    def __init__(self, a: Any, b: Any = None, *, return_state: bool = False, **cell_kwargs: Any):
        _seq_init(self, "LSTM", LSTMCell, a, b, None, return_state, cell_kwargs)


@layer
class GRU(_CellSequence):
    """A `GRUCell` run over a whole sequence.

    `GRU(in, out; return_state=False, init_kernel, init_recurrent_kernel, bias, rng)`,
    `GRU((in, out))`, or `GRU(cell::GRUCell; return_state=False)`. Field `cell`.
    `m(x, h=None)` with `x` `(in, len[, batch])` returns `(out, len[, batch])` (and the last state
    when `return_state`).

    ```python
    >>> GRU(2, 3)(jnp.ones((2, 4))).shape
    (3, 4)

    ```
    """

    def __init__(self, a: Any, b: Any = None, *, return_state: bool = False, **cell_kwargs: Any):
        _seq_init(self, "GRU", GRUCell, a, b, None, return_state, cell_kwargs)


@layer
class GRUv3(_CellSequence):
    """A `GRUv3Cell` run over a whole sequence (a less common variant, not a newer `GRU`).

    `GRUv3(in, out; return_state=False, init_kernel, init_recurrent_kernel, bias, rng)`,
    `GRUv3((in, out))`, or `GRUv3(cell::GRUv3Cell; return_state=False)`. Field `cell`.
    `m(x, h=None)` with `x` `(in, len[, batch])` returns `(out, len[, batch])` (and the last state
    when `return_state`).

    ```python
    >>> GRUv3(2, 3)(jnp.ones((2, 4, 5))).shape
    (3, 4, 5)

    ```
    """

    def __init__(self, a: Any, b: Any = None, *, return_state: bool = False, **cell_kwargs: Any):
        _seq_init(self, "GRUv3", GRUv3Cell, a, b, None, return_state, cell_kwargs)


@layer
class Recurrence(_SequenceLayer):
    """Run any cell over axis 1 (time) of a sequence, as Flux's `Recurrence`.

    The cell is called `cell(x_t, state) -> (output, new_state)` and provides `initialstates()`.
    `m(x, state=None)`: `x` is `(in, len[, batch])`; returns the outputs stacked on axis 1,
    `(out, len[, batch])`, or `(outputs, last_state)` when `return_state=True`. Field `cell`.

    ```python
    >>> rnn = Recurrence(RNNCell(2, 3))
    >>> rnn(jnp.ones((2, 3, 4))).shape
    (3, 3, 4)

    ```
    """

    def __init__(self, cell: Any, *, return_state: bool = False):
        if not callable(cell):
            raise TypeError(f"Recurrence: the cell must be callable, got {type(cell).__name__}")
        self.cell = cell
        self.return_state = bool(return_state)

    def _show(self) -> str:
        inner = self.cell._show() if hasattr(self.cell, "_show") else type(self.cell).__name__
        return f"Recurrence({inner})"
