"""MLUtils' helpers reached through Flux (fluxjax/mlutils.py), against MLUtils.jl's own tests
(test/utils.jl, test/batch.jl, test/splitobs.jl), translated to 0-based `dims` and indices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux


def jl(values, shape):
    """Julia's `reshape(collect(values), shape)` (column-major)."""
    return np.asarray(list(values)).reshape(shape, order="F")


def test_unsqueeze():
    # test/utils.jl "unsqueeze": unsqueeze(x; dims=d) == reshape(x, ...1 at d...)
    x = np.random.default_rng(0).normal(size=(2, 3, 2)).astype(np.float32)
    np.testing.assert_array_equal(Flux.unsqueeze(x, dims=0), x.reshape(1, 2, 3, 2))
    np.testing.assert_array_equal(Flux.unsqueeze(x, dims=1), x.reshape(2, 1, 3, 2))
    np.testing.assert_array_equal(Flux.unsqueeze(x, dims=2), x.reshape(2, 3, 1, 2))
    np.testing.assert_array_equal(Flux.unsqueeze(x, dims=3), x.reshape(2, 3, 2, 1))
    np.testing.assert_array_equal(Flux.unsqueeze(dims=1)(x), Flux.unsqueeze(x, dims=1))
    with pytest.raises(ValueError):  # @test_throws AssertionError unsqueeze(rand(2,2), dims=4)
        Flux.unsqueeze(np.ones((2, 2)), dims=3)
    # docstring: unsqueeze([1 2; 3 4], dims=2) is 2×1×2 with [:, :, 1] = [1; 3]
    y = Flux.unsqueeze(jnp.array([[1, 2], [3, 4]]), dims=1)
    assert y.shape == (2, 1, 2) and y[:, 0, 0].tolist() == [1, 3]
    (g,) = Flux.gradient(lambda a: jnp.sum(Flux.unsqueeze(a, dims=1) * 2), jnp.ones((2, 2)))
    np.testing.assert_array_equal(g, 2 * np.ones((2, 2)))
    # in a Chain, as Flux scripts write `x -> unsqueeze(x, dims=...)`
    assert Flux.Chain(Flux.unsqueeze(dims=0))(jnp.ones(3)).shape == (1, 3)


def test_unstack():
    # test/utils.jl "stack and unstack"
    stacked = np.array([[8, 9, 3, 5], [9, 6, 6, 9], [9, 1, 7, 2], [7, 4, 10, 6]])
    unstacked = [[8, 9, 9, 7], [9, 6, 1, 4], [3, 6, 7, 10], [5, 9, 2, 6]]
    assert [u.tolist() for u in Flux.unstack(stacked, dims=1)] == unstacked
    np.testing.assert_array_equal(jnp.stack(Flux.unstack(stacked, dims=1), axis=1), stacked)
    np.testing.assert_array_equal(jnp.stack(Flux.unstack(stacked, dims=0), axis=0), stacked)


