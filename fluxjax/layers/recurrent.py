"""Recurrent cells and layers: Flux 0.16's `src/layers/recurrent.jl`, in Flux's layout.

A *cell* does one time step: `cell(x, state) -> (output, new_state)` with `x` of shape `(in,)` or
`(in, batch)` and a state of shape `(out,)` or `(out, batch)` (`(h, c)` for `LSTMCell`); `cell(x)`
starts from `initialstates(cell)`, zeros. A vector state broadcasts over the batch, as Julia's
broadcasting does.

A *layer* (`RNN`, `LSTM`, `GRU`, `GRUv3`, `Recurrence`) runs a cell over a whole sequence: `x` is
`(in, len)` or `(in, len, batch)` (features, time, batch, as Flux 0.15+), the output is
`(out, len)` or `(out, len, batch)`, the per-step outputs stacked on axis 1. With
`return_state=True` it returns `(outputs, last_state)`. The time loop is one `jax.lax.scan` (time
moved to the front inside), so the sequence length does not grow the compiled program, and the input
projection `Wi * x` of the built-in cells is done for every step at once, as one matrix product.

Weights and formulas are Flux's, so weights trained in Flux load and give the same outputs:

- `RNNCell`: `Wi (out, in)`, `Wh (out, out)`, `bias (out,)`; `h' = σ.(Wi*x .+ Wh*h .+ bias)`.
- `LSTMCell`: `Wi (4out, in)`, `Wh (4out, out)`, `bias (4out,)`, gate rows `[i; f; g; o]`;
  `c' = σ(f)*c + σ(i)*tanh(g)`, `h' = σ(o)*tanh(c')`, state `(h, c)`.
- `GRUCell`: `Wi (3out, in)`, `Wh (3out, out)`, `b (3out,)`, rows `[r; z; h̃]`; one bias, outside
  the `r` product: `h̃ = tanh(Wi_h*x .+ r .* (Wh_h*h) .+ b_h)`, `h' = (1-z)*h̃ + z*h`.
- `GRUv3Cell`: as `GRUCell` plus `Wh_h` (Flux's `Wh_h̃`, `(out, out)`), and (Flux's code, not its
  docstring) `h̃ = tanh(Wi_h*x .+ Wh_h*(r .* h) .+ b_h)`; the last `out` rows of `Wh` are unused.

As Flux, the gates use `sigmoid_fast`/`tanh_fast`, and `RNNCell`'s `tanh`/`sigmoid` become their
fast versions (NNlib's `fast_act`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_callable, match_eltype, name
from ..errors import DimensionMismatch, describe
from ..functors import all_layers, is_array, is_layer, layer, state_fields
from ..init import create_bias, glorot_uniform
from ..nnlib.activations import sigmoid, sigmoid_fast, tanh, tanh_fast
from ..random import resolve_key
from .basic import act_name

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
# helpers


def _fast_act(f: Callable) -> Callable:
    """NNlib's `fast_act`: `tanh` -> `tanh_fast`, `sigmoid` -> `sigmoid_fast`, others unchanged."""
    if f is tanh or f is jnp.tanh or f is np.tanh:
        return tanh_fast
    if f is sigmoid or f is jax.nn.sigmoid:
        return sigmoid_fast
    return f


def _col(v: jax.Array, ndim: int) -> jax.Array:
    """Julia broadcasting aligns leading axes: give a vector trailing singleton axes."""
    return v.reshape(v.shape + (1,) * (ndim - v.ndim)) if v.ndim < ndim else v


def _add(*xs: jax.Array) -> jax.Array:
    """`a .+ b .+ ...` with Julia's (leading-axis) broadcasting of vectors against matrices."""
    nd = max(x.ndim for x in xs)
    out = _col(xs[0], nd)
    for x in xs[1:]:
        out = out + _col(x, nd)
    return out


def _mul(a: jax.Array, b: jax.Array) -> jax.Array:
    nd = max(a.ndim, b.ndim)
    return _col(a, nd) * _col(b, nd)


