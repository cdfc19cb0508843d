"""Dense and Chain (Flux.jl/test/layers/basic.jl, test/utils.jl): constructors, sizes, values, named
and indexed chains, and the size-mismatch errors.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import Chain, Dense, DimensionMismatch, gradient
from fluxjax.layers.basic import activations, identity
from fluxjax.nnlib import relu, sigmoid


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# Chain (Flux.jl/test/layers/basic.jl)


def test_activations_helper():
    # Flux.jl/test/layers/basic.jl:4-10  activations(Chain(x->x.^2, x->x .- 3, x -> tan.(x)), x)
    x = jnp.array([0.3, -0.5, 1.1])
    acts = activations(Chain(lambda x: x**2, lambda x: x - 3, jnp.tan), x)
    close(acts[0], np.array(x) ** 2)
    close(acts[1], np.array(x) ** 2 - 3)
    close(acts[2], np.tan(np.array(x, np.float32) ** 2 - 3), rtol=1e-5)
    # Flux.jl/test/layers/basic.jl:9  activations(Chain(), x) == ()
    assert activations(Chain(), x) == ()
    # Flux.jl/src/layers/basic.jl docstring: activations(Chain(x->x+1, x->x*2, x->x^3), 1) == (2, 4, 64)
    assert activations(Chain(lambda x: x + 1, lambda x: x * 2, lambda x: x**3), 1) == (2, 4, 64)


def test_chain_runs_and_size_mismatch(seeded):
    # Flux.jl/test/layers/basic.jl:16  Chain(Dense(10 => 5, σ), Dense(5 => 2))(randn32(10)) works
    assert Chain(Dense(10, 5, sigmoid), Dense(5, 2))(jnp.ones(10)).shape == (2,)
    # Flux.jl/test/layers/basic.jl:17  @test_throws DimensionMismatch Chain(Dense(10 => 5, σ),Dense(2 => 1))(randn32(10))
    with pytest.raises(DimensionMismatch):
        Chain(Dense(10, 5, sigmoid), Dense(2, 1))(jnp.ones(10))


def test_named_chain(seeded):
    # Flux.jl/test/layers/basic.jl:20-26  m = Chain(first = Dense(10 => 5, σ), second = Dense(5 => 2));
    #   m[:first] == m[1]; m[1:2] == m; m == fmap(identity, m)  (does not forget names)
    m = Chain(first=Dense(10, 5, sigmoid), second=Dense(5, 2))
    assert m(jnp.ones(10)).shape == (2,)
    assert m["first"] is m[0]
    assert m.first is m[0] and m.second is m[1] and m[-1] is m.second
    assert m[0:2].layers == m.layers
    assert list(m[0:1].layers) == ["first"]
    assert list(fluxjax.fmap(lambda a: a, m).layers) == ["first", "second"]
    # Flux.jl/test/layers/basic.jl:28  Chain(layers = Dense(10 => 10), two = identity) throws (reserved name)
    with pytest.raises(ValueError, match="reserved"):
        Chain(layers=Dense(10, 10), two=identity)


def test_named_chain_enc_dec(seeded):
    m = Chain(enc=Dense(3, 2, relu), dec=Dense(2, 3))
    x = jnp.ones((3, 4))
    close(m(x), m.dec(m.enc(x)))
    assert m["enc"] is m.enc and m[0:1][0] is m.enc
    g = gradient(lambda m: jnp.sum(m(x) ** 2), m)[0]
    assert set(g.layers) == {"enc", "dec"}
    assert g.layers["enc"].weight.shape == (2, 3)
    assert g.layers["dec"].bias.shape == (3,)


def test_chain_vector_of_layers_and_indexing(seeded):
    # Flux.jl/test/layers/basic.jl:30  Chain([Dense(10 => 5, σ), Dense(5 => 2)])(randn(Float32, 10))
    assert Chain([Dense(10, 5, sigmoid), Dense(5, 2)])(jnp.ones(10)).shape == (2,)
    # Flux.jl/test/layers/basic.jl:32-34  c[1] == c[begin]; c[3] == c[end]
    c = Chain(Dense(10, 5, sigmoid), Dense(5, 2), Dense(2, 1, relu))
    assert c[0] is c.layers[0]
    assert c[-1] is c.layers[2]
    assert len(c) == 3 and list(c) == list(c.layers)
    sub = c[0:2]
    assert isinstance(sub, Chain) and sub[0] is c[0] and sub[1] is c[1] and len(sub) == 2
    close(sub(jnp.ones(10)), c[1](c[0](jnp.ones(10))))


def test_chain_multiple_args_become_tuple():
    # Flux.jl/test/layers/basic.jl:36  Chain(identity)(1,2,3) == (1,2,3)
    assert Chain(identity)(1, 2, 3) == (1, 2, 3)


def test_activations_gradient_and_named(seeded):
    # Flux.jl/test/layers/basic.jl:39-46  gradient(c -> activations(c, X)[2][1], c) works;
    #   c2 = Chain(enc = c[1], dec = c[2]); activations(c, X) == activations(c2, X)
    c = Chain(Dense(3, 5, relu), Dense(5, 1, relu))
    c[1].bias = jnp.array([10.0])  # keep the last relu active
    X = jnp.ones(3)
    g = gradient(lambda c: activations(c, X)[1][0], c)[0]
    h1 = np.maximum(np.array(c[0].weight, np.float64) @ np.ones(3), 0)
    close(g.layers[1].weight, h1[None, :])
    close(g.layers[1].bias, [1.0])
    c2 = Chain(enc=c[0], dec=c[1])
    for a, b in zip(activations(c, X), activations(c2, X)):
        close(a, b)
    g2 = gradient(lambda c: activations(c, X)[1][0], c2)[0]
    close(g2.layers["dec"].weight, g.layers[1].weight)


# ----------------------------------------------------------------------------------------------
# Dense (Flux.jl/test/layers/basic.jl "Dense")


def test_dense_constructors():
    # Flux.jl/test/layers/basic.jl:50-51  size(Dense(10 => 100).weight) == (100, 10); bias (100,)
    d = Dense(10, 100)
    assert d.weight.shape == (100, 10) and d.bias.shape == (100,)
    assert d.weight.dtype == jnp.float32
    assert Dense((10, 100)).weight.shape == (100, 10)
    W = np.random.default_rng(0).random((100, 10)).astype(np.float32)
    # Flux.jl/test/layers/basic.jl:52-53  Dense(rand(100,10), rand(100)).σ == identity; Dense(rand(100,10)).σ
    assert Dense(W, np.ones(100, np.float32)).sigma is identity
    assert Dense(W).sigma is identity
    # Flux.jl/test/layers/basic.jl:55-57  Dense(W, false).σ == identity; Dense(W, false, tanh).σ == tanh
    assert Dense(W, False).sigma is identity and Dense(W, False).bias is False
    assert Dense(W, False, jnp.tanh).sigma is jnp.tanh
    # Flux.jl/test/layers/basic.jl:58-59  Dense(rand(Float16,100,10), true).bias isa Vector{Float16};
    #   a Float64 bias is converted to match
    W16 = W.astype(np.float16)
    assert Dense(W16, True).bias.dtype == jnp.float16
    assert Dense(W16, np.ones(100)).bias.dtype == jnp.float16
    # Flux.jl/test/layers/basic.jl:64-65  Dense(3 => 4; bias=rand(5)), Dense(rand(4,3), rand(5)) throw DimensionMismatch
    with pytest.raises(DimensionMismatch):
        Dense(3, 4, bias=np.ones(5, np.float32))
    with pytest.raises(DimensionMismatch):
        Dense(np.ones((4, 3), np.float32), np.ones(5, np.float32))
    # Flux.jl/test/layers/basic.jl:62,66  Dense(10 => 10.5) and Dense(rand(5)) throw
    with pytest.raises(ValueError):
        Dense(10, 10.5)
    with pytest.raises(ValueError):
        Dense(np.ones(5, np.float32))


def test_dense_dimensions():
    d = Dense(10, 5)
    # Flux.jl/test/layers/basic.jl:72  length(Dense(10 => 5)(randn32(10))) == 5
    assert d(jnp.ones(10)).shape == (5,)
    # Flux.jl/test/layers/basic.jl:73  Dense(10 => 5)(randn32(1)) throws DimensionMismatch
    with pytest.raises(DimensionMismatch):
        d(jnp.ones(1))
    # Flux.jl/test/layers/basic.jl:74  Dense(10 => 5)(1) throws (no scalar input)
    with pytest.raises((TypeError, ValueError)):
        d(1)
    # Flux.jl/test/layers/basic.jl:76-79  shapes (5,), (5,2), (5,2,3), (5,2,3,4)
    assert d(jnp.ones(10)).shape == (5,)
    assert d(jnp.ones((10, 2))).shape == (5, 2)
    assert d(jnp.ones((10, 2, 3))).shape == (5, 2, 3)
    assert d(jnp.ones((10, 2, 3, 4))).shape == (5, 2, 3, 4)
    # Flux.jl/test/layers/basic.jl:80  Dense(10 => 5)(randn(11,2,3)) throws DimensionMismatch
    with pytest.raises(DimensionMismatch):
        d(jnp.ones((11, 2, 3)))


def test_dense_nd_matches_columnwise():
    d = Dense(3, 2)
    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, 2, 4)), jnp.float32)
    y = d(x)
    for i in range(2):
        for j in range(4):
            close(y[:, i, j], d(x[:, i, j]), rtol=1e-5)


def test_dimension_mismatch_message():
    # Flux.jl/src/layers/stateless.jl (_size_check), as quoted in DESIGN.md:
    #   "DimensionMismatch: layer Dense(2 => 3) expects size(input, 1) == 2, but got 3×5 Matrix"
    with pytest.raises(DimensionMismatch) as e:
        Dense(2, 3)(jnp.ones((3, 5)))
    assert isinstance(e.value, ValueError)
    assert str(e.value) == (
        "layer Dense(2 => 3) expects size(input, 1) == 2, but got 3×5 Matrix{float32}. In Python terms: "
        "Dense(2 => 3) expects x.shape[0] == 2 (features first, batch last), got x.shape == (3, 5)"
    )  # Flux's text, then the Python reading (no transpose fits here, so no hint)
    with pytest.raises(DimensionMismatch, match=r"^layer Dense\(10 => 5\) expects size\(input, 1\) == 10, but got "
                       r"11×2×3 Array"):
        Dense(10, 5)(jnp.ones((11, 2, 3)))


def test_dense_all_ones():
    # Flux.jl/test/layers/basic.jl:84-88  Dense(10 => 2, identity, init = ones)([ones(10,1) 2*ones(10,1)])
    #   == [10 20; 10 20], with and without bias; Dense(10 => 1, init=ones)(ones(10,2)) == 10*ones(1,2)
    ones = lambda *s, rng=None: jnp.ones(s, jnp.float32)
    x = jnp.concatenate([jnp.ones((10, 1)), 2 * jnp.ones((10, 1))], axis=1)
    assert np.array_equal(Dense(10, 2, identity, init=ones)(x), [[10, 20], [10, 20]])
    assert np.array_equal(Dense(10, 2, identity, init=ones, bias=False)(x), [[10, 20], [10, 20]])
    assert np.array_equal(Dense(10, 1, identity, init=ones)(jnp.ones((10, 2))), 10 * np.ones((1, 2)))
    assert np.array_equal(Dense(10, 1, identity, init=ones)(jnp.ones((10, 1))), 10 * np.ones((1, 1)))
    assert np.array_equal(Dense(10, 2, identity, init=ones)(jnp.ones((10, 1))), 10 * np.ones((2, 1)))


def test_dense_explicit_weights_values():
    W = jnp.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5]])
    b = jnp.array([0.5, -1.0, 2.0])
    x = jnp.array([[1.0, -1.0], [2.0, 0.0]])
    close(Dense(W, b)(x), np.array(W) @ np.array(x) + np.array(b)[:, None])
    close(Dense(W, b, relu)(x), np.maximum(np.array(W) @ np.array(x) + np.array(b)[:, None], 0))
    close(Dense(W, False)(x), np.array(W) @ np.array(x))


def test_dense_type_matching(monkeypatch):
    # Flux.jl/test/layers/basic.jl:91-104  d1 = Dense(2 => 3); d2 = Dense(d1.weight, false);
    #   d1(x1) ≈ d2(x1) ≈ d1.weight * x1; Float64 input gives Float32 output (with a warning);
    #   Int and Bool input are converted
    d1 = Dense(2, 3)
    d2 = Dense(d1.weight, False)
    x1 = jnp.asarray(np.random.default_rng(2).normal(size=(2, 4)), jnp.float32)
    close(d1(x1), np.array(d1.weight) @ np.array(x1), rtol=1e-5)
    close(d2(x1), d1(x1))
    x2 = np.asarray(x1, np.float64)
    monkeypatch.setattr(fluxjax._checks, "_warned", set())  # Flux warns once per session (maxlog=1)
    with pytest.warns(UserWarning, match="float64"):
        y = d1(x2)
    assert y.dtype == jnp.float32
    close(y, np.array(d1.weight, np.float64) @ x2, rtol=1e-5)
    assert d2(x2).dtype == jnp.float32
    x3 = np.random.default_rng(3).integers(-5, 6, size=(2, 4))
    close(d1(x3), np.array(d1.weight) @ x3, rtol=1e-5)
    x4 = np.random.default_rng(4).random((2, 4)) > 0.5
    close(d1(x4), np.array(d1.weight) @ x4.astype(np.float32), rtol=1e-5)
