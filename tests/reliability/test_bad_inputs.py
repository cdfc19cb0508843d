"""Bad inputs (issue #9): every public constructor and call, given wrong sizes, ranks, dtypes, negative
or zero sizes, out-of-range probabilities, non-array data or unknown keywords, raises a clear
`ValueError`/`TypeError` (`DimensionMismatch` is a `ValueError`) that names the layer and what it
expected, and leaves the model bit-for-bit as it was, with no tracer in it: eagerly, inside
`gradient`, and inside `fluxjax.jit`.
"""

from __future__ import annotations

import operator
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import _checks
from fluxjax import losses as L
from fluxjax.errors import DimensionMismatch

pytestmark = pytest.mark.reliability

F = fluxjax
DM = DimensionMismatch  # a ValueError


def _ones(*shape, dtype=np.float32):
    return jnp.ones(shape, dtype)


# ---------------------------------------------------------------------------------------------
# Constructors: (label, thunk, exception, fragments that the message must contain)

BAD_CONSTRUCTORS = [
    # sizes: zero, negative, non-integer, missing
    ("Dense(0, 3)", lambda: F.Dense(0, 3), ValueError, ["Dense", "positive"]),
    ("Dense(-1, 3)", lambda: F.Dense(-1, 3), ValueError, ["Dense", "positive"]),
    ("Dense(2.5, 3)", lambda: F.Dense(2.5, 3), ValueError, ["Dense", "positive integers"]),
    ("Dense(2)", lambda: F.Dense(2), ValueError, ["Dense"]),
    ("Dense(vector W)", lambda: F.Dense(_ones(3)), ValueError, ["Dense", "matrix"]),
    ("Dense(W, wrong bias)", lambda: F.Dense(_ones(3, 2), _ones(4)), DM, ["Dense", "(3,)", "(4,)"]),
    ("Dense('relu')", lambda: F.Dense(2, 3, "relu"), TypeError, ["Dense", "function", "relu"]),
    ("Conv zero kernel", lambda: F.Conv((0, 3), (1, 2)), ValueError, ["Conv", "kernel", "positive"]),
    ("Conv int kernel", lambda: F.Conv(3, (1, 2)), TypeError, ["Conv", "kernel size", "tuple"]),
    ("Conv float kernel", lambda: F.Conv((2.5, 2), (1, 2)), TypeError, ["Conv", "kernel size"]),
    ("Conv zero channels", lambda: F.Conv((3, 3), (0, 2)), ValueError, ["Conv", "channel", "positive"]),
    ("Conv stride=0", lambda: F.Conv((3, 3), (1, 2), stride=0), ValueError, ["Conv", "stride", "positive"]),
    ("Conv stride=-1", lambda: F.Conv((3, 3), (1, 2), stride=-1), ValueError, ["Conv", "stride"]),
    ("Conv stride=1.5", lambda: F.Conv((3, 3), (1, 2), stride=1.5), TypeError, ["Conv", "stride", "int"]),
    ("Conv stride 3-tuple", lambda: F.Conv((3, 3), (1, 2), stride=(1, 2, 3)), ValueError, ["Conv", "stride", "2 entries"]),
    ("Conv dilation=0", lambda: F.Conv((3, 3), (1, 2), dilation=0), ValueError, ["Conv", "dilation"]),
    ("Conv pad 3-tuple", lambda: F.Conv((3, 3), (1, 2), pad=(1, 2, 3)), ValueError, ["Conv", "pad", "4-tuple"]),
    ("Conv groups=0", lambda: F.Conv((3, 3), (2, 2), groups=0), ValueError, ["Conv", "groups", "positive"]),
    ("Conv groups=3", lambda: F.Conv((3, 3), (2, 6), groups=3), ValueError, ["Conv", "divisible", "groups=3"]),
    ("Conv('relu')", lambda: F.Conv((3, 3), (1, 2), "relu"), TypeError, ["Conv", "function"]),
    ("Conv(2-d weight)", lambda: F.Conv(_ones(3, 3)), ValueError, ["Conv", "weight"]),
    ("Conv(w, wrong bias)", lambda: F.Conv(_ones(2, 2, 1, 3), _ones(2)), DM, ["Conv", "(3,)", "(2,)"]),
    ("ConvTranspose stride=0", lambda: F.ConvTranspose((3, 3), (1, 2), stride=0), ValueError, ["ConvTranspose", "stride"]),
    ("ConvTranspose outpad=-1", lambda: F.ConvTranspose((3, 3), (1, 2), outpad=-1), ValueError, ["ConvTranspose", "outpad"]),
    ("ConvTranspose groups", lambda: F.ConvTranspose((3, 3), (3, 2), groups=2), ValueError, ["ConvTranspose", "groups=2"]),
    ("CrossCor zero channels", lambda: F.CrossCor((3,), (1, 0)), ValueError, ["CrossCor", "positive"]),
    ("DepthwiseConv not a multiple", lambda: F.DepthwiseConv((3, 3), (2, 3)), ValueError, ["DepthwiseConv", "multiple"]),
    ("DepthwiseConv int kernel", lambda: F.DepthwiseConv(3, (2, 4)), TypeError, ["DepthwiseConv", "kernel"]),
    ("MaxPool zero window", lambda: F.MaxPool((0, 2)), ValueError, ["MaxPool", "positive"]),
    ("MaxPool int window", lambda: F.MaxPool(2), TypeError, ["MaxPool", "tuple"]),
    ("MaxPool stride=0", lambda: F.MaxPool((2, 2), stride=0), ValueError, ["MaxPool", "stride", "positive"]),
    ("AdaptiveMaxPool zero", lambda: F.AdaptiveMaxPool((0, 2)), ValueError, ["AdaptiveMaxPool", "positive"]),
    ("AdaptiveMeanPool int", lambda: F.AdaptiveMeanPool(3), TypeError, ["AdaptiveMeanPool", "tuple"]),
    ("Upsample scale=0", lambda: F.Upsample(scale=0), ValueError, ["Upsample", "scale", "positive"]),
    ("Upsample scale=-2", lambda: F.Upsample(scale=-2), ValueError, ["Upsample", "scale"]),
    ("Upsample nearest scale=1.5", lambda: F.Upsample(scale=1.5), ValueError, ["Upsample", "integers"]),
    ("Upsample size=(0, 3)", lambda: F.Upsample(size=(0, 3)), ValueError, ["Upsample", "size"]),
    ("Upsample mode", lambda: F.Upsample("cubic", scale=2), ValueError, ["Upsample", "cubic", "bilinear"]),
    ("Upsample neither", lambda: F.Upsample(), ValueError, ["scale or size"]),
    ("PixelShuffle(0)", lambda: F.PixelShuffle(0), ValueError, ["PixelShuffle", "positive"]),
    ("PixelShuffle(1.5)", lambda: F.PixelShuffle(1.5), ValueError, ["PixelShuffle", "positive integer"]),
    ("BatchNorm(0)", lambda: F.BatchNorm(0), ValueError, ["BatchNorm", "positive"]),
    ("BatchNorm(2.0)", lambda: F.BatchNorm(2.0), ValueError, ["BatchNorm", "channels"]),
    ("BatchNorm momentum=2", lambda: F.BatchNorm(3, momentum=2), ValueError, ["BatchNorm", "momentum", "[0, 1]"]),
    ("BatchNorm momentum='a'", lambda: F.BatchNorm(3, momentum="a"), TypeError, ["BatchNorm", "momentum", "number"]),
    ("BatchNorm eps=0", lambda: F.BatchNorm(3, eps=0), ValueError, ["BatchNorm", "eps", "positive"]),
    ("BatchNorm active='yes'", lambda: F.BatchNorm(3, active="yes"), ValueError, ["BatchNorm", "active"]),
    ("BatchNorm('relu')", lambda: F.BatchNorm(3, "relu"), TypeError, ["BatchNorm", "function"]),
    ("InstanceNorm(-2)", lambda: F.InstanceNorm(-2), ValueError, ["InstanceNorm", "positive"]),
    ("InstanceNorm eps=-1", lambda: F.InstanceNorm(2, eps=-1.0), ValueError, ["InstanceNorm", "eps"]),
    ("GroupNorm(4, 3)", lambda: F.GroupNorm(4, 3), ValueError, ["GroupNorm", "divisible"]),
    ("GroupNorm(4, 0)", lambda: F.GroupNorm(4, 0), ValueError, ["GroupNorm", "positive"]),
    ("GroupNorm('relu')", lambda: F.GroupNorm(4, 2, "relu"), TypeError, ["GroupNorm", "function"]),
    ("LayerNorm(0)", lambda: F.LayerNorm(0), ValueError, ["LayerNorm", "positive"]),
    ("LayerNorm(3, 'relu')", lambda: F.LayerNorm(3, "relu"), ValueError, ["LayerNorm", "relu"]),
    ("LayerNorm eps=-1", lambda: F.LayerNorm(3, eps=-1), ValueError, ["LayerNorm", "eps"]),
    # probabilities outside [0, 1]
    ("Dropout(1.5)", lambda: F.Dropout(1.5), ValueError, ["Dropout", "[0, 1]", "1.5"]),
    ("Dropout(-0.1)", lambda: F.Dropout(-0.1), ValueError, ["Dropout", "[0, 1]"]),
    ("Dropout(nan)", lambda: F.Dropout(float("nan")), ValueError, ["Dropout", "[0, 1]"]),
    ("Dropout('a')", lambda: F.Dropout("a"), ValueError, ["Dropout", "number"]),
    ("Dropout(True)", lambda: F.Dropout(True), ValueError, ["Dropout"]),
    ("Dropout dims='a'", lambda: F.Dropout(0.5, dims="a"), TypeError, ["Dropout", "dims"]),
    ("Dropout active=1", lambda: F.Dropout(0.5, active=2), ValueError, ["Dropout", "active"]),
    ("AlphaDropout(2)", lambda: F.AlphaDropout(2), ValueError, ["AlphaDropout", "[0, 1]"]),
    ("MHA dropout_prob=2", lambda: F.MultiHeadAttention(4, nheads=2, dropout_prob=2.0), ValueError, ["Dropout", "[0, 1]"]),
    ("Embedding(0, 3)", lambda: F.Embedding(0, 3), ValueError, ["Embedding", "positive"]),
    ("Embedding(3, -1)", lambda: F.Embedding(3, -1), ValueError, ["Embedding", "positive"]),
    ("Embedding padding_idx", lambda: F.Embedding(3, 2, padding_idx=3), ValueError, ["Embedding", "padding_idx", "0:2"]),
    ("Embedding(3-d W)", lambda: F.Embedding(_ones(2, 2, 2)), ValueError, ["Embedding", "matrix"]),
    ("RNN(0, 3)", lambda: F.RNN(0, 3), ValueError, ["RNNCell", "positive"]),
    ("RNN(2, 3, 'tanh')", lambda: F.RNN(2, 3, "tanh"), TypeError, ["RNNCell", "function"]),
    ("LSTM(2, -3)", lambda: F.LSTM(2, -3), ValueError, ["LSTMCell", "positive"]),
    ("LSTM(2, 3, tanh)", lambda: F.LSTM(2, 3, jnp.tanh), TypeError, ["LSTM"]),
    ("GRU(2)", lambda: F.GRU(2), ValueError, ["GRUCell", "positive"]),
    ("GRUv3((2, 3, 4))", lambda: F.GRUv3((2, 3, 4)), ValueError, ["GRUv3Cell", "(in, out)"]),
    ("RNN(LSTMCell)", lambda: F.RNN(F.LSTMCell(2, 3)), TypeError, ["RNN", "RNNCell", "Recurrence"]),
    ("RNNCell(Wi, bad Wh)", lambda: F.RNNCell(_ones(3, 2), _ones(2, 2)), ValueError, ["RNNCell", "Wh", "(3, 3)"]),
    ("LSTMCell(Wi not 4*out)", lambda: F.LSTMCell(_ones(5, 2), _ones(5, 1)), ValueError, ["LSTMCell", "4*out"]),
    ("Recurrence(3)", lambda: F.Recurrence(3), TypeError, ["Recurrence", "callable"]),
    ("MHA(0)", lambda: F.MultiHeadAttention(0), ValueError, ["MultiHeadAttention", "positive"]),
    ("MHA nheads", lambda: F.MultiHeadAttention(8, nheads=3), ValueError, ["MultiHeadAttention", "divisible", "nheads = 3"]),
    ("MHA nheads=0", lambda: F.MultiHeadAttention(8, nheads=0), ValueError, ["MultiHeadAttention", "nheads"]),
    ("MHA dims", lambda: F.MultiHeadAttention((8, 8)), ValueError, ["MultiHeadAttention", "dims"]),
    ("Bilinear(0, 2, 3)", lambda: F.Bilinear(0, 2, 3), ValueError, ["Bilinear", "positive"]),
    ("Bilinear('a')", lambda: F.Bilinear("a"), TypeError, ["Bilinear", "sizes"]),
    ("Bilinear(2-d W)", lambda: F.Bilinear(_ones(2, 2)), ValueError, ["Bilinear", "3-array"]),
    ("Scale(0)", lambda: F.Scale(0), ValueError, ["Scale", "positive"]),
    ("Scale(2, 'relu')", lambda: F.Scale(2, "relu"), TypeError, ["Scale", "function"]),
    ("Scale()", lambda: F.Scale(), TypeError, ["Scale", "size"]),
    ("Maxout(f, 0)", lambda: F.Maxout(lambda: F.Dense(2, 2), 0), ValueError, ["Maxout", "positive"]),
    ("Maxout()", lambda: F.Maxout(), ValueError, ["Maxout", "no sub-layers"]),
    ("Maxout(3)", lambda: F.Maxout(3), TypeError, ["Maxout", "callable"]),
    ("Parallel(+)", lambda: F.Parallel(operator.add), ValueError, ["Parallel", "no sub-layers"]),
    ("Parallel(1, Dense)", lambda: F.Parallel(1, F.Dense(2, 2)), TypeError, ["Parallel", "connection", "function"]),
    ("Parallel(+, 3)", lambda: F.Parallel(operator.add, 3), TypeError, ["Parallel", "callable"]),
    ("SkipConnection(1, +)", lambda: F.SkipConnection(1, operator.add), TypeError, ["SkipConnection", "callable"]),
    ("PairwiseFusion(+)", lambda: F.PairwiseFusion(operator.add), ValueError, ["PairwiseFusion", "no sub-layers"]),
    ("PairwiseFusion(None, ...)", lambda: F.PairwiseFusion(None, F.Dense(2, 2)), TypeError, ["PairwiseFusion", "function"]),
    ("Chain(1)", lambda: F.Chain(1), TypeError, ["Chain", "callable", "int"]),
    ("Chain(layers=...)", lambda: F.Chain(layers=F.Dense(2, 2)), ValueError, ["Chain", "reserved"]),
    # DataLoader: non-array data, mismatched observations, bad batch sizes
    ("DataLoader(None)", lambda: F.DataLoader(None), TypeError, ["DataLoader", "NoneType", "array"]),
    ("DataLoader(object)", lambda: F.DataLoader(object()), TypeError, ["DataLoader", "object"]),
    ("DataLoader(generator)", lambda: F.DataLoader(i for i in range(3)), TypeError, ["DataLoader", "generator"]),
    ("DataLoader(strings)", lambda: F.DataLoader(np.array(["a", "b"])), TypeError, ["DataLoader", "numeric"]),
    ("DataLoader('abc')", lambda: F.DataLoader("abc"), TypeError, ["DataLoader", "str"]),
    ("DataLoader((x, 'y'))", lambda: F.DataLoader((np.ones((2, 3)), "y")), TypeError, ["DataLoader", "data[1]"]),
    # (a list of observations, ragged or not, is MLUtils' Vector container: it must match the other arrays)
    ("DataLoader(ragged)", lambda: F.DataLoader(([[1, 2], [3]], np.ones(3))), ValueError,
     ["DataLoader", "same number of observations"]),
    ("DataLoader(scalar)", lambda: F.DataLoader(3.0), ValueError, ["DataLoader", "0-dimensional"]),
    ("DataLoader(())", lambda: F.DataLoader(()), ValueError, ["DataLoader", "no arrays"]),
    ("DataLoader({})", lambda: F.DataLoader({}), ValueError, ["DataLoader", "no arrays"]),
    ("DataLoader(mismatch)", lambda: F.DataLoader((np.ones((2, 3)), np.ones(4))), DM,
     ["DataLoader", "data[0]: 3", "data[1]: 4"]),
    ("DataLoader batchsize=0", lambda: F.DataLoader(np.ones((2, 3)), batchsize=0), ValueError, ["DataLoader", "batchsize"]),
    ("DataLoader batchsize=1.5", lambda: F.DataLoader(np.ones((2, 3)), batchsize=1.5), TypeError, ["DataLoader", "batchsize"]),
]