def test_chunk():
    # test/utils.jl "chunk"
    cs = Flux.chunk(list(range(1, 11)), 3)
    assert cs == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    x = jl(range(1, 21), (5, 4))
    cs = Flux.chunk(jnp.asarray(x), 2)  # along the last axis by default
    assert len(cs) == 2
    np.testing.assert_array_equal(cs[0], [[1, 6], [2, 7], [3, 8], [4, 9], [5, 10]])
    np.testing.assert_array_equal(cs[1], [[11, 16], [12, 17], [13, 18], [14, 19], [15, 20]])
    x = jl(range(1, 11), (2, 5)).T  # permutedims(reshape(collect(1:10), (2, 5)))
    cs = Flux.chunk(x, size=2, dims=0)
    assert [c.tolist() for c in cs] == [[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10]]]
    # "size collection"
    a = jl(range(1, 11), (5, 2))
    y = Flux.chunk(a, dims=0, size=(1, 4))
    assert y[0].tolist() == [[1, 6]] and y[1].tolist() == [[2, 7], [3, 8], [4, 9], [5, 10]]
    with pytest.raises(ValueError, match="sum of the sizes"):
        Flux.chunk(a, dims=0, size=(1, 3))
    # "chunk by partition_idxs", labels 0-based here: [1,1,3,3,4] -> [0,0,2,2,3]
    x = jl(range(1, 16), (3, 5))
    y = Flux.chunk(x, [0, 0, 2, 2, 3])
    assert len(y) == 4 and y[0].tolist() == [[1, 4], [2, 5], [3, 6]] and y[1].shape == (3, 0)
    assert y[2].tolist() == [[7, 10], [8, 11], [9, 12]] and y[3].tolist() == [[13], [14], [15]]
    y = Flux.chunk(x, [0, 0, 2, 2, 3], npartitions=5)
    assert len(y) == 5 and y[4].shape == (3, 0)
    y = Flux.chunk(x, [0, 0, 1], dims=0)
    assert y[0].tolist() == [[1, 4, 7, 10, 13], [2, 5, 8, 11, 14]] and y[1].tolist() == [[3, 6, 9, 12, 15]]
    # docstring: chunk(1:10, 3) == [1:4, 5:8, 9:10]; chunk(1:10; size = 2); chunk(1:6; size = [2, 4])
    assert Flux.chunk(range(10), 3) == [range(0, 4), range(4, 8), range(8, 10)]
    assert Flux.chunk(range(10), size=2) == [range(0, 2), range(2, 4), range(4, 6), range(6, 8), range(8, 10)]
    assert Flux.chunk(range(6), size=[2, 4]) == [range(0, 2), range(2, 6)]
    # the gradient of a function of the chunks fills the whole array
    (g,) = Flux.gradient(lambda v: sum(jnp.sum(c * (i + 1)) for i, c in enumerate(Flux.chunk(v, 3))), jnp.ones(10))
    np.testing.assert_array_equal(g, [1, 1, 1, 1, 2, 2, 2, 2, 3, 3])


def test_rpad_constant():
    # test/utils.jl "rpad_constant"
    assert Flux.rpad_constant(jnp.array([1, 2]), 4, -1).tolist() == [1, 2, -1, -1]
    assert Flux.rpad_constant(jnp.array([1, 2, 3]), 2).tolist() == [1, 2, 3]
    m = jnp.array([[1, 2], [3, 4]])
    assert Flux.rpad_constant(m, 4, dims=0).tolist() == [[1, 2], [3, 4], [0, 0], [0, 0]]
    assert Flux.rpad_constant(m, 4).tolist() == [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert Flux.rpad_constant(m, (3, 4)).tolist() == [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 0, 0]]


