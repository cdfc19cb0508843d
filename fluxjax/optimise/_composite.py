"""``OptimiserChain``, ``AccumGrad`` and ``MixedPrecision``: rules that compose, delay or wrap other rules."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ..core import keys
from ..core.sharing import once, select
from ._rule_base import DeltaUpdate, PyTree, Rule, _is_none, _or, _zeros_where, check_fit, check_hyper, every, kind_of

__all__ = ["OptimiserChain", "AccumGrad", "MixedPrecision"]


def _check_transform(o: Any) -> None:
    if not (callable(getattr(o, "init", None)) and callable(getattr(o, "update", None))):
        raise TypeError(f"OptimiserChain: {o!r} is neither a rule nor an optax GradientTransformation")


class OptimiserChain(Rule):
    """``OptimiserChain(*opts)``: each rule transforms the previous ``Δ``, in order.

    ``OptimiserChain(WeightDecay(λ), Adam())`` feeds ``g + λx`` to Adam;
    ``OptimiserChain(ClipGrad(δ), Descent(η))`` clips before scaling. The empty chain is the
    identity, i.e. ``Descent(1)``. The state is the tuple of the rules' states, as Optimisers.jl.

    Any optax ``GradientTransformation`` may appear in the chain. It is spliced in as in
    ``optax.chain``: values between rules are in gradient convention (Optimisers.jl's ``Δ`` and the
    updates optax passes between ``clip``, ``scale_by_adam``, ...), so a foreign transform in the
    middle is applied as is; a foreign transform in the *last* place is taken to produce optax
    updates (as ``optax.sgd``/``optax.adam`` do) and its output is the chain's output. So
    ``OptimiserChain(ClipGrad(1.0), optax.sgd(0.1))`` equals ``OptimiserChain(ClipGrad(1.0),
    Descent(0.1))`` and ``OptimiserChain(optax.clip_by_global_norm(1.0), Adam())`` clips first.

    ``adjust`` acts on every rule (unknown names ignored per rule); ``adjust_state(eta=...)`` also
    sets ``learning_rate`` in a foreign ``optax.inject_hyperparams`` state.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(OptimiserChain(WeightDecay(0.1), Descent(0.1)), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.7811    , 0.5821]], dtype=float32)
    """

    _names = ("opts",)
    _kinds = {"opts": "any"}  # each checked by __new__

    def __new__(cls, *opts: Any) -> OptimiserChain:
        for o in opts:
            _check_transform(o)
            if isinstance(o, MixedPrecision):
                raise ValueError(
                    "MixedPrecision optimisers should wrap the entire OptimiserChain, not be inside it: "
                    "MixedPrecision(OptimiserChain(...))"
                )
        return cls._create(opts=tuple(opts))

    def __repr__(self) -> str:
        return f"OptimiserChain({', '.join(repr(o) for o in self.opts)})"

    def static_key(self) -> Any:
        return (OptimiserChain, tuple(o.static_key() if isinstance(o, Rule) else keys.static_key(o) for o in self.opts))

    def _reads(self) -> bool:
        return any(o._reads() if isinstance(o, Rule) else True for o in self.opts)

    def adjust(self, eta: float | None = None, /, **kw: Any) -> OptimiserChain:
        args = _adjust_args(eta, kw)
        return OptimiserChain(*(_adjusted(o, args, kw) for o in self.opts))

    def adjust_state(self, state: PyTree, eta: float | None = None, /, **kw: Any) -> PyTree:
        args = _adjust_args(eta, kw)
        return tuple(_adjusted_state(o, s, args, kw) for o, s in zip(self.opts, state, strict=True))

    def _kind(self) -> Any:
        return (OptimiserChain, tuple(o._kind() if isinstance(o, Rule) else type(o) for o in self.opts))

    def _state_for(self, state: PyTree) -> PyTree:
        return tuple(o._state_for(s) if isinstance(o, Rule) else s for o, s in zip(self.opts, state, strict=True))

    def _keep(self, skip: PyTree, old: PyTree, new: PyTree) -> PyTree:
        return tuple(_kept(o, skip, a, b) for o, a, b in zip(self.opts, old, new, strict=True))

    def _delta_init(self, params: PyTree) -> PyTree:
        return tuple(o._delta_init(params) if isinstance(o, Rule) else o.init(params) for o in self.opts)

    def _delta_update(self, dx: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> DeltaUpdate:
        if len(state) != len(self.opts):
            raise ValueError(f"OptimiserChain of {len(self.opts)} rules given a state of length {len(state)}")
        skip = None
        new_states = []
        last = len(self.opts) - 1
        for i, (o, s) in enumerate(zip(self.opts, state, strict=True)):
            if isinstance(o, Rule):
                d, s_new, sk = o._delta_update(dx, s, params, **extra)
            else:
                d, s_new = optax.with_extra_args_support(o).update(dx, s, params, **extra)
                sk = None
                if i == last:  # optax updates are added: back to Δ-convention, negated again at the end
                    d = jax.tree.map(jnp.negative, d)
            if skip is not None:  # an earlier AccumGrad is still accumulating: this rule is not run
                s_new = _kept(o, skip, s, s_new)
            skip = _or(skip, sk)
            new_states.append(s_new)
            dx = d
        if skip is not None:
            dx = _zeros_where(skip, dx)
        return dx, tuple(new_states), skip


def _kept(o: Any, skip: PyTree, old: PyTree, new: PyTree) -> PyTree:
    """The state of ``o`` after a step in which it was not run for the arrays where ``skip`` is True;
    a foreign optax transformation, which sees the whole tree, keeps its state when every array skips."""
    return o._keep(skip, old, new) if isinstance(o, Rule) else select(every(skip), old, new)


def _adjust_args(eta: Any, kw: dict) -> tuple:
    if eta is None and not kw:
        raise ValueError("adjust must be given something to act on!")
    return () if eta is None else (eta,)


def _adjusted(o: Any, args: tuple, kw: dict) -> Any:
    """A rule inside a composite, adjusted; a foreign optax transformation stays as it is."""
    return o.adjust(*args, **kw) if isinstance(o, Rule) else o


def _adjusted_state(o: Any, state: PyTree, args: tuple, kw: dict) -> PyTree:
    """The state of a rule inside a composite, adjusted; for a foreign optax transformation, only an
    ``inject_hyperparams`` learning rate."""
    if isinstance(o, Rule):
        return o.adjust_state(state, *args, **kw)
    return _adjust_foreign(state, args[0] if args else kw.get("eta"))


def _adjust_foreign(state: PyTree, eta: Any) -> PyTree:
    hp = getattr(state, "hyperparams", None)
    if eta is None or not isinstance(hp, dict) or "learning_rate" not in hp:
        return state
    old = jnp.asarray(hp["learning_rate"])
    eta = check_hyper("optax.inject_hyperparams", "learning_rate", eta, kind_of(old))
    return state._replace(hyperparams={**hp, "learning_rate": jnp.asarray(eta, old.dtype)})


class AccumGradState(NamedTuple):
    acc: Any  # per array: the running mean of the gradients of this cycle
    counter: Any  # per array: 1..n (int32), the array's step within its cycle
    hyper: dict  # {"n": int32}


class AccumGrad(Rule):
    """``AccumGrad(n)``: accumulate ``n`` gradients, then pass on their mean.

    Use as ``OptimiserChain(AccumGrad(n), rule)``: for ``n-1`` steps the update is zero and the rules
    after it keep their state (as Optimisers.jl, where they are not called); on the ``n``-th the mean
    ``Σg/n`` (accumulated as ``acc = g₁/n + g₂/n + …``) goes on. Each array counts its own
    gradients (one with a ``None`` gradient is not counted), as Optimisers.jl. Jit-compatible
    (``jnp.where``). Adjustable in state: ``n`` (a firing happens when ``counter >= n``).

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(OptimiserChain(AccumGrad(2), Descent(0.1)), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.9, 0.8]], dtype=float32)
    """

    _names = ("n",)
    _dynamic = ("n",)
    _kinds = {"n": "count"}
    State = AccumGradState

    def __new__(cls, n: int) -> AccumGrad:
        return cls._create(n=n)

    @classmethod
    def _check(cls, hp: dict) -> dict:
        hp = super()._check(hp)
        if hp.get("n", 1) < 1:
            raise ValueError("AccumGrad must accumulate at least one gradient")
        return hp

    def _make_hyper(self, params: PyTree) -> dict:
        return {"n": once(_int32, self._hp["n"])}

    def _delta_init(self, params: PyTree) -> PyTree:
        acc = jax.tree.map(lambda x: None if x is None else jnp.zeros_like(x), params, is_leaf=_is_none)
        counter = jax.tree.map(lambda x: None if x is None else once(_int32, 1), params, is_leaf=_is_none)
        return AccumGradState(acc, counter, self._make_hyper(params))

    def _delta_update(self, dx: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> DeltaUpdate:
        acc, counter, hyper = state
        n = hyper["n"]
        treedef = jax.tree.structure(dx, is_leaf=_is_none)
        trios = zip(*(treedef.flatten_up_to(t) for t in (dx, acc, counter)), strict=True)
        out = [(None, a, c, None) if g is None else self._step_one(n, g, a, c) for g, a, c in trios]
        delta, acc, counter, skip = (treedef.unflatten([o[i] for o in out]) for i in range(4))
        if all(o[3] is None for o in out):  # no gradient at all: nothing is counted, nothing skipped
            skip = None
        return delta, AccumGradState(acc, counter, hyper), skip

    def _step_one(self, n: jax.Array, g: Any, acc: jax.Array, counter: jax.Array) -> tuple:
        """(Δ, acc, counter, skip) of one array with gradient ``g``: its own clock (``_clock``)."""
        g = jnp.asarray(g)
        check_fit(self, "acc", acc, g)
        first, skip, counter = once(_clock, counter, n)
        g = g.astype(acc.dtype) / n.astype(acc.dtype)
        acc = jnp.where(first, g, acc + g)
        return jnp.where(skip, jnp.zeros_like(acc), acc), acc, counter, skip


def _int32(v: int) -> jax.Array:
    return jnp.asarray(v, jnp.int32)


def _clock(counter: jax.Array, n: jax.Array) -> tuple:
    """(first step of the cycle, not a firing step, the next counter) of an AccumGrad."""
    fire = counter >= n
    return counter == 1, jnp.logical_not(fire), jnp.where(fire, jnp.ones_like(counter), counter + 1)


class MixedPrecisionState(NamedTuple):
    xT: Any  # the parameters in precision T, which the wrapped rule updates
    state: Any  # the wrapped rule's state, for xT


class MixedPrecision(Rule):
    """``MixedPrecision([T=float32,] rule)``: ``rule`` updates a copy of the parameters kept in
    precision ``T``, and the parameters (e.g. float16 or bfloat16) are set to that copy, rounded.

    The state holds ``xT`` (the copy, ``T``) and ``state`` (the rule's state, for ``xT``). A step casts
    the gradient to ``T``, takes ``Δ`` from ``rule`` on ``xT``, sets ``xT ← xT - Δ`` and ``x ← T(xT)``
    rounded to ``x``'s type (Micikevicius et al. 2017, "Mixed Precision Training"). It must wrap the
    whole ``OptimiserChain``. ``adjust`` and ``adjust_state`` act on ``rule``. ``update_`` and ``update``
    set the parameters to the rounded copy; as a plain optax transformation its updates are
    ``round(xT) - x`` in ``x``'s type, so ``optax.apply_updates`` lands within a rounding of it.

    ```python
    >>> x = jnp.ones(2, jnp.float16)
    >>> opt_state = setup(MixedPrecision(Adam(1e-3)), x)
    >>> opt_state.state.xT.dtype
    dtype('float32')

    ```
    """

    _names = ("T", "rule")
    _needs_params = True
    State = MixedPrecisionState

    def __new__(cls, *args: Any) -> MixedPrecision:
        if len(args) == 1:
            T, rule = jnp.float32, args[0]
        elif len(args) == 2:
            T, rule = args
        else:
            raise TypeError(f"MixedPrecision([T,] rule) takes one or two arguments, got {len(args)}")
        return cls._create(T=T, rule=rule)

    @classmethod
    def _check(cls, hp: dict) -> dict:
        try:
            T = jnp.dtype(hp["T"])
        except TypeError:
            raise TypeError(f"MixedPrecision: T must be a float type such as jnp.float32, got {hp['T']!r}") from None
        if not jnp.issubdtype(T, jnp.floating):
            raise TypeError(f"MixedPrecision: T must be a float type such as jnp.float32, got {T}")
        _check_transform(hp["rule"])
        return {"T": T, "rule": hp["rule"]}

    def __repr__(self) -> str:
        return f"MixedPrecision({self.T}, {self.rule!r})"

    def static_key(self) -> Any:
        rule = self.rule
        return (MixedPrecision, self.T, rule.static_key() if isinstance(rule, Rule) else keys.static_key(rule))

    def _reads(self) -> bool:
        return self.rule._reads() if isinstance(self.rule, Rule) else True

    def adjust(self, eta: float | None = None, /, **kw: Any) -> MixedPrecision:
        return MixedPrecision(self.T, _adjusted(self.rule, _adjust_args(eta, kw), kw))

    def adjust_state(self, state: PyTree, eta: float | None = None, /, **kw: Any) -> PyTree:
        return state._replace(state=_adjusted_state(self.rule, state.state, _adjust_args(eta, kw), kw))

    def _kind(self) -> Any:
        rule = self.rule
        return (MixedPrecision, self.T, rule._kind() if isinstance(rule, Rule) else type(rule))

    def _state_for(self, state: PyTree) -> PyTree:
        return state._replace(state=self.rule._state_for(state.state)) if isinstance(self.rule, Rule) else state

    def _delta_init(self, params: PyTree) -> PyTree:
        if self.T.itemsize == 8 and not jax.config.jax_enable_x64:
            raise ValueError(
                f"MixedPrecision({self.T}, ...) keeps a 64-bit copy, but JAX has 64-bit floats only with "
                "x64 on: jax.config.update('jax_enable_x64', True), or set up inside `with jax.enable_x64(True):`"
            )
        xT = jax.tree.map(lambda x: None if x is None else jnp.asarray(x).astype(self.T), params, is_leaf=_is_none)
        rule = self.rule
        return MixedPrecisionState(xT, rule._delta_init(xT) if isinstance(rule, Rule) else rule.init(xT))

    def _delta_update(self, dx: PyTree, state: PyTree, params: PyTree = None, **extra: Any) -> DeltaUpdate:
        if params is None:
            raise ValueError("MixedPrecision needs the parameters: call update(grads, state, params)")
        xT, inner = state
        gT = jax.tree.map(lambda g: None if g is None else jnp.asarray(g).astype(self.T), dx, is_leaf=_is_none)
        treedef = jax.tree.structure(gT, is_leaf=_is_none)
        for g, a in zip(treedef.flatten_up_to(gT), treedef.flatten_up_to(xT), strict=True):
            if g is not None:
                check_fit(self, "xT", a, g)
        if isinstance(self.rule, Rule):
            d, inner, skip = self.rule._delta_update(gT, inner, xT, **extra)
        else:
            u, inner = optax.with_extra_args_support(self.rule).update(gT, inner, xT, **extra)
            d, skip = jax.tree.map(jnp.negative, u), None
        xT = jax.tree.map(lambda a, b: a if b is None else a - b, xT, d, is_leaf=_is_none)
        # Δ = x - xT for callers that subtract it (optax.apply_updates); update_ sets x from xT itself
        delta = jax.tree.map(
            lambda x, a, g: None if g is None else (jnp.asarray(x).astype(self.T) - a).astype(jnp.result_type(x)),
            params, xT, dx, is_leaf=_is_none,
        )
        return delta, MixedPrecisionState(xT, inner), skip

    def params_after(self, x: Any, new_state: MixedPrecisionState) -> Any:
        """The parameters after a step: the high-precision copy, rounded to the parameters' type."""
        return jax.tree.map(lambda a, p: a.astype(jnp.result_type(p)), new_state.xT, x)
