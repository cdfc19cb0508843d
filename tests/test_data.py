"""One-hot, flatten and DataLoader. Cases from `OneHotArrays.jl/test/onehot.jl` and
`MLUtils.jl/test/dataloader.jl` (flux-tests.md J1-J3), with 0-based indices."""

from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.data import DataLoader, batch, flatten, onecold, onehot, onehotbatch, unbatch
from fluxjax.errors import DimensionMismatch
from fluxjax.random import seed_


def eq(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b)


# OneHotArrays.jl/test/onehot.jl "onehot constructors"
def test_onehot_constructors():
    r = range(10, 40, 10)  # Julia's 10:10:30
    assert eq(onehot(20, r), [False, True, False])
    assert onehot(20, r).dtype == jnp.bool_
    assert eq(onehot(20, (10, 20, 30)), [False, True, False])
    assert eq(onehot(40, (10, 20, 30), 20), [False, True, False])
    with pytest.raises(ValueError, match="'d'"):
        onehot("d", "abc")
    with pytest.raises(ValueError):
        onehot("d", ("a", "b", "c"))
    with pytest.raises(ValueError, match="Default value 'e'"):
        onehot("d", "abc", "e")

    assert eq(onehotbatch([20, 10], r), [[0, 1], [1, 0], [0, 0]])
    assert onehotbatch([20, 10], r).dtype == jnp.bool_
    assert eq(onehotbatch([20, 10], (10, 20, 30)), [[0, 1], [1, 0], [0, 0]])
    assert eq(onehotbatch([40, 10], (10, 20, 30), 20), [[0, 1], [1, 0], [0, 0]])
    assert eq(onehotbatch("abc", "abc"), np.eye(3, dtype=bool))
    assert eq(onehotbatch("zbc", ("a", "b", "c"), "a"), np.eye(3, dtype=bool))
    assert eq(onehotbatch([10, 20], [30, 40, 50], 30), [[1, 1], [0, 0], [0, 0]])
    for args in [
        (["a", "d"], ["a", "b", "c"]),
        (["a", "d"], ("a", "b", "c")),
        (["a", "d"], ["a", "b", "c"], "e"),
        (["a", "d"], ("a", "b", "c"), "e"),
    ]:
        with pytest.raises(ValueError):
            onehotbatch(*args)

    # isequal semantics for floats
    floats = (0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf)
    assert onecold(onehot(0.0, floats)) == 0
    assert onecold(onehot(-0.0, floats)) == 1
    assert onecold(onehot(np.inf, floats)) == 4

    # integer fast path agrees with the generic one; errors name the value
    assert eq(onehotbatch([1, 3, 0, 4], range(5)), onehotbatch([1, 3, 0, 4], tuple(range(5))))
    assert eq(onehotbatch(np.array([[2, 3, 7, 4]]), range(2, 8)), onehotbatch([[2, 3, 7, 4]], tuple(range(2, 8))))
    with pytest.raises(ValueError, match="-1"):
        onehotbatch([2, -1], range(5))
    with pytest.raises(ValueError, match="5"):
        onehotbatch([2, 5], range(5))


def test_onehotbatch_nd_and_first_occurrence():
    data = np.array([[0, 2, 1], [1, 1, 0]])
    h = onehotbatch(data, range(3))
    assert h.shape == (3, 2, 3)
    for k in np.ndindex(data.shape):
        assert eq(h[(slice(None),) + k], onehot(int(data[k]), range(3)))
    # duplicated labels: the first occurrence wins
    assert eq(onehotbatch([5], [5, 5, 6]), [[True], [False], [False]])
    assert eq(onehotbatch(np.array([5.0]), [5.0, 5.0, 6.0]), [[True], [False], [False]])


def test_onehotbatch_under_jit():
    f = jax.jit(lambda d: onehotbatch(d, range(4)))
    assert eq(f(jnp.array([3, 0, 1])), onehotbatch([3, 0, 1], range(4)))
    g = jax.jit(lambda d: onehotbatch(d, range(4), 0))
    assert eq(g(jnp.array([3, 9])), [[0, 1], [0, 0], [0, 0], [1, 0]])


