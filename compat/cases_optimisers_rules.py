# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Optimisers.jl rule cases (Optimisers.jl test/rules.jl): AccumGrad, MixedPrecision, and the "original"
convergence test of every rule."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, raises
from fluxjax import optimise as O

RULES_JL = "Optimisers.jl test/rules.jl"


@case(
    names=("AccumGrad", "OptimiserChain", "Descent", "setup", "update"),
    source=RULES_JL,
    julia="""
    x0 = rand(5)
    x = copy(x0)
    lr = 0.01
    tree = Optimisers.setup(OptimiserChain(AccumGrad(3), Descent(lr)), x)
    g1 = rand(5)
    tree, x1 = Optimisers.update(tree, x, g1)
    @test x1 ≈ x
    g2 = rand(5)
    tree, x2 = Optimisers.update(tree, x1, g2)
    @test x2 ≈ x0
    g3 = rand(5)
    tree, x3 = Optimisers.update(tree, x2, g3)
    @test x3 ≈ x0 .- lr .* (g1 .+ g2 .+ g3) ./ 3
    g4 = rand(5)
    tree, x4 = Optimisers.update(tree, x3, g4)
    @test x4 ≈ x3
    """,
)
def case_accumgrad():
    x0 = fluxjax.rand32(5)
    tree = O.setup(O.OptimiserChain(O.AccumGrad(3), O.Descent(0.01)), {"x": x0})
    gs = [fluxjax.rand32(5) for _ in range(4)]
    tree, m1 = O.update(tree, {"x": x0}, {"x": gs[0]})
    close(m1["x"], x0)
    tree, m2 = O.update(tree, m1, {"x": gs[1]})
    close(m2["x"], x0)
    tree, m3 = O.update(tree, m2, {"x": gs[2]})
    close(m3["x"], x0 - 0.01 * (gs[0] + gs[1] + gs[2]) / 3)
    tree, m4 = O.update(tree, m3, {"x": gs[3]})
    close(m4["x"], m3["x"])


@case(
    names=("MixedPrecision", "Adam", "setup", "update", "adjust", "OptimiserChain"),
    source=RULES_JL,
    julia="""
    @testset "MixedPrecision" begin
      x = rand(Float16, 2)
      opt_state = Optimisers.setup(MixedPrecision(Adam(1e-3)), x)
      @test opt_state.state[1] isa Vector{Float32}
      @test opt_state.state[2][1] isa Vector{Float32}
      g = rand(Float16, 2)
      new_state, new_x = Optimisers.update(opt_state, x, rand(Float16, 2))
      @test new_x == Float16.(new_state.state[1])
      @test new_x ≈ x .- 1e-3 .* g
      x = rand(Float16, 2)
      opt_state = Optimisers.setup(MixedPrecision(Float64, Adam(1e-3)), x)
      @test opt_state.state[1] isa Vector{Float64}
      @test opt_state.state[2][1] isa Vector{Float64}
      opt = MixedPrecision(Float64, Adam(1e-3))
      opt2 = Optimisers.adjust(opt, 2e-3)
      @test opt2.rule.eta == 2e-3
      @test opt2 isa MixedPrecision{Float64, <:Adam}
      @test_throws ArgumentError OptimiserChain(MixedPrecision(Adam()))
    end
    """,
)
def case_mixed_precision():
    r = np.random.default_rng(0)
    x = jnp.asarray(r.random(2), jnp.float16)
    opt_state = O.setup(O.MixedPrecision(O.Adam(1e-3)), x)
    assert opt_state.state[0].dtype == jnp.float32 and opt_state.state[1][0].dtype == jnp.float32
    g = jnp.asarray(r.random(2), jnp.float16)
    new_state, new_x = O.update(opt_state, x, g)
    equal(new_x, new_state.state[0].astype(jnp.float16))
    # Adam's first step is η·g/(|g| + ϵ): each entry moves by 1e-3, kept exactly in the float32 copy
    close(new_state.state[0], np.asarray(x, np.float32) - 1e-3, rtol=1e-6)
    with jax.enable_x64(True):
        opt_state = O.setup(O.MixedPrecision(jnp.float64, O.Adam(1e-3)), jnp.asarray(r.random(2), jnp.float16))
        assert opt_state.state[0].dtype == jnp.float64 and opt_state.state[1][0].dtype == jnp.float64
    opt2 = O.adjust(O.MixedPrecision(jnp.float64, O.Adam(1e-3)), 2e-3)
    assert opt2.rule.eta == 2e-3 and isinstance(opt2, O.MixedPrecision) and opt2.T == jnp.float64
    assert isinstance(opt2.rule, O.Adam)
    raises(ValueError, O.OptimiserChain, O.MixedPrecision(O.Adam()))


