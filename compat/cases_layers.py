"""Flux layer cases: Flux.jl test/layers/basic.jl and the docstrings in src/layers/basic.jl.

Julia's 1-based indices become 0-based here (`m[1]` is `m[0]`, `Embedding`'s index 2 is index 1).
"""

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, raises, rows
from fluxjax import (
    Bilinear,
    Chain,
    Dense,
    DimensionMismatch,
    Embedding,
    Maxout,
    PairwiseFusion,
    Parallel,
    Scale,
    SkipConnection,
    relu,
    sigmoid,
)

BASIC = "Flux.jl test/layers/basic.jl"


def ones_init(*dims, **_):
    return jnp.ones(dims, jnp.float32)


@case(
    names=("Dense",),
    source=BASIC,
    julia="""
    @test size(Dense(10 => 100).weight) == (100, 10)
    @test size(Dense(10 => 100).bias) == (100,)
    @test Dense(rand(100,10), false, tanh).σ == tanh
    @test_throws DimensionMismatch Dense(3 => 4; bias=rand(5))
    @test_throws DimensionMismatch Dense(rand(4,3), rand(5))
    """,
)
def case_dense_constructors():
    assert Dense(10, 100).weight.shape == (100, 10)
    assert Dense((10, 100)).bias.shape == (100,)
    d = Dense(jnp.asarray(np.random.rand(100, 10)), False, jnp.tanh)
    assert d.sigma is jnp.tanh and d.bias is False
    raises(DimensionMismatch, Dense, 3, 4, bias=jnp.asarray(np.random.rand(5)))
    raises(DimensionMismatch, Dense, jnp.asarray(np.random.rand(4, 3)), jnp.asarray(np.random.rand(5)))


@case(
    names=("Dense", "randn32"),
    source=BASIC,
    julia="""
    @test  length(Dense(10 => 5)(randn32(10))) == 5
    @test_throws DimensionMismatch Dense(10 => 5)(randn32(1))
    @test size(Dense(10 => 5)(randn(10))) == (5,)
    @test size(Dense(10 => 5)(randn(10,2))) == (5,2)
    @test size(Dense(10 => 5)(randn(10,2,3))) == (5,2,3)
    @test size(Dense(10 => 5)(randn(10,2,3,4))) == (5,2,3,4)
    @test_throws DimensionMismatch Dense(10 => 5)(randn(11,2,3))
    """,
)
def case_dense_dimensions():
    d = Dense(10, 5)
    assert len(d(fluxjax.randn32(10))) == 5
    raises(DimensionMismatch, d, fluxjax.randn32(1))
    x = np.random.randn(10, 2, 3, 4).astype(np.float32)
    assert d(x[:, 0, 0, 0]).shape == (5,)
    assert d(x[:, :, 0, 0]).shape == (5, 2)
    assert d(x[:, :, :, 0]).shape == (5, 2, 3)
    assert d(x).shape == (5, 2, 3, 4)
    raises(DimensionMismatch, d, np.random.randn(11, 2, 3).astype(np.float32))


@case(
    names=("Dense",),
    source=BASIC,
    julia="""
    @test Dense(10 => 1, identity, init = ones)(ones(10,1)) == 10*ones(1, 1)
    @test Dense(10 => 1, identity, init = ones)(ones(10,2)) == 10*ones(1, 2)
    @test Dense(10 => 2, identity, init = ones)(ones(10,1)) == 10*ones(2, 1)
    @test Dense(10 => 2, identity, init = ones)([ones(10,1) 2*ones(10,1)]) == [10 20; 10 20]
    @test Dense(10 => 2, identity, init = ones, bias = false)([ones(10,1) 2*ones(10,1)]) == [10 20; 10 20]
    """,
)
def case_dense_ones():
    equal(Dense(10, 1, None, init=ones_init)(np.ones((10, 1), np.float32)), 10 * np.ones((1, 1)))
    equal(Dense(10, 1, None, init=ones_init)(np.ones((10, 2), np.float32)), 10 * np.ones((1, 2)))
    equal(Dense(10, 2, None, init=ones_init)(np.ones((10, 1), np.float32)), 10 * np.ones((2, 1)))
    x = np.hstack([np.ones((10, 1)), 2 * np.ones((10, 1))]).astype(np.float32)
    equal(Dense(10, 2, None, init=ones_init)(x), rows([10, 20], [10, 20]))
    equal(Dense(10, 2, None, init=ones_init, bias=False)(x), rows([10, 20], [10, 20]))


