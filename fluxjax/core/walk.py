"""Slots: the places in live Python objects where arrays sit, so they can be swapped and rebound.

`walk(root)` visits a list of arguments the way `jax.tree_util` would flatten them (layers through
`@layer`'s field order, lists, tuples, dicts, any other pytree) and returns, for each array leaf, a
`Slot` that can read and rebind it in place: an attribute of a layer, an item of a list or dict, or a
position inside an immutable tuple or pytree below one of those (rebuilt on write). A layer object
reached twice (a tied layer) is walked once. The walk also returns a hashable signature of everything
static, which is what `fluxjax.jit` caches on. `rebuild(root, values)` makes `root` anew with the
walk's leaves replaced, visiting exactly what the walk visits: the one rebuild.
"""

from __future__ import annotations

import builtins
import functools
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from ..random import DefaultRNG
from .keys import (
    EMPTY,
    IMMUTABLE_TYPES,
    MISSING,
    Attributes,
    ClassReads,
    Defaults,
    class_attribute,
    code_names,
    is_library,
    is_library_module,
    static_key,
)
from .layer import LAYER_TYPES, bump
from .plain import _holds_layer, _plain_holding_layer, plain_with_parameters

NUMBER_TYPES = (int, float, complex, np.number, np.bool_)  # Python and NumPy numbers: leaves where numbers are walked
OPAQUE_TYPES = (types.FunctionType, types.BuiltinFunctionType, str, type, functools.partial)
_ARRAY = (jax.Array, np.ndarray)
_BUILTIN_NAMES = frozenset(vars(builtins))
ARRAY_TYPES = _ARRAY

# Pytree node types (besides layers, lists, tuples and dicts) whose structure changes only through
# `__setattr__` calls that `bump()` the structure version; `fluxjax.jit` may then reuse a walk.
SAFE_NODES: set[type] = set()

LAYER_TYPES.add(DefaultRNG)  # walked as a layer whose one state field is the global key


def is_concrete_array(v) -> bool:
    """Whether `v` is an array with a value (a jax array outside any trace, or a NumPy array)."""
    return isinstance(v, _ARRAY) and not isinstance(v, jax.core.Tracer)


def arrays_tree_kind(v: Any) -> Any:
    """The tree structure of `v` when every leaf of it is a concrete array (layers count as leaves
    that are not), else None. Two values of one kind differ only in which arrays they hold."""
    leaves, treedef = jax.tree_util.tree_flatten(v, is_leaf=lambda z: type(z) in LAYER_TYPES)
    return treedef if all(is_concrete_array(x) for x in leaves) else None


def same_arrays_tree(old: Any, new: Any) -> bool:
    """Whether `new` is `old` with other concrete arrays in the same places (an eager optimiser step's
    new state). Rebinding a field to such a value needs no `bump()`: every walk of it stays valid, so
    the compiled calls of an eager loop keep their walk from one step to the next."""
    a, adef = jax.tree_util.tree_flatten(old)
    b, bdef = jax.tree_util.tree_flatten(new)
    return adef == bdef and all(is_concrete_array(x) and is_concrete_array(y) for x, y in zip(a, b))


def is_visited(v) -> bool:
    """Whether a layer field is walked (arrays, layers, containers) rather than static configuration."""
    t = type(v)
    return t in LAYER_TYPES or t is list or t is dict or isinstance(v, (jax.Array, np.ndarray, tuple))

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
            bump()
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
            bump()
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


def node_children(v) -> tuple[list, Any]:
    """One level of a pytree node that is not a layer, list, dict or tuple (a `Tangent`, an optax
    state class): its children and its treedef. The walk goes on into each child itself, so that a
    list or dict inside is a container whose items it watches (`opt.ls[1] = fresh` is seen)."""
    return jax.tree_util.tree_flatten(v, is_leaf=lambda z: z is not v)


def _flat(v, p) -> list:
    """The children a path component `(tag, treedef, i)` indexes: one level of the node for the walk's
    `"node"`, all its leaves for `"tree"` (`loadmodel_`'s paths)."""
    return node_children(v)[0] if p[0] == "node" else jax.tree_util.tree_leaves(v)


def _index(v, p):
    if isinstance(p, tuple):  # (tag, treedef, i): a child of an opaque pytree node
        return _flat(v, p)[p[2]]
    return v[p]


