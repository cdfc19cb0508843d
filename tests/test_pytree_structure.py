"""A model's pytree structure is fixed when the layer is built, never read off the leaf values: trees
mapped from a model (optax masks, `ShapeDtypeStruct`s, `PartitionSpec`s, `None`s) have its structure,
so optax, `jax.eval_shape`, `jax.jit(in_shardings=...)` and orbax work on models."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec

import fluxjax as Flux


def _model():
    Flux.seed_(0)
    return Flux.Chain(Flux.Dense(2, 3, Flux.relu), Flux.BatchNorm(3), Flux.Dense(3, 1, bias=False),
                      Flux.Parallel(jnp.add, Flux.Dense(1, 2), Flux.Dense(1, 2)))


@pytest.mark.parametrize("leaf", [True, None, 0, "spec", "sds"], ids=str)
def test_mapped_trees_keep_the_structure(leaf):
    m = _model()
    if leaf == "sds":
        mapped = jax.eval_shape(lambda m: m, m)
    elif leaf == "spec":
        mapped = jax.tree.map(lambda a: PartitionSpec(), m)
    else:
        mapped = jax.tree.map(lambda a: leaf, m)
    is_leaf = (lambda x: isinstance(x, PartitionSpec)) if leaf == "spec" else (lambda x: x is None)
    assert jax.tree.structure(mapped, is_leaf=is_leaf) == jax.tree.structure(m, is_leaf=is_leaf)
    back = jax.tree.map(lambda a, b: b, mapped, m, is_leaf=is_leaf)  # and a tree mapped back is the model
    np.testing.assert_allclose(back(jnp.ones((2, 4))), m(jnp.ones((2, 4))), rtol=1e-6)


def test_an_optax_mask_made_from_the_model():
    m = _model()
    mask = jax.tree.map(lambda a: a.ndim == 2, m)  # weights only
    tx = optax.masked(optax.sgd(1.0), mask)
    grads = jax.tree.map(jnp.ones_like, m)
    updates, _ = tx.update(grads, tx.init(m), m)
    new = optax.apply_updates(m, updates)
    np.testing.assert_allclose(new[0].weight, m[0].weight - 1.0)
    np.testing.assert_allclose(new[0].bias, m[0].bias + 1.0)  # masked out: optax passes the gradient through


def test_setting_a_field_drops_the_recorded_structure():
    m = jax.tree.map(lambda a: a, Flux.Dense(2, 3))  # a rebuilt layer
    m.bias = False  # Flux's "no bias": a static field from now on
    assert len(jax.tree.leaves(m)) == 1
    assert m(jnp.ones((2, 1))).shape == (3, 1)


@Flux.layer
class _Configured:
    def __init__(self):
        self.w = jnp.ones(3)
        self.cfg = {"scale": 2.0, "shift": [0.0, 1.0]}
        self.coef = [1.0, 0.0]
        self.tags = {"a"}

    def __call__(self, x):
        y = self.w * x * self.cfg["scale"] + self.cfg["shift"][1] + self.coef[1] * x ** 2
        return y * (2.0 if "b" in self.tags else 1.0)


@pytest.mark.parametrize("edit", ["dict item", "nested list item", "list item", "set add"])
def test_a_config_container_edited_in_place_reaches_plain_jax_jit(edit):
    """A layer's static list, dict or set field edited in place: the treedef compared the live container
    with itself, so `jax.jit` reused the program compiled before the edit (-2.9 where the eager call
    gives -14.5). It compares what the container held at each flatten now, as the eager call reads it."""
    layer = _Configured()
    x = jnp.array([1.0, -2.0, 0.5])
    f = jax.jit(lambda m, x: m(x))
    np.testing.assert_allclose(f(layer, x), layer(x), rtol=1e-6)
    if edit == "dict item":
        layer.cfg["scale"] = 10.0
    elif edit == "nested list item":
        layer.cfg["shift"][1] = -3.0
    elif edit == "list item":
        layer.coef[1] = 5.0
    else:
        layer.tags.add("b")
    want = layer(x)
    np.testing.assert_allclose(f(layer, x), want, rtol=1e-6)
    np.testing.assert_allclose(Flux.jit(lambda m, x: m(x))(layer, x), want, rtol=1e-6)
    before = jax.tree_util.tree_structure(layer)
    assert jax.tree_util.tree_structure(layer) == before  # unchanged: equal, so compiled once