@pytest.mark.parametrize("label,thunk,exc,fragments", BAD_CONSTRUCTORS, ids=[c[0] for c in BAD_CONSTRUCTORS])
def test_bad_constructor_arguments_raise_clear_errors(label, thunk, exc, fragments):
    with pytest.raises(exc) as info:
        thunk()
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{label}: {frag!r} not in {msg!r}"


# ---------------------------------------------------------------------------------------------
# Unknown keyword arguments: a TypeError naming the constructor and the keyword

UNKNOWN_KW = [
    ("Dense", lambda **kw: F.Dense(2, 3, **kw)),
    ("Conv", lambda **kw: F.Conv((2, 2), (1, 2), **kw)),
    ("ConvTranspose", lambda **kw: F.ConvTranspose((2, 2), (1, 2), **kw)),
    ("CrossCor", lambda **kw: F.CrossCor((2, 2), (1, 2), **kw)),
    ("DepthwiseConv", lambda **kw: F.DepthwiseConv((2, 2), (2, 2), **kw)),
    ("MaxPool", lambda **kw: F.MaxPool((2, 2), **kw)),
    ("MeanPool", lambda **kw: F.MeanPool((2, 2), **kw)),
    ("AdaptiveMaxPool", lambda **kw: F.AdaptiveMaxPool((2, 2), **kw)),
    ("AdaptiveMeanPool", lambda **kw: F.AdaptiveMeanPool((2, 2), **kw)),
    ("GlobalMaxPool", lambda **kw: F.GlobalMaxPool(**kw)),
    ("GlobalMeanPool", lambda **kw: F.GlobalMeanPool(**kw)),
    ("Upsample", lambda **kw: F.Upsample(scale=2, **kw)),
    ("PixelShuffle", lambda **kw: F.PixelShuffle(2, **kw)),
    ("BatchNorm", lambda **kw: F.BatchNorm(3, **kw)),
    ("LayerNorm", lambda **kw: F.LayerNorm(3, **kw)),
    ("InstanceNorm", lambda **kw: F.InstanceNorm(3, **kw)),
    ("GroupNorm", lambda **kw: F.GroupNorm(4, 2, **kw)),
    ("Dropout", lambda **kw: F.Dropout(0.5, **kw)),
    ("AlphaDropout", lambda **kw: F.AlphaDropout(0.5, **kw)),
    ("Embedding", lambda **kw: F.Embedding(3, 2, **kw)),
    ("RNN", lambda **kw: F.RNN(2, 3, **kw)),
    ("LSTM", lambda **kw: F.LSTM(2, 3, **kw)),
    ("GRU", lambda **kw: F.GRU(2, 3, **kw)),
    ("GRUv3", lambda **kw: F.GRUv3(2, 3, **kw)),
    ("RNNCell", lambda **kw: F.RNNCell(2, 3, **kw)),
    ("LSTMCell", lambda **kw: F.LSTMCell(2, 3, **kw)),
    ("GRUCell", lambda **kw: F.GRUCell(2, 3, **kw)),
    ("GRUv3Cell", lambda **kw: F.GRUv3Cell(2, 3, **kw)),
    ("Recurrence", lambda **kw: F.Recurrence(F.RNNCell(2, 3), **kw)),
    ("MultiHeadAttention", lambda **kw: F.MultiHeadAttention(4, nheads=2, **kw)),
    ("Bilinear", lambda **kw: F.Bilinear(2, 2, 3, **kw)),
    ("Scale", lambda **kw: F.Scale(2, **kw)),
    ("Maxout", lambda **kw: F.Maxout(F.Dense(2, 2), **kw)),
    ("SkipConnection", lambda **kw: F.SkipConnection(F.Dense(2, 2), operator.add, **kw)),
    ("SamePad", lambda **kw: F.SamePad(**kw)),
    ("DataLoader", lambda **kw: F.DataLoader(np.ones((2, 3)), **kw)),
    ("Adam", lambda **kw: F.Adam(**kw)),
    ("Descent", lambda **kw: F.Descent(**kw)),
    ("OptimiserChain", lambda **kw: F.OptimiserChain(**kw)),
    ("setup", lambda **kw: F.setup(F.Adam(), F.Dense(2, 2), **kw)),
    ("train_", lambda **kw: F.train_(lambda m, x: 0.0, F.Dense(2, 2), [], None, **kw)),
]


