"""Reusing `fluxjax.jit`'s walk of its arguments from one call to the next.

Walking a model and its optimiser state costs far more than dispatching the compiled step, so a
`Plan` remembers the last walk and checks cheaply that it still describes the arguments:

- arrays and numbers passed directly, or in a flat tuple/list (a batch), may change every call: only
  their kind is checked, and their values are read afresh;
- every other argument (models, optimiser states, functions) must be the very same object;
- nothing reached from those may have changed shape: layers and `Tangent`s bump the structure
  version (`functors.bump`) whenever a field is set, the state thread bumps it when it rebinds a slot
  to anything but an array, and every list and dict the walk passed through must hold the same items
  (arrays may have been rebound in place). A pytree node of an unknown type makes the walk
  non-reusable, since it could change unseen.

Arrays are read through the walk's slots on every call, so rebinding them (`update_`, `loadmodel_`,
an eager step) between calls is always seen.
"""

from __future__ import annotations

from typing import Any

from ._slots import _ARRAY, _NUMBER, Walk, _leaf_sig
from .functors import _version

_LEAF, _FLAT, _SAME = 0, 1, 2
_AN_ARRAY = object()  # stands for "some array" in a container's snapshot


def _snapshot(c: list | dict) -> tuple:
    if type(c) is dict:
        return tuple(c), tuple(_AN_ARRAY if isinstance(e, _ARRAY) else e for e in c.values())
    return None, tuple(_AN_ARRAY if isinstance(e, _ARRAY) else e for e in c)


def _same_items(c: list | dict, keys: tuple | None, refs: tuple) -> bool:
    if len(c) != len(refs):
        return False
    if keys is not None:
        if tuple(c) != keys:
            return False
        c = c.values()
    for e, r in zip(c, refs):
        if e is not r and not (r is _AN_ARRAY and isinstance(e, _ARRAY)):
            return False
    return True


def _is_data(v: Any) -> bool:
    return isinstance(v, _ARRAY) or isinstance(v, _NUMBER)


class Plan:
    """The reusable part of one walk of `box = [*args, {}]` (see the module docstring)."""

    __slots__ = ("version", "box", "walk", "entry", "kinds", "containers", "owned")

    def __init__(self, box: list, w: Walk, entry: Any):
        self.version = _version[0]
        self.box, self.walk, self.entry = box, w, entry
        self.kinds: list[tuple] = []
        skip = {id(box[-1])}
        for v in box[:-1]:
            if _is_data(v):
                self.kinds.append((_LEAF, _leaf_sig(v)))
            elif type(v) in (tuple, list) and all(_is_data(e) for e in v):
                self.kinds.append((_FLAT, type(v), tuple(_leaf_sig(e) for e in v)))
                skip.add(id(v))
            else:
                self.kinds.append((_SAME, v))
        self.containers = [(c, *_snapshot(c)) for c in w.containers if id(c) not in skip]
        # containers that hold tuples the call itself rebuilds (optimiser states in a list)
        at = {id(c[0]): k for k, c in enumerate(self.containers)}
        self.owned = {i: at[id(s.owner)] for i, s in enumerate(w.slots) if s.attr is False and id(s.owner) in at}
        w.leaves = []  # the walk is kept for its slots only; do not hold on to the first call's arrays
        self.release()

    def written(self, changed: dict) -> None:
        """After the call's own writes: containers whose items it rebuilt are snapshotted again."""
        for k in {self.owned[i] for i in changed if i in self.owned}:
            c = self.containers[k][0]
            self.containers[k] = (c, *_snapshot(c))

    def release(self) -> None:
        """Drop the references to this call's data arguments (the box keeps models only)."""
        for i, k in enumerate(self.kinds):
            if k[0] != _SAME:
                self.box[i] = None

    def matches(self, args: tuple) -> bool:
        if _version[0] != self.version or len(args) != len(self.kinds) or self.entry.current is not None:
            return False
        for a, k in zip(args, self.kinds):
            kind = k[0]
            if kind == _SAME:
                if a is not k[1]:
                    return False
            elif kind == _LEAF:
                if not _is_data(a) or _leaf_sig(a) != k[1]:
                    return False
            elif type(a) is not k[1] or len(a) != len(k[2]) or not all(
                _is_data(e) and _leaf_sig(e) == s for e, s in zip(a, k[2])
            ):
                return False
        return all(_same_items(*c) for c in self.containers)

    def load(self, args: tuple) -> list:
        """Put `args` into the box and read every leaf through the slots."""
        box = self.box
        for i, a in enumerate(args):
            box[i] = a
        return [s.get() for s in self.walk.slots]
