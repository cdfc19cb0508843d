"""The layer system: `@layer`, pytree registration, `trainable`, state fields.

A layer is a plain mutable Python object. `@layer` registers its class as a JAX pytree whose children
are the fields holding arrays or sub-layers (also inside lists, tuples and dicts); every other field
(activation functions, sizes, strides, Python numbers) is static and lives in the treedef. Which fields
are children is decided per object from the values, so `bias=False` is static and `bias=array` a leaf.

Flux's `trainable(m)` is the set of child fields an optimiser touches; `state` fields (BatchNorm's
running statistics, Dropout's key) are children too, so they travel through `jax.jit` and checkpoints,
but they are never trainable and never differentiated.
"""

from __future__ import annotations

import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import GetAttrKey

from .lazy import lazy_new
from .static_writes import mark_born, note_write
from .static_writes import use_layers as static_writes_use_layers

LAYER_TYPES: set[type] = set()  # the classes registered by `@layer` (and the global RNG holder); read, never change

# The structure version: bumped whenever a field of a layer is set or deleted (and by the state thread
# when it rebinds a slot to something that is not an array). `fluxjax.jit` reuses its walk of the
# arguments while the version is unchanged. Rebinding an array in place leaves it alone.
_version = [0]


def structure_version() -> int:
    """The structure version now (see `bump`)."""
    return _version[0]


def bump() -> None:
    """Record that some live model's structure may have changed, so cached walks are redone."""
    _version[0] += 1


_CONTAINERS = (list, tuple, dict)  # a field set to one of these may hold traced values (a recurrent `(h, c)`)


def _bumping(cls: type) -> None:
    """Make `cls`'s `__setattr__`/`__delattr__` bump the structure version after doing their work."""
    for name in ("__setattr__", "__delattr__"):
        orig = getattr(cls, name)
        if getattr(orig, "_fluxjax_bumps", False):
            continue

        def hook(self, *a, _orig=orig, _set=name == "__setattr__"):
            if _set and not a[0].isascii() and a[0] not in self.__dict__:
                _refuse_greek(self, a[0])
            # a traced value set on a live layer inside a region goes through the region, which puts
            # the field back when it ends (fluxjax.core.region.set_traced_attribute)
            if _set and (isinstance(a[1], jax.core.Tracer) or type(a[1]) in _CONTAINERS) and _traced_set(self, *a):
                return
            note_write(self, a[0])
            _orig(self, *a)
            _version[0] += 1
            if _RECORDED:
                _RECORDED.pop(id(self), None)

        hook._fluxjax_bumps = True
        setattr(cls, name, hook)


# Flux's Greek field names and fluxjax's spellings of them (Python reads `σ²` in code as `σ2`, `ϵ` as `ε`)
_GREEK = {"σ": "sigma", "λ": "sigma", "β": "beta", "γ": "gamma", "μ": "mu", "σ2": "sigma2", "σ²": "sigma2",
          "ε": "eps", "ϵ": "eps"}


def _refuse_greek(obj: Any, name: str) -> None:
    """Setting a Greek name that one of fluxjax's own layers does not have (`bn.μ = ...`, `d.σ = relu`, as
    ported from Flux) raises: it would add an attribute that nothing reads, a silent no-op. A user's
    own layer (or subclass) may have such fields."""
    cls = type(obj)
    if not cls.__module__.startswith("fluxjax."):
        return
    fields = ", ".join(k for k in vars(obj) if not k.startswith("_"))
    ascii_name = _GREEK.get(name)
    if ascii_name is not None and ascii_name in vars(obj):
        hint = f"fluxjax spells Flux's {name} as {ascii_name}: set .{ascii_name}"
    else:
        hint = f"its fields are {fields}"
    raise AttributeError(f"{cls.__name__} has no field {name!r}; {hint}")


# The state thread (fluxjax.core.region, which builds on this module) installs `current_region()` and
# `set_traced_attribute(obj, name, value)` here when it is imported.
_thread: dict = {}


def use_state_thread(current_region, set_traced_attribute) -> None:
    """Called by fluxjax.core.region: traced values set on live layers inside a region go through it."""
    _thread.update(current_region=current_region, set_traced_attribute=set_traced_attribute)


