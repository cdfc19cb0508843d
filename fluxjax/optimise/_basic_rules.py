"""Optimisers.jl's gradient-descent, adaptive (non-Adam) and regularising rules.

Each docstring gives Optimisers.jl v0.4.8's step ``Δ`` (subtracted: ``x ← x - Δ``); ``g`` is the
incoming gradient (or the previous rule's ``Δ`` inside an ``OptimiserChain``), ``T`` the parameter's
float type, to which every hyperparameter is cast. A square ``g²`` is Optimisers.jl's ``abs2(g)``:
``|g|²`` for complex parameters.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..compiled.pure import concrete
from ..core.region import note_check
from ..errors import NonFiniteNorm
from ._rule_base import Rule, _abs2, _mul_abs2, _pop_lambda, _warn_gamma

__all__ = [
    "Descent",
    "Momentum",
    "Nesterov",
    "RMSProp",
    "Rprop",
    "AdaGrad",
    "AdaDelta",
    "WeightDecay",
    "SignDecay",
    "ClipGrad",
    "ClipNorm",
]


class Descent(Rule):
    """``Descent(eta=0.1)``: plain gradient descent, ``Δ = η·g``. State: ``LeafState(hyper)``.

    Adjustable in state: ``eta``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Descent(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8000, 0.6       ]], dtype=float32)
    """

    _names = ("eta",)
    _dynamic = ("eta",)

    def __new__(cls, eta: float = 0.1) -> Descent:
        return cls._create(eta=eta)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any) -> tuple:
        return (g * h["eta"],)


class MomentumState(NamedTuple):
    velocity: Any
    hyper: dict


class Momentum(Rule):
    """``Momentum(eta=0.01, rho=0.9)``: ``v ← ρ·v + η·g``; ``Δ = v``. State ``v`` starts at 0.

    Adjustable in state: ``eta``, ``rho``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Momentum(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.71      , 0.4200]], dtype=float32)
    """

    _names = ("eta", "rho")
    _dynamic = ("eta", "rho")
    State = MomentumState

    def __new__(cls, eta: float = 0.01, rho: float = 0.9) -> Momentum:
        return cls._create(eta=eta, rho=rho)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (jnp.zeros_like(x),)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, v: jax.Array) -> tuple:
        v = h["rho"] * v + h["eta"] * g
        return v, v


class Nesterov(Rule):
    """``Nesterov(eta=0.001, rho=0.9)``: ``Δ = -ρ²·v + (1+ρ)·η·g`` (old ``v``), then ``v ← ρ·v - η·g``.

    State ``v`` starts at 0. Adjustable in state: ``eta``, ``rho``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Nesterov(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.5390, 0.0780]], dtype=float32)
    """

    _names = ("eta", "rho")
    _dynamic = ("eta", "rho")
    State = MomentumState

    def __new__(cls, eta: float = 0.001, rho: float = 0.9) -> Nesterov:
        return cls._create(eta=eta, rho=rho)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (jnp.zeros_like(x),)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, v: jax.Array) -> tuple:
        eta, rho = h["eta"], h["rho"]
        delta = -(rho**2) * v + (1 + rho) * eta * g
        return delta, rho * v - eta * g


class RMSPropState(NamedTuple):
    quad: Any
    lin: Any  # None unless centred
    hyper: dict


class RMSProp(Rule):
    """``RMSProp(eta=0.001, rho=0.9, epsilon=1e-8, *, centred=False)`` (``centered`` also accepted).

    ``quad ← ρ·quad + (1-ρ)·g²``; if centred ``lin ← ρ·lin + (1-ρ)·g`` (else ``lin = 0``);
    ``Δ = η·g / (√(quad - lin²) + ϵ)``. State starts at 0. Adjustable in state: ``eta``, ``rho``,
    ``epsilon``; ``centred`` cannot be adjusted (the states differ).

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(RMSProp(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.4544, 0.4544]], dtype=float32)
    """

    _names = ("eta", "rho", "epsilon", "centred")
    _dynamic = ("eta", "rho", "epsilon")
    _kinds = {"centred": "flag"}
    State = RMSPropState

    def __new__(
        cls,
        eta: float = 0.001,
        rho: float = 0.9,
        epsilon: float = 1e-8,
        *,
        centred: bool = False,
        centered: bool = False,
    ) -> RMSProp:
        return cls._create(eta=eta, rho=rho, epsilon=epsilon, centred=centred or centered)

    @classmethod
    def _normalise_kw(cls, eta: Any, kw: dict) -> dict:
        kw = super()._normalise_kw(eta, kw)
        if "centred" in kw:
            raise ValueError(
                "adjust(::RMSProp; centred) is not allowed, as the variants store different states"
            )
        return kw

    def _kind(self) -> Any:
        return (RMSProp, self._hp["centred"])

    def _init_leaf(self, x: jax.Array) -> tuple:
        return jnp.zeros_like(x), (jnp.zeros_like(x) if self._hp["centred"] else None)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, quad: Any, lin: Any) -> tuple:
        rho, eps = h["rho"], h["epsilon"]
        quad = rho * quad + _mul_abs2(1 - rho, g)
        if lin is not None:
            lin = rho * lin + (1 - rho) * g
            denom = jnp.sqrt(quad - _abs2(lin)) + eps
        else:
            denom = jnp.sqrt(quad) + eps
        return g * h["eta"] / denom, quad, lin


class RpropState(NamedTuple):
    grad: Any  # the stored gradient (zeroed where the sign flipped)
    eta: Any  # per-element step sizes, start at eta
    hyper: dict


class Rprop(Rule):
    """``Rprop(eta=1e-3, ell=(0.5, 1.2), gamma=(1e-6, 50.0))``: sign-based full-batch steps.

    Per element, with the stored gradient ``g₀`` (starts 0) and step ``ηᵢ`` (starts ``eta``):
    if ``g₀·g > 0``: ``ηᵢ ← min(ηᵢ·ℓ₂, Γ₂)``; if ``< 0``: ``ηᵢ ← max(ηᵢ·ℓ₁, Γ₁)`` and the stored
    gradient becomes 0, else it becomes ``g``; ``Δ = ηᵢ·sign(g_stored)``.

    Adjustable in state: ``ell``, ``gamma``. (``eta`` only seeds the state at ``init``, as in
    Optimisers.jl, so adjusting it changes nothing for existing state.)

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(Rprop(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.78, 0.78]], dtype=float32)
    """

    _names = ("eta", "ell", "gamma")
    _dynamic = ("ell", "gamma")
    _kinds = {"ell": "pair", "gamma": "pair"}
    State = RpropState

    def __new__(
        cls,
        eta: float = 1e-3,
        ell: tuple[float, float] = (0.5, 1.2),
        gamma: tuple[float, float] = (1e-6, 50.0),
    ) -> Rprop:
        return cls._create(eta=eta, ell=ell, gamma=gamma)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return jnp.zeros_like(x), jnp.full_like(x, self._hp["eta"])

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, g0: Any, eta: Any) -> tuple:
        (l1, l2), (G1, G2) = h["ell"], h["gamma"]
        prod = g0 * g
        shrunk = jnp.where(prod < 0, jnp.maximum(eta * l1, G1), eta)
        eta = jnp.where(prod > 0, jnp.minimum(eta * l2, G2), shrunk)
        g0 = jnp.where(prod < 0, jnp.zeros_like(g), g)
        return eta * jnp.sign(g0), g0, eta


class AdaGradState(NamedTuple):
    acc: Any
    hyper: dict


class AdaGrad(Rule):
    """``AdaGrad(eta=0.1, epsilon=1e-8)``: ``acc ← acc + g²``; ``Δ = η·g / (√acc + ϵ)``.

    ``acc`` starts at ``ϵ`` (filled, not zero), as Optimisers.jl. Adjustable in state: ``eta``,
    ``epsilon`` (the latter only in the denominator; the initial fill uses the rule's value).

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AdaGrad(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.8293, 0.8293]], dtype=float32)
    """

    _names = ("eta", "epsilon")
    _dynamic = ("eta", "epsilon")
    State = AdaGradState

    def __new__(cls, eta: float = 0.1, epsilon: float = 1e-8) -> AdaGrad:
        return cls._create(eta=eta, epsilon=epsilon)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return (jnp.full_like(x, self._hp["epsilon"]),)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, acc: jax.Array) -> tuple:
        acc = acc + _abs2(g)
        return g * h["eta"] / (jnp.sqrt(acc) + h["epsilon"]), acc


class AdaDeltaState(NamedTuple):
    acc: Any
    delta_acc: Any
    hyper: dict


class AdaDelta(Rule):
    """``AdaDelta(rho=0.9, epsilon=1e-8)`` (no learning rate).

    ``acc ← ρ·acc + (1-ρ)·g²``; ``Δ = g·√(Δacc + ϵ) / √(acc + ϵ)`` (old ``Δacc``);
    ``Δacc ← ρ·Δacc + (1-ρ)·Δ²``. State starts at 0. Adjustable in state: ``rho``, ``epsilon``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(AdaDelta(), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[0.9994, 0.9994]], dtype=float32)
    """

    _names = ("rho", "epsilon")
    _dynamic = ("rho", "epsilon")
    State = AdaDeltaState

    def __new__(cls, rho: float = 0.9, epsilon: float = 1e-8) -> AdaDelta:
        return cls._create(rho=rho, epsilon=epsilon)

    def _init_leaf(self, x: jax.Array) -> tuple:
        return jnp.zeros_like(x), jnp.zeros_like(x)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any, acc: Any, dacc: Any) -> tuple:
        rho, eps = h["rho"], h["epsilon"]
        acc = rho * acc + _mul_abs2(1 - rho, g)
        delta = g * jnp.sqrt(dacc + eps) / jnp.sqrt(acc + eps)
        dacc = rho * dacc + _mul_abs2(1 - rho, delta)
        return delta, acc, dacc


class WeightDecay(Rule):
    """``WeightDecay(lambda_=5e-4)`` (also ``lambd=`` or ``**{"lambda": ...}``): ``Δ = g + λ·x``.

    L2 regularisation (adds ``λ/2·‖x‖²`` to the loss); put it first in an ``OptimiserChain``.
    Needs ``params``. Adjustable in state: ``lambda_`` (``adjust(gamma=...)`` is the deprecated
    spelling, as in Optimisers.jl).

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(WeightDecay(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[-1.09     , -2.9900]], dtype=float32)
    """

    _names = ("lambda_",)
    _dynamic = ("lambda_",)
    _needs_params = True

    def __new__(cls, lambda_: float | None = None, *, lambd: float | None = None, **kw: Any) -> WeightDecay:
        return cls._create(lambda_=_pop_lambda("WeightDecay", lambda_, lambd, kw, 5e-4))

    @classmethod
    def _normalise_kw(cls, eta: Any, kw: dict) -> dict:
        if "gamma" in kw:
            _warn_gamma()
            kw = dict(kw)
            kw["lambda_"] = kw.pop("gamma")
        return super()._normalise_kw(eta, kw)

    def _step_leaf(self, h: dict, g: jax.Array, x: jax.Array) -> tuple:
        return (g + h["lambda_"] * x,)


class SignDecay(Rule):
    """``SignDecay(lambda_=1e-3)``: ``Δ = g + λ·sign(x)`` (L1 regularisation, ``λ·‖x‖₁``).

    Needs ``params``. Adjustable in state: ``lambda_``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(SignDecay(0.1), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[-1., -3.]], dtype=float32)
    """

    _names = ("lambda_",)
    _dynamic = ("lambda_",)
    _needs_params = True

    def __new__(cls, lambda_: float | None = None, *, lambd: float | None = None, **kw: Any) -> SignDecay:
        return cls._create(lambda_=_pop_lambda("SignDecay", lambda_, lambd, kw, 1e-3))

    def _step_leaf(self, h: dict, g: jax.Array, x: jax.Array) -> tuple:
        return (g + h["lambda_"] * jnp.sign(x).astype(g.dtype),)


class ClipGrad(Rule):
    """``ClipGrad(delta=10.0)``: ``Δ = clamp(g, -δ, δ)`` elementwise. Adjustable in state: ``delta``.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(OptimiserChain(ClipGrad(1.5), Descent(1.0)), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[-1., -2.]], dtype=float32)
    """

    _names = ("delta",)
    _dynamic = ("delta",)

    def __new__(cls, delta: float = 10.0) -> ClipGrad:
        return cls._create(delta=delta)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any) -> tuple:
        d = h["delta"]
        return (jnp.clip(g, -d, d),)


def _norm(g: jax.Array, p: float) -> jax.Array:
    """LinearAlgebra's ``norm(g, p)`` of one array (p = 2, 1, Inf, -Inf, 0 or any other real)."""
    a = jnp.abs(g)
    if g.size == 0:
        return jnp.zeros((), a.dtype)
    if p == 2:
        plain = jnp.sqrt(jnp.sum(a * a))
        m = jnp.max(a)
        safe = jnp.where((m > 0) & jnp.isfinite(m), m, jnp.ones_like(m))
        scaled = safe * jnp.sqrt(jnp.sum((a / safe) ** 2))
        # Overflow of the plain sum with finite entries: rescale, as LinearAlgebra does.
        return jnp.where(jnp.isfinite(m), jnp.where(jnp.isfinite(plain), plain, scaled), m)
    if p == 1:
        return jnp.sum(a)
    if p == math.inf:
        return jnp.max(a)
    if p == -math.inf:
        return jnp.min(a)
    if p == 0:
        return jnp.sum(a != 0).astype(a.dtype)
    q = jnp.asarray(p, a.dtype)
    return jnp.sum(a**q) ** (1 / q)