@pytest.mark.parametrize("name,ctor", UNKNOWN_KW, ids=[c[0] for c in UNKNOWN_KW])
def test_unknown_keyword_is_a_type_error_naming_the_constructor(name, ctor):
    with pytest.raises(TypeError) as info:
        ctor(bogus_option=1)
    msg = str(info.value)
    assert name in msg
    assert "bogus_option" in msg or "takes no arguments" in msg, msg


@pytest.mark.parametrize("ctor", [F.Chain, lambda *a, **k: F.Parallel(operator.add, *a, **k)], ids=["Chain", "Parallel"])
def test_containers_read_keywords_as_named_layers_and_say_so(ctor):
    with pytest.raises(ValueError, match="not both.*bogus_option"):
        ctor(F.Dense(2, 2), bogus_option=F.Dense(2, 2))
    with pytest.raises(TypeError, match="callable, got int for 'bogus_option'"):
        ctor(bogus_option=1)


# ---------------------------------------------------------------------------------------------
# Calls: (label, model factory, bad input(s), exception, fragments). Each runs eagerly, in train mode,
# inside gradient and inside fluxjax.jit, and must leave the model untouched.

x2, x3, x4 = _ones(3, 4), _ones(4, 5, 2), _ones(5, 5, 3, 2)

BAD_CALLS = [
    ("Dense wrong size", lambda: F.Dense(2, 3), (x2,), DM, ["Dense(2 => 3)", "== 2", "3×4 Matrix"]),
    ("Dense scalar", lambda: F.Dense(2, 3), (jnp.float32(1.0),), DM, ["Dense(2 => 3)", "Scalar"]),
    ("Dense string", lambda: F.Dense(2, 3), ("ab",), TypeError, ["Dense(2 => 3)", "numeric", "str"]),
    ("Dense None", lambda: F.Dense(2, 3), (None,), TypeError, ["Dense(2 => 3)", "numeric", "None"]),
    ("Dense ragged list", lambda: F.Dense(2, 3), ([[1.0, 2.0], [3.0]],), TypeError, ["Dense(2 => 3)", "numeric"]),
    ("Dense object array", lambda: F.Dense(2, 3), (np.array(["a", "b"]),), TypeError, ["Dense(2 => 3)", "numeric"]),
    ("Chain inner mismatch", lambda: F.Chain(F.Dense(2, 3), F.Dense(4, 1)), (_ones(2, 5),), DM,
     ["Dense(4 => 1)", "== 4", "3×5"]),
    ("Conv rank", lambda: F.Conv((2, 2), (3, 4)), (x2,), DM, ["Conv((2, 2), 3 => 4)", "ndims(input) == 4"]),
    ("Conv channels", lambda: F.Conv((2, 2), (2, 4)), (x4,), DM, ["Conv((2, 2), 2 => 4)", "size(input, 3) == 2"]),
    ("Conv input smaller than kernel", lambda: F.Conv((7, 7), (3, 4)), (x4,), DM,
     ["Conv((7, 7), 3 => 4)", "at least 7", "5×5×3×2"]),
    ("Conv string", lambda: F.Conv((2, 2), (3, 4)), ("abc",), TypeError, ["Conv((2, 2), 3 => 4)", "numeric"]),
    ("ConvTranspose channels", lambda: F.ConvTranspose((2, 2), (2, 4)), (x4,), DM,
     ["ConvTranspose((2, 2), 2 => 4)", "size(input, 3) == 2"]),
    ("ConvTranspose over-padded", lambda: F.ConvTranspose((2, 2), (3, 4), pad=3), (_ones(1, 1, 3, 1),), DM,
     ["ConvTranspose((2, 2), 3 => 4, pad=3)", "no output"]),
    ("CrossCor rank", lambda: F.CrossCor((2, 2), (3, 4)), (x4[0],), DM, ["CrossCor((2, 2), 3 => 4)", "ndims"]),
    ("CrossCor too small", lambda: F.CrossCor((3, 9), (3, 4), pad=1), (x4,), DM, ["CrossCor", "dim 2"]),
    ("DepthwiseConv channels", lambda: F.DepthwiseConv((2, 2), (2, 4)), (x4,), DM, ["groups=2", "== 2"]),
    ("MaxPool rank", lambda: F.MaxPool((2, 2)), (x2,), DM, ["MaxPool((2, 2))", "ndims(input) == 4"]),
    ("MaxPool too small", lambda: F.MaxPool((7, 7)), (x4,), DM, ["MaxPool((7, 7))", "at least 7"]),
    ("MeanPool None", lambda: F.MeanPool((2, 2)), (None,), TypeError, ["MeanPool((2, 2))", "numeric"]),
    ("GlobalMaxPool rank", lambda: F.GlobalMaxPool(), (x2,), DM, ["GlobalMaxPool()", ">= 3"]),
    ("GlobalMeanPool string", lambda: F.GlobalMeanPool(), ("x",), TypeError, ["GlobalMeanPool()", "numeric"]),
    ("AdaptiveMeanPool too big", lambda: F.AdaptiveMeanPool((9, 9)), (x4,), DM, ["AdaptiveMeanPool((9, 9))"]),
    ("AdaptiveMaxPool rank", lambda: F.AdaptiveMaxPool((2, 2)), (x3,), DM, ["AdaptiveMaxPool((2, 2))", "== 4"]),
    ("Upsample rank", lambda: F.Upsample(scale=2), (x2,), DM, ["Upsample(:nearest, scale = 2)", ">= 3"]),
    ("Upsample bilinear 3-d", lambda: F.Upsample("bilinear", scale=2), (x3,), DM, ["Upsample(:bilinear", "== 4"]),
    ("Upsample bilinear scale 3-tuple", lambda: F.Upsample("bilinear", scale=(2, 2, 2)), (x4,), DM,
     ["Upsample(:bilinear", "3 entries"]),
    ("PixelShuffle channels", lambda: F.PixelShuffle(2), (x4,), DM, ["PixelShuffle(2)", "divisible", "5×5×3×2"]),
    ("PixelShuffle rank", lambda: F.PixelShuffle(2), (_ones(4),), DM, ["PixelShuffle(2)"]),
    ("BatchNorm channels", lambda: F.BatchNorm(2), (x2,), DM, ["BatchNorm(2)", "== 2", "3×4"]),
    ("BatchNorm vector", lambda: F.BatchNorm(3), (_ones(3),), DM, ["BatchNorm(3)", "3 Vector"]),
    ("BatchNorm string", lambda: F.BatchNorm(3), ("abc",), TypeError, ["BatchNorm(3)", "numeric"]),
    ("LayerNorm size", lambda: F.LayerNorm(4), (x2,), DM, ["LayerNorm(4)", "(4,)", "3×4"]),
    ("InstanceNorm rank", lambda: F.InstanceNorm(3), (x2,), DM, ["InstanceNorm(3", "spatial"]),
    ("InstanceNorm channels", lambda: F.InstanceNorm(2, affine=True), (x4,), DM, ["InstanceNorm(2)", "== 2"]),
    ("GroupNorm channels", lambda: F.GroupNorm(4, 2), (x4,), DM, ["GroupNorm(4, 2)", "== 4"]),
    ("Dropout string", lambda: F.Dropout(0.5), ("abc",), TypeError, ["Dropout(0.5", "numeric"]),
    ("Embedding out of range", lambda: F.Embedding(3, 2), (jnp.array([0, 3]),), IndexError,
     ["Embedding(3 => 2)", "index 3", "0:2"]),
    ("Embedding negative", lambda: F.Embedding(3, 2), (jnp.array([-1]),), IndexError, ["Embedding(3 => 2)", "-1"]),
    ("Embedding one-hot size", lambda: F.Embedding(3, 2), (jnp.ones((4, 2), bool),), DM, ["Embedding(3 => 2)", "== 3"]),
    ("Embedding string", lambda: F.Embedding(3, 2), ("a",), TypeError, ["Embedding(3 => 2)", "numeric"]),
    ("RNN size", lambda: F.RNN(2, 3), (_ones(3, 4, 2),), DM, ["RNN(2 => 3, tanh)", "== 2"]),
    ("RNN rank", lambda: F.RNN(2, 3), (_ones(2),), DM, ["RNN(2 => 3, tanh)", "(in, len)"]),
    ("RNN state size", lambda: F.RNN(2, 3), (_ones(2, 4, 5), _ones(4)), DM, ["RNN(2 => 3, tanh)", "(3,)", "4 Vector"]),
    ("RNN state batch", lambda: F.RNN(2, 3), (_ones(2, 4, 5), _ones(3, 2)), DM, ["RNN(2 => 3, tanh)", "batch (5,)"]),
    ("LSTM state not a tuple", lambda: F.LSTM(2, 3), (_ones(2, 4, 5), _ones(3)), DM, ["LSTM(2 => 3)", "(h, c)"]),
    ("LSTM state size", lambda: F.LSTM(2, 3), (_ones(2, 4, 5), (_ones(4), _ones(3))), DM, ["LSTM(2 => 3)", "4 Vector"]),
    ("GRU rank 4", lambda: F.GRU(2, 3), (_ones(2, 4, 5, 1),), DM, ["GRU(2 => 3)"]),
    ("GRUv3 size", lambda: F.GRUv3(2, 3), (_ones(3, 4),), DM, ["GRUv3(2 => 3)", "== 2"]),
    ("RNNCell state", lambda: F.RNNCell(2, 3), (_ones(2, 5), _ones(4, 5)), DM, ["RNNCell(2 => 3, tanh)", "4×5"]),
    ("LSTMCell rank", lambda: F.LSTMCell(2, 3), (_ones(2, 3, 4),), DM, ["LSTMCell(2 => 3)", "vector"]),
    ("GRUCell size", lambda: F.GRUCell(2, 3), (_ones(3),), DM, ["GRUCell(2 => 3)", "== 2"]),
    ("MHA size", lambda: F.MultiHeadAttention(8, nheads=2), (_ones(7, 3, 2),), DM,
     ["MultiHeadAttention(8; nheads=2)", "== 8", "7×3×2"]),
    ("MHA vector", lambda: F.MultiHeadAttention(8, nheads=2), (_ones(8),), DM, ["MultiHeadAttention(8"]),
    ("MHA batch", lambda: F.MultiHeadAttention(8, nheads=2), (_ones(8, 3, 2), _ones(8, 3, 3)), DM,
     ["MultiHeadAttention(8", "batch"]),
    ("MHA key/value length", lambda: F.MultiHeadAttention(8, nheads=2), (_ones(8, 3, 2), _ones(8, 3, 2), _ones(8, 4, 2)),
     DM, ["MultiHeadAttention(8", "same length"]),
    ("MHA mask", lambda: F.MultiHeadAttention(8, nheads=2), (_ones(8, 3, 2), None, None, None, jnp.ones((5, 5), bool)),
     DM, ["MultiHeadAttention(8", "mask", "(5, 5)", "(3, 3, 2, 2)"]),
    ("Bilinear size", lambda: F.Bilinear(2, 3, 4), (_ones(2, 5), _ones(2, 5)), DM, ["Bilinear((2, 3) => 4)", "== 3"]),
    ("Bilinear batch", lambda: F.Bilinear(2, 3, 4), (_ones(2, 5), _ones(3, 4)), DM, ["Bilinear((2, 3) => 4)", "columns"]),
    ("Bilinear 3-tuple", lambda: F.Bilinear(2, 2, 4), ((_ones(2),) * 3,), ValueError, ["Bilinear(2 => 4)", "2 inputs"]),
    ("Scale broadcast", lambda: F.Scale(3), (_ones(2, 5),), DM, ["Scale(3)", "(3,)", "2×5"]),
    ("Maxout inner", lambda: F.Maxout(lambda: F.Dense(2, 2), 2), (_ones(3, 1),), DM, ["Dense(2 => 2)"]),
    ("Parallel count", lambda: F.Parallel(operator.add, F.Dense(2, 2), F.Dense(2, 2)), (_ones(2), _ones(2), _ones(2)), ValueError,
     ["Parallel", "3 inputs"]),
    ("Parallel combine", lambda: F.Parallel(operator.add, F.Dense(2, 3), F.Dense(2, 4)), (_ones(2, 5),), DM,
     ["Parallel(+", "3×5", "4×5"]),
    ("SkipConnection combine", lambda: F.SkipConnection(F.Dense(2, 3), operator.add), (_ones(2, 4),), DM,
     ["SkipConnection(Dense(2 => 3), +)", "3×4", "2×4"]),
    ("PairwiseFusion count", lambda: F.PairwiseFusion(operator.add, F.Dense(2, 2), F.Dense(2, 2)), ((_ones(2),) * 3,), ValueError,
     ["PairwiseFusion", "3 inputs"]),
    ("PairwiseFusion combine", lambda: F.PairwiseFusion(operator.add, F.Dense(2, 3), F.Dense(3, 1)), (_ones(2, 4), _ones(2, 4)),
     DM, ["PairwiseFusion", "3×4", "2×4"]),
]


