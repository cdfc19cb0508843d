# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib convolution cases (NNlib.jl test/conv.jl, conv_bias_act.jl, testsuite/fold.jl), as re-exported by Flux."""


import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import nnlib as N
from fluxjax.errors import DimensionMismatch

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
