# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib cases (NNlib.jl test/activations.jl, softmax.jl, conv.jl, pooling.jl, padding.jl,
batchedmul.jl, testsuite/upsample.jl), as re-exported by Flux.

NNlib's tests use Float64 scalars and `==`; fluxjax computes in float32, so `==` becomes `≈` at float32
precision (rtol 1e-6) and the values are NNlib's.
"""

import math
import operator
import statistics

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import nnlib as N
from fluxjax.errors import DimensionMismatch

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


CONV = "NNlib.jl test/conv.jl"


@case(
    names=("conv",),
    source=CONV,
    julia="""
    # rank 1: x = reshape(Float64[1:5;], 5, 1, 1), w = reshape(Float64[1:2;], 2, 1, 1)
    "y_pad"  => [1, 4,  7, 10, 13, 10.],
    "y_dil"  => [5, 8, 11.],
    "y_flip" => [5, 8, 11, 14.],
    y_plain = y_pad[2:end-1]
    @test isapprox(ddims(conv(x, w, cdims)), y_plain, rtol = 1.0e-7)
    cdims = DenseConvDims(x, w; padding=1);   @test ... ≈ y_pad
    cdims = DenseConvDims(x, w; dilation=2);  @test ... ≈ y_dil
    cdims = DenseConvDims(x, w; flipkernel=true); @test ... ≈ y_flip
    """,
)
def case_conv_1d():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    w = jl(range(1, 3), (2, 1, 1), np.float32)
    close(N.conv(x, w)[:, 0, 0], [4, 7, 10, 13])
    close(N.conv(x, w, pad=1)[:, 0, 0], [1, 4, 7, 10, 13, 10])
    close(N.conv(x, w, dilation=2)[:, 0, 0], [5, 8, 11])
    close(N.conv(x, w, flipped=True)[:, 0, 0], [5, 8, 11, 14])
    close(N.crosscor(x, w)[:, 0, 0], [5, 8, 11, 14])


@case(
    names=("conv",),
    source=CONV,
    julia="""
    # rank 2: x = reshape(Float64[1:20;], 5, 4, 1, 1), w = reshape(Float64[1:4;], 2, 2, 1, 1)
    "y_pad" => [
        1  9  29  49  48;
        4 29  79 129 115;
        7 39  89 139 122;
        10 49  99 149 129;
        13 59 109 159 136;
        10 40  70 100  80.
    ],
    "y_flip" => [
        51  101  151;
        61  111  161;
        71  121  171;
        81  131  181.
    ],
    """,
)
def case_conv_2d():
    x = jl(range(1, 21), (5, 4, 1, 1), np.float32)
    w = jl(range(1, 5), (2, 2, 1, 1), np.float32)
    y_pad = rows([1, 9, 29, 49, 48], [4, 29, 79, 129, 115], [7, 39, 89, 139, 122], [10, 49, 99, 149, 129],
                 [13, 59, 109, 159, 136], [10, 40, 70, 100, 80])
    close(N.conv(x, w, pad=1)[:, :, 0, 0], y_pad)
    close(N.conv(x, w, flipped=True)[:, :, 0, 0], rows([51, 101, 151], [61, 111, 161], [71, 121, 171], [81, 131, 181]))


@case(
    names=("∇conv_data", "∇conv_filter"),
    source=CONV,
    julia="""
    "dx"        => [ 8, 18, 27, 36, 13.],
    "dw"        => [134, 100.],
    dy = NNlib.conv(x, w, cdims)
    @test isapprox(ddims(∇conv_filter(x, dy, cdims)), dw, rtol = 1.0e-7)
    @test isapprox(ddims(∇conv_data(dy, w, cdims)), dx, rtol = 1.0e-7)
    """,
)
def case_conv_grads():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    w = jl(range(1, 3), (2, 1, 1), np.float32)
    dy = N.conv(x, w)
    close(N.grad_conv_filter(x, dy, w.shape)[:, 0, 0], [134, 100])
    close(N.grad_conv_data(dy, w, x.shape)[:, 0, 0], [8, 18, 27, 36, 13])
    # DenseConvDims(x, w) carries the sizes; without them fluxjax solves them from dy (unambiguous at stride 1)
    close(N.grad_conv_filter(x, dy)[:, 0, 0], [134, 100])
    close(N.grad_conv_data(dy, w)[:, 0, 0], [8, 18, 27, 36, 13])


# NNlib.jl test/conv.jl `conv_answer_dict`: the dx / dw known answers for ranks 1-3
CONV_GRAD_ANSWERS = {
    1: dict(
        dx=[8, 18, 27, 36, 13.], dx_stride=[8, 4, 20, 10, 0.], dx_pad=[9, 18, 27, 36, 33.], dx_dil=[10, 16, 27, 8, 11.],
        dx_flip=[5, 18, 27, 36, 28.],
        dw=[134, 100.], dw_stride=[48, 34.], dw_pad=[135, 150.], dw_dil=[102, 54.], dw_flip=[110, 148.],
    ),
    2: dict(
        dx=rows([116, 374, 674, 258], [243, 700, 1200, 407], [313, 800, 1300, 437], [383, 900, 1400, 467], [177, 386, 586, 159]),
        dx_stride=rows([116, 58, 516, 258], [87, 29, 387, 129], [196, 98, 596, 298], [147, 49, 447, 149], [0, 0, 0, 0]),
        dx_pad=rows([152, 470, 850, 911], [261, 700, 1200, 1240], [340, 800, 1300, 1319], [419, 900, 1400, 1398],
                    [370, 746, 1126, 1087]),
        dx_dil=rows([192, 392, 96, 196], [232, 432, 116, 216], [416, 766, 184, 334], [174, 324, 58, 108], [204, 354, 68, 118]),
        dx_flip=rows([51, 254, 454, 453], [163, 700, 1200, 1087], [193, 800, 1300, 1157], [223, 900, 1400, 1227],
                     [162, 586, 886, 724]),
        dw=rows([17378, 11738], [16250, 10610]), dw_stride=rows([5668, 3888], [5312, 3532]),
        dw_pad=rows([18670, 22550], [19850, 23430]), dw_dil=rows([8632, 3652], [7636, 2656]),
        dw_flip=rows([12590, 19550], [13982, 20942]),
    ),
    3: dict(
        dx=jl([2576, 5118, 5658, 6198, 3010, 5948, 11576, 12512, 13448, 6420, 8468, 16256, 17192, 18128, 8580, 4092, 7718,
               8114, 8510, 3950, 9624, 18316, 19108, 19900, 9340, 18680, 34992, 36288, 37584, 17320, 22280, 41472, 42768, 44064,
               20200, 9776, 17756, 18260, 18764, 8340, 4168, 7438, 7690, 7942, 3450, 6972, 11896, 12256, 12616, 5140, 8052,
               13696, 14056, 14416, 5860, 2804, 4278, 4386, 4494, 1510], (5, 4, 3)),
        dx_stride=jl([2576, 2254, 3152, 2758, 0, 1932, 1610, 2364, 1970, 0, 5456, 4774, 6032, 5278, 0, 4092, 3410, 4524,
                      3770, 0, 1288, 966, 1576, 1182, 0, 644, 322, 788, 394, 0, 2728, 2046, 3016, 2262, 0, 1364, 682, 1508,
                      754, 0] + [0] * 20, (5, 4, 3)),
        dx_pad=jl([4220, 6343, 7116, 7889, 6550, 8490, 12276, 13312, 14348, 11606, 12350, 17456, 18492, 19528, 15546,
                   11989, 16664, 17469, 18274, 14333, 16200, 22628, 23616, 24604, 19392, 25336, 34992, 36288, 37584, 29320,
                   30216, 41472, 42768, 44064, 34200, 26236, 35664, 36652, 37640, 28940, 22816, 30831, 31636, 32441, 24794,
                   32522, 43668, 44704, 45740, 34742, 36462, 48848, 49884, 50920, 38602, 29501, 39264, 40037, 40810, 30733],
                  (5, 4, 3)),
        dx_dil=jl([4864, 5152, 9696, 4508, 4760, 6304, 6592, 12396, 5768, 6020, 3648, 3864, 7120, 3220, 3400, 4728, 4944,
                   9100, 4120, 4300] + [0] * 20 + [2432, 2576, 4544, 1932, 2040, 3152, 3296, 5804, 2472, 2580, 1216, 1288,
                                                   1968, 644, 680, 1576, 1648, 2508, 824, 860], (5, 4, 3)),
        dx_flip=jl([686, 2094, 2202, 2310, 1588, 2924, 7544, 7904, 8264, 5124, 3644, 9344, 9704, 10064, 6204, 3138, 7430,
                    7682, 7934, 4616, 4836, 11980, 12484, 12988, 7792, 14936, 34992, 36288, 37584, 21640, 17816, 41472, 42768,
                    44064, 25240, 12620, 28412, 29204, 29996, 16728, 7030, 15646, 16042, 16438, 9084, 17772, 38968, 39904,
                    40840, 22276, 19932, 43648, 44584, 45520, 24796, 12362, 26742, 27282, 27822, 14992], (5, 4, 3)),
        dw=jl([1.058184e6, 1.0362e6, 948264, 926280, 618504, 596520, 508584, 486600], (2, 2, 2)),
        dw_stride=jl([74760, 72608, 64000, 61848, 31720, 29568, 20960, 18808.], (2, 2, 2)),
        dw_pad=jl([1.26055e6, 1.30805e6, 1.40327e6, 1.44923e6, 1.73731e6, 1.77589e6, 1.83259e6, 1.86731e6], (2, 2, 2)),
        dw_dil=jl([250320, 241512, 206280, 197472, 74160, 65352, 30120, 21312.], (2, 2, 2)),
        dw_flip=jl([639480, 670200, 793080, 823800, 1.25388e6, 1.2846e6, 1.40748e6, 1.4382e6], (2, 2, 2)),
    ),
}


def _conv_answer_settings():
    """`(x, w, answers, suffix, fluxjax keywords, NNlib's DenseConvDims keywords)` for each rank of
    `CONV_GRAD_ANSWERS` and each of NNlib's settings (plain, stride, dilation, padding, flipped kernel)."""
    for ans in CONV_GRAD_ANSWERS.values():
        dx0, dw0 = np.asarray(ans["dx"]), np.asarray(ans["dw"])
        x = jl(range(1, dx0.size + 1), (*dx0.shape, 1, 1))
        w = jl(range(1, dw0.size + 1), (*dw0.shape, 1, 1))
        for suffix, kw, julia_kw in [("", {}, {}), ("_stride", dict(stride=2), dict(stride=2)),
                                     ("_dil", dict(dilation=2), dict(dilation=2)), ("_pad", dict(pad=1), dict(padding=1)),
                                     ("_flip", dict(flipped=True), dict(flipkernel=True))]:
            yield x, w, ans, suffix, kw, julia_kw


@case(
    names=("∇conv_data", "∇conv_filter", "DenseConvDims", "conv"),
    source=CONV,
    julia="""
    for rank in (1,2,3)
        dx = conv_answer_dict[rank]["dx"]; ... dw_flip = conv_answer_dict[rank]["dw_flip"]
        x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1)
        w = reshape(Float64[1:prod(size(dw));], size(dw)..., 1, 1)
        cdims = DenseConvDims(x, w)
        dy = NNlib.conv(x, w, cdims)
        @test isapprox(ddims(∇conv_filter(x, dy, cdims)), dw, rtol = 1.0e-7)
        @test isapprox(ddims(∇conv_data(dy, w,  cdims)), dx, rtol = 1.0e-7)
        cdims = DenseConvDims(x, w; stride=2)      # dw_stride, dx_stride
        cdims = DenseConvDims(x, w; dilation=2)    # dw_dil, dx_dil
        cdims = DenseConvDims(x, w; padding=1)     # dw_pad, dx_pad
        cdims = DenseConvDims(x, w; flipkernel=true)  # dw_flip, dx_flip
    """,
)
def case_conv_grads_known_answers():
    for x, w, ans, suffix, kw, julia_kw in _conv_answer_settings():
        dy = N.conv(x, w, **kw)
        # the 3-d answers are printed to 6 significant digits (1.26055e6)
        close(N.grad_conv_filter(x, dy, w.shape, **kw)[..., 0, 0], ans["dw" + suffix], rtol=1e-5)
        close(N.grad_conv_data(dy, w, x.shape, **kw)[..., 0, 0], ans["dx" + suffix], rtol=1e-5)
        # and as NNlib spells it, with the settings in a DenseConvDims
        cdims = N.DenseConvDims(x, w, **julia_kw)
        equal(N.conv(x, w, cdims), dy)
        close(N.grad_conv_filter(x, dy, cdims)[..., 0, 0], ans["dw" + suffix], rtol=1e-5)
        close(N.grad_conv_data(dy, w, cdims)[..., 0, 0], ans["dx" + suffix], rtol=1e-5)


