"""The translation onto `jax.vjp`: a `_Plan` turns `f(args...)` (explicit arguments or implicit `Params`)
into a pure function of the differentiable values plus the state it writes, runs `jax.vjp` on it (with
`intargs` decides which integers it differentiates) and maps the cotangents back to gradients."""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiled.entry import use_plain_order
from ..core.layer import LAYER_TYPES, is_array, is_float_array, is_layer, structure_version
from ..core.plain import plain_with_numbers
from ..core.region import commit, run_in_region
from ..core.region import written as _written
from ..core.walk import NUMBER_TYPES, STATE, Slot, is_visited, walk
from .implicit import Grads, Params, raise_plain
from .tangent import Tangent, _rebuild


class _Plan:
    """`fx(*primals) -> (y, state_writes)` plus how to map cotangents back."""

    def __init__(self, fx, primals, finish, written, ints=(), key=None, untied=None):
        self.fx, self.primals, self.finish, self.written = fx, primals, finish, written
        # leaf indices of the Python ints and integer arrays being differentiated (see traced_with), and
        # what the decision which of them can be traced as floats depends on besides `f`'s code
        self.ints, self.key = tuple(ints), key
        self.untied = untied

    def backward(self, back, ct):
        """`back(ct)` for the `back` of `jax.vjp(self.fx, ...)`, with the per-path copies of a tied layer
        in place as `fx` saw them: op by op, a `checkpointed` call inside `f` runs again in the backward
        pass and must find the model as the forward pass did."""
        if self.untied is None:
            return back(ct)
        return self.untied.run(lambda: back(ct))

    def commit(self, values):
        for slot, v in zip(self.written, values):
            commit(slot, v)


def _make_fx(call, slot_groups, written, untied=None):
    pre = untied.swaps if untied is not None else []

    def fx(*xs):
        y, writes = run_in_region(call, pre + [(s, x) for slots, x in zip(slot_groups, xs) for s in slots], _written,
                                  differentiating=True)
        if untied is not None:
            writes = untied.originals(writes)
        written[:] = [slot for slot, _ in writes]
        return y, [v for _, v in writes]

    return fx


def _has_tied_layer(w) -> bool:
    """Whether `walk` reached some layer twice (its signature records `("tied", index)`)."""
    return any(type(e) is tuple and len(e) == 2 and e[0] == "tied" and type(e[1]) is int for e in w.signature)


