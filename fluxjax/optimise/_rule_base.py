"""Machinery shared by every Optimisers.jl rule: the ``Rule`` base class.

Sign convention
---------------
Optimisers.jl rules compute a step ``Δ`` that is *subtracted* (``x ← x - Δ``); a plain gradient is
already in this convention, and ``OptimiserChain`` feeds each rule's ``Δ`` to the next. optax
transformations return updates that are *added*. Every rule here is an
``optax.GradientTransformationExtraArgs`` whose public ``update`` returns ``-Δ`` (optax's
convention), while the internal ``_delta_update`` works in Optimisers.jl's Δ-convention and is what
``OptimiserChain`` composes, negating once at the end. A foreign optax transformation inside a
chain is applied as in ``optax.chain`` (gradient convention in the middle; in last place its output
is taken as the final optax update).

Types
-----
Hyperparameters are cast to the parameter's float type ``T`` and the state is kept in ``T``, as
Optimisers.jl (Float16 epsilons are at least 1e-7, its ``_eps``). bfloat16 parameters are the one
exception: they compute and keep state in float32 (``bfloat16(0.999) == 1``), and the step is cast
back to bfloat16. A complex gradient (or a custom rule's complex step) for a real parameter raises
``InexactError`` before anything is written (``check_real``), as Optimisers.jl's ``subtract!`` does;
a complex parameter takes complex and real gradients.

Each hyperparameter is checked against its field's kind when a rule is made or adjusted
(``check_hyper``, Optimisers.jl's ``_def_check_type``): a number, a pair of numbers such as ``beta``,
a flag such as ``couple``; a string is never read as a number.

Hyperparameters in the state
----------------------------
The numeric hyperparameters a rule reads while stepping (``eta``, ``beta``, ``epsilon``, ``rho``,
``lambda_``, ``delta``, ``omega``, ``ell``, ``gamma``, AccumGrad's ``n``) are written into the state
at ``init`` as 0-d arrays, in ``state.hyper`` (float32, or float64 when a float64 parameter is given
with x64 enabled). ``update`` reads them from there, so ``rule.adjust_state(state, eta=0.01)``
changes the learning rate of a compiled step without re-tracing. Structural options (``centred``,
``couple``, ``p``, ``throw``) live only on the rule. ``rule.adjust(...)`` returns a new rule (for
printing, for ``init`` of new parameters, and for the structural options); call both to mirror
Optimisers.jl's ``adjust``, which keeps the moments and changes the rule. On a ``setup`` state,
``adjust_`` and assigning ``leaf.rule = rule`` (a rule of the same kind) do both.

Schedules
---------
``eta`` may be an optax schedule, a function of the step count (``Adam(optax.cosine_decay_schedule(
0.01, 1000))``): step ``t`` (0 for the first update of a state) uses ``η_t = schedule(t)``, as optax's
``scale_by_learning_rate``. The state is then ``ScheduleState(count, state)``: the number of updates
so far (int32) around the rule's usual state; the schedule itself is part of the rule (a new schedule
compiles again). Each state counts its own updates: a per-array rule's leaf counts the steps that
array took; a state of a whole pytree (optax-style ``rule.init(tree)``) counts the updates of the tree,
as optax's ``scale_by_learning_rate``.

Per array
---------
As Optimisers.jl, the state of a pytree is one state per array, and an array whose gradient is
``None`` keeps its state (moments, ``βt``, RAdam's step ``t``, AccumGrad's counter) as it was, so
``rule.update`` on a pytree computes what ``setup``/``update_`` (one ``Leaf`` per array) compute. A
state that does not fit its array (set up for an array of another shape) raises ``DimensionMismatch``
when the step is traced, as Optimisers.jl's broadcast does, instead of broadcasting.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..copyto import InexactError
from ..core import keys
from ..core.sharing import once, select
from ..errors import DimensionMismatch

__all__ = ["Rule", "LeafState", "ScheduleState", "DeltaUpdate"]

PyTree = Any
# (Δ, new_state, skip): skip is None, or a tree of booleans, one per array with a gradient (None for
# the others), True where this step makes no update and the rules after this one must leave that
# array's state alone (AccumGrad between its firings).
DeltaUpdate = tuple[PyTree, PyTree, Any]

_ALIASES = {"lambd": "lambda_", "lambda": "lambda_", "centered": "centred"}


class LeafState(NamedTuple):
    """State of a stateless rule: only its hyperparameters."""

    hyper: dict


class ScheduleState(NamedTuple):
    """State of a rule whose ``eta`` is a schedule: ``η_t = schedule(count)`` at the next update."""

    count: jax.Array  # updates so far, int32
    state: Any  # the rule's usual state


def _is_none(v: Any) -> bool:
    return v is None


def _float_dtype(x: Any) -> Any:
    dt = jnp.result_type(x)
    return dt if jnp.issubdtype(dt, jnp.inexact) else jnp.result_type(float)


def _compute_dtype(dtype: Any) -> Any:
    """The type a rule computes and keeps its state in for parameters of ``dtype``.

    That is the parameter's own type, as Optimisers.jl, except bfloat16, which computes in float32:
    with 8 bits of mantissa ``bfloat16(0.999) == 1`` and Adam's bias correction divides by zero.
    """
    return jnp.dtype(jnp.float32) if jnp.dtype(dtype) == jnp.bfloat16 else jnp.dtype(dtype)


def _eps(eps: jax.Array, dtype: Any) -> jax.Array:
    """Optimisers.jl's ``_eps``: ``T(ϵ)``, but at least ``Float16(1e-7)`` for Float16 unless ϵ == 0."""
    eps = jnp.asarray(eps)  # (a number, when set in the state's dict by hand)
    if jnp.dtype(dtype) != jnp.float16:
        return eps.astype(dtype)
    e = eps.astype(dtype)
    return jnp.where(eps == 0, e, jnp.maximum(e, jnp.asarray(1e-7, dtype)))


