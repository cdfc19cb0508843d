# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Flux utilities: initialisers, parameters, precision, modules, train/test mode (Flux.jl test/utils.jl),
one-hot encoding (OneHotArrays.jl test/onehot.jl, re-exported by Flux) and DataLoader (Flux.jl test/data.jl)."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import Chain, Conv, Dense, LayerNorm, SkipConnection

UTILS = "Flux.jl test/utils.jl"
ONEHOT = "OneHotArrays.jl test/onehot.jl"


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
    import jax

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
    names=("params", "Dense", "RNN", "Chain"),
    source=UTILS,
    julia="""
    m = Dense(10 => 5)
    @test size.(Flux.trainables(m)) == [(5, 10), (5,)]
    m = RNN(10 => 5)
    @test size.(Flux.trainables(m)) == [(5, 10), (5, 5), (5,)]
    # Layer duplicated in same chain, params just once pls.
    c = Chain(m, m)
    @test size.(Flux.trainables(c)) == [(5, 10), (5, 5), (5,)]
    mat = [1 2; 3 4.0]
    simple = ((nothing, mat, (3, mat, 4)))
    @test length(Flux.trainables(simple)) == 1
    """,
)
def case_params_collects_trainables():
    # Flux.trainables is missing in fluxjax; Flux.params (0.13-0.15) collects the same arrays, deduplicated
    assert [tuple(p.shape) for p in fluxjax.params(Dense(10, 5))] == [(5, 10), (5,)]
    m = fluxjax.RNN(10, 5)
    assert [tuple(p.shape) for p in fluxjax.params(m)] == [(5, 10), (5, 5), (5,)]
    assert [tuple(p.shape) for p in fluxjax.params(Chain(m, m))] == [(5, 10), (5, 5), (5,)]
    mat = jnp.array(rows([1, 2], [3, 4.0]))
    assert len(fluxjax.params((None, mat, (3, mat, 4)))) == 1


@case(
    names=("trainables", "destructure"),
    source=UTILS,
    julia="""
    m = Dense(10 => 5)
    @test size.(Flux.trainables(m)) == [(5, 10), (5,)]
    m = (x=[1,2.0], y=[3.0]);
    gnew = gradient(m -> (sum(norm, Flux.trainables(m))), m)[1]
    @test gnew.x ≈ [0.4472135954999579, 0.8944271909999159]
    @test gnew.y ≈ [1.0]
    mat = [1 2; 3 4.0]
    simple = ((nothing, mat, (3, mat, 4)))
    oneadj = (nt = (m = mat, a = mat'))
    @test Flux.destructure(simple)[1] == Flux.destructure(oneadj)[1] == [1, 3, 2, 4]
    """,
)
def case_trainables_destructure():
    assert [tuple(p.shape) for p in fluxjax.trainables(Dense(10, 5))] == [(5, 10), (5,)]
    m = {"x": jnp.array([1.0, 2.0]), "y": jnp.array([3.0])}
    g = fluxjax.gradient(lambda m: sum(jnp.linalg.norm(p) for p in fluxjax.trainables(m)), m)[0]
    close(g["x"], [0.4472135954999579, 0.8944271909999159])
    close(g["y"], [1.0])
    mat = jnp.array(rows([1, 2], [3, 4.0]))
    assert len(fluxjax.trainables((None, mat, (3, mat, 4)))) == 1
    # `oneadj` is not ported: Julia's `mat'` is a lazy Adjoint sharing `mat`; a JAX `mat.T` is a new array
    equal(fluxjax.destructure((None, mat, (3, mat, 4)))[0], [1, 3, 2, 4])


@case(
    names=("trainables", "Dense", "RNN", "Chain"),
    source=UTILS,
    julia="""
    @testset "Trainables" begin
      m = Dense(10 => 5)
      @test size.(Flux.trainables(m)) == [(5, 10), (5,)]
      m = RNN(10 => 5)
      @test size.(Flux.trainables(m)) == [(5, 10), (5, 5), (5,)]
      # Layer duplicated in same chain, params just once pls.
      c = Chain(m, m)
      @test size.(Flux.trainables(c)) == [(5, 10), (5, 5), (5,)]
    end
    """,
)
def case_trainables():
    shapes = lambda m: [tuple(p.shape) for p in fluxjax.trainables(m)]  # noqa: E731
    assert shapes(Dense(10, 5)) == [(5, 10), (5,)]
    m = fluxjax.RNN(10, 5)
    assert shapes(m) == [(5, 10), (5, 5), (5,)]
    assert shapes(Chain(m, m)) == [(5, 10), (5, 5), (5,)]