class _Untied:
    """Zygote gives each *path* to a layer its own gradient: for `Model(d, d)`, `g.a` is the gradient
    through `m.a` and `g.b` the one through `m.b` (Flux issue 1767); Optimisers.jl sums them before it
    updates `d` once (`optimise.tree`). A walk reaches a tied layer once, so for the duration of the
    explicit `gradient`, each occurrence of a tied layer after the first is replaced (in its parent's
    slot; put back afterwards, also on error) by a shallow copy that holds the same arrays and gets its
    own tracers. Layers holding no float parameter stay tied (they get no gradient anyway). State that
    a copy writes (BatchNorm's statistics) lands on the original layer; when two occurrences both write
    one state field, the second would have read stale state, so that raises.

    Layers reached only through a plain (non-`@layer`) object are not untied: they get the total."""

    def __init__(self, box: list):
        self.swaps: list[tuple[Slot, Any]] = []
        self.origin: dict[int, Any] = {}  # id(copy) -> the original layer
        self.ours: set[int] = {id(box)}  # containers built here: changed directly, never swapped
        self._keep: list = []  # the copies, alive while their ids are keys
        seen: set[int] = set()

        def place(owner, key, attr, path, c):
            slot = Slot(owner, key, attr, path)
            if id(owner) in self.ours:
                slot.set(c)
            else:
                self.swaps.append((slot, c))

        def go(owner, key, attr, path, v):
            t = type(v)
            if t in LAYER_TYPES:
                if id(v) in seen:
                    if not _holds_float(v, set()):
                        return
                    c = object.__new__(t)
                    c.__dict__.update({k: self._fresh(e) for k, e in v.__dict__.items()})
                    self.origin[id(c)] = self.origin.get(id(v), v)
                    self.ours.add(id(c))
                    self._keep.append(c)
                    place(owner, key, attr, path, c)
                    v = c
                seen.add(id(v))
                for name, e in list(v.__dict__.items()):
                    if is_visited(e):
                        go(v, name, True, (), e)
            elif t is list or t is dict:
                for k, e in list(v.items() if t is dict else enumerate(v)):
                    go(v, k, False, (), e)
            elif isinstance(v, tuple):
                for i, e in enumerate(v):
                    go(owner, key, attr, path + (i,), e)

        for i, v in enumerate(box):
            go(box, i, False, (), v)

    def _fresh(self, v):
        """`v` with its lists and dicts copied: a copied layer must not share containers with the
        original, since the copies of the layers inside them are put in them."""
        t = type(v)
        if t is list or t is dict:
            new = {k: self._fresh(e) for k, e in v.items()} if t is dict else [self._fresh(e) for e in v]
            self.ours.add(id(new))
            self._keep.append(new)
            return new
        if isinstance(v, tuple) and any(type(e) in (list, dict) or isinstance(e, tuple) for e in v):
            items = [self._fresh(e) for e in v]
            return t(*items) if hasattr(v, "_fields") else t(items)
        return v

    def __bool__(self):
        return bool(self.origin)

    def run(self, call):
        """`call()` with the copies in place."""
        return run_in_region(call, self.swaps)[0]

    def originals(self, writes):
        """The region's writes with each copy's slot moved to its original layer."""
        out: dict[tuple, tuple[Slot, Any]] = {}
        for slot, v in writes:
            orig = self.origin.get(id(slot.owner))
            if orig is not None:
                slot = Slot(orig, slot.key, slot.attr, slot.path)
            ident = slot.ident()
            if ident in out:
                raise RuntimeError(
                    f"gradient: the {type(slot.owner).__name__} layer used at two places of the model wrote its "
                    f"state field {slot.key!r} at both. gradient gives each place its own copy of the layer "
                    "(Zygote's per-path gradients), so the second use would read stale state. Put the layer "
                    "in test mode (testmode_), or use two separate layers."
                )
            out[ident] = (slot, v)
        return list(out.values())


def _holds_float(v, seen) -> bool:
    """Whether a layer (or container) holds a float array outside its state fields."""
    t = type(v)
    if t in LAYER_TYPES:
        if id(v) in seen:
            return False
        seen.add(id(v))
        st = getattr(t, "__fluxjax_state__", ())
        return any(_holds_float(e, seen) for k, e in v.__dict__.items() if k not in st and is_visited(e))
    if t is list or isinstance(v, tuple):
        return any(_holds_float(e, seen) for e in v)
    if t is dict:
        return any(_holds_float(e, seen) for e in v.values())
    return is_float_array(v)


def _as_primal(v):
    """The value `gradient` traces for a leaf. A Python number becomes a *weakly typed* scalar, which
    JAX promotes as it promotes the Python number itself, so arithmetic inside `gradient` has the dtype
    it has outside (`float16_array * 0.5` stays float16); an int is traced as a float (its value is
    kept; Zygote differentiates integers as reals). NumPy scalars are strongly typed, as outside."""
    if _is_int_array(v):
        return jnp.asarray(v, jnp.result_type(float))
    if isinstance(v, NUMBER_TYPES) and not isinstance(v, (bool, np.bool_)):
        if type(v) in (int, float):
            return jnp.asarray(float(v))
        if type(v) is complex:
            return jnp.asarray(v)
        kind = complex if isinstance(v, (complex, np.complexfloating)) else float
        return jnp.asarray(v, dtype=jnp.result_type(kind))
    return v


def _conj(c):
    return jnp.conj(c) if c is not None and jnp.iscomplexobj(c) else c


def zygote_cotangents(cts) -> list:
    """JAX's cotangents in Zygote's convention for complex numbers: conjugated. For a real `f` of a
    complex `z = x + iy`, JAX's `vjp` gives `∂f/∂x - i·∂f/∂y` and Zygote gives `∂f/∂x + i·∂f/∂y` (the
    direction of steepest ascent, so that `z - η·g` descends); in general Zygote's pullback is
    `back_zygote(dy) = conj(back_jax(conj(dy)))`. Real cotangents are unchanged."""
    return [_conj(c) for c in cts]


