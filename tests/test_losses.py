"""Flux.Losses. Expected values are from `Flux.jl/test/losses.jl` (and `test/ctc.jl`, NNlib's
`test/ctc.jl` for ctc_loss), re-derived in /work/shared/research/flux-verify/losses_check.py.

Most cases run in float64 (`jax.enable_x64`) so that Flux's Float64 numbers are checked to
Julia's `≈` tolerance; float32 behaviour is checked separately.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import losses
from fluxjax.losses import (
    binary_focal_loss,
    binarycrossentropy,
    crossentropy,
    ctc_loss,
    dice_coeff_loss,
    focal_loss,
    hinge_loss,
    huber_loss,
    kldivergence,
    label_smoothing,
    logitbinarycrossentropy,
    logitcrossentropy,
    mae,
    mse,
    msle,
    poisson_loss,
    siamese_contrastive_loss,
    squared_hinge_loss,
    tversky_loss,
    xlogx,
    xlogy,
)
from fluxjax.losses.functions import _check_sizes

RTOL64 = 1.5e-8  # Julia's default ≈ for Float64


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def approx(a, b, rtol=RTOL64, atol=0.0):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def onehotbatch(labels, classes):
    return np.array([[lab == c for lab in labels] for c in classes], dtype=np.float64)


def softmax(x, axis=0):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# Flux.jl/test/losses.jl "xlogx & xlogy"
def test_xlogx_xlogy(x64):
    assert float(xlogx(0)) == 0
    assert np.isnan(float(xlogx(np.nan)))
    approx(xlogx(2.0), 2.0 * np.log(2.0))
    assert float(xlogy(0, 1)) == 0
    assert float(xlogy(0, 0)) == 0
    assert np.isnan(float(xlogy(np.nan, 1)))
    assert np.isnan(float(xlogy(1, np.nan)))
    assert np.isnan(float(xlogy(np.nan, np.nan)))
    approx(xlogy(2, 3), 2.0 * np.log(3.0))


def test_xlogy_gradients():
    gx, gy = jax.grad(xlogy, argnums=(0, 1))(2.0, 3.0)
    approx(gx, np.log(3.0), rtol=1e-6)
    approx(gy, 2.0 / 3.0, rtol=1e-6)
    # x == 0: finite gradient w.r.t. y even at y == 0 (Flux's rule gives 0/0 there)
    assert float(jax.grad(xlogy, argnums=1)(0.0, 0.0)) == 0
    # a constant zero label never multiplies log(0): crossentropy with eps=0 and yhat == 0
    g = jax.grad(lambda yh: crossentropy(yh, jnp.array([0.0, 1.0]), eps=0))(jnp.array([0.0, 1.0]))
    assert np.all(np.isfinite(np.asarray(g)))
    approx(jax.grad(xlogx)(2.0), np.log(2.0) + 1, rtol=1e-6)
    # second derivatives through the custom_jvp, reverse-over-reverse and forward-over-reverse
    approx(jax.jit(jax.grad(jax.grad(xlogy, argnums=1), argnums=1))(2.0, 3.0), -2.0 / 9.0, rtol=1e-6)
    approx(jax.jit(jax.hessian(xlogy, argnums=1))(2.0, 3.0), -2.0 / 9.0, rtol=1e-6)


# Flux.jl/test/losses.jl: regression-style y's
def test_mse_mae_huber(x64):
    y = np.array([1, 1, 0, 0])
    yh = np.array([0.9, 0.1, 0.1, 0.9])
    approx(mse(yh, y), (0.1**2 + 0.9**2) / 2)
    assert float(mse(0 + 0j, 1 + 1j)) == 2  # complex values
    approx(mae(yh, y), 1 / 2)
    approx(huber_loss(yh, y), 0.20500000000000002)
    # beyond delta: delta * (|e| - delta/2)
    approx(huber_loss(np.array([3.0]), np.array([0.0]), delta=1.0), 2.5)
    approx(huber_loss(np.array([3.0]), np.array([0.0]), delta=2.0), 4.0)


def test_msle(x64):
    approx(msle(np.array([345.0, 332.0, 789.0]), np.array([123.0, 456.0, 789.0])), 0.38813985859136585)


# onehot y's: y = onehotbatch([1, 1, 0, 0], 0:1), ŷ = [.1 .9; .9 .1; .9 .1; .1 .9]'
Y = onehotbatch([1, 1, 0, 0], [0, 1])
YH = np.array([[0.1, 0.9], [0.9, 0.1], [0.9, 0.1], [0.1, 0.9]]).T
V = np.log(0.1 / 0.9)
LOGYH = np.array([[V, 0.0], [0.0, V], [0.0, V], [V, 0.0]]).T
LOSSVALUE = 1.203972804325936
LOSSVALUE_SMOOTHED = 1.2039728043259348
YL = onehotbatch([1], [0, 1])
SF = 0.1
YLS = np.array([[SF, 1 - SF]]).T
YLP = np.array([[0.9, 0.1]]).T
LOGYLP = np.array([[0.0, V]]).T


def test_crossentropy(x64):
    approx(
        crossentropy(np.array([0.1, 0.0, 0.9]), np.array([0.1, 0.0, 0.9])), crossentropy(np.array([0.1, 0.9]), np.array([0.1, 0.9]))
    )
    approx(crossentropy(YH, Y), LOSSVALUE)
    approx(crossentropy(YH, label_smoothing(Y, 0.1)), LOSSVALUE_SMOOTHED)
    approx(crossentropy(YLP, label_smoothing(YL, 2 * SF)), -np.sum(YLS * np.log(YLP)))
    approx(crossentropy(YLP, YL), -np.sum(YL * np.log(YLP)))
    ya = onehotbatch([1, 1, 1, 0, 0], [0, 1])
    assert float(crossentropy(ya.astype(np.float32), ya, eps=0)) == 0
    assert float(crossentropy(ya, ya, eps=0)) == 0
    y_sim = ya * (1 - 2 * SF) + SF
    y_dis = y_sim[::-1].copy()
    ya_smoothed = label_smoothing(ya, 2 * SF)
    assert crossentropy(y_sim, ya) < crossentropy(y_sim, ya_smoothed)
    assert crossentropy(y_dis, ya) > crossentropy(y_dis, ya_smoothed)


def test_crossentropy_bool_labels_and_dims():
    # bool one-hot labels (onehotbatch output) are cast to yhat's dtype
    approx(crossentropy(YH.astype(np.float32), Y.astype(bool)), LOSSVALUE, rtol=1e-6)
    # dims: the class axis; the transposed problem with dims=1 gives the same value
    approx(crossentropy(YH.T, Y.T, dims=1), LOSSVALUE, rtol=1e-6)
    approx(logitcrossentropy(LOGYH.T, Y.T, dims=1), LOSSVALUE, rtol=1e-6)
    # agg variants: sum over the 4 columns, identity keeps Flux's 1 x N shape
    approx(crossentropy(YH, Y, agg=jnp.sum), 4 * LOSSVALUE, rtol=1e-6)
    approx(crossentropy(YH, Y, agg=sum), 4 * LOSSVALUE, rtol=1e-6)  # builtin sum -> jnp.sum
    per = crossentropy(YH, Y, agg=lambda x: x)
    assert per.shape == (1, 4)
    approx(per.mean(), LOSSVALUE, rtol=1e-6)


def test_logitcrossentropy(x64):
    approx(logitcrossentropy(LOGYH, Y), LOSSVALUE)
    lsm = LOGYLP - np.log(np.sum(np.exp(LOGYLP)))
    approx(logitcrossentropy(LOGYLP, YL), -np.sum(YL * lsm))
    approx(logitcrossentropy(LOGYLP, label_smoothing(YL, 2 * SF)), -np.sum(YLS * lsm))


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_binarycrossentropy(x64):
    rng = np.random.default_rng(0)
    logyh, y = rng.standard_normal(3), rng.random(3)
    yls = y * (1 - 2 * SF) + SF
    s = _sig(logyh)
    approx(
        binarycrossentropy(s, label_smoothing(y, 2 * SF, dims=None), eps=0, agg=lambda x: x),
        -yls * np.log(s) - (1 - yls) * np.log(1 - s),
    )
    approx(binarycrossentropy(s, y, eps=0), np.mean(-y * np.log(s) - (1 - y) * np.log(1 - s)))
    e = np.finfo(np.float64).eps
    approx(binarycrossentropy(s, y), np.mean(-y * np.log(s + e) - (1 - y) * np.log(1 - s + e)))
    approx(binarycrossentropy(np.array([0.1, 0.2, 0.9]), 1), -np.mean(np.log([0.1, 0.2, 0.9])))


def test_logitbinarycrossentropy(x64):
    rng = np.random.default_rng(1)
    logyh, y = rng.standard_normal(3), rng.random(3)
    ys = label_smoothing(y, 0.2)
    approx(logitbinarycrossentropy(logyh, ys, agg=lambda x: x), binarycrossentropy(_sig(logyh), ys, eps=0, agg=lambda x: x))
    approx(logitbinarycrossentropy(logyh, y), binarycrossentropy(_sig(logyh), y, eps=0))


def test_label_smoothing(x64):
    y = onehotbatch([1], [0, 1])
    np.testing.assert_array_equal(label_smoothing(y, 0.2), np.array([[0.1, 0.9]]).T)
    # Flux's dims=0 (binary) is dims=None here, applied elementwise
    approx(label_smoothing(y, 0.2, dims=None), y * 0.8 + 0.1)
    approx(label_smoothing(1.0, 0.2, dims=None), 0.9)
    with pytest.raises(ValueError):
        label_smoothing(np.array([0.0, 0.0, 1.0, 0.0]), 1.2)
    with pytest.raises(ValueError):
        label_smoothing(np.array([0.0, 0.0, 1.0, 0.0]), 0.0)
    with pytest.raises(ValueError):
        label_smoothing(y, 0.2, dims=1)


def test_label_smoothing_dtype():
    assert label_smoothing(np.array([[True], [False]]), 0.2).dtype == jnp.float32
    approx(label_smoothing(np.array([[True], [False]]), 0.2), [[0.9], [0.1]], rtol=1e-6)


def test_kldivergence(x64):
    approx(
        kldivergence(np.array([0.1, 0.0, 0.9]), np.array([0.1, 0.0, 0.9])), kldivergence(np.array([0.1, 0.9]), np.array([0.1, 0.9]))
    )
    y = np.array([[1, 2, 3]])
    yh = np.array([[4.0, 5.0, 6.0]])
    approx(kldivergence(yh, y), -1.7661057888493457)
    approx(kldivergence(y, y), 0, atol=1e-14)
    # docstring: p1 = [1 0; 0 1], p2 = fill(0.5, 2, 2)
    p1, p2 = np.eye(2), np.full((2, 2), 0.5)
    approx(kldivergence(p2, p1), np.log(2))
    approx(kldivergence(p2, p1, agg=jnp.sum), 2 * np.log(2))
    assert float(kldivergence(p2, p2, eps=0)) == 0
    assert np.isinf(float(kldivergence(p1, p2, eps=0)))


def test_hinge(x64):
    y = np.array([[1, 2, 3, 4]])
    yh = np.array([[5.0, 6.0, 7.0, 8.0]])
    approx(hinge_loss(yh, y), 0)
    approx(hinge_loss(y, 0.5 * y), 0.125)
    approx(squared_hinge_loss(yh, y), 0)
    approx(squared_hinge_loss(y, 0.5 * y), 0.0625)
    # docstring examples
    approx(hinge_loss(np.array([0.1, 0.3, 1, 1.5]), np.array([1, -1, 1, 1])), 0.55)
    approx(squared_hinge_loss(np.array([0.1, 0.3, 1, 1.5]), np.array([1, -1, 1, 1])), 0.625)


def test_poisson(x64):
    y = np.array([[0.1, 0.2, 0.3]])
    yh = np.array([[0.4, 0.5, 0.6]])
    approx(poisson_loss(yh, y), 0.6278353988097339)
    approx(poisson_loss(y, y), 0.5044459776946685)


def test_dice_tversky(x64):
    y = np.array([[1.0, 0.5, 0.3, 2.4]])
    yh = np.array([[0, 1.4, 0.5, 1.2]])
    approx(dice_coeff_loss(yh, y), 0.2799999999999999)
    approx(dice_coeff_loss(y, y), 0.0, atol=1e-15)
    approx(tversky_loss(yh, y), -0.06772009029345383)
    approx(tversky_loss(yh, y, beta=0.8), -0.09490740740740744)
    approx(tversky_loss(y, y), -0.5576923076923075)


def test_binary_focal_loss(x64):
    y = np.array([[0, 1, 0], [1, 0, 1]])
    yh = np.array([[0.268941, 0.5, 0.268941], [0.731059, 0.5, 0.731059]])
    y1 = np.array([[1, 0], [0, 1]])
    yh1 = np.array([[0.6, 0.3], [0.4, 0.7]])
    approx(binary_focal_loss(yh, y), 0.0728675615927385)
    approx(binary_focal_loss(yh1, y1), 0.05691642237852222)
    approx(binary_focal_loss(yh, y, gamma=0.0), binarycrossentropy(yh, y))


FOCAL_Y = np.array([[1, 0, 0, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 0]])


def _focal_yh():
    # Julia: softmax(reshape(-7:7, 3, 5) .* 1f0), column-major reshape, Float32
    return softmax(np.arange(-7, 8, dtype=np.float32).reshape((3, 5), order="F"))


def test_focal_loss():
    yh = _focal_yh()  # float32, as in Flux's test
    approx(focal_loss(yh, FOCAL_Y), 1.1277571935622628, rtol=3.4e-4)
    approx(focal_loss(yh, FOCAL_Y, gamma=0), crossentropy(yh, FOCAL_Y), rtol=1e-6)
    with jax.enable_x64(True):
        yh1 = np.array([[0.4, 0.2], [0.5, 0.5], [0.1, 0.3]])
        y1 = np.array([[1, 0], [0, 0], [0, 1]])
        approx(focal_loss(yh1, y1), 0.45990566879720157)


def test_siamese_contrastive_loss():
    y = np.array([[1, 0], [0, 0], [0, 1]])
    yh = np.array([[0.4, 0.2], [0.5, 0.5], [0.1, 0.3]])
    y1 = FOCAL_Y
    yh1 = _focal_yh()
    with jax.enable_x64(True):
        approx(siamese_contrastive_loss(yh, y), 0.2333333333333333)
        approx(siamese_contrastive_loss(yh, y, margin=0.5), 0.10000000000000002)
        approx(siamese_contrastive_loss(yh, y, margin=1.5), 0.5333333333333333)
        approx(siamese_contrastive_loss(yh, y, margin=1), siamese_contrastive_loss(yh, y))
        approx(siamese_contrastive_loss(y, y), 0.0)
        approx(siamese_contrastive_loss(y1, y1), 0.0)
        approx(siamese_contrastive_loss(yh, y, margin=0), 0.09166666666666667)
        yh2 = np.array([0.6, 0.4, 0.1, 0.2, 0.7])
        y2 = np.array([1, 0, 0, 1, 1])
        approx(siamese_contrastive_loss(yh2, y2), 0.21200000000000005)
        approx(siamese_contrastive_loss(yh2, yh2), 0.18800000000000003)
    # Float32 cases
    approx(siamese_contrastive_loss(yh1, y1), 0.32554644, rtol=3.4e-4)
    approx(siamese_contrastive_loss(yh1, y1, margin=0.5), 0.16271012, rtol=3.4e-4)
    approx(siamese_contrastive_loss(yh1, y1, margin=1.5), 0.6532292, rtol=3.4e-4)
    approx(siamese_contrastive_loss(yh1, y1, margin=0), 0.13161165, rtol=3.4e-4)
    with pytest.raises(ValueError, match="Margin must be non-negative"):
        siamese_contrastive_loss(yh1, y1, margin=-0.5)
    with pytest.raises(ValueError, match="Margin must be non-negative"):
        siamese_contrastive_loss(yh, y, margin=-1)


# Flux.jl/test/ctc.jl and NNlib.jl/test/ctc.jl ("tests using hand-calculated values");
# labels are 0-based here (Julia's y = [1, 2] is [0, 1]); the blank is the last class.
CTC_X1 = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 1.0], [3.0, 3.0, 2.0]])
CTC_G1 = np.array([[-0.317671, -0.427729, 0.665241], [0.244728, -0.0196172, -0.829811], [0.0729422, 0.447346, 0.16457]])
CTC_X2 = np.array([[-3.0, 12.0, 8.0, 15.0], [4.0, 20.0, -2.0, 20.0], [8.0, -33.0, 6.0, 5.0]])
CTC_G2 = np.array(
    [
        [-2.29294774655333e-06, -0.999662657278862, 1.75500863563993e-06, 0.00669284889063],
        [0.017985914969696, 0.999662657278861, -1.9907078755387e-06, -0.006693150917307],
        [-0.01798362202195, -2.52019580677916e-20, 2.35699239251042e-07, 3.02026677058789e-07],
    ]
)


def test_ctc_loss_values(x64):
    for x, g_expected, expected in [(CTC_X1, CTC_G1, 3.6990738275138035), (CTC_X2, CTC_G2, 8.02519869363453)]:
        val, g = jax.value_and_grad(ctc_loss)(x, np.array([0, 1]))
        approx(val, expected)
        approx(g, g_expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("jit", [True, False])
def test_ctc_gradient_with_the_labels_as_an_argument(jit):
    """Flux.jl/test/ctc.jl, literally: `ghat = gradient(ctc_loss, x, y)[1]`. The integer labels were tried
    as floats, and the check of their values then raised ("labels must be integers"); they are held as
    integers and get None, as Zygote gives `nothing` for an index."""
    g = fluxjax.gradient(ctc_loss, jnp.asarray(CTC_X1, jnp.float32), jnp.array([0, 1]), jit=jit)
    approx(g[0], CTC_G1, rtol=1e-5, atol=1e-5)
    assert g[1] is None
    val, g = fluxjax.withgradient(lambda x, y, w: w * ctc_loss(x, y), jnp.asarray(CTC_X1, jnp.float32), np.array([0, 1]), 2)
    approx(val, 2 * 3.6990738275138035, rtol=1e-5)
    approx(g[0], 2 * CTC_G1, rtol=1e-5, atol=1e-5)
    assert g[1] is None
    approx(g[2], 3.6990738275138035, rtol=1e-5)  # the other int is still differentiated as a number


def test_ctc_labels_out_of_range_under_jit_and_vmap_give_nan():
    """Eagerly a bad label raises; traced (fluxjax.jit, jax.jit, jax.vmap) the gather read the blank's row
    for 7 or -1 and returned a finite loss (2.4168 for [0, 7]). Now NaN, loss and gradient, which
    `train_` reports as a non-finite loss at that batch."""
    x = jnp.asarray(CTC_X1, jnp.float32)
    for y in ([0, 7], [0, -1], [0, 2], [0.5, 1.0]):  # 2 is the blank (a 1-based port's label)
        y = jnp.array(y)
        assert np.isnan(float(fluxjax.jit(ctc_loss)(x, y))) and np.isnan(float(jax.jit(ctc_loss)(x, y)))
        assert np.isnan(np.asarray(jax.grad(lambda a, y=y: jax.jit(ctc_loss)(a, y))(x))).all()
    got = jax.vmap(ctc_loss, (None, 0))(x, jnp.array([[0, 1], [0, 5]]))
    approx(got[0], 3.6990738275138035, rtol=1e-5)
    assert np.isnan(float(got[1]))
    approx(jax.jit(ctc_loss)(x, jnp.array([0, 1])), 3.6990738275138035, rtol=1e-5)  # good labels unchanged


def _finite_diff(f, x, h=1e-6):
    """Central differences of a scalar function, all perturbations in one jitted vmap."""
    E = np.eye(x.size).reshape((x.size,) + x.shape) * h
    fv = jax.jit(jax.vmap(f))
    return np.asarray((fv(x + E) - fv(x - E)) / (2 * h)).reshape(x.shape)


def _ctc_brute(x, y):
    # flux-verify/ctc_check.py, 0-based: sum over all paths that collapse to y
    import itertools

    C, T = x.shape
    lp = x - np.log(np.exp(x).sum(0, keepdims=True))
    blank = C - 1
    tot = 0.0
    for path in itertools.product(range(C), repeat=T):
        col = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
        if [k for k in col if k != blank] == list(y):
            tot += np.exp(sum(lp[k, t] for t, k in enumerate(path)))
    return -np.log(tot)


def test_ctc_loss_float32_jit_and_brute_force():
    f = jax.jit(ctc_loss)
    approx(f(CTC_X2.astype(np.float32), np.array([0, 1])), 8.02519869363453, rtol=1e-5)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    for y in ([0, 0], [1, 0, 1], [0, 1, 1]):  # repeated labels need a blank between them
        approx(f(x, np.array(y)), _ctc_brute(x.astype(np.float64), y), rtol=1e-5)
    # a label sequence too long for the time steps has infinite loss
    assert np.isinf(float(f(x, np.array([0, 0, 0]))))
    with pytest.raises(ValueError, match="blank"):
        ctc_loss(x, [2])
    # gradient vs finite differences
    y = np.array([1, 0, 0])
    with jax.enable_x64(True):
        x = rng.standard_normal((3, 6))
        g = np.asarray(jax.grad(ctc_loss)(x, y))
        approx(g, _finite_diff(lambda a: ctc_loss(a, y), x), rtol=1e-5, atol=1e-7)


def test_shape_mismatch():
    from fluxjax.errors import DimensionMismatch

    with pytest.raises(DimensionMismatch, match=r"loss function expects size\(ŷ\) = \(2, 4\) to match size\(y\) = \(2, 3\)"):
        mse(np.zeros((2, 4)), np.zeros((2, 3)))
    for f in [
        mae,
        mse,
        msle,
        huber_loss,
        crossentropy,
        logitcrossentropy,
        binarycrossentropy,
        logitbinarycrossentropy,
        kldivergence,
        poisson_loss,
        hinge_loss,
        squared_hinge_loss,
        dice_coeff_loss,
        tversky_loss,
        binary_focal_loss,
        focal_loss,
        siamese_contrastive_loss,
    ]:
        with pytest.raises(ValueError, match="loss function expects"):
            f(np.full((3,), 0.5), np.full((4,), 0.5))
    # Julia-style sizes: trailing singleton dims match, and broadcasting follows Julia
    approx(mse(np.array([1.0, 2.0, 3.0]), np.array([[1.0], [2.0], [4.0]])), 1 / 3, rtol=1e-6)
    _check_sizes(np.ones((3,)), np.ones((3, 1)))  # Flux.Losses._check_sizes, used by every loss
    with pytest.raises(ValueError, match=r"size\(ŷ\) = \(2, 4\) to match size\(y\) = \(2, 3\)"):
        _check_sizes(np.ones((2, 4)), np.ones((2, 3)))


ALL_LOSSES = [
    mae,
    mse,
    msle,
    huber_loss,
    crossentropy,
    logitcrossentropy,
    binarycrossentropy,
    logitbinarycrossentropy,
    kldivergence,
    poisson_loss,
    hinge_loss,
    squared_hinge_loss,
    dice_coeff_loss,
    tversky_loss,
    binary_focal_loss,
    focal_loss,
    siamese_contrastive_loss,
]


# Flux.jl/test/losses.jl "no spurious promotions", plus gradients against finite differences
@pytest.mark.parametrize("f", ALL_LOSSES, ids=lambda f: f.__name__)
def test_promotions_and_gradients(f, x64):
    rng = np.random.default_rng(4)
    yh = rng.uniform(0.2, 0.8, (3, 2))
    y = rng.uniform(0.1, 0.9, (3, 2))
    # with x64 on, a float32 yhat must stay float32: eps, delta, margin, 0.5... are weakly typed
    val, g = jax.value_and_grad(f)(jnp.asarray(yh, jnp.float32), jnp.asarray(y, jnp.float32))
    assert val.dtype == jnp.float32 and g.dtype == jnp.float32
    val, g = jax.value_and_grad(f)(yh, y)
    assert val.dtype == jnp.float64 and g.dtype == jnp.float64
    approx(g, _finite_diff(lambda a: f(a, y), yh), rtol=1e-5, atol=1e-8)


def test_jit():
    yh = jnp.asarray(YH, jnp.float32)
    y = jnp.asarray(Y, jnp.float32)
    approx(jax.jit(crossentropy)(yh, y), LOSSVALUE, rtol=1e-6)
    approx(jax.jit(lambda a, b: logitcrossentropy(a, b, agg=jnp.sum))(jnp.asarray(LOGYH), y), 4 * LOSSVALUE, rtol=1e-6)
    approx(jax.jit(siamese_contrastive_loss)(yh, y), siamese_contrastive_loss(yh, y), rtol=1e-6)
    # the eps default is float32 machine epsilon
    approx(crossentropy(jnp.zeros(2), jnp.array([1.0, 0.0])), -np.log(np.finfo(np.float32).eps), rtol=1e-6)


def test_huber_gradient_mask():
    # the |e| < delta mask carries no gradient; slope is e inside and delta * sign(e) outside
    g = jax.grad(lambda yh: huber_loss(yh, jnp.zeros(2), agg=jnp.sum))(jnp.array([0.5, 3.0]))
    approx(g, [0.5, 1.0], rtol=1e-6)


_CHECKED = {  # a value check of the op-by-op call, with the checked value an array the loss closes over
    "ctc_loss label >= blank": (lambda a, v: losses.ctc_loss(a, v), jnp.zeros((3, 4)), jnp.array([0, 9]),
                                r"ctc_loss: labels must be integers in 0\.\.1"),
    "label_smoothing alpha": (lambda a, v: losses.crossentropy(a, losses.label_smoothing(jnp.eye(2), v)),
                              jnp.full((2, 2), 0.5), jnp.asarray(1.5), r"label_smoothing: α must be between 0 and 1"),
    "siamese margin": (lambda a, v: losses.siamese_contrastive_loss(a, jnp.array([1, 0]), margin=v),
                       jnp.array([0.6, 0.4]), jnp.asarray(-0.5), r"Margin must be non-negative"),
}


@pytest.mark.parametrize("jit", [False, True], ids=["op by op", "compiled"])
@pytest.mark.parametrize("name", list(_CHECKED))
def test_value_checks_run_in_the_compiled_gradient_as_op_by_op(name, jit):
    """Flux's test/losses.jl (α = 1.2 is an ArgumentError, a negative margin a DomainError) and NNlib's
    ctc_loss: the compiled `withgradient` (the default) sees an array in the closure as traced, and must
    raise as the op-by-op call does, never return a number."""
    f, x, v, message = _CHECKED[name]
    with pytest.raises(ValueError, match=message):
        fluxjax.withgradient(lambda a: f(a, v), x, jit=jit)
    ok = {"ctc_loss label >= blank": jnp.array([0, 1]), "label_smoothing alpha": jnp.asarray(0.2),
          "siamese margin": jnp.asarray(0.5)}[name]
    got = fluxjax.withgradient(lambda a: f(a, ok), x, jit=jit)
    want = fluxjax.withgradient(lambda a: f(a, ok), x, jit=False)
    np.testing.assert_allclose(got.val, want.val, rtol=1e-6)


@pytest.mark.parametrize("y, T", [([1, 1], 2), ([0, 1, 2], 2), ([2, 2, 2], 4)])
def test_ctc_loss_that_cannot_fit_is_inf_with_a_nan_gradient(y, T):
    """NNlib: an infeasible label sequence (a repeat needs a blank between) has loss Inf and gradient
    exp.(ŷ) .- exp.(accum .+ Inf), NaN, never a quiet all-zero one; a feasible one stays finite."""
    yhat = jnp.asarray(np.random.default_rng(1).standard_normal((4, T)), jnp.float32)
    yy = jnp.array(y)
    assert float(losses.ctc_loss(yhat, yy)) == np.inf
    for jit in (False, True):
        assert np.all(np.isnan(fluxjax.gradient(lambda a: losses.ctc_loss(a, yy), yhat, jit=jit)[0]))
    feasible = jnp.asarray(np.random.default_rng(1).standard_normal((4, T + 2)), jnp.float32)
    g = fluxjax.gradient(lambda a: losses.ctc_loss(a, yy), feasible)[0]
    assert np.isfinite(float(losses.ctc_loss(feasible, yy))) and np.all(np.isfinite(g))


@pytest.mark.parametrize("jit", [True, False])
def test_mae_gradient_at_a_zero_error_is_zygotes_zero(jit):
    """Zygote differentiates `abs` by ChainRules' `sign(x)`, 0 at the origin (Zygote test/complex.jl,
    issue 1529: `gradient(x -> sum(abs.(x)), [0f0]) == [0]`, complex too); JAX's `jnp.abs` gives 1 there,
    so `mae(ŷ, y)` where `ŷ == y` had gradient `[0.5, 0.5]` instead of `[0, 0]`."""
    y = jnp.array([0.0, 1.0, -2.0])
    g = fluxjax.gradient(lambda yh: losses.mae(yh, y), jnp.array([0.0, 1.0, -1.0]), jit=jit)[0]
    np.testing.assert_allclose(np.asarray(g), [0.0, 0.0, 1 / 3], rtol=1e-6, atol=0)
    g = fluxjax.gradient(lambda yh: losses.mae(yh, y, agg=jnp.sum), jnp.array([0.5, 0.5, -2.5]), jit=jit)[0]
    np.testing.assert_array_equal(np.asarray(g), [1.0, -1.0, -1.0])  # sign(ŷ - y) away from 0
    z = jnp.array([0j, 3 + 4j], jnp.complex64)  # Zygote: 0 at the origin, conj-free z/|z| elsewhere
    g = fluxjax.gradient(lambda v: losses.mae(v, jnp.zeros(2, jnp.complex64), agg=jnp.sum), z, jit=jit)[0]
    np.testing.assert_allclose(np.asarray(g), [0, 0.6 + 0.8j], rtol=1e-6)
    assert np.isfinite(np.asarray(g)).all()
    assert float(jax.grad(jax.grad(lambda v: losses.mae(v, 1.0)))(1.5)) == 0.0  # second order through the rule
