# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""One-hot encoding (OneHotArrays.jl test/onehot.jl, re-exported by Flux) and DataLoader (Flux.jl test/data.jl)."""

import numpy as np

import fluxjax
from compat._case import case, equal, jl, raises, rows

ONEHOT = "OneHotArrays.jl test/onehot.jl"


@case(
    names=("onehot", "onehotbatch"),
    source=ONEHOT,
    julia="""
    @test onehot(20, 10:10:30) == [false, true, false]
    @test onehot(20, (10,20,30)) == [false, true, false]
    @test onehot(40, (10,20,30), 20) == [false, true, false]
    @test_throws Exception onehot('d', 'a':'c')
    @test_throws Exception onehot('d', 'a':'c', 'e')
    @test onehotbatch([20, 10], 10:10:30) == Bool[0 1; 1 0; 0 0]
    @test onehotbatch([40, 10], (10,20,30), 20) == Bool[0 1; 1 0; 0 0]
    @test onehotbatch("abc", 'a':'c') == Bool[1 0 0; 0 1 0; 0 0 1]
    @test onehotbatch("zbc", ('a', 'b', 'c'), 'a') == Bool[1 0 0; 0 1 0; 0 0 1]
    @test onehotbatch([10, 20], [30, 40, 50], 30) == Bool[1 1; 0 0; 0 0]
    @test_throws Exception onehotbatch([:a, :d], [:a, :b, :c])
    @test_throws Exception onehotbatch([2, 5], 0:4)
    """,
)
def case_onehot():
    equal(fluxjax.onehot(20, range(10, 40, 10)), [False, True, False])
    equal(fluxjax.onehot(20, (10, 20, 30)), [False, True, False])
    equal(fluxjax.onehot(40, (10, 20, 30), 20), [False, True, False])
    raises(Exception, fluxjax.onehot, "d", "abc")
    raises(Exception, fluxjax.onehot, "d", "abc", "e")
    b = rows([0, 1], [1, 0], [0, 0], dtype=bool)
    equal(fluxjax.onehotbatch([20, 10], range(10, 40, 10)), b)
    equal(fluxjax.onehotbatch([40, 10], (10, 20, 30), 20), b)
    equal(fluxjax.onehotbatch("abc", "abc"), np.eye(3, dtype=bool))
    equal(fluxjax.onehotbatch("zbc", ("a", "b", "c"), "a"), np.eye(3, dtype=bool))
    equal(fluxjax.onehotbatch([10, 20], [30, 40, 50], 30), rows([1, 1], [0, 0], [0, 0], dtype=bool))
    raises(Exception, fluxjax.onehotbatch, ["a", "d"], ["a", "b", "c"])
    raises(Exception, fluxjax.onehotbatch, [2, 5], range(0, 5))


@case(
    names=("onecold", "onehotbatch"),
    source=ONEHOT,
    julia="""
    a = [1, 2, 5, 3.]
    A = [1 20 5; 2 7 6; 3 9 10; 2 1 14]
    labels = ['A', 'B', 'C', 'D']
    @test onecold(a) == 3
    @test onecold(A) == [3, 1, 4]
    @test onecold(a, labels) == 'C'
    @test onecold(A, labels) == ['C', 'A', 'D']
    data = [:b, :a, :c]
    labels = [:a, :b, :c]
    hot = onehotbatch(data, labels)
    cold = onecold(hot, labels)
    @test cold == data
    """,
)
def case_onecold():
    a = np.array([1, 2, 5, 3.0])
    A = rows([1, 20, 5], [2, 7, 6], [3, 9, 10], [2, 1, 14])
    assert fluxjax.onecold(a) == 2  # 0-based index (Julia's 3)
    equal(fluxjax.onecold(A), [2, 0, 3])
    assert fluxjax.onecold(a, list("ABCD")) == "C"
    assert list(fluxjax.onecold(A, list("ABCD"))) == ["C", "A", "D"]
    hot = fluxjax.onehotbatch(["b", "a", "c"], ["a", "b", "c"])
    assert list(fluxjax.onecold(hot, ["a", "b", "c"])) == ["b", "a", "c"]


@case(
    names=("DataLoader",),
    source="Flux.jl test/data.jl",
    julia="""
    X = reshape([1:10;], (2, 5))
    Y = [1:5;]
    d = DataLoader(X, batchsize=2)
    batches = collect(d)
    @test length(batches) == 3
    @test batches[1] == X[:,1:2]
    @test batches[2] == X[:,3:4]
    @test batches[3] == X[:,5:5]
    d = DataLoader(X, batchsize=2, partial=false)
    batches = collect(d)
    @test length(batches) == 2
    @test batches[1] == X[:,1:2]
    @test batches[2] == X[:,3:4]
    d = DataLoader((X, Y), batchsize=2)
    batches = collect(d)
    @test length(batches) == 3
    @test batches[1][1] == X[:,1:2]
    @test batches[1][2] == Y[1:2]
    @test batches[3][1] == X[:,5:5]
    @test batches[3][2] == Y[5:5]
    """,
)
def case_dataloader():
    X = jl(range(1, 11), (2, 5), np.int64)
    Y = np.arange(1, 6)
    b = list(fluxjax.DataLoader(X, batchsize=2))
    assert len(b) == 3
    equal(b[0], X[:, 0:2])
    equal(b[1], X[:, 2:4])
    equal(b[2], X[:, 4:5])
    b = list(fluxjax.DataLoader(X, batchsize=2, partial=False))
    assert len(b) == 2
    equal(b[1], X[:, 2:4])
    b = list(fluxjax.DataLoader((X, Y), batchsize=2))
    assert len(b) == 3
    equal(b[0][0], X[:, 0:2])
    equal(b[0][1], Y[0:2])
    equal(b[2][0], X[:, 4:5])
    equal(b[2][1], Y[4:5])