@case(
    names=("destructure", "Dense", "BatchNorm", "gradient", "pullback"),
    source=UTILS,
    julia="""
    @testset "restructure in gradient" begin
      x = rand(Float32, 3, 1)
      m = dm(zeros)   # Dense(3 => 2) with weight [1 3 5; 2 4 6], bias zeros
      ∇m = gradient(m -> sum(m(x)), m)[1]
      p, re = Flux.destructure(m)
      ∇p = gradient(θ -> sum(re(θ)(x)), p)[1]
      @test ∇p ≈ Flux.destructure(∇m)[1]
    end
    @testset "issue 1727" begin
      p, re = Flux.destructure(BatchNorm(3))  # 6 parameters, plus 6 non-trainable
      @test length(p) == 6
      x = rand(Float32, 3, 4)
      y, back = Flux.pullback(x, p) do x, p
        vec(re(p)(x))
      end
      @test_nowarn back(y)
      b = back(y)
      @test size(b[1]) == size(x)
      @test size(b[2]) == size(p)
    end
    """,
)
def case_destructure_gradient():
    x = jnp.asarray(np.random.rand(3, 1), jnp.float32)
    m = Dense(jnp.asarray(jl(range(1, 7), (2, 3)), jnp.float32), jnp.zeros(2))
    gm = fluxjax.gradient(lambda m: jnp.sum(m(x)), m)[0]
    p, re = fluxjax.destructure(m)
    gp = fluxjax.gradient(lambda t: jnp.sum(re(t)(x)), p)[0]
    close(gp, jnp.concatenate([jnp.ravel(gm.weight, order="F"), gm.bias]))
    p, re = fluxjax.destructure(fluxjax.BatchNorm(3))
    assert p.shape == (6,)
    x = jnp.asarray(np.random.rand(3, 4), jnp.float32)
    y, back = fluxjax.pullback(lambda x, p: jnp.ravel(re(p)(x), order="F"), x, p)
    b = back(y)
    assert b[0].shape == x.shape and b[1].shape == p.shape


