"""Tests for fluxjax.nnlib.pooling: maxpool / meanpool / lpnormpool in Flux's layout.

Known answers are NNlib's (`NNlib.jl/test/pooling.jl`, the `*_answer_dict`s, column-major);
sizes from `Flux.jl/test/outputsize.jl` (research/flux-tests.md D8); plus numpy loops.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax.nnlib import PoolDims, grad_maxpool, lpnormpool, maxpool, meanpool
from fluxjax.nnlib.conv import pad_pairs


def _jl(flat, shape):
    """A Julia `reshape([...], shape)`: column-major."""
    return np.reshape(np.asarray(flat, dtype=np.float64), shape, order="F")


def _run(f, *args):
    """`jax.jit(f)(*args)` as numpy arrays."""
    return jax.tree.map(np.asarray, jax.jit(f)(*args))


# From NNlib.jl/test/pooling.jl.
MAXPOOL_ANSWER_DICT = {
    1: {
        "y": np.array([2, 4.]),
        "y_nostride": np.array([2, 3, 4, 5.]),
        "y_pad": np.array([1, 3, 5.]),
        "dx": np.array([0, 2, 0, 4, 0.]),
        "dx_nostride": np.array([0, 2, 3, 4, 5.]),
        "dx_pad": np.array([1, 0, 3, 0, 5.]),
    },
    2: {
        "y": np.array([[7, 17.], [9, 19.]]),
        "y_nostride": np.array([[7, 12, 17], [8, 13, 18], [9, 14, 19], [10, 15, 20.]]),
        "y_pad": np.array([[1, 11, 16], [3, 13, 18], [5, 15, 20.]]),
        "dx": np.array([[0, 0, 0, 0], [0, 7, 0, 17], [0, 0, 0, 0], [0, 9, 0, 19], [0, 0, 0, 0.]]),
        "dx_nostride": np.array([[0, 0, 0, 0], [0, 7, 12, 17], [0, 8, 13, 18], [0, 9, 14, 19], [0, 10,
            15, 20.]]),
        "dx_pad": np.array([[1, 0, 11, 16], [0, 0, 0, 0], [3, 0, 13, 18], [0, 0, 0, 0], [5, 0, 15,
            20.]]),
    },
    3: {
        "y": _jl([27, 29, 37, 39.], (2, 2, 1)),
        "y_nostride": _jl([27, 28, 29, 30, 32, 33, 34, 35, 37, 38, 39, 40, 47, 48, 49, 50, 52, 53, 54,
            55, 57, 58, 59, 60.], (4, 3, 2)),
        "y_pad": _jl([1, 3, 5, 11, 13, 15, 16, 18, 20, 41, 43, 45, 51, 53, 55, 56, 58, 60.], (3, 3, 2)),
        "dx": _jl([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 0,
            29, 0, 0, 0, 0, 0, 0, 0, 37, 0, 39, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0.], (5, 4, 3)),
        "dx_nostride": _jl([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 27, 28, 29, 30, 0, 32, 33, 34, 35, 0, 37, 38, 39, 40, 0, 0, 0, 0, 0, 0, 47, 48, 49, 50,
            0, 52, 53, 54, 55, 0, 57, 58, 59, 60.], (5, 4, 3)),
        "dx_pad": _jl([1, 0, 3, 0, 5, 0, 0, 0, 0, 0, 11, 0, 13, 0, 15, 16, 0, 18, 0, 20, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 41, 0, 43, 0, 45, 0, 0, 0, 0, 0, 51, 0, 53, 0,
            55, 56, 0, 58, 0, 60.], (5, 4, 3)),
    },
}
MEANPOOL_ANSWER_DICT = {
    1: {
        "y": np.array([1.5, 3.5]),
        "y_nostride": np.array([1.5, 2.5, 3.5, 4.5]),
        "y_pad": np.array([0.5, 2.5, 4.5]),
        "dx": np.array([0.75, 0.75, 1.75, 1.75, 0.0]),
        "dx_nostride": np.array([0.75, 2.0, 3.0, 4.0, 2.25]),
        "dx_pad": np.array([0.25, 1.25, 1.25, 2.25, 2.25]),
    },
    2: {
        "y": np.array([[4.0, 14.0], [6.0, 16.0]]),
        "y_nostride": np.array([[4.0, 9.0, 14.0], [5.0, 10.0, 15.0], [6.0, 11.0, 16.0], [7.0, 12.0,
            17.0]]),
        "y_pad": np.array([[0.25, 4.25, 4.0], [1.25, 10.0, 8.75], [2.25, 12.0, 9.75]]),
        "dx": np.array([[1.0, 1.0, 3.5, 3.5], [1.0, 1.0, 3.5, 3.5], [1.5, 1.5, 4.0, 4.0], [1.5, 1.5,
            4.0, 4.0], [0.0, 0.0, 0.0, 0.0]]),
        "dx_nostride": np.array([[1.0, 3.25, 5.75, 3.5], [2.25, 7.0, 12.0, 7.25], [2.75, 8.0, 13.0,
            7.75], [3.25, 9.0, 14.0, 8.25], [1.75, 4.75, 7.25, 4.25]]),
        "dx_pad": np.array([[0.0625, 1.0625, 1.0625, 1.0], [0.3125, 2.5, 2.5, 2.1875], [0.3125, 2.5,
            2.5, 2.1875], [0.5625, 3.0, 3.0, 2.4375], [0.5625, 3.0, 3.0, 2.4375]]),
    },
    3: {
        "y": _jl([14.0, 16.0, 24.0, 26.0], (2, 2, 1)),
        "y_nostride": _jl([14.0, 15.0, 16.0, 17.0, 19.0, 20.0, 21.0, 22.0, 24.0, 25.0, 26.0, 27.0, 34.0,
            35.0, 36.0, 37.0, 39.0, 40.0, 41.0, 42.0, 44.0, 45.0, 46.0, 47.0], (4, 3, 2)),
        "y_pad": _jl([0.125, 0.625, 1.125, 2.125, 5.0, 6.0, 2.0, 4.375, 4.875, 7.75, 16.25, 17.25,
            19.25, 40.0, 42.0, 11.5, 23.75, 24.75], (3, 3, 2)),
        "dx": _jl([1.75, 1.75, 2.0, 2.0, 0.0, 1.75, 1.75, 2.0, 2.0, 0.0, 3.0, 3.0, 3.25, 3.25, 0.0, 3.0,
            3.0, 3.25, 3.25, 0.0, 1.75, 1.75, 2.0, 2.0, 0.0, 1.75, 1.75, 2.0, 2.0, 0.0, 3.0, 3.0, 3.25,
            3.25, 0.0, 3.0, 3.0, 3.25, 3.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], (5, 4, 3)),
        "dx_nostride": _jl([1.75, 3.625, 3.875, 4.125, 2.125, 4.125, 8.5, 9.0, 9.5, 4.875, 5.375, 11.0,
            11.5, 12.0, 6.125, 3.0, 6.125, 6.375, 6.625, 3.375, 6.0, 12.25, 12.75, 13.25, 6.75, 13.25,
            27.0, 28.0, 29.0, 14.75, 15.75, 32.0, 33.0, 34.0, 17.25, 8.5, 17.25, 17.75, 18.25, 9.25,
            4.25, 8.625, 8.875, 9.125, 4.625, 9.125, 18.5, 19.0, 19.5, 9.875, 10.375, 21.0, 21.5, 22.0,
            11.125, 5.5, 11.125, 11.375, 11.625, 5.875], (5, 4, 3)),
        "dx_pad": _jl([0.015625, 0.078125, 0.078125, 0.140625, 0.140625, 0.265625, 0.625, 0.625, 0.75,
            0.75, 0.265625, 0.625, 0.625, 0.75, 0.75, 0.25, 0.546875, 0.546875, 0.609375, 0.609375,
            0.96875, 2.03125, 2.03125, 2.15625, 2.15625, 2.40625, 5.0, 5.0, 5.25, 5.25, 2.40625, 5.0,
            5.0, 5.25, 5.25, 1.4375, 2.96875, 2.96875, 3.09375, 3.09375, 0.96875, 2.03125, 2.03125,
            2.15625, 2.15625, 2.40625, 5.0, 5.0, 5.25, 5.25, 2.40625, 5.0, 5.0, 5.25, 5.25, 1.4375,
            2.96875, 2.96875, 3.09375, 3.09375], (5, 4, 3)),
    },
}
LPNORMPOOL_ANSWER_DICT = {
    1: {
        "y": np.array([2.019312856150994, 4.221163518110637]),
        "y_nostride": np.array([2.080083823051904, 3.2710663101885897, 4.497941445275415,
            5.738793548317167]),
        "y_pad": np.array([1.0, 3.605551275463989, 6.4031242374328485]),
        "dx": np.array([0.17258020254042603, 1.9525221042381296, 1.2774501198988355, 3.496467771732918,
            0.0]),
        "dx_nostride": np.array([0.48074985676913606, 3.1458422620080637, 4.752311710531486,
            6.345225258061685, 4.356316321455918]),
        "dx_pad": np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
        "p": 4.5,
        "p_nostride": 3.0,
        "p_pad": 2.0,
    },
    2: {
        "y": np.array([[8.71909, 24.9703], [11.7336, 28.3804]]),
        "y_nostride": np.array([[11.1128, 23.134, 35.5704], [13.4219, 25.6082, 38.0707], [15.8033,
            28.0907, 40.5735], [18.2249, 30.5795, 43.0782]]),
        "y_pad": np.array([[1.0, 11.3616, 16.0], [3.19158, 15.9662, 21.3545], [5.56869, 18.7771,
            23.7903]]),
        "dx": np.array([[0.33866, 4.97727, 7.30092, 12.8076], [0.957876, 6.27208, 8.31879, 14.0269],
            [1.51693, 6.6057, 8.79844, 14.3351], [2.33547, 7.8822, 9.83293, 15.5461], [0.0, 0.0, 0.0,
            0.0]]),
        "dx_nostride": np.array([[3.33359, 19.9471, 35.7329, 23.8564], [9.89551, 44.627, 76.2257,
            50.0307], [13.231, 50.9101, 82.5686, 53.2022], [16.4888, 57.223, 88.9133, 56.3742],
            [9.54591, 30.9869, 46.8371, 29.3524]]),
        "dx_pad": np.array([[1.0, 2.30261, 10.4791, 16.0], [0.992125, 2.0321, 7.81903, 12.075],
            [2.73398, 2.83743, 9.5512, 13.9299], [2.43512, 2.98652, 9.0132, 13.5608], [4.25398, 3.8865,
            10.7099, 15.4161]]),
        "p": 2.5,
        "p_nostride": 1.5,
        "p_pad": 3.5,
    },
}


def _x_for(dx):
    """NNlib's test input: `reshape(Float64[1:prod(size(dx))], size(dx)..., 1, 1)`, as float32."""
    n = dx.size
    return jnp.asarray(_jl(np.arange(1, n + 1), dx.shape + (1, 1)), jnp.float32)