def _modes():
    return ("eager", "trainmode", "gradient", "jit")


def _run(mode, m, args):
    if mode == "eager":
        return m(*args)
    if mode == "trainmode":
        fluxjax.trainmode_(m)
        try:
            return m(*args)
        finally:
            fluxjax.testmode_(m, "auto")
    loss = lambda m: sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(m(*args)))
    if mode == "gradient":
        return fluxjax.gradient(loss, m)
    return fluxjax.jit(lambda m: fluxjax.gradient(loss, m))(m)


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize("label,factory,args,exc,fragments", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_clear_error_and_leaves_model_untouched(label, factory, args, exc, fragments, mode, untouched):
    fluxjax.seed_(0)
    m = factory()
    check = untouched(m)
    with pytest.raises(exc) as info:
        _run(mode, m, args)
    msg = str(info.value).replace(", active=true", "")  # train mode shows in the layer's name
    for frag in fragments:
        assert frag in msg, f"{label} [{mode}]: {frag!r} not in {msg!r}"
    check()
    if mode != "trainmode":
        assert all(getattr(lay, "active", None) is None for lay in fluxjax.modules(m))


# ---------------------------------------------------------------------------------------------
# Dtypes: Float64 into a Float32 layer warns once and computes in Float32; integers convert silently


def _f64_cases():
    rng = np.random.default_rng(0)
    a = lambda *s: rng.standard_normal(s)  # NumPy float64: no jax x64 needed to feed a Float64 array
    return [
        ("Dense", lambda: F.Dense(3, 2), (a(3, 4),)),
        ("Conv", lambda: F.Conv((2, 2), (2, 3)), (a(4, 4, 2, 1),)),
        ("ConvTranspose", lambda: F.ConvTranspose((2, 2), (2, 3)), (a(4, 4, 2, 1),)),
        ("CrossCor", lambda: F.CrossCor((2, 2), (2, 3)), (a(4, 4, 2, 1),)),
        ("BatchNorm", lambda: F.BatchNorm(2), (a(2, 5),)),
        ("LayerNorm", lambda: F.LayerNorm(3), (a(3, 2),)),
        ("InstanceNorm", lambda: F.InstanceNorm(2, affine=True), (a(3, 2, 2),)),
        ("GroupNorm", lambda: F.GroupNorm(4, 2), (a(3, 4, 2),)),
        ("RNN", lambda: F.RNN(2, 3), (a(2, 4, 2),)),
        ("LSTMCell", lambda: F.LSTMCell(2, 3), (a(2, 4),)),
        ("MultiHeadAttention", lambda: F.MultiHeadAttention(4, nheads=2), (a(4, 3, 2),)),
        ("Bilinear", lambda: F.Bilinear(2, 3, 4), (a(2, 5), a(3, 5))),
        ("Scale", lambda: F.Scale(3), (a(3, 2),)),
    ]


@pytest.mark.parametrize("name,factory,args", _f64_cases(), ids=[c[0] for c in _f64_cases()])
def test_float64_input_warns_once_and_stays_float32(name, factory, args, monkeypatch, untouched):
    monkeypatch.setattr(_checks, "_warned", set())
    m = factory()
    check = untouched(m)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        y1 = m(*args)
        y2 = m(*args)
    mine = [w for w in rec if "float64" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in rec]
    msg = str(mine[0].message)
    assert name in msg and "float32" in msg and "f32" in msg
    for y in (y1, y2):
        for leaf in jax.tree_util.tree_leaves(y):
            assert leaf.dtype == jnp.float32
    want = m(*[np.asarray(x, np.float32) for x in args])
    for a, b in zip(jax.tree_util.tree_leaves(y1), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(a, b)
    check()


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.bool_])
@pytest.mark.parametrize("factory", [lambda: F.Conv((2, 2), (1, 2)), lambda: F.Dense(4, 2), lambda: F.BatchNorm(1)],
                         ids=["Conv", "Dense", "BatchNorm"])
