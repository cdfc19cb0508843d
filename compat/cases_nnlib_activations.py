# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib activation and softmax cases (NNlib.jl test/activations.jl, softmax.jl), as re-exported by Flux.

NNlib's tests use Float64 scalars and `==`; fluxjax computes in float32, so `==` becomes `≈` at float32
precision (rtol 1e-6) and the values are NNlib's.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, raises, rows
from fluxjax import nnlib as N

ACT = "NNlib.jl test/activations.jl"
S = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
HS = lambda x: max(0.0, min(1.0, (x + 3) / 6))  # noqa: E731
SELU_L, SELU_A = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


# name -> (fluxjax function, Julia lines, expected f(0.0), f(1.0), f(-1.0)); None means "checked separately"
ACTIVATIONS = {
    "σ": (N.sigmoid, "@test sigmoid(0.0) == 0.5\n@test sigmoid(1.0) == 1.0 / (1.0 + exp(-1.0))\n"
          "@test sigmoid(-1.0) == exp(-1.0) / (1.0 + exp(-1.0))", (0.5, S(1.0), math.exp(-1) / (1 + math.exp(-1)))),
    "hardσ": (N.hardsigmoid, "@test hardsigmoid(0.0) == 0.5\n@test hardsigmoid(1.0) == max(0,min(1, (1 + 3)/6))\n"
              "@test hardsigmoid(-1.0) == max(0,min(1,(-1+3)/6 ))", (0.5, HS(1.0), HS(-1.0))),
    "hardtanh": (N.hardtanh, "@test hardtanh(0.0) == 0.0\n@test hardtanh(1.0) == 1.0\n@test hardtanh(-1.0) == -1.0", (0.0, 1.0, -1.0)),
    "relu": (N.relu, "@test relu(0.0) == 0.0\n@test relu(1.0) == 1.0\n@test relu(-1.0) == 0.0", (0.0, 1.0, 0.0)),
    "leakyrelu": (N.leakyrelu, "@test leakyrelu(0.0) == 0.0\n@test leakyrelu(1.0) == 1.0\n@test leakyrelu(-1.0) == -0.01",
                  (0.0, 1.0, -0.01)),
    "relu6": (N.relu6, "@test relu6(0.0) == 0.0\n@test relu6(1.0) == 1.0\n@test relu6(-1.0) == 0.0", (0.0, 1.0, 0.0)),
    "elu": (N.elu, "@test elu(0.0) == 0.0\n@test elu(1.0) == 1.0\n@test elu(-1.0) == exp(-1.0) - 1.0", (0.0, 1.0, math.exp(-1) - 1)),
    "gelu": (N.gelu, "@test gelu(0.0) == 0.0\n@test gelu(1.0) ≈ 0.8411919906082768\n@test gelu(-1.0) ≈ -0.15880800939172324",
             (0.0, 0.8411919906082768, -0.15880800939172324)),
    "gelu_tanh": (N.gelu_tanh, "@test gelu_tanh(0.0) == 0.0\n@test gelu_tanh(1.0) ≈ 0.8411919906082768\n"
                  "@test gelu_tanh(-1.0) ≈ -0.15880800939172324", (0.0, 0.8411919906082768, -0.15880800939172324)),
    "gelu_sigmoid": (N.gelu_sigmoid, "@test gelu_sigmoid(0.0) == 0.0\n@test gelu_sigmoid(1.0) ≈ 0.8411919906082768\n"
                     "@test gelu_sigmoid(-1.0) ≈ -0.15880800939172324", (0.0, 0.8411919906082768, -0.15880800939172324)),
    "gelu_erf": (N.gelu_erf, "@test gelu_erf(0.0) == 0.0\n@test gelu_erf(1.0) == 0.8413447460685429\n"
                 "@test gelu_erf(-1.0) == -0.15865525393145707", (0.0, 0.8413447460685429, -0.15865525393145707)),
    "swish": (N.swish, "@test swish(0.0) == 0.0\n@test swish(1.0) == sigmoid(1.0)\n@test swish(-1.0) == -sigmoid(-1.0)",
              (0.0, S(1.0), -S(-1.0))),
    "hardswish": (N.hardswish, "@test hardswish(0.0) == 0.0\n@test hardswish(1.0) == hardsigmoid(1.0)\n"
                  "@test hardswish(-1.0) == -hardsigmoid(-1.0)", (0.0, HS(1.0), -HS(-1.0))),
    "lisht": (N.lisht, "@test lisht(0.0) == 0.0\n@test lisht(1.0) ≈ 1.0 * tanh(1.0)\n@test lisht(-1.0) ≈ -1.0 * tanh(-1.0)",
              (0.0, math.tanh(1), math.tanh(1))),
    "softplus": (N.softplus, "@test softplus(0.0) ≈ log(2.0)\n@test softplus(1.0) ≈ log(exp(1.0) + 1.0)\n"
                 "@test softplus(-1.0) ≈ log(exp(-1.0) + 1.0)", (math.log(2), math.log(math.e + 1), math.log(math.exp(-1) + 1))),
    "softsign": (N.softsign, "@test softsign(0.0) == 0.0\n@test softsign(1.0) == 0.5\n@test softsign(-1.0) == -0.5", (0.0, 0.5, -0.5)),
    "selu": (N.selu, "@test selu(0.0) == 0.0\n@test selu(1.0) == 1.0507009873554804934193349852946\n"
             "@test selu(-1.0) ≈ 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717 * (exp(-1.0) - 1.0)",
             (0.0, SELU_L, SELU_L * SELU_A * (math.exp(-1) - 1))),
    "celu": (N.celu, "@test celu(0.0) == 0.0\n@test celu(1.0) == 1.0\n@test celu(-1.0) == exp(-1.0) - 1", (0.0, 1.0, math.exp(-1) - 1)),
    "trelu": (N.trelu, "@test trelu(0.0) == 0.0\n@test trelu(1.0) == 0.0\n@test trelu(-1.0) == 0.0", (0.0, 0.0, 0.0)),
    "logcosh": (N.logcosh, "@test logcosh(0.0) == log(cosh(0.0))\n@test logcosh(1.0) ≈ log(cosh(1.0))",
                (0.0, math.log(math.cosh(1)), math.log(math.cosh(-1)))),
    "mish": (N.mish, "@test mish(0.0) == 0.0\n@test mish(1.0) ≈ tanh(log(1.0 + exp(1.0)))\n"
             "@test mish(-1.0) ≈ -tanh(log(1.0 + exp(-1.0)))", (0.0, math.tanh(math.log(1 + math.e)), -math.tanh(math.log(1 + math.exp(-1))))),
    "tanhshrink": (N.tanhshrink, "@test tanhshrink(0.0) == 0.0\n@test tanhshrink(1.0) ≈ 0.23840584404423515\n"
                   "@test tanhshrink(-1.0) ≈ -0.23840584404423515", (0.0, 0.23840584404423515, -0.23840584404423515)),
    "softshrink": (N.softshrink, "@test softshrink(0.0) == 0.0\n@test softshrink(1.0) == 0.5\n@test softshrink(-1.0) == -0.5",
                   (0.0, 0.5, -0.5)),
}
ALIASES = {"sigmoid": "σ", "hardsigmoid": "hardσ"}


