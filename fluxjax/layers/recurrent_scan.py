"""Running a recurrent cell over a sequence (Flux's `scan`): what `RNN`, `LSTM`, `GRU`, `GRUv3` and
`Recurrence` call. A call computes what the cell unrolled step by step in a Python loop computes.

Three ways, by cell:

- A built-in cell of exactly its type (`RNNCell`, `LSTMCell`, `GRUCell`, `GRUv3Cell`, not a subclass,
  which may override `__call__`) whose activation is a library function: its step reads nothing but
  its arrays and static fields, so the loop is one `jax.lax.scan`, computed batch-major
  (`_scan_batch_major`), under one module-level `jax.jit` reused by every call of the same structure and
  shapes.
- A cell with state fields (a `Dropout` inside): unrolled in Python, since a state write per step cannot
  happen inside a scan body.
- Any other cell (a custom `@layer`, a subclass of a built-in cell, a function, a built-in cell with a
  user activation): its Python code may read globals, a config dict, `within_gradient()`, or draw from
  the global key, so it is never put behind a cache of its own. Inside a trace (`fluxjax.jit`,
  `gradient`, `train_`) it is one `jax.lax.scan`, traced with the call, whose cache key (`fluxjax.jit`'s)
  covers what the code reads. Eagerly it runs as a `fluxjax.jit` program of that scan: compiled once
  and reused while what the cell reads is unchanged, recompiled when a global or a config changes, as
  `fluxjax.jit` promises. Inside `with fluxjax.eager():` it is unrolled in Python, op by op, as written.

  The scan carries the global key (`fluxjax.random.default_rng`): each step runs in a region of its
  own with the carried key swapped in, so a cell drawing `randn32` draws anew at every step and every
  call, the same numbers as the unrolled loop, and the advanced key goes back to the global one.
  A step that writes anything else through the state thread (a traced `self.h = h`), that sets a field
  (`self.calls += 1`), or that needs concrete values (`if h[0] > 0`) cannot be a scan body; the
  sequence is then unrolled in Python, which does what the loop does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

from ..compiled.call import jit as fluxjax_jit
from ..compiled.pure import is_eager
from ..core.layer import state_fields
from ..core.region import current_region, rebind, region_key, run_in_region
from ..core.undo import TRACE_ERRORS
from ..core.walk import Slot
from ..errors import DimensionMismatch
from ..functors import all_layers
from ..random import default_key, default_rng, draw_key
from .recurrent_cells import _BUILTIN_CELLS, RNNCell, _as_state, _col

_LIBRARIES = ("fluxjax", "jax", "numpy")


def _has_state(cell: Any) -> bool:
    return any(state_fields(m) for m in all_layers(cell))


def _library_function(f: Any) -> bool:
    """A function of fluxjax, JAX or NumPy (an activation that reads no globals and draws nothing)."""
    return str(getattr(f, "__module__", None) or "").split(".")[0] in _LIBRARIES


def _fast(cell: Any) -> bool:
    """A built-in cell run batch-major under the module-level `jax.jit` (see the module docstring)."""
    if type(cell) not in _BUILTIN_CELLS:
        return False
    return type(cell) is not RNNCell or _library_function(cell.sigma)


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


# ---------------------------------------------------------------------------------------------
# built-in cells


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


# A built-in cell is a pytree (its configuration static) whose step reads nothing else, so the whole
# loop compiles once per structure and shape and is reused by later eager calls; under gradient/jit it
# is a nested call.
_scan_builtin = jax.jit(_scan_batch_major)


# ---------------------------------------------------------------------------------------------
# any other cell


class _Unroll(Exception):
    """The step cannot be a scan body (see the module docstring): unroll the sequence in Python."""


def _is_global_key(slot: Slot) -> bool:
    return slot.owner is default_rng and slot.key == "key" and not slot.path


def _step(cell: Any, x_t: Any, s: Any, key: jax.Array) -> tuple[Any, Any, jax.Array, bool]:
    """`cell(x_t, s)` in a region of its own with `key` as the global key: `(y, s', key', drew)`.
    Raises `_Unroll` (having put everything back) when the step wrote or set anything else."""

    def collect(region: Any) -> tuple[jax.Array, bool]:
        new, drew = key, False
        for slot in region.written.values():
            if not _is_global_key(slot):
                raise _Unroll(f"the cell writes {type(slot.owner).__name__}.{slot.key}")
            new, drew = slot.get(), True
        return new, drew

    (y, s), (key, drew) = run_in_region(lambda: cell(x_t, s), [(Slot(default_rng, "key", True), key)], collect,
                                        fields_set=_sets_fields)
    return y, s, key, drew


def _sets_fields(fields: list[str]) -> None:
    raise _Unroll(f"the cell sets {', '.join(fields)}")


def _unroll(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    """The sequence as a Python loop over the time steps: exactly what the cell does, step by step."""
    if x.shape[1] == 0:
        raise DimensionMismatch(f"{type(cell).__name__}: cannot unroll over an empty sequence (the input's "
                                f"shape {tuple(x.shape)} has no time steps on axis 1); give at least one step")
    ys = []
    for t in range(x.shape[1]):
        y, state = cell(x[:, t], state)
        ys.append(y)
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a, axis=1), *ys), state


def _scan_general(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    """Any cell as one `lax.scan` carrying the global key, or unrolled when it cannot be one."""
    xs = jnp.moveaxis(x, 1, 0)
    region = current_region()
    key = default_key()
    drew = []

    def probe(x_t: Any, s: Any) -> tuple[Any, Any]:
        y, s, _, d = _step(cell, x_t, s, key)
        drew.append(d)
        return y, s

    def body(c: tuple, x_t: Any) -> tuple[tuple, Any]:
        s, k = c
        y, s, k, _ = _step(cell, x_t, s, k)
        return (s, k), y

    try:
        carry = _carry_like(probe, jax.ShapeDtypeStruct(xs.shape[1:], xs.dtype), state)
        threaded = False  # the region takes the advanced global key back
        if drew[0] and region is None:
            # no region takes the advanced key back: a key split off the global one now (under a plain
            # jax.jit that raises: each call would draw the same)
            key = draw_key(None, f"{type(cell).__name__}'s random draw")
        elif drew[0]:
            given = region_key()  # in functional's apply: a key from its rng (without one: raises)
            if given is not None:
                key = given
            threaded = given is None
        (last, key), ys = jax.lax.scan(body, (carry, key), xs)
    except (_Unroll, *TRACE_ERRORS):
        return _unroll(cell, x, state)
    if threaded:
        rebind(default_rng, "key", key)
    return jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 0, 1), ys), last


# an eager call of a general cell: `_scan_general` as a `fluxjax.jit` program, whose cache key covers
# what the cell's code reads (globals, closures, dicts, the mode) and which returns the advanced key
_scan_general_jit = fluxjax_jit(_scan_general)


def scan_cell(cell: Any, x: jax.Array, state: Any) -> tuple[Any, Any]:
    """Flux's `scan`: run `cell` over axis 1 of `x`, stacking the outputs on axis 1; returns
    `(outputs, last_state)`."""
    state = _as_state(state)
    if _has_state(cell):
        # A cell with state fields (e.g. a Dropout inside) records a state write per step, which
        # must not happen inside a scan body: unroll in Python instead.
        return _unroll(cell, x, state)
    if _fast(cell):
        return _scan_builtin(cell, x, state)
    if current_region() is None and trace_state_clean():  # an eager call
        if is_eager():  # op by op, as written (an empty sequence has no step to run: one scan)
            return _unroll(cell, x, state) if x.shape[1] else _scan_general(cell, x, state)
        try:
            return _scan_general_jit(cell, x, state)
        except TRACE_ERRORS:  # the cell needs concrete values (`if h[0] > 0`): the loop as written
            return _unroll(cell, x, state)
    return _scan_general(cell, x, state)


__all__ = ["scan_cell"]
