"""Tests for Parallel, SkipConnection, PairwiseFusion and Maxout (fluxjax/layers/containers.py).

Cases marked "Flux basic.jl" port `Flux.jl/test/layers/basic.jl` (research/flux-tests.md, section C5-C7);
"Flux docstring" cases port the examples in `Flux.jl/src/layers/basic.jl`. Values are checked against a
direct float64 NumPy computation of Flux's definitions, gradients against central finite differences.
"""

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grads as _fd

import fluxjax
from fluxjax.layers.basic import Chain, Dense
from fluxjax.layers.containers import Maxout, PairwiseFusion, Parallel, SkipConnection

RNG = np.random.default_rng(0)


def _jgrad(f, *args):
    """`fluxjax.gradient` under `jax.jit`: one compilation instead of one per primitive (keeps tests fast)."""
    return jax.jit(lambda *a: fluxjax.gradient(f, *a))(*args)


def _close(a, b, rtol=1e-3, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=rtol, atol=atol)


def _dense(n_in, n_out, sigma=None):
    W = RNG.standard_normal((n_out, n_in)).astype(np.float32)
    b = RNG.standard_normal(n_out).astype(np.float32)
    return Dense(jnp.asarray(W), jnp.asarray(b), sigma)


def _np_dense(W, b, x, sigma=lambda z: z):
    z = W @ x
    return sigma(z + (b if z.ndim == 1 else b[:, None]))


# --------------------------------------------------------------------------------------------- Parallel


def test_parallel_dispatch_rules():
    # Flux basic.jl "vararg input" / docstring
    assert jnp.allclose(Parallel(operator.add, jnp.sin, jnp.cos)(np.pi / 2), 1.0)
    assert jnp.allclose(Parallel(operator.truediv, jnp.abs)(3.0, -4.0), 0.75)
    assert jnp.allclose(Parallel(operator.truediv, jnp.abs)((3.0, -4.0)), 0.75)
    assert jnp.allclose(Parallel(operator.truediv, f=jnp.abs)(3.0, -4.0), 0.75)
    p = Parallel(operator.add, jnp.square, jnp.sqrt)
    assert float(p(3.0, 4.0)) == 11.0
    assert float(p((3.0, 4.0))) == 11.0  # tuple is always splatted
    assert float(p(4.0)) == 18.0
    hcat = lambda *xs: jnp.stack(xs)
    np.testing.assert_allclose(Parallel(hcat, lambda x: 1 / x)(1.0, 2.0, 4.0), [1.0, 0.5, 0.25])
    np.testing.assert_allclose(Parallel(hcat, jnp.log)(1.0), [0.0])
    np.testing.assert_allclose(Parallel(hcat, x=jnp.log)(1.0), [0.0])


def test_parallel_errors():
    # Flux basic.jl "trivial cases", "vararg input", "named access" (ArgumentError -> ValueError)
    with pytest.raises(ValueError, match="3 inputs"):
        Parallel(operator.add, jnp.sin, jnp.cos)(1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="no sub-layers"):
        Parallel(operator.add)
    with pytest.raises(ValueError, match="0 inputs"):
        Parallel(operator.add, jnp.sin)()
    with pytest.raises(ValueError, match="0 inputs"):
        Parallel(operator.add, jnp.sin, jnp.cos)(())
    with pytest.raises(ValueError, match="`layers`"):
        Parallel(operator.add, layers=Dense(3, 3), two=jnp.sin)
    with pytest.raises(ValueError, match="`connection`"):
        Parallel(operator.add, connection=Dense(3, 3), two=jnp.sin)
    with pytest.raises(ValueError, match="not both"):
        Parallel(operator.add, jnp.sin, two=jnp.cos)


def test_parallel_connection_called_once():
    # Flux basic.jl "connection is called once"
    count = [0]

    def f(*xs):
        count[0] += 1
        return sum(xs)

    Parallel(f, jnp.sin, jnp.cos, jnp.tan)(1.0)
    Parallel(f, jnp.sin, jnp.cos, jnp.tan)(1.0, 2.0, 3.0)
    Parallel(f, jnp.sin)(1.0)
    Parallel(f, jnp.sin)(1.0, 2.0, 3.0)
    assert count[0] == 4


