# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""MLUtils' helpers that Flux scripts reach as `Flux.x` (MLUtils.jl test/utils.jl, test/batch.jl,
test/splitobs.jl), 0-based `dims`, indices and labels here."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises


@case(
    names=("unsqueeze", "unstack"),
    source="MLUtils.jl test/utils.jl",
    julia="""
    x = randn(2, 3, 2)
    @test @inferred(unsqueeze(x; dims=1)) == reshape(x, 1, 2, 3, 2)
    @test @inferred(unsqueeze(x; dims=4)) == reshape(x, 2, 3, 2, 1)
    @test unsqueeze(dims=2)(x) == unsqueeze(x, dims=2)
    @test_throws AssertionError unsqueeze(rand(2,2), dims=4)
    stacked_array=[ 8 9 3 5; 9 6 6 9; 9 1 7 2; 7 4 10 6 ]
    unstacked_array=[[8, 9, 9, 7], [9, 6, 1, 4], [3, 6, 7, 10], [5, 9, 2, 6]]
    @test unstack(stacked_array, dims=2) == unstacked_array
    """,
)
def case_unsqueeze_unstack():
    x = np.random.randn(2, 3, 2).astype(np.float32)
    equal(fluxjax.unsqueeze(x, dims=0), x.reshape(1, 2, 3, 2))
    equal(fluxjax.unsqueeze(x, dims=3), x.reshape(2, 3, 2, 1))
    equal(fluxjax.unsqueeze(dims=1)(x), fluxjax.unsqueeze(x, dims=1))
    raises(ValueError, fluxjax.unsqueeze, np.random.rand(2, 2), dims=3)
    stacked = np.array([[8, 9, 3, 5], [9, 6, 6, 9], [9, 1, 7, 2], [7, 4, 10, 6]])
    assert [u.tolist() for u in fluxjax.unstack(stacked, dims=1)] == [[8, 9, 9, 7], [9, 6, 1, 4], [3, 6, 7, 10], [5, 9, 2, 6]]


@case(
    names=("chunk",),
    source="MLUtils.jl test/utils.jl",
    julia="""
    cs = chunk(collect(1:10), 3)
    @test cs[1] == [1, 2, 3, 4]; @test cs[2] == [5, 6, 7, 8]; @test cs[3] == [9, 10]
    x = reshape(collect(1:20), (5, 4))
    cs = chunk(x, 2)
    @test cs[1] == [1  6; 2  7; 3  8; 4  9; 5 10]
    x = permutedims(reshape(collect(1:10), (2, 5)))
    cs = chunk(x; size = 2, dims = 1)
    @test cs[3] == [9 10]
    x = reshape(collect(1:15), (3, 5))
    y = chunk(x, [1,1,3,3,4])
    @test y[1] == [1 4; 2 5; 3 6]; @test size(y[2]) == (3, 0)
    """,
)
def case_chunk():
    assert fluxjax.chunk(list(range(1, 11)), 3) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    cs = fluxjax.chunk(jl(range(1, 21), (5, 4)), 2)
    equal(cs[0], [[1, 6], [2, 7], [3, 8], [4, 9], [5, 10]])
    cs = fluxjax.chunk(jl(range(1, 11), (2, 5)).T, size=2, dims=0)
    equal(cs[2], [[9, 10]])
    y = fluxjax.chunk(jl(range(1, 16), (3, 5)), [0, 0, 2, 2, 3])
    equal(y[0], [[1, 4], [2, 5], [3, 6]])
    assert y[1].shape == (3, 0)


