"""Zygote's basics: gradient, withgradient, pullback, `nothing` for no gradient, auxiliary outputs.

Each ported case names its Julia source (FluxML/Zygote.jl, paths relative to the repository) and the
line of the assertion. Julia indices are 1-based, ours 0-based; `nothing` is `None`.
"""

import collections
import math

import jax.numpy as jnp
import numpy as np
import pytest
from structure import mul, same

import fluxjax
from fluxjax import gradient, pullback, withgradient

# ----------------------------------------------------------------------------------------------
# I1. Basics


def test_gradient_mul():
    # Zygote.jl/test/features.jl:114  @test gradient(mul, 2, 3) == (3, 2)
    same(gradient(mul, 2, 3), (3.0, 2.0))


def test_withgradient_mul():
    # Zygote.jl/test/features.jl:115  @test withgradient(mul, 2, 3) == (val = 6, grad = (3, 2))
    res = withgradient(mul, 2, 3)
    same(res.val, 6.0)
    same(res.grad, (3.0, 2.0))
    val, grad = res  # unpacks like Julia's NamedTuple
    same((val, grad), (6.0, (3.0, 2.0)))


def test_pullback_mul():
    # Zygote.jl/test/features.jl:109-112  y, back = pullback(mul, 2, 3); back(4) == (12, 8); y == 6
    y, back = pullback(mul, 2, 3)
    same(y, 6.0)
    same(back(4), (12.0, 8.0))


def test_pullback_identity():
    # Zygote.jl/test/features.jl:104-107  y, back = pullback(identity, 1); back(2) == (2,)
    y, back = pullback(lambda x: x, 1)
    same(y, 1.0)
    same(back(2), (2.0,))


def test_pullback_docstring_three_args():
    # Zygote.jl/src/compiler/interface.jl:72-81  pullback(*, 2.0, 3.0, 5.0): y == 30,
    # back(1.0) == (15.0, 10.0, 6.0), back(2.0) == (30.0, 20.0, 12.0)
    y, back = pullback(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)
    same(y, 30.0)
    same(back(1.0), (15.0, 10.0, 6.0))
    same(back(2.0), (30.0, 20.0, 12.0))


def test_pullback_vector_output_with_nothing_seed():
    # Zygote.jl/src/compiler/interface.jl:83-95  pullback(x -> [x, x], 1.0):
    # back([1.0, 1.0]) == (2.0,); back([2.0, nothing]) == (2.0,)
    y, back = pullback(lambda x: [x, x], 1.0)
    same(y, [1.0, 1.0])
    same(back([1.0, 1.0]), (2.0,))
    same(back([2.0, None]), (2.0,))


def test_gradient_polynomial():
    # Zygote.jl/docs/src/index.md:24  gradient(x -> 3x^2 + 2x + 1, 5) == (32.0,)
    same(gradient(lambda x: 3 * x**2 + 2 * x + 1, 5), (32.0,))
    # Zygote.jl/test/compiler.jl:49-52  y, back = pullback(f, 5); y == 86
    y, back = pullback(lambda x: 3 * x**2 + 2 * x + 1, 5)
    same(y, 86.0)
    same(back(1.0), (32.0,))


def test_gradient_docstring_examples():
    # Zygote.jl/src/compiler/interface.jl:142  gradient(*, 2.0, 3.0, 5.0) == (15.0, 10.0, 6.0)
    same(gradient(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0), (15.0, 10.0, 6.0))
    # Zygote.jl/src/compiler/interface.jl:145  gradient(x -> sum(abs2,x), [7.0, 11.0, 13.0]) == ([14,22,26],)
    g = gradient(lambda x: jnp.sum(x**2), jnp.array([7.0, 11.0, 13.0]))
    same(g, (np.array([14.0, 22.0, 26.0]),))


def test_myprod_loop():
    # Zygote.jl/test/features.jl:215-223  myprod(xs) = loop s *= x; gradient(myprod, [1,2,3])[1] == [6,3,2]
    def myprod(xs):
        s = 1
        for x in xs:
            s *= x
        return s

    same(gradient(myprod, [1, 2, 3]), ([6.0, 3.0, 2.0],))
    same(gradient(myprod, jnp.array([1.0, 2.0, 3.0])), (np.array([6.0, 3.0, 2.0]),))


