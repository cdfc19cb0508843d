"""The recurrent cells (`RNNCell`, `LSTMCell`, `GRUCell`, `GRUv3Cell`) and their shared helpers; one
time step each. See `fluxjax/layers/recurrent.py` for the formulas and the sequence layers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_callable, in_python_terms, match_eltype, name, positive_ints
from ..core.layer import is_array, layer
from ..errors import DimensionMismatch, describe
from ..init import create_bias, glorot_uniform
from ..nnlib.activations import sigmoid, tanh
from ..random import resolve_key
from .basic import act_name

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "GRUv3Cell", "initialstates"]


# ---------------------------------------------------------------------------------------------
# helpers


def _fast_act(f: Callable) -> Callable:
    """NNlib's `fast_act` on XLA: `tanh` and `sigmoid` (also NumPy's and jax's) as XLA's own `tanh` and
    `logistic`, others unchanged.

    Flux's cells swap in NNlib's `tanh_fast`/`sigmoid_fast`, approximations that are faster than Julia's
    `tanh` and `σ`. On XLA the native functions are already the fast ones, with the same accuracy: XLA's
    `tanh` is a rational approximation too (max. relative error 2.6e-7 in Float32, NNlib's 2.5e-7; the two
    are at most 6 ulp apart), and `logistic` differs from `sigmoid_fast` only below -80 (~1e-35 for 0).
    NNlib's polynomial spelled out in the program made a 32-step LSTM's compile ~20% longer and its
    training step ~9% slower. `nnlib.tanh_fast` and `nnlib.sigmoid_fast` keep NNlib's numbers for direct calls."""
    if f is jnp.tanh or f is np.tanh:
        return tanh
    if f is jax.nn.sigmoid:
        return sigmoid
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
    return positive_ints(name, n_in, n_out), rest_used


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
            + in_python_terms(lay, x, 0, n_in, "features first: (in, batch), or (in, len, batch) for a sequence")
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

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

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

    def _weights(self) -> dict[str, jax.Array]:
        """The matrices multiplied with the state at every step."""
        return {"Wh": self.Wh}

    def _products(self, batch_major: bool = False) -> dict[str, Callable]:
        """`{name: h -> W * h}` for `_weights`; `batch_major`: `h -> h * Wᵀ` for `(batch, out)` states."""
        if batch_major:
            return {k: (lambda h, W=W: h @ W.T) for k, W in self._weights().items()}
        return {k: (lambda h, W=W: W @ h) for k, W in self._weights().items()}

    def _recur(self, gx: jax.Array, state: Any, mm: dict | None = None, axis: int = 0) -> tuple[Any, Any]:
        """One step from the projected input `gx`; `mm` holds the recurrent products (`_products`);
        `axis` is the features' axis: 0 (Flux's layout), or -1 when a sequence layer runs batch-major."""
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

    def _recur(self, gx: jax.Array, h: jax.Array, mm: dict | None = None, axis: int = 0) -> tuple[jax.Array, jax.Array]:
        mm = mm or self._products()
        h = _fast_act(self.sigma)(_add(gx, mm["Wh"](h)))
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

    def _recur(
        self, gx: jax.Array, state: Any, mm: dict | None = None, axis: int = 0
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        mm = mm or self._products()
        h, c = state
        g = _add(gx, mm["Wh"](h))
        i, f, gg, o = jnp.split(g, 4, axis=axis)
        c = _add(_mul(sigmoid(f), c), sigmoid(i) * tanh(gg))
        h = sigmoid(o) * tanh(c)
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

    def _recur(self, gx: jax.Array, h: jax.Array, mm: dict | None = None, axis: int = 0) -> tuple[jax.Array, jax.Array]:
        mm = mm or self._products()
        gxr, gxz, gxh = jnp.split(gx, 3, axis=axis)
        ghr, ghz, ghh = jnp.split(mm["Wh"](h), 3, axis=axis)
        r = sigmoid(_add(gxr, ghr))
        z = sigmoid(_add(gxz, ghz))
        hh = tanh(_add(gxh, _mul(r, ghh)))
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

    def _weights(self) -> dict[str, jax.Array]:
        return {"Wh": self.Wh[: 2 * self._n_out], "Wh_h": self.Wh_h}  # rows 2n:3n of Wh are unused by Flux's code

    def _recur(self, gx: jax.Array, h: jax.Array, mm: dict | None = None, axis: int = 0) -> tuple[jax.Array, jax.Array]:
        mm = mm or self._products()
        gxr, gxz, gxh = jnp.split(gx, 3, axis=axis)
        ghr, ghz = jnp.split(mm["Wh"](h), 2, axis=axis)
        r = sigmoid(_add(gxr, ghr))
        z = sigmoid(_add(gxz, ghz))
        hh = tanh(_add(gxh, mm["Wh_h"](_mul(r, h))))
        h = _add((1 - z) * hh, _mul(z, h))
        return h, h

    def _show(self) -> str:
        return f"GRUv3Cell({self._n_in} => {self._n_out})"


_BUILTIN_CELLS = (RNNCell, LSTMCell, GRUCell, GRUv3Cell)
