# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Flux's initialisers (Flux.jl test/utils.jl, the initialisation testset)."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import Conv, Dense

UTILS = "Flux.jl test/utils.jl"


@case(
    names=("nfan",),
    source=UTILS,
    julia="""
    @test Flux.nfan() == (1, 1) #For a constant
    @test Flux.nfan(100) == (1, 100) #For vector
    @test Flux.nfan(100, 200) == (200, 100) == Flux.nfan((100, 200)) #For Dense layer
    @test Flux.nfan(2, 30, 40) == (2 * 30, 2 * 40) #For 1D Conv layer
    @test Flux.nfan(2, 3, 40, 50) == (2 * 3 * 40, 2 * 3 * 50) #For 2D Conv layer
    @test Flux.nfan(2, 3, 4, 50, 60) == (2 * 3 * 4 * 50, 2 * 3 * 4 * 60) #For 3D Conv layer
    """,
)
def case_nfan():
    from fluxjax.init import nfan

    assert tuple(nfan()) == (1, 1)
    assert tuple(nfan(100)) == (1, 100)
    assert tuple(nfan(100, 200)) == (200, 100)
    assert tuple(nfan(2, 30, 40)) == (60, 80)
    assert tuple(nfan(2, 3, 40, 50)) == (240, 300)
    assert tuple(nfan(2, 3, 4, 50, 60)) == (1200, 1440)


INITS = ("glorot_uniform", "glorot_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse_init",
         "truncated_normal", "lecun_normal", "identity_init", "rand32", "randn32")


@case(
    names=INITS + ("gradient",),
    source=UTILS,
    julia="""
    @testset "Basics: $init" for init in [
        Flux.glorot_uniform, Flux.glorot_normal, Flux.kaiming_uniform,Flux.kaiming_normal, Flux.orthogonal,
        Flux.sparse_init, Flux.truncated_normal, Flux.lecun_normal, Flux.identity_init, Flux.rand32, Flux.randn32]
      if init == Flux.sparse_init
        init = (args...) -> Flux.sparse_init(args...; sparsity=0.5)
      else
        # sparse_init is the only one which accepts only matrices:
        @test size(init(3)) == (3,)
        @test size(init(3, 4, 5)) == (3, 4, 5)
      end
      @test size(init(3, 4)) == (3, 4)
      # rng, and currying:
      @test size(init(MersenneTwister(1), 3, 4)) == (3, 4)
      closure = init(MersenneTwister(1))
      @test size(closure(3, 4)) == (3, 4)
      # eltype, default Float32
      @test eltype(init(3, 4)) == Float32
      # @non_differentiable
      @test gradient(x -> sum(x .* init(3, 4)), 5.0)[1] isa Number
    end
    """,
)
def case_init_basics():

    for name in INITS:
        init = getattr(fluxjax, name)
        if name == "sparse_init":
            f = lambda *d, init=init, **k: init(*d, sparsity=0.5, **k)
        else:
            f = init
            if name != "orthogonal":  # Flux: orthogonal(3) is an error too ("1-D is not allowed"), yet the test calls it
                assert f(3).shape == (3,), name
            assert f(3, 4, 5).shape == (3, 4, 5), name
        assert f(3, 4).shape == (3, 4), name
        assert f(3, 4, rng=jax.random.PRNGKey(1)).shape == (3, 4), name
        if name not in ("rand32", "randn32", "sparse_init"):
            closure = init(rng=jax.random.PRNGKey(1))
            assert closure(3, 4).shape == (3, 4), name
        assert f(3, 4).dtype == jnp.float32, name
        g = fluxjax.gradient(lambda x, f=f: jnp.sum(x * f(3, 4)), 5.0)[0]
        assert g is not None and np.ndim(g) == 0, name


@case(
    names=("orthogonal",),
    source=UTILS,
    julia="""
    for (rows,cols) in [(5,3),(3,5)]
      v = Flux.orthogonal(rows, cols)
      rows < cols ? (@test v * v' ≈ I(rows)) : (@test v' * v ≈ I(cols))
    end
    @test size(Flux.orthogonal(3)) == (3,)    # from the "Basics" loop above
    """,
)
def case_orthogonal():
    for r, c in ((5, 3), (3, 5)):
        v = np.asarray(fluxjax.orthogonal(r, c), np.float64)
        close(v @ v.T if r < c else v.T @ v, np.eye(min(r, c)), atol=1e-5)
    assert fluxjax.orthogonal(3).shape == (3,)