@case(
    names=("rpad_constant",),
    source="MLUtils.jl test/utils.jl",
    julia="""
    @test rpad_constant([1, 2], 4, -1) == [1, 2, -1, -1]
    @test rpad_constant([1, 2, 3], 2)  == [1, 2, 3]
    @test rpad_constant([1 2; 3 4], 4; dims=1) == [1 2; 3 4; 0 0; 0 0]
    @test rpad_constant([1 2; 3 4], (3, 4)) == [1 2 0 0; 3 4 0 0; 0 0 0 0]
    """,
)
def case_rpad_constant():
    equal(fluxjax.rpad_constant(np.array([1, 2]), 4, -1), [1, 2, -1, -1])
    equal(fluxjax.rpad_constant(np.array([1, 2, 3]), 2), [1, 2, 3])
    m = np.array([[1, 2], [3, 4]])
    equal(fluxjax.rpad_constant(m, 4, dims=0), [[1, 2], [3, 4], [0, 0], [0, 0]])
    equal(fluxjax.rpad_constant(m, (3, 4)), [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 0, 0]])


@case(
    names=("batchseq", "batch_sequence", "batch", "unbatch"),
    source="MLUtils.jl test/batch.jl",
    julia="""
    bs = batchseq([[1, 2, 3], [4, 5]], 0)
    @test bs[1] == [1, 4]; @test bs[2] == [2, 5]; @test bs[3] == [3, 0]
    bs = batchseq([ones(2,4), zeros(2, 3), ones(2,2)])
    @test bs[3] == [1.0 0.0 0.0; 1.0 0.0 0.0]
    y = batch_sequence([[1, 2, 3], [10, 20]])
    @test y == [1 10; 2 20; 3 0]
    @test batch([[1,2,3], [4,5,6]]) == [1 4; 2 5; 3 6]
    @test unbatch([1 3 5 7; 2 4 6 8]) == [[1, 2], [3, 4], [5, 6], [7, 8]]
    """,
)
def case_batchseq():
    assert [b.tolist() for b in fluxjax.batchseq([[1, 2, 3], [4, 5]], 0)] == [[1, 4], [2, 5], [3, 0]]
    bs = fluxjax.batchseq([np.ones((2, 4)), np.zeros((2, 3)), np.ones((2, 2))])
    equal(bs[2], [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    equal(fluxjax.batch_sequence([[1, 2, 3], [10, 20]]), [[1, 10], [2, 20], [3, 0]])
    equal(fluxjax.batch([[1, 2, 3], [4, 5, 6]]), [[1, 4], [2, 5], [3, 6]])
    assert [u.tolist() for u in fluxjax.unbatch(np.array([[1, 3, 5, 7], [2, 4, 6, 8]]))] == [[1, 2], [3, 4], [5, 6], [7, 8]]


@case(
    names=("splitobs", "numobs", "getobs", "shuffleobs", "group_indices"),
    source="MLUtils.jl test/splitobs.jl and the splitobs docstring",
    julia="""
    @test splitobs(10, at=0.7) == (1:7,8:10)
    @test splitobs(10, at=(0.5,0.3)) == (1:5,6:8,9:10)
    @test numobs.(splitobs(150, at=(.1,.2,.3))) == (15,30,45,60)
    @test numobs.(splitobs(var, at=(2,3,4))) == (2,3,4,6)        # 15 observations
    @test_throws DimensionMismatch splitobs((X, rand(149)), at=0.7)
    julia> splitobs(1:10, at=0.5, stratified=[0,0,0,0,1,1,1,1,1,1]) # 2 zeros and 3 ones in each subset
    ([1, 2, 5, 6, 7], [3, 4, 8, 9, 10])
    """,
)
def case_splitobs():
    assert fluxjax.splitobs(10, at=0.7) == (range(0, 7), range(7, 10))
    assert fluxjax.splitobs(10, at=(0.5, 0.3)) == (range(0, 5), range(5, 8), range(8, 10))
    assert tuple(map(len, fluxjax.splitobs(150, at=(0.1, 0.2, 0.3)))) == (15, 30, 45, 60)
    X = np.random.rand(4, 15)
    assert tuple(map(fluxjax.numobs, fluxjax.splitobs(X, at=(2, 3, 4)))) == (2, 3, 4, 6)
    raises(fluxjax.DimensionMismatch, fluxjax.splitobs, (X, np.random.rand(14)), at=0.7)
    s1, s2 = fluxjax.splitobs(np.arange(1, 11), at=0.5, stratified=[0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    equal(s1, [1, 2, 5, 6, 7])
    equal(s2, [3, 4, 8, 9, 10])
    x, y = fluxjax.shuffleobs((X, np.arange(15)))
    equal(x, X[:, np.asarray(y)])
    equal(fluxjax.getobs(X, 3), X[:, 3])


@case(
    names=("group_counts", "group_indices"),
    source="MLUtils.jl test/utils.jl and the group_indices docstring",
    julia="""
    d = group_counts(['a','b','b'])
    @test d == Dict('a' => 1, 'b' => 2)
    julia> group_indices([:yes, :no, :maybe, :yes])   # :yes => [1, 4], :maybe => [3], :no => [2]
    """,
)
def case_group_counts():
    assert fluxjax.group_counts(["a", "b", "b"]) == {"a": 1, "b": 2}
    assert fluxjax.group_indices(["yes", "no", "maybe", "yes"]) == {"yes": [0, 3], "no": [1], "maybe": [2]}


@case(
    names=("ones_like", "zeros_like", "fill_like", "trues_like", "falses_like", "rand_like", "randn_like"),
    source="MLUtils.jl test/utils.jl",
    julia="""
    x = rand(Float16, 2, 3)
    y = ones_like(x, (2, 4, 2)); @test y isa AbstractArray{Float16}; @test y == ones(Float16, 2, 4, 2)
    y = zeros_like(x, (2, 4, 2)); @test y == zeros(Float16, 2, 4, 2)
    y = rand_like(rr(seed), x, (2, 4, 2)); @test y isa AbstractArray{Float16}; @test y == rand(rr(seed), Float16, 2, 4, 2)
    y = randn_like(rr(seed), x, (2, 4, 2)); @test y == randn(rr(seed), Float16, 2, 4, 2)
    y = fill_like(x, 2.2, (2, 4, 2)); @test y == fill!(rand(Float16, 2, 4, 2), 2.2)
    y = trues_like(x, (2, 4, 2)); @test y isa Array{Bool,3}; @test y == trues(2, 4, 2)
    y = falses_like(x, (2, 4, 2)); @test y == falses(2, 4, 2)
    """,
)
def case_like():
    x = np.random.rand(2, 3).astype(np.float16)
    y = fluxjax.ones_like(x, (2, 4, 2))
    assert y.dtype == jnp.float16
    equal(y, np.ones((2, 4, 2), np.float16))
    equal(fluxjax.zeros_like(x, (2, 4, 2)), np.zeros((2, 4, 2), np.float16))
    key = jax.random.PRNGKey(42)
    y = fluxjax.rand_like(x, (2, 4, 2), rng=key)
    assert y.dtype == jnp.float16
    equal(y, jax.random.uniform(key, (2, 4, 2), jnp.float16))
    equal(fluxjax.randn_like(x, (2, 4, 2), rng=key), jax.random.normal(key, (2, 4, 2), jnp.float16))
    close(fluxjax.fill_like(x, 2.2, (2, 4, 2)), np.full((2, 4, 2), np.float16(2.2)))
    equal(fluxjax.trues_like(x, (2, 4, 2)), np.ones((2, 4, 2), bool))
    equal(fluxjax.falses_like(x, (2, 4, 2)), np.zeros((2, 4, 2), bool))


@case(
    names=("topk", "kfolds", "rescale", "eachobs", "randobs"),
    source="MLUtils.jl test/utils.jl, test/folds.jl and the kfolds docstring",
    julia="""
    @test topk([5, 1, 4, 2, 3], 3) == ([5, 4, 3], [1, 3, 5])
    @test topk([5, 1, 4, 2, 3], 2; rev=false) == ([1, 2], [2, 4])
    julia> train_idx, val_idx = kfolds(10, 5);   # val_idx == [1:2, 3:4, 5:6, 7:8, 9:10]
    itrain, ival = kfolds(15, k=5)
    @test all(i -> size(i) == (12,), itrain)
    x = randn(Float32, 3, 4)
    y = rescale(x; dims=1, ϵ=0)
    @test minimum(y; dims=1) ≈ zeros(Float32, 1, 4) atol=1e-5
    @test maximum(y; dims=1) ≈ ones(Float32, 1, 4) atol=1e-5
    """,
)
def case_topk_kfolds_rescale():
    v, i = fluxjax.topk(np.array([5, 1, 4, 2, 3]), 3)
    equal(v, [5, 4, 3])
    equal(i, [0, 2, 4])
    v, i = fluxjax.topk(np.array([5, 1, 4, 2, 3]), 2, rev=False)
    equal(v, [1, 2])
    equal(i, [1, 3])
    assert fluxjax.kfolds(10, 5)[1] == [range(0, 2), range(2, 4), range(4, 6), range(6, 8), range(8, 10)]
    itrain, _ = fluxjax.kfolds(15, k=5)
    assert all(len(t) == 12 for t in itrain)
    y = fluxjax.rescale(np.random.randn(3, 4).astype(np.float32), dims=0, eps=0)
    close(np.min(y, axis=0), np.zeros(4), atol=1e-5)
    close(np.max(y, axis=0), np.ones(4), atol=1e-5)
    X = np.arange(6).reshape(2, 3)
    assert [o.tolist() for o in fluxjax.eachobs(X)] == [[0, 3], [1, 4], [2, 5]]
    assert fluxjax.randobs(X).shape == (2,)


@case(
    names=("leavepout", "kfolds", "mapobs", "filterobs", "joinobs", "obsview", "getobs", "numobs"),
    source="MLUtils.jl test/folds.jl, test/obstransform.jl",
    julia="""
    @test leavepout(15) == kfolds(15, k=15)
    @test collect(leavepout(1:15, p=5)) == collect(kfolds(1:15, 3))
    data = 1:10
    mdata = mapobs(-, data)
    @test getobs(mdata, 8) == -8
    @test numobs(mdata) == 10
    fdata = filterobs(>(5), data)
    @test numobs(fdata) == 5
    jdata = joinobs(1:10, 11:20)
    @test getobs(jdata, 15) == 15
    data = joinobs(ones(2, 3), zeros(2, 3))
    @test data[3:4] == [[1.0, 1.0], [0.0, 0.0]]
    """,
)
def case_leavepout_obstransforms():
    assert fluxjax.leavepout(15) == fluxjax.kfolds(15, k=15)
    a = fluxjax.leavepout(np.arange(1, 16), p=5)
    b = fluxjax.kfolds(np.arange(1, 16), 3)
    assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b, strict=True))
    mdata = fluxjax.mapobs(lambda x: -x, range(1, 11))
    assert fluxjax.getobs(mdata, 7) == -8 and fluxjax.numobs(mdata) == 10
    assert fluxjax.numobs(fluxjax.filterobs(lambda x: x > 5, range(1, 11))) == 5
    assert fluxjax.getobs(fluxjax.joinobs(range(1, 11), range(11, 21)), 14) == 15
    data = fluxjax.joinobs(np.ones((2, 3)), np.zeros((2, 3)))
    equal(fluxjax.obsview(data, [2, 3]), [[1.0, 0.0], [1.0, 0.0]])


@case(
    names=("slidingwindow",),
    source="MLUtils.jl test/slidingwindow.jl",
    julia="""
    data = 1:20
    s = slidingwindow(data, size=5)
    @test length(s) == 16; @test s[1] == 1:5; @test s[2] == 2:6
    s = slidingwindow(data, size=5, stride=3)
    @test length(s) == 6; @test s[2] == 4:8; @test s[6] == 16:20
    data = reshape(1:18, 3, 6)
    s = slidingwindow(data, size=2)
    @test length(s) == 5; @test s[1] == [1 4; 2 5; 3 6]
    """,
)
def case_slidingwindow():
    s = fluxjax.slidingwindow(range(1, 21), size=5)
    assert len(s) == 16 and list(s[0]) == [1, 2, 3, 4, 5] and list(s[1]) == [2, 3, 4, 5, 6]
    s = fluxjax.slidingwindow(range(1, 21), size=5, stride=3)
    assert len(s) == 6 and list(s[1]) == [4, 5, 6, 7, 8] and list(s[5]) == list(range(16, 21))
    s = fluxjax.slidingwindow(jl(range(1, 19), (3, 6)), size=2)
    assert len(s) == 5
    equal(s[0], [[1, 4], [2, 5], [3, 6]])


@case(
    names=("BatchView", "batchsize", "ObsView"),
    source="MLUtils.jl test/batchview.jl",
    julia="""
    A = BatchView(var, batchsize=3)      # 15 observations
    @test length(A) == 5; @test batchsize(A) == 3
    A = BatchView(X, batchsize=16)
    @test length(A) == 1; @test batchsize(A) == 15
    A = BatchView(var, batchsize=5)
    @test getobs(A, 2) == getobs(var, 6:10)
    S = ObsView(BatchView(var, batchsize=3), 1:2)
    @test numobs(S) == 2
    @test getobs(S) == getobs(BatchView(ObsView(var, 1:6), batchsize=3))
    bv = BatchView([1:12;], batchsize=5, partial=false)
    @test length(bv) == 2; @test bv[2] == 6:10
    """,
)
def case_batchview():
    X = jl(range(60), (4, 15)).astype(np.float32)
    A = fluxjax.BatchView(X, batchsize=3)
    assert len(A) == 5 and fluxjax.batchsize(A) == 3
    A = fluxjax.BatchView(X, batchsize=16)
    assert len(A) == 1 and fluxjax.batchsize(A) == 15
    A = fluxjax.BatchView(X, batchsize=5)
    equal(fluxjax.getobs(A, 1), X[:, 5:10])
    S = fluxjax.ObsView(fluxjax.BatchView(X, batchsize=3), slice(0, 2))
    assert fluxjax.numobs(S) == 2
    equal(fluxjax.getobs(S), X[:, :6])
    bv = fluxjax.BatchView(list(range(1, 13)), batchsize=5, partial=False)
    assert len(bv) == 2 and bv[1] == [6, 7, 8, 9, 10]


@case(
    names=("oversample", "undersample"),
    source="MLUtils.jl test/resample.jl",
    julia="""
    x = rand(2, 5); y = ["a", "c", "c", "a", "b"]
    o = oversample((x, y), fraction=1, shuffle=false)
    ox, oy = getobs(o)
    @test size(ox) == (2, 6); @test ox[:,1:5] == x; @test ox[:,6] == ox[:,5]; @test oy[6] == y[5]
    o = undersample((x, y), shuffle=false)
    ox, oy = getobs(o)
    @test size(ox) == (2, 3); @test oy == ["a", "c", "b"]; @test ox[:,3] == x[:,5]
    """,
)
def case_resample():
    x = np.random.rand(2, 5).astype(np.float32)
    y = ["a", "c", "c", "a", "b"]
    ox, oy = fluxjax.oversample((x, y), fraction=1, shuffle=False)
    assert ox.shape == (2, 6) and oy[5] == y[4]
    equal(ox[:, :5], x)
    equal(ox[:, 5], ox[:, 4])
    ux, uy = fluxjax.undersample((x, y), shuffle=False)
    assert ux.shape == (2, 3) and uy == ["a", "c", "b"]
    equal(ux[:, 2], x[:, 4])


@case(
    names=("groupobs",),
    source="MLUtils.jl src/obstransform.jl (groupobs docstring)",
    julia="""
    data = -10:10
    datas = groupobs(>(0), data)
    length(datas) == 2
    """,
)
def case_groupobs():
    datas = fluxjax.groupobs(lambda v: v > 0, range(-10, 11))
    assert len(datas) == 2 and list(datas[1]) == list(range(1, 11))
