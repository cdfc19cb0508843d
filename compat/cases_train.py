"""Flux training loop cases (Flux.jl test/train.jl)."""

import warnings

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, raises
from fluxjax import Chain, Dense, Descent

TRAIN = "Flux.jl test/train.jl"


@case(
    names=("train!", "Descent", "Dense"),
    source=TRAIN,
    julia="""
    @testset "Stop on NaN" begin
      m1 = Dense(1 => 1)
      m1.weight .= 0
      CNT = Ref(0)
      @test_throws DomainError trainfn!(m1, tuple.(1:100), Descent(0.1)) do m, i
        CNT[] += 1
        (i == 51 ? NaN32 : 1f0) * sum(m([1f0]))
      end
      @test CNT[] == 51  # stopped early
      @test m1.weight[1] ≈ -5  # did not corrupt weights
    end
    """,
)
def case_train_stop_on_nan():
    m1 = Dense(1, 1)
    m1.weight = jnp.zeros_like(m1.weight)
    cnt = [0]

    def loss(m, i):
        cnt[0] += 1
        return jnp.where(i == 50, jnp.nan, 1.0) * jnp.sum(m(jnp.ones(1)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "given a rule, not a state", as Flux's own warning
        raises(FloatingPointError, fluxjax.train_, loss, m1, [(i,) for i in range(100)], Descent(0.1), jit=False)
    assert cnt[0] == 51
    close(m1.weight[0, 0], -5)


@case(
    names=("update!", "setup", "Adam", "Chain", "Dense", "gradient"),
    source=TRAIN,
    julia="""
    @testset "Flux.update! features" begin
      m = Chain(Dense(2=>3, tanh), Dense(3=>1), only)
      x = rand(Float32, 2)
      y1 = m(x)  # before
      gs = Zygote.gradient(marg -> marg(x), m)
      @test gs isa Tuple
      @test_throws ErrorException Flux.update!(Flux.Adam(), m, gs)  # friendly
      @test_throws ErrorException Flux.update!(Flux.Adam(), m, gs[1])  # friendly
      s = Flux.setup(Adam(), m)
      Flux.update!(s, m, gs[1])  # finally, this is the correct thing
      y3 = m(x)
      @test y3 < y1
    """,
)
def case_update_features():
    m = Chain(Dense(2, 3, jnp.tanh), Dense(3, 1), lambda v: v[0])
    x = fluxjax.rand32(2)
    y1 = float(m(x))
    gs = fluxjax.gradient(lambda marg: marg(x), m)
    assert isinstance(gs, tuple)
    raises(TypeError, fluxjax.update_, fluxjax.Adam(), m, gs)
    raises(TypeError, fluxjax.update_, fluxjax.Adam(), m, gs[0])
    s = fluxjax.setup(fluxjax.Adam(), m)
    fluxjax.update_(s, m, gs[0])
    assert float(m(x)) < y1


@case(
    names=("train!", "setup", "AdamW", "mse"),
    source=TRAIN,
    julia="""
    @testset "non-tuple data" begin
      w = randn(10, 10)
      w2 = randn(10, 10)
      loss(m, x) = Flux.Losses.mse(w*x, m.weight*x .+ m.bias)
      model = (weight=copy(w2), bias=zeros(10))
      opt = Flux.setup(AdamW(), model)
      trainfn!(loss, model, (rand(10) for _ in 1: 10^5), opt)
      @test loss(model, rand(10, 10)) < 0.01
    end
    """,
)
def case_train_non_tuple_data():
    # Julia runs 10^5 single-sample steps with AdamW(0.001); here 300 steps of AdamW(0.1) on batches of 10
    # reach the same threshold (the loss is the same convex problem)
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((10, 10)), jnp.float32)
    model = {"weight": jnp.asarray(rng.standard_normal((10, 10)), jnp.float32), "bias": jnp.zeros(10, jnp.float32)}
    loss = lambda m, x: fluxjax.losses.mse(w @ x, m["weight"] @ x + m["bias"][:, None])
    assert float(loss(model, fluxjax.rand32(10, 10))) > 1
    opt = fluxjax.setup(fluxjax.AdamW(0.1), model)
    data = [jnp.asarray(rng.random((10, 10)), jnp.float32) for _ in range(300)]
    fluxjax.train_(loss, model, data, opt, progress=False)
    assert float(loss(model, fluxjax.rand32(10, 10))) < 0.01


@case(
    names=("trainstep!",),
    source=TRAIN,
    julia="""
    @testset "trainstep! returns the loss and updates in place" begin
      model = Dense(3 => 2, tanh)
      x, y = randn(Float32, 3, 5), randn(Float32, 2, 5)
      loss(m, x, y) = Flux.mse(m(x), y)
      opt = Flux.setup(Momentum(0.1), model)
      l0 = loss(model, x, y)
      w0 = copy(model.weight)
      l = Flux.trainstep!(loss, model, (x, y), opt)
      @test l isa Real && isfinite(l)
      @test l ≈ l0                          # loss is measured *before* the update
      @test !(model.weight ≈ w0)            # model mutated in place
    """,
)
def case_trainstep():
    model = Dense(3, 2, jnp.tanh)
    x, y = fluxjax.randn32(3, 5), fluxjax.randn32(2, 5)
    loss = lambda m, x, y: fluxjax.losses.mse(m(x), y)
    opt = fluxjax.setup(fluxjax.Momentum(0.1), model)
    l0, w0 = float(loss(model, x, y)), model.weight
    step = fluxjax.trainstep_
    close(step(loss, model, (x, y), opt), l0)
    assert not np.allclose(model.weight, w0)


@case(
    names=("trainstep!", "trainstep_withgradient!", "train!"),
    source="Flux.jl test/ext_reactant/train_reactant.jl (the compiled step, whose semantics fluxjax's compiled trainstep_ shares)",
    julia="""
    model = Chain(Dense(4 => 8, tanh), Dense(8 => 2))
    opt = Flux.setup(Adam(1f-2), model)
    loss(m, a, b) = Flux.mse(m(a), b)
    l = Flux.trainstep!(loss, model, (x, y), opt)
    @test l isa Real && isfinite(l)
    @test l ≈ l0                               # measured before the update
    @test !(w0 ≈ model.layers[1].weight)       # parameters updated in place
    l2, g = Flux.trainstep_withgradient!(loss, model, (x, y), opt)
    @test l2 isa Real && isfinite(l2)
    for _ in 1:30; Flux.trainstep!(loss, model, (x, y), opt); end
    @test loss(model, x, y) < l0
    auxloss(m, a, b) = (Flux.mse(m(a), b), (; sumsq = sum(abs2, m(a))))
    v = Flux.trainstep!(auxloss, model, (x, y), opt)
    @test v isa Tuple && isfinite(v[1]) && isfinite(v[2].sumsq)
    @test Flux.train!(auxloss, model, [(x, y) for _ in 1:5], opt) === nothing
    """,
)
def case_trainstep_compiled():
    model = Chain(Dense(4, 8, jnp.tanh), Dense(8, 2))
    x, y = fluxjax.randn32(4, 16), fluxjax.randn32(2, 16)
    opt = fluxjax.setup(fluxjax.Adam(1e-2), model)
    loss = lambda m, a, b: fluxjax.losses.mse(m(a), b)
    l0, w0 = float(loss(model, x, y)), model[0].weight
    l = fluxjax.trainstep_(loss, model, (x, y), opt)
    assert np.isfinite(float(l))
    close(l, l0, rtol=1e-6)
    assert not np.allclose(model[0].weight, w0)
    l2, g = fluxjax.trainstep_withgradient_(loss, model, (x, y), opt)
    assert np.isfinite(float(l2)) and g.layers[0].weight.shape == (8, 4)
    for _ in range(30):
        fluxjax.trainstep_(loss, model, (x, y), opt)
    assert float(loss(model, x, y)) < l0
    auxloss = lambda m, a, b: (fluxjax.losses.mse(m(a), b), {"sumsq": jnp.sum(m(a) ** 2)})
    v = fluxjax.trainstep_(auxloss, model, (x, y), opt)
    assert isinstance(v, tuple) and np.isfinite(float(v[0])) and np.isfinite(float(v[1]["sumsq"]))
    h = fluxjax.train_(auxloss, model, [(x, y)] * 5, opt)
    assert h.steps == 5 and all(np.isfinite(h.losses))


@case(
    names=("Train",),
    source="Flux.jl src/train.jl",
    julia="""
    module Train
    ...
    export setup, train!, trainstep!, trainstep_withgradient!
    """,
)
def case_train_module():
    T = fluxjax.optimise.train
    for name in ("setup", "train_", "trainstep_", "trainstep_withgradient_"):
        assert getattr(T, name) is getattr(fluxjax, name), name
    model = fluxjax.Dense(np.zeros((1, 1), np.float32), np.zeros(1, np.float32))
    opt = T.setup(fluxjax.Descent(0.1), model)
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
    T.train_(lambda m, x, y: fluxjax.losses.mse(m(x), y), model, [(x, 2 * x)] * 200, opt)
    close(model.weight, [[2.0]], atol=1e-3)
    close(model.bias, [0.0], atol=3e-3)


@case(
    names=("train!", "trainmode!", "testmode!", "BatchNorm", "Dropout"),
    source="Flux.jl src/train.jl (train!, PR #2697)",
    julia="""
    function train!(loss, adtype::Union{Nothing, AbstractADType}, model, data, opt_state; cb = nothing,
                    caching_allocator::Bool = false, gc_interval::Union{Integer, Symbol} = :auto)
        ...
        Flux.trainmode!(model)
    # (no test in Flux asserts it; the case checks the consequence: after train!, the layers' `active`
    #  is true until testmode!)
    """,
)
def case_train_sets_trainmode():
    m = Chain(Dense(2, 3), fluxjax.BatchNorm(3), fluxjax.Dropout(0.5), Dense(3, 1))
    x, y = jnp.ones((2, 4)), jnp.zeros((1, 4))
    fluxjax.train_(lambda m, x, y: fluxjax.losses.mse(m(x), y), m, [(x, y)], fluxjax.setup(Descent(0.01), m))
    assert m[1].active is True and m[2].active is True
    fluxjax.testmode_(m)
    assert m[1].active is False and m[2].active is False


@case(
    names=("train!", "Dense", "Descent"),
    source=TRAIN,
    julia="""
    @testset "callbacks give helpful error" begin
      m1 = Dense(1 => 1)
      cb = () -> println("this should not be printed")
      @test_throws ErrorException trainfn!((args...,) -> 1, m1, [(1,2)], Descent(0.1); cb)
    end
    """,
)
def case_train_callback_error():
    m1 = Dense(1, 1)
    cb = lambda: print("this should not be printed")  # noqa: E731
    raises(TypeError, fluxjax.train_, lambda *args: 1.0, m1, [(1, 2)], fluxjax.setup(Descent(0.1), m1), cb=cb)


@case(
    names=("trainstep!", "AutoEnzyme", "Adam", "Chain", "Dense"),
    source="Flux.jl test/ext_reactant/train_reactant.jl",
    julia="""
    @testset "AD backend resolution on Reactant" begin
        loss(m, a, b) = Flux.mse(m(a), b)
        model = Chain(Dense(4 => 8, tanh), Dense(8 => 2)) |> dev
        x, y = randn(Float32, 4, 16) |> dev, randn(Float32, 2, 16) |> dev
        opt = Flux.setup(Adam(1f-2), model)
        l0 = Reactant.to_number(Reactant.@jit loss(model, x, y))
        Flux.trainstep!(loss, model, (x, y), opt)
        @test length(ext.COMPILE_CACHE) == 1
        Flux.trainstep!(loss, AutoEnzyme(), model, (x, y), opt)
        @test length(ext.COMPILE_CACHE) == 1
        for _ in 1:20
            Flux.trainstep!(loss, AutoEnzyme(), model, (x, y), opt)
        end
        @test Reactant.to_number(Reactant.@jit loss(model, x, y)) < l0
    end
    """,
)
def case_trainstep_adtype():
    from fluxjax.optimise.trainstep import _compiled_step

    loss = lambda m, a, b: fluxjax.losses.mse(m(a), b)  # noqa: E731
    model = Chain(Dense(4, 8, jnp.tanh), Dense(8, 2))
    x, y = fluxjax.randn32(4, 16), fluxjax.randn32(2, 16)
    opt = fluxjax.setup(fluxjax.Adam(1e-2), model)
    l0 = float(loss(model, x, y))
    fluxjax.trainstep_(loss, model, (x, y), opt)
    n = _compiled_step.compilations
    fluxjax.trainstep_(loss, fluxjax.AutoEnzyme(), model, (x, y), opt)
    assert _compiled_step.compilations == n  # the same program: every reverse-mode adtype is JAX's
    for _ in range(20):
        fluxjax.trainstep_(loss, fluxjax.AutoEnzyme(), model, (x, y), opt)
    assert float(loss(model, x, y)) < l0