def test_integer_images_convert_silently_as_flux(factory, dtype, untouched):
    """Flux's `_match_eltype` converts Integer (and Bool) arrays to the layer's float type without a
    warning; a `uint8` image batch therefore gives exactly the Float32 result."""
    m = factory()
    check = untouched(m)
    x = np.random.default_rng(1).integers(0, 2 if dtype is np.bool_ else 255, (4, 4, 1, 3)).astype(dtype)
    if isinstance(m, F.Dense):
        x = x[:, :, 0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = m(x)
    assert y.dtype == jnp.float32
    np.testing.assert_array_equal(y, m(np.asarray(x, np.float32)))
    check()


def test_float64_layer_keeps_float64(untouched):
    """Normalisation layers compute in their own parameter type: an f64 model takes Float64 input
    without a warning and without rounding it to Float32."""
    with jax.enable_x64(True):
        for m, x in [(F.BatchNorm(2), np.ones((2, 3))), (F.LayerNorm(3), np.ones((3, 2))), (F.GroupNorm(2, 2), np.ones((3, 2, 2))),
                     (F.InstanceNorm(2, affine=True), np.ones((3, 2, 2)))]:
            m = F.f64(m)
            check = untouched(m)
            x = x + 1e-12 * np.arange(x.size).reshape(x.shape)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                y = m(x)
            assert y.dtype == jnp.float64
            check()


# ---------------------------------------------------------------------------------------------
# Losses and data helpers

BAD_LOSS_CALLS = [
    ("mse sizes", lambda: L.mse(_ones(3), _ones(4)), DM, ["size(ŷ) = (3,)", "size(y) = (4,)"]),
    ("crossentropy sizes", lambda: L.crossentropy(_ones(3, 2), _ones(2, 3)), DM, ["(3, 2)", "(2, 3)"]),
    ("mse string", lambda: L.mse("abc", _ones(3)), TypeError, ["ŷ", "numeric"]),
    ("mae None y", lambda: L.mae(_ones(3), None), TypeError, ["y", "numeric"]),
    ("mse agg string", lambda: L.mse(_ones(3), _ones(3), agg="mean"), TypeError, ["agg", "jnp.mean"]),
    ("crossentropy dims", lambda: L.crossentropy(_ones(3, 2), _ones(3, 2), dims=5), ValueError, ["dims=5", "(3, 2)", "0-based"]),
    ("logitcrossentropy dims", lambda: L.logitcrossentropy(_ones(3, 2), _ones(3, 2), dims=(0, 4)), ValueError, ["dims=(0, 4)"]),
    ("kldivergence dims", lambda: L.kldivergence(_ones(3, 2), _ones(3, 2), dims=-3), ValueError, ["dims=-3"]),
    ("focal_loss dims", lambda: L.focal_loss(_ones(3, 2), _ones(3, 2), dims=2), ValueError, ["dims=2"]),
    ("ctc labels", lambda: L.ctc_loss(_ones(3, 4), [5]), ValueError, ["ctc_loss", "0..1"]),
    ("ctc rank", lambda: L.ctc_loss(_ones(3, 4, 1), [0]), ValueError, ["ctc_loss", "(classes, time)"]),
    ("label_smoothing alpha", lambda: L.label_smoothing(_ones(3), 2.0), ValueError, ["label_smoothing", "between 0 and 1"]),
    ("siamese margin", lambda: L.siamese_contrastive_loss(_ones(3), _ones(3), margin=-1.0), ValueError, ["Margin", "non-negative"]),
    ("mse unknown keyword", lambda: L.mse(_ones(3), _ones(3), bogus=1), TypeError, ["mse", "bogus"]),
    ("onehot missing", lambda: F.onehot(5, range(3)), ValueError, ["5", "labels"]),
    ("onehotbatch missing", lambda: F.onehotbatch([5], range(3)), ValueError, ["5", "labels"]),
    ("onecold labels", lambda: F.onecold(_ones(3), "ab"), DM, ["2 labels", "3"]),
    ("flatten scalar", lambda: F.flatten(3.0), ValueError, ["flatten", "dimension"]),
]


@pytest.mark.parametrize("label,thunk,exc,fragments", BAD_LOSS_CALLS, ids=[c[0] for c in BAD_LOSS_CALLS])
def test_bad_loss_and_data_calls(label, thunk, exc, fragments):
    with pytest.raises(exc) as info:
        thunk()
    for frag in fragments:
        assert frag in str(info.value), f"{label}: {frag!r} not in {str(info.value)!r}"


# ---------------------------------------------------------------------------------------------
# NaN / Inf in the data given to train_: NonFiniteLoss naming the step, nothing applied


def _tiny():
    """No saturating activation before BatchNorm: an Inf in x makes the loss NaN (a tanh would map it
    to a finite loss with NaN gradients, which Flux's train! applies: it checks only the loss)."""
    fluxjax.seed_(3)
    return F.Chain(F.Dense(2, 3), F.BatchNorm(3, jnp.tanh), F.Dense(3, 1))


def _mse(m, x, y):
    return L.mse(m(x), y)


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("where", ["x", "y"])
def test_non_finite_data_in_train_raises_and_applies_nothing(jit, bad, where, untouched):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((1, 4)).astype(np.float32)
    xb, yb = x.copy(), y.copy()
    (xb if where == "x" else yb)[0, 1] = bad
    m = _tiny()
    opt = F.setup(F.Adam(0.01), m)
    ref = _tiny()
    ref_opt = F.setup(F.Adam(0.01), ref)
    F.train_(_mse, ref, [(x, y), (x, y)], ref_opt, jit=jit)  # what two good steps give
    check_before = untouched([m, opt])
    with pytest.raises(F.NonFiniteLoss, match="data index 0"):
        F.train_(_mse, m, [(xb, yb), (x, y)], opt, jit=jit)
    check_before()
    with pytest.raises(F.NonFiniteLoss, match="data index 2"):
        F.train_(_mse, m, [(x, y), (x, y), (xb, yb), (x, y)], opt, jit=jit)
    # two steps were applied, the third was not: bit-equal to the reference run of two steps
    for a, b in zip(jax.tree_util.tree_leaves([m, opt]), jax.tree_util.tree_leaves([ref, ref_opt])):
        assert not isinstance(a, jax.core.Tracer)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_train_implicit_mode_non_finite(untouched):
    m = _tiny()
    ps = F.params(m)
    check = untouched(m)
    x = np.full((2, 4), np.nan, np.float32)
    with pytest.raises(F.NonFiniteLoss, match="data index 0"):
        F.train_(lambda x, y: _mse(m, x, y), ps, [(x, np.zeros((1, 4), np.float32))], F.Descent(0.1))
    check()


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
def test_non_finite_data_stateless_model_applies_nothing(jit, untouched):
    """A model without state fields: nothing moves either, eagerly or compiled."""
    fluxjax.seed_(4)
    m = F.Chain(F.Dense(2, 3, jnp.tanh), F.Dense(3, 1))
    opt = F.setup(F.Momentum(0.1), m)
    check = untouched([m, opt])
    x = np.ones((2, 4), np.float32)
    with pytest.raises(F.NonFiniteLoss, match="data index 0"):
        F.train_(_mse, m, [(x, np.full((1, 4), np.nan, np.float32))], opt, jit=jit)
    check()