@case(
    names=("depthwiseconv", "∇depthwiseconv_data", "∇depthwiseconv_filter", "DepthwiseConvDims"),
    source=CONV,
    julia="""
    # "Depthwise Convolution", for rank in (1,2,3), one channel: x and w as in the conv_answer_dict tests
    cdims = DepthwiseConvDims(x, w)
    dy = NNlib.depthwiseconv(x, w, cdims)
    @test ddims(∇conv_filter(x, dy, cdims)) == dw      # ∇depthwiseconv_filter
    @test ddims(∇conv_data(dy, w,  cdims)) == dx       # ∇depthwiseconv_data
    cdims = DepthwiseConvDims(x, w; stride=2)          # dw_stride, dx_stride; and y_stride for the forward
    cdims = DepthwiseConvDims(x, w; dilation=2)        # dw_dil, dx_dil
    cdims = DepthwiseConvDims(x, w; padding=1)         # dw_pad, dx_pad
    cdims = DepthwiseConvDims(x, w; flipkernel=true)   # dw_flip, dx_flip
    """,
)
def case_depthwise_known_answers():
    for x, w, ans, suffix, kw, julia_kw in _conv_answer_settings():
        cdims = N.DepthwiseConvDims(x, w, **julia_kw)
        dy = N.depthwiseconv(x, w, cdims)
        close(dy, N.conv(x, w, **kw), rtol=1e-6)  # one channel: depthwise is the dense convolution
        close(N.grad_depthwiseconv_filter(x, dy, cdims)[..., 0, 0], ans["dw" + suffix], rtol=1e-5)
        close(N.grad_depthwiseconv_data(dy, w, cdims)[..., 0, 0], ans["dx" + suffix], rtol=1e-5)


@case(
    names=("conv", "gradient"),
    source=CONV,
    julia="""
    # the same known answers, through AD: the pullback of conv is ∇conv_data / ∇conv_filter
    "dx"        => [ 8, 18, 27, 36, 13.],
    "dw"        => [134, 100.],
    dy = NNlib.conv(x, w, cdims)   # = [4, 7, 10, 13]
    """,
)
def case_conv_pullback():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    w = jl(range(1, 3), (2, 1, 1), np.float32)
    y, back = fluxjax.pullback(lambda x, w: N.conv(x, w), x, w)
    dx, dw = back(y)
    close(dx[:, 0, 0], [8, 18, 27, 36, 13])
    close(dw[:, 0, 0], [134, 100])


@case(
    names=("depthwiseconv",),
    source=CONV,
    julia="""
    @testset "Depthwise Convolution" begin
        # Pull out known-good answers for y = depthwiseconv(x, w)
        y_pad = conv_answer_dict[rank]["y_pad"]   # rank 1: [1, 4, 7, 10, 13, 10.]
        y_plain = y_pad[2:end-1]
        x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1)
        w = reshape(Float64[1:prod(size(dw));], size(dw)..., 1, 1)
        @test isapprox(ddims(depthwiseconv(x, w, cdims)), y_plain, rtol = 1.0e-7)
        cdims = DepthwiseConvDims(x, w; padding=1);  @test ... ≈ y_pad
    """,
)
def case_nnlib_depthwiseconv():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    w = jl(range(1, 3), (2, 1, 1), np.float32)
    close(N.depthwiseconv(x, w)[:, 0, 0], [4, 7, 10, 13])
    close(N.depthwiseconv(x, w, pad=1)[:, 0, 0], [1, 4, 7, 10, 13, 10])


@case(
    names=("maxpool", "meanpool", "PoolDims"),
    source="NNlib.jl test/pooling.jl",
    julia="""
    # x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1)
    maxpool_answer_dict = Dict(
        1 => Dict("y" => [2, 4.], "y_nostride" => [2, 3, 4, 5.], "y_pad" => [1, 3, 5.]),
        2 => Dict("y" => [7 17.; 9 19.], "y_pad" => [1 11 16; 3 13 18; 5 15 20.]))
    meanpool_answer_dict: 1 => "y" => [1.5, 3.5], "y_nostride" => [1.5, 2.5, 3.5, 4.5], "y_pad" => [0.5, 2.5, 4.5]
    pdims = PoolDims(x, 2);            @test ddims(pool(x, pdims)) ≈ y
    pdims = PoolDims(x, 2; stride=1);  @test ddims(pool(x, pdims)) ≈ y_nostride
    pdims = PoolDims(x, 2; padding=1); @test ddims(pool(x, pdims)) ≈ y_pad
    """,
)
def case_pool_known_answers():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    close(N.maxpool(x, (2,))[:, 0, 0], [2, 4])
    close(N.maxpool(x, (2,), stride=1)[:, 0, 0], [2, 3, 4, 5])
    close(N.maxpool(x, (2,), pad=1)[:, 0, 0], [1, 3, 5])
    close(N.meanpool(x, (2,))[:, 0, 0], [1.5, 3.5])
    close(N.meanpool(x, (2,), stride=1)[:, 0, 0], [1.5, 2.5, 3.5, 4.5])
    close(N.meanpool(x, (2,), pad=1)[:, 0, 0], [0.5, 2.5, 4.5])
    x = jl(range(1, 21), (5, 4, 1, 1), np.float32)
    close(N.maxpool(x, (2, 2))[:, :, 0, 0], rows([7, 17], [9, 19]))
    close(N.maxpool(x, (2, 2), pad=1)[:, :, 0, 0], rows([1, 11, 16], [3, 13, 18], [5, 15, 20]))
    equal(N.maxpool(x, N.PoolDims(x, 2, padding=1)), N.maxpool(x, (2, 2), pad=1))
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    for pool in (N.maxpool, N.meanpool):
        equal(pool(x, N.PoolDims(x, 2)), pool(x, (2,)))
        equal(pool(x, N.PoolDims(x, 2, stride=1)), pool(x, (2,), stride=1))
        equal(pool(x, N.PoolDims(x, 2, padding=1)), pool(x, (2,), pad=1))


@case(
    names=("lpnormpool",),
    source="NNlib.jl test/pooling.jl",
    julia="""
    lpnormpool_answer_dict = Dict(
        1 => Dict(
            "y"           => [2.019312856150994, 4.221163518110637],
            "y_nostride"  => [2.080083823051904, 3.2710663101885897, 4.497941445275415, 5.738793548317167],
            "y_pad"       => [1.0, 3.605551275463989, 6.4031242374328485],
            "p"           => 4.5, "p_nostride"  => 3.0, "p_pad"       => 2.0),
    x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1)
    pdims = PoolDims(x, 2);            y_hat = pool(x, pdims; p=p);  @test ddims(y_hat) ≈ y atol = 1e-3
    pdims = PoolDims(x, 2; stride=1);  y_hat = pool(x, pdims; p=p_nostride)
    pdims = PoolDims(x, 2; padding=1); y_hat = pool(x, pdims; p=p_pad)
    """,
)
def case_lpnormpool():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    close(N.lpnormpool(x, 4.5, (2,))[:, 0, 0], [2.019312856150994, 4.221163518110637], atol=1e-3)
    close(N.lpnormpool(x, 3.0, (2,), stride=1)[:, 0, 0], [2.080083823051904, 3.2710663101885897, 4.497941445275415, 5.738793548317167],
          atol=1e-3)
    close(N.lpnormpool(x, 2.0, (2,), pad=1)[:, 0, 0], [1.0, 3.605551275463989, 6.4031242374328485], atol=1e-3)
    close(N.lpnormpool(x, N.PoolDims(x, 2, padding=1), p=2.0)[:, 0, 0], [1.0, 3.605551275463989, 6.4031242374328485], atol=1e-3)


@case(
    names=("ConvDims", "DenseConvDims", "DepthwiseConvDims"),
    source=CONV,
    julia="""
    for T in (DenseConvDims, DepthwiseConvDims)
        x = randn(5,4,3,2)
        w = T == DenseConvDims ? randn(1,2,3,4) : randn(1,2,4,3)
        cdims = T(x, w)
        @test input_size(cdims) == size(x)[1:2]
        @test kernel_size(cdims) == size(w)[1:2]
        @test channels_in(cdims) == size(x, 3)
        @test stride(cdims) == (1,1)
        @test dilation(cdims) == (1,1)
        @test padding(cdims) == (0,0,0,0)
        @test flipkernel(cdims) == false
        @test output_size(cdims) == (5,3)
        # DenseConvDims: @test channels_out(cdims) == size(w, 4)
        # DepthwiseConvDims: @test channel_multiplier(cdims) == size(w, 3); @test channels_out(cdims) == size(w,3)*size(w,4)
        cdims = T(x, w; stride=2, dilation=2, padding=3, flipkernel=true)
        @test stride(cdims) == (2,2); @test dilation(cdims) == (2,2); @test padding(cdims) == (3,3,3,3)
        @test flipkernel(cdims) == true; @test output_size(cdims) == (6,4)
        cdims = T(x, w; stride=(1, 2), dilation=(1, 2), padding=(0,1))
        @test stride(cdims) == (1,2); @test dilation(cdims) == (1,2); @test padding(cdims) == (0,0,1,1)
        @test output_size(cdims) == (5,2)
        cdims = T(x, w; padding=(1,2,3,4))
        @test padding(cdims) == (1,2,3,4); @test output_size(cdims) == (8,10)
        @test_throws DimensionMismatch T(x, w; stride=(1,))
        @test_throws DimensionMismatch T(x, w; stride=(1, 1, 1))
        @test_throws DimensionMismatch T(x, w; padding=(1, 1, 1))
        @test_throws DimensionMismatch T(x, w; padding=(1, 1, 1, 1, 1))
        @test_throws DimensionMismatch T(x, w; dilation=(1,))
        @test_throws DimensionMismatch T(x, w; dilation=(1, 1, 1))
        @test_throws DimensionMismatch T(x, w; dilation=(1, 5))
        # Channel mismatch: DenseConvDims: T(x, w[:,:,1:1,:]); DepthwiseConvDims: T(x, w[:,:,:,1:1])
    end
    """,
)
def case_convdims():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 3, 2))
    for T, w in ((N.DenseConvDims, rng.standard_normal((1, 2, 3, 4))), (N.DepthwiseConvDims, rng.standard_normal((1, 2, 4, 3)))):
        c = T(x, w)
        assert c.input_size == x.shape[:2] and c.kernel_size == w.shape[:2] and c.channels_in == 3
        assert (c.stride, c.dilation, c.padding, c.flipkernel, c.output_size) == ((1, 1), (1, 1), (0, 0, 0, 0), False, (5, 3))
        if T is N.DenseConvDims:
            assert c.channels_out == w.shape[3]
        else:
            assert c.channel_multiplier == w.shape[2] and c.channels_out == w.shape[2] * w.shape[3]
        c = T(x, w, stride=2, dilation=2, padding=3, flipkernel=True)
        assert (c.stride, c.dilation, c.padding, c.flipkernel, c.output_size) == ((2, 2), (2, 2), (3, 3, 3, 3), True, (6, 4))
        c = T(x, w, stride=(1, 2), dilation=(1, 2), padding=(0, 1))
        assert (c.stride, c.dilation, c.padding, c.output_size) == ((1, 2), (1, 2), (0, 0, 1, 1), (5, 2))
        c = T(x, w, padding=(1, 2, 3, 4))
        assert (c.padding, c.output_size) == ((1, 2, 3, 4), (8, 10))
        for kw in (dict(stride=(1,)), dict(stride=(1, 1, 1)), dict(padding=(1, 1, 1)), dict(padding=(1, 1, 1, 1, 1)),
                   dict(dilation=(1,)), dict(dilation=(1, 1, 1)), dict(dilation=(1, 5))):
            raises(DimensionMismatch, lambda kw=kw, T=T, w=w: T(x, w, **kw))
        bad = w[:, :, :1, :] if T is N.DenseConvDims else w[:, :, :, :1]
        raises(DimensionMismatch, lambda T=T, bad=bad: T(x, bad))
    # sizes work as well as arrays, and the printout is NNlib's
    c = N.DenseConvDims((5, 4, 3, 2), (1, 2, 3, 4))
    assert c == N.DenseConvDims(x, rng.standard_normal((1, 2, 3, 4))) and hash(c) == hash(N.DenseConvDims(x, np.ones((1, 2, 3, 4))))
    assert repr(c) == ("DenseConvDims: (5, 4, 3) * (1, 2) -> (5, 3, 4), stride: (1, 1), pad: (0, 0, 0, 0), "
                       "dil: (1, 1), flip: false, groups: 1")