def _replace(base, path, value):
    p, rest = path[0], path[1:]
    if isinstance(p, tuple):
        leaves, treedef = node_children(base) if p[0] == "node" else jax.tree_util.tree_flatten(base)
        leaves[p[2]] = _replace(leaves[p[2]], rest, value) if rest else value
        return treedef.unflatten(leaves)
    items = list(base)
    items[p] = _replace(items[p], rest, value) if rest else value
    if hasattr(base, "_fields"):
        return type(base)(*items)
    return type(base)(items)


class Walk:
    """Result of `walk`: `leaves`, their `slots`, `roles` (PARAM/STATE/OTHER) and `signature`."""

    __slots__ = ("leaves", "slots", "roles", "signature", "layers", "layer_list", "paths", "containers", "reusable", "starts",
                 "watched", "watch", "codes", "absent", "plain", "read_arrays", "host_rngs")

    def __init__(self, paths):
        self.leaves: list[Any] = []
        self.slots: list[Slot] = []
        self.roles: list[int] = []
        self.layers: dict[int, int] = {}  # id of each layer walked -> its index in `layer_list`
        self.layer_list: list[Any] = []
        self.paths: list[str] | None = [] if paths else None
        self.containers: list[list | dict] = []  # every list and dict visited, for `fluxjax.jit`'s reuse check
        self.reusable = True  # False when an unknown pytree node was visited (it may change unseen)
        self.starts: list[int] = []  # index of the first leaf of each root item
        # For `fluxjax.jit`'s reuse check: the closure cells and globals that the walked functions read
        # (`(slot, value)`: each must still hold that very object, or an array where it held one), and
        # the mutable objects keyed by their contents (`(object, key)`: `static_key` must give it again).
        self.watched: list[tuple[Slot, Any]] = []
        self.watch: list[tuple[Any, Any]] = []
        # ... the user's functions walked, with their code (`f.__code__ = ...`, as IPython's autoreload
        # does, must be seen), and the builtins they name that their module does not define (a global
        # `abs` defined later shadows the builtin): `(globals, name)`
        self.codes: list[tuple[types.FunctionType, types.CodeType]] = []
        self.absent: list[tuple[dict, str]] = []
        # plain objects (no @layer) holding float arrays or layers that the walk kept static: `gradient`
        # and `params` refuse them rather than leave their arrays silently without a gradient
        self.plain: list[Any] = []
        self.read_arrays = False  # whether arrays the functions read are inputs (leaves), not constants
        self.host_rngs: list[Any] = []  # NumPy / Python random generators and iterators met (compiled/hostrandom.py)


