"""Flux 0.16's deprecated names that a ported script still calls (Flux.jl `src/deprecations.jl`): each
works as there and warns once per session with a `DeprecationWarning` saying what to write instead."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["reset_"]

_warned: set[str] = set()


def reset_(x: Any) -> Any:
    """Flux's `reset!(m)`: a no-op that returns `m`. Since Flux 0.15 a recurrent layer starts every call
    from its initial state (pass a state to carry one over), so there is nothing to reset; the call can
    be removed. Warns once per session, as Flux's `Base.depwarn`.

    ```python
    >>> import warnings
    >>> m = Chain(LSTM(2, 3))
    >>> with warnings.catch_warnings(): warnings.simplefilter("ignore"); m2 = reset_(m)   # (it warns once)
    >>> m2 is m   # Flux ≥ 0.15 has no state to reset: remove the call
    True

    ```
    """
    if "reset_" not in _warned:
        _warned.add("reset_")
        warnings.warn("reset_(m) is deprecated. You can remove this call as it is no more needed.",
                      DeprecationWarning, stacklevel=2)
    return x
