"""`trainstep_` and `trainstep_withgradient_`: one step of `train_`, for loops that run code between
steps (Flux's `trainstep!`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from ..compiled.call import jit as _jit
from ..core.region import current_region
from ..zygote import Params
from ..zygote.plan import first_output
from .rooted import boxed, copy_back, unowned_arrays
from .train import _apply, _differentiate, _guarded_step, _split_adtype
from .tree import _check_state


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