def walk(root: list, paths: bool = False, functions: bool = False, read_arrays: bool = False) -> Walk:
    """Walk a mutable list of values; see the module docstring. `paths=True` also names each leaf
    (`"0.layers[1].weight"`, the first component being the index in `root`). `functions=True` (for
    `fluxjax.jit`) also walks what the user's functions read: the contents of their closure cells and
    the globals their code names (following the functions found there), so that arrays and models a
    function reaches that way are inputs too, and what it reads that is static is in the signature.
    Bare arrays a function reads (not inside a layer) are constants keyed by identity, unless
    `read_arrays=True`: then they are inputs too (the eager `withgradient` compiles a fresh closure
    over each step's batch without compiling again)."""
    w = Walk(paths)
    w.read_arrays = read_arrays
    leaves, slots, roles, layers, names = w.leaves, w.slots, w.roles, w.layers, w.paths
    sig: list[Any] = []
    ps: list[str] = []  # path components, maintained only when paths=True
    fns: dict[int, int] = {}
    plains: dict[int, int] = {}  # plain objects walked (see visit_plain), for ties
    reading: list[tuple[str, ...]] = []  # the names the code whose reads are being walked uses
    attributes: set[tuple[int, str]] = set()  # (id(module or class), name) walked (see visit_module, visit_class)

    def visit(owner, key, attr, path, v, role, numbers=True, const=False):
        # const: reached through what a function reads, outside any layer; arrays there are constants
        # of the program (as under jax.jit: concrete at trace time), keyed by identity or contents
        t = type(v)
        if t in LAYER_TYPES:
            visit_layer(v)
        elif const and (isinstance(v, _ARRAY) or (t in (list, dict, tuple) and not _holds_layer(v))):
            sig.append(("static", static_key(v, w.watch, w.host_rngs)))
        elif (isinstance(v, jax.Array) or (t is np.ndarray and v.dtype.kind not in "OUSV")
              or (numbers and isinstance(v, NUMBER_TYPES))):
            leaves.append(v)
            slots.append(Slot(owner, key, attr, path))
            roles.append(role)
            sig.append(leaf_sig(v))
            if names is not None:
                names.append("".join(ps))
        elif v is None:
            sig.append(None)
        elif t is list or t is dict:
            w.containers.append(v)
            items = v.items() if t is dict else enumerate(v)
            if t is dict:  # visited in jax's sorted order; the insertion order is part of the key
                items = sorted(items, key=lambda kv: kv[0])
            sig.append((t, tuple(v) if t is dict else len(v)))
            for k, e in items:
                if names is not None:
                    ps.append(f"[{k!r}]")
                visit(v, k, False, (), e, role, numbers, const)
                if names is not None:
                    ps.pop()
        elif t is not tuple and getattr(t, "__fluxjax_static__", False):
            sig.append(("static", static_key(v, w.watch, w.host_rngs)))  # a rule: its `__fluxjax_key__`
            if functions:  # the states it keeps for `update_(rule, ps, gs)`: inputs, not constants
                for held in v.held_layers():
                    visit(None, None, None, (), held, OTHER, False)
        elif isinstance(v, tuple):
            sig.append((t, len(v)))
            for i, e in enumerate(v):
                if names is not None:
                    ps.append(f"[{i}]")
                visit(owner, key, attr, path + (i,), e, role, numbers, const)
                if names is not None:
                    ps.pop()
        elif not numbers and isinstance(v, NUMBER_TYPES):
            sig.append(("static", type(v), v))
        elif functions and t is types.FunctionType and not is_library(v):
            visit_function(v)
        elif functions and t is types.MethodType and not is_library(v.__func__):
            sig.append(types.MethodType)
            visit_static_or_walked(v.__self__)
            visit_function(v.__func__)
        elif functions and t is functools.partial:
            sig.append((functools.partial, len(v.args), tuple(v.keywords)))
            for e in (v.func, *v.args, *v.keywords.values()):
                visit_static_or_walked(e)
        elif functions and t is types.ModuleType and reading and not is_library_module(v):
            sig.append(("static", v))
            visit_module(v, reading[-1])
        elif functions and isinstance(v, type) and reading and not is_library(v):
            sig.append(("static", v))
            visit_class(v, reading[-1])
        elif isinstance(v, OPAQUE_TYPES) or isinstance(v, IMMUTABLE_TYPES) or isinstance(v, Iterator):
            sig.append(("static", static_key(v, w.watch, w.host_rngs)))  # (an iterator: see compiled/hostrandom.py)
        elif functions and getattr(t, "__fluxjax_slots__", None) is not None:
            visit_places(v)
        elif functions and _plain_holding_layer(v):
            visit_plain(v)
        else:
            sub, treedef = node_children(v)
            if treedef.num_nodes == 1 and treedef.num_leaves == 1 and sub and sub[0] is v:
                sig.append(("static", static_key(v, w.watch, w.host_rngs)))  # an opaque non-pytree object: static
                if functions and not is_library(t):  # what its methods read (a callable loss object)
                    visit_class(t, (*(reading[-1] if reading else ()), "__call__"))
                if not const and plain_with_parameters(v):
                    w.plain.append(v)
                return
            sig.append(treedef)
            if sub and type(v) not in SAFE_NODES:
                w.reusable = False
            for i, e in enumerate(sub):
                if names is not None:
                    ps.append(f"<{i}>")
                visit(owner, key, attr, path + (("node", treedef, i),), e, role, numbers, const)
                if names is not None:
                    ps.pop()

    def visit_static_or_walked(v):
        """Something held where no slot can rebind it (a `functools.partial`'s arguments, a bound method's
        object): layers and functions are walked, arrays and the rest are keyed as they are."""
        if type(v) in LAYER_TYPES or type(v) in (types.FunctionType, types.MethodType, functools.partial):
            visit(None, None, None, (), v, OTHER, False)
        else:
            sig.append(("static", static_key(v, w.watch, w.host_rngs)))

    def visit_function(f):
        fid = id(f)
        if fid in fns:
            sig.append(("fn", fns[fid]))
            return
        fns[fid] = len(fns)
        code = f.__code__
        w.codes.append((f, code))
        sig.append((code, static_key(f.__defaults__, w.watch), static_key(f.__kwdefaults__, w.watch)))
        if f.__dict__:  # its attributes (`loss.k`)
            sig.append(("attributes", static_key(Attributes(f), w.watch, w.host_rngs)))
        if f.__defaults__ is not None or f.__kwdefaults__ is not None:  # (`f.__defaults__ = ...` is seen)
            defaults = Defaults(f)
            w.watch.append((defaults, (Defaults, defaults.__fluxjax_key__())))
        reading.append(code_names(code))
        for cell in f.__closure__ or ():
            try:
                v = cell.cell_contents
            except ValueError:  # an empty cell
                sig.append(EMPTY)
                continue
            visit_read(Slot(cell, "cell_contents", "cell"), v)
        g = f.__globals__
        for name in reading[-1]:
            if name in g:
                sig.append(name)
                visit_read(Slot(g, name, False), g[name])
            elif name in _BUILTIN_NAMES:
                w.absent.append((g, name))
        reading.pop()

    def visit_module(mod, names):
        """A user's module that code reads (`cfg.SCALE`, `utils.helper(x)`): its attributes among the
        names the code uses are read as globals are (a slot each, watched)."""
        d = mod.__dict__
        for name in names:
            if name not in d and "__getattr__" in d:  # what the module's `__getattr__` (PEP 562) reads
                name = "__getattr__"
            if name in d and (id(mod), name) not in attributes:
                attributes.add((id(mod), name))
                sig.append(name)
                visit_read(Slot(d, name, False), d[name])

    def visit_class(cls, names):
        """What code reads through a user's class, or an object of one (`Cfg.SCALE`, `self.helper(x)`,
        `obj.method(x)`, a callable object's `__call__`): of its class attributes among `names`, the
        functions (methods, `staticmethod`s, `classmethod`s, properties' getters) are walked, and the
        names they use are looked up in turn; all of them are keyed as they are now (`ClassReads`)."""
        todo, found = list(names), []
        for name in todo:
            if (id(cls), name) in attributes:
                continue
            attributes.add((id(cls), name))
            a = class_attribute(cls, name)
            if a is MISSING:  # an instance's field, or what the class's `__getattr__` makes: walk that too
                todo.append("__getattr__")
                continue
            found.append(name)
            f = a.fget if isinstance(a, property) else a.__func__ if isinstance(a, (staticmethod, classmethod)) else a
            if type(f) is types.FunctionType and not is_library(f):
                visit_function(f)
                todo.extend(code_names(f.__code__))
        if found:
            reads = ClassReads(cls, tuple(found))
            key = (ClassReads, reads.__fluxjax_key__())
            w.watch.append((reads, key))
            sig.append(("class", cls, reads.names, key))

    def visit_read(slot, v):
        w.watched.append((slot, v))
        if names is not None:
            ps.append(f"<{slot.key}>")
        visit(slot.owner, slot.key, slot.attr, (), v, OTHER, False, not read_arrays)
        if names is not None:
            ps.pop()

    def visit_places(obj):
        """An object naming places where arrays live (`Params`: its parameters' slots). It is keyed as it
        is, and the places are walked too: their arrays are inputs wherever the function reads them
        (through this object alone, say), and the signature says which of the walk's places they are
        (a layer reached before is a tie), so that a parameter whose layer the model no longer holds
        gets a program of its own rather than the one where it was the model's."""
        sig.append(("static", static_key(obj, w.watch, w.host_rngs)))
        for slot in obj.__fluxjax_slots__():
            if type(slot.owner) in LAYER_TYPES:
                visit_layer(slot.owner)
            else:  # an item of a list or dict, a global, a closure cell: that item only
                visit(slot.owner, slot.key, slot.attr, (), slot.get_base(), OTHER, False)

    def visit_plain(obj):
        """A plain object (no `@layer`) that a function reads and that holds layers (a trainer's
        `.model`, a namespace of layers): its layers are inputs, its other fields are keyed as they
        are. Its fields change without bumping the structure version, so the walk is not reused."""
        oid = id(obj)
        if oid in plains:
            sig.append(("tied", "plain", plains[oid]))
            return
        plains[oid] = len(plains)
        w.reusable = False
        sig.append(("plain", type(obj)))
        visit_class(type(obj), (*(reading[-1] if reading else ()), "__call__"))
        for name, e in obj.__dict__.items():
            if not _holds_layer(e):
                sig.append((name, static_key(e, w.watch, w.host_rngs)))
                continue
            sig.append(name)
            if names is not None:
                ps.append("." + name)
            visit(obj, name, True, (), e, OTHER, False, True)
            if names is not None:
                ps.pop()

    def visit_layer(obj):
        oid = id(obj)
        if oid in layers:
            sig.append(("tied", layers[oid]))
            return
        layers[oid] = len(layers)
        w.layer_list.append(obj)
        t = type(obj)
        sig.append(t)
        st = t.__fluxjax_state__
        tr = getattr(t, "__fluxjax_trainable__", None)
        if functions and not is_library(t):  # what a user-defined layer's code reads
            visit_class(t, ("__call__",))
        for name, v in obj.__dict__.items():
            if not is_visited(v):
                sig.append((name, static_key(v, w.watch, w.host_rngs)))
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


