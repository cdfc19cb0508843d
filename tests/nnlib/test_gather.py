"""Tests for fluxjax.nnlib.gather / scatter: NNlib's semantics over the trailing dims, 0-based indices,
and gradients checked against float64 central finite differences (tests/numgrad.py)."""

import operator
import statistics

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fluxjax.errors import DimensionMismatch
from fluxjax.nnlib import gather, scatter
from tests.numgrad import fd_grad

IDX = np.array([[1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3]]) - 1  # NNlib's test index, 0-based


def _reference_scatter(op, src, idx, dstsize):
    """A direct loop of NNlib's definition, dst[..., idx[k]] = op(dst[..., idx[k]], src[..., k]), in float64."""
    init = {"+": 0.0, "-": 0.0, "*": 1.0, "/": 1.0, "max": -np.inf, "min": np.inf, "mean": 0.0}[op]
    dst = np.full(dstsize, init)
    count = np.zeros(dstsize[-1])
    for k in np.ndindex(idx.shape):
        i = idx[k]
        s = src[(..., *k)]
        if op == "+" or op == "mean":
            dst[..., i] += s
        elif op == "-":
            dst[..., i] -= s
        elif op == "*":
            dst[..., i] *= s
        elif op == "/":
            dst[..., i] /= s
        elif op == "max":
            dst[..., i] = np.maximum(dst[..., i], s)
        else:
            dst[..., i] = np.minimum(dst[..., i], s)
        count[i] += 1
    if op == "mean":
        dst = dst / np.where(count == 0, 1, count)
    return dst


def test_gather_shapes_and_values():
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[0, 3], [2, 2], [1, 0]])
    y = gather(src, idx)
    assert y.shape == (2, 3, 3, 2)
    np.testing.assert_array_equal(y, src[:, :, idx])
    # tuple indices address the last two dims; a tuple of arrays is the same
    tup = [(0, 1), (2, 3), (1, 1)]
    np.testing.assert_array_equal(gather(src, tup), src[:, [0, 2, 1], [1, 3, 1]])
    np.testing.assert_array_equal(gather(src, ([0, 2, 1], [1, 3, 1])), src[:, [0, 2, 1], [1, 3, 1]])
    np.testing.assert_array_equal(gather(src, [0, 2, 1], [1, 3, 1]), src[:, [0, 2, 1], [1, 3, 1]])


def test_gather_errors():
    src = np.arange(5.0)
    with pytest.raises(IndexError, match="out of range"):
        gather(src, [0, 5])
    with pytest.raises(IndexError):
        gather(src, [-1])  # no Python negative indexing: 0-based NNlib indices only
    with pytest.raises(TypeError):
        gather(src, [0.5, 1.0])
    with pytest.raises(DimensionMismatch):
        gather(src, [(0, 1)])


def test_gather_jit_traced_indices():
    src = jnp.arange(5.0)
    f = jax.jit(gather)
    np.testing.assert_array_equal(f(src, jnp.array([4, 0, 0])), [4.0, 0.0, 0.0])
    y = f(src, jnp.array([1, 7, -1]))  # out of range inside jit: NaN, never a wrapped-around value
    assert y[0] == 1.0 and np.isnan(y[1]) and np.isnan(y[2])


def test_gather_gradient_finite_differences():
    idx = IDX
    x = np.random.default_rng(0).normal(size=(2, 5))
    w = np.random.default_rng(1).normal(size=(2, *idx.shape))
    g = jax.grad(lambda v: jnp.sum(w * gather(v, idx)))(jnp.asarray(x, jnp.float32))
    num = fd_grad(lambda v: float(np.sum(w * v[:, idx])), x)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "max", "min", "mean"])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_scatter_matches_reference(op, lead):
    rng = np.random.default_rng(0)
    src = rng.uniform(0.5, 2.0, size=(*lead, *IDX.shape))
    want = _reference_scatter(op, src, IDX, (*lead, 5))
    np.testing.assert_allclose(scatter(op, src.astype(np.float32), IDX), want, rtol=1e-5)
    # dstsize larger than needed: the untouched places keep NNlib's starting value
    y = scatter(op, src.astype(np.float32), IDX, dstsize=(*lead, 7))
    assert y.shape == (*lead, 7)
    np.testing.assert_allclose(y[..., :5], want, rtol=1e-5)
    empty = {"+": 0, "-": 0, "*": 1, "/": 1, "max": -np.inf, "min": np.inf, "mean": 0}[op]
    np.testing.assert_array_equal(y[..., 5:], np.full((*lead, 2), empty, np.float32))


def test_scatter_op_spellings_and_init():
    src, idx = np.array([1.0, 2.0, 3.0]), [0, 0, 1]
    for a, b in [("+", operator.add), ("-", operator.sub), ("*", operator.mul), ("/", operator.truediv),
                 ("max", max), ("min", min), ("mean", statistics.mean), ("max", jnp.maximum), ("mean", np.mean)]:
        np.testing.assert_array_equal(scatter(a, src, idx), scatter(b, src, idx))
    np.testing.assert_array_equal(scatter("+", src, idx, init=10.0), [13.0, 13.0])
    np.testing.assert_array_equal(scatter("max", np.array([1, 5, 3]), idx), [5, 3])
    np.testing.assert_array_equal(scatter("max", np.array([1, 5, 3]), idx, dstsize=3)[2], np.iinfo(np.int32).min)
    assert scatter("mean", np.array([1, 2, 4]), idx).dtype == jnp.float32  # mean / of integers are floats
    with pytest.raises(ValueError, match="unsupported op"):
        scatter(np.hypot, src, idx)


