"""Zygote's API as a translation onto `jax.vjp`.

`gradient(f, args...)` differentiates with respect to every float array inside the arguments (layers
included), by swapping JAX tracers into the live objects for the duration of the call (see
`fluxjax.state`), and returns one entry per argument: arrays for arrays, `Tangent`s shaped like layers,
`None` where Zygote gives `nothing` (no dependence on the loss, static fields, state, integer arrays).
Implicit mode, `gradient(() -> loss, params(m))`, swaps the tracers into the slots that `Params` names
and returns `Grads`.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._slots import _NUMBER, _OPAQUE, PARAM, SAFE_NODES, Slot, is_visited, walk
from .functors import _LAYER_TYPES, bump, is_array, is_float_array, is_layer
from .state import Region, commit

# ----------------------------------------------------------------------------------------------
# Structural gradients


class Tangent:
    """The gradient of a layer: one attribute per field of the layer, `None` where Zygote gives
    `nothing`. `g.layers[0].weight` reads as in Zygote. It is a pytree (`jax.tree.map` works)."""

    __slots__ = ("primal_type", "fields")

    def __init__(self, primal_type: type, fields: dict[str, Any]):
        object.__setattr__(self, "primal_type", primal_type)
        object.__setattr__(self, "fields", fields)

    def __getattr__(self, name):
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"gradient of {self.primal_type.__name__} has no field {name!r}") from None

    def __getitem__(self, k):
        return self.fields[k]

    def __setattr__(self, name, value):
        self.fields[name] = value
        bump()

    def __eq__(self, other):
        return isinstance(other, Tangent) and self.primal_type is other.primal_type and all(
            _tree_eq(a, b) for a, b in zip(self.fields.values(), other.fields.values())
        )

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self.fields.items())
        return f"Tangent[{self.primal_type.__name__}]({inner})"


def _short(v):
    if is_array(v):
        return f"{v.dtype}{list(v.shape)}"
    return repr(v)


def _tree_eq(a, b):
    if a is None or b is None:
        return a is b
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(bool(jnp.array_equal(x, y)) for x, y in zip(la, lb))


jax.tree_util.register_pytree_with_keys(
    Tangent,
    lambda t: ([(jax.tree_util.GetAttrKey(k), v) for k, v in t.fields.items()], (t.primal_type, tuple(t.fields))),
    lambda aux, ch: Tangent(aux[0], dict(zip(aux[1], ch))),
    lambda t: (list(t.fields.values()), (t.primal_type, tuple(t.fields))),
)
SAFE_NODES.add(Tangent)  # its fields change only through __setattr__, which bumps the structure version


def _rebuild(box: list, grads_by_leaf: list) -> tuple:
    """Mirror `walk(box)`: put each leaf's gradient where the leaf was, `Tangent` for layers."""
    it = iter(grads_by_leaf)
    memo: dict[int, Tangent | None] = {}

    def build(v, numbers):
        t = type(v)
        if t in _LAYER_TYPES:
            if id(v) in memo:
                return memo[id(v)]
            fields: dict[str, Any] = {}
            memo[id(v)] = tan = Tangent(t, fields)
            for name, e in v.__dict__.items():
                fields[name] = build(e, False) if is_visited(e) else None
            if all(g is None for g in fields.values()):  # no gradient reached it: Zygote's `nothing`
                memo[id(v)] = tan = None
            return tan
        if isinstance(v, (jax.Array, np.ndarray)) or (numbers and isinstance(v, _NUMBER)):
            return next(it)
        if v is None:
            return None
        if t is list:
            items = [build(e, numbers) for e in v]
            return None if all(g is None for g in items) else items
        if t is dict:
            res = {k: build(v[k], numbers) for k in sorted(v)}
            return None if all(g is None for g in res.values()) else {k: res[k] for k in v}
        if isinstance(v, tuple):
            items = [build(e, numbers) for e in v]
            if all(g is None for g in items):
                return None
            return t(*items) if hasattr(v, "_fields") else tuple(items)
        if isinstance(v, _NUMBER) or isinstance(v, _OPAQUE):
            return None
        sub, treedef = jax.tree_util.tree_flatten(v, is_leaf=lambda z: type(z) in _LAYER_TYPES)
        if treedef.num_leaves == 1 and treedef.num_nodes == 1 and sub and sub[0] is v:
            return None
        return treedef.unflatten([build(e, numbers) for e in sub])

    return tuple(build(v, True) for v in box)