def _activation_case(jname, fn, julia, want):
    def run():
        for x, w in zip((0.0, 1.0, -1.0), want):
            close(fn(jnp.float32(x)), w, rtol=1e-6, atol=1e-7)

    run.__name__ = "case_act_" + {"σ": "sigmoid", "hardσ": "hardsigmoid"}.get(jname, jname)
    names = (jname,) + tuple(a for a, b in ALIASES.items() if b == jname)
    case(names=names, source=ACT, julia=julia)(run)


for _j, (_fn, _jl, _want) in ACTIVATIONS.items():
    _activation_case(_j, _fn, _jl, _want)


@case(
    names=("rrelu",),
    source=ACT,
    julia="""
    @test rrelu(0.0) == 0.0
    @test rrelu(1.0) == 1.0
    @test -1/3.0 <= rrelu(-1.0) <= -1/8.0
    """,
)
def case_act_rrelu():
    close(N.rrelu(jnp.float32(0.0)), 0.0)
    close(N.rrelu(jnp.float32(1.0)), 1.0)
    v = float(N.rrelu(jnp.float32(-1.0)))
    assert -1 / 3 - 1e-7 <= v <= -1 / 8 + 1e-7


@case(
    names=("logσ", "logsigmoid"),
    source=ACT,
    julia="""
    @test logsigmoid(-1.0) ≈ log(sigmoid(-1.0))   # logσ(x) = -softplus(-x)
    xs = randn(10,10)
    @test logsigmoid.(xs) ≈ log.(sigmoid.(xs))
    for T in [:Float32, :Float64]
        @eval @test logsigmoid.($T[-100_000, 100_000.]) ≈ $T[-100_000, 0.]
    end
    """,
)
def case_act_logsigmoid():
    xs = np.random.default_rng(0).standard_normal((10, 10)).astype(np.float32)
    close(N.logsigmoid(xs), np.log(1 / (1 + np.exp(-xs.astype(np.float64)))), rtol=1e-5)
    close(N.logsigmoid(np.float32([-100_000, 100_000.0])), [-100_000, 0.0])