# test/rules.jl "original": every rule in RULES drives a product loss below 0.001 in 10^4 steps.
# The loop runs as one jax.lax.fori_loop over the rule's optax transformation (what setup/update use).
RULES = {
    "Descent": lambda: O.Descent(), "Adam": lambda: O.Adam(), "Momentum": lambda: O.Momentum(),
    "Nesterov": lambda: O.Nesterov(), "Rprop": lambda: O.Rprop(), "RMSProp": lambda: O.RMSProp(),
    "AdaGrad": lambda: O.AdaGrad(), "AdaMax": lambda: O.AdaMax(), "AdaDelta": lambda: O.AdaDelta(),
    "AMSGrad": lambda: O.AMSGrad(), "NAdam": lambda: O.NAdam(), "AdamW": lambda: O.AdamW(), "RAdam": lambda: O.RAdam(),
    "OAdam": lambda: O.OAdam(), "AdaBelief": lambda: O.AdaBelief(), "Lion": lambda: O.Lion(),
}
CHAINS = {
    "SignDecay": ("OptimiserChain(SignDecay(0.001), Adam(0.001))", lambda: O.OptimiserChain(O.SignDecay(0.001), O.Adam(0.001))),
    "ClipNorm": ("OptimiserChain(ClipNorm(), Adam(0.001))", lambda: O.OptimiserChain(O.ClipNorm(), O.Adam(0.001))),
    "ClipGrad": ("OptimiserChain(ClipGrad(0.5), Momentum())", lambda: O.OptimiserChain(O.ClipGrad(0.5), O.Momentum())),
    "WeightDecay": ("OptimiserChain(WeightDecay(), OAdam(), ClipGrad(1))",
                    lambda: O.OptimiserChain(O.WeightDecay(), O.OAdam(), O.ClipGrad(1))),
}
ORIGINAL = """
@testset "original" begin
  @testset "$(name(o))" for o in RULES     # o = {rule}
    w′ = (α = rand(3, 3), β = rand(3, 3))
    w = (α = 5rand(3, 3), β = rand(3, 3))
    st = Optimisers.setup(o, w)
    loss(x, y) = mean((x.α .* x.β .- y.α .* y.β) .^ 2)
    @test loss(w, w′) > 1
    for i = 1:10^4
      gs = loggradient(o)(x -> loss(x, w′), w)
      st, w = Optimisers.update(st, w, gs...)
    end
    @test loss(w, w′) < 0.001
"""


def _converges(make_rule):
    rule = make_rule()
    r = np.random.default_rng(0)
    wp = {"α": jnp.asarray(r.random((3, 3)), jnp.float32), "β": jnp.asarray(r.random((3, 3)), jnp.float32)}
    w = {"α": jnp.asarray(5 * r.random((3, 3)), jnp.float32), "β": jnp.asarray(r.random((3, 3)), jnp.float32)}
    loss = lambda x: jnp.mean((x["α"] * x["β"] - wp["α"] * wp["β"]) ** 2)
    assert float(loss(w)) > 1

    def body(_, c):
        w, s = c
        u, s = rule.update(jax.grad(loss)(w), s, w)
        return jax.tree_util.tree_map(jnp.add, w, u), s

    w = jax.jit(lambda w: jax.lax.fori_loop(0, 10**4, body, (w, rule.init(w)))[0])(w)
    assert float(loss(w)) < 0.001, float(loss(w))


def _rule_case(name, julia_rule, make_rule, suffix=""):
    def run():
        _converges(make_rule)

    run.__name__ = f"case_rule_original_{name}{suffix}"
    names = (name,) if "OptimiserChain" not in julia_rule else (name, "OptimiserChain")
    case(names=names, source=RULES_JL, julia=ORIGINAL.replace("{rule}", julia_rule))(run)


for _n, _mk in RULES.items():
    _rule_case(_n, f"{_n}()", _mk)
for _n, (_jl, _mk) in CHAINS.items():
    _rule_case(_n, _jl, _mk)
_rule_case("RMSProp", "RMSProp(centred = true)", lambda: O.RMSProp(centred=True), "_centred")
_rule_case("AdamW", "AdamW(couple=false)", lambda: O.AdamW(couple=False), "_uncoupled")


@case(names=("MixedPrecision", "Adam"), source=RULES_JL, julia=ORIGINAL.replace("{rule}", "MixedPrecision(Float64, Adam())"))
def case_rule_original_MixedPrecision():
    with jax.enable_x64(True):  # float32 parameters, a float64 copy
        _converges(lambda: O.MixedPrecision(jnp.float64, O.Adam()))
