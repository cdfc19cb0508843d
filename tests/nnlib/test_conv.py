"""Tests for fluxjax.nnlib.conv: conv / crosscor / depthwiseconv / conv_transpose in Flux's layout.

Reference values come from `NNlib.jl/test/conv.jl` (the `conv_answer_dict` known answers) and
`Flux.jl/test/layers/conv.jl` / `Flux.jl/test/outputsize.jl` (via research/flux-tests.md, section D),
plus a direct numpy loop of NNlib's definition. Padding and batched products are tested at the end.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax.errors import DimensionMismatch
from fluxjax.nnlib import (
    batched_adjoint,
    batched_mul,
    batched_transpose,
    batched_vec,
    conv,
    conv_output_size,
    conv_transpose,
    conv_transpose_output_size,
    crosscor,
    depthwiseconv,
    pad_circular,
    pad_constant,
    pad_reflect,
    pad_repeat,
    pad_symmetric,
    pad_zeros,
    same_pad,
)
from fluxjax.nnlib.conv import pad_pairs


def _jl(flat, shape):
    """A Julia `reshape([...], shape)`: column-major."""
    return np.reshape(np.asarray(flat, dtype=np.float64), shape, order="F")


def _jl_range(shape):
    """Julia's `reshape(1.0:prod(shape), shape)`."""
    return _jl(np.arange(1, int(np.prod(shape)) + 1), shape)