def _sizes(name: str, a: Any, b: Any) -> tuple[tuple[int, int], Any]:
    """Parse Flux's `in => out`: `(a=(in, out), b=rest)` or `(a=in, b=out)`. Returns ((in, out), used_b)."""
    if isinstance(a, tuple):
        if len(a) != 2:
            raise ValueError(f"{name}: expected (in, out), got {a!r}")
        n_in, n_out = a
        rest_used = False
    else:
        n_in, n_out = a, b
        rest_used = True
    for s in (n_in, n_out):
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s <= 0:
            raise ValueError(f"{name}: sizes must be positive integers, got {(n_in, n_out)}")
    return (int(n_in), int(n_out)), rest_used


def _keys(rng: Any, n: int) -> list:
    if rng is None:
        return [None] * n
    return list(jax.random.split(resolve_key(rng), n))


def _init(f: Callable, dims: tuple[int, ...], key: Any) -> jax.Array:
    return f(*dims, rng=key) if key is not None else f(*dims)


def _matrix(name: str, what: str, w: Any, rows: int | None, cols: int | None) -> jax.Array:
    w = jnp.asarray(w)
    if w.ndim != 2 or (rows is not None and w.shape[0] != rows) or (cols is not None and w.shape[1] != cols):
        want = f"({'?' if rows is None else rows}, {'?' if cols is None else cols})"
        raise ValueError(f"{name}: {what} must be a matrix of shape {want}, got shape {w.shape}")
    return w


def _check_input(lay: Any, x: jax.Array, n_in: int, ndims: tuple[int, ...], what: str) -> None:
    if x.ndim not in ndims:
        raise DimensionMismatch(f"layer {lay._show()} expects {what}, but got {describe(x)}")
    if x.shape[0] != n_in:
        raise DimensionMismatch(
            f"layer {lay._show()} expects size(input, 1) == {n_in}, but got {describe(x)}"
        )


def _as_state(state: Any) -> Any:
    return jax.tree_util.tree_map(jnp.asarray, state)


def _check_state(lay: Any, cell: Any, state: Any, batch: tuple) -> None:
    """A built-in cell's state: `(out,)` or `(out, batch...)` (a tuple `(h, c)` of them for LSTM),
    with the input's batch dims; otherwise a `DimensionMismatch` naming the layer."""
    n = cell._n_out
    lstm = isinstance(cell, LSTMCell)
    want = f"a tuple (h, c), each of size ({n},) or ({n}, batch...)" if lstm else f"of size ({n},) or ({n}, batch...)"
    parts = state if lstm and isinstance(state, (tuple, list)) and len(state) == 2 else (None if lstm else (state,))
    if parts is None:
        raise DimensionMismatch(f"layer {name(lay)} expects a state {want}, but got {type(state).__name__}")
    for s in parts:
        shape = getattr(s, "shape", None)
        if shape is None or len(shape) == 0 or shape[0] != n or (len(shape) > 1 and batch and tuple(shape[1:]) != tuple(batch)):
            got = type(s).__name__ if shape is None else describe(s)
            raise DimensionMismatch(
                f"layer {name(lay)} expects a state {want}" + (f" with batch {tuple(batch)}" if batch else "") + f", but got {got}"
            )


def initialstates(m: Any) -> Any:
    """The initial state of a recurrent cell or layer: zeros of shape `(out,)`; a tuple `(h, c)` of
    two for an LSTM (Flux's `initialstates`). A custom cell provides it with a method
    `initialstates(self)`.

    ```python
    >>> initialstates(RNNCell(3, 5)).shape
    (5,)
    ```
    """
    f = getattr(m, "initialstates", None)
    if f is None:
        raise TypeError(
            f"initialstates: {type(m).__name__} has no method initialstates(self); define one that "
            "returns the cell's zero state"
        )
    return f()


