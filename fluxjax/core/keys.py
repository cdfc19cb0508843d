"""What a compiled program depends on that is not one of its inputs: `static_key` keys such values,
`code_names` lists what a function's code reads, `is_library` tells a library's code from the user's.

The walk (`walk.py`) puts these keys into the signature that `fluxjax.jit` caches programs on.
"""

from __future__ import annotations

import collections.abc
import functools
import sys
import types
from typing import Any

import jax
import numpy as np

EMPTY = object()  # an empty closure cell, in a signature or a key


@functools.lru_cache(maxsize=4096)
def code_names(code: types.CodeType) -> tuple[str, ...]:
    """The global (and attribute) names a code object and the code nested in it use."""
    names = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.extend(code_names(c))
    return tuple(dict.fromkeys(names))


# Code from these packages (and Python's standard library) is taken as fixed: its functions are keyed
# by identity and what they read is not followed.
_LIBRARIES = frozenset({"fluxjax", "jax", "jaxlib", "numpy", "optax", "flax", "orbax", "equinox", "chex", "scipy",
                        "ml_dtypes", "opt_einsum", "sklearn", "tqdm", "matplotlib"})


@functools.lru_cache(maxsize=4096)
def _is_library_module(module: str | None) -> bool:
    top = (module or "").partition(".")[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names


def is_library_module(module: types.ModuleType) -> bool:
    """Whether `module` is a library's (its attributes taken as fixed) rather than the user's."""
    return _is_library_module(getattr(module, "__name__", None))


def is_library(f: Any) -> bool:
    """Whether `f` is a library's function (fixed code, keyed by identity) rather than the user's."""
    return _is_library_module(getattr(f, "__module__", None))


class Same:
    """A key part equal only to the very same object, which it keeps alive (so its id is not reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.bool_, np.number)
# Values that cannot change in place: keyed as they are.
IMMUTABLE_TYPES = (type, types.ModuleType, types.BuiltinFunctionType, types.BuiltinMethodType, types.CodeType, np.dtype,
              range, slice, type(Ellipsis), type(NotImplemented))
_MAX_DEPTH = 6


def static_key(v: Any, watch: list | None = None) -> Any:
    """A hashable key for `v` as a compiled program depends on it when `v` is not a traced input: equal
    keys mean equal behaviour. Scalars and value-hashed objects by value; jax arrays by identity (they
    are immutable); functions by their code, captured values and the globals they read (`function_key`);
    containers, plain objects and NumPy arrays by their contents, with the object kept alive. When the
    key depends on something that can change in place, `(v, key)` is appended to `watch`, so a reuse
    check can compute it again (`static_key(v) == key`)."""
    mutable = [False]
    key = _static_key(v, mutable, 0)
    if mutable[0] and watch is not None:
        watch.append((v, key))
    return key


def _static_key(v, mutable, depth):
    t = type(v)
    if t in _SCALARS or isinstance(v, _SCALARS):
        return (t, v)
    if isinstance(v, jax.Array):
        return Same(v)
    if depth > _MAX_DEPTH:
        mutable[0] = True
        return Same(v)
    if t is np.ndarray:
        mutable[0] = True
        return (t, v.shape, v.dtype.str, v.tobytes()) if v.size <= 4096 else Same(v)
    if t is types.FunctionType:
        return _function_key(v, mutable, depth)
    if t is types.MethodType:
        return (t, _static_key(v.__self__, mutable, depth + 1), _static_key(v.__func__, mutable, depth + 1))
    if t is functools.partial:
        mutable[0] = True  # its keywords dict can change
        return (t, _static_key(v.func, mutable, depth + 1), tuple(_static_key(a, mutable, depth + 1) for a in v.args),
                tuple((k, _static_key(a, mutable, depth + 1)) for k, a in v.keywords.items()))
    if t is tuple or t is frozenset or (isinstance(v, tuple) and hasattr(t, "_fields")):
        return (t, tuple(_static_key(e, mutable, depth + 1) for e in v))
    if t is list or t is set:
        mutable[0] = True
        return (t, Same(v), tuple(_static_key(e, mutable, depth + 1) for e in v))
    if t is dict:
        mutable[0] = True
        return (t, Same(v), tuple((_static_key(k, mutable, depth + 1), _static_key(e, mutable, depth + 1))
                                   for k, e in v.items()))
    if isinstance(v, IMMUTABLE_TYPES):
        return v
    own = getattr(t, "__fluxjax_key__", None)
    if own is not None:  # a class that says what of it a trace depends on (and keeps alive what it names)
        mutable[0] = True
        return (t, own(v))
    try:
        hash(v)
        by_value = t.__hash__ is not object.__hash__
    except TypeError:
        by_value = False
    if by_value:  # enums, frozen dataclasses, shardings, ...: their own equality
        return v
    # a plain object (identity-hashed or unhashable): by identity and by what its fields hold now
    mutable[0] = True
    d = getattr(v, "__dict__", None)
    fields = None if d is None else tuple((k, _static_key(e, mutable, depth + 1)) for k, e in d.items())
    slots = _slot_names(t)
    if slots:  # fields without a `__dict__` (`__slots__`, `dataclass(slots=True)`)
        fields = (fields, tuple((k, _static_key(getattr(v, k, EMPTY), mutable, depth + 1)) for k in slots))
    elif d is None and isinstance(v, _SEQUENCES):  # a deque, bytearray, array.array: by its items
        fields = tuple(_static_key(e, mutable, depth + 1) for e in v) if len(v) <= _MAX_ITEMS else None
    return (t, Same(v), fields)


_SEQUENCES = (collections.abc.MutableSequence, collections.abc.MutableSet, collections.abc.MutableMapping)
_MAX_ITEMS = 4096


@functools.lru_cache(maxsize=1024)
def _slot_names(t: type) -> tuple[str, ...]:
    """The `__slots__` fields of instances of `t` (its own and its bases')."""
    names: list[str] = []
    for k in t.__mro__:
        s = k.__dict__.get("__slots__", ())
        names.extend([s] if isinstance(s, str) else s)
    return tuple(n for n in dict.fromkeys(names) if n not in ("__dict__", "__weakref__"))


MISSING = object()  # no such class attribute of the user's (see `class_attribute`)


def class_attribute(cls: type, name: str) -> Any:
    """`cls.__dict__[name]` of the first class in `cls`'s MRO defining `name`, or `MISSING` when none
    does or that class is a library's (Python's `object` included): what `cls.name` is made from,
    without running a descriptor."""
    for k in cls.__mro__:
        if name in k.__dict__:
            return MISSING if is_library(k) else k.__dict__[name]
    return MISSING


class ClassReads:
    """The attributes `names` of the user's class `cls` that a compiled program read through it (a
    class constant, a method, a `staticmethod`): its `__fluxjax_key__` is what they are now, methods by
    identity (the walk follows their code), so that a reuse check sees one set or rebound."""

    __slots__ = ("cls", "names")

    def __init__(self, cls: type, names: tuple[str, ...]):
        self.cls, self.names = cls, names

    def __fluxjax_key__(self) -> tuple:
        return tuple(_attribute_key(class_attribute(self.cls, n)) for n in self.names)


class Defaults:
    """The default values of the user's function `f`, for a reuse check: its `__fluxjax_key__` is the
    very `__defaults__` and `__kwdefaults__` objects, so that assigning new ones is seen (their values
    are keyed, and their mutable contents watched, by the walk)."""

    __slots__ = ("f",)

    def __init__(self, f: types.FunctionType):
        self.f = f

    def __fluxjax_key__(self) -> tuple:
        return (Same(self.f.__defaults__), Same(self.f.__kwdefaults__))


def _attribute_key(a: Any) -> Any:
    if a is MISSING:
        return a
    if isinstance(a, (staticmethod, classmethod)):
        a = a.__func__
    if isinstance(a, property):
        return (property, Same(a.fget))
    t = type(a)
    if t is types.FunctionType or (t.__module__ != "builtins" and is_library(t) and not isinstance(a, _DATA)):
        return Same(a)  # a function is followed by the walk; a library's object (a `fluxjax.jit` method) is fixed
    return static_key(a)


_DATA = (np.ndarray, np.generic, jax.Array)


def _function_key(f, mutable, depth):
    if is_library(f):
        return f
    mutable[0] = True  # its cells, defaults and globals can be rebound
    cells = []
    for c in f.__closure__ or ():
        try:
            cells.append(_static_key(c.cell_contents, mutable, depth + 1))
        except ValueError:  # an empty cell
            cells.append(EMPTY)
    g = f.__globals__
    reads = tuple((n, _static_key(g[n], mutable, depth + 1)) for n in code_names(f.__code__) if n in g)
    return (f.__code__, tuple(cells), _static_key(f.__defaults__, mutable, depth + 1),
            _static_key(f.__kwdefaults__, mutable, depth + 1), reads)


def function_key(f: types.FunctionType) -> Any:
    """A function as a cache key: its code, what its closure cells and defaults hold now, and the
    globals its code reads (see `static_key`). A lambda written inside a loop (`train_(lambda m, x, y:
    ..., ...)` every epoch) is a new object each time but gets the same key, so it is not compiled
    again; a closure or global whose value changed gives a new key."""
    return static_key(f)
