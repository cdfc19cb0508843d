"""onecold(y, labels) on arrays returns `labels[i]` exactly (OneHotArrays.jl src/onehot.jl
`map(xi -> labels[xi[1]], indices)`): labels JAX cannot hold without x64 are never wrapped or rounded."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax import onecold

Y = np.array([[0.9, 0.1, 0.2], [0.1, 0.9, 0.8]], np.float32)  # argmax per column: 0, 1, 1


def test_int64_labels_not_wrapped():
    out = onecold(Y, [2**40, 7])
    assert isinstance(out, np.ndarray) and out.dtype == np.int64
    assert out.tolist() == [2**40, 7, 7]
    assert onecold(Y[:, 0], [2**40, 7]) == 2**40  # the vector branch agrees
    # 3-D: one label per column, same exactness
    y3 = np.stack([Y, Y[::-1]], axis=-1)  # (2, 3, 2)
    assert onecold(y3, [-(2**40), 2**33]).tolist() == [[-(2**40), 2**33], [2**33, -(2**40)], [2**33, -(2**40)]]
    # ordinary labels keep giving a jax array
    small = onecold(Y, [10, 20])
    assert isinstance(small, jax.Array) and small.dtype == jnp.int32 and small.tolist() == [10, 20, 20]


def test_array_labels_keep_their_dtype():
    out = onecold(Y, np.array([3_000_000_000, 1], np.uint32))
    assert out.dtype == np.uint32 and out.tolist() == [3_000_000_000, 1, 1]
    out = onecold(Y, np.array([2**63 + 5, 2], np.uint64))
    assert out.dtype == np.uint64 and out.tolist() == [2**63 + 5, 2, 2]


def test_float64_labels_not_rounded():
    out = onecold(Y, np.array([0.1, 1e300]))
    assert out.dtype == np.float64 and out.tolist() == [0.1, 1e300, 1e300]
    assert onecold(Y, [0.1, 0.2]).tolist() == [0.1, 0.2, 0.2]
    exact = onecold(Y, [0.5, -2.0])  # exact in float32: a jax array as before
    assert isinstance(exact, jax.Array) and exact.tolist() == [0.5, -2.0, -2.0]


def test_under_jit_labels_must_fit():
    f = jax.jit(lambda y: onecold(y, [10, 20]))
    assert f(Y).tolist() == [10, 20, 20]
    g = jax.jit(lambda y: onecold(y, [2**40, 7]))
    with pytest.raises(TypeError, match=r"onecold: labels \[1099511627776, 7\] \(int64\) cannot be held exactly"):
        g(Y)