# OneHotArrays.jl/test/onehot.jl "onecold"
def test_onecold():
    a = np.array([1, 2, 5, 3.0])
    A = np.array([[1, 20, 5], [2, 7, 6], [3, 9, 10], [2, 1, 14]])
    labels = ["A", "B", "C", "D"]
    assert onecold(a) == 2  # Julia: 3 (1-based)
    assert isinstance(onecold(a), int)
    assert eq(onecold(A), [2, 0, 3])  # Julia: [3, 1, 4]
    assert onecold(a, labels) == "C"
    assert onecold(a, tuple(labels)) == "C"
    assert onecold(a, "ABCD") == "C"
    assert onecold(A, labels) == ["C", "A", "D"]
    assert onecold(A, tuple(labels)) == ["C", "A", "D"]
    data = ["b", "a", "c"]
    labels = ["a", "b", "c"]
    assert onecold(onehotbatch(data, labels), labels) == data
    # numeric labels give an array
    assert eq(onecold(A, [10, 20, 30, 40]), [30, 10, 40])
    with pytest.raises(DimensionMismatch, match="3 labels for a vector of length 2"):
        onecold(np.array([0.3, 0.2]), ("a", "b", "c"))
    with pytest.raises(ValueError, match="3 labels for a vector of length 4"):
        onecold(np.array([0.3, 0.2, 0.5, 0.99]), ("a", "b", "c"))
    with pytest.raises(ValueError, match="nan"):
        onecold(np.array([0.3, np.nan, 0.5]), ("a", "b", "c"))


def test_onecold_roundtrip_and_jit():
    y = np.array([3, 0, 2, 2, 1])
    assert eq(onecold(onehotbatch(y, range(4))), y)
    logits = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6)))
    assert eq(jax.jit(onecold)(logits), np.argmax(np.asarray(logits), axis=0))
    assert eq(onecold(np.zeros((3, 2, 5))).shape, (2, 5))


def test_flatten_column_major():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # (W, H, C, N)
    f = flatten(x)
    assert f.shape == (24, 5)
    assert eq(f, np.reshape(x, (-1, 5), order="F"))
    # W varies fastest within a column, as Julia's vec
    assert eq(f[:, 1], x[:, :, :, 1].reshape(-1, order="F"))
    assert flatten(np.arange(6)).shape == (1, 6)
    # traceable
    assert eq(jax.jit(flatten)(x), np.reshape(x, (-1, 5), order="F"))


def test_batch_unbatch():
    xs = [jnp.array([1, 2]), jnp.array([3, 4]), jnp.array([5, 6])]
    b = batch(xs)
    assert eq(b, [[1, 3, 5], [2, 4, 6]])
    assert all(eq(u, x) for u, x in zip(unbatch(b), xs, strict=True))
    bt = batch([(jnp.ones(2), 1), (jnp.zeros(2), 2)])
    assert isinstance(bt, tuple) and eq(bt[0], [[1, 0], [1, 0]]) and eq(bt[1], [1, 2])
    bd = batch([{"x": jnp.ones(2)}, {"x": jnp.zeros(2)}])
    assert eq(bd["x"], [[1, 0], [1, 0]])


# MLUtils.jl/test/dataloader.jl
X2 = np.arange(1, 11).reshape((2, 5), order="F")  # Julia's reshape([1:10;], (2, 5))
Y2 = np.arange(1, 6)


def test_dataloader_array():
    d = DataLoader(X2, batchsize=2)
    batches = list(d)
    assert len(batches) == len(d) == 3
    assert all(isinstance(b, jax.Array) for b in batches)
    assert eq(batches[0], X2[:, 0:2])
    assert eq(batches[1], X2[:, 2:4])
    assert eq(batches[2], X2[:, 4:5])

    d = DataLoader(X2, batchsize=2, partial=False)
    batches = list(d)
    assert len(batches) == len(d) == 2
    assert eq(batches[0], X2[:, 0:2]) and eq(batches[1], X2[:, 2:4])


