"""Tests for fluxjax.EmbeddingBag (Flux's EmbeddingBag, 0-based indices like fluxjax.Embedding)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import DimensionMismatch, Embedding, EmbeddingBag


@pytest.fixture
def eb():
    return EmbeddingBag(26, 3, init=fluxjax.identity_init(gain=100))


def test_constructors_and_show(eb):
    assert eb.weight.shape == (3, 26)
    assert repr(eb).startswith("EmbeddingBag(26 => 3)") and "78 parameters" in repr(eb)
    W = jnp.arange(12.0).reshape(3, 4)
    assert EmbeddingBag(W).weight is W and EmbeddingBag(W).reduction is jnp.mean
    assert EmbeddingBag(W, "sum").reduction is jnp.sum
    assert EmbeddingBag((4, 3), max).reduction is jnp.max
    assert EmbeddingBag(4, 3, np.mean).reduction is jnp.mean
    assert "EmbeddingBag(4 => 3)" in repr(fluxjax.Chain(EmbeddingBag(4, 3), fluxjax.Dense(3, 2)))
    with pytest.raises(TypeError):
        EmbeddingBag(4, 3, "median")
    with pytest.raises(ValueError):
        EmbeddingBag(0, 3)


def test_docstring_examples(eb):
    np.testing.assert_allclose(eb([1]), [0, 100, 0])
    np.testing.assert_allclose(eb([2, 2, 0]), [100 / 3, 0, 200 / 3], rtol=1e-6)
    np.testing.assert_allclose(eb([[2, 0, 2], [1, 0]]), [[100 / 3, 50], [0, 50], [200 / 3, 0]], rtol=1e-6)
    np.testing.assert_allclose(eb(np.array([[0, 0, 0, 0], [0, 1, 2, 3]])), [[100, 50, 50, 50], [0, 50, 0, 0], [0, 0, 50, 0]])
    np.testing.assert_allclose(eb([10, 0, 11, 1, 12, 2, 13], [0, 3]), [[100 / 3, 0], [0, 25], [0, 25]], rtol=1e-6)


def test_shapes_and_nesting(eb):
    assert eb(np.random.randint(0, 26, (10, 5, 5))).shape == (3, 5, 5)
    assert eb([[[0, 1], [2]], [[3], [4, 5, 6]]]).shape == (3, 2, 2)  # nested lists of bags nest
    np.testing.assert_allclose(eb([[[0, 1], [2]]])[:, 0, 1], eb([2]))


@pytest.mark.parametrize("reduction, ref", [("mean", np.mean), ("sum", np.sum), (max, np.max), (min, np.min)])
def test_reductions_agree_across_input_forms(reduction, ref):
    fluxjax.seed_(1)
    m = EmbeddingBag(10, 4, reduction)
    W = np.asarray(m.weight)
    bags = [[0, 2], [1, 3], [4, 6]]
    want = np.stack([ref(W[:, b], axis=1) for b in bags], axis=1)
    np.testing.assert_allclose(m(bags), want, rtol=1e-6)
    np.testing.assert_allclose(m([0, 2, 1, 3, 4, 6], [0, 2, 4]), want, rtol=1e-6)
    np.testing.assert_allclose(m(np.array(bags).T), want, rtol=1e-6)
    np.testing.assert_allclose(m(fluxjax.onehotbatch([0, 2], range(10))), want[:, 0], rtol=1e-6)
    # (data, offsets) inside jit: a segment reduction, same numbers
    f = jax.jit(lambda m, d, o: m(d, o))
    np.testing.assert_allclose(f(m, jnp.array([0, 2, 1, 3, 4, 6]), jnp.array([0, 2, 4])), want, rtol=1e-6)


def test_custom_reduction_callable():
    m = EmbeddingBag(5, 2, lambda y, axis: jnp.linalg.norm(y, axis=axis))
    W = np.asarray(m.weight)
    np.testing.assert_allclose(m([0, 3]), np.linalg.norm(W[:, [0, 3]], axis=1), rtol=1e-6)
    np.testing.assert_allclose(m([0, 3, 1], [0, 2]), np.stack([np.linalg.norm(W[:, [0, 3]], axis=1), np.abs(W[:, 1])], 1),
                               rtol=1e-6)


def test_errors(eb):
    with pytest.raises(TypeError, match="not just one"):
        eb(3)
    with pytest.raises(TypeError, match="one-hot vector"):
        eb(fluxjax.onehot(2, range(26)))
    with pytest.raises(DimensionMismatch):
        eb(fluxjax.onehotbatch(np.arange(5), range(1000)))
    with pytest.raises(IndexError):
        eb([0, 26])
    with pytest.raises(TypeError):
        eb(np.ones((3, 2), np.float32))
    for offsets in ([1, 3], [0, 7], [0, 2, 2], [0, 4, 1], []):
        with pytest.raises(ValueError):
            eb([0, 1, 2, 3, 4, 5, 6], offsets)


def test_gradient_matches_embedding():
    fluxjax.seed_(2)
    m = EmbeddingBag(6, 3)
    g = fluxjax.gradient(lambda m: jnp.sum(m([[0, 1, 1], [5]]) ** 2), m)[0].weight
    e = Embedding(m.weight)
    ge = fluxjax.gradient(lambda e: jnp.sum(jnp.mean(e(jnp.array([0, 1, 1])), axis=1) ** 2) + jnp.sum(e(5) ** 2), e)[0].weight
    np.testing.assert_allclose(g, ge, rtol=1e-6)
    gs = fluxjax.gradient(lambda m: jnp.sum(m([0, 1, 1, 5], [0, 3]) ** 2), m)[0].weight
    np.testing.assert_allclose(gs, g, rtol=1e-6)
    assert fluxjax.trainable(m).keys() == {"weight"}