def _traced_set(obj, name, value) -> bool:
    return bool(_thread) and _thread["set_traced_attribute"](obj, name, value)


# `fluxjax.show` installs Flux's layer printing here when it is imported.
_show: dict = {}


def use_layer_repr(layer_repr) -> None:
    """Called by fluxjax.show: the `repr` of every layer class that does not define its own."""
    _show["repr"] = layer_repr


def _layer_repr(self) -> str:
    return _show["repr"](self) if _show else object.__repr__(self)


def _marking_init(cls: type) -> None:
    """Make `cls.__init__` tell the current region that the object is new (its fields are set plainly)."""
    init = cls.__dict__.get("__init__")
    if init is None or getattr(init, "_fluxjax_marks", False):
        return

    def __init__(self, *a, _init=init, **k):
        r = _thread["current_region"]() if _thread else None
        if r is not None:
            r.born.add(id(self))
        mark_born(self)
        _init(self, *a, **k)

    __init__._fluxjax_marks = True
    __init__.__doc__, __init__.__wrapped__ = init.__doc__, init
    cls.__init__ = __init__


def is_layer(x: Any) -> bool:
    """True for an instance of a class decorated with `@layer`."""
    return type(x) in LAYER_TYPES


def is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def is_float_array(x: Any) -> bool:
    return is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)  # bfloat16 too, which NumPy does not count


def _is_dynamic(x: Any) -> bool:
    return is_array(x) or type(x) in LAYER_TYPES


def _container_leaf(x: Any) -> bool:
    return _is_dynamic(x) or x is None


def _frozen(v: Any, depth: int = 0) -> Any:
    """`v` with its lists, dicts and sets (inside tuples too) as tuples and frozensets: what they hold
    now, which an edit in place (`layer.cfg["scale"] = 10.0`) does not change afterwards."""
    t = type(v)
    if depth < 8:
        if t is list or t is tuple:
            return (t, tuple(_frozen(e, depth + 1) for e in v))
        if t is dict:
            return (dict, tuple((k, _frozen(e, depth + 1)) for k, e in v.items()))
        if t is set:
            return (set, frozenset(v))
    return v


class _Static:
    """Hashable, comparable wrapper for the static part of a layer (goes into the treedef). It compares
    by what its lists and dicts held when the layer was flattened: holding the live container, a
    treedef cached by `jax.jit` stayed equal to the layer's after an edit in place, and the program
    compiled before the edit ran."""

    __slots__ = ("value", "_frozen", "_hash")

    def __init__(self, value):
        self.value = value
        self._frozen = _frozen(value)
        try:
            self._hash = hash(self._frozen)
        except TypeError:
            self._hash = hash(repr(value))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, _Static):
            return False
        try:
            return bool(self._frozen == other._frozen)
        except Exception:
            return self.value is other.value


def _split_container(v):
    """Split a list/tuple/dict field into its dynamic leaves (arrays, layers) and a static skeleton."""
    leaves, treedef = jax.tree_util.tree_flatten(v, is_leaf=_container_leaf)
    dyn_pos = tuple(i for i, x in enumerate(leaves) if _is_dynamic(x))
    if not dyn_pos:
        return None
    static = tuple(None if i in dyn_pos else x for i, x in enumerate(leaves))
    return [leaves[i] for i in dyn_pos], (treedef, dyn_pos, _Static(static), dict_order(v))


def dict_order(v: Any) -> Any:
    """Where `v` holds a dict whose keys are not in sorted order (lists and tuples followed), that order;
    None where nothing beneath needs it. JAX rebuilds dicts with sorted keys, and a named `Chain` runs its
    layers (an optimiser state its hyperparameters) in insertion order: `restore_order` puts it back."""
    if type(v) is dict:
        inner = tuple(dict_order(e) for e in v.values())
        keys = tuple(v)
        try:
            in_order = list(keys) == sorted(keys)
        except TypeError:  # keys that do not compare: jax sorts them its own way, keep the order
            in_order = False
        return None if in_order and all(o is None for o in inner) else ("d", keys, inner)
    if isinstance(v, (list, tuple)):
        inner = tuple(dict_order(e) for e in v)
        return None if all(o is None for o in inner) else ("s", inner)
    return None