@case(
    names=("tanh_fast", "sigmoid_fast"),
    source="NNlib.jl test/activations.jl (\"fast\" testset)",
    julia="""
    @test tanh_fast.(x) ≈ tanh.(x)   # x in -3:0.1:3, Float32 and Float64
    @test sigmoid_fast.(x) ≈ sigmoid.(x)
    """,
)
def case_act_fast():
    x = np.arange(-3, 3.05, 0.1, dtype=np.float32)
    close(N.tanh_fast(x), np.tanh(x), rtol=1e-5, atol=1e-6)
    close(N.sigmoid_fast(x), 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)


@case(
    names=("softmax", "logsoftmax"),
    source="NNlib.jl test/softmax.jl",
    julia="""
    @test softmax(Int[0, 0]) == [0.5, 0.5]
    xs = rand(5, 5)
    @test all(sum(softmax(xs), dims = 1) .≈ 1)
    @test all(sum(softmax(xs; dims = 2), dims = 2) .≈ 1)
    @test log.(softmax(xs; dims = 2)) ≈ logsoftmax(xs; dims = 2)
    xs = [-100_000.0, -100_000.0]
    @test softmax(xs) ≈ [0.5, 0.5]
    @test logsoftmax(xs) ≈ log.([0.5, 0.5])
    xs = Float32[1, 2, 3000.0]
    @test softmax(xs) ≈ [0, 0, 1]
    @test logsoftmax(xs) ≈ [-2999, -2998, 0]
    """,
)
def case_softmax():
    close(N.softmax(np.array([0, 0])), [0.5, 0.5])
    xs = np.asarray(fluxjax.rand32(5, 5))

    @jax.jit  # one compilation for the whole block
    def block(xs):
        big = jnp.float32([-100_000, -100_000])
        far = jnp.float32([1, 2, 3000])
        return (jnp.sum(N.softmax(xs), axis=0), jnp.sum(N.softmax(xs, dims=1), axis=1), jnp.log(N.softmax(xs, dims=1)),
                N.logsoftmax(xs, dims=1), N.softmax(big), N.logsoftmax(big), N.softmax(far), N.logsoftmax(far))

    s0, s1, logs, lsm, sb, lsb, sf, lsf = block(xs)
    close(s0, np.ones(5))
    close(s1, np.ones(5))
    close(logs, lsm, rtol=1e-5)
    close(sb, [0.5, 0.5])
    close(lsb, np.log([0.5, 0.5]))
    close(sf, [0, 0, 1])
    close(lsf, [-2999, -2998, 0])


@case(
    names=("logsumexp", "logsoftmax"),
    source="NNlib.jl test/softmax.jl",
    julia="""
    flogsoft(x; dims) = mean(x .- logsoftmax(x; dims = dims), dims = dims)
    x = rand(3, 4)
    @test logsumexp(x) ≈ flogsoft(x, dims = :)
    @test logsumexp(x; dims = 1) ≈ flogsoft(x, dims = 1)
    """,
)
def case_logsumexp():
    x = np.asarray(fluxjax.rand32(3, 4))
    flogsoft = lambda x, dims: np.mean(x - np.asarray(N.logsoftmax(x, dims=dims)), axis=dims, keepdims=True)
    close(N.logsumexp(x), np.mean(x - np.asarray(N.logsoftmax(x, dims=(0, 1)))))
    close(np.reshape(N.logsumexp(x, dims=0), (1, 4)), flogsoft(x, 0))


