"""What a compiled program depends on that is not one of its inputs: `static_key` keys such values,
`code_names` lists what a function's code reads, `is_library` tells a library's code from the user's.

The walk (`walk.py`) puts these keys into the signature that `fluxjax.jit` caches programs on.
"""

from __future__ import annotations

import collections.abc
import functools
import hashlib
import random
import sys
import types
import warnings
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


class Fixed:
    """What a `__fluxjax_key__` returns for a key that cannot change while the object lives (an
    optimisation rule without callables): a reuse check does not compute it again."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.bool_, np.number)
# Values that cannot change in place: keyed as they are. (A builtin *method* is keyed with its object.)
IMMUTABLE_TYPES = (type, types.ModuleType, types.BuiltinFunctionType, types.BuiltinMethodType, types.CodeType, np.dtype,
              range, slice, type(Ellipsis), type(NotImplemented))
HOST_RNG_TYPES = (np.random.Generator, np.random.RandomState, random.Random)  # see compiled/hostrandom.py
MAX_DEPTH = 12  # nesting keyed; a value nested deeper gets a key equal to nothing (see `_unkeyable`)
_MAX_ITEMS = 4096  # the elements of a NumPy array keyed as they are (more: by a digest)
_SEQUENCES = (collections.abc.MutableSequence, collections.abc.MutableSet, collections.abc.MutableMapping)


class _Keying:
    """One `static_key` call's bookkeeping: whether the key depends on something that can change in
    place (`mutable`), the host random generators met (`rngs`, see compiled/hostrandom.py), and the
    ids of the containers, objects and functions on the way down (a cycle is keyed where it closes)."""

    __slots__ = ("mutable", "rngs", "on_path")

    def __init__(self, rngs: list | None):
        self.mutable, self.rngs, self.on_path = False, rngs, set()


def static_key(v: Any, watch: list | None = None, rngs: list | None = None) -> Any:
    """A hashable key for `v` as a compiled program depends on it when `v` is not a traced input: equal
    keys mean equal behaviour. Scalars and library objects hashed by value, by value; jax arrays by
    identity (they are immutable); functions by their code, captured values, attributes and what they
    read (`function_key`); containers, the user's objects and NumPy arrays by their contents, with the
    object kept alive. When the key depends on something that can change in place, `(v, key)` is
    appended to `watch`, so a reuse check can compute it again (`static_key(v) == key`); the NumPy and
    Python random generators met, and the iterators (generators, `iter(list)`, ...), whose key equals no
    other, are appended to `rngs`."""
    k = _Keying(rngs)
    key = _static_key(v, k, 0)
    if k.mutable and watch is not None:
        watch.append((v, key))
    return key


def _static_key(v, k, depth):
    t = type(v)
    if t in _SCALARS or isinstance(v, _SCALARS):
        return (t, v)
    if isinstance(v, jax.Array):
        return Same(v)
    if isinstance(v, np.ndarray):
        k.mutable = True
        fields = () if t is np.ndarray else _fields(v, k, depth)  # a subclass's own (a masked array's mask)
        if v.dtype.kind == "O":
            if v.size > _MAX_ITEMS:
                return _unkeyable(v, f"it is an array of more than {_MAX_ITEMS} Python objects")
            return (t, v.shape, tuple(_static_key(e, k, depth + 1) for e in v.ravel()), fields)
        return (t, v.shape, v.dtype.str, _contents(v), fields)
    if id(v) in k.on_path:  # a cycle: keyed where it started
        return ("cycle", Same(v))
    if depth > MAX_DEPTH:
        return _unkeyable(v, f"it is nested more than {MAX_DEPTH} levels deep")
    own = getattr(t, "__fluxjax_key__", None)
    if own is not None:  # a class that says what of it a trace depends on (and keeps alive what it names)
        key = own(v)
        if type(key) is Fixed:  # a key that cannot change: not computed again by a reuse check
            return (t, key.key)
        k.mutable = True
        return (t, key)
    if t is types.FunctionType:
        return _nested(_function_key, v, k, depth)
    if t is types.MethodType:
        return (t, _static_key(v.__self__, k, depth + 1), _static_key(v.__func__, k, depth + 1))
    if t is types.BuiltinMethodType and v.__self__ is not None and not isinstance(v.__self__, types.ModuleType):
        return (t, v.__name__, _static_key(v.__self__, k, depth + 1))  # `cfg.get`, `arr.sum`: what it reads
    if t is functools.partial:
        k.mutable = True  # its keywords dict can change
        return (t, _static_key(v.func, k, depth + 1), tuple(_static_key(a, k, depth + 1) for a in v.args),
                tuple((n, _static_key(a, k, depth + 1)) for n, a in v.keywords.items()))
    if t is tuple or t is frozenset or (isinstance(v, tuple) and hasattr(t, "_fields")):
        return (t, tuple(_static_key(e, k, depth + 1) for e in v))
    if t is list or t is set or t is dict:
        k.mutable = True
        return (t, Same(v), _nested(_items, v, k, depth))
    if isinstance(v, IMMUTABLE_TYPES):
        return v
    wrapped = getattr(v, "__wrapped__", None) if is_library(t) else None
    if callable(wrapped):  # `fluxjax.jit(f)`, `jax.jit(f)`: what `f` reads, not the wrapper's caches
        return (t, Same(v), _static_key(wrapped, k, depth + 1))
    if isinstance(v, HOST_RNG_TYPES) and k.rngs is not None:
        k.rngs.append(v)
    if isinstance(v, collections.abc.Iterator):  # an iterator, a generator: `next` changes it unseen
        if k.rngs is not None:
            k.rngs.append(v)
        return ("iterator", Same(object()))  # equal to no other key (see compiled/hostrandom.py)
    try:
        hash(v)
        by_value = t.__hash__ is not object.__hash__
    except TypeError:
        by_value = False
    if by_value and (is_library(t) or not (hasattr(v, "__dict__") or slot_names(t))):
        return v  # enums, shardings, a library's frozen dataclasses, ...: their own equality
    # the user's object: by what its fields (and items) hold now; by identity too, unless it says it is
    # a value (defines `__hash__`: `dataclass(unsafe_hash=True)`, `frozen=True`), so that equal ones
    # made afresh at each call share a program
    k.mutable = True
    return (t, None if by_value else Same(v), _nested(_fields, v, k, depth))


def _nested(how, v, k, depth):
    """`how(v, k, depth)` with `v` on the path (a cycle back to it is keyed by `_static_key`)."""
    k.on_path.add(id(v))
    try:
        return how(v, k, depth)
    finally:
        k.on_path.discard(id(v))


def _items(v, k, depth) -> tuple:
    """A container's items (a mapping's as pairs, in their order)."""
    if isinstance(v, collections.abc.Mapping):
        return tuple((_static_key(a, k, depth + 1), _static_key(e, k, depth + 1)) for a, e in v.items())
    return tuple(_static_key(e, k, depth + 1) for e in v)


def _fields(v, k, depth) -> tuple:
    """An object's fields (`__dict__`, `__slots__`) and, for a list, dict or set of its own kind (an
    `EasyDict`), its items."""
    d = getattr(v, "__dict__", None)
    fields = None if d is None else tuple((n, _static_key(e, k, depth + 1)) for n, e in d.items())
    slots = slot_names(type(v))
    if slots:
        fields = (fields, tuple((n, _static_key(getattr(v, n, EMPTY), k, depth + 1)) for n in slots))
    if isinstance(v, _SEQUENCES):
        fields = (fields, _items(v, k, depth))
    return fields


def _contents(a: np.ndarray) -> Any:
    """A NumPy array's contents as a key: its bytes, or a 128-bit digest of them when it is large."""
    if a.size <= _MAX_ITEMS:
        return a.tobytes()
    return hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8).reshape(-1), digest_size=16).digest()


