"""Zygote's API as a port would hit it: cases where fluxjax gave a quiet wrong answer (or an unclear
error), each against Zygote's number or error (Zygote.jl sources cited per case)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import DimensionMismatch
from fluxjax.zygote import (
    Buffer,
    Params,
    checkpointed,
    diaghessian,
    forwarddiff,
    gradient,
    hessian,
    hessian_reverse,
    jacobian,
    pullback,
    withgradient,
)

# ----------------------------------------------------------------------------------------------
# checkpointed inside the gradient of a model with a tied layer, op by op


def _tied():
    d = Flux.Dense(np.array([[0.5, -0.3], [0.2, 0.8]], np.float32), np.array([0.1, -0.2], np.float32), jnp.tanh)
    return Flux.Chain(d, d)


X = jnp.array([[0.3, -0.5], [0.1, 0.9]])


def _per_path(m):
    """Zygote's per-path gradient of sum(m(X)^2) for m = Chain(d, d), by jax.grad on two copies."""
    W, b = m.layers[0].weight, m.layers[0].bias

    def f(W1, b1, W2, b2):
        return jnp.sum(jnp.tanh(W2 @ jnp.tanh(W1 @ X + b1[:, None]) + b2[:, None]) ** 2)

    return jax.grad(f, argnums=(0, 1, 2, 3))(W, b, W, b)


