"""Many steps of a stateful loop in one compiled program: `jax.lax.scan` over live models.

`train_` on a list of batches calls the same compiled step once per batch, and on a small model the
dispatch of each call costs more than its arithmetic. `scan_steps`, called inside `fluxjax.jit`, runs
`step(d, ok)` for every batch `d` along the leading axis of stacked batches, in one program. The models'
arrays are the scan's carry: for each step they are swapped into the live objects (through the slots of
the one walk), the step runs as it would on its own, with its writes (parameters, optimiser state,
BatchNorm statistics, the global key) read back from the same slots as the next carry, and at the end
the last values are committed into the enclosing region.

Arrays that several slots hold (tied weights, an optimiser hyperparameter shared by many leaves) are one
carry element, so the step sees the same sharing it sees outside a scan. A step that writes somewhere
the walk does not reach, or that cannot keep its carry's structure, raises `NotFusable` while tracing,
before anything is committed: the caller then runs the steps one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from ..core.region import commit, run_in_region
from ..core.undo import RunAgain
from ..core.walk import Slot, walk


class NotFusable(RunAgain):
    """The steps cannot run as one scan (see the module docstring); run them one at a time. `settles`:
    the step changed the structure of its inputs (an optimiser state built with Python numbers that
    the first step turns into arrays, a dict rebuilt in another key order), which steps run one at a
    time may settle, so that a later scan can carry them."""

    def __init__(self, message: str, settles: bool = False):
        super().__init__(message)
        self.settles = settles


class _Regroup(Exception):
    def __init__(self, groups: list[int]):
        self.groups = groups


def _partition(values: list, within: list[int] | None = None) -> list[int]:
    """Group index of each value: values that are the same object (and, given `within`, in the same
    group of it) share a group, numbered in order of first appearance."""
    seen: dict[tuple, int] = {}
    return [seen.setdefault((id(v), None if within is None else within[i]), len(seen)) for i, v in enumerate(values)]


def _sets_fields(fields: list[str]) -> None:
    # traced once, set once: the steps one by one set it as eager ones do
    raise NotFusable(f"the step sets {', '.join(fields)}", settles=True)


def scan_steps(step: Callable[[Any, Any], tuple[Any, Any]], root: list, ds: Any, ok: Any) -> tuple[Any, Any]:
    """`(outs, ok)`: `step(d, ok) -> (out, ok)` for each `d` along the leading axis of `ds`, carrying every
    array `walk(root, functions=True)` reaches in the live objects. Call it inside a region (`fluxjax.jit`),
    with `root` holding every model and state the step reads or writes."""
    w = walk(root, functions=True)
    groups = _partition(w.leaves)
    while True:
        try:
            return _scan(step, root, w, groups, ds, ok)
        except _Regroup as e:  # the step split a group: carry those slots apart, and trace again
            groups = e.groups


def _scan(step, root: list, w, groups: list[int], ds, ok):
    slots: list[Slot] = w.slots
    first: dict[int, int] = {}
    for i, g in enumerate(groups):
        first.setdefault(g, i)
    init = [w.leaves[i] for i in first.values()]

    def collect(region) -> list:
        """The values after the step, read by walking the inputs again (a step may replace whole
        containers, such as an optimiser leaf's state): the walk must be the same, and every write
        must land in an object it reaches."""
        again = walk(root, functions=True)
        if again.signature != w.signature:
            raise NotFusable("the step changes the structure of its inputs", settles=True)
        owners = set(again.layers) | {id(s.owner) for s in again.slots}
        for s in region.written.values():
            if id(s.owner) not in owners:
                raise NotFusable(f"the step writes {type(s.owner).__name__}.{s.key}, which the walk of its "
                                 "inputs does not reach")
        return again.leaves

    def body(carry, d):
        values, ok = carry
        swaps = [(s, values[g]) for s, g in zip(slots, groups)]
        (out, ok), new = run_in_region(lambda: step(d, ok), swaps, collect, fields_set=_sets_fields)
        refined = _partition(new, groups)
        if refined != groups:
            raise _Regroup(refined)
        return ([new[i] for i in first.values()], ok), out

    try:
        (values, ok), outs = jax.lax.scan(body, (init, ok), ds)
    except TypeError as e:  # a step that changes a carried array's dtype or shape
        if "carry" not in str(e):
            raise
        raise NotFusable(f"the step changes the type of what it carries: {e}") from None
    for s, g in zip(slots, groups):
        commit(s, values[g])
    return outs, ok


__all__ = ["NotFusable", "scan_steps"]