def copy_layer(obj: Any) -> tuple[Any, dict]:
    """`rebuild`'s default for a layer: a new object of its class (no `__init__` run) and the dict its
    fields go into."""
    new = object.__new__(type(obj))
    return new, new.__dict__


def rebuild(root: list, values: Sequence[Any], layer: Callable[[Any], tuple[Any, dict]] = copy_layer,
            static: Callable[[Any], Any] | None = None, prune: bool = False) -> list:
    """`root` rebuilt with the i-th leaf of `walk(root)` replaced by `values[i]`, visiting exactly what
    the walk visits, in its order. Lists, dicts and tuples are new; a dict keeps its insertion order (the
    walk reads its values in key order), a namedtuple stays one; a layer reached twice (a tie) gives one
    new object. `layer(obj)` makes a layer's new object and returns it with the dict its fields go into
    (default `copy_layer`: a copy; `Tangent`s for a gradient). What the walk keeps static (a layer's
    configuration, strings, functions, optimisation rules) is `static(v)` (default: `v` itself).
    `prune=True` (gradients) gives `None` for a layer, list, dict or tuple whose entries are all `None`.

    ```python
    >>> d = Dense(jnp.ones((1, 2)))
    >>> w = walk([[d, d]])
    >>> [new] = rebuild([[d, d]], [2 * x for x in w.leaves])
    >>> new[0] is new[1], new[0].weight
    (True, Array([[2., 2.]], dtype=float32))

    ```
    """
    keep = (lambda v: v) if static is None else static
    memo: dict[int, Any] = {}
    pos = 0

    def build(v, numbers):
        nonlocal pos
        t = type(v)
        if t in LAYER_TYPES:
            oid = id(v)
            if oid in memo:
                return memo[oid]
            new, fields = layer(v)
            memo[oid] = new
            for name, e in v.__dict__.items():
                fields[name] = build(e, False) if is_visited(e) else keep(e)
            if prune and all(g is None for g in fields.values()):
                memo[oid] = new = None
            return new
        if isinstance(v, jax.Array) or (t is np.ndarray and v.dtype.kind not in "OUSV") or (
                numbers and isinstance(v, NUMBER_TYPES)):
            pos += 1
            return values[pos - 1]
        if v is None:
            return None
        if t is list:
            items = [build(e, numbers) for e in v]
            return None if prune and all(g is None for g in items) else items
        if t is dict:
            done = {k: build(v[k], numbers) for k in sorted(v)}
            return None if prune and all(g is None for g in done.values()) else {k: done[k] for k in v}
        if t is not tuple and getattr(t, "__fluxjax_static__", False):
            return keep(v)
        if isinstance(v, tuple):
            items = [build(e, numbers) for e in v]
            if prune and all(g is None for g in items):
                return None
            return t(*items) if hasattr(v, "_fields") else t(items)
        if isinstance(v, NUMBER_TYPES) or isinstance(v, OPAQUE_TYPES) or isinstance(v, IMMUTABLE_TYPES):
            return keep(v)
        sub, treedef = node_children(v)
        if treedef.num_nodes == 1 and treedef.num_leaves == 1 and sub and sub[0] is v:
            return keep(v)
        return treedef.unflatten([build(e, numbers) for e in sub])

    out = [build(v, True) for v in root]
    if pos != len(values):
        raise ValueError(f"rebuild: the walk has {pos} leaves, {len(values)} values were given")
    return out


AN_ARRAY = object()  # stands for "some array" where a reuse check looks at a value's kind only


def leaf_sig(v):
    """What a signature records of a leaf: None for an array (shape and dtype are jax.jit's business),
    else its type."""
    return None if isinstance(v, (jax.Array, np.ndarray)) else type(v)