@case(
    names=("destructure",),
    source="Optimisers.jl test/destructure.jl",
    julia="""
    m1 = collect(1:3.0)
    m2 = (collect(1:3.0), collect(4:6.0))
    m3 = (x = m1, y = sin, z = collect(4:6.0))
    m4 = (x = m1, y = m1, z = collect(4:6.0))  # tied
    mat = Float32[4 6; 5 7]
    m9 = (a = m1, b = mat, c = [mat, m1])
    @testset "flatten & rebuild" begin
      @test destructure(m1)[1] == 1:3
      @test destructure(m2)[1] == 1:6
      @test destructure(m3)[1] == 1:6
      @test destructure(m4)[1] == 1:6
      @test destructure(m9)[1] == 1:7
      @test destructure(m1)[2](7:9) == [7,8,9]
      @test destructure(m2)[2](4:9) == ([4,5,6], [7,8,9])
      @test destructure(m3)[2](4:9) == (x = [4,5,6], y = sin, z = [7,8,9])
      m4′ = destructure(m4)[2](4:9)
      @test m4′ == (x = [4,5,6], y = [4,5,6], z = [7,8,9])
      @test m4′.x === m4′.y
      m9′ = destructure(m9)[2](10:10:70)
      @test m9′.b === m9′.c[1]
      @test m9′.b isa Matrix{Float32}
      @test_throws Exception destructure(m7)[2]([10,20])
    end
    @testset "gradient of flatten" begin
      @test gradient(m -> destructure(m)[1][1], m1)[1] == [1,0,0]
      @test gradient(m -> destructure(m)[1][2], m2)[1] == ([0,1,0], [0,0,0])
      @test gradient(m -> destructure(m)[1][1], m3)[1] == (x = [1,0,0], y = nothing, z = [0,0,0])
    end
    @testset "gradient of rebuild" begin
      re1 = destructure(m1)[2]
      @test gradient(x -> re1(x)[1], rand(3))[1] == [1,0,0]
      re3 = destructure(m3)[2]
      @test gradient(x -> re3(x).z[1], rand(6))[1] == [0,0,0,1,0,0]
      re4 = destructure(m4)[2]
      @test gradient(x -> re4(x).y[2], rand(6))[1] == [0,1,0,0,0,0]
    end
    """,
)
def case_destructure_flatten_rebuild():
    D = fluxjax.destructure
    r = lambda i, j: jnp.arange(i, j + 1, dtype=jnp.float32)  # noqa: E731  Julia's collect(i:j)
    m1 = r(1, 3)
    m2 = (r(1, 3), r(4, 6))
    m3 = {"x": m1, "y": jnp.sin, "z": r(4, 6)}
    m4 = {"x": m1, "y": m1, "z": r(4, 6)}
    mat = jnp.asarray(rows([4, 6], [5, 7]), jnp.float32)
    m9 = {"a": m1, "b": mat, "c": [mat, m1]}
    equal(D(m1)[0], range(1, 4))
    equal(D(m2)[0], range(1, 7))
    equal(D(m3)[0], range(1, 7))
    equal(D(m4)[0], range(1, 7))
    equal(D(m9)[0], range(1, 8))
    equal(D(m1)[1](r(7, 9)), [7, 8, 9])
    a, b = D(m2)[1](r(4, 9))
    equal(a, [4, 5, 6])
    equal(b, [7, 8, 9])
    m3n = D(m3)[1](r(4, 9))
    equal(m3n["x"], [4, 5, 6])
    equal(m3n["z"], [7, 8, 9])
    assert m3n["y"] is jnp.sin
    m4n = D(m4)[1](r(4, 9))
    equal(m4n["y"], [4, 5, 6])
    assert m4n["x"] is m4n["y"]
    m9n = D(m9)[1](jnp.arange(10.0, 71.0, 10.0))
    assert m9n["b"] is m9n["c"][0] and m9n["b"].dtype == jnp.float32
    equal(m9n["b"], rows([40, 60], [50, 70]))
    raises(Exception, D(m1)[1], jnp.array([10.0, 20.0]))
    g = fluxjax.gradient
    equal(g(lambda m: D(m)[0][0], m1)[0], [1, 0, 0])
    ga, gb = g(lambda m: D(m)[0][1], m2)[0]
    equal(ga, [0, 1, 0])
    equal(gb, [0, 0, 0])
    g3 = g(lambda m: D(m)[0][0], m3)[0]
    equal(g3["x"], [1, 0, 0])
    equal(g3["z"], [0, 0, 0])
    assert g3["y"] is None
    re1 = D(m1)[1]
    equal(g(lambda x: re1(x)[0], jnp.asarray(np.random.rand(3), jnp.float32))[0], [1, 0, 0])
    re3 = D(m3)[1]
    equal(g(lambda x: re3(x)["z"][0], jnp.asarray(np.random.rand(6), jnp.float32))[0], [0, 0, 0, 1, 0, 0])
    re4 = D(m4)[1]
    equal(g(lambda x: re4(x)["y"][1], jnp.asarray(np.random.rand(6), jnp.float32))[0], [0, 1, 0, 0, 0, 0])