@case(
    names=("PoolDims", "maxpool", "∇maxpool", "meanpool"),
    source="NNlib.jl test/pooling.jl",
    julia="""
    @testset "Issue #133" begin
        x = reshape([(1.:9.)...], 3, 3, 1, 1)
        pdims = PoolDims(size(x), (2, 2), padding=(1, 1), stride=(2, 2))
        y = maxpool(x, pdims)
        dy = y .* 0 .+ 1
        dx = ∇maxpool(dy, y, x, pdims)
        @test dx[:,:,1,1] == [1.0 0.0 1.0; 0.0 0.0 0.0; 1.0 0.0 1.0]
    end
    # issue 210
    x, k = rand(Float32, 5, 2, 1, 3), (2, 1)
    pdims1 = NNlib.PoolDims(x, k, padding=1, stride=1)
    pdims2 = NNlib.PoolDims(x, k, padding=(1, 0, 0, 0), stride=1)
    @test maxpool(x, pdims1) isa Array{Float32,4}
    @test maxpool(x, pdims2) isa Array{Float32,4}
    # issue #229
    x = ones(Float32, 4, 4, 1, 1) .* -1
    pool = meanpool(x, PoolDims(x, 2, padding=1))
    valid = reshape([-0.25, -0.5, -0.25, -0.5, -1.0, -0.5, -0.25, -0.5, -0.25], (3, 3, 1, 1))
    @test all(pool .== valid)
    """,
)
def case_pooldims():
    x = jl(np.arange(1.0, 10.0), (3, 3, 1, 1))
    pdims = N.PoolDims(x.shape, (2, 2), padding=(1, 1), stride=(2, 2))
    assert pdims.output_size == (2, 2) and pdims.channels_out == 1
    y = N.maxpool(x, pdims)
    equal(N.grad_maxpool(y * 0 + 1, y, x, pdims)[:, :, 0, 0], rows([1, 0, 1], [0, 0, 0], [1, 0, 1]))
    x = np.random.default_rng(0).random((5, 2, 1, 3), dtype=np.float32)
    for pd in (N.PoolDims(x, (2, 1), padding=1, stride=1), N.PoolDims(x, (2, 1), padding=(1, 0, 0, 0), stride=1)):
        out = N.maxpool(x, pd)
        assert out.dtype == jnp.float32 and out.shape == (*pd.output_size, 1, 3)
    x = -np.ones((4, 4, 1, 1), np.float32)
    equal(N.meanpool(x, N.PoolDims(x, 2, padding=1))[:, :, 0, 0],
          jl([-0.25, -0.5, -0.25, -0.5, -1.0, -0.5, -0.25, -0.5, -0.25], (3, 3)))


# NNlib.jl test/pooling.jl `maxpool_answer_nature` (issue #205, obtained with FiniteDifferences): rank 1 and 2
X5 = [0.0299635, 0.233456, 0.596161, 0.161514, 0.0094027]
X55 = rows([0.0299635, 0.233456, 0.596161, 0.161514, 0.0094027], [0.389984, 0.235158, 0.579525, 0.301893, 0.561358],
           [0.0830242, 0.483759, 0.914904, 0.253871, 0.820061], [0.425287, 0.53451, 0.0405225, 0.729861, 0.403925],
           [0.473724, 0.571418, 0.558427, 0.552183, 0.561624])
T, H = 0.333333333, 0.666666666
POOL_NATURE = {  # (k, stride, pad) -> (x, dx_maxpool, dx_meanpool)
    ((2,), 1, 0): (X5, [0, 1, 2, 1, 0], [0.5, 1, 1, 1, 0.5]),
    ((2,), 1, 1): (X5, [1, 1, 2, 1, 1], [1, 1, 1, 1, 1]),
    ((3,), 1, 1): (X5, [0, 1, 3, 1, 0], [H, 1, 1, 1, H]),
    ((3,), 2, 1): (X5, [0, 1, 1, 1, 0], [T, H, T, H, T]),
    ((2, 2), 1, 0): (X55, rows([0, 0, 2, 0, 0], [1, 0, 0, 0, 1], [0, 1, 4, 0, 2], [0, 1, 0, 2, 0], [0, 2, 0, 0, 0]),
                     rows(*[[0.25, 0.5, 0.5, 0.5, 0.25]] + [[0.5, 1, 1, 1, 0.5]] * 3 + [[0.25, 0.5, 0.5, 0.5, 0.25]])),
    ((2, 2), 1, 1): (X55, rows([1, 1, 4, 1, 1], [3, 0, 0, 0, 2], [0, 1, 4, 0, 4], [1, 1, 0, 2, 0], [2, 4, 1, 0, 3]),
                     np.ones((5, 5))),
    ((3, 3), 1, 1): (X55, rows([0, 0, 3, 0, 0], [1, 0, 0, 0, 1], [0, 1, 9, 0, 3], [0, 1, 0, 3, 0], [0, 3, 0, 0, 0]),
                     rows(*[[0.444444, H, H, H, 0.444444]] + [[H, 1, 1, 1, H]] * 3 + [[0.444444, H, H, H, 0.444444]])),
    ((3, 3), 2, 1): (X55, rows([0, 0, 1, 0, 0], [1, 0, 0, 0, 1], [0, 0, 1, 0, 1], [0, 1, 0, 2, 0], [0, 1, 0, 0, 0]),
                     rows(*[[0.111111, 0.222222, 0.111111, 0.222222, 0.111111], [0.222222, 0.444444, 0.222222, 0.444444, 0.222222]] * 2
                          + [[0.111111, 0.222222, 0.111111, 0.222222, 0.111111]])),
}


@case(
    names=("PoolDims", "maxpool", "meanpool", "∇maxpool", "∇meanpool"),
    source="NNlib.jl test/pooling.jl",
    julia="""
    @testset "more maxpool and meanpool tests" begin
        # issue #205
        function check(config, T)
            pdims = PoolDims(config.x, config.size; stride=config.stride, padding=config.pad)
            x = T.(config.x)
            y_maxpool = NNlib.maxpool(x, pdims)
            y_meanpool = NNlib.meanpool(x, pdims)
            dy = ones(T, size(y_maxpool)...) # size(y_maxpool) == size(y_meanpool)
            @test isapprox(config.dx_maxpool, NNlib.∇maxpool(dy, y_maxpool, x, pdims), rtol=1e-5)
            @test isapprox(config.dx_meanpool, NNlib.∇meanpool(dy, y_meanpool, x, pdims), rtol=1e-5)
        end
        for (rank_name, config_dict) in maxpool_answer_nature, (setting_name, config) in config_dict, T in (Float32, Float64)
            check(config, T)
        end
    end
    # "rank1" "k2s1p0": x = [0.0299635, 0.233456, 0.596161, 0.161514, 0.0094027]
    #   dx_maxpool = [0.0, 1.0, 2.0, 1.0, 0.0], dx_meanpool = [0.5, 1.0, 1.0, 1.0, 0.5]  (and k2s1p1, k3s1p1, k3s2p1,
    #   and the same four settings in rank 2 on a 5×5 x; the values are in compat/cases_nnlib.py POOL_NATURE)
    """,
)
def case_pool_answer_nature():
    for (k, stride, pad), (x, dx_max, dx_mean) in POOL_NATURE.items():
        x = np.asarray(x, np.float32).reshape((*np.shape(x), 1, 1))
        pdims = N.PoolDims(x, k, stride=stride, padding=pad)
        y_max, y_mean = N.maxpool(x, pdims), N.meanpool(x, pdims)
        dy = np.ones(y_max.shape, np.float32)
        close(N.grad_maxpool(dy, y_max, x, pdims)[..., 0, 0], dx_max, rtol=1e-5)
        close(N.grad_meanpool(dy, y_mean, x, pdims)[..., 0, 0], dx_mean, rtol=1e-5)


PAD = "NNlib.jl test/padding.jl"
R9 = jl(range(1, 10), (3, 3), np.int64)


@case(
    names=("pad_constant", "pad_zeros"),
    source=PAD,
    julia="""
    x = rand(2, 2, 2)
    y = pad_constant(x, (3, 2, 4))
    @test size(y) == (8, 6, 10)
    @test y[4:5, 3:4, 5:6] ≈ x
    y[4:5, 3:4, 5:6] .= 0
    @test all(y .== 0)
    @test pad_constant(x, (3, 2, 4)) ≈ pad_zeros(x, (3, 2, 4))
    @test pad_zeros(x, 2) ≈ pad_zeros(x, (2,2,2))
    y = pad_constant(x, (3, 2, 4, 5), 1.2, dims = (1,3))
    @test size(y) == (7, 2, 11)
    @test y[4:5, 1:2, 5:6] ≈ x
    @test size(pad_constant(x, 1, dims = 1)) == (4,2,2)
    @test all(pad_zeros(randn(2), (1, 2))[[1, 4, 5]] .== 0)
    """,
)
def case_pad_constant():
    x = np.asarray(fluxjax.rand32(2, 2, 2)) + 0.5
    y = np.array(N.pad_constant(x, (3, 2, 4)))
    assert y.shape == (8, 6, 10)
    close(y[3:5, 2:4, 4:6], x)
    y[3:5, 2:4, 4:6] = 0
    assert np.all(y == 0)
    close(N.pad_constant(x, (3, 2, 4)), N.pad_zeros(x, (3, 2, 4)))
    close(N.pad_zeros(x, 2), N.pad_zeros(x, (2, 2, 2)))
    y = N.pad_constant(x, (3, 2, 4, 5), 1.2, dims=(0, 2))
    assert y.shape == (7, 2, 11)
    close(y[3:5, 0:2, 4:6], x)
    assert N.pad_constant(x, 1, dims=0).shape == (4, 2, 2)
    assert np.all(np.asarray(N.pad_zeros(np.float32([0.3, -0.7]), (1, 2)))[[0, 3, 4]] == 0)


@case(
    names=("pad_repeat",),
    source=PAD,
    julia="""
    @test pad_repeat(reshape(1:9, 3, 3), (1,2)) ==
        [1  4  7
         1  4  7
         2  5  8
         3  6  9
         3  6  9
         3  6  9]
    @test pad_repeat(reshape(1:9, 3, 3), (2,2), dims=2) ==
        [1  1  1  4  7  7  7
         2  2  2  5  8  8  8
         3  3  3  6  9  9  9]
    """,
)
def case_pad_repeat():
    equal(N.pad_repeat(R9, (1, 2)), rows([1, 4, 7], [1, 4, 7], [2, 5, 8], [3, 6, 9], [3, 6, 9], [3, 6, 9], dtype=np.int64))
    equal(N.pad_repeat(R9, (2, 2), dims=1), rows([1, 1, 1, 4, 7, 7, 7], [2, 2, 2, 5, 8, 8, 8], [3, 3, 3, 6, 9, 9, 9], dtype=np.int64))


@case(
    names=("pad_reflect",),
    source=PAD,
    julia="""
    y = pad_reflect(reshape(1:9, 3, 3), (2,2), dims=2)
    @test y == [7  4  1  4  7  4  1
                8  5  2  5  8  5  2
                9  6  3  6  9  6  3]
    y = pad_reflect(reshape(1:9, 3, 3), (2,2,2,2))
    @test y == [9  6  3  6  9  6  3
                8  5  2  5  8  5  2
                7  4  1  4  7  4  1
                8  5  2  5  8  5  2
                9  6  3  6  9  6  3
                8  5  2  5  8  5  2
                7  4  1  4  7  4  1]
    """,
)
def case_pad_reflect():
    equal(N.pad_reflect(R9, (2, 2), dims=1), rows([7, 4, 1, 4, 7, 4, 1], [8, 5, 2, 5, 8, 5, 2], [9, 6, 3, 6, 9, 6, 3], dtype=np.int64))
    a, b, c = [9, 6, 3, 6, 9, 6, 3], [8, 5, 2, 5, 8, 5, 2], [7, 4, 1, 4, 7, 4, 1]
    equal(N.pad_reflect(R9, (2, 2, 2, 2)), rows(a, b, c, b, a, b, c, dtype=np.int64))


@case(
    names=("pad_symmetric",),
    source=PAD,
    julia="""
    y = pad_symmetric(reshape(1:9, 3, 3), (2,2), dims=2)
    @test y == [4  1  1  4  7  7  4
                5  2  2  5  8  8  5
                6  3  3  6  9  9  6]
    x = reshape(1:9, 3, 3, 1, 1)
    @test NNlib.pad_symmetric(x, (1, 0, 1, 0); dims=1:2) == [
        1 1 4 7;
        1 1 4 7;
        2 2 5 8;
        3 3 6 9;;;;]
    """,
)
def case_pad_symmetric():
    equal(N.pad_symmetric(R9, (2, 2), dims=1), rows([4, 1, 1, 4, 7, 7, 4], [5, 2, 2, 5, 8, 8, 5], [6, 3, 3, 6, 9, 9, 6], dtype=np.int64))
    y = N.pad_symmetric(R9.reshape(3, 3, 1, 1), (1, 0, 1, 0), dims=(0, 1))
    equal(y[:, :, 0, 0], rows([1, 1, 4, 7], [1, 1, 4, 7], [2, 2, 5, 8], [3, 3, 6, 9], dtype=np.int64))