_warned: set[type] = set()


def _unkeyable(v: Any, why: str) -> Same:
    """A key equal to no other (a program that reads `v` is compiled again at each call, rather than
    reused with a stale `v`), with a warning once per type."""
    if type(v) not in _warned:
        _warned.add(type(v))
        warnings.warn(
            f"fluxjax cannot tell whether a {type(v).__name__} that a compiled call reads has changed, as "
            f"{why}: the call is compiled again each time. Pass what it needs as an argument, or use "
            f"jit=False / `with fluxjax.eager():` for this call.", stacklevel=4)
    return Same(object())


@functools.lru_cache(maxsize=1024)
def slot_names(t: type) -> tuple[str, ...]:
    """The `__slots__` fields of instances of `t` (its own and its bases')."""
    names: list[str] = []
    for c in t.__mro__:
        s = c.__dict__.get("__slots__", ())
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


def _attribute_key(a: Any, k: _Keying | None = None, depth: int = 0) -> Any:
    if a is MISSING:
        return a
    if isinstance(a, (staticmethod, classmethod)):
        a = a.__func__
    if isinstance(a, property):
        return (property, Same(a.fget) if k is None else _static_key(a.fget, k, depth + 1))
    t = type(a)
    if t.__module__ != "builtins" and is_library(t) and not isinstance(a, _DATA):
        return Same(a)  # a library's object (a `fluxjax.jit` method) is fixed
    if k is None:  # (`ClassReads`: a function is followed by the walk)
        return Same(a) if t is types.FunctionType else static_key(a)
    return _static_key(a, k, depth + 1)