@pytest.mark.parametrize("how", ["gradient", "pullback"])
def test_checkpointed_tied_layer_op_by_op_gives_per_path_gradients(how):
    # Zygote: checkpointed(f, xs...) == f(xs...), gradients included; each path of a tied layer gets its
    # own gradient (Flux issue 1767). Op by op the backward pass runs the model again: it must see the
    # per-path copies (it saw the tied original: path 1 got the total, path 2 zeros).
    m = _tied()
    loss = lambda m: jnp.sum(checkpointed(m, X) ** 2)  # noqa: E731
    g = gradient(loss, m, jit=False)[0] if how == "gradient" else pullback(loss, m)[1](1.0)[0]
    W1, b1, W2, b2 = _per_path(m)
    np.testing.assert_allclose(g.layers[0].weight, W1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.layers[0].bias, b1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.layers[1].weight, W2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.layers[1].bias, b2, rtol=1e-5, atol=1e-6)
    gc = gradient(loss, m)[0]  # compiled: the same
    np.testing.assert_allclose(gc.layers[1].weight, W2, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# what gradient accepts as f's value


@pytest.mark.parametrize("jit", [True, False])
def test_complex_output_raises(jit):
    # Zygote.jl/src/compiler/interface.jl:121  sensitivity(y::Complex) = error("Output is complex, so the
    # gradient is not defined."); fluxjax returned conj of JAX's vjp with seed 1 (a quiet number)
    with pytest.raises(TypeError, match="complex"):
        gradient(lambda x: jnp.sum(x) * 1j, jnp.ones(2), jit=jit)
    with pytest.raises(TypeError, match="complex"):
        gradient(lambda z: z**2, 1.0 + 2.0j)
    with pytest.raises(TypeError, match="complex"):
        withgradient(lambda x: (jnp.sum(x) * 1j, x), jnp.ones(2), jit=jit)
    # a real function of a complex number is fine: Zygote's gradient(z -> real(z^2), 1+2im) == (2-4im,)
    np.testing.assert_allclose(complex(gradient(lambda z: jnp.real(z**2), 1.0 + 2.0j)[0]), 2 - 4j, rtol=1e-6)
    # and pullback takes a complex cotangent: back(dy) = conj(f'(z)) dy
    np.testing.assert_allclose(complex(pullback(lambda z: z**2, 1.0 + 2.0j)[1](1j)[0]), 4 + 2j, rtol=1e-6)


@pytest.mark.parametrize("jit", [True, False])
def test_none_output_raises(jit):
    # Zygote: sensitivity(nothing) errors "Output should be scalar"; fluxjax returned (nothing,)
    with pytest.raises(TypeError, match="NoneType"):
        gradient(lambda x: None, jnp.ones(2), jit=jit)


def test_hessian_and_jacobian_name_a_bad_output():
    with pytest.raises(TypeError, match="hessian: f returned an array of shape"):
        hessian(lambda x: x**3, jnp.ones(2))
    with pytest.raises(TypeError, match="diaghessian: f returned an array of shape"):
        diaghessian(lambda x: x**3, jnp.ones(2))
    # Zygote.jl/src/lib/grad.jl:199  _jvec(x) = throw(ArgumentError("jacobian expected a function which
    # returns an array, or a scalar, got ..."))
    with pytest.raises(TypeError, match="jacobian expected a function which returns an array"):
        jacobian(lambda x: (x, x), jnp.ones(2))


# ----------------------------------------------------------------------------------------------
# withgradient / pullback values keep a dict's order (JAX sorts dict keys)


@pytest.mark.parametrize("jit", [True, False])
def test_withgradient_dict_value_keeps_its_order(jit):
    # Zygote.jl/src/compiler/interface.jl:196  withgradient(3.0, 4.0) do x, y; (div = x/y, mul = x*y) end
    # == (val = (div = 0.75, mul = 12.0), grad = (0.25, -0.1875)); the NamedTuple keeps its order, so
    # `loss, acc = val.values()` must not swap (JAX returned the keys sorted: mul, div)
    x = jnp.array(3.0)
    r = withgradient(lambda x, y: {"div": x / y, "mul": x * y}, x, jnp.array(4.0), jit=jit)
    assert list(r.val) == ["div", "mul"] and type(r.val) is dict
    div, mul = r.val.values()
    np.testing.assert_allclose([div, mul], [0.75, 12.0])
    np.testing.assert_allclose(r.grad, [0.25, -0.1875])
    r = withgradient(lambda x: (jnp.sum(x**2), {"z": x, "a": [1.0, {"y": 2.0, "b": 3.0}]}), jnp.ones(2), jit=jit)
    assert list(r.val[1]) == ["z", "a"] and list(r.val[1]["a"][1]) == ["y", "b"]
    np.testing.assert_allclose(r.grad[0], [2.0, 2.0])


def test_withgradient_dict_order_implicit_and_fused_step():
    m = Flux.Dense(np.ones((1, 2), np.float32))
    x = jnp.ones((2, 3))
    st = Flux.setup(Flux.Descent(0.1), m)
    for _ in range(2):  # the second call runs fused with update_ (optimise/eagerstep.py)
        r = withgradient(lambda m: {"loss": jnp.sum(m(x)), "acc": jnp.float32(1)}, m)
        Flux.update_(st, m, r.grad[0])
        assert list(r.val) == ["loss", "acc"]
    r = withgradient(lambda: {"loss": jnp.sum(m(x)), "acc": 1.0}, Flux.params(m))
    assert list(r.val) == ["loss", "acc"]


def test_pullback_dict_output_keeps_its_order():
    y, back = pullback(lambda x: {"z": 2 * x, "a": x**2}, jnp.array(3.0))
    assert list(y) == ["z", "a"]
    np.testing.assert_allclose(back({"z": 1.0, "a": 1.0})[0], 8.0)


# ----------------------------------------------------------------------------------------------
# pullback's cotangent


def test_pullback_cotangent_of_the_wrong_shape_or_structure_raises_clearly():
    y, back = pullback(lambda x: 2 * x, jnp.ones(3))
    np.testing.assert_allclose(back(jnp.ones(3))[0], [2.0, 2.0, 2.0])  # twice: the same back
    np.testing.assert_allclose(back(jnp.arange(3.0))[0], [0.0, 2.0, 4.0])
    np.testing.assert_allclose(back([1.0, 2.0, 3.0])[0], [2.0, 4.0, 6.0])  # a Julia vector, as a list
    with pytest.raises(DimensionMismatch, match=r"dy has shape \(4,\), but f's output there has shape \(3,\)"):
        back(jnp.ones(4))
    with pytest.raises(DimensionMismatch, match=r"shape \(\)"):
        back(1.0)
    with pytest.raises(ValueError, match="must be an array or a number"):
        back("one")
    _, back2 = pullback(lambda x: (x, 2 * x), jnp.array(1.0))
    np.testing.assert_allclose(back2((1.0, None))[0], 1.0)  # Zygote: back((1.0, nothing))
    with pytest.raises(ValueError, match="tuple of 2 cotangents"):
        back2(1.0)
    with pytest.raises(ValueError, match="tuple of 2 cotangents"):
        back2((1.0,))
    _, back3 = pullback(lambda x: {"a": x, "b": 2 * x}, jnp.array(1.0))
    with pytest.raises(ValueError, match=r"keys \['a', 'b'\]"):
        back3({"b": 1.0})


# ----------------------------------------------------------------------------------------------
# forwarddiff: exact to every order in x


def test_forwarddiff_second_order():
    # Zygote.jl/src/lib/forward.jl: forwarddiff's pullback is J'dy with J from ForwardDiff, itself
    # differentiated ("Use this to allow second derivatives"); fluxjax held J constant: the hessian was 0
    f = lambda x: forwarddiff(lambda z: jnp.sum(z**3), x)  # noqa: E731
    x = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(hessian(f, x), np.diag([6.0, 12.0]), rtol=1e-6)
    np.testing.assert_allclose(hessian_reverse(f, x), np.diag([6.0, 12.0]), rtol=1e-6)
    np.testing.assert_allclose(diaghessian(f, x)[0], [6.0, 12.0], rtol=1e-6)
    g2 = gradient(lambda x: gradient(lambda y: forwarddiff(lambda z: z**3, y), x)[0], 2.0)
    np.testing.assert_allclose(g2[0], 12.0, rtol=1e-6)  # was (None,)
    g2j = Flux.jit(lambda x: gradient(lambda x: gradient(lambda y: forwarddiff(lambda z: z**3, y), x)[0], x))(jnp.array(2.0))
    np.testing.assert_allclose(g2j[0], 12.0, rtol=1e-6)


def test_forwarddiff_keeps_first_order_and_closure_rule():
    # Zygote.jl/test/features.jl:341-348, with ForwardDiff's chunk_threshold keyword
    x = jnp.arange(1.0, 6.0)
    np.testing.assert_allclose(gradient(lambda x: forwarddiff(lambda z: z @ z, x, chunk_threshold=2), x)[0], 2 * x)
    # Zygote.jl/src/lib/forward.jl:113-118  gradient(2, 3) do a, b; forwarddiff(a -> a*b, a) end == (3, nothing)
    g = gradient(lambda a, b: forwarddiff(lambda a: a * b, a), 2.0, 3.0)
    np.testing.assert_allclose(g[0], 3.0)
    assert g[1] is None

    def cube(z):  # forward mode goes through a while_loop, which reverse mode cannot
        return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * z), (0, 1.0))[1]

    np.testing.assert_allclose(gradient(lambda x: forwarddiff(cube, x), 2.0)[0], 12.0)


