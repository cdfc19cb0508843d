"""Optimisers.jl's rules (v0.4.8 names, defaults and formulas) as optax ``GradientTransformation``\\ s.

Every rule is an ``optax.GradientTransformationExtraArgs``: ``state = rule.init(x)`` and
``updates, state = rule.update(grad, state, x)`` act on one array or on any pytree of arrays, and
``optax.apply_updates(x, updates)`` gives Optimisers.jl's ``x - Δ`` (our updates are ``-Δ``, optax's
sign). Inside :class:`OptimiserChain` the rules pass Optimisers.jl's ``Δ`` along and the chain
negates once, so ``OptimiserChain(WeightDecay(λ), Adam())`` is exactly Optimisers.jl's; optax
transformations can be mixed in (see ``OptimiserChain``).

Numeric hyperparameters live in ``state.hyper`` (0-d float32 arrays; float64 for float64 params
under x64) and are read from there at each step: ``rule.adjust_state(state, eta=...)`` changes them
without re-tracing a jitted step, and ``rule.adjust(...)`` returns the correspondingly changed rule
(Optimisers.jl's ``adjust`` = both). Each rule's docstring lists which of its fields are in state.
Parameters keep their dtype; hyperparameters are cast to it (Float16 epsilons are at least 1e-7,
Optimisers.jl's ``_eps``); bfloat16 parameters compute and keep their state in float32.

Keyword spellings: Optimisers.jl's field names (``eta``, ``beta``, ``epsilon``, ``rho``, ``delta``,
``omega``, ``ell``, ``gamma``, ``p``, ``n``, ``couple``, ``centred``/``centered``, ``throw``); its
``lambda`` is ``lambda_`` (``lambd=`` and ``**{"lambda": ...}`` also work).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from ._adam_family import AdaBelief, Adam, AdaMax, AdamW, AMSGrad, Lion, NAdam, OAdam, RAdam
from ._basic_rules import (
    AdaDelta,
    AdaGrad,
    ClipGrad,
    ClipNorm,
    Descent,
    Momentum,
    Nesterov,
    RMSProp,
    Rprop,
    SignDecay,
    WeightDecay,
)
from ._composite import AccumGrad, MixedPrecision, OptimiserChain
from ._rule_base import Rule

__all__ = [
    "Rule",
    "Descent",
    "Momentum",
    "Nesterov",
    "RMSProp",
    "Rprop",
    "Adam",
    "AdamW",
    "RAdam",
    "AdaMax",
    "OAdam",
    "AdaGrad",
    "AdaDelta",
    "AMSGrad",
    "NAdam",
    "AdaBelief",
    "Lion",
    "WeightDecay",
    "SignDecay",
    "ClipGrad",
    "ClipNorm",
    "OptimiserChain",
    "MixedPrecision",
    "AccumGrad",
    "RULES",
]

#: Every rule class, by name.
RULES: dict[str, type[Rule]] = {
    c.__name__: c
    for c in (
        Descent, Momentum, Nesterov, RMSProp, Rprop, Adam, AdamW, RAdam, AdaMax, OAdam, AdaGrad,
        AdaDelta, AMSGrad, NAdam, AdaBelief, Lion, WeightDecay, SignDecay, ClipGrad, ClipNorm,
        OptimiserChain, AccumGrad,
    )
}  # fmt: skip


def _deprecated(old: str, new: type[Rule]) -> Any:
    @functools.wraps(new, assigned=("__doc__",))
    def make(*args: Any, **kw: Any) -> Rule:
        warnings.warn(f"{old} is deprecated, use {new.__name__}", DeprecationWarning, stacklevel=2)
        return new(*args, **kw)

    make.__name__ = make.__qualname__ = old
    return make


# Optimisers.jl's deprecated spellings (`@deprecate ADAM Adam`, ...): they warn and build the new rule.
ADAM = _deprecated("ADAM", Adam)
NADAM = _deprecated("NADAM", NAdam)
ADAMW = _deprecated("ADAMW", AdamW)
RADAM = _deprecated("RADAM", RAdam)
OADAM = _deprecated("OADAM", OAdam)
ADAGrad = _deprecated("ADAGrad", AdaGrad)
ADADelta = _deprecated("ADADelta", AdaDelta)
DEPRECATED_ALIASES = ("ADAM", "NADAM", "ADAMW", "RADAM", "OADAM", "ADAGrad", "ADADelta")
