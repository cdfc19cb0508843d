"""The warning for a layer in automatic mode traced by a plain JAX transformation.

Flux's automatic mode means train mode inside `gradient`/`withgradient`/`train_` and test mode
elsewhere. fluxjax knows it is inside those by the region they open; a plain `jax.grad` or `jax.jit`
of a function of the model opens none, so BatchNorm silently normalises with its running statistics
(which then never move) and Dropout drops nothing. `core.region.is_active` calls `warn_plain_trace` when a
layer in automatic mode decides its mode under a JAX trace with no fluxjax region open."""

from __future__ import annotations

import warnings
from typing import Any

from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

_warned: set[type] = set()  # the layer classes warned about (once each per process)

_WHAT = {
    "BatchNorm": "normalises with its running statistics, which never move",
    "InstanceNorm": "normalises with its running statistics, which never move",
    "Dropout": "drops nothing",
    "AlphaDropout": "drops nothing",
}


class AutoModeWarning(UserWarning):
    """A layer in automatic mode (`active=None`) ran in test mode under a plain JAX transformation."""


def under_plain_trace() -> bool:
    """True while a JAX transformation traces (no fluxjax region is asked about here: the caller is)."""
    return not trace_state_clean()


def warn_plain_trace(layer: Any) -> None:
    """Warn, once per layer class, that `layer` runs in test mode under a plain JAX trace."""
    cls = type(layer)
    if cls in _warned:
        return
    _warned.add(cls)
    name = cls.__name__
    what = _WHAT.get(name, "runs in test mode")
    warnings.warn(
        f"{name} is in automatic mode (active=None) and runs under a plain JAX transformation (jax.grad, "
        f"jax.jit, jax.vmap, ...), which fluxjax cannot see: it runs in test mode, so it {what}. To train, "
        "differentiate with fluxjax.withgradient / fluxjax.gradient, compile with fluxjax.jit, or use the pure "
        "view `params, state, apply = fluxjax.functional(model)` with `apply(params, state, x, train=True)`. "
        "If test mode is what you want (evaluation), say so with fluxjax.testmode_(model), which also "
        "silences this warning.",
        AutoModeWarning,
        stacklevel=3,  # the layer that asked
    )