# ----------------------------------------------------------------------------------------------
# The translation: a pure function of the differentiable values


class _Plan:
    """`fx(*primals) -> (y, state_writes)` plus how to map cotangents back."""

    def __init__(self, fx, primals, finish, written, ints=()):
        self.fx, self.primals, self.finish, self.written = fx, primals, finish, written
        self.ints = tuple(ints)  # leaf indices of the Python ints being differentiated (see _traced)

    def commit(self, values):
        for slot, v in zip(self.written, values):
            commit(slot, v)


def _make_fx(call, slot_groups, written):
    def fx(*xs):
        region = Region(differentiating=True)
        with region:
            for slots, x in zip(slot_groups, xs):
                for s in slots:
                    region.swap(s, x)
            y = call()
            written[:] = region.written.values()
            vals = [s.get() for s in written]
        return y, vals

    return fx


def _as_primal(v):
    if isinstance(v, _NUMBER) and not isinstance(v, (bool, np.bool_)):
        return jnp.asarray(v, dtype=jnp.result_type(float))
    return v


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _explicit_plan(f, args, name, static=frozenset()) -> _Plan:
    box = list(args)
    w = walk(box)
    diff = [
        i
        for i, (v, r) in enumerate(zip(w.leaves, w.roles))
        if r == PARAM
        and i not in static
        and (is_float_array(v) or (isinstance(v, _NUMBER) and not isinstance(v, (bool, np.bool_, complex))))
    ]
    if not diff:
        bad = [a for a in args if isinstance(a, (str, bytes)) or callable(a) and not is_layer(a)]
        if bad:
            raise TypeError(
                f"{name}: cannot differentiate with respect to {type(bad[0]).__name__} {bad[0]!r}; "
                "arguments must be numbers, float arrays, layers or containers of them"
            )
    written: list[Slot] = []
    fx = _make_fx(lambda: f(*box), [[w.slots[i]] for i in diff], written)
    primals = [_as_primal(w.leaves[i]) for i in diff]

    def finish(grads):
        by_leaf: list[Any] = [None] * len(w.leaves)
        for i, g in zip(diff, grads):
            by_leaf[i] = g
        return _rebuild(box, by_leaf)

    return _Plan(fx, primals, finish, written, [i for i in diff if _is_int(w.leaves[i])])


def _is_implicit(args) -> bool:
    return len(args) == 1 and isinstance(args[0], Params)


def _implicit_plan(f, ps: Params, name) -> _Plan:
    ps._resolve(f, name)
    written: list[Slot] = []
    fx = _make_fx(f, [e.slots for e in ps._entries], written)
    primals = [e.value() for e in ps._entries]
    return _Plan(fx, primals, lambda grads: Grads(ps, primals, list(grads)), written)


def _plan(f, args, name, static=frozenset()) -> _Plan:
    if not callable(f):
        raise TypeError(f"{name}(f, args...): f must be callable, got {type(f).__name__}")
    return _implicit_plan(f, args[0], name) if _is_implicit(args) else _explicit_plan(f, args, name, static)


def _used_inputs(back, n: int) -> list[bool]:
    """Which inputs the linear (tangent) program of `jax.vjp` reads: the others get `None`."""
    try:
        jaxpr = back.jaxpr
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
        needed = {v for v in jaxpr.outvars if type(v).__name__ == "Var"}
        for eqn in reversed(jaxpr.eqns):
            if any(o in needed for o in eqn.outvars):
                needed.update(v for v in eqn.invars if type(v).__name__ == "Var")
        used = [v in needed for v in jaxpr.invars]
        return used if len(used) == n else [True] * n
    except Exception:  # a jax internals change: fall back to dense zeros
        return [True] * n


def _check_scalar(y, name):
    if isinstance(y, (tuple, list, dict)):
        raise TypeError(
            f"{name}: f returned a {type(y).__name__}, but {name} needs a real scalar. To differentiate "
            "the first element and keep the rest, use withgradient."
        )
    shape = np.shape(y)
    if shape != ():
        raise TypeError(
            f"{name}: f returned an array of shape {shape}, but {name} needs a real scalar "
            "(a loss). Perhaps you wanted jacobian, or to sum/mean the output."
        )


def _differentiable_output(y) -> bool:
    return np.issubdtype(getattr(y, "dtype", None) or np.result_type(y), np.inexact)


