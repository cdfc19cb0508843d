"""fluxjax.accuracy against a NumPy reference (model-zoo's `mean(onecold(m(x)) .== onecold(y))`)."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux


def _reference(w, xs, labels):
    pred = np.argmax(w @ xs, axis=0)
    return float(np.mean(pred == labels))


def test_accuracy_matches_numpy_over_uneven_batches():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    xs = rng.standard_normal((3, 23)).astype(np.float32)
    labels = rng.integers(0, 4, size=23)
    m = Flux.Dense(jnp.asarray(w), False)
    want = _reference(w, xs, labels)
    assert 0.0 < want < 1.0
    onehot = Flux.onehotbatch(labels.tolist(), range(4))
    # one-hot targets through a DataLoader with a short last batch (23 = 2*10 + 3): samples weigh equally
    got = Flux.accuracy(m, Flux.DataLoader((jnp.asarray(xs), onehot), batchsize=10))
    assert isinstance(got, float)
    assert got == pytest.approx(want, abs=1e-12)
    # integer labels in a plain list of batches
    batches = [(xs[:, :7], labels[:7]), (xs[:, 7:], labels[7:])]
    assert Flux.accuracy(m, batches) == pytest.approx(want, abs=1e-12)
    # a plain function as the model
    assert Flux.accuracy(lambda x: w @ x, [(xs, labels)]) == pytest.approx(want, abs=1e-12)


def test_accuracy_rejects_bad_input():
    m = lambda x: x
    with pytest.raises(ValueError, match="accuracy: data holds no samples"):
        Flux.accuracy(m, [])
    with pytest.raises(ValueError, match=r"accuracy: batch 0 has y of shape \(5,\).*scores have shape \(3, 4\)"):
        Flux.accuracy(m, [(jnp.ones((3, 4)), jnp.zeros(5, dtype=jnp.int32))])
    with pytest.raises(ValueError, match="accuracy: batch 0 .* expected an \\(x, y\\) pair"):
        Flux.accuracy(m, [jnp.ones((3, 4))])