# From NNlib.jl/test/conv.jl: `conv_answer_dict` (known-good answers, Float64, column-major).
CONV_ANSWER_DICT = {
    1: {
        "y_pad": np.array([1, 4, 7, 10, 13, 10.]),
        "y_dil": np.array([5, 8, 11.]),
        "y_flip": np.array([5, 8, 11, 14.]),
        "dx": np.array([8, 18, 27, 36, 13.]),
        "dx_stride": np.array([8, 4, 20, 10, 0.]),
        "dx_pad": np.array([9, 18, 27, 36, 33.]),
        "dx_dil": np.array([10, 16, 27, 8, 11.]),
        "dx_flip": np.array([5, 18, 27, 36, 28.]),
        "dw": np.array([134, 100.]),
        "dw_stride": np.array([48, 34.]),
        "dw_pad": np.array([135, 150.]),
        "dw_dil": np.array([102, 54.]),
        "dw_flip": np.array([110, 148.]),
    },
    2: {
        "y_pad": np.array([[1, 9, 29, 49, 48], [4, 29, 79, 129, 115], [7, 39, 89, 139, 122], [10, 49,
            99, 149, 129], [13, 59, 109, 159, 136], [10, 40, 70, 100, 80.]]),
        "y_dil": np.array([[48, 98], [58, 108], [68, 118.]]),
        "y_flip": np.array([[51, 101, 151], [61, 111, 161], [71, 121, 171], [81, 131, 181.]]),
        "dx": np.array([[116, 374, 674, 258], [243, 700, 1200, 407], [313, 800, 1300, 437], [383, 900,
            1400, 467], [177, 386, 586, 159.]]),
        "dx_stride": np.array([[116, 58, 516, 258], [87, 29, 387, 129], [196, 98, 596, 298], [147, 49,
            447, 149], [0, 0, 0, 0.]]),
        "dx_pad": np.array([[152, 470, 850, 911], [261, 700, 1200, 1240], [340, 800, 1300, 1319], [419,
            900, 1400, 1398], [370, 746, 1126, 1087.]]),
        "dx_dil": np.array([[192, 392, 96, 196], [232, 432, 116, 216], [416, 766, 184, 334], [174, 324,
            58, 108], [204, 354, 68, 118.]]),
        "dx_flip": np.array([[51, 254, 454, 453], [163, 700, 1200, 1087], [193, 800, 1300, 1157], [223,
            900, 1400, 1227], [162, 586, 886, 724.]]),
        "dw": np.array([[17378, 11738], [16250, 10610.]]),
        "dw_stride": np.array([[5668, 3888], [5312, 3532.]]),
        "dw_pad": np.array([[18670, 22550], [19850, 23430.]]),
        "dw_dil": np.array([[8632, 3652], [7636, 2656.]]),
        "dw_flip": np.array([[12590, 19550], [13982, 20942.]]),
    },
    3: {
        "y_pad": _jl([1, 4, 7, 10, 13, 10, 9, 29, 39, 49, 59, 40, 29, 79, 89, 99, 109, 70, 49, 129, 139,
            149, 159, 100, 48, 115, 122, 129, 136, 80, 26, 80, 94, 108, 122, 80, 126, 322, 358, 394,
            430, 260, 206, 502, 538, 574, 610, 360, 286, 682, 718, 754, 790, 460, 220, 502, 524, 546,
            568, 320, 146, 360, 374, 388, 402, 240, 446, 1042, 1078, 1114, 1150, 660, 526, 1222, 1258,
            1294, 1330, 760, 606, 1402, 1438, 1474, 1510, 860, 420, 942, 964, 986, 1008, 560, 205, 456,
            467, 478, 489, 270, 517, 1133, 1159, 1185, 1211, 660, 577, 1263, 1289, 1315, 1341, 730, 637,
            1393, 1419, 1445, 1471, 800, 392, 847, 862, 877, 892, 480.], (6,5,4)),
        "y_dil": _jl([608, 644, 680, 788, 824, 860.], (3,2,1)),
        "y_flip": _jl([686, 722, 758, 794, 866, 902, 938, 974, 1046, 1082, 1118, 1154, 1406, 1442, 1478,
            1514, 1586, 1622, 1658, 1694, 1766, 1802, 1838, 1874.], (4,3,2)),
        "dx": _jl([2576, 5118, 5658, 6198, 3010, 5948, 11576, 12512, 13448, 6420, 8468, 16256, 17192,
            18128, 8580, 4092, 7718, 8114, 8510, 3950, 9624, 18316, 19108, 19900, 9340, 18680, 34992,
            36288, 37584, 17320, 22280, 41472, 42768, 44064, 20200, 9776, 17756, 18260, 18764, 8340,
            4168, 7438, 7690, 7942, 3450, 6972, 11896, 12256, 12616, 5140, 8052, 13696, 14056, 14416,
            5860, 2804, 4278, 4386, 4494, 1510.], (5,4,3)),
        "dx_stride": _jl([2576, 2254, 3152, 2758, 0, 1932, 1610, 2364, 1970, 0, 5456, 4774, 6032, 5278,
            0, 4092, 3410, 4524, 3770, 0, 1288, 966, 1576, 1182, 0, 644, 322, 788, 394, 0, 2728, 2046,
            3016, 2262, 0, 1364, 682, 1508, 754, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0.], (5,4,3)),
        "dx_pad": _jl([4220, 6343, 7116, 7889, 6550, 8490, 12276, 13312, 14348, 11606, 12350, 17456,
            18492, 19528, 15546, 11989, 16664, 17469, 18274, 14333, 16200, 22628, 23616, 24604, 19392,
            25336, 34992, 36288, 37584, 29320, 30216, 41472, 42768, 44064, 34200, 26236, 35664, 36652,
            37640, 28940, 22816, 30831, 31636, 32441, 24794, 32522, 43668, 44704, 45740, 34742, 36462,
            48848, 49884, 50920, 38602, 29501, 39264, 40037, 40810, 30733.], (5,4,3)),
        "dx_dil": _jl([4864, 5152, 9696, 4508, 4760, 6304, 6592, 12396, 5768, 6020, 3648, 3864, 7120,
            3220, 3400, 4728, 4944, 9100, 4120, 4300, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 2432, 2576, 4544, 1932, 2040, 3152, 3296, 5804, 2472, 2580, 1216, 1288, 1968, 644,
            680, 1576, 1648, 2508, 824, 860.], (5,4,3)),
        "dx_flip": _jl([686, 2094, 2202, 2310, 1588, 2924, 7544, 7904, 8264, 5124, 3644, 9344, 9704,
            10064, 6204, 3138, 7430, 7682, 7934, 4616, 4836, 11980, 12484, 12988, 7792, 14936, 34992,
            36288, 37584, 21640, 17816, 41472, 42768, 44064, 25240, 12620, 28412, 29204, 29996, 16728,
            7030, 15646, 16042, 16438, 9084, 17772, 38968, 39904, 40840, 22276, 19932, 43648, 44584,
            45520, 24796, 12362, 26742, 27282, 27822, 14992.], (5,4,3)),
        "dw": _jl([1.058184e6, 1.0362e6, 948264, 926280, 618504, 596520, 508584, 486600], (2,2,2)),
        "dw_stride": _jl([74760, 72608, 64000, 61848, 31720, 29568, 20960, 18808.], (2,2,2)),
        "dw_pad": _jl([1.26055e6, 1.30805e6, 1.40327e6, 1.44923e6, 1.73731e6, 1.77589e6, 1.83259e6,
            1.86731e6], (2,2,2)),
        "dw_dil": _jl([250320, 241512, 206280, 197472, 74160, 65352, 30120, 21312.], (2,2,2)),
        "dw_flip": _jl([639480, 670200, 793080, 823800, 1.25388e6, 1.2846e6, 1.40748e6, 1.4382e6],
            (2,2,2)),
    },
}