def _pool_and_grad(pool, x):
    """NNlib's `y = pool(x, pdims)` and `∇pool(y, y, x, pdims)` (the vjp with cotangent y)."""
    y, back = jax.vjp(pool, x)
    return y, back(y)[0]


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("name", ["maxpool", "meanpool"])
def test_pool_known_answers(name, rank):
    # NNlib.jl/test/pooling.jl, testset "pool$(rank)d": PoolDims(x, 2), stride=1, padding=1.
    pool = {"maxpool": maxpool, "meanpool": meanpool}[name]
    ans = {"maxpool": MAXPOOL_ANSWER_DICT, "meanpool": MEANPOOL_ANSWER_DICT}[name][rank]
    x = _x_for(ans["dx"])
    settings = {"": {}, "_nostride": {"stride": 1}, "_pad": {"pad": 1}}
    identity, out = _run(
        lambda x: (
            pool(x, 1),
            {s: _pool_and_grad(lambda x, kw=kw: pool(x, 2, **kw), x) for s, kw in settings.items()},
        ),
        x,
    )
    np.testing.assert_array_equal(identity, x)
    for suffix, (y, dx) in out.items():
        np.testing.assert_allclose(y[..., 0, 0], ans["y" + suffix], rtol=1e-6, err_msg=suffix)
        np.testing.assert_allclose(dx[..., 0, 0], ans["dx" + suffix], rtol=1e-6, err_msg=suffix)