def _hyper_dtype(params: PyTree) -> Any:
    dt = jnp.dtype(jnp.float32)
    for leaf in jax.tree.leaves(params):
        ldt = jnp.result_type(leaf)
        if jnp.issubdtype(ldt, jnp.floating):
            dt = jnp.promote_types(dt, ldt)
    return dt


def _for_state(x: Any) -> jax.Array:
    x = jnp.asarray(x)
    return x.astype(_compute_dtype(_float_dtype(x)))


def _scalar(v: Any, dtype: Any, name: Any = None) -> Any:
    """`v` (a number or a pair) as 0-d arrays of `dtype`; within a `sharing()` scope, one array for
    every leaf that holds hyperparameter `name` at this value."""
    if isinstance(v, tuple):
        return tuple(_scalar(u, dtype, (name, i)) for i, u in enumerate(v))
    return once(_constant, name, v, jnp.dtype(dtype))


def _constant(name: Any, v: Any, dtype: Any) -> jax.Array:
    return jnp.asarray(v, dtype)


def _cast(v: Any, dtype: Any) -> Any:
    """A hyperparameter in the compute dtype: an array, or a number set in the state's dict by hand."""
    if isinstance(v, tuple):
        return tuple(_cast(u, dtype) for u in v)
    return jnp.asarray(v, dtype)


def _rebuild(cls: type, hp: dict) -> Rule:
    return cls._create(**hp)


def check_hyper(rule: str, name: str, v: Any, kind: str) -> Any:
    """``v`` as hyperparameter ``name`` of ``rule``, a field of kind ``kind``, or a ``TypeError`` naming
    both, as Optimisers.jl's ``_def_check_type`` checks a value against the type of the field's default
    (at construction and in ``adjust``, so nothing wrong is stored). ``"number"``: a real number, kept as
    ``float(v)`` (not a string, a complex number, a pair or an array of several); ``"rate"``: a number or
    a schedule (a function of the step count); ``"pair"``: two numbers, kept as a tuple of floats;
    ``"flag"``: True or False; ``"count"``: a whole number, kept as an ``int``; ``"any"``: anything."""
    if kind == "any" or (kind == "rate" and callable(v)):
        return v
    if kind == "pair":
        if isinstance(v, (tuple, list)) and len(v) == 2:
            return tuple(check_hyper(rule, f"{name}[{i}]", u, "number") for i, u in enumerate(v))
        raise TypeError(f"{rule}: {name} must be a pair of numbers, got {_what(v)}; pass both: {name}=(a, b)")
    if kind == "flag":
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        raise TypeError(f"{rule}: {name} must be True or False, got {_what(v)}")
    if not _is_real(v) or kind == "count" and (isinstance(v, (bool, np.bool_)) or not float(v).is_integer()):
        raise TypeError(f"{rule}: {name} must be {_EXPECTED[kind]}, got {_what(v)}{_hint(v)}")
    return int(v) if kind == "count" else float(v)