def ref_conv(x, w, *, stride=1, pad=0, dilation=1, flipped=False, groups=1):
    """NNlib's conv by definition: a loop over output positions and kernel taps (float64)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = w.ndim - 2
    stride = (stride,) * n if isinstance(stride, int) else stride
    dilation = (dilation,) * n if isinstance(dilation, int) else dilation
    if not flipped:
        w = w[(slice(None, None, -1),) * n]
    xp = np.pad(x, list(pad_pairs(pad, n)) + [(0, 0), (0, 0)])
    k, cin_g, cout = w.shape[:n], w.shape[n], w.shape[n + 1]
    cout_g = cout // groups
    out = [(xp.shape[i] - (k[i] - 1) * dilation[i] - 1) // stride[i] + 1 for i in range(n)]
    y = np.zeros(out + [cout, x.shape[-1]])
    for o in itertools.product(*map(range, out)):
        for kk in itertools.product(*map(range, k)):
            patch = xp[tuple(o[i] * stride[i] + kk[i] * dilation[i] for i in range(n))]  # (Cin, N)
            for g in range(groups):
                xs = patch[g * cin_g : (g + 1) * cin_g]
                ws = w[kk][:, g * cout_g : (g + 1) * cout_g]
                y[o][g * cout_g : (g + 1) * cout_g] += ws.T @ xs
    return y


def _f32(a):
    return jnp.asarray(np.asarray(a, np.float32))


def _run(f, *args):
    """`jax.jit(f)(*args)` as numpy arrays: one compilation per test instead of one per eager op."""
    return jax.tree.map(np.asarray, jax.jit(f)(*args))


def _shape(f, *shapes, **kw):
    """Output shape of `f` on float32 inputs of these shapes, without compiling or running it."""
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    return jax.eval_shape(lambda *a: f(*a, **kw), *args).shape


# --- NNlib.jl/test/conv.jl: "Dense Convolution" known answers, ranks 1-3 ---------------------------

SETTINGS = {  # suffix in CONV_ANSWER_DICT -> keyword arguments
    "": {},
    "_stride": {"stride": 2},
    "_pad": {"pad": 1},
    "_dil": {"dilation": 2},
    "_flip": {"flipped": True},
}


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_conv_known_answers(rank):
    # NNlib.jl/test/conv.jl, testset "Dense Convolution": y = conv(x, w) for x, w = 1:n reshaped.
    ans = CONV_ANSWER_DICT[rank]
    x = _f32(_jl_range(ans["dx"].shape + (1, 1)))
    w = _f32(_jl_range(ans["dw"].shape + (1, 1)))
    y_pad = ans["y_pad"]
    y_plain = y_pad[(slice(1, -1),) * rank]
    y_stride = y_pad[(slice(1, -1, 2),) * rank]
    expected = {"": y_plain, "_stride": y_stride, "_pad": y_pad, "_dil": ans["y_dil"], "_flip": ans["y_flip"]}
    ys = _run(lambda x, w: {s: conv(x, w, **kw) for s, kw in SETTINGS.items()}, x, w)
    for suffix, y in ys.items():
        assert y.dtype == np.float32
        np.testing.assert_allclose(y[..., 0, 0], expected[suffix], rtol=1e-6, err_msg=suffix)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_conv_gradients_known_answers(rank):
    # NNlib.jl/test/conv.jl: ∇conv_data(dy, w, cdims) == dx and ∇conv_filter(x, dy, cdims) == dw
    # with dy = conv(x, w, cdims). Here ∇conv_data is conv_transpose (with the outpad that restores
    # size(x)) and both also come out of jax.vjp.
    ans = CONV_ANSWER_DICT[rank]
    x = _f32(_jl_range(ans["dx"].shape + (1, 1)))
    w = _f32(_jl_range(ans["dw"].shape + (1, 1)))
    def grads(x, w, kw):
        dy, back = jax.vjp(lambda x, w: conv(x, w, **kw), x, w)
        geom = {k: v for k, v in kw.items() if k != "flipped"}
        base = conv_transpose_output_size(dy.shape[:rank], w.shape[:rank], **geom)
        outpad = tuple(a - b for a, b in zip(x.shape[:rank], base, strict=True))
        return (*back(dy), conv_transpose(dy, w, outpad=outpad, **kw))

    out = _run(lambda x, w: {s: grads(x, w, kw) for s, kw in SETTINGS.items()}, x, w)
    for suffix, (dx, dw, dx_t) in out.items():
        np.testing.assert_allclose(dx[..., 0, 0], ans["dx" + suffix], rtol=1e-6, err_msg=suffix)
        np.testing.assert_allclose(dw[..., 0, 0], ans["dw" + suffix], rtol=1e-6, err_msg=suffix)
        np.testing.assert_allclose(dx_t[..., 0, 0], ans["dx" + suffix], rtol=1e-6, err_msg=suffix)


def test_conv_1d_flux_known_answer():
    # research/flux-tests.md D1 (NNlib.jl/test/conv.jl): x = 1:5, w = 1:2.
    x = _f32(np.arange(1.0, 6.0).reshape(5, 1, 1))
    w = _f32(np.arange(1.0, 3.0).reshape(2, 1, 1))
    np.testing.assert_allclose(conv(x, w, pad=1)[:, 0, 0], [1, 4, 7, 10, 13, 10])
    np.testing.assert_allclose(conv(x, w)[:, 0, 0], [4, 7, 10, 13])
    np.testing.assert_allclose(conv(x, w, dilation=2)[:, 0, 0], [5, 8, 11])
    np.testing.assert_allclose(conv(x, w, flipped=True)[:, 0, 0], [5, 8, 11, 14])
    np.testing.assert_allclose(crosscor(x, w)[:, 0, 0], [5, 8, 11, 14])


def test_conv_2d_flux_known_answer():
    # research/flux-tests.md D2 (NNlib.jl/test/conv.jl): x = reshape(1:20, 5, 4), w = reshape(1:4, 2, 2).
    x = _f32(_jl_range((5, 4, 1, 1)))
    w = _f32(_jl_range((2, 2, 1, 1)))
    np.testing.assert_allclose(
        conv(x, w, pad=1)[:, :, 0, 0],
        [[1, 9, 29, 49, 48], [4, 29, 79, 129, 115], [7, 39, 89, 139, 122],
         [10, 49, 99, 149, 129], [13, 59, 109, 159, 136], [10, 40, 70, 100, 80]],
    )
    np.testing.assert_allclose(
        crosscor(x, w)[:, :, 0, 0], [[51, 101, 151], [61, 111, 161], [71, 121, 171], [81, 131, 181]]
    )


@pytest.mark.parametrize(
    "xshape,wshape,kw",
    [
        ((9, 4, 2), (3, 4, 5), {}),
        ((9, 4, 2), (3, 2, 6), {"groups": 2, "stride": 2, "pad": (1, 2)}),
        ((10, 3, 1), (2, 3, 2), {"dilation": 3, "pad": 2, "flipped": True}),
        ((7, 6, 4, 2), (3, 2, 4, 3), {}),
        ((7, 6, 4, 2), (3, 2, 4, 3), {"stride": (2, 1), "pad": (0, 1, 2, 1), "dilation": (1, 2)}),
        ((8, 7, 6, 1), (2, 3, 2, 6), {"groups": 3, "stride": 2, "pad": 1, "flipped": True}),
        ((5, 4, 3, 2, 1), (2, 2, 2, 2, 3), {"stride": (1, 2, 1), "pad": 1}),
    ],
)
def test_conv_matches_numpy_loop(xshape, wshape, kw):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xshape), rng.standard_normal(wshape)
    y = conv(_f32(x), _f32(w), **kw)
    np.testing.assert_allclose(y, ref_conv(x, w, **kw), rtol=1e-4, atol=1e-5)
    assert y.shape[:-2] == conv_output_size(xshape[:-2], wshape[:-2], **{
        k: v for k, v in kw.items() if k in ("stride", "pad", "dilation")})


def test_grouped_conv_is_per_group_conv():
    # NNlib.jl/test/conv.jl, testset "Grouped Convolutions" (smaller sizes): each group of input
    # channels 20(i-1)+1:20i and output channels 3(i-1)+1:3i is an independent conv, gradients too.
    rng = np.random.default_rng(1)
    x, w = _f32(rng.random((8, 8, 20, 2))), _f32(rng.random((3, 3, 4, 15)))

    def value_and_grads(x, w, groups):
        y, back = jax.vjp(lambda x, w: conv(x, w, groups=groups), x, w)
        return (y, *back(jnp.ones_like(y)))

    def per_group(x, w):
        full = value_and_grads(x, w, 5)
        parts = [value_and_grads(x[:, :, 4 * g : 4 * g + 4], w[..., 3 * g : 3 * g + 3], 1) for g in range(5)]
        return full, parts

    (y, gx, gw), parts = _run(per_group, x, w)
    for g, (yg, gxg, gwg) in enumerate(parts):
        i, o = slice(4 * g, 4 * g + 4), slice(3 * g, 3 * g + 3)
        np.testing.assert_allclose(y[:, :, o], yg, rtol=1e-5)
        np.testing.assert_allclose(gx[:, :, i], gxg, rtol=1e-5)
        np.testing.assert_allclose(gw[:, :, :, o], gwg, rtol=1e-5)
    with pytest.raises(DimensionMismatch):
        _shape(conv, x.shape, w.shape)


def test_conv_wrapper_sizes():
    # NNlib.jl/test/conv.jl, testset "conv_wrapper".
    x, w, w1 = (10, 10, 3, 10), (2, 2, 3, 16), (3, 4, 3, 16)
    assert _shape(conv, x, w) == (9, 9, 16, 10)
    assert _shape(conv, x, w, stride=(2, 2), pad=(2, 2)) == (7, 7, 16, 10)
    assert _shape(conv, x, w1, stride=(1, 2), pad=(2, 3)) == (12, 7, 16, 10)
    assert _shape(conv, x, w, stride=(1, 2), pad=(2, 3), dilation=(2, 2)) == (12, 7, 16, 10)
    assert _shape(conv, x, w, stride=(1, 2), pad=(2, 3), dilation=(2, 2), flipped=True) == (12, 7, 16, 10)


def test_depthwiseconv():
    # NNlib.jl/test/conv.jl, testset "depthwiseconv_wrapper": w is (k..., mult, Cin).
    x, w, w1 = (10, 10, 3, 10), (2, 2, 3, 3), (3, 4, 3, 3)
    assert _shape(depthwiseconv, x, w) == (9, 9, 9, 10)
    assert _shape(depthwiseconv, x, w, stride=(2, 2), pad=(2, 2)) == (7, 7, 9, 10)
    assert _shape(depthwiseconv, x, w1, stride=(1, 2), pad=(2, 3)) == (12, 7, 9, 10)
    assert _shape(depthwiseconv, x, w1, stride=(1, 2), pad=(2, 3), dilation=(2, 2)) == (10, 5, 9, 10)
    # Values: output channel i*mult + m is input channel i convolved with w[..., m, i].
    rng = np.random.default_rng(2)
    xr, wr = rng.standard_normal((6, 5, 3, 2)), rng.standard_normal((2, 3, 2, 3))
    y = np.asarray(depthwiseconv(_f32(xr), _f32(wr), pad=1))
    for i in range(3):
        for m in range(2):
            ref = ref_conv(xr[:, :, i : i + 1], wr[:, :, m : m + 1, i : i + 1], pad=1)
            np.testing.assert_allclose(y[:, :, 2 * i + m], ref[:, :, 0], rtol=1e-4, atol=1e-5)
    # Flux's DepthwiseConv weight (k..., 1, Cout) is the same conv with groups = Cin.
    w_flux = np.reshape(wr, (2, 3, 1, 6), order="F")
    np.testing.assert_allclose(depthwiseconv(_f32(xr), _f32(w_flux), pad=1), y, rtol=1e-6)
    np.testing.assert_allclose(conv(_f32(xr), _f32(w_flux), pad=1, groups=3), y, rtol=1e-6)


def test_flux_conv_vs_crosscor_and_delta():
    # research/flux-tests.md D3 (Flux.jl/test/layers/conv.jl): a delta convolved with w gives w,
    # unflipped; CrossCor with the reversed kernel equals Conv.
    data = np.zeros((7, 7, 1, 1), np.float32)
    data[3, 3] = 1
    w = np.random.default_rng(3).random((3, 3, 1, 1)).astype(np.float32)
    y = np.asarray(conv(jnp.asarray(data), jnp.asarray(w)))
    assert y.shape == (5, 5, 1, 1)
    np.testing.assert_allclose(y[1:4, 1:4], w, rtol=1e-6)
    x = np.random.default_rng(4).random((5, 5, 1, 1)).astype(np.float32)
    np.testing.assert_allclose(crosscor(x, w[::-1, ::-1]), conv(x, w), rtol=1e-6)
    np.testing.assert_allclose(crosscor(x, w)[0, 0, 0, 0], np.sum(w[:, :, 0, 0] * x[:3, :3, 0, 0]), rtol=1e-6)
    assert not np.allclose(crosscor(x, w), conv(x, w))
    assert _shape(conv, (7, 7, 1, 1), (3, 1, 1, 1)) == (5, 7, 1, 1)
    assert _shape(conv, (7, 7, 1, 1), (1, 3, 1, 1)) == (7, 5, 1, 1)


def test_asymmetric_padding():
    # research/flux-tests.md D4 (Flux.jl/test/layers/conv.jl): Conv((3,3), 1=>1; pad=(0,1,1,2)),
    # weight 1, bias 0, on ones(28, 28, 1, 1).
    y = conv(jnp.ones((28, 28, 1, 1)), jnp.ones((3, 3, 1, 1)), pad=(0, 1, 1, 2))[:, :, 0, 0]
    assert y.shape == (27, 29)
    assert (y[0, 0], y[1, 1], y[-1, 0], y[0, -1], y[0, -2], y[-1, -1]) == (6, 9, 4, 3, 6, 2)


def test_grouped_shapes():
    # research/flux-tests.md D6 (Flux.jl/test/layers/conv.jl): groups=5, 100 => 25 channels.
    assert _shape(conv, (28, 100, 2), (3, 20, 25), groups=5) == (26, 25, 2)
    assert _shape(conv, (28, 28, 100, 2), (3, 3, 20, 25), groups=5) == (26, 26, 25, 2)
    assert _shape(conv, (10, 11, 12, 100, 2), (3, 4, 5, 20, 25), groups=5) == (8, 8, 8, 25, 2)
    with pytest.raises(ValueError):
        _shape(conv, (5, 5, 3, 1), (2, 2, 1, 10), groups=2)


def test_output_size_table():
    # research/flux-tests.md D8 (Flux.jl/test/outputsize.jl), one spatial dim at a time.
    def conv_n(n, **kw):
        return _shape(conv, (n, 1, 1), (3, 1, 1), **kw)[0]

    def convt_n(n, **kw):
        return _shape(conv_transpose, (n, 1, 1), (3, 1, 1), **kw)[0]

    assert conv_n(10) == 8
    assert conv_n(5, stride=2) == 2
    assert conv_n(5, stride=2, pad=3) == 5
    assert conv_n(5, stride=2, pad=3, dilation=2) == 4
    assert convt_n(8) == 10
    assert convt_n(2, stride=2) == 5
    assert convt_n(5, stride=2, pad=3) == 5
    assert convt_n(4, stride=2, pad=3, dilation=2) == 5
    assert conv_output_size((5,), (3,), stride=2, pad=3, dilation=2) == (4,)
    assert conv_transpose_output_size((4,), (3,), stride=2, pad=3, dilation=2) == (5,)
    # Chain(Conv((3,3),3=>16), Conv((3,3),16=>32)) on (10,10,3,1) gives (6,6,32,1).
    chain = lambda x, w1, w2: conv(conv(x, w1), w2)
    assert _shape(chain, (10, 10, 3, 1), (3, 3, 3, 16), (3, 3, 16, 32)) == (6, 6, 32, 1)


@pytest.mark.parametrize("k", [(1,), (2,), (3,), (4, 5), (6, 7, 8)])
def test_same_pad_preserves_size(k):
    # research/flux-tests.md D10 (Flux.jl/test/layers/conv.jl, "SamePad"): size kept, also dilated;
    # stride 3 gives cld(n, 3); ConvTranspose with stride 3 gives 3n (Flux pads k - stride + 1 there).
    n = len(k)
    x, w = (*(5,) * n, 1, 1), (*k, 1, 1)
    assert _shape(conv, x, w, pad=same_pad(k)) == x
    assert _shape(crosscor, x, w, pad=same_pad(k)) == x
    assert _shape(depthwiseconv, x, w, pad=same_pad(k)) == x
    d = tuple(max(kk // 2, 1) for kk in k)
    assert _shape(conv, x, w, pad=same_pad(k, d), dilation=d) == x
    assert _shape(conv, x, w, pad=same_pad(k), stride=3)[:n] == (2,) * n
    kt = tuple(kk - 3 + 1 for kk in k)
    if min(kt) >= 1:
        assert _shape(conv_transpose, x, w, pad=same_pad(kt), stride=3)[:n] == (15,) * n


def test_same_pad_split_puts_extra_first():
    # Flux's SamePad: lo = cld(total, 2), hi = fld(total, 2), total = (k - 1) * dilation.
    assert same_pad((4, 3)) == (2, 1, 1, 1)
    assert same_pad(2) == (1, 0)
    assert same_pad((3,), 2) == (2, 2)
    assert same_pad((2, 2), (3, 2)) == (2, 1, 1, 1)
    # Values: crosscor with w = (a, b) and pad (1, 0) gives y[0] = b * x[0] (JAX "SAME" gives a*x0 + b*x1).
    x = jnp.asarray([1.0, 2.0, 3.0]).reshape(3, 1, 1)
    w = jnp.asarray([10.0, 100.0]).reshape(2, 1, 1)
    np.testing.assert_allclose(crosscor(x, w, pad=same_pad(2))[:, 0, 0], [100, 210, 320])


@pytest.mark.parametrize(
    "xshape,wshape,kw",
    [
        ((6, 3, 2), (3, 4, 3), {}),
        ((6, 4, 2), (3, 2, 4), {"groups": 2, "stride": 2, "pad": (1, 2), "outpad": 1}),
        ((5, 3, 1), (2, 2, 3), {"dilation": 2, "pad": 1, "flipped": True}),
        ((4, 5, 3, 2), (3, 2, 4, 3), {"stride": (2, 3), "pad": (0, 1, 2, 1), "outpad": (1, 2)}),
        ((4, 5, 6, 2), (2, 3, 2, 6), {"groups": 3, "stride": 2, "dilation": (2, 1), "flipped": True}),
        ((3, 3, 2, 4, 1), (2, 2, 2, 3, 4), {"stride": (1, 2, 2), "pad": 1}),
    ],
)
def test_conv_transpose_is_adjoint_of_conv(xshape, wshape, kw):
    # Flux's ConvTranspose is NNlib's ∇conv_data: the input gradient of conv with the same weight.
    rng = np.random.default_rng(5)
    y, w = _f32(rng.standard_normal(xshape)), _f32(rng.standard_normal(wshape))
    n = len(xshape) - 2
    geom = {k: v for k, v in kw.items() if k in ("stride", "pad", "dilation", "outpad")}
    groups = kw.get("groups", 1)
    out_shape = (*conv_transpose_output_size(xshape[:n], wshape[:n], **geom), wshape[-2] * groups, xshape[-1])
    fwd = {k: v for k, v in kw.items() if k != "outpad"}
    x = _f32(rng.standard_normal(out_shape))

    def check(x, y, w):
        out = conv_transpose(y, w, **kw)
        _, back = jax.vjp(lambda x: conv(x, w, **fwd), jnp.zeros_like(x))
        # <conv(x, w), y> == <x, conv_transpose(y, w)> for all w, so their w-gradients agree too.
        gw_t = jax.grad(lambda w: jnp.vdot(x, conv_transpose(y, w, **kw)))(w)
        gw = jax.grad(lambda w: jnp.vdot(conv(x, w, **fwd), y))(w)
        return out, back(y)[0], jnp.vdot(conv(x, w, **fwd), y), jnp.vdot(x, out), gw_t, gw

    out, vjp_out, lhs, rhs, gw_t, gw = _run(check, x, y, w)
    assert out.shape == out_shape
    np.testing.assert_allclose(out, vjp_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4)
    np.testing.assert_allclose(gw_t, gw, rtol=1e-4, atol=1e-4)


def test_conv_transpose_flux_shapes():
    # research/flux-tests.md D7 (Flux.jl/test/layers/conv.jl).
    x = (10, 10, 2, 3)
    assert _shape(conv_transpose, x, (3, 3, 4, 2), pad=same_pad((3, 3))) == (10, 10, 4, 3)
    assert _shape(conv_transpose, x, (3, 3, 2, 2), groups=2) == (12, 12, 4, 3)
    base = _shape(conv_transpose, x, (3, 3, 4, 2), stride=3)
    assert _shape(conv_transpose, x, (3, 3, 4, 2), stride=3, outpad=(1, 0)) == (base[0] + 1, base[1], 4, 3)
    round_trip = lambda x, w: conv_transpose(conv(x, w), w)
    assert _shape(round_trip, (5, 5, 1, 1), (3, 3, 1, 1)) == (5, 5, 1, 1)


def test_conv_jit_and_grad_finite_difference():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((6, 5, 2, 1)), rng.standard_normal((2, 3, 2, 2))
    f = jax.jit(lambda x, w: jnp.sum(jnp.sin(conv(x, w, stride=2, pad=(1, 0, 0, 1)))))
    gx, gw = jax.grad(f, argnums=(0, 1))(_f32(x), _f32(w))

    def ref(x, w):
        return np.sum(np.sin(ref_conv(x, w, stride=2, pad=(1, 0, 0, 1))))

    eps = 1e-6
    for arr, g, which in ((x, gx, 0), (w, gw, 1)):
        for idx in [(0, 0, 0, 0), (1, 2, 1, 0), tuple(s - 1 for s in arr.shape)]:
            e = np.zeros_like(arr)
            e[idx] = eps
            args_p = (x + e, w) if which == 0 else (x, w + e)
            args_m = (x - e, w) if which == 0 else (x, w - e)
            fd = (ref(*args_p) - ref(*args_m)) / (2 * eps)
            np.testing.assert_allclose(g[idx], fd, rtol=1e-3, atol=1e-4)


# --- Padding: NNlib.jl/test/padding.jl (dims are 0-based here) -------------------------------------


def test_pad_constant_and_zeros():
    # NNlib.jl/test/padding.jl, testset "padding constant".
    x = np.random.default_rng(7).random((2, 2, 2)).astype(np.float32)
    y = pad_constant(x, (3, 2, 4))
    assert y.shape == (8, 6, 10)
    np.testing.assert_array_equal(y[3:5, 2:4, 4:6], x)
    assert float(jnp.sum(jnp.abs(y))) == pytest.approx(float(np.sum(x)), rel=1e-6)
    np.testing.assert_array_equal(pad_zeros(x, 2), pad_zeros(x, (2, 2, 2)))
    y = pad_constant(x, (3, 2, 4, 5), 1.2, dims=(0, 2))
    assert y.shape == (7, 2, 11)
    np.testing.assert_array_equal(y[3:5, :, 4:6], x)
    assert np.sum(np.asarray(y) == np.float32(1.2)) == y.size - x.size
    np.testing.assert_array_equal(
        pad_constant(x, (2, 2, 2, 2), 1.2, dims=(0, 2)), pad_constant(x, 2, 1.2, dims=(0, 2))
    )
    assert pad_constant(x, 1, dims=0).shape == (4, 2, 2)
    np.testing.assert_array_equal(pad_zeros(jnp.ones(2), (1, 2)), [0, 1, 1, 0, 0])
    # NNlib docstring: pad_constant(reshape(1:4, 2, 2), (1, 2, 3, 4), 8) is 5×9.
    r = _jl_range((2, 2))
    y = pad_constant(r, (1, 2, 3, 4), 8)
    assert y.shape == (5, 9)
    np.testing.assert_array_equal(y[1:3, 3:5], r)
    with pytest.raises(ValueError):
        pad_constant(x, (2, 1, 3), dims=(0, 1))


def test_pad_modes():
    # NNlib.jl/test/padding.jl, testsets "padding repeat", "padding reflect" and the docstrings.
    r = _jl_range((3, 3))
    np.testing.assert_array_equal(
        pad_repeat(r, (1, 2)), [[1, 4, 7], [1, 4, 7], [2, 5, 8], [3, 6, 9], [3, 6, 9], [3, 6, 9]]
    )
    np.testing.assert_array_equal(
        pad_repeat(r, (2, 2), dims=1), [[1, 1, 1, 4, 7, 7, 7], [2, 2, 2, 5, 8, 8, 8], [3, 3, 3, 6, 9, 9, 9]]
    )
    np.testing.assert_array_equal(
        pad_reflect(r, (2, 2), dims=1), [[7, 4, 1, 4, 7, 4, 1], [8, 5, 2, 5, 8, 5, 2], [9, 6, 3, 6, 9, 6, 3]]
    )
    x4 = _jl_range((3, 3, 1, 1))
    np.testing.assert_array_equal(
        pad_reflect(x4, (1, 0, 1, 0), dims=(0, 1))[:, :, 0, 0],
        [[5, 2, 5, 8], [4, 1, 4, 7], [5, 2, 5, 8], [6, 3, 6, 9]],
    )
    x = np.random.default_rng(8).random((4, 4, 4))
    np.testing.assert_array_equal(pad_reflect(x, (2, 2, 2, 2), dims=(0, 2)), pad_reflect(x, 2, dims=(0, 2)))
    assert pad_repeat(x, (3, 2, 4, 5)).shape == (9, 13, 4)
    v = jnp.asarray([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(pad_symmetric(v, (2, 1)), [2, 1, 1, 2, 3, 3])
    np.testing.assert_array_equal(pad_circular(v, (2, 1)), [2, 3, 1, 2, 3, 1])
    # An int pads the spatial dims only (all but the last two).
    assert pad_circular(jnp.ones((4, 5, 2, 3)), 1).shape == (6, 7, 2, 3)


# --- Batched products: NNlib.jl/src/batched/batchedmul.jl semantics ---------------------------------


def test_batched_mul():
    rng = np.random.default_rng(9)
    A, B = rng.standard_normal((2, 5, 7)), rng.standard_normal((5, 9, 7))
    A4, B4 = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((3, 2, 4, 5))
    Bt, b = rng.standard_normal((9, 5, 7)), rng.standard_normal((5, 7))

    def products(A, B, A4, B4, Bt, b):
        return (
            batched_mul(A, B),
            batched_mul(A, B[:, :, :1]),  # batch size 1 broadcasts
            batched_mul(A[:, :, 0], B),  # a matrix is shared by every batch
            batched_mul(A, B[:, :, 0]),
            batched_mul(A4, B4),  # several batch dims
            batched_mul(A, batched_transpose(Bt)),
            batched_vec(A, b),
        )

    got = _run(products, *map(_f32, (A, B, A4, B4, Bt, b)))
    expected = (
        np.einsum("ijb,jkb->ikb", A, B),
        np.einsum("ijb,jk->ikb", A, B[:, :, 0]),
        np.einsum("ij,jkb->ikb", A[:, :, 0], B),
        np.einsum("ijb,jk->ikb", A, B[:, :, 0]),
        np.einsum("ijab,jkab->ikab", A4, B4),
        np.einsum("ijb,kjb->ikb", A, Bt),
        np.einsum("ijb,jb->ib", A, b),
    )
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batched_transpose(A), np.transpose(A, (1, 0, 2)), rtol=1e-6)
    Z = A + 1j * A
    np.testing.assert_allclose(batched_adjoint(Z), np.conj(np.transpose(Z, (1, 0, 2))), rtol=1e-6)
    with pytest.raises(ValueError):
        _shape(batched_mul, (2, 3, 4), (3, 2, 5))
