# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Normalisation and dropout layer cases (Flux.jl test/layers/normalisation.jl).

`evalwgrad(f, x...) = pullback(f, x...)[1]` runs a layer inside AD, where Flux's automatic mode trains.
Field names are ASCII: `μ` → `mu`, `σ²` → `sigma2`, `β` → `beta`, `γ` → `gamma`, `ϵ` → `eps`.
"""

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import AlphaDropout, BatchNorm, Chain, Dense, Dropout, GroupNorm, InstanceNorm, LayerNorm, sigmoid

NORM = "Flux.jl test/layers/normalisation.jl"


def evalwgrad(f, *x):
    return fluxjax.pullback(f, *x)[0]


def nzeros(y):
    return int(np.sum(np.asarray(y) == 0))


@case(
    names=("Dropout", "pullback"),
    source=NORM,
    julia="""
    evalwgrad(f, x...) = pullback(f, x...)[1]
    x = [1.,2.,3.]
    @test x == Dropout(0.1; rng_kwargs...)(x)
    @test x == evalwgrad(Dropout(0; rng_kwargs...), x)
    @test zero(x) == evalwgrad(Dropout(1; rng_kwargs...), x)
    x = rand(100)
    m = Dropout(0.9; rng_kwargs...)
    y = evalwgrad(m, x)
    @test count(a->a==0, y) > 50
    testmode!(m, true)
    y = evalwgrad(m, x) # should override istraining
    @test count(a->a==0, y) == 0
    testmode!(m, false)
    y = evalwgrad(m, x)
    @test count(a->a==0, y) > 50
    m2 = Dropout(0.9; active=false, rng_kwargs...)
    y2 = evalwgrad(m2, x)
    @test count(iszero, y2) == 0
    """,
)
def case_dropout():
    x = np.float32([1, 2, 3])
    equal(Dropout(0.1)(x), x)
    equal(evalwgrad(Dropout(0), x), x)
    equal(evalwgrad(Dropout(1), x), np.zeros(3))
    x = np.asarray(fluxjax.rand32(100))
    m = Dropout(0.9)
    assert nzeros(evalwgrad(m, x)) > 50
    fluxjax.testmode_(m, True)
    assert nzeros(evalwgrad(m, x)) == 0
    fluxjax.testmode_(m, False)
    assert nzeros(evalwgrad(m, x)) > 50
    assert nzeros(evalwgrad(Dropout(0.9, active=False), x)) == 0


@case(
    names=("Dropout", "testmode!", "trainmode!", "Chain", "Dense"),
    source=NORM,
    julia="""
    x = rand(Float32, 100)
    m = Chain(Dense(100 => 100),
              Dropout(0.9; rng_kwargs...))
    y = evalwgrad(m, x)
    @test count(a->a == 0, y) > 50
    testmode!(m, true)
    y = evalwgrad(m, x) # should override istraining
    @test count(a->a == 0, y) == 0
    m = Dropout(0.9; rng_kwargs...)
    x = rand(100)
    testmode!(m)
    y = m(x)
    @test count(a->a == 0, y) == 0
    trainmode!(m)
    y = m(x)
    @test count(a->a == 0, y) > 50
    """,
)
def case_dropout_modes():
    x = fluxjax.rand32(100)
    m = Chain(Dense(100, 100), Dropout(0.9))
    assert nzeros(evalwgrad(m, x)) > 50
    fluxjax.testmode_(m, True)
    assert nzeros(evalwgrad(m, x)) == 0
    m = Dropout(0.9)
    fluxjax.testmode_(m)
    assert nzeros(m(x)) == 0
    fluxjax.trainmode_(m)
    assert nzeros(m(x)) > 50


@case(
    names=("Dropout",),
    source=NORM,
    julia="""
    x = rand(100, 50)
    m = Dropout(0.5; dims = 2, rng_kwargs...)
    y = m(x)
    c = map(i->count(a->a==0, @view y[i, :]), 1:100)
    @test minimum(c) == maximum(c)
    m = Dropout(0.5; dims = 1, rng_kwargs...)
    y = m(x)
    c = map(i->count(a->a==0, @view y[:, i]), 1:50)
    @test minimum(c) == maximum(c)
    @test Dropout(0.5; active=true).active === true
    """,
)
def case_dropout_dims():
    # Outside AD Flux's Dropout is inactive, so Julia's `m(x)` there leaves x alone and the check holds trivially;
    # here the layers are active=True, so the shared mask along the non-`dims` axes is actually tested
    x = fluxjax.rand32(100, 50) + 0.1
    y = np.asarray(Dropout(0.5, dims=1, active=True)(x))  # Julia dims=2 is axis 1
    c = (y == 0).sum(axis=1)
    assert c.min() == c.max()
    y = np.asarray(Dropout(0.5, dims=0, active=True)(x))
    c = (y == 0).sum(axis=0)
    assert c.min() == c.max()
    assert Dropout(0.5, active=True).active is True


@case(
    names=("dropout",),
    source=NORM,
    julia="""
    y = Flux.dropout(values(rng_kwargs)..., x, 0.9) # , active=true)
    @test count(a->a == 0, y) > 50
    y = Flux.dropout(values(rng_kwargs)..., x, 0.9 * 0) # , active=false)
    @test count(a->a == 0, y) == 0
    """,
)
def case_nnlib_dropout():
    import jax

    x = fluxjax.rand32(100) + 0.1
    assert nzeros(fluxjax.nnlib.dropout(jax.random.PRNGKey(0), x, 0.9)) > 50
    assert nzeros(fluxjax.nnlib.dropout(jax.random.PRNGKey(0), x, 0.0)) == 0


@case(
    names=("AlphaDropout", "pullback"),
    source=NORM,
    julia="""
    x = [1., 2., 3.]
    @test x == AlphaDropout(0.1; rng_kwargs...)(x)
    @test x == evalwgrad(AlphaDropout(0; rng_kwargs...), x)
    @test zero(x) == evalwgrad(AlphaDropout(1; rng_kwargs...), x)
    x = randn(1000) # large enough to prevent flaky test
    m = AlphaDropout(0.5; rng_kwargs...)
    y = evalwgrad(m, x)
    # Should preserve unit mean and variance
    @test mean(y) ≈ 0 atol=0.2
    @test var(y) ≈ 1 atol=0.2
    testmode!(m, true) # should override istraining
    @test evalwgrad(m, x) == x
    """,
)
def case_alphadropout():
    x = np.float32([1, 2, 3])
    equal(AlphaDropout(0.1)(x), x)
    equal(evalwgrad(AlphaDropout(0), x), x)
    equal(evalwgrad(AlphaDropout(1), x), np.zeros(3))
    x = fluxjax.randn32(1000)
    m = AlphaDropout(0.5)
    y = np.asarray(evalwgrad(m, x))
    assert abs(y.mean()) < 0.2
    assert abs(y.var(ddof=1) - 1) < 0.2
    fluxjax.testmode_(m, True)
    equal(evalwgrad(m, x), x)


@case(
    names=("BatchNorm", "pullback", "params"),
    source=NORM,
    julia="""
    let m = BatchNorm(2), x = [1.0 3.0 5.0;
                               2.0 4.0 6.0]
      @test length(Flux.trainables(m)) == 2
      @test m.β == [0, 0]  # initβ(2)
      @test m.γ == [1, 1]  # initγ(2)
      y = evalwgrad(m, x)
      @test isapprox(y, [-1.22474 0 1.22474; -1.22474 0 1.22474], atol = 1.0e-5)
      @test m.μ ≈ reshape([0.3, 0.4], 2, 1)
      @test m.σ² ≈ .1 .* var(x, dims=2, corrected=false) .* (3 / 2).+ .9 .* [1., 1.]
      x′ = m(x)
      @test isapprox(x′[1], (1 .- 0.3) / sqrt(1.3), atol = 1.0e-5)
    end
    """,
)
def case_batchnorm_step():
    m = BatchNorm(2)
    x = rows([1.0, 3, 5], [2, 4, 6], dtype=np.float32)
    assert len(fluxjax.params(m)) == 2  # Flux.trainables is missing; Flux.params counts the same arrays
    equal(m.beta, [0, 0])
    equal(m.gamma, [1, 1])
    y = evalwgrad(m, x)
    close(y, rows([-1.22474, 0, 1.22474], [-1.22474, 0, 1.22474]), atol=1e-5)
    close(m.mu, [0.3, 0.4])
    close(m.sigma2, 0.1 * x.var(axis=1) * 1.5 + 0.9)
    close(m(x)[0, 0], (1 - 0.3) / np.sqrt(1.3), atol=1e-5)


@case(
    names=("BatchNorm", "σ", "trainmode!", "testmode!", "gradient"),
    source=NORM,
    julia="""
    let m = BatchNorm(2, sigmoid), x = Float32[1.0 3.0 5.0;
                                               2.0 4.0 6.0]
      y = m(x)
      @test isapprox(y, sigmoid.((x .- m.μ) ./ sqrt.(m.σ² .+ m.ϵ)), atol = 1.0e-7)
    end
    let m = BatchNorm(1)
      trainmode!(m)
      @test_throws ArgumentError m(zeros(Float32, 1, 1))          # (C=1, N=1) => 1 value/channel
      @test_throws ArgumentError gradient(m -> sum(m(zeros(Float32, 1, 1))), m)
      @test m(reshape(Float32[0, 1, 2, 3], 4, 1, 1)) isa AbstractArray  # N=1 but 4 values/channel is fine
    end
    let m = BatchNorm(1)
      testmode!(m)
      @test m(zeros(Float32, 1, 1)) ≈ zeros(Float32, 1, 1)        # single-sample inference is fine
    end
    """,
)
def case_batchnorm_modes():
    m = BatchNorm(2, sigmoid)
    x = rows([1.0, 3, 5], [2, 4, 6], dtype=np.float32)
    mu, s2 = np.asarray(m.mu)[:, None], np.asarray(m.sigma2)[:, None]
    close(m(x), 1 / (1 + np.exp(-(x - mu) / np.sqrt(s2 + m.eps))), atol=1e-7)
    m = BatchNorm(1)
    fluxjax.trainmode_(m)
    raises(ValueError, m, np.zeros((1, 1), np.float32))
    raises(ValueError, fluxjax.gradient, lambda m: jnp.sum(m(np.zeros((1, 1), np.float32))), m)
    assert m(jl([0, 1, 2, 3], (4, 1, 1), np.float32)).shape == (4, 1, 1)
    m = BatchNorm(1)
    fluxjax.testmode_(m)
    close(m(np.zeros((1, 1), np.float32)), np.zeros((1, 1)))


@case(
    names=("BatchNorm", "trainmode!"),
    source=NORM,
    julia="""
    # with activation function
    let m = trainmode!(BatchNorm(2)), x = reshape(Float32.(1:6), 3, 2, 1)
      y = reshape(permutedims(x, [2, 1, 3]), 2, :)
      y = permutedims(reshape(m(y), 2, 3, 1), [2, 1, 3])
      @test m(x) == y
    end
    let m = trainmode!(BatchNorm(2)), x = reshape(Float32.(1:12), 2, 3, 2, 1)
      y = reshape(permutedims(x, [3, 1, 2, 4]), 2, :)
      y = permutedims(reshape(m(y), 2, 2, 3, 1), [2, 3, 1, 4])
      @test m(x) == y
    end
    @test length(Flux.trainables(BatchNorm(10, affine=false))) == 0
    """,
)
def case_batchnorm_channel_dim():
    m = BatchNorm(2)
    fluxjax.trainmode_(m)
    x = jl(range(1, 7), (3, 2, 1), np.float32)
    y = np.transpose(x, (1, 0, 2)).reshape((2, -1), order="F")
    y = np.transpose(np.asarray(m(y)).reshape((2, 3, 1), order="F"), (1, 0, 2))
    close(m(x), y, rtol=1e-6)
    x = jl(range(1, 13), (2, 3, 2, 1), np.float32)
    y = np.transpose(x, (2, 0, 1, 3)).reshape((2, -1), order="F")
    y = np.transpose(np.asarray(m(y)).reshape((2, 2, 3, 1), order="F"), (1, 2, 0, 3))
    close(m(x), y, rtol=1e-6)
    assert len(fluxjax.params(BatchNorm(10, affine=False))) == 0


@case(
    names=("InstanceNorm", "pullback"),
    source=NORM,
    julia="""
    let m = InstanceNorm(2; affine=true, track_stats=true), sizes = (3, 2, 2),
          x = reshape(collect(1:prod(sizes)), sizes)
        x = Float32.(x)
        @test m.β == [0, 0]  # initβ(2)
        @test m.γ == [1, 1]  # initγ(2)
        y = evalwgrad(m, x)
        @test m.μ ≈ [0.5, 0.8]
        n = prod(size(x,i) for i in 1:N-2)
        corr = n / (n-1)
        σ² = var(x, dims=1:N-2, corrected=false)
        @test m.σ² ≈ 0.1*corr*vec(mean(σ², dims=N)) .+ 0.9 * 1
        y = m(x)
        @test y ≈ (x .- reshape(m.μ, 1,2,1)) ./ sqrt.(reshape(m.σ², 1,2,1) .+ 1f-5)   atol=1.0e-5
    end
    """,
)
def case_instancenorm_tracked():
    m = InstanceNorm(2, affine=True, track_stats=True)
    x = jl(range(1, 13), (3, 2, 2), np.float32)
    equal(m.beta, [0, 0])
    equal(m.gamma, [1, 1])
    evalwgrad(m, x)
    close(m.mu, [0.5, 0.8])
    s2 = x.var(axis=0)  # (2, 2): per channel, per sample
    close(m.sigma2, 0.1 * 1.5 * s2.mean(axis=1) + 0.9)
    y = m(x)
    close(y, (x - np.asarray(m.mu).reshape(1, 2, 1)) / np.sqrt(np.asarray(m.sigma2).reshape(1, 2, 1) + 1e-5), atol=1e-5)


@case(
    names=("InstanceNorm", "σ", "params"),
    source=NORM,
    julia="""
    let m = InstanceNorm(2, sigmoid), sizes = (3, 2, 2),
        x = reshape(collect(1:prod(sizes)), sizes)
      @test length(Flux.trainables(m)) == 0
      x = Float64.(x)
      y = m(x)
      μ = mean(x, dims=1)
      σ² = var(x, dims=1, corrected=false)
      @test y ≈ sigmoid.((x .- μ) ./ sqrt.(σ² .+ m.ϵ))   atol=1.0e-7
    end
    """,
)
def case_instancenorm_default():
    m = InstanceNorm(2, sigmoid)
    assert len(fluxjax.params(m)) == 0
    x = jl(range(1, 13), (3, 2, 2), np.float32)
    mu, s2 = x.mean(axis=0, keepdims=True), x.var(axis=0, keepdims=True)
    close(m(x), 1 / (1 + np.exp(-(x - mu) / np.sqrt(s2 + m.eps))), atol=1e-6)


@case(
    names=("InstanceNorm", "BatchNorm", "trainmode!"),
    source=NORM,
    julia="""
    let m_inorm = trainmode!(InstanceNorm(2; affine=true)), m_bnorm = trainmode!(BatchNorm(12)), sizes = (5, 5, 3, 4, 2, 6),
        x = reshape(Float32.(collect(1:prod(sizes))), sizes)
      @test m_inorm(x) == reshape(m_bnorm(reshape(x, (sizes[1:end - 2]..., :, 1))), sizes)
    end
    """,
)
def case_instancenorm_is_batchnorm():
    sizes = (3, 2, 2, 2, 6)  # Julia uses (5, 5, 3, 4, 2, 6); a smaller 3-D case of the same identity
    mi, mb = InstanceNorm(2, affine=True), BatchNorm(12)
    fluxjax.trainmode_(mi)
    fluxjax.trainmode_(mb)
    x = jl(range(1, int(np.prod(sizes)) + 1), sizes, np.float32)
    want = np.asarray(mb(x.reshape(sizes[:-2] + (-1, 1), order="F"))).reshape(sizes, order="F")
    close(mi(x), want, rtol=1e-5, atol=1e-5)


@case(
    names=("LayerNorm", "normalise", "params"),
    source=NORM,
    julia="""
    x = rand(2,3)
    @test LayerNorm(2)(x) ≈ Flux.normalise(x, dims=1)
    x = rand(2,3,4)
    @test LayerNorm(2)(x) ≈ Flux.normalise(x, dims=1)
    x = rand(2)
    @test LayerNorm(2, tanh)(x) ≈ tanh.(Flux.normalise(x, dims=1))
    x = rand(2,3,4,5)
    @test LayerNorm((2,3))(x) ≈ Flux.normalise(x, dims=(1,2))
    m = LayerNorm((2,3,4))
    @test length(Flux.trainables(m)) == 2
    m = LayerNorm((2,3,4), affine=false)
    @test length(Flux.trainables(m)) == 0
    """,
)
def case_layernorm():
    normalise = fluxjax.normalise
    x = fluxjax.rand32(2, 3)
    close(LayerNorm(2)(x), normalise(x, dims=0), atol=1e-5)
    x = fluxjax.rand32(2, 3, 4)
    close(LayerNorm(2)(x), normalise(x, dims=0), atol=1e-5)
    x = fluxjax.rand32(2)
    close(LayerNorm(2, jnp.tanh)(x), jnp.tanh(normalise(x, dims=0)), atol=1e-5)
    x = fluxjax.rand32(2, 3, 4, 5)
    close(LayerNorm((2, 3))(x), normalise(x, dims=(0, 1)), atol=1e-5)
    assert len(fluxjax.params(LayerNorm((2, 3, 4)))) == 2
    assert len(fluxjax.params(LayerNorm((2, 3, 4), affine=False))) == 0


@case(
    names=("normalise",),
    source="Flux.jl src/layers/stateless.jl (normalise docstring)",
    julia="""
    julia> Flux.normalise([90, 100, 110, 130, 70])
    5-element Vector{Float64}:
     -0.5 0.0 0.5 1.5 -1.5   (≈, eps = 1f-5)
    """,
)
def case_normalise():
    close(fluxjax.normalise(np.array([90.0, 100, 110, 130, 70])), [-0.5, 0, 0.5, 1.5, -1.5], rtol=1e-4)


@case(
    names=("GroupNorm", "pullback"),
    source=NORM,
    julia="""
    let m = GroupNorm(4,2), sizes = (3,4,2),
          x = reshape(collect(1:prod(sizes)), sizes)
        x = Float32.(x)
        @test m.β == [0, 0, 0, 0]  # initβ(32)
        @test m.γ == [1, 1, 1, 1]  # initγ(32)
        ŷ = evalwgrad(m, x)
        @test m.μ === nothing
        @test m.σ² === nothing
        ŷ = m(x)
        y = [-1.4638476 0.29276943 -1.4638476 0.29276943; -0.87830865 0.87830853 -0.8783088 0.8783083; -0.29276967 1.4638474 -0.2927699 1.4638472;;; -1.4638476 0.29276943 -1.4638472 0.29276943; -0.8783083 0.8783083 -0.8783083 0.8783083; -0.29276943 1.4638472 -0.29276943 1.4638472]
        @test ŷ ≈ y   atol=1.0e-5
    end
    """,
)
def case_groupnorm():
    m = GroupNorm(4, 2)
    x = jl(range(1, 25), (3, 4, 2), np.float32)
    equal(m.beta, [0, 0, 0, 0])
    equal(m.gamma, [1, 1, 1, 1])
    evalwgrad(m, x)
    assert getattr(m, "mu", None) is None and getattr(m, "sigma2", None) is None
    page1 = rows([-1.4638476, 0.29276943, -1.4638476, 0.29276943], [-0.87830865, 0.87830853, -0.8783088, 0.8783083],
                 [-0.29276967, 1.4638474, -0.2927699, 1.4638472])
    page2 = rows([-1.4638476, 0.29276943, -1.4638472, 0.29276943], [-0.8783083, 0.8783083, -0.8783083, 0.8783083],
                 [-0.29276943, 1.4638472, -0.29276943, 1.4638472])
    close(m(x), np.stack([page1, page2], axis=2), atol=1e-5)


@case(
    names=("GroupNorm", "σ"),
    source=NORM,
    julia="""
    let m = GroupNorm(4,2, sigmoid), sizes = (3, 4, 2),
        x = reshape(collect(1:prod(sizes)), sizes)
      x = Float32.(x)
      ŷ = m(x)
      y = [0.18787955 0.57267404 0.18787955 0.57267404; 0.2935284 0.70647156 0.29352835 0.70647156; 0.42732593 0.81212044 0.42732587 0.8121204;;; 0.18787955 0.57267404 0.1878796 0.57267404; 0.29352847 0.70647156 0.29352847 0.70647156; 0.42732602 0.8121204 0.42732602 0.8121204]
      @test ŷ ≈ y   atol=1e-5
    end
    let IN = trainmode!(InstanceNorm(4; affine=true)), GN = trainmode!(GroupNorm(4,4)), sizes = (2,2,3,4,5),
        x = Float32.(reshape(collect(1:prod(sizes)), sizes))
      @test IN(x) ≈ GN(x)
    end
    """,
)
def case_groupnorm_sigmoid():
    m = GroupNorm(4, 2, sigmoid)
    x = jl(range(1, 25), (3, 4, 2), np.float32)
    page1 = rows([0.18787955, 0.57267404, 0.18787955, 0.57267404], [0.2935284, 0.70647156, 0.29352835, 0.70647156],
                 [0.42732593, 0.81212044, 0.42732587, 0.8121204])
    page2 = rows([0.18787955, 0.57267404, 0.1878796, 0.57267404], [0.29352847, 0.70647156, 0.29352847, 0.70647156],
                 [0.42732602, 0.8121204, 0.42732602, 0.8121204])
    close(m(x), np.stack([page1, page2], axis=2), atol=1e-5)
    IN, GN = InstanceNorm(4, affine=True), GroupNorm(4, 4)
    fluxjax.trainmode_(IN)
    fluxjax.trainmode_(GN)
    x = jl(range(1, 2 * 2 * 4 * 5 + 1), (2, 2, 4, 5), np.float32)  # Julia: (2,2,3,4,5); 2-D here
    close(IN(x), GN(x), atol=1e-5)


@case(
    names=("WeightNorm", "remove_weight_norms", "gradient"),
    source="Flux.jl test/test_common/normalization.jl",
    julia="""
    x = rand(Float32, 1, 3)
    mn = WeightNorm(Dense(1 => 2))
    m = Flux.remove_weight_norms(mn)
    @test m(x) ≈ mn(x)
    @test_throws "does not have field" WeightNorm(m, :weights)
    @test_throws "is all zero" WeightNorm(m, :bias)
    og = gradient(m -> sum(m(x)), m)[1]
    g = gradient(mn -> sum(mn(x)), mn)[1]
    v = mn.layer.weight; v = v ./ sqrt.(sum(abs2, v; dims=2) .+ eps(Float32))
    @test (og.weight .* v) ≈ g.g
    @test (og.weight .* mn.g .- mn.g .* g.g .* v) ≈ g.layer.weight atol=1f-6
    c = Chain(WeightNorm(Conv((3,), 1 => 2)), Conv((3,), 2 => 2), WeightNorm(Conv((3,), 2 => 3)),
              x -> reshape(x, 18, :), WeightNorm(Dense(18, 4)), Dense(4, 1))
    oc = Flux.remove_weight_norms(c)
    @test oc[1] isa Conv && oc[3] isa Conv && oc[5] isa Dense
    x = rand(Float32, 12, 1, 1)
    @test c(x) ≈ oc(x)
    """,
)
def case_weightnorm():
    x = fluxjax.rand32(1, 3)
    mn = fluxjax.WeightNorm(Dense(1, 2))
    m = fluxjax.remove_weight_norms(mn)
    close(m(x), mn(x))
    raises(ValueError, fluxjax.WeightNorm, m, "weights")
    raises(ValueError, fluxjax.WeightNorm, m, "bias")
    (og,) = fluxjax.gradient(lambda m: jnp.sum(m(x)), m)
    (g,) = fluxjax.gradient(lambda mn: jnp.sum(mn(x)), mn)
    v = mn.layer.weight
    v = v / jnp.sqrt(jnp.sum(v**2, axis=1, keepdims=True) + jnp.finfo(jnp.float32).eps)
    close(og.weight * v, g.g, rtol=1e-5)
    close(og.weight * mn.g - mn.g * g.g * v, g.layer.weight, atol=1e-6)
    c = Chain(fluxjax.WeightNorm(fluxjax.Conv((3,), (1, 2))), fluxjax.Conv((3,), (2, 2)),
              fluxjax.WeightNorm(fluxjax.Conv((3,), (2, 3))), lambda x: x.reshape(18, -1),
              fluxjax.WeightNorm(Dense(18, 4)), Dense(4, 1))
    oc = fluxjax.remove_weight_norms(c)
    assert isinstance(oc[0], fluxjax.Conv) and isinstance(oc[2], fluxjax.Conv) and isinstance(oc[4], Dense)
    x = fluxjax.rand32(12, 1, 1)
    close(c(x), oc(x), rtol=1e-5, atol=1e-6)
