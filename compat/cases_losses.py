# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""Flux.Losses cases (Flux.jl test/losses.jl, test/ctc.jl). Expected numbers are the Julia test's own.

fluxjax computes in float32 by default; Julia's test arrays are Float64, so its `≈` is compared at the
float32 tolerance (rtol 3.5e-4), except where a case enables float64 inputs explicitly.
"""

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, raises, rows
from fluxjax import losses as L
from fluxjax import onehotbatch, sigmoid

SRC = "Flux.jl test/losses.jl"

# The regression y's at the top of test/losses.jl
Y_REG, YHAT_REG = np.array([1.0, 1, 0, 0]), np.array([0.9, 0.1, 0.1, 0.9])
# The one-hot y's
V = np.log(0.1 / 0.9)
YHAT_OH = rows([0.1, 0.9], [0.9, 0.1], [0.9, 0.1], [0.1, 0.9]).T
LOGYHAT_OH = rows([V, 0.0], [0.0, V], [0.0, V], [V, 0.0]).T
LOSSVALUE, LOSSVALUE_SMOOTHED = 1.203972804325936, 1.2039728043259348


@case(
    names=("mse", "mae", "huber_loss"),
    source=SRC,
    julia="""
    y = [1, 1, 0, 0]
    ŷ = [.9, .1, .1, .9]
    @test mse(ŷ, y) ≈ (.1^2 + .9^2)/2
    @test Flux.mae(ŷ, y) ≈ 1/2
    @test Flux.huber_loss(ŷ, y) ≈ 0.20500000000000002
    """,
)
def case_mse_mae_huber():
    close(L.mse(YHAT_REG, Y_REG), (0.1**2 + 0.9**2) / 2)
    close(L.mae(YHAT_REG, Y_REG), 0.5)
    close(L.huber_loss(YHAT_REG, Y_REG), 0.20500000000000002)


@case(
    names=("msle",),
    source=SRC,
    julia="""
    y = [123.0,456.0,789.0]
    ŷ = [345.0,332.0,789.0]
    @test Flux.msle(ŷ, y) ≈ 0.38813985859136585
    """,
)
def case_msle():
    close(L.msle(np.array([345.0, 332.0, 789.0]), np.array([123.0, 456.0, 789.0])), 0.38813985859136585)


@case(
    names=("crossentropy", "label_smoothing", "onehotbatch"),
    source=SRC,
    julia="""
    y = onehotbatch([1, 1, 0, 0], 0:1)
    y_smoothed = label_smoothing(y, 0.1)
    ŷ = [.1 .9; .9 .1; .9 .1; .1 .9]'
    lossvalue = 1.203972804325936
    lossvalue_smoothed = 1.2039728043259348
    @test crossentropy([0.1,0.0,0.9], [0.1,0.0,0.9]) ≈ crossentropy([0.1,0.9], [0.1,0.9])
    @test crossentropy(ŷ, y) ≈ lossvalue
    @test crossentropy(ŷ, y_smoothed) ≈ lossvalue_smoothed
    """,
)
def case_crossentropy():
    y = onehotbatch([1, 1, 0, 0], range(0, 2))
    close(L.crossentropy(np.array([0.1, 0.0, 0.9]), np.array([0.1, 0.0, 0.9])), L.crossentropy(np.array([0.1, 0.9]), np.array([0.1, 0.9])))
    close(L.crossentropy(YHAT_OH, y), LOSSVALUE)
    close(L.crossentropy(YHAT_OH, L.label_smoothing(y, 0.1)), LOSSVALUE_SMOOTHED)


@case(
    names=("logitcrossentropy", "logsoftmax"),
    source=SRC,
    julia="""
    v = log(.1 / .9)
    logŷ = [v 0.0; 0.0 v; 0.0 v; v 0.0]'
    yl = onehotbatch([1], 0:1); sf = 0.1
    yls = [sf (1-sf)]'
    logylp = [0.0 v]'
    @test logitcrossentropy(logŷ, y) ≈ lossvalue
    @test logitcrossentropy(logylp, yl) ≈ -sum(yl.*logsoftmax(logylp))
    @test logitcrossentropy(logylp, label_smoothing(yl, 2sf)) ≈ -sum(yls.*logsoftmax(logylp))
    """,
)
def case_logitcrossentropy():
    y = onehotbatch([1, 1, 0, 0], range(0, 2))
    close(L.logitcrossentropy(LOGYHAT_OH, y), LOSSVALUE)
    yl = onehotbatch([1], range(0, 2))
    logylp = rows([0.0, V]).T
    yls = rows([0.1, 0.9]).T
    close(L.logitcrossentropy(logylp, yl), -np.sum(np.asarray(yl) * np.asarray(fluxjax.logsoftmax(logylp))))
    close(L.logitcrossentropy(logylp, L.label_smoothing(yl, 0.2)), -np.sum(yls * np.asarray(fluxjax.logsoftmax(logylp))))


@case(
    names=("label_smoothing",),
    source=SRC,
    julia="""
    yl = onehotbatch([1], 0:1); sf = 0.1
    yls = [sf (1-sf)]'
    @test label_smoothing(yl, 0.2) == yls
    @test_throws ArgumentError label_smoothing([0., 0., 1., 0.], 1.2)
    @test_throws ArgumentError label_smoothing([0., 0., 1., 0.], 0.)
    """,
)
def case_label_smoothing():
    close(L.label_smoothing(onehotbatch([1], range(0, 2)), 0.2), rows([0.1, 0.9]).T)
    raises(ValueError, L.label_smoothing, np.array([0.0, 0, 1, 0]), 1.2)
    raises(ValueError, L.label_smoothing, np.array([0.0, 0, 1, 0]), 0.0)


@case(
    names=("binarycrossentropy", "logitbinarycrossentropy", "σ"),
    source=SRC,
    julia="""
    @test binarycrossentropy(σ.(logŷ), y; eps=0) ≈ mean(-y.*log.(σ.(logŷ)) - (1 .- y).*log.(1 .- σ.(logŷ)))
    @test binarycrossentropy([0.1,0.2,0.9], 1) ≈ -mean(log, [0.1,0.2,0.9])  # constant label
    @test logitbinarycrossentropy(logŷ, y) ≈ binarycrossentropy(σ.(logŷ), y; eps=0)
    """,
)
def case_binarycrossentropy():
    y = np.asarray(onehotbatch([1, 1, 0, 0], range(0, 2)), dtype=np.float64)
    s = 1 / (1 + np.exp(-LOGYHAT_OH))
    close(L.binarycrossentropy(sigmoid(LOGYHAT_OH), y, eps=0), np.mean(-y * np.log(s) - (1 - y) * np.log(1 - s)))
    close(L.binarycrossentropy(np.array([0.1, 0.2, 0.9]), 1), -np.mean(np.log([0.1, 0.2, 0.9])))
    close(L.logitbinarycrossentropy(LOGYHAT_OH, y), L.binarycrossentropy(sigmoid(LOGYHAT_OH), y, eps=0))


@case(
    names=("kldivergence",),
    source=SRC,
    julia="""
    y = [1 2 3]
    ŷ = [4.0 5.0 6.0]
    @test Flux.kldivergence([0.1,0.0,0.9], [0.1,0.0,0.9]) ≈ Flux.kldivergence([0.1,0.9], [0.1,0.9])
    @test Flux.kldivergence(ŷ, y) ≈ -1.7661057888493457
    @test Flux.kldivergence(y, y) ≈ 0
    """,
)
def case_kldivergence():
    y, yhat = rows([1.0, 2, 3]), rows([4.0, 5, 6])
    close(L.kldivergence(np.array([0.1, 0.0, 0.9]), np.array([0.1, 0.0, 0.9])), L.kldivergence(np.array([0.1, 0.9]), np.array([0.1, 0.9])))
    close(L.kldivergence(yhat, y), -1.7661057888493457)
    close(L.kldivergence(y, y), 0.0, atol=1e-5)


@case(
    names=("hinge_loss", "squared_hinge_loss"),
    source=SRC,
    julia="""
    y = [1 2 3 4]
    ŷ = [5. 6. 7. 8.]
    @test Flux.hinge_loss(ŷ, y) ≈ 0
    @test Flux.hinge_loss(y, 0.5 .* y) ≈ 0.125
    @test Flux.squared_hinge_loss(ŷ, y) ≈ 0
    @test Flux.squared_hinge_loss(y, 0.5 .* y) ≈ 0.0625
    """,
)
def case_hinge():
    y, yhat = rows([1.0, 2, 3, 4]), rows([5.0, 6, 7, 8])
    close(L.hinge_loss(yhat, y), 0.0)
    close(L.hinge_loss(y, 0.5 * y), 0.125)
    close(L.squared_hinge_loss(yhat, y), 0.0)
    close(L.squared_hinge_loss(y, 0.5 * y), 0.0625)


@case(
    names=("poisson_loss",),
    source=SRC,
    julia="""
    y = [0.1 0.2 0.3]
    ŷ = [0.4 0.5 0.6]
    @test Flux.poisson_loss(ŷ, y) ≈ 0.6278353988097339
    @test Flux.poisson_loss(y, y) ≈ 0.5044459776946685
    """,
)
def case_poisson():
    y, yhat = rows([0.1, 0.2, 0.3]), rows([0.4, 0.5, 0.6])
    close(L.poisson_loss(yhat, y), 0.6278353988097339)
    close(L.poisson_loss(y, y), 0.5044459776946685)


@case(
    names=("dice_coeff_loss", "tversky_loss"),
    source=SRC,
    julia="""
    y = [1.0 0.5 0.3 2.4]
    ŷ = [0 1.4 0.5 1.2]
    @test Flux.dice_coeff_loss(ŷ, y) ≈ 0.2799999999999999
    @test Flux.dice_coeff_loss(y, y) ≈ 0.0
    @test Flux.tversky_loss(ŷ, y) ≈ -0.06772009029345383
    @test Flux.tversky_loss(ŷ, y, beta=0.8) ≈ -0.09490740740740744
    @test Flux.tversky_loss(y, y) ≈ -0.5576923076923075
    """,
)
def case_dice_tversky():
    y, yhat = rows([1.0, 0.5, 0.3, 2.4]), rows([0.0, 1.4, 0.5, 1.2])
    close(L.dice_coeff_loss(yhat, y), 0.2799999999999999)
    close(L.dice_coeff_loss(y, y), 0.0, atol=1e-6)
    close(L.tversky_loss(yhat, y), -0.06772009029345383)
    close(L.tversky_loss(yhat, y, beta=0.8), -0.09490740740740744)
    close(L.tversky_loss(y, y), -0.5576923076923075)


@case(
    names=("binary_focal_loss", "binarycrossentropy"),
    source=SRC,
    julia="""
    y = [0  1  0
         1  0  1]
    ŷ = [0.268941  0.5  0.268941
         0.731059  0.5  0.731059]
    y1 = [1 0
          0 1]
    ŷ1 = [0.6 0.3
          0.4 0.7]
    @test Flux.binary_focal_loss(ŷ, y) ≈ 0.0728675615927385
    @test Flux.binary_focal_loss(ŷ1, y1) ≈ 0.05691642237852222
    @test Flux.binary_focal_loss(ŷ, y; gamma=0.0) ≈ Flux.binarycrossentropy(ŷ, y)
    """,
)
def case_binary_focal_loss():
    y = rows([0.0, 1, 0], [1, 0, 1])
    yhat = rows([0.268941, 0.5, 0.268941], [0.731059, 0.5, 0.731059])
    close(L.binary_focal_loss(yhat, y), 0.0728675615927385)
    close(L.binary_focal_loss(rows([0.6, 0.3], [0.4, 0.7]), rows([1.0, 0], [0, 1])), 0.05691642237852222)
    close(L.binary_focal_loss(yhat, y, gamma=0.0), L.binarycrossentropy(yhat, y))


@case(
    names=("focal_loss", "softmax", "crossentropy"),
    source=SRC,
    julia="""
    y = [1  0  0  0  1
         0  1  0  1  0
         0  0  1  0  0]
    ŷ = softmax(reshape(-7:7, 3, 5) .* 1f0)
    y1 = [1 0
          0 0
          0 1]
    ŷ1 = [0.4 0.2
          0.5 0.5
          0.1 0.3]
    @test Flux.focal_loss(ŷ, y) ≈ 1.1277571935622628
    @test Flux.focal_loss(ŷ1, y1) ≈ 0.45990566879720157
    @test Flux.focal_loss(ŷ, y; gamma=0) ≈ Flux.crossentropy(ŷ, y)
    """,
)
def case_focal_loss():
    y = rows([1.0, 0, 0, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 0])
    yhat = fluxjax.softmax(np.arange(-7, 8, dtype=np.float32).reshape((3, 5), order="F"))
    close(L.focal_loss(yhat, y), 1.1277571935622628)
    close(L.focal_loss(rows([0.4, 0.2], [0.5, 0.5], [0.1, 0.3]), rows([1.0, 0], [0, 0], [0, 1])), 0.45990566879720157)
    close(L.focal_loss(yhat, y, gamma=0), L.crossentropy(yhat, y))


@case(
    names=("siamese_contrastive_loss",),
    source=SRC,
    julia="""
    y = [1 0
         0 0
         0 1]
    ŷ = [0.4 0.2
         0.5 0.5
         0.1 0.3]
    y2 = [1, 0, 0, 1, 1]; ŷ2 = [0.6, 0.4, 0.1, 0.2, 0.7]
    @test Flux.siamese_contrastive_loss(ŷ, y) ≈ 0.2333333333333333
    @test Flux.siamese_contrastive_loss(ŷ, y, margin = 0.5f0) ≈ 0.10000000000000002
    @test Flux.siamese_contrastive_loss(ŷ, y, margin = 1.5f0) ≈ 0.5333333333333333
    @test Flux.siamese_contrastive_loss(ŷ, y, margin = 0) ≈ 0.09166666666666667
    @test Flux.siamese_contrastive_loss(ŷ2, y2) ≈ 0.21200000000000005
    @test Flux.siamese_contrastive_loss(ŷ2, ŷ2) ≈ 0.18800000000000003
    @test_throws DomainError(-1, "Margin must be non-negative") Flux.siamese_contrastive_loss(ŷ, y, margin = -1)
    """,
)
def case_siamese_contrastive_loss():
    y, yhat = rows([1.0, 0], [0, 0], [0, 1]), rows([0.4, 0.2], [0.5, 0.5], [0.1, 0.3])
    y2, yhat2 = np.array([1.0, 0, 0, 1, 1]), np.array([0.6, 0.4, 0.1, 0.2, 0.7])
    close(L.siamese_contrastive_loss(yhat, y), 0.2333333333333333)
    close(L.siamese_contrastive_loss(yhat, y, margin=0.5), 0.10000000000000002)
    close(L.siamese_contrastive_loss(yhat, y, margin=1.5), 0.5333333333333333)
    close(L.siamese_contrastive_loss(yhat, y, margin=0), 0.09166666666666667)
    close(L.siamese_contrastive_loss(yhat2, y2), 0.21200000000000005)
    close(L.siamese_contrastive_loss(yhat2, yhat2), 0.18800000000000003)
    raises(ValueError, L.siamese_contrastive_loss, yhat, y, margin=-1)


@case(
    names=("ctc_loss",),
    source="Flux.jl test/ctc.jl",
    julia="""
    x = [1. 2. 3.; 2. 1. 1.; 3. 3. 2.]
    y = [1, 2]
    @test ctc_loss(x, y) ≈ 3.6990738275138035
    x = [-3. 12. 8. 15.; 4. 20. -2. 20.; 8. -33. 6. 5.]
    y = [1, 2]
    @test ctc_loss(x, y) ≈ 8.02519869363453
    """,
)
def case_ctc_loss():
    # labels are 1-based classes in Julia; fluxjax takes 0-based classes (blank is the last class in both)
    close(L.ctc_loss(rows([1.0, 2, 3], [2, 1, 1], [3, 3, 2]), [0, 1]), 3.6990738275138035)
    close(L.ctc_loss(rows([-3.0, 12, 8, 15], [4, 20, -2, 20], [8, -33, 6, 5]), [0, 1]), 8.02519869363453)


@case(
    names=("Losses", "pullback"),
    source=SRC,
    julia="""
    @testset "no spurious promotions" begin
      for T in (Float32, Float64)
        y = rand(T, 2); ŷ = rand(T, 2)
        for f in ALL_LOSSES
          fwd, back = Flux.pullback(f, ŷ, y)
          @test fwd isa T
          @test eltype(back(one(T))[1]) == T
    """,
)
def case_loss_no_promotion():
    import jax

    y, yhat = np.float32([0.3, 0.7]), np.float32([0.2, 0.9])

    def fwd_back(f, yhat, y):
        fwd, back = fluxjax.pullback(f, yhat, y)
        return fwd, back(jnp.float32(1))[0]

    for f in (L.mse, L.mae, L.msle, L.huber_loss, L.crossentropy, L.logitcrossentropy, L.binarycrossentropy,
              L.logitbinarycrossentropy, L.kldivergence, L.poisson_loss, L.hinge_loss, L.squared_hinge_loss,
              L.dice_coeff_loss, L.tversky_loss, L.binary_focal_loss, L.focal_loss, L.siamese_contrastive_loss):
        # dtypes only: trace the pullback abstractly instead of running it
        fwd, dx = jax.eval_shape(lambda a, b, f=f: fwd_back(f, a, b), yhat, y)
        assert fwd.dtype == np.float32 and fwd.shape == (), f.__name__
        assert dx.dtype == np.float32, f.__name__
