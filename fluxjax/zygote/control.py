"""Gradient control: `dropgrad`, `ignore` (`ignore_derivatives`), `hook`, `checkpointed` and `forwarddiff`."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

from ..core.layer import is_array
from ..core.region import commit, current_region, run_in_region, within_gradient, written
from ..core.walk import walk
from ..random import default_rng
from .closure import _referenced


def _stores(f: Callable) -> list:
    """The lists and dicts `f` reads from its globals and closure cells, with their sizes now."""
    return [(var, v, len(v)) for _, var, v, _ in _referenced(f) if type(v) in (list, dict)]


def _check_stores(stores: list) -> None:
    """Raise if `ignore`'s function put a traced value into one of the lists or dicts it reads (Zygote's
    `ignore() do; push!(log, l); end`): it would leave the trace as an invalid value."""
    for var, v, n in stores:
        new = v[n:] if type(v) is list else (list(v.values()) if len(v) != n or len(v) <= 64 else [])
        if any(isinstance(e, jax.core.Tracer) for e in jax.tree_util.tree_leaves(new)):
            if type(v) is list:
                del v[n:]  # what it appended is taken back: the list holds no invalid value
            raise RuntimeError(
                f"ignore: the function stored a traced value in {var!r}. Inside gradient the values are traced "
                "(Zygote's are numbers), so the stored value would be invalid after the call. Log the value "
                "from the result instead: return it beside the loss, `val, grads = withgradient(lambda m: "
                "(loss, {'l': l}), m)` (val[1] is the auxiliary output), or read it after the call."
            )


def dropgrad(x: Any) -> Any:
    """`x` with no gradient flowing through it (`jax.lax.stop_gradient` on every array).

    ```python
    >>> gradient(lambda a, b: dropgrad(a) * b, 2.0, 3.0)   # Zygote: (nothing, 2)
    (None, Array(2., dtype=float32, weak_type=True))

    ```
    """
    return jax.tree_util.tree_map(lambda a: jax.lax.stop_gradient(a) if is_array(a) or isinstance(a, jax.core.Tracer) else a, x)


def ignore(f: Any) -> Any:
    """`ignore(lambda: expr)` runs `expr` and contributes no gradient (ChainRules' `ignore_derivatives`).
    A non-callable argument is `dropgrad`ged.

    ```python
    >>> gradient(lambda x: x * ignore(lambda: x**2), 3.0)   # x**2 is a constant 9 to the gradient
    (Array(9., dtype=float32, weak_type=True),)

    ```

    State that `f` rebinds (an `update_` inside it, a BatchNorm's statistics) is a constant to the
    gradient too: in Flux that is mutation, which Zygote does not differentiate. Inside `gradient` the
    values are traced (Zygote's are numbers), so `f` storing one in a list or dict it reads (Zygote's
    logging idiom, `push!(log, l)`) raises `RuntimeError`: return the value beside the loss instead
    (`withgradient`'s auxiliary output).
    """
    if not callable(f) or is_array(f):
        return dropgrad(f)
    r = current_region()
    before = {} if r is None else {k: s.get() for k, s in r.written.items()}
    stores = _stores(f) if isinstance(f, types.FunctionType) and not trace_state_clean() else None
    out = f()
    if stores:
        _check_stores(stores)
    if r is not None:
        for k, s in list(r.written.items()):
            v = s.get()
            if before.get(k, _UNSET) is not v:
                r.swap(s, jax.tree_util.tree_map(_stop, v))
    return dropgrad(out)


_UNSET = object()


def _stop(a: Any) -> Any:
    return jax.lax.stop_gradient(a) if isinstance(a, jax.Array) else a


ignore_derivatives = ignore


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _hook(f, x):
    return x


_hook.defvjp(lambda f, x: (x, None), lambda f, _, dy: (f(dy),))


def hook(f: Callable, x: Any) -> Any:
    """Identity on the forward pass; the gradient of `x` becomes `f(dx)` (Zygote's `hook`).

    ```python
    >>> gradient(lambda a, b: hook(jnp.negative, a) * b, 2.0, 3.0)   # Zygote: (-3, 2)
    (Array(-3., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))

    ```
    """
    return _hook(f, x)


def showgrad(x: Any, name: str = "x") -> Any:
    """Zygote's `@showgrad(x)`: `x` unchanged, and when the gradient reaches it in the backward pass it is
    printed as `∂(name) = ...` (with `jax.debug.print`, so also inside `fluxjax.jit`)."""

    def show(dx):
        jax.debug.print("∂(" + name.replace("{", "{{").replace("}", "}}") + ") = {}", dx)
        return dx

    return _hook(show, x)


def checkpointed(f: Callable, *xs) -> Any:
    """`f(*xs)` without storing intermediates: recomputed in the backward pass.

    The arrays of `xs` (models included) and those `f` reads from its closure and globals go into the
    checkpointed function as inputs and their layers are the live ones, so state that `f` writes
    (BatchNorm statistics in train mode) comes out of it and goes through the state thread like any
    other write. Under an eager `pullback` (or `gradient(..., jit=False)`), the backward pass calls `f`
    again, as Zygote's does, Python side effects included; inside a compiled program (the eager
    `gradient`'s default, `fluxjax.jit`, `jax.jit`) or under forward mode it is `jax.checkpoint`, which
    replays the traced program.

    ```python
    >>> gradient(lambda x: checkpointed(jnp.sin, x), 0.0)   # cos(0), sin recomputed on the way back
    (Array(1., dtype=float32, weak_type=True),)

    ```
    """
    box = [f, *xs, default_rng]
    w = walk(box, functions=True, read_arrays=True)
    arrays = [i for i, v in enumerate(w.leaves) if isinstance(v, (jax.Array, np.ndarray))]
    writes: list = []
    differentiating = within_gradient()

    def pure(values):
        out, got = run_in_region(lambda: box[0](*box[1:-1]), [(w.slots[i], v) for i, v in zip(arrays, values)],
                                 written, differentiating=differentiating)
        writes[:] = [slot for slot, _ in got]
        return out, [v for _, v in got]

    values = [w.leaves[i] for i in arrays]
    out = new = None
    if _eager_reverse(values):
        try:
            out, new = _rerun_on_back(pure)(values)
        except _Leaked:  # f reads a traced value the walk does not reach: replay the traced program instead
            out = None
    if out is None:
        out, new = jax.checkpoint(pure)(values)
    for slot, v in zip(writes, new):
        commit(slot, v)
    return out


class _Leaked(Exception):
    pass


def _eager_reverse(values) -> bool:
    """Whether these are the inputs of an eager reverse pass: some are JAX's linearize tracers over
    concrete values (`jax.vjp` called op by op), none is traced otherwise. Only then can the backward
    pass call Python again; the tracer's class is read by name, as JAX exports no test for it."""
    some = False
    for v in values:
        if isinstance(v, jax.core.Tracer):
            if type(v).__name__ != "LinearizeTracer" or isinstance(getattr(v, "primal", None), jax.core.Tracer):
                return False
            some = True
    return some


def _rerun_on_back(pure: Callable) -> Callable:
    """`pure` as a `jax.custom_vjp` that keeps only its inputs and, on the backward pass, runs it again
    (Python included) under `jax.vjp`."""

    @jax.custom_vjp
    def run(values):
        return pure(values)

    def fwd(values):
        res = pure(values)
        if any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(res)):
            raise _Leaked  # a closed-over tracer: custom_vjp could not differentiate with respect to it
        return res, values

    def bwd(values, ct):
        _, back = jax.vjp(pure, values)
        return back(ct)

    run.defvjp(fwd, bwd)
    return run


def forwarddiff(f: Callable, x: Any, *, chunk_threshold: int | None = None) -> Any:
    """`f(x)`, differentiated in forward mode: its derivative is `J @ dx` with the Jacobian `J` from
    `jax.jacfwd`, so `f` may hold what reverse mode cannot go through (a `lax.while_loop`). As in Zygote,
    gradients of variables `f` closes over are dropped. Derivatives of any order with respect to `x`
    are exact (`J` is itself differentiated: `hessian` and gradient of gradient see through it).
    `chunk_threshold` (ForwardDiff's chunk size) is accepted and ignored.

    ```python
    >>> gradient(lambda x: forwarddiff(lambda z: jnp.sum(z**2), x), jnp.array([1.0, 2.0]))
    (Array([2., 4.], dtype=float32),)

    ```
    """
    if not is_array(x) or not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        x = jnp.asarray(x, jnp.result_type(float))  # a number, an integer array, a tuple of numbers
    fx, consts = jax.closure_convert(f, x)  # what f closes over becomes explicit inputs, then constants
    return _forward(fx, x, [jax.lax.stop_gradient(c) for c in consts])


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _forward(fx: Callable, x: Any, consts: list) -> Any:
    return fx(x, *consts)


@_forward.defjvp
def _forward_jvp(fx, primals, tangents):
    x, consts = primals
    J = jax.jacfwd(fx)(x, *consts)
    n = np.ndim(x)
    dx = tangents[0]
    return _forward(fx, x, consts), jax.tree_util.tree_map(lambda j: jnp.tensordot(j, dx, axes=n) if n else j * dx, J)


def isderiving(*_: Any) -> bool:
    """Zygote's `isderiving()`: True while a gradient is being taken (inside `gradient`, `pullback`,
    `withgradient`, `train_`), False otherwise; `within_gradient` by Zygote's name.

    ```python
    >>> isderiving()
    False
    >>> gradient(lambda x: x * isderiving(), 2.0)   # True inside: x * 1
    (Array(1., dtype=float32, weak_type=True),)

    ```
    """
    return within_gradient()
