"""MLUtils' views and resampling, 0-based, observations on the last axis: `slidingwindow`
(MLUtils.jl test/slidingwindow.jl), `BatchView`/`batchsize`/`ObsView` (test/batchview.jl),
`oversample`/`undersample` (test/resample.jl), `groupobs` (its docstring example)."""

import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.errors import DimensionMismatch


def test_slidingwindow():
    """test/slidingwindow.jl: 1:20 size 5 -> 16 windows; stride 3 -> 6; a 3x6 matrix, size 2 -> 5."""
    s = Flux.slidingwindow(range(1, 21), size=5)
    assert len(s) == 16 and list(s[0]) == [1, 2, 3, 4, 5] and list(s[1]) == [2, 3, 4, 5, 6]
    s = Flux.slidingwindow(range(1, 21), size=5, stride=3)
    assert len(s) == 6
    assert [list(w)[0] for w in s] == [1, 4, 7, 10, 13, 16] and list(s[5]) == list(range(16, 21))
    data = np.arange(1, 19).reshape(6, 3).T  # Julia's reshape(1:18, 3, 6)
    s = Flux.slidingwindow(data, size=2)
    assert len(s) == 5
    np.testing.assert_array_equal(s[0], [[1, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(s[1], [[4, 7], [5, 8], [6, 9]])
    assert [w.shape for w in s] == [(3, 2)] * 5
    # vector indexing (#213): getobs of several windows is a list of windows
    v = Flux.slidingwindow(range(1, 21), size=5)
    assert [list(w) for w in Flux.getobs(v, [0, 2])] == [list(v[0]), list(v[2])]
    x = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    np.testing.assert_array_equal(Flux.getobs(Flux.slidingwindow(x, size=2), [0, 1])[0], [[1, 2], [6, 7]])
    with pytest.raises(ValueError, match="larger than the data's 20"):
        Flux.slidingwindow(range(20), size=21)


def test_batchview_and_batchsize():
    """test/batchview.jl: 15 observations, batchsize 3 -> 5 batches; batchsize 16 -> 1 batch of 15;
    batchsize 5: A[1] == obsview(var, 6:10) (0-based A[1] is observations 5..9); partial=false drops the rest."""
    X = np.arange(60.0).reshape(4, 15)
    y = np.arange(15)
    for var in (X, y, (X, y)):
        A = Flux.BatchView(var, batchsize=3)
        assert len(A) == 5 and Flux.batchsize(A) == 3 and Flux.numobs(A) == 5
    A = Flux.BatchView(X, batchsize=16)
    assert len(A) == 1 and Flux.batchsize(A) == 15
    A = Flux.BatchView(X, batchsize=5)
    np.testing.assert_array_equal(A[1], X[:, 5:10])
    np.testing.assert_array_equal(Flux.getobs(A, 2), X[:, 10:15])
    np.testing.assert_array_equal(A[-1], A[2])
    np.testing.assert_array_equal(Flux.getobs(A[[0, 2]]), X[:, [*range(5), *range(10, 15)]])
    np.testing.assert_array_equal(Flux.getobs(A), X)
    with pytest.raises(IndexError, match="index 3 is out of range for 3"):
        A[3]
    bx, by = Flux.BatchView((X, y), batchsize=5)[1]
    np.testing.assert_array_equal(by, [5, 6, 7, 8, 9])
    bv = Flux.BatchView(list(range(1, 13)), batchsize=5, partial=False)
    assert len(bv) == 2 and bv[0] == [1, 2, 3, 4, 5] and bv[1] == [6, 7, 8, 9, 10]
    with pytest.raises(DimensionMismatch):
        Flux.BatchView((np.zeros((2, 10)), np.zeros(9)))
    assert Flux.batchsize(Flux.DataLoader(X, batchsize=4)) == 4
    with pytest.raises(TypeError, match="BatchView or a DataLoader"):
        Flux.batchsize(X)


def test_obsview():
    """test/batchview.jl "subsetting": ObsView(A, 1:2) of a BatchView has 2 observations; out of range raises."""
    X = np.arange(60.0).reshape(4, 15)
    A = Flux.BatchView(X, batchsize=3)
    S = Flux.ObsView(A, slice(0, 2))
    assert len(S) == 2 and Flux.numobs(S) == 2
    np.testing.assert_array_equal(S[1], X[:, 3:6])
    np.testing.assert_array_equal(Flux.getobs(S), X[:, :6])
    with pytest.raises(IndexError):
        Flux.ObsView(A, range(6))
    v = Flux.ObsView(X, [4, 1])
    np.testing.assert_array_equal(v[0], X[:, 4])
    np.testing.assert_array_equal(Flux.getobs(v), X[:, [4, 1]])


def test_oversample_undersample():
    """test/resample.jl (MLUtils 0.4: labels given apart come back apart), 0-based. y = a c c a b:
    oversample adds one more b (observation 4);
    undersample keeps one per class, in order [a, c, b] with the b at observation 4."""
    x = np.random.default_rng(0).random((2, 5))
    y = ["a", "c", "c", "a", "b"]
    y2 = ["c", "c", "c", "a", "b"]
    ox, oy = Flux.oversample((x, y), fraction=1, shuffle=False)
    assert ox.shape == (2, 6) and oy == [*y, "b"]
    np.testing.assert_array_equal(ox[:, :5], x)
    np.testing.assert_array_equal(ox[:, 5], x[:, 4])
    ox2, oy2 = Flux.oversample(x, y, shuffle=False)  # labels apart: (data, labels) back
    np.testing.assert_array_equal(ox2, ox)
    assert oy2 == oy
    # y2: c has 3; a (observation 3) and b (observation 4) get two more each. MLUtils appends them in its
    # Dict's order (b first); here in order of first appearance (a first).
    ox, oy = Flux.oversample(x, y2, shuffle=False)
    assert ox.shape == (2, 9) and oy == [*y2, "a", "a", "b", "b"]
    np.testing.assert_array_equal(ox[:, 5], x[:, 3])
    np.testing.assert_array_equal(ox[:, 8], x[:, 4])
    ux, uy = Flux.undersample((x, y), shuffle=False)
    assert ux.shape == (2, 3) and uy == ["a", "c", "b"]
    np.testing.assert_array_equal(ux[:, 2], x[:, 4])
    ux, uy = Flux.undersample(x, y2, shuffle=False)
    assert uy == ["c", "a", "b"]
    np.testing.assert_array_equal(ux[:, 1:3], x[:, 3:5])
    # shuffled: the same counts per class, every observation still from the data
    sx, sy = Flux.oversample((x, y), shuffle=True, rng=1)
    assert sorted(sy) == sorted([*y, "b"]) and sx.shape == (2, 6)
    sx, sy = Flux.undersample((x, y2), shuffle=True, rng=1)
    assert sorted(sy) == ["a", "b", "c"]
    with pytest.raises(TypeError, match="give the labels"):
        Flux.oversample(x)


def test_groupobs():
    """MLUtils' docstring: groupobs(>(0), -10:10) gives 2 groups (false first: 11, then true: 10)."""
    g = Flux.groupobs(lambda v: v > 0, range(-10, 11))
    assert len(g) == 2
    assert list(g[0]) == list(range(-10, 1)) and list(g[1]) == list(range(1, 11))
    X = np.arange(12.0).reshape(2, 6)
    g = Flux.groupobs(lambda col: int(col[0]) % 3, X)
    np.testing.assert_array_equal(g[0], X[:, [0, 3]])
    np.testing.assert_array_equal(g[2], X[:, [2, 5]])