def _run_vjp(plan: _Plan, first_only):
    fx = plan.fx
    if first_only:

        def fx(*xs):
            full, vals = plan.fx(*xs)
            return _first(full), (full, vals)

    y, back, aux = jax.vjp(fx, *plan.primals, has_aux=True)
    if first_only:
        full, aux = aux
    else:
        full = y
    return y, back, full, aux


def _traced(f, args, name, first_only):
    """`jax.vjp` of the plan for `f(*args)`. Python ints are differentiated as numbers, as Zygote does
    (`gradient(x -> 3x^2 + 2x + 1, 5) == (32,)`), which needs a float tracer in their place; when that
    makes `f` fail with a `TypeError` (an int used as an index or a size, where Zygote's rules give
    `nothing`), the ints are held static instead, and then made differentiable again one at a time where
    `f` allows it. (So `f` runs more than once on that path.)"""
    plan = _plan(f, args, name)
    try:
        return plan, _run_vjp(plan, first_only)
    except TypeError:
        if not plan.ints:
            raise
    static = frozenset(plan.ints)
    plan = _plan(f, args, name, static)
    res = _run_vjp(plan, first_only)  # still failing: not the ints' fault, raise that error
    for i in sorted(static):
        trial = static - {i}
        try:
            p2 = _plan(f, args, name, trial)
            r2 = _run_vjp(p2, first_only)
        except TypeError:
            continue
        static, plan, res = trial, p2, r2
    return plan, res


def _vjp(f, args, name, first_only=False, check=True):
    plan, (y, back, full, aux) = _traced(f, args, name, first_only)
    if check:
        _check_scalar(y, name)
    plan.commit(aux)
    return plan, y, back, full


def _grads(plan: _Plan, y, back, seed=None):
    n = len(plan.primals)
    if n == 0 or not _differentiable_output(y):
        return plan.finish([None] * n)
    used = _used_inputs(back, n)
    if not any(used):
        return plan.finish([None] * n)
    cts = back(jnp.ones_like(y) if seed is None else seed)
    return plan.finish([c if u else None for c, u in zip(cts, used)])


def _first(y):
    if isinstance(y, dict):
        return next(iter(y.values()))
    if isinstance(y, (tuple, list)):
        return y[0]
    return y


def _snapshot(f) -> dict:
    return {(where, var): id(v) for where, var, v, _ in _referenced(f)}


def _check_leaks(f, name, before: dict):
    """Raise if `f` stored a new tracer in a global or closure variable it references."""
    for where, var, v, _ in _referenced(f):
        if isinstance(v, jax.core.Tracer) and before.get((where, var)) != id(v):
            raise RuntimeError(
                f"{name}: f stored a traced value in {where} {var!r}; after {name} returns it is "
                "invalid. Return the value from f instead (use withgradient for extra outputs), or wrap "
                "the store in fluxjax.ignore."
            )


def _code_names(code):
    names = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.extend(_code_names(c))
    return names


def _referenced(f, depth=2):
    """(kind, name, value, Slot) for each global and closure cell `f` reads, following the plain
    functions it calls up to `depth` levels."""
    seen: set[int] = set()
    out = []

    def go(fn, d):
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        found = []
        for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                found.append(("closure variable", var, cell.cell_contents, Slot(cell, "cell_contents", "cell")))
            except ValueError:  # an empty cell
                continue
        g = fn.__globals__
        found += [("global", var, g[var], Slot(g, var, False)) for var in _code_names(code) if var in g]
        out.extend(found)
        for item in found:
            if d and isinstance(item[2], types.FunctionType):
                go(item[2], d - 1)

    go(f, depth)
    return out


# ----------------------------------------------------------------------------------------------
# Entry points


def gradient(f: Callable, *args) -> Any:
    """Zygote's `gradient`: one gradient per argument, `None` for no dependence.

    ```python
    >>> gradient(lambda x: 3 * x**2 + 2 * x + 1, 5.0)
    (Array(32., dtype=float32),)
    >>> gradient(lambda m: mse(m(x), y), model)[0].layers[0].weight.shape
    (3, 2)
    ```
    With `ps = params(model)` and a zero-argument `f`, returns `Grads` indexed by parameter arrays.
    """
    before = _snapshot(f)
    plan, y, back, _ = _vjp(f, args, "gradient")
    out = _grads(plan, y, back)
    _check_leaks(f, "gradient", before)
    return out


