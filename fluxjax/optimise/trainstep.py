"""One training step: `trainstep_` and `trainstep_withgradient_` (Flux's `trainstep!`, for loops that
run code between steps), and the step that `train_` runs for each batch (`_step` op by op,
`_guarded_step` inside a compiled program)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from ..compiled.call import jit as _jit
from ..core.region import (
    Checked,
    base_or_absent,
    checked_notes,
    commit,
    current_region,
    guard_writes,
    put_back,
    run_in_region,
    written,
)
from ..errors import NonFiniteNorm
from ..zygote import Params, withgradient
from ..zygote.adtypes import ADType
from ..zygote.plan import first_output
from .implicit import implicit_update_
from .rooted import boxed, copy_back, unowned_arrays
from .tree import _check_state, update_


def _split_adtype(fn: str, model: Any, data: Any, opt_state: Any, rest: tuple, data_name: str) -> tuple:
    """Flux's `fn(loss, [adtype,] model, data, opt_state)`: `(adtype or None, model, data, opt_state)`."""
    if isinstance(model, ADType):
        if len(rest) != 1:
            raise TypeError(f"{fn}(loss, adtype, model, {data_name}, opt_state) takes 5 positional arguments, "
                            f"got {4 + len(rest)}")
        if isinstance(data, Params):
            raise TypeError(f"{fn}: an adtype goes with a model and its opt_state, not with implicit Params")
        return model, data, opt_state, rest[0]
    if rest:
        raise TypeError(f"{fn}(loss, [adtype,] model, {data_name}, opt_state) takes 4 or 5 positional "
                        f"arguments, got {4 + len(rest)}; the second of 5 must be an adtype such as AutoZygote()")
    return None, model, data, opt_state


def _differentiate(loss, model, d, adtype: ADType | None = None):
    """`(val, grad, writes)`: the loss on batch `d` (a tuple is spliced into `loss`) and its gradient
    (by `adtype`'s `withgradient` when one is given), with the loss's state writes (BatchNorm
    statistics, Dropout keys) held back as `[(slot, value)]`, so that a rejected step can leave the
    model exactly as it was."""
    args = d if isinstance(d, tuple) else (d,)
    def step():
        if isinstance(model, Params):
            return withgradient(lambda: loss(*args), model)
        val, (g,) = withgradient(lambda m: loss(m, *args), *(() if adtype is None else (adtype,)), model)
        return val, g

    (val, g), writes = run_in_region(step, collect=written)
    return val, g, writes


def _apply(model, opt, g, writes) -> None:
    """Commit the loss's state writes, then update. Eager, an update that raises (ClipNorm's non-finite
    norm raises before it writes anything) puts the state writes back: the model is as it was."""
    undo = [(slot, base_or_absent(slot)) for slot, _ in writes] if writes and current_region() is None else ()
    for slot, v in writes:
        commit(slot, v)
    try:
        (implicit_update_ if isinstance(model, Params) else update_)(opt, model, g)
    except BaseException:
        for slot, v in reversed(undo):
            put_back(slot, v)
        raise


def _step(loss, model, opt, d, check, adtype: ADType | None = None) -> Any:
    """One eager step: differentiate, `check` the loss (it raises to reject the step), update.
    `model` is a model (with its state tree `opt`) or a `Params` (with its `ImplicitState`).
    Returns what `check` returned."""
    val, g, writes = _differentiate(loss, model, d, adtype)
    checked = check(first_output(val))
    _apply(model, opt, g, writes)
    return checked


def _guarded_step(loss, model, opt, d, ok=True, checks: bool = True) -> tuple[Any, Any, Any, Checked | None]:
    """Inside `fluxjax.jit`: one step whose every write is undone unless `ok`, the loss is finite, and
    (with `checks`) every check its rules noted passed (ClipNorm's finite norm, which cannot raise
    while traced). Returns `(val, grad, ok and all that, checked)`: `checked` says which check failed
    (see `Checked`), None when the rules noted none (or `checks` is False: they then do what they do
    under a plain `jax.jit`, ClipNorm an all-NaN step)."""
    val, g, writes = _differentiate(loss, model, d)
    region = current_region()
    n = len(region.checks)
    _apply(model, opt, g, writes)
    ok = jnp.logical_and(ok, jnp.isfinite(first_output(val)))
    checked = None
    if checks and len(region.checks) > n:
        checked = checked_notes(region.checks[n:])
        del region.checks[n:]
        ok = jnp.logical_and(ok, checked.failed == 0)
    guard_writes(ok)
    return val, g, ok, checked