def kind_of(value: Any) -> str:
    """The kind of field (for ``check_hyper``) that holds ``value``: a custom rule's field, a plain
    optax state's hyperparameter, whose value now stands for the default Optimisers.jl checks against."""
    if isinstance(value, (bool, np.bool_)):
        return "flag"
    if _is_real(value):
        return "number"
    if isinstance(value, tuple) and len(value) == 2 and all(kind_of(u) == "number" for u in value):
        return "pair"
    return "any"


_EXPECTED = {
    "number": "a real number (a float or an int)",
    "rate": "a real number (a float or an int) or a schedule (a function of the step count)",
    "count": "a whole number (an int)",
}


def _is_real(v: Any) -> bool:
    """A real number: a Python or NumPy scalar (a bool too, as Julia's ``Bool <: Real``) or a 0-d array."""
    if isinstance(v, numbers.Real):
        return True
    dt = getattr(v, "dtype", None)
    return (dt is not None and getattr(v, "ndim", None) == 0
            and (dt == jnp.bool_ or jnp.issubdtype(dt, jnp.integer) or jnp.issubdtype(dt, jnp.floating)))


def _what(v: Any) -> str:
    """``v`` and its Python type, for a message."""
    if getattr(v, "ndim", 0):
        return f"an array of shape {tuple(v.shape)}"
    name = type(v).__name__
    return "None" if v is None else f"{v!r} ({'an' if name[0] in 'aeiou' else 'a'} {name})"


def _hint(v: Any) -> str:
    """What to do instead, for a value that is not a number (or not a whole one) where one belongs."""
    if _is_real(v):
        return ""
    if isinstance(v, (str, bytes)):
        return "; a string is not read as a number: pass the number itself"
    if isinstance(v, numbers.Complex) or hasattr(v, "dtype") and jnp.iscomplexobj(v):
        return "; cannot convert complex to real: pass a real number"
    if isinstance(v, (tuple, list)):
        return f"; it takes one number, not a {type(v).__name__}"
    if getattr(v, "ndim", 0):
        return "; it takes one number, not an array"
    if callable(v):
        return "; it cannot be a schedule"
    return ""


IMPLICIT_MEMORY = "_fluxjax_implicit_states"  # a rule's memory of its implicit states (optimise.implicit)