@case(
    names=("pad_circular",),
    source=PAD,
    julia="""
    y = pad_circular(reshape(1:9, 3, 3), (2,2), dims=2)
    @test y == [4  7  1  4  7  1  4
                5  8  2  5  8  2  5
                6  9  3  6  9  3  6]
    y = pad_circular(reshape(1:9, 3, 3), (2,2,2,2))
    @test y == [5  8  2  5  8  2  5
                6  9  3  6  9  3  6
                4  7  1  4  7  1  4
                5  8  2  5  8  2  5
                6  9  3  6  9  3  6
                4  7  1  4  7  1  4
                5  8  2  5  8  2  5]
    """,
)
def case_pad_circular():
    equal(N.pad_circular(R9, (2, 2), dims=1), rows([4, 7, 1, 4, 7, 1, 4], [5, 8, 2, 5, 8, 2, 5], [6, 9, 3, 6, 9, 3, 6], dtype=np.int64))
    a, b, c = [5, 8, 2, 5, 8, 2, 5], [6, 9, 3, 6, 9, 3, 6], [4, 7, 1, 4, 7, 1, 4]
    equal(N.pad_circular(R9, (2, 2, 2, 2)), rows(a, b, c, a, b, c, a, dtype=np.int64))


UPS = "NNlib.jl test/testsuite/upsample.jl"


@case(
    names=("upsample_nearest",),
    source=UPS,
    julia="""
    x = device(reshape(T[1 2; 3 4], (2,2,1,1)))
    @test cpu(upsample_nearest(x, (3,3)))[1,:] == [1,1,1, 2,2,2]
    y = upsample_nearest(x, (2,3))
    @test size(y) == (4,6,1,1)
    y2 = upsample_nearest(x, size=(4,6))
    @test cpu(y) ≈ cpu(y2)
    """,
)
def case_upsample_nearest():
    x = rows([1, 2], [3, 4], dtype=np.float32).reshape(2, 2, 1, 1)
    equal(N.upsample_nearest(x, (3, 3))[0, :, 0, 0], [1, 1, 1, 2, 2, 2])
    y = N.upsample_nearest(x, (2, 3))
    assert y.shape == (4, 6, 1, 1)
    close(N.upsample_nearest(x, size=(4, 6)), y)


@case(
    names=("upsample_linear",),
    source=UPS,
    julia="""
    x = T[1,2,3,4]
    x = hcat(x,x,x)[:,:,:]
    y = collect(1:1//3:4)
    y = hcat(y,y,y)[:,:,:]
    @test y ≈ cpu(upsample_linear(xd, 2.5))
    @test y ≈ cpu(upsample_linear(xd; size=10))
    """,
)
def case_upsample_linear():
    x = np.tile(np.float32([1, 2, 3, 4])[:, None], (1, 3))[:, :, None]
    y = np.tile(np.linspace(1, 4, 10)[:, None], (1, 3))[:, :, None]
    close(N.upsample_linear(x, 2.5), y)
    close(N.upsample_linear(x, size=10), y)


@case(
    names=("upsample_bilinear",),
    source=UPS,
    julia="""
    x = Float32[1 2; 3 4][:,:,:,:]
    x = cat(x,x; dims=3)
    x = cat(x,x; dims=4)
    # this output matches the one of pytorch v1.5.0
    # nn.UpsamplingBilinear2d(scale_factor=(3,2), align_corners=True)
    y_true = Float32[ 1//1  4//3   5//3   2//1;
                      7//5 26//15 31//15 12//5;
                      9//5 32//15 37//15 14//5;
                     11//5 38//15 43//15 16//5;
                     13//5 44//15 49//15 18//5;
                      3//1 10//3  11//3   4//1][:,:,:,:]
    y = upsample_bilinear(xd, (3, 2))
    @test size(y) == size(y_true)
    @test cpu(y) ≈ y_true
    """,
)
def case_upsample_bilinear():
    x = np.broadcast_to(rows([1, 2], [3, 4], dtype=np.float32)[:, :, None, None], (2, 2, 2, 2))
    y_true = rows([1, 4 / 3, 5 / 3, 2], [7 / 5, 26 / 15, 31 / 15, 12 / 5], [9 / 5, 32 / 15, 37 / 15, 14 / 5],
                  [11 / 5, 38 / 15, 43 / 15, 16 / 5], [13 / 5, 44 / 15, 49 / 15, 18 / 5], [3, 10 / 3, 11 / 3, 4])
    y = N.upsample_bilinear(x, (3, 2))
    assert y.shape == (6, 4, 2, 2)
    close(y[:, :, 1, 1], y_true)


@case(
    names=("upsample_trilinear",),
    source=UPS,
    julia="""
    # Layout: WHDCN, where D is depth
    x = ones(T, 3,3,3,1,1)
    x[:,:,1,:,:] .= 1.
    x[:,:,2,:,:] .= 2.
    x[:,:,3,:,:] .= 3.
    y_true = ones(T, 5,5,5,1,1)
    y_true[:,:,1,:,:] .= 1.
    y_true[:,:,2,:,:] .= 1.5
    y_true[:,:,3,:,:] .= 2.
    y_true[:,:,4,:,:] .= 2.5
    y_true[:,:,5,:,:] .= 3.
    y = upsample_trilinear(xd; size=(5,5,5))
    @test size(y) == size(y_true)
    @test collect(y) ≈ collect(y_true)
    """,
)
def case_upsample_trilinear():
    x = np.ones((3, 3, 3, 1, 1), np.float32) * np.float32([1, 2, 3]).reshape(1, 1, 3, 1, 1)
    y_true = np.ones((5, 5, 5, 1, 1)) * np.array([1, 1.5, 2, 2.5, 3]).reshape(1, 1, 5, 1, 1)
    y = N.upsample_trilinear(x, size=(5, 5, 5))
    assert y.shape == y_true.shape
    close(y, y_true)


@case(
    names=("pixel_shuffle",),
    source=UPS,
    julia="""
    x = reshape(1:16, (2, 2, 4, 1))
    y_true = [1  9 3 11
              5 13 7 15
              2 10 4 12
              6 14 8 16][:,:,:,:]
    y = pixel_shuffle(device(x), 2)
    @test size(y) == size(y_true)
    @test y_true == cpu(y)
    """,
)
def case_pixel_shuffle():
    y = N.pixel_shuffle(jl(range(1, 17), (2, 2, 4, 1), np.int64), 2)
    assert y.shape == (4, 4, 1, 1)
    equal(y[:, :, 0, 0], rows([1, 9, 3, 11], [5, 13, 7, 15], [2, 10, 4, 12], [6, 14, 8, 16], dtype=np.int64))


@case(
    names=("batched_mul", "batched_transpose", "batched_adjoint", "⊠"),
    source="NNlib.jl test/batchedmul.jl",
    julia="""
    bmm_test(a,b; transA = false, transB = false) = cat([(transA ? transpose(a[:,:,i]) : a[:,:,i]) * ... for i in 1:size(a,3)]...; dims = 3)
    A = randn(7,5,3); B = randn(TB, 5,7,3); C = randn(7,6,3)
    @test batched_mul(A, B) ≈ bmm_test(A, B)
    @test batched_mul(batched_transpose(A), batched_transpose(B)) ≈ bmm_test(A, B; transA = true, transB = true)
    @test batched_mul(batched_transpose(A), C) ≈ bmm_test(A, C; transA = true)
    @test batched_mul(A, batched_transpose(A)) ≈ bmm_test(A, A; transB = true)
    @test batched_adjoint(batched_adjoint(cA)) == cA
    """,
)
def case_batched_mul():
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((7, 5, 3), (5, 7, 3), (7, 6, 3)))
    bmm = lambda a, b: np.stack([a[:, :, i] @ b[:, :, i] for i in range(a.shape[2])], axis=2)
    T = lambda a: np.transpose(a, (1, 0, 2))
    close(N.batched_mul(A, B), bmm(A, B), rtol=1e-4, atol=1e-5)
    close(N.batched_mul(N.batched_transpose(A), N.batched_transpose(B)), bmm(T(A), T(B)), rtol=1e-4, atol=1e-5)
    close(N.batched_mul(N.batched_transpose(A), C), bmm(T(A), C), rtol=1e-4, atol=1e-5)
    close(N.batched_mul(A, N.batched_transpose(A)), bmm(A, T(A)), rtol=1e-4, atol=1e-5)
    equal(N.batched_adjoint(N.batched_adjoint(A)), A)