def zygote_seed(dy):
    """The cotangent to give JAX's `vjp` for Zygote's `back(dy)`: `conj(dy)` (see `zygote_cotangents`)."""
    return jax.tree_util.tree_map(_conj, dy)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_int_array(v) -> bool:
    """A signed integer array (not bool, not unsigned: raw PRNG keys are uint32)."""
    return is_array(v) and jnp.issubdtype(v.dtype, jnp.signedinteger)


def _int_arrays(w) -> list[int]:
    """The integer-array leaves of a `walk` that `gradient` tries to differentiate as floats, as Zygote
    differentiates `Int` arrays: those passed as arguments (or in tuples, lists and dicts of them), not
    the fields of a layer (Optimisers.jl never trains an integer array, and a layer's integer array is
    its configuration or an index table)."""
    return [
        i
        for i, (v, r) in enumerate(zip(w.leaves, w.roles))
        if r != STATE and _is_int_array(v) and not is_layer(w.slots[i].owner)
    ]


def _differentiable(w) -> list[int]:
    """The leaves of a `walk` that `gradient` differentiates: float or complex arrays, or numbers (real or
    complex; not bools), that are not state. Fields that a layer's `trainable=` leaves out (role OTHER)
    are differentiated too: Flux's `trainable` restricts what optimisers change, not what Zygote sees."""
    return [
        i
        for i, (v, r) in enumerate(zip(w.leaves, w.roles))
        if r != STATE and (is_float_array(v) or (isinstance(v, NUMBER_TYPES) and not isinstance(v, (bool, np.bool_))))
    ]


def _refuse_plain_numbers(args: list, name: str) -> None:
    """An argument (or an item of a list, tuple or dict argument) that is a plain object holding Python
    floats: Zygote differentiates a struct's number fields (`gradient(x -> x.value^2, S(3.0))` is
    `((value = 6.0,),)`); fluxjax keeps a plain object constant, so it would get `None` in silence."""
    todo = [(f"argument {k + 1}", a) for k, a in enumerate(args)]
    while todo:
        where, v = todo.pop()
        t = type(v)
        if t is dict:
            todo.extend((f"{where}[{k!r}]", e) for k, e in v.items())
        elif t in (list, tuple) or (isinstance(v, tuple) and hasattr(v, "_fields")):
            todo.extend((f"{where}[{k}]", e) for k, e in enumerate(v))
        elif not is_layer(v) and (fields := plain_with_numbers(v)):
            raise TypeError(
                f"{name}: {where} is a {t.__module__}.{t.__qualname__} object, which is not a fluxjax layer, "
                f"holding Python numbers ({', '.join(fields)}). Zygote differentiates a struct's number "
                "fields; fluxjax keeps a plain object constant, so they would silently get no gradient. Pass "
                f"the numbers as arguments ({name}(f, obj.{fields[0]}, ...)), or hold them as arrays in a "
                "@fluxjax.layer; for constants, close over the object instead of passing it.")


def _explicit_plan(f, args, name, static=frozenset()) -> _Plan:
    box = list(args)
    w = walk(box)
    if w.plain:
        raise_plain(w.plain[0], name)
    _refuse_plain_numbers(box, name)
    untied = _Untied(box) if _has_tied_layer(w) else None
    if untied is not None and not untied:
        untied = None
    if untied is not None:
        w = untied.run(lambda: walk(box))
    diff = sorted(i for i in (*_differentiable(w), *_int_arrays(w)) if i not in static)
    if not diff:
        bad = [a for a in args if isinstance(a, (str, bytes)) or callable(a) and not is_layer(a)]
        if bad:
            raise TypeError(
                f"{name}: cannot differentiate with respect to {type(bad[0]).__name__} {bad[0]!r}; "
                "arguments must be numbers, float arrays, layers or containers of them"
            )
    written: list[Slot] = []
    fx = _make_fx(lambda: f(*box), [[w.slots[i]] for i in diff], written, untied)
    primals = [_as_primal(w.leaves[i]) for i in diff]

    version = structure_version()

    def finish(grads):
        by_leaf: list[Any] = [None] * len(w.leaves)
        for i, g in zip(diff, grads):
            by_leaf[i] = g

        def rebuild():
            leaves = by_leaf
            if structure_version() != version:  # `f` set a field (a buffer filled at the first call): the
                at = {s.ident(): i for i, s in enumerate(w.slots)}  # gradient takes the arguments as they
                leaves = [by_leaf[at[s.ident()]] if s.ident() in at else None for s in walk(box).slots]  # are now
            return _rebuild(box, leaves)

        return untied.run(rebuild) if untied is not None else rebuild()

    ints = [i for i in diff if _is_int(w.leaves[i]) or _is_int_array(w.leaves[i])]
    key = None
    if ints:  # what the decision which ints f can take as floats depends on: the structure of the arguments
        try:
            leaf = w.leaves
            key = (hash(tuple(w.signature)), tuple((i, np.shape(leaf[i]), str(getattr(leaf[i], "dtype", "int"))) for i in ints))
        except TypeError:  # something unhashable in the signature: decide every call
            key = object()
    return _Plan(fx, primals, finish, written, ints, key, untied)