class WithGradient(NamedTuple):
    val: Any
    grad: Any


def withgradient(f: Callable, *args) -> WithGradient:
    """`(val, grad)`; when `f` returns a tuple or dict, its first element is differentiated and the
    whole value is returned (Zygote's auxiliary outputs): `loss, (g,) = withgradient(...)`."""
    before = _snapshot(f)
    plan, y, back, full = _vjp(f, args, "withgradient", first_only=True)
    out = _grads(plan, y, back)
    _check_leaks(f, "withgradient", before)
    return WithGradient(full, out)


def pullback(f: Callable, *args) -> tuple[Any, Callable]:
    """`y, back = pullback(f, args...)`; `back(dy)` returns the gradients as `gradient` does.
    A `None` inside `dy` is a zero cotangent; `back(None)` gives all `None`."""
    plan, y, back, _ = _vjp(f, args, "pullback", check=False)
    n = len(plan.primals)
    used = _used_inputs(back, n) if n else []

    def pb(dy):
        if dy is None or n == 0:
            return plan.finish([None] * n)
        dy = jax.tree_util.tree_map(
            lambda d, yy: jnp.zeros_like(yy) if d is None else jnp.asarray(d, jnp.result_type(yy)),
            dy, y, is_leaf=lambda z: z is None,
        )
        cts = back(dy)
        return plan.finish([c if u else None for c, u in zip(cts, used)])

    return y, pb


def _vec_jacobian(J, yshape, xshape):
    """Zygote's jacobian matrix: rows vec(y), columns vec(x), both column-major."""
    ny, nx = len(yshape), len(xshape)
    perm = tuple(reversed(range(ny))) + tuple(ny + k for k in reversed(range(nx)))
    J = jnp.transpose(J, perm)
    if nx == 0:
        return J.reshape(-1)
    return J.reshape(int(np.prod(yshape)), int(np.prod(xshape)))


def withjacobian(f: Callable, *args) -> WithGradient:
    """`(val, jacobians)`: for an array argument `a`, `J[k, i] = ∂vec(y)[k] / ∂vec(a)[i]`."""
    plan = _plan(f, args, "jacobian")
    if not plan.primals:
        y, _ = plan.fx()
        return WithGradient(y, plan.finish([]))
    y, aux = plan.fx(*plan.primals)
    plan.commit(aux)
    jac = jax.jacrev(lambda *xs: plan.fx(*xs)[0], argnums=tuple(range(len(plan.primals))))(*plan.primals)
    yshape = np.shape(y)
    mats = [_vec_jacobian(J, yshape, np.shape(x)) for J, x in zip(jac, plan.primals)]
    return WithGradient(y, plan.finish(mats))


def jacobian(f: Callable, *args) -> Any:
    """Zygote's `jacobian`: a tuple with one matrix per argument (rows: outputs, columns: inputs)."""
    return withjacobian(f, *args).grad


def hessian(f: Callable, x) -> Any:
    """Zygote's `hessian` of a scalar function of one argument, with linear (column-major)
    indexing: `hessian(lambda x: jnp.sum(x**3), jnp.array([[1., 2], [3, 4]]))` is
    `diag([6, 18, 12, 24])`. For a number `x` it is a number: `hessian(jnp.sin, jnp.pi / 2) == -1.0`."""
    plan = _plan(f, (x,), "hessian")
    if len(plan.primals) != 1:
        raise TypeError("hessian(f, x): x must be a single number or float array")
    x0 = plan.primals[0]
    H = jax.hessian(lambda z: plan.fx(z)[0])(x0)
    if np.ndim(x0) == 0:  # Zygote: a number for a number, `hessian(sin, pi/2) == -1.0`
        return jnp.reshape(H, ())
    return _vec_jacobian(H, np.shape(x0), np.shape(x0))


def diaghessian(f: Callable, *args) -> tuple:
    """The diagonal of the Hessian for each argument, shaped like the argument."""
    plan = _plan(f, args, "diaghessian")
    out = []
    for k, x in enumerate(plan.primals):

        def fk(z, k=k):
            xs = list(plan.primals)
            xs[k] = z
            return plan.fx(*xs)[0]

        H = _vec_jacobian(jax.hessian(fk)(x), np.shape(x), np.shape(x))
        d = jnp.diagonal(jnp.atleast_2d(H))
        out.append(d.reshape(tuple(reversed(np.shape(x)))).T if np.ndim(x) else d.reshape(()))
    return plan.finish(out)