class ClipNorm(Rule):
    """``ClipNorm(omega=10.0, p=2, *, throw=True)``: ``Δ = g·min(ω/‖g‖ₚ, 1)``, **per array**.

    With ``throw=True`` a non-finite norm raises ``NonFiniteNorm``, a ``ValueError`` (Optimisers.jl's
    ``DomainError``), before anything is written: op by op in an eager ``update_``; in ``train_``
    (every mode) and ``trainstep_``/``trainstep_withgradient_`` too, naming ``train_``'s data index,
    with the model, its state and the optimiser state as they were before that step. Traced there,
    the rule notes its check in the step's region (``note_check``); a failed check skips the step,
    and ``train_``'s later ones, as a non-finite loss does, and the host raises when it reads the
    result (``train_`` once per window of steps; a compiled ``trainstep_`` with such a check waits for
    each step). A ``fluxjax.jit`` function raises it after the call, with every write of that call put
    back (it waits for the result of each call whose program holds such a check). Only under a plain
    ``jax.jit`` can it not raise: the step becomes all NaN instead, so a finiteness check on the result
    catches it. With ``throw=False`` the arithmetic is
    Optimisers.jl's: an ``Inf`` gradient gives NaN where it was infinite, a NaN gradient NaN everywhere.
    Adjustable in state: ``omega``; ``p`` and ``throw`` are structural.

    >>> m = Dense(jnp.ones((1, 2)), False)              # loss sum(m(x)) has gradient x' = [[1, 2]]
    >>> s = setup(OptimiserChain(ClipNorm(1.0), Descent(1.0)), m)
    >>> for _ in range(2):
    ...     _ = update_(s, m, gradient(lambda m: jnp.sum(m(jnp.array([1.0, 2.0]))), m)[0])
    >>> m.weight                                       # after two steps
    Array([[ 0.1056, -0.7889]], dtype=float32)
    """

    _names = ("omega", "p", "throw")
    _dynamic = ("omega",)
    _kinds = {"throw": "flag"}

    def __new__(cls, omega: float = 10.0, p: float = 2, *, throw: bool = True) -> ClipNorm:
        return cls._create(omega=omega, p=p, throw=throw)

    def _step_leaf(self, h: dict, g: jax.Array, x: Any) -> tuple:
        nrm = _norm(g, self._hp["p"])
        finite = jnp.isfinite(nrm)
        if self._hp["throw"]:
            message = f"ClipNorm: gradient has {self._hp['p']}-norm {{}}, for array {g.dtype}{list(g.shape)}"
            if concrete(nrm):
                if not bool(finite):
                    raise NonFiniteNorm(message.format(float(nrm)))
            else:  # `train_`'s step raises for it on the host (see the docstring)
                note_check(finite, nrm, message)
        lam = jnp.minimum(h["omega"] / nrm, jnp.ones_like(nrm))
        if self._hp["throw"]:
            lam = jnp.where(finite, lam, jnp.full_like(lam, jnp.nan))
        return (g * lam,)

