"""Flux's train/test modes: `trainmode_`, `testmode_` (each layer's `active` field).

`active=None` is automatic mode: train mode inside `gradient`/`withgradient`/`train_` (a differentiated
region of the state thread, `fluxjax.core.region.is_active`), test mode elsewhere.
"""

from __future__ import annotations

from typing import Any

from .core.layer import bump
from .functors import all_layers


def _set_mode(m: Any, mode) -> Any:
    changed = False
    for lay in all_layers(m):
        if "active" in lay.__dict__ and lay.__dict__["active"] is not mode:
            lay.__dict__["active"] = mode
            changed = True
    if changed:  # the mode is static: compiled calls must walk again (an unchanged model keeps its walks)
        bump()
    return m


def trainmode_(m: Any, mode: bool | str = True) -> Any:
    """Put every Dropout/BatchNorm/... in `m` in train mode (Flux's `trainmode!`).

    >>> m = Chain(Dense(2, 2), Dropout(0.5))
    >>> _ = trainmode_(m)
    >>> m.layers[1].active
    True
    """
    return testmode_(m, "auto" if mode == "auto" else not mode)


def testmode_(m: Any, mode: bool | str | None = True) -> Any:
    """Test mode (`True`), train mode (`False`) or automatic (`"auto"`/`None`), recursively.

    >>> m = Chain(Dense(2, 2), Dropout(0.5))
    >>> _ = testmode_(m)
    >>> m.layers[1].active
    False
    >>> _ = testmode_(m, "auto")
    >>> m.layers[1].active is None                   # automatic: active only inside a gradient
    True
    """
    if mode == "auto" or mode is None:
        return _set_mode(m, None)
    if not isinstance(mode, bool):
        raise ValueError(f"testmode_: mode must be True, False or 'auto', got {mode!r}")
    return _set_mode(m, not mode)
