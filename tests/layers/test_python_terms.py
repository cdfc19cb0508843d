"""Size errors keep Flux's text (`layer Dense(2 => 3) expects size(input, 1) == 2, but got 3×5 Matrix`) and
add the Python reading: which `x.shape` entry is wrong and, when one is plain, the transpose that fixes it.
Other libraries' arrays (`__array__`, `__dlpack__`: a torch.Tensor) are converted or refused clearly."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.errors import DimensionMismatch


@pytest.mark.parametrize(
    "layer, shape, flux_text, python_text",
    [
        (Flux.Dense(784, 10), (32, 784), r"layer Dense\(784 => 10\) expects size\(input, 1\) == 784, but got 32×784 Matrix",
         r"x.shape\[0\] == 784 \(features first, batch last\), got x.shape == \(32, 784\): batch goes last: try x.T$"),
        (Flux.Conv((3, 3), (3, 8)), (2, 28, 28, 3), r"expects size\(input, 3\) == 3, but got 2×28×28×3",
         r"x.shape\[2\] == 3 .*channels-last \(N, H, W, C\); Flux takes \(W, H, C, N\): try x.transpose\(2, 1, 3, 0\)$"),
        (Flux.Conv((3, 3), (3, 8)), (2, 3, 28, 28), r"expects size\(input, 3\) == 3",
         r"channels-first \(N, C, H, W\).*try x.transpose\(3, 2, 1, 0\)$"),
        (Flux.Conv((3, 3), (3, 8)), (28, 28, 3), r"expects ndims\(input\) == 4", r"no batch axis: try x\[\.\.\., None\]$"),
        (Flux.BatchNorm(3), (2, 5, 5, 3), r"expects size\(input, ndims - 1\) == 3", r"try x.transpose\(2, 1, 3, 0\)$"),
        (Flux.BatchNorm(3), (16, 3), r"BatchNorm\(3\)", r"x.shape\[0\] == 3 .*try x.T$"),
        (Flux.RNN(5, 7), (4, 9, 5), r"RNN\(5 => 7, tanh\) expects size\(input, 1\) == 5",
         r"got x.shape == \(4, 9, 5\): features go first, batch last: try x.transpose\(2, 1, 0\)$"),
        (Flux.RNNCell(5, 7), (4, 5), r"RNNCell\(5 => 7, tanh\)", r"try x.T$"),
    ],
)
def test_size_errors_read_in_python_terms(layer, shape, flux_text, python_text):
    x = jnp.asarray(np.random.default_rng(0).random(shape), jnp.float32)
    with pytest.raises(DimensionMismatch, match=flux_text) as e:
        layer(x)
    assert "In Python terms" in str(e.value)
    assert __import__("re").search(python_text, str(e.value)), str(e.value)


def test_embedding_onehot_size_error_reads_in_python_terms():
    # a bool one-hot batch given batch-first (float input is refused with a TypeError, as Flux)
    x = jnp.asarray(np.random.default_rng(0).random((5, 10)) > 0.5)
    with pytest.raises(DimensionMismatch, match=r"size\(input, 1\) == 10") as e:
        Flux.Embedding(10, 4)(x)
    assert __import__("re").search(r"x.shape\[0\] == 10 .*try x.T$", str(e.value)), str(e.value)


@pytest.mark.parametrize(
    "layer, shape, perm",
    [(Flux.Dense(784, 10), (32, 784), (1, 0)), (Flux.Conv((3, 3), (3, 8)), (2, 6, 6, 3), (2, 1, 3, 0)),
     (Flux.Conv((3, 3), (3, 8)), (2, 3, 6, 6), (3, 2, 1, 0)), (Flux.RNN(5, 7), (4, 9, 5), (2, 1, 0))],
)
def test_the_suggested_transpose_works(layer, shape, perm):
    x = jnp.asarray(np.random.default_rng(1).random(shape), jnp.float32)
    y = layer(x.transpose(perm))
    assert y.shape[-1] == shape[0]  # the batch is last


class _TensorLike:
    """Stands for a torch.Tensor: shape and a dtype NumPy does not know, read through `__array__`."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, "torch.float32"

    def __array__(self, dtype=None, copy=None):
        return self.a


class _GradTensor:
    shape, dtype = (2, 4), "torch.float32"

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")


def test_other_array_types_are_converted_or_refused():
    m = Flux.Dense(2, 3)
    a = np.random.default_rng(2).random((2, 4)).astype(np.float32)
    np.testing.assert_allclose(m(_TensorLike(a)), m(jnp.asarray(a)), rtol=1e-6)
    np.testing.assert_allclose(Flux.Conv((1, 1), (2, 1))(_TensorLike(a.reshape(1, 1, 2, 4))).shape, (1, 1, 1, 4))
    with pytest.raises(TypeError, match=r"Dense\(2 => 3\) cannot read a .*_GradTensor as an array.*requires grad.*"
                                        r"jnp.asarray\(x.detach\(\).cpu\(\).numpy\(\)\)"):
        m(_GradTensor())
