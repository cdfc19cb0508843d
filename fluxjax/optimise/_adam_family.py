"""Optimisers.jl's Adam family: Adam, AdamW, RAdam, AdaMax, OAdam, AMSGrad, NAdam, AdaBelief, Lion.

Notation as Optimisers.jl v0.4.8: ``m``, ``v`` the first and second moments (start at 0 unless
said), updated first each step (``m ← β₁m + (1-β₁)g``, ``v ← β₂v + (1-β₂)g²``); ``βt`` the running
product ``βᵗ``, stored per array in the parameter's type and multiplied by ``β`` after each step,
so bias corrections match Optimisers.jl bit for bit. ``Δ`` is subtracted: ``x ← x - Δ``. A square
``g²`` is Optimisers.jl's ``abs2(g)``: ``|g|²`` for complex parameters.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..core.sharing import once
from ._rule_base import Rule, _abs2, _pop_lambda

__all__ = ["Adam", "AdamW", "RAdam", "AdaMax", "OAdam", "AMSGrad", "NAdam", "AdaBelief", "Lion"]

Pair = tuple[float, float]


class AdamState(NamedTuple):
    mt: Any
    vt: Any
    beta_t: Any  # per array: [β₁ᵗ, β₂ᵗ], one array of shape (2,) in the parameter's type
    hyper: dict


def _moments(h: dict, g: jax.Array, mt: jax.Array, vt: jax.Array) -> tuple[jax.Array, jax.Array]:
    b1, b2 = h["beta"]
    return b1 * mt + (1 - b1) * g, b2 * vt + (1 - b2) * _abs2(g)


def _next_bt(h: dict, bt: jax.Array) -> jax.Array:
    # Optimisers.jl keeps βt as a tuple; one array of two holds the same numbers in one buffer, which
    # halves what a compiled step passes in and out for it. Leaves stepped together share it (`once`).
    return once(_times_beta, bt, *h["beta"])


def _times_beta(bt: jax.Array, b1: jax.Array, b2: jax.Array) -> jax.Array:
    return bt * jnp.stack([b1, b2])


def _initial_bt(b1: float, b2: float, dtype: Any) -> jax.Array:
    return jnp.asarray([b1, b2], dtype)


class _AdamLike(Rule):
    _names = ("eta", "beta", "epsilon")
    _dynamic = ("eta", "beta", "epsilon")
    _kinds = {"beta": "pair"}
    _not_shaped = ("beta_t", "t")
    State = AdamState

    def _init_leaf(self, x: jax.Array) -> tuple:
        b1, b2 = self._hp["beta"]
        return jnp.zeros_like(x), jnp.zeros_like(x), once(_initial_bt, b1, b2, x.dtype)


class Adam(_AdamLike):
    """``Adam(eta=0.001, beta=(0.9, 0.999), epsilon=1e-8)``.

    ``Δ = η·(m/(1-βt₁)) / (√(v/(1-βt₂)) + ϵ)`` — ϵ outside the root, after bias correction (as
    PyTorch and ``optax.adam``). Adjustable in state: ``eta``, ``beta``, ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Adam(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8000, 0.8000]], dtype=float32)
    """

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-8) -> Adam:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any, vt: Any, bt: jax.Array) -> tuple:
        mt, vt = _moments(h, g, mt, vt)
        delta = mt / (1 - bt[0]) / (jnp.sqrt(vt / (1 - bt[1])) + h["epsilon"]) * h["eta"]
        return delta, mt, vt, _next_bt(h, bt)


class AdamW(_AdamLike):
    """``AdamW(eta=0.001, beta=(0.9, 0.999), lambda_=0.0, epsilon=1e-8, *, couple=True)``.

    ``a = m̂/(√v̂ + ϵ)`` (Adam with η = 1). ``couple=True`` (default, PyTorch's and
    ``optax.adamw``'s form): ``Δ = η·(a + λ·x)``; ``couple=False``: ``Δ = η·a + λ·x``.
    ``lambd=`` and ``**{"lambda": ...}`` are accepted. Needs ``params``. Adjustable in state:
    ``eta``, ``beta``, ``lambda_``, ``epsilon``; ``couple`` is structural.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AdamW(0.1, lambda_=0.01), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.7981, 0.7981]], dtype=float32)
    """

    _names = ("eta", "beta", "lambda_", "epsilon", "couple")
    _dynamic = ("eta", "beta", "lambda_", "epsilon")
    _kinds = {"beta": "pair", "couple": "flag"}
    _needs_params = True

    def __new__(
        cls,
        eta: float = 0.001,
        beta: Pair = (0.9, 0.999),
        lambda_: float | None = None,
        epsilon: float = 1e-8,
        *,
        couple: bool = True,
        lambd: float | None = None,
        **kw: Any,
    ) -> AdamW:
        lam = _pop_lambda("AdamW", lambda_, lambd, kw, 0.0)
        return cls._create(eta=eta, beta=beta, lambda_=lam, epsilon=epsilon, couple=couple)

    def _step_leaf(
        self, h: dict, g: jax.Array, x: jax.Array, mt: Any, vt: Any, bt: jax.Array
    ) -> tuple:
        mt, vt = _moments(h, g, mt, vt)
        # AdamW uses T(ϵ), not Optimisers.jl's _eps (only differs for Float16).
        a = mt / (1 - bt[0]) / (jnp.sqrt(vt / (1 - bt[1])) + h["epsilon_raw"])
        eta, lam = h["eta"], h["lambda_"]
        x = x.astype(g.dtype)
        delta = eta * (a + lam * x) if self._hp["couple"] else eta * a + lam * x
        return delta, mt, vt, _next_bt(h, bt)


class RAdamState(NamedTuple):
    mt: Any
    vt: Any
    beta_t: Any
    t: Any  # per array: the step number, starts at 1 (int32)
    hyper: dict


def _first_step() -> jax.Array:
    return jnp.ones((), jnp.int32)


def _next_step(t: jax.Array) -> jax.Array:
    return t + 1


class RAdam(_AdamLike):
    """``RAdam(eta=0.001, beta=(0.9, 0.999), epsilon=1e-8)``: rectified Adam.

    ``ρ∞ = 2/(1-β₂) - 1``, ``ρ = ρ∞ - 2t·βt₂/(1-βt₂)`` (``t`` the array's step, from 1). If ``ρ > 4``:
    ``r = √((ρ-4)(ρ-2)ρ∞ / ((ρ∞-4)(ρ∞-2)ρ))`` and ``Δ = m̂/(√v̂ + ϵ)·η·r``; else ``Δ = m̂·η``.
    Adjustable in state: ``eta``, ``beta``, ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(RAdam(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8000, 0.6       ]], dtype=float32)
    """

    State = RAdamState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-8) -> RAdam:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (*super()._init_leaf(x), once(_first_step))

    def _step_leaf(
        self, h: dict, g: jax.Array, x: Any, mt: Any, vt: Any, bt: jax.Array, t: jax.Array
    ) -> tuple:
        eta, b2, eps = h["eta"], h["beta"][1], h["epsilon"]
        rho_inf = 2 / (1 - b2) - 1
        mt, vt = _moments(h, g, mt, vt)
        rho = rho_inf - 2 * t.astype(g.dtype) * bt[1] / (1 - bt[1])
        mhat = mt / (1 - bt[0])
        r = jnp.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
        rectified = mhat / (jnp.sqrt(vt / (1 - bt[1])) + eps) * eta * r
        delta = jnp.where(rho > 4, rectified, mhat * eta)
        return delta, mt, vt, _next_bt(h, bt), once(_next_step, t)


class AdaMaxState(NamedTuple):
    mt: Any
    ut: Any
    beta_t: Any
    hyper: dict


class AdaMax(_AdamLike):
    """``AdaMax(eta=0.001, beta=(0.9, 0.999), epsilon=1e-8)``: Adam with the ∞-norm.

    ``u ← max(β₂·u, |g|)``; ``Δ = (η/(1-βt₁))·m/(u + ϵ)``. Adjustable in state: ``eta``, ``beta``,
    ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AdaMax(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8000, 0.8000]], dtype=float32)
    """

    State = AdaMaxState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-8) -> AdaMax:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any, ut: Any, bt: jax.Array) -> tuple:
        b1, b2 = h["beta"]
        mt = b1 * mt + (1 - b1) * g
        ut = jnp.maximum(b2 * ut, jnp.abs(g))
        delta = (h["eta"] / (1 - bt[0])) * mt / (ut + h["epsilon"])
        return delta, mt, ut, _next_bt(h, bt)


class OAdamState(NamedTuple):
    mt: Any
    vt: Any
    beta_t: Any
    term: Any  # the previous step's Adam term, starts at 0
    hyper: dict


class OAdam(_AdamLike):
    """``OAdam(eta=0.001, beta=(0.5, 0.9), epsilon=1e-8)``: optimistic Adam.

    ``term ← η·m̂/(√v̂ + ϵ)``; ``Δ = 2·term - term_old``. Adjustable in state: ``eta``, ``beta``,
    ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(OAdam(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.7, 0.7]], dtype=float32)
    """

    State = OAdamState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.5, 0.9), epsilon: float = 1e-8) -> OAdam:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (*super()._init_leaf(x), jnp.zeros_like(x))

    def _step_leaf(
        self, h: dict, g: jax.Array, x: Any, mt: Any, vt: Any, bt: jax.Array, term: Any
    ) -> tuple:
        mt, vt = _moments(h, g, mt, vt)
        new = h["eta"] * mt / (1 - bt[0]) / (jnp.sqrt(vt / (1 - bt[1])) + h["epsilon"])
        return 2 * new - term, mt, vt, _next_bt(h, bt), new


class AMSGradState(NamedTuple):
    mt: Any
    vt: Any
    vhat: Any
    hyper: dict


class AMSGrad(_AdamLike):
    """``AMSGrad(eta=0.001, beta=(0.9, 0.999), epsilon=1e-8)``.

    ``m``, ``v`` and ``v̂`` all start at ``ϵ`` (filled). ``v̂ ← max(v̂, v)``;
    ``Δ = η·m/(√v̂ + ϵ)`` — **no** bias correction. Adjustable in state: ``eta``, ``beta``,
    ``epsilon`` (the initial fill uses the rule's value).

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AMSGrad(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.2588, 0.2588]], dtype=float32)
    """

    State = AMSGradState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-8) -> AMSGrad:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _init_leaf(self, x: jax.Array) -> tuple:
        e = self._hp["epsilon"]
        return jnp.full_like(x, e), jnp.full_like(x, e), jnp.full_like(x, e)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any, vt: Any, vhat: Any) -> tuple:
        mt, vt = _moments(h, g, mt, vt)
        vhat = jnp.maximum(vhat, vt)
        return h["eta"] * mt / (jnp.sqrt(vhat) + h["epsilon"]), mt, vt, vhat


class NAdam(_AdamLike):
    """``NAdam(eta=0.001, beta=(0.9, 0.999), epsilon=1e-8)``: Nesterov-accelerated Adam.

    ``Δ = (β₁·m/(1-β₁·βt₁) + (1-β₁)·g/(1-βt₁)) / (√(v·β₂/(1-βt₂)) + ϵ)·η``. Adjustable in
    state: ``eta``, ``beta``, ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(NAdam(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.7368, 0.7368]], dtype=float32)
    """

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-8) -> NAdam:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any, vt: Any, bt: jax.Array) -> tuple:
        b1, b2 = h["beta"]
        mt, vt = _moments(h, g, mt, vt)
        num = b1 * mt / (1 - b1 * bt[0]) + (1 - b1) * g / (1 - bt[0])
        delta = num / (jnp.sqrt(vt * b2 / (1 - bt[1])) + h["epsilon"]) * h["eta"]
        return delta, mt, vt, _next_bt(h, bt)


class AdaBeliefState(NamedTuple):
    mt: Any
    st: Any
    beta_t: Any
    hyper: dict


class AdaBelief(_AdamLike):
    """``AdaBelief(eta=0.001, beta=(0.9, 0.999), epsilon=1e-16)``.

    ``s ← β₂·s + (1-β₂)·(g - m)² + ϵ`` (with the new ``m``); ``Δ = η·m̂/(√ŝ + ϵ)``. Equals
    ``optax.adabelief(eta, b1, b2, eps=ϵ, eps_root=ϵ)``. Adjustable in state: ``eta``, ``beta``,
    ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AdaBelief(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.7721, 0.7721]], dtype=float32)
    """

    State = AdaBeliefState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999), epsilon: float = 1e-16) -> AdaBelief:
        return cls._create(eta=eta, beta=beta, epsilon=epsilon)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any, st: Any, bt: jax.Array) -> tuple:
        b1, b2 = h["beta"]
        eps = h["epsilon"]
        mt = b1 * mt + (1 - b1) * g
        d = g - mt
        st = b2 * st + (1 - b2) * (_abs2(d) if jnp.iscomplexobj(d) else d**2) + eps
        delta = h["eta"] * mt / (1 - bt[0]) / (jnp.sqrt(st / (1 - bt[1])) + eps)
        return delta, mt, st, _next_bt(h, bt)


class LionState(NamedTuple):
    mt: Any
    hyper: dict


class Lion(Rule):
    """``Lion(eta=0.001, beta=(0.9, 0.999))``.

    Exactly Optimisers.jl v0.4.8's code: ``m ← β₂·g + (1-β₂)·m``;
    ``Δ = η·sign((β₂-β₁)·g + β₁·m)``. Note the momentum update weights the *gradient* by β₂ (the
    paper and ``optax.lion`` use ``m ← β₂·m + (1-β₂)·g``), so this agrees with ``optax.lion`` on the
    first step and whenever the gradient keeps its sign, not in general. Adjustable in state:
    ``eta``, ``beta``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Lion(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8000, 0.8000]], dtype=float32)
    """

    _names = ("eta", "beta")
    _dynamic = ("eta", "beta")
    _kinds = {"beta": "pair"}
    State = LionState

    def __new__(cls, eta: float = 0.001, beta: Pair = (0.9, 0.999)) -> Lion:
        return cls._create(eta=eta, beta=beta)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (jnp.zeros_like(x),)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, mt: Any) -> tuple:
        b1, b2 = h["beta"]
        mt = b2 * g + (1 - b2) * mt
        return h["eta"] * jnp.sign((b2 - b1) * g + b1 * mt), mt
