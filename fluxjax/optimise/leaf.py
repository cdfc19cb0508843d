"""`Leaf`: the optimiser state of one array in Optimisers.jl's state tree (see `tree.py`)."""

from __future__ import annotations

from typing import Any

import optax

from ..core.layer import layer
from ..core.region import commit
from ..core.walk import Slot
from ._rule_base import Rule


@layer(trainable=())
class Leaf:
    """The optimiser state of one array: its `rule` (an optax transformation), `state`, `frozen`.

    ```python
    >>> leaf = setup(Descent(0.1), jnp.ones(2))
    >>> leaf, leaf.rule, leaf.frozen
    (Leaf(Descent(eta=0.1)), Descent(eta=0.1), False)

    ```
    As Optimisers.jl's `Leaf`, it is mutable and its `rule` is what the next step uses: assigning a
    rule of the same kind (`leaf.rule = Adam(0.0)`) keeps the moments and puts the new rule's
    hyperparameters in the state, which the step reads them from (`state.hyper`), as `adjust_` does;
    a rule of another kind, whose state differs, raises `TypeError`.
    """

    # Leaves share arrays of equal value in their states for speed (fluxjax/_sharing.py); loading
    # treats those as separate arrays, not as tied ones.
    __fluxjax_untied__ = ("state",)

    def __init__(self, rule: optax.GradientTransformation, state: Any, frozen: bool = False):
        self.rule = rule
        self.state = state
        self.frozen = frozen

    def __setattr__(self, name: str, value: Any) -> None:
        old = self.__dict__.get("rule")
        if name == "rule" and "state" in self.__dict__ and value is not old and value != old:
            # through the state thread, as `update_` writes it (inside `fluxjax.jit` too)
            commit(Slot(self, "state", True), _state_for(old, value, self.state))
        object.__setattr__(self, name, value)

    def __repr__(self):
        return f"Leaf({self.rule!r}{', frozen' if self.frozen else ''})"


def _state_for(old: Any, new: Any, state: Any) -> Any:
    """`state`, set up for rule `old`, as the state of rule `new` (its hyperparameters in it), or a
    TypeError when `new` keeps another kind of state."""
    if isinstance(old, Rule) and isinstance(new, Rule) and old._kind() == new._kind():
        return new._state_for(state)
    raise TypeError(
        f"Leaf.rule: the state was set up for {old!r}, which keeps another kind of state than {new!r}. "
        "Assign a rule of the same type (other hyperparameters are fine, e.g. with adjust_), or set up a "
        f"new state for this rule: opt_state = setup({type(new).__name__}(...), model)"
    )