def _is_implicit(args) -> bool:
    return len(args) == 1 and isinstance(args[0], Params)


def _implicit_plan(f, ps: Params, name, static=frozenset()) -> _Plan:
    """The plan for `gradient(f, ps)`. An integer array in `ps` (`Params([x])` of an `Int` array) is
    traced as a float, as an argument is (see `traced_with`); `Grads` stays keyed by the array itself."""
    ps._resolve(f, name)
    written: list[Slot] = []
    fx = _make_fx(f, [e.slots + more for e, more in zip(ps._entries, ps._aliases(f))], written)
    values = [e.value() for e in ps._entries]
    ints = [i for i, v in enumerate(values) if _is_int_array(v) and i not in static]
    primals = [_as_primal(v) if i in ints else v for i, v in enumerate(values)]
    key = tuple((i, np.shape(values[i]), str(values[i].dtype)) for i in ints)
    return _Plan(fx, primals, lambda grads: Grads(ps, values, list(grads)), written, ints, ("implicit", len(values), key))


def _plan(f, args, name, static=frozenset()) -> _Plan:
    if not callable(f):
        raise TypeError(f"{name}(f, args...): f must be callable, got {type(f).__name__}")
    return _implicit_plan(f, args[0], name, static) if _is_implicit(args) else _explicit_plan(f, args, name, static)


def _used_inputs(back, n: int) -> list[bool]:
    """Which inputs the linear (tangent) program of `jax.vjp` reads: the others get `None`. Its tangent
    inputs are the last `n` (jax 0.11 puts the residuals before them; up to 0.10 they were constants)."""
    try:
        jaxpr = back.jaxpr
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
        tangents = jaxpr.invars[len(jaxpr.invars) - n:]
        needed = {v for v in jaxpr.outvars if type(v).__name__ == "Var"}
        for eqn in reversed(jaxpr.eqns):
            if any(o in needed for o in eqn.outvars):
                needed.update(v for v in eqn.invars if type(v).__name__ == "Var")
        return [v in needed for v in tangents] if len(tangents) == n else [True] * n
    except Exception:  # a jax internals change: fall back to dense zeros
        return [True] * n


def _check_scalar(y, name):
    if isinstance(y, (tuple, list, dict)):
        raise TypeError(
            f"{name}: f returned a {type(y).__name__}, but {name} needs a real scalar. To differentiate "
            "the first element and keep the rest, use withgradient."
        )
    if not (isinstance(y, (jax.Array, np.ndarray, np.generic)) or isinstance(y, (int, float, complex))):
        # Zygote: "Output should be scalar; gradients are not defined for output nothing"
        raise TypeError(
            f"{name}: f returned {type(y).__name__} {y!r:.60}, but {name} needs a real scalar (a loss); "
            "did f forget to return its loss?"
        )
    shape = np.shape(y)
    if shape != ():
        raise TypeError(
            f"{name}: f returned an array of shape {shape}, but {name} needs a real scalar "
            "(a loss). Perhaps you wanted jacobian, or to sum/mean the output."
        )
    if jnp.iscomplexobj(y):
        # Zygote: "Output is complex, so the gradient is not defined."
        raise TypeError(
            f"{name}: f returned a complex number, so the gradient is not defined (as in Zygote). "
            "Differentiate a real function of it (real, imag, abs2), or use pullback(f, ...) with a "
            "complex cotangent, or jacobian."
        )