@case(
    names=("glorot_uniform", "glorot_normal", "nfan"),
    source=UTILS,
    julia="""
    @testset "glorot: $init" for init ∈ [Flux.glorot_uniform, Flux.glorot_normal]
      for dims ∈ [(1000,), (100, 100), (100, 400), (2, 3, 32, 64), (2, 3, 4, 32, 64)]
          v = init(dims...)
          fan_in, fan_out = Flux.nfan(dims...)
          σ2 = 2 / (fan_in + fan_out)
          @test 0.9σ2 < var(v) < 1.1σ2
      end
      @test eltype(init(3, 4; gain=1.5)) == Float32
    end
    """,
)
def case_glorot():
    from fluxjax.init import nfan

    for init in (fluxjax.glorot_uniform, fluxjax.glorot_normal):
        for dims in ((1000,), (100, 100), (100, 400), (2, 3, 32, 64)):  # Julia also (2,3,4,32,64)
            v = np.asarray(init(*dims))
            fi, fo = nfan(*dims)
            s2 = 2 / (fi + fo)
            assert 0.9 * s2 < v.var(ddof=1) < 1.1 * s2, (init, dims)
        assert init(3, 4, gain=1.5).dtype == jnp.float32


@case(
    names=("kaiming_uniform", "kaiming_normal"),
    source=UTILS,
    julia="""
    for (n_in, n_out) in [(100, 100), (100, 400)]
      v = Flux.kaiming_uniform(n_in, n_out)
      σ2 = sqrt(6/n_out)
      @test -1σ2  < minimum(v) < -0.9σ2
      @test 0.9σ2  < maximum(v) < 1σ2
      v = Flux.kaiming_normal(n_in, n_out)
      σ2 = sqrt(2/n_out)
      @test 0.9σ2 < std(v) < 1.1σ2
    end
    @test eltype(Flux.kaiming_uniform(3, 4; gain=1.5)) == Float32
    """,
)
def case_kaiming():
    for n_in, n_out in ((100, 100), (100, 400)):
        v = np.asarray(fluxjax.kaiming_uniform(n_in, n_out))
        s = np.sqrt(6 / n_out)
        assert -s < v.min() < -0.9 * s and 0.9 * s < v.max() < s
        v = np.asarray(fluxjax.kaiming_normal(n_in, n_out))
        s = np.sqrt(2 / n_out)
        assert 0.9 * s < v.std(ddof=1) < 1.1 * s
    assert fluxjax.kaiming_uniform(3, 4, gain=1.5).dtype == jnp.float32


@case(
    names=("sparse_init",),
    source=UTILS,
    julia="""
    @test_throws ArgumentError Flux.sparse_init(100, 100, 100, sparsity=0.1)
    v = Flux.sparse_init(100, 100, sparsity=-0.1)
    @test sum(v .== 0) == 0
    v = Flux.sparse_init(100, 100, sparsity=1.1)
    @test sum(v .== 0) == length(v)
    for (n_in, n_out, sparsity, σ) in [(100, 100, 0.25, 0.1), (100, 400, 0.75, 0.01)]
      expected_zeros = ceil(Integer, n_in * sparsity)
      v = Flux.sparse_init(n_in, n_out, sparsity=sparsity, std=σ)
      @test all([sum(v[:,col] .== 0) == expected_zeros for col in 1:n_out])
      @test 0.9 * σ < std(v[v .!= 0]) < 1.1 * σ
    end
    """,
)
def case_sparse_init():
    raises(ValueError, fluxjax.sparse_init, 100, 100, 100, sparsity=0.1)
    assert np.sum(np.asarray(fluxjax.sparse_init(100, 100, sparsity=-0.1)) == 0) == 0
    assert np.sum(np.asarray(fluxjax.sparse_init(100, 100, sparsity=1.1)) == 0) == 100 * 100
    for n_in, n_out, sp, sd in ((100, 100, 0.25, 0.1), (100, 400, 0.75, 0.01)):
        v = np.asarray(fluxjax.sparse_init(n_in, n_out, sparsity=sp, std=sd))
        assert np.all((v == 0).sum(axis=0) == int(np.ceil(n_in * sp)))
        assert 0.9 * sd < v[v != 0].std(ddof=1) < 1.1 * sd


@case(
    names=("truncated_normal", "lecun_normal"),
    source=UTILS,
    julia="""
    m = Flux.truncated_normal(100, 100)
    @test minimum(m) ≈ -2 atol = 0.05  # default arguments
    @test maximum(m) ≈ 2 atol = 0.05
    @test mean(m) ≈ 0 atol = 0.1
    size100 = (100, 100, 100)
    for (μ, σ, lo, hi) in [(0.0, 1, -2, 3), (1, 2, -4.0, 5.0)]
      v = Flux.truncated_normal(size100...; mean = μ, std = σ, lo, hi)
      @test isapprox(mean(v), μ; atol = 1f-1)
      @test isapprox(minimum(v), lo; atol = 1f-2)
      @test isapprox(maximum(v), hi; atol = 1f-2)
      @test eltype(v) == Float32  # despite some Float64 arguments
    end
    @test std(Flux.lecun_normal(10, 1000)) ≈ 0.032f0 rtol=0.1
    @test std(Flux.lecun_normal(1000, 10)) ≈ 0.317f0 rtol=0.1
    """,
)
def case_truncated_normal():
    m = np.asarray(fluxjax.truncated_normal(100, 100))
    assert abs(m.min() + 2) < 0.05 and abs(m.max() - 2) < 0.05 and abs(m.mean()) < 0.1
    for mu, sd, lo, hi in ((0.0, 1, -2, 3), (1, 2, -4.0, 5.0)):
        v = fluxjax.truncated_normal(100, 100, 100, mean=mu, std=sd, lo=lo, hi=hi)
        assert v.dtype == jnp.float32
        v = np.asarray(v)
        assert abs(v.mean() - mu) < 0.1 and abs(v.min() - lo) < 0.01 and abs(v.max() - hi) < 0.01
    close(np.asarray(fluxjax.lecun_normal(10, 1000)).std(ddof=1), 0.032, rtol=0.1)
    close(np.asarray(fluxjax.lecun_normal(1000, 10)).std(ddof=1), 0.317, rtol=0.1)