class Rule(optax.GradientTransformationExtraArgs):
    """Base class of the Optimisers.jl rules. An instance *is* an optax ``GradientTransformation``.

    Subclasses declare ``_names`` (hyperparameters in Optimisers.jl's field order), ``_dynamic``
    (those stored in ``state.hyper``), ``_kinds`` (the fields that are not numbers: ``"pair"``,
    ``"flag"``, ``"count"`` or ``"any"``, for ``check_hyper``), ``State`` (a NamedTuple: per-array
    fields, then ``hyper``), ``_not_shaped`` (per-array fields not of the array's shape), and implement
    ``_init_leaf`` and ``_step_leaf``.
    """

    __fluxjax_static__: ClassVar[bool] = True  # fluxjax.jit keys on static_key(), not on identity
    _names: ClassVar[tuple[str, ...]] = ()
    _dynamic: ClassVar[tuple[str, ...]] = ()
    _not_shaped: ClassVar[tuple[str, ...]] = ()
    _kinds: ClassVar[dict[str, str]] = {}  # a field's kind for `check_hyper`, where it is not "number"
    _needs_params: ClassVar[bool] = False
    State: ClassVar[type] = LeafState

    # -- construction -------------------------------------------------------------------------
    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # A rule is static configuration: a pytree node with no children (aux data = the rule), so
        # a state tree holding rules can pass through jax.jit / tree_map.
        jax.tree_util.register_pytree_node(cls, lambda r: ((), r), lambda r, _: r)

    @classmethod
    def _check(cls, hp: dict) -> dict:
        """Validate and normalise hyperparameters, each against its field's kind (``_kinds``, a number
        unless said): ``check_hyper``. A learning rate ``eta`` that the state holds may be a schedule."""
        out = {}
        for k, v in hp.items():
            kind = cls._kinds.get(k, "rate" if k == "eta" and "eta" in cls._dynamic else "number")
            if kind == "number" and k == "eta" and callable(v):
                raise TypeError(f"{cls.__name__}: eta is not a learning rate here; it cannot be a schedule")
            out[k] = check_hyper(cls.__name__, k, v, kind)
        if "eta" in out and not callable(out["eta"]) and out["eta"] < 0:
            raise ValueError(f"{cls.__name__}: the learning rate cannot be negative, got eta={out['eta']}")
        return out

    @classmethod
    def _create(cls, **hp: Any) -> Rule:
        hp = cls._check(hp)
        box: list[Rule] = []

        def init(params: PyTree) -> PyTree:
            return box[0].init(params)

        def update(updates: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> Any:
            return box[0].update(updates, state, params, **extra)

        self = tuple.__new__(cls, (init, update))
        box.append(self)
        object.__setattr__(self, "_hp", hp)
        return self

    def __getattr__(self, name: str) -> Any:
        hp = self.__dict__.get("_hp", {})
        if name in hp:
            return hp[name]
        if name == "lambd" and "lambda_" in hp:
            return hp["lambda_"]
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use .adjust(...) for a changed copy")

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), dict(self._hp)))

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._hp == other._hp  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._hp.items())))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._hp.items())
        return f"{type(self).__name__}({args})"

    @property
    def hyperparameters(self) -> dict:
        """The rule's hyperparameters by Optimisers.jl field name (``lambda_`` for ``lambda``)."""
        return dict(self._hp)

    def static_key(self) -> Any:
        """Hashable key of everything that changes the traced computation (not the values in state),
        computed afresh at each call: a callable hyperparameter (a schedule) by its code and what it
        reads now (`core.keys.static_key`), so a schedule whose global changed is traced again."""
        return (type(self), tuple((k, keys.static_key(v) if callable(v) else v) for k, v in self._hp.items()
                                  if k not in self._dynamic or callable(v)))

    def __fluxjax_key__(self) -> Any:
        """A compiled call that reads the rule depends on `static_key()`, recomputed by its reuse check
        when the rule holds something that can change (`_reads`), else `keys.Fixed`."""
        key = self.static_key()
        return key if self._reads() else keys.Fixed(key)

    def _reads(self) -> bool:
        """Whether the rule holds code that reads what can change: a callable hyperparameter (a schedule)."""
        return any(callable(v) for v in self._hp.values())

    def held_layers(self) -> list:
        """The optimiser states this rule keeps for the implicit form `update_(rule, ps, gs)`
        (`optimise.implicit.ImplicitState`s, in its memory `IMPLICIT_MEMORY`): `fluxjax.jit` walks them
        when its function reads the rule, so that their arrays are inputs of the program, not constants."""
        memory = self.__dict__.get(IMPLICIT_MEMORY)
        return list({id(hit[1]): hit[1] for hit in memory.values()}.values()) if memory else []

    # -- adjust ------------------------------------------------------------------------------
    @classmethod
    def _normalise_kw(cls, eta: Any, kw: dict) -> dict:
        kw = {_ALIASES.get(k, k): v for k, v in kw.items()}
        if eta is not None:
            if "eta" in kw:
                raise TypeError("adjust: eta given both positionally and as a keyword")
            kw["eta"] = eta
        if not kw:
            raise ValueError("adjust must be given something to act on!")
        return kw

    def adjust(self, eta: float | None = None, /, **kw: Any) -> Rule:
        """A copy with changed hyperparameters, like ``Optimisers.adjust(rule; kw...)``.

        Unknown names are ignored (so one call can target every rule of a chain); ``eta`` may be
        positional. The state is not touched: pair with :meth:`adjust_state`.
        """
        kw = self._normalise_kw(eta, kw)
        new = {k: kw.get(k, v) for k, v in self._hp.items()}
        return type(self)._create(**new)

    def adjust_state(self, state: PyTree, eta: float | None = None, /, **kw: Any) -> PyTree:
        """``state`` with the hyperparameters in ``state.hyper`` replaced; moments are kept.

        Values keep their stored dtype, so a jitted step sees the same types and does not re-trace.
        """
        kw = self._normalise_kw(eta, kw)
        checked = type(self)._check({k: v for k, v in kw.items() if k in self._dynamic})
        if not checked:
            return state
        count = state.count if isinstance(state, ScheduleState) else None
        inner = state.state if isinstance(state, ScheduleState) else state
        hyper = dict(inner.hyper)
        for k, v in checked.items():
            if callable(v):  # a schedule: the rule holds it, the state counts from 0 unless counting already
                count = once(_zero_count) if count is None else count
                continue
            if k == "eta":
                count = None  # a number after a schedule: no more counting
            old = hyper[k]
            dt = (old[0] if isinstance(old, tuple) else old).dtype
            hyper[k] = _scalar(v, dt, k)
        inner = inner._replace(hyper=hyper)
        return inner if count is None else ScheduleState(count, inner)

    # -- a rule assigned to a state (Leaf.rule = ...) ---------------------------------------------
    def _kind(self) -> Any:
        """What the state's layout depends on: rules of one kind keep states of one layout, and differ
        only in the hyperparameters in ``state.hyper`` (and in options the step reads off the rule)."""
        return type(self)

    def _state_for(self, state: PyTree) -> PyTree:
        """``state``, kept by a rule of this kind, with this rule's hyperparameters in ``state.hyper``
        (moments kept): the state of this rule, as if ``adjust_state`` had been given them all."""
        kw = {k: self._hp[k] for k in self._dynamic}
        return self.adjust_state(state, **kw) if kw else state

    # -- an AccumGrad before this rule in a chain ------------------------------------------------
    def _keep(self, skip: PyTree, old: PyTree, new: PyTree) -> PyTree:
        """``new``, but ``old``'s state for the arrays where ``skip`` is True: this rule is not run for
        them (an AccumGrad before it in a chain is accumulating). ``skip`` holds a boolean per array
        with a gradient and ``None`` elsewhere; a count of the whole tree (a schedule's) is kept when
        every array skips."""
        if isinstance(new, ScheduleState):
            return ScheduleState(select(every(skip), old.count, new.count), self._keep(skip, old.state, new.state))
        fields = new._fields[: self._n_leaf]
        return new._replace(**{f: keep_per_array(skip, getattr(old, f), getattr(new, f)) for f in fields})

    # -- optax interface ---------------------------------------------------------------------
    def init(self, params: PyTree) -> PyTree:
        """Optax ``init``: the state for ``params`` (one array, or any pytree of arrays)."""
        return self._delta_init(params)

    def update(self, updates: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> Any:
        """Optax ``update``: takes gradients, returns ``(-Δ, new_state)`` so that
        ``optax.apply_updates(params, updates)`` computes Optimisers.jl's ``x - Δ``."""
        delta, new_state, _ = self._delta_update(updates, state, params, **extra)
        return jax.tree.map(jnp.negative, delta), new_state

    # -- Δ-convention core (overridden by composites) --------------------------------------------
    def _make_hyper(self, params: PyTree) -> dict:
        dt = _hyper_dtype(params)
        hyper = {}
        for k in self._dynamic:
            v = self._hp[k]
            # a schedule: its first value stands in the state (the steps call the schedule)
            hyper[k] = once(_scheduled, v, once(_zero_count), jnp.dtype(dt)) if callable(v) else _scalar(v, dt, k)
        return hyper

    def _schedule(self) -> Any:
        eta = self._hp.get("eta")
        return eta if callable(eta) else None

    def _init_leaf(self, x: jax.Array) -> tuple:
        return ()

    def _step_leaf(self, h: dict, g: jax.Array, x: jax.Array | None, *s: Any) -> tuple:
        raise NotImplementedError

    @property
    def _n_leaf(self) -> int:
        return len(self.State._fields) - 1

    def _delta_init(self, params: PyTree) -> PyTree:
        n = self._n_leaf
        treedef = jax.tree.structure(params, is_leaf=_is_none)
        leaves = treedef.flatten_up_to(params)
        per = [(None,) * n if x is None else self._init_leaf(_for_state(x)) for x in leaves]
        fields = tuple(treedef.unflatten([p[i] for p in per]) for i in range(n))
        state = self.State(*fields, self._make_hyper(params))
        return state if self._schedule() is None else ScheduleState(once(_zero_count), state)

    def _delta_update(self, dx: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> DeltaUpdate:
        sched, count = self._schedule(), None
        if sched is not None:
            if not isinstance(state, ScheduleState):
                raise TypeError(f"{type(self).__name__} with a schedule as eta needs its state from init (a ScheduleState)")
            count, state = state
        n = self._n_leaf
        leaf_fields = tuple(state[:n])
        hyper = state.hyper
        if sched is not None:  # η_t = schedule(t), for this step only; the stored hyper stays as it is
            hyper = {**hyper, "eta": once(_scheduled, sched, count, jnp.result_type(hyper["eta"]))}
        if params is None and self._needs_params:
            raise ValueError(f"{type(self).__name__} needs the parameters: call update(grads, state, params)")
        treedef = jax.tree.structure(dx, is_leaf=_is_none)
        gs = treedef.flatten_up_to(dx)
        xs = [None] * len(gs) if params is None else treedef.flatten_up_to(params)
        fs = [treedef.flatten_up_to(f) for f in leaf_fields]
        cache: dict = {}
        outs = []
        for i, (g, x) in enumerate(zip(gs, xs, strict=True)):
            old = tuple(f[i] for f in fs)
            if g is None:
                outs.append((None, *old))
                continue
            g = jnp.asarray(g)
            for name, s in zip(self.State._fields, old):
                if name not in self._not_shaped:
                    check_fit(self, name, s, g)
            P = _float_dtype(g if x is None else x)
            T = _compute_dtype(P)
            if T not in cache:
                cache[T] = h = {k: _cast(v, T) for k, v in hyper.items()}
                if "epsilon" in hyper:  # rules use _eps(T, ϵ); AdamW uses T(ϵ)
                    h["epsilon_raw"], h["epsilon"] = h["epsilon"], _eps(hyper["epsilon"], T)
            res = self._step_leaf(cache[T], g.astype(T), None if x is None else jnp.asarray(x), *old)
            outs.append((res[0].astype(P), *res[1:]))
        delta = treedef.unflatten([o[0] for o in outs])
        new_fields = [treedef.unflatten([o[i + 1] for o in outs]) for i in range(n)]
        new_state = self.State(*new_fields, state.hyper)
        if sched is not None:
            new_state = ScheduleState(once(_next_count, count), new_state)
        return delta, new_state, None


def _abs2(g: jax.Array) -> jax.Array:
    """Optimisers.jl's ``abs2``: ``g·g`` for real ``g``, ``|g|² = re² + im²`` (real) for complex ``g``."""
    return jnp.real(g * jnp.conj(g)) if jnp.iscomplexobj(g) else g * g


def _mul_abs2(c: Any, g: jax.Array) -> jax.Array:
    """``c·abs2(g)``, computed as ``c·g·g`` (in that order) for real ``g``."""
    return c * _abs2(g) if jnp.iscomplexobj(g) else c * g * g


def _zero_count() -> jax.Array:
    return jnp.zeros((), jnp.int32)


def _next_count(count: jax.Array) -> jax.Array:
    return count + 1


def _scheduled(schedule: Any, count: jax.Array, dtype: Any) -> jax.Array:
    return jnp.asarray(schedule(count), dtype)


def check_fit(rule: Any, name: str, s: Any, g: jax.Array) -> None:
    """``DimensionMismatch`` unless ``s``, the state ``name`` that ``rule`` keeps for one array, has the
    shape of the array's gradient ``g`` (Optimisers.jl's broadcast raises it; JAX's would broadcast)."""
    if s is not None and jnp.shape(s) != jnp.shape(g):
        raise DimensionMismatch(
            f"{rule!r}: its state {name} has shape {tuple(jnp.shape(s))}, but the array it updates has shape "
            f"{tuple(jnp.shape(g))}: the optimiser state was set up for another array. Set it up again for "
            "this model: opt_state = setup(rule, model) (or state = rule.init(params))"
        )


_REAL_GRADIENT = "pass jnp.real(g) if only the real part is meant, or make the parameter complex (x.astype(jnp.complex64))"


def check_real(fn: str, what: str, x: Any, v: Any, fix: str = _REAL_GRADIENT) -> None:
    """``InexactError`` when ``v`` (``what``: a gradient, or a rule's step) is complex and ``x``, the array
    it updates, is real: Optimisers.jl's ``subtract!`` throws it, and keeping the real part would be a
    silent wrong answer. It reads dtypes only, so it raises while tracing too, before anything is written."""
    if _complex(v) and not _complex(x):
        raise InexactError(
            f"{fn}: {what} is {getattr(v, 'dtype', 'complex')}, but the array it updates is {x.dtype}: a real array "
            "cannot take a complex step exactly (Optimisers.jl's subtract! throws InexactError), and keeping its real "
            f"part would be a silent wrong answer; nothing was updated. To go on, {fix}"
        )


def _complex(v: Any) -> bool:
    dt = getattr(v, "dtype", None)
    return isinstance(v, complex) if dt is None else dt.kind == "c"


def keep_per_array(skip: PyTree, old: PyTree, new: PyTree) -> PyTree:
    """``new``, a tree with one entry per array (of any structure: a state), with ``old``'s entry where
    ``skip`` (a tree of booleans and ``None``s, one per array) is True."""
    treedef = jax.tree.structure(skip, is_leaf=_is_none)
    trios = zip(treedef.flatten_up_to(skip), treedef.flatten_up_to(old), treedef.flatten_up_to(new), strict=True)
    return treedef.unflatten([b if p is None else select(p, a, b) for p, a, b in trios])


def every(skip: PyTree) -> jax.Array:
    """True when every array skips (``skip`` holds at least one boolean); one array stays itself."""
    flags = list({id(p): p for p in jax.tree.leaves(skip)}.values())
    out = flags[0]
    for p in flags[1:]:
        out = once(jnp.logical_and, out, p)
    return out


def _zeros_where(skip: PyTree, tree: PyTree) -> PyTree:
    """``tree`` (one array per array of ``skip``'s tree) with zeros where ``skip`` is True."""
    return jax.tree.map(
        lambda p, v: v if p is None or v is None else jnp.where(p, jnp.zeros_like(v), v), skip, tree, is_leaf=_is_none
    )


def _or(a: Any, b: Any) -> Any:
    """``a | b`` array by array, for two ``skip`` trees (or ``None``: no AccumGrad)."""
    if a is None:
        return b
    if b is None:
        return a
    return jax.tree.map(
        lambda p, q: q if p is None else p if q is None else once(jnp.logical_or, p, q), a, b, is_leaf=_is_none
    )


def _pop_lambda(cls_name: str, lambda_: Any, lambd: Any, kw: dict, default: float) -> float:
    vals = [v for v in (lambda_, lambd, kw.pop("lambda", None)) if v is not None]
    if kw:
        raise TypeError(f"{cls_name}() got unexpected keyword arguments {sorted(kw)}")
    if len(vals) > 1:
        raise TypeError(f"{cls_name}(): give lambda_ (alias lambd, lambda) only once")
    return vals[0] if vals else default


def _warn_gamma() -> None:
    warnings.warn(
        "The strength of WeightDecay is now field lambda_, not gamma", DeprecationWarning, stacklevel=3
    )

