"""Gradients through layers: structural gradients (`nothing` where Zygote gives it), tied weights, nested
gradients and hessians, no tracer left behind in a model, and fluxjax.jit / functional basics.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

import fluxjax
from fluxjax import Chain, Dense, gradient, hessian, jacobian, params, pullback, withgradient
from fluxjax.nnlib import relu, softmax

# ----------------------------------------------------------------------------------------------
# helpers: float64 NumPy references


def np_dense(W, b, act, x):
    y = np.asarray(W, np.float64) @ x
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((-1,) + (1,) * (y.ndim - 1))
    return act(y)


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


@pytest.fixture
def mlp(seeded):
    """Chain(Dense(2 => 3, tanh), Dense(3 => 1)) with nonzero biases, and a 2×4 input."""
    m = Chain(Dense(2, 3, jnp.tanh), Dense(3, 1))
    m[0].bias = jnp.array([0.1, -0.2, 0.3])
    m[1].bias = jnp.array([0.05])
    x = jnp.array([[0.1, -0.2, 0.4, 0.7], [0.3, 0.5, -0.6, 0.2]])
    return m, x


def np_mlp(m, x):
    h = np_dense(m[0].weight, m[0].bias, np.tanh, x)
    return np_dense(m[1].weight, m[1].bias, lambda z: z, h)


# ----------------------------------------------------------------------------------------------
# Structural gradients


def test_structural_gradient_fields(mlp):
    m, x = mlp
    (g,) = gradient(lambda m: jnp.sum(m(x) ** 2), m)
    assert g.layers[0].sigma is None and g.layers[1].sigma is None
    assert g.layers[0].weight.shape == (3, 2) and g.layers[1].bias.shape == (1,)
    # against finite differences of a float64 NumPy re-implementation
    W1, b1, W2, b2 = (np.array(a, np.float64) for a in (m[0].weight, m[0].bias, m[1].weight, m[1].bias))
    xn = np.array(x, np.float64)
    loss = lambda W1, b1, W2, b2: np.sum((W2 @ np.tanh(W1 @ xn + b1[:, None]) + b2[:, None]) ** 2)
    close(g.layers[0].weight, fd_grad(lambda w: loss(w, b1, W2, b2), W1))
    close(g.layers[0].bias, fd_grad(lambda b: loss(W1, b, W2, b2), b1))
    close(g.layers[1].weight, fd_grad(lambda w: loss(W1, b1, w, b2), W2))
    close(g.layers[1].bias, fd_grad(lambda b: loss(W1, b1, W2, b), b2))


def test_bias_false_gradient_is_nothing():
    # Flux.jl/test/layers/conv.jl:41-46  gradient(m -> sum(m(ip)), Conv(...; bias = false))[1].bias isa Nothing
    d = Dense(jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), False)
    (g,) = gradient(lambda d: jnp.sum(d(jnp.array([1.0, -1.0]))), d)
    assert g.bias is None
    close(g.weight, np.array([[1.0, -1.0]] * 3))


def test_function_in_chain_gradient_is_nothing(seeded):
    m = Chain(Dense(2, 3), softmax)
    (g,) = gradient(lambda m: m(jnp.ones(2))[0], m)
    assert g.layers[1] is None
    assert g.layers[0].weight.shape == (3, 2)


def test_unused_inputs_are_nothing(seeded):
    d1, d2 = Dense(2, 2), Dense(2, 3)
    x = jnp.ones((2, 1))
    g1, g2, gx, gn = gradient(lambda a, b, x, n: jnp.sum(a(x)), d1, d2, x, 3.0)
    assert g1.weight.shape == (2, 2)
    assert g2 is None and gn is None
    close(gx, np.array(d1.weight).sum(0)[:, None])
    # a layer reached only partly: the unused sub-layer's gradient is None
    (g,) = gradient(lambda m: jnp.sum(m[0](x)), Chain(d1, d2))
    assert g.layers[1] is None and g.layers[0].bias.shape == (2,)
    # Flux model gradient of a constant: nothing
    assert gradient(lambda m: 1.0, Chain(d1, d2)) == (None,)


def test_integer_array_in_layer_is_nothing():
    @fluxjax.layer
    class Pick:
        def __init__(self):
            self.W = jnp.arange(6.0).reshape(2, 3)
            self.idx = jnp.array([0, 2])

        def __call__(self):
            return jnp.sum(self.W[:, self.idx] ** 2)

    p = Pick()
    (g,) = gradient(lambda p: p(), p)
    assert g.idx is None
    close(g.W, np.array([[0.0, 0.0, 4.0], [6.0, 0.0, 10.0]]))
    assert len(params(p)) == 1 and params(p)[0] is p.W


def test_layers_in_containers_as_arguments(seeded):
    d1, d2 = Dense(2, 2), Dense(2, 3)
    x = jnp.array([[1.0], [2.0]])
    ref = gradient(lambda a, b: jnp.sum(b(a(x))), d1, d2)
    (gl,) = gradient(lambda ls: jnp.sum(ls[1](ls[0](x))), [d1, d2])
    (gt,) = gradient(lambda ls: jnp.sum(ls[1](ls[0](x))), (d1, d2))
    (gd,) = gradient(lambda ls: jnp.sum(ls["b"](ls["a"](x))), {"a": d1, "b": d2})
    assert isinstance(gl, list) and isinstance(gt, tuple) and isinstance(gd, dict)
    for got in (gl[0], gt[0], gd["a"]):
        close(got.weight, ref[0].weight)
    for got in (gl[1], gt[1], gd["b"]):
        close(got.bias, ref[1].bias)


# ----------------------------------------------------------------------------------------------
# Tied weights


def test_trainables_sizes_and_tied_layer(seeded):
    # Flux.jl/test/utils.jl:248-255  size.(trainables(Dense(10 => 5))) == [(5, 10), (5,)];
    #   c = Chain(m, m): the same arrays once
    m = Dense(10, 5)
    assert [p.shape for p in params(m)] == [(5, 10), (5,)]
    c = Chain(m, m)
    ps = params(c)
    assert len(ps) == 2 and ps[0] is m.weight and ps[1] is m.bias


def test_shared_array_in_tuple():
    # Flux.jl/test/utils.jl:588-591  mat = [1 2; 3 4.0]; length(trainables((nothing, mat, (3, mat, 4)))) == 1
    mat = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    assert len(params((None, mat, (3, mat, 4)))) == 1
    # Flux.jl/test/utils.jl:594  destructure(...)[1] == [1, 3, 2, 4]: column-major
    assert np.array_equal(params((None, mat, (3, mat, 4))).flat(), [1.0, 3.0, 2.0, 4.0])


def test_tied_layer_gradient_is_per_path():
    """Zygote: a layer used twice gets, at each place, the gradient through that place; their sum is
    the total (finite differences), which implicit Params give at the one array."""
    d = Dense(jnp.array([[0.5, -0.3], [0.2, 0.8]]), jnp.array([0.1, -0.1]), jnp.tanh)
    c = Chain(d, d)
    x = jnp.array([[0.3], [-0.7]])
    (g,) = gradient(lambda c: jnp.sum(c(x)), c)
    assert g.layers[0] is not g.layers[1] and c.layers[0] is c.layers[1] is d  # the model is left as it was
    W, b, xn = np.array(d.weight, np.float64), np.array(d.bias, np.float64), np.array(x, np.float64)
    f = lambda W, b: np.sum(np.tanh(W @ np.tanh(W @ xn + b[:, None]) + b[:, None]))
    # the outer use alone sees h = tanh(W x + b) as a constant input
    h = np.tanh(W @ xn + b[:, None])
    close(g.layers[1].weight, fd_grad(lambda w: np.sum(np.tanh(w @ h + b[:, None])), W))
    close(g.layers[1].bias, fd_grad(lambda bb: np.sum(np.tanh(W @ h + bb[:, None])), b))
    close(g.layers[0].weight + g.layers[1].weight, fd_grad(lambda w: f(w, b), W))
    close(g.layers[0].bias + g.layers[1].bias, fd_grad(lambda bb: f(W, bb), b))
    gs = gradient(lambda: jnp.sum(c(x)), params(c))
    close(gs[d.weight], g.layers[0].weight + g.layers[1].weight)


@fluxjax.layer
class _Twice:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return self.a(x) + self.b(x)


def test_flux_issue_1767_shared_dense():
    """Flux.jl test/utils.jl:641-662 (Flux issue 1767): model = Model(d, d); g1 = gradient(m -> sum(m(x)),
    model)[1]; the destructure gradient g2 == vcat(g1.a.weight + g1.b.weight, g1.a.bias + g1.b.bias),
    and each path alone gets x and 1 (Zygote's per-path gradients)."""
    d = Dense(jnp.array([[0.7]]), jnp.array([0.2]))
    x = jnp.array([[0.4]])
    model = _Twice(d, d)
    (g1,) = gradient(lambda m: jnp.sum(m(x)), model)
    close(g1.a.weight, [[0.4]])
    close(g1.b.weight, [[0.4]])
    close(g1.a.bias, [1.0])
    close(g1.b.bias, [1.0])
    p, re = fluxjax.destructure(model)
    assert p.shape == (2,)
    (g2,) = gradient(lambda p: jnp.sum(re(p)(x)), p)
    close(g2, [g1.a.weight[0, 0] + g1.b.weight[0, 0], g1.a.bias[0] + g1.b.bias[0]])
    # Optimisers.jl sums the paths once: one Descent(0.1) step moves W by 0.1 * 0.8, b by 0.1 * 2
    st = fluxjax.setup(fluxjax.Descent(0.1), model)
    fluxjax.update_(st, model, g1)
    assert model.a is model.b is d
    close(d.weight, [[0.7 - 0.08]])
    close(d.bias, [0.2 - 0.2])


def test_tied_layer_update_pure_and_train():
    """`update` (pure) and `train_` sum the per-path gradients once and keep the tie: the same numbers
    as a one-path model whose loss is the same function of its one layer (Optimisers.jl)."""
    W0, b0 = jnp.array([[0.7, -0.2]]), jnp.array([0.2])
    x = jnp.array([[0.4], [1.5]])
    d = Dense(W0, b0)
    model = _Twice(d, d)
    (g,) = gradient(lambda m: jnp.sum(m(x) ** 2), model)
    st = fluxjax.setup(fluxjax.Momentum(0.1), model)
    st2, m2 = fluxjax.update(st, model, g)
    assert m2.a is m2.b and model.a.weight is W0
    ref = Dense(W0, b0)
    (gr,) = gradient(lambda d: jnp.sum((2 * d(x)) ** 2), ref)  # the same loss with one path
    close(gr.weight, g.a.weight + g.b.weight)
    sr = fluxjax.setup(fluxjax.Momentum(0.1), ref)
    fluxjax.update_(sr, ref, gr)
    close(m2.a.weight, ref.weight)
    close(m2.b.bias, ref.bias)
    # train_: two steps, the tie kept and the same numbers as the one-path model
    m3, r3 = _Twice(Dense(W0, b0), None), Dense(W0, b0)
    m3.b = m3.a
    data = [(x,), (x,)]
    fluxjax.train_(lambda m, x: jnp.sum(m(x) ** 2), m3, data, fluxjax.setup(fluxjax.Descent(0.01), m3))
    fluxjax.train_(lambda m, x: jnp.sum((2 * m(x)) ** 2), r3, data, fluxjax.setup(fluxjax.Descent(0.01), r3))
    assert m3.a is m3.b
    close(m3.a.weight, r3.weight)
    close(m3.a.bias, r3.bias)


def test_shared_weight_array_in_two_layers():
    W = jnp.array([[0.5, -0.3], [0.2, 0.8]])
    m = Chain(Dense(W, jnp.array([0.1, -0.1]), jnp.tanh), Dense(W, jnp.array([0.3, 0.2])))
    x = jnp.array([[0.3, 1.0], [-0.7, 0.2]])
    ps = params(m)
    assert len(ps) == 3 and ps[0] is W
    b1, b2, xn = np.array(m[0].bias, np.float64), np.array(m[1].bias, np.float64), np.array(x, np.float64)
    f = lambda W: np.sum((W @ np.tanh(W @ xn + b1[:, None]) + b2[:, None]) ** 2)
    want = fd_grad(f, np.array(W, np.float64))
    gs = gradient(lambda: jnp.sum(m(x) ** 2), ps)
    close(gs[W], want)  # implicit: one entry, the SUM of both uses
    (g,) = gradient(lambda m: jnp.sum(m(x) ** 2), m)
    close(g.layers[0].weight + g.layers[1].weight, want)  # explicit: per-use, as Zygote
    assert not np.allclose(g.layers[0].weight, want)


# ----------------------------------------------------------------------------------------------
# Nested gradients and hessians through layers


def test_nested_gradient_explicit(mlp):
    m, x = mlp
    W1, b1, W2, b2 = (np.array(a, np.float64) for a in (m[0].weight, m[0].bias, m[1].weight, m[1].bias))

    def q_np(xn):  # sum of d/dW1 sum(m(x)^2), analytically in float64
        h = np.tanh(W1 @ xn + b1[:, None])
        y = W2 @ h + b2[:, None]
        dz = (W2.T @ (2 * y)) * (1 - h**2)
        return np.sum(dz @ xn.T)

    inner = lambda x: gradient(lambda mm: jnp.sum(mm(x) ** 2), m)[0].layers[0].weight.sum()
    close(inner(x), q_np(np.array(x, np.float64)), rtol=1e-5)
    (gx,) = gradient(inner, x)
    close(gx, fd_grad(q_np, np.array(x, np.float64)), rtol=1e-3, atol=1e-4)


def test_nested_gradient_implicit(mlp, untouched):
    m, x = mlp
    check = untouched(m)
    ps = params(m)

    def inner(x):
        gs = gradient(lambda: jnp.sum(m(x) ** 2), ps)
        return jnp.sum(gs[m[0].weight])

    explicit = lambda x: gradient(lambda mm: jnp.sum(mm(x) ** 2), m)[0].layers[0].weight.sum()
    (gi,) = gradient(inner, x)
    (ge,) = gradient(explicit, x)
    close(gi, ge, rtol=1e-6)
    check()


def test_hessian_through_layer(mlp, untouched):
    m, _ = mlp
    check = untouched(m)
    x0 = jnp.array([0.1, -0.4])
    H = hessian(lambda z: jnp.sum(jnp.tanh(m(z))), x0)
    W1, b1, W2, b2 = m[0].weight, m[0].bias, m[1].weight, m[1].bias
    Hj = jax.hessian(lambda z: jnp.sum(jnp.tanh(W2 @ jnp.tanh(W1 @ z + b1) + b2)))(x0)
    close(H, Hj, rtol=1e-5)
    assert H.shape == (2, 2)
    check()


def test_jacobian_of_layer_output(mlp):
    m, _ = mlp
    x0 = jnp.array([0.2, 0.3])
    (J,) = jacobian(lambda z: m[0](z), x0)
    W1, b1 = np.array(m[0].weight, np.float64), np.array(m[0].bias, np.float64)
    want = (1 - np.tanh(W1 @ np.array(x0, np.float64) + b1) ** 2)[:, None] * W1
    close(J, want, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# No tracer left behind


def _boom(m, x):
    jnp.sum(m(x))
    raise KeyError("midway")


def _raise(h):
    raise KeyError("midway")


def _functional_boom(m, x):
    p, s, apply = fluxjax.functional(Chain(m[0], m[1], _raise))
    jax.jit(apply)(p, s, x)


def test_no_tracer_left_after_transformations(mlp, untouched):
    m, x = mlp
    check = untouched(m)
    loss = lambda m: jnp.sum(m(x) ** 2)
    gradient(loss, m)
    check()
    pullback(loss, m)[1](1.0)
    check()
    withgradient(loss, m)
    check()
    jacobian(lambda m: m(x)[0], m)
    check()
    hessian(lambda z: jnp.sum(m(z)), x[:, 0])
    check()
    gradient(lambda: loss(m), params(m))
    check()
    pullback(lambda: loss(m), params(m))[1](1.0)
    check()
    withgradient(lambda: loss(m), params(m))
    check()
    jacobian(lambda: m(x)[0], params(m))
    check()
    fluxjax.jit(lambda m, x: jnp.sum(m(x)))(m, x)
    check()
    p, s, apply = fluxjax.functional(m)
    jax.jit(apply)(p, s, x)
    jax.grad(lambda p: jnp.sum(apply(p, s, x)[0]))(p)
    check()


@pytest.mark.parametrize(
    "run",
    [
        lambda m, x: gradient(lambda m: _boom(m, x), m),
        lambda m, x: pullback(lambda m: _boom(m, x), m),
        lambda m, x: withgradient(lambda m: _boom(m, x), m),
        lambda m, x: jacobian(lambda m: _boom(m, x), m),
        lambda m, x: hessian(lambda z: _boom(m, z), x),
        lambda m, x: gradient(lambda: _boom(m, x), params(m)),
        lambda m, x: withgradient(lambda: _boom(m, x), params(m)),
        lambda m, x: pullback(lambda: _boom(m, x), params(m)),
        lambda m, x: fluxjax.jit(_boom)(m, x),
        lambda m, x: _functional_boom(m, x),
        lambda m, x: gradient(lambda x: gradient(lambda m: _boom(m, x), m)[0], x),
    ],
    ids=["gradient", "pullback", "withgradient", "jacobian", "hessian", "implicit-gradient",
         "implicit-withgradient", "implicit-pullback", "jit", "functional", "nested"],
)
def test_no_tracer_left_when_f_raises(mlp, untouched, run):
    m, x = mlp
    check = untouched(m)
    with pytest.raises(KeyError, match="midway"):
        run(m, x)
    check()
    # and the model still works
    close(m(x), np_mlp(m, np.array(x, np.float64)), rtol=1e-5)


def test_model_in_closure_restored_after_raise(mlp, untouched):
    m, x = mlp
    check = untouched(m)
    model = {"m": m}

    def f(z):
        model["m"](z)
        raise KeyError("midway")

    with pytest.raises(KeyError):
        gradient(lambda: f(x), params(model["m"]))
    check()


# ----------------------------------------------------------------------------------------------
# fluxjax.jit and functional


def test_jit_matches_eager_and_caches(mlp):
    m, x = mlp
    f = fluxjax.jit(lambda m, x: jnp.sum(m(x) ** 2))
    close(f(m, x), np.sum(np_mlp(m, np.array(x, np.float64)) ** 2), rtol=1e-5)
    for k in range(3):
        close(f(m, x + k), jnp.sum(m(x + k) ** 2), rtol=1e-6)
    assert f.cache_size() == 1
    m2 = Chain(Dense(2, 3, jnp.tanh), Dense(3, 1))  # same structure, other values
    close(f(m2, x), jnp.sum(m2(x) ** 2), rtol=1e-6)
    assert f.cache_size() == 1
    m3 = Chain(Dense(2, 3, relu), Dense(3, 1))  # another activation: another program
    close(f(m3, x), jnp.sum(m3(x) ** 2), rtol=1e-6)
    assert f.cache_size() == 2


def test_jit_of_gradient(mlp):
    m, x = mlp
    step = fluxjax.jit(lambda m, x: gradient(lambda m: jnp.sum(m(x) ** 2), m)[0])
    g = step(m, x)
    ref = gradient(lambda m: jnp.sum(m(x) ** 2), m)[0]
    close(g.layers[0].weight, ref.layers[0].weight, rtol=1e-5)
    close(g.layers[1].bias, ref.layers[1].bias, rtol=1e-5)
    assert g.layers[0].sigma is None
    step(m, x)
    assert step.cache_size() == 1


def test_functional_keys_and_apply(mlp):
    m, x = mlp
    p, s, apply = fluxjax.functional(m)
    assert list(p) == ["layers[0].weight", "layers[0].bias", "layers[1].weight", "layers[1].bias"]
    assert s == {}
    assert p["layers[0].weight"] is m[0].weight
    out, new_s = jax.jit(apply)(p, s, x)
    close(out, m(x), rtol=1e-6)
    assert new_s == {}
    # vmap over the batch, which is the LAST axis: each sample is a vector
    out_v, _ = jax.vmap(apply, in_axes=(None, None, 1), out_axes=(1, None))(p, s, x)
    assert out_v.shape == (1, 4)
    close(out_v, m(x), rtol=1e-5)
    # jax.grad of the pure function agrees with the structural gradient
    gp = jax.grad(lambda p: jnp.sum(apply(p, s, x)[0] ** 2))(p)
    (g,) = gradient(lambda m: jnp.sum(m(x) ** 2), m)
    close(gp["layers[0].weight"], g.layers[0].weight, rtol=1e-5)
    close(gp["layers[1].bias"], g.layers[1].bias, rtol=1e-5)
    # apply never changes the model
    p2 = {k: v * 0 for k, v in p.items()}
    assert np.all(np.asarray(apply(p2, s, x)[0]) == 0)
    assert m[0].weight is p["layers[0].weight"]


def test_named_chain_functional_keys(seeded):
    m = Chain(enc=Dense(2, 3), dec=Dense(3, 2, bias=False))
    p, s, apply = fluxjax.functional(m)
    assert set(p) == {"layers['enc'].weight", "layers['enc'].bias", "layers['dec'].weight"}
    assert p["layers['enc'].weight"] is m.enc.weight and p["layers['dec'].weight"] is m.dec.weight
    close(apply(p, s, jnp.ones(2))[0], m(jnp.ones(2)))


def test_tied_array_stays_tied_when_one_occurrence_has_no_gradient():
    """Optimisers.jl test/runtests.jl "tied weights": a tied array whose gradient is `nothing` at one
    occurrence is updated at every occurrence (never one stale copy), with the other occurrence's sum."""
    W = jnp.array([[0.5, -0.3], [0.2, 0.8]])
    m = Chain(Dense(W, jnp.array([0.1, -0.1])), Dense(W, jnp.array([0.3, 0.2])))
    x = jnp.array([[0.3], [-0.7]])
    (g,) = gradient(lambda m: jnp.sum(m[0](x) ** 2), m)  # the second layer is unused
    assert g.layers[1] is None
    st = fluxjax.setup(fluxjax.Descent(0.1), m)
    fluxjax.update_(st, m, g)
    assert m[0].weight is m[1].weight
    close(m[0].weight, np.asarray(W) - 0.1 * np.asarray(g.layers[0].weight))
    close(m[1].bias, [0.3, 0.2])
    # a tied layer used at one place only
    d = Dense(W, jnp.array([0.1, -0.1]))
    model = _Twice(d, d)
    (g2,) = gradient(lambda m: jnp.sum(m.a(x) ** 2), model)
    assert g2.b is None and g2.a is not None
    s2, m2 = fluxjax.update(fluxjax.setup(fluxjax.Descent(0.1), model), model, g2)
    assert m2.a is m2.b
    close(m2.b.weight, np.asarray(W) - 0.1 * np.asarray(g2.a.weight))


def test_tied_layer_per_path_under_jit_matches_eager():
    """`gradient` of a tied model inside `fluxjax.jit` gives the eager per-path answer, warm and cold,
    and leaves the tie in the model."""
    d = Dense(jnp.array([[0.7, 0.1]]), jnp.array([0.2]))
    m = _Twice(d, d)
    x = jnp.array([[0.4], [1.0]])
    loss = lambda m: jnp.sum(m(x) ** 2)
    ge = gradient(loss, m)[0]
    f = fluxjax.jit(lambda m: gradient(loss, m)[0])
    for _ in range(2):
        gj = f(m)
        close(gj.a.weight, ge.a.weight)
        close(gj.b.bias, ge.b.bias)
        assert m.a is m.b is d


def test_tied_stateful_layer_in_train_mode_raises():
    """A BatchNorm used twice in train mode: each use gets its own copy for its per-path gradient, so the
    second would read stale statistics; that raises (naming the layer and what to do) and leaves the
    model as it was. In test mode the per-path gradients come as usual."""
    bn = fluxjax.BatchNorm(1)
    c = Chain(bn, bn)
    x = jnp.array([[1.0, 2.0, 4.0]])
    with pytest.raises(RuntimeError, match="BatchNorm layer used at two places.*testmode_"):
        gradient(lambda c: jnp.sum(c(x)), c)
    close(bn.mu, [0.0])
    assert c.layers[0] is c.layers[1] is bn
    fluxjax.testmode_(c)
    (g,) = gradient(lambda c: jnp.sum(c(x) ** 2), c)
    assert g.layers[0] is not g.layers[1] and g.layers[0].mu is None
    gs = gradient(lambda: jnp.sum(c(x) ** 2), params(c))
    close(gs[bn.gamma], g.layers[0].gamma + g.layers[1].gamma)
