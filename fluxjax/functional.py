"""The pure view of a model: `params, state, apply = functional(model)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compiled.plan import Containers
from .core.layer import is_float_array, structure_version
from .core.region import run_in_region
from .core.walk import PARAM, STATE, Slot, walk
from .functors import all_layers


def functional(model: Any) -> tuple[dict, dict, Callable]:
    """`params, state, apply = functional(model)`: the model as pure data and a pure function.

    `params` holds the trainable float arrays and `state` the state arrays (running statistics, RNG
    keys), both as flat dicts keyed by path (`"layers[0].weight"`); an array held at several places
    (tied) is one entry, at its first path, so that its gradient is the sum of its places'. `apply(params, state, *inputs,
    train=None, rng=None) -> (output, new_state)` is pure: use it under `jax.jit`, `jax.vmap`,
    `jax.grad`, `jax.lax.scan`, with optax and orbax. `train=True/False` forces the mode of every
    layer (None keeps each layer's own `active` setting, automatic meaning test mode); `rng` (a key)
    feeds Dropout instead of the layers' own keys. `model` itself is never changed by `apply`.

    >>> m = Chain(Dense(jnp.ones((1, 2))), BatchNorm(1))
    >>> params, state, apply = functional(m)
    >>> sorted(params), sorted(state)
    (['layers[0].bias', 'layers[0].weight', 'layers[1].beta', 'layers[1].gamma'], ['layers[1].mu', 'layers[1].sigma2'])
    >>> y, new_state = apply(params, state, jnp.ones((2, 3)), train=True)
    >>> y.shape, new_state["layers[1].mu"]           # running mean 0.9 * 0 + 0.1 * 2
    ((1, 3), Array([0.2], dtype=float32))
    """
    w = walk([model], paths=True)
    names = [p[2:] if p.startswith("0.") else p[1:] for p in w.paths]
    p_idx = [i for i, r in enumerate(w.roles) if r == PARAM and is_float_array(w.leaves[i])]
    s_idx = [i for i, r in enumerate(w.roles) if r == STATE]
    # an array at several places (tied) is one entry, named for its first place, read at all of them
    at = {}
    for i in (*p_idx, *s_idx):
        at.setdefault((i in s_idx, id(w.leaves[i])), names[i])
    key = {i: at[(i in s_idx, id(w.leaves[i]))] for i in (*p_idx, *s_idx)}
    params = {names[i]: w.leaves[i] for i in p_idx if key[i] == names[i]}
    state = {names[i]: w.leaves[i] for i in s_idx if key[i] == names[i]}
    slots = w.slots
    places = [slot.ident() for slot in slots]
    seen = [structure_version(), Containers(w.containers)]  # the model as `places` was read from it

    def apply(params: dict, state: dict, *inputs, train: bool | None = None, rng=None):
        if structure_version() != seen[0] or not seen[1].holds():  # something changed: walk again
            now = walk([model])
            if [slot.ident() for slot in now.slots] != places:
                # a layer replaced (or an array field added or removed) since: `params` would be swapped
                # into places the model no longer reads, and the new layer's own arrays used, silently
                raise RuntimeError(
                    "functional: the model's structure changed after params, state, apply = functional(model) "
                    "(a layer replaced, or a field added or removed); call functional(model) again"
                )
            seen[:] = [structure_version(), Containers(now.containers)]
        swaps = [(slots[i], params[key[i]]) for i in p_idx] + [(slots[i], state[key[i]]) for i in s_idx]
        if train is not None:  # every layer follows the region's mode
            swaps += [(Slot(lay, "active", True), None) for lay in all_layers(model) if "active" in lay.__dict__]
        return run_in_region(lambda: model(*inputs), swaps, lambda r: {key[i]: slots[i].get() for i in s_idx},
                             train=train, rng=rng, explicit=True)

    return params, state, apply