@case(
    names=("batched_vec", "batched_mul"),
    source="NNlib.jl test/batchedmul.jl",
    julia="""
    A = randn(7,5,3); M = randn(5,3)   # (in the "batched_mul(A, M)" testset)
    @test batched_mul(A, M) ≈ cat([A[:,:,k] * M for k in 1:3]...; dims=3)
    # batched_vec
    @test batched_vec(A, M) ≈ hcat([A[:,:,k] * M[:,k] for k in 1:3]...)
    """,
)
def case_batched_vec():
    rng = np.random.default_rng(1)
    A, M = rng.standard_normal((7, 5, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    close(N.batched_mul(A, M), np.stack([A[:, :, k] @ M for k in range(3)], axis=2), rtol=1e-4, atol=1e-5)
    close(N.batched_vec(A, M), np.stack([A[:, :, k] @ M[:, k] for k in range(3)], axis=1), rtol=1e-4, atol=1e-5)


@case(
    names=("within_gradient", "gradient"),
    source="NNlib.jl test/utils.jl",
    julia="""
    @test NNlib.within_gradient([1.0]) === false
    @test gradient(x -> NNlib.within_gradient(x) * x, 2.0) == (1.0,)
    """,
)
def case_within_gradient():
    assert fluxjax.within_gradient() is False
    close(fluxjax.gradient(lambda x: float(fluxjax.within_gradient()) * x, 2.0)[0], 1.0)


@case(
    names=("dot_product_attention", "dot_product_attention_scores"),
    source="NNlib.jl test/attention.jl",
    julia="""
    @testset "dot_product_attention_scores" begin
        q = k = reshape([1:24;], 4, 2, 3, 1) ./ 24
        α = dot_product_attention_scores(q, k)
        q2, k2 = reshape.((q, k), 8, 3, 1)
        y, α2 = dot_product_attention(q2, k2, k2; nheads=2)
        @test α ≈ α2
    end
    @testset "specific results" begin
        q = k = v = reshape([1:12;], 4, 3, 1) ./ 12
        y, α = dot_product_attention(q, k, v; nheads=2)
        ytrue = [0.429754, 0.513087, 0.613791, 0.697125, 0.46431, 0.547644, 0.647876, 0.73121, 0.49773, 0.581064, 0.680455, 0.763788]
        ytrue = reshape(ytrue, 4, 3, 1)
        αtrue = [0.313896, 0.332948, 0.353157, 0.264431, 0.328206, 0.407362, 0.219215, 0.31838, 0.462405, 0.288691, 0.331243, 0.380066, 0.241239, 0.323893, 0.434868, 0.198438, 0.311761, 0.489801]
        αtrue = reshape(αtrue, 3, 3, 2, 1)
        @test y ≈ ytrue atol=1e-5
        @test α ≈ αtrue atol=1e-5
    end
    """,
)
def case_dot_product_attention():
    from fluxjax.nnlib.attention import dot_product_attention, dot_product_attention_scores

    q = jl(range(1, 25), (4, 2, 3, 1), np.float32) / 24
    a = jax.jit(dot_product_attention_scores)(q, q)  # under jit: one compilation per call
    q2 = q.reshape((8, 3, 1), order="F")
    dpa = jax.jit(lambda q: dot_product_attention(q, q, q, nheads=2))
    _, a2 = dpa(q2)
    close(a, a2, rtol=1e-5)
    q = jl(range(1, 13), (4, 3, 1), np.float32) / 12
    y, a = dpa(q)
    ytrue = [0.429754, 0.513087, 0.613791, 0.697125, 0.46431, 0.547644, 0.647876, 0.73121, 0.49773, 0.581064, 0.680455, 0.763788]
    atrue = [0.313896, 0.332948, 0.353157, 0.264431, 0.328206, 0.407362, 0.219215, 0.31838, 0.462405, 0.288691, 0.331243,
             0.380066, 0.241239, 0.323893, 0.434868, 0.198438, 0.311761, 0.489801]
    close(y, jl(ytrue, (4, 3, 1)), rtol=0, atol=1e-5)
    close(a, jl(atrue, (3, 3, 2, 1)), rtol=0, atol=1e-5)


@case(
    names=("make_causal_mask", "dot_product_attention_scores"),
    source="NNlib.jl test/attention.jl",
    julia="""
    @testset "causal" begin
        x = rand(4, 2, 3, 1)
        mask = make_causal_mask(x, dims=3)
        α = dot_product_attention_scores(x, x; mask)
        @test all((α[:,:,1,1].> 0) .== mask)
        @test all((α[:,:,2,1].> 0) .== mask)
    end
    """,
)
def case_make_causal_mask():
    from fluxjax.nnlib.attention import dot_product_attention_scores, make_causal_mask

    x = np.asarray(fluxjax.rand32(4, 2, 3, 1))
    mask = np.asarray(make_causal_mask(x, dims=2))
    a = np.asarray(dot_product_attention_scores(x, x, mask=mask))
    equal(a[:, :, 0, 0] > 0, mask)
    equal(a[:, :, 1, 0] > 0, mask)


# ----------------------------------------------------------------------------------------------
# gather / scatter (NNlib.jl src/gather.jl, src/scatter.jl docstrings and test/testsuite/gather.jl, scatter.jl).
# NNlib's 1-based indices are 0-based here: every index below is the Julia one minus 1.

GATHER = "NNlib.jl test/testsuite/gather.jl"
SCATTER = "NNlib.jl test/testsuite/scatter.jl"


def _fd_check(f, x, eps=1e-6, rtol=1e-6, atol=1e-8):
    """NNlib's `gradtest`: the AD gradient of `sum(w .* f(x))` (random `w`) against central finite differences, in Float64."""
    with jax.enable_x64(True):
        x = np.asarray(x, np.float64)
        w = np.random.default_rng(0).normal(size=np.shape(f(jnp.asarray(x))))

        def loss(v):
            return jnp.sum(w * f(v))

        g = np.asarray(jax.grad(loss)(jnp.asarray(x)))
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[i] += eps
            xm[i] -= eps
            num[i] = (float(loss(jnp.asarray(xp))) - float(loss(jnp.asarray(xm)))) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=rtol, atol=atol)


@case(
    names=("gather",),
    source="NNlib.jl src/gather.jl (gather docstrings)",
    julia="""
    julia> NNlib.gather([1,20,300,4000], [2,4,2])
       20
     4000
       20
    julia> NNlib.gather([1 2 3; 4 5 6], [1,3,1,3,1])
     1  3  1  3  1
     4  6  4  6  4
    julia> src = reshape([1:15;], 3, 5)
    julia> NNlib.gather(src, [1, 2], [2, 4])
      4
     11
    """,
)
def case_gather_docstring():
    equal(N.gather(np.array([1, 20, 300, 4000]), [1, 3, 1]), [20, 4000, 20])
    equal(N.gather(rows([1, 2, 3], [4, 5, 6], dtype=np.int32), [0, 2, 0, 2, 0]), rows([1, 3, 1, 3, 1], [4, 6, 4, 6, 4]))
    src = jl(range(1, 16), (3, 5), np.int32)
    equal(N.gather(src, [0, 1], [1, 3]), [4, 11])


@case(
    names=("gather",),
    source=GATHER,
    julia="""
    @testset "gather scalar index" begin
        src = T[3, 4, 5, 6, 7];  index = [1 2 3 4; 4 2 1 3; 3 5 5 3]
        output = T[3 4 5 6; 6 4 3 5; 5 7 7 5]
        y = gather(src, index);  @test y isa Array{T,2};  @test size(y) == size(index);  @test y == output
        index2 = [1 2 3 4; 4 2 1 3; 3 6 5 3];  @test_throws BoundsError gather!(T.(zero(index)), src, index2)
        ## 2d src, 2d index of ints -> 3d output
        src = T[3 5 7; 4 6 8];  index = [1 2 3; 2 2 1; 3 1 3]
        output[:,:,1] = [3 5 7; 4 6 8];  output[:,:,2] = [5 5 3; 6 6 4];  output[:,:,3] = [7 3 7; 8 4 8]
        @test size(y) == (size(src)[1:Nsrc-M]..., size(index)...);  @test y == output
    end
    @testset "gather tuple index" begin
        src = T[3 5 7; 4 6 8];  index = [(1,1), (1,2), (1,3), (2,1), (2,2), (2,3)]
        @test gather(src, index) == T[3, 5, 7, 4, 6, 8]
        src = rand(T, 2, 3, 3);  index = [(rand(1:3), rand(1:3)) for i=1:6, j=1:6]
        @test size(gather(src, index)) == (2, 6, 6)
    end
    @testset "gather(src, IJK...)" begin
        x = reshape([1:15;], 3, 5)
        @test gather(x, [1,2], [2,4]) == [4, 11]
        @test gather(x, [1, 2]) == [1 4; 2 5; 3 6]
    end
    """,
)
def case_gather_testsuite():
    T = np.float32
    src = np.array([3, 4, 5, 6, 7], T)
    index = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
    y = N.gather(src, index)
    assert y.dtype == T and y.shape == index.shape
    equal(y, rows([3, 4, 5, 6], [6, 4, 3, 5], [5, 7, 7, 5], dtype=T))
    equal(N.gather(src, index[:, :, None]), rows([3, 4, 5, 6], [6, 4, 3, 5], [5, 7, 7, 5], dtype=T)[:, :, None])
    raises(IndexError, N.gather, src, rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 6, 5, 3], dtype=np.int64) - 1)

    src = rows([3, 5, 7], [4, 6, 8], dtype=T)
    index = rows([1, 2, 3], [2, 2, 1], [3, 1, 3], dtype=np.int64) - 1
    out = np.zeros((2, 3, 3), T)
    out[:, :, 0] = rows([3, 5, 7], [4, 6, 8])
    out[:, :, 1] = rows([5, 5, 3], [6, 6, 4])
    out[:, :, 2] = rows([7, 3, 7], [8, 4, 8])
    equal(N.gather(src, index), out)

    equal(N.gather(src, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]), np.array([3, 5, 7, 4, 6, 8], T))
    src3 = np.random.rand(2, 3, 3).astype(T)
    tup = [[(np.random.randint(3), np.random.randint(3)) for _ in range(6)] for _ in range(6)]
    y = N.gather(src3, tup)
    assert y.shape == (2, 6, 6)
    equal(y[:, 4, 2], src3[:, tup[4][2][0], tup[4][2][1]])

    x = jl(range(1, 16), (3, 5), np.int32)
    equal(N.gather(x, [0, 1], [1, 3]), [4, 11])
    equal(N.gather(x, ([0, 1], [1, 3])), [4, 11])
    equal(N.gather(x, [0, 1]), rows([1, 4], [2, 5], [3, 6]))


@case(
    names=("gather", "gradient"),
    source=GATHER,
    julia="""
    @testset "gather gradient for scalar index" begin
        src = Float64[3, 4, 5, 6, 7];  idx = [1 2 3 4; 4 2 1 3; 3 5 5 3]
        gradtest(xs -> gather(xs, idx), src)
    end
    @testset "gather gradient for tuple index" begin
        src = Float64[3 5 7; 4 6 8];  idx = [(1,1), (1,2), (1,3), (2,1), (2,2), (2,3)]
        gradtest(xs -> gather(xs, idx), src)
    end
    """,
)
def case_gather_gradient():
    idx = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
    _fd_check(lambda xs: N.gather(xs, idx), [3, 4, 5, 6, 7.0])
    tup = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    _fd_check(lambda xs: N.gather(xs, tup), rows([3, 5, 7], [4, 6, 8]))
    # the pullback is NNlib's ∇gather_src = scatter(+, Δ, idx): repeated indices accumulate
    g = fluxjax.gradient(lambda xs: jnp.sum(N.gather(xs, idx)), jnp.asarray([3, 4, 5, 6, 7.0]))[0]
    equal(g, [2, 2, 4, 2, 2.0])


@case(
    names=("scatter",),
    source="NNlib.jl src/scatter.jl (scatter docstring)",
    julia="""
    julia> NNlib.scatter(+, [10,100,1000], [3,1,2])
      100
     1000
       10
    julia> NNlib.scatter(+, [1 2 3 4; 5 6 7 8], [2,1,1,5])
      5  1  0  0  4
     13  5  0  0  8
    julia> NNlib.scatter(*, [10,200,3000], [1,4,2]; init = 10, dstsize = 6)
       100
     30000
        10
      2000
        10
        10
    """,
)
def case_scatter_docstring():
    equal(N.scatter("+", np.array([10, 100, 1000]), [2, 0, 1]), [100, 1000, 10])
    equal(N.scatter(operator.add, rows([1, 2, 3, 4], [5, 6, 7, 8], dtype=np.int32), [1, 0, 0, 4]),
          rows([5, 1, 0, 0, 4], [13, 5, 0, 0, 8]))
    equal(N.scatter(operator.mul, np.array([10, 200, 3000]), [0, 3, 1], init=10, dstsize=6), [100, 30000, 10, 2000, 10, 10])


# test/testsuite/scatter.jl: srcs[(dims, false)] and res[(op, dims, false)], the non-mutating `scatter(op, T.(src), idx)`
_SC_IDX = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
_SC_SRC = {0: np.ones((3, 1)) * np.arange(1, 5)[None, :]}
_SC_SRC[1] = np.array([1, 2]).reshape(2, 1, 1) * _SC_SRC[0][None]
_SC_RES = {
    ("+", 0): [4, 4, 12, 5, 5], ("+", 1): rows([4, 4, 12, 5, 5], [8, 8, 24, 10, 10]),
    ("-", 0): [-4, -4, -12, -5, -5], ("-", 1): rows([-4, -4, -12, -5, -5], [-8, -8, -24, -10, -10]),
    ("max", 0): [3, 2, 4, 4, 3], ("max", 1): rows([3, 2, 4, 4, 3], [6, 4, 8, 8, 6]),
    ("min", 0): [1, 2, 1, 1, 2], ("min", 1): rows([1, 2, 1, 1, 2], [2, 4, 2, 2, 4]),
    ("*", 0): [3, 4, 48, 4, 6], ("*", 1): rows([3, 4, 48, 4, 6], [12, 16, 768, 16, 24]),
    ("/", 0): [1 / 3, 1 / 4, 1 / 48, 1 / 4, 1 / 6], ("/", 1): rows([1 / 3, 1 / 4, 1 / 48, 1 / 4, 1 / 6],
                                                                 [1 / 12, 1 / 16, 1 / 768, 1 / 16, 1 / 24]),
    ("mean", 0): [2, 2, 3, 2.5, 2.5], ("mean", 1): rows([2, 2, 3, 2.5, 2.5], [4, 4, 6, 5, 5]),
}
_SC_OPS = {"+": operator.add, "-": operator.sub, "max": max, "min": min, "*": operator.mul, "/": operator.truediv,
           "mean": statistics.mean}


@case(
    names=("scatter",),
    source=SCATTER,
    julia="""
    srcs = Dict((0, false) => ones(Int, 3) * collect(1:4)',
                (1, false) => [1, 2] .* reshape(ones(Int, 3) * collect(1:4)', 1,3,4))
    idxs = Dict(:int => [1 2 3 4; 4 2 1 3; 3 5 5 3],
                :tup => [(1,) (2,) (3,) (4,); (4,) (2,) (1,) (3,); (3,) (5,) (5,) (3,)])
    res = Dict((+, 0, false) => [4, 4, 12, 5, 5],     (+, 1, false) => [4 4 12 5 5; 8 8 24 10 10],
               (-, 0, false) => [-4, -4, -12, -5, -5], (max, 0, false) => [3, 2, 4, 4, 3],
               (min, 0, false) => [1, 2, 1, 1, 2],     (*, 1, false) => [3 4 48 4 6; 12 16 768 16 24],
               (/, 0, false) => [1//3, 1//4, 1//48, 1//4, 1//6],  (mean, 0, false) => [2, 2, 3, 2.5, 2.5], ...)
    for T in types, idx = values(idxs), dims = [0, 1]   # (+, -, max, min, *) over Int32, Int64, Float32, ...;
        @test scatter(op, T.(src), idx) == T.(res[(op, dims, false)])   # (/, mean) over Float16, Float32, ...
    end
    """,
)
def case_scatter_ops():
    for (name, dims), want in _SC_RES.items():
        types = (np.float32,) if name in ("/", "mean") else (np.int32, np.float32)
        for T in types:
            src = _SC_SRC[dims].astype(T)
            for idx in (_SC_IDX, [[(int(i),) for i in r] for r in _SC_IDX]):  # :int and :tup (1-tuples)
                for op in (name, _SC_OPS[name]):
                    y = N.scatter(op, src, idx)
                    assert y.dtype == T, (name, y.dtype, T)
                    close(y, want, rtol=1e-6)