@case(
    names=("f32", "f64", "Chain", "Dense", "relu"),
    source=UTILS,
    julia="""
    m = Chain(Dense(10 => 5, relu; bias=false), Dense(5 => 2))
    x64 = rand(Float64, 10)
    x32 = rand(Float32, 10)
    i64 = rand(Int64, 10)
    @test eltype(m[1].weight) == Float32
    @test eltype(m(x32)) == Float32
    @test eltype(m(x64)) == Float32  # fixed by _match_eltype
    # (fluxjax: f64 needs `with jax.enable_x64(True)`, JAX's switch for float64 arrays)
    @test eltype(f64(m)(x32)) == Float64  # _match_eltype promotes, Julia would too
    @test eltype(f64(m)(x64)) == Float64
    @test eltype(f64(m)[1].weight) == Float64
    @test eltype(f32(f64(m))[1].weight) == Float32
    @test f32(x64) isa Vector{Float32}
    @test f32(x32) === x32  # doesn't copy when eltype is OK
    @test f32(i64) === i64
    """,
)
def case_precision():
    import warnings

    import jax

    m = Chain(Dense(10, 5, fluxjax.relu, bias=False), Dense(5, 2))
    x32 = fluxjax.rand32(10)
    assert m[0].weight.dtype == jnp.float32
    assert m(x32).dtype == jnp.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert m(np.random.rand(10)).dtype == jnp.float32
    assert np.asarray(fluxjax.f32(np.random.rand(10))).dtype == np.float32
    assert fluxjax.f32(x32) is x32
    i64 = np.arange(10)
    assert fluxjax.f32(i64) is i64
    with jax.enable_x64(True):  # JAX has float64 arrays only with jax_enable_x64 on
        m64 = fluxjax.f64(m)
        assert m64[0].weight.dtype == jnp.float64
        assert m64(x32).dtype == jnp.float64
        assert m64(np.random.rand(10)).dtype == jnp.float64
        assert fluxjax.f32(m64)[0].weight.dtype == jnp.float32


@case(
    names=("gradient",),
    source=UTILS,
    julia="""
    @testset "zero bias" begin
      @testset "Gradients for broadcasted $op with sizes $s" for op in (+,-,*), s in ((1,), (2,3))
        o = ones(Float32, s)
        z = zeros(Float32, s)
        @testset "Explicit" begin
          gfun(args...) = gradient((x, y) -> sum(op.(x,y)), args...)
          g = gfun(o, z)
          @test gfun(o, false) == (g[1], nothing)
          g = gfun(z, o)
          @test gfun(false, o) == (nothing, g[2])
    """,
)
def case_zero_bias_false():
    import operator

    for op in (operator.add, operator.sub, operator.mul):
        for s in ((1,), (2, 3)):
            o, z = jnp.ones(s), jnp.zeros(s)
            gfun = lambda *args, op=op: fluxjax.gradient(lambda x, y: jnp.sum(op(x, y)), *args)
            g = gfun(o, z)
            g2 = gfun(o, False)
            equal(g2[0], g[0])
            assert g2[1] is None
            g = gfun(z, o)
            g2 = gfun(False, o)
            assert g2[0] is None
            equal(g2[1], g[1])


@case(
    names=("testmode!", "trainmode!", "Chain", "Dropout", "BatchNorm"),
    source=UTILS,
    julia="""
    @testset "Train and test mode" begin
      c = Chain(DummyLayer(true))
      testmode!(c)
      @test c[1].testing
      trainmode!(c)
      @test !c[1].testing
    end
    # and for Flux's own layers (test/layers/normalisation.jl):
    @test BatchNorm(5; active=true).active === true
    """,
)
def case_train_test_mode():
    c = Chain(fluxjax.Dropout(0.5), fluxjax.BatchNorm(3))
    fluxjax.testmode_(c)
    assert c[0].active is False and c[1].active is False
    fluxjax.trainmode_(c)
    assert c[0].active is True and c[1].active is True
    fluxjax.testmode_(c, "auto")
    assert c[0].active is None
    assert fluxjax.BatchNorm(5, active=True).active is True