def test_dataloader_tuple_namedtuple_dict():
    d = DataLoader((X2,), batchsize=2, partial=False)
    batches = list(d)
    assert len(batches) == 2
    assert isinstance(batches[0], tuple) and len(batches[0]) == 1
    assert eq(batches[1][0], X2[:, 2:4])

    d = DataLoader((X2, Y2), batchsize=2)
    batches = list(d)
    assert len(batches) == 3
    assert all(len(b) == 2 for b in batches)
    assert eq(batches[0][0], X2[:, 0:2]) and eq(batches[0][1], Y2[0:2])
    assert eq(batches[1][0], X2[:, 2:4]) and eq(batches[1][1], Y2[2:4])
    assert eq(batches[2][0], X2[:, 4:5]) and eq(batches[2][1], Y2[4:5])

    NT = namedtuple("NT", ["x", "y"])
    batches = list(DataLoader(NT(X2, Y2), batchsize=2))
    assert isinstance(batches[0], NT)
    assert eq(batches[0].x, X2[:, 0:2]) and eq(batches[0][1], Y2[0:2])
    assert eq(batches[2].x, X2[:, 4:5]) and eq(batches[2].y, Y2[4:5])

    data = {"x": np.random.default_rng(0).random((2, 4)), "y": np.random.default_rng(1).random(4)}
    c = list(DataLoader(data, batchsize=2))
    assert isinstance(c[0], dict) and set(c[0]) == {"x", "y"}
    np.testing.assert_allclose(c[0]["x"], data["x"][:, 0:2], rtol=1e-6)
    np.testing.assert_allclose(c[1]["y"], data["y"][2:4], rtol=1e-6)


def test_dataloader_default_batchsize_and_ranges():
    for x in DataLoader(np.zeros((2, 10))):
        assert x.shape == (2, 1)
    for x, y in DataLoader((np.ones((2, 10)), np.full(10, 5))):
        assert x.shape == (2, 1) and eq(y, [5])
    d = list(DataLoader(np.arange(1, 13), batchsize=5, partial=False))
    assert len(d) == 2 and eq(d[0], np.arange(1, 6)) and eq(d[1], np.arange(6, 11))
    c = list(DataLoader(range(1, 11), batchsize=2))
    assert eq(c[0], [1, 2]) and len(c) == 5
    # batchsize < 0: single observations, last axis dropped
    obs = list(DataLoader(X2, batchsize=-1))
    assert len(obs) == 5 and eq(obs[1], X2[:, 1])
    # jax arrays work too
    assert eq(next(iter(DataLoader(jnp.asarray(X2), batchsize=2))), X2[:, :2])


def test_dataloader_shuffle_and_rng():
    X4 = np.random.default_rng(0).random((2, 1000))
    d1 = DataLoader(X4, batchsize=2, shuffle=True)
    d2 = DataLoader(X4, batchsize=2, shuffle=True)
    assert not eq(next(iter(d1)), next(iter(d2)))
    seed_(17)
    x1 = next(iter(DataLoader(X4, batchsize=2, shuffle=True)))
    seed_(17)
    assert eq(x1, next(iter(DataLoader(X4, batchsize=2, shuffle=True))))
    k = jax.random.PRNGKey(1)
    d1 = DataLoader(X4, batchsize=2, shuffle=True, rng=k)
    d2 = DataLoader(X4, batchsize=2, shuffle=True, rng=k)
    assert eq(next(iter(d1)), next(iter(d2)))
    # an int rng is a seed
    assert eq(next(iter(DataLoader(X4, batchsize=2, shuffle=True, rng=1))), x_first(X4, 1))
    # each epoch reshuffles; every epoch is a permutation of all observations, paired across arrays
    d = DataLoader((X4[:, :10], np.arange(10)), batchsize=3, shuffle=True, rng=3)
    e1 = [np.asarray(y) for _, y in d]
    e2 = [np.asarray(y) for _, y in d]
    assert sorted(np.concatenate(e1).tolist()) == list(range(10))
    assert not np.array_equal(np.concatenate(e1), np.concatenate(e2))
    for x, y in d:
        np.testing.assert_allclose(x, X4[:, np.asarray(y)], rtol=1e-6)


def x_first(X, seed):
    return next(iter(DataLoader(X, batchsize=2, shuffle=True, rng=jax.random.PRNGKey(seed))))


def test_dataloader_collate():
    obs = next(iter(DataLoader((X2, Y2), batchsize=2, collate=False)))
    assert isinstance(obs, list) and len(obs) == 2
    assert eq(obs[1][0], X2[:, 1]) and eq(obs[1][1], Y2[1])
    b = next(iter(DataLoader((X2, Y2), batchsize=2, collate=True)))
    assert eq(b[0], X2[:, :2]) and eq(b[1], Y2[:2])
    b = next(iter(DataLoader(X2, batchsize=2, collate=lambda xs: len(xs))))
    assert b == 2


