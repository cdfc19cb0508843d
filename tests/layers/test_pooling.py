"""Pooling layers (fluxjax/layers/pooling.py) against Flux's semantics.

Ported cases cite `Flux.jl/test/layers/conv.jl` ("Pooling", "SamePad windowsize") and
`Flux.jl/test/outputsize.jl`; values are checked against a float64 NumPy loop of NNlib's `maxpool`
(padding counts as -Inf) and `meanpool` (padded zeros count, divisor `prod(k)`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad as _fd

import fluxjax
from fluxjax.errors import DimensionMismatch
from fluxjax.layers.basic import Chain
from fluxjax.layers.conv import Conv, SamePad
from fluxjax.layers.pooling import (
    AdaptiveMaxPool,
    AdaptiveMeanPool,
    GlobalMaxPool,
    GlobalMeanPool,
    MaxPool,
    MeanPool,
)
from fluxjax.outputsize import outputsize

rng = np.random.default_rng(1)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def np_pool(x, k, *, stride=None, pad=0, mode="max"):
    """NNlib's pooling: `y[o] = reduce(x[o*s + j - lo] for j in window k)`, padding -Inf (max) or 0 (mean)."""
    x = np.asarray(x, np.float64)
    n = x.ndim - 2
    s = k if stride is None else ((stride,) * n if isinstance(stride, int) else tuple(stride))
    if isinstance(pad, int):
        pad = (pad,) * (2 * n)
    p = [(pad[i], pad[i]) for i in range(n)] if len(pad) == n else [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    xp = np.pad(x, p + [(0, 0), (0, 0)], constant_values=-np.inf if mode == "max" else 0.0)
    out = tuple((xp.shape[i] - k[i]) // s[i] + 1 for i in range(n))
    y = np.zeros(out + x.shape[-2:])
    for o in np.ndindex(*out):
        win = xp[tuple(slice(o[i] * s[i], o[i] * s[i] + k[i]) for i in range(n))]
        y[o] = win.max(axis=tuple(range(n))) if mode == "max" else win.sum(axis=tuple(range(n))) / np.prod(k)
    return y


def test_pooling_equals_nnlib():
    # Flux.jl/test/layers/conv.jl "Pooling"
    x, y = _r(10, 10, 3, 2), _r(20, 20, 3, 2)
    np.testing.assert_allclose(AdaptiveMaxPool((5, 5))(x), np_pool(x, (2, 2)), rtol=1e-6)
    np.testing.assert_allclose(AdaptiveMeanPool((5, 5))(x), np_pool(x, (2, 2), mode="mean"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(AdaptiveMaxPool((10, 5))(y), np_pool(y, (2, 4)), rtol=1e-6)
    np.testing.assert_allclose(AdaptiveMeanPool((10, 5))(y), np_pool(y, (2, 4), mode="mean"), rtol=1e-5, atol=1e-6)
    assert GlobalMaxPool()(x).shape == (1, 1, 3, 2)
    assert GlobalMeanPool()(x).shape == (1, 1, 3, 2)
    np.testing.assert_allclose(MaxPool((2, 2))(x), np_pool(x, (2, 2)), rtol=1e-6)
    np.testing.assert_allclose(MeanPool((2, 2))(x), np_pool(x, (2, 2), mode="mean"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kw", [dict(), dict(stride=1), dict(stride=(1, 2)), dict(pad=1), dict(pad=(1, 0, 0, 2), stride=2), dict(pad=(2, 1))]
)
@pytest.mark.parametrize("L,mode", [(MaxPool, "max"), (MeanPool, "mean")])
def test_pool_values(L, mode, kw):
    x = _r(7, 6, 2, 2)
    np.testing.assert_allclose(L((3, 2), **kw)(x), np_pool(x, (3, 2), mode=mode, **kw), rtol=1e-5, atol=1e-6)


def test_global_pools_values():
    x = _r(6, 5, 3, 2)
    np.testing.assert_allclose(GlobalMaxPool()(x), x.max(axis=(0, 1), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(GlobalMeanPool()(x), x.mean(axis=(0, 1), keepdims=True), rtol=1e-5, atol=1e-6)
    # Flux's docstring: a 3-d input keeps 2 dims
    assert GlobalMaxPool()(_r(3, 5, 7)).shape == (1, 5, 7)
    assert GlobalMeanPool()(_r(2, 3, 4, 5, 6)).shape == (1, 1, 1, 5, 6)


def test_adaptive_window_formula():
    # stride = in ÷ out, k = in - (out-1)*stride (Flux's AdaptiveMaxPool): 7 -> 3 uses k=3, s=2
    x = _r(7, 9, 2, 1)
    np.testing.assert_allclose(AdaptiveMaxPool((3, 4))(x), np_pool(x, (3, 3), stride=(2, 2)), rtol=1e-6)
    np.testing.assert_allclose(AdaptiveMeanPool((3, 4))(x), np_pool(x, (3, 3), stride=(2, 2), mode="mean"), rtol=1e-5)
    assert AdaptiveMeanPool((7, 9))(x).shape == (7, 9, 2, 1)
    # Flux's docstring: MaxPool((4,4))(xs) ≈ AdaptiveMaxPool((25, 25))(xs), here on 20x20
    xs = _r(20, 20, 3, 2)
    np.testing.assert_allclose(MaxPool((4, 4))(xs), AdaptiveMaxPool((5, 5))(xs))
    np.testing.assert_allclose(MeanPool((4, 4))(xs), AdaptiveMeanPool((5, 5))(xs), rtol=1e-6)


def test_samepad_values_extra_pixel_at_start():
    x = np.arange(1, 6, dtype=np.float32).reshape(5, 1, 1)
    m = MaxPool((2,), pad=SamePad())
    assert m.pad == (1, 0)
    np.testing.assert_allclose(m(x)[:, 0, 0], [1, 3, 5])  # "SAME" (pad at the end) would give [2, 4, 5]
    np.testing.assert_allclose(MeanPool((2,), pad=SamePad())(x)[:, 0, 0], [0.5, 2.5, 4.5])
    x2 = _r(7, 6, 2, 1)
    for L, mode in ((MaxPool, "max"), (MeanPool, "mean")):
        np.testing.assert_allclose(L((4, 3), pad=SamePad(), stride=1)(x2),
                                   np_pool(x2, (4, 3), stride=1, pad=(2, 1, 1, 1), mode=mode), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k", [(1,), (2,), (3,), (4, 5), (6, 7, 8)])
@pytest.mark.parametrize("L", [MeanPool, MaxPool])
def test_samepad_windowsize(L, k):
    # Flux.jl/test/layers/conv.jl "$ltype SamePad windowsize $k"
    size = tuple(kk + 3 for kk in k) + (1, 1)
    expected = tuple(-(-n // kk) for n, kk in zip(size, k))
    assert outputsize(L(k, pad=SamePad()), size)[:-2] == expected
    if len(k) <= 2:
        assert L(k, pad=SamePad())(jnp.ones(size)).shape[:-2] == expected


def test_outputsize_table():
    # Flux.jl/test/outputsize.jl "conv" (pooling part)
    assert outputsize(AdaptiveMaxPool((2, 2)), (10, 10, 3, 1)) == (2, 2, 3, 1)
    assert outputsize(AdaptiveMeanPool((2, 2)), (10, 10, 3, 1)) == (2, 2, 3, 1)
    assert outputsize(GlobalMaxPool(), (10, 10, 3, 1)) == (1, 1, 3, 1)
    assert outputsize(GlobalMeanPool(), (10, 10, 3, 1)) == (1, 1, 3, 1)
    for L in (MaxPool, MeanPool):
        assert outputsize(L((2, 2)), (10, 10, 3, 1)) == (5, 5, 3, 1)
        assert outputsize(L((2, 2), stride=1), (5, 5, 4, 1)) == (4, 4, 4, 1)
        assert outputsize(L((2, 2), stride=2, pad=3), (5, 5, 2, 1)) == (5, 5, 2, 1)
    # Flux's docstrings
    xs = (100, 100, 3, 50)
    m = Chain(Conv((5, 5), (3, 7), pad=SamePad()), MaxPool((5, 5), pad=SamePad()))
    assert outputsize(m[0], xs) == (100, 100, 7, 50) and outputsize(m, xs) == (20, 20, 7, 50)
    assert outputsize(MaxPool((5,), pad=2, stride=(3,)), (100, 7, 50)) == (34, 7, 50)
    assert outputsize(Chain(Conv((5, 5), (3, 7)), MeanPool((5, 5), pad=SamePad())), xs) == (20, 20, 7, 50)
    assert outputsize(Chain(Conv((3, 3), (3, 7)), GlobalMaxPool()), xs) == (1, 1, 7, 50)


def test_printing():
    assert repr(MaxPool((2, 2))) == "MaxPool((2, 2))"
    assert repr(MaxPool((5,), pad=2, stride=(3,))) == "MaxPool((5,), pad=2, stride=3)"
    assert repr(MeanPool((5, 5), pad=SamePad())) == "MeanPool((5, 5), pad=2)"
    assert repr(MaxPool((2, 2), stride=1)) == "MaxPool((2, 2), stride=1)"
    assert repr(MaxPool((2, 2), pad=(1, 0, 1, 0))) == "MaxPool((2, 2), pad=(1, 0, 1, 0))"
    assert repr(MeanPool((3, 2), stride=(1, 2))) == "MeanPool((3, 2), stride=(1, 2))"
    assert repr(AdaptiveMaxPool((25, 25))) == "AdaptiveMaxPool((25, 25))"
    assert repr(AdaptiveMeanPool((4,))) == "AdaptiveMeanPool((4,))"
    assert repr(GlobalMaxPool()) == "GlobalMaxPool()"
    assert repr(GlobalMeanPool()) == "GlobalMeanPool()"
    s = repr(Chain(Conv((5, 5), (3, 7), pad=SamePad()), MaxPool((5, 5), pad=SamePad())))
    assert s.splitlines()[2] == "  MaxPool((5, 5), pad=2),"


def test_fields_and_no_params():
    m = MaxPool((3, 2), pad=SamePad())
    assert (m.k, m.stride, m.pad) == ((3, 2), (3, 2), (1, 1, 1, 0))
    assert MaxPool((2, 2), pad=1).pad == (1, 1, 1, 1)
    for lay in (m, MeanPool((2,)), GlobalMaxPool(), GlobalMeanPool(), AdaptiveMaxPool((2, 2)), AdaptiveMeanPool((2,))):
        assert len(fluxjax.params(lay)) == 0
        assert jax.tree_util.tree_leaves(lay) == []
    x = _r(8, 8, 2, 1)
    np.testing.assert_allclose(jax.jit(lambda m, x: m(x))(m, x), m(x))
    with pytest.raises(TypeError):
        MaxPool(2)


def test_dimension_mismatch():
    with pytest.raises(DimensionMismatch) as e:
        MaxPool((2, 2))(jnp.ones((10, 10, 3)))
    assert str(e.value) == "layer MaxPool((2, 2)) expects ndims(input) == 4, but got 10×10×3 Array{float32}"
    with pytest.raises(DimensionMismatch, match=r"layer MeanPool\(\(2,\)\) expects ndims\(input\) == 3"):
        MeanPool((2,))(jnp.ones((10, 10, 3, 1)))
    with pytest.raises(DimensionMismatch, match=r"layer AdaptiveMaxPool\(\(2, 2\)\) expects ndims\(input\) == 4"):
        AdaptiveMaxPool((2, 2))(jnp.ones((10, 3, 1)))
    with pytest.raises(DimensionMismatch, match="AdaptiveMeanPool"):
        AdaptiveMeanPool((5, 5))(jnp.ones((4, 10, 3, 1)))
    with pytest.raises(DimensionMismatch, match="GlobalMaxPool"):
        GlobalMaxPool()(jnp.ones((3, 4)))


@pytest.mark.parametrize(
    "lay,ref",
    [
        (MaxPool((2, 2), pad=1, stride=2), lambda a: np_pool(a, (2, 2), pad=1, stride=2)),
        (MeanPool((3, 2), pad=(1, 0, 0, 1), stride=1), lambda a: np_pool(a, (3, 2), pad=(1, 0, 0, 1), stride=1, mode="mean")),
        (AdaptiveMeanPool((2, 3)), lambda a: np_pool(a, (3, 3), stride=(2, 1), mode="mean")),
        (GlobalMeanPool(), lambda a: a.mean(axis=(0, 1), keepdims=True)),
        (GlobalMaxPool(), lambda a: a.max(axis=(0, 1), keepdims=True)),
    ],
)
def test_gradients_vs_finite_differences(lay, ref):
    x = _r(5, 5, 2, 2)
    c = _r(*lay(x).shape)
    (gx,) = fluxjax.gradient(lambda x: jnp.sum(c * lay(x)), jnp.asarray(x))
    np.testing.assert_allclose(gx, _fd(lambda a: float(np.sum(c * ref(a))), x), rtol=1e-3, atol=1e-4)
