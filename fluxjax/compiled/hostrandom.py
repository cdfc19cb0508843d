"""Draws from the host's random generators while a program is traced.

`np.random.randn(...)` (Julia's `randn(Float32, ...)` ported line by line), `random.gauss`, or a
NumPy `Generator` / `RandomState` / `random.Random` the code reaches, run in Python: under a trace they
run once, and the draw becomes a constant of the compiled program, the same noise at every call.
Eagerly they draw anew each time. So the trace of a program compares the generators' states before
and after: when the code drew, an eager call that fluxjax compiles on the caller's behalf (the eager
`gradient`/`withgradient`, the fused eager step, the eager `update_`) runs op by op instead, drawing at
each call as Zygote's does; an explicit `fluxjax.jit` (or `train_`) warns, once per function. fluxjax's
own random functions (`randn_like`, `rand32`, `Dropout`) draw from the global key, which compiled
programs take as an input: they draw anew in every mode.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import jax
import numpy as np


class HostRandomDraw(jax.errors.ConcretizationTypeError):
    """The traced code drew from a host random generator: the eager call runs op by op instead."""

    def __init__(self, what: str):
        Exception.__init__(self, f"{what} drew from a host random generator while being traced")


def _frozen(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple((k, _frozen(e)) for k, e in v.items())
    if isinstance(v, np.ndarray):
        return v.tobytes()
    if isinstance(v, (tuple, list)):
        return tuple(_frozen(e) for e in v)
    return v


def _get(g: Any) -> Any:
    if isinstance(g, np.random.Generator):
        return g.bit_generator.state
    return g.get_state(legacy=False) if isinstance(g, np.random.RandomState) else g.getstate()


def _set(g: Any, state: Any) -> None:
    if isinstance(g, np.random.Generator):
        g.bit_generator.state = state
    elif isinstance(g, np.random.RandomState):
        g.set_state(state)
    else:
        g.setstate(state)


class Snapshot:
    """The states of NumPy's and Python's global generators and of the generators in `found` (those
    the walk met: `Walk.host_rngs`), taken before a trace."""

    __slots__ = ("found", "raw", "key")

    def __init__(self, found: list = ()):
        self.found = list(found)
        self.raw = self._now()
        self.key = _frozen(self.raw)

    def _now(self) -> list:
        return [np.random.get_state(legacy=False), random.getstate(), *map(_get, self.found)]

    def changed(self) -> bool:
        return _frozen(self._now()) != self.key

    def restore(self) -> None:
        np.random.set_state(self.raw[0])
        random.setstate(self.raw[1])
        for g, state in zip(self.found, self.raw[2:]):
            _set(g, state)


_warned: set = set()


def drew(fn: Any, on_behalf: bool, before: Snapshot) -> None:
    """After a trace of `fn` that drew from a host generator: op by op when fluxjax compiles on the
    caller's behalf (the generators put back as they were `before`, so the op-by-op call draws what
    it would have; `HostRandomDraw` is one of the errors that send a call op by op), else a warning."""
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if on_behalf:
        before.restore()
        raise HostRandomDraw(name)
    code = getattr(fn, "__code__", type(fn))  # (a callable layer: its class)
    if code not in _warned:
        _warned.add(code)
        warnings.warn(
            f"fluxjax.jit: {name} drew from a host random generator (np.random, random, a NumPy Generator) "
            "while being traced: the draw is a constant of the compiled program, the same at every call. "
            "Draw with fluxjax's randn_like / rand32 / randn32 (the global key, an input of the program), "
            "pass the noise as an argument, or run op by op (jit=False, fluxjax.eager()).",
            stacklevel=4,
        )