def test_dataloader_errors():
    with pytest.raises(DimensionMismatch, match="5.*4|4.*5"):
        DataLoader((X2, np.arange(4)))
    with pytest.raises(TypeError, match="str"):
        DataLoader("hello")
    with pytest.raises(ValueError, match="observation 1 is a dict with keys"):  # a list of observations: batch refuses
        list(DataLoader([{"a": 1}, {"b": 2}], batchsize=2, collate=True))
    with pytest.raises(TypeError):
        DataLoader(object())
    with pytest.raises(ValueError):
        DataLoader(np.float32(1.0))
    with pytest.raises(ValueError):
        DataLoader(X2, batchsize=0)
    assert "batchsize=2" in repr(DataLoader(X2, batchsize=2))


def test_dataloader_on_a_transposed_numpy_view_gives_the_right_batches():
    base = np.arange(5 * 12, dtype=np.float32).reshape(12, 5)
    view = base.T  # (5, 12): 12 observations, not contiguous
    loader = DataLoader(view, batchsize=5, shuffle=True, rng=jax.random.PRNGKey(3))
    seen = np.concatenate([np.asarray(b) for b in loader], axis=-1)
    assert seen.shape == (5, 12)
    np.testing.assert_array_equal(np.sort(seen[0]), base[:, 0])
    for col in seen.T:  # every batch column is a whole observation
        np.testing.assert_array_equal(col, base[int(col[0]) // 5])


def test_dataloader_batchsize_above_nobs_is_lowered_as_mlutils():
    # MLUtils' BatchView: "Number of observations less than batch-size, decreasing the batch-size to n",
    # so partial=false still gives one batch (it used to give none: a silent train_ of zero steps)
    X = np.arange(10).reshape(5, 2).T
    with pytest.warns(UserWarning, match="decreasing the batch-size to 5"):
        d = DataLoader((X, np.arange(5)), batchsize=7, partial=False)
    assert len(d) == 1 and d.batchsize == 5
    (x, y), = list(d)
    assert eq(x, X) and eq(y, np.arange(5))


def test_dataloader_refuses_data_without_observations():
    # MLUtils: a batch-size lowered to 0 observations divides by zero; iterating an empty ObsView fails
    with pytest.raises(ValueError, match="no observations"):
        DataLoader((np.zeros((2, 0)), np.zeros(0)), batchsize=2)
    with pytest.raises(ValueError, match="no observations"):
        DataLoader(np.zeros((3, 0)), batchsize=-1)


def test_dataloader_takes_a_list_as_a_list_of_observations():
    # MLUtils: a Vector is a container of its elements (a Julia Vector of vectors is 2 observations; np.asarray
    # made it 3 observations of 2 features, the transpose, which was refused): its batches are lists of items,
    # `collate=True` stacks them (batch), a function gets the list; MLUtils' docstring example:
    # first(DataLoader(["a", "b", "c", "d"], batchsize=2, collate=collate_fn)) == "ab" with collate_fn = join
    assert [b for b in DataLoader([[1, 2, 3], [4, 5, 6], [7, 8, 9]], batchsize=2)] == [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9]]]
    assert list(DataLoader(["a", "b", "c", "d"], batchsize=2, collate="".join)) == ["ab", "cd"]
    obs = [(np.full(3, i, np.float32), i) for i in range(5)]
    stacked = list(DataLoader(obs, batchsize=2, collate=True))
    assert [tuple(a.shape for a in b) for b in stacked] == [((3, 2), (2,)), ((3, 2), (2,)), ((3, 1), (1,))]
    assert eq(stacked[2][0], np.full((3, 1), 4.0)) and eq(stacked[1][1], [2, 3])
    assert [len(b) for b in DataLoader(obs, batchsize=2, collate=False)] == [2, 2, 1]
    assert [x[1] for x in DataLoader(obs, batchsize=-1)] == [0, 1, 2, 3, 4]
    # beside arrays, shuffled together: each text stays with its label
    texts = ["zero", "one", "two", "three", "four", "five"]
    for xs, ys in DataLoader((texts, np.arange(6)), batchsize=4, shuffle=True, rng=3):
        assert [texts.index(t) for t in xs] == ys.tolist()
    assert repr(DataLoader(obs, batchsize=2)) == "DataLoader(list(5,), batchsize=2)"
    assert [b.tolist() for b in DataLoader([1, 2, 3], batchsize=2)] == [[1, 2], [3]]  # numbers: one array
    with pytest.raises(DimensionMismatch, match="same number of observations"):
        DataLoader((["a", "b"], np.arange(3)))