def test_parallel_shapes():
    # Flux basic.jl "concat size", "vararg input"; docstring model (sizes shrunk to keep the test fast)
    x = jnp.asarray(RNG.standard_normal((3, 2)), jnp.float32)
    cat2 = lambda a, b: jnp.concatenate([a, b], axis=1)
    assert Parallel(cat2, Dense(3, 3), lambda z: z)(x).shape == (3, 4)
    assert Parallel(cat2, one=Dense(3, 3), two=lambda z: z)(x).shape == (3, 4)
    inputs = (jnp.ones(3), jnp.ones(2), jnp.ones(4))
    assert Parallel(operator.add, Dense(3, 2), Dense(2, 2), Dense(4, 2))(inputs).shape == (2,)
    assert Parallel(operator.add, a=Dense(3, 2), b=Dense(2, 2), c=Dense(4, 2))(inputs).shape == (2,)
    vcat = lambda *a: jnp.concatenate(a)
    model = Chain(Dense(3, 2), Parallel(vcat, Dense(2, 4), Chain(Dense(2, 3), Dense(3, 4))), Dense(8, 3))
    assert model(jnp.ones(3)).shape == (3,)
    zero_sum = Parallel(operator.add, jnp.zeros_like, lambda z: z)
    x4 = jnp.asarray(RNG.standard_normal((3, 2, 2, 2)), jnp.float32)
    assert jnp.array_equal(zero_sum(x4), x4)


def test_parallel_named_access():
    # Flux basic.jl "named access"
    m = Parallel(operator.add, one=Dense(3, 3), two=jnp.sin)
    assert m[0] is m["one"] is m.one
    assert m[1] is jnp.sin
    assert m.keys() == ("one", "two")
    sub = m[0:2]
    assert isinstance(sub, Parallel) and sub.keys() == ("one", "two") and sub.one is m.one
    m2 = fluxjax.fmap(lambda a: a, m)  # does not forget names
    assert m2.keys() == ("one", "two")
    assert len(m) == 2
    p = Parallel(operator.add, jnp.sin, jnp.cos)
    assert p[0:1].layers == (jnp.sin,)
    with pytest.raises(KeyError):
        p["one"]


def test_parallel_ntuple_connection():
    # Julia's `+` is n-ary: Parallel(+, a, b, c) sums three outputs; operator.add is folded
    assert float(Parallel(operator.add, jnp.sin, jnp.cos, jnp.tan)(1.0)) == pytest.approx(
        np.sin(1) + np.cos(1) + np.tan(1), rel=1e-6)
    assert float(Parallel(operator.mul, jnp.abs)(2.0, -3.0, 4.0)) == 24.0
    assert float(Parallel(jnp.maximum, jnp.abs)(2.0, -3.0, 1.0)) == 3.0


def test_parallel_values_and_gradient():
    d1, d2 = _dense(3, 2, jnp.tanh), _dense(4, 2)
    m = Parallel(operator.add, d1, d2)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    y = RNG.standard_normal((4, 5)).astype(np.float32)

    def ref(W1, b1, W2, b2, x, y):
        return _np_dense(W1, b1, x, np.tanh) + _np_dense(W2, b2, y)

    args = [d1.weight, d1.bias, d2.weight, d2.bias, x, y]
    _close(m(x, y), ref(*[np.asarray(a, np.float64) for a in args]))
    gm, gx, gy = _jgrad(lambda m, x, y: jnp.sum(m(x, y) ** 2), m, x, y)
    fd = _fd(lambda *a: np.sum(ref(*a) ** 2), args)
    for g, r in zip([gm.layers[0].weight, gm.layers[0].bias, gm.layers[1].weight, gm.layers[1].bias, gx, gy], fd):
        _close(g, r)
    # one input, both layers
    m1 = Parallel(operator.mul, d1, _dense(3, 2))
    d3 = m1.layers[1]
    x1 = x[:, :2]
    _close(m1(x1), _np_dense(*map(np.asarray, (d1.weight, d1.bias, x1)), np.tanh)
           * _np_dense(*map(np.asarray, (d3.weight, d3.bias, x1))))
    gx1 = _jgrad(lambda x: jnp.sum(m1(x)), x1)[0]
    fd1 = _fd(lambda x: np.sum(_np_dense(np.asarray(d1.weight, np.float64), np.asarray(d1.bias, np.float64), x, np.tanh)
                               * _np_dense(np.asarray(d3.weight, np.float64), np.asarray(d3.bias, np.float64), x)),
              [x1])[0]
    _close(gx1, fd1)