def test_mul_through_containers_and_closures():
    # Zygote.jl/test/features.jl:181-186  mul_struct: c = Bar(a, b); c.a * c.b  -> (3, 2)
    Bar = collections.namedtuple("Bar", "a b")
    same(gradient(lambda a, b: (lambda c: c.a * c.b)(Bar(a, b)), 2, 3), (3.0, 2.0))
    # Zygote.jl/test/features.jl:188-193  mul_tuple: c = (a, b); c[1] * c[2]  -> (3, 2)
    same(gradient(lambda a, b: (lambda c: c[0] * c[1])((a, b)), 2, 3), (3.0, 2.0))

    # Zygote.jl/test/features.jl:195-200  mul_lambda: g = z -> x * z; g(y)  -> (3, 2)
    def mul_lambda(x, y):
        g = lambda z: x * z
        return g(y)

    same(gradient(mul_lambda, 2, 3), (3.0, 2.0))
    # Zygote.jl/test/features.jl:202  gradient((a, b...) -> *(a, b...), 2, 3) == (3, 2)
    same(gradient(lambda a, *b: a * math.prod(b), 2, 3), (3.0, 2.0))

    # Zygote.jl/test/features.jl:225-230  mul_vec: xs = [a, b]; xs[1] * xs[2]  -> (3, 2)
    def mul_vec(a, b):
        xs = [a, b]
        return xs[0] * xs[1]

    same(gradient(mul_vec, 2, 3), (3.0, 2.0))


def test_dict_inside_function():
    # Zygote.jl/test/features.jl:232-236  d = Dict(); d[:x] = x; x * d[:x]  -> (4,) at x = 2
    def f(x):
        d = {}
        d["x"] = x
        return x * d["x"]

    same(gradient(f, 2), (4.0,))


def test_matrix_literal_and_control_flow():
    # Zygote.jl/test/features.jl:252-255  H = [1 x; 3 4]; sum(H)  -> 1
    same(gradient(lambda x: jnp.sum(jnp.array([[1.0, x], [3.0, 4.0]])), 2), (1.0,))

    # Zygote.jl/test/features.jl:256-261  if x < 0 throw("foo") end; x*5  -> 5
    def g(x):
        if x < 0:
            raise ValueError("foo")
        return x * 5

    same(gradient(g, 2), (5.0,))

    # Zygote.jl/test/features.jl:266-273  three-way control flow merge -> 2
    def h(x):
        if x > 0:
            x *= 2
        elif x < 0:
            x *= 3
        return x

    same(gradient(h, 1), (2.0,))


def test_exception_propagates():
    # Zygote.jl/test/features.jl:246-248  f(x) = throw(DimensionMismatch("fubar")); @test_throws
    def f(x):
        raise fluxjax.DimensionMismatch("fubar")

    with pytest.raises(fluxjax.DimensionMismatch, match="fubar"):
        gradient(f, 1)


def test_pow_rec():
    # Zygote.jl/test/features.jl:242-244  pow_rec(x, n) = n == 0 ? 1 : x*pow_rec(x, n-1); (12, nothing)
    def pow_rec(x, n):
        return 1 if n == 0 else x * pow_rec(x, n - 1)

    same(gradient(pow_rec, 2, 3), (12.0, None))


