# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Optimisers.jl cases (Optimisers.jl test/runtests.jl), as re-exported by Flux; test/rules.jl is in
compat/cases_optimisers_rules.py.

Julia NamedTuple models `(x = ..., y = ...)` are dicts here; `Optimisers.adjust!` is `adjust_`,
`freeze!`/`thaw!` are `freeze_`/`thaw_`. A rule's state lives in `leaf.state` (an optax state object).
"""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, raises
from fluxjax import optimise as O

RT = "Optimisers.jl test/runtests.jl"


def a(*v):
    return jnp.asarray(v, jnp.float32)


@case(
    names=("update", "update!", "setup", "Descent", "Momentum"),
    source=RT,
    julia="""
    m = ([1.0, 2.0],)
    g = ([25, 33],)
    o = Descent(0.1)
    s = Optimisers.setup(o, m)
    s2, m2 = Optimisers.update(s, m, g)
    @test m[1] == 1:2  # not mutated
    @test m2[1] ≈ [1,2] .- 0.1 .* [25, 33]
    s3, m3 = Optimisers.update!(s, m, g)
    @test m3[1] ≈ [1,2] .- 0.1 .* [25, 33]
    o5 = Momentum(0.1)
    s5 = Optimisers.setup(o5, m)
    s6, m6 = Optimisers.update(s5, m, g)
    @test s6[1].state ≈ [2.5, 3.3]
    @test s5[1].state == [0, 0]  # not mutated -- wrong on v0.2.9
    s7, m7 = Optimisers.update!(s5, m, g)
    @test s7[1] === s5[1]  # same Leaf
    """,
)
def case_optimisers_very_basics():
    # A tuple cannot be changed in place (nor can a JAX array): update_ returns the new model, as
    # Optimisers.jl's update! does, and the ported lines use that returned model.
    m = (a(1, 2),)
    g = (a(25, 33),)
    s = O.setup(O.Descent(0.1), m)
    s2, m2 = O.update(s, m, g)
    equal(m[0], [1, 2])
    close(m2[0], [1 - 2.5, 2 - 3.3])
    s3, m3 = O.update_(s, m, g)
    close(m3[0], [1 - 2.5, 2 - 3.3])
    s5 = O.setup(O.Momentum(0.1), m)
    s6, m6 = O.update(s5, m, g)
    close(s6[0].state.velocity, [2.5, 3.3])
    equal(s5[0].state.velocity, [0, 0])
    s7, m7 = O.update_(s5, m, g)
    assert s7[0] is s5[0]


@case(
    names=("setup", "update", "WeightDecay", "SignDecay", "ClipGrad", "OptimiserChain", "Descent"),
    source=RT,
    julia="""
    @testset "OptimiserChain" begin
      x = [1, 10, 100.0]; dx = [1, 2, 3.0];
      @test Optimisers.update(Optimisers.setup(WeightDecay(0.1), x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-3]
      @test Optimisers.update(Optimisers.setup(SignDecay(0.1), x), x, dx)[2] ≈ [1-0.1-1, 10-0.1-2, 100-0.1-3]
      @test Optimisers.update(Optimisers.setup(ClipGrad(2), x), x, dx)[2] ≈ [1-1, 10-2, 100-2]
      o2 = OptimiserChain(ClipGrad(2), WeightDecay(0.1))
      @test Optimisers.update(Optimisers.setup(o2, x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-2]
      o2n = OptimiserChain(OptimiserChain(ClipGrad(2), WeightDecay(0.1)))  # nested
      @test Optimisers.update(Optimisers.setup(o2n, x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-2]
      o2r = OptimiserChain(WeightDecay(0.1), ClipGrad(2))  # reversed
      @test Optimisers.update(Optimisers.setup(o2r, x), x, dx)[2] != [1-0.1-1, 10-2, 100-2]
      # Trivial cases
      o1 = OptimiserChain(Descent(0.1))
      @test Optimisers.update(Optimisers.setup(o1, x), x, dx)[2] ≈ [0.9, 9.8, 99.7]
    """,
)
def case_optimisers_bare_array():
    x, dx = a(1, 10, 100), a(1, 2, 3)

    def up(rule):
        return O.update(O.setup(rule, x), x, dx)[1]

    close(up(O.WeightDecay(0.1)), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 3])
    close(up(O.SignDecay(0.1)), [1 - 0.1 - 1, 10 - 0.1 - 2, 100 - 0.1 - 3])
    close(up(O.ClipGrad(2)), [1 - 1, 10 - 2, 100 - 2])
    close(up(O.OptimiserChain(O.ClipGrad(2), O.WeightDecay(0.1))), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2])
    close(up(O.OptimiserChain(O.OptimiserChain(O.ClipGrad(2), O.WeightDecay(0.1)))), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2])
    # Julia's `!=` here holds only by rounding (1 - 0.1 - 1 vs 1 - 1.1); ported as the same exact comparison
    assert not np.array_equal(up(O.OptimiserChain(O.WeightDecay(0.1), O.ClipGrad(2))), [1 - 0.1 - 1, 10 - 2, 100 - 2])
    close(up(O.OptimiserChain(O.Descent(0.1))), [0.9, 9.8, 99.7])
    equal(x, [1, 10, 100])  # update leaves the array alone
    s, x2 = O.update_(O.setup(O.Descent(0.1), x), x, dx)  # update! on an array: use the returned one
    close(x2, [0.9, 9.8, 99.7])


@case(
    names=("adjust", "Momentum", "OptimiserChain", "ClipGrad", "Adam", "setup", "update"),
    source=RT,
    julia="""
    @testset "adjusting parameters, out-of-place" begin
      m = (α = ([0.0], sin), γ = Float32[4,3,2])
      s = Optimisers.setup(Momentum(0.1, 0.9), m)
      s1, m1 = Optimisers.update(s, m, (α = nothing, γ = [1,10,100],))
      @test m.γ .- m1.γ ≈ [0.1, 1, 10]
      @test s1.γ.rule.eta == 0.1
      @test s1.γ.state ≈ [0.1, 1, 10]
      s2 = Optimisers.adjust(s1, 0.2)
      @test s2.γ.rule.eta == 0.2
      @test s2.γ.rule.rho == 0.9
      @test s2.γ.state == s1.γ.state
      @test s2.α[1].rule.eta == 0.2
      @test s2.α[1].state == s1.α[1].state
      s3 = Optimisers.adjust(s1; eta=0.3, rho=0.7)
      @test s3.γ.rule.eta == 0.3
      @test s3.γ.rule.rho == 0.7
      @test s3.γ.state == s1.γ.state
      @test s3.α[1].rule.rho == 0.7
      _, m3 = Optimisers.update(s3, m, (α = nothing, γ = [1,10,100],))
      @test !(m.γ .- m3.γ ≈ [1, 10, 100])
      # OptimiserChain
      sc = Optimisers.setup(OptimiserChain(ClipGrad(2), Adam()), m)
      sc1, mc1 = Optimisers.update(sc, m, (α = nothing, γ = [1,10,100],))
      @test sc1.γ.rule.opts[2].eta == 0.001
      @test sc1.γ.state[2][1] ≈ [0.1, 0.2, 0.2]
      sc2 = Optimisers.adjust(sc1, 0.2)
      @test sc2.γ.rule.opts[1].delta == 2 # unchanged
      @test sc2.γ.rule.opts[2].eta == 0.2
      @test sc2.γ.state[2][1] ≈ [0.1, 0.2, 0.2]
      sc2 = Optimisers.adjust(sc1; delta = 2.5)
      @test sc2.γ.rule.opts[1].delta == 2.5
      @test sc2.γ.rule.opts[2].eta == 0.001 # unchanged
    """,
)
def case_adjust_out_of_place():
    vel = lambda leaf: jax.tree_util.tree_leaves(leaf.state)[0]  # noqa: E731
    m = {"α": (a(0.0), jnp.sin), "γ": a(4, 3, 2)}
    g = {"α": None, "γ": a(1, 10, 100)}
    s = O.setup(O.Momentum(0.1, 0.9), m)
    s1, m1 = O.update(s, m, g)
    close(m["γ"] - m1["γ"], [0.1, 1, 10])
    close(s1["γ"].rule.eta, 0.1)
    close(vel(s1["γ"]), [0.1, 1, 10])
    s2 = O.adjust(s1, 0.2)
    close(s2["γ"].rule.eta, 0.2)
    close(s2["γ"].rule.rho, 0.9)
    equal(vel(s2["γ"]), vel(s1["γ"]))
    close(s2["α"][0].rule.eta, 0.2)
    equal(vel(s2["α"][0]), vel(s1["α"][0]))
    close(s1["γ"].rule.eta, 0.1)  # the original is untouched
    s3 = O.adjust(s1, eta=0.3, rho=0.7)
    close(s3["γ"].rule.eta, 0.3)
    close(s3["γ"].rule.rho, 0.7)
    equal(vel(s3["γ"]), vel(s1["γ"]))
    close(s3["α"][0].rule.rho, 0.7)
    _, m3 = O.update(s3, m, g)
    assert not np.allclose(m["γ"] - m3["γ"], [1, 10, 100])
    sc = O.setup(O.OptimiserChain(O.ClipGrad(2), O.Adam()), m)
    sc1, _ = O.update(sc, m, g)
    close(sc1["γ"].rule.opts[1].eta, 0.001)
    mt = lambda leaf: jax.tree_util.tree_leaves(leaf.state[1])[0]  # noqa: E731  Adam's first moment
    close(mt(sc1["γ"]), [0.1, 0.2, 0.2])
    sc2 = O.adjust(sc1, 0.2)
    assert sc2["γ"].rule.opts[0].delta == 2
    close(sc2["γ"].rule.opts[1].eta, 0.2)
    close(mt(sc2["γ"]), [0.1, 0.2, 0.2])
    sc2 = O.adjust(sc1, delta=2.5)
    close(sc2["γ"].rule.opts[0].delta, 2.5)
    close(sc2["γ"].rule.opts[1].eta, 0.001)
    assert O.adjust(O.Adam(), 0.01) == O.Adam(0.01)  # adjust on a rule gives the adjusted rule


@case(
    names=("setup", "update", "update!", "Descent", "Momentum"),
    source=RT,
    julia="""
    # "very basics", with the model as a one-field NamedTuple (x = [1.0, 2.0],)
    m = ([1.0, 2.0],)
    g = ([25, 33],)
    s = Optimisers.setup(Descent(0.1), m)
    s2, m2 = Optimisers.update(s, m, g)
    @test m[1] == 1:2  # not mutated
    @test m2[1] ≈ [1,2] .- 0.1 .* [25, 33]
    s3, m3 = Optimisers.update!(s, m, g)
    @test m3[1] ≈ [1,2] .- 0.1 .* [25, 33]
    s5 = Optimisers.setup(Momentum(0.1), m)
    s6, m6 = Optimisers.update(s5, m, g)
    @test s6[1].state ≈ [2.5, 3.3]
    @test s5[1].state == [0, 0]  # not mutated -- wrong on v0.2.9
    """,
)
def case_optimisers_very_basics_dict():
    m = {"x": a(1, 2)}
    g = {"x": a(25, 33)}
    s = O.setup(O.Descent(0.1), m)
    s2, m2 = O.update(s, m, g)
    equal(m["x"], [1, 2])
    close(m2["x"], [1 - 2.5, 2 - 3.3])
    s3, m3 = O.update_(s, m, g)
    close(m3["x"], [1 - 2.5, 2 - 3.3])
    close(m["x"], [1 - 2.5, 2 - 3.3])  # update! mutates
    m = {"x": a(1, 2)}
    s5 = O.setup(O.Momentum(0.1), m)
    s6, m6 = O.update(s5, m, g)
    close(jax.tree_util.tree_leaves(s6["x"].state)[0], [2.5, 3.3])
    equal(jax.tree_util.tree_leaves(s5["x"].state)[0], [0, 0])


@case(
    names=("ClipGrad", "ClipNorm", "setup", "update", "update!"),
    source=RT,
    julia="""
    m = (α = ([0.0], sin), γ = rand(3))
    s1 = Optimisers.setup(ClipGrad(13), m)
    _, m1 = Optimisers.update(s1, m, (α = nothing, γ = [1,10,100],))
    @test m.γ .- m1.γ ≈ [1, 10, 13]
    s2 = Optimisers.setup(ClipNorm(10), m)
    _, m2 = Optimisers.update(s2, m, (α = ([0.1], nothing), γ = [1,10,100],))
    @test only(m.α[1] .- m2.α[1]) ≈ 0.1
    @test norm(m.γ .- m2.γ) ≈ 10
    # This error is thrown by apply! due to NaN input.
    @test_throws DomainError Optimisers.update(s2, m, (α = ([0.1], nothing), γ = [1,10,NaN],))
    s3 = Optimisers.setup(ClipNorm(5, 1; throw=false), m)
    _, m3 = Optimisers.update(s3, m, (α = ([0.1], nothing), γ = [1,10,100],))
    @test only(m.α[1] .- m3.α[1]) ≈ 0.1
    @test norm(m.γ .- m3.γ, 1) ≈ 5
    _, m3n = Optimisers.update!(s3, m, (α = nothing, γ = [1,10,Inf],))
    @test isnan(m3n.γ[3])
    """,
)
def case_gradient_clipping():
    m = {"α": (a(0.0), jnp.sin), "γ": fluxjax.rand32(3)}
    g = {"α": None, "γ": a(1, 10, 100)}
    _, m1 = O.update(O.setup(O.ClipGrad(13), m), m, g)
    close(m["γ"] - m1["γ"], [1, 10, 13])
    s2 = O.setup(O.ClipNorm(10), m)
    g2 = {"α": (a(0.1), None), "γ": a(1, 10, 100)}
    _, m2 = O.update(s2, m, g2)
    close(m["α"][0] - m2["α"][0], [0.1])
    close(jnp.linalg.norm(m["γ"] - m2["γ"]), 10)
    raises(Exception, O.update, s2, m, {"α": (a(0.1), None), "γ": a(1, 10, np.nan)})
    s3 = O.setup(O.ClipNorm(5, 1, throw=False), m)
    _, m3 = O.update(s3, m, g2)
    close(m["α"][0] - m3["α"][0], [0.1])
    close(jnp.sum(jnp.abs(m["γ"] - m3["γ"])), 5)
    _, m3n = O.update_(s3, m, {"α": None, "γ": a(1, 10, np.inf)})
    assert np.isnan(np.asarray(m3n["γ"])[2])


@case(
    names=("AdamW", "Leaf", "setup", "update", "gradient"),
    source=RT,
    julia="""
    d = Dict(:a => [1.0,2.0], :b => [3.0,4.0], :c => 1)
    s = Optimisers.setup(AdamW(0.1), d)
    @test s[:a] isa Optimisers.Leaf
    @test s[:c] === ()
    loss(model) = sum(abs2, model[:a])
    g = gradient(loss, d)[1]
    s2, d2 = Optimisers.update(s, d, g)
    @test d2[:a] ≈ [0.9, 1.9]
    @test d2[:b] ≈ [3, 4]
    @test d2[:c] ≈ 1
    """,
)
def case_dict_support():
    d = {"a": a(1, 2), "b": a(3, 4), "c": 1}
    s = O.setup(O.AdamW(0.1), d)
    assert isinstance(s["a"], O.Leaf)
    assert s["c"] is None  # Optimisers.jl's () for a non-array leaf is None here
    g = fluxjax.gradient(lambda m: jnp.sum(m["a"] ** 2), d)[0]
    s2, d2 = O.update(s, d, g)
    close(d2["a"], [0.9, 1.9])
    close(d2["b"], [3, 4])
    assert d2["c"] == 1


@case(
    names=("OptimiserChain", "WeightDecay", "SignDecay", "ClipGrad", "Descent", "setup", "update"),
    source=RT,
    julia="""
    x = [1, 10, 100.0]; dx = [1, 2, 3.0];
    @test Optimisers.update(Optimisers.setup(WeightDecay(0.1), x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-3]
    @test Optimisers.update(Optimisers.setup(SignDecay(0.1), x), x, dx)[2] ≈ [1-0.1-1, 10-0.1-2, 100-0.1-3]
    @test Optimisers.update(Optimisers.setup(ClipGrad(2), x), x, dx)[2] ≈ [1-1, 10-2, 100-2]
    o2 = OptimiserChain(ClipGrad(2), WeightDecay(0.1))
    @test Optimisers.update(Optimisers.setup(o2, x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-2]
    o2n = OptimiserChain(OptimiserChain(ClipGrad(2), WeightDecay(0.1)))  # nested
    @test Optimisers.update(Optimisers.setup(o2n, x), x, dx)[2] ≈ [1-0.1-1, 10-1-2, 100-10-2]
    o2r = OptimiserChain(WeightDecay(0.1), ClipGrad(2))  # reversed
    @test Optimisers.update(Optimisers.setup(o2r, x), x, dx)[2] != [1-0.1-1, 10-2, 100-2]
    o1 = OptimiserChain(Descent(0.1))
    @test Optimisers.update(Optimisers.setup(o1, x), x, dx)[2] ≈ [0.9, 9.8, 99.7]
    o0 = OptimiserChain()
    @test Optimisers.update(Optimisers.setup(o0, x), x, dx)[2] ≈ [1-1,10-2,100-3]
    xm = [1, -10, 100.0]; dxm = [3, 2, -1];
    @test Optimisers.update(Optimisers.setup(SignDecay(0.1), xm), xm, dxm)[2] ≈ [1-0.1-3, -10+0.1-2, 100-0.1+1]
    """,
)
def case_optimiser_chain():
    # The model is the bare array x in Julia; fluxjax's update fails on a bare array (see
    # optimisers_very_basics), so it is wrapped in a one-field NamedTuple / dict here.
    def up(rule, x, dx):
        return O.update(O.setup(rule, {"x": x}), {"x": x}, {"x": dx})[1]["x"]

    x, dx = a(1, 10, 100), a(1, 2, 3)
    close(up(O.WeightDecay(0.1), x, dx), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 3])
    close(up(O.SignDecay(0.1), x, dx), [1 - 0.1 - 1, 10 - 0.1 - 2, 100 - 0.1 - 3])
    close(up(O.ClipGrad(2), x, dx), [0, 8, 98])
    close(up(O.OptimiserChain(O.ClipGrad(2), O.WeightDecay(0.1)), x, dx), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2])
    close(up(O.OptimiserChain(O.OptimiserChain(O.ClipGrad(2), O.WeightDecay(0.1))), x, dx), [1 - 0.1 - 1, 10 - 1 - 2, 100 - 10 - 2])
    assert not np.array_equal(np.asarray(up(O.OptimiserChain(O.WeightDecay(0.1), O.ClipGrad(2)), x, dx), np.float64), [1 - 0.1 - 1, 10 - 2, 100 - 2])
    close(up(O.OptimiserChain(O.Descent(0.1)), x, dx), [0.9, 9.8, 99.7])
    close(up(O.OptimiserChain(), x, dx), [0, 8, 97])
    close(up(O.SignDecay(0.1), a(1, -10, 100), a(3, 2, -1)), [1 - 0.1 - 3, -10 + 0.1 - 2, 100 - 0.1 + 1])


@case(
    names=("adjust!", "Momentum", "OptimiserChain", "ClipGrad", "Adam", "setup", "update"),
    source=RT,
    julia="""
    @testset "adjusting parameters, in-place" begin
      m = (α = ([0.0], sin), γ = Float32[4,3,2])
      s = Optimisers.setup(Momentum(0.1, 0.9), m)
      s1, m1 = Optimisers.update(s, m, (α = nothing, γ = [1,10,100],))
      @test m.γ .- m1.γ ≈ [0.1, 1, 10]
      @test s1.γ.rule.eta ≈ 0.1
      @test s1.γ.state ≈ [0.1, 1, 10]
      Optimisers.adjust!(s1, 0.2)
      @test s1.γ.rule.eta ≈ 0.2
      @test s1.γ.rule.rho ≈ 0.9
      @test s1.γ.state ≈ [0.1, 1, 10]
      @test s1.α[1].rule.eta ≈ 0.2
      Optimisers.adjust!(s1; eta=0.3, rho=0.7)
      @test s1.γ.rule.eta ≈ 0.3
      @test s1.γ.rule.rho ≈ 0.7
      Optimisers.adjust!(s1, zeta = "this does nothing")
      @test s1.γ.rule.eta ≈ 0.3
      sc = Optimisers.setup(OptimiserChain(ClipGrad(2), Adam()), m)
      sc1, mc1 = Optimisers.update(sc, m, (α = nothing, γ = [1,10,100],))
      @test sc1.γ.rule.opts[2].eta ≈ 0.001f0
      Optimisers.adjust!(sc1, 0.2)
      @test sc1.γ.rule.opts[1].delta == 2 # unchanged
      @test sc1.γ.rule.opts[2].eta ≈ 0.2
      Optimisers.adjust!(sc1; delta = 2.5)
      @test sc1.γ.rule.opts[1].delta ≈ 2.5
      @test sc1.γ.rule.opts[2].eta ≈ 0.2 # unchanged
    """,
)
def case_adjust():
    m = {"α": (a(0.0), jnp.sin), "γ": a(4, 3, 2)}
    g = {"α": None, "γ": a(1, 10, 100)}
    s = O.setup(O.Momentum(0.1, 0.9), m)
    s1, m1 = O.update(s, m, g)
    close(m["γ"] - m1["γ"], [0.1, 1, 10])
    close(s1["γ"].rule.eta, 0.1)
    close(jax.tree_util.tree_leaves(s1["γ"].state)[0], [0.1, 1, 10])
    O.adjust_(s1, 0.2)
    close(s1["γ"].rule.eta, 0.2)
    close(s1["γ"].rule.rho, 0.9)
    close(jax.tree_util.tree_leaves(s1["γ"].state)[0], [0.1, 1, 10])
    close(s1["α"][0].rule.eta, 0.2)
    O.adjust_(s1, eta=0.3, rho=0.7)
    close(s1["γ"].rule.eta, 0.3)
    close(s1["γ"].rule.rho, 0.7)
    O.adjust_(s1, zeta="this does nothing")
    close(s1["γ"].rule.eta, 0.3)
    sc = O.setup(O.OptimiserChain(O.ClipGrad(2), O.Adam()), m)
    sc1, _ = O.update(sc, m, g)
    close(sc1["γ"].rule.opts[1].eta, 0.001)
    O.adjust_(sc1, 0.2)
    assert sc1["γ"].rule.opts[0].delta == 2
    close(sc1["γ"].rule.opts[1].eta, 0.2)
    O.adjust_(sc1, delta=2.5)
    close(sc1["γ"].rule.opts[0].delta, 2.5)
    close(sc1["γ"].rule.opts[1].eta, 0.2)


@case(
    names=("freeze!", "thaw!", "adjust", "Descent", "setup", "update"),
    source=RT,
    julia="""
    m = (x=[1.0, 2.0], y=([3.0, 4.0], sin));
    st = Optimisers.setup(Descent(0.1), m);
    Optimisers.freeze!(st.y)
    st, m = Optimisers.update(st, m, (x=[1,10], y=([100,1000], nothing)));
    @test m.x ≈ [0.9, 1.0]
    @test m.y[1] ≈ [3, 4]
    st = Optimisers.adjust(st, 0.2)
    Optimisers.thaw!(st)
    st, m = Optimisers.update(st, m, (x=[1,10], y=([100,1000], nothing)));
    @test m.y[1] ≈ [-17.0, -196.0]
    @test m.x ≈ [0.7, -1.0]
    """,
)
def case_freeze_thaw():
    m = {"x": a(1, 2), "y": (a(3, 4), jnp.sin)}
    g = {"x": a(1, 10), "y": (a(100, 1000), None)}
    st = O.setup(O.Descent(0.1), m)
    O.freeze_(st["y"])
    st, m = O.update(st, m, g)
    close(m["x"], [0.9, 1.0])
    close(m["y"][0], [3, 4])
    st = O.adjust(st, 0.2)
    O.thaw_(st)
    st, m = O.update(st, m, g)
    close(m["y"][0], [-17.0, -196.0])
    close(m["x"], [0.7, -1.0])


@case(
    names=("freeze!", "thaw!"),
    source=RT,
    julia="""
    m = (x=[1.0, 2.0], y=([3.0, 4.0], sin));
    @test_throws ArgumentError Optimisers.freeze!(m)
    @test_throws ArgumentError Optimisers.thaw!(m)
    """,
)
def case_freeze_model_errors():
    m = {"x": a(1, 2), "y": (a(3, 4), jnp.sin)}
    raises((TypeError, ValueError), O.freeze_, m)
    raises((TypeError, ValueError), O.thaw_, m)


@case(
    names=("Nesterov", "AdamW"),
    source=RT,
    julia="""
    @testset "keyword arguments" begin
      @test Nesterov(rho=0.8, eta=0.1) === Nesterov(0.1, 0.8)
      @test AdamW(lambda=0.3, eta=0.1) == AdamW(0.1, (0.9, 0.999), 0.3, 1.0e-8)
    end
    """,
)
def case_rule_keywords():
    assert O.Nesterov(rho=0.8, eta=0.1) == O.Nesterov(0.1, 0.8)
    assert O.AdamW(lambda_=0.3, eta=0.1) == O.AdamW(0.1, (0.9, 0.999), 0.3, 1.0e-8)


@case(
    names=("Momentum", "setup", "update"),
    source=RT,
    julia="""
    twice = [1,2.0]
    mtup = (twice, (copy(twice), twice)) # (tied (not tied, tied))
    # simplest rule for which opt(g1) + opt(g2) != opt(g1 + g2)
    stup = Optimisers.setup(Momentum(0.1), mtup)
    gtup = ([3,3], ([10,10], [7,7])) # (g1, (g1 + g2, g2))
    snew, mnew = Optimisers.update(stup, mtup, gtup)
    @test mnew[1] ≈ mnew[2][1]  # gradient was accumulated
    @test mnew[2][2] === mnew[1]  # and tie is not broken
    st3, mt3 = Optimisers.update(stup, mtup, ([3,3], nothing))
    @test mt3[1] ≈ [1,2] - 0.1 * [3,3]
    """,
)
def case_tied_weights():
    # Julia's tuples become a list-valued dict field (fluxjax cannot update a top-level tuple; see optimisers_very_basics)
    twice = a(1, 2)
    m = {"t": [twice, [jnp.array(twice), twice]]}
    st = O.setup(O.Momentum(0.1), m)
    g = {"t": [a(3, 3), [a(10, 10), a(7, 7)]]}
    _, mnew = O.update(st, m, g)
    close(mnew["t"][0], mnew["t"][1][0])
    assert mnew["t"][1][1] is mnew["t"][0]
    _, mt3 = O.update(st, m, {"t": [a(3, 3), None]})
    close(mt3["t"][0], [1 - 0.3, 2 - 0.3])


@case(
    names=("setup", "update"),
    source=RT,
    julia="""
    twice = [1,2.0]
    mtup = (twice, (copy(twice), twice)) # (tied (not tied, tied))
    stup = Optimisers.setup(Momentum(0.1), mtup)
    gtup = ([3,3], ([10,10], [7,7])) # (g1, (g1 + g2, g2))
    snew, mnew = Optimisers.update(stup, mtup, gtup)
    @test mnew[2][2] === mnew[1]  # and tie is not broken
    st3, mt3 = Optimisers.update(stup, mtup, ([3,3], nothing))
    @test mt3[1] ≈ [1,2] - 0.1 * [3,3]
    @test mt3[2][2] === mt3[1]
    st4, mt4 = Optimisers.update(stup, mtup, (nothing, ([5,5], [7,7])))
    @test mt4[1] ≈ [1,2] - 0.1 * [7,7]
    """,
)
def case_tied_weights_tuples_nothing():
    # the model a bare tuple, as in Julia: `update` returns the new one; a `nothing` at one occurrence
    # of the tie must not leave that occurrence stale
    twice = a(1, 2)
    mtup = (twice, (jnp.array(twice), twice))
    stup = O.setup(O.Momentum(0.1), mtup)
    _, mnew = O.update(stup, mtup, (a(3, 3), (a(10, 10), a(7, 7))))
    close(mnew[0], mnew[1][0])
    assert mnew[1][1] is mnew[0]
    _, mt3 = O.update(stup, mtup, (a(3, 3), None))
    close(mt3[0], [1 - 0.3, 2 - 0.3])
    close(mt3[1][0], [1, 2])
    assert mt3[1][1] is mt3[0]
    _, mt4 = O.update(stup, mtup, (None, (a(5, 5), a(7, 7))))
    close(mt4[0], [1 - 0.7, 2 - 0.7])
    close(mt4[1][0], [1 - 0.5, 2 - 0.5])
    assert mt4[1][1] is mt4[0]


@fluxjax.layer
class MutTwo:
    def __init__(self, x, y):
        self.x, self.y = x, y


@case(
    names=("setup", "update"),
    source=RT,
    julia="""
    tmp = MutTwo([1.0], [2.0])
    model = (a=tmp, b=tmp, c=MutTwo(tmp.x, tmp.y))
    state = Optimisers.setup(Momentum(), model)
    @test state.a.x === state.b.x
    @test state.a === state.b
    mgrad = (a=(x=[1], y=[10]), b=(x=[100], y=[1000]), c=(x=[1/3], y=[1/30]))
    state2, model2 = Optimisers.update(state, model, mgrad)
    @test model2.a === model2.b  # tie of MutTwo structs is restored
    @test model2.a !== model2.c  # but a new tie is not created
    """,
)
def case_tied_weights_mutable_containers():
    # a layer reached through two fields gets one gradient per field (Zygote's per path), summed once
    # with the gradient of the other layer holding the same arrays: x - 0.01 * (1 + 100 + 1/3)
    from fluxjax.zygote import Tangent

    tmp = MutTwo(a(1.0), a(2.0))
    model = {"a": tmp, "b": tmp, "c": MutTwo(tmp.x, tmp.y)}
    state = O.setup(O.Momentum(), model)
    assert state["a"].x is state["b"].x and state["a"] is state["b"]
    assert state["a"].x is state["c"].x
    g = lambda x, y: Tangent(MutTwo, {"x": a(x), "y": a(y)})
    mgrad = {"a": g(1, 10), "b": g(100, 1000), "c": g(1 / 3, 1 / 30)}
    _, model2 = O.update(state, model, mgrad)
    assert model2["a"] is model2["b"] and model2["a"] is not model2["c"]
    close(model2["a"].x, [1 - 0.01 * (101 + 1 / 3)])
    close(model2["c"].y, [2 - 0.01 * (1010 + 1 / 30)])
    assert model2["a"].x is model2["c"].x
    close(tmp.x, [1.0])  # update is pure


@case(
    names=("AbstractRule", "init", "apply!", "setup", "update"),
    source="Optimisers.jl docs/src/index.md (An optimisation rule)",
    julia="""
    # Define a container to hold any optimiser specific parameters (if any):
    struct DecayDescent <: Optimisers.AbstractRule
      eta::Float64
    end
    # Define an `apply!` rule which encodes how the gradients will be used to
    # update the parameters:
    function Optimisers.apply!(o::DecayDescent, state, x, x̄)
      T = eltype(x)
      newx̄ = T(o.eta / √state) .* x̄
      nextstate = state + 1
      return nextstate, newx̄
    end
    # Define the function which sets up the initial state (if any):
    Optimisers.init(o::DecayDescent, x::AbstractArray) = 1
    # The parameters will be immediately updated to `x .- newx̄`, while `nextstate` is
    # carried to the next iteration.
    """,
)
def case_custom_rule():
    class DecayDescent(O.AbstractRule):
        def __init__(self, eta):
            self.eta = eta

        def apply_(self, state, x, dx):
            return state + 1, (self.eta / jnp.sqrt(state)).astype(x.dtype) * dx

        def init(self, x):
            return 1

    rule = DecayDescent(0.1)
    x = a(1.0, 2.0)
    state = O.init(rule, x)
    assert int(state) == 1
    state, step = O.apply_(rule, state, x, a(1.0, 1.0))
    assert int(state) == 2
    close(step, [0.1, 0.1])
    tree = O.setup(rule, {"x": x})
    for _ in range(3):
        tree, m = O.update(tree, {"x": x}, {"x": a(1.0, 1.0)})
        x = m["x"]
    close(x, 1.0 - 0.1 * (1 + 1 / np.sqrt(2) + 1 / np.sqrt(3)) + a(0.0, 1.0), rtol=1e-6)
