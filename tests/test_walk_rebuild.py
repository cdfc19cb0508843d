"""`fluxjax.core.walk.rebuild`, the one rebuild: it visits exactly what `walk` visits, so walking its result
gives the values it was given, in the same order, with ties, dict order, namedtuples and static fields kept."""

import collections

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.core.walk import rebuild, walk

NT = collections.namedtuple("NT", ["p", "q"])


def _model():
    d = Flux.Dense(2, 2, jnp.tanh)
    return [Flux.Chain(d, Flux.BatchNorm(2), d), {"z": jnp.ones(3), "a": (jnp.zeros(1), 2.0)}, NT(jnp.ones(2), "s"), 1.5]


def test_rebuild_round_trips_the_walk():
    root = _model()
    w = walk(root)
    new_values = [v * 2 if isinstance(v, jnp.ndarray) else v + 1 for v in w.leaves]
    new = rebuild(root, new_values)
    w2 = walk(new)
    assert len(w2.leaves) == len(new_values)
    for a, b in zip(w2.leaves, new_values):
        assert a is b
    assert w2.signature == w.signature  # the same structure, static fields included
    chain = new[0]
    assert chain is not root[0] and chain[0] is chain[2]  # a tie stays one object
    assert chain[0].sigma is jnp.tanh
    assert list(new[1]) == ["z", "a"]  # insertion order kept (the walk reads "a" first)
    np.testing.assert_array_equal(new[1]["z"], 2 * np.ones(3))
    assert type(new[2]) is NT and new[2].q == "s"
    assert new[3] == 2.5  # a number at the top is a leaf, as in the walk
    assert root[3] == 1.5 and root[1]["z"] is not new[1]["z"]  # the original is unchanged


def test_rebuild_layer_static_and_prune():
    d = Flux.Dense(2, 1)
    root = [Flux.Chain(d, d)]
    n = len(walk(root).leaves)
    made = []

    def node(obj):
        fields: dict = {}
        made.append(type(obj).__name__)
        return ("node", type(obj).__name__, fields), fields

    out = rebuild(root, [None] * n, layer=node, static=lambda v: None, prune=True)
    assert out == [None]  # nothing reached: pruned to None, as a gradient would be
    out = rebuild(root, [jnp.ones(1)] + [None] * (n - 1), layer=node, static=lambda v: None, prune=True)
    tag, name, fields = out[0]
    assert name == "Chain" and fields["layers"][0] is fields["layers"][1]


def test_rebuild_refuses_values_that_do_not_fit():
    root = [Flux.Dense(2, 2)]
    with pytest.raises(ValueError, match="rebuild"):
        rebuild(root, [jnp.ones((2, 2)), jnp.ones(2), jnp.ones(1)])
