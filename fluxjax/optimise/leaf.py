"""`Leaf`: the optimiser state of one array in Optimisers.jl's state tree (see `tree.py`)."""

from __future__ import annotations

from typing import Any

import optax

from ..core.layer import layer


@layer(trainable=())
class Leaf:
    """The optimiser state of one array: its `rule` (an optax transformation), `state`, `frozen`.

    ```python
    >>> leaf = setup(Descent(0.1), jnp.ones(2))
    >>> leaf, leaf.rule, leaf.frozen
    (Leaf(Descent(eta=0.1)), Descent(eta=0.1), False)

    ```
    """

    # Leaves share arrays of equal value in their states for speed (fluxjax/_sharing.py); loading
    # treats those as separate arrays, not as tied ones.
    __fluxjax_untied__ = ("state",)

    def __init__(self, rule: optax.GradientTransformation, state: Any, frozen: bool = False):
        self.rule = rule
        self.state = state
        self.frozen = frozen

    def __repr__(self):
        return f"Leaf({self.rule!r}{', frozen' if self.frozen else ''})"
