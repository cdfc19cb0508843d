# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib pooling and padding cases (NNlib.jl test/pooling.jl, padding.jl, PoolDims), as re-exported by Flux."""

import math

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, rows
from fluxjax import nnlib as N


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
    #   and the same four settings in rank 2 on a 5×5 x; the values are in compat/cases_nnlib_pool.py POOL_NATURE)
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