def test_dataloader_takes_mlutils_data_containers():
    # MLUtils' DataLoader takes any data container: `mapobs(f, X)` (data augmentation) is drawn by its getobs
    # at each batch (MLUtils: getobs(data, idxs) = f(getobs(X, idxs))); it was refused with a TypeError
    from fluxjax import mlutils

    Y = jnp.arange(6.0).reshape(1, 6)
    calls = []
    aug = mlutils.mapobs(lambda x: calls.append(x.shape) or 2 * x, Y)
    got = list(DataLoader(aug, batchsize=4))
    assert [b.tolist() for b in got] == [[[0.0, 2.0, 4.0, 6.0]], [[8.0, 10.0]]] and calls == [(1, 4), (1, 2)]
    for x, y in DataLoader((aug, np.arange(6)), batchsize=4, shuffle=True, rng=0):  # aligned with its labels
        assert x.tolist() == [[2.0 * i for i in y.tolist()]]
    assert [x.tolist() for x in DataLoader(aug, batchsize=-1)][:2] == [[0.0], [2.0]]
    assert [b.tolist() for b in DataLoader(mlutils.ObsView(Y, [5, 0, 1]), batchsize=2)] == [[[5.0, 0.0]], [[1.0]]]
    assert repr(DataLoader(aug, batchsize=2)) == "DataLoader(MappedData(6,), batchsize=2)"


def test_unbatch_of_a_list_is_the_list():
    # MLUtils: unbatch(x::AbstractVector) = x; it used to stack the list and split the other axis
    obs = [np.array([1.0, 1.0]), np.array([0.0, 0.0])]
    out = unbatch(obs)
    assert len(out) == 2 and eq(out[0], [1.0, 1.0]) and eq(out[1], [0.0, 0.0])
    assert [eq(a, b) for a, b in zip(unbatch(batch(obs)), obs)] == [True, True]


@pytest.mark.parametrize("jit", [True, False])
def test_onehotbatch_of_traced_labels_in_an_eager_gradient_checks_as_op_by_op(jit):
    """A loss that one-hot encodes its labels: an unknown label raises in the compiled eager gradient
    too (it runs op by op), known labels and a default give the op-by-op numbers."""
    x = jnp.arange(9.0).reshape(3, 3) / 10

    def loss(y, **kw):
        return lambda m: Flux.logitcrossentropy(m, Flux.onehotbatch(y, range(3), **kw))

    with pytest.raises(ValueError, match="Value 3 not found in labels"):
        Flux.withgradient(loss(jnp.array([0, 3, 1])), x, jit=jit)
    for y, kw in ((jnp.array([0, 2, 1]), {}), (jnp.array([0, 7, 1]), {"default": 2})):
        got = Flux.withgradient(loss(y, **kw), x, jit=jit)
        want = Flux.withgradient(loss(y, **kw), x, jit=False)
        np.testing.assert_allclose(got.val, want.val, rtol=1e-6)
        np.testing.assert_allclose(got.grad[0], want.grad[0], rtol=1e-6)
    np.testing.assert_allclose(
        Flux.withgradient(loss(jnp.array([0, 7, 1]), default=2), x, jit=False).val,
        Flux.logitcrossentropy(x, jnp.eye(3)[:, [0, 2, 1]]), rtol=1e-6)


def test_a_shuffling_dataloader_iterated_inside_a_compiled_loss_draws_as_op_by_op():
    """The eager gradient compiles its call: the loader's shuffle split its key while traced and kept a
    traced key (an error, then every later `list(dl)` failed). Now the draw is made at once: the
    gradients, the loader's key and the batches it gives afterwards are those of `jit=False`."""
    m = Flux.Dense(jnp.array([[1.0, -2.0], [0.5, 1.0]]), False)
    X = jnp.asarray(np.random.RandomState(0).randn(2, 6).astype(np.float32))

    def run(jit):
        dl = Flux.DataLoader(X, batchsize=2, shuffle=True, rng=3)

        def loss(mm):
            return sum(jnp.sum(mm(xb) ** 2) * (i + 1) for i, xb in enumerate(dl))

        grads = [np.asarray(Flux.gradient(loss, m, jit=jit)[0].weight) for _ in range(3)]
        return grads, np.asarray(dl._key), [np.asarray(b) for b in dl]

    (ga, ka, ba), (gb, kb, bb) = run(False), run(True)
    assert not any(np.allclose(ga[0], g) for g in ga[1:])  # each call its own order
    for x, y in zip(ga + [ka] + ba, gb + [kb] + bb, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6)