def test_batchseq_and_batch_sequence():
    # test/batch.jl "batchseq"
    bs = Flux.batchseq([[1, 2, 3], [4, 5]], 0)
    assert [b.tolist() for b in bs] == [[1, 4], [2, 5], [3, 0]]
    bs = Flux.batchseq([[1, 2, 3], [4, 5]], -1)
    assert [b.tolist() for b in bs] == [[1, 4], [2, 5], [3, -1]]
    bs = Flux.batchseq([[np.ones(3)] * 3, [np.zeros(3)] * 2], [-1, -1, -1])
    np.testing.assert_array_equal(bs[0], [[1.0, 0.0]] * 3)
    np.testing.assert_array_equal(bs[1], [[1.0, 0.0]] * 3)
    np.testing.assert_array_equal(bs[2], [[1.0, -1.0]] * 3)
    bs = Flux.batchseq([np.ones((2, 4)), np.zeros((2, 3)), np.ones((2, 2))])
    assert len(bs) == 4
    np.testing.assert_array_equal(bs[0], [[1, 0, 1], [1, 0, 1]])
    np.testing.assert_array_equal(bs[2], [[1, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(bs[3], [[1, 0, 0], [1, 0, 0]])
    # char-rnn's getdata: `batchseq(Xtext, '_')` over Vector{Char} sequences gives one Vector{Char} per step
    assert Flux.batchseq([list("hello"), list("hi"), "hey"], "_") == [
        ["h", "h", "h"], ["e", "i", "e"], ["l", "_", "y"], ["l", "_", "_"], ["o", "_", "_"]]
    # test/batch.jl "batch_sequences"
    y = Flux.batch_sequence([jnp.array([1, 2, 3]), jnp.array([10, 20])])
    assert y.tolist() == [[1, 10], [2, 20], [3, 0]]
    y = Flux.batch_sequence((np.ones((2, 1)), np.full((2, 3), 2.0)), pad=-1)
    np.testing.assert_array_equal(y[:, :, 0], [[1, -1, -1], [1, -1, -1]])
    np.testing.assert_array_equal(y[:, :, 1], [[2, 2, 2], [2, 2, 2]])
    # batch / unbatch reached as Flux.batch (MLUtils test/batch.jl docstring)
    assert Flux.batch([[1, 2, 3], [4, 5, 6]]).tolist() == [[1, 4], [2, 5], [3, 6]]
    assert [u.tolist() for u in Flux.unbatch(jnp.array([[1, 3, 5, 7], [2, 4, 6, 8]]))] == [[1, 2], [3, 4], [5, 6], [7, 8]]


@pytest.mark.parametrize("xs, message", [
    ([(1,), (3, 4)], r"observation 1 is a tuple of length 2, observation 0 a tuple of length 1"),
    ([(1, 2), (3,)], r"observation 1 is a tuple of length 1, observation 0 a tuple of length 2"),
    ([{"a": 1}, {"a": 2, "b": 3}], r"observation 1 is a dict with keys \['a', 'b'\], observation 0 a dict with keys \['a'\]"),
    ([{"a": 1}, {"b": 2}], r"observation 1 is a dict with keys \['b'\]"),
    ([{"a": 1}, (1,)], r"observation 1 is a tuple of length 1, observation 0 a dict"),
])
def test_batch_of_observations_of_other_structures_raises(xs, message):
    """MLUtils asserts that tuples have one length and dicts one set of keys; `batch` read them off the first
    observation and dropped what the others had more (`batch([(1,), (3, 4)])` gave `([1, 3],)`)."""
    with pytest.raises(ValueError, match=message):
        Flux.batch(xs)
    got = Flux.batch([{"a": 1, "b": 2}, {"b": 4, "a": 3}])  # the same keys in another order: by key
    assert got["a"].tolist() == [1, 3] and got["b"].tolist() == [2, 4]


def test_splitobs():
    # test/splitobs.jl "Int", 0-based ranges here
    assert Flux.splitobs(10, at=0.7) == (range(0, 7), range(7, 10))
    assert Flux.splitobs(10, at=0.5) == (range(0, 5), range(5, 10))
    assert Flux.splitobs(10, at=(0.5, 0.3)) == (range(0, 5), range(5, 8), range(8, 10))
    assert tuple(map(len, Flux.splitobs(150, at=0.7))) == (105, 45)
    assert tuple(map(len, Flux.splitobs(150, at=(0.2, 0.3)))) == (30, 45, 75)
    assert tuple(map(len, Flux.splitobs(150, at=(0.1, 0.2, 0.3)))) == (15, 30, 45, 60)
    assert sum(sum(r) for r in Flux.splitobs(150, at=(0.1, 0.4, 0.2))) == sum(range(150))
    assert tuple(map(sum, Flux.splitobs(150, at=0.7))) == (5565 - 105, 5760 - 45)  # 1-based sums there
    # "Array ...": 15 observations along the last axis
    X = np.random.default_rng(0).random((4, 15))
    for var in (X, X[0]):
        assert tuple(map(Flux.numobs, Flux.splitobs(var, at=10))) == (10, 5)
        assert tuple(map(Flux.numobs, Flux.splitobs(var, at=0.7))) == (10, 5)
        assert tuple(map(Flux.numobs, Flux.splitobs(var, at=(0.2, 0.3)))) == (3, 4, 8)
        assert tuple(map(Flux.numobs, Flux.splitobs(var, at=(0.11, 0.2, 0.3)))) == (2, 3, 4, 6)
        assert tuple(map(Flux.numobs, Flux.splitobs(var, at=(2, 3, 4)))) == (2, 3, 4, 6)
    # "Tuple of Array": tuples stay tuples
    parts = Flux.splitobs((X, np.arange(15)), at=0.6)
    assert all(isinstance(p, tuple) for p in parts) and tuple(map(Flux.numobs, parts)) == (9, 6)
    np.testing.assert_array_equal(parts[1][0], X[:, 9:])
    with pytest.raises(Flux.DimensionMismatch):  # @test_throws DimensionMismatch splitobs((X, rand(149)), at=0.7)
        Flux.splitobs((X, np.ones(14)), at=0.7)
    # "shuffle": the same permutation for every part; nothing lost, nothing duplicated
    np.testing.assert_array_equal(Flux.splitobs(X, at=0.1)[0], X[:, :2])
    a, b = Flux.splitobs((X, np.arange(15)), at=0.5, shuffle=True, rng=3)
    np.testing.assert_array_equal(a[0], X[:, np.asarray(a[1])])
    assert sorted(np.concatenate([a[1], b[1]]).tolist()) == list(range(15))
    # docstring: splitobs(1:10, at=0.5, stratified=[0,0,0,0,1,1,1,1,1,1]) == ([1, 2, 5, 6, 7], [3, 4, 8, 9, 10])
    s1, s2 = Flux.splitobs(np.arange(1, 11), at=0.5, stratified=[0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    assert s1.tolist() == [1, 2, 5, 6, 7] and s2.tolist() == [3, 4, 8, 9, 10]


def test_numobs_getobs_shuffleobs_groups():
    data = {"x": np.arange(12).reshape(3, 4), "y": np.arange(4)}
    assert Flux.numobs(data) == 4 and Flux.numobs([1, 2, 3]) == 3
    obs = Flux.getobs(data, 2)
    assert obs["x"].tolist() == [2, 6, 10] and obs["y"] == 2
    Flux.seed_(0)
    sh = Flux.shuffleobs(data)
    np.testing.assert_array_equal(sh["x"][0], sh["y"])  # one permutation for both parts
    assert sorted(sh["y"].tolist()) == [0, 1, 2, 3]
    # test/utils.jl "group_counts"; group_indices docstring (0-based)
    assert Flux.group_counts(["a", "b", "b"]) == {"a": 1, "b": 2}
    assert Flux.group_indices(["yes", "no", "maybe", "yes"]) == {"yes": [0, 3], "no": [1], "maybe": [2]}


def test_like_constructors():
    # test/utils.jl "ones_like", "zeros_like", "fill_like", "trues_like and falses_like"
    x = np.random.default_rng(0).random((2, 3)).astype(np.float16)
    y = Flux.ones_like(x, (2, 4, 2))
    assert y.dtype == jnp.float16 and y.shape == (2, 4, 2) and bool(jnp.all(y == 1))
    y = Flux.zeros_like(x, (2, 4, 2))
    assert y.dtype == jnp.float16 and bool(jnp.all(y == 0))
    y = Flux.fill_like(x, 2.2, (2, 4, 2))
    assert y.dtype == jnp.float16 and bool(jnp.all(y == np.float16(2.2)))
    y = Flux.trues_like(x, (2, 4, 2))
    assert y.dtype == jnp.bool_ and y.shape == (2, 4, 2) and bool(jnp.all(y))
    y = Flux.falses_like(x)
    assert y.dtype == jnp.bool_ and y.shape == (2, 3) and not bool(jnp.any(y))
    assert Flux.ones_like(x, jnp.float32).dtype == jnp.float32 and Flux.zeros_like(x, jnp.int32, 5).shape == (5,)
    # "rand_like"/"randn_like": the draws of the same rng with that dtype and size
    key = jax.random.PRNGKey(42)
    y = Flux.rand_like(x, (2, 4, 2), rng=key)
    assert y.dtype == jnp.float16
    np.testing.assert_array_equal(y, jax.random.uniform(key, (2, 4, 2), jnp.float16))
    y = Flux.randn_like(x, (2, 4, 2), rng=key)
    np.testing.assert_array_equal(y, jax.random.normal(key, (2, 4, 2), jnp.float16))
    assert Flux.randn_like(jnp.ones((3, 2))).shape == (3, 2)
    Flux.seed_(1)
    a = Flux.randn_like(jnp.ones(3))
    Flux.seed_(1)
    np.testing.assert_array_equal(a, Flux.randn_like(jnp.ones(3)))  # the global stream: seed_ reproduces it


def test_topk():
    # test/utils.jl "topk" (0-based positions and dims here)
    v, i = Flux.topk(jnp.array([5, 1, 4, 2, 3]), 3)
    assert v.tolist() == [5, 4, 3] and i.tolist() == [0, 2, 4]
    v, i = Flux.topk(jnp.array([5, 1, 4, 2, 3]), 2, rev=False)
    assert v.tolist() == [1, 2] and i.tolist() == [1, 3]
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    for dims in (0, 1):
        for rev in (True, False):
            vals, inds = Flux.topk(x, 3, dims=dims, rev=rev)
            assert vals.shape == inds.shape
            srt = np.sort(x, axis=dims)
            srt = np.flip(srt, axis=dims) if rev else srt
            np.testing.assert_array_equal(vals, np.take(srt, range(3), axis=dims))
            np.testing.assert_array_equal(np.take_along_axis(x, np.asarray(inds), axis=dims), vals)
    for k in (0, 4):  # @test_throws ArgumentError topk([1, 2, 3], 0) / 4
        with pytest.raises(ValueError):
            Flux.topk(jnp.array([1, 2, 3]), k)
    # "gradient flows through the values only, scattered back to the selected entries"
    x = jnp.asarray(np.random.default_rng(1).normal(size=(5, 4)), jnp.float32)
    for dims in (0, 1):
        (g,) = Flux.gradient(lambda z, d=dims: jnp.sum(Flux.topk(z, 2, dims=d)[0] ** 2), x)
        vals, inds = Flux.topk(x, 2, dims=dims)
        want = np.zeros(x.shape, np.float32)
        np.put_along_axis(want, np.asarray(inds), 2 * np.asarray(vals), axis=dims)
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_kfolds_eachobs_randobs_rescale():
    # test/folds.jl "kfolds" and the kfolds docstring (0-based)
    itrain, ival = Flux.kfolds(10, 5)
    assert ival == [range(0, 2), range(2, 4), range(4, 6), range(6, 8), range(8, 10)]
    assert itrain[0] == [2, 3, 4, 5, 6, 7, 8, 9] and itrain[4] == list(range(8))
    itrain, ival = Flux.kfolds(15, k=5)
    assert len(itrain) == len(ival) == 5 and all(len(t) == 12 for t in itrain) and all(len(v) == 3 for v in ival)
    assert all(sorted([*t, *v]) == list(range(15)) for t, v in zip(itrain, ival))
    assert [len(v) for v in Flux.kfolds(11, 3)[1]] == [4, 4, 3]  # the first n % k folds are one larger
    for (xtr, ytr), (xval, yval) in Flux.kfolds((np.arange(1, 16), np.arange(11, 26)), k=5):
        assert xtr.shape == (12,) and xval.shape == (3,) and ytr.shape == (12,) and yval.shape == (3,)
        assert sorted([*xtr.tolist(), *xval.tolist()]) == list(range(1, 16))
        np.testing.assert_array_equal(ytr - xtr, 10)
    for xtr, xval in Flux.kfolds(np.arange(15), 3, shuffle=True, rng=0):
        assert sorted([*xtr.tolist(), *xval.tolist()]) == list(range(15))
    with pytest.raises(ValueError):
        Flux.kfolds(5, 1)
    # eachobs: one observation at a time, or batches
    X = np.arange(12).reshape(3, 4)
    assert [o.tolist() for o in Flux.eachobs(X)] == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    assert [b.shape for b in Flux.eachobs(X, batchsize=3)] == [(3, 3), (3, 1)]
    # randobs: an observation of the data
    o = Flux.randobs(X, rng=0)
    assert any(np.array_equal(o, X[:, j]) for j in range(4))
    b = Flux.randobs((X, np.arange(4)), 5, rng=1)
    assert b[0].shape == (3, 5)
    np.testing.assert_array_equal(b[0], X[:, np.asarray(b[1])])
    # rescale (test/utils.jl "rescale"): min 0 and max 1 along dims with eps=0; the default is the last axis
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    y = Flux.rescale(x, dims=0, eps=0)
    np.testing.assert_allclose(np.min(y, axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(np.max(y, axis=0), 1, atol=1e-5)
    x3 = np.random.default_rng(3).normal(size=(3, 2, 2)).astype(np.float32)
    np.testing.assert_array_equal(Flux.rescale(x3), Flux.rescale(x3, dims=2))
    lo, hi = x3.min(axis=2, keepdims=True), x3.max(axis=2, keepdims=True)
    np.testing.assert_allclose(Flux.rescale(x3), (x3 - lo) / (hi - lo + 1e-5), rtol=1e-6)


def test_leavepout_mapobs_filterobs_joinobs_obsview():
    # test/folds.jl "leavepout"
    assert Flux.leavepout(15) == Flux.kfolds(15, k=15)
    assert Flux.leavepout(15, p=5) == Flux.kfolds(15, 3)
    folds = Flux.leavepout(np.arange(1, 16), p=5)
    assert len(folds) == 3 and [v.tolist() for _, v in folds] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]]
    with pytest.raises(ValueError):
        Flux.leavepout(10, 6)
    # test/obstransform.jl "mapobs" (0-based: observation 7 is the 8th)
    mdata = Flux.mapobs(lambda x: -x, range(1, 11))
    assert Flux.getobs(mdata, 7) == -8 and len(mdata) == 10 and Flux.numobs(mdata) == 10
    X = np.arange(8.0).reshape(2, 4)
    m = Flux.mapobs(lambda x: 2 * x, X)
    np.testing.assert_array_equal(Flux.getobs(m, [1, 3]), 2 * X[:, [1, 3]])  # f sees the batch
    # "filterobs"
    fdata = Flux.filterobs(lambda x: x > 5, range(1, 11))
    assert Flux.numobs(fdata) == 5 and fdata == [6, 7, 8, 9, 10]
    np.testing.assert_array_equal(Flux.filterobs(lambda c: c[0] >= 2, X), X[:, 2:])
    # "joinobs"
    jdata = Flux.joinobs(range(1, 11), range(11, 21))
    assert Flux.getobs(jdata, 14) == 15
    assert Flux.joinobs(range(1, 6), range(6, 11))[4:6] == [5, 6]
    data = Flux.joinobs(np.ones((2, 3)), np.zeros((2, 3)))
    assert data[:, 2:4].T.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    a, b = Flux.joinobs((X, np.arange(4)), (X + 10, np.arange(4, 8)))
    assert a.shape == (2, 8) and b.tolist() == list(range(8))
    # obsview keeps the observation axis
    assert Flux.obsview(X, 2).shape == (2, 1) and Flux.obsview(X, [0, 3]).shape == (2, 2)


def test_getobs_out_of_range_raises_for_jax_arrays():
    # MLUtils: getobs(x, 8) on 5 observations is a BoundsError; indexing a jax array clamps to the
    # last observation, silently
    X = jnp.arange(10).reshape(2, 5)
    with pytest.raises(IndexError, match="index 7 is out of range for 5 observations"):
        Flux.getobs(X, 7)
    with pytest.raises(IndexError, match="index -6"):
        Flux.getobs((X, jnp.arange(5)), [0, -6])
    np.testing.assert_array_equal(Flux.getobs(X, -1), [4, 9])  # Python's negative indices stay
    np.testing.assert_array_equal(Flux.getobs(X, [4, 0]), [[4, 0], [9, 5]])


@pytest.mark.parametrize("shape", [(2.5, 2), (-1, 3), [np.float32(2)]])
def test_like_shapes_must_be_whole_sizes(shape):
    """MLUtils' `zeros_like(x, dims)` takes integer sizes (Julia has no zeros of size 2.5): the shape was
    truncated quietly (`(2.5, 2)` gave a 2×2 array)."""
    x = jnp.ones(3)
    for f in (Flux.zeros_like, Flux.ones_like, Flux.trues_like):
        with pytest.raises(TypeError, match=r"the shape must be non-negative ints, got"):
            f(x, shape)
    assert Flux.zeros_like(x, (np.int64(2), 3)).shape == (2, 3)