@case(
    names=("∇softmax", "∇logsoftmax", "softmax", "logsoftmax"),
    source="NNlib.jl test/softmax.jl",
    julia="""
    xs = Float32[1 2 3; 1000 2000 3000]
    y = logsoftmax(xs)
    @test ∇logsoftmax(ones(Float32, size(xs)), y) ≈ Float32[1 1 1; -1 -1 -1]
    y = softmax(xs)
    @test ∇softmax(ones(Float32, size(xs)), y) ≈ zeros(Float32, size(xs))
    # These values precalculated using PyTorch's nn.LogSoftmax
    xs = [-0.238639 0.748142 -0.283194 -0.525461 -1.5348 -0.797842
          0.690384 0.211427 0.254794 -0.213572 -0.314174 -0.372663
          -1.146370 -0.577988 0.718952 0.919720 -0.620773 0.929977]
    ys = [0.237703 -0.621474 0.448193 0.546047 0.564185 0.632273
          -0.930163 0.0519798 0.0549979 0.3799 -0.477112 0.437428
          0.69246 0.569494 -0.503191 -0.925947 -0.0870738 -1.0697]
    y = logsoftmax(xs)
    @test ∇logsoftmax(ones(size(xs)), y) ≈ ys rtol = 1e-6
    y = softmax(xs)
    @test ∇softmax(ones(size(xs)), y) ≈ zeros(size(xs)) atol = 1e-6
    """,
)
def case_grad_softmax():
    xs = jnp.array(rows([1, 2, 3], [1000, 2000, 3000]), jnp.float32)
    close(N.grad_logsoftmax(jnp.ones(xs.shape), N.logsoftmax(xs)), rows([1, 1, 1], [-1, -1, -1]))
    close(N.grad_softmax(jnp.ones(xs.shape), N.softmax(xs)), np.zeros(xs.shape), atol=1e-6)
    xs = np.array([[-0.238639, 0.748142, -0.283194, -0.525461, -1.5348, -0.797842],
                   [0.690384, 0.211427, 0.254794, -0.213572, -0.314174, -0.372663],
                   [-1.146370, -0.577988, 0.718952, 0.919720, -0.620773, 0.929977]])
    ys = np.array([[0.237703, -0.621474, 0.448193, 0.546047, 0.564185, 0.632273],
                   [-0.930163, 0.0519798, 0.0549979, 0.3799, -0.477112, 0.437428],
                   [0.69246, 0.569494, -0.503191, -0.925947, -0.0870738, -1.0697]])
    with jax.enable_x64(True):
        close(N.grad_logsoftmax(np.ones(xs.shape), N.logsoftmax(jnp.asarray(xs))), ys, rtol=1e-5)
        close(N.grad_softmax(np.ones(xs.shape), N.softmax(jnp.asarray(xs))), np.zeros(xs.shape), atol=1e-6)


@case(
    names=("glu",),
    source="NNlib.jl test/functions.jl",
    julia="""
    x = [1 2 3; 4 5 6; 7 8 9; 10 11 12]
    @test ceil.(glu(x, 1)) == [1 2 3; 4 5 6]
    @test_throws AssertionError glu(x, 2)
    gradtest(glu, rand(rng, 4, 3))
    """,
)
def case_glu():
    x = jnp.array(rows([1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]), jnp.float32)
    equal(jnp.ceil(N.glu(x, 0)), rows([1, 2, 3], [4, 5, 6]))
    raises(ValueError, N.glu, x, 1)
    r = np.random.default_rng(17).random((4, 3))
    w = np.random.default_rng(18).normal(size=(2, 3))
    with jax.enable_x64(True):  # gradtest: the gradient against central finite differences
        g = jax.grad(lambda z: jnp.sum(N.glu(z, 0) * w))(jnp.asarray(r))
    glu_np = lambda z: np.sum(z[:2] / (1 + np.exp(-z[2:])) * w)
    eps, fd = 1e-6, np.zeros_like(r)
    for i in np.ndindex(r.shape):
        d = np.zeros_like(r)
        d[i] = eps
        fd[i] = (glu_np(r + d) - glu_np(r - d)) / (2 * eps)
    close(g, fd, rtol=1e-6, atol=1e-9)


@case(
    names=("thresholdrelu", "trelu"),
    source="NNlib.jl src/activations.jl (const thresholdrelu = trelu)",
    julia="""
    const thresholdrelu = trelu
    @test thresholdrelu(1.0) == 0 && thresholdrelu(2.0) == 2.0
    """,
)
def case_thresholdrelu():
    assert N.thresholdrelu is N.trelu
    equal(N.thresholdrelu(jnp.array([1.0, 2.0])), [0.0, 2.0])
