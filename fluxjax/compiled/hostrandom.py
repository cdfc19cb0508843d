"""Draws from the host's random generators while a program is traced.

`np.random.randn(...)` (Julia's `randn(Float32, ...)` ported line by line), `random.gauss`, or a
NumPy `Generator` / `RandomState` / `random.Random` the code reaches, run in Python: under a trace they
run once, and the draw becomes a constant of the compiled program, the same noise at every call.
Eagerly they draw anew each time. So the trace of a program compares the generators' states before
and after: when the code drew, an eager call that fluxjax compiles on the caller's behalf (the eager
`gradient`/`withgradient`, the fused eager step, the eager `update_`) runs op by op instead, drawing at
each call as Zygote's does, and so does `train_` (from the step that drew on, see `refused`); an
explicit `fluxjax.jit` warns, once per function. fluxjax's
own random functions (`randn_like`, `rand32`, `Dropout`) draw from the global key, which compiled
programs take as an input: they draw anew in every mode.

An iterator or a generator the code reads (`next(batches)` in a loss) is the same kind of host state,
but what it yields cannot be seen, nor put back: a call that reads one is never traced on the caller's
behalf (it runs op by op), and an explicit `fluxjax.jit` traces and compiles such a call anew each
time (with a warning, once per function), so that each call takes the next item, as the eager call does.
"""

from __future__ import annotations

import contextlib
import random
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from .. import callsite


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


class HostIterator(HostRandomDraw):
    """The code reads an iterator: the eager call runs op by op instead (see the module docstring)."""

    def __init__(self, what: str):
        Exception.__init__(self, f"{what} reads an iterator, whose next item a compiled program cannot take")


class ContainerShrunk(HostRandomDraw):
    """The traced code removed items from a list or dict it reads (`q.pop(0)`): put back, and the call
    runs op by op instead, or, under an explicit `fluxjax.jit`, raises."""

    def __init__(self, what: str):
        Exception.__init__(
            self, f"{what} removed items from a list or dict it reads (q.pop(0), del d[k]) while being traced: "
                  "a compiled program cannot take that item as its input (nothing was changed). Pass the item as "
                  "an argument (x = q.pop(0) outside, then f(model, x)), or run op by op (jit=False, fluxjax.eager())")


def reads_iterator(found: list, fn: Any, on_behalf: bool) -> bool:
    """Before a call whose walk met the host state `found` (`Walk.host_rngs`): whether `fn` reads an
    iterator. Then a call compiled on the caller's behalf raises `HostIterator` (nothing ran yet), and an
    explicit `fluxjax.jit` warns, once per function, that it compiles each such call anew."""
    if not any(isinstance(g, Iterator) for g in found):
        return False
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if on_behalf or refusing():
        raise HostIterator(name)
    code = getattr(fn, "__code__", type(fn))
    if ("iterator", code) not in _warned:
        _warned.add(("iterator", code))
        warnings.warn(
            f"fluxjax.jit: {name} reads an iterator or a generator (next(it)), whose items a compiled program "
            "cannot take as inputs: each call is traced and compiled again, so that it takes the next item. "
            "Pass the item as an argument instead (for x in it: step(model, x)).", stacklevel=callsite.stacklevel())
    return True


class Snapshot:
    """The states of NumPy's and Python's global generators and of the generators in `found` (those
    the walk met: `Walk.host_rngs`), taken before a trace."""

    __slots__ = ("found", "raw", "key")

    def __init__(self, found: list = ()):
        self.found = [g for g in found if not isinstance(g, Iterator)]
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


_refusing = threading.local()


@contextlib.contextmanager
def refused() -> Iterator[None]:
    """While open, a trace that draws from a host generator or reads an iterator raises (`HostRandomDraw`,
    nothing applied), as under a call compiled on the caller's behalf: `train_` then runs that step and
    the rest op by op."""
    before = refusing()
    _refusing.on = True
    try:
        yield
    finally:
        _refusing.on = before


def refusing() -> bool:
    """Whether `refused()` is open (in this thread)."""
    return getattr(_refusing, "on", False)


def drew(fn: Any, on_behalf: bool, before: Snapshot) -> None:
    """After a trace of `fn` that drew from a host generator: op by op when fluxjax compiles on the
    caller's behalf (the generators put back as they were `before`, so the op-by-op call draws what
    it would have; `HostRandomDraw` is one of the errors that send a call op by op), else a warning."""
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if on_behalf or refusing():
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
            stacklevel=callsite.stacklevel(),
        )