def trainstep_(loss: Callable, model: Any, batch: Any, opt_state: Any, *rest: Any, jit: bool = True) -> Any:
    """Flux's `trainstep!`: one optimiser step on one `batch`, in place; returns what `loss` returned.
    `trainstep_(loss, adtype, model, batch, opt_state)` takes Flux's backend choice (see `train_`).

    Differentiates `loss(model, *batch)` for a tuple `batch` (else `loss(model, batch)`) with respect
    to `model` and applies `update_` with `opt_state` from `setup`. A loss may return `(loss, aux...)`:
    the first element is differentiated and the whole value returned. A NaN or Inf loss skips the
    step and leaves the model as it was (state such as BatchNorm statistics included); the returned
    loss says so, and nothing is raised (`train_` raises). Compiled with `fluxjax.jit` by default
    (`jit=False` runs it eagerly); the loss comes back as a device array, so a loop that does not read
    it every step does not wait for the device. A `ClipNorm` (`throw=True`) that meets a non-finite
    gradient norm raises its `NonFiniteNorm` (a `ValueError`), with the model, its state and
    `opt_state` as they were; compiled, a step whose rules hold such a check reads it on the host, so
    that step waits for the device (inside a `fluxjax.jit` of your own it cannot raise: see `ClipNorm`).

    ```python
    >>> model = Dense(jnp.ones((1, 2)))
    >>> x, y = jnp.ones((2, 4)), jnp.zeros((1, 4))
    >>> loss = lambda m, x, y: Flux.losses.mse(m(x), y)
    >>> opt_state = setup(Descent(0.1), model)
    >>> for epoch in range(3):
    ...     l = trainstep_(loss, model, (x, y), opt_state)
    >>> round(float(l), 4), round(float(loss(model, x, y)), 4)   # loss before the 3rd step, and after it
    (0.1024, 0.0164)

    ```
    """
    return _one_step(loss, (model, batch, opt_state, rest), jit, False)[0]


def trainstep_withgradient_(loss: Callable, model: Any, batch: Any, opt_state: Any, *rest: Any,
                            jit: bool = True) -> tuple[Any, Any]:
    """Flux's `trainstep_withgradient!`: `trainstep_` that also returns the gradient, `(val, grad)`,
    with `grad` shaped like the model (`None` where nothing is differentiable).

    ```python
    >>> m = Dense(1, 1, init=ones32)
    >>> opt = setup(Descent(0.1), m)
    >>> loss_fn = lambda m, x, y: jnp.sum((m(x) - y) ** 2)
    >>> batch = (jnp.ones((1, 1)), jnp.zeros((1, 1)))
    >>> loss, grad = trainstep_withgradient_(loss_fn, m, batch, opt)
    >>> loss, grad.weight, m.weight   # 1 - 0.1 * 2
    (Array(1., dtype=float32), Array([[2.]], dtype=float32), Array([[0.8]], dtype=float32))

    ```
    """
    return _one_step(loss, (model, batch, opt_state, rest), jit, True)


def _one_step(loss, args: tuple, jit: bool, with_grad: bool) -> tuple[Any, Any]:
    fn = "trainstep_withgradient_" if with_grad else "trainstep_"
    adtype, model, batch, opt_state = _split_adtype(fn, *args, "batch")
    if isinstance(model, Params):
        raise TypeError(f"{fn} takes a model and opt_state = setup(rule, model); for implicit Params use train_")
    if found := unowned_arrays(model, fn):
        box = [model]
        try:
            args = (box, batch, [opt_state], ()) if adtype is None else (adtype, box, batch, ([opt_state],))
            return _one_step(boxed(loss), args, jit, with_grad)
        finally:
            copy_back(model, box, found)
    _check_state(opt_state, f"{fn}(loss, model, batch, opt_state)")
    # every traceable adtype is JAX's reverse mode: one program; inside a trace (`Flux.jit`), `jit=False`
    # too, since the non-finite check cannot read the traced loss's value in Python
    if (jit or current_region() is not None) and (adtype is None or adtype.traceable):
        traced = current_region() is not None  # (no value to read: the checks stay the rules' own)
        val, g, checked = _COMPILED[traced, with_grad](loss, model, opt_state, batch)
        if checked is not None and (message := checked.error()) is not None:
            raise NonFiniteNorm(f"{fn}: {message}; this step was not applied, the model is as it was before it.")
        return val, g
    val, g, writes = _differentiate(loss, model, batch, adtype)
    if bool(jnp.isfinite(first_output(val))):
        _apply(model, opt_state, g, writes)
    return val, (g if with_grad else None)


def _compiled_steps(checks: bool, with_grad: bool):
    def step(loss, model, opt, d):
        val, g, _, checked = _guarded_step(loss, model, opt, d, checks=checks)
        return val, (g if with_grad else None), checked
    return _jit(step)


_compiled_step, _compiled_step_grad = _compiled_steps(True, False), _compiled_steps(True, True)
# under a trace of the caller's: a step whose rules' checks do what they do under `jax.jit`
_traced_step, _traced_step_grad = _compiled_steps(False, False), _compiled_steps(False, True)
_COMPILED = {(False, False): _compiled_step, (False, True): _compiled_step_grad,
             (True, False): _traced_step, (True, True): _traced_step_grad}


__all__ = ["trainstep_", "trainstep_withgradient_"]