def test_scatter_tuple_index():
    src = np.arange(1.0, 7.0).reshape(2, 3)  # 2 features, 3 entries
    idx = [(0, 1), (1, 1), (0, 1)]
    y = scatter("+", src, idx)
    assert y.shape == (2, 2, 2)
    want = np.zeros((2, 2, 2))
    for k, (i, j) in enumerate(idx):
        want[:, i, j] += src[:, k]
    np.testing.assert_array_equal(y, want)


def test_scatter_errors():
    with pytest.raises(IndexError):
        scatter("+", np.ones(3), [0, 1, 3], dstsize=3)
    with pytest.raises(IndexError):
        scatter("+", np.ones(3), [0, -1, 2])
    with pytest.raises(DimensionMismatch):
        scatter("+", np.ones((2, 4)), [0, 1, 2])
    with pytest.raises(DimensionMismatch):
        scatter("+", np.ones((2, 3)), [0, 1, 2], dstsize=(3, 3))


def test_scatter_jit_needs_dstsize():
    f = jax.jit(lambda s, i: scatter("+", s, i, dstsize=4))
    np.testing.assert_array_equal(f(jnp.ones(3), jnp.array([0, 0, 3])), [2.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(f(jnp.ones(3), jnp.array([0, 9, -1])), [1.0, 0.0, 0.0, 0.0])  # dropped
    with pytest.raises(ValueError, match="dstsize"):
        jax.jit(lambda s, i: scatter("+", s, i))(jnp.ones(3), jnp.array([0, 1, 2]))
    g = jax.jit(lambda s, i: scatter("*", s, i, dstsize=2))
    np.testing.assert_allclose(g(jnp.array([2.0, 3.0, 4.0]), jnp.array([0, 0, 1])), [6.0, 4.0])


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "max", "min", "mean"])
def test_scatter_gradient_finite_differences(op):
    rng = np.random.default_rng(2)
    src = rng.uniform(0.5, 2.0, size=(2, *IDX.shape))
    w = rng.normal(size=(2, 5))

    def f64(v):
        return float(np.sum(w * _reference_scatter(op, v, IDX, (2, 5))))

    with jax.enable_x64(True):
        g = jax.grad(lambda v: jnp.sum(w * scatter(op, v, IDX)))(jnp.asarray(src))
        gf = jax.jacfwd(lambda v: jnp.sum(w * scatter(op, v, IDX)))(jnp.asarray(src))  # forward mode too
    np.testing.assert_allclose(g, fd_grad(f64, src), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gf, g, rtol=1e-12, atol=1e-12)


def test_scatter_mul_gradient_with_zeros_and_second_order():
    # NNlib's ∇scatter_src for * uses the product of the *other* entries: exact with zeros in src (no division)
    idx = np.array([0, 0, 0, 1])
    src = jnp.array([0.0, 2.0, 3.0, 5.0])
    g = jax.grad(lambda s: jnp.sum(scatter("*", s, idx)))(src)
    np.testing.assert_allclose(g, [6.0, 0.0, 0.0, 1.0])
    h = jax.hessian(lambda s: jnp.sum(scatter("*", s, idx)))(src)
    np.testing.assert_allclose(h, [[0, 3, 2, 0], [3, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0.0]])


def test_scatter_max_ties_follow_nnlib():
    # NNlib: (src .== gather(dst, idx)) .* gather(Δ, idx) -- every tied maximum gets the full cotangent
    g = jax.grad(lambda s: jnp.sum(scatter("max", s, [0, 0, 1])))(jnp.array([2.0, 2.0, 1.0]))
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("op, init", [("+", 0.5), ("max", 2.7), ("min", float("inf")), ("*", 2**40)])
def test_scatter_init_that_integer_src_cannot_hold_raises(op, init):
    """NNlib `fill!`s the destination, of `src`'s type, with `init`: `init=0.5` for Int throws
    InexactError (src/scatter.jl); casting it would start from a truncated value, quietly."""
    from fluxjax.loading import InexactError

    with pytest.raises(InexactError, match=rf"^scatter: init={init!r} is not a value of src's type int32"):
        scatter(op, jnp.array([1, 2], jnp.int32), jnp.array([0, 1]), init=init)
    ok = scatter(op, jnp.array([1, 2], jnp.int32), jnp.array([0, 1]), init=3.0)  # an integral float is exact
    assert ok.dtype == jnp.int32
    np.testing.assert_array_equal(ok, {"+": [4, 5], "max": [3, 3], "min": [1, 2], "*": [3, 6]}[op])
    np.testing.assert_allclose(scatter(op, jnp.array([1.0, 2.0]), jnp.array([0, 1]), init=0.5),
                               {"+": [1.5, 2.5], "max": [1, 2], "min": [0.5, 0.5], "*": [0.5, 1]}[op])