@case(
    names=("scatter", "gradient"),
    source=SCATTER,
    julia="""
    @testset "dstsize" begin
        idx = [2, 2, 3, 4, 4];  src = ones(T, 3, 5)
        y = scatter(+, src, idx, dstsize = (3, 6))
        @test eltype(y) == T;  @test size(y) == (3, 6)
        gradtest(x -> scatter(+, x, idx; dstsize=(3, 6)), src)
    end
    @testset "∂src" begin
        for op in (+, -, *, /, mean, max, min), i in (0, 1)
            gradtest(xs -> scatter(op, xs, idx), T.(srcs[(i, false)]); fdm=fdm(op))
    end
    @testset "∂src vector index (#703) - $op" for op in (*, /)
        idx = [3, 1, 2, 2];  src = T[10, 100, 1000, 1]
        gradtest(xs -> scatter(op, xs, idx), src)
    end
    """,
)
def case_scatter_gradient():
    idx = np.array([2, 2, 3, 4, 4]) - 1
    y = N.scatter("+", np.ones((3, 5), np.float32), idx, dstsize=(3, 6))
    assert y.dtype == np.float32 and y.shape == (3, 6)
    _fd_check(lambda x: N.scatter("+", x, idx, dstsize=(3, 6)), np.ones((3, 5)))
    for name in ("+", "-", "*", "/", "mean", "max", "min"):
        for dims in (0, 1):
            # NNlib's srcs[(i, false)] has ties (repeated values into one place); max/min's finite differences
            # are one-sided there (fdm = :forward / :backward), so those two are checked on distinct values
            src = _SC_SRC[dims] + (np.arange(12).reshape(3, 4) / 16 if name in ("max", "min") else 0)
            _fd_check(lambda xs, op=name: N.scatter(op, xs, _SC_IDX), src, rtol=1e-5)
    for name in ("*", "/"):
        _fd_check(lambda xs, op=name: N.scatter(op, xs, np.array([3, 1, 2, 2]) - 1), [10, 100, 1000, 1.0], rtol=1e-5)


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


@case(
    names=("unfold", "fold", "conv", "batched_mul"),
    source="NNlib.jl src/fold.jl (docstrings) and test/testsuite/fold.jl",
    julia="""
    julia> x = reshape([100 2 3 40 5 6 700], 7, 1, 1);  # 1D data, 1 channel, batch of 1
    julia> w = reshape([1 0 -1], 3, 1, 1);  # 1D conv kernel of length 3
    julia> kws = (pad=1, stride=2, flipped=true);  # use same args for conv and unfold
    julia> z = NNlib.unfold(x, size(w); kws...)
    4×3×1 Array{Int64, 3}:
      0  100   2
      2    3  40
     40    5   6
      6  700   0
    julia> y1 = conv(x, w; kws...)         # -2 -38 34 6
    julia> y2 = z ⊠ w                      # -2 -38 34 6
    julia> y = NNlib.unfold(x, (3,1,1))    # 100 2 3; 2 3 40; 3 40 5; 40 5 6; 5 6 700
    julia> z = NNlib.fold(y, size(x), (3,1,1))  # sum of contributions in y. 100 appears once, 40 three times
    100 4 9 120 15 12 700
    julia> divisor = NNlib.fold(NNlib.unfold(ones(size(x)...), (3,1,1)), size(x), (3,1,1))  # 1 2 3 3 3 2 1
    julia> z ./ divisor                    # 100 2 3 40 5 6 700
    @testset "unfold wrapper" begin
        x = device(rand(rng, 16, 16, 3, 10))
        w = device(rand(rng, 5, 5, 3, 2))
        @test size(NNlib.unfold(x, size(w))) == (144, 75, 10)
        @test size(NNlib.unfold(x, size(w); pad=2)) == (256, 75, 10)
        @test size(NNlib.unfold(x, size(w); stride=2)) == (36, 75, 10)
        @test size(NNlib.unfold(x, size(w); dilation=2)) == (64, 75, 10)
    end
    @testset "Inverses: spatial_rank=$spatial_rank" for spatial_rank in (1, 2, 3)
        x = device(rand(rng, repeat([8], spatial_rank)..., 3, 2))
        w = device(rand(rng, repeat([3], spatial_rank)..., 3, 3))
        cdims = DenseConvDims(x, w; padding=1)          # and again with stride=2
        y = NNlib.unfold(x, cdims)
        z = NNlib.fold(y, size(x), cdims)
        divisor = NNlib.fold(NNlib.unfold(o, cdims), size(x), cdims)
        @test isapprox(z ./ divisor, x, rtol=1.0e-7)
    end
    """,
)
def case_unfold_fold():
    x = jnp.asarray([100, 2, 3, 40, 5, 6, 700], jnp.float32).reshape(7, 1, 1)
    w = jnp.asarray([1, 0, -1], jnp.float32).reshape(3, 1, 1)
    kws = dict(pad=1, stride=2, flipped=True)
    z = N.unfold(x, w.shape, **kws)
    equal(z[:, :, 0], rows([0, 100, 2], [2, 3, 40], [40, 5, 6], [6, 700, 0]))
    equal(N.conv(x, w, **kws)[:, 0, 0], [-2, -38, 34, 6])
    equal(N.batched_mul(z, w)[:, 0, 0], [-2, -38, 34, 6])
    y = N.unfold(x, (3, 1, 1))
    equal(y[:, :, 0], rows([100, 2, 3], [2, 3, 40], [3, 40, 5], [40, 5, 6], [5, 6, 700]))
    z = N.fold(y, x.shape, (3, 1, 1))
    equal(z[:, 0, 0], [100, 4, 9, 120, 15, 12, 700])
    divisor = N.fold(N.unfold(jnp.ones(x.shape), (3, 1, 1)), x.shape, (3, 1, 1))
    equal(divisor[:, 0, 0], [1, 2, 3, 3, 3, 2, 1])
    close((z / divisor)[:, 0, 0], [100, 2, 3, 40, 5, 6, 700])

    r = np.random.default_rng(0)
    x = jnp.asarray(r.random((16, 16, 3, 10)), jnp.float32)
    ws = (5, 5, 3, 2)
    assert N.unfold(x, ws).shape == (144, 75, 10) and N.unfold(x, ws, pad=2).shape == (256, 75, 10)
    assert N.unfold(x, ws, stride=2).shape == (36, 75, 10) and N.unfold(x, ws, dilation=2).shape == (64, 75, 10)
    for rank in (1, 2, 3):
        x = jnp.asarray(r.random((8,) * rank + (3, 2)), jnp.float32)
        ws = (3,) * rank + (3, 3)
        for kw in (dict(pad=1), dict(pad=1, stride=2)):
            z = N.fold(N.unfold(x, ws, **kw), x.shape, ws, **kw)
            divisor = N.fold(N.unfold(jnp.ones(x.shape), ws, **kw), x.shape, ws, **kw)
            close(z / divisor, x, rtol=1e-6)


