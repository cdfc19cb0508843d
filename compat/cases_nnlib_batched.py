# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib batched products, attention and `within_gradient` cases (NNlib.jl test/batchedmul.jl,
attention.jl), as re-exported by Flux."""


import jax
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises
from fluxjax import nnlib as N


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
    names=("batched_vec",),
    source="NNlib.jl test/batchedmul.jl",
    julia="""
    @testset "batched_vec: N-D batches" begin
        A4d = randn(4, 5, 3, 2); B3d = randn(5, 3, 2)
        C = batched_vec(A4d, B3d)
        @test size(C) == (4, 3, 2)
        for i in 1:3, j in 1:2
            @test C[:, i, j] ≈ A4d[:, :, i, j] * B3d[:, i, j]
        end
        @test_throws DimensionMismatch batched_vec(randn(3, 4, 2), randn(4, 3))  # ndims mismatch
        @test_throws DimensionMismatch batched_vec(randn(3, 4, 2, 3), randn(4, 2, 2))  # batch size mismatch
    end
    """,
)
def case_batched_vec_nd_and_dimension_mismatch():
    rng = np.random.default_rng(2)
    A4d, B3d = rng.standard_normal((4, 5, 3, 2)), rng.standard_normal((5, 3, 2))
    C = fluxjax.batched_vec(A4d, B3d)
    assert C.shape == (4, 3, 2)
    for i in range(3):
        for j in range(2):
            close(C[:, i, j], A4d[:, :, i, j] @ B3d[:, i, j], rtol=1e-4, atol=1e-5)
    raises(fluxjax.DimensionMismatch, fluxjax.batched_vec, rng.standard_normal((3, 4, 2)), rng.standard_normal((4, 3)))
    raises(fluxjax.DimensionMismatch, fluxjax.batched_vec, rng.standard_normal((3, 4, 2, 3)), rng.standard_normal((4, 2, 2)))


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