def test_parallel_params_print_and_jit():
    m = Parallel(operator.add, alpha=Dense(10, 2, jnp.tanh), beta=Dense(5, 2))
    ps = fluxjax.params(m)
    assert [tuple(p.shape) for p in ps] == [(2, 10), (2,), (2, 5), (2,)]
    assert sum(p.size for p in ps) == 34  # Flux docstring: 34 parameters
    assert m._show() == "Parallel(+, alpha = Dense(10 => 2, tanh), beta = Dense(5 => 2))"
    lines = repr(m).splitlines()
    assert lines[0] == "Parallel("
    assert lines[1] == "  +,"
    assert lines[2].startswith("  alpha = Dense(10 => 2, tanh),") and lines[2].endswith("# 22 parameters")
    assert lines[3].startswith("  beta = Dense(5 => 2),") and lines[3].endswith("# 12 parameters")
    assert lines[4].startswith(")") and "Total: 4 arrays, 34 parameters" in lines[4]
    assert repr(Parallel(operator.add, jnp.sin, jnp.cos)) == "Parallel(+, sin, cos)"
    assert repr(Parallel(operator.mul, jnp.sin)) == "Parallel(*, sin)"
    x, y = jnp.ones(10), jnp.ones(5)
    out = jax.jit(lambda m, x, y: m(x, y))(m, x, y)
    _close(out, np.asarray(m(x, y), np.float64))


# --------------------------------------------------------------------------------------------- SkipConnection


def test_skipconnection():
    # Flux basic.jl "zero sum", "concat size"
    x4 = jnp.asarray(RNG.standard_normal((3, 2, 2, 2)), jnp.float32)
    assert jnp.array_equal(SkipConnection(jnp.zeros_like, lambda a, b: a + b)(x4), x4)
    x = jnp.asarray(RNG.standard_normal((3, 2)), jnp.float32)
    cat2 = lambda a, b: jnp.concatenate([a, b], axis=1)
    assert SkipConnection(Dense(3, 3), cat2)(x).shape == (3, 4)  # Flux: Dense(10 => 10), (10, 2) -> (10, 4)


def test_skipconnection_values_gradient_print():
    d = _dense(2, 2, jnp.tanh)
    m = SkipConnection(d, operator.add)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    ref = lambda W, b, x: _np_dense(W, b, x, np.tanh) + x
    args = [d.weight, d.bias, x]
    _close(m(x), ref(*[np.asarray(a, np.float64) for a in args]))
    gm, gx = fluxjax.gradient(lambda m, x: jnp.sum(m(x) ** 2), m, x)
    assert gm.connection is None
    for g, r in zip([gm.layers.weight, gm.layers.bias, gx], _fd(lambda *a: np.sum(ref(*a) ** 2), args)):
        _close(g, r)
    assert [tuple(p.shape) for p in fluxjax.params(m)] == [(2, 2), (2,)]
    assert m._show() == "SkipConnection(Dense(2 => 2, tanh), +)"
    lines = repr(m).splitlines()
    assert lines[0] == "SkipConnection("
    assert lines[1].startswith("  Dense(2 => 2, tanh),") and lines[1].endswith("# 6 parameters")
    assert lines[2] == "  +,"
    assert lines[3] == ")"  # Flux prints "# Total: ..." only for more than 2 trainable arrays
    assert repr(SkipConnection(jnp.sin, operator.add)) == "SkipConnection(sin, +)"


# --------------------------------------------------------------------------------------------- PairwiseFusion


