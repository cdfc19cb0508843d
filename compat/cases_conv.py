# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Convolution and pooling layer cases (Flux.jl test/layers/conv.jl, test/outputsize.jl).

Shapes are Flux's (WHCN, batch last). Julia's `in => out` is written `(in, out)` or `in, out`.
"""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, raises
from fluxjax import (
    AdaptiveMaxPool,
    AdaptiveMeanPool,
    Chain,
    Conv,
    ConvTranspose,
    CrossCor,
    Dense,
    DepthwiseConv,
    GlobalMaxPool,
    GlobalMeanPool,
    MaxPool,
    MeanPool,
    SamePad,
    relu,
    softmax,
)

CONV = "Flux.jl test/layers/conv.jl"
OUTPUTSIZE = "Flux.jl test/outputsize.jl"
shape = lambda layer, x: jax.eval_shape(layer, x).shape  # sizes only, as the Julia tests: traced, not run
X4 = np.random.default_rng(0).standard_normal((10, 10, 3, 2)).astype(np.float32)
Y4 = np.random.default_rng(1).standard_normal((20, 20, 3, 2)).astype(np.float32)


@case(
    names=("AdaptiveMaxPool", "AdaptiveMeanPool", "GlobalMaxPool", "GlobalMeanPool", "MaxPool", "MeanPool", "maxpool", "meanpool"),
    source=CONV,
    julia="""
    x = randn(Float32, 10, 10, 3, 2)
    y = randn(Float32, 20, 20, 3, 2)
    ampx = AdaptiveMaxPool((5,5))
    @test ampx(x) == maxpool(x, PoolDims(x, 2))
    ampx = AdaptiveMeanPool((5,5))
    @test ampx(x) == meanpool(x, PoolDims(x, 2))
    ampy = AdaptiveMaxPool((10, 5))
    @test ampy(y) == maxpool(y, PoolDims(y, (2, 4)))
    ampy = AdaptiveMeanPool((10, 5))
    @test ampy(y) == meanpool(y, PoolDims(y, (2, 4)))
    gmp = GlobalMaxPool()
    @test size(gmp(x)) == (1, 1, 3, 2)
    gmp = GlobalMeanPool()
    @test size(gmp(x)) == (1, 1, 3, 2)
    mp = MaxPool((2, 2))
    @test mp(x) == maxpool(x, PoolDims(x, 2))
    mp = MeanPool((2, 2))
    @test mp(x) == meanpool(x, PoolDims(x, 2))
    """,
)
def case_pooling():
    equal(AdaptiveMaxPool((5, 5))(X4), fluxjax.maxpool(X4, (2, 2)))
    close(AdaptiveMeanPool((5, 5))(X4), fluxjax.meanpool(X4, (2, 2)), rtol=1e-6)
    equal(AdaptiveMaxPool((10, 5))(Y4), fluxjax.maxpool(Y4, (2, 4)))
    close(AdaptiveMeanPool((10, 5))(Y4), fluxjax.meanpool(Y4, (2, 4)), rtol=1e-6)
    assert GlobalMaxPool()(X4).shape == (1, 1, 3, 2)
    assert GlobalMeanPool()(X4).shape == (1, 1, 3, 2)
    close(GlobalMaxPool()(X4)[0, 0], X4.max(axis=(0, 1)))
    close(GlobalMeanPool()(X4)[0, 0], X4.mean(axis=(0, 1)), rtol=1e-5)
    equal(MaxPool((2, 2))(X4), fluxjax.maxpool(X4, (2, 2)))
    close(MeanPool((2, 2))(X4), fluxjax.meanpool(X4, (2, 2)), rtol=1e-6)


@case(
    names=("Conv", "MaxPool", "Dense", "softmax", "Chain", "relu"),
    source=CONV,
    julia="""
    r = zeros(Float32, 28, 28, 1, 5)
    m = Chain(
      Conv((2, 2), 1 => 16, relu),
      MaxPool((2,2)),
      Conv((2, 2), 16 => 8, relu),
      MaxPool((2,2)),
      x -> reshape(x, :, size(x, 4)),
      Dense(288, 10), softmax)
    @test size(m(r)) == (10, 5)
    bias = Conv(ones(Float32, 2, 2, 1, 3), ones(Float32, 3))
    ip = zeros(Float32, 28,28,1,1)
    op = bias(ip)
    @test sum(op) == prod(size(op))
    """,
)
def case_cnn():
    r = np.zeros((28, 28, 1, 5), np.float32)
    m = Chain(
        Conv((2, 2), (1, 16), relu),
        MaxPool((2, 2)),
        Conv((2, 2), (16, 8), relu),
        MaxPool((2, 2)),
        lambda x: x.reshape((-1, x.shape[3]), order="F"),
        Dense(288, 10),
        softmax,
    )
    assert fluxjax.jit(m)(r).shape == (10, 5)  # fluxjax.jit: one compilation instead of one per primitive
    bias = Conv(jnp.ones((2, 2, 1, 3), jnp.float32), jnp.ones(3, jnp.float32))
    op = bias(np.zeros((28, 28, 1, 1), np.float32))
    assert float(jnp.sum(op)) == np.prod(op.shape)


@case(
    names=("Conv", "gradient", "setup", "Descent", "update!", "mse"),
    source=CONV,
    julia="""
    ip = zeros(Float32, 28,28,1,1)
    model = Conv((2,2), 1=>3, bias = false)
    op = model(ip)
    @test sum(op) ≈ 0.f0
    g = gradient(m -> sum(m(ip)), model)[1]
    @test g.bias isa Nothing
    # no bias train
    op = zeros(Float32, 27,27,3,1) .+ 2.f0
    opt_state = Flux.setup(Descent(), model)
    for _ = 1:10^3
      g = gradient(model) do m
        Flux.mse(m(ip), op)
      end[1]
      Flux.update!(opt_state, model, g)
    end
    @test Flux.Losses.mse(model(ip), op) ≈ 4.f0
    """,
)
def case_conv_no_bias():
    ip = np.zeros((28, 28, 1, 1), np.float32)
    model = Conv((2, 2), (1, 3), bias=False)
    close(jnp.sum(model(ip)), 0.0)
    g = fluxjax.gradient(lambda m: jnp.sum(m(ip)), model)[0]
    assert g.bias is None
    op = np.zeros((27, 27, 3, 1), np.float32) + 2
    st = fluxjax.setup(fluxjax.Descent(), model)
    for _ in range(10):  # Julia runs 10^3 steps; with zero input nothing moves, so 10 show the same
        g = fluxjax.gradient(lambda m: fluxjax.losses.mse(m(ip), op), model)[0]
        fluxjax.update_(st, model, g)
    close(fluxjax.losses.mse(model(ip), op), 4.0)


@case(
    names=("Conv",),
    source=CONV,
    julia="""
    ip = rand(Float32, 28, 100, 2)
    c = Conv((3,), 100 => 25, groups = 5)
    @test size(c.weight) == (3, 20, 25)
    @test size(c(ip)) == (26, 25, 2)
    ip = rand(Float32, 28, 28, 100, 2)
    c = Conv((3,3), 100 => 25, groups = 5)
    @test size(c.weight) == (3, 3, 20, 25)
    @test size(c(ip)) == (26, 26, 25, 2)
    @test_throws AssertionError Conv((2, 2), 3=>10, groups=2)
    @test_throws AssertionError Conv((2, 2), 2=>9, groups=2)
    """,
)
def case_grouped_conv():
    c = Conv((3,), (100, 25), groups=5)
    assert c.weight.shape == (3, 20, 25)
    assert shape(c, fluxjax.rand32(28, 100, 2)) == (26, 25, 2)
    c = Conv((3, 3), (100, 25), groups=5)
    assert c.weight.shape == (3, 3, 20, 25)
    assert shape(c, fluxjax.rand32(28, 28, 100, 2)) == (26, 26, 25, 2)
    raises(ValueError, Conv, (2, 2), (3, 10), groups=2)
    raises(ValueError, Conv, (2, 2), (2, 9), groups=2)


@case(
    names=("Conv", "relu"),
    source=CONV,
    julia="""
    r = ones(Float32, 28, 28, 1, 1)
    m = Conv((3, 3), 1=>1, relu; pad=(0,1,1,2))
    m.weight[:] .= 1.0
    m.bias[:] .= 0.0
    y_hat = m(r)[:,:,1,1]
    @test size(y_hat) == (27, 29)
    @test y_hat[1, 1] ≈ 6.0
    @test y_hat[2, 2] ≈ 9.0
    @test y_hat[end, 1] ≈ 4.0
    @test y_hat[1, end] ≈ 3.0
    @test y_hat[1, end-1] ≈ 6.0
    @test y_hat[end, end] ≈ 2.0
    """,
)
def case_conv_asymmetric_padding():
    m = Conv((3, 3), (1, 1), relu, pad=(0, 1, 1, 2))
    m.weight = jnp.ones_like(m.weight)
    m.bias = jnp.zeros_like(m.bias)
    y = m(np.ones((28, 28, 1, 1), np.float32))[:, :, 0, 0]
    assert y.shape == (27, 29)
    close(y[0, 0], 6)
    close(y[1, 1], 9)
    close(y[-1, 0], 4)
    close(y[0, -1], 3)
    close(y[0, -2], 6)
    close(y[-1, -1], 2)


@case(
    names=("DepthwiseConv",),
    source=CONV,
    julia="""
    r = zeros(Float32, 28, 28, 3, 5)
    m1 = DepthwiseConv((2, 2), 3=>15)
    @test size(m1(r), 3) == 15
    m2 = DepthwiseConv((2, 3), 3=>9)
    @test size(m2(r), 3) == 9
    @test_throws AssertionError DepthwiseConv((2,2), 3=>10)
    """,
)
def case_depthwiseconv():
    r = np.zeros((28, 28, 3, 5), np.float32)
    assert shape(DepthwiseConv((2, 2), (3, 15)), r)[2] == 15
    assert shape(DepthwiseConv((2, 3), (3, 9)), r)[2] == 9
    assert shape(DepthwiseConv((2, 3), (3, 9), bias=False), r)[2] == 9
    raises(ValueError, DepthwiseConv, (2, 2), (3, 10))


@case(
    names=("ConvTranspose", "Conv", "SamePad", "gradient"),
    source=CONV,
    julia="""
    x = zeros(Float32, 5, 5, 1, 1)
    y = Conv((3,3), 1 => 1)(x)
    x_hat1 = ConvTranspose((3, 3), 1 => 1)(y)
    x_hat2 = ConvTranspose((3, 3), 1 => 1, bias=false)(y)
    @test size(x_hat1) == size(x_hat2) == size(x)
    x = randn(Float32, 10, 10, 2, 3)
    m1 = ConvTranspose((3,3), 2=>4, pad=SamePad())
    @test size(m1.weight) == (3,3,4,2)
    @test size(m1(x)) == (10,10,4,3)
    m2 = ConvTranspose((3,3), 2=>4, groups=2, pad=SamePad())
    @test size(m2.weight) == (3,3,2,2)
    @test size(m1(x)) == size(m2(x))
    g = gradient(m -> sum(m(x)), m2)[1]
    x = randn(Float32, 10, 11, 3,2)
    m1 = ConvTranspose((3,5), 3=>6, stride=3)
    m2 = ConvTranspose((3,5), 3=>6, stride=3, outpad=(1,0))
    @test size(m2(x))[1:2] == (size(m1(x))[1:2] .+ (1,0))
    """,
)
def case_convtranspose():
    x = np.zeros((5, 5, 1, 1), np.float32)
    y = Conv((3, 3), (1, 1))(x)
    assert ConvTranspose((3, 3), (1, 1))(y).shape == x.shape
    assert ConvTranspose((3, 3), (1, 1), bias=False)(y).shape == x.shape
    x = fluxjax.randn32(10, 10, 2, 3)
    m1 = ConvTranspose((3, 3), (2, 4), pad=SamePad())
    assert m1.weight.shape == (3, 3, 4, 2)
    assert shape(m1, x) == (10, 10, 4, 3)
    m2 = ConvTranspose((3, 3), (2, 4), groups=2, pad=SamePad())
    assert m2.weight.shape == (3, 3, 2, 2)
    assert shape(m2, x) == shape(m1, x)
    g = jax.eval_shape(lambda m: fluxjax.gradient(lambda m: jnp.sum(m(x)), m)[0], m2)
    assert g.weight.shape == (3, 3, 2, 2)
    x = fluxjax.randn32(10, 11, 3, 2)
    s1 = shape(ConvTranspose((3, 5), (3, 6), stride=3), x)
    s2 = shape(ConvTranspose((3, 5), (3, 6), stride=3, outpad=(1, 0)), x)
    assert s2[:2] == (s1[0] + 1, s1[1])


@case(
    names=("CrossCor", "Conv"),
    source=CONV,
    julia="""
    x = rand(Float32, 28, 28, 1, 1)
    w = rand(Float32, 2,2,1,1)
    y = CrossCor(w, [0.0])
    @test sum(w .* x[1:2, 1:2, :, :]) ≈ y(x)[1, 1, 1, 1]  rtol=2e-7
    @test y(x) != Conv(w, [0.0])(x)
    @test CrossCor(w[end:-1:1, end:-1:1, :, :], [0.0])(x) ≈ Conv(w, [0.0])(x)  rtol=1e-7
    """,
)
def case_crosscor():
    x = np.asarray(fluxjax.rand32(28, 28, 1, 1))
    w = np.asarray(fluxjax.rand32(2, 2, 1, 1))
    y = CrossCor(jnp.asarray(w), jnp.zeros(1))
    close(y(x)[0, 0, 0, 0], np.sum(w * x[0:2, 0:2]), rtol=1e-6)
    assert not np.array_equal(np.asarray(y(x)), np.asarray(Conv(jnp.asarray(w), jnp.zeros(1))(x)))
    close(CrossCor(jnp.asarray(w[::-1, ::-1]), jnp.zeros(1))(x), Conv(jnp.asarray(w), jnp.zeros(1))(x), rtol=1e-6)


@case(
    names=("Conv",),
    source=CONV,
    julia="""
    data = zeros(Float32, 7,7,1,1)
    data[4,4,1,1] = 1
    l = Conv((3,3), 1=>1)
    expected = zeros(eltype(l.weight),5,5,1,1)
    expected[2:end-1,2:end-1,1,1] = l.weight
    @test expected ≈ l(data)
    l = Conv((3,1), 1=>1)
    expected = zeros(eltype(l.weight),5,7,1,1)
    expected[2:end-1,4,1,1] = l.weight
    @test expected ≈ l(data)
    """,
)
def case_conv_delta():
    data = np.zeros((7, 7, 1, 1), np.float32)
    data[3, 3, 0, 0] = 1
    l = Conv((3, 3), (1, 1))
    expected = np.zeros((5, 5, 1, 1), np.float32)
    expected[1:-1, 1:-1, 0, 0] = np.asarray(l.weight)[:, :, 0, 0]
    close(l(data), expected)
    l = Conv((3, 1), (1, 1))
    expected = np.zeros((5, 7, 1, 1), np.float32)
    expected[1:-1, 3, 0, 0] = np.asarray(l.weight)[:, 0, 0, 0]
    close(l(data), expected)


@case(
    names=("SamePad", "Conv", "ConvTranspose", "DepthwiseConv", "CrossCor", "MaxPool", "MeanPool"),
    source=CONV,
    julia="""
    @testset "$ltype SamePad kernelsize $k" for ltype in (Conv, ConvTranspose, DepthwiseConv, CrossCor), k in ( (1,), (2,), (3,), (4,5), (6,7,8))
      data = ones(Float32, (k .+ 3)..., 1,1)
      l = ltype(k, 1=>1, pad=SamePad())
      @test size(l(data)) == size(data)
      l = ltype(k, 1=>1, pad=SamePad(), dilation = k .÷ 2)
      @test size(l(data)) == size(data)
      stride = 3
      l = ltype(k, 1=>1, pad=SamePad(), stride = stride)
      if ltype == ConvTranspose
        @test size(l(data))[1:end-2] == stride .* size(data)[1:end-2]
      else
        @test size(l(data))[1:end-2] == cld.(size(data)[1:end-2], stride)
    @testset "$ltype SamePad windowsize $k" for ltype in (MeanPool, MaxPool), k in ( (1,), (2,), (3,), (4,5), (6,7,8))
      data = ones(Float32, (k .+ 3)..., 1,1)
      l = ltype(k, pad=SamePad())
      @test size(l(data))[1:end-2] == cld.(size(data)[1:end-2], k)
    """,
)
def case_samepad():
    cld = lambda a, b: -(-a // b)
    for ltype in (Conv, ConvTranspose, DepthwiseConv, CrossCor):
        for k in ((2,), (3,), (4, 5), (6, 7, 8)):  # Julia also runs (1,); k .÷ 2 = 0 is no dilation here
            data = np.ones(tuple(i + 3 for i in k) + (1, 1), np.float32)
            assert shape(ltype(k, (1, 1), pad=SamePad()), data) == data.shape, (ltype, k)
            dil = tuple(i // 2 for i in k)
            assert shape(ltype(k, (1, 1), pad=SamePad(), dilation=dil), data) == data.shape, (ltype, k)
            out = shape(ltype(k, (1, 1), pad=SamePad(), stride=3), data)[:-2]
            want = tuple(3 * n for n in data.shape[:-2]) if ltype is ConvTranspose else tuple(cld(n, 3) for n in data.shape[:-2])
            assert out == want, (ltype, k, out, want)
    for ltype in (MeanPool, MaxPool):
        for k in ((1,), (2,), (3,), (4, 5), (6, 7, 8)):
            data = np.ones(tuple(i + 3 for i in k) + (1, 1), np.float32)
            assert shape(ltype(k, pad=SamePad()), data)[:-2] == tuple(cld(n, i) for n, i in zip(data.shape[:-2], k))


@case(
    names=("outputsize", "Chain", "Conv", "Dense", "BatchNorm", "flatten", "MaxPool", "AdaptiveMaxPool", "GlobalMeanPool", "Parallel"),
    source=OUTPUTSIZE,
    julia="""
    m = Chain(Conv((3, 3), 3 => 16), Conv((3, 3), 16 => 32))
    @test outputsize(m, (10, 10, 3, 1)) == (6, 6, 32, 1)
    m = Dense(10 => 4)
    @test outputsize(m, (10,); padbatch=true) == (4, 1)
    m = Chain(Conv((3, 3), 3 => 16), BatchNorm(16), flatten, Dense(1024, 10))
    @test outputsize(m, (10, 10, 3, 50)) == (10, 50)
    @test outputsize(flatten, (5, 5, 3, 10)) == (75, 10)
    m = Parallel(vcat, Dense(2 => 4, relu), Dense(3 => 6, relu))
    @test outputsize(m, (2,), (3,)) == (10,)
    m = MaxPool((2, 2))
    @test outputsize(m, (10, 10, 3, 1)) == (5, 5, 3, 1)
    m = AdaptiveMaxPool((2, 2))
    @test outputsize(m, (10, 10, 3, 1)) == (2, 2, 3, 1)
    m = GlobalMeanPool()
    @test outputsize(m, (10, 10, 3, 1)) == (1, 1, 3, 1)
    @test_throws DimensionMismatch outputsize(Conv((3, 3), 3 => 16), (10, 10, 4, 1))
    """,
)
def case_outputsize():
    from fluxjax import BatchNorm, Parallel, flatten, outputsize

    assert tuple(outputsize(Chain(Conv((3, 3), (3, 16)), Conv((3, 3), (16, 32))), (10, 10, 3, 1))) == (6, 6, 32, 1)
    assert tuple(outputsize(Dense(10, 4), (10,), padbatch=True)) == (4, 1)
    m = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), flatten, Dense(1024, 10))
    assert tuple(outputsize(m, (10, 10, 3, 50))) == (10, 50)
    assert tuple(outputsize(flatten, (5, 5, 3, 10))) == (75, 10)
    m = Parallel(lambda a, b: jnp.concatenate([a, b]), Dense(2, 4, relu), Dense(3, 6, relu))
    assert tuple(outputsize(m, (2,), (3,))) == (10,)
    assert tuple(outputsize(MaxPool((2, 2)), (10, 10, 3, 1))) == (5, 5, 3, 1)
    assert tuple(outputsize(AdaptiveMaxPool((2, 2)), (10, 10, 3, 1))) == (2, 2, 3, 1)
    assert tuple(outputsize(GlobalMeanPool(), (10, 10, 3, 1))) == (1, 1, 3, 1)
    raises(fluxjax.DimensionMismatch, outputsize, Conv((3, 3), (3, 16)), (10, 10, 4, 1))


@case(
    names=("@autosize", "Dense", "Chain", "Maxout", "SkipConnection", "Parallel", "Scale", "LayerNorm", "Bilinear", "BatchNorm", "Conv", "MeanPool", "SamePad"),
    source=OUTPUTSIZE,
    julia="""
    m = @autosize (3,) Dense(_ => 4)
    @test randn(3) |> m |> size == (4,)
    m = @autosize (3, 1) Chain(Dense(_, 4), Dense(4 => 10), softmax)
    @test randn(3, 5) |> m |> size == (10, 5)
    m = @autosize (2, 3, 4, 5) Dense(_ => 10)  # goes by first dim, not 2nd-last
    @test randn(2, 3, 4, 5) |> m |> size == (10, 3, 4, 5)
    m = @autosize (9,) Dense(_ => div(_,2))
    @test randn(9) |> m |> size == (4,)
    m = @autosize (3,) Chain(one = Dense(_ => 4), two = softmax)  # needs kw
    @test randn(3) |> m |> size == (4,)
    m = @autosize (3, 45) Maxout(() -> Dense(_ => 6, tanh), 2)    # needs ->, block
    @test randn(3, 45) |> m |> size == (6, 45)
    # here Parallel gets two inputs, no problem:
    m = @autosize (3,) Chain(SkipConnection(Dense(_ => 4), Parallel(vcat, Dense(_ => 5), Dense(_ => 6))), Flux.Scale(_))
    @test randn(3) |> m |> size == (11,)
    # like Dense, LayerNorm goes by the first dimension:
    m = @autosize (3, 4, 5) LayerNorm(_)
    @test rand(3, 6, 7) |> m |> size == (3, 6, 7)
    m = @autosize (3, 3, 10) LayerNorm(_, _)  # does not check that sizes match
    @test rand(3, 3, 10) |> m |> size == (3, 3, 10)
    m = @autosize (3,) Flux.Bilinear(_ => 10)
    @test randn(3) |> m |> size == (10,)
    m = @autosize (3, 1) Flux.Bilinear(_ => 10)
    @test randn(3, 4) |> m |> size == (10, 4)
    m = @autosize (3,) SkipConnection(Dense(_ => _), Flux.Bilinear(_ => 10))  # Bilinear gets two inputs
    @test randn(3, 4) |> m |> size == (10, 4)
    # first docstring example
    m = @autosize (3, 1) Chain(Dense(_ => 2, sigmoid), BatchNorm(_, affine=false))
    @test randn(3, 4) |> m |> size == (2, 4)
    # evil docstring example
    img = [28, 28];
    m = @autosize (img..., 1, 32) Chain(              # size is only needed at runtime
           Chain(c = Conv((3,3), _ => 5; stride=2, pad=SamePad()),
                 p = MeanPool((3,3)),
                 b = BatchNorm(_),
                 f = Flux.flatten),
           Dense(_ => _÷4, relu, init=Flux.rand32),   # can calculate output size _÷4
           SkipConnection(Dense(_ => _, relu), +),
           Dense(_ => 10),
        )
    @test randn(Float32, img..., 1, 32) |> m |> size == (10, 32)
    """,
)
def case_autosize():
    from fluxjax import (
        BatchNorm,
        Bilinear,
        LayerNorm,
        Maxout,
        MeanPool,
        Parallel,
        SamePad,
        Scale,
        SkipConnection,
        autosize,
        flatten,
        softmax,
    )

    def randn(*s):
        return jnp.asarray(np.random.default_rng(0).standard_normal(s), jnp.float32)

    def vcat(*xs):
        return jnp.concatenate(xs)

    def size_of(m, x):
        return tuple(m(x).shape)

    m = autosize((3,), lambda _: Dense(_, 4))
    assert size_of(m, randn(3)) == (4,) and m.weight.shape == (4, 3)
    assert size_of(autosize((3, 1), lambda _: Chain(Dense(_, 4), Dense(4, 10), softmax)), randn(3, 5)) == (10, 5)
    assert size_of(autosize((2, 3, 4, 5), lambda _: Dense(_, 10)), randn(2, 3, 4, 5)) == (10, 3, 4, 5)
    m = autosize((9,), lambda _: Dense(_, _ // 2))
    assert size_of(m, randn(9)) == (4,) and m.weight.shape == (4, 9)
    assert size_of(autosize((3,), lambda _: Chain(one=Dense(_, 4), two=softmax)), randn(3)) == (4,)
    assert size_of(autosize((3, 45), lambda _: Maxout(lambda: Dense(_, 6, jnp.tanh), 2)), randn(3, 45)) == (6, 45)
    m = autosize((3,), lambda _: Chain(SkipConnection(Dense(_, 4), Parallel(vcat, Dense(_, 5), Dense(_, 6))), Scale(_)))
    assert size_of(m, randn(3)) == (11,)
    assert [d.weight.shape for d in m[0].connection.layers] == [(5, 4), (6, 3)]  # Parallel got (layer(x), x)
    assert size_of(autosize((3, 4, 5), lambda _: LayerNorm(_)), randn(3, 6, 7)) == (3, 6, 7)
    assert size_of(autosize((3, 3, 10), lambda _: LayerNorm(_, _)), randn(3, 3, 10)) == (3, 3, 10)
    assert size_of(autosize((3,), lambda _: Bilinear((_, 10))), randn(3)) == (10,)
    assert size_of(autosize((3, 1), lambda _: Bilinear((_, 10))), randn(3, 4)) == (10, 4)
    assert size_of(autosize((3,), lambda _: SkipConnection(Dense(_, _), Bilinear((_, 10)))), randn(3, 4)) == (10, 4)
    m = autosize((3, 1), lambda _: Chain(Dense(_, 2, fluxjax.sigmoid), BatchNorm(_, affine=False)))
    assert size_of(m, randn(3, 4)) == (2, 4)
    img = [28, 28]
    m = autosize((*img, 1, 32), lambda _: Chain(
        Chain(c=Conv((3, 3), (_, 5), stride=2, pad=SamePad()), p=MeanPool((3, 3)), b=BatchNorm(_), f=flatten),
        Dense(_, _ // 4, relu, init=fluxjax.rand32),
        SkipConnection(Dense(_, _, relu), lambda a, b: a + b),
        Dense(_, 10),
    ))
    assert size_of(m, randn(*img, 1, 32)) == (10, 32)
    assert m[0].c.weight.shape == (3, 3, 1, 5) and m[0].b.mu.shape == (5,) and m[1].weight.shape == (20, 80)