def _differentiable_output(y) -> bool:
    return jnp.issubdtype(getattr(y, "dtype", None) or np.result_type(y), jnp.inexact)


def _hint(e: Exception, text: str) -> None:
    """Add fluxjax's `text` to the message of JAX's error `e` (Python 3.11's notes)."""
    if hasattr(e, "add_note"):
        e.add_note(f"fluxjax: {text}.")


def _run_vjp(plan: _Plan, first_only):
    if first_only:

        def fx(*xs):
            full, vals = plan.fx(*xs)
            return first_output(full), (keep_order(full), vals)
    else:

        def fx(*xs):
            y, vals = plan.fx(*xs)
            return keep_order(y), vals

    try:
        y, back, aux = jax.vjp(fx, *plan.primals, has_aux=True)
    except jax.errors.TracerArrayConversionError as e:
        _hint(e, "a NumPy function (np.exp, np.asarray, np.array) was given a value being differentiated, "
                 "which it cannot take: use jax.numpy (jnp.exp, ...) in the code that gradient runs")
        raise
    if first_only:
        full, aux = aux
    else:
        full = y
    return y, back, full, aux


def _grads(plan: _Plan, y, back, seed=None):
    n = len(plan.primals)
    if n == 0 or not _differentiable_output(y):
        return plan.finish([None] * n)
    used = _used_inputs(back, n)
    if not any(used):
        return plan.finish([None] * n)
    cts = zygote_cotangents(plan.backward(back, jnp.ones_like(y) if seed is None else zygote_seed(seed)))
    return plan.finish([c if u else None for c, u in zip(cts, used)])


class WithGradient(NamedTuple):
    """`withgradient`'s result: `val` (the function's whole value) and `grad` (one gradient per argument)."""

    val: Any
    grad: Any


def first_output(y):
    """The differentiated part of a function's value: the first element of a tuple, list or dict."""
    if isinstance(y, dict):
        return next(iter(y.values()))
    if isinstance(y, (tuple, list)):
        return y[0]
    return y


class _Ordered(collections.OrderedDict):
    """A dict in the value `withgradient` returns, kept in its own key order through `jax.vjp` and the
    compiled program (JAX sorts a plain dict's keys: `loss, acc = val.values()` would swap)."""

    __repr__ = dict.__repr__


jax.tree_util.register_pytree_with_keys(
    _Ordered,
    lambda d: ([(jax.tree_util.DictKey(k), v) for k, v in d.items()], tuple(d)),
    lambda keys, values: _Ordered(zip(keys, values)),
)


def _map_containers(v, f):
    t = type(v)
    if t is dict or t is _Ordered:
        return f({k: _map_containers(e, f) for k, e in v.items()})
    if t is Tangent:  # a layer's gradient: a named Chain's `layers` dict
        return Tangent(v.primal_type, {k: _map_containers(e, f) for k, e in v.fields.items()})
    if t is list:
        return [_map_containers(e, f) for e in v]
    if isinstance(v, tuple):
        items = [_map_containers(e, f) for e in v]
        return t(*items) if hasattr(v, "_fields") else t(items)
    return v


def keep_order(v):
    """`v` with its dicts (inside tuples, lists and dicts) as `_Ordered`; see `plain_order`."""
    return _map_containers(v, _Ordered)


def plain_order(v):
    """`v` with the `_Ordered` of `keep_order` back as plain dicts, in their original key order. A value
    that is still traced keeps them (the trace's output would sort a plain dict again)."""
    if not isinstance(v, (dict, list, tuple)):
        return v  # no container (a loss): nothing to map
    if any(isinstance(e, jax.core.Tracer) for e in jax.tree_util.tree_leaves(v)):
        return v
    return _map_containers(v, dict)


use_plain_order(_Ordered, plain_order, keep_order)  # a `fluxjax.jit` result keeps its dicts in order
