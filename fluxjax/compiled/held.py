"""Calling one `fluxjax.jit` function in a loop without going through the models at every call.

A warm `fluxjax.jit` call checks that its walk still fits the arguments, reads every array out of
the models and writes the new ones back: on a tiny model that is a third of a training step. In
`train_`'s loop nothing else reads or rebinds the models between two steps, so a `HeldSteps` keeps the
compiled program's input list from one call to the next, replaces the arrays the program rebinds
and the data, and writes the arrays into the models once, when it closes (also when the loop
raises). Any call the chain cannot take this way (another kind of batch, a walk that could not be
reused) goes through the function itself, with the models up to date.
"""

from __future__ import annotations

from typing import Any

import jax
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

from ..core.region import commit, current_region, mode_context
from .call import NO_STATICS, Jitted
from .entry import act_on_checks

_MISS = object()  # `_step`'s answer when the arguments do not fit the held inputs


class HeldSteps:
    """`chain(*rest)` is `jitted(*fixed, *rest)`; the models in `fixed` are current once `close()`d.
    Use it as a context manager, and only where no other code reads or rebinds them in between."""

    def __init__(self, jitted: Jitted, *fixed: Any):
        self.jitted, self.fixed = jitted, fixed
        self._plan = None  # set while the program's inputs are held here, not in the models
        self._inputs: list = []
        self._at: dict[tuple, int] = {}  # slots a new array goes to -> its input (the plan's `positions`)
        self._place = None  # the held plan's data placer

    def __enter__(self) -> HeldSteps:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, *rest: Any) -> Any:
        with self.jitted._lock:
            if self._plan is not None:
                out = self._step(rest)
                if out is not _MISS:
                    return out
                self.close()
            out = self.jitted(*self.fixed, *rest)
            self._hold(rest)
            return out

    def close(self) -> None:
        """Write the arrays the chain holds into the models."""
        with self.jitted._lock:
            self._close()

    def _close(self) -> None:
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.store({where: self._inputs[p] for where, p in self._at.items()})
            plan.release()
            self._inputs = []
            if self.jitted._plan is None:  # the function's next call may reuse it again
                self.jitted._plan = plan

    def _hold(self, rest: tuple) -> None:
        """After a call through `jitted`, take over its inputs if the next calls can skip the models."""
        plan, n, args = self.jitted._plan, len(self.fixed), (*self.fixed, *rest)
        if (plan is None or current_region() is not None or plan.entry.effects or plan.entry.extra_slots
                or not plan.matches(args, mode_context())):
            # (a plan that does not match is an earlier call's: this one's walk is not reusable; a program
            # that writes beside its inputs may change what the walk keys as static)
            return
        place = plan.placer(n)
        if place is None:
            return
        inputs = plan.load(args)
        if inputs is not None:  # the plan is this chain's alone until it closes
            self._plan, self._inputs, self._place, self._at = plan, inputs, place, plan.positions
            self.jitted._plan = None
        else:
            plan.release()

    def _step(self, rest: tuple) -> Any:
        """One call on the held inputs; `_MISS` (having done nothing) when `rest` does not fit them."""
        plan, inputs = self._plan, self._inputs
        if not self._place(inputs, rest):
            return _MISS
        box, entry = plan.box, plan.entry
        n = len(self.fixed)
        box[n:n + len(rest)] = rest  # the program is traced again for new shapes, from the box
        top = trace_state_clean()
        entry.current = (box, plan.walk, NO_STATICS, top)
        traces = entry.traces
        try:
            out_leaves, changed, extra, tree, checked = entry.call(inputs, top)
        finally:
            entry.current = None
        if entry.traces != traces:
            plan.refresh()
        at = self._at
        if changed.keys() <= at.keys() or self._learn(changed):
            for where, v in changed.items():
                inputs[at[where]] = v
        else:  # it rebound part of an input it takes as one: from here on, the models
            self._close()
            plan.store(changed)
        for k, v in extra.items():
            commit(entry.extra_slot(k, plan.walk), v)
        if entry.wrote_fields:  # its trace set a field (see `Entry.wrote_fields`): the models take over
            self._close()
            self.jitted._forget(entry)
        act_on_checks(checked, top)
        return jax.tree_util.tree_unflatten(tree, out_leaves)

    def _learn(self, changed: dict) -> bool:
        """Find the input each new array of `changed` replaces: the one its slots, and only they,
        share (the same program rebinds the same slots every call, so this runs on the first)."""
        shared = self._plan.entry.shared
        for where in changed:
            p = where[0] if shared is None else shared[where[0]]
            group = (p,) if shared is None else tuple(i for i, q in enumerate(shared) if q == p)
            if where != group:
                return False
            self._at[where] = p
        return True
