"""Custom rules (`adjoint`) and `Buffer` (Zygote.jl sources cited per case)."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from structure import same

import fluxjax
from fluxjax import Buffer, gradient, pullback
from fluxjax.zygote import Tangent, adjoint


def test_adjoint_custom_rule():
    # Zygote.jl/test/features.jl:276-280  @adjoint (f::typeof(grad_closure))(x) = f(x), Δ -> (1, 2):
    # gradient((f, x) -> f(x), grad_closure, 5) == (1, 2): the rule's value comes out. Python functions
    # are not differentiable arguments, so the port keeps the x slot; the rule ignores Δ, so back(5.0)
    # shows that the rule, not the true derivative (10), is used.
    @adjoint
    def grad_closure(x):
        return 2 * x, lambda dy: (2.0,)

    same(gradient(grad_closure, 5.0), (2.0,))
    same(pullback(grad_closure, 5.0)[1](5.0), (2.0,))

    @adjoint
    def clipgrad(x):
        return x, lambda dy: (jnp.clip(dy, -1.0, 1.0),)

    same(gradient(lambda x: jnp.sum(5 * clipgrad(x)), jnp.array([1.0, 2.0])), (np.array([1.0, 1.0]),))


def test_adjoint_nothing_gradient():
    @adjoint
    def f(a, b):
        return a * b, lambda dy: (dy * b, None)

    y, back = pullback(f, 2.0, 3.0)
    same(y, 6.0)
    g = back(1.0)
    same(g[0], 3.0)
    same(g[1], 0.0)  # `nothing` from a rule is a zero cotangent inside jax.custom_vjp


def test_adjoint_hook_with_function_argument():
    # Zygote.jl/docs/src/adjoints.md  @adjoint hook(f, x) = x, x̄ -> (nothing, f(x̄));
    #   gradient((a, b) -> hook(-, a)*b, 2, 3) == (-3, 2)
    @adjoint
    def my_hook(f, x):
        return x, lambda xb: (None, f(xb))

    same(gradient(lambda a, b: my_hook(lambda d: -d, a) * b, 2, 3), (-3.0, 2.0))
    same(gradient(lambda a, b: my_hook(jnp.negative, a) * b, 2.0, 3.0), (-3.0, 2.0))
    # under jax transformations too
    same(jax.jit(jax.grad(lambda a: my_hook(lambda d: 2 * d, a) * 3.0))(1.0), 6.0)


def test_adjoint_static_arguments():
    # ints used as sizes, strings and None pass through unchanged; back's entries for them are ignored
    seen = []

    @adjoint
    def tile(x, n, mode, nothing):
        seen.append((type(n), mode, nothing))

        def back(dy):
            return dy.reshape(n, -1).sum(0), None, "ignored", None

        return jnp.tile(x, n), back

    g = gradient(lambda x: jnp.sum(tile(x, 3, "wrap", None) ** 2), jnp.array([1.0, 2.0]))
    same(g, (np.array([6.0, 12.0]),))
    assert all(t == (int, "wrap", None) for t in seen)
    g = jax.jit(jax.grad(lambda x: jnp.sum(tile(x, 2, "wrap", None))))(jnp.array([1.0, 2.0]))
    same(g, np.array([2.0, 2.0]))
    # arguments that are all static: the plain function
    @adjoint
    def const(n):
        return jnp.arange(n), lambda dy: (None,)

    same(const(3), np.array([0, 1, 2]))

    # PRNG keys, integer index arrays and string arrays: no gradient, whatever back gives for them
    @adjoint
    def noisy(x, key, idx, names):
        return x + jax.random.normal(key, (3,))[idx], lambda dy: (dy, jnp.ones(()), None, None)

    g = gradient(lambda x: jnp.sum(noisy(x, jax.random.key(0), jnp.array([0, 2]), np.array(["a"]))), jnp.ones(2))
    same(g, (np.ones(2),))


@fluxjax.layer
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def test_adjoint_layer_cotangent():
    # Zygote.jl/docs/src/adjoints.md  @adjoint width(p::Point) = p.x, x̄ -> (Point(x̄, 0),)
    #   @adjoint height(p::Point) = p.y, ȳ -> (Point(0, ȳ),)
    #   gradient(a -> height(a), Point(1, 2)) == (Point(0.0, 1.0),)
    #   gradient(a -> dist(a), Point(1, 2))[1] == Point(0.4472135954999579, 0.8944271909999159)
    @adjoint
    def width(p):
        return p.x, lambda xb: (Point(xb, 0),)

    @adjoint
    def height(p):
        return p.y, lambda yb: (Point(0, yb),)

    def dist(p):
        return jnp.sqrt(width(p) ** 2 + height(p) ** 2)

    p = Point(jnp.array(1.0), jnp.array(2.0))
    (g,) = gradient(height, p)
    assert isinstance(g, Tangent) and g.primal_type is Point
    same((g.x, g.y), (0.0, 1.0))
    (g,) = gradient(dist, p)
    same((g.x, g.y), (0.4472135954999579, 0.8944271909999159))
    # plain jax.grad: the cotangent has the primal's own type
    g = jax.grad(dist)(p)
    assert type(g) is Point
    same((g.x, g.y), (0.4472135954999579, 0.8944271909999159))
    same(jax.jit(jax.grad(dist))(p).y, 0.8944271909999159)


def test_adjoint_tangent_dict_namedtuple_cotangents():
    # Zygote's NamedTuple gradients: (x = x̄, y = nothing); a Tangent, a dict or a NamedTuple, fields left out
    # or None are zero
    PointNT = collections.namedtuple("PointNT", "x y")
    for make in (
        lambda xb: Tangent(Point, {"x": xb, "y": None}),
        lambda xb: {"x": xb},
        lambda xb: PointNT(xb, None),
    ):

        @adjoint
        def width(p, make=make):
            return 3 * p.x, lambda xb: (make(3 * xb),)

        (g,) = gradient(width, Point(jnp.array(1.0), jnp.array([2.0, 5.0])))
        same(g.x, 3.0)
        # Zygote gives y = nothing; through jax.custom_vjp a field without a gradient is a zero array (as a
        # rule's `nothing` for a whole argument, test_adjoint_nothing_gradient)
        same(g.y, np.zeros(2))
    # a namedtuple primal, given a dict
    @adjoint
    def first(t):
        return 2 * t.x, lambda d: ({"x": 2 * d},)

    (g,) = gradient(first, PointNT(jnp.array(1.0), jnp.array(3.0)))
    same(g.x, 2.0)


def test_adjoint_layer_cotangent_with_static_fields():
    # a layer with a function and an int field: the cotangent's static fields need not be given
    m = fluxjax.Dense(2, 3)

    @adjoint
    def apply(m, x):
        y, back = jax.vjp(lambda m, x: m(x), m, x)
        return y, back

    x = jnp.ones((2, 4))
    g1 = gradient(lambda m, x: jnp.sum(apply(m, x)), m, x)
    g2 = gradient(lambda m, x: jnp.sum(m(x)), m, x)
    same(g1[0].weight, g2[0].weight)
    same(g1[1], g2[1])

    @adjoint
    def apply2(m, x):
        y = m(x)
        return y, lambda dy: ({"weight": dy @ x.T}, None)

    (gm,) = gradient(lambda m: jnp.sum(apply2(m, x)), m)
    same(gm.weight, np.full((3, 2), 4.0))


def test_adjoint_mismatched_cotangent_names_the_argument():
    @adjoint
    def width(p):
        return p.x, lambda xb: ({"z": xb},)

    with pytest.raises(ValueError, match=r"adjoint width: the gradient of argument 1 \(Point\).*\['z'\]"):
        gradient(width, Point(jnp.array(1.0), jnp.array(2.0)))

    @adjoint
    def width2(p):
        return p.x, lambda xb: (xb,)

    with pytest.raises(ValueError, match=r"adjoint width2: .*gradient of argument 1 \(Point\)"):
        gradient(width2, Point(jnp.array(1.0), jnp.array(2.0)))

    @adjoint
    def dot(a, b):
        return jnp.sum(a * b), lambda d: (d * b, jnp.ones(3))

    with pytest.raises(ValueError, match=r"adjoint dot: .*shape \(3,\) for argument 2 \(float32\[2\]\)"):
        gradient(dot, jnp.ones(2), jnp.ones(2))

    @adjoint
    def wrong_count(a):
        return a, lambda d: (d, d)

    with pytest.raises(ValueError, match="back returned 2 gradients for 1 arguments"):
        gradient(wrong_count, 1.0)


def test_adjoint_error_in_back():
    # Zygote.jl/test/compiler.jl:20-35  @adjoint bad(x) = x, Δ -> error("bad"); y == 3; back(1) throws
    @adjoint
    def bad(x):
        def back(dy):
            raise RuntimeError("bad")

        return x, back

    y, back = pullback(lambda x: bad(x + 1), 2.0)
    same(y, 3.0)
    with pytest.raises(RuntimeError, match="bad"):
        back(1.0)


def test_buffer():
    # Zygote.jl/test/gradcheck_p3.jl:348-352  b = Buffer(x); b[:] = x; sum(copy(b)) -> ([1,1,1],)
    def f(x):
        b = Buffer(x)
        b[:] = x
        return jnp.sum(b.copy())

    same(gradient(f, jnp.array([1.0, 2.0, 3.0])), (np.ones(3),))

    # Zygote.jl/test/gradcheck_p3.jl:354-362  vstack: buf = Buffer(xs, length(xs), 5); buf[:, i] = xs -> [5,5,5]
    def vstack(xs):
        buf = Buffer(xs, 3, 5)
        for i in range(5):
            buf[:, i] = xs
        return buf.copy()

    same(gradient(lambda x: jnp.sum(vstack(x)), jnp.array([1.0, 2.0, 3.0])), (np.full(3, 5.0),))

    # Zygote.jl/test/gradcheck_p3.jl:364-371  after copy(buf), buf[1] = 1 throws; length 3; size (3,)
    buf = Buffer(jnp.array([1.0, 2.0, 3.0]))
    buf[0] = 1.0
    buf.copy()
    with pytest.raises(RuntimeError):
        buf[0] = 1.0
    assert len(buf) == 3
    assert buf.shape == (3,)

    # Zygote.jl/test/gradcheck_p3.jl:387-391  b .= 2 (constant contents) -> (nothing,)
    def g(xs):
        b = Buffer(xs)
        b[:] = 2.0
        return jnp.sum(b.copy())

    assert gradient(g, jnp.array([1.0, 2.0, 3.0])) == (None,)

    # Zygote.jl/test/gradcheck_p3.jl:393-397  b[i] = p*i; sum(copy(b) .* (2:4)) ≈ 1*2 + 2*3 + 3*4
    def h(p):
        b = Buffer(jnp.zeros(3))
        for i in range(3):
            b[i] = p * (i + 1)
        return jnp.sum(b.copy() * jnp.array([2.0, 3.0, 4.0]))

    same(gradient(h, 1.1), (20.0,), rtol=1e-5)