def test_f760_dict_loop():
    # Zygote.jl/test/features.jl:878-886  push!(d, i=>i^x) for i in 1:4; sum(values(d)); ≈ 123.93054835019153
    def f760(x):
        d = {}
        for i in range(1, 5):
            d[i] = i**x
        return sum(d.values())

    same(gradient(f760, 3), (123.93054835019153,), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# I2. `nothing` semantics


def test_constant_output_is_nothing():
    # Zygote.jl/test/features.jl:164  gradient(x -> 1, 2) == (nothing,)
    assert gradient(lambda x: 1, 2) == (None,)
    # Zygote.jl/test/features.jl:264  gradient(x -> one(eltype(x)), rand(10))[1] === nothing
    assert gradient(lambda x: jnp.ones((), x.dtype), jnp.ones(10))[0] is None


def test_integer_loop_count_is_nothing():
    # Zygote.jl/test/features.jl:140-151  pow(x, n) with a while loop over n; (12, nothing)
    def pow_(x, n):
        r = 1
        while n > 0:
            n -= 1
            r *= x
        return r

    same(gradient(pow_, 2, 3), (12.0, None))


def test_varargs_nothing():
    # Zygote.jl/test/features.jl:204  gradient((x, a...) -> x, 1) == (1,)
    same(gradient(lambda x, *a: x, 1), (1.0,))
    # Zygote.jl/test/features.jl:205  gradient((x, a...) -> x, 1, 1) == (1, nothing)
    same(gradient(lambda x, *a: x, 1, 1), (1.0, None))


def test_tuple_getindex():
    # Zygote.jl/test/features.jl:166  gradient(t -> t[1]*t[2], (2, 3)) == ((3, 2),)
    same(gradient(lambda t: t[0] * t[1], (2, 3)), ((3.0, 2.0),))
    # Zygote.jl/test/features.jl:413  gradient((x,y,z) -> sum((x,y,z)[1:2]), 7, 8.8, 9.9) == (1.0, 1.0, nothing)
    same(gradient(lambda x, y, z: sum((x, y, z)[0:2]), 7, 8.8, 9.9), (1.0, 1.0, None))
    # Zygote.jl/test/features.jl:414  gradient((x,y,z) -> sum((x,y,z)[[1,2,1]]), 1,2,3) == (2, 1, nothing)
    same(gradient(lambda x, y, z: sum((x, y, z)[i] for i in (0, 1, 0)), 1, 2, 3), (2.0, 1.0, None))


def test_size_is_nothing():
    # Zygote.jl/test/features.jl:408  gradient(x -> size(x)[2], ones(2,2,2)) == (nothing,)
    assert gradient(lambda x: x.shape[1], jnp.ones((2, 2, 2))) == (None,)
    # Zygote.jl/test/features.jl:411  gradient(x -> sum(size(x)[[1,2,1]]), ones(2,2,2)) == (nothing,)
    assert gradient(lambda x: float(sum(x.shape[i] for i in (0, 1, 0))), jnp.ones((2, 2, 2))) == (None,)


def test_vector_of_tuples():
    # Zygote.jl/test/features.jl:416  gradient(xs -> sum(x -> x[2], xs), [(1,2,3), (4,5,6)])
    #   == ([(nothing, 1.0, nothing), (nothing, 1.0, nothing)],)
    g = gradient(lambda xs: sum(x[1] for x in xs), [(1, 2, 3), (4, 5, 6)])
    same(g, ([(None, 1.0, None), (None, 1.0, None)],))
    # Zygote.jl/test/features.jl:417  sum(x -> prod(x[2:3]), xs) == ([(nothing, 3.0, 2.0), (nothing, 6.0, 5.0)],)
    g = gradient(lambda xs: sum(x[1] * x[2] for x in xs), [(1, 2, 3), (4, 5, 6)])
    same(g, ([(None, 3.0, 2.0), (None, 6.0, 5.0)],))
    # Zygote.jl/test/features.jl:419  sum(x -> abs2(x[1]), fill((4,3),2)) == ([(8.0, nothing), (8.0, nothing)],)
    g = gradient(lambda xs: sum(x[0] ** 2 for x in xs), [(4, 3), (4, 3)])
    same(g, ([(8.0, None), (8.0, None)],))


def test_struct_field_nothing():
    # Zygote.jl/test/features.jl:323  gradient(x -> [x][1].a, Bar(1, 1)) == ((a=1, b=nothing),)
    Bar = collections.namedtuple("Bar", "a b")
    (g,) = gradient(lambda x: [x][0].a, Bar(1, 1))
    assert type(g) is Bar
    same(g.a, 1.0)
    assert g.b is None


def test_dict_arguments():
    # Zygote.jl/test/features.jl:871  gradient(x -> (() -> x[:y])(), Dict(:y => 0.4)) == (Dict(:y => 1.0),)
    same(gradient(lambda x: (lambda: x["y"])(), {"y": 0.4}), ({"y": 1.0},))
    # Zygote.jl/test/features.jl:873-875  ntd = (; data = Dict("x" => rand(2)));
    #   gradient(x -> sum(x.data["x"]), ntd)[1] == (; data = Dict("x" => ones(2)))
    NT = collections.namedtuple("NT", "data")
    (g,) = gradient(lambda x: jnp.sum(x.data["x"]), NT({"x": jnp.array([0.3, 0.7])}))
    assert type(g) is NT
    same(g.data, {"x": np.ones(2)})


def test_zero_bias_false_is_nothing():
    # Flux.jl/test/utils.jl:365-370  gradient((x, y) -> sum(op.(x, y)), ones(2,3), false) == (g, nothing)
    for op in (jnp.add, jnp.subtract, jnp.multiply):
        g = gradient(lambda x, y, op=op: jnp.sum(op(x, y)), jnp.ones((2, 3)), False)
        assert g[1] is None
        want = gradient(lambda x, y, op=op: jnp.sum(op(x, y)), jnp.ones((2, 3)), jnp.zeros((2, 3)))[0]
        same(g[0], want)


def test_integer_index_argument_is_nothing():
    # Zygote gives `nothing` for an Int index argument: gradient((x, i) -> x[i], [1.,2,3], 2) == ([0,1,0], nothing)
    # (ChainRules' getindex rule marks indices NoTangent). An integer index *array* works here:
    g = gradient(lambda x, i: jnp.sum(x[i]), jnp.array([1.0, 2.0, 3.0]), jnp.array([0, 2]))
    same(g, (np.array([1.0, 0.0, 1.0]), None))


def test_integer_scalar_index_argument():
    # Zygote semantics (features.jl "nothing" cases): an index argument gets `nothing`
    g = gradient(lambda x, i: x[i], jnp.array([1.0, 2.0, 3.0]), 1)
    same(g, (np.array([0.0, 1.0, 0.0]), None))
    y, back = pullback(lambda x, n: x[:n], jnp.array([1.0, 2.0]), 1)
    same(y, np.array([1.0]))
    same(back(jnp.array([3.0])), (np.array([3.0, 0.0]), None))
    res = withgradient(lambda x, n: jnp.sum(jnp.tile(x, n)), jnp.array([1.0, 2.0]), 3)
    same(res.val, 9.0)
    same(res.grad, (np.array([3.0, 3.0]), None))


def test_integer_size_argument_with_differentiated_int():
    # Flux.jl src/gradient.jl (gradient docstring, Flux 0.16):
    #   Flux.gradient([7, 11], 0, 1) do x, y, d; p = size(x, d); sum(x.^p .+ y) end == ([14.0, 22.0], 2.0, nothing)
    # (Julia's dim 1 is axis 0). The int array `x` and the int `y` are differentiated as numbers, the
    # int `d` used as a dimension gets `nothing`; tests/zygote/test_int_arrays.py has more.
    g = gradient(lambda x, y, d: jnp.sum(x ** x.shape[d] + y), jnp.array([7, 11]), 0, 0)
    same(g, (np.array([14.0, 22.0]), 2.0, None))
    g = gradient(lambda x, y, d: jnp.sum(x ** x.shape[d] + y), jnp.array([7.0, 11.0]), 0, 0)
    same(g, (np.array([14.0, 22.0]), 2.0, None))
    # Zygote.jl docs/src/index.md  gradient(x -> 3x^2 + 2x + 1, 5) == (32,): an int is a number
    same(gradient(lambda x: 3 * x**2 + 2 * x + 1, 5), (32.0,))
    same(gradient(mul, 2, 3), (3.0, 2.0))


def test_integer_argument_fallback_keeps_other_errors():
    # a TypeError that is not the ints' fault still surfaces
    with pytest.raises(TypeError, match="unsupported operand"):
        gradient(lambda x, n: jnp.sum(x[:n]) + "a", jnp.array([1.0, 2.0]), 1)


# ----------------------------------------------------------------------------------------------
# I3. withgradient with auxiliary outputs


def test_withgradient_tuple_aux():
    # Zygote.jl/test/features.jl:888-892  withgradient([1,2,4]) do x; z = 1 ./ x; sum(z), z end
    #   == (val = (1.75, [1.0, 0.5, 0.25]), grad = ([-1.0, -0.25, -0.0625],))
    def f(x):
        z = 1 / x
        return jnp.sum(z), z

    val, grad = withgradient(f, jnp.array([1.0, 2.0, 4.0]))
    same(val, (1.75, np.array([1.0, 0.5, 0.25])))
    same(grad, (np.array([-1.0, -0.25, -0.0625]),))


def test_withgradient_dict_aux():
    # Zygote.jl/test/features.jl:894-896  withgradient(3.0, 4.0) do x, y; (div = x/y, mul = x*y) end
    #   == (val = (div = 0.75, mul = 12.0), grad = (0.25, -0.1875))
    val, grad = withgradient(lambda x, y: {"div": x / y, "mul": x * y}, 3.0, 4.0)
    assert list(val) == ["div", "mul"]
    same(val, {"div": 0.75, "mul": 12.0})
    same(grad, (0.25, -0.1875))


def test_withgradient_first_of_three():
    # Zygote.jl/test/features.jl:898-902  f3(x) = sum(sin, x), sum(cos, x), sum(tan, x);
    #   g1 = gradient(first∘f3, x); g2 = withgradient(first∘f3, x); g3 = withgradient(f3, x): g1 ≈ g2 ≈ g3
    x = jnp.array([1.0, 2.0, 3.0])

    def f3(x):
        return jnp.sum(jnp.sin(x)), jnp.sum(jnp.cos(x)), jnp.sum(jnp.tan(x))

    g1 = gradient(lambda x: f3(x)[0], x)
    y2, g2 = withgradient(lambda x: f3(x)[0], x)
    y3, g3 = withgradient(f3, x)
    same(g1, (np.cos([1.0, 2.0, 3.0]),), rtol=1e-5)
    same(g2, g1)
    same(g3, g1)
    assert len(y3) == 3
    same(y3[1], np.sum(np.cos([1.0, 2.0, 3.0])), rtol=1e-5)


def test_withgradient_division_docstring():
    # Zygote.jl/src/compiler/interface.jl:175  withgradient(/, 1, 2) == (val = 0.5, grad = (0.5, -0.25))
    val, grad = withgradient(lambda a, b: a / b, 1, 2)
    same(val, 0.5)
    same(grad, (0.5, -0.25))
    same(grad, gradient(lambda a, b: a / b, 1, 2))


