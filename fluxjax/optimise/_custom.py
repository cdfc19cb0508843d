"""Rules written as Optimisers.jl writes them: ``AbstractRule`` with ``init`` and ``apply_`` for one
array, and the functions ``init(rule, x)`` and ``apply_(rule, state, x, dx)`` (Optimisers.jl's
``init`` and ``apply!``) for any rule."""

from __future__ import annotations

import types
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ..core import keys
from ..core.layer import bump
from ..core.static_writes import mark_born, note_write
from ._rule_base import DeltaUpdate, PyTree, Rule, _is_none, check_hyper, keep_per_array, kind_of

__all__ = ["AbstractRule", "init", "apply_"]


class AbstractRule(Rule):
    """Optimisers.jl's ``AbstractRule``: a new rule is a class with an ``init`` and an ``apply_`` (its
    ``apply!``), each for one array. Its fields are its hyperparameters.

    ```python
    class DecayDescent(AbstractRule):
        def __init__(self, eta=0.1):
            self.eta = eta

        def init(self, x):                  # the state of one array
            return 1

        def apply_(self, state, x, dx):     # (next state, the step that is subtracted from x)
            return state + 1, self.eta / jnp.sqrt(state) * dx
    ```

    ``setup``, ``update_``, ``train_``, ``OptimiserChain`` and ``adjust`` take it like any rule, and it is
    an optax ``GradientTransformation`` (over any pytree; its optax updates are ``-dx``). Python numbers
    in a state become 0-d arrays, so a compiled step does not bake them in. ``adjust(rule, eta)`` and
    ``adjust_`` replace fields that exist (a compiled step then compiles again); ``init`` defaults to no
    state (``None``).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> AbstractRule:
        new = cls._create()
        mark_born(new)
        return new

    @classmethod
    def _check(cls, hp: dict) -> dict:
        return hp

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # The class's `init` is for one array; the optax `init` (any pytree) is Rule's, which maps it.
        if "init" in cls.__dict__:
            cls._init_one = cls.__dict__["init"]
            delattr(cls, "init")

    def _init_one(self, x: jax.Array) -> Any:
        return None

    def apply_(self, state: Any, x: jax.Array, dx: jax.Array) -> tuple[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} must define apply_(self, state, x, dx) -> (state, dx)")

    def __setattr__(self, name: str, value: Any) -> None:
        """`rule.eta = 0.5` changes what every compiled step with this rule computes: the structure
        version moves, so compiled calls walk their arguments again and key on the new fields."""
        note_write(self, name)
        object.__setattr__(self, name, value)
        bump()

    def _fields(self) -> dict:
        """The rule's hyperparameters: its fields, less what fluxjax keeps on it (`_hp`, the implicit
        form's memory of its states, `_fluxjax_...`)."""
        return {k: v for k, v in vars(self).items() if k != "_hp" and not k.startswith("_fluxjax")}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._fields().items())})"

    @property
    def hyperparameters(self) -> dict:
        return self._fields()

    def _value(self) -> Any:
        """The rule as a value (Optimisers.jl's rules compare by type and fields): its fields when they
        are hashable, else the rule itself (an array in a field: the rule only equals itself)."""
        key = (type(self), tuple(self._fields().items()))
        try:
            hash(key)
        except TypeError:
            return (type(self), id(self))
        return key

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._value() == other._value()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._value())

    def _reads(self) -> bool:
        return True  # its fields can be set, and its code reads what it likes

    def static_key(self) -> Any:
        """What a traced step depends on, computed afresh at each call: the fields by what they hold now
        (a list changed in place is seen), and the code of `init` and `apply_` with what it reads (the
        module's globals, and the class's own attributes, `self.K` included)."""
        t = type(self)
        fns = [f for f in (getattr(t, "init", None), getattr(t, "apply_", None)) if isinstance(f, types.FunctionType)]
        names = tuple(dict.fromkeys(n for f in fns for n in keys.code_names(f.__code__)))
        return (t, keys.static_key((self._fields(), fns, keys.ClassReads(t, names))))

    def __reduce__(self) -> Any:
        return (_rebuild_custom, (type(self), self._fields()))

    def adjust(self, eta: float | None = None, /, **kw: Any) -> AbstractRule:
        """A copy with the named fields replaced (``eta`` may be positional); names the rule does not
        have are ignored, as Optimisers.jl's ``adjust``. A field that holds a number, a pair of numbers
        or a flag takes only another (``check_hyper``, against the kind of the value it holds)."""
        kw = self._normalise_kw(eta, kw)
        fields = self._fields()
        new = {k: v for k, v in kw.items() if k in fields}
        for k, v in new.items():
            check_hyper(type(self).__name__, k, v, kind_of(fields[k]))
        return _rebuild_custom(type(self), {**fields, **new})

    def adjust_state(self, state: PyTree, eta: float | None = None, /, **kw: Any) -> PyTree:
        self._normalise_kw(eta, kw)
        return state  # the hyperparameters are the rule's fields: `adjust` changes them

    def _keep(self, skip: PyTree, old: PyTree, new: PyTree) -> PyTree:
        return keep_per_array(skip, old, new)  # the state of a tree is the tree of the arrays' states

    def _delta_init(self, params: PyTree) -> PyTree:
        treedef = jax.tree.structure(params, is_leaf=_is_none)
        per = [None if x is None else _arrays(self._init_one(jnp.asarray(x))) for x in treedef.flatten_up_to(params)]
        return treedef.unflatten(per)

    def _delta_update(self, dx: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> DeltaUpdate:
        treedef = jax.tree.structure(dx, is_leaf=_is_none)
        gs = treedef.flatten_up_to(dx)
        xs = [None] * len(gs) if params is None else treedef.flatten_up_to(params)
        ss = treedef.flatten_up_to(state)
        deltas, states = [], []
        for g, x, s in zip(gs, xs, ss, strict=True):
            if g is None:
                deltas.append(None)
                states.append(s)
                continue
            s, d = self.apply_(s, x, jnp.asarray(g))
            deltas.append(d)
            states.append(_arrays(s))
        return treedef.unflatten(deltas), treedef.unflatten(states), None


def _rebuild_custom(cls: type, fields: dict) -> AbstractRule:
    new = cls._create()
    for k, v in fields.items():
        object.__setattr__(new, k, v)
    return new


def _arrays(state: Any) -> Any:
    return jax.tree.map(lambda v: jnp.asarray(v) if isinstance(v, (int, float, complex)) else v, state)


def init(rule: optax.GradientTransformation, x: Any) -> Any:
    """Optimisers.jl's ``init(rule, x)``: the state of ``rule`` for the array (or pytree) ``x``."""
    return rule.init(x)


def apply_(rule: optax.GradientTransformation, state: Any, x: Any, dx: Any) -> tuple[Any, Any]:
    """Optimisers.jl's ``apply!(rule, state, x, dx)``: ``(new_state, Δ)``, the step that ``update``
    subtracts from ``x``. Pure: ``state`` is not changed."""
    if isinstance(rule, Rule):
        delta, new_state, _ = rule._delta_update(dx, state, x)
        return new_state, delta
    updates, new_state = optax.with_extra_args_support(rule).update(dx, state, x)
    return new_state, jax.tree.map(jnp.negative, updates)
