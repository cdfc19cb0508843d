"""Reusing `fluxjax.jit`'s walk of its arguments from one call to the next.

Walking a model and its optimiser state costs far more than dispatching the compiled step, so a
`Plan` remembers the last walk and checks cheaply that it still describes the arguments:

- arrays and numbers passed directly, or in a flat tuple (a batch), may change every call: only
  their kind is checked, and their values are read afresh (a list is the caller's mutable object: it
  must be the same list, holding the same kinds of items, since the slots read its items);
- a Python function passed directly may be a new one of the same code (`lambda m: loss(m, x, y)` made
  afresh at every step): same code, globals and defaults, and the very same closure cells, which the
  walk's slots read (the cells of an enclosing loop or function are shared by every lambda made there);
- every other argument (models, optimiser states, other callables) must be the very same object;
- an item of a list or dict that is a tuple of arrays (an optimiser state kept in a list) may be a new
  tuple of other arrays in the same containers: the slots reach its arrays by position;
- nothing reached from those may have changed shape: layers and `Tangent`s bump the structure
  version (`functors.bump`) whenever a field is set, the state thread bumps it when it rebinds a slot
  to anything but an array, and every list and dict the walk passed through must hold the same items
  (arrays may have been rebound in place). A pytree node of an unknown type makes the walk
  non-reusable, since it could change unseen;
- the closure cells and globals the walked functions read still hold the same objects (or arrays,
  where they held arrays), and objects keyed by their contents (`static_key`) give the same key;
- the call is made in the same automatic train/test mode.

Arrays are read through the walk's slots on every call, so rebinding them (`update_`, `loadmodel_`,
an eager step) between calls is always seen. The checks, the reads and the writes are straight-line
functions generated once per plan (`_access.py`), so a warm call spends a few microseconds in Python.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..core.keys import static_key
from ..core.layer import structure_version
from ..core.walk import AN_ARRAY, ARRAY_TYPES, NUMBER_TYPES, Slot, Walk, arrays_tree_kind, is_concrete_array, leaf_sig
from .access import Source, loader, storer

_LEAF, _FLAT, _SAME, _FN = 0, 1, 2, 3


@functools.cache
def _concrete() -> frozenset:
    """The types of concrete arrays, checked before the slow `isinstance(x, jax.Array)` (made on the
    first plan, when jax's backend is up: creating an array at import would start it too early)."""
    with jax.ensure_compile_time_eval():  # a concrete array also when first asked while tracing
        return frozenset({type(jax.numpy.zeros(())), np.ndarray})


class _ArraysTree:
    """A snapshot's stand-in for a tuple of arrays (an optimiser state in a list): any tuple of
    arrays in the same containers fits, as the walk's slots reach its arrays by their positions."""

    __slots__ = ("value", "treedef")

    def __init__(self, value: tuple, treedef: Any):
        self.value, self.treedef = value, treedef


def _fits(e: Any, treedef: Any) -> bool:
    """Whether `e` is a tree of concrete arrays of structure `treedef` (which holds no layer)."""
    leaves, d = jax.tree_util.tree_flatten(e)
    if d != treedef:
        return False
    concrete = _concrete()
    return all(type(x) in concrete or is_concrete_array(x) for x in leaves)


def _item(e: Any) -> Any:
    if isinstance(e, ARRAY_TYPES):
        return AN_ARRAY
    if isinstance(e, tuple):
        kind = arrays_tree_kind(e)
        if kind is not None:
            return _ArraysTree(e, kind)
    return e


def _snapshot(c: list | dict) -> tuple:
    if type(c) is dict:
        return tuple(c), tuple(map(_item, c.values()))
    return None, tuple(map(_item, c))


class Containers:
    """The lists and dicts of a walk, as they are now: `holds()` tells whether they still hold the same
    objects (any array where an array was, a tuple of arrays of the same structure where one was),
    so that the walk's slots still reach the same places. The fused eager step (`optimise/eagerstep.py`)
    calls it on its own walk; a `Plan` makes the same check part of its own (`_container_checks`)."""

    __slots__ = ("items", "holds")

    def __init__(self, containers: list):
        self.items = [(c, *_snapshot(c)) for c in containers]
        src = Source(_CONCRETE=_concrete(), _fits=_fits)
        self.holds: Callable[[], bool] = src.compile(
            "def holds():\n    return (" + "\n            and ".join(["True", *_container_checks(src, self.items)]) + ")\n",
            "holds")

    def rebuilt(self, ids: frozenset) -> None:
        """`rebuilt_in(self.items, ids)`."""
        rebuilt_in(self.items, ids)


def rebuilt_in(snapshots: list, ids: frozenset) -> None:
    """After a write that rebuilt, by position, tuples of arrays in the containers whose ids are `ids`
    (the fused eager step's commit of an optimiser state kept in a list), the snapshots in `snapshots`
    (`(c, keys, refs)`, a `Containers`' or a `Plan`'s) take the new tuples, so that the next check finds
    them the same objects instead of checking their structure again."""
    for c, keys, refs in snapshots:
        if id(c) in ids:
            _take_rebuilt(c, keys, refs)


def _take_rebuilt(c: list | dict, keys: tuple | None, refs: tuple) -> None:
    """The snapshot `(c, keys, refs)` of `c` after a store that rebuilt tuples of arrays in `c` by
    position (same containers, other concrete arrays) and changed nothing else: its stand-ins for
    those tuples take the new ones (each snapshot has stand-ins of its own)."""
    for e, r in zip(c.values() if keys is not None else c, refs):
        if type(r) is _ArraysTree:
            r.value = e


def _container_checks(src: Source, containers: list) -> list[str]:
    """The conditions that each container of `containers` (`(c, keys, refs)`, `c` with `_snapshot(c)`)
    holds what its snapshot says: the same length and keys, and each item the same object, or any array
    where an array was, or a tuple of arrays of the same structure where one was. The snapshots are read
    from `containers` at each check, so that replacing one there (a `Plan` does, for the containers
    whose tuples its calls rebuild) needs no new code. The env of `src` must hold `_fits`."""
    snapshots = src.name(containers)
    conds = []
    for n, (c, keys, refs) in enumerate(containers):
        cn = src.name(c)
        conds.append(f"len({cn}) == {len(refs)}")
        if keys is not None:
            conds.append(f"tuple({cn}) == {src.name(keys)}")
            items = [f"{cn}[{src.literal(k)}]" for k in keys]
        else:
            items = [f"{cn}[{i}]" for i in range(len(refs))]
        conds += [
            _is_kind(src, e, None) if r is AN_ARRAY
            else f"({e} is {snapshots}[{n}][2][{i}].value or {_tree_check(src, e, r.value)}"
                 f"_fits({e}, {snapshots}[{n}][2][{i}].treedef))"
            if type(r) is _ArraysTree
            else f"{e} is {snapshots}[{n}][2][{i}]"
            for i, (e, r) in enumerate(zip(items, refs))
        ]
    return conds


def _tree_check(src: Source, e: str, v: Any) -> str:
    """`"(check) or "`: inline, whether `e` is a tree of the structure of `v` (tuples, namedtuples, dicts
    and None around concrete arrays: an optimiser state) holding arrays of the usual concrete types; `""`
    when `v` holds other containers. The check falls back to `_fits` (a `tree_flatten`, some µs) when
    this says no, so it only has to be fast on the common case."""
    def check(e: str, v: Any) -> str | None:
        t = type(v)
        if v is None:
            return f"{e} is None"
        if isinstance(v, tuple) and (t is tuple or hasattr(t, "_fields")):
            parts = [check(f"{e}[{i}]", x) for i, x in enumerate(v)]
            if None in parts:
                return None
            return " and ".join([f"type({e}) is {src.name(t)}", f"len({e}) == {len(v)}", *parts])
        if t is dict:  # Optimisers.jl's hyperparameters, in a rule's state
            parts = [check(f"{e}[{src.literal(k)}]", x) for k, x in v.items()]
            if None in parts:
                return None
            return " and ".join([f"type({e}) is dict", f"{e}.keys() == {src.name(frozenset(v))}", *parts])
        return f"type({e}) in _CONCRETE" if isinstance(v, ARRAY_TYPES) else None

    c = check(e, v)
    return "" if c is None else f"({c}) or "


def _is_kind(src: Source, a: str, sig: Any) -> str:
    """The check that `a` is data of the kind `leaf_sig` gave: an array (None), else its number type."""
    return f"(type({a}) in _CONCRETE or isinstance({a}, _ARRAY))" if sig is None else f"type({a}) is {src.name(sig)}"


def _same_function(src: Source, a: str, f: types.FunctionType) -> str:
    """The check that `a` is `f` or a function made from the same code (its cells, read where `a`
    has them, are checked as the walk's other reads are)."""
    conds = [f"type({a}) is _FUNCTION", f"{a}.__code__ is {src.name(f.__code__)}",
             f"{a}.__globals__ is {src.name(f.__globals__)}"]
    for attr in ("__defaults__", "__kwdefaults__", "__closure__"):
        conds.append(f"{a}.{attr} is None" if getattr(f, attr) is None else f"{a}.{attr} is not None")
    if f.__closure__ is not None:
        conds.append(f"len({a}.__closure__) == {len(f.__closure__)}")
    if f.__defaults__ is not None or f.__kwdefaults__ is not None:
        conds.append(f"{a} is {src.name(f)}")  # defaults are keyed by value: the same function only
    return " and ".join(conds)


def is_data(v: Any) -> bool:
    """Whether an argument is data (an array or a number): read afresh at every call, by kind."""
    return isinstance(v, ARRAY_TYPES) or isinstance(v, NUMBER_TYPES)


def reads_set(w) -> list[str]:
    """After a trace: what the walked functions read that the trace itself changed (`global STEP;
    STEP += 1`, a `nonlocal` counter, `cfg.n += 1` on an object they read), as names for a message.
    Values are compared by their keys (a global rebound to an equal number is not a change); arrays
    that the program takes as inputs are read afresh at each call anyway."""
    names = []
    for slot, before in w.watched:
        now = slot.get_base()
        if now is before or (w.read_arrays and isinstance(before, ARRAY_TYPES)):
            continue
        if static_key(now) != static_key(before):
            names.append(f"global {slot.key}" if slot.attr is False else "a closure variable")
    for o, key in w.watch:
        if static_key(o) != key:
            names.append(f"the contents of a {type(o).__name__}")
    return names


def refresh_reads(w) -> None:
    """Take what the walked functions read as it is now, after a trace whose Python code changed it
    (side effects that run while tracing, as under `jax.jit`, are not changes made by the caller). Only
    right after the call: what the program writes afterwards is a change the next call must see (a
    statistic of a layer the program holds as a constant)."""
    w.watched = [(slot, slot.get_base()) for slot, _ in w.watched]
    w.watch = [(o, static_key(o)) for o, _ in w.watch]


class Plan:
    """The reusable part of one walk of `box = [*args, {}]` (see the module docstring)."""

    __slots__ = ("version", "box", "walk", "entry", "kinds", "containers", "owned", "positions", "mode", "_check",
                 "_load", "_stores", "_placers", "cells", "_cell_slots", "used")

    def __init__(self, box: list, w: Walk, entry: Any, n_args: int, mode: bool, version: int):
        """`box` is `[*args, kwargs, ...]`: the call's `n_args` arguments, then what else was walked;
        `version` is the structure version before the call wrote its results back (a call that
        changed the structure, by writing a new container into a field, leaves a plan that no longer
        fits)."""
        self.version = version
        self.used = 0  # the last call of its `fluxjax.jit` function that used it (see `call.SPARE_AGE`)
        self.box, self.walk, self.entry, self.mode = box, w, entry, mode
        self.kinds: list[tuple] = []
        skip = {id(box[n_args])}
        for v in box[:n_args]:
            if is_data(v):
                self.kinds.append((_LEAF, leaf_sig(v)))
            elif type(v) is tuple and all(is_data(e) for e in v):
                self.kinds.append((_FLAT, type(v), tuple(leaf_sig(e) for e in v)))
                skip.add(id(v))
            elif type(v) is types.FunctionType:
                self.kinds.append((_FN, v))
            else:
                self.kinds.append((_SAME, v))
        # the closure cells of functions passed as arguments: a later call's function of the same code
        # has cells of its own (made anew by each call of the function that wrote the lambda), so
        # generated code reads them through `cells` (`cells[k]`: argument `n`'s `j`-th cell), which
        # `load` points at the call's cells, and so do the walk's slots into them
        self.cells: list = []
        self._cell_slots: list[tuple[int, int, list[Slot]]] = []
        by_cell = {}
        for slot in [*w.slots, *(slot for slot, _ in w.watched)]:
            if slot.attr == "cell":
                by_cell.setdefault(id(slot.owner), []).append(slot)
        for n, k in enumerate(self.kinds):
            if k[0] == _FN:
                for j, cell in enumerate(k[1].__closure__ or ()):
                    self._cell_slots.append((n, j, by_cell.get(id(cell), [])))
                    self.cells.append(cell)
        self.containers = [(c, *_snapshot(c)) for c in w.containers if id(c) not in skip]
        # containers that hold tuples the call itself rebuilds (optimiser states in a list)
        at = {id(c[0]): k for k, c in enumerate(self.containers)}
        self.owned = {i: at[id(s.owner)] for i, s in enumerate(w.slots) if s.attr is False and id(s.owner) in at}
        self._check = self._checker()
        self._load = loader(w.slots, entry.shared, self._source())
        self._stores: dict[tuple, tuple] = {}
        self._placers: dict[int, Callable | None] = {}
        self.positions: dict[tuple, int] = {}  # for `Chain`: slots a new array goes to -> its input
        w.leaves = []  # the walk is kept for its slots only; do not hold on to the first call's arrays
        self.release()

    def store(self, changed: dict, commit: Callable | None = None) -> None:
        """Write a call's outputs, `{(slot indices...): new array}`, into the slots (through `commit`
        when given); containers whose items this rebuilt are snapshotted again."""
        targets = tuple(changed)
        hit = self._stores.get(targets)
        if hit is None:
            owned = {self.owned[i] for where in targets for i in where if i in self.owned}
            hit = self._stores[targets] = (storer(self.walk.slots, targets, self._source()), owned)
        if commit is None:
            hit[0](list(changed.values()))
        else:
            for where, v in changed.items():
                for i in where:
                    commit(self.walk.slots[i], v)
        for k in hit[1]:
            if commit is None:  # the rebuilt tuples, of the structures already known
                _take_rebuilt(*self.containers[k])
            else:
                c = self.containers[k][0]
                self.containers[k] = (c, *_snapshot(c))

    def _source(self, **env: Any) -> Source:
        """A `Source` whose generated code reads the argument functions' cells through `cells`."""
        src = Source(_CELLS=self.cells, **env)
        for k, cell in enumerate(self.cells):
            src.alias(cell, f"_CELLS[{k}]")
        return src

    def release(self) -> None:
        """Drop the references to this call's data arguments (the box keeps models only)."""
        for i, k in enumerate(self.kinds):
            if k[0] not in (_SAME, _FN):
                self.box[i] = None

    def container_ids(self) -> set[int]:
        """The ids of the lists and dicts whose items `matches` checks."""
        return {id(c) for c, _, _ in self.containers}

    def rebuilt(self, ids: frozenset) -> None:
        """`rebuilt_in(self.containers, ids)`: tuples rebuilt outside the plan's calls."""
        rebuilt_in(self.containers, ids)

    def refresh(self) -> None:
        """`refresh_reads` of the plan's walk, then check against what it reads now. Call it right after
        a call that traced, before that call's writes land."""
        refresh_reads(self.walk)
        self._check = self._checker()

    def recheck(self) -> None:
        """Check against the walk's reads as they are now (after `refresh_reads` of the walk)."""
        self._check = self._checker()

    def matches(self, args: tuple, mode: bool) -> bool:
        if structure_version() != self.version or mode != self.mode or self.entry.current is not None:
            return False
        try:
            return self._check(args)
        except (KeyError, ValueError):  # a global deleted, a closure cell emptied
            return False

    def _checker(self) -> Callable[[tuple], bool]:
        """One generated expression for what `matches` checks: the arguments' kinds, and every
        container's items, those the call rebuilds against their current snapshot."""
        src = Source(_CONCRETE=_concrete(), _FUNCTION=types.FunctionType, _fits=_fits)
        for (n, j, _), cell in zip(self._cell_slots, self.cells):  # the call's own cells, as `load` will
            src.alias(cell, f"a[{n}].__closure__[{j}]")
        conds = [f"len(a) == {len(self.kinds)}"]
        for n, k in enumerate(self.kinds):
            a = f"a[{n}]"
            if k[0] == _FN:
                conds.append(_same_function(src, a, k[1]))
            elif k[0] == _SAME:
                conds.append(f"{a} is {src.name(k[1])}")
            elif k[0] == _LEAF:
                conds.append(_is_kind(src, a, k[1]))
            else:
                conds.append(f"type({a}) is {src.name(k[1])} and len({a}) == {len(k[2])}")
                conds += [_is_kind(src, f"{a}[{j}]", sig) for j, sig in enumerate(k[2])]
        conds += _container_checks(src, self.containers)
        for slot, v in self.walk.watched:  # what the walked functions read
            e = src.base(slot)
            if self.walk.read_arrays and isinstance(v, ARRAY_TYPES):
                conds.append(_is_kind(src, e, None))  # an input of the program: read afresh by `load`
            else:
                conds.append(f"{e} is {src.name(v)}")
        conds += [f"{src.name(f)}.__code__ is {src.name(code)}" for f, code in self.walk.codes]
        conds += [f"{name!r} not in {src.name(g)}" for g, name in self.walk.absent]  # a builtin not shadowed
        if self.walk.watch:  # objects keyed by their contents
            src.env["_static_key"] = static_key
            for o, k in self.walk.watch:
                if getattr(type(o), "__fluxjax_key__", None) is not None and k == (type(o), o.__fluxjax_key__()):
                    conds.append(f"{src.name(o)}.__fluxjax_key__() == {src.name(k[1])}")  # its own key, directly
                else:
                    conds.append(f"_static_key({src.name(o)}) == {src.name(k)}")
        return src.compile("def check(a):\n    return (" + "\n            and ".join(conds) + ")\n", "check")

    def placer(self, first: int) -> Callable[[list, tuple], bool] | None:
        """A function `place(inputs, rest)` putting the data arguments `rest` (those from index
        `first` on) into the compiled program's input list, `False` when one is not of the kind
        this plan's call had; None when those arguments are not all data (arrays, numbers, flat
        tuples of them) or the program takes one of their arrays as one input with another. Made
        once per plan (`train_` makes a `Chain` per call, i.e. per epoch)."""
        if first not in self._placers:
            self._placers[first] = self._placer(first)
        return self._placers[first]

    def _placer(self, first: int) -> Callable[[list, tuple], bool] | None:
        w, shared = self.walk, self.entry.shared
        at = list(range(len(w.slots))) if shared is None else list(shared)
        users: dict[int, int] = {}
        for p in at:
            users[p] = users.get(p, 0) + 1
        src = Source(_CONCRETE=_concrete())
        conds, lines = [f"len(a) == {len(self.kinds) - first}"], []
        for n, k in enumerate(self.kinds[first:]):
            a, s = f"a[{n}]", w.starts[first + n]
            if k[0] in (_SAME, _FN):
                return None
            if k[0] == _LEAF:
                conds.append(_is_kind(src, a, k[1]))
                items = [(a, s)]
            else:
                conds.append(f"type({a}) is {src.name(k[1])} and len({a}) == {len(k[2])}")
                conds += [_is_kind(src, f"{a}[{j}]", sig) for j, sig in enumerate(k[2])]
                items = [(f"{a}[{j}]", s + j) for j in range(len(k[2]))]
            for e, i in items:
                if users[at[i]] != 1:
                    return None
                lines.append(f"    L[{at[i]}] = {e}")
        return src.compile(
            "def place(L, a):\n    if not (" + " and ".join(conds) + "):\n        return False\n"
            + "\n".join(lines) + "\n    return True\n", "place")

    def load(self, args: tuple) -> list | None:
        """Put `args` into the box and read the compiled program's inputs through the slots (None
        when slots it takes as one input no longer hold one array)."""
        box = self.box
        for i, a in enumerate(args):
            box[i] = a
        if self._cell_slots:
            cells = self.cells
            for k, (n, j, slots) in enumerate(self._cell_slots):
                cell = cells[k] = args[n].__closure__[j]
                for slot in slots:
                    slot.owner = cell
        return self._load()
