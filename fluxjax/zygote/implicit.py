"""Implicit parameters: `Params` (arrays with the slots they live in, or looked up in the globals and closure
of `f`), `params(models...)` and `Grads`, the gradients indexed by the parameter arrays."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import jax.numpy as jnp

from ..core.keys import Same
from ..core.layer import is_array, is_float_array, is_layer
from ..core.region import commit, original
from ..core.walk import PARAM, Slot, walk
from .closure import _referenced


class _Entry:
    __slots__ = ("slots", "array", "aliases")

    def __init__(self, array, slots):
        self.array, self.slots = array, slots
        self.aliases: list[Slot] = []  # other places found holding the array (see `Params._aliases`)

    def value(self):
        return self.slots[0].get() if self.slots else self.array

    def set(self, value):
        old = self.value()
        self.array = value
        for s in self.slots:
            commit(s, value)
        for s in self.aliases:  # Flux updates the one array in place: every place holding it sees the step
            try:
                here = s.get()
            except (KeyError, IndexError, AttributeError, ValueError):  # the place is gone
                continue
            if here is old:
                commit(s, value)


def _reachable(f) -> Iterator[tuple[Any, Slot]]:
    """`(array, slot)` for each array `f` reads from its globals and closure cells, held there directly or
    inside the layers and containers they hold."""
    for _, _, v, slot in _referenced(f):
        if is_array(v):
            yield v, slot
        elif is_layer(v) or isinstance(v, (list, dict, tuple)):
            root = [v]
            w = walk(root)
            for leaf, s in zip(w.leaves, w.slots):
                if s.owner is root:  # inside a tuple held by the variable itself: rebind the variable
                    s = Slot(slot.owner, slot.key, slot.attr, slot.path + s.path)
                yield leaf, s


class Params:
    """An ordered, deduplicated collection of parameter arrays (Zygote's `Params`).

    Built by `params(model)`, which records where each array lives so that `gradient` can swap
    tracers in and `update_` can rebind the result; or from bare arrays, `Params([W, b])`, which are
    then looked up in the globals and closure of the function being differentiated.

    >>> m = Dense(jnp.ones((1, 2)))
    >>> ps = Flux.params(m)
    >>> len(ps), [p.shape for p in ps]
    (2, [(1, 2), (1,)])
    """

    def __init__(self, xs=()):
        self._entries: list[_Entry] = []
        self._sources: tuple = ()  # the models params() was built from, for train_'s compiled step
        self._key: tuple | None = None  # `__fluxjax_key__`, until the entries or their slots change
        for x in xs:
            self.add(x)

    def __fluxjax_key__(self) -> tuple:
        """What a compiled trace reads of this collection: where each parameter lives (an array held by
        no slot is read as it is, so by identity). Not the collection itself: `params(m)` made anew at
        every step (Flux 0.13's loops) reuses the program. Kept until an entry or a slot is added or
        removed (each method here that does so drops it): a compiled call checks it every time."""
        if self._key is None:
            self._key = tuple(tuple((Same(s.owner), s.key, s.attr, s.path) for s in e.slots) or (Same(e.array),)
                              for e in self._entries)
        return self._key

    def __fluxjax_slots__(self) -> list:
        """Where the parameters live (`fluxjax.core.walk` walks those places for a compiled call)."""
        return [s for e in self._entries for s in e.slots]

    def _find(self, x):
        for e in self._entries:
            if e.value() is x:
                return e
        return None

    def add(self, x, slots=()) -> Params:
        if not is_array(x):
            raise TypeError(f"Params holds arrays, got {type(x).__name__}")
        e = self._find(x)
        if e is None:
            self._entries.append(_Entry(x, list(slots)))
        else:
            e.slots.extend(s for s in slots if s.ident() not in {t.ident() for t in e.slots})
        self._key = None
        return self

    push_ = add

    def delete(self, x) -> Params:
        self._entries = [e for e in self._entries if e.value() is not x]
        self._key = None
        return self

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return (e.value() for e in self._entries)

    def __getitem__(self, i):
        """`ps[k]`, the k-th array; `ps[a:b]` a list of them (Zygote's `ps[1:2] == [x, y]`)."""
        if isinstance(i, slice):
            return [e.value() for e in self._entries[i]]
        return self._entries[i].value()

    def __contains__(self, x):
        return self._find(x) is not None

    def __eq__(self, other):
        return isinstance(other, Params) and len(self) == len(other) and all(a is b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self):
        return "Params([" + ", ".join(f"{x.dtype}{list(x.shape)}" for x in self) + "])"

    def copy(self) -> Params:
        """A new `Params` with the same entries (Zygote's `copy(ps)`); adding to or deleting from it
        leaves this one as it is."""
        new = Params()
        new._entries = [_Entry(e.array, list(e.slots)) for e in self._entries]
        new._sources = self._sources
        return new

    __copy__ = copy

    def _absorb(self, itr) -> None:
        if isinstance(itr, Params):
            for e in itr._entries:
                self.add(e.value(), e.slots)
            self._sources = self._sources + tuple(m for m in itr._sources if all(m is not n for n in self._sources))
        else:
            for x in itr:
                self.add(x)

    def union_(self, *itrs) -> Params:
        """Add every array of `itrs` (Params or iterables of arrays) not already here, in order
        (Zygote's `union!(ps, itrs...)`). Returns `self`.

        ```python
        >>> a, b = jnp.zeros(2), jnp.ones(3)
        >>> len(Params([a]).union_(Params([b, a])))
        2

        ```
        """
        for itr in itrs:
            self._absorb(itr)
        return self

    def union(self, *itrs) -> Params:
        """`self.copy().union_(*itrs)` (Zygote's `union(ps, itrs...)`)."""
        return self.copy().union_(*itrs)

    def intersect_(self, *itrs) -> Params:
        """Keep only the arrays that are in every one of `itrs`, by identity (Zygote's `intersect!`)."""
        for itr in itrs:
            keep = {id(x) for x in itr}
            self._entries = [e for e in self._entries if id(e.value()) in keep]
        self._key = None
        return self

    def intersect(self, *itrs) -> Params:
        """`self.copy().intersect_(*itrs)` (Zygote's `intersect(ps, itrs...)`)."""
        return self.copy().intersect_(*itrs)

    def issetequal(self, other) -> bool:
        """The same arrays, by identity, in any order (Zygote's `issetequal`)."""
        return {id(x) for x in self} == {id(x) for x in other}

    def copy_(self, flat) -> Params:
        """Zygote's `copy!(ps, v)`: fill the parameters from one flat vector, column-major."""
        flat = jnp.asarray(flat)
        if flat.size != sum(x.size for x in self):
            raise ValueError(f"copy_: vector of length {flat.size} != {sum(x.size for x in self)} parameters")
        k = 0
        for e in self._entries:
            x = e.value()
            e.set(flat[k : k + x.size].reshape(tuple(reversed(x.shape))).T.astype(x.dtype))
            k += x.size
        return self

    def flat(self):
        """Zygote's `copy!(v, ps)`: all parameters as one column-major vector."""
        return jnp.concatenate([jnp.ravel(x.T) for x in self]) if len(self) else jnp.zeros((0,))

    def _aliases(self, f) -> list[list]:
        """For each entry, the other places `f` reaches (its globals and closure cells, and the layers and
        containers they hold) that hold the same array object: Zygote's implicit gradients are keyed by
        identity (an `IdDict`), so a use of the parameter through another layer that holds it (`Dense(W)`
        twice) or through a global counts as well."""
        current = {id(e.value()): i for i, e in enumerate(self._entries)}
        known = {s.ident() for e in self._entries for s in e.slots}
        aliases = {s.ident() for e in self._entries for s in e.aliases}
        extra: list[list] = [[] for _ in self._entries]
        if not current:
            return extra

        def add(v, slot):
            i = current.get(id(v))
            if i is not None and slot.ident() not in known:
                known.add(slot.ident())
                extra[i].append(slot)
                if slot.ident() not in aliases:  # kept: `update_` steps it too
                    self._entries[i].aliases.append(slot)

        for v, slot in _reachable(f):
            add(v, slot)
        return extra

    def _resolve(self, f, name):
        missing = {id(e.array): e for e in self._entries if not e.slots}
        if not missing:
            return
        self._key = None
        for v, slot in _reachable(f):
            if id(v) in missing:
                missing[id(v)].slots.append(slot)
        for e in missing.values():
            if not e.slots:
                raise ValueError(
                    f"{name}: parameter {e.array.dtype}{list(e.array.shape)} in Params was not found in the "
                    "globals or closure of f, so it cannot be traced. Keep it in a layer and use "
                    "params(model), or differentiate explicitly: gradient(lambda W: ..., W)."
                )


def raise_plain(obj, name: str):
    """The error for a plain object (no `@layer`) holding arrays or layers where `name` walks a model."""
    t = f"{type(obj).__module__}.{type(obj).__qualname__}"
    raise TypeError(
        f"{name}: found a {t} object, which is not a fluxjax layer, holding arrays or layers. fluxjax walks "
        "only layers here, so its arrays would silently get no gradient or never be trained (Flux 0.16 walks "
        "any struct). Decorate its class with @fluxjax.layer, or hold the arrays in a fluxjax layer."
    )


def _bare_arrays(m) -> bool:
    return isinstance(m, (list, tuple)) and not hasattr(m, "_fields") and len(m) > 0 and all(is_array(x) for x in m)


def params(*models) -> Params:
    """Every trainable float array in `models`, each once (tied weights once), in walk order.

    `params(model)` records where each array lives; `params(W, b)` and `params([W, b])` on bare arrays
    are `Params([W, b])`, found at `gradient` time in the globals and closure of the function.

    ```python
    >>> m = Dense(2, 3)
    >>> len(params(m)), len(params([m.weight, m.bias]))
    (2, 2)

    ```
    """
    # a list or tuple of bare arrays is `Params(arrays)`, as Zygote's params([W, b]): they are looked up
    # where `f` reads them, not in the (often temporary) list
    root = [x for m in models for x in (m if _bare_arrays(m) else (m,))]
    w = walk(root)
    if w.plain:
        raise_plain(w.plain[0], "params")
    ps = Params()
    ps._sources = tuple(m for m in models if is_layer(m) or isinstance(m, (list, dict)) and not _bare_arrays(m))
    entries: dict[int, _Entry] = {}  # by the array's id: one pass, not a search per array
    for leaf, slot, role in zip(w.leaves, w.slots, w.roles):
        if role != PARAM or not is_float_array(leaf):
            continue
        e = entries.get(id(original(leaf)))  # a tied array once, also inside gradient (a tracer per place)
        if e is None:
            e = entries[id(original(leaf))] = _Entry(leaf, [])
            ps._entries.append(e)
        if slot.owner is not root and all(slot.ident() != t.ident() for t in e.slots):
            e.slots.append(slot)
    return ps


class Grads:
    """Zygote's `Grads`: gradients indexed by the parameter arrays, iterable in `Params` order.

    `gs[W]`, `gs[W] = g`, `gs.params`, `keys()`, `values()`, `items()`, `+ - * /` with Grads or numbers
    (Zygote's `gs1 .+ gs2`, `2 .* gs`; `None` counts as zero), unary `+`/`-`, `map(f, *others)` (Zygote's
    `map(f, gs1, gs2...)`, also its broadcast `f.(gs1, gs2)`), `merge_`, `copy()`, `copy_` (Zygote's
    `copy!(gs, v)` and `gs1 .= gs2`) and `flat()` (Zygote's `copy!(v, gs)`).

    ```python
    >>> W = jnp.array([1.0, 2.0])
    >>> gs = gradient(lambda: jnp.sum(W * W), Params([W]))
    >>> (2 * gs + gs)[W]
    Array([ 6., 12.], dtype=float32)
    >>> m = Dense(jnp.ones((1, 2)))
    >>> gs = gradient(lambda: jnp.sum(m(jnp.array([1.0, 2.0]))), Flux.params(m))
    >>> gs[m.weight], gs[m.bias]
    (Array([[1., 2.]], dtype=float32), Array([1.], dtype=float32))

    ```
    """

    def __init__(self, ps: Params, keys: list, grads: list, entries: list | None = None):
        self.params = ps
        self._keys = keys
        self._grads = grads
        self._entries = list(ps._entries) if entries is None else entries  # where each parameter lived

    @property
    def _index(self) -> dict:
        """`{id(key): position}`, made at the first lookup (an eager loop's `update_` needs none)."""
        index = self.__dict__.get("_by_id")
        if index is None:
            index = self.__dict__["_by_id"] = {id(k): i for i, k in enumerate(self._keys)}
        return index

    def _new(self, keys: list, grads: list) -> Grads:
        return Grads(self.params, keys, grads, self._entries)

    def gradients_for(self, ps: Params) -> list:
        """The gradient of each parameter of `ps`, in its order: Flux's `gs[x] for x in ps`, as
        `update_(rule, ps, gs)` reads it. A parameter is found by where it lives when `ps` holds it
        since the gradient was taken (a weight rebound since, by `m.w = clamp(m.w)` where Flux clamps
        in place, is the same parameter; one deleted from `ps` is skipped), else by its array (`ps`
        another `Params` of the same arrays). One that has no gradient here raises `KeyError`."""
        entries = ps._entries
        if len(entries) == len(self._entries) == len(self._grads) and all(map(operator.is_, entries, self._entries)):
            return list(self._grads)
        at = {id(e): i for i, e in enumerate(self._entries)}
        out = []
        for e in entries:
            i = at.get(id(e))
            if i is None:
                i = self._index.get(id(e.value()))
            if i is None:
                raise KeyError(
                    f"update_(rule, ps, gs): ps holds an array of shape {tuple(e.value().shape)} that gs has no "
                    "gradient for (was it added to ps after gs = gradient(f, ps)?). Take the gradient with these ps."
                )
            out.append(self._grads[i])
        return out

    def _i(self, x):
        i = self._index.get(id(x))
        if i is None:
            for e in self.params._entries:
                if e.value() is x or e.array is x:
                    j = self._index.get(id(e.array))
                    if j is None:
                        j = next((n for n, k in enumerate(self._keys) if k is e.array or k is e.value()), None)
                    if j is not None:
                        return j
            # a parameter rebound since (update_(opt, ps, gs) rebinds where Zygote's update! mutates, so
            # Zygote's gs[W] after it still reads W's gradient): found where it lives
            for j, e in enumerate(self._entries[: len(self._keys)]):
                if e.value() is x:
                    return j
            raise KeyError("Grads: this array is not one of the parameters (did you update it since?)")
        return i

    def __getitem__(self, x):
        return self._grads[self._i(x)]

    def __setitem__(self, x, value) -> None:
        """`gs[W] = g` (Zygote's `setindex!`); `W` must be one of `gs.params`."""
        if value is not None:
            value = jnp.asarray(value)
            key = self._keys[self._i(x)]
            if value.shape != key.shape:
                raise ValueError(f"Grads: gs[W] = g needs g.shape == W.shape == {tuple(key.shape)}, got {tuple(value.shape)}")
        self._grads[self._i(x)] = value

    def __contains__(self, x):
        try:
            self._i(x)
            return True
        except KeyError:
            return False

    def __len__(self):
        return len(self._grads)

    def __iter__(self):
        return iter(self._grads)

    def keys(self):
        return list(self._keys)

    def values(self):
        return list(self._grads)

    def items(self):
        return list(zip(self._keys, self._grads))

    def copy(self) -> Grads:
        return self._new(list(self._keys), list(self._grads))

    __copy__ = copy

    def __getstate__(self):
        """pickle / deepcopy: `_index` is keyed by `id()`, which means nothing in another process or copy."""
        return {k: v for k, v in self.__dict__.items() if k != "_by_id"}

    def _same_params(self, other: Grads, fn: str) -> None:
        if not isinstance(other, Grads):
            raise TypeError(f"Grads.{fn}: expected Grads, got {type(other).__name__}")
        if {id(k) for k in other._keys} != {id(k) for k in self._keys}:
            raise ValueError(
                f"Grads.{fn}: the Grads belong to different parameters ({len(self)} and {len(other)} arrays, "
                "not the same ones); Zygote's ArgumentError \"expects Grads objects with the same Params\""
            )

    def map(self, f: Callable, *others: Grads) -> Grads:
        """`f` applied to each parameter's gradient, with the same parameter's gradients of `others`
        as further arguments (Zygote's `map(f, gs1, gs2...)` and `f.(gs1, gs2)`); `None` is zeros."""
        for o in others:
            self._same_params(o, "map")
        out = []
        for i, g in enumerate(self._grads):
            rest = [o[self._keys[i]] for o in others]
            out.append(f(*(self._zero(i) if v is None else v for v in [g, *rest])))
        return self._new(list(self._keys), out)

    broadcast = map

    def _zero(self, i):
        return jnp.zeros_like(self._keys[i])

    def merge_(self, *others: Grads) -> Grads:
        """Zygote's `merge!(gs, others...)`: the parameters of `others` are added to `gs.params` (as
        `union!`) and their gradients replace this one's. Returns `self`."""
        for o in others:
            if not isinstance(o, Grads):
                raise TypeError(f"Grads.merge_: expected Grads, got {type(o).__name__}")
            self.params.union_(o.params)
            for k, g in zip(o._keys, o._grads):
                i = self._index.get(id(k))
                if i is None:
                    self._index[id(k)] = len(self._keys)
                    self._keys.append(k)
                    self._grads.append(g)
                else:
                    self._grads[i] = g
        return self

    def flat(self):
        """Zygote's `copy!(v, gs)`: every gradient as one column-major vector, in `Params` order (`None`
        as zeros)."""
        if not self._keys:
            return jnp.zeros((0,))
        return jnp.concatenate([jnp.ravel((self._zero(i) if g is None else jnp.asarray(g)).T) for i, g in enumerate(self._grads)])

    def copy_(self, src) -> Grads:
        """Fill the gradients in place: from a flat vector, column-major (Zygote's `copy!(gs, v)`), or
        from other `Grads` of the same parameters (Zygote's `gs1 .= gs2`). Returns `self`."""
        if isinstance(src, Grads):
            self._same_params(src, "copy_")
            for k in self._keys:
                self._grads[self._i(k)] = src[k]
            return self
        flat = jnp.asarray(src)
        n = sum(k.size for k in self._keys)
        if flat.ndim != 1 or flat.size != n:
            raise ValueError(
                f"Grads.copy_: expected a vector of length {n} (the parameters' sizes summed), got shape {tuple(flat.shape)}"
            )
        at = 0
        for i, k in enumerate(self._keys):
            self._grads[i] = flat[at : at + k.size].reshape(tuple(reversed(k.shape))).T.astype(k.dtype)
            at += k.size
        return self

    def _binary(self, other, op, flip=False):
        if isinstance(other, Grads):
            theirs = other._grads
            if other.params != self.params and [id(k) for k in other._keys] != [id(k) for k in self._keys]:
                # Zygote's `gs1 .+ gs2` pairs the gradients by parameter: the same arrays in another order
                if {id(k) for k in other._keys} != {id(k) for k in self._keys}:
                    raise ValueError("Grads: cannot combine gradients of different Params")
                theirs = [other._grads[other._index[id(k)]] for k in self._keys]
            out = []
            for i, (a, b) in enumerate(zip(self._grads, theirs)):
                if a is None and b is None:
                    out.append(None)
                else:
                    out.append(op(self._zero(i) if a is None else a, self._zero(i) if b is None else b))
            return self._new(self._keys, out)
        # Zygote's `gs .+ a` maps over zeros where a gradient is nothing; `nothing .* a` stays zero (None)
        keep_none = op in (jnp.multiply, jnp.divide) and not flip
        out = []
        for i, g in enumerate(self._grads):
            if g is None and keep_none:
                out.append(None)
            else:
                g = self._zero(i) if g is None else g
                out.append(op(other, g) if flip else op(g, other))
        return self._new(self._keys, out)

    def __add__(self, o):
        return self._binary(o, jnp.add)

    def __radd__(self, o):
        return self._binary(o, jnp.add, flip=True)

    def __sub__(self, o):
        return self._binary(o, jnp.subtract)

    def __rsub__(self, o):
        return self._binary(o, jnp.subtract, flip=True)

    def __mul__(self, o):
        return self._binary(o, jnp.multiply)

    __rmul__ = __mul__

    def __truediv__(self, o):
        return self._binary(o, jnp.divide)

    def __rtruediv__(self, o):
        return self._binary(o, jnp.divide, flip=True)

    def __neg__(self):
        return self._new(self._keys, [None if g is None else -g for g in self._grads])

    def __pos__(self):
        return self._new(list(self._keys), list(self._grads))

    def __repr__(self):
        return f"Grads(<{len(self)} arrays>)"