def restore_order(v: Any, order: Any) -> Any:
    """`v` (rebuilt by JAX) with the dict key order `dict_order` recorded."""
    if order is None:
        return v
    if order[0] == "d":
        return {k: restore_order(v[k], o) for k, o in zip(order[1], order[2])}
    items = [restore_order(e, o) for e, o in zip(v, order[1])]
    return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)


# Which fields are children of a layer rebuilt by `unflatten` (from a jax transformation's output, a
# `jax.tree.map`): they stay children whatever their values now are (`True` in an optax mask, a
# `ShapeDtypeStruct`, a `PartitionSpec`, `None`), so the tree has the structure of the model it came
# from. Keyed by the object's id, dropped when the object dies or a field of it is set.
_RECORDED: dict[int, tuple] = {}


def _forget(obj) -> None:
    _RECORDED.pop(id(obj), None)


static_writes_use_layers(bump, _forget)


def _flatten_recorded(obj, fields):
    """`_flatten_fields` for a rebuilt layer: its recorded fields, or None when they no longer fit."""
    d = obj.__dict__
    if len(d) != len(fields) or any(name not in d for name, _, _ in fields):
        return None
    children, keys, out = [], [], []
    for name, kind, meta in fields:
        v = d[name]
        if kind == 0:
            children.append(v)
            keys.append(GetAttrKey(name))
            out.append((name, 0, None))
        elif kind > 0:
            leaves, treedef = jax.tree_util.tree_flatten(v, is_leaf=_container_leaf)
            if treedef != meta[0]:
                return None
            for n, p in enumerate(meta[1]):
                children.append(leaves[p])
                keys.append(GetAttrKey(f"{name}[{n}]"))
            out.append((name, kind, meta))
        else:
            out.append((name, -1, _Static(v)))
    return children, keys, tuple(out)


def _flatten_fields(obj):
    """Return (children, keys, aux). aux describes every field in order: (name, kind, meta)."""
    fields = _RECORDED.get(id(obj))
    if fields is not None and (got := _flatten_recorded(obj, fields)) is not None:
        return got
    children, keys, fields = [], [], []
    for name, v in obj.__dict__.items():
        if is_array(v) or type(v) in LAYER_TYPES:
            children.append(v)
            keys.append(GetAttrKey(name))
            fields.append((name, 0, None))
        elif isinstance(v, (list, tuple, dict)) and (split := _split_container(v)) is not None:
            dyn, meta = split
            children.extend(dyn)
            for i in range(len(dyn)):
                keys.append(GetAttrKey(f"{name}[{i}]"))
            fields.append((name, len(dyn), meta))
        else:
            fields.append((name, -1, _Static(v)))
    return children, keys, tuple(fields)


def _unflatten_fields(cls, fields, children):
    obj = object.__new__(cls)
    d = obj.__dict__
    i = 0
    for name, kind, meta in fields:
        if kind == 0:
            d[name] = children[i]
            i += 1
        elif kind > 0:
            treedef, dyn_pos, static, order = meta
            leaves = list(static.value)
            for p in dyn_pos:
                leaves[p] = children[i]
                i += 1
            d[name] = restore_order(jax.tree_util.tree_unflatten(treedef, leaves), order)
        else:
            d[name] = meta.value
    if any(kind >= 0 for _, kind, _ in fields):
        _RECORDED[id(obj)] = fields
        weakref.finalize(obj, _RECORDED.pop, id(obj), None)
    return obj


def _register(cls):
    if cls in LAYER_TYPES:  # a subclass of a layer, registered by __init_subclass__, decorated again
        return

    def flatten_with_keys(obj):
        children, keys, aux = _flatten_fields(obj)
        return list(zip(keys, children)), aux

    def flatten(obj):
        children, _, aux = _flatten_fields(obj)
        return children, aux

    def unflatten(aux, children):
        return _unflatten_fields(cls, aux, children)

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    LAYER_TYPES.add(cls)