@case(
    names=("Dense",),
    source=BASIC,
    julia="""
    d1 = Dense(2 => 3)
    x2 = Float64.(x1)   # x1 = randn32(2)
    @test d1(x2) ≈ d1.weight * x2
    @test d1(x2) isa Array{Float32}  # tests _match_eltype, will print a warning
    x3 = rand(-5:5, 2)
    @test d1(x3) ≈ d1.weight * x3
    """,
)
def case_dense_eltype():
    import warnings

    d1 = Dense(2, 3)
    x2 = np.random.randn(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = d1(x2)
    close(y, np.asarray(d1.weight) @ x2)
    assert y.dtype == jnp.float32
    x3 = np.array([-3, 4])
    close(d1(x3), np.asarray(d1.weight) @ x3)


@case(
    names=("Chain", "Dense", "σ", "randn32"),
    source=BASIC,
    julia="""
    @test_nowarn Chain(Dense(10 => 5, σ), Dense(5 => 2))(randn32(10))
    @test_throws DimensionMismatch Chain(Dense(10 => 5, σ),Dense(2 => 1))(randn32(10))
    m = Chain(first = Dense(10 => 5, σ), second = Dense(5 => 2))
    @test m[:first] == m[1]
    @test_throws ArgumentError Chain(layers = Dense(10 => 10), two = identity) # reserved name
    @test_nowarn Chain([Dense(10 => 5, σ), Dense(5 => 2)])(randn(Float32, 10))  # vector of layers
    c = Chain(Dense(10 => 5, σ), Dense(5 => 2), Dense(2 => 1, relu))
    @test c[1] == c[begin]
    @test c[3] == c[end]
    @test Chain(identity)(1,2,3) == (1,2,3)  # multiple args become a tuple
    """,
)
def case_chain():
    assert Chain(Dense(10, 5, sigmoid), Dense(5, 2))(fluxjax.randn32(10)).shape == (2,)
    raises(DimensionMismatch, Chain(Dense(10, 5, sigmoid), Dense(2, 1)), fluxjax.randn32(10))
    m = Chain(first=Dense(10, 5, sigmoid), second=Dense(5, 2))
    assert m["first"] is m[0]
    assert m.first is m[0]
    assert m(fluxjax.randn32(10)).shape == (2,)
    raises(ValueError, Chain, layers=Dense(10, 10), two=lambda x: x)
    assert Chain([Dense(10, 5, sigmoid), Dense(5, 2)])(fluxjax.randn32(10)).shape == (2,)
    c = Chain(Dense(10, 5, sigmoid), Dense(5, 2), Dense(2, 1, relu))
    assert c[2] is c[-1]
    assert len(c[0:2].layers) == 2
    assert Chain(lambda x: x)(1, 2, 3) == (1, 2, 3)


@case(
    names=("activations", "Chain"),
    source=BASIC,
    julia="""
    dummy_model = Chain(x->x.^2, x->x .- 3, x -> tan.(x))
    x = randn(10)
    @test Flux.activations(dummy_model, x)[1] == x.^2
    @test Flux.activations(dummy_model, x)[2] == (x.^2 .- 3)
    @test Flux.activations(dummy_model, x)[3] == tan.(x.^2 .- 3)
    @test Flux.activations(Chain(), x) == ()
    """,
)
def case_activations():
    m = Chain(lambda x: x**2, lambda x: x - 3, jnp.tan)
    x = jnp.asarray(np.random.randn(10).astype(np.float32))
    a = fluxjax.activations(m, x)
    close(a[0], x**2)
    close(a[1], x**2 - 3)
    close(a[2], jnp.tan(x**2 - 3))
    assert tuple(fluxjax.activations(Chain(), x)) == ()


@case(
    names=("activations", "gradient", "Chain", "Dense", "relu"),
    source=BASIC,
    julia="""
    c = Chain(Dense(3 => 5, relu), Dense(5 => 1, relu))
    X = Float32.([1.0; 1.0; 1.0])
    @test_nowarn gradient(c -> Flux.activations(c, X)[2][1], c)
    c2 = Chain(enc = c[1], dec = c[2])
    @test Flux.activations(c, X) == Flux.activations(c2, X)
    """,
)
def case_activations_gradient():
    c = Chain(Dense(3, 5, relu), Dense(5, 1, relu))
    X = jnp.ones(3, jnp.float32)
    (g,) = fluxjax.gradient(lambda c: fluxjax.activations(c, X)[1][0], c)
    assert g.layers[0].weight.shape == (5, 3)
    c2 = Chain(enc=c[0], dec=c[1])
    for a, b in zip(fluxjax.activations(c, X), fluxjax.activations(c2, X)):
        equal(a, b)


@case(
    names=("Scale",),
    source=BASIC,
    julia="""
    @test length(Flux.Scale(10)(randn(10))) == 10
    @test_throws DimensionMismatch Flux.Scale(10)(randn(2))
    @test Flux.Scale(2)([1 2]) == [1 2; 1 2]
    @test Flux.Scale(2)([1, 2]) == [1, 2]
    @test Flux.Scale(2; bias = false)([1 2; 3 4]) == [1 2; 3 4]
    @test Flux.Scale(2, abs2; bias = false, init = ones)([1 2; 3 4]) == [1 4; 9 16]
    @test Flux.Scale(2)(rand(2, 3, 4)) |> size == (2, 3, 4)
    @test Flux.Scale(2, 3, 4; bias = false)(rand(2, 3, 4)) |> size == (2, 3, 4)
    @test Flux.Scale(2, 3; bias = false)(rand(2, 1, 4)) |> size == (2, 3, 4)
    @test Flux.Scale(2, 3, tanh; bias = false, init = zeros)(rand(2, 1, 4)) == zeros(2, 3, 4)
    """,
)
def case_scale():
    assert len(Scale(10)(fluxjax.randn32(10))) == 10
    raises(DimensionMismatch, Scale(10), fluxjax.randn32(2))
    equal(Scale(2)(rows([1, 2], dtype=np.int32)), rows([1, 2], [1, 2]))
    equal(Scale(2)(np.array([1, 2])), [1.0, 2])
    equal(Scale(2, bias=False)(rows([1, 2], [3, 4], dtype=np.int32)), rows([1, 2], [3, 4]))
    equal(Scale(2, jnp.square, bias=False, init=ones_init)(rows([1, 2], [3, 4], dtype=np.int32)), rows([1, 4], [9, 16]))
    assert Scale(2)(fluxjax.rand32(2, 3, 4)).shape == (2, 3, 4)
    assert Scale(2, 3, 4, bias=False)(fluxjax.rand32(2, 3, 4)).shape == (2, 3, 4)
    assert Scale(2, 3, bias=False)(fluxjax.rand32(2, 1, 4)).shape == (2, 3, 4)
    zeros_init = lambda *d, **_: jnp.zeros(d, jnp.float32)
    equal(Scale(2, 3, jnp.tanh, bias=False, init=zeros_init)(fluxjax.rand32(2, 1, 4)), np.zeros((2, 3, 4)))


@case(
    names=("Maxout", "Dense"),
    source=BASIC,
    julia="""
    mo = Maxout(() -> identity, 4)
    input = rand(40)
    @test mo(input) == input
    mo = Maxout(x -> x, x -> 2x, x -> 0.5x)
    @test mo(input) == 2*input
    mo = Maxout(x -> [0.5; 0.1]*x, x -> [0.2; 0.7]*x)
    input = [3.0 2.0]
    target = [0.5, 0.7].*input
    @test mo(input) == target
    """,
)
def case_maxout():
    x = np.random.rand(40).astype(np.float32)
    equal(Maxout(lambda: (lambda v: v), 4)(x), x)
    equal(Maxout(lambda v: v, lambda v: 2 * v, lambda v: 0.5 * v)(x), 2 * x)
    mo = Maxout(lambda v: np.array([[0.5], [0.1]]) @ v, lambda v: np.array([[0.2], [0.7]]) @ v)
    inp = rows([3.0, 2.0], dtype=np.float32)
    close(mo(inp), np.array([[0.5], [0.7]]) * inp)


@case(
    names=("SkipConnection", "Dense"),
    source=BASIC,
    julia="""
    input = randn(10, 10, 10, 10)
    @test SkipConnection(x -> zeros(size(x)), (a,b) -> a + b)(input) == input
    input = randn(10, 2)
    @test size(SkipConnection(Dense(10 => 10), (a,b) -> cat(a, b, dims = 2))(input)) == (10,4)
    """,
)
def case_skipconnection():
    x = np.random.randn(10, 10, 10, 10)
    equal(SkipConnection(lambda v: np.zeros(v.shape), lambda a, b: a + b)(x), x)
    x = np.random.randn(10, 2).astype(np.float32)
    assert SkipConnection(Dense(10, 10), lambda a, b: jnp.concatenate([a, b], axis=1))(x).shape == (10, 4)


@case(
    names=("Bilinear", "SkipConnection", "Dense"),
    source=BASIC,
    julia="""
    d = Dense(10 => 10)
    b = Flux.Bilinear(10, 10, 5)
    x = randn(Float32,10,9)
    sc = SkipConnection(d, b)
    @test size(sc(x)) == (5,9)
    x = zeros(Float32,10,9)
    y = zeros(Float32,2,9)
    b = Flux.Bilinear(10, 2, 3)
    @test size(b(x,y)) == (3,9)
    @test sum(abs2, b(x,y)) == 0f0
    x = randn(Float32,11,7)
    b = Flux.Bilinear(11, 11, 3)
    @test size(b(x)) == (3,7)
    @test_throws DimensionMismatch Flux.Bilinear(rand(3,4,5), rand(6), tanh) # wrong length bias
    """,
)
def case_bilinear():
    sc = SkipConnection(Dense(10, 10), Bilinear(10, 10, 5))
    assert sc(np.random.randn(10, 9).astype(np.float32)).shape == (5, 9)
    b = Bilinear(10, 2, 3)
    out = b(np.zeros((10, 9), np.float32), np.zeros((2, 9), np.float32))
    assert out.shape == (3, 9)
    assert float(jnp.sum(out**2)) == 0.0
    assert Bilinear(11, 11, 3)(np.random.randn(11, 7).astype(np.float32)).shape == (3, 7)
    raises(DimensionMismatch, Bilinear, jnp.asarray(np.random.rand(3, 4, 5)), jnp.asarray(np.random.rand(6)), jnp.tanh)


@case(
    names=("Parallel", "Dense"),
    source=BASIC,
    julia="""
    input = randn(10, 2)
    @test Parallel(+, x -> zeros(size(x)), identity)(input) == input
    @test size(Parallel((a, b) -> cat(a, b; dims=2), Dense(10 => 10), identity)(input)) == (10, 4)
    inputs = randn(10), randn(5), randn(4)
    @test size(Parallel(+, Dense(10 => 2), Dense(5 => 2), Dense(4 => 2))(inputs)) == (2,)
    @test_throws ArgumentError Parallel(+, sin, cos)(1,2,3)  # wrong number of inputs
    @test Parallel(+, sin, cos)(pi/2) ≈ 1  # one input, several layers
    @test Parallel(/, abs)(3, -4) ≈ 3/4    # one layer, several inputs
    @test Parallel(/, abs)((3, -4)) ≈ 3/4
    @test Parallel(vcat, log)(1) == [0]
    m = Parallel(hcat, one = Dense(10 => 10), two = identity)
    @test m[1] == m[:one]
    """,
)
def case_parallel():
    x = np.random.randn(10, 2).astype(np.float32)
    equal(Parallel(lambda a, b: a + b, lambda v: np.zeros(v.shape), lambda v: v)(x), x)
    assert Parallel(lambda a, b: jnp.concatenate([a, b], axis=1), Dense(10, 10), lambda v: v)(x).shape == (10, 4)
    ins = tuple(np.random.randn(n).astype(np.float32) for n in (10, 5, 4))
    assert Parallel(lambda *a: sum(a), Dense(10, 2), Dense(5, 2), Dense(4, 2))(*ins).shape == (2,)
    raises(ValueError, Parallel(lambda a, b: a + b, np.sin, np.cos), 1, 2, 3)
    close(Parallel(lambda a, b: a + b, np.sin, np.cos)(np.pi / 2), 1)
    close(Parallel(lambda a, b: a / b, abs)(3, -4), 3 / 4)
    close(Parallel(lambda a, b: a / b, abs)((3, -4)), 3 / 4)
    m = Parallel(jnp.hstack, one=Dense(10, 10), two=lambda v: v)
    assert m[0] is m["one"]


@case(
    names=("PairwiseFusion", "Dense"),
    source=BASIC,
    julia="""
    x = (rand(1, 10), rand(30, 10))
    layer = PairwiseFusion(+,  Dense(1 => 30),  Dense(30 => 10))
    y = layer(x)
    @test length(y) == 2
    @test size(y[1]) == (30, 10)
    @test size(y[2]) == (10, 10)
    @test PairwiseFusion(vcat, x->x.+1, x->x.+2, x->x.^3)(2, 10, 20) == (3, [5, 12], [125, 1728, 8000])
    @test PairwiseFusion(vcat, x->x.+1, x->x.+2, x->x.^3)(7) == (8, [10, 9], [1000, 729, 343])
    """,
)
def case_pairwisefusion():
    x = (np.random.rand(1, 10).astype(np.float32), np.random.rand(30, 10).astype(np.float32))
    y = PairwiseFusion(lambda a, b: a + b, Dense(1, 30), Dense(30, 10))(x)
    assert len(y) == 2 and y[0].shape == (30, 10) and y[1].shape == (10, 10)
    vcat = lambda a, b: jnp.concatenate([jnp.atleast_1d(a), jnp.atleast_1d(b)])
    f = PairwiseFusion(vcat, lambda v: v + 1, lambda v: v + 2, lambda v: v**3)
    y = f(2, 10, 20)
    equal(y[0], 3)
    equal(y[1], [5, 12])
    equal(y[2], [125, 1728, 8000])
    y = f(7)
    equal(y[0], 8)
    equal(y[1], [10, 9])
    equal(y[2], [1000, 729, 343])


@case(
    names=("Embedding", "onehotbatch"),
    source=BASIC,
    julia="""
    vocab_size, embed_size = 10, 4
    m = Embedding(vocab_size, embed_size)
    @test size(m.weight) == (embed_size, vocab_size)
    @test m(2) ≈ m.weight[:,2]
    x = rand(1:vocab_size, 3)
    y = m(x)
    @test y ≈ m.weight[:,x]
    x3 = rand(1:vocab_size, 3, 4)
    y3 = m(x3)
    @test size(y3) == (embed_size, 3, 4)
    @test m(Flux.onehotbatch(x, 1:vocab_size)) ≈ m(x)   # one-hot input
    """,
)
def case_embedding():
    m = Embedding(10, 4)
    assert m.weight.shape == (4, 10)
    close(m(1), m.weight[:, 1])
    x = np.array([2, 7, 0])
    close(m(x), np.asarray(m.weight)[:, x])
    assert m(np.random.randint(0, 10, (3, 4))).shape == (4, 3, 4)
    close(m(fluxjax.onehotbatch(x, range(10))), m(x))


@case(
    names=("Embedding", "identity_init"),
    source="Flux.jl src/layers/basic.jl (Embedding docstring)",
    julia="""
    julia> emb = Embedding(26 => 4, init=Flux.identity_init(gain=22))
    julia> emb(2)  # one column of e.weight (here not random!)
    4-element Vector{Float32}:
      0.0
     22.0
      0.0
      0.0
    """,
)
def case_embedding_docstring():
    emb = Embedding(26, 4, init=fluxjax.identity_init(gain=22))
    equal(emb(1), [0.0, 22.0, 0.0, 0.0])


@case(
    names=("Embedding", "gradient"),
    source=BASIC,
    julia="""
    m = Embedding(vocab_size => embed_size, padding_idx=pad)
    @test m.padding_idx == pad
    @test all(m.weight[:, pad] .== 0)
    @test_throws ArgumentError Embedding(vocab_size => embed_size, padding_idx=0)
    @test all(m(pad) .== 0)
    """,
)
def case_embedding_padding_idx():
    pad = 1  # Julia's pad = 2
    m = Embedding(10, 4, padding_idx=pad)
    assert m.padding_idx == pad
    equal(m.weight[:, pad], np.zeros(4))
    equal(m(pad), np.zeros(4))
    raises(ValueError, Embedding, 10, 4, padding_idx=10)
    g = fluxjax.gradient(lambda m: jnp.sum(m(np.array([pad, 3]))), m)[0].weight
    equal(g[:, pad], np.zeros(4))


@case(
    names=("EmbeddingBag", "identity_init"),
    source="Flux.jl src/layers/basic.jl (EmbeddingBag docstring)",
    julia="""
    julia> eb = EmbeddingBag(26 => 3, init=Flux.identity_init(gain=100))
    EmbeddingBag(26 => 3)  # 78 parameters
    julia> eb([2])  # one bag of 1 item
     0.0 100.0 0.0
    julia> eb([3,3,1])  # one bag of 3 items, one mean embedding
     33.333332 0.0 66.666664
    julia> eb([[3,1,3], [2,1]])  # two bags
     33.3333  50.0
      0.0     50.0
     66.6667   0.0
    julia> eb([1 1 1 1; 1 2 3 4])  # 4 bags each of 2 items, eachcol([1 1 1 1; 1 2 3 4])
     100.0  50.0  50.0  50.0
       0.0  50.0   0.0   0.0
       0.0   0.0  50.0   0.0
    julia> eb(rand(1:26, 10, 5, 5)) |> size  # 25 bags each of 10 items
    (3, 5, 5)
    julia> data = [11, 1, 12, 2, 13, 3, 14];
    julia> eb(data, [1, 4])  # two bags, of 3 and 4 items
     33.3333   0.0
      0.0     25.0
      0.0     25.0
    julia> eb(Flux.onehotbatch("bba", 'a':'z'))  # same as [2,2,1], one bag of 3 items
     33.333332 66.666664 0.0
    julia> eb([Flux.onehotbatch("bba", 'a':'z'), Flux.onehotbatch("cc", 'a':'z')])  # two bags
     33.3333    0.0
     66.6667    0.0
      0.0     100.0
    """,
)
def case_embeddingbag():
    eb = fluxjax.EmbeddingBag(26, 3, init=fluxjax.identity_init(gain=100))
    assert repr(eb).split("#")[0].rstrip() == "EmbeddingBag(26 => 3)" and "# 78 parameters" in repr(eb)
    close(eb([1]), [0, 100, 0])  # 0-based indices
    close(eb([2, 2, 0]), [33.333332, 0, 66.666664])
    close(eb([[2, 0, 2], [1, 0]]), rows([33.3333, 50.0], [0, 50.0], [66.6667, 0]))
    close(eb(np.array([[0, 0, 0, 0], [0, 1, 2, 3]])), rows([100, 50, 50, 50], [0, 50, 0, 0], [0, 0, 50, 0]))
    assert eb(np.random.randint(0, 26, (10, 5, 5))).shape == (3, 5, 5)
    data = [10, 0, 11, 1, 12, 2, 13]
    close(eb(data, [0, 3]), rows([33.3333, 0], [0, 25], [0, 25]))
    az = "abcdefghijklmnopqrstuvwxyz"
    close(eb(fluxjax.onehotbatch("bba", az)), [33.333332, 66.666664, 0])
    close(eb([fluxjax.onehotbatch("bba", az), fluxjax.onehotbatch("cc", az)]), rows([33.3333, 0], [66.6667, 0], [0, 100]))


@case(
    names=("EmbeddingBag", "Embedding", "onehotbatch"),
    source=BASIC,
    julia="""
    @testset for reduction in [sum, Statistics.mean, maximum]
      vocab_size, embed_size = 10, 4
      emb_bag = Flux.EmbeddingBag(vocab_size => embed_size, reduction)
      emb = Flux.Embedding(emb_bag.weight)
      @test size(emb_bag.weight) == (embed_size, vocab_size)
      @test_throws ErrorException emb_bag(2)
      x = rand(1:vocab_size, 3);  y = emb_bag(x);  z = vec(reduction(emb(x), dims=2))
      @test y isa Vector{Float32};  @test y ≈ z
      # PyTorch style `input`/`offset` bagging
      @test emb_bag([1,3,2,4,5,7], [1,3,5]) ≈ emb_bag([[1,3], [2,4], [5,7]])
      @test emb_bag([1,3,2,4,5,7], [1,3,5]) ≈ emb_bag([1 2 5; 3 4 7])
      @test_throws ArgumentError emb_bag([1,2,3,4,5,6], [2, 4])
      @test_throws ArgumentError emb_bag([1,2,3,4,5,6], [1, 12])
      @test emb_bag([1,2,3,4,5,6,7,8,9,10], [1,5,6,8]) ≈ emb_bag([[1,2,3,4], [5], [6,7], [8,9,10]])
      x = [rand(1:vocab_size, 3) for _ in 1:4];  y = emb_bag(x);  z = reduce(hcat, reduction.(emb.(x), dims=2))
      @test y isa Matrix{Float32};  @test y ≈ z
      x = rand(1:vocab_size, (3, 5));  xvec = collect(eachcol(x));  y = emb_bag(x)
      @test y ≈ emb_bag(xvec);  @test y ≈ reduce(hcat, reduction.(emb.(xvec), dims=2))
      @test_throws ErrorException emb_bag(Flux.OneHotVector(3, vocab_size))
      i2 = rand(1:vocab_size, 3);  y2 = emb_bag(Flux.OneHotMatrix(i2, vocab_size))
      @test y2 isa Vector{Float32};  @test y2 ≈ vec(reduction(emb(i2), dims=2))
      @test_throws DimensionMismatch emb_bag(Flux.OneHotMatrix(1:5, 1000))
    end
    # test _splitat: offsets_non_monotonic = [1, 2, 2, 5], offsets_non_sorted = [1, 5, 2] throw ArgumentError
    """,
)
def case_embeddingbag_testset():
    for reduction, red in [(jnp.sum, np.sum), ("mean", np.mean), (max, np.max)]:
        vocab_size, embed_size = 10, 4
        emb_bag = fluxjax.EmbeddingBag(vocab_size, embed_size, reduction)
        emb = Embedding(emb_bag.weight)
        assert emb_bag.weight.shape == (embed_size, vocab_size)
        raises(TypeError, emb_bag, 1)
        x = np.random.randint(0, vocab_size, 3)
        y = emb_bag(x)
        assert y.shape == (embed_size,) and y.dtype == jnp.float32
        close(y, red(np.asarray(emb(x)), axis=1))
        # 0-based: Julia's data [1,3,2,4,5,7] and offsets [1,3,5] minus 1
        close(emb_bag([0, 2, 1, 3, 4, 6], [0, 2, 4]), emb_bag([[0, 2], [1, 3], [4, 6]]))
        close(emb_bag([0, 2, 1, 3, 4, 6], [0, 2, 4]), emb_bag(np.array([[0, 1, 4], [2, 3, 6]])))
        raises(ValueError, emb_bag, [0, 1, 2, 3, 4, 5], [1, 3])
        raises(ValueError, emb_bag, [0, 1, 2, 3, 4, 5], [0, 11])
        raises(ValueError, emb_bag, list(range(9)), [0, 1, 1, 4])
        raises(ValueError, emb_bag, list(range(9)), [0, 4, 1])
        close(emb_bag(list(range(10)), [0, 4, 5, 7]), emb_bag([[0, 1, 2, 3], [4], [5, 6], [7, 8, 9]]))
        xs = [np.random.randint(0, vocab_size, 3) for _ in range(4)]
        y = emb_bag(xs)
        assert y.shape == (embed_size, 4)
        close(y, np.stack([red(np.asarray(emb(v)), axis=1) for v in xs], axis=1))
        x = np.random.randint(0, vocab_size, (3, 5))
        xvec = [x[:, j] for j in range(5)]
        y = emb_bag(x)
        close(y, emb_bag(xvec))
        close(y, np.stack([red(np.asarray(emb(v)), axis=1) for v in xvec], axis=1))
        raises(TypeError, emb_bag, fluxjax.onehot(2, range(vocab_size)))
        i2 = np.random.randint(0, vocab_size, 3)
        y2 = emb_bag(fluxjax.onehotbatch(i2, range(vocab_size)))
        assert y2.shape == (embed_size,)
        close(y2, red(np.asarray(emb(i2)), axis=1))
        raises(DimensionMismatch, emb_bag, fluxjax.onehotbatch(np.arange(5), range(1000)))