# ---------------------------------------------------------------------------------------------
# cells


class _Cell:
    """Shared by the built-in cells: `project(x) = Wi*x .+ bias` (all steps at once in a layer) and
    `recur(gx, state) -> (output, state)`; `cell(x, state) = recur(project(x), state)`."""

    Wi: jax.Array
    Wh: jax.Array
    _gates = 1

    @property
    def _n_in(self) -> int:
        return int(self.Wi.shape[1])

    @property
    def _n_out(self) -> int:
        return int(self.Wh.shape[1])

    def _bias(self) -> Any:
        raise NotImplementedError

    def _project(self, x: jax.Array) -> jax.Array:
        """`Wi*x .+ bias` for `x` of shape `(in, rest...)`, giving `(gates*out, rest...)`."""
        W = self.Wi
        if x.ndim <= 2:
            g = W @ x
        else:
            g = (W @ x.reshape(x.shape[0], -1)).reshape(W.shape[0], *x.shape[1:])
        b = self._bias()
        return g if b is False else _add(g, b)

    def _recur(self, gx: jax.Array, state: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def initialstates(self) -> Any:
        return jnp.zeros((self._n_out,), self.Wh.dtype)

    def _prepare(self, x: Any) -> jax.Array:
        x = match_eltype(self, x, self.Wi.dtype)
        _check_input(self, x, self._n_in, (1, 2), "a vector (in,) or a matrix (in, batch)")
        return x

    def __call__(self, x: Any, state: Any = None) -> tuple[Any, Any]:
        x = self._prepare(x)
        if state is None:
            state = self.initialstates()
        else:
            state = _as_state(state)
            _check_state(self, self, state, x.shape[1:])
        return self._recur(self._project(x), state)


def _cell_init(
    name: str, a: Any, b: Any, gates: int, init_kernel: Callable, init_recurrent_kernel: Callable, rng: Any
) -> tuple[jax.Array, jax.Array, Any, list]:
    (n_in, n_out), used = _sizes(name, a, b)
    k1, k2, k3 = _keys(rng, 3)
    Wi = _init(init_kernel, (gates * n_out, n_in), k1)
    Wh = _init(init_recurrent_kernel, (gates * n_out, n_out), k2)
    return Wi, Wh, used, [k3]


@layer
class RNNCell(_Cell):
    """The simplest recurrent cell: `h' = σ.(Wi*x .+ Wh*h .+ bias)`, returning `(h', h')`.

    `RNNCell(in, out, σ=tanh; init_kernel=glorot_uniform, init_recurrent_kernel=glorot_uniform,
    bias=True, rng=None)` or `RNNCell((in, out), σ)`; `RNNCell(Wi, Wh, bias=True, σ=tanh)` wraps
    existing arrays. Fields `sigma`, `Wi (out, in)`, `Wh (out, out)`, `bias (out,)` (or `False`).
    `x` is `(in,)` or `(in, batch)`, `h` is `(out,)` or `(out, batch)`; `cell(x)` uses zeros.

    ```python
    >>> r = RNNCell(3, 5)
    >>> y, h = r(jnp.ones((3, 4)))
    >>> y.shape
    (5, 4)
    ```
    """

    def __init__(
        self,
        a: Any,
        b: Any = None,
        c: Any = None,
        d: Any = None,
        *,
        init_kernel: Callable = glorot_uniform,
        init_recurrent_kernel: Callable = glorot_uniform,
        bias: Any = True,
        rng: Any = None,
    ):
        if is_array(a):
            Wi = _matrix("RNNCell", "Wi", a, None, None)
            Wh = _matrix("RNNCell", "Wh", b, Wi.shape[0], Wi.shape[0])
            bias_arg = bias if c is None else c
            sigma = d
        else:
            Wi, Wh, used, _ = _cell_init("RNNCell", a, b, 1, init_kernel, init_recurrent_kernel, rng)
            sigma = c if used else b
            bias_arg = bias
        check_callable("RNNCell", "the activation σ", sigma)
        self.sigma = tanh if sigma is None else sigma
        self.Wi = Wi
        self.Wh = Wh
        self.bias = create_bias(Wi, bias_arg, Wi.shape[0])

    def _bias(self) -> Any:
        return self.bias

    def _recur(self, gx: jax.Array, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = _fast_act(self.sigma)(_add(gx, self.Wh @ h))
        return h, h

    def _show(self) -> str:
        return f"RNNCell({self._n_in} => {self._n_out}, {act_name(self.sigma)})"


@layer
class LSTMCell(_Cell):
    """Long Short-Term Memory cell. Gate rows of `Wi (4out, in)`, `Wh (4out, out)`, `bias (4out,)`
    are `[i; f; g; o]`:

    `c' = σ(f) .* c .+ σ(i) .* tanh(g)`, `h' = σ(o) .* tanh(c')`, returning `(h', (h', c'))`.

    `LSTMCell(in, out; init_kernel=glorot_uniform, init_recurrent_kernel=glorot_uniform, bias=True,
    rng=None)` or `LSTMCell((in, out))`; `LSTMCell(Wi, Wh, bias=True)` wraps existing arrays. The
    state is a tuple `(h, c)`, each `(out,)` or `(out, batch)`; `cell(x)` uses zeros.

    ```python
    >>> l = LSTMCell(3, 5)          # LSTMCell(3 => 5)  # 180 parameters
    >>> y, (h, c) = l(jnp.ones((3, 4)))
    >>> y.shape
    (5, 4)
    ```
    """

    _gates = 4

    def __init__(
        self,
        a: Any,
        b: Any = None,
        c: Any = None,
        *,
        init_kernel: Callable = glorot_uniform,
        init_recurrent_kernel: Callable = glorot_uniform,
        bias: Any = True,
        rng: Any = None,
    ):
        if is_array(a):
            Wi = _matrix("LSTMCell", "Wi", a, None, None)
            if Wi.shape[0] % 4:
                raise ValueError(f"LSTMCell: Wi must have 4*out rows, got shape {Wi.shape}")
            Wh = _matrix("LSTMCell", "Wh", b, Wi.shape[0], Wi.shape[0] // 4)
            bias_arg = bias if c is None else c
        else:
            if c is not None or (isinstance(a, tuple) and b is not None):
                raise TypeError(
                    "LSTMCell takes no activation function: LSTMCell(in, out) or LSTMCell((in, out))"
                )
            Wi, Wh, _, _ = _cell_init("LSTMCell", a, b, 4, init_kernel, init_recurrent_kernel, rng)
            bias_arg = bias
        self.Wi = Wi
        self.Wh = Wh
        self.bias = create_bias(Wi, bias_arg, Wi.shape[0])

    def _bias(self) -> Any:
        return self.bias

    def initialstates(self) -> tuple[jax.Array, jax.Array]:
        n = self._n_out
        return jnp.zeros((n,), self.Wh.dtype), jnp.zeros((n,), self.Wh.dtype)

    def _recur(self, gx: jax.Array, state: Any) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        h, c = state
        g = _add(gx, self.Wh @ h)
        i, f, gg, o = jnp.split(g, 4, axis=0)
        c = _add(_mul(sigmoid_fast(f), c), sigmoid_fast(i) * tanh_fast(gg))
        h = sigmoid_fast(o) * tanh_fast(c)
        return h, (h, c)

    def _show(self) -> str:
        return f"LSTMCell({self._n_in} => {self._n_out})"


def _gru_args(name: str, a: Any, b: Any, c: Any, bias: Any) -> tuple[jax.Array, jax.Array, Any]:
    Wi = _matrix(name, "Wi", a, None, None)
    if Wi.shape[0] % 3:
        raise ValueError(f"{name}: Wi must have 3*out rows, got shape {Wi.shape}")
    Wh = _matrix(name, "Wh", b, Wi.shape[0], Wi.shape[0] // 3)
    return Wi, Wh, bias if c is None else c


@layer
class GRUCell(_Cell):
    """Gated Recurrent Unit cell (v1 of Cho et al.). Rows of `Wi (3out, in)`, `Wh (3out, out)` and
    `b (3out,)` are `[r; z; h̃]`, and the single bias sits outside the `r` product:

    `r = σ(Wi_r x + Wh_r h + b_r)`, `z = σ(Wi_z x + Wh_z h + b_z)`,
    `h̃ = tanh(Wi_h x + r .* (Wh_h h) + b_h)`, `h' = (1 - z) .* h̃ + z .* h`; returns `(h', h')`.

    `GRUCell(in, out; init_kernel, init_recurrent_kernel, bias=True, rng=None)` or
    `GRUCell((in, out))`; `GRUCell(Wi, Wh, b=True)` wraps existing arrays.

    ```python
    >>> g = GRUCell(3, 5)           # GRUCell(3 => 5)  # 135 parameters
    >>> y, h = g(jnp.ones((3, 4)))
    >>> h.shape
    (5, 4)
    ```
    """

    _gates = 3

    def __init__(
        self,
        a: Any,
        b: Any = None,
        c: Any = None,
        *,
        init_kernel: Callable = glorot_uniform,
        init_recurrent_kernel: Callable = glorot_uniform,
        bias: Any = True,
        rng: Any = None,
    ):
        if is_array(a):
            Wi, Wh, bias_arg = _gru_args("GRUCell", a, b, c, bias)
        else:
            if c is not None or (isinstance(a, tuple) and b is not None):
                raise TypeError(
                    "GRUCell takes no activation function: GRUCell(in, out) or GRUCell((in, out))"
                )
            Wi, Wh, _, _ = _cell_init("GRUCell", a, b, 3, init_kernel, init_recurrent_kernel, rng)
            bias_arg = bias
        self.Wi = Wi
        self.Wh = Wh
        self.b = create_bias(Wi, bias_arg, Wi.shape[0])

    def _bias(self) -> Any:
        return self.b

    def _recur(self, gx: jax.Array, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        gxr, gxz, gxh = jnp.split(gx, 3, axis=0)
        ghr, ghz, ghh = jnp.split(self.Wh @ h, 3, axis=0)
        r = sigmoid_fast(_add(gxr, ghr))
        z = sigmoid_fast(_add(gxz, ghz))
        hh = tanh_fast(_add(gxh, _mul(r, ghh)))
        h = _add((1 - z) * hh, _mul(z, h))
        return h, h

    def _show(self) -> str:
        return f"GRUCell({self._n_in} => {self._n_out})"


@layer
class GRUv3Cell(_Cell):
    """Gated Recurrent Unit cell, v3 of Cho et al. As `GRUCell`, plus `Wh_h (out, out)` (Flux's
    `Wh_h̃`); following Flux's code (its docstring differs):

    `h̃ = tanh(Wi_h x + Wh_h (r .* h) + b_h)`, `h' = (1 - z) .* h̃ + z .* h`; returns `(h', h')`.
    The last `out` rows of `Wh` are unused (they get zero gradient), as in Flux.

    `GRUv3Cell(in, out; init_kernel, init_recurrent_kernel, bias=True, rng=None)` or
    `GRUv3Cell((in, out))`; `GRUv3Cell(Wi, Wh, b, Wh_h)` wraps existing arrays.

    ```python
    >>> g = GRUv3Cell(3, 5)         # GRUv3Cell(3 => 5)  # 160 parameters
    >>> g(jnp.ones(3))[0].shape
    (5,)
    ```
    """

    _gates = 3

    def __init__(
        self,
        a: Any,
        b: Any = None,
        c: Any = None,
        d: Any = None,
        *,
        init_kernel: Callable = glorot_uniform,
        init_recurrent_kernel: Callable = glorot_uniform,
        bias: Any = True,
        rng: Any = None,
    ):
        if is_array(a):
            Wi, Wh, bias_arg = _gru_args("GRUv3Cell", a, b, c, bias)
            n = Wh.shape[1]
            if d is None:
                raise TypeError("GRUv3Cell(Wi, Wh, b, Wh_h): Wh_h is required")
            Wh_h = _matrix("GRUv3Cell", "Wh_h", d, n, n)
        else:
            if c is not None or (isinstance(a, tuple) and b is not None):
                raise TypeError(
                    "GRUv3Cell takes no activation function: GRUv3Cell(in, out) or GRUv3Cell((in, out))"
                )
            Wi, Wh, _, (k3,) = _cell_init("GRUv3Cell", a, b, 3, init_kernel, init_recurrent_kernel, rng)
            n = Wh.shape[1]
            Wh_h = _init(init_recurrent_kernel, (n, n), k3)
            bias_arg = bias
        self.Wi = Wi
        self.Wh = Wh
        self.b = create_bias(Wi, bias_arg, Wi.shape[0])
        self.Wh_h = Wh_h

    def _bias(self) -> Any:
        return self.b

    def _recur(self, gx: jax.Array, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        n = self._n_out
        gxr, gxz, gxh = jnp.split(gx, 3, axis=0)
        gh = self.Wh[: 2 * n] @ h  # rows 2n:3n of Wh are unused by Flux's code
        ghr, ghz = gh[:n], gh[n:]
        r = sigmoid_fast(_add(gxr, ghr))
        z = sigmoid_fast(_add(gxz, ghz))
        hh = tanh_fast(_add(gxh, self.Wh_h @ _mul(r, h)))
        h = _add((1 - z) * hh, _mul(z, h))
        return h, h

    def _show(self) -> str:
        return f"GRUv3Cell({self._n_in} => {self._n_out})"


_BUILTIN_CELLS = (RNNCell, LSTMCell, GRUCell, GRUv3Cell)


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


def _steps(cell: Any, x: jax.Array) -> tuple[Callable, jax.Array]:
    """The step function and the time-major inputs `(len, features, batch...)`."""
    if isinstance(cell, _BUILTIN_CELLS):
        # `Wi*x .+ bias` for every step at once; only the recurrent part runs in the loop.
        return cell._recur, jnp.moveaxis(cell._project(x), 1, 0)
    return cell, jnp.moveaxis(x, 1, 0)


def _scan_traced(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    step, xs = _steps(cell, x)
    x0 = jax.ShapeDtypeStruct(xs.shape[1:], xs.dtype)
    carry = _carry_like(step, x0, state)

    def body(s, x_t):
        y, s = step(x_t, s)
        return s, y

    last, ys = jax.lax.scan(body, carry, xs)
    return jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 0, 1), ys), last


# A cell that is a layer is a pytree (its configuration static), so the whole loop compiles once per
# structure and shape and is reused by later eager calls; under gradient/jit it is a nested call.
_scan_compiled = jax.jit(_scan_traced)


def _scan(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    """Flux's `scan`: run `cell` over axis 1 of `x`, stacking the outputs on axis 1."""
    state = _as_state(state)
    if _has_state(cell):
        # A cell with state fields (e.g. a Dropout inside) records a state write per step, which
        # must not happen inside a scan body: unroll in Python instead.
        step, xs = _steps(cell, x)
        if xs.shape[0] == 0:
            raise DimensionMismatch("cannot run a cell with state fields over an empty sequence")
        ys = []
        for t in range(xs.shape[0]):
            y, state = step(xs[t], state)
            ys.append(y)
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a, axis=1), *ys), state
    if is_layer(cell):
        return _scan_compiled(cell, x, state)
    return _scan_traced(cell, x, state)


class _SequenceLayer:
    """The forward pass shared by `RNN`, `LSTM`, `GRU`, `GRUv3` and `Recurrence`."""

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
