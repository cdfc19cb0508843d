"""Slots: the places in live Python objects where arrays sit, so they can be swapped and rebound.

`walk(root)` visits a list of arguments the way `jax.tree_util` would flatten them (layers through
`@layer`'s field order, lists, tuples, dicts, any other pytree) and returns, for each array leaf, a
`Slot` that can read and rebind it in place: an attribute of a layer, an item of a list or dict, or a
position inside an immutable tuple or pytree below one of those (rebuilt on write). A layer object
reached twice (a tied layer) is walked once. The walk also returns a hashable signature of everything
static, which is what `fluxjax.jit` caches on.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import jax
import numpy as np

from .functors import _LAYER_TYPES, _version

_NUMBER = (int, float, complex, np.number, np.bool_)
_OPAQUE = (types.FunctionType, types.BuiltinFunctionType, str, type, functools.partial)
_ARRAY = (jax.Array, np.ndarray)

# Pytree node types (besides layers, lists, tuples and dicts) whose structure changes only through
# `__setattr__` calls that `bump()` the structure version; `fluxjax.jit` may then reuse a walk.
SAFE_NODES: set[type] = set()


def is_visited(v) -> bool:
    """Whether a layer field is walked (arrays, layers, containers) rather than static configuration."""
    t = type(v)
    return t in _LAYER_TYPES or t is list or t is dict or isinstance(v, (jax.Array, np.ndarray, tuple))

# Leaf roles, as seen by `gradient`.
PARAM, STATE, OTHER = 0, 1, 2


class Slot:
    """A rebindable location: `owner.key` (layer attribute) or `owner[key]`, then `[p]` along `path`."""

    __slots__ = ("owner", "key", "attr", "path")

    def __init__(self, owner, key, attr, path=()):
        # attr: True for a layer attribute, False for an item, "cell" for a closure cell.
        self.owner, self.key, self.attr, self.path = owner, key, attr, path

    def ident(self):
        return (id(self.owner), self.key, self.path)

    def get_base(self):
        if self.attr is True:
            return self.owner.__dict__[self.key]
        if self.attr is False:
            return self.owner[self.key]
        return self.owner.cell_contents

    def set_base(self, value):
        if not isinstance(value, _ARRAY):
            _version[0] += 1
        self._set_base(value)

    def _set_base(self, value):
        if self.attr is True:
            self.owner.__dict__[self.key] = value
        elif self.attr is False:
            self.owner[self.key] = value
        else:
            self.owner.cell_contents = value

    def get(self):
        a = self.attr
        v = self.owner.__dict__[self.key] if a is True else self.owner[self.key] if a is False else self.owner.cell_contents
        for p in self.path:
            v = v[p] if type(p) is int else _index(v, p)
        return v

    def set(self, value):
        if not self.path:
            self.set_base(value)
            return
        # Rebuilding the tuples along `path` keeps every other object below the slot, so the
        # structure is unchanged unless an opaque pytree node on the way is rebuilt by unflattening.
        if any(isinstance(p, tuple) for p in self.path) or not isinstance(value, _ARRAY):
            _version[0] += 1
        self._set_base(_replace(self.get_base(), self.path, value))


def set_many(slots: list[Slot], values: list[tuple[int, Any]]) -> None:
    """`slots[i].set(v)` for every `(i, v)` in `values`, rebuilding each tuple-valued field once."""
    groups: dict[tuple, list] = {}
    for i, v in values:
        s = slots[i]
        if s.path:
            groups.setdefault((id(s.owner), s.key), [s]).append((s.path, v))
        else:
            s.set_base(v)
    for first, *items in groups.values():
        if all(type(p) is int for path, _ in items for p in path) and all(isinstance(v, _ARRAY) for _, v in items):
            first._set_base(_replace_all(first.get_base(), items))
        else:
            for path, v in items:
                Slot(first.owner, first.key, first.attr, path).set(v)


def _replace_all(base, items):
    """`base` with `v` put at each integer `path` of `items`; each tuple on the way is rebuilt once."""
    new = list(base)
    nested: dict[int, list] = {}
    for path, v in items:
        if len(path) == 1:
            new[path[0]] = v
        else:
            nested.setdefault(path[0], []).append((path[1:], v))
    for p, sub in nested.items():
        new[p] = _replace_all(base[p], sub)
    return type(base)(*new) if hasattr(base, "_fields") else type(base)(new)


def _index(v, p):
    if isinstance(p, tuple):  # ("tree", treedef, i): a leaf of an opaque pytree node
        return jax.tree_util.tree_leaves(v)[p[2]]
    return v[p]


def _replace(base, path, value):
    p, rest = path[0], path[1:]
    if isinstance(p, tuple):
        leaves, treedef = jax.tree_util.tree_flatten(base)
        leaves[p[2]] = _replace(leaves[p[2]], rest, value) if rest else value
        return treedef.unflatten(leaves)
    items = list(base)
    items[p] = _replace(items[p], rest, value) if rest else value
    if hasattr(base, "_fields"):
        return type(base)(*items)
    return type(base)(items)


class Walk:
    """Result of `walk`: `leaves`, their `slots`, `roles` (PARAM/STATE/OTHER) and `signature`."""

    __slots__ = ("leaves", "slots", "roles", "signature", "layers", "paths", "containers", "reusable", "starts")

    def __init__(self, paths):
        self.leaves: list[Any] = []
        self.slots: list[Slot] = []
        self.roles: list[int] = []
        self.layers: dict[int, int] = {}
        self.paths: list[str] | None = [] if paths else None
        self.containers: list[list | dict] = []  # every list and dict visited, for `fluxjax.jit`'s reuse check
        self.reusable = True  # False when an unknown pytree node was visited (it may change unseen)
        self.starts: list[int] = []  # index of the first leaf of each root item


def walk(root: list, paths: bool = False) -> Walk:
    """Walk a mutable list of values; see the module docstring. `paths=True` also names each leaf
    (`"0.layers[1].weight"`, the first component being the index in `root`)."""
    w = Walk(paths)
    leaves, slots, roles, layers, names = w.leaves, w.slots, w.roles, w.layers, w.paths
    sig: list[Any] = []
    ps: list[str] = []  # path components, maintained only when paths=True

    def visit(owner, key, attr, path, v, role, numbers=True):
        t = type(v)
        if t in _LAYER_TYPES:
            visit_layer(v)
        elif isinstance(v, (jax.Array, np.ndarray)) or (numbers and isinstance(v, _NUMBER)):
            leaves.append(v)
            slots.append(Slot(owner, key, attr, path))
            roles.append(role)
            sig.append(_leaf_sig(v))
            if names is not None:
                names.append("".join(ps))
        elif v is None:
            sig.append(None)
        elif t is list or t is dict:
            w.containers.append(v)
            items = v.items() if t is dict else enumerate(v)
            if t is dict:
                items = sorted(items, key=lambda kv: kv[0])
            sig.append((t, tuple(k for k, _ in items) if t is dict else len(v)))
            for k, e in items:
                if names is not None:
                    ps.append(f"[{k!r}]")
                visit(v, k, False, (), e, role, numbers)
                if names is not None:
                    ps.pop()
        elif t is not tuple and getattr(t, "__fluxjax_static__", False):
            sig.append(("static", v.static_key()))  # an optimisation rule: what changes its traced program
        elif isinstance(v, tuple):
            sig.append((t, len(v)))
            for i, e in enumerate(v):
                if names is not None:
                    ps.append(f"[{i}]")
                visit(owner, key, attr, path + (i,), e, role, numbers)
                if names is not None:
                    ps.pop()
        elif not numbers and isinstance(v, _NUMBER):
            sig.append(("static", v))
        elif isinstance(v, _OPAQUE):
            sig.append(("static", function_key(v) if t is types.FunctionType else v))
        else:
            sub, treedef = jax.tree_util.tree_flatten(v, is_leaf=lambda z: type(z) in _LAYER_TYPES)
            if treedef.num_nodes == 1 and treedef.num_leaves == 1 and sub and sub[0] is v:
                sig.append(("static", _hashable(v)))  # an opaque non-pytree object: static
                return
            sig.append(treedef)
            if sub and type(v) not in SAFE_NODES:
                w.reusable = False
            for i, e in enumerate(sub):
                if names is not None:
                    ps.append(f"<{i}>")
                visit(owner, key, attr, path + (("tree", treedef, i),), e, role, numbers)
                if names is not None:
                    ps.pop()

    def visit_layer(obj):
        oid = id(obj)
        if oid in layers:
            sig.append(("tied", layers[oid]))
            return
        layers[oid] = len(layers)
        t = type(obj)
        sig.append(t)
        st = t.__fluxjax_state__
        tr = getattr(t, "__fluxjax_trainable__", None)
        for name, v in obj.__dict__.items():
            if not is_visited(v):
                sig.append((name, _hashable(v)))
                continue
            sig.append(name)
            role = STATE if name in st else (PARAM if tr is None or name in tr else OTHER)
            if names is not None:
                ps.append("." + name)
            visit(obj, name, True, (), v, role, False)
            if names is not None:
                ps.pop()

    for i, v in enumerate(root):
        w.starts.append(len(leaves))
        if names is not None:
            ps.append(str(i))
        visit(root, i, False, (), v, PARAM)
        if names is not None:
            ps.pop()
    w.signature = tuple(sig)
    return w


class _Same:
    """A key part equal only to the very same object, which it keeps alive (so its id is not reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _captured_key(v, depth: int):
    if type(v) in _SCALARS:
        return (type(v), v)
    if type(v) is types.FunctionType and depth < 4:
        return function_key(v, depth + 1)
    return _Same(v)


def function_key(f: types.FunctionType, depth: int = 0):
    """A function as a cache key: its code, its globals and what its closure and defaults hold now.
    A lambda written inside a loop (`train_(lambda m, x, y: ..., ...)` every epoch) is a new object
    each time but gets the same key, so it is not compiled again; a closure whose captured values
    changed gets a new key, since those values are baked into the compiled program."""
    cells = []
    for c in f.__closure__ or ():
        try:
            cells.append(_captured_key(c.cell_contents, depth))
        except ValueError:  # an empty cell
            cells.append(None)
    defaults = tuple(_captured_key(d, depth) for d in f.__defaults__ or ())
    kwdefaults = tuple((k, _captured_key(d, depth)) for k, d in (f.__kwdefaults__ or {}).items())
    return (f.__code__, _Same(f.__globals__), tuple(cells), defaults, kwdefaults)


def _leaf_sig(v):
    if isinstance(v, (jax.Array, np.ndarray)):
        return None  # shape/dtype are jax.jit's business
    return type(v)


def _hashable(v):
    try:
        hash(v)
        return v
    except TypeError:
        return ("id", id(v))