# ----------------------------------------------------------------------------------------------
# Buffer's element type


def test_buffer_refuses_an_inexact_write():
    # Julia: setindex! of 1.5 into a Buffer of Int is an InexactError; JAX truncated it to 1 (and, for a
    # traced value, dropped its gradient: gradient was (nothing,))
    b = Buffer(jnp.array([0, 0]))
    b[0] = 2.0  # exact: fine, as Julia's convert
    b[1] = 3
    np.testing.assert_array_equal(b.copy(), [2, 3])
    with pytest.raises(TypeError, match="InexactError"):
        Buffer(jnp.array([0, 0])).__setitem__(0, 1.5)

    def f(x):
        b = Buffer(jnp.array([0, 0]))
        b[0] = x
        return jnp.sum(b.copy())

    with pytest.raises(TypeError, match="InexactError"):
        gradient(f, 1.5, jit=False)
    with pytest.raises(TypeError, match="InexactError"):
        Buffer(jnp.zeros(2)).__setitem__(0, 1 + 2j)
    fb = Buffer(jnp.zeros(2))
    fb[0] = np.float64(0.25)  # another float kind is fine
    np.testing.assert_allclose(fb.copy(), [0.25, 0.0])


# ----------------------------------------------------------------------------------------------
# Grads


def test_grads_combine_by_parameter_and_index_after_update():
    W, b = jnp.array([1.0, 2.0]), jnp.array([3.0])
    g1 = gradient(lambda: jnp.sum(W**2) + jnp.sum(b), Params([W, b]))
    g2 = gradient(lambda: jnp.sum(W**2) + 5 * jnp.sum(b), Params([b, W]))
    # Zygote's gs1 .+ gs2 is map(+, gs1, gs2), by parameter (issetequal Params); it raised here
    s = g1 + g2
    np.testing.assert_allclose(s[W], [4.0, 8.0])
    np.testing.assert_allclose(s[b], [6.0])
    np.testing.assert_allclose((g2 - g1)[b], [4.0])
    # Zygote: gs[W] after update!(opt, ps, gs) reads W's gradient (W mutated in place); fluxjax rebinds
    m = Flux.Dense(np.ones((1, 2), np.float32))
    ps = Flux.params(m)
    gs = gradient(lambda: jnp.sum(m(jnp.array([1.0, 2.0]))), ps)
    Flux.update_(Flux.Descent(0.1), ps, gs)
    np.testing.assert_allclose(gs[m.weight], [[1.0, 2.0]])
    np.testing.assert_allclose(gs[m.bias], [1.0])
    np.testing.assert_allclose(m.weight, [[0.9, 0.8]], rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("form", ["implicit", "explicit"])
def test_state_rebound_inside_ignore_is_a_constant_to_the_gradient(jit, form):
    """The old DCGAN pattern: the discriminator is trained under `@nograd` inside the generator's
    gradient. Zygote does not differentiate that mutation: `d`'s new weight (2 - 0.1 * 3 = 1.7) is a
    constant, so the generator's gradient is 1.7 (through the updated `d`), not 1.7 + d(new)/d(fake)."""
    d = Flux.Dense(jnp.array([[2.0]]), False)
    g = Flux.Dense(jnp.array([[3.0]]), False)
    x = jnp.array([[1.0]])

    def train_d(fake):
        if form == "implicit":
            gs = Flux.gradient(lambda: jnp.sum(d(fake)), Flux.params(d))
            Flux.update_(Flux.Descent(0.1), Flux.params(d), gs)
        else:
            st = Flux.setup(Flux.Descent(0.1), d)
            Flux.update_(st, d, Flux.gradient(lambda m: jnp.sum(m(fake)), d)[0])

    def loss(g):
        fake = g(x)
        Flux.ignore(lambda: train_d(fake))
        return jnp.sum(d(fake))

    grad = Flux.gradient(loss, g, jit=jit)[0].weight
    np.testing.assert_allclose(grad, [[1.7]], rtol=1e-6)
    np.testing.assert_allclose(d.weight, [[1.7]], rtol=1e-6)
