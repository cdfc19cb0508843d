# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Flux utilities: parameters, destructure, precision, modules, train/test mode, devices (Flux.jl test/utils.jl).

The initialisers are in compat/cases_init.py, one-hot and DataLoader in compat/cases_data.py."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import Chain, Conv, Dense, LayerNorm, SkipConnection

UTILS = "Flux.jl test/utils.jl"


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
    names=("get_device", "cpu_device", "gpu_device"),
    source="Flux.jl src/deprecations.jl (v0.16: the deprecated get_device() and get_device(backend, idx))",
    julia="""
    function get_device(; verbose::Bool=false)
      Base.depwarn("get_device() is deprecated. Use `gpu_device()` instead.", :get_device)
      return MLDataDevices.gpu_device()
    end
    function get_device(backend::String, idx::Int = 0)
      ...
      if backend == "CPU"
          return cpu_device()
      else
          return gpu_device(idx+1, force=true)
      end
    end
    """,
)
def case_get_device_deprecated_forms():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the depwarn, and gpu_device's CPU fallback warning
        dev = fluxjax.get_device()
        assert dev == fluxjax.gpu_device()
        cdev = fluxjax.get_device("CPU")
    assert cdev == fluxjax.cpu_device()
    x = fluxjax.rand32(3)
    equal(cdev(x), x)


@case(
    names=("reset!", "RNN"),
    source="Flux.jl src/deprecations.jl (v0.16)",
    julia="""
    function reset!(x)
      Base.depwarn("reset!(m) is deprecated. You can remove this call as it is no more needed.", :reset!)
      return x
    end
    """,
)
def case_reset():
    import warnings

    m = fluxjax.RNN(2, 3)
    x = fluxjax.rand32(2, 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert fluxjax.reset_(m) is m
    equal(m(x), fluxjax.reset_(m)(x))


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
