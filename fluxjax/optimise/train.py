"""`train_`: Flux's training loop, compiled by default."""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import jax.numpy as jnp
import optax

from ..state import guard_writes
from ..state import jit as _jit
from ..zygote import Params, _first, withgradient
from .tree import _implicit_holder, implicit_update_, setup, update_


class NonFiniteLoss(FloatingPointError):
    """The loss was NaN or Inf (Flux's `DomainError`); the step was not applied."""


def _call(loss, model, d):
    return loss(model, *d) if isinstance(d, tuple) else loss(model, d)


def _explicit_step(loss, model, opt_state, d, check=None):
    val, (g,) = withgradient(lambda m: _call(loss, m, d), model)
    lval = _first(val)
    if check is not None:
        check(lval)
    update_(opt_state, model, g)
    return lval, jnp.isfinite(lval)


def _implicit_step(loss, ps, holder, d, check=None):
    args = d if isinstance(d, tuple) else (d,)
    val, gs = withgradient(lambda: loss(*args), ps)
    lval = _first(val)
    if check is not None:
        check(lval)
    implicit_update_(holder, ps, gs)
    return lval, jnp.isfinite(lval)


@_jit
def _compiled_explicit(loss, model, opt_state, d):
    lval, finite = _explicit_step(loss, model, opt_state, d)
    guard_writes(finite)
    return lval


@_jit
def _compiled_implicit(loss, ps, sources, holder, d):
    lval, finite = _implicit_step(loss, ps, holder, d)
    guard_writes(finite)
    return lval


def _progress(data, enabled):
    if enabled is False:
        return data
    try:
        n = len(data)  # type: ignore[arg-type]
    except TypeError:
        n = None
    if enabled is None and (n is None or n < 100 or not sys.stderr.isatty()):
        return data
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return data
    return tqdm(data, total=n, desc="train_")


def train_(loss: Callable, model: Any, data: Iterable, opt_state: Any, *, jit: bool = True,
           progress: bool | None = None) -> None:
    """Flux's `train!`: one optimiser step per element of `data`.

    `train_(loss, model, data, opt_state)` calls `loss(model, *d)` for tuple batches `d` (else
    `loss(model, d)`), differentiates it with respect to `model` (the loss may return `(loss, aux...)`),
    and applies `update_`. The implicit Flux 0.13 form `train_(loss, params(m), data, rule)` calls
    `loss(*d)`. Steps are compiled with `fluxjax.jit` (`jit=False` runs them eagerly). A NaN or Inf loss
    raises `NonFiniteLoss` naming the data index, with the model as it was before that step. A progress
    bar (tqdm, if installed) shows on long loops at a terminal.
    """
    implicit = isinstance(model, Params)
    if implicit:
        if not isinstance(opt_state, optax.GradientTransformation):
            raise TypeError("train_(loss, ps, data, rule): implicit mode takes a rule, e.g. Adam()")
        holder = _implicit_holder(opt_state, model)
        if jit and not model._sources:
            jit = False  # bare-array Params: nothing to pass into a compiled step
    elif isinstance(opt_state, optax.GradientTransformation) and type(opt_state).__name__ != "Leaf":
        warnings.warn(
            "train_ was given a rule, not a state: the optimiser state is discarded afterwards. "
            "Use opt_state = setup(rule, model) and pass opt_state.",
            stacklevel=2,
        )
        opt_state = setup(opt_state, model)
    for i, d in enumerate(_progress(data, progress)):

        def check(lval, i=i):
            v = float(lval)
            if not math.isfinite(v):
                raise NonFiniteLoss(
                    f"train_: the loss is {v} at data index {i} (0-based); this step was not applied, "
                    "the model is as it was before it."
                )

        if not jit:
            step = _implicit_step if implicit else _explicit_step
            step(loss, model, holder if implicit else opt_state, d, check)
        elif implicit:
            check(_compiled_implicit(loss, model, list(model._sources), holder, d))
        else:
            check(_compiled_explicit(loss, model, opt_state, d))