# ----------------------------------------------------------------------------------------------
# Implicit parameters


class _Entry:
    __slots__ = ("slots", "array")

    def __init__(self, array, slots):
        self.array, self.slots = array, slots

    def value(self):
        return self.slots[0].get() if self.slots else self.array

    def set(self, value):
        self.array = value
        for s in self.slots:
            commit(s, value)


class Params:
    """An ordered, deduplicated collection of parameter arrays (Zygote's `Params`).

    Built by `params(model)`, which records where each array lives so that `gradient` can swap
    tracers in and `update_` can rebind the result; or from bare arrays, `Params([W, b])`, which are
    then looked up in the globals and closure of the function being differentiated.
    """

    def __init__(self, xs=()):
        self._entries: list[_Entry] = []
        self._sources: tuple = ()  # the models params() was built from, for train_'s compiled step
        for x in xs:
            self.add(x)

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
        return self

    push_ = add

    def delete(self, x) -> Params:
        self._entries = [e for e in self._entries if e.value() is not x]
        return self

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return (e.value() for e in self._entries)

    def __getitem__(self, i):
        return self._entries[i].value()

    def __contains__(self, x):
        return self._find(x) is not None

    def __eq__(self, other):
        return isinstance(other, Params) and len(self) == len(other) and all(a is b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self):
        return "Params([" + ", ".join(f"{x.dtype}{list(x.shape)}" for x in self) + "])"

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

    def _resolve(self, f, name):
        missing = {id(e.array): e for e in self._entries if not e.slots}
        if not missing:
            return
        for _, _, v, slot in _referenced(f):
            if id(v) in missing:
                missing[id(v)].slots.append(slot)
            elif is_layer(v) or isinstance(v, (list, dict, tuple)):
                root = [v]
                w = walk(root)
                for leaf, s in zip(w.leaves, w.slots):
                    if id(leaf) in missing:
                        if s.owner is root:  # inside a tuple held by the variable itself: rebind the variable
                            s = Slot(slot.owner, slot.key, slot.attr, slot.path + s.path)
                        missing[id(leaf)].slots.append(s)
        for e in missing.values():
            if not e.slots:
                raise ValueError(
                    f"{name}: parameter {e.array.dtype}{list(e.array.shape)} in Params was not found in the "
                    "globals or closure of f, so it cannot be traced. Keep it in a layer and use "
                    "params(model), or differentiate explicitly: gradient(lambda W: ..., W)."
                )


def params(*models) -> Params:
    """Every trainable float array in `models`, each once (tied weights once), in walk order."""
    root = list(models)
    w = walk(root)
    ps = Params()
    ps._sources = tuple(m for m in models if is_layer(m) or isinstance(m, (list, dict)))
    for leaf, slot, role in zip(w.leaves, w.slots, w.roles):
        if role != PARAM or not is_float_array(leaf):
            continue
        ps.add(leaf, () if slot.owner is root else (slot,))
    return ps


class Grads:
    """Zygote's `Grads`: gradients indexed by the parameter arrays, iterable in `Params` order.

    `gs[W]`, `gs.params`, `keys()`, `values()`, `items()`, `+ - * /` (with `None` as zero),
    `map(f)` and `copy()`.
    """

    def __init__(self, ps: Params, keys: list, grads: list):
        self.params = ps
        self._keys = keys
        self._grads = grads
        self._index = {id(k): i for i, k in enumerate(keys)}

    def _i(self, x):
        i = self._index.get(id(x))
        if i is None:
            for j, e in enumerate(self.params._entries):
                if e.value() is x:
                    return j
            raise KeyError("Grads: this array is not one of the parameters (did you update it since?)")
        return i

    def __getitem__(self, x):
        return self._grads[self._i(x)]

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
        return Grads(self.params, list(self._keys), list(self._grads))

    __copy__ = copy

    def map(self, f: Callable) -> Grads:
        return Grads(self.params, self._keys, [f(self._zero(i) if g is None else g) for i, g in enumerate(self._grads)])

    def _zero(self, i):
        return jnp.zeros_like(self._keys[i])

    def _binary(self, other, op):
        if isinstance(other, Grads):
            if other.params != self.params and [id(k) for k in other._keys] != [id(k) for k in self._keys]:
                raise ValueError("Grads: cannot combine gradients of different Params")
            out = []
            for i, (a, b) in enumerate(zip(self._grads, other._grads)):
                if a is None and b is None:
                    out.append(None)
                else:
                    out.append(op(self._zero(i) if a is None else a, self._zero(i) if b is None else b))
            return Grads(self.params, self._keys, out)
        return Grads(self.params, self._keys, [None if g is None else op(g, other) for g in self._grads])

    def __add__(self, o):
        return self._binary(o, jnp.add)

    def __sub__(self, o):
        return self._binary(o, jnp.subtract)

    def __mul__(self, o):
        return self._binary(o, jnp.multiply)

    __rmul__ = __mul__

    def __truediv__(self, o):
        return self._binary(o, jnp.divide)

    def __neg__(self):
        return Grads(self.params, self._keys, [None if g is None else -g for g in self._grads])

    def __repr__(self):
        return f"Grads(<{len(self)} arrays>)"