@case(
    names=("identity_init", "Dense", "kaiming_uniform", "kaiming_normal", "sparse_init"),
    source=UTILS,
    julia="""
    partial = Flux.identity_init(gain=3)
    @test partial(3, 3) == Flux.identity_init(3, 3; gain=3) == [3 0 0; 0 3 0; 0 0 3]
    @test Flux.identity_init(2, 3)[:, end] == zeros(Float32, 2)
    @test Flux.identity_init(3, 2; shift=1)[1, :] == zeros(Float32, 2)
    @test Flux.identity_init(1, 1, 3, 4)[:, :, :, end] == zeros(Float32, 1, 1, 3)
    l = Dense(3 => 3, init = Flux.identity_init)
    indata = reshape(collect(Float32, 1:9), 3, 3)
    @test l(indata) == indata
    partial_ku = Flux.kaiming_uniform(gain=1e9)
    @test maximum(partial_ku(8, 8)) > 1e9 / 2
    @test maximum(partial_ku(8, 8, gain=1)) < 1e9 / 2
    partial_si = Flux.sparse_init(sparsity=1)
    @test maximum(partial_si(8, 8)) == 0
    @test maximum(partial_si(8, 8, sparsity=0)) > 0
    """,
)
def case_identity_init_and_partials():
    eye3 = rows([3, 0, 0], [0, 3, 0], [0, 0, 3])
    equal(fluxjax.identity_init(gain=3)(3, 3), eye3)
    equal(fluxjax.identity_init(3, 3, gain=3), eye3)
    equal(fluxjax.identity_init(2, 3)[:, -1], np.zeros(2))
    equal(fluxjax.identity_init(3, 2, shift=1)[0, :], np.zeros(2))
    equal(fluxjax.identity_init(1, 1, 3, 4)[:, :, :, -1], np.zeros((1, 1, 3)))
    x = jl(range(1, 10), (3, 3), np.float32)
    equal(Dense(3, 3, init=fluxjax.identity_init)(x), x)
    ku = fluxjax.kaiming_uniform(gain=1e9)
    assert float(jnp.max(ku(8, 8))) > 1e9 / 2
    assert float(jnp.max(ku(8, 8, gain=1))) < 1e9 / 2
    si = fluxjax.sparse_init(sparsity=1)
    assert float(jnp.max(si(8, 8))) == 0
    assert float(jnp.max(si(8, 8, sparsity=0))) > 0


@case(
    names=("identity_init", "Conv", "SamePad"),
    source=UTILS,
    julia="""
    @testset "$layer ID mapping with kernelsize $kernelsize" for layer in (Conv, ConvTranspose, CrossCor), kernelsize in (
        (1,), (3,), (1, 3), (3, 5), (3, 5, 7))
        nch = 3
        l = layer(kernelsize, nch=>nch, init=Flux.identity_init, pad=SamePad())
        indata = randn(Float32, kernelsize..., nch, nch)
        @test l(indata) == indata
    end
    """,
)
def case_identity_init_conv():
    for k in ((1,), (3,), (1, 3), (3, 5)):
        l = Conv(k, (3, 3), init=fluxjax.identity_init, pad=fluxjax.SamePad())
        x = np.asarray(fluxjax.randn32(*k, 3, 3))
        close(l(x), x, rtol=1e-6, atol=1e-6)


@case(
    names=("create_bias",),
    source="Flux.jl src/utils.jl (create_bias docstring and methods)",
    julia="""
    create_bias(weights, bias, size...)
    * `bias == true` creates a trainable array of the given size, of the same type as `weights`, initialised to zero.
    * `bias == false` returns `false`, which is understood by AD to be non-differentiable.
    * `bias::AbstractArray` uses the array provided, provided it has the correct size.
    function create_bias(weights::AbstractArray, bias::AbstractArray, dims::Integer...)
      size(bias) == dims || throw(DimensionMismatch("expected bias of size $(dims), got size $(size(bias))"))
    """,
)
def case_create_bias():
    from fluxjax.init import create_bias

    W = fluxjax.rand32(3, 2)
    b = create_bias(W, True, 3)
    equal(b, np.zeros(3))
    assert b.dtype == W.dtype
    assert create_bias(W, False, 3) is False
    b = create_bias(W, np.ones(3), 3)
    assert b.dtype == W.dtype
    raises((fluxjax.DimensionMismatch, ValueError), create_bias, W, np.ones(4), 3)