_DATA = (np.ndarray, np.generic, jax.Array)


def _function_key(f, k, depth):
    if is_library(f):  # fixed code; but what a library's closure holds may be the user's (optax.sgd(schedule))
        return f if not f.__closure__ else (f, tuple(_closed_over(_cell(c), k, depth + 1) for c in f.__closure__))
    k.mutable = True  # its cells, defaults, attributes and globals can be rebound
    cells = [EMPTY if (v := _cell(c)) is EMPTY else _static_key(v, k, depth + 1) for c in f.__closure__ or ()]
    g, names = f.__globals__, code_names(f.__code__)
    reads = tuple((n, _read_key(g[n], names, k, depth)) for n in names if n in g)
    return (f.__code__, tuple(cells), _static_key(f.__defaults__, k, depth + 1),
            _static_key(f.__kwdefaults__, k, depth + 1), _attributes(f, k, depth), reads)


def _cell(c) -> Any:
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return EMPTY


def _closed_over(v, k, depth):
    """What a library's closure holds, keyed as far as the user's code can be in it: a function or
    callable object (a learning-rate schedule given to an optax transformation) by `_static_key`, the
    tuples and lists that hold them (`optax.chain`'s transformations) by their items; anything else (the
    library's own objects, arrays) by identity, as the closure's code is fixed."""
    t = type(v)
    if v is EMPTY:
        return v
    if t in _SCALARS or isinstance(v, _SCALARS) or t in (types.FunctionType, types.MethodType, functools.partial):
        return _static_key(v, k, depth)
    if isinstance(v, (tuple, list)):
        if depth > MAX_DEPTH:
            return _unkeyable(v, f"it is nested more than {MAX_DEPTH} levels deep")
        return (t, tuple(_closed_over(e, k, depth + 1) for e in v))
    if callable(v) and not is_library(t):
        return _static_key(v, k, depth)
    return Same(v)


def _attributes(f, k, depth) -> tuple:
    """A function's attributes (`loss.k`), by value: equal lambdas made afresh share a key."""
    return tuple((n, _static_key(e, k, depth + 1)) for n, e in f.__dict__.items())


class Attributes:
    """The attributes of the user's function `f` (`loss.k = 0.5`), for a reuse check: its
    `__fluxjax_key__` is what they hold now."""

    __slots__ = ("f",)

    def __init__(self, f: types.FunctionType):
        self.f = f

    def __fluxjax_key__(self) -> tuple:
        return _attributes(self.f, _Keying(None), 0)


def _read_key(v, names, k, depth):
    """A global a function reads: a user's module or class by the attributes among `names` (what the
    code uses: `cfg.SCALE`, `C.K`), anything else by `_static_key`."""
    if isinstance(v, types.ModuleType) and not is_library_module(v):
        d = v.__dict__
        return (v, tuple((n, _static_key(d[n], k, depth + 1)) for n in names if n in d))
    if isinstance(v, type) and not is_library(v):
        k.mutable = True
        return (v, tuple((n, _attribute_key(class_attribute(v, n), k, depth)) for n in names))
    return _static_key(v, k, depth + 1)


def function_key(f: types.FunctionType) -> Any:
    """A function as a cache key: its code, what its closure cells and defaults hold now, and the
    globals its code reads (see `static_key`). A lambda written inside a loop (`train_(lambda m, x, y:
    ..., ...)` every epoch) is a new object each time but gets the same key, so it is not compiled
    again; a closure or global whose value changed gives a new key."""
    return static_key(f)
