"""`fluxjax.outputsize` (fluxjax/outputsize.py), ported from `Flux.jl/test/outputsize.jl` and the
docstring of `Flux.outputsize` (research/flux-tests.md D8)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax import modes
from fluxjax.errors import DimensionMismatch
from fluxjax.layers.basic import Chain, Dense
from fluxjax.layers.containers import Parallel, SkipConnection
from fluxjax.layers.conv import Conv, ConvTranspose, CrossCor, DepthwiseConv
from fluxjax.layers.normalise import BatchNorm, Dropout
from fluxjax.layers.pooling import AdaptiveMaxPool, AdaptiveMeanPool, GlobalMaxPool, GlobalMeanPool, MaxPool, MeanPool
from fluxjax.nnlib import relu, sigmoid, softmax
from fluxjax.outputsize import outputsize

try:
    from fluxjax.data import flatten
except ImportError:  # pragma: no cover - data.py is written by another helper
    def flatten(x):
        return x.T.reshape(x.shape[-1], -1).T


def vcat(*xs):
    return jnp.concatenate(xs, axis=0)


def cat3(*xs):
    return jnp.concatenate(xs, axis=2)


def test_basic():
    # Flux.jl/test/outputsize.jl "basic"
    m = Chain(Conv((3, 3), (3, 16)), Conv((3, 3), (16, 32)))
    assert outputsize(m, (10, 10, 3, 1)) == (6, 6, 32, 1)
    m = Dense(10, 5)
    with pytest.raises(DimensionMismatch):
        outputsize(m, (5, 2))
    assert outputsize(m, (10,), padbatch=True) == (5, 1)
    m = Chain(Dense(10, 8, sigmoid), Dense(8, 5), Dense(5, 2))
    assert outputsize(m, (10,), padbatch=True) == (2, 1)
    assert outputsize(m, (10, 30)) == (2, 30)
    with pytest.raises(DimensionMismatch):
        outputsize(Chain(Dense(10, 8, sigmoid), Dense(8, 4), Dense(5, 2)), (10,))
    assert outputsize(flatten, (5, 5, 3, 10)) == (75, 10)
    m = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), flatten, Dense(1024, 10))
    assert outputsize(m, (10, 10, 3, 50)) == (10, 50)
    assert outputsize(m, (10, 10, 3, 2)) == (10, 2)
    m = SkipConnection(Conv((3, 3), (3, 16), pad=1), cat3)
    assert outputsize(m, (10, 10, 3, 1)) == (10, 10, 19, 1)
    m = Parallel(cat3, Conv((3, 3), (3, 16), pad=1), lambda x: x)
    assert outputsize(m, (10, 10, 3, 1)) == (10, 10, 19, 1)


def test_docstring():
    # Flux.outputsize's docstring
    assert outputsize(Dense(10, 4), (10,), padbatch=True) == (4, 1)
    m = Chain(Conv((3, 3), (3, 16)), Conv((3, 3), (16, 32)))
    assert outputsize(m, (10, 10, 3), padbatch=True) == (6, 6, 32, 1)
    assert outputsize(m, (10, 10, 3, 64)) == (6, 6, 32, 64)
    with pytest.raises(DimensionMismatch) as e:
        outputsize(m, (10, 10, 7, 64))
    assert str(e.value).startswith(
        "layer Conv((3, 3), 3 => 16) expects size(input, 3) == 3, but got 10×10×7×64 Array{float32}. In Python terms:")
    assert outputsize([Dense(10, 4), Dense(4, 2)], (10, 1)) == (2, 1)  # a list of layers is a Chain
    assert outputsize((Dense(10, 4), Dense(4, 2)), (10, 1)) == (2, 1)


def test_multiple_inputs():
    # Flux.jl/test/outputsize.jl "multiple inputs"
    m = Parallel(vcat, Dense(2, 4, relu), Dense(3, 6, relu))
    assert outputsize(m, (2,), (3,)) == (10,)
    assert outputsize(m, ((2,), (3,))) == (10,)
    assert outputsize(m, (2,), (3,), padbatch=True) == (10, 1)
    assert outputsize(m, (2, 7), (3, 7)) == (10, 7)
    m = Chain(m, Dense(10, 13, jnp.tanh), softmax)
    assert outputsize(m, (2,), (3,)) == (13,)
    assert outputsize(m, ((2,), (3,))) == (13,)
    assert outputsize(m, (2,), (3,), padbatch=True) == (13, 1)
    assert outputsize(m, (2, 7), (3, 7)) == (13, 7)


def test_conv_table():
    # Flux.jl/test/outputsize.jl "conv"
    for L, cout in ((Conv, 16), (CrossCor, 16), (DepthwiseConv, 6)):
        assert outputsize(L((3, 3), (3, cout)), (10, 10, 3, 1)) == (8, 8, cout, 1)
        assert outputsize(L((3, 3), (3, cout), stride=2), (5, 5, 3, 1)) == (2, 2, cout, 1)
        assert outputsize(L((3, 3), (3, cout), stride=2, pad=3), (5, 5, 3, 1)) == (5, 5, cout, 1)
        m = L((3, 3), (3, cout), stride=2, pad=3, dilation=2)
        assert outputsize(m, (5, 5, 3, 1)) == (4, 4, cout, 1)
        assert outputsize(m, (5, 5, 3, 100)) == (4, 4, cout, 100)
        with pytest.raises(DimensionMismatch):
            outputsize(m, (5, 5, 2))
    assert outputsize(ConvTranspose((3, 3), (3, 16)), (8, 8, 3, 1)) == (10, 10, 16, 1)
    assert outputsize(ConvTranspose((3, 3), (3, 16), stride=2), (2, 2, 3, 1)) == (5, 5, 16, 1)
    assert outputsize(ConvTranspose((3, 3), (3, 16), stride=2, pad=3), (5, 5, 3, 1)) == (5, 5, 16, 1)
    assert outputsize(ConvTranspose((3, 3), (3, 16), stride=2, pad=3, dilation=2), (4, 4, 3, 1)) == (5, 5, 16, 1)
    assert outputsize(AdaptiveMaxPool((2, 2)), (10, 10, 3, 1)) == (2, 2, 3, 1)
    assert outputsize(AdaptiveMeanPool((2, 2)), (10, 10, 3, 1)) == (2, 2, 3, 1)
    assert outputsize(GlobalMaxPool(), (10, 10, 3, 1)) == (1, 1, 3, 1)
    assert outputsize(GlobalMeanPool(), (10, 10, 3, 1)) == (1, 1, 3, 1)
    for L in (MaxPool, MeanPool):
        assert outputsize(L((2, 2)), (10, 10, 3, 1)) == (5, 5, 3, 1)
        assert outputsize(L((2, 2), stride=1), (5, 5, 4, 1)) == (4, 4, 4, 1)
        assert outputsize(L((2, 2), stride=2, pad=3), (5, 5, 2, 1)) == (5, 5, 2, 1)


def test_normalisation_layers():
    # Flux.jl/test/outputsize.jl "normalisation"
    for m in (Dropout(0.1),):
        assert outputsize(m, (10, 10)) == (10, 10)
        assert outputsize(m, (10,), padbatch=True) == (10, 1)
    m = BatchNorm(3)
    assert outputsize(m, (32, 32, 3, 16)) == (32, 32, 3, 16)
    assert outputsize(m, (32, 32, 3), padbatch=True) == (32, 32, 3, 1)
    with pytest.raises(DimensionMismatch):
        outputsize(m, (32, 32, 5, 1))


def test_lenet():
    m = Chain(
        Conv((5, 5), (1, 6), relu), MaxPool((2, 2)), Conv((5, 5), (6, 16), relu), MaxPool((2, 2)),
        flatten, Dense(256, 120, relu), Dense(120, 84, relu), Dense(84, 10),
    )
    assert outputsize(m, (28, 28, 1, 1)) == (10, 1)
    assert outputsize(m, (28, 28, 1), padbatch=True) == (10, 1)
    assert outputsize(m[0:4], (28, 28, 1, 32)) == (4, 4, 16, 32)
    with pytest.raises(DimensionMismatch, match=r"layer Dense\(256 => 120, relu\) expects size\(input, 1\) == 256"):
        outputsize(m, (32, 32, 1, 1))


def test_no_computation_and_model_untouched():
    seen = []

    def probe(x):
        seen.append(isinstance(x, jax.core.Tracer))
        return x

    bn, dr = BatchNorm(3), Dropout(0.5)
    m = Chain(Conv((3, 3), (3, 3)), probe, bn, dr)
    modes.trainmode_(m)
    mu, key = bn.mu, dr.rng
    assert outputsize(m, (8, 8, 3, 4)) == (6, 6, 3, 4)
    assert seen == [True]  # traced abstractly, not run
    assert bn.mu is mu and dr.rng is key  # train-mode writes are discarded
    leaves = jax.tree_util.tree_leaves(m)
    assert not any(isinstance(v, jax.core.Tracer) for v in leaves)
    modes.testmode_(m)
    assert np.all(np.isfinite(m(jnp.ones((8, 8, 3, 4)))))


def test_bad_sizes():
    with pytest.raises(TypeError, match="outputsize: input sizes must be tuples of non-negative ints, got 2"):
        outputsize(Dense(2, 3), 2)
    with pytest.raises(TypeError, match=r"got \(2.0, 1\)"):
        outputsize(Dense(2, 3), (2.0, 1))