@case(
    names=("modules",),
    source=UTILS,
    julia="""
    m1 = Conv((2,3), 4=>5; pad=6, stride=7)
    m2 = LayerNorm(8)
    m3 = m2.diag
    m4 = SkipConnection(m1, +)
    m5 =  Chain(m4, m2)
    modules = Flux.modules(m5)
    # Depth-first descent
    @test length(modules) == 6
    @test modules[1] === m5
    @test modules[3] === m4
    @test modules[4] === m1
    @test modules[5] === m2
    @test modules[6] === m3
    mod_par = Flux.modules(Parallel(Flux.Bilinear((2,2) => 2,cbrt), Dense(2=>2,abs), Dense(2=>2,abs2)))
    @test length(mod_par) == 5
    mod_rnn = Flux.modules(Chain(Dense(2=>3), BatchNorm(3), LSTM(3=>4)))
    @test length(mod_rnn) == 6
    @test mod_rnn[end] isa Flux.LSTMCell
    """,
)
def case_modules():
    m1 = Conv((2, 3), (4, 5), pad=6, stride=7)
    m2 = LayerNorm(8)
    m3 = m2.diag
    m4 = SkipConnection(m1, lambda a, b: a + b)
    m5 = Chain(m4, m2)
    mods = fluxjax.modules(m5)
    assert len(mods) == 6, [type(x).__name__ for x in mods]
    assert mods[0] is m5 and mods[2] is m4 and mods[3] is m1 and mods[4] is m2 and mods[5] is m3
    par = fluxjax.Parallel(lambda *a: a, fluxjax.Bilinear(((2, 2), 2), jnp.cbrt), Dense(2, 2, jnp.abs), Dense(2, 2, jnp.square))
    assert len(fluxjax.modules(par)) == 5
    mod_rnn = fluxjax.modules(Chain(Dense(2, 3), fluxjax.BatchNorm(3), fluxjax.LSTM(3, 4)))
    assert len(mod_rnn) == 6
    assert isinstance(mod_rnn[-1], fluxjax.LSTMCell)


@case(
    names=("modules", "Chain", "Parallel", "SkipConnection", "Conv", "BatchNorm", "LSTM", "LSTMCell"),
    source=UTILS,
    julia="""
    m1 = Conv((2,3), 4=>5; pad=6, stride=7)
    m4 = SkipConnection(m1, +)
    m5 =  Chain(m4, Dense(2 => 2))
    modules = Flux.modules(m5)
    # Depth-first descent
    @test modules[1] === m5
    @test modules[3] === m4
    @test modules[4] === m1
    mod_par = Flux.modules(Parallel(Flux.Bilinear((2,2) => 2,cbrt), Dense(2=>2,abs), Dense(2=>2,abs2)))
    @test length(mod_par) == 5
    mod_rnn = Flux.modules(Chain(Dense(2=>3), BatchNorm(3), LSTM(3=>4)))
    @test length(mod_rnn) == 6
    @test mod_rnn[end] isa Flux.LSTMCell
    """,
)
def case_modules_containers():
    # Flux's test with LayerNorm (whose Flux version holds a Scale sub-layer) swapped for a Dense
    m1 = Conv((2, 3), (4, 5), pad=6, stride=7)
    m4 = SkipConnection(m1, lambda a, b: a + b)
    d = Dense(2, 2)
    m5 = Chain(m4, d)
    mods = fluxjax.modules(m5)
    assert mods[0] is m5 and mods[1] is m5.layers and mods[2] is m4 and mods[3] is m1 and mods[4] is d
    assert len(mods) == 5
    par = fluxjax.Parallel(lambda *a: a, fluxjax.Bilinear(((2, 2), 2), jnp.cbrt), Dense(2, 2, jnp.abs), Dense(2, 2, jnp.square))
    assert len(fluxjax.modules(par)) == 5
    mod_rnn = fluxjax.modules(Chain(Dense(2, 3), fluxjax.BatchNorm(3), fluxjax.LSTM(3, 4)))
    assert len(mod_rnn) == 6
    assert isinstance(mod_rnn[-1], fluxjax.LSTMCell)


@case(
    names=("f16", "f32", "Chain", "Dense", "gradient"),
    source=UTILS,
    julia="""
    m = Chain(Dense(10 => 5, relu; bias=false), Dense(5 => 2))
    x64 = rand(Float64, 10)
    x32 = rand(Float32, 10)
    i64 = rand(Int64, 10)
    @test f16(x64) isa Vector{Float16}
    @test gradient(x -> sum(f16(x)), x32)[1] isa Vector{Float32}
    @test f16(i64) === i64
    @test eltype(f16(m)[1].weight) == Float16
    @test eltype(f16(m)(f16(x32))) == Float16
    @test eltype(f32(f16(m))[1].weight) == Float32
    """,
)
def case_f16():
    m = Chain(Dense(10, 5, fluxjax.relu, bias=False), Dense(5, 2))
    x64 = np.random.rand(10)
    x32 = jnp.asarray(np.random.rand(10), jnp.float32)
    i64 = np.arange(10)
    assert fluxjax.f16(x64).dtype == jnp.float16
    assert fluxjax.gradient(lambda x: jnp.sum(fluxjax.f16(x)), x32)[0].dtype == jnp.float32
    assert fluxjax.f16(i64) is i64
    assert fluxjax.f16(m)[0].weight.dtype == jnp.float16
    assert fluxjax.f16(m)(fluxjax.f16(x32)).dtype == jnp.float16
    assert fluxjax.f32(fluxjax.f16(m))[0].weight.dtype == jnp.float32