# ----------------------------------------------------------------------------------------------
# Rules and gradient control


def adjoint(fn: Callable) -> Callable:
    """Zygote's `@adjoint`: `fn(*args)` returns `(y, back)` and `back(dy)` the tuple of argument
    gradients (`None` for zero). Through `jax.custom_vjp`; the forward is re-run in the backward pass
    (XLA removes the duplicate under `jit`).

    Arguments that are not arrays or numbers (functions, Python ints used as sizes, strings, `None`)
    are static: they pass through unchanged and their entry in `back`'s tuple is ignored (Zygote's
    `nothing`). The gradient of a layer (or any pytree) argument may be given as a layer of the same
    type, a `Tangent`, a dict or a NamedTuple of its fields, with `None` or `0` for fields without one.

    ```python
    @adjoint
    def clipgrad(x):
        return x, lambda dy: (jnp.clip(dy, -1, 1),)

    @adjoint
    def hook(f, x):
        return x, lambda dx: (None, f(dx))
    ```
    """
    name = getattr(fn, "__name__", "rule")

    @functools.wraps(fn)
    def call(*args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        dyn = [i for i, v in enumerate(leaves) if _dynamic_leaf(v)]
        if not dyn:  # nothing to differentiate: no rule needed
            return fn(*args)[0]

        def rebuild(xs):
            ls = list(leaves)
            for i, x in zip(dyn, xs):
                ls[i] = x
            return treedef.unflatten(ls)

        @jax.custom_vjp
        def f(*xs):
            return fn(*rebuild(xs))[0]

        def fwd(*xs):
            return fn(*rebuild(xs))[0], xs

        def bwd(xs, dy):
            primal = rebuild(xs)
            gs = fn(*primal)[1](dy)
            if not isinstance(gs, tuple):
                gs = (gs,)
            if len(gs) != len(primal):
                raise ValueError(f"adjoint {name}: back returned {len(gs)} gradients for {len(primal)} arguments")
            cts: list = []
            for k, (a, g) in enumerate(zip(primal, gs)):
                sub = jax.tree_util.tree_structure(a)
                if g is None or not any(_dynamic_leaf(v) for v in jax.tree_util.tree_leaves(a)):
                    cts.extend([None] * sub.num_leaves)
                    continue
                what = f"argument {k + 1} ({_short(a) if is_array(a) else type(a).__name__})"
                like = _cotangent_like(g, a, what, name)
                try:
                    cts.extend(sub.flatten_up_to(like))
                except (ValueError, TypeError) as e:
                    raise ValueError(
                        f"adjoint {name}: the gradient for {what} does not match "
                        f"its structure: {e}"
                    ) from None
            return tuple(cts[i] for i in dyn)

        f.defvjp(fwd, bwd)
        return f(*(leaves[i] for i in dyn))

    return call


def _dynamic_leaf(v) -> bool:
    """A leaf `adjoint` passes to `jax.custom_vjp`: numeric arrays (tracers and PRNG keys included) and
    real or complex Python numbers. Everything else is static."""
    if is_array(v):
        return jax.dtypes.issubdtype(v.dtype, jax.dtypes.extended) or v.dtype.kind in "biufc"
    return isinstance(v, (float, complex, np.inexact)) and not isinstance(v, bool)


def _no_tangent(a) -> bool:
    """An integer, boolean or PRNG-key array: its cotangent is float0, JAX ignores what a rule gives."""
    return is_array(a) and (
        jax.dtypes.issubdtype(a.dtype, jax.dtypes.extended) or not np.issubdtype(a.dtype, np.inexact)
    )


def _zero_ct(a):
    """A zero cotangent for the leaf `a`; integer and key leaves keep their value (JAX ignores them)."""
    return a if _no_tangent(a) else jnp.zeros_like(a)


def _leaf_ct(g, a, where, name):
    if g is None or _no_tangent(a):
        return _zero_ct(a)  # an integer or key input has no cotangent (float0), whatever the rule says
    if not (is_array(g) or isinstance(g, (int, float, complex, np.number))) or isinstance(g, bool):
        raise ValueError(
            f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, which is an array "
            f"of shape {np.shape(a)}; return an array (or None for zero)"
        )
    g = jnp.asarray(g, jnp.result_type(a))
    shape = np.shape(a)
    if g.shape == shape:
        return g
    if g.ndim == 0:
        return jnp.broadcast_to(g, shape)
    if g.size == int(np.prod(shape)):
        return g.reshape(shape)  # ChainRules' ProjectTo reshapes an array of the right length
    raise ValueError(
        f"adjoint {name}: back returned a gradient of shape {g.shape} for {where}, which has shape {shape}"
    )


def _ct_field(g, field, where, name):
    if isinstance(g, Tangent):
        return g.fields.get(field)
    if isinstance(g, dict):
        return g.get(field)
    if isinstance(g, tuple) and hasattr(g, "_fields"):
        return getattr(g, field, None)
    if type(g) in _LAYER_TYPES:
        return g.__dict__.get(field)
    raise ValueError(
        f"adjoint {name}: back returned {_short(g)} as the gradient of {where}; a layer's gradient "
        "must be a layer of the same type, a Tangent, a dict or a NamedTuple of its fields (or None)"
    )


def _ct_names(g):
    if isinstance(g, Tangent):
        return set(g.fields)
    if isinstance(g, dict):
        return set(g)
    if isinstance(g, tuple) and hasattr(g, "_fields"):
        return set(g._fields)
    if type(g) in _LAYER_TYPES:
        return set(g.__dict__)
    return set()


def _cotangent_like(g, a, where, name):
    """The cotangent `g` a rule returned for the primal `a`, rebuilt with `a`'s pytree structure:
    zeros where `g` has `None` or `0`, `a`'s own values in its static (non-array) places."""
    if _dynamic_leaf(a):
        return _leaf_ct(g, a, where, name)
    if not jax.tree_util.tree_leaves(a) or not any(_dynamic_leaf(v) for v in jax.tree_util.tree_leaves(a)):
        return a  # static: a function, an int, a string, None, a layer without arrays
    if g is None or (isinstance(g, (int, float)) and not isinstance(g, bool) and g == 0):
        return jax.tree_util.tree_map(lambda v: _zero_ct(v) if _dynamic_leaf(v) else v, a)
    t = type(a)
    if t in _LAYER_TYPES:
        if type(g) in _LAYER_TYPES and type(g) is not t:
            raise ValueError(
                f"adjoint {name}: back returned a {type(g).__name__} as the gradient of {where}, a {t.__name__}"
            )
        if isinstance(g, Tangent) and not issubclass(t, g.primal_type) and not issubclass(g.primal_type, t):
            raise ValueError(f"adjoint {name}: back returned {g!r} as the gradient of {where}, a {t.__name__}")
        _ct_field(g, "", where, name)  # type check
        extra = _ct_names(g) - set(a.__dict__)
        if extra:
            raise ValueError(
                f"adjoint {name}: the gradient of {where} has field(s) {sorted(extra)} that {t.__name__} does not have"
            )
        out = object.__new__(t)
        for field, v in a.__dict__.items():
            out.__dict__[field] = _cotangent_like(_ct_field(g, field, where, name), v, f"{where}.{field}", name)
        return out
    if isinstance(a, (list, tuple)):
        if hasattr(a, "_fields") and isinstance(g, (dict, Tangent)) or (
            hasattr(a, "_fields") and isinstance(g, tuple) and hasattr(g, "_fields")
        ):
            extra = _ct_names(g) - set(a._fields)
            if extra:
                raise ValueError(f"adjoint {name}: the gradient of {where} has field(s) {sorted(extra)} it does not have")
            items = [_ct_field(g, fld, where, name) for fld in a._fields]
        elif isinstance(g, (list, tuple)) and len(g) == len(a):
            items = list(g)
        else:
            raise ValueError(
                f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, a {type(a).__name__} "
                f"of length {len(a)}; return a {type(a).__name__} of {len(a)} gradients (or None)"
            )
        items = [_cotangent_like(gi, ai, f"{where}[{i}]", name) for i, (gi, ai) in enumerate(zip(items, a))]
        return t(*items) if hasattr(a, "_fields") else t(items)
    if isinstance(a, dict):
        if not isinstance(g, (dict, Tangent)):
            raise ValueError(f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, a dict; return a dict")
        extra = _ct_names(g) - set(a)
        if extra:
            raise ValueError(f"adjoint {name}: the gradient of {where} has key(s) {sorted(extra, key=repr)} it does not have")
        return t({k: _cotangent_like(_ct_field(g, k, where, name), v, f"{where}[{k!r}]", name) for k, v in a.items()})
    if jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(a):  # another pytree type, given as itself
        return jax.tree_util.tree_map(lambda gi, ai: _leaf_ct(gi, ai, where, name) if _dynamic_leaf(ai) else ai, g, a)
    raise ValueError(
        f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, whose structure is "
        f"{jax.tree_util.tree_structure(a)}"
    )


def dropgrad(x: Any) -> Any:
    """`x` with no gradient flowing through it (`jax.lax.stop_gradient` on every array)."""
    return jax.tree_util.tree_map(lambda a: jax.lax.stop_gradient(a) if is_array(a) or isinstance(a, jax.core.Tracer) else a, x)


def ignore(f: Any) -> Any:
    """`ignore(lambda: expr)` runs `expr` and contributes no gradient (ChainRules' `ignore_derivatives`).
    A non-callable argument is `dropgrad`ged."""
    return dropgrad(f() if callable(f) and not is_array(f) else f)


ignore_derivatives = ignore


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _hook(f, x):
    return x


_hook.defvjp(lambda f, x: (x, None), lambda f, _, dy: (f(dy),))


def hook(f: Callable, x: Any) -> Any:
    """Identity on the forward pass; the gradient of `x` becomes `f(dx)` (Zygote's `hook`)."""
    return _hook(f, x)


def checkpointed(f: Callable, *xs) -> Any:
    """`f(*xs)` without storing intermediates: recomputed in the backward pass (`jax.checkpoint`)."""
    return jax.checkpoint(f)(*xs)


def forwarddiff(f: Callable, x: Any) -> Any:
    """`f(x)`, differentiated in forward mode (a Jacobian by `jax.jacfwd`). As in Zygote, gradients
    of variables `f` closes over are dropped."""
    x = jnp.asarray(x, jnp.result_type(float)) if not is_array(x) else x
    x0 = jax.lax.stop_gradient(x)
    y0 = jax.lax.stop_gradient(f(x0))
    J = jax.lax.stop_gradient(jax.jacfwd(f)(x0))
    dx = x - x0
    lin = jnp.tensordot(J, dx, axes=np.ndim(x)) if np.ndim(x) else J * dx
    return y0 + lin


class Buffer:
    """Zygote's `Buffer`: write-then-freeze array building inside `gradient`.

    `buf = Buffer(x)` (same shape and dtype as `x`) or `Buffer(x, 3, 4)` (that shape); `buf[i] = v`
    rebinds functionally (`.at[i].set`), `buf.copy()` (or `copy.copy(buf)`) freezes it and returns
    the array. Unlike Zygote the contents start as zeros, not uninitialised memory.
    """

    def __init__(self, x, *dims: int):
        x = jnp.asarray(x)
        self.data = jnp.zeros(dims if dims else x.shape, x.dtype)
        self.frozen = False

    def __setitem__(self, i, v):
        if self.frozen:
            raise RuntimeError("Buffer is frozen: it was copied; make a new Buffer to write again")
        self.data = self.data.at[i].set(v)

    def __getitem__(self, i):
        return self.data[i]

    def __len__(self):
        return len(self.data)

    @property
    def shape(self):
        return self.data.shape

    def append(self, v):
        """Zygote's `push!` for a vector buffer."""
        if self.frozen:
            raise RuntimeError("Buffer is frozen: it was copied; make a new Buffer to write again")
        self.data = jnp.concatenate([self.data, jnp.reshape(jnp.asarray(v, self.data.dtype), (1,))])

    def copy(self):
        self.frozen = True
        return self.data

    __copy__ = copy

    def __repr__(self):
        return f"Buffer({self.data.dtype}{list(self.data.shape)})"