def test_pairwisefusion_flux_cases():
    # Flux basic.jl "PairwiseFusion" (flux-tests.md C7, verified)
    vcat = lambda a, b: jnp.concatenate([jnp.atleast_1d(a), jnp.atleast_1d(b)])
    m = PairwiseFusion(vcat, lambda x: x + 1, lambda x: x + 2, lambda x: x**3)
    y = m(2.0, 10.0, 20.0)
    assert len(y) == 3 and float(y[0]) == 3
    np.testing.assert_array_equal(y[1], [5, 12])
    np.testing.assert_array_equal(y[2], [125, 1728, 8000])
    y = m(7.0)
    assert float(y[0]) == 8
    np.testing.assert_array_equal(y[1], [10, 9])
    np.testing.assert_array_equal(y[2], [1000, 729, 343])
    assert m((2.0, 10.0, 20.0))[2].shape == (3,)
    # Flux: Dense(1 => 30), Dense(30 => 10) on ((1, 10), (30, 10)); sizes shrunk
    x = (jnp.ones((1, 2)), jnp.ones((3, 2)))
    y = PairwiseFusion(operator.add, Dense(1, 3), Dense(3, 4))(x)
    assert len(y) == 2 and y[0].shape == (3, 2) and y[1].shape == (4, 2)
    y = PairwiseFusion(operator.add, Dense(1, 3), Dense(3, 1))(jnp.ones((1, 2)))
    assert len(y) == 2 and y[0].shape == (3, 2) and y[1].shape == (1, 2)


def test_pairwisefusion_errors_names_print():
    m = PairwiseFusion(operator.add, a=Dense(2, 2), b=Dense(2, 2))
    with pytest.raises(ValueError, match="3 inputs"):
        m(jnp.ones(2), jnp.ones(2), jnp.ones(2))
    with pytest.raises(ValueError, match="1 inputs"):
        m((jnp.ones(2),))
    with pytest.raises(ValueError, match="`layers`"):
        PairwiseFusion(operator.add, layers=jnp.sin)
    with pytest.raises(ValueError, match="no sub-layers"):
        PairwiseFusion(operator.add)
    assert m[0] is m["a"] is m.a and m[1] is m.b
    assert m._show() == "PairwiseFusion(+, a = Dense(2 => 2), b = Dense(2 => 2))"
    lines = repr(m).splitlines()
    assert lines[:2] == ["PairwiseFusion(", "  +,"]
    assert lines[2].startswith("  a = Dense(2 => 2),") and lines[2].endswith("# 6 parameters")
    assert "Total: 4 arrays, 12 parameters" in lines[4]
    assert len(fluxjax.params(m)) == 4


def test_pairwisefusion_values_gradient():
    d1, d2 = _dense(2, 3, jnp.tanh), _dense(3, 2)
    m = PairwiseFusion(operator.mul, d1, d2)
    x1 = RNG.standard_normal((2, 4)).astype(np.float32)
    x2 = RNG.standard_normal((3, 4)).astype(np.float32)

    def ref(W1, b1, W2, b2, x1, x2):
        y1 = _np_dense(W1, b1, x1, np.tanh)
        return y1, _np_dense(W2, b2, y1 * x2)

    args = [d1.weight, d1.bias, d2.weight, d2.bias, x1, x2]
    y1, y2 = m(x1, x2)
    r1, r2 = ref(*[np.asarray(a, np.float64) for a in args])
    _close(y1, r1)
    _close(y2, r2)

    def loss(m, a, b):
        y1, y2 = m(a, b)
        return jnp.sum(y1) + jnp.sum(y2**2)

    gm, g1, g2 = _jgrad(loss, m, x1, x2)
    fd = _fd(lambda *a: (lambda r: np.sum(r[0]) + np.sum(r[1] ** 2))(ref(*a)), args)
    got = [gm.layers[0].weight, gm.layers[0].bias, gm.layers[1].weight, gm.layers[1].bias, g1, g2]
    for g, r in zip(got, fd):
        _close(g, r)


# --------------------------------------------------------------------------------------------- Maxout