@case(
    names=("bf16", "BFloat16", "f16", "f32", "BatchNorm", "InstanceNorm", "GroupNorm", "LayerNorm"),
    source=UTILS,
    julia="""
    # BFloat16
    @test eltype(bf16(m)[1].weight) == BFloat16
    @test eltype(bf16(m)(x32)) == BFloat16  # _match_eltype converts the input
    @test eltype(f32(bf16(m))[1].weight) == Float32
    @test bf16(x64) isa Vector{BFloat16}
    @test bf16(i64) === i64  # integers are not converted
    @test bf16(Float32[1, 1.5, -2.25, 96]) == BFloat16[1, 1.5, -2.25, 96]  # exact round-to-nearest-even
    @test gradient(x -> sum(bf16(x)), x32)[1] isa Vector{Float32}
    @testset "mixed-precision normalization ($cast)" for cast in (f16, bf16)
      for layer in (BatchNorm(3), InstanceNorm(3; affine=true, track_stats=true), GroupNorm(4, 2))
        hl = cast(layer)
        params = filter(x -> x isa AbstractArray, collect(Functors.fleaves(hl)))
        @test all(p -> eltype(p) == Float32, params)
      end
      @test all(p -> eltype(p) == Thalf, filter(x -> x isa AbstractArray, collect(Functors.fleaves(cast(LayerNorm(3))))))
      if cast === f16
        xh = f16(randn(Float32, 4, 4, 3, 2))
        @test eltype(f16(BatchNorm(3))(xh)) == Float16          # mixed: Float32 params, f16 data
        @test eltype(f16(InstanceNorm(3; affine=true))(xh)) == Float16
        @test eltype(f16(GroupNorm(4, 2))(f16(randn(Float32, 4, 4, 4, 2)))) == Float16
      end
    end
    """,
)
def case_bf16_and_mixed_precision_norms():
    m = Chain(Dense(10, 5, fluxjax.relu, bias=False), Dense(5, 2))
    x64, x32, i64 = np.random.rand(10), jnp.asarray(np.random.rand(10), jnp.float32), np.arange(10)
    assert fluxjax.bf16(m)[0].weight.dtype == fluxjax.BFloat16
    assert fluxjax.bf16(m)(x32).dtype == jnp.bfloat16
    assert fluxjax.f32(fluxjax.bf16(m))[0].weight.dtype == jnp.float32
    assert fluxjax.bf16(x64).dtype == jnp.bfloat16
    assert fluxjax.bf16(i64) is i64
    equal(fluxjax.bf16(np.array([1, 1.5, -2.25, 96], np.float32)).astype(np.float32), np.array([1, 1.5, -2.25, 96], np.float32))
    assert fluxjax.gradient(lambda x: jnp.sum(fluxjax.bf16(x)), x32)[0].dtype == jnp.float32
    for cast, half in ((fluxjax.f16, jnp.float16), (fluxjax.bf16, jnp.bfloat16)):
        for lay in (fluxjax.BatchNorm(3), fluxjax.InstanceNorm(3, affine=True, track_stats=True), fluxjax.GroupNorm(4, 2)):
            assert all(p.dtype == jnp.float32 for p in jax.tree_util.tree_leaves(cast(lay)))
        assert all(p.dtype == half for p in jax.tree_util.tree_leaves(cast(fluxjax.LayerNorm(3))))
        xh = cast(fluxjax.randn32(4, 4, 3, 2))  # (Flux runs the bf16 forward on a GPU only; XLA's CPU has it)
        assert cast(fluxjax.BatchNorm(3))(xh).dtype == half
        assert cast(fluxjax.InstanceNorm(3, affine=True))(xh).dtype == half
        assert cast(fluxjax.GroupNorm(4, 2))(cast(fluxjax.randn32(4, 4, 4, 2))).dtype == half