def layer(cls=None, *, trainable: tuple[str, ...] | None = None, state: tuple[str, ...] = ()):
    """Class decorator making a user class a Flux layer (Flux's `@layer`).

    ```python
    >>> @fluxjax.layer
    ... class Affine:
    ...     def __init__(self, n):
    ...         self.W = fluxjax.glorot_uniform(n, n)
    ...         self.b = fluxjax.zeros32(n)
    ...     def __call__(self, x):
    ...         return self.W @ x + self.b[:, None]
    >>> a = Affine(2)
    >>> a(jnp.ones((2, 5))).shape
    (2, 5)
    >>> g = gradient(lambda m: jnp.sum(m(jnp.ones((2, 5)))), a)[0]   # a gradient shaped like the layer
    >>> g.b
    Array([5., 5.], dtype=float32)
    >>> list(trainable(a))
    ['W', 'b']

    ```

    `trainable=("W",)` restricts what optimisers update (Flux's `trainable=`); `state=(...)` names fields
    that are state (carried, saved, never trained or differentiated). Subclasses of a layer are layers.
    """

    def wrap(c):
        if trainable is not None:
            c.__fluxjax_trainable__ = tuple(trainable)
        if state or not hasattr(c, "__fluxjax_state__"):
            c.__fluxjax_state__ = tuple(state)
        if "__repr__" not in c.__dict__:
            c.__repr__ = _layer_repr
        _register(c)
        _bumping(c)
        _marking_init(c)
        if c.__new__ is object.__new__:
            c.__new__ = lazy_new(c)  # for `autosize`
        orig_init_subclass = c.__dict__.get("__init_subclass__")

        def __init_subclass__(sub, **kw):
            if orig_init_subclass is not None:
                orig_init_subclass.__func__(sub, **kw)
            _register(sub)
            _marking_init(sub)
            if "__setattr__" in sub.__dict__ or "__delattr__" in sub.__dict__:
                _bumping(sub)
            if "__repr__" not in sub.__dict__:
                sub.__repr__ = _layer_repr

        c.__init_subclass__ = classmethod(__init_subclass__)
        return c

    return wrap if cls is None else wrap(cls)


def state_fields(x: Any) -> tuple[str, ...]:
    return getattr(type(x), "__fluxjax_state__", ())


def children(x: Any) -> dict[str, Any]:
    """The child fields of a layer (arrays, sub-layers, containers of them), Functors' `children`.

    ```python
    >>> list(children(Dense(2, 3)))
    ['weight', 'bias']
    >>> list(children(BatchNorm(2)))
    ['beta', 'gamma', 'mu', 'sigma2']

    ```
    """
    if not is_layer(x):
        return {}
    return {k: v for k, v in x.__dict__.items() if has_dynamic(v)}


def has_dynamic(v) -> bool:
    """Whether `v` is or holds (in lists, tuples, dicts) an array or a layer."""
    if _is_dynamic(v):
        return True
    if isinstance(v, (list, tuple)):
        return any(has_dynamic(e) for e in v)
    if isinstance(v, dict):
        return any(has_dynamic(e) for e in v.values())
    return False


def with_fields(x: Any, new: dict[str, Any]) -> Any:
    """A shallow copy of the layer `x` with the fields in `new` replaced (`x` is unchanged)."""
    out = object.__new__(type(x))
    out.__dict__.update(vars(x))
    out.__dict__.update(new)
    return out


def trainable(x: Any) -> dict[str, Any]:
    """The fields an optimiser updates: Flux's `trainable(m)` (children minus state, or `trainable=`).

    ```python
    >>> list(trainable(Dense(2, 3)))
    ['weight', 'bias']
    >>> list(trainable(BatchNorm(2)))   # its running statistics are state, not trainable
    ['beta', 'gamma']

    ```
    """
    if not is_layer(x):
        return {}
    names = getattr(type(x), "__fluxjax_trainable__", None)
    st = state_fields(x)
    ch = children(x)
    if names is not None:  # in field order, whatever the order of `trainable=`, as Optimisers.jl walks them
        return {k: v for k, v in ch.items() if k in names}
    return {k: v for k, v in ch.items() if k not in st}


