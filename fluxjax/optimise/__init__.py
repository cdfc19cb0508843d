"""Optimisers.jl on optax: the rules, the state tree and the training loop (`fluxjax.optimise`
serves as `Optimisers`)."""

from ..errors import NonFiniteNorm
from . import eagerstep  # noqa: F401  (installs the fused eager step: withgradient + update_)
from ._custom import AbstractRule, apply_, init
from ._rule_base import ScheduleState
from .rules import *  # noqa: F403  (the rules module declares __all__)
from .rules import __all__ as _rules_all
from .train import NonFiniteLoss, TrainHistory, train_
from .trainstep import trainstep_, trainstep_withgradient_
from .tree import Leaf, adjust, adjust_, freeze_, setup, thaw_, update, update_
from .wholetree import Part, TreeState

__all__ = [
    *_rules_all, "ScheduleState", "TreeState", "Part",
    "AbstractRule", "init", "apply_", "Leaf", "setup", "update", "update_", "adjust", "adjust_", "freeze_", "thaw_",
    "train_", "trainstep_", "trainstep_withgradient_", "NonFiniteLoss", "NonFiniteNorm",
    "TrainHistory",
]
