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
cells run batch-major inside it. It computes what the cell unrolled in a Python loop computes: a
custom cell (or a subclass of a built-in one) may read globals, draw random numbers or ask
`within_gradient()` at each step, and a cell that cannot be a scan body is unrolled (see
`recurrent_scan.py`).

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
from typing import Any

import jax
import jax.numpy as jnp

from .._checks import as_array, match_eltype
from ..core.layer import layer
from ..errors import DimensionMismatch, describe
from .recurrent_cells import (
    _BUILTIN_CELLS,
    GRUCell,
    GRUv3Cell,
    LSTMCell,
    RNNCell,
    _as_state,
    _check_input,
    _check_state,
    initialstates,
)
from .recurrent_scan import scan_cell

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


_STEPS_HINT = ("for time steps (in, batch) each, stack them on axis 1 into Flux's (features, time, batch) layout: "
               "jnp.stack(steps, axis=1)")


class _SequenceLayer:
    """The forward pass shared by `RNN`, `LSTM`, `GRU`, `GRUv3` and `Recurrence`."""

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    cell: Any
    return_state: bool

    def initialstates(self) -> Any:
        return initialstates(self.cell)

    def _prepare(self, x: Any) -> jax.Array:
        cell = self.cell
        x = as_array(self, x, hint=_STEPS_HINT)
        if type(cell) in _BUILTIN_CELLS:  # a subclass may change `__call__`: its own steps check
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
        elif type(self.cell) in _BUILTIN_CELLS:
            state = _as_state(state)
            _check_state(self, self.cell, state, x.shape[2:])
        ys, last = scan_cell(self.cell, x, state)
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