def _isapprox(got, want, rtol=3.5e-4):
    """Julia's `≈` on arrays: `norm(got - want) <= rtol * max(norm(got), norm(want))`."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
    assert np.linalg.norm(g - w) <= rtol * max(np.linalg.norm(g), np.linalg.norm(w)), np.abs(g - w).max()


@case(
    names=("hann_window", "hamming_window", "stft", "istft", "spectrogram"),
    source="NNlib.jl test/testsuite/spectral.jl",
    julia="""
    @testset "Window functions" begin
        for window_fn in (hann_window, hamming_window)
            w = window_fn(10)
            @test length(w) == 10
            @test eltype(w) == Float32
            wp = window_fn(10; periodic=false)
            @test wp[1:5] ≈ reverse(wp[6:10])
            @test window_fn(10; periodic=true) ≈ window_fn(10 + 1; periodic=false)[1:10]
        end
    end
    @testset "STFT" for batch in ((), (3,))
        x = device(ones(Float32, 16, batch...))
        y = stft(x; n_fft=16)
        @test size(y) == (9, 5, batch...)
        @test all(real(cpu(y))[1, :, bd...] .≈ 16)
        xx = istft(y; n_fft=16)
        @test size(xx) == (16, batch...)
        @test cpu(x) ≈ cpu(xx)
        x = device(rand(Float32, 2048, batch...)); y = stft(x; n_fft=1024); xx = istft(y; n_fft=1024)
        @test cpu(x) ≈ cpu(xx)
        x = device(rand(Float32, 1111, batch...)); y = stft(x; n_fft=256)
        xx = istft(y; n_fft=256, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        xx = istft(y; n_fft=256)
        @test length(xx) < length(x)
        @test cpu(x)[[1:s for s in size(xx)]...] ≈ cpu(xx)
        x = device(rand(Float32, 1234, batch...))
        y = stft(x; n_fft=512, normalized=true)
        xx = istft(y; n_fft=512, normalized=true, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        window = device(hann_window(512))
        y = stft(x; n_fft=512, window)
        xx = istft(y; n_fft=512, window, original_length=size(x, 1))
        @test cpu(x) ≈ cpu(xx)
        for hop_length in (32, 33, 255, 256, 511, 512) ... @test cpu(x) ≈ cpu(xx)
        for n_fft in (32, 33, 64, 65, 128, 129, 512) ... @test cpu(x) ≈ cpu(xx)
    end
    @testset "Spectrogram" begin
        x = device(rand(Float32, 1024)); window = device(hann_window(1024))
        y = stft(x; n_fft=1024, hop_length=128, window, center=true, normalized=false)
        spec = spectrogram(x; n_fft=1024, hop_length=128, window, center=true, normalized=false)
        @test abs.(y).^2 ≈ spec
        x = device(ones(Float32, 1024))
        g = Zygote.gradient(x) do x
            sum(spectrogram(x; n_fft=1024, hop_length=128, window, center=true, normalized=false))
        end
        @test !any(isnan.(g[1]))
        x = device(rand(Float32, 1024, 3))       # batched: each column is its own spectrogram
    end
    @testset "Power to dB" begin
        spec = spectrogram(x; pad=0, n_fft=1024, hop_length=128, window)
        @test spec ≈ NNlib.db_to_power(NNlib.power_to_db(spec))
    end
    """,
)
def case_spectral():
    for window_fn in (N.hann_window, N.hamming_window):
        w = window_fn(10)
        assert w.shape == (10,) and w.dtype == jnp.float32
        wp = window_fn(10, periodic=False)
        close(wp[:5], wp[5:][::-1])
        close(window_fn(10, periodic=True), window_fn(11, periodic=False)[:10])
    r = np.random.default_rng(0)
    for batch in ((), (3,)):
        x = jnp.ones((16, *batch), jnp.float32)
        y = N.stft(x, n_fft=16)
        assert y.shape == (9, 5, *batch)
        close(jnp.real(y)[0], np.full((5, *batch), 16.0))
        xx = N.istft(y, n_fft=16)
        assert xx.shape == (16, *batch)
        _isapprox(xx, x)
        x = jnp.asarray(r.random((2048, *batch)), jnp.float32)
        _isapprox(N.istft(N.stft(x, n_fft=1024), n_fft=1024), x)
        x = jnp.asarray(r.random((1111, *batch)), jnp.float32)
        y = N.stft(x, n_fft=256)
        _isapprox(N.istft(y, n_fft=256, original_length=1111), x)
        xx = N.istft(y, n_fft=256)
        assert xx.size < x.size
        _isapprox(xx, x[: xx.shape[0]])
        x = jnp.asarray(r.random((1234, *batch)), jnp.float32)
        y = N.stft(x, n_fft=512, normalized=True)
        _isapprox(N.istft(y, n_fft=512, normalized=True, original_length=1234), x)
        window = N.hann_window(512)
        _isapprox(N.istft(N.stft(x, n_fft=512, window=window), n_fft=512, window=window, original_length=1234), x)
        for hop in (32, 33, 255, 256, 511, 512):
            _isapprox(N.istft(N.stft(x, n_fft=512, hop_length=hop), n_fft=512, hop_length=hop, original_length=1234), x)
        for n_fft in (32, 33, 64, 65, 128, 129, 512):
            _isapprox(N.istft(N.stft(x, n_fft=n_fft), n_fft=n_fft, original_length=1234), x)

    x = jnp.asarray(r.random(1024), jnp.float32)
    window = N.hann_window(1024)
    kw = dict(n_fft=1024, hop_length=128, window=window, center=True, normalized=False)
    _isapprox(jnp.abs(N.stft(x, **kw)) ** 2, N.spectrogram(x, **kw))
    g = jax.grad(lambda x: jnp.sum(N.spectrogram(x, **kw)))(jnp.ones(1024, jnp.float32))
    assert not np.any(np.isnan(g))
    xb = jnp.asarray(r.random((1024, 3)), jnp.float32)
    spec = N.spectrogram(xb, **kw)
    for i in range(3):
        _isapprox(jnp.abs(N.stft(xb[:, i], **kw)) ** 2, spec[:, :, i])
    spec = N.spectrogram(x, pad=0, **kw)
    _isapprox(N.db_to_power(N.power_to_db(spec)), spec)


@case(
    names=("melscale_filterbanks",),
    source="NNlib.jl src/audio/mel.jl (docstring)",
    julia="""
    julia> n_mels = 8;
    julia> fb = melscale_filterbanks(; n_freqs=200, n_mels, sample_rate=16000);
    julia> plot = lineplot(fb[:, 1]);   # each column a triangle: 0 up to (nearly) 1 at its own mel point, back to 0
    mel_points = range(_hz_to_mel(fmin), _hz_to_mel(fmax); length=n_mels + 2)
    _hz_to_mel(freq::T) where T = T(2595) * log10(T(1) + (freq / T(700)))
    """,
)
def case_melscale_filterbanks():
    fb = np.asarray(N.melscale_filterbanks(n_freqs=200, n_mels=8, sample_rate=16000))
    assert fb.shape == (200, 8) and fb.dtype == np.float32
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    points = 700 * (10 ** (np.linspace(mel(0), mel(8000), 10) / 2595) - 1)
    freqs = np.linspace(0, 8000, 200)
    for j in range(8):
        lo, mid, hi = points[j : j + 3]
        close(fb[:, j], np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None), atol=1e-4)
        assert np.all(fb[(freqs <= lo) | (freqs >= hi), j] == 0) and 0.9 < fb[:, j].max() <= 1


@case(
    names=("∇maxpool", "∇meanpool", "∇lpnormpool", "maxpool", "meanpool", "lpnormpool"),
    source="NNlib.jl test/pooling.jl",
    julia="""
    maxpool_answer_dict = Dict(1 => Dict("dx" => [0, 2, 0, 4, 0.], "dx_nostride" => [0, 2, 3, 4, 5.], "dx_pad" => [1, 0, 3, 0, 5.]),
        2 => Dict("dx" => [0 0 0 0; 0 7 0 17; 0 0 0 0; 0 9 0 19; 0 0 0 0.],
                  "dx_nostride" => [0 0 0 0; 0 7 12 17; 0 8 13 18; 0 9 14 19; 0 10 15 20.],
                  "dx_pad" => [1 0 11 16; 0 0 0 0; 3 0 13 18; 0 0 0 0; 5 0 15 20.]), ...)
    meanpool_answer_dict = Dict(1 => Dict("dx" => [0.75, 0.75, 1.75, 1.75, 0.0], "dx_nostride" => [0.75, 2.0, 3.0, 4.0, 2.25],
                                          "dx_pad" => [0.25, 1.25, 1.25, 2.25, 2.25]),
        2 => Dict("dx" => [1.0 1.0 3.5 3.5; 1.0 1.0 3.5 3.5; 1.5 1.5 4.0 4.0; 1.5 1.5 4.0 4.0; 0.0 0.0 0.0 0.0],
                  "dx_nostride" => [1.0 3.25 5.75 3.5; 2.25 7.0 12.0 7.25; 2.75 8.0 13.0 7.75; 3.25 9.0 14.0 8.25; 1.75 4.75 7.25 4.25],
                  "dx_pad" => [0.0625 1.0625 1.0625 1.0; 0.3125 2.5 2.5 2.1875; 0.3125 2.5 2.5 2.1875; 0.5625 3.0 3.0 2.4375; 0.5625 3.0 3.0 2.4375]), ...)
    lpnormpool_answer_dict = Dict(1 => Dict(
        "dx" => [0.17258020254042603, 1.9525221042381296, 1.2774501198988355, 3.496467771732918, 0.0],
        "dx_nostride" => [0.48074985676913606, 3.1458422620080637, 4.752311710531486, 6.345225258061685, 4.356316321455918],
        "dx_pad" => [1.0, 2.0, 3.0, 4.0, 5.0], "p" => 4.5, "p_nostride" => 3.0, "p_pad" => 2.0), ...)
    x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1)
    pdims = PoolDims(x, 2);              y_hat = pool(x, pdims); @test ddims(∇pool(y_hat, y_hat, x, pdims)) == dx
    pdims = PoolDims(x, 2; stride=1);    y_hat = pool(x, pdims); @test ddims(∇pool(y_hat, y_hat, x, pdims)) == dx_nostride
    pdims = PoolDims(x, 2; padding=1);   y_hat = pool(x, pdims); @test ddims(∇pool(y_hat, y_hat, x, pdims)) == dx_pad
    (lpnormpool: the same with p=p, p_nostride, p_pad, and ≈ atol = 1e-3)
    """,
)
def case_pool_gradients():
    answers = {
        "max": {
            (5,): ([0, 2, 0, 4, 0], [0, 2, 3, 4, 5], [1, 0, 3, 0, 5]),
            (5, 4): (rows([0, 0, 0, 0], [0, 7, 0, 17], [0, 0, 0, 0], [0, 9, 0, 19], [0, 0, 0, 0]),
                     rows([0, 0, 0, 0], [0, 7, 12, 17], [0, 8, 13, 18], [0, 9, 14, 19], [0, 10, 15, 20]),
                     rows([1, 0, 11, 16], [0, 0, 0, 0], [3, 0, 13, 18], [0, 0, 0, 0], [5, 0, 15, 20])),
        },
        "mean": {
            (5,): ([0.75, 0.75, 1.75, 1.75, 0.0], [0.75, 2.0, 3.0, 4.0, 2.25], [0.25, 1.25, 1.25, 2.25, 2.25]),
            (5, 4): (rows([1.0, 1.0, 3.5, 3.5], [1.0, 1.0, 3.5, 3.5], [1.5, 1.5, 4.0, 4.0], [1.5, 1.5, 4.0, 4.0], [0, 0, 0, 0]),
                     rows([1.0, 3.25, 5.75, 3.5], [2.25, 7.0, 12.0, 7.25], [2.75, 8.0, 13.0, 7.75], [3.25, 9.0, 14.0, 8.25],
                          [1.75, 4.75, 7.25, 4.25]),
                     rows([0.0625, 1.0625, 1.0625, 1.0], [0.3125, 2.5, 2.5, 2.1875], [0.3125, 2.5, 2.5, 2.1875],
                          [0.5625, 3.0, 3.0, 2.4375], [0.5625, 3.0, 3.0, 2.4375])),
        },
    }
    for kind, pool, grad in (("max", N.maxpool, N.grad_maxpool), ("mean", N.meanpool, N.grad_meanpool)):
        for shape, (dx, dx_nostride, dx_pad) in answers[kind].items():
            x = jl(range(1, math.prod(shape) + 1), (*shape, 1, 1), np.float32)
            k = (2,) * len(shape)
            for kw, want in ((dict(), dx), (dict(stride=1), dx_nostride), (dict(pad=1), dx_pad)):
                y = pool(x, k, **kw)
                close(grad(y, y, x, k, **kw)[(...,) + (0, 0)], want, rtol=1e-6)
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    lp = ((4.5, dict(), [0.17258020254042603, 1.9525221042381296, 1.2774501198988355, 3.496467771732918, 0.0]),
          (3.0, dict(stride=1), [0.48074985676913606, 3.1458422620080637, 4.752311710531486, 6.345225258061685, 4.356316321455918]),
          (2.0, dict(pad=1), [1.0, 2.0, 3.0, 4.0, 5.0]))
    for p, kw, want in lp:
        y = N.lpnormpool(x, p, (2,), **kw)
        close(N.grad_lpnormpool(y, y, x, p, (2,), **kw)[:, 0, 0], want, atol=1e-3)


@case(
    names=("∇upsample_nearest", "∇upsample_bilinear", "∇upsample_trilinear", "∇upsample_linear", "upsample_nearest"),
    source="NNlib.jl test/testsuite/upsample.jl",
    julia="""
    x = device(reshape(T[1 2; 3 4], (2,2,1,1)))
    y = upsample_nearest(x, (2,3))
    @test cpu(∇upsample_nearest(y, (2,3)))[:, :, 1, 1] == [6 12; 18 24]
    @test_throws ArgumentError ∇upsample_nearest(y, (2,4))
    # additional grad check, also compliant with pytorch
    o = ones(Float32,6,4,2,1)
    grad_true = 6*ones(Float32,2,2,2,1)
    @test cpu(∇upsample_bilinear(device(o); size = (2,2))) ≈ grad_true
    # This test only works when `align_corners=false`.
    o = device(ones(Float32,8,8,8,1,1))
    grad_true = 8 * ones(Float32,4,4,4,1,1)
    @test cpu(∇upsample_trilinear(o; size=(4,4,4), align_corners=false)) ≈ grad_true
    gradtest_fn(x -> upsample_linear(x, 2.5), xd; atol)   # x = T[1,2,3,4] in 3 columns
    """,
)
def case_upsample_gradients():
    x = jnp.asarray(rows([1, 2], [3, 4]), jnp.float32).reshape(2, 2, 1, 1)
    y = N.upsample_nearest(x, (2, 3))
    equal(N.grad_upsample_nearest(y, (2, 3))[:, :, 0, 0], rows([6, 12], [18, 24]))
    raises(ValueError, N.grad_upsample_nearest, y, (2, 4))
    close(N.grad_upsample_bilinear(jnp.ones((6, 4, 2, 1)), size=(2, 2)), np.full((2, 2, 2, 1), 6.0))
    close(N.grad_upsample_trilinear(jnp.ones((8, 8, 8, 1, 1)), size=(4, 4, 4), align_corners=False), np.full((4, 4, 4, 1, 1), 8.0))
    xs = np.tile(np.arange(1, 5, dtype=np.float64)[:, None, None], (1, 3, 1))
    dy = np.random.default_rng(0).standard_normal((10, 3, 1))
    with jax.enable_x64(True):  # gradtest: the adjoint against central finite differences of upsample_linear
        got = N.grad_upsample_linear(jnp.asarray(dy), size=4)
        for i in np.ndindex(xs.shape):
            d = np.zeros_like(xs)
            d[i] = 1e-6
            fd = (np.sum(np.asarray(N.upsample_linear(jnp.asarray(xs + d), 2.5)) * dy)
                  - np.sum(np.asarray(N.upsample_linear(jnp.asarray(xs - d), 2.5)) * dy)) / 2e-6
            close(got[i], fd, rtol=1e-6, atol=1e-8)


@case(
    names=("∇depthwiseconv_data", "∇depthwiseconv_filter", "depthwiseconv"),
    source=CONV,
    julia="""
    conv_answer_dict = Dict(1 => Dict(
        "dx" => [8, 18, 27, 36, 13.], "dx_stride" => [8, 4, 20, 10, 0.], "dx_pad" => [9, 18, 27, 36, 33.],
        "dx_dil" => [10, 16, 27, 8, 11.], "dx_flip" => [5, 18, 27, 36, 28.],
        "dw" => [134, 100.], "dw_stride" => [48, 34.], "dw_pad" => [135, 150.], "dw_dil" => [102, 54.], "dw_flip" => [110, 148.]), ...)
    x = reshape(Float64[1:prod(size(dx));], size(dx)..., 1, 1);  w = reshape(Float64[1:prod(size(dw));], size(dw)..., 1, 1)
    for (∇conv_filter, ∇conv_data) in ((NNlib.∇depthwiseconv_filter, NNlib.∇depthwiseconv_data),)
        cdims = DepthwiseConvDims(x, w)
        dy = NNlib.depthwiseconv(x, w, cdims)
        @test ddims(∇conv_filter(x, dy, cdims)) == dw
        @test ddims(∇conv_data(dy, w,  cdims)) == dx
        cdims = DepthwiseConvDims(x, w; stride=2)      # dw_stride, dx_stride
        cdims = DepthwiseConvDims(x, w; dilation=2)    # dw_dil, dx_dil
        cdims = DepthwiseConvDims(x, w; padding=1)     # dw_pad, dx_pad
        cdims = DepthwiseConvDims(x, w; flipkernel=true)  # dw_flip, dx_flip
    end
    # Filter backprop (reshaped back to depthwise weight layout).
    dw = NNlib.∇depthwiseconv_filter(x, dy, cdims)
    @test dw ≈ reshape(NNlib.∇conv_filter(x, dy, gdims), w_size..., C_mult, C_in)
    @test NNlib.∇depthwiseconv_data(dy, w, cdims) ≈ NNlib.∇conv_data(dy, wg, gdims)
    """,
)
def case_depthwiseconv_gradients():
    x = jl(range(1, 6), (5, 1, 1), np.float32)
    w = jl(range(1, 3), (2, 1, 1), np.float32)
    for kw, dx, dw in ((dict(), [8, 18, 27, 36, 13], [134, 100]), (dict(stride=2), [8, 4, 20, 10, 0], [48, 34]),
                       (dict(dilation=2), [10, 16, 27, 8, 11], [102, 54]), (dict(pad=1), [9, 18, 27, 36, 33], [135, 150]),
                       (dict(flipped=True), [5, 18, 27, 36, 28], [110, 148])):
        dy = N.depthwiseconv(x, w, **kw)
        close(N.grad_depthwiseconv_filter(x, dy, (2,), **kw)[:, 0, 0], dw)
        close(N.grad_depthwiseconv_data(dy, w, x.shape, **kw)[:, 0, 0], dx)
    r = np.random.default_rng(0)
    x = jnp.asarray(r.random((7, 6, 3, 2)), jnp.float32)
    w = jnp.asarray(r.random((3, 2, 2, 3)), jnp.float32)  # (k..., C_mult, C_in)
    wg = jnp.reshape(w, (3, 2, 1, 6), order="F")  # grouped: output channel (i - 1) * C_mult + m
    for kw in (dict(), dict(stride=(2, 1), pad=(1, 0, 2, 1), dilation=(1, 2))):
        dy = N.depthwiseconv(x, w, **kw)
        close(dy, N.conv(x, wg, groups=3, **kw), rtol=1e-5)
        close(N.grad_depthwiseconv_filter(x, dy, w.shape, **kw),
              jnp.reshape(N.grad_conv_filter(x, dy, wg.shape, groups=3, **kw), w.shape, order="F"), rtol=1e-5)
        close(N.grad_depthwiseconv_data(dy, w, x.shape, **kw), N.grad_conv_data(dy, wg, x.shape, groups=3, **kw), rtol=1e-5)


@case(
    names=("grid_sample", "∇grid_sample"),
    source="NNlib.jl test/sampling.jl and src/sampling.jl (grid_sample docstring)",
    julia="""
    julia> x = reshape(collect(1.0:4.0), (2, 2, 1, 1))
    julia> grid = Array{Float64}(undef, 2, 3, 2, 1);
    julia> grid[:, 1, 1, 1] .= (-3, -1); grid[:, 2, 1, 1] .= (0, -1); grid[:, 3, 1, 1] .= (1, -1);
    julia> grid[:, 1, 2, 1] .= (-1, 1); grid[:, 2, 2, 1] .= (0, 1); grid[:, 3, 2, 1] .= (3, 1);
    julia> grid_sample(x, grid; padding_mode=:zeros)    # 0.0 3.0; 1.5 3.5; 2.0 0.0
    julia> grid_sample(x, grid; padding_mode=:border)   # 1.0 3.0; 1.5 3.5; 2.0 4.0
    @testset "Known gradients" begin
        x = ones(Float64, (2, 2, 1, 1))
        grid[:, 1, 1, 1] .= (-1, -1); grid[:, 2, 1, 1] .= (1, -1); grid[:, 1, 2, 1] .= (-1, 1); grid[:, 2, 2, 1] .= (1, 1)
        ∇grid_true[:, :, 1, 1] = [[0.0, 0.0] [-0.5, 0.0]]
        ∇grid_true[:, :, 2, 1] = [[0.0, -0.5] [-0.5, -0.5]]
        sampled = grid_sample(x, grid; padding_mode=:zeros)
        @test x == sampled
        ∇input, ∇grid = ∇grid_sample(ones(size(sampled)), x, grid; padding_mode=:zeros)
        @test ∇input == x
        @test ∇grid == ∇grid_true
        (padding_mode = :border: ∇grid_true is all zeros)
    end
    @testset "Test out-of-bounds for different paddings" begin
        x = ones(Float64, (2, 2, 1, 1))
        grid[:, 1, 1, 1] .= (-3, -1); grid[:, 2, 1, 1] .= (0, -1); grid[:, 3, 1, 1] .= (3, -1)
        grid[:, 1, 2, 1] .= (-1, 3); grid[:, 2, 2, 1] .= (0, 1); grid[:, 3, 2, 1] .= (1, 3)
        y = grid_sample(x, grid; padding_mode=:zeros);  @test y == reshape(Float64[[0, 1, 0] [0, 1, 0]], size(y))
        y = grid_sample(x, grid; padding_mode=:border); @test y == ones(Float64, size(y))
    end
    @testset "Known gradients 3D" begin   # x = ones(2, 2, 2, 1, 1), grid at the 8 corners
        ∇grid_true[:, i, j, k, 1] .= (-0.5 * (i == 2), -0.5 * (j == 2), -0.5 * (k == 2))   (zeros); all zeros (border)
    end
    """,
)
def case_grid_sample():
    def grid_of(points, shape):
        g = np.zeros(shape)
        for idx, p in points.items():
            g[(slice(None), *idx, 0)] = p
        return g

    x = jnp.asarray(np.arange(1.0, 5.0).reshape(2, 2, 1, 1, order="F"), jnp.float32)
    g = jnp.asarray(grid_of({(0, 0): (-3, -1), (1, 0): (0, -1), (2, 0): (1, -1), (0, 1): (-1, 1), (1, 1): (0, 1), (2, 1): (3, 1)},
                            (2, 3, 2, 1)), jnp.float32)
    equal(N.grid_sample(x, g, padding_mode="zeros")[:, :, 0, 0], rows([0, 3], [1.5, 3.5], [2, 0]))
    equal(N.grid_sample(x, g, padding_mode="border")[:, :, 0, 0], rows([1, 3], [1.5, 3.5], [2, 4]))
    with jax.enable_x64(True):
        ones = jnp.ones((2, 2, 1, 1), jnp.float64)
        g = jnp.asarray(grid_of({(0, 0): (-1, -1), (1, 0): (1, -1), (0, 1): (-1, 1), (1, 1): (1, 1)}, (2, 2, 2, 1)))
        want = np.zeros((2, 2, 2, 1))
        want[:, 1, 0, 0], want[:, 0, 1, 0], want[:, 1, 1, 0] = (-0.5, 0), (0, -0.5), (-0.5, -0.5)
        for mode, dgrid in (("zeros", want), ("border", np.zeros_like(want))):
            s = N.grid_sample(ones, g, padding_mode=mode)
            equal(s, ones)
            assert s.dtype == jnp.float64
            dx, dg = N.grad_grid_sample(jnp.ones(s.shape), ones, g, padding_mode=mode)
            equal(dx, ones)
            equal(dg, dgrid)
        g = jnp.asarray(grid_of({(0, 0): (-3, -1), (1, 0): (0, -1), (2, 0): (3, -1), (0, 1): (-1, 3), (1, 1): (0, 1), (2, 1): (1, 3)},
                                (2, 3, 2, 1)))
        equal(N.grid_sample(ones, g, padding_mode="zeros")[:, :, 0, 0], rows([0, 0], [1, 1], [0, 0]))
        equal(N.grid_sample(ones, g, padding_mode="border"), np.ones((3, 2, 1, 1)))
        ones3 = jnp.ones((2, 2, 2, 1, 1), jnp.float64)
        g3 = np.zeros((3, 2, 2, 2, 1))
        want3 = np.zeros_like(g3)
        for i, j, k in np.ndindex(2, 2, 2):
            g3[:, i, j, k, 0] = (2 * i - 1, 2 * j - 1, 2 * k - 1)
            want3[:, i, j, k, 0] = (-0.5 * i, -0.5 * j, -0.5 * k)
        for mode, dgrid in (("zeros", want3), ("border", np.zeros_like(want3))):
            s = N.grid_sample(ones3, jnp.asarray(g3), padding_mode=mode)
            equal(s, ones3)
            dx, dg = N.grad_grid_sample(jnp.ones(s.shape), ones3, jnp.asarray(g3), padding_mode=mode)
            equal(dx, ones3)
            equal(dg, dgrid)


@case(
    names=("imrotate", "∇imrotate"),
    source="NNlib.jl src/rotation.jl (imrotate docstring) and test/testsuite/rotation.jl",
    julia="""
    julia> arr = zeros((4,4,1,1)); arr[2,2,1,1] = 1;
    julia> NNlib.imrotate(arr, deg2rad(90)) # rotation around (3,3)       -> the 1 at [2, 4]
    julia> NNlib.imrotate(arr, deg2rad(90), rotation_center=(2,2))        -> the 1 stays at [2, 2]
    julia> arr = zeros((3,3,1,1)); arr[1,2,1,1] = 1
    julia> NNlib.imrotate(arr, deg2rad(45))       # 0.207107 at [1, 2] and [2, 3]
    julia> NNlib.imrotate(arr, deg2rad(45), method=:nearest)   # 1.0 at [1, 3]
    @testset "Simple test" begin
        arr = device(zeros((6, 6, 1, 1)));
        arr[3:4, 4, 1, 1] .= 1;
        @test all(cpu(NNlib.imrotate(arr, deg2rad(45))) .≈ [0.0 0.0 0.0 0.0 0.0 0.0; 0.0 0.0 0.0 0.0 0.0 0.0; 0.0 0.0 0.0 0.29289321881345254 0.585786437626905 0.0; 0.0 0.0 0.08578643762690495 1.0 0.2928932188134524 0.0; 0.0 0.0 0.0 0.08578643762690495 0.0 0.0; 0.0 0.0 0.0 0.0 0.0 0.0])
    end
    @testset "Special cases of rotation" begin
        arr = device(zeros(T, (10, 10, 1, 3)))
        arr[6, 6, :, 1] .= 1; arr[6, 6, :, 2] .= 2; arr[6, 6, :, 3] .= 3
        for method in [:bilinear, :nearest]
            @test all(.≈(arr , NNlib.imrotate(arr, deg2rad(0); method)))    # and 90, 180, 270, 360
        end
    end
    @testset "Test gradients" begin   # gradtest against finite differences, 11×11 and 10×10, angles
        angles = deg2rad.([0, 0.0001, 35, 90, -90, -90.0123, 170, 180, 270, 360, 450, 1234.1234])
    end
    """,
)
def case_imrotate():
    arr = jnp.zeros((4, 4, 1, 1)).at[1, 1].set(1.0)
    equal(N.imrotate(arr, math.radians(90))[:, :, 0, 0], np.zeros((4, 4)) + np.eye(4)[1][:, None] * np.eye(4)[3][None, :])
    equal(N.imrotate(arr, math.radians(90), rotation_center=(2, 2))[:, :, 0, 0], np.asarray(arr[:, :, 0, 0]))
    arr = jnp.zeros((3, 3, 1, 1)).at[0, 1].set(1.0)
    close(N.imrotate(arr, math.radians(45))[:, :, 0, 0], rows([0, 0.207107, 0], [0, 0, 0.207107], [0, 0, 0]), atol=1e-6)
    equal(N.imrotate(arr, math.radians(45), method="nearest")[:, :, 0, 0], rows([0, 0, 1], [0, 0, 0], [0, 0, 0]))
    arr = jnp.zeros((6, 6, 1, 1)).at[2:4, 3].set(1.0)
    want = rows([0.0] * 6, [0.0] * 6, [0, 0, 0, 0.29289321881345254, 0.585786437626905, 0],
                [0, 0, 0.08578643762690495, 1.0, 0.2928932188134524, 0], [0, 0, 0, 0.08578643762690495, 0, 0], [0.0] * 6)
    close(N.imrotate(arr, math.radians(45))[:, :, 0, 0], want, atol=1e-6)
    arr = jnp.zeros((10, 10, 1, 3)).at[5, 5, :, :].set(jnp.asarray([1.0, 2.0, 3.0]))
    for method in ("bilinear", "nearest"):
        for deg in (0, 90, 180, 270, 360):
            close(N.imrotate(arr, math.radians(deg), method=method), arr, atol=1e-6)
    with jax.enable_x64(True):  # gradtest: the adjoint against the transpose of the (linear) rotation
        for method in ("nearest", "bilinear"):
            for deg in (0, 0.0001, 35, 90, -90, -90.0123, 170, 180, 270, 360, 450, 1234.1234):
                for n in (11, 10):
                    x = np.random.default_rng(n).random((n, n, 1, 1))
                    dy = np.random.default_rng(n + 1).random((n, n, 1, 1))
                    # <imrotate(x), dy> = <x, ∇imrotate(dy)>, the defining property of the adjoint
                    lhs = float(jnp.sum(N.imrotate(jnp.asarray(x), math.radians(deg), method=method) * dy))
                    rhs = float(jnp.sum(jnp.asarray(x) * N.grad_imrotate(jnp.asarray(dy), jnp.asarray(x), math.radians(deg), method=method)))
                    close(lhs, rhs, rtol=1e-10)


@case(
    names=("conv_bias_act",),
    source="NNlib.jl test/conv_bias_act.jl",
    julia="""
    @testset "conv_bias_act" begin
        x = rand(4,4,3,3)
        w = rand(2,2,3,3)
        b = rand(1,1,1,3)
        cdims = DenseConvDims(x, w; stride=2)
        @test NNlib.conv_bias_act(x, w, cdims, b, relu) ≈ relu.(conv(x, w, cdims) .+ b) atol=1e-5
    end
    """,
)
def case_conv_bias_act():
    r = np.random.default_rng(0)
    x, w, b = (jnp.asarray(r.random(s), jnp.float32) for s in ((4, 4, 3, 3), (2, 2, 3, 3), (1, 1, 1, 3)))
    close(N.conv_bias_act(x, w, b, N.relu, stride=2), N.relu(N.conv(x, w, stride=2) + b), atol=1e-5)
