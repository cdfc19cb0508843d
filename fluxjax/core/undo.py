"""Put back what a failed trace changed in the user's lists, dicts, sets and objects.

A compiled call runs the user's Python while tracing. When the trace fails (a step that a scan cannot
carry, a value the program cannot take), the caller runs the code again, op by op or one step at a
time; the side effects the failed trace had (`cfg.n += 1`, `hist.append(x)`, `counts["steps"] += 1`)
would then happen twice. `Contents` records, before the trace, what the objects the code reads hold,
as `static_key` keys them by contents (`keys.py`), and puts back those that changed, when the trace
failed with an error after which a caller runs the code again (`runs_again`); an error that reaches
the user leaves the side effects the code had before it, as the eager call does.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import jax
import numpy as np

from .keys import IMMUTABLE_TYPES, MAX_DEPTH, is_library, slot_names


class RunAgain(Exception):
    """Raised while tracing when the caller will run the code again another way (the steps of a scan
    one by one, a gradient op by op): what the failed trace changed is put back first."""


# the errors of Python code that needs concrete values (an `if` on an array, `float(x)`, `x.item()`,
# NumPy on a traced array): the calls compiled on the user's behalf run such code op by op instead
TRACE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)


def runs_again(e: BaseException) -> bool:
    """Whether a caller runs the code again after the trace raised `e` (a `RunAgain`, a `TRACE_ERRORS`)."""
    return isinstance(e, (RunAgain, *TRACE_ERRORS))


_EMPTY = object()
# not recorded: values that cannot change in place, functions (what they read is recorded where the walk
# meets it), and NumPy arrays (their data is not copied; a trace that writes into one is not undone)
_LEAVES = (bool, int, float, complex, str, bytes, type(None), np.generic, np.ndarray, jax.Array, *IMMUTABLE_TYPES,
           types.FunctionType, types.MethodType, functools.partial)


def _keyed_by_value(v) -> bool:
    """Whether `static_key` keys `v` as itself (a library's hashable object) rather than by its fields."""
    try:
        hash(v)
    except TypeError:
        return False
    t = type(v)
    return t.__hash__ is not object.__hash__ and (is_library(t) or not (hasattr(v, "__dict__") or slot_names(t)))


class Contents:
    """The contents of the lists, dicts, sets and objects reachable from `roots` through containers,
    tuples and fields, as they are now: what `static_key` keys by contents (not functions, NumPy arrays,
    or a library's objects that are their own keys); and `reads`, the `(slot, value)` pairs of the
    globals and closure variables the code read (a walk's `watched`), as they were read."""

    __slots__ = ("saved", "reads")

    def __init__(self, roots, reads=()):
        self.saved: list[tuple[Any, Any]] = []
        self.reads = list(reads)
        seen: set[int] = set()
        for r in roots:
            self._take(r, seen, 0)

    def _take(self, v, seen: set[int], depth: int) -> None:
        if isinstance(v, _LEAVES) or depth > MAX_DEPTH or id(v) in seen:
            return
        seen.add(id(v))
        t = type(v)
        if isinstance(v, (tuple, frozenset)):
            inner = v
        elif t is list:
            self.saved.append((v, list(v)))
            inner = v
        elif t is dict:
            self.saved.append((v, dict(v)))
            inner = v.values()
        elif t is set:
            self.saved.append((v, set(v)))
            return
        elif getattr(t, "__fluxjax_key__", None) is not None or _keyed_by_value(v):
            return
        else:  # the user's object: its fields (a subclass of list or dict: its fields only)
            d = getattr(v, "__dict__", None)
            names = slot_names(t)
            if d is None and not names:
                return
            fields = {} if d is None else dict(d)
            for n in names:
                fields[n] = getattr(v, n, _EMPTY)
            self.saved.append((v, fields))
            inner = fields.values()
        for e in inner:
            self._take(e, seen, depth + 1)

    def shrunk(self, among: list) -> bool:
        """Whether one of the lists and dicts `among` (recorded, as roots) lost items since (`q.pop(0)`)."""
        ids = {id(c) for c in among}
        return any(id(v) in ids and (len(v) < len(old) or (type(v) is dict and not old.keys() <= v.keys()))
                   for v, old in self.saved)

    def restore(self) -> None:
        """Put back the contents and the bindings that changed since they were recorded."""
        for slot, before in self.reads:
            if slot.get_base() is not before:
                slot.set_base(before)
        for v, old in self.saved:
            if type(v) is list:
                if len(v) != len(old) or any(a is not b for a, b in zip(v, old)):
                    v[:] = old
            elif type(v) is dict:
                if v.keys() != old.keys() or any(v[k] is not e for k, e in old.items()):
                    v.clear()
                    v.update(old)
            elif type(v) is set:
                if v != old:
                    v.clear()
                    v.update(old)
            else:  # (past the class's own __setattr__: a layer's refuses some names)
                for n, e in old.items():
                    if e is _EMPTY:
                        if hasattr(v, n):
                            object.__delattr__(v, n)
                    elif getattr(v, n, _EMPTY) is not e:
                        object.__setattr__(v, n, e)
                d = getattr(v, "__dict__", None)
                for n in [] if d is None else [n for n in d if n not in old]:
                    del d[n]
