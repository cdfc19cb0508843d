"""Flux's callback helpers (Flux.jl src/utils.jl): `throttle`, and the patience triggers `patience`,
`early_stopping` and `plateau` for loops written around `trainstep_` or `train_`."""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["throttle", "patience", "early_stopping", "plateau"]

PLATEAU_MIN_DIST = float(np.float32(1e-6))  # Flux's `1f-6`


def _daemon_timer(seconds: float, fn: Callable[[], Any]) -> threading.Timer:
    t = threading.Timer(seconds, fn)
    t.daemon = True  # a trailing call still pending when the program ends is dropped
    return t


class Throttled:
    """What `throttle` returns: calls `f` at most once every `timeout` seconds (see `throttle`)."""

    def __init__(self, f: Callable, timeout: float, leading: bool, trailing: bool, timer: Callable):
        self.f, self.timeout, self.leading, self.trailing, self.timer = f, timeout, leading, trailing, timer
        self.result: Any = None
        self._cooldown, self._later = True, None
        self._lock = threading.RLock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._cooldown:
                if self.leading:
                    self.result = self.f(*args, **kwargs)
                else:  # as Flux, the first call of a quiet period runs at its end, its result unkept
                    self._later = lambda: self.f(*args, **kwargs)
                self._cooldown = False
                self.timer(self.timeout, self._tick).start()
            elif self.trailing:
                self._later = lambda: self._keep(self.f(*args, **kwargs))
            return self.result

    def _keep(self, value: Any) -> None:
        self.result = value

    def _tick(self) -> None:
        """The end of a `timeout` since the last run: run the call waiting, if any, and wait again;
        with none waiting, the next call runs at once (when `leading`)."""
        with self._lock:
            later, self._later = self._later, None
            if later is None:
                self._cooldown = True
                return
            try:
                later()
            except BaseException:
                self._cooldown = True
                raise
            self.timer(self.timeout, self._tick).start()


def throttle(f: Callable, timeout: float, *, leading: bool = True, trailing: bool = False,
             timer: Callable | None = None) -> Throttled:
    """Flux's `throttle(f, timeout; leading=true, trailing=false)`: a function that calls `f` at most
    once every `timeout` seconds and returns the latest result of `f`.

    The first call runs `f` at once (`leading=False`: at the end of the `timeout`). Calls during the
    following `timeout` seconds are dropped, or with `trailing=True` the last of them runs when the
    `timeout` is over. The delayed calls run on a timer thread (`threading.Timer`, a daemon);
    `timer(seconds, fn)`, an object with `start()`, replaces it (tests use a fake clock).

    ```python
    >>> import time
    >>> calls = []
    >>> log = Flux.throttle(lambda i: calls.append(i), 0.5)
    >>> for i in range(4):
    ...     log(i)
    ...     time.sleep(0.3)
    >>> calls
    [0, 2]

    ```
    """
    if not timeout >= 0:
        raise ValueError(f"throttle: timeout must be a number of seconds >= 0, got {timeout!r}")
    return Throttled(f, timeout, leading, trailing, _daemon_timer if timer is None else timer)


def patience(predicate: Callable[..., bool], wait: int) -> Callable[..., bool]:
    """Flux's `patience(predicate, wait)`: a function that counts the consecutive calls for which
    `predicate(*args, **kwargs)` is true (a false one resets the count) and returns whether the count
    has reached `wait`.

    ```python
    >>> trigger = Flux.patience(lambda: True, 3)
    >>> [trigger() for _ in range(4)]
    [False, False, True, True]

    ```
    """
    count = 0

    def on_trigger(*args: Any, **kwargs: Any) -> bool:
        nonlocal count
        count = count + 1 if predicate(*args, **kwargs) else 0
        return count >= wait

    return on_trigger


def early_stopping(f: Callable, delay: int, *, distance: Callable = operator.sub, init_score: Any = math.inf,
                   min_dist: Any = 0) -> Callable[..., bool]:
    """Flux's `early_stopping(f, delay; distance = -, init_score = Inf, min_dist = 0)`: a trigger that
    is true once `f(*args, **kwargs)` has failed to improve on its best score `delay` calls in a row.

    A call improves when `distance(best_score, score) >= min_dist`; `best_score` (starting at
    `init_score`) becomes `score` unless the distance is negative. The defaults watch a decreasing
    metric (a loss); for an increasing one (an accuracy) pass
    `distance=lambda best, score: score - best, init_score=-math.inf`.

    ```python
    >>> scores = iter([3.0, 2.0, 2.5, 2.1, 2.2, 1.0])
    >>> es = Flux.early_stopping(lambda: next(scores), 3)
    >>> [es() for _ in range(5)]   # 2.0 is the best; 2.5, 2.1 and 2.2 do not improve on it
    [False, False, False, False, True]

    ```
    """
    best_score = init_score

    def trigger(*args: Any, **kwargs: Any) -> bool:
        nonlocal best_score
        score = f(*args, **kwargs)
        d = distance(best_score, score)
        best_score = best_score if d < 0 else score
        return d < min_dist

    return patience(trigger, delay)


def plateau(f: Callable, width: int, *, distance: Callable = operator.sub, init_score: Any = math.inf,
            min_dist: Any = PLATEAU_MIN_DIST) -> Callable[..., bool]:
    """Flux's `plateau(f, width; distance = -, init_score = Inf, min_dist = 1f-6)`: a trigger that is
    true once `f(*args, **kwargs)` has moved by less than `min_dist` from its previous value
    (`abs(distance(last_score, score))`, the first call compared with `init_score`) `width` calls in a
    row.

    ```python
    >>> scores = iter([1.0, 0.5, 0.5, 0.5, 0.5])
    >>> trigger = Flux.plateau(lambda: next(scores), 2)
    >>> [trigger() for _ in range(4)]
    [False, False, False, True]

    ```
    """
    last_score = init_score

    def is_plateau(*args: Any, **kwargs: Any) -> bool:
        nonlocal last_score
        score = f(*args, **kwargs)
        d = abs(distance(last_score, score))
        last_score = score
        return d < min_dist

    return patience(is_plateau, width)