@case(
    names=("get_device", "cpu_device"),
    source="Flux.jl src/devices.jl (get_device(x) = MLDataDevices.get_device(x)) and MLDataDevices' docstring",
    julia="""
    m = Chain(Dense(2 => 3), BatchNorm(3))
    @test get_device(m) == cpu_device()          # CPUDevice()
    @test get_device(rand(Float32, 2)) == cpu_device()
    @test get_device((1, "a")) === nothing         # no arrays: the device is not determined
    """,
)
def case_get_device():
    m = Chain(Dense(2, 3), fluxjax.BatchNorm(3))
    assert fluxjax.get_device(m) == fluxjax.cpu_device()
    assert fluxjax.get_device(np.random.rand(2).astype(np.float32)) == fluxjax.cpu_device()
    assert fluxjax.get_device((1, "a")) is None


@case(
    names=("onehot", "onehotbatch"),
    source=ONEHOT,
    julia="""
    @test onehot(20, 10:10:30) == [false, true, false]
    @test onehot(20, (10,20,30)) == [false, true, false]
    @test onehot(40, (10,20,30), 20) == [false, true, false]
    @test_throws Exception onehot('d', 'a':'c')
    @test_throws Exception onehot('d', 'a':'c', 'e')
    @test onehotbatch([20, 10], 10:10:30) == Bool[0 1; 1 0; 0 0]
    @test onehotbatch([40, 10], (10,20,30), 20) == Bool[0 1; 1 0; 0 0]
    @test onehotbatch("abc", 'a':'c') == Bool[1 0 0; 0 1 0; 0 0 1]
    @test onehotbatch("zbc", ('a', 'b', 'c'), 'a') == Bool[1 0 0; 0 1 0; 0 0 1]
    @test onehotbatch([10, 20], [30, 40, 50], 30) == Bool[1 1; 0 0; 0 0]
    @test_throws Exception onehotbatch([:a, :d], [:a, :b, :c])
    @test_throws Exception onehotbatch([2, 5], 0:4)
    """,
)
def case_onehot():
    equal(fluxjax.onehot(20, range(10, 40, 10)), [False, True, False])
    equal(fluxjax.onehot(20, (10, 20, 30)), [False, True, False])
    equal(fluxjax.onehot(40, (10, 20, 30), 20), [False, True, False])
    raises(Exception, fluxjax.onehot, "d", "abc")
    raises(Exception, fluxjax.onehot, "d", "abc", "e")
    b = rows([0, 1], [1, 0], [0, 0], dtype=bool)
    equal(fluxjax.onehotbatch([20, 10], range(10, 40, 10)), b)
    equal(fluxjax.onehotbatch([40, 10], (10, 20, 30), 20), b)
    equal(fluxjax.onehotbatch("abc", "abc"), np.eye(3, dtype=bool))
    equal(fluxjax.onehotbatch("zbc", ("a", "b", "c"), "a"), np.eye(3, dtype=bool))
    equal(fluxjax.onehotbatch([10, 20], [30, 40, 50], 30), rows([1, 1], [0, 0], [0, 0], dtype=bool))
    raises(Exception, fluxjax.onehotbatch, ["a", "d"], ["a", "b", "c"])
    raises(Exception, fluxjax.onehotbatch, [2, 5], range(0, 5))


@case(
    names=("onecold", "onehotbatch"),
    source=ONEHOT,
    julia="""
    a = [1, 2, 5, 3.]
    A = [1 20 5; 2 7 6; 3 9 10; 2 1 14]
    labels = ['A', 'B', 'C', 'D']
    @test onecold(a) == 3
    @test onecold(A) == [3, 1, 4]
    @test onecold(a, labels) == 'C'
    @test onecold(A, labels) == ['C', 'A', 'D']
    data = [:b, :a, :c]
    labels = [:a, :b, :c]
    hot = onehotbatch(data, labels)
    cold = onecold(hot, labels)
    @test cold == data
    """,
)
def case_onecold():
    a = np.array([1, 2, 5, 3.0])
    A = rows([1, 20, 5], [2, 7, 6], [3, 9, 10], [2, 1, 14])
    assert fluxjax.onecold(a) == 2  # 0-based index (Julia's 3)
    equal(fluxjax.onecold(A), [2, 0, 3])
    assert fluxjax.onecold(a, list("ABCD")) == "C"
    assert list(fluxjax.onecold(A, list("ABCD"))) == ["C", "A", "D"]
    hot = fluxjax.onehotbatch(["b", "a", "c"], ["a", "b", "c"])
    assert list(fluxjax.onecold(hot, ["a", "b", "c"])) == ["b", "a", "c"]


