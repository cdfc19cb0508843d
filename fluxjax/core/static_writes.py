"""Fields of the models set while a program is traced.

A compiled program runs none of the Python code that made it. A layer that sets a field of its own
while it runs (a data-dependent initialisation's `self.initialized = True`, `m[2].p = 0.9` inside the
function, a custom rule's `self.t += 1`) would have it set once, by the trace, and never by the calls
that reuse the program, where the eager call sets it at every call. So every tracer of a program
opens a `static_writes()` log (`fluxjax.jit`, `train_`'s scan body, the fused eager step's held-back
update and a user cell's scan step through the region runner's `fields_set`; the compiled `update_`
directly); the layers' `__setattr__`/`__delattr__` and `AbstractRule.__setattr__`
report to it (`note_write`), and the tracer does not reuse a program whose trace changed a field.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

_logs = threading.local()
ABSENT = object()  # a field the object did not have
_layers: dict[str, Callable] = {}  # fluxjax.core.layer's `bump` and `forget`, installed when it is imported


def use_layers(bump: Callable[[], None], forget: Callable[[Any], None]) -> None:
    """Called by fluxjax.core.layer: what `undo` calls after putting fields back."""
    _layers.update(bump=bump, forget=forget)


class StaticWrites:
    """The fields of existing layers (and custom rules) set while the log was open: `changed()` names
    those whose value differs from before (setting a field to what it held is no change), `undo()`
    puts the values back. Objects built while it was open are their own business."""

    __slots__ = ("first", "born")

    def __init__(self):
        self.first: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id, field) -> (object, value before)
        self.born: set[int] = set()

    def changed(self) -> list[str]:
        """`"Type.field"` for every field set to a different value."""
        return [f"{type(obj).__name__}.{name}" for (_, name), (obj, old) in self.first.items()
                if not _same(old, obj.__dict__.get(name, ABSENT))]

    def undo(self) -> None:
        for (_, name), (obj, old) in reversed(self.first.items()):
            if old is ABSENT:
                obj.__dict__.pop(name, None)
            else:
                obj.__dict__[name] = old
            _layers["forget"](obj)
        if self.first:
            _layers["bump"]()


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or isinstance(a, (jax.Array, np.ndarray)):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _active() -> list[StaticWrites]:
    logs = getattr(_logs, "stack", None)
    if logs is None:
        logs = _logs.stack = []
    return logs


@contextlib.contextmanager
def static_writes() -> Iterator[StaticWrites]:
    """Record the fields set on existing layers and custom rules inside the block (see `StaticWrites`).
    When the block raises, they are put back (a trace that failed did not happen); otherwise an
    enclosing log takes them over."""
    logs = _active()
    log = StaticWrites()
    logs.append(log)
    try:
        yield log
    except BaseException:
        logs.pop()
        log.undo()
        raise
    logs.pop()
    if logs:
        outer = logs[-1]
        outer.born |= log.born
        for k, v in log.first.items():
            outer.first.setdefault(k, v)


def tracing_program() -> bool:
    """Whether a program is being traced on this thread (a `static_writes()` log is open)."""
    return bool(getattr(_logs, "stack", None))


def note_write(obj: Any, name: str) -> None:
    """Called before a field of a layer or custom rule is set: the open log, if any, keeps its value."""
    logs = getattr(_logs, "stack", None)
    if logs and not name.startswith("_fluxjax") and not any(id(obj) in log.born for log in logs):
        logs[-1].first.setdefault((id(obj), name), (obj, obj.__dict__.get(name, ABSENT)))


def mark_born(obj: Any) -> None:
    """`obj` is being built: the open log, if any, leaves its fields alone."""
    logs = getattr(_logs, "stack", None)
    if logs:
        logs[-1].born.add(id(obj))


__all__ = ["StaticWrites", "mark_born", "note_write", "static_writes", "tracing_program"]
