"""Gradient control: `dropgrad`, `ignore` (`ignore_derivatives`), `hook`, `checkpointed` and `forwarddiff`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.layer import is_array
from ..core.region import commit, run_in_region, within_gradient, written
from ..core.walk import walk


def dropgrad(x: Any) -> Any:
    """`x` with no gradient flowing through it (`jax.lax.stop_gradient` on every array)."""
    return jax.tree_util.tree_map(lambda a: jax.lax.stop_gradient(a) if is_array(a) or isinstance(a, jax.core.Tracer) else a, x)


def ignore(f: Any) -> Any:
    """`ignore(lambda: expr)` runs `expr` and contributes no gradient (ChainRules' `ignore_derivatives`).
    A non-callable argument is `dropgrad`ged."""
    return dropgrad(f() if callable(f) and not is_array(f) else f)


ignore_derivatives = ignore


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _hook(f, x):
    return x


_hook.defvjp(lambda f, x: (x, None), lambda f, _, dy: (f(dy),))


def hook(f: Callable, x: Any) -> Any:
    """Identity on the forward pass; the gradient of `x` becomes `f(dx)` (Zygote's `hook`)."""
    return _hook(f, x)


def showgrad(x: Any, name: str = "x") -> Any:
    """Zygote's `@showgrad(x)`: `x` unchanged, and when the gradient reaches it in the backward pass it is
    printed as `∂(name) = ...` (with `jax.debug.print`, so also inside `fluxjax.jit`)."""

    def show(dx):
        jax.debug.print("∂(" + name.replace("{", "{{").replace("}", "}}") + ") = {}", dx)
        return dx

    return _hook(show, x)


def checkpointed(f: Callable, *xs) -> Any:
    """`f(*xs)` without storing intermediates: recomputed in the backward pass (`jax.checkpoint`).

    The arrays of `xs` (models included) go into the checkpointed function as inputs and their layers
    are the live ones, so state that `f` writes (BatchNorm statistics in train mode) comes out of it and
    goes through the state thread like any other write."""
    box = list(xs)
    w = walk(box)
    arrays = [i for i, v in enumerate(w.leaves) if isinstance(v, (jax.Array, np.ndarray))]
    writes: list = []

    def pure(values):
        out, got = run_in_region(lambda: f(*box), [(w.slots[i], v) for i, v in zip(arrays, values)], written)
        writes[:] = [slot for slot, _ in got]
        return out, [v for _, v in got]

    out, new = jax.checkpoint(pure)([w.leaves[i] for i in arrays])
    for slot, v in zip(writes, new):
        commit(slot, v)
    return out


def forwarddiff(f: Callable, x: Any) -> Any:
    """`f(x)`, differentiated in forward mode (a Jacobian by `jax.jacfwd`). As in Zygote, gradients
    of variables `f` closes over are dropped."""
    x = jnp.asarray(x, jnp.result_type(float)) if not is_array(x) else x
    x0 = jax.lax.stop_gradient(x)
    y0 = jax.lax.stop_gradient(f(x0))
    J = jax.lax.stop_gradient(jax.jacfwd(f)(x0))
    dx = x - x0
    lin = jnp.tensordot(J, dx, axes=np.ndim(x)) if np.ndim(x) else J * dx
    return y0 + lin


def isderiving(*_: Any) -> bool:
    """Zygote's `isderiving()`: True while a gradient is being taken (inside `gradient`, `pullback`,
    `withgradient`, `train_`), False otherwise; `within_gradient` by Zygote's name."""
    return within_gradient()