@case(
    names=("DataLoader",),
    source="Flux.jl test/data.jl",
    julia="""
    X = reshape([1:10;], (2, 5))
    Y = [1:5;]
    d = DataLoader(X, batchsize=2)
    batches = collect(d)
    @test length(batches) == 3
    @test batches[1] == X[:,1:2]
    @test batches[2] == X[:,3:4]
    @test batches[3] == X[:,5:5]
    d = DataLoader(X, batchsize=2, partial=false)
    batches = collect(d)
    @test length(batches) == 2
    @test batches[1] == X[:,1:2]
    @test batches[2] == X[:,3:4]
    d = DataLoader((X, Y), batchsize=2)
    batches = collect(d)
    @test length(batches) == 3
    @test batches[1][1] == X[:,1:2]
    @test batches[1][2] == Y[1:2]
    @test batches[3][1] == X[:,5:5]
    @test batches[3][2] == Y[5:5]
    """,
)
def case_dataloader():
    X = jl(range(1, 11), (2, 5), np.int64)
    Y = np.arange(1, 6)
    b = list(fluxjax.DataLoader(X, batchsize=2))
    assert len(b) == 3
    equal(b[0], X[:, 0:2])
    equal(b[1], X[:, 2:4])
    equal(b[2], X[:, 4:5])
    b = list(fluxjax.DataLoader(X, batchsize=2, partial=False))
    assert len(b) == 2
    equal(b[1], X[:, 2:4])
    b = list(fluxjax.DataLoader((X, Y), batchsize=2))
    assert len(b) == 3
    equal(b[0][0], X[:, 0:2])
    equal(b[0][1], Y[0:2])
    equal(b[2][0], X[:, 4:5])
    equal(b[2][1], Y[4:5])


@case(
    names=("flatten",),
    source="Flux.jl test/outputsize.jl / MLUtils flatten docstring",
    julia="""
    @test outputsize(flatten, (5, 5, 3, 10)) == (75, 10)
    # MLUtils: flatten(x) = reshape(x, :, size(x)[end])   (column-major)
    julia> Flux.flatten(reshape(1:8, 2, 2, 2))
    4×2 Matrix{Int64}:
     1  5
     2  6
     3  7
     4  8
    """,
)
def case_flatten():
    equal(fluxjax.flatten(jl(range(1, 9), (2, 2, 2), np.int64)), rows([1, 5], [2, 6], [3, 7], [4, 8], dtype=np.int64))
    assert fluxjax.flatten(np.zeros((5, 5, 3, 10))).shape == (75, 10)


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


@case(
    names=("rng_from_array", "default_device_rng", "gradient"),
    source="Flux.jl test/utils.jl; MLDataDevices.jl test/misc_tests.jl",
    julia="""
    # make sure rng_from_array is non_differentiable
    @testset "rng_from_array" begin
      m(x) = (rand(Flux.rng_from_array(x)) * x)[1]
      gradient(m, ones(2))
    end
    @test default_device_rng(CPUDevice()) isa Random.TaskLocalRNG
    """,
)
def case_rng_from_array():
    m = lambda x: (jax.random.uniform(fluxjax.rng_from_array(x)) * x)[0]
    fluxjax.seed_(5)
    (g,) = fluxjax.gradient(m, np.ones(2, np.float32))
    fluxjax.seed_(5)
    r = jax.random.uniform(fluxjax.rng_from_array(np.ones(2)))
    close(g, [float(r), 0.0])  # the draw is a constant: only x is differentiated
    key = fluxjax.default_device_rng(fluxjax.CPUDevice())
    assert key.shape == (2,) and key.dtype == jnp.uint32  # a raw key, what rng= takes
