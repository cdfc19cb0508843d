# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib upsampling and resampling cases (NNlib.jl test/testsuite/upsample.jl, sampling.jl, rotation.jl), as
re-exported by Flux."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from compat._case import case, close, equal, jl, raises, rows
from fluxjax import nnlib as N

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
