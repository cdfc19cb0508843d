"""One training step: `trainstep_` and `trainstep_withgradient_` (Flux's `trainstep!`, for loops that
run code between steps), and the step that `train_` runs for each batch (`_step` op by op,
`_guarded_step` inside a compiled program)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from ..compiled.call import jit as _jit
from ..core.region import commit, current_region, guard_writes, run_in_region, written
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
    for slot, v in writes:
        commit(slot, v)
    (implicit_update_ if isinstance(model, Params) else update_)(opt, model, g)


def _step(loss, model, opt, d, check, adtype: ADType | None = None) -> Any:
    """One eager step: differentiate, `check` the loss (it raises to reject the step), update.
    `model` is a model (with its state tree `opt`) or a `Params` (with its `ImplicitState`).
    Returns what `check` returned."""
    val, g, writes = _differentiate(loss, model, d, adtype)
    checked = check(first_output(val))
    _apply(model, opt, g, writes)
    return checked


def _guarded_step(loss, model, opt, d, ok=True) -> tuple[Any, Any, Any]:
    """Inside `fluxjax.jit`: one step whose every write is undone unless the loss is finite and `ok`.
    Returns `(val, grad, ok and isfinite(loss))`."""
    val, g, writes = _differentiate(loss, model, d)
    _apply(model, opt, g, writes)
    ok = jnp.logical_and(ok, jnp.isfinite(first_output(val)))
    guard_writes(ok)
    return val, g, ok


def trainstep_(loss: Callable, model: Any, batch: Any, opt_state: Any, *rest: Any, jit: bool = True) -> Any:
    """Flux's `trainstep!`: one optimiser step on one `batch`, in place; returns what `loss` returned.
    `trainstep_(loss, adtype, model, batch, opt_state)` takes Flux's backend choice (see `train_`).

    Differentiates `loss(model, *batch)` for a tuple `batch` (else `loss(model, batch)`) with respect
    to `model` and applies `update_` with `opt_state` from `setup`. A loss may return `(loss, aux...)`:
    the first element is differentiated and the whole value returned. A NaN or Inf loss skips the
    step and leaves the model as it was (state such as BatchNorm statistics included); the returned
    loss says so, and nothing is raised (`train_` raises). Compiled with `fluxjax.jit` by default
    (`jit=False` runs it eagerly); the loss comes back as a device array, so a loop that does not read
    it every step does not wait for the device.

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
        return (_compiled_step_grad if with_grad else _compiled_step)(loss, model, opt_state, batch)
    val, g, writes = _differentiate(loss, model, batch, adtype)
    if bool(jnp.isfinite(first_output(val))):
        _apply(model, opt_state, g, writes)
    return val, (g if with_grad else None)


_compiled_step = _jit(lambda loss, model, opt, d: (_guarded_step(loss, model, opt, d)[0], None))
_compiled_step_grad = _jit(lambda loss, model, opt, d: _guarded_step(loss, model, opt, d)[:2])


__all__ = ["trainstep_", "trainstep_withgradient_"]