@pytest.mark.parametrize("rank", [1, 2])
def test_lpnormpool_known_answers(rank):
    # NNlib.jl/test/pooling.jl, lpnormpool tests (atol = 1e-3 as there).
    ans = LPNORMPOOL_ANSWER_DICT[rank]
    x = _x_for(ans["dx"])
    settings = {"": {}, "_nostride": {"stride": 1}, "_pad": {"pad": 1}}
    out = _run(
        lambda x: {
            s: _pool_and_grad(lambda x, p=ans["p" + s], kw=kw: lpnormpool(x, p, 2, **kw), x)
            for s, kw in settings.items()
        },
        x,
    )
    for suffix, (y, dx) in out.items():
        np.testing.assert_allclose(y[..., 0, 0], ans["y" + suffix], atol=1e-3, err_msg=suffix)
        np.testing.assert_allclose(dx[..., 0, 0], ans["dx" + suffix], atol=1e-3, rtol=1e-4, err_msg=suffix)


def ref_pool(x, k, *, stride=None, pad=0, mode="max", count_include_pad=True, p=2.0):
    """Pooling by definition: loop over output positions, skipping padded positions."""
    n = x.ndim - 2
    stride = k if stride is None else stride
    pads = pad_pairs(pad, n)
    out = [(x.shape[i] + pads[i][0] + pads[i][1] - k[i]) // stride[i] + 1 for i in range(n)]
    y = np.zeros(out + list(x.shape[-2:]))
    for o in itertools.product(*map(range, out)):
        vals, count = [], 0
        for kk in itertools.product(*map(range, k)):
            i = [o[d] * stride[d] + kk[d] - pads[d][0] for d in range(n)]
            if all(0 <= i[d] < x.shape[d] for d in range(n)):
                vals.append(x[tuple(i)])
                count += 1
        v = np.stack(vals)
        if mode == "max":
            y[o] = v.max(0)
        elif mode == "mean":
            y[o] = v.sum(0) / (np.prod(k) if count_include_pad else count)
        else:
            y[o] = (v**p).sum(0) ** (1 / p)
    return y


@pytest.mark.parametrize(
    "shape,k,kw",
    [
        ((7, 6, 2, 3), (2, 3), {}),
        ((7, 6, 2, 3), (3, 2), {"stride": (2, 1), "pad": (1, 0, 1, 1)}),
        ((7, 6, 2, 3), (3, 3), {"stride": 1, "pad": 1}),
        ((9, 2, 2), (4,), {"stride": 3, "pad": (2, 1)}),
        ((5, 4, 6, 1, 2), (2, 2, 3), {"stride": (1, 2, 2), "pad": (1, 1, 0)}),
    ],
)
def test_pooling_matches_numpy_loop(shape, k, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    xa = rng.random(shape) + 0.1  # positive, for lpnormpool
    got = _run(
        lambda x, xa: (
            maxpool(x, k, **kw),
            meanpool(x, k, **kw),
            meanpool(x, k, count_include_pad=False, **kw),
            lpnormpool(xa, 3, k, **kw),
        ),
        jnp.asarray(x, jnp.float32),
        jnp.asarray(xa, jnp.float32),
    )
    stride = kw.get("stride", k)
    kw_ref = {"stride": (stride,) * len(k) if isinstance(stride, int) else stride, "pad": kw.get("pad", 0)}
    expected = (
        ref_pool(x, k, mode="max", **kw_ref),
        ref_pool(x, k, mode="mean", **kw_ref),
        ref_pool(x, k, mode="mean", count_include_pad=False, **kw_ref),
        ref_pool(xa, k, mode="lp", p=3.0, **kw_ref),
    )
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_meanpool_count_include_pad_known_answer():
    # NNlib.jl/test/pooling.jl, testset "meanpool count_include_pad (issue #218)".
    x = jnp.asarray(_jl(np.arange(1, 17), (4, 4, 1, 1)), jnp.float32)
    ye, yi = _run(
        lambda x: (
            meanpool(x, (2, 2), pad=1, stride=2, count_include_pad=False),
            meanpool(x, (2, 2), pad=1, stride=2),
        ),
        x,
    )
    np.testing.assert_allclose(ye[:, :, 0, 0], [[1.0, 7.0, 13.0], [2.5, 8.5, 14.5], [4.0, 10.0, 16.0]])
    # Counting the padded zeros (the default) divides by 4 everywhere.
    np.testing.assert_allclose(yi[0, 0, 0, 0], 1.0 / 4)
    np.testing.assert_allclose(yi[1, 1, 0, 0], (6 + 7 + 10 + 11) / 4)


def test_pool_output_sizes():
    # research/flux-tests.md D8 (Flux.jl/test/outputsize.jl): MaxPool((2,2)) on 10 gives 5,
    # stride 1 on 5 gives 4, stride 2 and pad 3 on 5 gives 5; D9: 27 -> 13 with MaxPool((2,2)).
    def shape(n, **kw):
        spec = jax.ShapeDtypeStruct((n, n, 3, 1), jnp.float32)
        return jax.eval_shape(lambda x: maxpool(x, (2, 2), **kw), spec).shape

    assert shape(10) == (5, 5, 3, 1)
    assert shape(5, stride=1) == (4, 4, 3, 1)
    assert shape(5, stride=2, pad=3) == (5, 5, 3, 1)
    assert shape(27) == (13, 13, 3, 1)


def test_maxpool_pads_with_minus_infinity_and_lp_relations():
    # Padding never wins a max: all-negative input keeps negative border outputs.
    x = -jnp.arange(1.0, 17.0).reshape(4, 4, 1, 1)
    rng = np.random.default_rng(1)
    xr = jnp.asarray(rng.random((6, 6, 2, 2)), jnp.float32)
    y, lp1, mean1, lp2, mean2 = _run(
        lambda x, xr: (
            maxpool(x, (3, 3), pad=1, stride=1),
            lpnormpool(xr, 1, (2, 3)),
            meanpool(xr, (2, 3)),
            lpnormpool(xr, 2, (2, 3)),
            meanpool(xr**2, (2, 3)),
        ),
        x,
        xr,
    )
    assert (y < 0).all()
    np.testing.assert_allclose(y[0, 0, 0, 0], -1.0)
    # NNlib docstring: lpnormpool(x, 1, k) ./ prod(k) ≈ meanpool(x, k), and p = 2 with x.^2.
    np.testing.assert_allclose(lp1 / 6, mean1, rtol=1e-5)
    np.testing.assert_allclose(lp2**2 / 6, mean2, rtol=1e-5)
    with pytest.raises(ValueError):
        lpnormpool(xr, 0, (2, 2))


def ref_maxpool_choice(x, k, *, stride, pad, dilation):
    """NNlib's `∇maxpool_direct!` by loops: for each window, the flat (C-order) index in `x` of the
    element that gets `dy` (-1 for none), and the max of the window's in-bounds elements. The window is
    scanned with the first spatial dim fastest, padding skipped; NNlib's maximum starts at
    `nextfloat(-Inf)`, so an all-`-Inf` window chooses nothing. (NNlib compares with `≈`; exact here.)"""
    n = x.ndim - 2
    pads = pad_pairs(pad, n)
    out = [(x.shape[i] + sum(pads[i]) - (k[i] - 1) * dilation[i] - 1) // stride[i] + 1 for i in range(n)]
    offsets = [o[::-1] for o in itertools.product(*map(range, k[::-1]))]
    flat = np.arange(x.size).reshape(x.shape)
    choice = np.full(out + list(x.shape[-2:]), -1)
    y = np.full(choice.shape, -np.inf)
    for o in itertools.product(*map(range, out)):
        idxs = [i for i in (tuple(o[d] * stride[d] - pads[d][0] + off[d] * dilation[d] for d in range(n))
                            for off in offsets) if all(0 <= i[d] < x.shape[d] for d in range(n))]
        m = np.full(x.shape[-2:], np.nextafter(np.float32(-np.inf), np.float32(0)))
        for i in idxs:
            m = np.where(x[i] > m, x[i], m)
            y[o] = np.maximum(y[o], x[i])
        for i in idxs[::-1]:
            choice[o] = np.where(x[i] == m, flat[i], choice[o])
    return y, choice


def test_maxpool_grad_tie_goes_to_first_maximum_in_column_major_order():
    # x[w, h] = [0 5; 5 0]: NNlib scans w fastest, so x[2, 1] (here [1, 0]) is the first maximum.
    x = jnp.asarray([[0.0, 5.0], [5.0, 0.0]])[:, :, None, None]
    want = np.array([[0.0, 0.0], [1.0, 0.0]])
    y = maxpool(x, (2, 2))
    grads = [
        *_run(lambda x: (jax.grad(lambda x: jnp.sum(maxpool(x, (2, 2))))(x),
                         grad_maxpool(jnp.ones_like(y), y, x, PoolDims(x.shape, (2, 2)))), x),
        *(fluxjax.gradient(lambda x, m=m: jnp.sum(m(x)), x)[0]
          for m in (fluxjax.MaxPool((2, 2)), fluxjax.GlobalMaxPool(), fluxjax.AdaptiveMaxPool((1, 1)))),
    ]
    for g in grads:
        np.testing.assert_array_equal(np.asarray(g)[:, :, 0, 0], want)


@pytest.mark.parametrize(
    "shape,k,kw",
    [
        ((9, 2, 2), (3,), {"stride": 1, "pad": 1}),
        ((9, 2, 2), (3,), {"stride": 2, "pad": (2, 1), "dilation": 2}),
        ((7, 6, 2, 2), (2, 2), {}),
        ((7, 6, 2, 2), (3, 2), {"stride": (2, 1), "pad": (1, 0, 1, 1)}),
        ((7, 7, 1, 2), (3, 3), {"stride": 1, "pad": 1, "dilation": (2, 1)}),
        ((5, 4, 6, 1, 2), (2, 2, 3), {"stride": (1, 2, 2), "pad": (1, 1, 0)}),
        ((9, 8, 2, 1), (5, 4), {"stride": (2, 3), "pad": (1, 2, 0, 1)}),  # > 16 elements: indexed path
        ((6, 5, 2, 1), (6, 5), {}),
    ],
)
def test_maxpool_grad_matches_nnlib_scan_order(shape, k, kw):
    # Integer-valued x has many ties; in 1-D its first entries are -Inf, so a window holds only -Inf.
    rng = np.random.default_rng(0)
    n = len(k)
    stride = np.broadcast_to(kw.get("stride", k), (n,))
    dilation = np.broadcast_to(kw.get("dilation", 1), (n,))
    x = rng.integers(0, 3, shape).astype(np.float32)
    x[: (k[0] - 1) * dilation[0] + 1 if n == 1 else 1] = -np.inf
    y_ref, choice = ref_maxpool_choice(x, k, stride=stride, pad=kw.get("pad", 0), dilation=dilation)
    dy = rng.integers(1, 9, y_ref.shape).astype(np.float32)
    t = rng.integers(1, 9, shape).astype(np.float32)
    dx_ref = np.zeros(x.size, np.float32)
    np.add.at(dx_ref, choice[choice >= 0], dy[choice >= 0])
    ty_ref = np.where(choice >= 0, t.ravel()[choice], 0)

    def f(x, dy, t):
        pool = lambda x: maxpool(x, k, **kw)
        y, back = jax.vjp(pool, x)
        return y, back(dy)[0], jax.jvp(pool, (x,), (t,))[1]

    y, dx, ty = _run(f, jnp.asarray(x), jnp.asarray(dy), jnp.asarray(t))
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(dx, dx_ref.reshape(shape))
    np.testing.assert_array_equal(ty, ty_ref)