def test_maxout_flux_cases():
    # Flux basic.jl "Maxout"
    x = jnp.asarray(RNG.random(4), jnp.float32)  # Flux: rand(40)
    assert jnp.array_equal(Maxout(lambda: (lambda z: z), 4)(x), x)
    assert jnp.array_equal(Maxout(lambda z: z, lambda z: 2 * z, lambda z: 0.5 * z)(x), 2 * x)
    a, b = jnp.array([[0.5], [0.1]]), jnp.array([[0.2], [0.7]])
    inp = jnp.array([[3.0, 2.0]])
    np.testing.assert_allclose(Maxout(lambda z: a @ z, lambda z: b @ z)(inp), np.array([[0.5], [0.7]]) * inp)
    mo = Maxout(lambda: Dense(3, 2), 4)  # Flux: Dense(32 => 64)
    assert len(fluxjax.params(mo)) == 8  # 4 alternatives, each with weight and bias
    # docstring
    m = Maxout(jnp.square, lambda z: z * 3)
    np.testing.assert_array_equal(m(jnp.array([[-2, -1, 0, 1, 2]])), [[4, 1, 0, 3, 6]])
    m3 = Maxout(lambda: Dense(5, 7, jnp.tanh), 3)
    assert m3(jnp.ones((5, 11))).shape == (7, 11)
    assert m3[0] is not m3[1] and len(m3) == 3


def test_maxout_values_gradient_print_errors():
    d1, d2 = _dense(3, 2), _dense(3, 2, jnp.tanh)
    m = Maxout(d1, d2)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    ref = lambda W1, b1, W2, b2, x: np.maximum(_np_dense(W1, b1, x), _np_dense(W2, b2, x, np.tanh))
    args = [d1.weight, d1.bias, d2.weight, d2.bias, x]
    _close(m(x), ref(*[np.asarray(a, np.float64) for a in args]))
    gm, gx = _jgrad(lambda m, x: jnp.sum(m(x) ** 2), m, x)
    got = [gm.layers[0].weight, gm.layers[0].bias, gm.layers[1].weight, gm.layers[1].bias, gx]
    for g, r in zip(got, _fd(lambda *a: np.sum(ref(*a) ** 2), args)):
        _close(g, r)
    assert m._show() == "Maxout(Dense(3 => 2), Dense(3 => 2, tanh))"
    lines = repr(Maxout(lambda: Dense(5, 7, jnp.tanh), 3)).splitlines()
    assert lines[0] == "Maxout("
    assert all(ln.startswith("  Dense(5 => 7, tanh),") and ln.endswith("# 42 parameters") for ln in lines[1:4])
    assert "Total: 6 arrays, 126 parameters" in lines[4]
    assert repr(Maxout(jnp.sin, jnp.cos)) == "Maxout(sin, cos)"
    with pytest.raises(ValueError):
        Maxout()
    with pytest.raises(ValueError):
        Maxout(lambda: Dense(2, 2), 0)
    with pytest.raises(TypeError):
        Maxout(Dense(2, 2), "x")


def test_containers_nested_in_chain_print():
    m = Chain(SkipConnection(Chain(Dense(2, 2), jnp.tanh), operator.add), Dense(2, 1))
    lines = repr(m).splitlines()
    assert lines[:3] == ["Chain(", "  SkipConnection(", "    Chain("]
    assert "+," in lines[6]
    assert m(jnp.ones((2, 3))).shape == (1, 3)


def test_elementwise_connections_align_first_dims_as_julia():
    # Julia broadcasts (and `+` promotes shapes) aligning the FIRST dims: in Flux a (4,) output plus a
    # (4, 1) output is (4, 1). numpy aligns the last dims and gave a (4, 4) matrix of sums.
    a, b = _dense(3, 4), _dense(3, 4)
    x1 = RNG.standard_normal(3).astype(np.float32)
    x2 = RNG.standard_normal((3, 1)).astype(np.float32)
    ya = _np_dense(*(np.asarray(v, np.float64) for v in (a.weight, a.bias, x1)))
    yb = _np_dense(*(np.asarray(v, np.float64) for v in (b.weight, b.bias, x2)))
    _close(Parallel(operator.add, a, b)(x1, x2), ya[:, None] + yb)
    ys = PairwiseFusion(operator.add, b, _dense(4, 4))(x2, ya.astype(np.float32))
    assert ys[1].shape == (4, 1)
    # SkipConnection(f, +) with f dropping the batch axis: the column is added to each column of x
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    _close(SkipConnection(lambda v: v[:, 0], operator.add)(x), x + x[:, :1])
    # Maxout's max.(acc, out): a mismatch names the layer instead of JAX's broadcasting TypeError
    with pytest.raises(fluxjax.DimensionMismatch, match=r"layer Maxout\(Dense\(3 => 2\), Dense\(3 => 4\)\)"):
        Maxout(_dense(3, 2), _dense(3, 4))(x)
